//! Decoder tests over the real captures of the shared corpus (skipped with a
//! message when the corpus is absent).

use super::testutil::{corpus, corpus_pcap, read_pcap};
use super::{decode, Decoded, Skip};
use crate::source::LinkType;

/// Decodes every packet of a corpus file: per packet Ok(decoded) or the skip.
fn decode_file(rel: &str) -> Option<Vec<Result<Decoded, Skip>>> {
    let (linktype, packets) = corpus_pcap(rel)?;
    let link = LinkType::from_pcap(linktype).expect("supported link type");
    Some(
        packets
            .iter()
            .map(|p| {
                let mut d = Decoded::default();
                decode(link, p, &mut d).map(|()| d)
            })
            .collect(),
    )
}

/// Every classic-pcap file of the corpus with a supported link type decodes
/// without a panic.
#[test]
fn whole_corpus_never_panics() {
    let Some(root) = corpus() else { return };
    let mut files = 0;
    let mut packets = 0u64;
    let mut stack = vec![root];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let Ok(bytes) = std::fs::read(&path) else { continue };
            let Some((linktype, pkts)) = read_pcap(&bytes) else { continue };
            let Some(link) = LinkType::from_pcap(linktype) else { continue };
            files += 1;
            let mut d = Decoded::default();
            for p in &pkts {
                let _ = decode(link, p, &mut d);
                packets += 1;
            }
        }
    }
    eprintln!("decoded {packets} packets from {files} files");
    assert!(files > 100);
}
