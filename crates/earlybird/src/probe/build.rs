//! From a [`Config`] to a run: [`Config::plan`] checks everything that can
//! be checked without creating anything (values, combinations, the model,
//! the inputs, output names); [`Plan::open`] refuses an output that is an
//! input (or a directory, or in a missing one), then opens the outputs, the call database, the live sockets and the metrics
//! endpoint; [`Probe::run`] runs to the end of the input or a stop.
//!
//! Errors: [`Error::Usage`] for an option's value or a combination that
//! cannot run (the command line exits 2 on it), the other variants for an
//! input, model or output that cannot be used (naming it).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::calls::CallOutputs;
use super::Config;
use crate::classify::Model;
use crate::config::{FlowConfig, FlowHash};
use crate::dump::{DumpConfig, DumpFormat, ForensicConfig};
use crate::export::ipfix::{self, IpfixOptions};
use crate::export::{ExportOptions, Exporter, Format};
use crate::pipeline::{CallStage, ExportPolicy, LiveInput, ModelRef, RunControl, RunOptions};
use crate::schema::Kind;
use crate::source::af_packet::LiveConfig;
use crate::source::fanout::Fanout;
use crate::source::inputs::{InputOrder, Inputs};
use crate::source::retime::Timestamps;
use crate::telemetry::alarms::AlarmSpec;
#[cfg(feature = "metrics")]
use crate::telemetry::metrics::{Metrics, MetricsServer};
use crate::telemetry::summary::Report;
use crate::time::SECOND;
use crate::voip::tracker::TrackerConfig;
use crate::{Error, Result};

/// The built-in model (`models/default.ebm`, trained by
/// `models/train_default.sh`): what runs when no model is named, also
/// named `default`.
pub static DEFAULT_MODEL: &[u8] = include_bytes!("../../../../models/default.ebm");

/// The name of the built-in model (a file of that name is `./default`).
pub const DEFAULT_MODEL_NAME: &str = "default";

/// Record batches a shard of a live capture keeps waiting for a slow
/// output before it drops (a live capture cannot wait).
pub const LIVE_PENDING: usize = 64;

impl Model {
    /// The built-in model ([`DEFAULT_MODEL`]).
    pub fn builtin() -> Result<Model> {
        Model::from_bytes(DEFAULT_MODEL).map_err(|e| Error::Model {
            path: DEFAULT_MODEL_NAME.into(),
            reason: e.to_string(),
        })
    }

    /// The model `path` names: the built-in one for `None` or `default`.
    /// A file that cannot be read is an [`Error::Model`] naming it.
    pub fn named(path: Option<&Path>) -> Result<Model> {
        match path {
            Some(p) if p.as_os_str() != DEFAULT_MODEL_NAME => Model::load(p).map_err(|e| match e {
                Error::Io { path, source } => Error::Model {
                    path,
                    reason: source.to_string(),
                },
                e => e,
            }),
            _ => Model::builtin(),
        }
    }
}

/// What a run reads: capture files, or a live interface.
enum Input {
    Files(Inputs),
    Live(LiveConfig, Option<Duration>),
}

/// A checked configuration: what the run will read and write, nothing
/// opened yet.
pub struct Plan {
    /// The configuration it came from.
    pub config: Config,
    /// The engine's options.
    pub options: RunOptions,
    /// The classifier.
    pub model: ModelRef,
    /// How flow records are written.
    pub export: ExportOptions,
    /// The IPFIX outputs' options.
    pub ipfix: IpfixOptions,
    input: Input,
    /// Flow record outputs and their formats.
    outputs: Vec<(PathBuf, Format)>,
    /// Outputs of the other record kinds.
    rows: Vec<(&'static Kind, PathBuf, Format)>,
    metrics: Option<std::net::SocketAddr>,
    tracker: Option<TrackerConfig>,
    /// The capture filter (`--filter`), which counts what it leaves out.
    filter: Option<Arc<crate::source::capfilter::CaptureFilter>>,
    /// Self-training (`--learn`): its options and the run's own model.
    #[cfg(feature = "tools")]
    learn: Option<(crate::learn::online::LearnOptions, Option<Arc<Model>>)>,
}

/// An opened run: outputs created, sockets bound.
pub struct Probe {
    /// The checked configuration.
    pub plan: Plan,
    exporters: Vec<Box<dyn Exporter>>,
    live: Option<LiveInput>,
    calls: Option<Arc<Mutex<CallOutputs>>>,
    /// The ClickHouse outputs' holds (their summary lines).
    clickhouse: Vec<crate::export::clickhouse::HoldCounts>,
    #[cfg(feature = "metrics")]
    server: Option<MetricsServer>,
    #[cfg(feature = "tools")]
    learning: Option<Arc<Mutex<crate::learn::online::Status>>>,
}

/// Nanoseconds of `s` seconds, which must be positive.
fn secs(s: f64, what: &str) -> Result<u64> {
    if !(s > 0.0 && s.is_finite()) {
        return Err(Error::Usage(format!(
            "--{what} must be a positive number of seconds"
        )));
    }
    Ok((s * SECOND as f64).round() as u64)
}

/// A usage error (exit 2 on the command line) from an option's value
/// error, with its message.
fn usage(e: impl std::fmt::Display) -> Error {
    Error::Usage(e.to_string())
}

/// `Err(Usage)` naming `what` unless `ok`.
fn need(ok: bool, what: &str) -> Result<()> {
    match ok {
        true => Ok(()),
        false => Err(Error::Usage(what.into())),
    }
}

impl Config {
    /// Checks the configuration and plans the run (see the module docs);
    /// nothing is created. An output that is an input (or a directory, or
    /// in a missing one) is refused here.
    pub fn plan(&self) -> Result<Plan> {
        self.plan_with(true)
    }

    /// [`Config::plan`] without looking at the outputs' paths (what
    /// `--check-config` checks: the configuration of a probe may name
    /// directories of the machine it is for).
    pub fn check(&self) -> Result<Plan> {
        self.plan_with(false)
    }

    fn plan_with(&self, paths: bool) -> Result<Plan> {
        let c = self;
        // Combinations the options cannot run in.
        need(
            c.interface.is_some() || !c.inputs.is_empty(),
            "no input: give capture files (inputs) or an interface",
        )?;
        need(
            c.interface.is_none() || c.inputs.is_empty(),
            "capture files and --interface exclude each other",
        )?;
        if c.interface.is_none() {
            need(c.duration.is_none(), "--duration needs --interface")?;
            need(!c.hw_timestamps, "--hw-timestamps needs --interface")?;
        }
        need(
            c.write.is_none() || c.interface.is_none(),
            "-w copies the packets of capture files; not with --interface",
        )?;
        need(c.mark.is_none() || c.write.is_some(), "--mark needs -w")?;
        need(
            c.sample_seed.is_none() || c.sample.is_some(),
            "--sample-seed needs --sample",
        )?;
        need(
            !c.no_model || (c.model.is_none() && c.threshold.is_none() && c.events.is_none()),
            "--no-model excludes --model, --threshold and --events",
        )?;
        let d = &c.dump;
        let dump_default = super::config::DumpSection::default();
        need(
            d.dir.is_some()
                || (d.format.is_none()
                    && !d.direct
                    && d.max_mib.is_none()
                    && d.seconds.is_none()
                    && d.app.is_empty()
                    && d.port.is_empty()
                    && d.hold_mib == dump_default.hold_mib),
            "the --dump-* options need --dump-dir",
        )?;
        let ap = &c.alarm_pcap;
        let ap_default = super::config::AlarmPcapSection::default();
        need(
            ap.dir.is_some()
                || (ap.window == ap_default.window && ap.ring_mib == ap_default.ring_mib),
            "--alarm-pcap-window and --alarm-pcap-ring-mib need --alarm-pcap-dir",
        )?;
        need(
            c.tracks_calls() || c.rtp_dir.is_none(),
            "--rtp-dir keeps the RTP of tracked calls: give --voip-db, --calls-out or --streams-out",
        )?;
        need(
            c.rtp_dir.is_some() || c.rtp_keep_days.is_none(),
            "--rtp-keep-days needs --rtp-dir",
        )?;
        let flow = FlowConfig {
            bidirectional: !c.unidirectional,
            idle_timeout: secs(c.idle_timeout, "idle-timeout")?,
            active_timeout: secs(c.active_timeout, "active-timeout")?,
            tcp_close_timeout: secs(c.tcp_close_timeout, "tcp-close-timeout")?,
            early_packets: c.early_packets,
            max_flows: c.max_flows,
            full_stats: match c.stats.as_str() {
                "full" => true,
                "basic" => false,
                s => return Err(usage(format!("--stats {s:?}: full or basic"))),
            },
            analyzers: c.analyzers(),
            media: match &c.media_config {
                Some(p) => {
                    let text = std::fs::read_to_string(p).map_err(|source| Error::Io {
                        path: p.clone(),
                        source,
                    })?;
                    crate::analyze::media::MediaConfig::from_toml(&text, &p.display().to_string())
                        .map_err(|e| Error::Config(e.to_string()))?
                }
                None => Default::default(),
            },
            sample: match &c.sample {
                Some(spec) => Some(
                    crate::sample::Sampling::parse(spec, c.sample_seed.unwrap_or(1))
                        .map_err(usage)?,
                ),
                None => None,
            },
            hash: match c.hash.as_str() {
                "fold" => FlowHash::Fold,
                "toeplitz" => FlowHash::Toeplitz,
                h => return Err(usage(format!("--hash {h:?}: fold or toeplitz"))),
            },
            ..FlowConfig::default()
        };
        let mut options = RunOptions {
            flow,
            shards: c.shards,
            pin: c.pin,
            export_policy: match (c.drop_after, &c.interface) {
                (Some(n), _) => ExportPolicy::Drop { max_pending: n },
                (None, Some(_)) => ExportPolicy::Drop {
                    max_pending: LIVE_PENDING,
                },
                (None, None) => ExportPolicy::Block,
            },
            write: c.write.clone(),
            mark: c.mark.clone(),
            timestamps: Timestamps::parse(&c.timestamps).map_err(usage)?,
            dump: self.dump_config()?,
            ..RunOptions::default()
        };
        if let Some(w) = &c.write {
            crate::outpath::require_extension(w, "pcap").map_err(usage)?;
        }
        options.flow.validate()?;
        // Self-training learns from the payload labels: their analyzers run.
        #[cfg(feature = "tools")]
        let mut learn = self.learn_options(&mut options)?;
        #[cfg(not(feature = "tools"))]
        need(c.learn.dir.is_none(), "--learn needs the `tools` feature")?;
        // Output names: a name that does not say what is written is a
        // usage error, before any work.
        let forced = match c.format.as_deref() {
            Some(f) => Some(Format::parse(f).ok_or_else(|| {
                let known = match cfg!(feature = "parquet") {
                    true => "csv, jsonl, ipfix, parquet, null",
                    false => "csv, jsonl, ipfix, null",
                };
                usage(format!("unknown format {f:?} ({known})"))
            })?),
            None => None,
        };
        #[allow(unused_mut)]
        let (mut model, by_port) = self.model_ref()?;
        let filter = match &c.filter {
            Some(e) => Some(Arc::new(crate::source::capfilter::CaptureFilter::new(e)?)),
            None => None,
        };
        let input = match &c.interface {
            Some(iface) => {
                need(c.ring_mib > 0, "--ring-mib must be at least 1")?;
                let duration = match c.duration {
                    Some(d) => Some(Duration::from_nanos(secs(d, "duration")?)),
                    None => None,
                };
                let fanout = Fanout::parse(&c.fanout)
                    .ok_or_else(|| usage(format!("--fanout {:?}: hosts or flows", c.fanout)))?;
                let live = LiveConfig {
                    blocks: c.ring_mib,
                    // SIP messages and RTP payloads are read whole.
                    snaplen: if c.tracks_calls() { 65_535 } else { c.snaplen },
                    promiscuous: !c.no_promisc,
                    fanout,
                    hw_timestamps: c.hw_timestamps,
                    filter: filter.clone(),
                    capture: crate::source::af_packet::Capture::parse(&c.capture).ok_or_else(
                        || usage(format!("--capture {:?}: af-packet or af-xdp", c.capture)),
                    )?,
                    xdp_take_traffic: c.xdp_take_traffic,
                    ..LiveConfig::new(iface)
                };
                Input::Live(live, duration)
            }
            None => {
                let order = InputOrder::parse(&c.input_order).ok_or_else(|| {
                    usage(format!("--input-order {:?}: time or given", c.input_order))
                })?;
                let mut inputs = Inputs::plan(&c.inputs, order)?;
                inputs.filter = filter.clone();
                Input::Files(inputs)
            }
        };
        if paths {
            refuse_outputs_that_are_inputs(c, &input, forced)?;
        }
        let stdout = [PathBuf::from("-")];
        let flow_outputs: &[PathBuf] = match c.output.is_empty() {
            true => &stdout,
            false => &c.output,
        };
        let mut outputs = Vec::new();
        for out in flow_outputs {
            outputs.push((out.clone(), Format::for_output(out, forced).map_err(usage)?));
        }
        need(
            c.events.is_none() || model.model.is_some(),
            "--events needs a model",
        )?;
        let mut rows = Vec::new();
        for (kind, path) in [
            (&crate::flow::events::VERDICTS, &c.events),
            (&crate::telemetry::series::STATS, &c.stats_out),
            (&crate::telemetry::series::APP_STATS, &c.app_stats_out),
            (&crate::telemetry::alarms::ALARMS, &c.alarms_out),
        ] {
            if let Some(p) = path {
                rows.push((kind, p.clone(), Format::for_output(p, None).map_err(usage)?));
            }
        }
        let mut analyzed = crate::analyze::fields_of(&options.flow.analyzers);
        if options.flow.sample.is_some() {
            analyzed.extend_from_slice(crate::sample::FIELDS);
        }
        // Every record is labelled: its label's fields end the row.
        #[allow(unused_mut)]
        let mut labels = self.labeller(&model.classes, by_port, &analyzed)?;
        // Learnt models are swapped in: the run's classes are those of its
        // model and of every model it may learn.
        #[cfg(feature = "tools")]
        if let Some((lo, _)) = learn.as_mut() {
            model.classes = Self::learn_classes(&model.classes, lo.level, &labels);
            labels = self.labeller(&model.classes, by_port, &analyzed)?;
            let every_turns = match (&input, self.learn.swap_packets) {
                (Input::Live(..), _) => Some(0),
                (Input::Files(_), 0) => None,
                (Input::Files(_), n) => Some(n.div_ceil(options.batch.max(1) as u64).max(1)),
            };
            if let Some(every_turns) = every_turns {
                let sw = Arc::new(crate::classify::swap::Swap::new(
                    model.classes.clone(),
                    options.shards,
                    every_turns,
                ));
                lo.swap = Some(sw.clone());
                options.swap = Some(sw);
            }
        }
        analyzed.extend_from_slice(crate::classify::labeller::FIELDS);
        let export = ExportOptions {
            early_packets: options.flow.early_packets,
            class_names: labels.names(),
            analyzed: analyzed.into(),
            community_id_seed: c.community_id_seed,
            no_community_id: c.no_community_id,
        };
        options.labels = Some(labels);
        let ipfix = self.ipfix_options()?;
        options.alarms = self.alarm_specs()?;
        if let Some(dir) = &ap.dir {
            need(
                !options.alarms.is_empty(),
                "--alarm-pcap-dir needs an alarm (--alarm or --alarms)",
            )?;
            need(
                ap.window > 0 && ap.ring_mib > 0,
                "--alarm-pcap-window and --alarm-pcap-ring-mib must be at least 1",
            )?;
            options.forensics = Some(ForensicConfig {
                dir: dir.clone(),
                window: ap.window.saturating_mul(SECOND),
                // The shards run ahead of the merged seconds the alarms see.
                margin: 60 * SECOND,
                max_bytes: ap.ring_mib.saturating_mul(1 << 20),
            });
        }
        #[cfg(feature = "metrics")]
        let metrics = match &c.metrics_listen {
            Some(a) => Some(crate::telemetry::metrics::listen_address(a).map_err(usage)?),
            None => None,
        };
        #[cfg(not(feature = "metrics"))]
        let metrics = match &c.metrics_listen {
            Some(_) => return Err(usage("--metrics-listen needs the `metrics` feature")),
            None => None,
        };
        let plan = Plan {
            config: c.clone(),
            options,
            model,
            export,
            ipfix,
            input,
            outputs,
            rows,
            metrics,
            tracker: c.tracks_calls().then(|| self.tracker_config()),
            filter,
            #[cfg(feature = "tools")]
            learn,
        };
        Ok(plan)
    }

    /// Plans and opens the run: [`Config::plan`] then [`Plan::open`].
    pub fn build(&self) -> Result<Probe> {
        self.plan()?.open()
    }

    /// The model the run labels flows with, its threshold replaced, and
    /// whether it is the port table (its verdicts are labelled `port`).
    fn model_ref(&self) -> Result<(ModelRef, bool)> {
        if self.no_model {
            return Ok((ModelRef::default(), false));
        }
        let mut model = Model::named(self.model.as_deref())?;
        if let Some(t) = self.threshold {
            // Errors of the model's use, not of the options' form: exit 1.
            if !(0.0..=1.0).contains(&t) {
                return Err(Error::Config(format!("--threshold {t} is outside [0, 1]")));
            }
            if model.cascade().is_some() {
                return Err(Error::Config(
                    "--threshold does not apply to a cascade model: each of its stages has its \
                     own threshold (train it again with another --target-precision)"
                        .into(),
                ));
            }
            model.info.threshold = t;
        }
        let classes: Arc<[String]> = model.info.classes.clone().into();
        let by_port = model.kind.algo() == "ports";
        Ok((
            ModelRef {
                model: Some(Arc::new(model)),
                classes,
            },
            by_port,
        ))
    }

    /// Self-training's options (`[learn]`), with the run's own model as
    /// the first to beat; turns the payload labellers on in `options`.
    #[cfg(feature = "tools")]
    fn learn_options(
        &self,
        options: &mut RunOptions,
    ) -> Result<Option<(crate::learn::online::LearnOptions, Option<Arc<Model>>)>> {
        let l = &self.learn;
        let Some(dir) = &l.dir else {
            return Ok(None);
        };
        need(l.reservoir >= 1, "--learn-reservoir must be at least 1")?;
        need(
            (0.0..1.0).contains(&l.holdout),
            "--learn-holdout must be in [0, 1)",
        )?;
        need(
            l.every_seconds >= 0.0 && l.every_seconds.is_finite(),
            "--learn-every-seconds must be a number of seconds ≥ 0",
        )?;
        need(l.cpu > 0.0 && l.cpu <= 1.0, "--learn-cpu must be in (0, 1]")?;
        let level = l.level.parse().map_err(usage)?;
        let algo: crate::learn::Algo = l.algo.parse().map_err(usage)?;
        need(
            !matches!(algo, crate::learn::Algo::Svm | crate::learn::Algo::Ports),
            "--learn-algo: c45, forest, nb or gnb",
        )?;
        for a in crate::learn::self_label::ANALYZERS {
            if !options.flow.analyzers.iter().any(|x| x == a) {
                options.flow.analyzers.push(a.to_string());
            }
        }
        let start = match self.no_model {
            true => None,
            false => Some(Arc::new(Model::named(self.model.as_deref())?)),
        };
        // A costly model (SVM) runs on the classifier pool, whose workers
        // keep the model they started with: a learnt model would never
        // decide a flow, so say so instead of learning for nothing.
        if let Some(m) = (start.as_ref()).filter(|m| crate::classify::Classifier::costly(&***m)) {
            return Err(Error::Usage(format!(
                "--learn: the model {} is an {} model, which runs on the classifier pool, and \
                 the pool's model is never swapped for a learnt one; start from a c45, forest, \
                 nb, gnb or cascade model (or --no-model)",
                self.model
                    .as_deref()
                    .map_or("(default)".into(), |p| p.display().to_string()),
                m.kind.algo()
            )));
        }
        let train = crate::learn::TrainOptions {
            algo,
            packets: self.early_packets,
            ..crate::learn::TrainOptions::default()
        };
        let opts = crate::learn::online::LearnOptions {
            dir: dir.clone(),
            reservoir: l.reservoir,
            every_labels: l.every_labels,
            every_ns: (l.every_seconds * SECOND as f64).round() as u64,
            level,
            train,
            holdout: l.holdout,
            cpu: l.cpu,
            swap: None,
        };
        Ok(Some((opts, start)))
    }

    /// The class names of a `--learn` run: the model's, then the classes
    /// of `level` its learnt models may have (`app`: every name a label
    /// can take, `labels`), so records index one list whichever model
    /// decided them (`classify/swap.rs`).
    #[cfg(feature = "tools")]
    fn learn_classes(
        classes: &[String],
        level: crate::classify::LabelLevel,
        labels: &crate::classify::labeller::Labeller,
    ) -> Arc<[String]> {
        use crate::classify::LabelLevel;
        let extra: Vec<String> = match level {
            LabelLevel::App => labels.names().to_vec(),
            LabelLevel::Category => crate::classify::services::CATEGORIES
                .iter()
                .map(|c| c.to_string())
                .collect(),
            LabelLevel::Proto => crate::learn::online::PROTOCOLS
                .iter()
                .map(|c| c.to_string())
                .collect(),
        };
        let mut all = classes.to_vec();
        for c in extra {
            if !all.contains(&c) {
                all.push(c);
            }
        }
        all.into()
    }

    /// The packet dumper's options (`[dump]`).
    fn dump_config(&self) -> Result<Option<DumpConfig>> {
        let d = &self.dump;
        let Some(dir) = &d.dir else {
            return Ok(None);
        };
        let max_bytes = match d.max_mib {
            Some(m) if m > 0.0 && m.is_finite() => Some((m * 1_048_576.0) as u64),
            Some(_) => {
                return Err(Error::Usage(
                    "--dump-max-mib must be a positive number".into(),
                ))
            }
            None => None,
        };
        let period = match d.seconds {
            Some(s) => Some(secs(s, "dump-seconds")?),
            None => None,
        };
        need(
            d.hold_mib >= 0.0 && d.hold_mib.is_finite(),
            "--dump-hold-mib must be a number ≥ 0",
        )?;
        Ok(Some(DumpConfig {
            dir: dir.clone(),
            format: match &d.format {
                Some(f) => DumpFormat::parse(f).map_err(usage)?,
                None => DumpFormat::default(),
            },
            direct: d.direct,
            max_bytes,
            period,
            ports: d.port.clone(),
            apps: d.app.clone(),
            hold_bytes: (d.hold_mib * 1_048_576.0) as u64,
        }))
    }

    /// The IPFIX outputs' options (`[ipfix]`).
    fn ipfix_options(&self) -> Result<IpfixOptions> {
        let i = &self.ipfix;
        let secs = |s: f64, what: &str| {
            need(
                s.is_finite() && s >= 0.0,
                &format!("--{what} must be a number of seconds"),
            )
            .map(|()| Duration::from_secs_f64(s))
        };
        Ok(IpfixOptions {
            biflow: !self.unidirectional,
            mtu: i.mtu,
            domain: i.domain,
            template_refresh: secs(i.template_refresh, "ipfix-template-refresh")?,
            template_refresh_messages: i.template_messages.max(1),
            tcp_queue: i.queue.max(1),
            tcp_linger: secs(i.linger, "ipfix-linger")?,
        })
    }

    /// The alarms: `alarm` and the tables of the `alarms` file, checked.
    fn alarm_specs(&self) -> Result<Vec<AlarmSpec>> {
        let mut specs = self.alarm.clone();
        if let Some(path) = &self.alarms {
            let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })?;
            let more = AlarmSpec::parse_file(&text).map_err(|e| Error::file(path, None, e))?;
            specs.extend(more);
        }
        if let Some(e) = specs.iter().find_map(|s| s.check().err()) {
            return Err(usage(e));
        }
        Ok(specs)
    }

    /// The call tracker's options.
    pub fn tracker_config(&self) -> TrackerConfig {
        TrackerConfig {
            call_timeout_ns: (self.call_timeout.max(0.0) * 1e9) as u64,
            max_calls: self.max_calls,
            max_streams: self.max_streams,
            audio: self
                .rtp_dir
                .clone()
                .map(|d| (d, self.rtp_max_mib.saturating_mul(1 << 20))),
            ..TrackerConfig::default()
        }
    }

    /// With `rtp-dir` and `rtp-keep-days`: removes the calls kept longer;
    /// how many.
    pub fn prune_rtp(&self) -> usize {
        match (&self.rtp_dir, self.rtp_keep_days) {
            (Some(dir), Some(days)) => {
                let age = Duration::from_secs_f64(days.max(0.0) * 86_400.0);
                crate::voip::audio::Archive::prune(dir, age)
            }
            _ => 0,
        }
    }
}

impl Plan {
    /// The byte size of the planned capture files, when known (for a
    /// progress bar); `None` live or with a stream among them.
    pub fn total_bytes(&self) -> Option<u64> {
        match &self.input {
            Input::Files(i) => i.total_bytes(),
            Input::Live(..) => None,
        }
    }

    /// The live capture's configuration, if the run is live.
    pub fn live(&self) -> Option<&LiveConfig> {
        match &self.input {
            Input::Live(l, _) => Some(l),
            Input::Files(_) => None,
        }
    }

    /// Opens the outputs, the call outputs, the live sockets and the
    /// metrics endpoint.
    pub fn open(self) -> Result<Probe> {
        self.open_with(Vec::new())
    }

    /// As [`Plan::open`], with `extra` exporters besides the configured
    /// outputs (a program's own, as Python's Arrow batches); with `extra`
    /// and no configured `output`, the records go only to `extra`.
    pub fn open_with(mut self, extra: Vec<Box<dyn Exporter>>) -> Result<Probe> {
        if !extra.is_empty() && self.config.output.is_empty() {
            self.outputs.clear();
        }
        let calls = match &self.tracker {
            Some(_) => {
                let c = &self.config;
                let outs = CallOutputs::open(
                    c.voip_db.as_deref(),
                    c.calls_out.as_deref(),
                    c.streams_out.as_deref(),
                )?
                .community_id_seed((!c.no_community_id).then_some(c.community_id_seed))
                .db_hold(c.voip_db_hold);
                Some(Arc::new(Mutex::new(outs)))
            }
            None => None,
        };
        if let (Some(outs), Some(tracker)) = (&calls, &self.tracker) {
            let outs = outs.clone();
            self.options.calls = Some(CallStage::new(
                tracker.clone(),
                Box::new(move |calls, alone| {
                    outs.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .write(calls, alone)
                }),
            ));
        }
        let mut exporters = extra;
        let mut clickhouse = Vec::new();
        let first_own = exporters.len();
        let row_group = (self.config.parquet_row_group, self.config.parquet_part_rows);
        for (out, fmt) in &self.outputs {
            exporters.push(match *fmt {
                Format::Ipfix => ipfix::open(out, &self.export, &self.ipfix)?,
                Format::ClickHouse => {
                    let (ex, counts) = crate::export::clickhouse::open_counted(
                        out,
                        &self.export,
                        self.config.clickhouse_hold,
                    )?;
                    clickhouse.push(counts);
                    ex
                }
                Format::Netflow => crate::export::netflow::open(
                    out,
                    &self.export,
                    &crate::export::netflow::NetflowOptions {
                        ipfix: self.ipfix.clone(),
                        sampling: self.options.flow.sample,
                    },
                )?,
                f => open_output(None, f, out, &self.export, row_group)?,
            });
        }
        for (kind, path, fmt) in &self.rows {
            exporters.push(match *fmt {
                Format::Ipfix if kind.is(&crate::flow::events::VERDICTS) => {
                    ipfix::open_events(path, &self.ipfix)?
                }
                f => open_output(Some(kind), f, path, &self.export, row_group)?,
            });
        }
        // Each output fails alone and counts what it missed.
        let own: Vec<_> = exporters.drain(first_own..).collect();
        exporters.extend(own.into_iter().map(crate::export::counted::counted));

        #[cfg(feature = "tools")]
        let learning = match self.learn.take() {
            Some((opts, start)) => {
                let (learner, status) = crate::learn::online::Learner::start(
                    opts,
                    &self.export.analyzed,
                    self.export.class_names.clone(),
                    start,
                )?;
                exporters.push(Box::new(learner));
                Some(status)
            }
            None => None,
        };
        let live = match &self.input {
            Input::Live(cfg, _) => Some(crate::pipeline::open_live(cfg, self.options.shards)?),
            Input::Files(_) => None,
        };
        #[cfg(feature = "metrics")]
        let server = match self.metrics {
            Some(addr) => {
                let metrics = Arc::new(Metrics::new());
                if let Some(f) = &self.filter {
                    let f = f.clone();
                    metrics.watch_filtered(Box::new(move || f.filtered()));
                }
                #[cfg(any(feature = "sqlite", feature = "postgres"))]
                if let Some(g) = (calls.as_ref())
                    .and_then(|o| o.lock().unwrap_or_else(|p| p.into_inner()).db_gauges())
                {
                    metrics.watch_call_db(Box::new(move || {
                        use std::sync::atomic::Ordering::Relaxed;
                        (g.held.load(Relaxed), g.not_written.load(Relaxed))
                    }));
                }
                if let Some(d) = self.options.labels.as_ref().and_then(|l| l.drift()) {
                    let swap = self.options.swap.clone();
                    metrics.register(Box::new(crate::classify::drift::AgreementMetrics::new(
                        d, swap,
                    )))?;
                }
                if !clickhouse.is_empty() {
                    let holds = clickhouse.clone();
                    metrics.watch_clickhouse(Box::new(move || {
                        holds.iter().fold((0, 0), |(h, d), c| {
                            (h + c.held(), d + c.dropped_beyond_hold())
                        })
                    }));
                }
                self.options.metrics = Some(metrics.clone());
                Some(MetricsServer::start(addr, metrics)?)
            }
            None => None,
        };
        Ok(Probe {
            plan: self,
            exporters,
            live,
            calls,
            clickhouse,
            #[cfg(feature = "metrics")]
            server,
            #[cfg(feature = "tools")]
            learning,
        })
    }
}

/// A record output of flows (`kind` `None`) or of `kind` at `path`, with
/// Parquet's row group size and part size when given.
fn open_output(
    kind: Option<&'static Kind>,
    fmt: Format,
    path: &Path,
    export: &ExportOptions,
    (row_group, part_rows): (Option<u64>, Option<u64>),
) -> Result<Box<dyn Exporter>> {
    #[cfg(feature = "parquet")]
    if fmt.name() == "parquet" && (row_group.is_some() || part_rows.is_some()) {
        use crate::export::parquet::{ParquetExporter as P, ParquetOptions};
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let popts = ParquetOptions {
            row_group_rows: row_group.map_or(crate::export::parquet::DEFAULT_ROW_GROUP_ROWS, size),
            part_rows: part_rows.map(size),
            ..ParquetOptions::default()
        };
        let stdout = || Box::new(std::io::stdout()) as Box<dyn std::io::Write + Send>;
        let name = "parquet:stdout";
        let ex = match (kind, path.as_os_str() == "-") {
            (None, false) => P::create_flows(path, export, &popts),
            (None, true) => P::flows_to_writer(stdout(), name, export, &popts),
            (Some(k), false) => P::create_rows(k, path, &popts),
            (Some(k), true) => P::rows_to_writer(k, stdout(), name, &popts),
        }?;
        return Ok(Box::new(ex));
    }
    #[cfg(not(feature = "parquet"))]
    let _ = (row_group, part_rows);
    match kind {
        None => crate::export::open(fmt, path, export),
        Some(k) => crate::export::open_rows(k, fmt, path),
    }
}

impl Probe {
    /// The metrics endpoint's address, when one serves.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        #[cfg(feature = "metrics")]
        return self.server.as_ref().map(|s| s.addr());
        #[cfg(not(feature = "metrics"))]
        None
    }

    /// What self-training (`--learn`) has learnt so far; `None` without it.
    /// The models written are in it once [`Probe::run`] returns.
    #[cfg(feature = "tools")]
    pub fn learning(&self) -> Option<Arc<Mutex<crate::learn::online::Status>>> {
        self.learning.clone()
    }

    /// Runs to the end of the input, the end of the live duration or
    /// `ctl.stop`; every flow and call is flushed. The call outputs'
    /// errors are in [`Report::output_errors`].
    pub fn run(self, ctl: &RunControl) -> Result<Report> {
        let Probe {
            plan,
            exporters,
            live,
            calls,
            clickhouse,
            #[cfg(feature = "metrics")]
            server,
            #[cfg(feature = "tools")]
                learning: _,
        } = self;
        let result = match (plan.input, live) {
            (Input::Live(_, duration), Some(socks)) => crate::pipeline::run_live(
                socks,
                duration,
                &plan.options,
                &plan.model,
                exporters,
                ctl,
            ),
            (Input::Files(inputs), _) => {
                crate::pipeline::run_inputs(inputs, &plan.options, &plan.model, exporters, ctl)
            }
            (Input::Live(..), None) => Err(Error::Config("a live run without its sockets".into())),
        };
        #[cfg(feature = "metrics")]
        drop(server);
        let mut call_errors = Vec::new();
        #[allow(unused_mut)]
        let mut db = None;
        if let Some(o) = calls {
            let mut o = o.lock().unwrap_or_else(|p| p.into_inner());
            call_errors = o.finish();
            #[cfg(any(feature = "sqlite", feature = "postgres"))]
            {
                db = o.db_report().cloned();
            }
        }
        let mut report = result?;
        report.output_errors.extend(call_errors);
        report
            .output_notes
            .extend(clickhouse.iter().map(|c| c.line()));
        if plan.options.flow.analyzers.iter().any(|a| a == "tls") {
            report.handshakes_cut_by_snap = plan.options.labels.as_ref().map(|l| l.cut_by_snap());
            report.handshakes_cut_by_memory =
                plan.options.labels.as_ref().map(|l| l.cut_by_memory());
        }
        if let Some(d) = plan.options.labels.as_ref().and_then(|l| l.drift()) {
            let classes = d.classes().into_iter();
            let classes = classes.map(|c| (c.class, c.labelled, c.agreeing));
            report.agreement = Some((d.level().name().to_string(), classes.collect()));
        }
        if let Some(s) = report.calls.as_mut() {
            s.db = db;
        }
        if let Some(f) = &plan.filter {
            report.filter = Some(f.expression().to_string());
            report.counters.filtered += f.filtered();
        }
        Ok(report)
    }
}

/// Refuses outputs that are inputs, directories, in missing
/// directories or named twice (`outpath::check`).
/// Refuses outputs that are inputs, directories, in missing directories
/// or named twice (`outpath::check`), before any output is created.
fn refuse_outputs_that_are_inputs(c: &Config, input: &Input, forced: Option<Format>) -> Result<()> {
    // Standard output given to -f null is written nothing.
    let discarded = |p: &&PathBuf| forced == Some(Format::Null) && p.as_os_str() == "-";
    let stdout = [PathBuf::from("-")];
    let flows = if c.output.is_empty() {
        &stdout[..]
    } else {
        &c.output
    };
    let outputs: Vec<&Path> = (flows.iter())
        .filter(|p| !discarded(p))
        .map(PathBuf::as_path)
        .chain(c.write.as_deref())
        .chain(c.events.as_deref())
        .chain(c.stats_out.as_deref())
        .chain(c.app_stats_out.as_deref())
        .chain(c.alarms_out.as_deref())
        .chain(c.calls_out.as_deref())
        .chain(c.streams_out.as_deref())
        .chain(
            (c.voip_db.as_deref())
                .filter(|d| !d.starts_with("postgres"))
                .map(Path::new),
        )
        .filter(|o| {
            !ipfix::is_network(o)
                && !crate::export::netflow::is_network(o)
                && !crate::export::clickhouse::is_network(o)
        })
        .collect();
    let planned: Vec<&Path> = match input {
        Input::Files(i) => i.paths().collect(),
        Input::Live(..) => Vec::new(),
    };
    let read: Vec<&Path> = (c.inputs.iter().map(PathBuf::as_path))
        .chain(planned)
        .chain(
            c.model
                .as_deref()
                .filter(|m| m.as_os_str() != DEFAULT_MODEL_NAME),
        )
        .chain(c.mark.as_deref())
        .chain(c.alarms.as_deref())
        .collect();
    crate::outpath::check(&outputs, &read)
}
