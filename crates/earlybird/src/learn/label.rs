//! DPI labelling: capture files → a ground-truth CSV that `earlybird train
//! --labels` reads ([`crate::LabelSet::load`]), with nDPI (the `ndpi`
//! analyzer, `crate::analyze::ndpi`) as the labeller. Behind
//! `earlybird label`.
//!
//! Contract: [`label_captures`] runs the flow table with the `ndpi`
//! analyzer over each file ([`super::workflow::capture_files`] expands
//! directories) and writes one row per flow record, in the order
//! [`crate::pipeline::collect`] returns them (first packet time, then key),
//! with the columns [`COLUMNS`]: the capture's file name, the 5-tuple as the
//! flow's client sent it, nDPI's label (`Unknown` when nDPI found nothing:
//! `train` skips those), master and application protocol, category,
//! confidence kind (`DPI`, `Match by port`, …: `train --dpi-only` keeps
//! only the `DPI…` rows), packets and bytes per direction and the packets
//! nDPI read. Without the `ndpi` feature it fails with a message saying
//! how to build it. A file that is not a usable capture is listed in
//! [`LabelStats::skipped`] and the others are still labelled; a file that
//! cannot be opened, or a failed write, is an error naming it.

use std::io::Write;
use std::path::PathBuf;

use crate::decode::fmt_addr;
use crate::error::{Error, Result};
use crate::pipeline::{self, ModelRef, RunOptions};
use crate::schema::OwnedValue;
use crate::source::CaptureFile;

/// The analyzer that labels.
pub const ANALYZER: &str = "ndpi";

/// The header of the CSV [`label_captures`] writes.
pub const COLUMNS: &str = "pcap,proto,src,sport,dst,dport,app_label,master_proto,app_proto,category,confidence,c2s_pkts,c2s_bytes,s2c_pkts,s2c_bytes,dpi_packets";

/// The analyzer fields copied to the CSV, in [`COLUMNS`] order (after the
/// 5-tuple; `ndpi_packets` goes last).
const FIELDS: [&str; 5] = [
    "ndpi_app_label",
    "ndpi_master_proto",
    "ndpi_app_proto",
    "ndpi_category",
    "ndpi_confidence",
];

/// What labelling gave.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelStats {
    /// Captures read.
    pub files: usize,
    /// Flow records written.
    pub flows: usize,
    /// Flows nDPI named (label other than `Unknown`).
    pub detected: usize,
    /// Flows nDPI named by payload (confidence `DPI…`).
    pub dpi: usize,
    /// `"file: reason"` of inputs that are not usable captures.
    pub skipped: Vec<String>,
}

impl std::fmt::Display for LabelStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} captures ({} skipped), {} flows: {} labelled by nDPI, {} of them by payload (DPI), {} Unknown",
            self.files,
            self.skipped.len(),
            self.flows,
            self.detected,
            self.dpi,
            self.flows - self.detected
        )
    }
}

/// IP protocol as the truth CSVs spell it.
fn proto_text(p: u8) -> String {
    match p {
        1 => "ICMP".into(),
        2 => "IGMP".into(),
        6 => "TCP".into(),
        17 => "UDP".into(),
        47 => "GRE".into(),
        50 => "ESP".into(),
        58 => "ICMPV6".into(),
        132 => "SCTP".into(),
        _ => p.to_string(),
    }
}

/// A CSV cell (quoted when it needs to be).
fn cell(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn text(v: Option<&OwnedValue>) -> String {
    match v {
        Some(OwnedValue::Text(s)) => cell(s),
        Some(OwnedValue::U64(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// Labels the flows of `files` with nDPI and writes the truth CSV to `out`
/// (`out_name` names it in errors). `run` gives flow formation; the `ndpi`
/// analyzer is added to it.
pub fn label_captures(
    files: &[PathBuf],
    run: &RunOptions,
    out: &mut dyn Write,
    out_name: &str,
) -> Result<LabelStats> {
    if !crate::analyze::AVAILABLE
        .iter()
        .any(|(n, _)| *n == ANALYZER)
    {
        return Err(Error::Config(
            "this earlybird was built without nDPI: build it with `--features ndpi` (needs libndpi-dev)"
                .into(),
        ));
    }
    let mut run = run.clone();
    if !run.flow.analyzers.iter().any(|a| a == ANALYZER) {
        run.flow.analyzers.push(ANALYZER.into());
    }
    let names: Vec<String> = crate::analyze::fields_of(&run.flow.analyzers)
        .iter()
        .map(|f| f.name.to_string())
        .collect();
    let at = |n: &str| names.iter().position(|x| x == n);
    let cols: Vec<Option<usize>> = FIELDS.iter().map(|n| at(n)).collect();
    let c_packets = at("ndpi_packets");
    let write_err = |e: std::io::Error| Error::Output {
        name: out_name.to_string(),
        reason: e.to_string(),
    };
    writeln!(out, "{COLUMNS}").map_err(write_err)?;
    let mut stats = LabelStats::default();
    for path in files {
        let cap = match CaptureFile::open(path) {
            Ok(c) => c,
            Err(e @ Error::Io { .. }) => return Err(e),
            Err(e) => {
                stats.skipped.push(e.to_string());
                continue;
            }
        };
        let (flows, _) = pipeline::collect(std::slice::from_ref(&cap), &run, &ModelRef::default())
            .map_err(|e| Error::file(path, None, e))?;
        let pcap = cell(
            &path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.display().to_string()),
        );
        for f in &flows {
            let (r, k) = (&f.record, &f.record.key);
            let get = |c: Option<usize>| text(c.and_then(|i| f.analyzed.get(i)));
            let vals: Vec<String> = cols.iter().map(|&c| get(c)).collect();
            let label = vals[0].as_str();
            if !label.is_empty() && label != "Unknown" {
                stats.detected += 1;
                if vals[4].starts_with("DPI") {
                    stats.dpi += 1;
                }
            }
            writeln!(
                out,
                "{pcap},{},{},{},{},{},{},{},{},{},{},{}",
                proto_text(k.proto),
                fmt_addr(&k.src),
                k.sport,
                fmt_addr(&k.dst),
                k.dport,
                vals.join(","),
                r.packets[0],
                r.bytes[0],
                r.packets[1],
                r.bytes[1],
                get(c_packets),
            )
            .map_err(write_err)?;
            stats.flows += 1;
        }
        stats.files += 1;
    }
    out.flush().map_err(write_err)?;
    Ok(stats)
}
