//! DSCP marking end to end on a real capture with the shipped default model:
//! every packet is written in input order; a packet gets its flow's class
//! DSCP exactly when it comes after the packet at which the verdict was
//! taken; every other byte is unchanged.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;

use earlybird::testing::{decode, read_dscp, Decoded, Key};
use earlybird::{CaptureFile, Classifier, Model, ModelRef, PacketRef, RunOptions, Verdict};

fn packets(f: &CaptureFile) -> Vec<PacketRef> {
    let mut r = f.reader();
    let mut all = Vec::new();
    let mut batch = Vec::new();
    while r.next_batch(&mut batch, 256) > 0 {
        all.extend_from_slice(&batch);
    }
    all
}

#[test]
fn marks_exactly_the_packets_after_the_verdict() {
    let input = common::testdata().join("pcap/ndpi__iphone.pcap");
    let model_path = common::testdata().join("../models/default.ebm");
    let model = Model::load(&model_path).unwrap();
    let classes: Arc<[String]> = model.classes().to_vec().into();
    let mref = ModelRef {
        model: Some(Arc::new(model)),
        classes: classes.clone(),
    };
    let tmp = tempfile::Builder::new()
        .prefix("eb-mark-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let map = dir.join("map.toml");
    std::fs::write(
        &map,
        "default = \"CS1\"\n[classes]\nunknown = 0\nDNS = \"EF\"\nTLS = \"AF41\"\n",
    )
    .unwrap();
    let out = dir.join("out.pcap");
    let files = [CaptureFile::open(&input).unwrap()];
    let opts = RunOptions {
        write: Some(out.clone()),
        mark: Some(map),
        ..RunOptions::default()
    };
    let (flows, report) = earlybird::collect(&files, &opts, &mref).unwrap();
    let m = report.marked.expect("marking counters");
    assert!(m.marked > 50, "{m:?}");

    let dscp_of = |class: u16| -> u8 {
        if class == Verdict::UNKNOWN {
            return 0;
        }
        match classes[class as usize].as_str() {
            "DNS" => 46,
            "TLS" => 34,
            _ => 8,
        }
    };
    let written = CaptureFile::open(&out).unwrap();
    let (a, b) = (packets(&files[0]), packets(&written));
    assert_eq!(a.len(), b.len(), "every packet is written");
    let mut seen: HashMap<(Key, u64), u32> = HashMap::new();
    let (mut checked, mut marked) = (0, 0);
    let mut d = Decoded::default();
    for (pa, pb) in a.iter().zip(&b) {
        let (ba, bb) = (pa.bytes(files[0].bytes()), pb.bytes(written.bytes()));
        assert_eq!(ba.len(), bb.len());
        assert_eq!((pa.ts, pa.orig_len), (pb.ts, pb.orig_len));
        if decode(pa.link, ba, &mut d).is_err() {
            assert_eq!(ba, bb, "packets outside flows are copied unchanged");
            continue;
        }
        let (key, _) = Key::from_decoded(&d, true);
        // The flow record this packet belongs to: same key, time inside it.
        let rec = flows
            .iter()
            .map(|f| &f.record)
            .find(|r| {
                let (k, _) = Key::from_decoded(
                    &Decoded {
                        src: r.key.src,
                        dst: r.key.dst,
                        sport: r.key.sport,
                        dport: r.key.dport,
                        proto: r.key.proto,
                        vlan: r.key.vlan,
                        tunnel: r.key.tunnel,
                        tunnel_id: r.key.tunnel_id,
                        ..Default::default()
                    },
                    true,
                );
                k == key && r.first_ts <= pa.ts && pa.ts <= r.last_ts
            })
            .expect("a record for every flow packet");
        let n = seen.entry((key, rec.first_ts)).or_default();
        *n += 1;
        let off = d.ip_offset as usize;
        let before = read_dscp(ba, off, d.ip_version).unwrap();
        let after = read_dscp(bb, off, d.ip_version).unwrap();
        let decided = rec.verdict.at_packet > 0 && *n > rec.verdict.at_packet as u32;
        let want = if decided {
            dscp_of(rec.verdict.class)
        } else {
            before
        };
        assert_eq!(
            after, want,
            "packet {} of its flow, verdict {:?}",
            n, rec.verdict
        );
        if after != before {
            marked += 1;
        }
        // Only the DSCP/ECN byte(s) and the IPv4 checksum may differ.
        for (i, (x, y)) in ba.iter().zip(bb).enumerate() {
            let allowed = if d.ip_version == 4 {
                i == off + 1 || i == off + 10 || i == off + 11
            } else {
                i == off || i == off + 1
            };
            assert!(x == y || allowed, "byte {i} changed");
        }
        checked += 1;
    }
    assert!(
        checked > 400 && marked > 0,
        "{checked} checked, {marked} changed"
    );
}
