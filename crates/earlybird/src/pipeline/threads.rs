//! The threads of a run: the exporter thread, the classifier pool's
//! workers, one shard thread per input, and the report gathered from them.
//!
//! Contract: [`run_shards`] starts every thread inside one
//! `std::thread::scope`, so nothing outlives the run; a thread that cannot
//! be started is a [`Error::Config`]. Each shard thread ([`shard_thread`])
//! builds its table (reporting ready before the file helpers start, see
//! `docs/ARCHITECTURE.md`), runs its input to the end or to a stop, ends
//! every open flow and hands every record to the exporter; [`gather`]
//! merges their counters, warnings and the `-w` result into the report. A
//! panicking thread is an error naming which kind of thread it was.

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::files::{self, Files};
use super::sink::{self, export_loop, ExportControl, Exported, SeriesOut, ShardEnds, Sink};
use super::{live, spare_core, Input, ModelRef, RunControl, RunOptions, RECORDS_PER_BATCH};
use crate::classify::pool::PoolLink;
use crate::classify::Classifier;
use crate::dump::DumpCounters;
use crate::export::{Exporter, Renderer};
use crate::mark::{MarkCounters, Marker};
use crate::shard::Shard;
use crate::source::Warning;
use crate::telemetry::alarms::Alarms;
use crate::telemetry::counters::Counters;
use crate::telemetry::series;
use crate::telemetry::summary::Report;
use crate::{Error, Result};

/// What one shard thread is given.
struct ShardStart<'f> {
    id: usize,
    input: Input,
    files: Files<'f>,
    ends: ShardEnds,
    core: Option<core_affinity::CoreId>,
    model: Option<std::sync::Arc<dyn Classifier>>,
    marker: Option<Marker>,
    taps: crate::shard::taps::PacketTaps,
    link: Option<PoolLink>,
    renderers: Vec<Option<Renderer>>,
    /// Some flow output reads the records' size and inter-arrival
    /// statistics.
    moments: bool,
    /// Some flow output reads the records' cells (their label cells).
    cells: bool,
    ready: mpsc::Sender<()>,
    spare: bool,
    /// Keep per-second statistics, for a model of this many classes.
    per_second: Option<usize>,
    /// The alarms' forensic pcaps, served from this shard's ring.
    forensics: Option<std::sync::Arc<crate::dump::Forensics>>,
    /// The board of the `dns` analyzer's name-by-address cache: one for
    /// every shard that runs files in turns, its own for a shard that
    /// does not (`analyze/dns_cache.rs`).
    names: std::sync::Arc<crate::analyze::dns_cache::Board>,
}

/// What one shard thread returns: its counters, the input warnings, the
/// process's anonymous memory at end of input (shard 0), the result of
/// its `-w` writer, what its dumper did (and its first failure), and the
/// failures writing forensic pcaps.
type ShardEnd = (
    Counters,
    Vec<Warning>,
    Option<u64>,
    Option<Result<MarkCounters>>,
    Option<(DumpCounters, Option<String>)>,
    Vec<String>,
);

/// Starts the exporter thread and one shard thread per input, and gathers
/// their results into the run's report. `flush_every`: see
/// [`ExportControl`].
#[allow(clippy::too_many_arguments)]
pub(super) fn run_shards(
    files: Files<'_>,
    inputs: Vec<Input>,
    mut marker: Option<Marker>,
    flush_every: Option<Duration>,
    opts: &RunOptions,
    model: &ModelRef,
    exporters: Vec<Box<dyn Exporter>>,
    ctl: &RunControl,
) -> Result<Report> {
    let started = Instant::now();
    let (ends, export_ends) = sink::channels(opts.channel_batches, &exporters);
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
    let forensics = match &opts.forensics {
        Some(cfg) => Some(std::sync::Arc::new(crate::dump::Forensics::new(
            cfg.clone(),
            opts.shards,
        )?)),
        None => None,
    };
    let mut taps = super::open_taps(opts.dump.as_ref(), forensics.as_deref(), opts.shards, model)?;
    let live = inputs.iter().any(|i| matches!(i, Input::Live(..)));
    let stage = super::calls::start(opts.calls.as_ref(), live, &mut taps)?;
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let mut renderers: Vec<Vec<Option<Renderer>>> = (0..opts.shards)
        .map(|_| exporters.iter().map(|e| e.renderer()).collect())
        .collect();
    // Records are built with their size and inter-arrival statistics only
    // when a flow output reads them.
    let moments = exporters
        .iter()
        .any(|e| e.kind().is(&crate::export::fields::FLOWS) && e.reads_moments());
    // And with their label cells only when a flow output reads cells.
    let cells = exporters
        .iter()
        .any(|e| e.kind().is(&crate::export::fields::FLOWS) && e.reads_label_cells());
    // Per-second statistics, when the metrics or an output want them.
    let per_second = opts.feeds_metrics()
        || !opts.alarms.is_empty()
        || exporters
            .iter()
            .any(|e| e.kind().is(&series::STATS) || e.kind().is(&series::APP_STATS));
    let alarms = (!opts.alarms.is_empty())
        .then(|| Alarms::new(&opts.alarms))
        .transpose()
        .map_err(|e| Error::Config(e.to_string()))?;
    let export_ctl = ExportControl {
        flush_every,
        reopen: ctl.reopen.clone(),
        // With a -w pcap or a dump, every packet is still wanted.
        halt: (marker.is_none() && opts.dump.is_none()).then(|| ctl.halt.clone()),
        unidirectional: !opts.flow.bidirectional,
        series: per_second.then(|| SeriesOut {
            merger: series::Merger::new(opts.shards, model.classes.clone()),
            classes: model.classes.clone(),
            #[cfg(feature = "metrics")]
            metrics: opts.metrics.clone(),
            alarms,
            forensics: forensics.clone(),
            stats_out: exporters.iter().any(|e| e.kind().is(&series::STATS)),
            app_stats_out: exporters.iter().any(|e| e.kind().is(&series::APP_STATS)),
        }),
        labels: opts.labels.clone(),
        cells,
    };
    // The DNS cache's boards, for its figures in the report.
    let mut boards = Vec::new();
    let (shard_results, export_result, calls_result) = std::thread::scope(|scope| {
        // Owned here: taps not handed to a shard end with this closure, so
        // the call stage never waits for them.
        let mut taps = taps;
        let calls = stage
            .map(|st| {
                std::thread::Builder::new()
                    .name("eb-calls".into())
                    .spawn_scoped(scope, move || st.run())
            })
            .transpose()
            .map_err(Error::spawn("call stage"))?;
        let exporter = std::thread::Builder::new()
            .name("eb-export".into())
            .spawn_scoped(scope, move || {
                export_loop(export_ends, exporters, export_ctl)
            })
            .map_err(Error::spawn("exporter"))?;
        if let (Some(m), Some(jobs)) = (&costly, &job_rx) {
            for _ in 0..opts.classifier_threads.max(1) {
                let (m, jobs, done) = (m.clone(), jobs.clone(), done_txs.clone());
                std::thread::Builder::new()
                    .name("eb-classify".into())
                    .spawn_scoped(scope, move || crate::classify::pool::worker(m, jobs, done))
                    .map_err(Error::spawn("classifier"))?;
            }
        }
        drop(job_rx);
        drop(done_txs);
        let mut handles = Vec::new();
        let shared_names = std::sync::Arc::new(crate::analyze::dns_cache::Board::new(opts.shards));
        for (id, input) in inputs.into_iter().enumerate() {
            let names = match &input {
                Input::Files(Some(_)) => shared_names.clone(),
                _ => std::sync::Arc::new(crate::analyze::dns_cache::Board::new(1)),
            };
            boards.push(names.clone());
            let start = ShardStart {
                names,
                id,
                input,
                files: files.clone(),
                ends: ends.clone(),
                core: (!cores.is_empty()).then(|| cores[id % cores.len()]),
                model: model.model.clone(),
                marker: if id == 0 { marker.take() } else { None },
                taps: taps.get_mut(id).map(std::mem::take).unwrap_or_default(),
                link: links[id].take(),
                renderers: std::mem::take(&mut renderers[id]),
                moments,
                cells,
                ready: ready_tx.clone(),
                spare,
                per_second: per_second.then_some(model.classes.len()),
                forensics: forensics.clone(),
            };
            let handle = std::thread::Builder::new()
                .name(format!("eb-shard{id}"))
                .spawn_scoped(scope, move || shard_thread(start, opts, ctl));
            handles.push(handle.map_err(Error::spawn("shard"))?);
        }
        drop(ends);
        drop(ready_tx);
        // Every shard has its table (or has failed and dropped its end).
        for _ in 0..opts.shards {
            if ready_rx.recv().is_err() {
                break;
            }
        }
        match &files {
            Files::Slice(fs) => fs.iter().for_each(|f| f.map_ahead(spare)),
            Files::Feed(feed) => feed.started.store(true, Ordering::Release),
        }
        ctl.started.store(true, Ordering::Relaxed);
        let results: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        let calls = calls.map(|h| h.join());
        Ok::<_, Error>((results, exporter.join(), calls))
    })?;
    let mut report = Report {
        classes: match &opts.labels {
            Some(l) => l.names(),
            None => model.classes.clone(),
        },
        ..Report::default()
    };
    gather(&mut report, shard_results, export_result)?;
    if opts.flow.analyzers.iter().any(|a| a == "dns") {
        boards.sort_by_key(|b| std::sync::Arc::as_ptr(b) as usize);
        boards.dedup_by(|a, b| std::sync::Arc::ptr_eq(a, b));
        report.dns_cache = Some(boards.iter().fold((0, 0), |(h, e), b| {
            let (bh, be) = b.counts();
            (h + bh, e + be)
        }));
    }
    match calls_result {
        Some(Ok(Ok(s))) => report.calls = Some(s),
        Some(Ok(Err(e))) => report.output_errors.push(e.to_string()),
        Some(Err(_)) => return Err(Error::thread("call stage")),
        None => {}
    }
    report.marking = opts.mark.is_some();
    report.interrupted = ctl.stop.load(Ordering::Relaxed);
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// One shard thread: builds the shard, runs its input, ends every flow and
/// hands the records over.
fn shard_thread(st: ShardStart<'_>, opts: &RunOptions, ctl: &RunControl) -> Result<ShardEnd> {
    let id = st.id;
    if let Some(c) = st.core {
        core_affinity::set_for_current(c);
    }
    let mut shard = Shard::new(id, opts.shards, &opts.flow, st.model)?;
    shard.set_names_board(st.names);
    if let Some(classes) = st.per_second {
        shard.keep_seconds(classes);
    }
    if st.spare {
        shard.table.start_prefault();
    }
    if matches!(st.input, Input::Live(..)) {
        shard.table.populate_start();
    }
    // Records built without moments (`Sink::moments`) read none.
    shard.table.keep_moments(st.moments);
    // Threads are started (and their memory mapped) before the file's
    // helper runs: a thread start waits for the address space lock that
    // populating holds (10-60 ms measured).
    let _ = st.ready.send(());
    drop(st.ready);
    let mut taps = st.taps;
    shard.set_taps(taps.dump.take());
    shard.taps.calls = taps.calls.take();
    shard.taps.marker = st.marker;
    if let Some(l) = st.link {
        shard.table.attach_pool(l);
    }
    let mut sink = Sink::new(
        st.ends,
        st.renderers,
        opts.placement,
        opts.export_policy,
        opts.flow.early_packets,
    );
    sink.forensics = st.forensics.map(|f| (f, 0));
    sink.moments = st.moments;
    sink.labels = opts.labels.clone();
    sink.cells = st.cells;
    sink.records_before_seconds = opts.labels.as_ref().is_some_and(|l| l.drift().is_some());
    if let Some(sw) = &opts.swap {
        sink.swap = Some(sw.link(id));
        shard.table.keep_model_ids();
    }
    // Early-verdict events are built only when an output takes them.
    if sink.wants(&crate::flow::events::VERDICTS) {
        shard.emit_verdict_events();
    }
    let (files, batch) = (&st.files, opts.batch);
    let warnings = match st.input {
        Input::Files(None) => files::shard_loop(
            &mut shard,
            &mut sink,
            files,
            batch,
            ctl,
            st.spare,
            opts.timestamps,
        ),
        Input::Files(Some(ends)) => files::shard_loop_shared(
            &mut shard,
            &mut sink,
            files,
            batch,
            ctl,
            *ends,
            st.spare,
            opts.timestamps,
        ),
        Input::Live(mut ring, deadline) => {
            let mut drops = live::Drops::new(opts);
            let w = live::shard_loop(
                &mut shard, &mut sink, &mut ring, batch, ctl, deadline, &mut drops,
            );
            live::count(&mut shard.counters, &mut ring);
            w
        }
    };
    if let Some(link) = sink.swap.as_mut() {
        link.leave(sink.sent);
    }
    shard.counters.table_bytes = shard.table.memory_bytes() as u64;
    shard.counters.table_pool_bytes = shard.table.pool_bytes() as u64;
    let rss = (id == 0)
        .then(crate::telemetry::summary::rss_anon)
        .flatten();
    shard.finish(RECORDS_PER_BATCH, |out| sink.send(out, true));
    sink.send(&mut shard.table.out, true);
    if let Some(ev) = shard.events() {
        sink.send_rows(ev, true);
    }
    sink.send_seconds(&mut shard.closed, true);
    shard.counters.export_dropped = sink.dropped;
    // The alarms of the last seconds are decided after this: the ring goes
    // to the exporter thread.
    sink.serve_forensics(&shard);
    if let (Some((f, done)), Some(ring)) = (
        sink.forensics.take(),
        shard.taps.dump.as_mut().and_then(|t| t.ring.take()),
    ) {
        f.hand_over(id, ring, done);
    }
    let forensic_errors = std::mem::take(&mut sink.forensic_errors);
    let mark_result = shard.taps.marker.take().map(|mut m| match m.error.take() {
        // Errors of the pcap writer name its file.
        Some(e) => Err(e),
        None => m.writer.finish(),
    });
    let dumped = shard.taps.dump.as_mut().and_then(|t| t.finish_dumper());
    Ok((
        shard.counters,
        warnings,
        rss,
        mark_result,
        dumped,
        forensic_errors,
    ))
}

/// Folds the shard threads' and the exporter thread's results into
/// `report`.
fn gather(
    report: &mut Report,
    shards: Vec<std::thread::Result<Result<ShardEnd>>>,
    exported: std::thread::Result<Exported>,
) -> Result<()> {
    for r in shards {
        let (c, w, rss, mark, dumped, forensic) = r.map_err(|_| Error::thread("shard"))??;
        report.output_errors.extend(forensic);
        if let Some((d, e)) = dumped {
            report
                .dump
                .get_or_insert_with(DumpCounters::default)
                .merge(&d);
            report.dump_errors.extend(e);
        }
        match mark {
            Some(Ok(m)) => report.marked = Some(m),
            Some(Err(e)) => report.output_errors.push(e.to_string()),
            None => {}
        }
        report.counters.merge(&c);
        report.flowed_per_shard.push(c.packets_flowed);
        report.warnings.extend(w);
        report.rss_anon_end_of_input = report.rss_anon_end_of_input.or(rss);
    }
    // Every socket of a live run reports the same lost interface.
    report.warnings.dedup();
    let (summary, errors, closed) = exported.map_err(|_| Error::thread("exporter"))?;
    report.summary = summary;
    report.output_errors.extend(errors);
    report.outputs_closed = closed;
    Ok(())
}
