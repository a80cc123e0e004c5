//! Marking real captures of the shared corpus (skipped with a message when
//! the corpus is absent): every IPv4/IPv6 packet gets DSCP 46 and the output
//! read back differs from the input only in the DSCP bits and the IPv4
//! header checksum.

use std::path::PathBuf;

use super::dscp::{ones_complement_sum, read_dscp};
use super::pcap_out::{input_linktype, MarkWriter};
use crate::decode::LinkType;
use crate::decode::{decode, Decoded};
use crate::source::{CaptureFile, BATCH};

/// Small captures covering Ethernet IPv4/IPv6, IP-in-IP, GRE (pcapng) and
/// VXLAN.
const FILES: [&str; 6] = [
    "443-curl.pcap",
    "quic-29.pcap",
    "4in6tunnel.pcap",
    "6in4tunnel.pcap",
    "gre.pcapng",
    "vxlan.pcap",
];

fn corpus_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus/classify/dev/ndpi/pcap");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipping: corpus not found at {}", dir.display());
        None
    }
}

struct Pkt {
    ts: u64,
    orig_len: u32,
    link: LinkType,
    bytes: Vec<u8>,
}

fn packets(file: &CaptureFile) -> Vec<Pkt> {
    let mut r = file.reader();
    let mut batch = Vec::with_capacity(BATCH);
    let mut all = Vec::new();
    while r.next_batch(&mut batch, BATCH) > 0 {
        for p in &batch {
            all.push(Pkt {
                ts: p.ts,
                orig_len: p.orig_len,
                link: p.link,
                bytes: p.bytes(r.data()).to_vec(),
            });
        }
    }
    all
}

#[test]
fn marking_real_captures_changes_only_dscp_and_ipv4_checksum() {
    let Some(dir) = corpus_dir() else { return };
    let out_dir =
        std::env::temp_dir().join(format!("earlybird-mark-corpus-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir).unwrap();
    let mut totals = [0u64; 3]; // marked v4, marked v6, checksums checked
    for name in FILES {
        let input = CaptureFile::open(&dir.join(name)).unwrap();
        let pkts = packets(&input);
        assert!(!pkts.is_empty(), "{name}: no packets");
        let out_path = out_dir.join(format!("{name}.marked.pcap"));
        let mut w = MarkWriter::create(&out_path, input_linktype(&input, pkts[0].link)).unwrap();
        let mut marks = Vec::with_capacity(pkts.len());
        let mut d = Decoded::default();
        for p in &pkts {
            let mark = match decode(p.link, &p.bytes, &mut d) {
                Ok(()) if d.ip_version == 4 || d.ip_version == 6 => {
                    Some((usize::from(d.ip_offset), d.ip_version, 46))
                }
                _ => None,
            };
            if p.link == pkts[0].link {
                marks.push(mark);
            }
            w.write(p.link, p.ts, p.orig_len, &p.bytes, mark).unwrap();
        }
        let counters = w.finish().unwrap();
        let expected: Vec<&Pkt> = pkts.iter().filter(|p| p.link == pkts[0].link).collect();
        assert_eq!(counters.skipped_oversize, 0, "{name}");
        assert_eq!(counters.skipped_link as usize, pkts.len() - expected.len());
        assert_eq!(
            counters.unmarkable, 0,
            "{name}: decodable headers are captured"
        );

        let output = CaptureFile::open(&out_path).unwrap();
        let back = packets(&output);
        assert_eq!(back.len(), expected.len(), "{name}: packet count");
        assert_eq!(counters.written() as usize, back.len());
        for (i, ((orig, out), mark)) in expected.iter().zip(&back).zip(&marks).enumerate() {
            let at = format!("{name} packet {}", i + 1);
            assert_eq!(
                (out.ts, out.orig_len, out.link),
                (orig.ts, orig.orig_len, orig.link),
                "{at}"
            );
            assert_eq!(out.bytes.len(), orig.bytes.len(), "{at}");
            let allowed: &[usize] = match *mark {
                None => &[],
                Some((off, 4, _)) => &[off + 1, off + 10, off + 11],
                Some((off, _, _)) => &[off, off + 1],
            };
            for (j, (a, b)) in orig.bytes.iter().zip(&out.bytes).enumerate() {
                assert!(a == b || allowed.contains(&j), "{at}: byte {j} changed");
            }
            let Some((off, version, _)) = *mark else {
                continue;
            };
            assert_eq!(read_dscp(&out.bytes, off, version), Some(46), "{at}");
            let ecn = |b: &[u8]| {
                if version == 4 {
                    b[off + 1] & 3
                } else {
                    (b[off + 1] >> 4) & 3
                }
            };
            assert_eq!(ecn(&out.bytes), ecn(&orig.bytes), "{at}: ECN");
            if version == 6 {
                totals[1] += 1;
                continue;
            }
            totals[0] += 1;
            let ihl = usize::from(orig.bytes[off] & 0x0f) * 4;
            if ones_complement_sum(&orig.bytes[off..off + ihl]) == 0 {
                assert_eq!(
                    ones_complement_sum(&out.bytes[off..off + ihl]),
                    0,
                    "{at}: checksum"
                );
                totals[2] += 1;
            }
        }
    }
    std::fs::remove_dir_all(&out_dir).unwrap();
    eprintln!(
        "marked {} IPv4 ({} with checksums verified) and {} IPv6 packets",
        totals[0], totals[2], totals[1]
    );
    assert!(totals[0] > 0 && totals[1] > 0 && totals[2] > 0);
}
