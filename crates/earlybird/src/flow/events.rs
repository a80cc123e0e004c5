//! Early-verdict events: one record the moment a flow is classified,
//! beside the flow's final record.
//!
//! Contract: a flow consumer ([`Events`], `flow/consumer.rs`), on when a
//! run asks for the events ([`crate::FlowConfig::verdict_events`] and a
//! model): it appends one row of [`VERDICTS`] to [`Events::rows`] each
//! time a flow gets its verdict: decided inline
//! at its N-th early packet, decided from fewer packets when it ends
//! shorter, or applied when the classifier pool returns it. The row names
//! the flow as its record will (client first, same key fields), the
//! verdict ("unknown" below the model's threshold), its confidence, the
//! early packet it was taken at, the number of the model that took it
//! (`model_id`), and two packet times: the flow's first
//! packet and the packet at which the verdict was known to the table (the
//! latest packet of the flow then; for a pooled verdict, the latest packet
//! when the verdict came back), so `time_to_decision_ns` is the delay
//! the flow's own packets measure, never the wall clock. The shard hands
//! the rows to the outputs of this kind (`--events`); nothing is built
//! when none is asked for.

use super::consumer::{Consumer, FlowRef};
use super::snapshot::{build, RawFlow};
use crate::classify::inline::Inline;
use crate::classify::Verdict;
use crate::schema::{Field, FieldType, Kind, RowBatch};

use FieldType::{Str, F64, U64};

/// The record kind of early-verdict events (`--events`).
pub const VERDICTS: Kind = Kind::new(
    "verdicts",
    &[
        Field::new("src", Str, "", "Client address (as in the flow record)"),
        Field::new("dst", Str, "", "Server address"),
        Field::new("sport", U64, "", "Client port"),
        Field::new("dport", U64, "", "Server port"),
        Field::new("proto", U64, "", "IP protocol number"),
        Field::new("vlan", U64, "", "802.1Q VLAN id, 0 when untagged"),
        Field::new("tunnel", Str, "", "Tunnel that carried the flow"),
        Field::new("tunnel_id", U64, "", "GRE key, VXLAN or Geneve VNI, CAPWAP radio id; 0 for GTP-U and PPTP"),
        Field::new(
            "first_ts",
            U64,
            "ns",
            "Packet time of the flow's first packet",
        ),
        Field::new(
            "decided_ts",
            U64,
            "ns",
            "Packet time at which the verdict was known (the flow's latest packet then)",
        ),
        Field::new(
            "time_to_decision_ns",
            U64,
            "ns",
            "decided_ts - first_ts: how long the flow ran before its verdict",
        ),
        Field::new(
            "app",
            Str,
            "",
            "The verdict: a class of the model, or \"unknown\" below its threshold",
        ),
        Field::new("app_confidence", F64, "", "Confidence of the verdict, 0..1"),
        Field::new(
            "decided_at_packet",
            U64,
            "",
            "The early packet (1-based) the verdict was taken at",
        ),
        Field::new(
            "model_id",
            U64,
            "",
            "Number of the model that took the verdict: 0 the run's own, then the models a --learn run swapped in (DIR/models.jsonl)",
        ),
    ],
);

/// The early-verdict events of one table (see the module docs).
pub struct Events {
    /// Rows not yet handed to the outputs.
    pub rows: RowBatch,
}

impl Default for Events {
    fn default() -> Events {
        Events {
            rows: RowBatch::new(&VERDICTS),
        }
    }
}

impl Consumer for Events {
    #[inline]
    fn verdict(&mut self, flow: FlowRef<'_>, model: &Inline) {
        self.note(flow, model);
    }
}

impl Events {
    /// Adds the event of `flow`, whose verdict was just stored.
    #[cold]
    #[inline(never)]
    fn note(&mut self, flow: FlowRef<'_>, model: &Inline) {
        let raw = RawFlow {
            entry: *flow.entry,
            tail: *flow.tail,
            end: Default::default(),
            model: 0,
        };
        // Only the key is read: no statistics, no ICMP head.
        let r = build(&raw, None, flow.wide, None, None);
        let v = r.verdict;
        let app = match v.class {
            Verdict::UNKNOWN => "unknown",
            c => model.class_name(c).unwrap_or("unknown"),
        };
        let k = r.key;
        self.rows.push(|c| {
            c.text(&crate::decode::fmt_addr(&k.src));
            c.text(&crate::decode::fmt_addr(&k.dst));
            c.u64(u64::from(k.sport));
            c.u64(u64::from(k.dport));
            c.u64(u64::from(k.proto));
            c.u64(u64::from(k.vlan));
            c.text(k.tunnel.name());
            c.u64(u64::from(k.tunnel_id));
            c.u64(r.first_ts);
            c.u64(r.last_ts);
            c.u64(r.last_ts.saturating_sub(r.first_ts));
            c.text(app);
            c.f64(f64::from(v.confidence));
            c.u64(u64::from(v.at_packet));
            c.u64(u64::from(model.model_id()));
        });
    }
}
