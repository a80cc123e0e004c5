//! Alarms on the per-second statistics: a flood mixed into steady traffic
//! raises the alarm in the second the flood starts (the cumulative sum in
//! its second or third) and clears it after, and its pcap holds exactly
//! the packets of the seconds before it; the steady traffic alone, with
//! its natural bursts, raises none.

use crate::common;

use std::sync::Arc;

use common::Shared;
use earlybird::{
    AlarmSpec, CaptureFile, ForensicConfig, Format, GenKind, GenOptions, Metrics, ModelRef,
    RunControl, RunOptions, ALARMS, SECOND,
};
use serde_json::Value;

/// A classic pcap record: (time in µs, its bytes with the header).
type Rec = (u64, Vec<u8>);

/// The records of a little-endian microsecond classic pcap.
fn records(pcap: &[u8]) -> Vec<Rec> {
    assert_eq!(&pcap[..4], &0xa1b2_c3d4_u32.to_le_bytes());
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let u = |o: usize| u32::from_le_bytes(pcap[at + o..at + o + 4].try_into().unwrap());
        let us = u(0) as u64 * 1_000_000 + u(4) as u64;
        let end = at + 16 + u(8) as usize;
        out.push((us, pcap[at..end].to_vec()));
        at = end;
    }
    out
}

/// The records of a little-endian nanosecond classic pcap: (time ns, the
/// record's bytes without its header).
fn read_ns(pcap: &[u8]) -> Vec<(u64, Vec<u8>)> {
    assert_eq!(&pcap[..4], &0xa1b2_3c4d_u32.to_le_bytes());
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let u = |o: usize| u32::from_le_bytes(pcap[at + o..at + o + 4].try_into().unwrap());
        let ns = u(0) as u64 * 1_000_000_000 + u(4) as u64;
        let end = at + 16 + u(8) as usize;
        out.push((ns, pcap[at + 16..end].to_vec()));
        at = end;
    }
    out
}

/// A pcap of `recs` (the header of `like`), each record restamped.
fn pcap(like: &[u8], recs: &[Rec]) -> Vec<u8> {
    let mut out = like[..24].to_vec();
    for (us, r) in recs {
        out.extend_from_slice(&((us / 1_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&((us % 1_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&r[8..]);
    }
    out
}

fn generate(o: &GenOptions) -> Vec<u8> {
    let mut buf = Vec::new();
    earlybird::generate(o, &mut buf).unwrap();
    buf
}

/// Steady traffic of ~75 s (a 10 Mbit/s link at half load), and the same
/// with 30,000 flood packets (the worst-case generator's) spread over the
/// three seconds that start `at` seconds after its first packet; the
/// flood's first second (Unix time).
fn captures(at: u64) -> (Vec<u8>, Vec<u8>, u64) {
    let mut o = GenOptions::new(GenKind::Realistic, 60_000);
    o.gbps = 0.01;
    let steady = generate(&o);
    let n = 30_000;
    let flood = generate(&GenOptions::new(GenKind::Worst, n));
    let mut recs = records(&steady);
    let start = recs[0].0 / 1_000_000 + at;
    for (i, (_, r)) in records(&flood).into_iter().enumerate() {
        recs.push((start * 1_000_000 + i as u64 * 3_000_000 / n, r));
    }
    recs.sort_by_key(|r| r.0);
    let mixed = pcap(&steady, &recs);
    (steady, mixed, start)
}

/// Runs `bytes` with `alarms` (their pcaps into `pcaps`); the alarm
/// records (JSON) and the metrics.
fn run(
    bytes: Vec<u8>,
    alarms: &[AlarmSpec],
    shards: usize,
    pcaps: Option<&std::path::Path>,
) -> (Vec<Value>, String) {
    let files = [CaptureFile::from_bytes("mixed", bytes).unwrap()];
    let out = Shared::default();
    let metrics = Arc::new(Metrics::new());
    let opts = RunOptions {
        shards,
        alarms: alarms.to_vec(),
        metrics: Some(metrics.clone()),
        forensics: pcaps.map(|dir| ForensicConfig {
            dir: dir.to_path_buf(),
            window: 2 * SECOND,
            margin: 60 * SECOND,
            max_bytes: 64 << 20,
        }),
        ..RunOptions::default()
    };
    let ex = vec![earlybird::rows_to_writer(
        &ALARMS,
        Format::JsonLines,
        Box::new(out.clone()),
        "alarms",
    )];
    let report = earlybird::run(
        &files,
        &opts,
        &ModelRef::default(),
        ex,
        &RunControl::default(),
    )
    .unwrap();
    assert!(
        report.output_errors.is_empty(),
        "{:?}",
        report.output_errors
    );
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let rows = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (rows, metrics.render())
}

fn specs() -> Vec<AlarmSpec> {
    ["packets", "flows_new", "packets:cusum"]
        .iter()
        .map(|s| AlarmSpec::parse_short(s).unwrap())
        .collect()
}

#[test]
fn a_flood_raises_the_alarm_in_its_second() {
    let (steady, mixed, second) = captures(45);
    // The packets of the flood's second and the one before (the pcaps'
    // two-second window), as (time µs, bytes without the record header).
    let window: Vec<(u64, Vec<u8>)> = records(&mixed)
        .into_iter()
        .filter(|(us, _)| (second - 1..=second).contains(&(us / 1_000_000)))
        .map(|(us, r)| (us, r[16..].to_vec()))
        .collect();
    assert!(window.len() > 10_000);
    for shards in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let (rows, metrics) = run(mixed.clone(), &specs(), shards, Some(dir.path()));
        let raised = |series: &str, method: &str| {
            rows.iter()
                .find(|r| r["series"] == series && r["method"] == method && r["state"] == "raised")
                .unwrap_or_else(|| panic!("no {series} {method} alarm in {rows:?}"))
        };
        for (series, method) in [("packets", "ewma"), ("flows_new", "ewma")] {
            let r = raised(series, method);
            assert_eq!(r["time"], second, "{series} {method}: {r}");
            assert!(r["value"].as_f64().unwrap() > r["baseline"].as_f64().unwrap());
        }
        let packets = raised("packets", "ewma");
        assert!(packets["value"].as_f64().unwrap() >= 10_000.0, "{packets}");
        // The cumulative sum needs the flood to last: its second or third
        // second (what the sum held before the flood decides which).
        let t = raised("packets", "cusum")["time"].as_u64().unwrap();
        assert!((second + 1..=second + 2).contains(&t), "cusum at {t}");
        // It clears once the flood is over.
        assert!(
            rows.iter().any(|r| r["series"] == "packets"
                && r["method"] == "ewma"
                && r["state"] == "cleared"
                && r["time"].as_u64() > Some(second)),
            "{rows:?}"
        );
        assert!(
            metrics.contains("earlybird_alarms_total{series=\"packets\"} 1\n"),
            "{metrics}"
        );
        // Nothing before the flood.
        assert!(
            rows.iter().all(|r| r["time"].as_u64() >= Some(second)),
            "{rows:?}"
        );
        // The packet-count alarm's pcap(s) hold exactly the window's
        // packets.
        let files: Vec<&str> = packets["pcap"].as_str().unwrap().split(',').collect();
        assert_eq!(files.len(), shards, "{packets}");
        let mut got = Vec::new();
        for f in &files {
            let bytes = std::fs::read(f).unwrap_or_else(|e| panic!("{f}: {e}"));
            got.extend(read_ns(&bytes));
        }
        got.sort();
        let mut want: Vec<(u64, Vec<u8>)> = window
            .iter()
            .map(|(us, b)| (us * 1000, b.clone()))
            .collect();
        want.sort();
        assert_eq!(got.len(), want.len());
        assert!(
            got == want,
            "the pcap holds other packets than the window's"
        );
    }
    let (quiet, _) = run(steady, &specs(), 1, None);
    assert!(quiet.is_empty(), "steady traffic raised {quiet:?}");
}
