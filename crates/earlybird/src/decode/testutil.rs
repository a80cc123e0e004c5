//! Test-only helpers: packet builders for whole-stack tests and a minimal
//! classic-pcap reader for the corpus tests. Compiled only under `cfg(test)`.

use std::path::{Path, PathBuf};

use super::LinkType;
use super::{decode, Decoded, Skip};

/// Decodes `p`, which must give a flow.
pub fn ok(link: LinkType, p: &[u8]) -> Decoded {
    let mut d = Decoded::default();
    match decode(link, p, &mut d) {
        Ok(()) => d,
        Err(e) => panic!("expected a flow, got {e:?} for {p:02x?}"),
    }
}

/// Decodes `p`, which must be skipped; the reason.
pub fn skip(link: LinkType, p: &[u8]) -> Skip {
    let mut d = Decoded::default();
    match decode(link, p, &mut d) {
        Ok(()) => panic!("expected a skip, got {d:?}"),
        Err(e) => e,
    }
}

pub const MAC_A: [u8; 6] = [0x00, 0x11, 0x22, 0x33, 0x44, 0x55];
pub const MAC_B: [u8; 6] = [0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb];
pub const V4_A: [u8; 4] = [192, 0, 2, 1];
pub const V4_B: [u8; 4] = [198, 51, 100, 7];
pub const V6_A: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
pub const V6_B: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// Ethernet header followed by `rest`.
pub fn eth(ethertype: u16, rest: &[u8]) -> Vec<u8> {
    let mut b = MAC_B.to_vec();
    b.extend_from_slice(&MAC_A);
    b.extend_from_slice(&ethertype.to_be_bytes());
    b.extend_from_slice(rest);
    b
}

/// 802.1Q-style tag (TCI = id) with the next EtherType, followed by `rest`.
pub fn tag(id: u16, next: u16, rest: &[u8]) -> Vec<u8> {
    let mut b = id.to_be_bytes().to_vec();
    b.extend_from_slice(&next.to_be_bytes());
    b.extend_from_slice(rest);
    b
}

/// IPv4 header (no options) with the right total length, then `payload`.
pub fn ipv4(proto: u8, payload: &[u8]) -> Vec<u8> {
    ipv4_frag(proto, 0x4000, payload)
}

/// IPv4 header with the given flags/fragment-offset word.
pub fn ipv4_frag(proto: u8, frag: u16, payload: &[u8]) -> Vec<u8> {
    let total = (20 + payload.len()) as u16;
    let mut b = vec![0x45, 0];
    b.extend_from_slice(&total.to_be_bytes());
    b.extend_from_slice(&[0x12, 0x34]);
    b.extend_from_slice(&frag.to_be_bytes());
    b.extend_from_slice(&[64, proto, 0, 0]);
    b.extend_from_slice(&V4_A);
    b.extend_from_slice(&V4_B);
    b.extend_from_slice(payload);
    b
}

/// IPv6 header with the right payload length, then `payload`.
pub fn ipv6(next: u8, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0x60, 0, 0, 0];
    b.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    b.extend_from_slice(&[next, 64]);
    b.extend_from_slice(&V6_A);
    b.extend_from_slice(&V6_B);
    b.extend_from_slice(payload);
    b
}

/// TCP header (data offset 5) with `flags`, then `payload`.
pub fn tcp(sport: u16, dport: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    tcp_seq(sport, dport, 1, flags, payload)
}

/// TCP header (data offset 5) with sequence number `seq` and `flags`,
/// then `payload`.
pub fn tcp_seq(sport: u16, dport: u16, seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut b = sport.to_be_bytes().to_vec();
    b.extend_from_slice(&dport.to_be_bytes());
    b.extend_from_slice(&seq.to_be_bytes());
    b.extend_from_slice(&[0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    b.extend_from_slice(payload);
    b
}

/// UDP header with the right length, then `payload`.
pub fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = sport.to_be_bytes().to_vec();
    b.extend_from_slice(&dport.to_be_bytes());
    b.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(payload);
    b
}

/// Concatenation.
pub fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// `$CARGO_MANIFEST_DIR/../../../shared/corpus`, when it exists.
pub fn corpus() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("skipping: corpus not found at {}", p.display());
        None
    }
}

/// Reads a classic pcap file (either byte order, µs or ns): link type and
/// the captured bytes of each record. `None` for pcapng or damaged headers;
/// a record cut short ends the list.
pub fn read_pcap(bytes: &[u8]) -> Option<(u32, Vec<Vec<u8>>)> {
    let magic = bytes.get(..4)?;
    let le = match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
        _ => return None,
    };
    let u32_at = |off: usize| -> Option<u32> {
        let w: [u8; 4] = bytes.get(off..off + 4)?.try_into().ok()?;
        Some(if le {
            u32::from_le_bytes(w)
        } else {
            u32::from_be_bytes(w)
        })
    };
    let linktype = u32_at(20)? & 0x0fff_ffff;
    let mut packets = Vec::new();
    let mut off = 24;
    while let Some(caplen) = u32_at(off + 8) {
        let start = off + 16;
        let Some(p) = bytes.get(start..start + caplen as usize) else {
            break;
        };
        packets.push(p.to_vec());
        off = start + caplen as usize;
    }
    Some((linktype, packets))
}

/// Reads a corpus capture by its path under the corpus root.
pub fn corpus_pcap(rel: &str) -> Option<(u32, Vec<Vec<u8>>)> {
    let root = corpus()?;
    let bytes = std::fs::read(root.join(rel)).ok()?;
    read_pcap(&bytes)
}

/// The classic-pcap captures directly in the folders `dirs` of the corpus
/// at `root` whose link type earlybird decodes: path, link type and the
/// captured bytes of each record. Missing folders, unreadable files,
/// pcapng and other files are passed over.
pub fn corpus_pcaps<'a>(
    root: &'a Path,
    dirs: &'a [&str],
) -> impl Iterator<Item = (PathBuf, LinkType, Vec<Vec<u8>>)> + 'a {
    dirs.iter()
        .filter_map(|d| std::fs::read_dir(root.join(d)).ok())
        .flat_map(|entries| entries.flatten())
        .filter_map(|e| {
            let bytes = std::fs::read(e.path()).ok()?;
            let (link, frames) = read_pcap(&bytes)?;
            Some((e.path(), LinkType::from_pcap(link)?, frames))
        })
}
