//! The shards' side of the exporter channel and the exporter thread.
//!
//! Contract: a [`Sink`] hands a shard's finished records to the exporter
//! thread in batches (one channel operation per batch), building and
//! formatting them on the shard first when half the channel is waiting
//! ([`Placement::Auto`]); with [`ExportPolicy::Drop`] it never waits and
//! counts what overflows its queue. [`export_loop`] writes every batch to
//! each output still working and returns the summary and the outputs'
//! errors. Nothing is allocated per packet; batches are reused.

use std::collections::VecDeque;

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};

use super::{ExportPolicy, Placement, RECORDS_PER_BATCH};
use crate::export::{Exporter, Renderer};
use crate::flow::record::RecordBatch;
use crate::telemetry::summary::Summary;

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
const EXPORT_POLL: std::time::Duration = std::time::Duration::from_micros(500);
/// Empty polls (50 ms) before the exporter thread blocks on the channel.
const EXPORT_POLLS: u32 = 100;

/// The next batch for the exporter thread, None once every shard is done.
/// While batches keep coming it polls (sleeping [`EXPORT_POLL`] between
/// tries) instead of blocking: a blocked receiver makes every send a futex
/// wake-up on the shard's core (~2.7 % of the worst case's shard time at
/// one send per 2048 records); after [`EXPORT_POLLS`] empty polls it blocks,
/// so an idle live capture costs nothing.
fn next_export(rx: &Receiver<RecordBatch>, empty: &mut u32) -> Option<RecordBatch> {
    loop {
        match rx.try_recv() {
            Ok(b) => {
                *empty = 0;
                return Some(b);
            }
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) if *empty < EXPORT_POLLS => {
                *empty += 1;
                std::thread::sleep(EXPORT_POLL);
            }
            Err(TryRecvError::Empty) => {
                let b = rx.recv().ok();
                *empty = 0;
                return b;
            }
        }
    }
}

/// The exporter thread: writes each batch to every output still working
/// and sums the records up (`unidirectional`: one direction per record).
pub(super) fn export_loop(
    rx: Receiver<RecordBatch>,
    pool: Sender<RecordBatch>,
    mut exporters: Vec<Box<dyn Exporter>>,
    unidirectional: bool,
) -> (Summary, Vec<String>) {
    let mut summary = Summary::default();
    summary.unidirectional = unidirectional;
    let mut errors = Vec::new();
    let mut alive = vec![true; exporters.len()];
    let mut empty = 0;
    while let Some(mut batch) = next_export(&rx, &mut empty) {
        batch.materialize();
        summary.add(&batch);
        for (i, ex) in exporters.iter_mut().enumerate() {
            if alive[i] {
                let done = match batch.rendered.iter().find(|(j, _)| *j == i) {
                    Some((_, text)) => ex.write_rendered(text),
                    None => ex.write_batch(&batch),
                };
                if let Err(e) = done {
                    errors.push(format!("{}: {e}", ex.name()));
                    alive[i] = false;
                }
            }
        }
        batch.clear();
        let _ = pool.try_send(batch);
    }
    for (i, ex) in exporters.iter_mut().enumerate() {
        if alive[i] {
            if let Err(e) = ex.finish() {
                errors.push(format!("{}: {e}", ex.name()));
            }
        }
    }
    (summary, errors)
}
