//! Wiring: capture files → N shard threads → exporter thread.
//!
//! Contract: [`run`] processes the given capture files as one stream (in the
//! order given) with `shards` share-nothing shard threads and one exporter
//! thread, and returns the run's [`Report`]. Finished records travel to the
//! exporter thread in batches through a bounded channel (one channel
//! operation per batch of records, never per packet); emptied batches come
//! back through a second channel for reuse. On end of input — and when
//! [`RunControl::stop`] is raised (SIGINT/SIGTERM in the CLI) — every open
//! flow is flushed to the outputs. An output that fails is reported in
//! [`Report::output_errors`] and dropped; the others still receive every
//! record. Errors are returned only for unusable inputs (before any packet
//! is processed) or invalid configuration.
//!
//! Back-pressure: with [`ExportPolicy::Block`] (default, right for files) a
//! shard waits when the exporter is behind, so nothing is lost. With
//! [`ExportPolicy::Drop`] (live capture) a shard never waits: batches the
//! channel cannot take wait in a per-shard queue up to a bound and what
//! overflows is counted in `export_dropped`.
//!
//! Placement: tables hand over snapshots of finished flows; the exporter
//! thread builds records from them and formats them, or — when half of its
//! channel is waiting — the shard does both before sending
//! ([`Placement::Auto`]). The bytes written are the same either way.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{bounded, Receiver, Sender, TryRecvError, TrySendError};

use crate::classify::Classifier;
use crate::config::FlowConfig;
use crate::export::{Exporter, Renderer};
use crate::flow::record::RecordBatch;
use crate::shard::Shard;
use crate::source::{CaptureFile, PacketRef, Warning};
use crate::telemetry::summary::{Report, Summary};
use crate::{Error, Result};

/// Records per batch handed to the exporter thread. Each hand-over can wake
/// the exporter thread (a futex syscall, ~9 µs on this VM): at 512 records
/// the wake-ups were 4 % of the worst case's shard time.
pub const RECORDS_PER_BATCH: usize = 2048;
/// Batches the channel to the exporter holds by default (32,768 records).
pub const CHANNEL_BATCHES: usize = 16;

/// What a shard does when the exporter cannot keep up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportPolicy {
    /// Wait (lossless; for files).
    Block,
    /// Never wait; queue up to `max_pending` batches per shard, then drop
    /// and count.
    Drop {
        /// Batches a shard keeps waiting before it drops the oldest.
        max_pending: usize,
    },
}

/// Options of a run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Flow formation.
    pub flow: FlowConfig,
    /// Number of shard threads (≥ 1).
    pub shards: usize,
    /// Pin shard i to core i.
    pub pin: bool,
    /// Back-pressure policy towards the exporters.
    pub export_policy: ExportPolicy,
    /// Packets per batch.
    pub batch: usize,
    /// DSCP marking: (TOML map, output pcap). Needs one shard.
    pub mark: Option<(PathBuf, PathBuf)>,
    /// Worker threads of the classifier pool (costly models only).
    pub classifier_threads: usize,
    /// Record batches the channel to the exporter thread holds.
    pub channel_batches: usize,
    /// Where finished flows become records and text (see [`Placement`]).
    pub placement: Placement,
}

/// Which thread builds records from a table's snapshots and formats them
/// for the exporters that render text. The output is the same whichever
/// does it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// The exporter thread, unless half of its channel is already waiting:
    /// then the shard does it before sending (the default; the work goes to
    /// whichever side has a core to spare).
    #[default]
    Auto,
    /// Always the shard.
    Shard,
    /// Always the exporter thread.
    Exporter,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            flow: FlowConfig::default(),
            shards: 1,
            pin: false,
            export_policy: ExportPolicy::Block,
            batch: crate::source::BATCH,
            mark: None,
            classifier_threads: 1,
            channel_batches: CHANNEL_BATCHES,
            placement: Placement::Auto,
        }
    }
}

/// Shared controls of a running pipeline (set from other threads).
#[derive(Debug, Clone, Default)]
pub struct RunControl {
    /// Raise to stop reading; open flows are flushed.
    pub stop: Arc<AtomicBool>,
    /// Input bytes consumed so far by shard 0 (for a progress bar).
    pub progress: Arc<AtomicU64>,
}

/// A model and its class names, for the shards.
#[derive(Clone, Default)]
pub struct ModelRef {
    /// The classifier run inline in every shard.
    pub model: Option<Arc<dyn Classifier>>,
    /// Class names (empty when no model).
    pub classes: Arc<[String]>,
}

/// Opens every file first so a bad input stops the run before it starts.
pub fn open_all(paths: &[PathBuf]) -> Result<Vec<CaptureFile>> {
    paths.iter().map(|p| CaptureFile::open(p)).collect()
}

/// Runs the pipeline over `files` (see the module docs).
pub fn run(
    files: &[CaptureFile],
    opts: &RunOptions,
    model: &ModelRef,
    exporters: Vec<Box<dyn Exporter>>,
    ctl: &RunControl,
) -> Result<Report> {
    opts.flow.validate()?;
    if opts.shards == 0 || opts.batch == 0 || opts.batch > u16::MAX as usize {
        return Err(Error::Config(
            "shards must be ≥ 1 and the batch 1..=65535".into(),
        ));
    }
    if opts.mark.is_some() && opts.shards != 1 {
        return Err(Error::Config(
            "DSCP marking writes packets in input order and needs one shard (--shards 1)".into(),
        ));
    }
    let mut marker = match &opts.mark {
        Some((map, out)) => Some(open_marker(files, map, out, model)?),
        None => None,
    };
    let started = Instant::now();
    let (tx, rx) = bounded::<RecordBatch>(opts.channel_batches.max(1));
    let (pool_tx, pool_rx) = bounded::<RecordBatch>(opts.channel_batches.max(1) * 2);
    let cores = if opts.pin {
        core_affinity::get_core_ids().unwrap_or_default()
    } else {
        Vec::new()
    };
    // Costly models classify on a pool of worker threads (see classify::pool).
    let costly = model.model.as_ref().filter(|m| m.costly()).cloned();
    let (mut links, job_rx, done_txs) = match &costly {
        Some(_) => {
            let (l, j, d) = crate::classify::pool::channels(opts.shards);
            (l.into_iter().map(Some).collect(), Some(j), d)
        }
        None => (
            (0..opts.shards).map(|_| None).collect::<Vec<_>>(),
            None,
            Vec::new(),
        ),
    };
    // Each shard may format records for the exporters (see `Sink::send`).
    // Helper threads (populating the file map, clearing table pages ahead)
    // only run on a core the shards leave idle (see `spare_core`).
    let spare = spare_core(opts.shards);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let mut renderers: Vec<Vec<Option<Renderer>>> = (0..opts.shards)
        .map(|_| exporters.iter().map(|e| e.renderer()).collect())
        .collect();
    let (shard_results, export_result) = std::thread::scope(|scope| {
        let exporter = std::thread::Builder::new()
            .name("eb-export".into())
            .spawn_scoped(scope, move || export_loop(rx, pool_tx, exporters))
            .map_err(|e| Error::Config(format!("cannot start the exporter thread: {e}")))?;
        if let (Some(m), Some(jobs)) = (&costly, &job_rx) {
            for _ in 0..opts.classifier_threads.max(1) {
                let (m, jobs, done) = (m.clone(), jobs.clone(), done_txs.clone());
                std::thread::Builder::new()
                    .name("eb-classify".into())
                    .spawn_scoped(scope, move || crate::classify::pool::worker(m, jobs, done))
                    .map_err(|e| Error::Config(format!("cannot start a classifier thread: {e}")))?;
            }
        }
        drop(job_rx);
        drop(done_txs);
        let mut handles = Vec::new();
        let mut meshes: Vec<Option<crate::exchange::Ends>> = match opts.shards {
            1 => vec![None],
            n => crate::exchange::mesh(n, opts.batch)
                .into_iter()
                .map(Some)
                .collect(),
        };
        for id in 0..opts.shards {
            let ends = meshes[id].take();
            let tx = tx.clone();
            let pool_rx = pool_rx.clone();
            let core = (!cores.is_empty()).then(|| cores[id % cores.len()]);
            let model = model.model.clone();
            let marker = if id == 0 { marker.take() } else { None };
            let link = links[id].take();
            let rend = std::mem::take(&mut renderers[id]);
            let ready = ready_tx.clone();
            let builder = std::thread::Builder::new().name(format!("eb-shard{id}"));
            let handle = builder.spawn_scoped(scope, move || {
                if let Some(c) = core {
                    core_affinity::set_for_current(c);
                }
                let mut shard = Shard::new(id, opts.shards, &opts.flow, model)?;
                if spare {
                    shard.table.start_prefault();
                }
                // Threads are started (and their memory mapped) before the
                // file's helper runs: a thread start waits for the address
                // space lock that populating holds (10-60 ms measured).
                let _ = ready.send(());
                drop(ready);
                shard.marker = marker;
                if let Some(l) = link {
                    shard.table.attach_pool(l);
                }
                let mut sink = Sink::new(
                    tx,
                    rend,
                    opts.placement,
                    pool_rx,
                    opts.export_policy,
                    opts.flow.early_packets,
                );
                let warnings = match ends {
                    None => shard_loop(&mut shard, &mut sink, files, opts.batch, ctl, spare),
                    Some(ends) => shard_loop_shared(
                        &mut shard, &mut sink, files, opts.batch, ctl, ends, spare,
                    ),
                };
                shard.counters.table_bytes = shard.table.memory_bytes() as u64;
                shard.counters.table_pool_bytes = shard.table.pool_bytes() as u64;
                let rss = (id == 0)
                    .then(crate::telemetry::summary::rss_anon)
                    .flatten();
                shard.finish(RECORDS_PER_BATCH, |out| sink.send(out, true));
                sink.send(&mut shard.table.out, true);
                shard.counters.export_dropped = sink.dropped;
                let mark_result = shard.marker.take().map(|mut m| match m.error.take() {
                    Some(e) => Err(e),
                    None => m.writer.finish().map_err(|e| e.to_string()),
                });
                Ok::<_, Error>((shard.counters, warnings, rss, mark_result))
            });
            handles.push(
                handle.map_err(|e| Error::Config(format!("cannot start a shard thread: {e}")))?,
            );
        }
        drop(tx);
        drop(pool_rx);
        drop(ready_tx);
        // Every shard has its table (or has failed and dropped its end).
        for _ in 0..opts.shards {
            if ready_rx.recv().is_err() {
                break;
            }
        }
        for f in files {
            f.map_ahead(spare);
        }
        let results: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        Ok::<_, Error>((results, exporter.join()))
    })?;
    let mut report = Report {
        classes: model.classes.clone(),
        ..Report::default()
    };
    for r in shard_results {
        let (c, w, rss, mark) =
            r.map_err(|_| Error::Config("a shard thread panicked".into()))??;
        match mark {
            Some(Ok(m)) => report.marked = Some(m),
            Some(Err(e)) => report.output_errors.push(format!("mark: {e}")),
            None => {}
        }
        report.counters.merge(&c);
        report.warnings.extend(w);
        report.rss_anon_end_of_input = report.rss_anon_end_of_input.or(rss);
    }
    let (summary, errors) =
        export_result.map_err(|_| Error::Config("the exporter thread panicked".into()))?;
    report.summary = summary;
    report.output_errors.extend(errors);
    report.interrupted = ctl.stop.load(Ordering::Relaxed);
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Opens the DSCP marking output for a single-shard run.
fn open_marker(
    files: &[CaptureFile],
    map: &std::path::Path,
    out: &std::path::Path,
    model: &ModelRef,
) -> Result<crate::shard::Marker> {
    let Some(first) = files.first() else {
        return Err(Error::Config("marking needs an input".into()));
    };
    let map = crate::mark::DscpMap::load(map)?;
    let by_class = map.resolve(&model.classes)?;
    let mut refs = Vec::new();
    let link = match first.reader().next_batch(&mut refs, 1) {
        0 => crate::source::LinkType::Ethernet,
        _ => refs[0].link,
    };
    let linktype = crate::mark::pcap_out::input_linktype(first, link);
    let writer = crate::mark::MarkWriter::create(out, linktype)?;
    Ok(crate::shard::Marker::new(writer, by_class, map.unknown()))
}

/// Reads every file in order and feeds the shard; returns input warnings
/// (shard 0 only, so each is reported once).
fn shard_loop(
    shard: &mut Shard,
    sink: &mut Sink,
    files: &[CaptureFile],
    batch: usize,
    ctl: &RunControl,
    spare: bool,
) -> Vec<Warning> {
    let mut warnings = Vec::new();
    let mut refs: Vec<PacketRef> = Vec::with_capacity(batch);
    let mut done_bytes = 0u64;
    'files: for f in files {
        let mut reader = f.reader();
        let data = reader.data();
        let mut stride = f.stride(shard.id(), shard.shards(), !spare);
        loop {
            if ctl.stop.load(Ordering::Relaxed) {
                break 'files;
            }
            stride.reached(reader.position());
            if reader.next_batch(&mut refs, batch) == 0 {
                break;
            }
            shard.batch(data, &refs);
            if shard.table.out.len() >= RECORDS_PER_BATCH {
                sink.send(&mut shard.table.out, false);
            }
            if shard.id() == 0 {
                ctl.progress
                    .store(done_bytes + reader.position(), Ordering::Relaxed);
            }
        }
        if shard.id() == 0 {
            shard.counters.unsupported_link += reader.skipped_unsupported_link();
            warnings.extend(reader.warning().cloned());
        }
        done_bytes += f.bytes().len() as u64;
    }
    warnings
}

/// [`shard_loop`] for one of several shards: reads its turns of batches up
/// to [`crate::exchange::LOOKAHEAD`] turns ahead, splitting them among the
/// shards, steps over the other turns, and runs every turn's parcel for
/// this shard in order (see [`crate::exchange`]).
fn shard_loop_shared(
    shard: &mut Shard,
    sink: &mut Sink,
    files: &[CaptureFile],
    batch: usize,
    ctl: &RunControl,
    mut ends: crate::exchange::Ends,
    spare: bool,
) -> Vec<Warning> {
    let shards = shard.shards();
    let id = shard.id();
    let mut warnings = Vec::new();
    let mut refs: Vec<PacketRef> = Vec::with_capacity(batch);
    let mut done_bytes = 0u64;
    // Turns are numbered across files. Parcels hold decoded packets, not
    // pointers into the file, but every turn of a file is run before the
    // next file is read: the reader, its warning and its counts belong to
    // one file at a time.
    let (mut read, mut run) = (0usize, 0usize);
    // Once stopping, nothing more is read; what was read is still run.
    let mut stopping = false;
    'files: for f in files {
        let mut reader = f.reader();
        let data = reader.data();
        let mut stride = f.stride(id, shards, !spare);
        let mut end_of_file = false;
        loop {
            if !stopping && ctl.stop.load(Ordering::Relaxed) {
                stopping = true;
                ends.stop_sending();
            }
            while !stopping && !end_of_file && read < run + crate::exchange::LOOKAHEAD {
                stride.reached(reader.position());
                let n = if read % shards == id {
                    let n = reader.next_batch(&mut refs, batch);
                    if n > 0 {
                        shard.split(data, &refs, ends.parcels());
                        if !ends.send() {
                            // Another shard left: stop reading, run what
                            // was read.
                            stopping = true;
                            ends.stop_sending();
                        }
                    }
                    n
                } else {
                    reader.skip_batch(batch)
                };
                if n == 0 {
                    end_of_file = true;
                } else {
                    read += 1;
                }
            }
            if run >= read && (!stopping || ends.peers_gone()) {
                if stopping {
                    break 'files;
                }
                break;
            }
            match ends.take(run % shards) {
                Some(parcel) => {
                    shard.run_parcel(&parcel);
                    ends.give_back(run % shards, parcel);
                }
                None if !stopping => {
                    // Another shard left without its turn: run what was
                    // read, read no more.
                    stopping = true;
                    ends.stop_sending();
                }
                None => {}
            }
            run += 1;
            if shard.table.out.len() >= RECORDS_PER_BATCH {
                sink.send(&mut shard.table.out, false);
            }
            if id == 0 {
                ctl.progress
                    .store(done_bytes + reader.position(), Ordering::Relaxed);
            }
        }
        if id == 0 {
            shard.counters.unsupported_link += reader.skipped_unsupported_link();
            warnings.extend(reader.warning().cloned());
        }
        done_bytes += f.bytes().len() as u64;
    }
    warnings
}

/// Whether `shards` shard threads leave a core idle for helper threads.
/// Shards that exchange packets run in step, so a helper that preempts one
/// of them stalls them all: with two shards on two cores the helpers cost
/// ~15 % of the throughput, while one shard gains ~6 % from them
/// (BENCHMARKS.md, session 8).
fn spare_core(shards: usize) -> bool {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    shards < cores
}

/// A shard's end of the channel to the exporter thread.
struct Sink {
    tx: Sender<RecordBatch>,
    /// One per exporter (`None`: it has no text to render).
    renderers: Vec<Option<Renderer>>,
    placement: Placement,
    pool: Receiver<RecordBatch>,
    policy: ExportPolicy,
    pending: VecDeque<RecordBatch>,
    stride: usize,
    dropped: u64,
}

impl Sink {
    fn new(
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
    fn send(&mut self, out: &mut RecordBatch, last: bool) {
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

/// The exporter thread: writes each batch to every output still working.
fn export_loop(
    rx: Receiver<RecordBatch>,
    pool: Sender<RecordBatch>,
    mut exporters: Vec<Box<dyn Exporter>>,
) -> (Summary, Vec<String>) {
    let mut summary = Summary::default();
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

/// A finished flow with its early packets, as returned by [`collect`].
#[derive(Debug, Clone, PartialEq)]
pub struct CollectedFlow {
    /// The record.
    pub record: crate::flow::record::FlowRecord,
    /// Its early packets.
    pub early: Vec<crate::flow::record::EarlyPkt>,
}

/// Runs the pipeline and returns every record in memory (tests, training,
/// the Python package). Records are sorted by first timestamp, then key, so
/// the result does not depend on the number of shards.
pub fn collect(
    files: &[CaptureFile],
    opts: &RunOptions,
    model: &ModelRef,
) -> Result<(Vec<CollectedFlow>, Report)> {
    let store = Arc::new(std::sync::Mutex::new(Vec::new()));
    let ex = Collector(store.clone());
    let report = run(
        files,
        opts,
        model,
        vec![Box::new(ex)],
        &RunControl::default(),
    )?;
    let mut flows = std::mem::take(&mut *store.lock().unwrap_or_else(|p| p.into_inner()));
    flows.sort_by_key(|f: &CollectedFlow| {
        let (r, k) = (&f.record, &f.record.key);
        (r.first_ts, k.src, k.dst, k.sport, k.dport, k.proto)
    });
    Ok((flows, report))
}

/// Exporter that keeps records in memory (see [`collect`]).
struct Collector(Arc<std::sync::Mutex<Vec<CollectedFlow>>>);

impl Exporter for Collector {
    fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for (r, e) in batch.iter() {
            v.push(CollectedFlow {
                record: *r,
                early: e.to_vec(),
            });
        }
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
    fn name(&self) -> &str {
        "memory"
    }
}
