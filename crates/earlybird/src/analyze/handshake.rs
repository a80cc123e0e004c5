//! Bounded reassembly of the first bytes of a byte stream (a TCP
//! direction, a QUIC CRYPTO stream): what a handshake parser reads.
//!
//! Contract:
//! - [`Reassembly`] keeps the bytes `[0, cap)` of a stream in order, from
//!   pieces given with their offset ([`Reassembly::insert`]) in any order,
//!   repeated or overlapping (the first copy of a byte wins, as a receiver
//!   that already acknowledged it would). Nothing past `cap` is kept.
//! - Pieces that start beyond the contiguous prefix wait aside, at most
//!   `cap` bytes of them in all; a piece that does not fit is dropped and
//!   the stream is marked [`Cut::Gap`] (its hole may never be filled).
//! - A piece whose captured bytes are fewer than its length on the wire
//!   (the capture's snap length cut it) leaves a hole no later piece fills:
//!   when the contiguous prefix reaches that hole the stream is marked
//!   [`Cut::Snap`].
//! - When the prefix reaches `cap` the stream is marked [`Cut::Full`].
//! - [`TcpStream`] maps TCP sequence numbers onto offsets: offset 0 is the
//!   byte after the SYN's sequence number when the SYN was seen, else the
//!   first byte of the first segment with payload (bytes before it are
//!   lost; sequence numbers wrap).
//! - Memory: at most `2 × cap` bytes per stream, none before the first
//!   piece that does not arrive whole and in order
//!   ([`Reassembly::contiguous_view`] lets a parser read such a piece in
//!   place). Pure code on slices; never panics.

/// Why a stream's prefix stopped short of what its parser needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The prefix reached the cap.
    Full,
    /// A piece arrived past a hole and was dropped (the waiting room was
    /// full), or the stream ended with a hole.
    Gap,
    /// A piece was captured shorter than it was on the wire.
    Snap,
}

impl Cut {
    /// A short name for records: `cap`, `gap` or `snap`.
    pub fn name(self) -> &'static str {
        match self {
            Cut::Full => "cap",
            Cut::Gap => "gap",
            Cut::Snap => "snap",
        }
    }
}

/// The first `cap` bytes of a stream (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Reassembly {
    /// The contiguous prefix, from offset 0.
    buf: Vec<u8>,
    /// Pieces past the prefix: (offset, captured bytes, wire length).
    aside: Vec<(u64, Vec<u8>, u32)>,
    aside_bytes: usize,
    cut: Option<Cut>,
}

impl Reassembly {
    /// The contiguous prefix so far.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Why the prefix can no longer grow, if it cannot.
    pub fn cut(&self) -> Option<Cut> {
        self.cut
    }

    /// Bytes of memory held (the prefix's allocation and the pieces aside).
    pub fn held(&self) -> usize {
        self.buf.capacity() + self.aside_bytes
    }

    /// True when a piece waits beyond a hole.
    pub fn has_hole(&self) -> bool {
        !self.aside.is_empty()
    }

    /// Marks the stream cut by a hole (the caller gives up waiting).
    pub fn give_up(&mut self) {
        if self.cut.is_none() && self.has_hole() {
            self.cut = Some(Cut::Gap);
        }
    }

    /// Frees the bytes (the parser is done with them); the cut stays.
    pub fn release(&mut self) {
        self.buf = Vec::new();
        self.aside = Vec::new();
        self.aside_bytes = 0;
    }

    /// When nothing is kept yet and `data` (at `offset`, `wire` bytes on
    /// the wire) starts the stream, the bytes a parser can read in place,
    /// without copying: its captured bytes up to `cap`.
    pub fn contiguous_view<'a>(&self, offset: u64, data: &'a [u8], cap: usize) -> Option<&'a [u8]> {
        (offset == 0 && self.buf.is_empty() && self.aside.is_empty() && self.cut.is_none())
            .then(|| &data[..data.len().min(cap)])
    }

    /// Adds `data`, the captured bytes of a piece at stream `offset` that
    /// had `wire` bytes on the wire. Returns true when the prefix grew.
    pub fn insert(&mut self, offset: u64, data: &[u8], wire: usize, cap: usize) -> bool {
        if self.cut.is_some() || data.is_empty() && wire == 0 {
            return false;
        }
        let wire = wire.max(data.len());
        let end = self.buf.len() as u64;
        if offset > end {
            // Past a hole: wait aside while there is room.
            if offset >= cap as u64 {
                return false;
            }
            let keep = data.len().min(cap - offset as usize);
            if self.aside_bytes + keep > cap {
                self.cut = Some(Cut::Gap);
                return false;
            }
            self.aside_bytes += keep;
            self.aside.push((
                offset,
                data[..keep].to_vec(),
                wire.min(u32::MAX as usize) as u32,
            ));
            return false;
        }
        let grew = self.append(offset, data, wire, cap);
        // Pieces aside that now touch the prefix.
        while let Some(i) = self
            .aside
            .iter()
            .position(|(o, _, _)| *o <= self.buf.len() as u64)
        {
            if self.cut.is_some() {
                break;
            }
            let (o, d, w) = self.aside.swap_remove(i);
            self.aside_bytes -= d.len();
            self.append(o, &d, w as usize, cap);
        }
        if self.cut.is_some() {
            self.aside = Vec::new();
            self.aside_bytes = 0;
        }
        grew
    }

    /// Appends the part of a piece starting at or before the prefix's end.
    fn append(&mut self, offset: u64, data: &[u8], wire: usize, cap: usize) -> bool {
        let end = self.buf.len() as u64;
        let skip = (end - offset) as usize;
        if skip >= wire {
            return false; // all old bytes
        }
        if skip >= data.len() {
            // Only bytes the capture did not keep are new.
            self.cut = Some(Cut::Snap);
            return false;
        }
        let room = cap.saturating_sub(self.buf.len());
        let new = &data[skip..];
        let take = new.len().min(room);
        self.buf.extend_from_slice(&new[..take]);
        if self.buf.len() >= cap {
            self.cut = Some(Cut::Full);
        } else if data.len() < wire {
            self.cut = Some(Cut::Snap);
        }
        take > 0
    }
}

/// TCP sequence numbers onto [`Reassembly`] offsets (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpStream {
    /// Sequence number of offset 0, once known.
    base: Option<u32>,
}

impl TcpStream {
    /// A SYN (or SYN-ACK) with sequence number `seq` was seen.
    pub fn syn(&mut self, seq: u32) {
        if self.base.is_none() {
            self.base = Some(seq.wrapping_add(1));
        }
    }

    /// The offset of a segment's first byte and the bytes of it to keep,
    /// trimmed of what lies before offset 0; `None` when all of it does.
    pub fn place<'a>(
        &mut self,
        seq: u32,
        data: &'a [u8],
        wire: usize,
    ) -> Option<(u64, &'a [u8], usize)> {
        let base = *self.base.get_or_insert(seq);
        let rel = seq.wrapping_sub(base) as i32;
        if rel >= 0 {
            return Some((rel as u64, data, wire));
        }
        let before = rel.unsigned_abs() as usize;
        if before >= wire {
            return None;
        }
        let d = data.get(before..).unwrap_or(&[]);
        Some((0, d, wire - before))
    }
}

/// The TCP header fields a stream needs, from an IP packet as captured:
/// (sequence number, flags); `None` when the packet is not TCP or too short.
/// (IPv4 inline, for the flow table's SYNs: `tcp_seq_any` the rest.)
#[inline]
pub fn tcp_seq(ip: &[u8]) -> Option<(u32, u8)> {
    match ip.first() {
        Some(&v) if v >> 4 == 4 => {
            let off = usize::from(v & 0x0f) * 4;
            if ip.len() < off + 14 || ip[9] != 6 {
                return None;
            }
            let t = &ip[off..off + 14];
            Some((u32::from_be_bytes([t[4], t[5], t[6], t[7]]), t[13]))
        }
        _ => tcp_seq_any(ip),
    }
}

/// [`tcp_seq`] of any IP version.
fn tcp_seq_any(ip: &[u8]) -> Option<(u32, u8)> {
    let (proto, off) = match ip.first()? >> 4 {
        4 => (*ip.get(9)?, usize::from(ip[0] & 0x0f) * 4),
        6 => {
            let mut next = *ip.get(6)?;
            let mut off = 40;
            // Extension headers: hop-by-hop, routing, destination
            // options, fragment (a later fragment has no TCP header).
            loop {
                match next {
                    0 | 43 | 60 => {
                        next = *ip.get(off)?;
                        off += (usize::from(*ip.get(off + 1)?) + 1) * 8;
                    }
                    44 => {
                        let frag = u16::from_be_bytes([*ip.get(off + 2)?, *ip.get(off + 3)?]);
                        if frag & 0xfff8 != 0 {
                            return None;
                        }
                        next = *ip.get(off)?;
                        off += 8;
                    }
                    _ => break,
                }
            }
            (next, off)
        }
        _ => return None,
    };
    if proto != 6 {
        return None;
    }
    let tcp = ip.get(off..off + 14)?;
    Some((
        u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]),
        tcp[13],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_out_of_order_and_repeats() {
        let mut r = Reassembly::default();
        assert!(!r.insert(6, b"world", 5, 64));
        assert!(r.has_hole());
        assert!(r.insert(0, b"hello ", 6, 64));
        assert_eq!(r.bytes(), b"hello world");
        // A retransmission overlapping the end adds only its new bytes.
        assert!(r.insert(8, b"rld!!", 5, 64));
        assert_eq!(r.bytes(), b"hello world!!");
        assert!(!r.insert(0, b"HELLO", 5, 64));
        assert_eq!(r.bytes(), b"hello world!!");
        assert_eq!(r.cut(), None);
        assert!(!r.has_hole());
    }

    #[test]
    fn cap_gap_and_snap_cut_it_short() {
        let mut r = Reassembly::default();
        r.insert(0, b"abcdef", 6, 4);
        assert_eq!(r.bytes(), b"abcd");
        assert_eq!(r.cut(), Some(Cut::Full));

        let mut r = Reassembly::default();
        r.insert(10, b"0123", 4, 8);
        assert_eq!(r.bytes(), b"");
        assert!(!r.has_hole(), "beyond the cap: not kept");
        r.insert(2, b"012345", 6, 8);
        assert!(r.has_hole());
        r.insert(3, b"012345", 6, 8);
        assert_eq!(r.cut(), Some(Cut::Gap), "the waiting room holds cap bytes");

        let mut r = Reassembly::default();
        r.insert(0, b"abc", 10, 64);
        assert_eq!(r.bytes(), b"abc");
        assert_eq!(r.cut(), Some(Cut::Snap));
        assert!(!r.insert(10, b"xyz", 3, 64));

        let mut r = Reassembly::default();
        r.insert(4, b"efg", 3, 64);
        r.give_up();
        assert_eq!(r.cut(), Some(Cut::Gap));
    }

    #[test]
    fn tcp_sequence_numbers_wrap_and_trim() {
        let mut t = TcpStream::default();
        t.syn(u32::MAX - 1);
        assert_eq!(t.place(u32::MAX, b"ab", 2), Some((0, &b"ab"[..], 2)));
        assert_eq!(t.place(1, b"cd", 2), Some((2, &b"cd"[..], 2)));
        // A segment starting before offset 0 (the SYN's own number).
        assert_eq!(t.place(u32::MAX - 1, b"xab", 3), Some((0, &b"ab"[..], 2)));
        let mut t = TcpStream::default();
        assert_eq!(t.place(100, b"zz", 2), Some((0, &b"zz"[..], 2)));
        assert_eq!(t.place(90, b"zz", 2), None);
    }

    #[test]
    fn tcp_header_from_ipv4_and_ipv6() {
        let mut v4 = vec![0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6];
        v4.resize(20, 0);
        v4.extend_from_slice(&[0, 80, 1, 187, 0, 0, 1, 2, 0, 0, 0, 0, 0x50, 0x12]);
        assert_eq!(tcp_seq(&v4), Some((258, 0x12)));
        let mut v6 = vec![0x60, 0, 0, 0, 0, 0, 60, 64];
        v6.resize(40, 0);
        v6.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 0]); // destination options
        v6.extend_from_slice(&[0, 80, 1, 187, 0, 0, 0, 9, 0, 0, 0, 0, 0x50, 0x18]);
        assert_eq!(tcp_seq(&v6), Some((9, 0x18)));
        assert_eq!(tcp_seq(&v6[..50]), None);
        v4[9] = 17;
        assert_eq!(tcp_seq(&v4), None);
    }
}
