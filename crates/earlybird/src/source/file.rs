//! Capture files: open (memory-map) or wrap a buffer, detect pcap vs pcapng,
//! and hand out independent readers.
//!
//! Contract:
//! - [`CaptureFile::open`] maps a file read-only (advised sequential;
//!   populated in one call unless it has [`populate::BACKGROUND_FROM`]
//!   bytes or more: those are got ready by [`CaptureFile::map_ahead`] once
//!   the readers start) and checks its header; [`CaptureFile::from_bytes`]
//!   does the same over an owned buffer. Errors name the file: [`Error::Io`] (cannot open or map),
//!   [`Error::NotCapture`] (neither pcap nor pcapng, or the header is
//!   damaged). A link type earlybird does not decode is not an error: a
//!   classic pcap of such a type opens, and its readers deliver no packet —
//!   they walk the records (the same checks and warnings), count every
//!   packet in [`CaptureReader::skipped_unsupported_link`] and give a
//!   [`Warning`] naming the file and the link type, as pcapng readers do
//!   for each such interface.
//! - A `CaptureFile` is `Send + Sync` and owns the bytes; any number of
//!   [`CaptureReader`]s can walk it at once (one per shard thread).
//! - [`CaptureReader::next_batch`] fills the caller's reused `Vec` with up to
//!   `max` [`PacketRef`]s pointing into [`CaptureReader::data`]; damage found
//!   while walking ends the file with a [`Warning`] (see `pcap` and `pcapng`).
//!   [`CaptureReader::skip_batch`] steps over the same packets without
//!   describing them (shards skip the batches other shards read for them).
//!   Nothing is allocated per packet and nothing panics on any input.
//! - A mapped file that shrinks while it is read (another process
//!   truncates it) does not kill the process: its map is guarded
//!   ([`vanish`]), and at every batch boundary a reader checks whether any
//!   of it vanished (one byte read and one atomic load a batch). Once it
//!   has, every reader takes the file to end where [`vanish`] says it now
//!   ends (the same place for all): a batch that reached past it is walked
//!   again over the bytes before it, so packets whose bytes reach past it
//!   are not delivered, and the walk ends there with a [`Warning`] naming
//!   that offset. What cannot be taken back: a packet whose record was
//!   walked before the file shrank and whose bytes vanish before they are
//!   decoded, moments later, is decoded from zeros (counted like any
//!   malformed packet); and a reader that had already walked past the new
//!   end delivered those packets (they were intact when read) and stops
//!   where it is.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::pcap::{self, PcapReader};
use super::pcapng::{self, PcapngReader};
use super::populate::{self, MapPopulator};
use super::vanish::{self, Guard};
use super::walk::Walk;
use super::{PacketRef, Warning};
use crate::decode::LinkType;
use crate::error::{Error, Result};

/// The bytes of a capture: a read-only map of a file (with the file's
/// device and inode numbers, to know it again) or an owned buffer.
enum Storage {
    Map(memmap2::Mmap, Option<(u64, u64)>),
    Owned(Vec<u8>),
}

/// Which format the file is in, as found by the header check.
#[derive(Debug, Clone, Copy)]
enum Format {
    /// Classic pcap; `None` when its link type is not one earlybird decodes.
    Pcap(pcap::PcapHeader, Option<LinkType>),
    Pcapng,
}

/// An input file opened again for the packet dumper
/// ([`CaptureFile::records_file`]): its records are a dump file's, with
/// nanosecond stamps (`nanos`) or microsecond ones.
pub(crate) struct RecordsFile {
    pub(crate) file: std::fs::File,
    pub(crate) nanos: bool,
    /// Its lengths are in the order of pcap 2.4 (caplen, then orig_len),
    /// so the reader's packets follow from the record headers alone: a
    /// packet's stamp is seconds × 10⁹ + fraction × the file's unit, its
    /// original length the larger of the two lengths, and the packets of
    /// a batch are records back to back (`crate::dump::thread`).
    pub(crate) plain: bool,
}

/// A checked capture file (pcap or pcapng) whose bytes are held in memory.
///
/// ```
/// use earlybird::{CaptureFile, BATCH};
///
/// // A little-endian pcap (Ethernet) holding one 2-byte record.
/// let mut bytes = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0];
/// bytes.extend_from_slice(&[0xff, 0xff, 0, 0, 1, 0, 0, 0]);
/// bytes.extend_from_slice(&[1, 0, 0, 0, 5, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 0xab, 0xcd]);
/// let file = CaptureFile::from_bytes("mem.pcap", bytes)?;
/// let mut reader = file.reader();
/// let mut batch = Vec::with_capacity(BATCH);
/// let mut packets = 0;
/// while reader.next_batch(&mut batch, BATCH) > 0 {
///     for p in &batch {
///         assert_eq!(p.bytes(reader.data()), &[0xab, 0xcd]);
///         assert_eq!(p.ts, 1_000_005_000);
///     }
///     packets += batch.len();
/// }
/// assert_eq!(packets, 1);
/// assert!(reader.warning().is_none());
/// # Ok::<(), earlybird::Error>(())
/// ```
pub struct CaptureFile {
    /// Maps the file in the background once [`CaptureFile::map_ahead`]
    /// asks. Declared first: dropped (and its thread joined) before the
    /// map it populates.
    populator: OnceLock<Option<MapPopulator>>,
    /// Catches the file shrinking under the map (mapped files only).
    /// Declared before the map: it leaves the registry before the map is
    /// unmapped.
    guard: Option<Guard>,
    name: String,
    storage: Storage,
    format: Format,
}

impl std::fmt::Debug for CaptureFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureFile")
            .field("name", &self.name)
            .field("len", &self.bytes().len())
            .field("format", &self.format)
            .finish()
    }
}

impl CaptureFile {
    /// Memory-maps the file at `path` (populated, advised sequential) and checks its
    /// header.
    pub fn open(path: &Path) -> Result<CaptureFile> {
        Self::open_map(path, true)
    }

    /// [`CaptureFile::open`] without populating the map: for a look at the
    /// header and the first packets only (the pages touched are faulted in).
    pub(crate) fn probe(path: &Path) -> Result<CaptureFile> {
        Self::open_map(path, false)
    }

    fn open_map(path: &Path, populate_small: bool) -> Result<CaptureFile> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let name = path.display().to_string();
        if len == 0 {
            // An empty file cannot be mapped on every platform; it is not a
            // capture either way.
            return Self::new(name, Storage::Owned(Vec::new()), None);
        }
        // A small (page-cached) file is mapped whole in one MAP_POPULATE
        // call instead of one minor fault per 4 KiB page during the walk; a
        // large one waits for `map_ahead`. MAP_POPULATE stops quietly at
        // pages that vanished meanwhile (they fault later, see below).
        let mut opts = memmap2::MmapOptions::new();
        if populate_small && (len as usize) < populate::BACKGROUND_FROM {
            opts.populate();
        }
        // SAFETY: the map is read-only and private to this process, and
        // earlybird never writes to its inputs. Rewriting the file in place
        // changes what the readers see; the parsers are bounds-checked and
        // never trust the bytes. Truncating it makes reads of the vanished
        // pages fault with SIGBUS: the guard registered right here (before
        // any byte is read, header check included) catches those and the
        // readers stop where the file now ends (module docs, `vanish`).
        // Unguarded (registry full, not Linux), a truncation kills the
        // process, the usual caveat of memmap2.
        let map = unsafe { opts.map(&file) }.map_err(|e| Error::io(path, e))?;
        let meta = file.metadata().map_err(|e| Error::io(path, e))?;
        let guard = Guard::register(&map, path, &meta);
        #[cfg(unix)]
        {
            // Only a hint: failure changes nothing but read-ahead.
            let _ = map.advise(memmap2::Advice::Sequential);
        }
        #[cfg(unix)]
        let id = {
            use std::os::unix::fs::MetadataExt;
            Some((meta.dev(), meta.ino()))
        };
        #[cfg(not(unix))]
        let id = None;
        Self::new(name, Storage::Map(map, id), guard)
    }

    /// Gets a large file's map ready ahead of its readers, once they have
    /// started. With `spare_core` (a core the readers leave idle) a helper
    /// thread populates the map from the start (see [`populate`]);
    /// otherwise — or when the helper cannot run — the kernel is only asked
    /// to read the file ahead (`MADV_WILLNEED`) and the readers fault its
    /// pages in themselves. Measured reason (BENCHMARKS.md): on a core the
    /// readers need, the helper preempts one of them, and shards that
    /// exchange packets all wait for the one preempted.
    /// Does nothing for small files (populated at open), buffers, or when
    /// called again.
    pub(crate) fn map_ahead(&self, spare_core: bool) {
        let Storage::Map(map, _) = &self.storage else {
            return;
        };
        if map.len() < populate::BACKGROUND_FROM {
            return;
        }
        self.populator.get_or_init(|| {
            let helper = if spare_core {
                MapPopulator::start(map)
            } else {
                None
            };
            if helper.is_none() {
                #[cfg(unix)]
                let _ = map.advise(memmap2::Advice::WillNeed);
            }
            helper
        });
    }

    /// Same as [`CaptureFile::open`] over an in-memory buffer; `name` is
    /// used in errors and warnings.
    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> Result<CaptureFile> {
        Self::new(name.to_string(), Storage::Owned(bytes), None)
    }

    fn new(name: String, storage: Storage, guard: Option<Guard>) -> Result<CaptureFile> {
        let bytes: &[u8] = match &storage {
            Storage::Map(m, _) => m,
            Storage::Owned(v) => v,
        };
        let format = match detect(&name, bytes) {
            Ok(f) => f,
            Err(e) => {
                // Out of the registry before the map goes.
                drop(guard);
                return Err(e);
            }
        };
        Ok(CaptureFile {
            populator: OnceLock::new(),
            guard,
            name,
            storage,
            format,
        })
    }

    /// When part of the file vanished while it was read (another process
    /// truncated it): a warning naming the offset from which its bytes are
    /// gone. Readers that reached that point carry their own warning; this
    /// one is for a file whose bytes vanished after some reader had walked
    /// them (so packets may be missing there, or have been decoded from
    /// zeros: see the module docs).
    pub(crate) fn vanished(&self) -> Option<Warning> {
        let at = self.guard.as_ref()?.vanished()?;
        Some(Warning {
            file: self.name.clone(),
            offset: at,
            message: "the file shrank while it was read (truncated by another process?): \
                      its bytes from here on vanished before every reader was done with \
                      them; packets there may be missing, or decoded from zero bytes"
                .into(),
        })
    }

    /// A [`populate::Stride`] for shard `id` of `shards` to populate this
    /// file's map between them; one that never acts for small files
    /// (populated at open), buffers, or when `on` is false (a helper
    /// populates the map instead).
    pub(crate) fn stride(&self, id: usize, shards: usize, on: bool) -> populate::Stride {
        let map = match &self.storage {
            Storage::Map(m, _) if on && m.len() >= populate::BACKGROUND_FROM => Some(m),
            _ => None,
        };
        populate::Stride::new(map, id, shards)
    }

    /// The file name as given (used in errors and warnings).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// All bytes of the file.
    pub fn bytes(&self) -> &[u8] {
        match &self.storage {
            Storage::Map(m, _) => m,
            Storage::Owned(v) => v,
        }
    }

    /// The mapped file opened again, when its records are, byte for byte
    /// or but for the stamp's fraction, what the packet dumper writes: a
    /// classic little-endian pcap with 16-byte record headers, with
    /// nanosecond stamps (`crate::dump` then copies runs of records in the
    /// kernel instead of through memory) or microsecond ones (read in
    /// runs and the fraction of each header rewritten). `None` for
    /// buffers, other formats, or when the path now names another file
    /// (device and inode differ) or cannot be opened.
    pub(crate) fn records_file(&self) -> Option<RecordsFile> {
        let Storage::Map(_, Some(id)) = &self.storage else {
            return None;
        };
        let Format::Pcap(h, Some(_)) = &self.format else {
            return None;
        };
        if h.big_endian || h.record_len != 16 {
            return None;
        }
        let (nanos, plain) = (h.nanos, h.lengths == super::pcap::Lengths::Normal);
        let file = std::fs::File::open(&self.name).ok()?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let meta = file.metadata().ok()?;
            ((meta.dev(), meta.ino()) == *id).then_some(RecordsFile { file, nanos, plain })
        }
        #[cfg(not(unix))]
        {
            let _ = (file, id, nanos, plain);
            None
        }
    }

    /// Timestamp of the first packet, `None` when the file holds none.
    pub fn first_ts(&self) -> Option<crate::time::Nanos> {
        let mut refs = Vec::with_capacity(1);
        match self.reader().next_batch(&mut refs, 1) {
            0 => None,
            _ => Some(refs[0].ts),
        }
    }

    /// A new reader positioned on the first packet. Readers are independent.
    pub fn reader(&self) -> CaptureReader<'_> {
        let data = self.bytes();
        let mut notice = None;
        let inner = match self.format {
            Format::Pcap(hdr, Some(link)) => {
                Inner::Pcap(PcapReader::new(&self.name, data, hdr, link))
            }
            Format::Pcap(hdr, None) => {
                notice = Some(Warning {
                    file: self.name.clone(),
                    offset: pcap::LINKTYPE_OFFSET,
                    message: pcap::unsupported_link_message(hdr.linktype),
                });
                // The link type given is never used: no packet is delivered.
                let r = PcapReader::new(&self.name, data, hdr, LinkType::Ethernet);
                Inner::PcapUnsupported(r, 0)
            }
            Format::Pcapng => Inner::Pcapng(PcapngReader::new(&self.name, data)),
        };
        CaptureReader {
            inner,
            scratch: Vec::new(),
            guard: self.guard.as_ref(),
            name: &self.name,
            end: vanish::NONE,
            warned: false,
            notice,
        }
    }
}

/// Checks the header of `bytes` and finds its format.
fn detect(name: &str, bytes: &[u8]) -> Result<Format> {
    let not_capture = |reason: &dyn std::fmt::Display| Error::NotCapture {
        path: PathBuf::from(name),
        reason: reason.to_string(),
    };
    if pcapng::is_pcapng(bytes) {
        pcapng::check_header(bytes).map_err(|e| not_capture(&e))?;
        return Ok(Format::Pcapng);
    }
    if pcap::is_pcap(bytes) {
        let hdr = pcap::parse_header(bytes).map_err(|e| not_capture(&e))?;
        return Ok(Format::Pcap(hdr, LinkType::from_pcap(hdr.linktype)));
    }
    Err(not_capture(&match bytes.first_chunk::<4>() {
        Some(m) => format!(
            "unknown magic number {:02x}{:02x}{:02x}{:02x} (expected pcap or pcapng)",
            m[0], m[1], m[2], m[3]
        ),
        None => format!("file is only {} bytes long", bytes.len()),
    }))
}

#[derive(Clone)]
enum Inner<'a> {
    Pcap(PcapReader<'a>),
    /// A classic pcap whose link type is not decoded, and how many of its
    /// packets were stepped over.
    PcapUnsupported(PcapReader<'a>, u64),
    Pcapng(PcapngReader<'a>),
}

/// Where a reader was before a batch.
#[derive(Clone, Copy)]
enum Mark {
    Pcap(pcap::Mark),
    Pcapng(pcapng::Mark),
}

/// Walks one [`CaptureFile`] batch by batch.
pub struct CaptureReader<'a> {
    inner: Inner<'a>,
    /// Where a pcapng skip puts the packets it steps over.
    scratch: Vec<PacketRef>,
    /// The file's guard against shrinking (mapped files only).
    guard: Option<&'a Guard>,
    name: &'a str,
    /// Where this reader takes the file to end since part of it vanished
    /// ([`vanish::NONE`] before).
    end: u64,
    /// The warning about that has been given.
    warned: bool,
    /// The warning about a classic pcap's undecoded link type.
    notice: Option<Warning>,
}

impl<'a> CaptureReader<'a> {
    /// Clears `out`, appends up to `max` packets; returns how many (0 = end
    /// of file, or `max` was 0).
    #[inline]
    pub fn next_batch(&mut self, out: &mut Vec<PacketRef>, max: usize) -> usize {
        let Some(guard) = self.guard else {
            return self.read(out, max);
        };
        let mark = self.mark();
        let n = self.read(out, max);
        match guard.check(self.position()) {
            None => n,
            Some(end) => self.vanished(mark, end, n, Some(out), max),
        }
    }

    /// Steps over the packets the next [`CaptureReader::next_batch`] of the
    /// same `max` would return, without describing them; returns how many
    /// (0 = end of file). It stops where `next_batch` would, with the same
    /// warning and counts, so readers that skip and readers that read stay
    /// on the same batch boundaries.
    #[inline]
    pub fn skip_batch(&mut self, max: usize) -> usize {
        let Some(guard) = self.guard else {
            return self.skip(max);
        };
        let mark = self.mark();
        let n = self.skip(max);
        match guard.check(self.position()) {
            None => n,
            Some(end) => self.vanished(mark, end, n, None, max),
        }
    }

    /// A copy of this reader for reading ahead (`source/retime.rs`): it
    /// reads on from where this one is without moving it, stopping where a
    /// shrunk file now ends as this one would; its warnings are its own.
    pub(crate) fn lookahead(&self) -> CaptureReader<'a> {
        CaptureReader {
            inner: self.inner.clone(),
            scratch: Vec::new(),
            guard: self.guard,
            name: self.name,
            end: self.end,
            warned: self.warned,
            notice: None,
        }
    }

    /// Moves to byte `position`, where another reader of the same file
    /// found that the next `packets` packets (a whole batch, read with no
    /// warning) end, as if they had been skipped. Classic pcap only (a
    /// pcapng walk must see every interface block): false, and nothing
    /// moves, for pcapng, at the end of the file or for a position behind
    /// this reader or past the file — and once part of the file vanished
    /// (the caller then skips the batch, which stops where the file now
    /// ends).
    #[inline]
    pub fn jump_to(&mut self, position: u64, packets: usize) -> bool {
        let Inner::Pcap(r) = &mut self.inner else {
            return false;
        };
        let mark = r.mark();
        if !r.jump_to(position, packets) {
            return false;
        }
        if let Some(guard) = self.guard {
            if guard.check(position).is_some() {
                r.restore(mark);
                return false;
            }
        }
        true
    }

    #[inline(always)]
    fn read(&mut self, out: &mut Vec<PacketRef>, max: usize) -> usize {
        match &mut self.inner {
            Inner::Pcap(r) => r.next_batch(out, max),
            Inner::PcapUnsupported(r, skipped) => {
                out.clear();
                *skipped += r.skip_batch(usize::MAX) as u64;
                0
            }
            Inner::Pcapng(r) => r.next_batch(out, max),
        }
    }

    #[inline(always)]
    fn skip(&mut self, max: usize) -> usize {
        match &mut self.inner {
            Inner::Pcap(r) => r.skip_batch(max),
            Inner::PcapUnsupported(r, skipped) => {
                *skipped += r.skip_batch(usize::MAX) as u64;
                0
            }
            Inner::Pcapng(r) => r.next_batch(&mut self.scratch, max),
        }
    }

    #[inline(always)]
    fn mark(&self) -> Mark {
        match &self.inner {
            Inner::Pcap(r) | Inner::PcapUnsupported(r, _) => Mark::Pcap(r.mark()),
            Inner::Pcapng(r) => Mark::Pcapng(r.mark()),
        }
    }

    /// Part of the file vanished and it now ends at `end`; the batch just
    /// read (or skipped, `out` = `None`) from `mark` returned `n` packets.
    /// When that batch reached past `end` or ended the walk, it is walked
    /// again from `mark` with the file ending at `end`, so it stops exactly
    /// where a copy of the file cut at `end` would; later batches stop
    /// there too. Returns the packets of the batch.
    #[cold]
    #[inline(never)]
    fn vanished(
        &mut self,
        mark: Mark,
        end: u64,
        mut n: usize,
        out: Option<&mut Vec<PacketRef>>,
        max: usize,
    ) -> usize {
        if end < self.end {
            self.end = end;
            let cut = usize::try_from(end).unwrap_or(usize::MAX);
            let start = match mark {
                Mark::Pcap(m) => m.pos() as u64,
                Mark::Pcapng(m) => m.pos() as u64,
            };
            if self.position() > end || self.ended() {
                match (&mut self.inner, mark) {
                    (Inner::Pcap(r) | Inner::PcapUnsupported(r, _), Mark::Pcap(m)) => r.restore(m),
                    (Inner::Pcapng(r), Mark::Pcapng(m)) => r.restore(m),
                    _ => {}
                }
                if start > end {
                    // This reader had walked past the new end in batches
                    // already delivered (they were intact then): it stops
                    // where it is.
                    if let Some(out) = out {
                        out.clear();
                    }
                    let w = self.warning_at(
                        end,
                        &format!(
                            "; this reader had walked {} bytes past that before they vanished",
                            start - end
                        ),
                    );
                    self.walk().end_with(w);
                    self.warned = true;
                    return 0;
                }
                self.walk().limit(cut);
                n = match out {
                    Some(out) => self.read(out, max),
                    None => self.skip(max),
                };
            } else {
                self.walk().limit(cut);
            }
        }
        if self.walk().ended_at_end() && !self.warned {
            let w = self.warning_at(self.end, "");
            self.walk().end_with(w);
            self.warned = true;
        }
        n
    }

    /// The walk's state, whichever format.
    fn walk(&mut self) -> &mut Walk<'a> {
        match &mut self.inner {
            Inner::Pcap(r) | Inner::PcapUnsupported(r, _) => r.walk_mut(),
            Inner::Pcapng(r) => r.walk_mut(),
        }
    }

    /// The walk has ended (end of data, damage or a vanished tail).
    fn ended(&mut self) -> bool {
        self.walk().done
    }

    /// The warning of a file whose bytes from `end` on vanished.
    fn warning_at(&mut self, end: u64, more: &str) -> Warning {
        let last = self.walk().number;
        Warning {
            file: self.name.to_string(),
            offset: end,
            message: format!(
                "the file shrank while it was read (truncated by another process?): its \
                 bytes from here on vanished; reading stopped after packet {last}{more}"
            ),
        }
    }

    /// The buffer [`PacketRef::offset`] points into (the whole file).
    pub fn data(&self) -> &'a [u8] {
        match &self.inner {
            Inner::Pcap(r) | Inner::PcapUnsupported(r, _) => r.data(),
            Inner::Pcapng(r) => r.data(),
        }
    }

    /// Set when the file ended early (cut off) or is corrupt past some point.
    pub fn warning(&self) -> Option<&Warning> {
        match &self.inner {
            Inner::Pcap(r) | Inner::PcapUnsupported(r, _) => r.warning(),
            Inner::Pcapng(r) => r.warning(),
        }
    }

    /// Every warning about the file so far: the link types it holds that
    /// earlybird does not decode (the pcap header's, or each pcapng
    /// interface's first of its type), then [`CaptureReader::warning`].
    pub fn warnings(&self) -> impl Iterator<Item = &Warning> {
        let links: &[Warning] = match &self.inner {
            Inner::Pcapng(r) => r.link_warnings(),
            _ => self.notice.as_slice(),
        };
        links.iter().chain(self.warning())
    }

    /// Packets skipped because their link type is not decoded: every
    /// packet of a classic pcap of such a type, the packets of such pcapng
    /// interfaces.
    pub fn skipped_unsupported_link(&self) -> u64 {
        match &self.inner {
            Inner::Pcap(_) => 0,
            Inner::PcapUnsupported(_, skipped) => *skipped,
            Inner::Pcapng(r) => r.skipped_unsupported_link(),
        }
    }

    /// Bytes consumed so far (for a progress bar).
    pub fn position(&self) -> u64 {
        match &self.inner {
            Inner::Pcap(r) | Inner::PcapUnsupported(r, _) => r.position(),
            Inner::Pcapng(r) => r.position(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pcap_le(linktype: u32, records: &[&[u8]]) -> Vec<u8> {
        let mut v = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        v.extend_from_slice(&65535u32.to_le_bytes());
        v.extend_from_slice(&linktype.to_le_bytes());
        for (i, r) in records.iter().enumerate() {
            v.extend_from_slice(&(i as u32).to_le_bytes());
            v.extend_from_slice(&0u32.to_le_bytes());
            v.extend_from_slice(&(r.len() as u32).to_le_bytes());
            v.extend_from_slice(&(r.len() as u32).to_le_bytes());
            v.extend_from_slice(r);
        }
        v
    }

    #[test]
    fn jumping_to_where_another_reader_stopped_equals_skipping() {
        let records: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 1 + i as usize]).collect();
        let refs: Vec<&[u8]> = records.iter().map(|r| r.as_slice()).collect();
        let f = CaptureFile::from_bytes("j.pcap", pcap_le(1, &refs)).unwrap();
        let (mut reader, mut jumper, mut skipper) = (f.reader(), f.reader(), f.reader());
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        assert_eq!(reader.next_batch(&mut a, 4), 4);
        assert!(jumper.jump_to(reader.position(), 4));
        assert_eq!(skipper.skip_batch(4), 4);
        assert_eq!(jumper.position(), skipper.position());
        // Numbers and offsets of the next batch are the same either way.
        assert_eq!(jumper.next_batch(&mut b, 4), 4);
        assert_eq!(skipper.next_batch(&mut c, 4), 4);
        assert_eq!(b, c);
        assert_eq!(b[0].number, 5);
        // Never backwards, never past the file.
        assert!(!jumper.jump_to(0, 4));
        assert!(!jumper.jump_to(f.bytes().len() as u64 + 1, 4));
        // Not for pcapng, whose walk must see every interface block.
        let ng = CaptureFile::open(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../testdata/pcap/zeek__pcapng-multi-interface.pcapng"),
        )
        .unwrap();
        let mut r = ng.reader();
        assert!(!r.jump_to(r.position() + 16, 1));
    }

    #[test]
    fn send_sync() {
        fn check<T: Send + Sync>() {}
        check::<CaptureFile>();
    }

    #[test]
    fn detects_and_reads_pcap() {
        let f = CaptureFile::from_bytes("a.pcap", pcap_le(1, &[&[1, 2], &[3]])).unwrap();
        assert_eq!(f.name(), "a.pcap");
        let mut r1 = f.reader();
        let mut r2 = f.reader();
        let mut b = Vec::new();
        assert_eq!(r1.next_batch(&mut b, 256), 2);
        assert_eq!(b[1].bytes(r1.data()), &[3]);
        assert_eq!(r1.next_batch(&mut b, 256), 0);
        assert_eq!(r1.position(), f.bytes().len() as u64);
        assert_eq!(r2.next_batch(&mut b, 1), 1, "readers are independent");
        assert_eq!((r1.warning(), r1.skipped_unsupported_link()), (None, 0));
    }

    #[test]
    fn undecoded_link_type_opens_counts_and_warns() {
        // LINKTYPE_USER0 (147), three records, the last one cut off.
        let mut bytes = pcap_le(147, &[&[1, 2], &[3], &[4, 5, 6]]);
        bytes.truncate(bytes.len() - 1);
        let f = CaptureFile::from_bytes("user0.pcap", bytes).unwrap();
        for skipping in [false, true] {
            let mut r = f.reader();
            let mut b = vec![PacketRef {
                offset: 0,
                caplen: 0,
                orig_len: 0,
                ts: 0,
                link: LinkType::Ethernet,
                number: 0,
            }];
            let n = if skipping {
                r.skip_batch(1)
            } else {
                r.next_batch(&mut b, 1)
            };
            assert_eq!(n, 0, "no packet is delivered");
            assert!(skipping || b.is_empty());
            assert_eq!(r.skipped_unsupported_link(), 2);
            assert_eq!(r.position(), f.bytes().len() as u64 - 18);
            assert!(!r.jump_to(r.position() + 1, 1));
            let ws: Vec<&Warning> = r.warnings().collect();
            assert_eq!(ws.len(), 2, "{ws:?}");
            assert_eq!((ws[0].file.as_str(), ws[0].offset), ("user0.pcap", 20));
            assert!(ws[0].message.contains("link type 147"), "{}", ws[0]);
            assert!(ws[0].message.contains("unsupported_link"), "{}", ws[0]);
            assert!(ws[1].message.contains("cut off"), "{}", ws[1]);
            assert_eq!(r.warning(), Some(ws[1]));
        }
        // A supported link type gives no such warning.
        let f = CaptureFile::from_bytes("eth.pcap", pcap_le(1, &[&[1]])).unwrap();
        assert_eq!(f.reader().warnings().count(), 0);
    }

    #[test]
    fn header_errors_name_the_file() {
        let e = CaptureFile::from_bytes("x.bin", b"hello world, not a capture".to_vec());
        let msg = e.unwrap_err().to_string();
        assert!(
            msg.contains("x.bin") && msg.contains("not a capture"),
            "{msg}"
        );
        let e = CaptureFile::from_bytes("e", Vec::new()).unwrap_err();
        assert!(matches!(e, Error::NotCapture { .. }), "{e}");
        let e = CaptureFile::from_bytes("short.pcap", pcap_le(1, &[])[..10].to_vec()).unwrap_err();
        assert!(e.to_string().contains("shorter"), "{e}");
        let e = CaptureFile::from_bytes("ng", vec![0x0a, 0x0d, 0x0d, 0x0a, 1, 2]).unwrap_err();
        assert!(matches!(e, Error::NotCapture { .. }), "{e}");
    }

    #[test]
    fn open_maps_files_and_reports_io_errors() {
        let dir = std::env::temp_dir().join(format!("earlybird-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.pcap");
        std::fs::write(&p, pcap_le(101, &[&[0x45; 20]])).unwrap();
        let f = CaptureFile::open(&p).unwrap();
        let mut r = f.reader();
        let mut b = Vec::new();
        assert_eq!(r.next_batch(&mut b, 8), 1);
        assert_eq!(b[0].link, LinkType::Raw);
        let empty = dir.join("empty.pcap");
        std::fs::write(&empty, b"").unwrap();
        assert!(matches!(
            CaptureFile::open(&empty),
            Err(Error::NotCapture { .. })
        ));
        let missing = dir.join("missing.pcap");
        let e = CaptureFile::open(&missing).unwrap_err();
        assert!(matches!(e, Error::Io { .. }) && e.to_string().contains("missing.pcap"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A file large enough for `map_ahead` reads the same whether a helper
    /// populates it, only read-ahead is asked, or both calls come (the
    /// second does nothing); readers may start before either.
    #[test]
    fn map_ahead_keeps_what_readers_see() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.pcap");
        let record: Vec<u8> = (0..60_000u32).map(|i| (i % 253) as u8).collect();
        let count = populate::BACKGROUND_FROM / record.len() + 2;
        let records: Vec<&[u8]> = (0..count).map(|_| record.as_slice()).collect();
        std::fs::write(&p, pcap_le(101, &records)).unwrap();
        for order in [[true, false], [false, true]] {
            let f = CaptureFile::open(&p).unwrap();
            assert!(f.bytes().len() >= populate::BACKGROUND_FROM);
            let mut r = f.reader();
            let mut b = Vec::new();
            let mut n = r.next_batch(&mut b, 3);
            f.map_ahead(order[0]);
            f.map_ahead(order[1]);
            let mut total = 0;
            loop {
                total += n;
                for p in &b {
                    assert_eq!(p.bytes(r.data()), &record[..]);
                }
                if n == 0 {
                    break;
                }
                n = r.next_batch(&mut b, 64);
            }
            assert_eq!((total, r.warning()), (count, None));
        }
    }

    /// The shared corpus, or `None` (with a message) when it is absent.
    fn corpus() -> Option<PathBuf> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
        if dir.is_dir() {
            Some(dir)
        } else {
            eprintln!("skipping: corpus not found at {}", dir.display());
            None
        }
    }

    /// Opens and drains one file, checking every packet stays inside the
    /// buffer. Returns (delivered, skipped, warning) or the open error.
    fn drain(path: &Path) -> Result<(u64, u64, Option<Warning>)> {
        let f = CaptureFile::open(path)?;
        let mut r = f.reader();
        let mut b = Vec::with_capacity(64);
        let (mut n, mut last) = (0u64, 0u64);
        let mut rounds = 0usize;
        while r.next_batch(&mut b, 64) > 0 {
            rounds += 1;
            assert!(rounds <= f.bytes().len(), "{}: no progress", path.display());
            for p in &b {
                assert!(p.offset + p.caplen as usize <= r.data().len());
                assert!(p.caplen <= p.orig_len && p.number > last);
                last = p.number;
            }
            n += b.len() as u64;
        }
        assert!(r.position() as usize <= f.bytes().len());
        Ok((n, r.skipped_unsupported_link(), r.warning().cloned()))
    }

    /// Every file of the corpus's malformed/ and tunnels/, sorted.
    fn malformed_and_tunnels(root: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        files_under(&root.join("malformed"), &mut files);
        files_under(&root.join("tunnels"), &mut files);
        files.sort();
        files
    }

    fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                files_under(&p, out);
            } else {
                out.push(p);
            }
        }
    }

    /// Every file of malformed/ and tunnels/ opens or fails cleanly, and
    /// drains without panicking or looping.
    #[test]
    fn corpus_malformed_and_tunnels_never_panic() {
        let Some(root) = corpus() else { return };
        let files = malformed_and_tunnels(&root);
        let (mut ok, mut err, mut warned) = (0, 0, 0);
        for p in &files {
            match drain(p) {
                Ok((_, _, w)) => {
                    ok += 1;
                    if let Some(w) = w {
                        warned += 1;
                        eprintln!("warning: {w}");
                    }
                }
                Err(e) => {
                    err += 1;
                    if !p.extension().is_some_and(|x| x == "out" || x == "txt") {
                        eprintln!("error: {e}");
                    }
                }
            }
        }
        eprintln!(
            "{} files: {ok} read ({warned} with a warning), {err} refused",
            files.len()
        );
        assert!(ok > 250, "most corpus captures must be readable");
    }

    /// Skipping every other batch stops where reading does: the batches read
    /// equal the same batches of a plain read, with the same warning and
    /// end, on every capture of malformed/ and tunnels/ (damaged files,
    /// both byte orders, pcapng) and at several batch sizes.
    #[test]
    fn skipping_keeps_batch_boundaries() {
        let Some(root) = corpus() else { return };
        let files = malformed_and_tunnels(&root);
        let mut checked = 0;
        for p in &files {
            let Ok(f) = CaptureFile::open(p) else {
                continue;
            };
            for max in [1, 3, 64] {
                let mut plain = f.reader();
                let mut all = Vec::new();
                let mut b = Vec::new();
                while plain.next_batch(&mut b, max) > 0 {
                    all.push(b.clone());
                }
                for first in [0, 1] {
                    let mut r = f.reader();
                    let mut i = 0;
                    loop {
                        let n = if i % 2 == first {
                            r.skip_batch(max)
                        } else {
                            let n = r.next_batch(&mut b, max);
                            if n > 0 {
                                assert_eq!(b, all[i], "{} batch {i}", p.display());
                            }
                            n
                        };
                        if n == 0 {
                            break;
                        }
                        assert_eq!(n, all[i].len(), "{} batch {i}", p.display());
                        i += 1;
                    }
                    assert_eq!(i, all.len(), "{}", p.display());
                    assert_eq!(
                        r.warning().map(|w| w.to_string()),
                        plain.warning().map(|w| w.to_string()),
                        "{}",
                        p.display()
                    );
                    assert_eq!(r.position(), plain.position(), "{}", p.display());
                    assert_eq!(r.skip_batch(max), 0, "stays at end");
                    checked += 1;
                }
            }
        }
        assert!(checked > 500, "{checked}");
    }

    /// Packet counts agree with the manifest (tshark/capinfos) for every
    /// capture of tunnels/ and malformed/ that capinfos read without error.
    #[test]
    fn corpus_counts_match_manifest() {
        let Some(root) = corpus() else { return };
        let Ok(manifest) = std::fs::read_to_string(root.join("MANIFEST.md")) else {
            eprintln!("skipping: no MANIFEST.md");
            return;
        };
        let mut section = "";
        let (mut checked, mut mismatches) = (0, Vec::new());
        for line in manifest.lines() {
            if let Some(s) = line.strip_prefix("## ") {
                section = s.trim_end_matches('/');
                continue;
            }
            if section != "tunnels" && section != "malformed" {
                continue;
            }
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            if cells.len() < 13 {
                continue;
            }
            // A clean file (empty "read error" column) has its count in "pkts";
            // a damaged one says how far capinfos got before the error, and we
            // must deliver the same packets and then warn.
            let read_error = cells[11];
            let (pkts, damaged) = if read_error.is_empty() {
                match cells[6].parse::<u64>() {
                    Ok(n) => (n, false),
                    Err(_) => continue,
                }
            } else {
                let Some(n) = read_error
                    .split("after reading ")
                    .nth(1)
                    .and_then(|t| t.split(' ').next())
                    .and_then(|t| t.parse::<u64>().ok())
                else {
                    continue;
                };
                (n, true)
            };
            // capinfos stops after 1 packet here, although records 1 and 2
            // are well-formed standard records (record 3, at byte 574, claims
            // 167776960 captured bytes): libpcap's rules give 2, then the
            // warning.
            let pkts = match cells[1] {
                "pcapplusplus_fuzz/pcpp__fuzz__crash-exception-cast-constructed-record" => 2,
                _ => pkts,
            };
            let path = root.join(section).join(cells[1]);
            match drain(&path) {
                Ok((n, skipped, w)) => {
                    checked += 1;
                    if n + skipped != pkts || w.is_some() != damaged {
                        mismatches.push(format!("{}: {n}+{skipped} != {pkts} {w:?}", cells[1]));
                    }
                }
                Err(e) => mismatches.push(format!("{}: {e}", cells[1])),
            }
        }
        eprintln!("{checked} files checked against the manifest");
        assert!(mismatches.is_empty(), "{mismatches:#?}");
        assert!(checked > 200, "only {checked} rows checked");
    }
}
