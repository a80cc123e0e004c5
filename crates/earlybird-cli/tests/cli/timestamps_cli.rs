//! `earlybird flows --timestamps udts|wdts|off`: a batch-stamped copy of a
//! capture is warned about and counted in the summary when the correction
//! is on, off reports nothing new, and several shards give the records
//! one shard gives.

use crate::common;

use std::path::{Path, PathBuf};

use common::eb;

/// `testdata/pcap/ndpi__iphone.pcap` (classic, little-endian, µs) with
/// every batch of 32 packets stamped as its last packet, written to `to`.
fn batch_stamped(to: &Path) -> PathBuf {
    let from =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pcap/ndpi__iphone.pcap");
    let b = std::fs::read(&from).unwrap();
    assert_eq!(&b[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
    let mut at = 24;
    let mut starts = Vec::new();
    while at + 16 <= b.len() {
        starts.push(at);
        at += 16 + u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
    }
    let mut out = b.clone();
    for chunk in starts.chunks(32) {
        let last = *chunk.last().unwrap();
        let stamp: [u8; 8] = b[last..last + 8].try_into().unwrap();
        for &s in chunk {
            out[s..s + 8].copy_from_slice(&stamp);
        }
    }
    std::fs::write(to, out).unwrap();
    to.to_path_buf()
}

#[test]
fn timestamps_warn_count_and_give_one_shard_records_with_several() {
    let dir = tempfile::tempdir().unwrap();
    let copy = batch_stamped(&dir.path().join("batched.pcap"));
    let copy = copy.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut a = vec!["flows", copy, "--no-model", "-f", "null"];
        a.extend_from_slice(extra);
        eb(&a)
    };
    let (code, _, err) = run(&["--timestamps", "udts"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("looks batch-stamped"), "{err}");
    assert!(err.contains("spread with udts"), "{err}");
    assert!(err.contains("time: 1 input looks batch-stamped"), "{err}");
    assert!(err.contains("given a new time by --timestamps"), "{err}");
    let (code, _, err) = run(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !err.contains("batch-stamped") && !err.contains("--timestamps"),
        "{err}"
    );
    // Any shard count: the same records (order aside) as one shard.
    let sorted = |out: String| {
        let mut l: Vec<String> = out.lines().map(str::to_string).collect();
        l.sort();
        l
    };
    let csv = |shards: &str| {
        eb(&[
            "flows",
            copy,
            "--no-model",
            "-f",
            "csv",
            "--timestamps",
            "wdts",
            "-s",
            shards,
        ])
    };
    let (code, one, err) = csv("1");
    assert_eq!(code, 0, "{err}");
    let (code, two, err) = csv("2");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("time: 1 input looks batch-stamped"), "{err}");
    assert!(one.lines().count() > 10);
    assert_eq!(sorted(one), sorted(two));
    let (code, _, err) = run(&["--timestamps", "kpt"]);
    assert_eq!(code, 2, "{err}");
}
