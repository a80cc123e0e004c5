//! `-w OUT.pcap` without marking: a copy of every packet read, in input
//! order — the same bytes, original lengths and timestamps as the input,
//! read back through the capture reader — whatever the shard count, also
//! across several files and with small batches (many turns, so with two
//! shards each shard reads some of them).

use crate::common;

use earlybird::{CaptureFile, ModelRef, RunOptions};

/// (timestamp ns, original length, captured bytes) of every packet.
fn packets(f: &CaptureFile) -> Vec<(u64, u32, Vec<u8>)> {
    let mut r = f.reader();
    let mut all = Vec::new();
    let mut batch = Vec::new();
    while r.next_batch(&mut batch, 256) > 0 {
        for p in &batch {
            all.push((p.ts, p.orig_len, p.bytes(f.bytes()).to_vec()));
        }
    }
    all
}

#[test]
fn write_without_mark_copies_every_packet_in_input_order() {
    let names = [
        "ndpi__iphone.pcap",
        "ndpi__vxlan.pcap",
        "arkime__v6-http.pcap",
    ];
    let paths: Vec<_> = names
        .iter()
        .map(|n| common::testdata().join("pcap").join(n))
        .collect();
    let files = earlybird::open_all(&paths).unwrap();
    let want: Vec<_> = files.iter().flat_map(packets).collect();
    assert!(want.len() > 600);
    let tmp = tempfile::Builder::new()
        .prefix("eb-write-")
        .tempdir()
        .unwrap();
    for (shards, batch) in [(1, 256), (2, 256), (2, 3), (3, 5)] {
        let out = tmp.path().join(format!("copy-{shards}-{batch}.pcap"));
        let opts = RunOptions {
            shards,
            batch,
            write: Some(out.clone()),
            ..RunOptions::default()
        };
        let (flows, report) = earlybird::collect(&files, &opts, &ModelRef::default()).unwrap();
        assert!(!flows.is_empty());
        assert!(
            report.output_errors.is_empty(),
            "{:?}",
            report.output_errors
        );
        let written = report.marked.expect("counters of the pcap written");
        assert_eq!(written.written(), want.len() as u64, "{shards} shards");
        assert_eq!((written.marked, written.unmarkable), (0, 0));
        let got = packets(&CaptureFile::open(&out).unwrap());
        assert_eq!(got.len(), want.len(), "{shards} shards, batch {batch}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                g == w,
                "packet {i} differs ({shards} shards, batch {batch})"
            );
        }
        let text = report.to_string();
        assert!(
            text.contains(&format!("pcap written: {} packets", want.len())),
            "{text}"
        );
    }
    // Marking still needs one shard.
    let opts = RunOptions {
        shards: 2,
        write: Some(tmp.path().join("m.pcap")),
        mark: Some(tmp.path().join("map.toml")),
        ..RunOptions::default()
    };
    let e = earlybird::collect(&files, &opts, &ModelRef::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("needs one shard"), "{e}");
}
