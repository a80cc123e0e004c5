//! Exporter tests beyond the compliance test: format names, opening
//! outputs, stdout, outputs that fail, and (module `text`) the formatting of
//! single values against `std`, `fmt_addr` and exhaustive references.

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
        ..Default::default()
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
    assert_eq!(Format::parse("xlsx"), None);
    #[cfg(feature = "parquet")]
    assert_eq!(Format::parse("Parquet"), Some(Format::Parquet));
    #[cfg(not(feature = "parquet"))]
    assert_eq!(Format::parse("parquet"), None);
    let p = |s: &str| Format::from_path(Path::new(s));
    assert_eq!(p("/tmp/out.csv"), Some(Format::Csv));
    assert_eq!(p("flows.CSV"), Some(Format::Csv));
    assert_eq!(p("a/b.jsonl"), Some(Format::JsonLines));
    assert_eq!(p("a.ndjson"), Some(Format::JsonLines));
    assert_eq!(p("a.json"), None);
    assert_eq!(p("/dev/null"), None);
    assert_eq!(p("-"), None);
    assert_eq!(p("out.txt"), None);
    #[cfg(feature = "parquet")]
    assert_eq!(p("a/b.parquet"), Some(Format::Parquet));
}

#[test]
fn output_names_must_say_their_format() {
    let f = |s: &str, forced| Format::for_output(Path::new(s), forced);
    assert_eq!(f("-", None), Ok(Format::Csv));
    assert_eq!(f("-", Some(Format::JsonLines)), Ok(Format::JsonLines));
    assert_eq!(f("-", Some(Format::Null)), Ok(Format::Null));
    assert_eq!(f("a/out.CSV", None), Ok(Format::Csv));
    assert_eq!(
        f("out.ndjson", Some(Format::JsonLines)),
        Ok(Format::JsonLines)
    );
    assert_eq!(f("/dev/null", None), Ok(Format::Csv));
    assert_eq!(
        f("/dev/null", Some(Format::JsonLines)),
        Ok(Format::JsonLines)
    );
    assert_eq!(f("flows", Some(Format::JsonLines)), Ok(Format::JsonLines));
    assert_eq!(f("/dev/null", Some(Format::Null)), Ok(Format::Null));
    let err = |s: &str, forced, want: &str| {
        let e = f(s, forced).unwrap_err().to_string();
        assert!(e.starts_with(s) && e.contains(want), "{s}: {e}");
    };
    err(
        "x.xlsx",
        None,
        "unknown extension .xlsx (known: .csv, .jsonl",
    );
    err("x.xlsx", Some(Format::Csv), "unknown extension .xlsx");
    #[cfg(feature = "parquet")]
    {
        assert_eq!(f("a/out.PARQUET", None), Ok(Format::Parquet));
        assert_eq!(f("-", Some(Format::Parquet)), Ok(Format::Parquet));
        err(
            "x.parquet",
            Some(Format::Csv),
            "the name says parquet but -f says csv",
        );
    }
    #[cfg(not(feature = "parquet"))]
    err("x.parquet", None, "unknown extension .parquet");
    err("x.json", None, "name the file .jsonl or .ndjson");
    err(
        "x.csv",
        Some(Format::JsonLines),
        "the name says csv but -f says jsonl",
    );
    err(
        "x.jsonl",
        Some(Format::Csv),
        "the name says jsonl but -f says csv",
    );
    err("x.csv", Some(Format::Null), "-f null discards the records");
    err(
        "/nonexistent-dir/flows",
        None,
        "no extension to tell the record format",
    );
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
pub(super) struct Failing {
    pub(super) limit: usize,
    pub(super) written: usize,
    pub(super) fail_flush: bool,
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
    use crate::classify::Verdict;
    use crate::features::early::EarlyPkt;
    use crate::features::stats::Stat;
    use crate::features::Dir;
    use crate::flow::record::FlowRecord;
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
        min: u64::MAX,
        max: u64::MAX - 1,
        mean: -1.234_567_890_123_456_7e300,
        std: f64::NAN,
    };
    r.size = [Some(wide); 2];
    r.iat = [Some(wide); 2];
    r.tcp_flags = Some([[u32::MAX; 8]; 2]);
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
            ..Default::default()
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
            assert_eq!(v["fwd_size_max"].as_u64(), Some(u64::MAX - 1));
            let mean = v["fwd_size_mean"].as_f64().unwrap();
            assert!((mean / -1.234_567_890_123_456_7e300 - 1.0).abs() < 1e-15);
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
    use crate::features::early::EarlyPkt;
    use crate::flow::record::FlowRecord;
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
            // early_len 0, then four packets not had: empty.
            assert!(last.ends_with(",0,,,,,,,,,,,,"), "{last}");
        }
    }
}

/// Formatting of single values (`text.rs`).
mod text {
    use super::super::text::*;
    use crate::decode::{fmt_addr, map_v4};

    fn addr(a: &[u8; 16]) -> String {
        let mut b = TextBuf::new(MAX_FIELD);
        b.cursor().addr(a);
        String::from_utf8(b.as_slice().to_vec()).unwrap()
    }

    fn float(v: f64) -> String {
        let mut b = TextBuf::new(MAX_FIELD);
        if !b.cursor().f64(v) {
            return "<none>".into();
        }
        String::from_utf8(b.as_slice().to_vec()).unwrap()
    }

    #[test]
    fn integers_match_std() {
        let mut b = TextBuf::new(64);
        let mut cases = vec![0, 9, 10, 99, 100, 101, 999, 1000, u64::MAX, u64::MAX - 1];
        cases.extend(0..20_000);
        for p in 0..20 {
            cases.push(10u64.pow(p));
            cases.push(10u64.pow(p) - 1);
            cases.push(10u64.pow(p) + 7);
        }
        for v in cases {
            b.clear();
            b.cursor().u64(v);
            assert_eq!(b.as_slice(), v.to_string().as_bytes());
        }
    }

    #[test]
    fn digit_lanes_match_std() {
        let mut cases: Vec<u32> = (0..100_000).collect();
        cases.extend((0..100_000u32).map(|i| i.wrapping_mul(2_654_435_761) % 100_000_000));
        cases.extend([99_999_999, 10_000_000, 9_999_999, 12_345_678]);
        for v in cases {
            let text = (digits8(v) | ZEROS).to_le_bytes();
            assert_eq!(&text[..], format!("{v:08}").as_bytes(), "{v}");
        }
    }

    #[test]
    fn every_thousandth_is_exact() {
        let mut b = TextBuf::new(64);
        for m in (0..3_000_000u64).chain(9_007_199_254_000..9_007_199_254_740) {
            let want = match (m / 1000, m % 1000) {
                (i, 0) => i.to_string(),
                (i, f) => format!("{i}.{f:03}").trim_end_matches('0').to_string(),
            };
            for (v, w) in [
                (m as f64 / 1000.0, want.clone()),
                (-(m as f64) / 1000.0, {
                    if m == 0 {
                        want.clone()
                    } else {
                        format!("-{want}")
                    }
                }),
            ] {
                b.clear();
                assert!(b.cursor().f64(v));
                assert_eq!(b.as_slice(), w.as_bytes(), "{v}");
            }
        }
    }

    #[test]
    fn separated_values_and_snippets() {
        let mut b = TextBuf::new(200);
        let long = Snip::new(&[b'x'; SNIP + 5]);
        {
            let mut c = b.cursor();
            c.sep_u64(b',', 0);
            c.sep_u64(b';', u64::MAX);
            c.snip(&Snip::new(b"tls"));
            c.snip(&long);
            c.byte(b'!');
            c.unwrite(1);
        }
        let want = format!(",0;{}tls{}", u64::MAX, "x".repeat(SNIP + 5));
        assert_eq!(b.as_slice(), want.as_bytes());
        assert_eq!(b.room(), 200 - want.len());
    }

    #[test]
    #[should_panic(expected = "do not fit")]
    fn a_value_past_the_capacity_stops_before_writing() {
        // Capacity 4 plus SLACK: a 24-byte integer check must fail near the end.
        let mut b = TextBuf::new(4);
        let mut c = b.cursor();
        for _ in 0..10 {
            c.u64(u64::MAX);
        }
    }

    #[test]
    fn addresses_match_fmt_addr() {
        let mut cases: Vec<[u8; 16]> = vec![
            [0; 16],
            map_v4([0, 0, 0, 0]),
            map_v4([192, 168, 1, 255]),
            map_v4([10, 0, 0, 1]),
            "2001:db8::1"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
            "::1".parse::<std::net::Ipv6Addr>().unwrap().octets(),
            "1::".parse::<std::net::Ipv6Addr>().unwrap().octets(),
            "1:0:0:2:0:0:0:3"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
            "1:0:0:2:0:0:3:4"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
            "1:0:2:3:4:5:6:7"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
            "fe80::abcd:ef01:2345:6789"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
            "::1.2.3.4".parse::<std::net::Ipv6Addr>().unwrap().octets(),
            "64:ff9b::1.2.3.4"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
        ];
        // Pseudo-random addresses with many zero groups (xorshift).
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            let mut a = [0u8; 16];
            for g in 0..8 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // About one group in three stays zero; some are short.
                let mask = match x % 15 {
                    0..=4 => 0x00,
                    5..=7 => 0x0f,
                    _ => 0xff,
                };
                a[2 * g] = (x >> 8) as u8 & mask;
                a[2 * g + 1] = if mask == 0 { 0 } else { (x >> 16) as u8 };
            }
            cases.push(a);
        }
        for a in &cases {
            assert_eq!(addr(a), fmt_addr(a), "{a:?}");
        }
    }

    #[test]
    fn macs_are_lower_hex() {
        let mut b = TextBuf::new(17);
        b.cursor().mac(&[0x00, 0x1b, 0xAC, 0xff, 0x09, 0x10]);
        assert_eq!(b.as_slice(), b"00:1b:ac:ff:09:10");
        assert_eq!(b.room(), 0);
    }

    #[test]
    fn floats_round_to_three_decimals() {
        assert_eq!(float(0.0), "0");
        assert_eq!(float(-0.0), "0");
        assert_eq!(float(1.5), "1.5");
        assert_eq!(float(1.0 / 3.0), "0.333");
        assert_eq!(float(2.0 / 3.0), "0.667");
        assert_eq!(float(0.0005), "0.001");
        assert_eq!(float(0.0004), "0");
        assert_eq!(float(1499.9996), "1500");
        assert_eq!(float(12.05), "12.05");
        assert_eq!(float(-3.25), "-3.25");
        assert_eq!(float(-0.0001), "0");
        assert_eq!(float(1e12 + 0.125), "1000000000000.125");
        assert_eq!(float(1e13), "10000000000000.0");
        assert_eq!(float(1e300), "1e300");
        assert_eq!(float(f64::NAN), "<none>");
        assert_eq!(float(f64::INFINITY), "<none>");
    }

    #[test]
    fn floats_read_back_within_half_a_thousandth() {
        let mut x: u64 = 12345;
        for _ in 0..50_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = (x >> 11) as f64 / (1u64 << 53) as f64 * 10f64.powi((x % 13) as i32);
            let back: f64 = float(v).parse().unwrap();
            assert!((back - v).abs() <= 0.0005 + v * 1e-15, "{v} -> {back}");
        }
    }

    #[test]
    fn csv_quotes_only_when_needed() {
        assert_eq!(csv_field("tls"), b"tls");
        assert_eq!(csv_field("a,b"), b"\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), b"\"say \"\"hi\"\"\"");
        assert_eq!(csv_field(" x"), b"\" x\"");
    }

    #[test]
    fn json_strings_escape_controls() {
        assert_eq!(
            json_string("a\"b\\c\u{1}é"),
            "\"a\\\"b\\\\c\\u0001é\"".as_bytes()
        );
        let v: String = serde_json::from_slice(&json_string("x\ny\t\u{1f}")).unwrap();
        assert_eq!(v, "x\ny\t\u{1f}");
    }
}

#[test]
fn flush_writes_records_out_and_reopen_follows_a_rotated_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.csv");
    let rotated = dir.path().join("out.csv.1");
    let mut ex = open(Format::Csv, &path, &opts(4)).unwrap();
    ex.write_batch(&batch(1)).unwrap();
    // Buffered: nothing in the file until a flush.
    assert_eq!(std::fs::read(&path).unwrap().len(), 0);
    ex.flush().unwrap();
    let first = std::fs::read_to_string(&path).unwrap();
    let records = sample().len();
    assert_eq!(first.lines().count(), 1 + records);
    // The path still names the open file: nothing to reopen.
    assert!(!ex.reopen().unwrap());
    ex.write_batch(&batch(1)).unwrap();
    std::fs::rename(&path, &rotated).unwrap();
    assert!(ex.reopen().unwrap());
    ex.write_batch(&batch(2)).unwrap();
    ex.finish().unwrap();
    let old = std::fs::read_to_string(&rotated).unwrap();
    let new = std::fs::read_to_string(&path).unwrap();
    assert_eq!(old.lines().count(), 1 + 2 * records, "old file complete");
    assert_eq!(
        new.lines().count(),
        1 + 2 * records,
        "fresh file, header again"
    );
    assert_eq!(old.lines().next(), new.lines().next());
    // JSON lines: no header, same rotation.
    let jpath = dir.path().join("out.jsonl");
    let mut ex = open(Format::JsonLines, &jpath, &opts(4)).unwrap();
    ex.write_batch(&batch(1)).unwrap();
    std::fs::remove_file(&jpath).unwrap();
    assert!(ex.reopen().unwrap());
    ex.write_batch(&batch(1)).unwrap();
    ex.finish().unwrap();
    assert_eq!(
        std::fs::read_to_string(&jpath).unwrap().lines().count(),
        records
    );
    // Standard output is never reopened.
    let mut ex = to_writer(Format::Csv, Box::new(std::io::sink()), "csv:x", &opts(4));
    assert!(!ex.reopen().unwrap());
}

/// A pipe whose reader went away: every write fails with EPIPE.
pub(super) struct Closed;

impl Write for Closed {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(std::io::ErrorKind::BrokenPipe.into())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_closed_pipe_is_the_output_ending_not_an_error() {
    let mut ex = to_writer(
        Format::JsonLines,
        Box::new(Closed),
        "jsonl:stdout",
        &opts(4),
    );
    ex.write_batch(&batch(1)).unwrap();
    let e = ex.flush().unwrap_err();
    assert!(matches!(e, Error::OutputClosed { .. }), "{e}");
    assert_eq!(e.to_string(), "output jsonl:stdout: closed by its reader");
    // Sticky, like a write error.
    let e = ex.write_batch(&batch(1)).unwrap_err();
    assert!(matches!(e, Error::OutputClosed { .. }), "{e}");
}
