//! The captures of a run, opened just ahead of the shards: the producer
//! thread `eb-input` and the shared queue every shard takes captures from.
//!
//! Contract: [`Feed::start`] spawns the producer over a plan
//! ([`super::inputs::Inputs`]); it opens each file or cuts each stream into
//! chunks, at most [`AHEAD`] captures ahead of the slowest shard, warning
//! about and counting what it cannot use. Every shard takes the same
//! captures in the same order ([`Feed::get`]); a capture is dropped once
//! every shard has taken it and let it go. A stop flag raised, or
//! [`Feed::cancel`], ends every wait; the producer then hands out nothing
//! more.
//!
//! With a capture filter (`--filter`) the producer reads each capture
//! itself and hands out, instead, in-memory pcap captures of the packets
//! the filter keeps (at most [`CHUNK_BYTES`] each, one link type each,
//! nanosecond stamps, wire lengths kept), as the next chunks of the same
//! input: the shards see what `tcpdump -r FILE -w - EXPRESSION` would hand
//! them through a pipe. The packets left out are counted in the filter;
//! the warnings of the capture read (damage, unsupported link types) are
//! the producer's, their offsets the input's.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use super::capfilter::{CaptureFilter, Program};
use super::inputs::{open_sniffed, skip_reason, Planned, SkipReason, AHEAD};
use super::stream::{ChunkError, Chunker, Place, CHUNK_BYTES};
use super::{CaptureFile, PacketRef, Warning};
use crate::decode::LinkType;

/// One capture handed to the shards.
#[derive(Debug)]
pub(crate) struct FeedItem {
    /// The capture (a file, or one chunk of a stream).
    pub file: CaptureFile,
    /// It is the next chunk of the same stream as the capture before.
    pub continues: bool,
    /// For a chunk: where it is in its stream.
    chunk: Option<Place>,
}

impl FeedItem {
    /// The capture is a chunk of a stream (not a file of its own).
    pub fn is_chunk(&self) -> bool {
        self.chunk.is_some()
    }

    /// The offset in the input (the stream, for a chunk) of byte `offset`
    /// of [`FeedItem::file`].
    pub fn input_offset(&self, offset: u64) -> u64 {
        match self.chunk {
            Some(place) => place.stream_offset(offset),
            None => offset,
        }
    }
}

#[derive(Default)]
struct FeedState {
    /// Captures not yet taken by every shard, from number `first` on.
    items: VecDeque<(Arc<FeedItem>, usize)>,
    first: usize,
    /// The producer has handed out everything.
    done: bool,
    /// The run stopped: the producer hands out nothing more.
    cancelled: bool,
    warnings: Vec<Warning>,
    skipped: Vec<(SkipReason, u64)>,
}

/// The captures of a run, produced ahead of the shards (see the module
/// docs).
pub(crate) struct Feed {
    state: Mutex<FeedState>,
    changed: Condvar,
    shards: usize,
    /// Set once every shard thread runs: large maps may be populated then.
    pub started: AtomicBool,
    /// A core is left to helper threads (see `CaptureFile::map_ahead`).
    pub spare: AtomicBool,
    /// Raised when the run stops (a signal): a shard waiting for the next
    /// capture — a pipe with nothing to read — stops waiting.
    stop: Vec<Arc<AtomicBool>>,
    /// The capture filter run over every capture before it is handed out.
    filter: Option<Arc<CaptureFilter>>,
}

impl Feed {
    /// Starts the producer thread over the planned `items` for `shards`
    /// readers, which stop waiting for a capture once any of the `stop`
    /// flags is raised; with `filter`, the captures handed out hold only
    /// the packets it keeps.
    pub(super) fn start(
        items: Vec<Planned>,
        shards: usize,
        stop: Vec<Arc<AtomicBool>>,
        filter: Option<Arc<CaptureFilter>>,
    ) -> Arc<Feed> {
        let feed = Arc::new(Feed {
            state: Mutex::new(FeedState::default()),
            changed: Condvar::new(),
            shards: shards.max(1),
            started: AtomicBool::new(false),
            spare: AtomicBool::new(false),
            stop,
            filter,
        });
        let producer = feed.clone();
        let spawned = std::thread::Builder::new()
            .name("eb-input".into())
            .spawn(move || produce(&producer, items));
        if let Err(e) = spawned {
            let mut st = feed.lock();
            st.warnings.push(Warning {
                file: String::new(),
                offset: Warning::NO_OFFSET,
                message: format!("cannot start the input thread: {e}"),
            });
            st.done = true;
        }
        feed
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FeedState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Capture number `k` (every shard asks for 0, 1, 2, … in turn),
    /// waiting for the producer; `None` after the last one, and once the
    /// run stops.
    pub fn get(&self, k: usize) -> Option<Arc<FeedItem>> {
        let mut st = self.lock();
        loop {
            if k < st.first {
                return None;
            }
            let i = k - st.first;
            if i < st.items.len() {
                let (item, left) = &mut st.items[i];
                let item = item.clone();
                *left -= 1;
                while st.items.front().is_some_and(|(_, left)| *left == 0) {
                    st.items.pop_front();
                    st.first += 1;
                    self.changed.notify_all();
                }
                return Some(item);
            }
            if st.done || st.cancelled || self.stopped() {
                return None;
            }
            st = self.wait(st);
        }
    }

    /// Waits for the producer or a taker; a stream may have nothing to
    /// read for a long time, so the stop flags are looked at now and then.
    fn wait<'g>(
        &self,
        st: std::sync::MutexGuard<'g, FeedState>,
    ) -> std::sync::MutexGuard<'g, FeedState> {
        self.changed
            .wait_timeout(st, std::time::Duration::from_millis(50))
            .unwrap_or_else(|p| p.into_inner())
            .0
    }

    fn stopped(&self) -> bool {
        self.stop.iter().any(|f| f.load(Ordering::Relaxed))
    }

    /// Capture number 0 without taking it (the DSCP writer reads the link
    /// type of the first packet before the shards start).
    pub fn peek_first(&self) -> Option<Arc<FeedItem>> {
        let mut st = self.lock();
        loop {
            if st.first > 0 {
                return None;
            }
            if let Some((item, _)) = st.items.front() {
                return Some(item.clone());
            }
            if st.done || st.cancelled || self.stopped() {
                return None;
            }
            st = self.wait(st);
        }
    }

    /// Stops the producer (the run is stopping).
    pub fn cancel(&self) {
        self.lock().cancelled = true;
        self.changed.notify_all();
    }

    /// The warnings and skipped inputs the producer found.
    pub fn take_report(&self) -> (Vec<Warning>, Vec<(SkipReason, u64)>) {
        let mut st = self.lock();
        (
            std::mem::take(&mut st.warnings),
            std::mem::take(&mut st.skipped),
        )
    }

    /// Waits for room, then appends a capture; `None` once cancelled.
    fn push(&self, item: FeedItem) -> Option<Arc<FeedItem>> {
        let mut st = self.lock();
        while st.items.len() >= AHEAD && !st.cancelled {
            st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        if st.cancelled {
            return None;
        }
        let item = Arc::new(item);
        st.items.push_back((item.clone(), self.shards));
        self.changed.notify_all();
        Some(item)
    }

    fn warn(&self, file: &str, offset: u64, message: String) {
        self.lock().warnings.push(Warning {
            file: file.to_string(),
            offset,
            message,
        });
    }

    fn skip(&self, reason: SkipReason) {
        let mut st = self.lock();
        match st.skipped.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => st.skipped.push((reason, 1)),
        }
    }

    fn is_cancelled(&self) -> bool {
        self.lock().cancelled
    }
}

/// The producer thread: opens or chunks every planned input in order.
fn produce(feed: &Feed, items: Vec<Planned>) {
    'inputs: for item in items {
        if feed.is_cancelled() {
            break;
        }
        match item {
            Planned::File { path, opened, .. } => {
                match opened.map_or_else(|| CaptureFile::open(&path), Ok) {
                    Ok(file) => {
                        let item = FeedItem {
                            file,
                            continues: false,
                            chunk: None,
                        };
                        if let Some(f) = &feed.filter {
                            if push_filtered(feed, f, &item, false).is_none() {
                                break;
                            }
                            continue;
                        }
                        let Some(item) = feed.push(item) else {
                            break;
                        };
                        // Populating a large map waits until every shard runs
                        // (a thread start waits for the lock populating holds).
                        while !feed.started.load(Ordering::Acquire) && !feed.is_cancelled() {
                            std::thread::sleep(std::time::Duration::from_millis(1));
                        }
                        item.file.map_ahead(feed.spare.load(Ordering::Relaxed));
                    }
                    Err(e) => {
                        // Checked at planning; changed since.
                        feed.skip(skip_reason(&e));
                        feed.warn(
                            &path.display().to_string(),
                            Warning::NO_OFFSET,
                            format!("skipped: {e}"),
                        );
                    }
                }
            }
            Planned::Stream {
                name,
                origin,
                eager,
            } => {
                let src = match open_sniffed(&origin) {
                    Ok(s) => s,
                    Err(e) => {
                        feed.skip(SkipReason::Unreadable);
                        feed.warn(&name, Warning::NO_OFFSET, format!("skipped: {e}"));
                        continue;
                    }
                };
                let mut chunker = Chunker::new(src, CHUNK_BYTES, eager);
                // Filtered: a capture of the stream was handed out already.
                let mut handed = false;
                loop {
                    match chunker.next_chunk() {
                        Ok(Some(ch)) => {
                            let chunk = Some(ch.place);
                            let continues = ch.index > 0;
                            match CaptureFile::from_bytes(&name, ch.bytes) {
                                Ok(file) => {
                                    let item = FeedItem {
                                        file,
                                        continues,
                                        chunk,
                                    };
                                    if let Some(f) = &feed.filter {
                                        match push_filtered(feed, f, &item, handed) {
                                            Some(h) => handed |= h,
                                            None => break 'inputs,
                                        }
                                    } else if feed.push(item).is_none() {
                                        break 'inputs;
                                    }
                                }
                                Err(e) => {
                                    feed.skip(skip_reason(&e));
                                    feed.warn(&name, ch.place.base, format!("skipped: {e}"));
                                    continue 'inputs;
                                }
                            }
                        }
                        Ok(None) => break,
                        Err(ChunkError::NotCapture(reason)) => {
                            feed.skip(SkipReason::NotCapture);
                            feed.warn(&name, 0, format!("skipped: not a capture stream: {reason}"));
                            break;
                        }
                        Err(ChunkError::Read(at, e)) => {
                            feed.warn(&name, at, format!("read error, input ends here: {e}"));
                            break;
                        }
                    }
                }
            }
        }
    }
    let mut st = feed.lock();
    st.done = true;
    feed.changed.notify_all();
}

/// A filtered capture being assembled: a classic pcap (little-endian,
/// nanosecond stamps) of one link type.
struct Piece {
    link: LinkType,
    bytes: Vec<u8>,
}

impl Piece {
    fn new(link: LinkType) -> Piece {
        let mut bytes = Vec::with_capacity(CHUNK_BYTES + 64 * 1024);
        bytes.extend_from_slice(&0xA1B2_3C4Du32.to_le_bytes());
        bytes.extend_from_slice(&2u16.to_le_bytes());
        bytes.extend_from_slice(&4u16.to_le_bytes());
        bytes.extend_from_slice(&[0; 8]);
        let snaplen = super::pcap_writer::MAX_SNAPLEN;
        bytes.extend_from_slice(&snaplen.to_le_bytes());
        let linktype = super::pcap_writer::linktype_number(link);
        bytes.extend_from_slice(&linktype.to_le_bytes());
        Piece { link, bytes }
    }

    fn add(&mut self, p: &PacketRef, data: &[u8]) {
        let ts = p.ts;
        let b = &mut self.bytes;
        b.extend_from_slice(&((ts / 1_000_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&((ts % 1_000_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&(data.len() as u32).to_le_bytes());
        b.extend_from_slice(&p.orig_len.max(data.len() as u32).to_le_bytes());
        b.extend_from_slice(data);
    }

    fn full(&self) -> bool {
        self.bytes.len() >= CHUNK_BYTES
    }
}

/// Reads `item`'s capture, runs the filter over every packet and hands out
/// the packets kept as captures of their own (see the module docs);
/// `handed`: a capture of the same input was handed out before (the first
/// one of this item then continues it). Returns whether one was handed
/// out, `None` once the feed is cancelled.
fn push_filtered(
    feed: &Feed,
    filter: &CaptureFilter,
    item: &FeedItem,
    handed: bool,
) -> Option<bool> {
    let name = item.file.name();
    let mut reader = item.file.reader();
    let data = reader.data();
    let mut refs: Vec<PacketRef> = Vec::with_capacity(super::BATCH);
    let mut piece: Option<Piece> = None;
    let mut continues = item.continues && handed;
    let mut any = false;
    // The program of the link type read last (`None`: it cannot be
    // compiled for it, its packets are all left out).
    let mut prog: Option<(LinkType, Option<Arc<Program>>)> = None;
    let hand = |p: Piece, continues: &mut bool| {
        let out = FeedItem {
            file: CaptureFile::from_bytes(name, p.bytes).ok()?,
            continues: *continues,
            chunk: None,
        };
        *continues = true;
        feed.push(out).map(|_| ())
    };
    while reader.next_batch(&mut refs, super::BATCH) > 0 {
        let mut left_out = 0u64;
        for p in &refs {
            if prog.as_ref().map(|(l, _)| *l) != Some(p.link) {
                let compiled = match filter.program(p.link) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        feed.warn(
                            name,
                            Warning::NO_OFFSET,
                            format!("its {:?} packets are left out: {e}", p.link),
                        );
                        None
                    }
                };
                prog = Some((p.link, compiled));
            }
            let bytes = p.bytes(data);
            let kept = prog
                .as_ref()
                .and_then(|(_, c)| c.as_ref())
                .is_some_and(|c| c.matches(bytes, p.orig_len));
            if !kept {
                left_out += 1;
                continue;
            }
            if piece.as_ref().is_some_and(|x| x.link != p.link || x.full()) {
                if let Some(done) = piece.take() {
                    hand(done, &mut continues)?;
                    any = true;
                }
            }
            piece
                .get_or_insert_with(|| Piece::new(p.link))
                .add(p, bytes);
        }
        filter.count(left_out);
        if feed.is_cancelled() {
            return None;
        }
    }
    if let Some(done) = piece.take() {
        hand(done, &mut continues)?;
        any = true;
    }
    // What the shards would have reported reading the capture themselves.
    let vanished = match reader.warning() {
        None => item.file.vanished(),
        Some(_) => None,
    };
    for w in reader.warnings().cloned().chain(vanished) {
        let offset = match w.offset {
            Warning::NO_OFFSET => w.offset,
            o => item.input_offset(o),
        };
        feed.warn(&w.file, offset, w.message);
    }
    let unsupported = reader.skipped_unsupported_link();
    if unsupported > 0 {
        feed.warn(
            name,
            Warning::NO_OFFSET,
            format!("{unsupported} packets on links that cannot be decoded were left out"),
        );
    }
    Some(any)
}
