//! The shards' side of the exporter channel and the exporter thread.
//!
//! Contract: a [`Sink`] hands a shard's finished records to the exporter
//! thread in batches (one channel operation per batch): flow records
//! ([`Sink::send`]) and rows of any other record kind ([`Sink::send_rows`],
//! a [`RowBatch`]) travel through the same bounded channel as a [`Batch`].
//! Flow records are built and formatted on the shard first when half the
//! channel is waiting ([`Placement::Auto`]); rows are formatted on the
//! exporter thread. With [`ExportPolicy::Drop`] a sink never waits and
//! counts the records of every kind that overflow its queue
//! ([`Sink::dropped`]). Rows of a kind no output takes are discarded on the
//! shard, uncounted ([`Sink::wants`] lets a producer skip building them).
//! Labelling a flow batch (on the shard or the exporter thread) counts the
//! drift among its records in the seconds they were made in
//! ([`crate::flow::record::MadeIn`]), which the exporter thread adds to
//! the per-second statistics ([`Merger::add_agreement`]); a file shard
//! hands its records over before the seconds it closed
//! ([`Sink::records_before_seconds`]) and a live shard at each tick, so
//! they arrive before those seconds can come out.
//! [`export_loop`] hands every batch to each output still working that
//! takes its kind ([`Exporter::kind`]: flow batches to the flow outputs,
//! rows to the outputs of their kind) and returns the summary of the flow
//! records, the outputs' errors and the outputs their reader closed (a
//! closed pipe ends that output quietly; when it was the last one, the run
//! is asked to stop reading); an output that fails gets nothing more and
//! the others go on. On request it reopens the file outputs (SIGHUP), in
//! live runs it flushes them about once a second when records of any kind
//! were written to an output since the last flush (never per record; rows
//! no output takes, such as per-second statistics kept only for the
//! metrics, flush nothing), and at the end it
//! finishes (flushes) every output still working. Nothing is allocated per
//! packet: emptied batches go back to the shards through two pools, one of
//! flow batches and one of row batches (any kind: a row batch is reset to
//! the kind it carries next).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TryRecvError, TrySendError};

use super::{ExportPolicy, Placement, RECORDS_PER_BATCH};
use crate::classify::labeller::Labeller;
use crate::dump::Forensics;
use crate::export::{Exporter, Renderer};
use crate::flow::record::{MadeIn, RecordBatch};
use crate::schema::Value;
use crate::schema::{Kind, RowBatch};
use crate::shard::Shard;
use crate::telemetry::alarms::{Alarms, ALARMS};
#[cfg(feature = "metrics")]
use crate::telemetry::metrics::Metrics;
use crate::telemetry::second::ShardSecond;
use crate::telemetry::series::{self, Figures, Merger, APP_STATS, STATS};
use crate::telemetry::summary::Summary;
use crate::{Error, Result};

/// What travels from a shard to the exporter thread. A flow batch is a
/// few hundred bytes of vector headers, moved once per 2,048 records
/// (under 1,500 times a second on the worst case); boxing it would
/// allocate per batch.
#[allow(clippy::large_enum_variant)]
pub(super) enum Batch {
    /// Flow records.
    Flows(RecordBatch),
    /// Records of another kind.
    Rows(RowBatch),
    /// The seconds of a shard's per-second statistics it closed since its
    /// last hand-over (one message for all: a batch of sparse packet time
    /// closes a second or two a packet).
    Seconds(Vec<ShardSecond>),
}

impl Batch {
    /// Number of records.
    fn len(&self) -> usize {
        match self {
            Batch::Flows(b) => b.len(),
            Batch::Rows(b) => b.len(),
            Batch::Seconds(s) => s.len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The shards' ends of the channels to the exporter thread (each shard
/// takes a clone).
#[derive(Clone)]
pub(super) struct ShardEnds {
    tx: Sender<Batch>,
    flows_pool: Receiver<RecordBatch>,
    rows_pool: Receiver<RowBatch>,
    /// The kind each output takes (by name), in output order.
    kinds: Arc<[&'static str]>,
}

/// The exporter thread's ends of the channels.
pub(super) struct ExportEnds {
    rx: Receiver<Batch>,
    flows_pool: Sender<RecordBatch>,
    rows_pool: Sender<RowBatch>,
}

/// The channel to the exporter thread, holding `batches` batches, and the
/// pools that bring emptied batches back (twice as many of each), for the
/// outputs `exporters`.
pub(super) fn channels(batches: usize, exporters: &[Box<dyn Exporter>]) -> (ShardEnds, ExportEnds) {
    let batches = batches.max(1);
    let (tx, rx) = bounded(batches);
    let (flows_tx, flows_rx) = bounded(batches * 2);
    let (rows_tx, rows_rx) = bounded(batches * 2);
    let shard = ShardEnds {
        tx,
        flows_pool: flows_rx,
        rows_pool: rows_rx,
        kinds: exporters.iter().map(|e| e.kind().name).collect(),
    };
    let export = ExportEnds {
        rx,
        flows_pool: flows_tx,
        rows_pool: rows_tx,
    };
    (shard, export)
}

/// A shard's end of the channel to the exporter thread.
pub(super) struct Sink {
    ends: ShardEnds,
    /// One per exporter (`None`: it has no text to render).
    renderers: Vec<Option<Renderer>>,
    placement: Placement,
    policy: ExportPolicy,
    pending: VecDeque<Batch>,
    stride: usize,
    /// Records of every kind dropped by [`ExportPolicy::Drop`].
    pub(super) dropped: u64,
    /// Some flow output reads the records' size and inter-arrival
    /// statistics ([`crate::export::Exporter::reads_moments`]): records
    /// are built with them.
    pub(super) moments: bool,
    /// The alarms' forensic pcaps this shard serves from its ring, and how
    /// many requests it has served.
    pub(super) forensics: Option<(Arc<Forensics>, usize)>,
    /// Forensic pcaps this shard failed to write.
    pub(super) forensic_errors: Vec<String>,
    /// The records' labels ([`RunOptions::labels`](super::RunOptions)).
    pub(super) labels: Option<Arc<Labeller>>,
    /// Some flow output reads the records' cells
    /// ([`crate::export::Exporter::reads_label_cells`]): labelled records get
    /// their label cells.
    pub(super) cells: bool,
    /// Flow records handed to the exporter thread so far.
    pub(super) sent: u64,
    /// The records' drift is counted per second ([`MadeIn`]): the shard
    /// hands its records over before the seconds it closed, so they reach
    /// the exporter thread before those seconds can come out.
    pub(super) records_before_seconds: bool,
    /// This shard's end of the model swap ([`RunOptions::swap`](super::RunOptions)).
    pub(super) swap: Option<crate::classify::swap::ShardLink>,
}

impl Sink {
    pub(super) fn new(
        ends: ShardEnds,
        renderers: Vec<Option<Renderer>>,
        placement: Placement,
        policy: ExportPolicy,
        stride: usize,
    ) -> Sink {
        Sink {
            ends,
            renderers,
            placement,
            policy,
            pending: VecDeque::new(),
            stride,
            dropped: 0,
            moments: true,
            forensics: None,
            forensic_errors: Vec::new(),
            labels: None,
            cells: true,
            sent: 0,
            records_before_seconds: false,
            swap: None,
        }
    }

    /// Writes the forensic pcaps asked for since the last call from the
    /// shard's ring (nothing to do costs one atomic load).
    #[inline]
    pub(super) fn serve_forensics(&mut self, shard: &Shard) {
        let Some((f, done)) = self.forensics.as_mut() else {
            return;
        };
        let Some(ring) = shard.taps.dump.as_ref().and_then(|t| t.ring.as_ref()) else {
            return;
        };
        for r in f.serve(shard.id(), ring, done) {
            if let Err(e) = r {
                self.forensic_errors.push(e.to_string());
            }
        }
    }

    fn fresh(&self) -> RecordBatch {
        match self.ends.flows_pool.try_recv() {
            Ok(mut b) if b.stride == self.stride => {
                b.clear();
                b
            }
            _ => RecordBatch::with_capacity(RECORDS_PER_BATCH * 2, self.stride),
        }
    }

    /// Whether an output of the run takes records of `kind` (a producer
    /// may skip building rows nobody takes).
    pub(super) fn wants(&self, kind: &Kind) -> bool {
        self.ends.kinds.contains(&kind.name)
    }

    /// Hands the rows of `rows` to the outputs of their kind (replacing
    /// them with an empty batch of the same kind); rows of a kind no output
    /// takes are dropped here, uncounted. At the end (`last`), waits for
    /// everything pending whatever the policy.
    pub(super) fn send_rows(&mut self, rows: &mut RowBatch, last: bool) {
        if !self.wants(rows.kind()) {
            rows.clear();
        }
        if rows.is_empty() && self.pending.is_empty() {
            return;
        }
        let fresh = match self.ends.rows_pool.try_recv() {
            Ok(mut b) => {
                b.reset(rows.kind());
                b
            }
            Err(_) => RowBatch::new(rows.kind()),
        };
        let full = std::mem::replace(rows, fresh);
        self.dispatch(Batch::Rows(full), last);
    }

    /// Hands the seconds the shard has closed to the exporter thread (for
    /// the per-second statistics) in one message; at the end (`last`),
    /// waits whatever the policy.
    pub(super) fn send_seconds(&mut self, closed: &mut Vec<ShardSecond>, last: bool) {
        if closed.is_empty() && self.pending.is_empty() {
            return;
        }
        let seconds = std::mem::take(closed);
        self.dispatch(Batch::Seconds(seconds), last);
    }

    /// Hands `out` to the exporter (replacing it with an empty batch). At the
    /// end (`last`), waits for everything pending whatever the policy.
    pub(super) fn send(&mut self, out: &mut RecordBatch, last: bool) {
        if out.is_empty() && self.pending.is_empty() {
            return;
        }
        self.sent += out.len() as u64;
        #[cfg(test)]
        tests::tally(self, out.len(), last);
        let mut full = std::mem::replace(out, self.fresh());
        // The records the shard makes next are made in the second it is
        // in: the last one marked.
        if let Some(&last) = full.made_in.last() {
            out.made_in.push(MadeIn {
                from: 0,
                labelled: 0,
                agreeing: 0,
                ..last
            });
        }
        full.skip_moments = !self.moments;
        // Records are built and formatted where a core is idle: on the
        // exporter thread while it keeps up, here once half its channel is
        // waiting (the output is the same either way).
        let here = match self.placement {
            Placement::Auto => self.ends.tx.len() * 2 >= self.ends.tx.capacity().unwrap_or(1),
            Placement::Shard => true,
            Placement::Exporter => false,
        };
        if here {
            build(&mut full, self.labels.as_deref(), self.cells);
            for (i, r) in self.renderers.iter_mut().enumerate() {
                if let Some(r) = r {
                    let mut text = full.spare_text.pop().unwrap_or_default();
                    r.render(&full, &mut text);
                    full.rendered.push((i, text));
                }
            }
        }
        self.dispatch(Batch::Flows(full), last);
    }

    /// Sends `full` as the policy says (see [`Sink::send`]).
    fn dispatch(&mut self, full: Batch, last: bool) {
        let tx = &self.ends.tx;
        match self.policy {
            ExportPolicy::Block => {
                // An Err means the exporter thread is gone; nothing can be written.
                let _ = tx.send(full);
            }
            ExportPolicy::Drop { max_pending } => {
                if !full.is_empty() {
                    self.pending.push_back(full);
                }
                while let Some(b) = self.pending.pop_front() {
                    if last {
                        let _ = tx.send(b);
                        continue;
                    }
                    match tx.try_send(b) {
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
    /// Per-second statistics (`None`: the run keeps none).
    pub(super) series: Option<SeriesOut>,
    /// The records' labels ([`RunOptions::labels`](super::RunOptions)).
    pub(super) labels: Option<Arc<Labeller>>,
    /// Labelled records get their label cells ([`Sink::cells`]).
    pub(super) cells: bool,
}

/// Builds the records of `batch` from its snapshots and labels them (with
/// their label cells when `cells`): a batch is labelled once, where its
/// records are built (a batch whose records were built before, on the
/// shard, is left as it is). The records the drift counts are added up in
/// the [`MadeIn`] second each was made in.
fn build(batch: &mut RecordBatch, labels: Option<&Labeller>, cells: bool) {
    let pending = batch.records.is_empty() && !batch.is_empty();
    batch.materialize();
    if let (true, Some(l)) = (pending, labels) {
        let RecordBatch {
            records,
            analyzed,
            made_in,
            ..
        } = batch;
        // Records come in order: the second of record i is the last entry
        // from at or before i.
        let mut at = 0;
        l.label(
            records.iter_mut().map(|r| (&mut r.verdict, r.model_id)),
            analyzed,
            cells,
            |i, agree| {
                while made_in.get(at + 1).is_some_and(|m| m.from <= i) {
                    at += 1;
                }
                if let Some(m) = made_in.get_mut(at).filter(|m| m.from <= i) {
                    m.labelled += 1;
                    m.agreeing += u64::from(agree);
                }
            },
        );
    }
}

/// Where the exporter thread sends the per-second statistics: the merged
/// seconds as rows of [`STATS`] and [`APP_STATS`] to the outputs of those
/// kinds and into the metrics, and through the alarms, whose raises and
/// clears are rows of [`ALARMS`] (and metrics too). Rows are built only
/// where something reads them: the empty seconds of a gap cost the metrics
/// one update, not one a second, unless an output or an alarm reads their
/// rows.
pub(super) struct SeriesOut {
    pub(super) merger: Merger,
    pub(super) classes: Arc<[String]>,
    #[cfg(feature = "metrics")]
    pub(super) metrics: Option<Arc<Metrics>>,
    pub(super) alarms: Option<Alarms>,
    /// Forensic pcaps of raised alarms.
    pub(super) forensics: Option<Arc<Forensics>>,
    /// An output takes [`STATS`] rows.
    pub(super) stats_out: bool,
    /// An output takes [`APP_STATS`] rows.
    pub(super) app_stats_out: bool,
}

impl SeriesOut {
    /// Adds a shard's seconds (`None`: the end of the run); returns the
    /// rows of every second complete now and of the alarms they raised or
    /// cleared, the metrics updated.
    fn take(&mut self, seconds: Option<Vec<ShardSecond>>) -> [RowBatch; 3] {
        let mut stats = RowBatch::new(&STATS);
        let mut apps = RowBatch::new(&APP_STATS);
        let mut alarm_rows = RowBatch::new(&ALARMS);
        let SeriesOut {
            merger,
            classes,
            #[cfg(feature = "metrics")]
            metrics,
            alarms,
            forensics,
            stats_out,
            app_stats_out,
        } = self;
        // The alarms read the values of the stats rows.
        let stats_rows = *stats_out || alarms.is_some();
        let mut out = |first: u64, n: u64, f: &Figures| {
            #[cfg(feature = "metrics")]
            if let Some(m) = metrics {
                m.observe(first, n, f, |i| series::app_name(classes, i));
            }
            // An empty second has no app rows.
            if *app_stats_out && n == 1 {
                series::app_rows(&mut apps, first, f, classes);
            }
            if !stats_rows {
                return;
            }
            for sec in first..first + n {
                series::stats_row(&mut stats, sec, f);
                let Some(a) = alarms.as_mut() else {
                    continue;
                };
                let (rows, last) = (stats.rows(), stats.len() - 1);
                let value = |j| match rows.get(last, j) {
                    Value::U64(v) => v as f64,
                    _ => 0.0,
                };
                for e in a.observe(sec, value) {
                    let spec = a.spec(e.alarm);
                    #[cfg(feature = "metrics")]
                    if let Some(m) = metrics {
                        m.alarm(&spec.label(), e.raised);
                    }
                    let pcaps: Vec<String> = match forensics {
                        Some(f) if e.raised => (f.ask(e.time, &spec.label()).iter())
                            .map(|p| p.display().to_string())
                            .collect(),
                        _ => Vec::new(),
                    };
                    alarm_rows.push(|r| {
                        r.u64(e.time);
                        r.text(&spec.series);
                        r.text(spec.method.name());
                        r.text(if e.raised { "raised" } else { "cleared" });
                        r.f64(e.value);
                        r.f64(e.baseline);
                        r.f64(e.sigma);
                        r.f64(e.score);
                        r.text(&pcaps.join(","));
                    });
                }
            }
        };
        match seconds {
            Some(seconds) => {
                for s in seconds {
                    merger.add(s, &mut out);
                }
            }
            None => merger.finish(&mut out),
        }
        [stats, apps, alarm_rows]
    }
}

/// What [`export_loop`] returns: the summary of every flow record, the
/// outputs' errors, and the outputs their reader closed.
pub(super) type Exported = (Summary, Vec<String>, Vec<String>);

// A batch moves through here once per few thousand records, by value from
// the channel: boxing it would allocate each time.
#[allow(clippy::large_enum_variant)]
enum Next {
    Batch(Batch),
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
fn next_export(rx: &Receiver<Batch>, empty: &mut u32, wait: Duration) -> Next {
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
    /// The kind each output takes.
    kinds: Vec<&'static Kind>,
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
    fn each(&mut self, f: impl FnMut(usize, &mut dyn Exporter) -> Result<()>) {
        self.each_of(None, f);
    }

    /// Runs `f` on every output still alive that takes `kind` (every one
    /// when `None`), ending those it fails on; returns whether it ran on
    /// one without failing.
    fn each_of(
        &mut self,
        kind: Option<&Kind>,
        mut f: impl FnMut(usize, &mut dyn Exporter) -> Result<()>,
    ) -> bool {
        let mut done = false;
        for i in 0..self.exporters.len() {
            if self.alive[i] && kind.is_none_or(|k| k.is(self.kinds[i])) {
                match f(i, &mut *self.exporters[i]) {
                    Ok(()) => done = true,
                    Err(e) => self.end(i, e),
                }
            }
        }
        done
    }
}

/// The exporter thread: writes each batch to every output still working
/// that takes its kind, flushes them on `ctl`'s timer and reopens them on
/// request.
pub(super) fn export_loop(
    ends: ExportEnds,
    exporters: Vec<Box<dyn Exporter>>,
    ctl: ExportControl,
) -> Exported {
    let mut summary = Summary::default();
    summary.unidirectional = ctl.unidirectional;
    let mut series = ctl.series;
    let flows = &crate::export::fields::FLOWS;
    let mut out = Outputs {
        alive: vec![true; exporters.len()],
        kinds: exporters.iter().map(|e| e.kind()).collect(),
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
        match next_export(&ends.rx, &mut empty, wait.min(EXPORT_WAKE)) {
            Next::Batch(Batch::Flows(mut batch)) => {
                build(&mut batch, ctl.labels.as_deref(), ctl.cells);
                if let Some(series) = series.as_mut() {
                    for m in &batch.made_in {
                        series.merger.add_agreement(m);
                    }
                }
                summary.add(&batch);
                let taken = out.each_of(Some(flows), |i, ex| {
                    match batch.rendered.iter().find(|(j, _)| *j == i) {
                        Some((_, text)) => ex.write_rendered(text, batch.len()),
                        None => ex.write_batch(&batch),
                    }
                });
                dirty |= taken && !batch.is_empty();
                batch.clear();
                let _ = ends.flows_pool.try_send(batch);
            }
            Next::Batch(Batch::Seconds(s)) => {
                if let Some(series) = series.as_mut() {
                    // Rows no output takes (the statistics kept for the
                    // metrics or the alarms only) leave the outputs clean.
                    for rows in series.take(Some(s)) {
                        let taken = out.each_of(Some(rows.kind()), |_, ex| ex.write_rows(&rows));
                        dirty |= taken && !rows.is_empty();
                    }
                }
            }
            Next::Batch(Batch::Rows(mut rows)) => {
                let taken = out.each_of(Some(rows.kind()), |_, ex| ex.write_rows(&rows));
                dirty |= taken && !rows.is_empty();
                rows.clear();
                let _ = ends.rows_pool.try_send(rows);
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
    if let Some(series) = series.as_mut() {
        for rows in series.take(None) {
            out.each_of(Some(rows.kind()), |_, ex| ex.write_rows(&rows));
        }
        // The alarms of the last seconds: their pcaps from the rings the
        // shards handed over.
        if let Some(f) = &series.forensics {
            out.errors.extend(
                f.serve_rest()
                    .into_iter()
                    .filter_map(|r| r.err().map(|e| e.to_string())),
            );
        }
    }
    out.each(|_, ex| ex.finish());
    (summary, out.errors, out.closed)
}

#[cfg(test)]
#[path = "sink_tests.rs"]
mod tests;
