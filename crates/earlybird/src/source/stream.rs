//! Captures that arrive as a byte stream (standard input, a FIFO, a
//! decompressor): cut into chunks that are each a whole capture file.
//!
//! Contract:
//! - [`Chunker`] reads a pcap or pcapng stream from any [`Read`] and yields
//!   [`Chunk`]s in stream order. Each chunk's bytes form a complete capture
//!   that [`super::CaptureFile::from_bytes`] accepts: the stream's pcap
//!   global header, or the current pcapng section's header block and every
//!   interface block seen before the chunk, then whole records (blocks) of
//!   the stream, byte for byte. So the file readers, their checks and their
//!   warnings serve streams unchanged, and a chunk is freed once its
//!   packets are read.
//! - A chunk ends at `target` bytes of records, at a new pcapng section
//!   (the next chunk starts with its header block), at the end of the
//!   stream, or — with `eager`, for pipes — as soon as a read returned less
//!   than asked and at least one whole record is waiting, so packets
//!   written slowly into a pipe are not held back.
//! - A record (block) cut off by the end of the stream, or one whose length
//!   field no reader would accept, goes into the last chunk as it is; that
//!   chunk's reader stops there with a warning, and the stream is not read
//!   further. [`Place::stream_offset`] maps a byte offset inside a chunk
//!   (as a warning names it) back to the offset in the stream.
//! - Memory is bounded by the chunk size plus one record; nothing panics on
//!   any input; a read error ends the stream with [`ChunkError::Read`].

use std::io::{self, Read};

use super::pcap::{self, Lengths, MAX_CAPLEN};
use super::pcapng;

/// Bytes of records a chunk collects before it is handed on (unless the
/// stream is eager and short of data first).
pub const CHUNK_BYTES: usize = 4 << 20;

/// Largest pcapng block a chunk waits for (a larger length field is
/// corrupt: an Enhanced Packet Block is at most a 256 KiB packet plus
/// options).
const MAX_BLOCK: usize = 16 << 20;

/// One piece of a stream that is a whole capture file.
#[derive(Debug)]
pub struct Chunk {
    /// The capture: header (`prefix` bytes), then records of the stream.
    pub bytes: Vec<u8>,
    /// Where its bytes are in the stream.
    pub place: Place,
    /// Number of the chunk in its stream, from 0.
    pub index: u64,
}

/// Where a chunk's bytes are in its stream.
#[derive(Debug, Clone, Copy)]
pub struct Place {
    /// How many leading bytes are the repeated header (not stream bytes).
    pub prefix: u64,
    /// Offset in the stream of the byte after the header.
    pub base: u64,
}

impl Place {
    /// The stream offset of byte `offset` of the chunk (an offset inside
    /// the repeated header maps to where the chunk's records start).
    pub fn stream_offset(&self, offset: u64) -> u64 {
        self.base + offset.saturating_sub(self.prefix)
    }
}

/// Why a stream could not be read (further).
#[derive(Debug)]
pub enum ChunkError {
    /// The start of the stream is not a capture.
    NotCapture(String),
    /// Reading failed at this stream offset.
    Read(u64, io::Error),
}

/// The framing the chunker follows.
#[derive(Debug, Clone, Copy)]
enum Framing {
    /// Classic pcap: record header size, byte order, length fields.
    Pcap {
        record_len: usize,
        big: bool,
        lengths: Lengths,
    },
    /// pcapng: the current section's byte order.
    Pcapng { big: bool },
}

/// Reads a capture stream and cuts it into [`Chunk`]s (see the module docs).
pub struct Chunker<R: Read> {
    src: R,
    target: usize,
    eager: bool,
    framing: Option<Framing>,
    /// The header repeated at the start of every chunk.
    header: Vec<u8>,
    /// Bytes read and not yet handed on (records, starting at `base`).
    pending: Vec<u8>,
    /// Stream offset of `pending[0]`.
    base: u64,
    /// The stream has ended (or failed, or is corrupt past some point).
    done: bool,
    /// The last read returned less than asked.
    short: bool,
    next_index: u64,
}

impl<R: Read> Chunker<R> {
    /// A chunker over `src`, chunks of about `target` bytes of records;
    /// `eager` for pipes (see the module docs).
    pub fn new(src: R, target: usize, eager: bool) -> Chunker<R> {
        Chunker {
            src,
            target: target.max(1),
            eager,
            framing: None,
            header: Vec::new(),
            pending: Vec::new(),
            base: 0,
            done: false,
            short: false,
            next_index: 0,
        }
    }

    /// Reads once into `pending` (up to the room left before `target`, at
    /// least 64 KiB); returns the bytes read (0 = end of stream).
    fn fill(&mut self) -> Result<usize, ChunkError> {
        let want = (self.target + 64 * 1024)
            .saturating_sub(self.pending.len())
            .max(64 * 1024);
        let start = self.pending.len();
        self.pending.resize(start + want, 0);
        loop {
            match self.src.read(&mut self.pending[start..]) {
                Ok(n) => {
                    self.pending.truncate(start + n);
                    self.short = n < want;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.pending.truncate(start);
                    self.done = true;
                    return Err(ChunkError::Read(self.base + start as u64, e));
                }
            }
        }
    }

    /// Reads the stream's first header and sets the framing.
    fn start(&mut self) -> Result<(), ChunkError> {
        while self.pending.len() < pcap::HEADER_LEN {
            if self.fill()? == 0 {
                break;
            }
        }
        let b = &self.pending;
        if pcapng::is_pcapng(b) {
            // The section header block stays in `pending`: it is the first
            // block of the first chunk (and becomes its header there).
            let big = b.get(8..12).map(|m| m == [0x1a, 0x2b, 0x3c, 0x4d]);
            self.framing = Some(Framing::Pcapng {
                big: big.unwrap_or(false),
            });
            return Ok(());
        }
        if pcap::is_pcap(b) {
            let h = pcap::parse_header(b).map_err(|e| ChunkError::NotCapture(e.to_string()))?;
            self.framing = Some(Framing::Pcap {
                record_len: h.record_len,
                big: h.big_endian,
                lengths: h.lengths,
            });
            self.header = self.pending[..pcap::HEADER_LEN].to_vec();
            self.pending.drain(..pcap::HEADER_LEN);
            self.base = pcap::HEADER_LEN as u64;
            return Ok(());
        }
        self.done = true;
        Err(ChunkError::NotCapture(match b.first_chunk::<4>() {
            Some(m) => format!(
                "unknown magic number {:02x}{:02x}{:02x}{:02x} (expected pcap or pcapng)",
                m[0], m[1], m[2], m[3]
            ),
            None => format!("stream is only {} bytes long", b.len()),
        }))
    }

    /// Length of the record (block) starting at `pending[at]`: `Some(n)`
    /// when its length is known and sane (it may not be whole yet),
    /// `None` when not enough bytes are there to tell, `Some(usize::MAX)`
    /// when the length is corrupt.
    fn record_len(&self, at: usize) -> Option<usize> {
        let b = self.pending.get(at..)?;
        match self.framing? {
            Framing::Pcap {
                record_len,
                big,
                lengths,
            } => {
                let h = b.get(..record_len.max(16))?;
                let u = |i: usize| {
                    let v = [h[i], h[i + 1], h[i + 2], h[i + 3]];
                    if big {
                        u32::from_be_bytes(v)
                    } else {
                        u32::from_le_bytes(v)
                    }
                };
                let (a, o) = (u(8), u(12));
                let caplen = match lengths {
                    Lengths::Normal => a,
                    Lengths::Swapped => o,
                    Lengths::MaybeSwapped => a.min(o),
                };
                if caplen > MAX_CAPLEN {
                    return Some(usize::MAX);
                }
                Some(record_len + caplen as usize)
            }
            Framing::Pcapng { big } => {
                let h = b.get(..12)?;
                let ty = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
                // A section header block sets its own byte order.
                let big = if ty == 0x0a0d_0d0a {
                    h[8..12] == [0x1a, 0x2b, 0x3c, 0x4d]
                } else {
                    big
                };
                let v = [h[4], h[5], h[6], h[7]];
                let len = if big {
                    u32::from_be_bytes(v)
                } else {
                    u32::from_le_bytes(v)
                } as usize;
                if len < 12 || len & 3 != 0 || len > MAX_BLOCK {
                    return Some(usize::MAX);
                }
                Some(len)
            }
        }
    }

    /// The next chunk, `None` at the end of the stream.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>, ChunkError> {
        if self.framing.is_none() {
            if self.done {
                return Ok(None);
            }
            self.start()?;
        }
        // Whole records in `pending[..end]`; `new_header` collects the
        // pcapng header blocks met on the way (for the chunks after).
        let mut end = 0usize;
        let mut new_header: Vec<u8> = Vec::new();
        let mut cut = false;
        loop {
            // Walk every whole record now in `pending`.
            loop {
                match self.record_len(end) {
                    Some(usize::MAX) => {
                        cut = true;
                        break;
                    }
                    Some(n) if end + n <= self.pending.len() => {
                        if let Some(Framing::Pcapng { .. }) = self.framing {
                            let ty = self.block_type(end);
                            if ty == 0x0a0d_0d0a {
                                if end > 0 {
                                    // A new section starts the next chunk.
                                    return Ok(Some(self.emit(end, new_header, true)));
                                }
                                let big =
                                    self.pending[end + 8..end + 12] == [0x1a, 0x2b, 0x3c, 0x4d];
                                self.framing = Some(Framing::Pcapng { big });
                                self.header.clear();
                                new_header.clear();
                                new_header.extend_from_slice(&self.pending[end..end + n]);
                            } else if ty == 1 {
                                new_header.extend_from_slice(&self.pending[end..end + n]);
                            }
                        }
                        end += n;
                    }
                    _ => break,
                }
            }
            if cut || self.done {
                break;
            }
            if end >= self.target || (self.eager && self.short && end > 0) {
                return Ok(Some(self.emit(end, new_header, false)));
            }
            if self.fill()? == 0 {
                self.done = true;
                break;
            }
        }
        // End of stream (or corrupt past `end`): everything left goes out,
        // a cut record included, so its reader warns about it.
        self.done = true;
        let all = self.pending.len();
        if all == 0 && self.next_index > 0 {
            return Ok(None);
        }
        Ok(Some(self.emit(all, new_header, false)))
    }

    fn block_type(&self, at: usize) -> u32 {
        let h = &self.pending[at..at + 4];
        u32::from_le_bytes([h[0], h[1], h[2], h[3]])
    }

    /// Hands out `pending[..end]` behind the current header; the header
    /// blocks met in it are added to the header of the chunks after.
    fn emit(&mut self, end: usize, new_header: Vec<u8>, section_ends: bool) -> Chunk {
        let mut bytes = Vec::with_capacity(self.header.len() + end);
        bytes.extend_from_slice(&self.header);
        bytes.extend_from_slice(&self.pending[..end]);
        let chunk = Chunk {
            bytes,
            place: Place {
                prefix: self.header.len() as u64,
                base: self.base,
            },
            index: self.next_index,
        };
        self.next_index += 1;
        self.pending.drain(..end);
        self.base += end as u64;
        if section_ends {
            self.header.clear();
        } else {
            self.header.extend_from_slice(&new_header);
        }
        chunk
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{CaptureFile, BATCH};

    /// Reads everything a capture holds: (ts, bytes) per packet, and the
    /// warning offset.
    fn packets(file: &CaptureFile) -> (Vec<(u64, Vec<u8>)>, Option<u64>) {
        let mut r = file.reader();
        let mut batch = Vec::new();
        let mut out = Vec::new();
        while r.next_batch(&mut batch, BATCH) > 0 {
            for p in &batch {
                out.push((p.ts, p.bytes(r.data()).to_vec()));
            }
        }
        (out, r.warning().map(|w| w.offset))
    }

    /// Gives at most `step` bytes per read, like a pipe.
    struct Trickle<'a>(&'a [u8], usize);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.0.len().min(self.1).min(buf.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn chunks_of(bytes: &[u8], target: usize, step: usize, eager: bool) -> Vec<Chunk> {
        let mut c = Chunker::new(Trickle(bytes, step), target, eager);
        let mut v = Vec::new();
        while let Some(ch) = c.next_chunk().expect("chunk") {
            v.push(ch);
        }
        v
    }

    fn testdata(name: &str) -> Vec<u8> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/pcap")
            .join(name);
        std::fs::read(p).expect("testdata capture")
    }

    /// Every packet of a real capture comes out of the chunks, in order,
    /// whatever the chunk size and read size, for pcap and pcapng.
    #[test]
    fn chunks_hold_every_packet_in_order() {
        for name in [
            "ndpi__iphone.pcap",
            "ndpi__vxlan.pcap",
            "arkime__v6-http.pcap",
            "zeek__pcapng-multi-interface.pcapng",
        ] {
            let bytes = testdata(name);
            let whole = CaptureFile::from_bytes(name, bytes.clone()).unwrap();
            let (want, warn) = packets(&whole);
            assert!(warn.is_none());
            for (target, step, eager) in
                [(1, 7, false), (5000, 4096, true), (1 << 20, 1 << 20, false)]
            {
                let mut got = Vec::new();
                let chunks = chunks_of(&bytes, target, step, eager);
                for ch in &chunks {
                    let f = CaptureFile::from_bytes(name, ch.bytes.clone()).unwrap();
                    let (p, w) = packets(&f);
                    assert!(w.is_none(), "{name}: chunk {} warned", ch.index);
                    got.extend(p);
                }
                assert_eq!(got, want, "{name} target {target} step {step}");
                if target == 1 && name.ends_with(".pcap") {
                    assert_eq!(chunks.len(), want.len(), "one record per chunk");
                }
            }
        }
    }

    #[test]
    fn pcapng_chunks_repeat_section_and_interfaces() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pcap");
        let ng = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "pcapng"));
        let Some(path) = ng else {
            return;
        };
        let bytes = std::fs::read(&path).unwrap();
        let whole = CaptureFile::from_bytes("ng", bytes.clone()).unwrap();
        let (want, _) = packets(&whole);
        let mut got = Vec::new();
        for ch in chunks_of(&bytes, 1, 100, false) {
            assert!(pcapng::is_pcapng(&ch.bytes), "every chunk starts a section");
            let f = CaptureFile::from_bytes("ng", ch.bytes).unwrap();
            got.extend(packets(&f).0);
        }
        assert_eq!(got, want);
    }

    /// A stream cut mid-record: every whole packet comes out, and the last
    /// chunk's warning maps to the stream offset of the cut record.
    #[test]
    fn cut_stream_warns_at_stream_offset() {
        let bytes = testdata("ndpi__iphone.pcap");
        let cut = bytes.len() - 10;
        let whole = CaptureFile::from_bytes("x", bytes[..cut].to_vec()).unwrap();
        let (want, warn) = packets(&whole);
        let want_off = warn.expect("the cut file warns");
        let chunks = chunks_of(&bytes[..cut], 20_000, 3000, false);
        let mut got = Vec::new();
        let mut offs = Vec::new();
        for ch in &chunks {
            let f = CaptureFile::from_bytes("x", ch.bytes.clone()).unwrap();
            let (p, w) = packets(&f);
            got.extend(p);
            offs.extend(w.map(|o| ch.place.stream_offset(o)));
        }
        assert_eq!(got, want);
        assert_eq!(offs, vec![want_off]);
    }

    #[test]
    fn not_a_capture_is_an_error() {
        let mut c = Chunker::new(&b"hello, this is text"[..], 100, false);
        assert!(matches!(c.next_chunk(), Err(ChunkError::NotCapture(_))));
        let mut c = Chunker::new(&b""[..], 100, false);
        assert!(matches!(c.next_chunk(), Err(ChunkError::NotCapture(_))));
    }

    /// An absurd record length ends the stream: the chunk before it is
    /// whole, the last chunk holds the bad header for its reader to report.
    #[test]
    fn corrupt_length_ends_the_stream() {
        let mut bytes = testdata("ndpi__iphone.pcap");
        // Third record's caplen field (little-endian file).
        let mut at = pcap::HEADER_LEN;
        for _ in 0..2 {
            let caplen = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap());
            at += 16 + caplen as usize;
        }
        bytes[at + 8..at + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        let chunks = chunks_of(&bytes, 1 << 20, 1 << 20, false);
        let mut n = 0;
        let mut warned = None;
        for ch in &chunks {
            let f = CaptureFile::from_bytes("x", ch.bytes.clone()).unwrap();
            let (p, w) = packets(&f);
            n += p.len();
            warned = warned.or(w.map(|o| ch.place.stream_offset(o)));
        }
        assert_eq!(n, 2);
        assert_eq!(warned, Some(at as u64));
    }
}
