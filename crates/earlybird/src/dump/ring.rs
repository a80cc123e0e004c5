//! A bounded ring of recent packets, for the pcap an alarm writes
//! (forensics: the packets of the last T seconds before it).
//!
//! Contract:
//! - [`PacketRing::new`] sets the window (`window` ns of packet time) and
//!   the byte bound (captured bytes kept); all memory is reserved there:
//!   [`PacketRing::push`] copies the packet's captured bytes into it and
//!   allocates nothing once the packet index has grown to its steady size.
//! - [`PacketRing::push`] first forgets the oldest packets stamped more
//!   than `window` before the new one, then as many more of the oldest as
//!   the new packet's bytes need. A packet larger than the byte bound is
//!   not kept ([`PacketRing::too_large`]). Packets are kept in push order.
//! - [`PacketRing::write_window`] writes the packets kept whose timestamps
//!   are in `[from, to]`, in push order, to a new classic pcap
//!   (nanosecond stamps, snaplen 262,144, the link type of the first of
//!   them; packets of another link type are left out and counted in the
//!   result) and returns how many it wrote. Errors are
//!   [`Error::Output`] naming the file.

use std::collections::VecDeque;
use std::path::Path;

use crate::decode::LinkType;
use crate::error::{Error, Result};
use crate::source::pcap_writer::{linktype_number, PcapOut, MAX_SNAPLEN};
use crate::time::Nanos;

/// One packet kept.
#[derive(Debug, Clone, Copy)]
struct Meta {
    ts: Nanos,
    orig_len: u32,
    link: LinkType,
    /// Where its bytes start in the ring (absolute offset, see `head`).
    start: u64,
    len: u32,
}

/// The ring (see the module docs).
pub struct PacketRing {
    window: Nanos,
    cap: usize,
    bytes: Box<[u8]>,
    /// Absolute offset of the oldest byte kept and one past the newest.
    head: u64,
    tail: u64,
    meta: VecDeque<Meta>,
    too_large: u64,
}

/// What [`PacketRing::write_window`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    /// Packets written to the file.
    pub packets: u64,
    /// Packets in the window left out: another link type than the first.
    pub other_link: u64,
}

impl PacketRing {
    /// A ring keeping the packets of the last `window` ns, at most
    /// `max_bytes` captured bytes of them.
    pub fn new(window: Nanos, max_bytes: usize) -> PacketRing {
        PacketRing {
            window,
            cap: max_bytes,
            bytes: vec![0u8; max_bytes].into_boxed_slice(),
            head: 0,
            tail: 0,
            meta: VecDeque::new(),
            too_large: 0,
        }
    }

    /// Keeps a copy of a packet: captured `bytes` of link type `link`,
    /// stamped `ts`, `orig_len` bytes on the wire.
    #[inline]
    pub fn push(&mut self, ts: Nanos, bytes: &[u8], orig_len: u32, link: LinkType) {
        let len = bytes.len();
        if len > self.cap || len > MAX_SNAPLEN as usize {
            self.too_large += 1;
            return;
        }
        while let Some(m) = self.meta.front() {
            let old = m.ts.saturating_add(self.window) < ts;
            let full = (self.tail - self.head) as usize + len > self.cap;
            if !old && !full {
                break;
            }
            self.meta.pop_front();
            self.head = self.meta.front().map_or(self.tail, |n| n.start);
        }
        if self.meta.is_empty() {
            self.head = self.tail;
        }
        let at = (self.tail % self.cap.max(1) as u64) as usize;
        let first = len.min(self.cap - at);
        self.bytes[at..at + first].copy_from_slice(&bytes[..first]);
        self.bytes[..len - first].copy_from_slice(&bytes[first..]);
        self.meta.push_back(Meta {
            ts,
            orig_len,
            link,
            start: self.tail,
            len: len as u32,
        });
        self.tail += len as u64;
    }

    /// Packets kept now.
    pub fn len(&self) -> usize {
        self.meta.len()
    }

    /// Whether no packet is kept.
    pub fn is_empty(&self) -> bool {
        self.meta.is_empty()
    }

    /// Packets not kept because they were larger than the byte bound.
    pub fn too_large(&self) -> u64 {
        self.too_large
    }

    /// The captured bytes of packet `m`, in one or two pieces.
    fn pieces(&self, m: &Meta) -> (&[u8], &[u8]) {
        let at = (m.start % self.cap.max(1) as u64) as usize;
        let len = m.len as usize;
        let first = len.min(self.cap - at);
        (&self.bytes[at..at + first], &self.bytes[..len - first])
    }

    /// Writes the packets kept stamped in `[from, to]` to a new pcap at
    /// `path` (see the module docs).
    pub fn write_window(&self, path: &Path, from: Nanos, to: Nanos) -> Result<Written> {
        let fail = |reason: String| Error::Output {
            name: path.display().to_string(),
            reason,
        };
        let inside = || self.meta.iter().filter(|m| m.ts >= from && m.ts <= to);
        let link = inside().next().map_or(LinkType::Ethernet, |m| m.link);
        let file = std::fs::File::create(path).map_err(|e| fail(format!("cannot create: {e}")))?;
        let mut out = PcapOut::with_linktype(file, true, MAX_SNAPLEN, linktype_number(link))
            .map_err(|e| fail(e.to_string()))?;
        let mut w = Written::default();
        for m in inside() {
            if m.link != link {
                w.other_link += 1;
                continue;
            }
            let (a, b) = self.pieces(m);
            out.record_with(m.ts, m.orig_len, a.len() + b.len(), |dst| {
                dst[..a.len()].copy_from_slice(a);
                dst[a.len()..].copy_from_slice(b);
            })
            .map_err(|e| fail(e.to_string()))?;
            w.packets += 1;
        }
        out.finish().map_err(|e| fail(e.to_string()))?;
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{CaptureFile, BATCH};

    fn read(path: &Path) -> Vec<(u64, u32, Vec<u8>)> {
        let file = CaptureFile::open(path).unwrap();
        let mut r = file.reader();
        let mut batch = Vec::new();
        let mut all = Vec::new();
        while r.next_batch(&mut batch, BATCH) > 0 {
            for p in &batch {
                all.push((p.ts, p.orig_len, p.bytes(r.data()).to_vec()));
            }
        }
        all
    }

    fn pkt(i: u64, len: usize) -> Vec<u8> {
        (0..len).map(|j| (i as usize * 7 + j) as u8).collect()
    }

    const S: u64 = 1_000_000_000;

    #[test]
    fn keeps_the_last_seconds_and_writes_a_window() {
        let dir = tempfile::tempdir().unwrap();
        let mut ring = PacketRing::new(3 * S, 1 << 20);
        // One packet every 100 ms for 10 s.
        for i in 0..100u64 {
            ring.push(
                i * S / 10,
                &pkt(i, 60 + i as usize),
                1000,
                LinkType::Ethernet,
            );
        }
        // Kept: stamped no more than 3 s before the last (9.9 s): 6.9 s on.
        assert_eq!(ring.len(), 31);
        assert!(!ring.is_empty() && PacketRing::new(S, 100).is_empty());
        let path = dir.path().join("w.pcap");
        let w = ring.write_window(&path, 8 * S, 9 * S).unwrap();
        assert_eq!(
            w,
            Written {
                packets: 11,
                other_link: 0
            }
        );
        let back = read(&path);
        assert_eq!(back.len(), 11);
        for (k, (ts, orig, bytes)) in back.iter().enumerate() {
            let i = 80 + k as u64;
            assert_eq!((*ts, *orig), (i * S / 10, 1000));
            assert_eq!(bytes, &pkt(i, 60 + i as usize));
        }
        // A window before what is kept is empty, not an error.
        let w = ring.write_window(&path, 0, S).unwrap();
        assert_eq!(w.packets, 0);
        assert_eq!(read(&path).len(), 0);
    }

    #[test]
    fn the_byte_bound_forgets_the_oldest_and_wraps_intact() {
        let dir = tempfile::tempdir().unwrap();
        // 1000 bytes: at most 9 packets of 100 (wrapping around the end).
        let mut ring = PacketRing::new(3600 * S, 1000);
        for i in 0..57u64 {
            ring.push(i, &pkt(i, 100 + (i % 3) as usize), 200, LinkType::Ethernet);
        }
        assert!(ring.len() <= 10 && ring.len() >= 9, "{}", ring.len());
        let path = dir.path().join("b.pcap");
        let w = ring.write_window(&path, 0, u64::MAX).unwrap();
        assert_eq!(w.packets as usize, ring.len());
        let back = read(&path);
        let first = 57 - back.len() as u64;
        for (k, (ts, _, bytes)) in back.iter().enumerate() {
            let i = first + k as u64;
            assert_eq!(*ts, i);
            assert_eq!(bytes, &pkt(i, 100 + (i % 3) as usize), "packet {i}");
        }
        ring.push(99, &[0; 1001], 1001, LinkType::Ethernet);
        assert_eq!(ring.too_large(), 1);
    }

    #[test]
    fn other_link_types_are_left_out_and_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut ring = PacketRing::new(10 * S, 4096);
        ring.push(1, &pkt(1, 40), 40, LinkType::Raw);
        ring.push(2, &pkt(2, 60), 60, LinkType::Ethernet);
        ring.push(3, &pkt(3, 40), 40, LinkType::Raw);
        let path = dir.path().join("l.pcap");
        let w = ring.write_window(&path, 0, 10).unwrap();
        assert_eq!(
            w,
            Written {
                packets: 2,
                other_link: 1
            }
        );
        let e = ring
            .write_window(&dir.path().join("no/such.pcap"), 0, 10)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no/such.pcap"), "{e}");
    }
}
