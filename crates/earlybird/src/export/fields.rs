//! The flow-record field list: the one place where every exported column is
//! named, typed and described.
//!
//! Contract: [`FIELDS`] lists the scalar fields of a record in output order
//! (CSV columns and JSON keys alike); [`EARLY_FIELDS`] lists the per-packet
//! early features, which CSV spreads over `N` numbered column groups
//! (`pkt1_size, pkt1_dir, pkt1_iat_us, pkt2_size, …`) after the scalar fields
//! and JSON lines writes as arrays. [`FLOWS`] is the flow record kind
//! ([`crate::schema::Kind`]) built on [`FIELDS`]. The CSV header ([`csv_columns`]) and
//! `docs/RECORD_FIELDS.md` ([`markdown`], with the other record kinds a run
//! writes: `pipeline/kinds.rs`, whose test keeps the document equal to the
//! generated text) are both generated from these tables. Nothing here can fail; building the
//! header or the document allocates (once per output, never per record).

use std::fmt::Write as _;

use crate::schema::{Field, FieldType, Kind};

/// Number of decimals floats are rounded to (trailing zeros dropped).
pub const FLOAT_DECIMALS: usize = 3;

/// One early feature: a value per early packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EarlyField {
    /// CSV column suffix: packet `i` (1-based) is in column `pkt{i}_{suffix}`.
    pub suffix: &'static str,
    /// JSON key of the array holding the value for each early packet.
    pub json: &'static str,
    /// Value type.
    pub ty: FieldType,
    /// Unit, empty when the value has none.
    pub unit: &'static str,
    /// What the value means.
    pub desc: &'static str,
}

const fn f(name: &'static str, ty: FieldType, unit: &'static str, desc: &'static str) -> Field {
    Field::new(name, ty, unit, desc)
}

use FieldType::*;

/// The scalar fields of a record, in output order.
pub const FIELDS: &[Field] = &[
    f(
        "src",
        Str,
        "",
        "Client address (sender of the flow's first packet), IPv4 dotted or IPv6 RFC 5952 text",
    ),
    f("dst", Str, "", "Server address"),
    f(
        "sport",
        U16,
        "",
        "Client port (0 for ICMP, ICMPv6 and protocols without ports)",
    ),
    f("dport", U16, "", "Server port (0 for ICMP)"),
    f(
        "proto",
        U8,
        "",
        "IP protocol number of the innermost IP header (6 TCP, 17 UDP, 1 ICMP, …)",
    ),
    f(
        "icmp_type",
        U8,
        "",
        "ICMP or ICMPv6 type of the flow's first packet (ICMP flows are keyed on the host pair, so later packets may have other types); empty for other protocols or when that packet was too short to carry it",
    ),
    f(
        "icmp_code",
        U8,
        "",
        "ICMP or ICMPv6 code of the flow's first packet; empty when icmp_type is",
    ),
    f("ip_version", U8, "", "4 or 6"),
    f("vlan", U16, "", "Outermost 802.1Q VLAN id, 0 when untagged"),
    f(
        "tunnel",
        Str,
        "",
        "Innermost tunnel that carried the flow: gre, vxlan, ipip, gtp, geneve, teredo, capwap, or empty when none",
    ),
    f(
        "tunnel_id",
        U32,
        "",
        "GRE key, VXLAN or Geneve VNI, CAPWAP radio id; 0 when none, for ipip and teredo, and for GTP-U and PPTP (their TEID / call id differs by direction, so it is left out of the flow key and both directions are one flow)",
    ),
    f(
        "src_mac",
        Str,
        "",
        "Source MAC of the first packet (aa:bb:cc:dd:ee:ff), zeros when no Ethernet header",
    ),
    f("dst_mac", Str, "", "Destination MAC of the first packet"),
    f(
        "community_id",
        Str,
        "",
        "Community ID v1 of the flow's 5-tuple (1: and base64 of a SHA-1; the same value Zeek, Suricata and Arkime compute, seed --community-id-seed); ICMP and ICMPv6 flows hash their first packet's type and code; empty for an ICMP flow whose first packet was too short to carry them, and in every record of a run with --no-community-id",
    ),
    f(
        "first_ts",
        U64,
        "ns",
        "Timestamp of the first packet, nanoseconds since the Unix epoch",
    ),
    f(
        "last_ts",
        U64,
        "ns",
        "Timestamp of the last packet, nanoseconds since the Unix epoch",
    ),
    f("duration_ns", U64, "ns", "last_ts - first_ts"),
    f("fwd_packets", U64, "packets", "Packets client → server"),
    f("bwd_packets", U64, "packets", "Packets server → client"),
    f(
        "fwd_bytes",
        U64,
        "bytes",
        "Bytes client → server (sum of IP lengths)",
    ),
    f(
        "bwd_bytes",
        U64,
        "bytes",
        "Bytes server → client (sum of IP lengths)",
    ),
    f(
        "fwd_size_min",
        U16,
        "bytes",
        "Smallest IP length client → server; empty when not measured (no packet, or --stats basic)",
    ),
    f(
        "fwd_size_max",
        U16,
        "bytes",
        "Largest IP length client → server; empty when not measured",
    ),
    f(
        "fwd_size_mean",
        F64,
        "bytes",
        "Mean IP length client → server; empty when not measured",
    ),
    f(
        "fwd_size_std",
        F64,
        "bytes",
        "Population standard deviation of IP length client → server; empty when not measured",
    ),
    f(
        "bwd_size_min",
        U16,
        "bytes",
        "Smallest IP length server → client; empty when not measured (no packet, or --stats basic)",
    ),
    f(
        "bwd_size_max",
        U16,
        "bytes",
        "Largest IP length server → client; empty when not measured",
    ),
    f(
        "bwd_size_mean",
        F64,
        "bytes",
        "Mean IP length server → client; empty when not measured",
    ),
    f(
        "bwd_size_std",
        F64,
        "bytes",
        "Population standard deviation of IP length server → client; empty when not measured",
    ),
    f(
        "fwd_iat_min",
        U64,
        "ns",
        "Smallest gap between consecutive client → server packets, exact (gaps of 2^48 ns, 3.26 days, or more are written as 281474976710655); empty when not measured (fewer than 2 packets, or --stats basic)",
    ),
    f(
        "fwd_iat_max",
        U64,
        "ns",
        "Largest gap between consecutive client → server packets, exact (same bound); empty when not measured",
    ),
    f(
        "fwd_iat_mean",
        F64,
        "ns",
        "Mean gap between consecutive client → server packets (f64: (last - first) / (packets - 1) in this direction); empty when not measured",
    ),
    f(
        "fwd_iat_std",
        F64,
        "ns",
        "Population standard deviation of the client → server gaps (f64, from a sum of squares in f64); empty when not measured",
    ),
    f(
        "bwd_iat_min",
        U64,
        "ns",
        "Smallest gap between consecutive server → client packets, exact (gaps of 2^48 ns, 3.26 days, or more are written as 281474976710655); empty when not measured (fewer than 2 packets, or --stats basic)",
    ),
    f(
        "bwd_iat_max",
        U64,
        "ns",
        "Largest gap between consecutive server → client packets, exact (same bound); empty when not measured",
    ),
    f(
        "bwd_iat_mean",
        F64,
        "ns",
        "Mean gap between consecutive server → client packets (f64: (last - first) / (packets - 1) in this direction); empty when not measured",
    ),
    f(
        "bwd_iat_std",
        F64,
        "ns",
        "Population standard deviation of the server → client gaps (f64, from a sum of squares in f64); empty when not measured",
    ),
    f(
        "fwd_fin",
        U32,
        "packets",
        "Client → server packets with TCP FIN set (0 for other protocols); empty with --stats basic",
    ),
    f(
        "fwd_syn",
        U32,
        "packets",
        "Client → server packets with TCP SYN set (0 for other protocols); empty with --stats basic",
    ),
    f(
        "fwd_rst",
        U32,
        "packets",
        "Client → server packets with TCP RST set (0 for other protocols); empty with --stats basic",
    ),
    f(
        "fwd_psh",
        U32,
        "packets",
        "Client → server packets with TCP PSH set (0 for other protocols); empty with --stats basic",
    ),
    f(
        "fwd_ack",
        U32,
        "packets",
        "Client → server packets with TCP ACK set (0 for other protocols); empty with --stats basic",
    ),
    f(
        "fwd_urg",
        U32,
        "packets",
        "Client → server packets with TCP URG set (0 for other protocols); empty with --stats basic",
    ),
    f(
        "fwd_ece",
        U32,
        "packets",
        "Client → server packets with TCP ECE set (0 for other protocols); empty with --stats basic",
    ),
    f(
        "fwd_cwr",
        U32,
        "packets",
        "Client → server packets with TCP CWR set (0 for other protocols); empty with --stats basic",
    ),
    f(
        "bwd_fin",
        U32,
        "packets",
        "Server → client packets with TCP FIN set (0 for other protocols); empty with --stats basic",
    ),
    f(
        "bwd_syn",
        U32,
        "packets",
        "Server → client packets with TCP SYN set (0 for other protocols); empty with --stats basic",
    ),
    f(
        "bwd_rst",
        U32,
        "packets",
        "Server → client packets with TCP RST set (0 for other protocols); empty with --stats basic",
    ),
    f(
        "bwd_psh",
        U32,
        "packets",
        "Server → client packets with TCP PSH set (0 for other protocols); empty with --stats basic",
    ),
    f(
        "bwd_ack",
        U32,
        "packets",
        "Server → client packets with TCP ACK set (0 for other protocols); empty with --stats basic",
    ),
    f(
        "bwd_urg",
        U32,
        "packets",
        "Server → client packets with TCP URG set (0 for other protocols); empty with --stats basic",
    ),
    f(
        "bwd_ece",
        U32,
        "packets",
        "Server → client packets with TCP ECE set (0 for other protocols); empty with --stats basic",
    ),
    f(
        "bwd_cwr",
        U32,
        "packets",
        "Server → client packets with TCP CWR set (0 for other protocols); empty with --stats basic",
    ),
    f(
        "end_reason",
        Str,
        "",
        "Why the flow ended: idle, active, fin, rst, end_of_input, evicted",
    ),
    f(
        "app",
        Str,
        "",
        "The flow's application: the payload label where there is one, else the model's class name, unknown when neither (label_source says which)",
    ),
    f(
        "app_confidence",
        F64,
        "",
        "Confidence of the model's verdict in [0, 1] (stat_confidence)",
    ),
    f(
        "decided_at_packet",
        U8,
        "packets",
        "1-based packet index at which the verdict was taken, 0 = never",
    ),
    f(
        "early_len",
        U8,
        "packets",
        "Number of early packets exported for this flow (at most N)",
    ),
];

/// Position of the field named `name` in [`FIELDS`], for `const` items:
/// a name that is not there fails the build.
pub(crate) const fn index_of(name: &str) -> usize {
    let mut i = 0;
    while i < FIELDS.len() {
        if same(FIELDS[i].name.as_bytes(), name.as_bytes()) {
            return i;
        }
        i += 1;
    }
    panic!("no record field of that name")
}

const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The flow record kind: its scalar fields. Flow outputs add the early
/// columns ([`EARLY_FIELDS`], N per run) and the analyzers' fields after
/// them, and are written by their own exporters (`csv.rs`, `jsonl.rs`), not
/// the generic writer of the other kinds.
pub const FLOWS: Kind = Kind::new("flows", FIELDS);

/// The early features, one value per early packet.
pub const EARLY_FIELDS: [EarlyField; 3] = [
    EarlyField {
        suffix: "size",
        json: "early_size",
        ty: U16,
        unit: "bytes",
        desc: "IP length of early packet i (CSV: empty when the flow had fewer packets)",
    },
    EarlyField {
        suffix: "dir",
        json: "early_dir",
        ty: I8,
        unit: "",
        desc: "Direction of early packet i: 1 client → server, -1 server → client (CSV: empty when the flow had fewer packets)",
    },
    EarlyField {
        suffix: "iat_us",
        json: "early_iat_us",
        ty: U32,
        unit: "µs",
        desc: "Time since the flow's previous packet (either direction), truncated to whole µs; 0 for the first packet (by convention: it has no previous packet); saturates at 4294967295 (CSV: empty when the flow had fewer packets)",
    },
];

/// Number of CSV columns for `n` early packets.
pub fn column_count(n: usize) -> usize {
    FIELDS.len() + n * EARLY_FIELDS.len()
}

/// The CSV column names for `n` early packets, in output order.
pub fn csv_columns(n: usize) -> Vec<String> {
    let mut cols: Vec<String> = FIELDS.iter().map(|f| f.name.to_string()).collect();
    for i in 1..=n {
        for e in &EARLY_FIELDS {
            cols.push(format!("pkt{i}_{}", e.suffix));
        }
    }
    cols
}

/// The CSV header line for `n` early packets, with its trailing newline.
pub fn csv_header(n: usize) -> String {
    csv_header_with(n, &[])
}

/// The CSV header line for `n` early packets followed by the fields the
/// analyzers of the run add (`analyzed`), with its trailing newline.
pub fn csv_header_with(n: usize, analyzed: &[Field]) -> String {
    let mut cols = csv_columns(n);
    cols.extend(analyzed.iter().map(|f| f.name.to_string()));
    let mut s = cols.join(",");
    s.push('\n');
    s
}

/// A markdown table of `fields` (name, type, unit, description) appended
/// to `s`.
fn field_table(s: &mut String, fields: &[crate::schema::Field]) {
    s.push_str("| name | type | unit | description |\n");
    s.push_str("|------|------|------|-------------|\n");
    for f in fields {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} |",
            f.name,
            f.ty.name(),
            f.unit,
            f.desc.replace('|', "\\|")
        );
    }
}

/// The field reference (`docs/RECORD_FIELDS.md`), generated from the tables,
/// with the record kinds `other` (each: the kind, the option that asks for
/// it, what it is) after the flows'.
pub fn markdown(other: &[(&Kind, &str, &str)]) -> String {
    let mut s = String::new();
    s.push_str("# Flow record fields\n\n");
    s.push_str(
        "<!-- Generated from crates/earlybird/src/export/fields.rs; \
         regenerate with EARLYBIRD_BLESS=1 cargo test -p earlybird kinds -->\n\n",
    );
    s.push_str(
        "Every exporter writes the same fields in the same order. CSV writes one \
         header line and one line per flow; JSON lines writes one object per flow \
         with the same keys. Integers are written in full; floats are rounded to at \
         most ",
    );
    let _ = write!(s, "{FLOAT_DECIMALS}");
    s.push_str(
        " decimals with trailing zeros dropped (values of 2^53/1000 or more use \
         the shortest text that reads back exactly); a float that is not finite \
         is written as an empty CSV field or JSON `null`. Timestamps are integer \
         nanoseconds since the Unix epoch. \"Client\" is the sender of the flow's \
         first packet; fwd = client → server, bwd = server → client.\n\n",
    );
    s.push_str(
        "**Not measured is empty, never 0.** A value that was not measured is \
         an empty CSV field and JSON `null`: with `--stats basic` the size and \
         inter-arrival statistics and the TCP flag counts (they are not kept); \
         the size statistics of a direction without packets; the inter-arrival \
         statistics of a direction with fewer than two packets; the ICMP type \
         and code of a flow that is not ICMP or ICMPv6; the CSV early-packet \
         columns beyond the flow's packets. A TCP flag count of a flow of \
         another protocol is measured and 0.\n\n",
    );
    s.push_str(
        "**Time precision.** Timestamps, `duration_ns` and the inter-arrival \
         minima and maxima are exact integer nanoseconds (the extremes up to \
         2^48 − 1 ns, 3.26 days, a bound a gap within one flow reaches only \
         with an active timeout above it or timestamps that jump back that \
         far). Means and standard deviations are `f64` nanoseconds, rounded as \
         above. The early-packet gaps `pkt{i}_iat_us` are whole microseconds \
         (truncated).\n\n",
    );
    s.push_str("## Scalar fields\n\n");
    s.push_str("| # | name | type | unit | description |\n");
    s.push_str("|---|------|------|------|-------------|\n");
    for (i, f) in FIELDS.iter().enumerate() {
        let _ = writeln!(
            s,
            "| {} | `{}` | {} | {} | {} |",
            i + 1,
            f.name,
            f.ty.name(),
            f.unit,
            f.desc.replace('|', "\\|")
        );
    }
    s.push_str("\n## Early features\n\n");
    s.push_str(
        "N is the number of early packets per flow (`--early-packets`). CSV adds, \
         after the scalar fields, for i = 1..=N the columns `pkt{i}_size`, \
         `pkt{i}_dir`, `pkt{i}_iat_us` (so N × 3 columns; packets the flow did not \
         have are empty). JSON lines adds three arrays of length \
         `early_len`.\n\n",
    );
    s.push_str("| CSV column | JSON array | type | unit | description |\n");
    s.push_str("|------------|------------|------|------|-------------|\n");
    for e in &EARLY_FIELDS {
        let _ = writeln!(
            s,
            "| `pkt{{i}}_{}` | `{}` | {} | {} | {} |",
            e.suffix,
            e.json,
            e.ty.name(),
            e.unit,
            e.desc
        );
    }
    s.push_str("\n## Analyzer fields\n\n");
    s.push_str(
        "Each per-flow analyzer turned on with `--analyzer NAME` (the payload \
         labellers `http`, `ssh`, `dns` and `tls` unless `--no-labellers`) adds its fields \
         after the early columns (CSV) or the early arrays (JSON lines), in the \
         order of this list. A value an analyzer did not measure is empty in CSV \
         and `null` in JSON.\n",
    );
    // The unit tests' own analyzers (`test_*`) are not part of the product.
    // Analyzers behind a cargo feature are listed from `OPTIONAL`, so the
    // reference is the same whichever features the build has.
    let optional = |n: &str| crate::analyze::OPTIONAL.iter().any(|o| o.0 == n);
    let mut sections: Vec<(String, String, Vec<crate::schema::Field>)> = crate::analyze::AVAILABLE
        .iter()
        .filter(|(n, _)| !n.starts_with("test_") && !optional(n))
        .map(|(n, a)| {
            (
                n.to_string(),
                a.to_string(),
                crate::analyze::fields_of(&[n.to_string()]),
            )
        })
        .collect();
    sections.extend(crate::analyze::OPTIONAL.iter().map(|(n, feature, a, f)| {
        (
            n.to_string(),
            format!("{a} (built with the cargo feature `{feature}`)"),
            f.to_vec(),
        )
    }));
    for (name, about, fields) in &sections {
        let _ = write!(s, "\n### `--analyzer {name}`\n\n{about}.\n\n");
        field_table(&mut s, fields);
    }
    s.push_str(
        "\n## Sampling fields\n\n`flows --sample POLICY:N` (docs/SAMPLING.md) adds these \
         after the analyzers' fields; without it they are absent.\n\n",
    );
    field_table(&mut s, crate::sample::FIELDS);
    s.push_str(
        "\n## Label fields\n\nEvery record ends with its label (docs/SERVICES.md): \
         `app` above is the payload label where the flow has one (a TLS or QUIC \
         server name, an HTTP Host, an SSH banner, a DNS name: the service \
         map's application, else the protocol), the model's verdict where it \
         has none, `unknown` otherwise; `app_confidence` and \
         `decided_at_packet` stay the model's. These fields come after the \
         analyzers' and the sampling fields.\n\n",
    );
    field_table(&mut s, crate::classify::labeller::FIELDS);
    s.push_str("\n## Parquet columns\n\n");
    s.push_str(
        "`-o FILE.parquet` (cargo feature `parquet`, on in the CLI) writes the \
         CSV's columns, with the same names in the same order (`pkt{i}_size`, \
         `pkt{i}_dir`, `pkt{i}_iat_us` for i = 1..=N, then the analyzer \
         fields), one typed Parquet column each, zstd-compressed, in row \
         groups of 65,536 rows by default (`--parquet-row-group`). Every column is nullable: a value \
         is null exactly where the CSV field is empty because it was not \
         measured or is not finite (text the CSV writes empty, such as the \
         tunnel of a flow without one, is the empty string). Floats keep their \
         full `f64` value, not the CSV's three decimals. Each column's Arrow \
         field metadata holds its `unit` and `description`. The file is \
         readable once its footer is written: at the end of the run (also \
         after SIGINT/SIGTERM), or when it is rotated (SIGHUP after the file \
         was moved); a live run's once-a-second flush ends no row group.\n\n",
    );
    s.push_str("| type above | Parquet column: Arrow type (physical, logical) |\n");
    s.push_str("|------------|------------------------------------------------|\n");
    for t in crate::schema::FieldType::ALL {
        let _ = writeln!(s, "| {} | {} |", t.name(), t.parquet_name());
    }
    s.push_str("\n## Other record kinds\n\n");
    s.push_str(
        "Records of these kinds go to outputs of their own, in any record \
         format (the option says which file); each has one header line in CSV \
         and one object per record in JSON lines, with these fields in this \
         order.\n",
    );
    for (kind, option, about) in other {
        let _ = write!(s, "\n### `{}` ({option})\n\n{about}\n\n", kind.name);
        s.push_str("| # | name | type | unit | description |\n");
        s.push_str("|---|------|------|------|-------------|\n");
        for (i, f) in kind.fields.iter().enumerate() {
            let _ = writeln!(
                s,
                "| {} | `{}` | {} | {} | {} |",
                i + 1,
                f.name,
                f.ty.name(),
                f.unit,
                f.desc.replace('|', "\\|")
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique_and_plain() {
        let cols = csv_columns(32);
        assert_eq!(cols.len(), column_count(32));
        let set: HashSet<&str> = cols.iter().map(|s| s.as_str()).collect();
        assert_eq!(set.len(), cols.len(), "duplicate column name");
        for e in &EARLY_FIELDS {
            assert!(!set.contains(e.json), "{} clashes with a column", e.json);
        }
        for c in &cols {
            assert!(
                c.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{c} needs quoting"
            );
        }
    }

    #[test]
    fn header_spreads_early_columns_per_packet() {
        let h = csv_header(2);
        assert!(h.starts_with("src,dst,sport,dport,proto,"));
        assert!(h.ends_with(
            ",early_len,pkt1_size,pkt1_dir,pkt1_iat_us,pkt2_size,pkt2_dir,pkt2_iat_us\n"
        ));
        assert!(csv_header(0).ends_with(",early_len\n"));
    }

    #[test]
    fn tcp_flag_columns_follow_record_order() {
        use crate::flow::record::TCP_FLAG_NAMES;
        for (d, dir) in ["fwd", "bwd"].iter().enumerate() {
            let start = FIELDS
                .iter()
                .position(|f| f.name == format!("{dir}_fin"))
                .unwrap();
            for (k, flag) in TCP_FLAG_NAMES.iter().enumerate() {
                assert_eq!(FIELDS[start + k].name, format!("{dir}_{flag}"), "dir {d}");
            }
        }
    }
}
