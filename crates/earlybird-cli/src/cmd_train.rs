//! `earlybird train`: labelled captures → model file (one call to
//! `learn::workflow::train_captures`). Also holds the data options shared
//! with `earlybird evaluate`.

use std::path::{Path, PathBuf};

use clap::Args;
use earlybird::workflow::{self, DataOptions};
use earlybird::{Algo, LabelLevel, LabelOptions, LabelSet, TrainOptions};

/// Captures, ground truth and how they become data sets.
#[derive(Args)]
pub struct DataArgs {
    /// Capture files (pcap/pcapng) or directories holding them; a flow's
    /// label is looked up by capture file name and 5-tuple.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Ground-truth CSV (columns pcap, proto, src, sport, dst, dport and the
    /// label column of --level, as classify/*/ndpi_truth.csv). Repeat to
    /// merge several.
    #[arg(
        short,
        long,
        value_name = "LABELS.csv",
        required_unless_present = "self_labels"
    )]
    pub labels: Vec<PathBuf>,
    /// Label flows with their own payload labels instead of a truth file:
    /// the TLS/QUIC server name, HTTP Host, DNS query or SSH banners,
    /// named by the service map (flows without one are not used); the
    /// class is the label's category unless --level says app or proto.
    /// At most --reservoir flows per class are kept, a seeded uniform
    /// sample (docs/CLASSIFIERS.md, "Self-labels").
    #[arg(long, conflicts_with_all = ["labels", "dpi_only"])]
    pub self_labels: bool,
    /// --self-labels: a service map layered on the built-in one (the
    /// format of docs/SERVICES.md). Repeat to layer several, last wins.
    #[arg(long, value_name = "FILE", requires = "self_labels")]
    pub services: Vec<PathBuf>,
    /// --self-labels: flows kept per class (reservoir sampling with
    /// --seed).
    #[arg(long, value_name = "FLOWS", requires = "self_labels", default_value_t = earlybird::self_label::DEFAULT_PER_CLASS)]
    pub reservoir: usize,
    /// Keep only labels nDPI found by payload inspection (drops "Match by
    /// port"/"Match by IP" guesses).
    #[arg(long)]
    pub dpi_only: bool,
    /// Keep at most K flows per (capture, class), so that one long capture
    /// does not dominate (chosen with --seed).
    #[arg(long, value_name = "K")]
    pub max_per_capture: Option<usize>,
    /// Drop classes with fewer flows than this.
    #[arg(long, value_name = "FLOWS", default_value_t = 1)]
    pub min_support: usize,
    /// Hold out this fraction of the flows, whole capture FILES at a time,
    /// for testing (0 = none). The same files, options and --seed give the
    /// same split in train and evaluate.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.0)]
    pub split: f64,
    /// Seed of the split, the per-capture cap and the forest.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// evaluate: score the model even on captures it was trained on (the
    /// model file lists them by content); refused otherwise.
    #[arg(long)]
    pub allow_overlap: bool,
}

impl DataArgs {
    /// Every file read: the capture files found (`files`, from
    /// [`DataArgs::load`]) and the labels.
    pub fn inputs<'a>(&'a self, files: &'a [PathBuf]) -> Vec<&'a Path> {
        files
            .iter()
            .chain(&self.labels)
            .chain(&self.services)
            .map(PathBuf::as_path)
            .collect()
    }

    /// Capture files (directories expanded), labels and data options.
    pub fn load(
        &self,
        level: LabelLevel,
    ) -> Result<(Vec<PathBuf>, LabelSet, DataOptions), earlybird::Error> {
        let files = workflow::capture_files(&self.files)?;
        let (labels, self_labels) = if self.self_labels {
            let sl = earlybird::self_label::SelfLabels::new(&self.services, level, self.reservoir)?;
            // The model records the user's service maps as its label files.
            let mut labels = LabelSet::default();
            labels.files = self.services.clone();
            (labels, Some(sl))
        } else {
            let opt = LabelOptions {
                keep_unknown: false,
                dpi_only: self.dpi_only,
            };
            (workflow::load_labels(&self.labels, level, &opt)?, None)
        };
        let data = DataOptions {
            self_labels,
            max_per_capture: self.max_per_capture,
            min_support: self.min_support,
            test_fraction: self.split,
            seed: self.seed,
            allow_overlap: self.allow_overlap,
            ..DataOptions::default()
        };
        Ok((files, labels, data))
    }
}

/// How a model is trained.
#[derive(Args)]
pub struct ModelArgs {
    /// Ground-truth level that becomes the class: app (app_label, e.g.
    /// TLS.Google), proto (master protocol, e.g. TLS) or category (e.g. Web).
    /// Default: proto, category with --self-labels (evaluate --model: the
    /// model's own level).
    #[arg(long, value_name = "LEVEL", value_parser = ["app", "proto", "category"])]
    pub level: Option<String>,
    /// N: early packets the model looks at (1..=32).
    #[arg(short = 'n', long, value_name = "N", default_value_t = 4)]
    pub packets: usize,
    /// c45, forest, svm, gnb: also use the IP protocol and the server port.
    #[arg(long)]
    pub use_ports: bool,
    /// Verdicts with a lower confidence are reported as unknown (0..1).
    #[arg(
        long,
        value_name = "T",
        default_value_t = 0.0,
        conflicts_with = "target_precision"
    )]
    pub threshold: f32,
    /// train: choose the threshold as the lowest whose precision (share
    /// right where the model answers) reaches this on validation captures
    /// set apart from the training side (0..1, e.g. 0.9).
    #[arg(long, value_name = "P")]
    pub target_precision: Option<f64>,
    /// forest: number of trees.
    #[arg(long, value_name = "TREES", default_value_t = 20)]
    pub trees: usize,
}

impl ModelArgs {
    pub fn level(&self) -> LabelLevel {
        self.level_or(LabelLevel::Proto)
    }

    /// The level asked for, else `default`.
    pub fn level_or(&self, default: LabelLevel) -> LabelLevel {
        self.level
            .as_deref()
            .and_then(|l| l.parse().ok())
            .unwrap_or(default)
    }

    pub fn options(&self, algo: Algo, seed: u64) -> TrainOptions {
        TrainOptions {
            algo,
            packets: self.packets,
            use_ports: self.use_ports,
            threshold: self.threshold,
            trees: self.trees,
            seed,
            level: Some(self.level()),
            ..TrainOptions::default()
        }
    }
}

#[derive(Args)]
pub struct TrainArgs {
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    model: ModelArgs,
    /// Algorithm: nb (Naive Bayes), c45 (decision tree), forest (random
    /// forest), svm (RBF SVM, slow), ports (port baseline), gnb (Gaussian
    /// naive Bayes over the tree's features, scikit-learn's GaussianNB).
    #[arg(short, long, value_name = "ALGO", default_value = "c45", value_parser = ["nb", "c45", "forest", "svm", "ports", "gnb"])]
    algo: String,
    /// Train a cascade: one model per early packet k = K1..=N (N from -n),
    /// each with its own threshold chosen by --target-precision (needed;
    /// a k < N whose threshold reaches it nowhere is left out); inline, a
    /// flow is decided at the first packet from K1 on whose model is that
    /// confident, else at N as a single model. c45, forest or nb.
    #[arg(long, value_name = "K1", requires = "target_precision")]
    earliest: Option<usize>,
    /// Model file to write (not one of the inputs).
    #[arg(short, long, value_name = "MODEL")]
    output: PathBuf,
    /// With --split: also draw the held-out accuracy versus packets (a PNG
    /// file; the name must end in .png).
    #[arg(long, value_name = "CHART.png", value_parser = crate::out_args::png_path)]
    png: Option<PathBuf>,
    /// With --split: also draw the held-out reliability diagram (share
    /// right against confidence) as a PNG.
    #[arg(long, value_name = "CHART.png", value_parser = crate::out_args::png_path)]
    reliability_png: Option<PathBuf>,
}

pub fn run(a: TrainArgs) -> i32 {
    if (a.png.is_some() || a.reliability_png.is_some()) && a.data.split <= 0.0 {
        return crate::fail(
            "--png and --reliability-png need --split (a held-out part to evaluate)",
        );
    }
    let algo: Algo = match a.algo.parse() {
        Ok(x) => x,
        Err(e) => return crate::fail(e),
    };
    let level = match a.data.self_labels {
        true => a.model.level_or(LabelLevel::Category),
        false => a.model.level(),
    };
    let (files, labels, data) = match a.data.load(level) {
        Ok(x) => x,
        Err(e) => return crate::fail(e),
    };
    // The model and the chart are written after training: check now that
    // they can be, and that neither is an input.
    let outputs: Vec<&Path> = [a.output.as_path()]
        .into_iter()
        .chain(a.png.as_deref())
        .chain(a.reliability_png.as_deref())
        .collect();
    if let Some(code) = crate::out_args::refuse(&outputs, &a.data.inputs(&files)) {
        return code;
    }
    let mut opts = a.model.options(algo, a.data.seed);
    opts.level = Some(level);
    let trained = match (a.earliest, a.model.target_precision) {
        (Some(first), Some(p)) => {
            workflow::train_cascade_captures(&files, &labels, &data, &opts, first, p)
        }
        _ => workflow::train_captures(&files, &labels, &data, &opts, a.model.target_precision),
    };
    let (model, summary, report) = match trained {
        Ok(x) => x,
        Err(e) => return crate::fail(e),
    };
    for s in &summary.captures.skipped {
        eprintln!("earlybird: warning: skipped {s}");
    }
    if let Err(e) = model.save(&a.output) {
        return crate::fail(e);
    }
    outln!("{summary}");
    outln!("wrote {}: {model}", a.output.display());
    if let Some(r) = report {
        outln!("\nheld-out captures:\n{r}");
        if let Some(p) = &a.png {
            if let Err(e) = r.write_png(p) {
                return crate::fail(e);
            }
        }
        if let Some(p) = &a.reliability_png {
            if let Err(e) = r.write_reliability_png(p) {
                return crate::fail(e);
            }
        }
    }
    0
}

/// `earlybird train-media`: intervals of the `media` analyzer learned from
/// labelled media flows (`learn/media.rs`, docs/MEDIA.md).
#[derive(Args)]
pub struct TrainMediaArgs {
    /// Capture files (pcap/pcapng) or directories holding them; a flow's
    /// label is looked up by capture file name and UDP 5-tuple.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Media labels: a CSV with columns pcap, proto, src, sport, dst,
    /// dport, media_kind (as corpus/classify/dev/media_flows.csv), or a JSON
    /// of voip_reference.json's shape (its RTP streams are audio). Repeat
    /// to merge several.
    #[arg(short, long, value_name = "LABELS", required = true)]
    labels: Vec<PathBuf>,
    /// TOML file to write (`flows --media-config` reads it).
    #[arg(short, long, value_name = "FILE.toml")]
    output: PathBuf,
    /// Lower percentile (0..1) of the labelled windows' mean sizes and
    /// bitrates: the low end of the learned intervals.
    #[arg(long, value_name = "Q", default_value_t = 0.02)]
    low: f64,
    /// Upper percentile (0..1): the high end of the learned intervals.
    #[arg(long, value_name = "Q", default_value_t = 0.98)]
    high: f64,
    /// A kind is learned from at least this many labelled flows of at
    /// least 30 packets; else it keeps Table 6.2's intervals.
    #[arg(long, value_name = "FLOWS", default_value_t = 3)]
    min_flows: usize,
}

pub fn run_media(a: TrainMediaArgs) -> i32 {
    use earlybird::media_intervals as media;
    if !(0.0..=1.0).contains(&a.low) || !(0.0..=1.0).contains(&a.high) || a.low > a.high {
        return crate::fail("--low and --high must be in 0..=1, --low not above --high");
    }
    let files = match workflow::capture_files(&a.files) {
        Ok(f) => f,
        Err(e) => return crate::fail(e),
    };
    let inputs: Vec<&Path> = files
        .iter()
        .chain(&a.labels)
        .map(PathBuf::as_path)
        .collect();
    if let Some(code) = crate::out_args::refuse(&[a.output.as_path()], &inputs) {
        return code;
    }
    let labels = match media::MediaLabels::load(&a.labels) {
        Ok(l) => l,
        Err(e) => return crate::fail(e),
    };
    let mut caps = Vec::new();
    for f in &files {
        match media::read_capture(f, &labels) {
            Ok(c) => caps.push(c),
            Err(e) => eprintln!("earlybird: warning: skipped {}: {e}", f.display()),
        }
    }
    let opts = media::LearnOptions {
        low: a.low,
        high: a.high,
        min_flows: a.min_flows,
        ..media::LearnOptions::default()
    };
    let all: Vec<&media::CaptureFlows> = caps.iter().collect();
    let learned = media::learn(&all, &opts);
    let labelled: usize = caps
        .iter()
        .map(|c| c.flows.iter().filter(|f| f.kind.is_some()).count())
        .sum();
    outln!(
        "{} captures, {} labelled UDP flows of {} labels",
        caps.len(),
        labelled,
        labels.len()
    );
    if learned.kinds.is_empty() {
        outln!(
            "no kind has {} labelled flows of at least 30 packets: Table 6.2 kept",
            a.min_flows
        );
    }
    for (k, flows, windows) in &learned.kinds {
        outln!("learned {k} from {flows} flows ({windows} windows)");
    }
    let text = media::to_toml(&learned.config);
    let header = "# Intervals of the media analyzer learned by `earlybird train-media`\n# (docs/MEDIA.md); flows --media-config reads this file.\n";
    if let Err(e) = std::fs::write(&a.output, format!("{header}{text}")) {
        return crate::fail(format!("{}: {e}", a.output.display()));
    }
    outln!("wrote {}:\n{text}", a.output.display());
    outln!(
        "Table 6.2 on these captures:\n{}",
        media::markdown(&media::score(
            &earlybird::analyze::media::MediaConfig::default(),
            &all
        ))
    );
    outln!(
        "learned, on the captures it was learned from:\n{}",
        media::markdown(&media::score(&learned.config, &all))
    );
    let (held, _) = media::leave_one_capture_out(&caps, &opts);
    outln!(
        "learned, leave one capture out (each capture scored with the intervals learned from the others):\n{}",
        media::markdown(&held)
    );
    0
}
