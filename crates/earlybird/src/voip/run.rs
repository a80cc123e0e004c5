//! A VoIP run over capture files or a live interface: packets →
//! [`Tracker`] → the caller's outputs, the outputs on their own thread.
//!
//! Contract: [`track_files`] reads the files in the order given (one
//! packet time line: calls may span files), hands every UDP datagram and
//! every segment of a TCP connection seen carrying SIP to one tracker, and
//! sends the records of ended calls and streams, in batches, over a
//! bounded channel to a writer thread that calls `write` (the database
//! insert, the record files). At the end of the input, and when `stop` is
//! set (SIGINT/SIGTERM), the calls still open are ended (`open`) and
//! written before it returns. A file that cannot be opened is an error
//! naming it; a file cut short or corrupt is read up to that point and
//! its warning (file and byte offset) returned. If `write` fails, reading
//! stops, what was already written stays, and the error names the output.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use super::audio::{Archive, ArchiveCounters};
use super::record::{CallRecord, StreamRecord};
use super::tap::{extract, SipConnections};
use super::tracker::{Tracker, TrackerConfig, TrackerCounters};
use crate::decode::Decoded;
use crate::error::{Error, Result};
use crate::source::file::CaptureFile;
use crate::source::PacketRef;

/// Records handed to the writer at once (at most).
const BATCH: usize = 512;

/// What a run saw.
#[derive(Debug, Clone, Default)]
pub struct VoipSummary {
    /// Packets read.
    pub packets: u64,
    /// Packets handed to the tracker.
    pub voip_packets: u64,
    /// Calls written.
    pub calls: u64,
    /// Streams written (with a call or alone).
    pub streams: u64,
    /// What the tracker counted.
    pub counters: TrackerCounters,
    /// TCP connections not followed (the shard-side set was full).
    pub tcp_not_followed: u64,
    /// Files cut short or corrupt, as warnings (file, offset, what).
    pub warnings: Vec<String>,
    /// Most calls held at once.
    pub peak_calls: usize,
    /// What the RTP archive counted (`--rtp-dir`).
    pub audio: ArchiveCounters,
    /// Packets the call stage of a flows run dropped because its channel
    /// was full (live; `super::stage`); 0 here.
    pub stage_dropped: u64,
    /// What the call database's hold did, when there is a database.
    pub db: Option<HoldReport>,
}

/// What the call database's hold did over a run (`voip/store/hold.rs`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HoldReport {
    /// The database's name (a URL without its password).
    pub name: String,
    /// Times the database started failing (an insert failed after the
    /// previous one had succeeded).
    pub outages: u64,
    /// Calls written after having been held.
    pub calls_written_late: u64,
    /// Streams without a call written after having been held.
    pub streams_written_late: u64,
    /// Calls never written (the hold was full, or still held at the end).
    pub calls_not_written: u64,
    /// Streams without a call never written.
    pub streams_not_written: u64,
    /// Most records held at once.
    pub peak_held: u64,
    /// The bound, in records.
    pub bound: u64,
    /// The last failure's message.
    pub last_error: Option<String>,
}

impl HoldReport {
    /// Whether anything was not written.
    pub fn lost(&self) -> bool {
        self.calls_not_written + self.streams_not_written > 0
    }
}

/// Records of ended calls and of streams without a call, for the writer.
pub(crate) type Records = (Vec<CallRecord>, Vec<StreamRecord>);
type Batch = Records;

/// Runs the tracker over `files` (see the module docs).
pub fn track_files(
    files: &[PathBuf],
    cfg: TrackerConfig,
    stop: &AtomicBool,
    mut write: impl FnMut(&[CallRecord], &[StreamRecord]) -> Result<()> + Send,
) -> Result<VoipSummary> {
    let (tx, rx) = crossbeam_channel::bounded::<Batch>(16);
    std::thread::scope(|s| {
        let writer = s.spawn(move || writer_loop(rx, &mut write));
        let read = read_all(files, cfg, stop, &tx);
        drop(tx);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(Error::thread("record writer")));
        let mut summary = read?;
        let (calls, streams) = written?;
        summary.calls = calls;
        summary.streams = streams;
        Ok(summary)
    })
}

/// Hands the tracker's ended records to the writer when a batch is full
/// (or, with `all`, whatever there is); false once the writer is gone.
pub(crate) fn send_records(
    t: &mut Tracker,
    tx: &crossbeam_channel::Sender<Batch>,
    all: bool,
) -> bool {
    if t.calls_out.len() + t.streams_out.len() < BATCH && !all {
        return true;
    }
    if t.calls_out.is_empty() && t.streams_out.is_empty() {
        return true;
    }
    tx.send((
        std::mem::take(&mut t.calls_out),
        std::mem::take(&mut t.streams_out),
    ))
    .is_ok()
}

/// A tracker for `cfg`, keeping RTP in its archive when `cfg.audio` asks.
pub(crate) fn new_tracker(cfg: TrackerConfig) -> Result<Tracker> {
    let audio = cfg.audio.clone();
    let mut t = Tracker::new(cfg);
    if let Some((dir, max)) = audio {
        t.keep_audio(Archive::new(&dir, max)?);
    }
    Ok(t)
}

/// The tracker and what feeds it, for files and live sockets alike.
struct Feed {
    t: Tracker,
    conns: SipConnections,
    d: Decoded,
    sum: VoipSummary,
}

impl Feed {
    fn new(cfg: TrackerConfig) -> Result<Feed> {
        Ok(Feed {
            t: new_tracker(cfg)?,
            conns: SipConnections::new(65_536),
            d: Decoded::default(),
            sum: VoipSummary::default(),
        })
    }

    /// The packets of one batch (`data`: the bytes their offsets point to).
    fn batch(&mut self, data: &[u8], refs: &[PacketRef]) {
        for p in refs {
            self.sum.packets += 1;
            let Some(frame) = data.get(p.offset..p.offset + p.caplen as usize) else {
                continue;
            };
            let Some(v) = extract(p.ts, p.link, frame, &mut self.d) else {
                continue;
            };
            if v.tcp.is_some() && !self.conns.wants(&v) {
                continue;
            }
            self.sum.voip_packets += 1;
            self.t.packet(&v);
        }
        self.sum.peak_calls = self.sum.peak_calls.max(self.t.open_calls());
    }

    /// Ends what is open, hands the rest over, and returns the summary.
    fn finish(mut self, tx: &crossbeam_channel::Sender<Batch>, open: bool) -> VoipSummary {
        self.t.finish();
        if open {
            send_records(&mut self.t, tx, true);
        }
        self.sum.counters = self.t.counters;
        self.sum.audio = self.t.archive_counters();
        self.sum.tcp_not_followed = self.conns.dropped;
        self.sum
    }
}

fn read_all(
    files: &[PathBuf],
    cfg: TrackerConfig,
    stop: &AtomicBool,
    tx: &crossbeam_channel::Sender<Batch>,
) -> Result<VoipSummary> {
    let mut feed = Feed::new(cfg)?;
    let mut refs = Vec::new();
    let mut open = true;
    'files: for path in files {
        let f = CaptureFile::open(path)?;
        let mut r = f.reader();
        let data = r.data();
        while r.next_batch(&mut refs, 256) > 0 {
            feed.batch(data, &refs);
            open = send_records(&mut feed.t, tx, false);
            if !open || stop.load(Ordering::Relaxed) {
                break 'files;
            }
        }
        feed.sum
            .warnings
            .extend(r.warnings().map(|w| w.to_string()));
    }
    Ok(feed.finish(tx, open))
}

/// A live link was quiet for a poll interval: the tracker's time moves to
/// `clock` (the latest packet time carried on by the monotonic clock)
/// less a second (packets still in the kernel's ring are not overtaken),
/// so idle calls time out as idle flows do in `flows -i`, and a step of
/// the wall clock does not end them. Live runs only; file runs keep
/// packet time alone.
pub(crate) fn advance_idle(t: &mut Tracker, clock: &crate::time::IdleClock) {
    t.advance(clock.now().saturating_sub(1_000_000_000));
}

/// How long the writer waits for a batch before it calls `write` with
/// none (so that a writer holding records for a failed database can
/// try again while no call ends).
pub(crate) const WRITER_TICK: std::time::Duration = std::time::Duration::from_secs(1);

/// The writer thread: hands each batch to `write`, counts what it wrote;
/// with no batch for [`WRITER_TICK`], calls `write` with nothing.
pub(crate) fn writer_loop(
    rx: crossbeam_channel::Receiver<Batch>,
    write: &mut impl FnMut(&[CallRecord], &[StreamRecord]) -> Result<()>,
) -> Result<(u64, u64)> {
    let (mut calls, mut streams) = (0, 0);
    loop {
        let (c, st) = match rx.recv_timeout(WRITER_TICK) {
            Ok(b) => b,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                write(&[], &[])?;
                continue;
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
        };
        write(&c, &st)?;
        calls += c.len() as u64;
        streams += (st.len() + c.iter().map(|c| c.streams.len()).sum::<usize>()) as u64;
    }
    Ok((calls, streams))
}
