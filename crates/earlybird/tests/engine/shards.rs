//! Sharding must not change what is measured: the same flow records
//! (record order aside) with 1, 2 and 3 shards, on real captures and on the
//! generated worst-case and realistic traffic. With several shards each
//! batch is read by one shard, which hands the others their packets
//! (`earlybird::exchange`); small batches make every capture many turns.

use crate::common;

use earlybird::{CaptureFile, GenKind, GenOptions, ModelRef, RunOptions};

fn check(files: &[CaptureFile], label: &str, batch: usize) -> usize {
    let run = |shards| {
        let opts = RunOptions {
            shards,
            batch,
            ..RunOptions::default()
        };
        earlybird::collect(files, &opts, &ModelRef::default()).unwrap()
    };
    let (one, r1) = run(1);
    for n in [2, 3] {
        let (many, rn) = run(n);
        assert_eq!(one.len(), many.len(), "{label}: flow count with {n} shards");
        assert!(one == many, "{label}: records differ with {n} shards");
        assert_eq!(
            r1.counters.packets_read, rn.counters.packets_read,
            "{label}"
        );
        assert_eq!(r1.counters.bytes_read, rn.counters.bytes_read, "{label}");
        assert_eq!(r1.counters.skipped, rn.counters.skipped, "{label}");
        assert_eq!(
            r1.counters.unsupported_link, rn.counters.unsupported_link,
            "{label}"
        );
        assert_eq!(
            r1.counters.packets_flowed, rn.counters.packets_flowed,
            "{label}"
        );
        let warnings =
            |r: &earlybird::Report| r.warnings.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        assert_eq!(warnings(&r1), warnings(&rn), "{label}");
        assert_eq!(r1.counters.flows.ended, rn.counters.flows.ended, "{label}");
    }
    one.len()
}

#[test]
fn generated_traffic_same_records_with_any_shard_count() {
    for kind in [GenKind::Worst, GenKind::Realistic] {
        let mut buf = Vec::new();
        earlybird::generate(&GenOptions::new(kind, 60_000), &mut buf).unwrap();
        let files = [CaptureFile::from_bytes("gen", buf).unwrap()];
        assert!(check(&files, "generated", 256) > 1000);
        assert!(check(&files, "generated", 61) > 1000);
    }
}

/// Adds `secs` to the timestamp of every record of a little-endian
/// classic pcap buffer.
fn shift_pcap(buf: &mut [u8], secs: u32) {
    let mut pos = 24;
    while pos + 16 <= buf.len() {
        let ts = u32::from_le_bytes(buf[pos..pos + 4].try_into().unwrap());
        buf[pos..pos + 4].copy_from_slice(&(ts + secs).to_le_bytes());
        let caplen = u32::from_le_bytes(buf[pos + 8..pos + 12].try_into().unwrap());
        pos += 16 + caplen as usize;
    }
}

/// Timestamps going backwards (the same traffic an hour later, then as it
/// was, in one run): flows of the second file meet flows of the first that
/// have timed out by the input's clock. Whether the sweep has reached such
/// a flow yet depends on the table, and so on the shard count; ending it
/// when its next packet arrives, by the same clock, keeps the records the
/// same.
#[test]
fn time_going_backwards_same_records_with_any_shard_count() {
    let mut buf = Vec::new();
    earlybird::generate(&GenOptions::new(GenKind::Realistic, 40_000), &mut buf).unwrap();
    let mut later = buf.clone();
    shift_pcap(&mut later, 3600);
    let files = [
        CaptureFile::from_bytes("later", later).unwrap(),
        CaptureFile::from_bytes("earlier", buf).unwrap(),
    ];
    for batch in [7, 256] {
        assert!(check(&files, "time going backwards", batch) > 1000);
    }
}

#[test]
fn real_captures_same_records_with_any_shard_count() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let mut flows = 0;
    let mut n = 0;
    for sub in ["classify/dev/ndpi/pcap", "tunnels"] {
        for f in common::captures(&corpus.join(sub)) {
            let Ok(cf) = CaptureFile::open(&f) else {
                continue;
            };
            flows += check(&[cf], &f.display().to_string(), 5);
            n += 1;
        }
    }
    // Several files in one run: the turns go on across files.
    let mut files = Vec::new();
    for f in common::captures(&corpus.join("tunnels")) {
        files.extend(CaptureFile::open(&f).ok());
    }
    assert!(files.len() > 10);
    assert!(check(&files, "all of tunnels/ in one run", 3) > 100);
    eprintln!("{n} captures, {flows} flows: identical records with 1, 2 and 3 shards");
    assert!(n > 200);
}
