//! Golden outputs: every sample capture in `testdata/pcap/` runs through
//! `pipeline::collect` (default options, no model) and the CSV exporter; the
//! CSV text and a summary of the run counters must equal
//! `testdata/golden/<capture>.csv` and `testdata/golden/<capture>.summary.txt`
//! byte for byte. The same capture run with 2 shards must give the same CSV.
//!
//! `EARLYBIRD_BLESS=1 cargo test -p earlybird --test engine golden::`
//! rewrites the golden files from the current output (review the diff
//! before committing).

use crate::common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use earlybird::{
    collect, open_all, to_writer, EndReason, ExportOptions, Format, ModelRef, RecordBatch, Report,
    RunOptions, Skip,
};

use common::Shared;

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// The sample captures, sorted by name.
fn samples() -> Vec<PathBuf> {
    let dir = testdata().join("pcap");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n.ends_with(".pcap") || n.ends_with(".pcapng")
        })
        .collect();
    v.sort();
    v
}

/// Runs the pipeline on `path` with `shards` shards; returns (CSV, report).
fn run(path: &Path, shards: usize) -> (String, Report) {
    let files = open_all(&[path.to_path_buf()]).expect("open sample capture");
    let opts = RunOptions {
        shards,
        ..RunOptions::default()
    };
    let (flows, report) = collect(&files, &opts, &ModelRef::default()).expect("pipeline run");
    let n = opts.flow.early_packets;
    let mut batch = RecordBatch::with_capacity(flows.len(), n);
    for f in &flows {
        batch.push(f.record, &f.early);
    }
    let out = Shared::default();
    let eopts = ExportOptions {
        early_packets: n,
        class_names: Vec::new().into(),
        ..Default::default()
    };
    let mut ex = to_writer(Format::Csv, Box::new(out.clone()), "csv:memory", &eopts);
    ex.write_batch(&batch).expect("csv write");
    ex.finish().expect("csv finish");
    drop(ex);
    let bytes = out.0.lock().unwrap().clone();
    (String::from_utf8(bytes).expect("CSV is UTF-8"), report)
}

/// The run counters that do not depend on timing or the machine.
fn summary_text(name: &str, r: &Report) -> String {
    let c = &r.counters;
    let mut s = String::new();
    let _ = writeln!(s, "capture: {name}");
    let _ = writeln!(s, "packets_read: {}", c.packets_read);
    let _ = writeln!(s, "bytes_read: {}", c.bytes_read);
    let _ = writeln!(s, "packets_flowed: {}", c.packets_flowed);
    let _ = writeln!(s, "ip_bytes_flowed: {}", c.ip_bytes_flowed);
    for k in Skip::ALL {
        let _ = writeln!(s, "skipped.{}: {}", k.name(), c.skipped[k as usize]);
    }
    let _ = writeln!(s, "skipped.unsupported_link: {}", c.unsupported_link);
    let _ = writeln!(s, "flows_created: {}", c.flows.created);
    for e in EndReason::ALL {
        let _ = writeln!(s, "flows_ended.{}: {}", e.name(), c.flows.ended[e as usize]);
    }
    let _ = writeln!(s, "records: {}", r.summary.records);
    let _ = writeln!(s, "export_dropped: {}", c.export_dropped);
    for w in &r.warnings {
        let _ = writeln!(s, "warning: at byte offset {}: {}", w.offset, w.message);
    }
    s
}

fn bless() -> bool {
    std::env::var_os("EARLYBIRD_BLESS").is_some_and(|v| v == "1")
}

/// `Err` with the first differing line when `got` differs from `want`.
fn first_difference(got: &str, want: &str) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    let (mut g, mut w) = (got.lines(), want.lines());
    let mut line = 1;
    loop {
        match (g.next(), w.next()) {
            (Some(a), Some(b)) if a == b => line += 1,
            (None, None) => return Err(format!("line {line}: only the final newline differs")),
            (a, b) => {
                let (a, b) = (
                    a.unwrap_or("<end of output>"),
                    b.unwrap_or("<end of golden file>"),
                );
                // 1-based comma-separated field where the lines part.
                let field = a
                    .split(',')
                    .zip(b.split(','))
                    .take_while(|(x, y)| x == y)
                    .count()
                    + 1;
                return Err(format!(
                    "first difference at line {line}, field {field}:\n  got:      {a}\n  expected: {b}"
                ));
            }
        }
    }
}

/// Compares `got` with the golden file (or rewrites it when blessing).
/// Returns a failure message on difference.
fn check(golden: &Path, got: &str) -> Option<String> {
    if bless() {
        std::fs::write(golden, got).unwrap_or_else(|e| panic!("{}: {e}", golden.display()));
        eprintln!("blessed {}", golden.display());
        return None;
    }
    let want = match std::fs::read_to_string(golden) {
        Ok(w) => w,
        Err(e) => {
            return Some(format!(
                "{}: {e} (run with EARLYBIRD_BLESS=1 to create it)",
                golden.display()
            ))
        }
    };
    first_difference(got, &want)
        .err()
        .map(|m| format!("{} differs; {m}", golden.display()))
}

#[test]
fn samples_match_golden_outputs() {
    let samples = samples();
    assert!(
        samples.len() >= 4,
        "expected the sample captures in testdata/pcap, found {}",
        samples.len()
    );
    let gdir = testdata().join("golden");
    if bless() {
        std::fs::create_dir_all(&gdir).expect("create testdata/golden");
    }
    let mut failures = Vec::new();
    for p in &samples {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        let (csv, report) = run(p, 1);
        assert!(
            report.output_errors.is_empty(),
            "{name}: {:?}",
            report.output_errors
        );
        failures.extend(check(&gdir.join(format!("{name}.csv")), &csv));
        failures.extend(check(
            &gdir.join(format!("{name}.summary.txt")),
            &summary_text(name, &report),
        ));
        let (csv2, report2) = run(p, 2);
        if let Err(m) = first_difference(&csv2, &csv) {
            failures.push(format!("{name}: 2 shards differ from 1 shard; {m}"));
        }
        if summary_text(name, &report2) != summary_text(name, &report) {
            failures.push(format!(
                "{name}: counters with 2 shards differ from 1 shard"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn first_difference_names_the_line() {
    assert!(first_difference("a\nb\n", "a\nb\n").is_ok());
    let m = first_difference("a\nx\n", "a\nb\n").unwrap_err();
    assert!(
        m.contains("line 2, field 1") && m.contains("x") && m.contains("b"),
        "{m}"
    );
    let m = first_difference("h\n1,2,3\n", "h\n1,2,4\n").unwrap_err();
    assert!(m.contains("line 2, field 3"), "{m}");
    let m = first_difference("a\n", "a\nb\n").unwrap_err();
    assert!(m.contains("<end of output>"), "{m}");
    let m = first_difference("a\nb", "a\nb\n").unwrap_err();
    assert!(m.contains("final newline"), "{m}");
}
