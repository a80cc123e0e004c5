//! Test-only pcap walker for the generator's tests.
//!
//! Contract: parses a little-endian classic pcap held in memory into
//! records and a few decoded fields (IPv4 addresses, protocol, ports, TCP
//! flags). It is deliberately independent of the engine's own readers, so a
//! bug in one cannot hide a bug in the other. Panics on malformed input,
//! which in a test is a failure.

use super::frame::{ETH_LEN, L4_OFF};

/// One record of a pcap file.
#[derive(Debug, Clone)]
pub(super) struct Rec<'a> {
    /// Timestamp in nanoseconds (microsecond files are scaled up).
    pub ts_ns: u64,
    pub orig_len: u32,
    pub data: &'a [u8],
}

/// The global header fields the tests look at.
#[derive(Debug, Clone, Copy)]
pub(super) struct Header {
    pub nanos: bool,
    pub snaplen: u32,
    pub linktype: u32,
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// Splits a pcap into its header and records.
pub(super) fn walk(file: &[u8]) -> (Header, Vec<Rec<'_>>) {
    let magic = le32(file, 0);
    let nanos = match magic {
        0xA1B2_C3D4 => false,
        0xA1B2_3C4D => true,
        m => panic!("bad magic {m:#x}"),
    };
    assert_eq!(&file[4..8], &[2, 0, 4, 0], "version 2.4");
    let hdr = Header {
        nanos,
        snaplen: le32(file, 16),
        linktype: le32(file, 20),
    };
    let mut recs = Vec::new();
    let mut at = 24;
    while at < file.len() {
        let secs = u64::from(le32(file, at));
        let frac = u64::from(le32(file, at + 4));
        let caplen = le32(file, at + 8) as usize;
        let orig_len = le32(file, at + 12);
        assert!(frac < if nanos { 1_000_000_000 } else { 1_000_000 });
        let ts_ns = secs * 1_000_000_000 + if nanos { frac } else { frac * 1000 };
        let data = &file[at + 16..at + 16 + caplen];
        recs.push(Rec {
            ts_ns,
            orig_len,
            data,
        });
        at += 16 + caplen;
    }
    assert_eq!(at, file.len(), "file ends inside a record");
    (hdr, recs)
}

/// The fields of an Ethernet/IPv4 packet the tests check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Pkt {
    pub src: u32,
    pub dst: u32,
    pub proto: u8,
    pub ip_len: u16,
    pub sport: u16,
    pub dport: u16,
    /// TCP flags (0 for UDP).
    pub flags: u8,
}

/// Decodes the headers of a generated frame (needs the first 38 bytes).
pub(super) fn decode(frame: &[u8]) -> Pkt {
    assert_eq!(&frame[12..14], &[0x08, 0x00], "IPv4 EtherType");
    let ip = &frame[ETH_LEN..];
    assert_eq!(ip[0], 0x45);
    let l4 = &frame[L4_OFF..];
    Pkt {
        src: u32::from_be_bytes(ip[12..16].try_into().unwrap()),
        dst: u32::from_be_bytes(ip[16..20].try_into().unwrap()),
        proto: ip[9],
        ip_len: u16::from_be_bytes([ip[2], ip[3]]),
        sport: u16::from_be_bytes([l4[0], l4[1]]),
        dport: u16::from_be_bytes([l4[2], l4[3]]),
        flags: if ip[9] == 6 { l4[13] } else { 0 },
    }
}
