//! Capture files + ground-truth CSVs → data sets, trained models and
//! evaluation reports: the glue behind `earlybird train` and
//! `earlybird evaluate`, so each is one call.
//!
//! Contract:
//! - [`capture_files`] expands directories (recursively, sorted) into files;
//!   a path that does not exist is [`Error::Io`] naming it.
//! - [`load_labels`] reads and merges several ground-truth CSVs
//!   ([`LabelSet::load_with`]); errors name the file.
//! - [`dataset_from_captures`] runs [`pipeline::collect`] once per file (the
//!   file name is the sample's group) and labels flows by file name and
//!   5-tuple. A file that cannot be opened is an error naming it; a file
//!   that is not a usable capture (not pcap/pcapng, unsupported link type)
//!   is listed in [`CaptureStats::skipped`] and the others are still read.
//! - [`prepare`] applies [`DataOptions`] (cap per capture, minimum class
//!   support, split by capture FILE with a seed) to that data set;
//!   [`train_captures`], [`evaluate_captures`] and [`compare_captures`] build
//!   on it. The same files, labels and options always give the same split,
//!   so a model trained with `test_fraction = f, seed = s` can be evaluated
//!   on exactly its held-out files. Under packet sampling
//!   (`run.flow.sample`) the split is the one the same options give
//!   without sampling (the captures are read once more unsampled to take
//!   it), so a model trained without sampling is scored under sampling on
//!   its own held-out files.
//! - Provenance: [`train_captures`] records in the model the training
//!   side's capture files and the label files by content
//!   ([`FileDigest`]), and its scores on the held-out files. With a target
//!   precision it first chooses the threshold on validation captures cut
//!   from the training side (a quarter of its flows, by file), so the
//!   held-out scores are measured at a threshold they did not choose.
//!   [`train_cascade_captures`] trains one model per early packet
//!   k = K1..=N (a cascade, `classify/cascade.rs`), each k's threshold
//!   chosen in the same way on the same validation captures.
//!   [`evaluate_captures`] refuses to score a model on captures whose
//!   contents it was trained on, unless [`DataOptions::allow_overlap`];
//!   then the overlap is listed in [`DataSummary::overlap`].
//!
//! Runs offline and allocates freely (every flow's early packets are kept
//! in memory); never panics on input.

use std::path::{Path, PathBuf};

use super::dataset::{LabelOptions, LabelSet};
use super::evaluate::{evaluate, threshold_for_precision, Report, MAX_K};
use super::train::{train, TrainOptions};
use crate::classify::cascade::Cascade;
use crate::classify::dataset::{Dataset, LabelLevel};
use crate::classify::model::{Model, ModelInfo, ModelKind};
use crate::classify::provenance::{overlap, FileDigest, HeldOut};
use crate::error::{Error, Result};
use crate::pipeline::{self, ModelRef, RunOptions};
use crate::source::CaptureFile;

/// What reading the captures gave.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CaptureStats {
    /// Captures read.
    pub files: usize,
    /// Captures with at least one labelled flow.
    pub files_labelled: usize,
    /// Flows found.
    pub flows: usize,
    /// Flows with a ground-truth label.
    pub labelled: usize,
    /// Flows the ground truth does not name (or names `Unknown`).
    pub unlabelled: usize,
    /// `"file: reason"` of inputs that are not usable captures.
    pub skipped: Vec<String>,
    /// Self-labels: the labelled flows the per-class reservoir kept, those
    /// it did not keep, and the bytes the kept ones held.
    pub reservoir: Option<super::self_label::ReservoirStats>,
}

impl std::fmt::Display for CaptureStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} captures ({} with labelled flows, {} skipped), {} flows: {} labelled, {} without a label",
            self.files,
            self.files_labelled,
            self.skipped.len(),
            self.flows,
            self.labelled,
            self.unlabelled
        )?;
        if let Some(r) = &self.reservoir {
            write!(
                f,
                " (self-labels: {} kept in the reservoir, {} not kept, {} KiB)",
                r.kept,
                r.dropped,
                r.bytes.div_ceil(1024)
            )?;
        }
        Ok(())
    }
}

/// How the labelled flows become training and test sets.
#[derive(Debug, Clone)]
pub struct DataOptions {
    /// Flow formation; `flow.early_packets` is raised to at least N and to
    /// 10 (the evaluation's k curve).
    pub run: RunOptions,
    /// Keep at most this many flows per (capture, class), chosen with
    /// `seed` ([`Dataset::cap_per_group`]).
    pub max_per_capture: Option<usize>,
    /// Drop classes with fewer flows than this (after the cap).
    pub min_support: usize,
    /// Fraction of the flows whose capture FILES are held out for testing
    /// (0 = no split: train or evaluate on everything).
    pub test_fraction: f64,
    /// Seed of the cap and the split.
    pub seed: u64,
    /// Evaluation only: score a model on captures it was trained on
    /// (listed in [`DataSummary::overlap`]) instead of refusing.
    pub allow_overlap: bool,
    /// Label the flows with their own payload labels instead of the
    /// ground truth (`learn/self_label.rs`); the label set is then unused.
    pub self_labels: Option<super::self_label::SelfLabels>,
}

impl Default for DataOptions {
    fn default() -> Self {
        DataOptions {
            run: RunOptions::default(),
            max_per_capture: None,
            min_support: 1,
            test_fraction: 0.0,
            seed: 1,
            allow_overlap: false,
            self_labels: None,
        }
    }
}

/// The sets a run works on.
#[derive(Debug, Clone, Default)]
pub struct Prepared {
    /// Training side (everything when there is no split).
    pub train: Dataset,
    /// Held-out side (empty when there is no split).
    pub test: Dataset,
    /// What reading the captures gave.
    pub captures: CaptureStats,
}

/// Sizes of the sets, for reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DataSummary {
    /// What reading the captures gave.
    pub captures: CaptureStats,
    /// Classes kept (after the cap and minimum support).
    pub classes: usize,
    /// Flows and capture files on the training side.
    pub train_flows: usize,
    /// Capture files on the training side.
    pub train_files: usize,
    /// Flows on the evaluated side.
    pub test_flows: usize,
    /// Capture files on the evaluated side.
    pub test_files: usize,
    /// Share of the evaluated flows in their most frequent class: the
    /// accuracy of always answering that class.
    pub majority_rate: f64,
    /// Evaluated captures the model was trained on, as (name, name in the
    /// model file) (only with [`DataOptions::allow_overlap`]).
    pub overlap: Vec<(String, String)>,
    /// The threshold chosen for a target precision: (target, threshold,
    /// validation flows, validation captures).
    pub chosen_threshold: Option<(f64, f32, usize, usize)>,
}

impl std::fmt::Display for DataSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{}", self.captures)?;
        write!(
            f,
            "{} classes; training {} flows from {} captures; evaluation {} flows from {} captures (majority class {:.1} %)",
            self.classes,
            self.train_flows,
            self.train_files,
            self.test_flows,
            self.test_files,
            100.0 * self.majority_rate
        )?;
        if let Some((target, t, flows, files)) = self.chosen_threshold {
            write!(
                f,
                "\nthreshold {t} chosen for precision {:.1} % on {flows} validation flows of {files} training captures",
                100.0 * target
            )?;
        }
        if !self.overlap.is_empty() {
            write!(
                f,
                "\nWARNING: {} of the {} evaluated captures were used to train this model; these scores are not a measure of accuracy on new traffic",
                self.overlap.len(),
                self.test_files
            )?;
        }
        Ok(())
    }
}

/// Files of a capture directory tree (names starting with `.` and ground
/// truth or text files are left out).
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let mut entries = Vec::new();
    for e in rd {
        entries.push(e.map_err(|e| Error::io(dir, e))?.path());
    }
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') {
            continue;
        }
        if p.is_dir() {
            walk(&p, out)?;
        } else if ![".csv", ".md", ".txt", ".out", ".json", ".py", ".sh"]
            .iter()
            .any(|s| name.ends_with(s))
        {
            out.push(p);
        }
    }
    Ok(())
}

/// Expands directories into the capture files under them.
pub fn capture_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in inputs {
        let meta = std::fs::metadata(p).map_err(|e| Error::io(p, e))?;
        if meta.is_dir() {
            walk(p, &mut out)?;
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// Reads and merges ground-truth CSVs (a 5-tuple labelled by an earlier file
/// keeps that label).
pub fn load_labels(paths: &[PathBuf], level: LabelLevel, opt: &LabelOptions) -> Result<LabelSet> {
    if paths.is_empty() {
        return Err(Error::Config("no label file given".into()));
    }
    let mut set = LabelSet::default();
    for p in paths {
        set.merge(LabelSet::load_with(p, level, opt)?);
    }
    Ok(set)
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// Runs every capture through the flow meter and keeps the labelled flows
/// (see the module docs).
pub fn dataset_from_captures(
    files: &[PathBuf],
    labels: &LabelSet,
    opts: &RunOptions,
) -> Result<(Dataset, CaptureStats)> {
    let mut data = Dataset::default();
    let mut stats = CaptureStats::default();
    for path in files {
        let cap = match CaptureFile::open(path) {
            Ok(c) => c,
            Err(e @ Error::Io { .. }) => return Err(e),
            Err(e) => {
                stats.skipped.push(e.to_string());
                continue;
            }
        };
        let (flows, _) = pipeline::collect(std::slice::from_ref(&cap), opts, &ModelRef::default())
            .map_err(|e| Error::file(path, None, e))?;
        let group = file_name(path);
        let before = stats.labelled;
        for f in &flows {
            let k = &f.record.key;
            match labels.lookup(&group, k.proto, &k.src, k.sport, &k.dst, k.dport) {
                Some(label) => {
                    data.add(&group, &f.record, &f.early, label);
                    stats.labelled += 1;
                }
                None => stats.unlabelled += 1,
            }
        }
        stats.files += 1;
        stats.flows += flows.len();
        if stats.labelled > before {
            stats.files_labelled += 1;
        }
    }
    Ok((data, stats))
}

/// Reads the captures and builds the training and test sets.
pub fn prepare(
    files: &[PathBuf],
    labels: &LabelSet,
    opt: &DataOptions,
    packets: usize,
) -> Result<Prepared> {
    if !(0.0..1.0).contains(&opt.test_fraction) {
        return Err(Error::Config(format!(
            "test fraction {} outside [0, 1)",
            opt.test_fraction
        )));
    }
    let mut run = opt.run.clone();
    run.flow.early_packets = run.flow.early_packets.max(packets).max(MAX_K);
    let (data, captures) = match &opt.self_labels {
        Some(sl) => {
            let (d, mut c, r) =
                super::self_label::dataset_from_captures(files, sl, &run, opt.seed)?;
            c.reservoir = Some(r);
            (d, c)
        }
        None => dataset_from_captures(files, labels, &run)?,
    };
    if data.samples.is_empty() && opt.self_labels.is_some() {
        return Err(Error::Training(format!(
            "no flow of the {} capture(s) has a payload label (a TLS or QUIC server name, an HTTP Host, a DNS query or SSH banners): nothing to learn from ({captures})",
            files.len()
        )));
    }
    if data.samples.is_empty() {
        return Err(Error::Training(format!(
            "no flow of the {} capture(s) has a label: check that the label files name these captures ({captures})",
            files.len()
        )));
    }
    let data = match opt.max_per_capture {
        Some(k) => data.cap_per_group(k.max(1), opt.seed),
        None => data,
    };
    let data = data.min_class_support(opt.min_support);
    let (train, test) = if opt.test_fraction > 0.0 && opt.run.flow.sample.is_some() {
        // The held-out files are those of the same options without
        // sampling: sampling changes which flows carry labels, and a split
        // of the sampled flows would pick other files than the model's
        // training run held out.
        let mut plain = opt.clone();
        plain.run.flow.sample = None;
        let held = prepare(files, labels, &plain, packets)?.test;
        let held: std::collections::HashSet<&str> =
            held.samples.iter().map(|s| s.group.as_str()).collect();
        let mut train = Dataset {
            classes: data.classes.clone(),
            samples: Vec::new(),
        };
        let mut test = train.clone();
        for s in data.samples {
            match held.contains(s.group.as_str()) {
                true => test.samples.push(s),
                false => train.samples.push(s),
            }
        }
        (train, test)
    } else if opt.test_fraction > 0.0 {
        data.split_by_group(opt.test_fraction, opt.seed)
    } else {
        let empty = Dataset {
            classes: data.classes.clone(),
            samples: Vec::new(),
        };
        (data, empty)
    };
    Ok(Prepared {
        train,
        test,
        captures,
    })
}

fn groups(d: &Dataset) -> usize {
    d.samples
        .iter()
        .map(|s| s.group.as_str())
        .collect::<std::collections::HashSet<_>>()
        .len()
}

fn majority_rate(d: &Dataset) -> f64 {
    let top = d.support().into_iter().max().unwrap_or(0);
    if d.samples.is_empty() {
        0.0
    } else {
        top as f64 / d.samples.len() as f64
    }
}

impl Prepared {
    /// Sizes; `eval` is the side evaluated.
    fn summary(&self, eval: &Dataset) -> DataSummary {
        DataSummary {
            captures: self.captures.clone(),
            classes: self.train.classes.len(),
            train_flows: self.train.samples.len(),
            train_files: groups(&self.train),
            test_flows: eval.samples.len(),
            test_files: groups(eval),
            majority_rate: majority_rate(eval),
            overlap: Vec::new(),
            chosen_threshold: None,
        }
    }
}

/// The capture files whose names are groups of `d`, by content.
fn digests(files: &[PathBuf], d: &Dataset) -> Result<Vec<FileDigest>> {
    let names: std::collections::HashSet<&str> =
        d.samples.iter().map(|s| s.group.as_str()).collect();
    files
        .iter()
        .filter(|p| names.contains(file_name(p).as_str()))
        .map(|p| FileDigest::of(p))
        .collect()
}

fn held_out(r: &Report, d: &Dataset) -> HeldOut {
    HeldOut {
        flows: r.total,
        captures: groups(d),
        threshold: r.threshold,
        coverage: r.coverage,
        precision: r.precision,
        accuracy: r.accuracy,
        majority: majority_rate(d),
    }
}

/// The default provenance line: the training side's size, and where the
/// labels came from when they are self-labels.
fn trained_on(p: &Prepared, data: &DataOptions) -> String {
    let size = format!(
        "{} flows of {} captures",
        p.train.samples.len(),
        groups(&p.train)
    );
    match &data.self_labels {
        Some(sl) => format!("{size}, {}", sl.describe()),
        None => size,
    }
}

/// What every trained model ends with: the digests of its training
/// captures and label files, its scores on the held-out files, and the
/// run's summary (with the threshold chosen for precision, if any).
fn finish_training(
    mut model: Model,
    files: &[PathBuf],
    labels: &LabelSet,
    p: &Prepared,
    chosen: Option<(f64, f32, usize, usize)>,
) -> Result<(Model, DataSummary, Option<Report>)> {
    model.info.captures = digests(files, &p.train)?;
    model.info.labels = labels
        .files
        .iter()
        .map(|p| FileDigest::of(p))
        .collect::<Result<_>>()?;
    let report = (!p.test.samples.is_empty()).then(|| evaluate(&model, &p.test));
    model.info.held_out = report.as_ref().map(|r| held_out(r, &p.test));
    let mut summary = p.summary(&p.test);
    summary.chosen_threshold = chosen;
    Ok((model, summary, report))
}

/// Trains a model on the captures (on the training side when
/// `data.test_fraction > 0`, and then also evaluates it on the held-out
/// files). `opts.trained_on` is filled in when empty. With
/// `target_precision`, the threshold is the lowest that reaches it on
/// validation captures of the training side (see the module docs).
pub fn train_captures(
    files: &[PathBuf],
    labels: &LabelSet,
    data: &DataOptions,
    opts: &TrainOptions,
    target_precision: Option<f64>,
) -> Result<(Model, DataSummary, Option<Report>)> {
    let p = prepare(files, labels, data, opts.packets)?;
    let mut opts = opts.clone();
    if opts.trained_on.is_empty() {
        opts.trained_on = trained_on(&p, data);
    }
    let mut chosen = None;
    if let Some(target) = target_precision {
        if !(0.0..=1.0).contains(&target) {
            return Err(Error::Config(format!(
                "target precision {target} outside [0, 1]"
            )));
        }
        let (fit, val) = p.train.split_by_group(0.25, data.seed.wrapping_add(1));
        if val.samples.is_empty() || fit.samples.is_empty() {
            return Err(Error::Training(
                "too few training captures to set validation captures apart for the threshold"
                    .into(),
            ));
        }
        let r = evaluate(&train(&fit, &opts)?, &val);
        let Some(t) = threshold_for_precision(&r.scored, target) else {
            return Err(Error::Training(format!(
                "no threshold reaches precision {:.1} % on the {} validation flows (at threshold 0: {:.1} %)",
                100.0 * target,
                val.samples.len(),
                100.0 * r.by_threshold[0].precision
            )));
        };
        opts.threshold = t;
        chosen = Some((target, t, val.samples.len(), groups(&val)));
    }
    let model = train(&p.train, &opts)?;
    finish_training(model, files, labels, &p, chosen)
}

/// Trains a cascade (`classify/cascade.rs`): one model of `opts.algo` per
/// early packet k = `first`..=`opts.packets`, each trained on the first k
/// packets of the training side's flows, with the threshold whose
/// precision reaches `target_precision` on the validation captures (as
/// [`train_captures`] chooses it, for each k on the same validation
/// captures). A k < N where no threshold reaches the target gets no stage
/// (flows wait for the next packet); at N it is an error, as for a single
/// model. Provenance and held-out scores as [`train_captures`]. The
/// summary's chosen threshold is that of the last stage.
pub fn train_cascade_captures(
    files: &[PathBuf],
    labels: &LabelSet,
    data: &DataOptions,
    opts: &TrainOptions,
    first: usize,
    target_precision: f64,
) -> Result<(Model, DataSummary, Option<Report>)> {
    use super::train::Algo;
    if first == 0 || first >= opts.packets {
        return Err(Error::Config(format!(
            "earliest packet {first}: expected 1..{} (below N = {})",
            opts.packets, opts.packets
        )));
    }
    if matches!(opts.algo, Algo::Svm | Algo::Ports) {
        return Err(Error::Config(format!(
            "a cascade of {} models is not supported (c45, forest or nb)",
            opts.algo
        )));
    }
    if !(0.0..=1.0).contains(&target_precision) {
        return Err(Error::Config(format!(
            "target precision {target_precision} outside [0, 1]"
        )));
    }
    let p = prepare(files, labels, data, opts.packets)?;
    let mut opts = opts.clone();
    if opts.trained_on.is_empty() {
        opts.trained_on = trained_on(&p, data);
    }
    let (fit, val) = p.train.split_by_group(0.25, data.seed.wrapping_add(1));
    if val.samples.is_empty() || fit.samples.is_empty() {
        return Err(Error::Training(
            "too few training captures to set validation captures apart for the thresholds".into(),
        ));
    }
    let mut stages = Vec::new();
    let mut chosen = None;
    for k in first..=opts.packets {
        let o = TrainOptions {
            packets: k,
            ..opts.clone()
        };
        let r = evaluate(&train(&fit, &o)?, &val);
        let Some(t) = threshold_for_precision(&r.scored, target_precision) else {
            if k < opts.packets {
                continue;
            }
            return Err(Error::Training(format!(
                "k = {k}: no threshold reaches precision {:.1} % on the {} validation flows (at threshold 0: {:.1} %)",
                100.0 * target_precision,
                val.samples.len(),
                100.0 * r.by_threshold[0].precision
            )));
        };
        chosen = Some((target_precision, t, val.samples.len(), groups(&val)));
        stages.push(train(&p.train, &TrainOptions { threshold: t, ..o })?);
    }
    let last = &stages[stages.len() - 1];
    let model = Model {
        info: ModelInfo {
            classes: last.info.classes.clone(),
            packets: opts.packets,
            level: opts.level,
            trained_on: opts.trained_on.clone(),
            threshold: last.info.threshold,
            ..ModelInfo::default()
        },
        kind: ModelKind::Cascade(Cascade { stages }),
    };
    model
        .validate()
        .map_err(|e| Error::Training(format!("inconsistent model: {e}")))?;
    finish_training(model, files, labels, &p, chosen)
}

/// Evaluates a model on the captures (only on the held-out files when
/// `data.test_fraction > 0`).
pub fn evaluate_captures(
    model: &Model,
    files: &[PathBuf],
    labels: &LabelSet,
    data: &DataOptions,
) -> Result<(Report, DataSummary)> {
    let p = prepare(files, labels, data, model.info.packets)?;
    let eval = if data.test_fraction > 0.0 {
        &p.test
    } else {
        &p.train
    };
    if eval.samples.is_empty() {
        return Err(Error::Training(
            "nothing to evaluate: the split left no capture on the test side".into(),
        ));
    }
    let mut summary = p.summary(eval);
    if !model.info.captures.is_empty() {
        let evaluated = digests(files, eval)?;
        summary.overlap = overlap(&model.info.captures, &evaluated)
            .into_iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
    }
    if !summary.overlap.is_empty() && !data.allow_overlap {
        let names: Vec<&str> = summary
            .overlap
            .iter()
            .take(5)
            .map(|o| o.0.as_str())
            .collect();
        return Err(Error::Training(format!(
            "{} of the {} evaluation captures were used to train this model ({}{}): scores on them say nothing about new traffic; evaluate on other captures (or the model's held-out split), or allow the overlap knowingly (--allow-overlap)",
            summary.overlap.len(),
            summary.test_files,
            names.join(", "),
            if summary.overlap.len() > names.len() { ", …" } else { "" }
        )));
    }
    Ok((evaluate(model, eval), summary))
}

/// Writes a data set's feature vectors as CSV, as the tree, forest and
/// SVM models see them (`classify::vector`): columns `capture`, `label`,
/// then per packet `i` = 1..=`packets` `size_i` (signed: + client to
/// server, − back, 0 absent) and `gap_us_i` (−1 absent), then `proto`
/// and `server_port`. Other tools (scikit-learn) can then be trained on
/// exactly the engine's features. An unwritable file is
/// [`Error::Output`] naming it.
pub fn write_features(d: &Dataset, packets: usize, path: &Path) -> Result<()> {
    use crate::classify::{vector, FlowFeatures};
    use std::fmt::Write as _;
    let mut out = String::from("capture,label");
    for i in 1..=packets {
        let _ = write!(out, ",size_{i},gap_us_{i}");
    }
    out.push_str(",proto,server_port\n");
    let n = vector::count(packets, true);
    let mut v = vec![0f32; n];
    for s in &d.samples {
        let f = FlowFeatures {
            early: &s.early,
            proto: s.proto,
            sport: s.sport,
            dport: s.dport,
        };
        vector::fill(&f, packets, &mut v);
        let quote = |x: &str| {
            if x.contains([',', '"', '\n']) {
                format!("\"{}\"", x.replace('"', "\"\""))
            } else {
                x.to_string()
            }
        };
        out.push_str(&quote(&s.group));
        out.push(',');
        out.push_str(&quote(&d.classes[s.label as usize]));
        for x in &v {
            let _ = write!(out, ",{x}");
        }
        out.push('\n');
    }
    std::fs::write(path, out).map_err(|e| Error::Output {
        name: path.display().to_string(),
        reason: e.to_string(),
    })
}

/// Reads the captures once, splits them by file, trains one model per
/// option set on the training side and evaluates each on the held-out
/// files. Reports come in the order of `algos`. With `features_out`, the
/// two sides' feature vectors are also written there as `train.csv` and
/// `test.csv` ([`write_features`], N = the largest of `algos`).
pub fn compare_captures(
    files: &[PathBuf],
    labels: &LabelSet,
    data: &DataOptions,
    algos: &[TrainOptions],
    features_out: Option<&Path>,
) -> Result<(Vec<Report>, DataSummary)> {
    if data.test_fraction <= 0.0 {
        return Err(Error::Config(
            "comparing algorithms needs a held-out fraction of the captures (e.g. 0.3)".into(),
        ));
    }
    let packets = algos.iter().map(|a| a.packets).max().unwrap_or(1);
    let p = prepare(files, labels, data, packets)?;
    if p.test.samples.is_empty() {
        return Err(Error::Training(
            "the split left no capture on the test side (too few captures per class)".into(),
        ));
    }
    if let Some(dir) = features_out {
        write_features(&p.train, packets, &dir.join("train.csv"))?;
        write_features(&p.test, packets, &dir.join("test.csv"))?;
    }
    let mut reports = Vec::with_capacity(algos.len());
    for a in algos {
        let model = train(&p.train, a)?;
        reports.push(evaluate(&model, &p.test));
    }
    Ok((reports, p.summary(&p.test)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_inputs_are_named() {
        let e = capture_files(&[PathBuf::from("/nonexistent/x.pcap")]).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/x.pcap"), "{e}");
        let e = load_labels(&[], LabelLevel::App, &LabelOptions::default()).unwrap_err();
        assert!(e.to_string().contains("label"), "{e}");
    }

    #[test]
    fn non_captures_are_skipped_and_counted() {
        let dir = std::env::temp_dir().join(format!("eb-workflow-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/junk.pcap"), b"this is not a capture").unwrap();
        std::fs::write(dir.join("truth.csv"), b"pcap\n").unwrap();
        let files = capture_files(std::slice::from_ref(&dir)).unwrap();
        assert_eq!(files, vec![dir.join("sub/junk.pcap")]);
        let (d, s) =
            dataset_from_captures(&files, &LabelSet::default(), &RunOptions::default()).unwrap();
        assert!(d.samples.is_empty());
        assert_eq!((s.files, s.skipped.len()), (0, 1));
        assert!(s.skipped[0].contains("junk.pcap"), "{:?}", s.skipped);
        let e = prepare(&files, &LabelSet::default(), &DataOptions::default(), 4).unwrap_err();
        assert!(e.to_string().contains("no flow"), "{e}");
        let bad = DataOptions {
            test_fraction: 1.5,
            ..DataOptions::default()
        };
        assert!(prepare(&files, &LabelSet::default(), &bad, 4).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
