//! Sharding must not change what is measured: the same flow records
//! (record order aside) with 1, 2 and 3 shards, on real captures and on the
//! generated worst-case and realistic traffic.

mod common;

use earlybird::gen::{self, GenKind, GenOptions};
use earlybird::pipeline::{self, ModelRef, RunOptions};
use earlybird::source::CaptureFile;

fn check(files: &[CaptureFile], label: &str) -> usize {
    let run = |shards| {
        let opts = RunOptions {
            shards,
            ..RunOptions::default()
        };
        pipeline::collect(files, &opts, &ModelRef::default()).unwrap()
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
        assert_eq!(r1.counters.skipped, rn.counters.skipped, "{label}");
        assert_eq!(r1.counters.flows.ended, rn.counters.flows.ended, "{label}");
    }
    one.len()
}

#[test]
fn generated_traffic_same_records_with_any_shard_count() {
    for kind in [GenKind::Worst, GenKind::Realistic] {
        let mut buf = Vec::new();
        gen::generate(&GenOptions::new(kind, 60_000), &mut buf).unwrap();
        let files = [CaptureFile::from_bytes("gen", buf).unwrap()];
        assert!(check(&files, "generated") > 1000);
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
            flows += check(&[cf], &f.display().to_string());
            n += 1;
        }
    }
    eprintln!("{n} captures, {flows} flows: identical records with 1, 2 and 3 shards");
    assert!(n > 200);
}
