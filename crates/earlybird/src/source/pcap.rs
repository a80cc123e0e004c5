//! Classic pcap (libpcap) files: global header and the record walk.
//!
//! Contract:
//! - [`parse_header`] is a pure function over the first 24 bytes of a file.
//!   It accepts both byte orders of the microsecond (0xa1b2c3d4), nanosecond
//!   (0xa1b23c4d) and "modified" Kuznetsov (0xa1b2cd34, 24-byte record
//!   headers) magics, and fails with a human-readable reason otherwise.
//!   Versions before 2.3 (and DG/UX's 543.0) have the two record length
//!   fields swapped; 2.3 files are swapped only where caplen > orig_len
//!   (the rule libpcap applies).
//! - [`PcapReader`] walks the records after the header and appends one
//!   [`PacketRef`] per record to the caller's batch: offsets into the file
//!   buffer, timestamps in ns, `orig_len ≥ caplen` (a record claiming
//!   `caplen > orig_len` is delivered with `orig_len = caplen`).
//! - A file cut off mid-record, or a record with an absurd captured length
//!   (> [`MAX_CAPLEN`]), ends the walk after every complete packet before it,
//!   with a [`Warning`] naming the byte offset of the bad record header.
//! - Never panics, never allocates per packet (the caller's `Vec` is reused),
//!   and every record moves the cursor forward, so the walk always ends. The
//!   byte order is resolved once per batch (a monomorphised inner loop).

use super::walk::Walk;
use super::{PacketRef, Warning};
use crate::decode::LinkType;

/// Largest captured length accepted in one record (libpcap's own limit,
/// 256 KiB). A larger value means the file is corrupt.
pub const MAX_CAPLEN: u32 = 256 * 1024;

/// Most packets reserved in the caller's batch at once (a caller asking for
/// `usize::MAX` packets must not make us reserve that much).
pub(crate) const MAX_RESERVE: usize = 1 << 16;

/// Size of the classic pcap global header.
pub const HEADER_LEN: usize = 24;
/// Byte offset of the link type in the global header.
pub const LINKTYPE_OFFSET: u64 = 20;

/// The warning text for a link type earlybird does not decode (pcap and
/// pcapng say it the same way).
pub fn unsupported_link_message(linktype: u32) -> String {
    format!(
        "link type {linktype} is not one earlybird decodes: its packets are counted \
         as skipped (unsupported_link)"
    )
}

/// How far ahead of the record being read the walk prefetches (bytes).
const WALK_PREFETCH: usize = 1024;

const MAGIC_US: u32 = 0xa1b2_c3d4;
const MAGIC_NS: u32 = 0xa1b2_3c4d;
const MAGIC_KUZNETSOV: u32 = 0xa1b2_cd34;

/// What the global header of a classic pcap file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcapHeader {
    /// The file was written big-endian.
    pub big_endian: bool,
    /// Timestamps' fractional part is in nanoseconds (else microseconds).
    pub nanos: bool,
    /// Size of a record header: 16, or 24 for the Kuznetsov format.
    pub record_len: usize,
    /// Major and minor version.
    pub version: (u16, u16),
    /// Snapshot length the capture was taken with.
    pub snaplen: u32,
    /// Link-layer header type (LINKTYPE_*, FCS/reserved bits masked off).
    pub linktype: u32,
    /// Order of the two length fields in record headers (old versions
    /// wrote them the other way round).
    pub lengths: Lengths,
}

/// Where the captured and original lengths sit in a record header. libpcap
/// swapped them at version 2.3, and some writers did not follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lengths {
    /// caplen then orig_len (version 2.4 and later).
    Normal,
    /// orig_len then caplen (versions before 2.3, and DG/UX's "543.0").
    Swapped,
    /// Version 2.3: swapped only where caplen > orig_len as read.
    MaybeSwapped,
}

/// True when `bytes` starts with one of the classic pcap magics.
pub fn is_pcap(bytes: &[u8]) -> bool {
    match bytes.first_chunk::<4>() {
        Some(m) => {
            let le = u32::from_le_bytes(*m);
            let be = u32::from_be_bytes(*m);
            [MAGIC_US, MAGIC_NS, MAGIC_KUZNETSOV]
                .iter()
                .any(|&k| k == le || k == be)
        }
        None => false,
    }
}

/// What is wrong with a pcap global header (the caller names the file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The file ends before the header does.
    #[error("file is {0} bytes, shorter than the 24-byte pcap header")]
    Short(usize),
    /// No pcap magic number, in either byte order.
    #[error("unknown magic number 0x{0:08x}")]
    Magic(u32),
    /// A version this reader does not know.
    #[error("unsupported pcap version {major}.{minor}")]
    Version {
        /// Major version.
        major: u16,
        /// Minor version.
        minor: u16,
    },
}

/// Parses the 24-byte global header at the start of `bytes`.
pub fn parse_header(bytes: &[u8]) -> Result<PcapHeader, HeaderError> {
    let Some(h) = bytes.first_chunk::<HEADER_LEN>() else {
        return Err(HeaderError::Short(bytes.len()));
    };
    let magic = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    let (big_endian, kind) = if [MAGIC_US, MAGIC_NS, MAGIC_KUZNETSOV].contains(&magic) {
        (false, magic)
    } else if [MAGIC_US, MAGIC_NS, MAGIC_KUZNETSOV].contains(&magic.swap_bytes()) {
        (true, magic.swap_bytes())
    } else {
        return Err(HeaderError::Magic(magic));
    };
    let u16_at = |i: usize| {
        let b = [h[i], h[i + 1]];
        if big_endian {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        }
    };
    let u32_at = |i: usize| {
        let b = [h[i], h[i + 1], h[i + 2], h[i + 3]];
        if big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    };
    let version = (u16_at(4), u16_at(6));
    let lengths = match version {
        (2, 0..=2) | (543, _) => Lengths::Swapped,
        (2, 3) => Lengths::MaybeSwapped,
        (2, _) => Lengths::Normal,
        (major, minor) => return Err(HeaderError::Version { major, minor }),
    };
    Ok(PcapHeader {
        big_endian,
        nanos: kind == MAGIC_NS,
        record_len: if kind == MAGIC_KUZNETSOV { 24 } else { 16 },
        version,
        snaplen: u32_at(16),
        // Bits 16..32 carry the FCS length and reserved flags (LT_LINKTYPE).
        linktype: u32_at(20) & 0xffff,
        lengths,
    })
}

/// Walks the records of a classic pcap file held in `data`.
#[derive(Debug, Clone)]
pub struct PcapReader<'a> {
    name: &'a str,
    w: Walk<'a>,
    hdr: PcapHeader,
    link: LinkType,
}

/// Where a [`PcapReader`] was, to go back there ([`PcapReader::restore`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark {
    pos: usize,
    number: u64,
}

impl Mark {
    /// The byte position marked.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }
}

impl<'a> PcapReader<'a> {
    /// A reader positioned on the first record. `hdr` must come from
    /// [`parse_header`] over the same `data`; `name` is used in warnings.
    pub fn new(name: &'a str, data: &'a [u8], hdr: PcapHeader, link: LinkType) -> Self {
        PcapReader {
            name,
            w: Walk::new(data, HEADER_LEN.min(data.len())),
            hdr,
            link,
        }
    }

    /// Where the reader is now (before a batch).
    #[inline(always)]
    pub(crate) fn mark(&self) -> Mark {
        Mark {
            pos: self.w.pos,
            number: self.w.number,
        }
    }

    /// Goes back to `m` (a mark of this reader), as if the batches since
    /// were not read.
    pub(crate) fn restore(&mut self, m: Mark) {
        self.w.restart(m.pos, m.number);
    }

    /// The walk's state (`file.rs` limits and ends it when the file
    /// shrinks).
    pub(crate) fn walk_mut(&mut self) -> &mut Walk<'a> {
        &mut self.w
    }

    /// Clears `out` and appends up to `max` packets; 0 means end of file.
    pub fn next_batch(&mut self, out: &mut Vec<PacketRef>, max: usize) -> usize {
        out.clear();
        if self.w.done || max == 0 {
            return 0;
        }
        out.reserve(max.min(MAX_RESERVE));
        self.dispatch::<true>(out, max)
    }

    /// Steps over up to `max` packets without describing them; returns how
    /// many (0 means end of file). It stops exactly where
    /// [`PcapReader::next_batch`] would, with the same warning: a shard
    /// skips the batches another shard reads for it.
    pub fn skip_batch(&mut self, max: usize) -> usize {
        if self.w.done || max == 0 {
            return 0;
        }
        self.dispatch::<false>(&mut Vec::new(), max)
    }

    /// See [`crate::source::CaptureReader::jump_to`].
    pub fn jump_to(&mut self, position: u64, packets: usize) -> bool {
        let Ok(pos) = usize::try_from(position) else {
            return false;
        };
        if self.w.done || pos < self.w.pos || pos > self.w.data.len() {
            return false;
        }
        self.w.pos = pos;
        self.w.number += packets as u64;
        true
    }

    /// Runs the walk specialised for the header's byte order and length
    /// fields.
    #[inline(always)]
    fn dispatch<const KEEP: bool>(&mut self, out: &mut Vec<PacketRef>, max: usize) -> usize {
        const N: u8 = 0;
        const S: u8 = 1;
        const M: u8 = 2;
        let (stop, n) = match (self.hdr.big_endian, self.hdr.lengths) {
            (false, Lengths::Normal) => self.walk::<false, N, KEEP>(out, max),
            (true, Lengths::Normal) => self.walk::<true, N, KEEP>(out, max),
            (false, Lengths::Swapped) => self.walk::<false, S, KEEP>(out, max),
            (true, Lengths::Swapped) => self.walk::<true, S, KEEP>(out, max),
            (false, Lengths::MaybeSwapped) => self.walk::<false, M, KEEP>(out, max),
            (true, Lengths::MaybeSwapped) => self.walk::<true, M, KEEP>(out, max),
        };
        if let Some(stop) = stop {
            self.finish(stop);
        }
        n
    }

    /// The tight loop. Returns why it stopped early (if it did) and how many
    /// packets it appended. `LENS` is the [`Lengths`] mode (0 normal, 1
    /// swapped, 2 maybe swapped), resolved at compile time; without `KEEP`
    /// nothing is appended (the checks and the stopping point are the same).
    #[inline(always)]
    fn walk<const BE: bool, const LENS: u8, const KEEP: bool>(
        &mut self,
        out: &mut Vec<PacketRef>,
        max: usize,
    ) -> (Option<Stop>, usize) {
        let data = self.w.data;
        let rec = self.hdr.record_len;
        let frac_mult: u64 = if self.hdr.nanos { 1 } else { 1_000 };
        let link = self.link;
        let mut pos = self.w.pos;
        let mut number = self.w.number;
        let mut n = 0;
        let mut stop = None;
        while n < max {
            let rest = &data[pos..];
            if rest.len() < rec {
                if !rest.is_empty() {
                    stop = Some(Stop::ShortHeader(pos, rest.len()));
                } else {
                    stop = Some(Stop::End);
                }
                break;
            }
            let Some(h) = rest.first_chunk::<16>() else {
                stop = Some(Stop::End);
                break;
            };
            // The record headers form a dependent chain of loads; fetch the
            // bytes a few records ahead so the walk does not stall at every
            // new page of the mapping (the hardware prefetcher stops at
            // page boundaries).
            crate::prefetch::read(data.as_ptr().wrapping_add(pos + WALK_PREFETCH));
            let sec = rd::<BE>([h[0], h[1], h[2], h[3]]);
            let frac = rd::<BE>([h[4], h[5], h[6], h[7]]);
            let mut caplen = rd::<BE>([h[8], h[9], h[10], h[11]]);
            let mut orig = rd::<BE>([h[12], h[13], h[14], h[15]]);
            if LENS == 1 || (LENS == 2 && caplen > orig) {
                std::mem::swap(&mut caplen, &mut orig);
            }
            if caplen > MAX_CAPLEN {
                stop = Some(Stop::Absurd(pos, caplen));
                break;
            }
            let start = pos + rec;
            let end = start + caplen as usize;
            if end > data.len() {
                stop = Some(Stop::ShortData(pos, caplen, data.len() - start));
                break;
            }
            number += 1;
            if KEEP {
                out.push(PacketRef {
                    offset: start,
                    caplen,
                    orig_len: orig.max(caplen),
                    ts: sec as u64 * 1_000_000_000 + frac as u64 * frac_mult,
                    link,
                    number,
                });
            }
            n += 1;
            pos = end;
        }
        self.w.pos = pos;
        self.w.number = number;
        (stop, n)
    }

    fn finish(&mut self, stop: Stop) {
        self.w.done = true;
        self.w.at_end = !matches!(stop, Stop::Absurd(..));
        let (offset, message) = match stop {
            Stop::End => return,
            Stop::ShortHeader(at, have) => (
                at,
                format!(
                    "file ends inside a record header ({have} of {} bytes); capture cut off",
                    self.hdr.record_len
                ),
            ),
            Stop::ShortData(at, caplen, have) => (
                at,
                format!(
                    "file ends inside a record ({have} of {caplen} captured bytes); capture cut off"
                ),
            ),
            Stop::Absurd(at, caplen) => (
                at,
                format!(
                    "corrupt record header: captured length {caplen} exceeds {MAX_CAPLEN}; \
                     reading stopped"
                ),
            ),
        };
        self.w.warning = Some(Warning {
            file: self.name.to_string(),
            offset: offset as u64,
            message,
        });
    }

    /// The buffer [`PacketRef::offset`] points into (the whole file).
    pub fn data(&self) -> &'a [u8] {
        self.w.data
    }

    /// Set once the walk stopped on a cut-off or corrupt record.
    pub fn warning(&self) -> Option<&Warning> {
        self.w.warning.as_ref()
    }

    /// Bytes consumed so far (header included).
    pub fn position(&self) -> u64 {
        self.w.pos as u64
    }
}

/// Why a walk stopped before filling the batch.
#[derive(Debug, Clone, Copy)]
enum Stop {
    /// Clean end of file at a record boundary.
    End,
    /// Record header at offset cut off after so many bytes.
    ShortHeader(usize, usize),
    /// Record at offset with this caplen, only so many data bytes present.
    ShortData(usize, u32, usize),
    /// Record at offset with an absurd caplen.
    Absurd(usize, u32),
}

#[inline(always)]
fn rd<const BE: bool>(b: [u8; 4]) -> u32 {
    if BE {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Little-endian microsecond file, Ethernet, two records of 4 and 2 bytes
    /// (the second cut by snaplen: orig_len 60).
    const LE_US: [u8; 62] = [
        0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0,
        0, // magic, v2.4, zone, sigfigs
        0xff, 0xff, 0, 0, 1, 0, 0, 0, // snaplen 65535, linktype 1
        0x10, 0, 0, 0, 0x20, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, // ts 16 s 32 us, 4/4
        0xde, 0xad, 0xbe, 0xef, //
        0x11, 0, 0, 0, 0x40, 0x42, 0x0f, 0, 2, 0, 0, 0, 60, 0, 0, 0, // ts 17 s 999_999+1 us
        0xca, 0xfe,
    ];

    fn to_be(le: &[u8]) -> Vec<u8> {
        // Re-encode LE_US big-endian: swap every 4-byte header word, and the
        // two 2-byte version fields.
        let mut v = le.to_vec();
        v[0..4].reverse();
        v[4..6].reverse();
        v[6..8].reverse();
        for i in (8..24).step_by(4) {
            v[i..i + 4].reverse();
        }
        for r in [24usize, 44] {
            for i in (r..r + 16).step_by(4) {
                v[i..i + 4].reverse();
            }
        }
        v
    }

    fn drain(data: &[u8]) -> (Vec<PacketRef>, Option<Warning>) {
        let hdr = parse_header(data).unwrap();
        let mut r = PcapReader::new("t.pcap", data, hdr, LinkType::Ethernet);
        let mut all = Vec::new();
        let mut batch = Vec::new();
        while r.next_batch(&mut batch, 1) > 0 {
            all.extend_from_slice(&batch);
        }
        assert_eq!(r.next_batch(&mut batch, 8), 0, "stays at end");
        (all, r.warning().cloned())
    }

    fn check_two(data: &[u8], frac_scale: u64) {
        let (p, w) = drain(data);
        assert!(w.is_none(), "{w:?}");
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].offset, 40);
        assert_eq!(p[0].bytes(data), &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(p[0].ts, 16_000_000_000 + 32 * frac_scale);
        assert_eq!((p[0].caplen, p[0].orig_len, p[0].number), (4, 4, 1));
        assert_eq!(p[1].bytes(data), &[0xca, 0xfe]);
        assert_eq!((p[1].caplen, p[1].orig_len, p[1].number), (2, 60, 2));
        assert_eq!(p[1].ts, 17_000_000_000 + 1_000_000 * frac_scale);
    }

    #[test]
    fn little_endian_microseconds() {
        let h = parse_header(&LE_US).unwrap();
        assert!(!h.big_endian && !h.nanos);
        assert_eq!(
            (h.version, h.snaplen, h.linktype, h.record_len),
            ((2, 4), 65535, 1, 16)
        );
        check_two(&LE_US, 1_000);
    }

    #[test]
    fn big_endian_microseconds() {
        let be = to_be(&LE_US);
        assert_eq!(&be[0..4], &[0xa1, 0xb2, 0xc3, 0xd4]);
        let h = parse_header(&be).unwrap();
        assert!(h.big_endian && !h.nanos);
        assert_eq!((h.snaplen, h.linktype), (65535, 1));
        check_two(&be, 1_000);
    }

    #[test]
    fn nanosecond_both_orders() {
        let mut le = LE_US.to_vec();
        le[0..4].copy_from_slice(&MAGIC_NS.to_le_bytes());
        assert!(parse_header(&le).unwrap().nanos);
        check_two(&le, 1);
        let be = to_be(&le);
        assert_eq!(&be[0..4], &[0xa1, 0xb2, 0x3c, 0x4d]);
        assert!(parse_header(&be).unwrap().nanos);
        check_two(&be, 1);
    }

    #[test]
    fn kuznetsov_records_are_24_bytes() {
        let mut v = LE_US[..24].to_vec();
        v[0..4].copy_from_slice(&MAGIC_KUZNETSOV.to_le_bytes());
        v.extend_from_slice(&[5, 0, 0, 0, 7, 0, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0]);
        v.extend_from_slice(&[2, 0, 0, 0, 0x00, 0x08, 4, 0]); // ifindex, proto, type, pad
        v.extend_from_slice(&[1, 2, 3]);
        let (p, w) = drain(&v);
        assert!(w.is_none());
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].offset, 48);
        assert_eq!(p[0].bytes(&v), &[1, 2, 3]);
        assert_eq!(p[0].ts, 5_000_007_000);
    }

    #[test]
    fn old_versions_swap_the_length_fields() {
        // Version 2.2: record headers hold orig_len before caplen.
        let mut v = LE_US.to_vec();
        v[6] = 2;
        v[32..40].copy_from_slice(&[4, 0, 0, 0, 4, 0, 0, 0]);
        v[52..60].copy_from_slice(&[60, 0, 0, 0, 2, 0, 0, 0]);
        assert_eq!(parse_header(&v).unwrap().lengths, Lengths::Swapped);
        let (p, w) = drain(&v);
        assert!(w.is_none());
        assert_eq!((p[1].caplen, p[1].orig_len), (2, 60));
        // Version 2.3 swaps only records whose caplen > orig_len as read.
        v[6] = 3;
        assert_eq!(parse_header(&v).unwrap().lengths, Lengths::MaybeSwapped);
        let (p, _) = drain(&v);
        assert_eq!((p[1].caplen, p[1].orig_len), (2, 60));
        v[52..60].copy_from_slice(&[2, 0, 0, 0, 60, 0, 0, 0]);
        let (p, _) = drain(&v);
        assert_eq!((p[1].caplen, p[1].orig_len), (2, 60));
        // In version 2.4 a large caplen is taken as written (and is corrupt).
        v[6] = 4;
        v[52..60].copy_from_slice(&[60, 0, 0, 0, 2, 0, 0, 0]);
        let (p, w) = drain(&v);
        assert_eq!(p.len(), 1);
        assert_eq!(w.unwrap().offset, 44);
    }

    #[test]
    fn caplen_above_orig_len_is_raised() {
        let mut v = LE_US.to_vec();
        v[36] = 1; // orig_len of record 1 := 1 < caplen 4
        let (p, _) = drain(&v);
        assert_eq!((p[0].caplen, p[0].orig_len), (4, 4));
    }

    #[test]
    fn header_errors() {
        assert_eq!(parse_header(&LE_US[..23]), Err(HeaderError::Short(23)));
        assert!(parse_header(&LE_US[..23])
            .unwrap_err()
            .to_string()
            .contains("shorter"));
        let mut v = LE_US.to_vec();
        v[0] = 0;
        assert!(parse_header(&v).unwrap_err().to_string().contains("magic"));
        assert!(!is_pcap(&v));
        assert!(is_pcap(&LE_US) && is_pcap(&to_be(&LE_US)));
        let mut v = LE_US.to_vec();
        v[4] = 3;
        assert!(parse_header(&v)
            .unwrap_err()
            .to_string()
            .contains("version 3.4"));
        assert_eq!(parse_header(&LE_US).unwrap().lengths, Lengths::Normal);
        let mut v = LE_US.to_vec();
        v[20..24].copy_from_slice(&0x1000_0001u32.to_le_bytes()); // FCS bits set
        assert_eq!(parse_header(&v).unwrap().linktype, 1);
    }

    #[test]
    fn absurd_caplen_stops_with_warning() {
        let mut v = LE_US.to_vec();
        v[52..56].copy_from_slice(&(MAX_CAPLEN + 1).to_le_bytes());
        let (p, w) = drain(&v);
        assert_eq!(p.len(), 1);
        let w = w.unwrap();
        assert_eq!(w.offset, 44);
        assert!(w.message.contains("corrupt"), "{}", w.message);
        assert_eq!(w.file, "t.pcap");
    }

    #[test]
    fn truncated_at_every_offset() {
        for data in [LE_US.to_vec(), to_be(&LE_US)] {
            for cut in HEADER_LEN..=data.len() {
                let d = &data[..cut];
                let (p, w) = drain(d);
                let (want, warn_at) = match cut {
                    24 => (0, None),
                    25..=43 => (0, Some(24)),
                    44 => (1, None),
                    45..=61 => (1, Some(44)),
                    _ => (2, None),
                };
                assert_eq!(p.len(), want, "cut {cut}");
                assert_eq!(w.as_ref().map(|w| w.offset), warn_at, "cut {cut}");
                if let Some(w) = w {
                    assert!(w.message.contains("cut off"), "{}", w.message);
                }
            }
        }
    }

    #[test]
    fn position_tracks_consumed_bytes() {
        let hdr = parse_header(&LE_US).unwrap();
        let mut r = PcapReader::new("t", &LE_US, hdr, LinkType::Ethernet);
        let mut b = Vec::new();
        assert_eq!(r.position(), 24);
        assert_eq!(r.next_batch(&mut b, 1), 1);
        assert_eq!(r.position(), 44);
        assert_eq!(r.next_batch(&mut b, 10), 1);
        assert_eq!(r.position(), 62);
        assert_eq!(r.next_batch(&mut b, 10), 0);
        assert!(b.is_empty());
        let mut r = PcapReader::new("t", &LE_US, hdr, LinkType::Ethernet);
        assert_eq!(r.next_batch(&mut b, usize::MAX), 2, "huge max is fine");
    }
}
