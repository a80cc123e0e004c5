//! Wiring: capture files or a live interface → N shard threads → exporter
//! thread.
//!
//! Contract: [`run`] processes the given capture files as one stream (in the
//! order given; an input that starts before the latest packet read is a
//! separate time domain, see `files.rs`) with `shards` share-nothing shard
//! threads and one exporter thread, and returns the run's [`Report`];
//! [`run_inputs`] does the same for planned inputs (directories, streams,
//! compressed captures, read in time order: [`Inputs`]); [`run_live`] does the same
//! for a live interface, one AF_PACKET socket per shard in a kernel fanout
//! group, until [`RunControl::stop`] is raised, the duration ends or the
//! interface fails (reported as a warning, flows flushed). How each shard
//! thread reads is in `pipeline/files.rs` and `pipeline/live.rs`; its records go
//! out through `pipeline/sink.rs`. Finished records travel to the
//! exporter thread in batches through a bounded channel (one channel
//! operation per batch of records, never per packet); emptied batches come
//! back through pool channels for reuse. Records of kinds other than flows
//! (rows of a [`crate::schema::Kind`]) take the same channel to the
//! outputs of their kind ([`crate::export::Exporter::kind`]). On end of input — and when
//! [`RunControl::stop`] is raised (SIGINT/SIGTERM in the CLI) — every open
//! flow is flushed to the outputs. An output that fails is reported in
//! [`Report::output_errors`] and dropped; the others still receive every
//! record. An output closed by its reader (a pipe) ends quietly
//! ([`Report::outputs_closed`]); when no output is left (and no `-w` pcap
//! is written) the shards stop reading ([`RunControl::halt`]). Each change
//! of [`RunControl::reopen`] reopens the file outputs (SIGHUP); a live run
//! flushes its outputs every [`LIVE_FLUSH`] once records were written
//! since the last flush. Errors are returned only for unusable inputs
//! (before any packet is processed) or invalid configuration.
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

mod calls;
mod files;
pub mod kinds;
mod live;
mod sink;
mod threads;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::classify::Classifier;
use crate::config::FlowConfig;
use crate::export::Exporter;
use crate::flow::record::RecordBatch;
use crate::source::af_packet::{LiveConfig, Ring};
use crate::source::inputs::Inputs;
use crate::source::CaptureFile;
use crate::telemetry::summary::Report;
use crate::{Error, Result};
pub use calls::{CallStage, CallWriter};
use files::Files;
use threads::run_shards;

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
    /// Batch-timestamp correction of capture files (`--timestamps`;
    /// `source/retime.rs`). Default off.
    pub timestamps: crate::source::retime::Timestamps,
    /// Write every packet read, in input order, to this classic pcap file
    /// (`-w`; capture files only).
    pub write: Option<PathBuf>,
    /// DSCP marking map (TOML) for the packets written to
    /// [`RunOptions::write`]: packets of a flow after its verdict carry its
    /// class's DSCP. Needs `write` and one shard.
    pub mark: Option<PathBuf>,
    /// Worker threads of the classifier pool (costly models only).
    pub classifier_threads: usize,
    /// Record batches the channel to the exporter thread holds.
    pub channel_batches: usize,
    /// Where finished flows become records and text (see [`Placement`]).
    pub placement: Placement,
    /// Prometheus metrics the run adds its per-second statistics to
    /// (served by a [`crate::MetricsServer`]). Per-second statistics are
    /// kept when this is set or an output takes their records
    /// ([`crate::STATS`], [`crate::APP_STATS`]). Feature `metrics`.
    #[cfg(feature = "metrics")]
    pub metrics: Option<Arc<crate::telemetry::metrics::Metrics>>,
    /// Alarms on the per-second statistics (their records go to the
    /// outputs of kind [`crate::ALARMS`]; raised and cleared alarms are in
    /// the metrics too).
    pub alarms: Vec<crate::telemetry::alarms::AlarmSpec>,
    /// Dump packets to rotating pcap files (`--dump-dir`; files and live):
    /// each shard writes the packets it runs to its own files.
    pub dump: Option<crate::dump::DumpConfig>,
    /// Forensic pcaps of the alarms (`--alarm-pcap-dir`): each shard keeps
    /// a ring of recent packets, and each raised alarm writes the window
    /// before it. Needs [`RunOptions::alarms`].
    pub forensics: Option<crate::dump::ForensicConfig>,
    /// Track calls beside the flows (`--voip-db`, `--calls-out`,
    /// `--streams-out`): the shards tap the VoIP packets for one call
    /// stage thread (`pipeline/calls.rs`).
    pub calls: Option<CallStage>,
    /// Labels every record (`app`, `category`, `label_source`, `stat_app`,
    /// `stat_confidence`: `crate::classify::labeller`) where its record
    /// is built; `None`: the record's `app` is the model's verdict alone.
    /// The exporters' class names must then be `Labeller::names`.
    pub labels: Option<Arc<crate::classify::labeller::Labeller>>,
    /// Models swapped into the shards while the run goes (`--learn`;
    /// `classify/swap.rs`): each shard installs a published model between
    /// batches, file runs at fixed points of the input.
    pub swap: Option<Arc<crate::classify::swap::Swap>>,
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

impl RunOptions {
    /// Whether the run adds its seconds to Prometheus metrics
    /// (`RunOptions::metrics`; never without the `metrics` feature).
    pub(crate) fn feeds_metrics(&self) -> bool {
        #[cfg(feature = "metrics")]
        {
            self.metrics.is_some()
        }
        #[cfg(not(feature = "metrics"))]
        {
            false
        }
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            flow: FlowConfig::default(),
            shards: 1,
            pin: false,
            export_policy: ExportPolicy::Block,
            batch: crate::source::BATCH,
            timestamps: Default::default(),
            write: None,
            mark: None,
            classifier_threads: 1,
            channel_batches: CHANNEL_BATCHES,
            placement: Placement::Auto,
            #[cfg(feature = "metrics")]
            metrics: None,
            alarms: Vec::new(),
            dump: None,
            forensics: None,
            calls: None,
            labels: None,
            swap: None,
        }
    }
}

/// Shared controls of a running pipeline (set from other threads).
#[derive(Debug, Clone, Default)]
pub struct RunControl {
    /// Raise to stop reading; open flows are flushed.
    pub stop: Arc<AtomicBool>,
    /// Input bytes consumed so far by shard 0 (for a progress bar); in a
    /// live run, the packets taken from the sockets by all shards.
    pub progress: Arc<AtomicU64>,
    /// Raised once every shard thread is running (for a live capture: its
    /// socket is open and capturing).
    pub started: Arc<AtomicBool>,
    /// Reopen requests: each change makes the exporter thread reopen the
    /// file outputs at their paths (SIGHUP in the CLI, for log rotation).
    pub reopen: Arc<AtomicU64>,
    /// Raised by the run itself when every output has been closed by its
    /// reader (`earlybird flows … | head`): reading stops as on
    /// [`RunControl::stop`], but the run is not reported interrupted.
    pub halt: Arc<AtomicBool>,
    /// Ticks of the live shards (each adds one every 100 ms of its loop,
    /// idle or not): a watchdog's sign that they still run.
    pub ticks: Arc<AtomicU64>,
}

impl RunControl {
    /// Whether the shards should stop reading: a stop request, or no output
    /// left to write to.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.halt.load(Ordering::Relaxed)
    }
}

/// How often a live run flushes its outputs once records were written
/// since the last flush.
pub const LIVE_FLUSH: Duration = Duration::from_secs(1);

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
    check(opts)?;
    run_files(Files::Slice(files), opts, model, exporters, ctl)
}

/// Runs the pipeline over planned inputs (files, directories, streams,
/// compressed captures; see [`Inputs`]): as [`run`], with the captures
/// opened or decompressed just ahead of the shards by an input thread.
/// Warnings about the inputs and the inputs skipped are in the report.
pub fn run_inputs(
    inputs: Inputs,
    opts: &RunOptions,
    model: &ModelRef,
    exporters: Vec<Box<dyn Exporter>>,
    ctl: &RunControl,
) -> Result<Report> {
    check(opts)?;
    let mut warnings = inputs.warnings.clone();
    let mut skipped = inputs.skipped.clone();
    let planned = inputs.len() as u64;
    let feed = inputs.start(opts.shards, vec![ctl.stop.clone(), ctl.halt.clone()]);
    feed.spare.store(spare_core(opts.shards), Ordering::Relaxed);
    let result = run_files(Files::Feed(feed.clone()), opts, model, exporters, ctl);
    feed.cancel();
    let mut report = result?;
    let (w, s) = feed.take_report();
    warnings.extend(w);
    warnings.append(&mut report.warnings);
    report.warnings = warnings;
    let late: u64 = s.iter().map(|(_, n)| n).sum();
    for (r, n) in s {
        match skipped.iter_mut().find(|(x, _)| *x == r) {
            Some((_, m)) => *m += n,
            None => skipped.push((r, n)),
        }
    }
    skipped.sort();
    report.inputs_read = planned - late;
    report.inputs_skipped = skipped;
    Ok(report)
}

/// [`run`] and [`run_inputs`] once their captures are known.
fn run_files(
    files: Files<'_>,
    opts: &RunOptions,
    model: &ModelRef,
    exporters: Vec<Box<dyn Exporter>>,
    ctl: &RunControl,
) -> Result<Report> {
    let marker = match &opts.write {
        Some(out) => Some(open_marker(&files, opts.mark.as_deref(), out, model)?),
        None => None,
    };
    let inputs = match opts.shards {
        1 => vec![Input::Files(None)],
        n => crate::exchange::mesh(n, opts.batch)
            .into_iter()
            .map(|e| Input::Files(Some(Box::new(e))))
            .collect(),
    };
    run_shards(files, inputs, marker, None, opts, model, exporters, ctl)
}

/// The sockets of a live run, opened before it starts (see [`open_live`]).
pub struct LiveInput {
    rings: Vec<Ring>,
    /// Hardware stamps turned on for the run (`--hw-timestamps`), turned
    /// back off when it ends.
    hw: Vec<crate::source::hwstamp::HwStamping>,
}

/// Opens one socket per shard on `live.interface`, joined in one fanout
/// group when there are several; they capture from here on (into their
/// rings) until [`run_live`] reads them. An unusable interface is an
/// error naming it.
pub fn open_live(live: &LiveConfig, shards: usize) -> Result<LiveInput> {
    let mut hw = Vec::new();
    if live.hw_timestamps {
        for name in live.interface.split(',').map(str::trim) {
            if name == "any" {
                return Err(Error::Config(
                    "--hw-timestamps names the interfaces whose NIC stamps packets; \
                     it cannot be used with \"any\""
                        .into(),
                ));
            }
            hw.push(crate::source::hwstamp::HwStamping::enable(name)?);
        }
    }
    let group = (shards > 1).then(crate::source::af_packet::fanout_group);
    let rings = if live.capture == crate::source::af_packet::Capture::AfXdp {
        Ring::open_xdp(live, shards)?
    } else {
        (0..shards.max(1))
            .map(|_| Ring::open(live, group.map(|g| (g, shards as u32))))
            .collect::<Result<Vec<_>>>()?
    };
    Ok(LiveInput { rings, hw })
}

/// Runs the pipeline on a live interface (see the module docs): each shard
/// thread reads its socket of `input` (as many as `opts.shards`) until
/// `ctl.stop`, the end of `duration` (wall clock) or a socket error.
pub fn run_live(
    input: LiveInput,
    duration: Option<Duration>,
    opts: &RunOptions,
    model: &ModelRef,
    exporters: Vec<Box<dyn Exporter>>,
    ctl: &RunControl,
) -> Result<Report> {
    check(opts)?;
    if opts.timestamps != crate::source::retime::Timestamps::Off {
        return Err(Error::Config(
            "--timestamps corrects capture files; a live interface has the kernel's \
             per-packet stamps"
                .into(),
        ));
    }
    if opts.write.is_some() || opts.mark.is_some() {
        return Err(Error::Config(
            "writing packets to a pcap file (and DSCP marking) is for capture files; \
             it is not available on a live interface"
                .into(),
        ));
    }
    if input.rings.len() != opts.shards {
        return Err(Error::Config(format!(
            "{} sockets were opened for {} shards",
            input.rings.len(),
            opts.shards
        )));
    }
    let deadline = duration.map(|d| Instant::now() + d);
    let note = input.rings.first().map(Ring::stamp_note);
    // Hardware stamps stay on until every socket is read.
    let _hw = input.hw;
    let inputs = input
        .rings
        .into_iter()
        .map(|r| Input::Live(Box::new(r), deadline))
        .collect();
    let mut report = run_shards(
        Files::Slice(&[]),
        inputs,
        None,
        Some(LIVE_FLUSH),
        opts,
        model,
        exporters,
        ctl,
    )?;
    report.live_stamps = note;
    Ok(report)
}

/// What one shard thread reads.
enum Input {
    /// The files of the run; with several shards, this shard's ends of the
    /// exchange.
    Files(Option<Box<crate::exchange::Ends>>),
    /// This shard's socket, and when to stop.
    Live(Box<Ring>, Option<Instant>),
}

/// The packet taps of each of `shards` shards: a dumper each when
/// `dump` asks for one (its directory created, its filter resolved
/// against the model's classes); `None` otherwise.
fn open_taps(
    dump: Option<&crate::dump::DumpConfig>,
    forensics: Option<&crate::dump::Forensics>,
    shards: usize,
    model: &ModelRef,
) -> Result<Vec<crate::shard::taps::PacketTaps>> {
    let ring = || forensics.map(|f| f.ring());
    let Some(cfg) = dump else {
        return Ok((0..shards)
            .map(|_| crate::shard::taps::PacketTaps {
                dump: ring().map(|r| {
                    Box::new(crate::dump::Taps {
                        dumper: None,
                        thread: None,
                        ring: Some(r),
                        held: None,
                    })
                }),
                ..Default::default()
            })
            .collect());
    };
    let filter = crate::dump::DumpFilter::resolve(cfg, &model.classes)?;
    std::fs::create_dir_all(&cfg.dir).map_err(|e| Error::Output {
        name: format!("dump directory {}", cfg.dir.display()),
        reason: format!("cannot create: {e}"),
    })?;
    crate::dump::check_direct(cfg)?;
    Ok((0..shards)
        .map(|id| {
            let d = crate::dump::Dumper::new(
                &cfg.dir,
                cfg.format,
                id,
                cfg.max_bytes,
                cfg.period,
                filter.clone(),
            )
            .direct(cfg.direct);
            // One shard: every packet in input order, so the dumper can
            // run on its own thread (`crate::dump::thread`).
            let mut taps = crate::dump::Taps::with_dumper(d, id, shards == 1);
            taps.ring = ring();
            if filter.by_app() && cfg.hold_bytes > 0 {
                let share = (cfg.hold_bytes / shards as u64).max(1);
                taps.held = Some(crate::dump::Held::new(share as usize));
            }
            crate::shard::taps::PacketTaps {
                dump: Some(Box::new(taps)),
                ..Default::default()
            }
        })
        .collect())
}

/// Checks the options every run shares.
fn check(opts: &RunOptions) -> Result<()> {
    opts.flow.validate()?;
    if opts.shards == 0 || opts.batch == 0 || opts.batch > u16::MAX as usize {
        return Err(Error::Config(
            "shards must be ≥ 1 and the batch 1..=65535".into(),
        ));
    }
    if opts.forensics.is_some() && opts.alarms.is_empty() {
        return Err(Error::Config(
            "forensic pcaps are written when an alarm is raised: give an alarm".into(),
        ));
    }
    if opts.mark.is_some() && opts.write.is_none() {
        return Err(Error::Config(
            "DSCP marking needs a pcap file to write the marked packets to".into(),
        ));
    }
    if let (Some(s), Some(_)) = (&opts.flow.sample, &opts.write) {
        return Err(Error::Config(format!(
            "--sample {}:{} runs 1 in {} packets, but -w writes every packet read: \
             sampling and -w do not go together",
            s.policy.name(),
            s.rate,
            s.rate
        )));
    }
    if opts.mark.is_some() && opts.shards != 1 {
        return Err(Error::Config(
            "DSCP marking writes each packet with its flow's verdict and needs one shard \
             (--shards 1)"
                .into(),
        ));
    }
    Ok(())
}

/// Opens the `-w` pcap output for the run's first capture, marking per
/// `map` when given.
fn open_marker(
    files: &Files<'_>,
    map: Option<&std::path::Path>,
    out: &std::path::Path,
    model: &ModelRef,
) -> Result<crate::mark::Marker> {
    let fed;
    let first = match files {
        Files::Slice(fs) => fs.first(),
        Files::Feed(feed) => {
            fed = feed.peek_first();
            fed.as_deref().map(|i| &i.file)
        }
    };
    let Some(first) = first else {
        return Err(Error::Config("writing packets needs an input".into()));
    };
    crate::mark::Marker::open(first, map, out, &model.classes)
}

/// Whether `shards` shard threads leave a core idle for helper threads.
/// Shards that exchange packets run in step, so a helper that preempts one
/// of them stalls them all: with two shards on two cores the helpers cost
/// ~15 % of the throughput, while one shard gains ~6 % from them
/// (BENCHMARKS.md, history, 2026-11-24, 4ed4d74).
fn spare_core(shards: usize) -> bool {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    shards < cores
}

/// A finished flow with its early packets, as returned by [`collect`].
#[derive(Debug, Clone, PartialEq)]
pub struct CollectedFlow {
    /// The record.
    pub record: crate::flow::record::FlowRecord,
    /// Its early packets.
    pub early: Vec<crate::features::early::EarlyPkt>,
    /// The fields the per-flow analyzers of the run added, in order
    /// ([`crate::analyze::fields_of`] names them); empty when none was on.
    pub analyzed: Vec<crate::schema::OwnedValue>,
}

/// Runs the pipeline and returns every record in memory (tests,
/// training). Records are sorted by first timestamp, then key
/// (tunnel and VLAN included), then last timestamp and counts, so the
/// result does not depend on the number of shards.
pub fn collect(
    files: &[CaptureFile],
    opts: &RunOptions,
    model: &ModelRef,
) -> Result<(Vec<CollectedFlow>, Report)> {
    collect_with(|ex| run(files, opts, model, ex, &RunControl::default()))
}

/// [`collect`] over planned inputs ([`run_inputs`]).
pub fn collect_inputs(
    inputs: Inputs,
    opts: &RunOptions,
    model: &ModelRef,
) -> Result<(Vec<CollectedFlow>, Report)> {
    collect_with(|ex| run_inputs(inputs, opts, model, ex, &RunControl::default()))
}

/// Runs `run` with an in-memory exporter; returns its records sorted.
fn collect_with(
    run: impl FnOnce(Vec<Box<dyn Exporter>>) -> Result<Report>,
) -> Result<(Vec<CollectedFlow>, Report)> {
    let store = Arc::new(std::sync::Mutex::new(Vec::new()));
    let report = run(vec![Box::new(Collector(store.clone()))])?;
    let mut flows = std::mem::take(&mut *store.lock().unwrap_or_else(|p| p.into_inner()));
    // A total order (flows of different tunnels or VLANs can share
    // addresses, ports and first packet), so the result does not depend
    // on the order the shards ended them in.
    flows.sort_by_key(|f: &CollectedFlow| {
        let (r, k) = (&f.record, &f.record.key);
        (
            (r.first_ts, k.src, k.dst, k.sport, k.dport, k.proto),
            (
                k.vlan,
                k.tunnel as u8,
                k.tunnel_id,
                r.last_ts,
                r.packets,
                r.bytes,
            ),
        )
    });
    Ok((flows, report))
}

/// Exporter that keeps records in memory (see [`collect`]).
struct Collector(Arc<std::sync::Mutex<Vec<CollectedFlow>>>);

impl Exporter for Collector {
    fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for (i, (r, e)) in batch.iter().enumerate() {
            v.push(CollectedFlow {
                record: *r,
                early: e.to_vec(),
                analyzed: batch.analyzed.row(i).map(|c| c.to_owned()).collect(),
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
