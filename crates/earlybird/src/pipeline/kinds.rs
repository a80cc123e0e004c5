//! The record kinds a run writes, and their reference.
//!
//! Contract: [`OTHER_KINDS`] lists every record kind besides flows that an
//! output can take ([`crate::export::Exporter::kind`]), with the option
//! that asks for it and what it is; `docs/RECORD_FIELDS.md` is generated
//! from the flow fields and this list ([`reference`]) and a test keeps the
//! file equal to it (`EARLYBIRD_BLESS=1` rewrites it).

use crate::schema::Kind;

/// The record kinds besides flows: the kind, the option that asks for
/// it, what it is.
pub const OTHER_KINDS: [(&Kind, &str, &str); 4] = [
    (
        &crate::flow::events::VERDICTS,
        "`--events OUT`",
        "Early-verdict events: one record the moment a flow is classified, \
         besides its final record (which carries the same verdict). \
         `decided_ts` is the packet time at which the verdict was known: the \
         flow's packet that completed its early packets, or, for a model run \
         on the classifier pool, the flow's latest packet when the verdict \
         came back; a flow that ends with fewer early packets than the model \
         needs is decided at its end. Needs a model. Also to an IPFIX \
         collector or file (`--events ipfix+udp://HOST:PORT`; docs/IPFIX.md).",
    ),
    (
        &crate::telemetry::series::STATS,
        "`--stats-out OUT`",
        "Per-second statistics: one record per second of packet time, from \
         the first second with a packet to the last, the figures of every \
         shard added up (runs of more than an hour without a packet are \
         left out). Each packet counts in the second of its timestamp. \
         Several inputs of separate time domains (an input that begins \
         before the latest packet read) are series of their own, one after \
         the other: the times go back where one begins. A \
         flow counts as ended in the second its end was found: a FIN or RST \
         at that packet, an idle or active timeout when the table's \
         incremental expiry reaches it (up to a second or so after the \
         timeout, depending on the shard), the end of input at the last \
         second. `flows_active` is every flow started and not ended by the \
         end of the second.",
    ),
    (
        &crate::telemetry::series::APP_STATS,
        "`--app-stats-out OUT`",
        "Per-second statistics per application (the model's verdict, or \
         `unknown`), per transport (tcp, udp, icmp, other) and per port class \
         of TCP and UDP flows (`tcp/443`, `udp/53`, … for a short list of \
         services, else `tcp/system`, `tcp/registered`, `tcp/ephemeral` by \
         the server port's range; `docs/OPERATIONS.md` lists them and says \
         how the server port is chosen): one record per \
         second and name with anything counted. `flows_classified` counts \
         the verdicts given in the second; the other figures count the flows \
         that ended in the second, with all their packets and bytes (a \
         flow's traffic is reported when it ends, not spread over its \
         lifetime).",
    ),
    (
        &crate::telemetry::alarms::ALARMS,
        "`--alarms-out OUT`",
        "Alarms on the per-second statistics (`--alarm`, `--alarms`): one \
         record when an alarm is raised and one when it clears, in the \
         second that decided it. The detectors (ewma, cusum, seasonal) are \
         described in `docs/OPERATIONS.md`.",
    ),
];

/// The field reference, `docs/RECORD_FIELDS.md`.
pub fn reference() -> String {
    crate::export::fields::markdown(&OTHER_KINDS)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    /// `docs/RECORD_FIELDS.md` equals the generated reference;
    /// `EARLYBIRD_BLESS=1` rewrites it.
    #[test]
    fn record_fields_doc_is_current() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/RECORD_FIELDS.md");
        let want = super::reference();
        if std::env::var_os("EARLYBIRD_BLESS").is_some_and(|v| v == "1") {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &want).unwrap();
            return;
        }
        let have = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run with EARLYBIRD_BLESS=1)", path.display()));
        assert!(
            have == want,
            "{} is out of date; regenerate with EARLYBIRD_BLESS=1 cargo test -p earlybird kinds",
            path.display()
        );
    }
}
