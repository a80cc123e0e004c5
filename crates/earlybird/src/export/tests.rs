//! Exporter tests beyond the compliance test: format names, opening
//! outputs, stdout, and outputs that fail.

use std::io::Write;
use std::path::Path;

use super::compliance::{sample, Shared};
use super::{fields, open, to_writer, ExportOptions, Format, CHUNK};
use crate::error::Error;
use crate::flow::record::RecordBatch;

fn opts(n: usize) -> ExportOptions {
    ExportOptions {
        early_packets: n,
        class_names: vec!["tls".to_string()].into(),
    }
}

fn batch(copies: usize) -> RecordBatch {
    let recs = sample();
    let mut b = RecordBatch::with_capacity(recs.len() * copies, 8);
    for _ in 0..copies {
        for (r, e) in &recs {
            b.push(*r, e);
        }
    }
    b
}

#[test]
fn formats_from_names_and_paths() {
    assert_eq!(Format::parse("CSV"), Some(Format::Csv));
    for s in ["json", "jsonl", "ndjson", "JSON-lines", "jsonlines"] {
        assert_eq!(Format::parse(s), Some(Format::JsonLines), "{s}");
    }
    assert_eq!(Format::parse("null"), Some(Format::Null));
    assert_eq!(Format::parse("parquet"), None);
    let p = |s: &str| Format::from_path(Path::new(s));
    assert_eq!(p("/tmp/out.csv"), Some(Format::Csv));
    assert_eq!(p("flows.CSV"), Some(Format::Csv));
    assert_eq!(p("a/b.jsonl"), Some(Format::JsonLines));
    assert_eq!(p("a.ndjson"), Some(Format::JsonLines));
    assert_eq!(p("a.json"), Some(Format::JsonLines));
    assert_eq!(p("/dev/null"), None);
    assert_eq!(p("-"), None);
    assert_eq!(p("out.txt"), None);
}

#[test]
fn file_output_round_trip_and_name() {
    let dir = std::env::temp_dir().join(format!("earlybird-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("out.csv");
    let mut ex = open(Format::Csv, &path, &opts(4)).unwrap();
    assert_eq!(ex.name(), format!("csv:{}", path.display()));
    ex.write_batch(&batch(1)).unwrap();
    ex.finish().unwrap();
    drop(ex);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with(&fields::csv_header(4)));
    assert_eq!(text.lines().count(), 1 + sample().len());
    let null = open(Format::Null, &dir.join("never-created"), &opts(4)).unwrap();
    assert_eq!(null.name(), "null");
    assert!(!dir.join("never-created").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn missing_directory_is_an_error_naming_the_path() {
    let path = std::env::temp_dir()
        .join(format!("earlybird-missing-{}", std::process::id()))
        .join("sub/out.jsonl");
    let err = match open(Format::JsonLines, &path, &opts(4)) {
        Err(e) => e,
        Ok(_) => panic!("opened {}", path.display()),
    };
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
}

/// Accepts `limit` bytes, then fails every write.
struct Failing {
    limit: usize,
    written: usize,
    fail_flush: bool,
}

impl Write for Failing {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.written >= self.limit {
            return Err(std::io::Error::other("disk full"));
        }
        let n = b.len().min(self.limit - self.written);
        self.written += n;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        if self.fail_flush {
            return Err(std::io::Error::other("flush refused"));
        }
        Ok(())
    }
}

#[test]
fn writer_failing_mid_batch_is_an_error_not_a_panic() {
    for format in [Format::Csv, Format::JsonLines] {
        let w = Failing {
            limit: 10_000,
            written: 0,
            fail_flush: false,
        };
        let mut ex = to_writer(format, Box::new(w), "bad:out", &opts(32));
        // Big enough to cross a chunk inside write_batch.
        let big = batch(CHUNK / 1000);
        let err = ex.write_batch(&big).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::Output { .. }), "{format:?}: {err:?}");
        assert!(
            msg.contains("bad:out") && msg.contains("disk full"),
            "{msg}"
        );
        // Sticky: later calls fail the same way.
        assert!(ex.write_batch(&batch(1)).is_err());
        assert!(ex.finish().unwrap_err().to_string().contains("disk full"));
    }
}

#[test]
fn errors_held_in_the_buffer_surface_at_finish() {
    for format in [Format::Csv, Format::JsonLines] {
        let w = Failing {
            limit: 100,
            written: 0,
            fail_flush: false,
        };
        let mut ex = to_writer(format, Box::new(w), "small", &opts(4));
        ex.write_batch(&batch(1)).unwrap();
        let err = ex.finish().unwrap_err();
        assert!(err.to_string().contains("disk full"), "{err}");
        let w = Failing {
            limit: usize::MAX,
            written: 0,
            fail_flush: true,
        };
        let mut ex = to_writer(format, Box::new(w), "noflush", &opts(4));
        ex.write_batch(&batch(1)).unwrap();
        let err = ex.finish().unwrap_err();
        assert!(err.to_string().contains("flush refused"), "{err}");
    }
}

#[test]
fn empty_csv_still_has_its_header() {
    let shared = Shared::default();
    let mut ex = to_writer(Format::Csv, Box::new(shared.clone()), "t", &opts(2));
    ex.write_batch(&RecordBatch::with_capacity(0, 2)).unwrap();
    ex.finish().unwrap();
    assert_eq!(
        *shared.0.lock().unwrap(),
        fields::csv_header(2).into_bytes()
    );
    let shared = Shared::default();
    let mut ex = to_writer(Format::JsonLines, Box::new(shared.clone()), "t", &opts(2));
    ex.finish().unwrap();
    assert!(shared.0.lock().unwrap().is_empty());
}

const CHILD_ENV: &str = "EARLYBIRD_EXPORT_STDOUT_CHILD";

/// Run by `stdout_path_writes_to_stdout` in a child process: writes a batch
/// to "-" as CSV.
#[test]
#[ignore = "helper run as a child process by stdout_path_writes_to_stdout"]
fn stdout_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let mut ex = open(Format::Csv, Path::new("-"), &opts(3)).unwrap();
    assert_eq!(ex.name(), "csv:stdout");
    ex.write_batch(&batch(2)).unwrap();
    ex.finish().unwrap();
}

#[test]
fn stdout_path_writes_to_stdout() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "export::tests::stdout_child",
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=2",
        ])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let header = fields::csv_header(3);
    let start = text
        .find(&header)
        .unwrap_or_else(|| panic!("no CSV header on stdout: {text}"));
    let rows: Vec<&str> = text[start + header.len()..]
        .lines()
        .take(2 * sample().len())
        .collect();
    assert_eq!(rows.len(), 2 * sample().len());
    for row in rows {
        assert_eq!(row.split(',').count(), fields::column_count(3), "{row}");
    }
}

#[test]
fn widest_possible_records_fit_the_record_bound() {
    use crate::flow::record::{Dir, EarlyPkt, FlowRecord, Stat, Verdict};
    let mut r = FlowRecord::default();
    r.key.src = [0xff; 16];
    r.key.dst = [0xfe; 16];
    r.key.sport = u16::MAX;
    r.key.dport = u16::MAX;
    r.key.proto = u8::MAX;
    r.key.ip_version = 6;
    r.key.vlan = u16::MAX;
    r.key.tunnel = crate::decode::TunnelKind::Vxlan;
    r.key.tunnel_id = u32::MAX;
    r.first_ts = 1;
    r.last_ts = u64::MAX;
    r.packets = [u64::MAX; 2];
    r.bytes = [u64::MAX; 2];
    let wide = Stat {
        min: -1.234_567_890_123_456_7e300,
        max: -9_007_199_254_739.999,
        mean: -1.234_567_890_123_456_7e-300,
        std: f64::NAN,
    };
    r.size = [wide; 2];
    r.iat = [wide; 2];
    r.tcp_flags = [[u32::MAX; 8]; 2];
    r.end = crate::flow::record::EndReason::EndOfInput;
    r.verdict = Verdict {
        class: 0,
        confidence: f32::MIN,
        at_packet: u8::MAX,
    };
    let early = [EarlyPkt {
        size: u16::MAX,
        dir: Dir::Bwd,
        flags: 0xff,
        iat_us: u32::MAX,
    }; 32];
    // A one-byte name keeps the bound tight; a long one must fit too.
    let long_name = "\"\u{1}".repeat(50_000);
    for (format, name) in [
        (Format::Csv, "x".to_string()),
        (Format::JsonLines, "x".to_string()),
        (Format::Csv, long_name.clone()),
        (Format::JsonLines, long_name),
    ] {
        let opts = ExportOptions {
            early_packets: 32,
            class_names: vec![name.clone()].into(),
        };
        let shared = Shared::default();
        let mut ex = to_writer(format, Box::new(shared.clone()), "wide", &opts);
        let mut b = RecordBatch::with_capacity(200, 32);
        for _ in 0..200 {
            b.push(r, &early);
        }
        // Debug builds assert the bound after every record.
        ex.write_batch(&b).unwrap();
        ex.finish().unwrap();
        let text = String::from_utf8(shared.0.lock().unwrap().clone()).unwrap();
        let last = text.lines().last().unwrap();
        if format == Format::JsonLines {
            let v: serde_json::Value = serde_json::from_str(last).unwrap();
            assert_eq!(v["app"].as_str(), Some(name.as_str()));
            assert_eq!(v["src"], "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
            assert!(v["fwd_size_std"].is_null());
            assert_eq!(v["fwd_size_max"].as_f64(), Some(-9_007_199_254_739.999));
        } else {
            assert!(
                last.ends_with(",65535,-1,4294967295"),
                "{}",
                &last[last.len() - 40..]
            );
        }
    }
}

#[test]
fn inconsistent_batch_is_written_without_panicking() {
    use crate::flow::record::{EarlyPkt, FlowRecord};
    let mut b = RecordBatch::with_capacity(2, 4);
    b.push(FlowRecord::default(), &[EarlyPkt::default(); 4]);
    b.push(FlowRecord::default(), &[EarlyPkt::default(); 4]);
    b.records[1].early_len = 200; // more than the stride
    b.early.truncate(5); // second record's early packets missing
    for format in [Format::Csv, Format::JsonLines] {
        let shared = Shared::default();
        let mut ex = to_writer(format, Box::new(shared.clone()), "t", &opts(4));
        ex.write_batch(&b).unwrap();
        ex.finish().unwrap();
        let text = String::from_utf8(shared.0.lock().unwrap().clone()).unwrap();
        let last = text.lines().last().unwrap();
        if format == Format::JsonLines {
            let v: serde_json::Value = serde_json::from_str(last).unwrap();
            assert_eq!(v["early_len"], 0);
            assert_eq!(v["early_size"].as_array().map(Vec::len), Some(0));
        } else {
            assert!(last.ends_with(",0,0,0,0,0,0,0,0,0,0,0,0,0"), "{last}");
        }
    }
}
