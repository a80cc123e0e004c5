//! One shard's rotating packet dumper (`--dump-dir`).
//!
//! Contract:
//! - Files are classic pcap ([`DumpFormat::Pcap`]: little-endian, v2.4,
//!   nanosecond magic 0xa1b23c4d, snaplen 262,144), written through
//!   [`crate::source::pcap_writer::PcapOut`], or pcapng
//!   ([`DumpFormat::Pcapng`]: one section, one interface per link type with
//!   nanosecond timestamps, Enhanced Packet Blocks), written through
//!   [`crate::source::pcapng_writer::PcapngOut`]; either copies each packet
//!   once into its 1 MiB buffer and allocates nothing per packet. The link
//!   type is the LINKTYPE_* number of the packet's [`LinkType`]
//!   ([`crate::source::pcap_writer::linktype_number`]); in a classic pcap
//!   a packet of another link type than the open file's starts a new file,
//!   in a pcapng it adds an interface to the open file. Packets longer than
//!   the snaplen are counted ([`DumpCounters::oversize`]) and not written.
//! - A file is created at its first packet and named
//!   `eb-SSSSSSSSSS.NNNNNNNNN-sKK-QQQQQQ.pcap` (`.pcapng`): the first packet's time
//!   (seconds and nanoseconds since the epoch, fixed width, so names sort by
//!   time), the shard `KK` and the shard's file sequence number `QQQQQQ`
//!   (from 1).
//! - Rotation: with a period, a new file starts at the first packet at or
//!   past the next multiple of the period (packet time; a packet stamped
//!   earlier than its file's start stays in that file); with a size bound,
//!   before a record that would take the file past it (a file holds at
//!   least one packet).
//! - Failures (cannot create, a write fails, disk full): the packets handed
//!   over and not on disk are counted in [`DumpCounters::lost`], the file is
//!   cut back to its last complete record (removed when none is), the first
//!   message is kept ([`Dumper::error`]) and the number of failures counted.
//!   The dumper then writes nothing (counting each packet as lost) until the
//!   next period starts, where it tries a new file; without a period, for
//!   the rest of the run. Nothing panics; the flows are unaffected.
//! - Records by reference ([`Dumper::write_at`], used by the dumper's own
//!   thread, `thread.rs`): a packet whose record in its input file is,
//!   byte for byte, the record a classic pcap dump file holds is not copied
//!   through the buffer: runs of such records that are back to back in the
//!   input are copied from file to file in the kernel (`copy.rs`), after
//!   what the buffer holds. Rotation, names, counters and failures are
//!   those of [`Dumper::write`]; the files are byte-identical.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::direct::DirectPcap;
use super::{DumpFilter, DumpFormat};
use crate::decode::LinkType;
use crate::error::Error;
use crate::source::pcap_writer::{
    linktype_number, micros_to_nanos, PcapOut, MAX_SNAPLEN as OUT_SNAPLEN,
};
use crate::source::pcapng_writer::{PcapngOut, SHB_LEN};
use crate::time::Nanos;

/// Bytes of the pcap global header and of a record header.
const FILE_HDR: u64 = 24;
const REC_HDR: u64 = 16;

/// The writer of an open file, in its format.
enum Out {
    Pcap(PcapOut<File>),
    Pcapng(PcapngOut<File>),
    /// Classic pcap written past the page cache (`--dump-direct`).
    Direct(DirectPcap),
}

impl Out {
    /// Creates the file `path` of `format` (past the page cache when
    /// `direct`: classic pcap only) whose first packet has link type
    /// `link`.
    fn create(
        format: DumpFormat,
        direct: bool,
        path: &Path,
        link: LinkType,
    ) -> std::io::Result<Out> {
        if direct && format == DumpFormat::Pcap {
            return Ok(Out::Direct(DirectPcap::create(
                path,
                OUT_SNAPLEN,
                linktype_number(link),
            )?));
        }
        let file = File::create(path)?;
        Ok(match format {
            DumpFormat::Pcap => Out::Pcap(PcapOut::with_linktype(
                file,
                true,
                OUT_SNAPLEN,
                linktype_number(link),
            )?),
            DumpFormat::Pcapng => Out::Pcapng(PcapngOut::new(file, OUT_SNAPLEN)),
        })
    }

    /// Bytes of the file's header.
    fn header(format: DumpFormat) -> u64 {
        match format {
            DumpFormat::Pcap => FILE_HDR,
            DumpFormat::Pcapng => SHB_LEN as u64,
        }
    }

    /// Bytes the buffer takes before it goes to the file (none for
    /// pcapng, which takes records one by one).
    #[inline]
    fn room(&self) -> usize {
        match self {
            Out::Pcap(o) => o.room(),
            Out::Direct(o) => o.room(),
            Out::Pcapng(_) => 0,
        }
    }

    /// The next `len` bytes of the buffer (at most [`Out::room`]), for
    /// records read straight into it.
    #[inline]
    fn spare(&mut self, len: usize) -> &mut [u8] {
        match self {
            Out::Pcap(o) => o.spare(len),
            Out::Direct(o) => o.spare(len),
            Out::Pcapng(_) => &mut [],
        }
    }

    /// The first `len` bytes of [`Out::spare`] hold `n` whole records.
    #[inline]
    fn advance(&mut self, len: usize, n: u64) {
        match self {
            Out::Pcap(o) => o.advance(len),
            Out::Direct(o) => o.advance(len, n),
            Out::Pcapng(_) => debug_assert_eq!(len, 0),
        }
    }

    /// Bytes a packet of `caplen` bytes of link type `link` adds.
    #[inline]
    fn record_len(&self, link: LinkType, caplen: usize) -> u64 {
        match self {
            Out::Pcap(_) | Out::Direct(_) => REC_HDR + caplen as u64,
            Out::Pcapng(o) => o.record_len(link, caplen) as u64,
        }
    }

    /// Appends a record of `need` bytes; `true` when records went to the
    /// file before it (the buffer, or the writes [`DirectPcap::confirmed`]
    /// counts).
    #[inline]
    fn record(
        &mut self,
        ts: Nanos,
        orig_len: u32,
        link: LinkType,
        bytes: &[u8],
        need: u64,
    ) -> std::io::Result<bool> {
        match self {
            Out::Pcap(o) => o
                .record(ts, orig_len, bytes)
                .map(|()| o.buffered() as u64 == need),
            Out::Pcapng(o) => o
                .record(ts, orig_len, link, bytes)
                .map(|()| o.buffered() as u64 == need),
            Out::Direct(o) => o.record(ts, orig_len, bytes),
        }
    }

    /// The file, once what the buffer holds is written to it (classic
    /// pcap only: records are copied into a pcapng's buffer).
    fn flushed_pcap(&mut self) -> Option<std::io::Result<&mut File>> {
        match self {
            Out::Pcap(o) => Some(o.flushed_sink()),
            Out::Pcapng(_) | Out::Direct(_) => None,
        }
    }

    fn finish(self) -> std::io::Result<()> {
        match self {
            Out::Pcap(o) => o.finish().map(drop),
            Out::Pcapng(o) => o.finish().map(drop),
            Out::Direct(o) => o.finish(),
        }
    }
}

/// What a dumper did (summed over the shards in the run report).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DumpCounters {
    /// Packets written (on disk).
    pub written: u64,
    /// Bytes of the files written (headers included).
    pub bytes: u64,
    /// Files created.
    pub files: u64,
    /// Packets to dump that are not on disk because a write failed (or
    /// the dumper was waiting to start again after one).
    pub lost: u64,
    /// Write failures (each one stopped a file).
    pub failures: u64,
    /// Packets not written: longer than the snaplen (262,144 bytes).
    pub oversize: u64,
    /// Packets held until their flow's verdict (`--dump-app`; `super::held`).
    pub held: super::HeldCounters,
}

impl DumpCounters {
    /// Adds `o` into `self`.
    pub fn merge(&mut self, o: &DumpCounters) {
        self.written += o.written;
        self.bytes += o.bytes;
        self.files += o.files;
        self.lost += o.lost;
        self.failures += o.failures;
        self.oversize += o.oversize;
        self.held.merge(&o.held);
    }
}

/// The file being written.
struct Open {
    out: Out,
    path: PathBuf,
    /// The link type of a classic pcap (a pcapng takes any).
    link: Option<LinkType>,
    /// Bytes of the file's header.
    header: u64,
    /// Bytes handed to the file (buffered or written).
    bytes: u64,
    /// Bytes of complete records known to be on disk.
    synced: u64,
    /// Packets handed over and not yet known to be on disk.
    pending: u64,
    /// Packets on disk.
    packets: u64,
}

impl Open {
    /// Records went to the file before the record starting at byte
    /// `before`: every one before it (a buffered writer), or those its
    /// writes made whole ([`DirectPcap::confirmed`]). Counts the packets
    /// now known to be on disk.
    #[inline]
    fn wrote(&mut self, before: u64, written: &mut u64) {
        let (synced, n) = match &self.out {
            Out::Direct(o) => {
                let (bytes, records) = o.confirmed();
                (bytes, records - self.packets)
            }
            _ => (before, self.pending),
        };
        self.synced = synced;
        self.packets += n;
        *written += n;
        self.pending -= n;
    }
}

/// Records are read into the buffer while it has this much room; with
/// less, it goes to the file first.
const MIN_READ: usize = 64 << 10;

/// Reads `buf.len()` bytes of `f` from byte `at`, or fewer where the file
/// ends: the bytes read.
pub(super) fn read_at(f: &File, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut got = 0;
    while got < buf.len() {
        match f.read_at(&mut buf[got..], at + got as u64) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// A run is copied once it holds this many bytes (as the buffer is
/// written when full), so the files grow while the input is read.
const RUN_BYTES: u64 = 1 << 20;

/// Back-to-back records of one input file, gathered to be copied at once.
#[derive(Default)]
struct Run {
    src: Option<Arc<File>>,
    /// Byte range `start..end` of `src`.
    start: u64,
    end: u64,
    /// Packets in it.
    n: u64,
}

/// One shard's dumper (see the module docs).
pub struct Dumper {
    dir: PathBuf,
    format: DumpFormat,
    shard: usize,
    seq: u64,
    max_bytes: u64,
    period: u64,
    /// Packets at or past this time start a new file (with a period).
    period_end: Nanos,
    /// A write failed: nothing is written before the next period.
    broken: bool,
    cur: Option<Open>,
    /// Records of the open file still to be copied from an input file
    /// ([`Dumper::write_at`]).
    run: Run,
    /// How runs are copied (in the kernel while it can).
    copier: super::copy::Copier,
    /// Classic pcap files are written past the page cache.
    direct: bool,
    /// Which flows' packets are dumped.
    pub filter: DumpFilter,
    /// What was done so far.
    pub counters: DumpCounters,
    /// The first failure (names the file).
    pub error: Option<String>,
}

impl Dumper {
    /// A dumper for shard `shard` writing into `dir` (which must exist),
    /// files of `format` of at most `max_bytes` (`None`: any size)
    /// starting at each multiple of `period` ns of packet time (`None`:
    /// never).
    pub fn new(
        dir: &Path,
        format: DumpFormat,
        shard: usize,
        max_bytes: Option<u64>,
        period: Option<u64>,
        filter: DumpFilter,
    ) -> Dumper {
        Dumper {
            dir: dir.to_path_buf(),
            format,
            shard,
            seq: 0,
            max_bytes: max_bytes.unwrap_or(u64::MAX),
            period: period.unwrap_or(0),
            period_end: 0,
            broken: false,
            cur: None,
            run: Run::default(),
            copier: super::copy::Copier::default(),
            direct: false,
            filter,
            counters: DumpCounters::default(),
            error: None,
        }
    }

    /// Dumps the `n` records at bytes `at..end` of the classic pcap `src`
    /// (microsecond stamps: `micros`, written again in nanoseconds; else
    /// nanosecond ones), all of link type `link`, reading them straight
    /// into the open file's buffer: the records there that need no new
    /// file are taken as they are (their stamps rewritten in place); a
    /// record that starts a file, or one longer than the snaplen or than
    /// the buffer's room, or whose header is not the one a dump file holds
    /// for it (a fraction of a second past the unit's range, an original
    /// length below the captured one), goes alone through
    /// [`Dumper::write`] (read into `one`) as the capture reader makes it
    /// of its header. Files, rotation and counters are those of
    /// [`Dumper::write`]. Returns where it stopped and the records it
    /// took: before `end` and `n` when the file ends first, or (`Err`,
    /// with the byte) when a read fails.
    pub(crate) fn read_records(
        &mut self,
        src: &File,
        (mut at, end): (u64, u64),
        n: u32,
        micros: bool,
        link: LinkType,
        one: &mut Vec<u8>,
    ) -> Result<(u64, u32), (u64, u32, std::io::Error)> {
        let (unit, limit) = if micros {
            (1_000, 1_000_000)
        } else {
            (1, 1_000_000_000)
        };
        let rec = REC_HDR as usize;
        let mut seen = 0u32;
        self.flush_run();
        while at < end && seen < n {
            if self.cur.as_ref().is_some_and(|c| c.out.room() < MIN_READ) {
                self.flush_out();
            }
            let (mut took, mut k) = (0usize, 0u32);
            if let Some(c) = self.cur.as_mut().filter(|c| c.link == Some(link)) {
                let want = ((end - at) as usize).min(c.out.room());
                let dst = c.out.spare(want);
                let got = read_at(src, dst, at).map_err(|e| (at, seen, e))?;
                let mut bytes = c.bytes;
                while let Some(h) = dst[..got].get_mut(took..took + rec) {
                    let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
                    let (frac, caplen) = (word(4), word(8) as usize);
                    let need = rec + caplen;
                    let ts = u64::from(word(0)) * 1_000_000_000 + u64::from(frac) * unit;
                    // The record as the dump file holds it, in this file.
                    let fits = frac < limit
                        && word(12) as usize >= caplen
                        && seen + k < n
                        && caplen <= OUT_SNAPLEN as usize
                        && took + need <= got
                        && (self.period == 0 || ts < self.period_end)
                        && (bytes + need as u64 <= self.max_bytes || bytes == c.header);
                    if !fits {
                        break;
                    }
                    if micros {
                        micros_to_nanos(h);
                    }
                    bytes += need as u64;
                    took += need;
                    k += 1;
                }
                c.out.advance(took, u64::from(k));
                c.bytes = bytes;
                c.pending += u64::from(k);
            }
            if k > 0 {
                at += took as u64;
                seen += k;
                continue;
            }
            // One record alone: the first of a file, or one the buffer
            // does not take as it is.
            if one.len() < rec {
                one.resize(rec, 0);
            }
            let got = read_at(src, &mut one[..rec], at).map_err(|e| (at, seen, e))?;
            let h = &one[..got];
            if got < rec {
                break;
            }
            let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
            let (secs, frac, caplen, orig) = (word(0), word(4), word(8) as usize, word(12));
            // The packet as the reader makes it of the header
            // (`crate::source::file::RecordsFile::plain`).
            let (ts, orig_len) = (
                u64::from(secs) * 1_000_000_000 + u64::from(frac) * unit,
                orig.max(caplen as u32),
            );
            if caplen > OUT_SNAPLEN as usize {
                // Counted only, its bytes never read.
                self.counters.oversize += 1;
            } else {
                if one.len() < caplen {
                    one.resize(caplen, 0);
                }
                let body = &mut one[..caplen];
                let got = read_at(src, body, at + rec as u64).map_err(|e| (at, seen, e))?;
                if got < caplen {
                    break;
                }
                self.write(ts, orig_len, link, body);
            }
            at += (rec + caplen) as u64;
            seen += 1;
        }
        Ok((at, seen))
    }

    /// Writes the open file's buffer out (room for records read into
    /// it), counting what is then on disk; a failure stops the file.
    fn flush_out(&mut self) {
        let Some(c) = self.cur.as_mut() else {
            return;
        };
        let flushed = match &mut c.out {
            Out::Pcap(o) => o.flushed_sink().map(drop),
            Out::Direct(o) => o.flush().map(drop),
            Out::Pcapng(_) => return,
        };
        match flushed {
            Ok(()) => {
                let bytes = c.bytes;
                c.wrote(bytes, &mut self.counters.written);
            }
            Err(e) => {
                let lost = c.pending;
                let msg = format!("{}: {e}", c.path.display());
                self.failed(msg, lost);
            }
        }
    }

    /// Writes classic pcap files past the page cache (`O_DIRECT`, see
    /// `direct.rs`; the directory's file system must take it: see
    /// [`super::check_direct`]); pcapng files are written as before.
    pub fn direct(mut self, on: bool) -> Dumper {
        self.direct = on;
        self
    }

    /// Whether [`Dumper::write_at`] takes records by their place in an
    /// input file (classic pcap through the page cache).
    pub(crate) fn takes_places(&self) -> bool {
        self.format == DumpFormat::Pcap && !self.direct
    }

    /// Dumps one packet: captured `bytes` of link type `link`, stamped
    /// `ts`, `orig_len` bytes on the wire.
    #[inline]
    pub fn write(&mut self, ts: Nanos, orig_len: u32, link: LinkType, bytes: &[u8]) {
        if !self.prepare(ts, link, bytes.len()) {
            return;
        }
        self.flush_run();
        let Some(c) = self.cur.as_mut() else {
            // The copy before failed.
            self.counters.lost += 1;
            return;
        };
        let before = c.bytes;
        let need = c.out.record_len(link, bytes.len());
        match c.out.record(ts, orig_len, link, bytes, need) {
            Ok(wrote) => {
                c.bytes += need;
                if wrote {
                    c.wrote(before, &mut self.counters.written);
                }
                c.pending += 1;
            }
            Err(e) => {
                let lost = c.pending + 1;
                let msg = format!("{}: {e}", c.path.display());
                self.failed(msg, lost);
            }
        }
    }

    /// Dumps the packet whose whole record (16-byte header, then `caplen`
    /// bytes) is at byte `at` of the classic pcap `src`, stamped `ts`, of
    /// link type `link` (see the module docs: the caller checked that the
    /// record is the one a dump file holds). Back-to-back records are
    /// gathered and copied at once, before anything else reaches the file.
    pub(crate) fn write_at(
        &mut self,
        ts: Nanos,
        link: LinkType,
        caplen: usize,
        src: &Arc<File>,
        at: u64,
    ) {
        if !self.takes_places() {
            // The caller asks `takes_places` first.
            if caplen > OUT_SNAPLEN as usize {
                self.counters.oversize += 1;
            } else {
                self.counters.lost += 1;
            }
            return;
        }
        if !self.prepare(ts, link, caplen) {
            return;
        }
        let len = REC_HDR + caplen as u64;
        let joins = self.run.n > 0
            && self.run.end == at
            && self.run.src.as_ref().is_some_and(|s| Arc::ptr_eq(s, src));
        if !joins {
            self.flush_run();
            if self.broken {
                self.counters.lost += 1;
                return;
            }
            self.run = Run {
                src: Some(Arc::clone(src)),
                start: at,
                end: at,
                n: 0,
            };
        }
        let Some(c) = self.cur.as_mut() else {
            return;
        };
        self.run.end += len;
        self.run.n += 1;
        c.bytes += len;
        c.pending += 1;
        if self.run.end - self.run.start >= RUN_BYTES {
            self.flush_run();
        }
    }

    /// What [`Dumper::write`] and [`Dumper::write_at`] do before a packet
    /// goes into the file: the snaplen, the period, rotation and opening
    /// the next file; `false` when the packet is not written (counted).
    #[inline]
    fn prepare(&mut self, ts: Nanos, link: LinkType, caplen: usize) -> bool {
        if caplen > OUT_SNAPLEN as usize {
            self.counters.oversize += 1;
            return false;
        }
        if self.period > 0 && ts >= self.period_end {
            self.close();
            self.period_end = (ts / self.period + 1).saturating_mul(self.period);
            self.broken = false;
        }
        if self.broken {
            self.counters.lost += 1;
            return false;
        }
        if let Some(c) = &self.cur {
            let need = c.out.record_len(link, caplen);
            let full = c.bytes + need > self.max_bytes && c.bytes > c.header;
            if c.link.is_some_and(|l| l != link) || full {
                self.close();
                if self.broken {
                    // Closing it failed.
                    self.counters.lost += 1;
                    return false;
                }
            }
        }
        if self.cur.is_none() {
            if let Err(e) = self.open(ts, link) {
                self.failed(e.to_string(), 1);
                return false;
            }
        }
        true
    }

    /// Copies the gathered run of records into the open file (after what
    /// its buffer holds); on success every packet handed over so far is on
    /// disk.
    fn flush_run(&mut self) {
        if self.run.n == 0 {
            return;
        }
        let run = std::mem::take(&mut self.run);
        let Some(c) = self.cur.as_mut() else {
            return;
        };
        let Some(src) = run.src.as_deref() else {
            return;
        };
        let copied = match c.out.flushed_pcap() {
            Some(Ok(dst)) => self.copier.copy(src, run.start, run.end - run.start, dst),
            Some(Err(e)) => Err(e),
            None => Ok(()),
        };
        match copied {
            Ok(()) => {
                c.synced = c.bytes;
                c.packets += c.pending;
                self.counters.written += c.pending;
                c.pending = 0;
            }
            Err(e) => {
                let lost = c.pending;
                let msg = format!("{}: {e}", c.path.display());
                self.failed(msg, lost);
            }
        }
    }

    /// Creates the next file, named for its first packet at `ts`.
    fn open(&mut self, ts: Nanos, link: LinkType) -> Result<(), Error> {
        self.seq += 1;
        let name = format!(
            "eb-{:010}.{:09}-s{:02}-{:06}.{}",
            ts / 1_000_000_000,
            ts % 1_000_000_000,
            self.shard,
            self.seq,
            self.format.extension()
        );
        let path = self.dir.join(name);
        let out =
            Out::create(self.format, self.direct, &path, link).map_err(|e| Error::io(&path, e))?;
        let header = Out::header(self.format);
        self.counters.files += 1;
        self.cur = Some(Open {
            out,
            path,
            link: (self.format == DumpFormat::Pcap).then_some(link),
            header,
            bytes: header,
            synced: 0,
            pending: 0,
            packets: 0,
        });
        Ok(())
    }

    /// Finishes the open file, if any.
    fn close(&mut self) {
        self.flush_run();
        let Some(mut c) = self.cur.take() else {
            return;
        };
        // A direct file is finished in place, so that on a failure the
        // records its earlier writes made whole are known (see `failed`).
        let (done, confirmed) = match &mut c.out {
            Out::Direct(o) => {
                let done = o.complete();
                (Some(done), Some(o.confirmed()))
            }
            _ => (None, None),
        };
        let (path, mut pending, bytes, mut synced) = (c.path, c.pending, c.bytes, c.synced);
        let done = match done {
            Some(d) => d,
            None => c.out.finish(),
        };
        match done {
            Ok(_) => {
                self.counters.written += pending;
                self.counters.bytes += bytes;
            }
            Err(e) => {
                if let Some((on_disk, records)) = confirmed {
                    let n = (records - c.packets).min(pending);
                    self.counters.written += n;
                    pending -= n;
                    synced = on_disk;
                }
                let msg = format!("{}: {e}", path.display());
                cut_back(&path, synced, c.header);
                self.counters.bytes += synced;
                self.note_failure(msg, pending);
            }
        }
    }

    /// A failure with the file open (or while opening): `lost` packets are
    /// not on disk; the file is cut back to its last complete record.
    #[cold]
    fn failed(&mut self, msg: String, mut lost: u64) {
        // Its packets are among the `lost` (still pending in the file).
        self.run = Run::default();
        if let Some(mut c) = self.cur.take() {
            // A direct file's failed write came back with the writes before
            // it, which may have made records whole since they were last
            // counted: those are on disk, not lost.
            if let Out::Direct(o) = &c.out {
                let (bytes, records) = o.confirmed();
                let n = (records - c.packets).min(c.pending);
                c.synced = bytes;
                c.packets += n;
                c.pending -= n;
                self.counters.written += n;
                lost -= n.min(lost);
            }
            let (path, synced, header) = (c.path.clone(), c.synced, c.header);
            // Whatever the buffer still holds is dropped with it.
            drop(c);
            cut_back(&path, synced, header);
            self.counters.bytes += synced;
        }
        self.note_failure(msg, lost);
    }

    /// `n` packets to dump could not be read back from their input file
    /// (`msg` says why): counted lost, the message kept when it is the
    /// first; the open file goes on.
    #[cold]
    pub(crate) fn input_lost(&mut self, n: u64, msg: String) {
        if n == 0 {
            return;
        }
        self.counters.lost += n;
        self.counters.failures += 1;
        if self.error.is_none() {
            self.error = Some(msg);
        }
    }

    #[cold]
    fn note_failure(&mut self, msg: String, lost: u64) {
        self.counters.lost += lost;
        self.counters.failures += 1;
        self.broken = true;
        if self.error.is_none() {
            self.error = Some(msg);
        }
    }

    /// The files' format.
    pub fn format(&self) -> DumpFormat {
        self.format
    }

    /// Writes what is buffered and closes the file; returns the counters.
    pub fn finish(&mut self) -> DumpCounters {
        self.close();
        self.counters
    }
}

/// Cuts `path` back to `len` bytes (its complete records), or removes it
/// when it holds none (`len` at most its `header` bytes); best effort (the
/// failure is already reported).
fn cut_back(path: &Path, len: u64, header: u64) {
    if len <= header {
        let _ = std::fs::remove_file(path);
    } else if let Ok(f) = std::fs::OpenOptions::new().write(true).open(path) {
        let _ = f.set_len(len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{CaptureFile, BATCH};

    fn read(path: &Path) -> Vec<(u64, u32, LinkType, Vec<u8>)> {
        let file = CaptureFile::open(path).unwrap();
        let mut r = file.reader();
        let mut batch = Vec::new();
        let mut all = Vec::new();
        while r.next_batch(&mut batch, BATCH) > 0 {
            for p in &batch {
                all.push((p.ts, p.orig_len, p.link, p.bytes(r.data()).to_vec()));
            }
        }
        assert!(r.warning().is_none(), "{path:?}: {:?}", r.warning());
        all
    }

    fn files(dir: &Path) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    }

    fn pkt(i: u64, len: usize) -> Vec<u8> {
        (0..len).map(|j| (i as usize + j) as u8).collect()
    }

    /// Every file of `dir` by name, with its bytes.
    fn contents(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        files(dir)
            .into_iter()
            .map(|p| {
                let b = std::fs::read(&p).unwrap();
                (PathBuf::from(p.file_name().unwrap()), b)
            })
            .collect()
    }

    #[test]
    fn records_read_into_the_buffer_make_the_files_and_counts_of_write() {
        // A microsecond and a nanosecond pcap: records of every size up to
        // past the snaplen, 0.3 ms apart (stamps cross 1-second periods).
        let dir = tempfile::tempdir().unwrap();
        let direct = super::super::direct::probe(dir.path()).is_ok();
        let mut recs = Vec::new();
        for i in 0..6_000u64 {
            let len = match i % 1_000 {
                7 => OUT_SNAPLEN as usize + 1,
                8 => OUT_SNAPLEN as usize,
                k => (k as usize * 37) % 1_500,
            };
            recs.push((1_700_000_000_000_000_000 + i * 300_000, pkt(i, len)));
        }
        for micros in [true, false] {
            let input = dir.path().join(format!("in-{micros}.pcap"));
            let mut out = PcapOut::new(File::create(&input).unwrap(), !micros, 1 << 20).unwrap();
            for (ts, p) in &recs {
                out.record(*ts, p.len() as u32 + 2, p).unwrap();
            }
            out.finish().unwrap();
            let src = File::open(&input).unwrap();
            let end = std::fs::metadata(&input).unwrap().len();
            for (k, (max, period)) in [(None, None), (Some(3_000_000), Some(400_000_000))]
                .into_iter()
                .enumerate()
            {
                for direct in [false, direct] {
                    let tag = format!("{micros}-{k}-{direct}");
                    let (a, b) = (
                        dir.path().join(format!("w{tag}")),
                        dir.path().join(format!("r{tag}")),
                    );
                    std::fs::create_dir_all(&a).unwrap();
                    std::fs::create_dir_all(&b).unwrap();
                    let new = |d: &Path| {
                        Dumper::new(d, DumpFormat::Pcap, 0, max, period, DumpFilter::default())
                            .direct(direct)
                    };
                    let (mut w, mut r) = (new(&a), new(&b));
                    for (ts, p) in &recs {
                        // What the file holds: stamps in its resolution.
                        let ts = if micros { ts / 1_000 * 1_000 } else { *ts };
                        w.write(ts, p.len() as u32 + 2, LinkType::Ethernet, p);
                    }
                    let mut one = Vec::new();
                    let n = recs.len() as u32;
                    // In two runs, as a dumper thread gets them.
                    let half = {
                        let mut at = 24u64;
                        for (_, p) in &recs[..2_500] {
                            at += 16 + p.len() as u64;
                        }
                        at
                    };
                    let first = r.read_records(
                        &src,
                        (24, half),
                        2_500,
                        micros,
                        LinkType::Ethernet,
                        &mut one,
                    );
                    assert_eq!(first.ok(), Some((half, 2_500)), "{tag}");
                    let rest = r.read_records(
                        &src,
                        (half, end),
                        n - 2_500,
                        micros,
                        LinkType::Ethernet,
                        &mut one,
                    );
                    assert_eq!(rest.ok(), Some((end, n - 2_500)), "{tag}");
                    let (cw, cr) = (w.finish(), r.finish());
                    assert_eq!(cw, cr, "{tag}");
                    assert_eq!(cw.oversize, 6, "{tag}");
                    assert_eq!(cw.written, recs.len() as u64 - 6, "{tag}");
                    if k == 1 {
                        assert!(cw.files > 3, "{tag}: rotation happened: {cw:?}");
                    }
                    assert!(contents(&a) == contents(&b), "{tag}: files differ");
                }
            }
        }
    }

    #[test]
    fn rotates_by_period_and_size_without_losing_or_repeating_packets() {
        let dir = tempfile::tempdir().unwrap();
        let mut d = Dumper::new(
            dir.path(),
            DumpFormat::Pcap,
            3,
            Some(24 + 3 * (16 + 100)),
            Some(10_000_000_000),
            DumpFilter::default(),
        );
        // 20 packets one second apart from t = 5 s: periods [0,10), [10,20),
        // [20,30) hold 5, 10 and 5 packets; at most 3 per file.
        let sent: Vec<_> = (0..20u64)
            .map(|i| ((5 + i) * 1_000_000_000 + 7, pkt(i, 100)))
            .collect();
        for (ts, b) in &sent {
            d.write(*ts, 1500, LinkType::Ethernet, b);
        }
        let c = d.finish();
        let names = files(dir.path());
        // 5 → 3+2, 10 → 3+3+3+1, 5 → 3+2.
        assert_eq!(names.len(), 8, "{names:?}");
        assert_eq!(c.files, 8);
        assert_eq!((c.written, c.lost, c.failures), (20, 0, 0));
        let name = names[0].file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(name, "eb-0000000005.000000007-s03-000001.pcap");
        let back: Vec<_> = names.iter().flat_map(|p| read(p)).collect();
        assert_eq!(back.len(), 20);
        for ((ts, b), (rts, orig, link, rb)) in sent.iter().zip(&back) {
            assert_eq!((ts, 1500, LinkType::Ethernet, b), (rts, *orig, *link, rb));
        }
        let on_disk: u64 = names
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum();
        assert_eq!(c.bytes, on_disk);
    }

    #[test]
    fn link_type_changes_start_a_file_and_oversize_packets_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let mut d = Dumper::new(
            dir.path(),
            DumpFormat::Pcap,
            0,
            None,
            None,
            DumpFilter::default(),
        );
        d.write(1, 60, LinkType::Ethernet, &pkt(0, 60));
        d.write(2, 40, LinkType::Raw, &pkt(1, 40));
        d.write(3, 300_000, LinkType::Raw, &vec![0; 300_000]);
        let c = d.finish();
        assert_eq!((c.files, c.written, c.oversize), (2, 2, 1));
        let names = files(dir.path());
        assert_eq!(read(&names[0])[0].2, LinkType::Ethernet);
        assert_eq!(read(&names[1])[0].2, LinkType::Raw);
    }

    #[test]
    fn a_missing_directory_is_counted_and_named_and_the_next_period_retries() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        let mut d = Dumper::new(
            &gone,
            DumpFormat::Pcap,
            0,
            None,
            Some(1_000),
            DumpFilter::default(),
        );
        d.write(10, 60, LinkType::Ethernet, &pkt(0, 60));
        d.write(20, 60, LinkType::Ethernet, &pkt(1, 60));
        std::fs::create_dir(&gone).unwrap();
        d.write(1_500, 60, LinkType::Ethernet, &pkt(2, 60));
        let c = d.finish();
        assert_eq!((c.lost, c.failures, c.written, c.files), (2, 1, 1, 1));
        let e = d.error.clone().unwrap();
        assert!(
            e.contains("gone/eb-0000000000.000000010-s00-000001.pcap"),
            "{e}"
        );
        assert_eq!(read(&files(&gone)[0]).len(), 1);
    }

    #[test]
    fn pcapng_files_rotate_alike_and_keep_every_link_type_in_one_file() {
        let dir = tempfile::tempdir().unwrap();
        // Header, two IDBs, and three EPBs of 100 bytes: the second file
        // starts at the fourth packet.
        let epb = 32 + 100;
        let idb = crate::source::pcapng_writer::IDB_LEN as u64;
        let max = SHB_LEN as u64 + 2 * idb + 3 * epb;
        let mut d = Dumper::new(
            dir.path(),
            DumpFormat::Pcapng,
            1,
            Some(max),
            Some(10_000_000_000),
            DumpFilter::default(),
        );
        let links = [LinkType::Ethernet, LinkType::Raw];
        let sent: Vec<_> = (0..20u64)
            .map(|i| {
                (
                    (5 + i) * 1_000_000_000 + 7,
                    links[i as usize % 2],
                    pkt(i, 100),
                )
            })
            .collect();
        for (ts, link, b) in &sent {
            d.write(*ts, 1500, *link, b);
        }
        let c = d.finish();
        let names = files(dir.path());
        assert_eq!(names.len(), 8, "{names:?}");
        assert_eq!((c.files, c.written, c.lost), (8, 20, 0));
        let name = names[0].file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(name, "eb-0000000005.000000007-s01-000001.pcapng");
        let back: Vec<_> = names.iter().flat_map(|p| read(p)).collect();
        assert_eq!(read(&names[0]).len(), 3);
        for ((ts, link, b), (rts, orig, rlink, rb)) in sent.iter().zip(&back) {
            assert_eq!((ts, 1500, link, b), (rts, *orig, rlink, rb));
        }
        assert_eq!(back.len(), 20);
        let on_disk: u64 = names
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum();
        assert_eq!(c.bytes, on_disk);
    }
}
