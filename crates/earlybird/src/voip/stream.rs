//! One direction of a TCP connection put back in order, bounded, for the
//! protocols read as byte streams (SIP over TCP).
//!
//! Contract: [`Reassembly::segment`] takes a segment's sequence number and
//! payload in any order. Bytes at the next expected sequence number are
//! appended to the contiguous data ([`Reassembly::data`]); bytes already
//! received (retransmissions, overlaps) are dropped and counted; bytes
//! ahead of a gap wait in a window of at most `window` bytes, and a
//! segment that would exceed it is dropped and counted. The first segment
//! seen sets the start (a capture may begin mid-connection); a SYN's
//! sequence number + 1 does too. [`Reassembly::consume`] removes bytes a
//! parser has read; the contiguous data is bounded by `window` as well
//! (bytes that no parser takes are dropped and counted once it is full),
//! so memory per stream never exceeds twice the window. Sequence numbers
//! wrap (RFC 793 arithmetic). Never panics.

use std::collections::BTreeMap;

/// What a stream dropped, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamCounters {
    /// Bytes received again (retransmitted or overlapping).
    pub duplicate_bytes: u64,
    /// Out-of-order bytes dropped because the window was full.
    pub window_dropped_bytes: u64,
    /// Contiguous bytes dropped because no parser consumed them.
    pub unread_dropped_bytes: u64,
}

/// One direction of a TCP stream (see the module docs).
#[derive(Debug, Clone)]
pub struct Reassembly {
    window: usize,
    /// Sequence number of the first byte of `buf`.
    start: Option<u32>,
    buf: Vec<u8>,
    /// Out-of-order segments by sequence number.
    ahead: BTreeMap<u32, Vec<u8>>,
    ahead_bytes: usize,
    /// Drops, by reason.
    pub counters: StreamCounters,
}

/// `a - b` in sequence space, as a signed distance.
fn dist(a: u32, b: u32) -> i64 {
    i64::from(a.wrapping_sub(b) as i32)
}

impl Reassembly {
    /// A stream that holds at most `window` bytes ahead of a gap and
    /// `window` bytes of unread data.
    pub fn new(window: usize) -> Reassembly {
        Reassembly {
            window,
            start: None,
            buf: Vec::new(),
            ahead: BTreeMap::new(),
            ahead_bytes: 0,
            counters: StreamCounters::default(),
        }
    }

    /// The contiguous bytes not consumed yet.
    pub fn data(&self) -> &[u8] {
        &self.buf
    }

    /// Removes the first `n` bytes of [`Reassembly::data`].
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.buf.len());
        self.buf.drain(..n);
        if let Some(s) = self.start.as_mut() {
            *s = s.wrapping_add(n as u32);
        }
    }

    /// Bytes waiting beyond a gap.
    pub fn pending(&self) -> usize {
        self.ahead_bytes
    }

    /// Sequence number the next in-order byte will have (`None` before
    /// the first segment).
    pub fn next_seq(&self) -> Option<u32> {
        self.next()
    }

    /// Sequence number the next in-order byte will have.
    fn next(&self) -> Option<u32> {
        self.start.map(|s| s.wrapping_add(self.buf.len() as u32))
    }

    /// Takes one segment (see the module docs); `syn` when it carries the
    /// SYN flag (its data, if any, starts at `seq + 1`).
    pub fn segment(&mut self, seq: u32, syn: bool, data: &[u8]) {
        let seq = if syn { seq.wrapping_add(1) } else { seq };
        if self.start.is_none() || (syn && self.buf.is_empty() && self.ahead.is_empty()) {
            self.start = Some(seq);
        }
        if data.is_empty() {
            return;
        }
        let Some(next) = self.next() else { return };
        let d = dist(seq, next);
        if d <= 0 {
            // Starts at or before the next byte: skip what was had.
            let had = (-d) as usize;
            if had >= data.len() {
                self.counters.duplicate_bytes += data.len() as u64;
                return;
            }
            self.counters.duplicate_bytes += had as u64;
            self.append(&data[had..]);
            self.drain_ahead();
        } else {
            if self.ahead_bytes + data.len() > self.window {
                self.counters.window_dropped_bytes += data.len() as u64;
                return;
            }
            match self.ahead.get(&seq) {
                Some(old) if old.len() >= data.len() => {
                    self.counters.duplicate_bytes += data.len() as u64;
                }
                _ => {
                    if let Some(old) = self.ahead.insert(seq, data.to_vec()) {
                        self.ahead_bytes -= old.len();
                        self.counters.duplicate_bytes += old.len() as u64;
                    }
                    self.ahead_bytes += data.len();
                }
            }
        }
    }

    fn append(&mut self, bytes: &[u8]) {
        let room = self.window.saturating_sub(self.buf.len());
        let take = bytes.len().min(room);
        self.buf.extend_from_slice(&bytes[..take]);
        if take < bytes.len() {
            // Nobody reads this stream: keep the sequence moving.
            let lost = bytes.len() - take;
            self.counters.unread_dropped_bytes += lost as u64;
            if let Some(s) = self.start.as_mut() {
                *s = s.wrapping_add(lost as u32);
            }
        }
    }

    /// Moves waiting segments that now touch the contiguous data.
    fn drain_ahead(&mut self) {
        while let Some(next) = self.next() {
            let Some((&seq, _)) = self.ahead.iter().find(|(&s, _)| dist(s, next) <= 0) else {
                break;
            };
            let Some(seg) = self.ahead.remove(&seq) else {
                break;
            };
            self.ahead_bytes -= seg.len();
            let had = (-dist(seq, next)) as usize;
            if had >= seg.len() {
                self.counters.duplicate_bytes += seg.len() as u64;
            } else {
                self.counters.duplicate_bytes += had as u64;
                self.append(&seg[had..]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_out_of_order_retransmitted_and_overlapping() {
        let mut r = Reassembly::new(1 << 16);
        r.segment(999, true, b"");
        r.segment(1000, false, b"hello ");
        // Out of order: "world" arrives before " big ".
        r.segment(1010, false, b"world");
        assert_eq!((r.data(), r.pending()), (&b"hello "[..], 5));
        r.segment(1006, false, b"big ");
        assert_eq!((r.data(), r.pending()), (&b"hello big world"[..], 0));
        // A retransmission and an overlap add nothing twice.
        r.segment(1000, false, b"hello ");
        r.segment(1013, false, b"ld!!");
        assert_eq!(r.data(), b"hello big world!!");
        assert_eq!(r.counters.duplicate_bytes, 6 + 2);
        r.consume(6);
        assert_eq!(r.data(), b"big world!!");
        r.segment(1017, false, b"?");
        assert_eq!(r.data(), b"big world!!?");
    }

    #[test]
    fn wraps_and_stays_bounded() {
        let mut r = Reassembly::new(8);
        r.segment(u32::MAX - 2, false, b"abc");
        r.segment(0, false, b"def");
        assert_eq!(r.data(), b"abcdef");
        // Ahead of a gap beyond the window: dropped and counted.
        r.segment(100, false, b"0123456789");
        assert_eq!((r.pending(), r.counters.window_dropped_bytes), (0, 10));
        // Unread data is bounded too.
        r.segment(3, false, b"ghijk");
        assert_eq!(r.data().len(), 8);
        assert_eq!(r.counters.unread_dropped_bytes, 3);
        // The sequence moved on past the dropped bytes.
        r.consume(8);
        r.segment(8, false, b"z");
        assert_eq!(r.data(), b"z");
    }
}
