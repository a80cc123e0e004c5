//! The shards' side of the exporter channel and the exporter thread.
//!
//! Contract: a [`Sink`] hands a shard's finished records to the exporter
//! thread in batches (one channel operation per batch), building and
//! formatting them on the shard first when half the channel is waiting
//! ([`Placement::Auto`]); with [`ExportPolicy::Drop`] it never waits and
//! counts what overflows its queue. [`export_loop`] writes every batch to
//! each output still working and returns the summary, the outputs' errors
//! and the outputs their reader closed (a closed pipe ends that output
//! quietly; when it was the last one, the run is asked to stop reading).
//! On request it reopens the file outputs (SIGHUP), and in live runs it
//! flushes them about once a second when records were written since the
//! last flush (never per record). Nothing is allocated per packet;
//! batches are reused.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, TrySendError};

use super::{ExportPolicy, Placement, RECORDS_PER_BATCH};
use crate::export::{Exporter, Renderer};
use crate::flow::record::RecordBatch;
use crate::telemetry::summary::Summary;
use crate::{Error, Result};

/// A shard's end of the channel to the exporter thread.
pub(super) struct Sink {
    tx: Sender<RecordBatch>,
    /// One per exporter (`None`: it has no text to render).
    renderers: Vec<Option<Renderer>>,
    placement: Placement,
    pool: Receiver<RecordBatch>,
    policy: ExportPolicy,
    pending: VecDeque<RecordBatch>,
    stride: usize,
    pub(super) dropped: u64,
}

impl Sink {
    pub(super) fn new(
        tx: Sender<RecordBatch>,
        renderers: Vec<Option<Renderer>>,
        placement: Placement,
        pool: Receiver<RecordBatch>,
        policy: ExportPolicy,
        stride: usize,
    ) -> Sink {
        Sink {
            tx,
            renderers,
            placement,
            pool,
            policy,
            pending: VecDeque::new(),
            stride,
            dropped: 0,
        }
    }

    fn fresh(&self) -> RecordBatch {
        match self.pool.try_recv() {
            Ok(mut b) if b.stride == self.stride => {
                b.clear();
                b
            }
            _ => RecordBatch::with_capacity(RECORDS_PER_BATCH * 2, self.stride),
        }
    }

    /// Hands `out` to the exporter (replacing it with an empty batch). At the
    /// end (`last`), waits for everything pending whatever the policy.
    pub(super) fn send(&mut self, out: &mut RecordBatch, last: bool) {
        if out.is_empty() && self.pending.is_empty() {
            return;
        }
        let mut full = std::mem::replace(out, self.fresh());
        // Records are built and formatted where a core is idle: on the
        // exporter thread while it keeps up, here once half its channel is
        // waiting (the output is the same either way).
        let here = match self.placement {
            Placement::Auto => self.tx.len() * 2 >= self.tx.capacity().unwrap_or(1),
            Placement::Shard => true,
            Placement::Exporter => false,
        };
        if here {
            full.materialize();
            for (i, r) in self.renderers.iter_mut().enumerate() {
                if let Some(r) = r {
                    let mut text = Vec::new();
                    r.render(&full, &mut text);
                    full.rendered.push((i, text));
                }
            }
        }
        match self.policy {
            ExportPolicy::Block => {
                // An Err means the exporter thread is gone; nothing can be written.
                let _ = self.tx.send(full);
            }
            ExportPolicy::Drop { max_pending } => {
                if !full.is_empty() {
                    self.pending.push_back(full);
                }
                while let Some(b) = self.pending.pop_front() {
                    if last {
                        let _ = self.tx.send(b);
                        continue;
                    }
                    match self.tx.try_send(b) {
                        Ok(()) => {}
                        Err(TrySendError::Full(b)) => {
                            self.pending.push_front(b);
                            break;
                        }
                        Err(TrySendError::Disconnected(_)) => break,
                    }
                }
                while self.pending.len() > max_pending {
                    if let Some(b) = self.pending.pop_front() {
                        self.dropped += b.len() as u64;
                    }
                }
            }
        }
    }
}

/// How long the exporter thread sleeps between polls while batches keep
/// coming.
const EXPORT_POLL: Duration = Duration::from_micros(500);
/// Empty polls (50 ms) before the exporter thread blocks on the channel.
const EXPORT_POLLS: u32 = 100;
/// Longest the exporter thread blocks before it looks at its timer and the
/// reopen requests again.
const EXPORT_WAKE: Duration = Duration::from_millis(200);

/// What the exporter thread does besides writing batches.
pub(super) struct ExportControl {
    /// Flush every output this long after the last flush once records were
    /// written since (live runs: a reader of the file sees a record about
    /// a second after its flow ended); `None`: outputs flush when their
    /// buffer fills and at the end.
    pub(super) flush_every: Option<Duration>,
    /// Reopen requests (SIGHUP): each change reopens the file outputs.
    pub(super) reopen: Arc<AtomicU64>,
    /// Raised when every output has ended and one was closed by its
    /// reader, so the shards stop reading (`None`: another output, the
    /// `-w` pcap, still wants every packet).
    pub(super) halt: Option<Arc<AtomicBool>>,
    /// One direction per record (the summary picks service ports so).
    pub(super) unidirectional: bool,
}

/// What [`export_loop`] returns: the summary of every record, the outputs'
/// errors, and the outputs their reader closed.
pub(super) type Exported = (Summary, Vec<String>, Vec<String>);

// A batch moves through here once per few thousand records, by value from
// the channel: boxing it would allocate each time.
#[allow(clippy::large_enum_variant)]
enum Next {
    Batch(RecordBatch),
    /// Nothing came within the wait.
    Idle,
    /// Every shard is done.
    Done,
}

/// The next batch for the exporter thread. While batches keep coming it
/// polls (sleeping [`EXPORT_POLL`] between tries) instead of blocking: a
/// blocked receiver makes every send a futex wake-up on the shard's core
/// (~2.7 % of the worst case's shard time at one send per 2048 records);
/// after [`EXPORT_POLLS`] empty polls it blocks, for at most `wait`, so an
/// idle live capture costs next to nothing.
fn next_export(rx: &Receiver<RecordBatch>, empty: &mut u32, wait: Duration) -> Next {
    loop {
        match rx.try_recv() {
            Ok(b) => {
                *empty = 0;
                return Next::Batch(b);
            }
            Err(TryRecvError::Disconnected) => return Next::Done,
            Err(TryRecvError::Empty) if *empty < EXPORT_POLLS => {
                *empty += 1;
                std::thread::sleep(EXPORT_POLL);
            }
            Err(TryRecvError::Empty) => {
                return match rx.recv_timeout(wait) {
                    Ok(b) => {
                        *empty = 0;
                        Next::Batch(b)
                    }
                    Err(RecvTimeoutError::Timeout) => Next::Idle,
                    Err(RecvTimeoutError::Disconnected) => Next::Done,
                }
            }
        }
    }
}

/// The outputs of the exporter thread and what became of them.
struct Outputs {
    exporters: Vec<Box<dyn Exporter>>,
    alive: Vec<bool>,
    errors: Vec<String>,
    closed: Vec<String>,
}

impl Outputs {
    /// Output `i` failed or was closed by its reader: it gets nothing more.
    fn end(&mut self, i: usize, e: Error) {
        self.alive[i] = false;
        match e {
            Error::OutputClosed { .. } => self.closed.push(self.exporters[i].name().to_string()),
            // Output errors name the exporter already.
            e @ Error::Output { .. } => self.errors.push(e.to_string()),
            e => self
                .errors
                .push(format!("{}: {e}", self.exporters[i].name())),
        }
    }

    /// Runs `f` on every output still alive, ending those it fails on.
    fn each(&mut self, mut f: impl FnMut(usize, &mut dyn Exporter) -> Result<()>) {
        for i in 0..self.exporters.len() {
            if self.alive[i] {
                if let Err(e) = f(i, &mut *self.exporters[i]) {
                    self.end(i, e);
                }
            }
        }
    }
}

/// The exporter thread: writes each batch to every output still working,
/// flushes them on `ctl`'s timer and reopens them on request.
pub(super) fn export_loop(
    rx: Receiver<RecordBatch>,
    pool: Sender<RecordBatch>,
    exporters: Vec<Box<dyn Exporter>>,
    ctl: ExportControl,
) -> Exported {
    let mut summary = Summary::default();
    summary.unidirectional = ctl.unidirectional;
    let mut out = Outputs {
        alive: vec![true; exporters.len()],
        exporters,
        errors: Vec::new(),
        closed: Vec::new(),
    };
    let mut empty = 0;
    let mut reopened = ctl.reopen.load(Ordering::Relaxed);
    // Records written since the last flush, and when that was.
    let mut dirty = false;
    let mut flushed = Instant::now();
    loop {
        let wait = match ctl.flush_every {
            Some(every) if dirty => every.saturating_sub(flushed.elapsed()),
            _ => EXPORT_WAKE,
        };
        match next_export(&rx, &mut empty, wait.min(EXPORT_WAKE)) {
            Next::Batch(mut batch) => {
                batch.materialize();
                summary.add(&batch);
                out.each(|i, ex| match batch.rendered.iter().find(|(j, _)| *j == i) {
                    Some((_, text)) => ex.write_rendered(text),
                    None => ex.write_batch(&batch),
                });
                dirty |= !batch.is_empty();
                batch.clear();
                let _ = pool.try_send(batch);
            }
            Next::Idle => {}
            Next::Done => break,
        }
        let request = ctl.reopen.load(Ordering::Relaxed);
        if request != reopened {
            reopened = request;
            out.each(|_, ex| ex.reopen().map(|_| ()));
            (dirty, flushed) = (false, Instant::now());
        }
        if dirty && ctl.flush_every.is_some_and(|d| flushed.elapsed() >= d) {
            out.each(|_, ex| ex.flush());
            (dirty, flushed) = (false, Instant::now());
        }
        if let Some(halt) = &ctl.halt {
            if !out.closed.is_empty() && !out.alive.contains(&true) {
                halt.store(true, Ordering::Relaxed);
            }
        }
    }
    out.each(|_, ex| ex.finish());
    (summary, out.errors, out.closed)
}
