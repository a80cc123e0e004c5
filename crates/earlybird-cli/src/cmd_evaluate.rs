//! `earlybird evaluate`: a model (or several algorithms trained on a split)
//! against labelled captures. One call to
//! `classify::workflow::evaluate_captures` or `compare_captures`.

use std::path::{Path, PathBuf};

use clap::Args;
use earlybird::{workflow, Algo, EvalReport};

use crate::cmd_train::{DataArgs, ModelArgs};

#[derive(Args)]
pub struct EvaluateArgs {
    #[command(flatten)]
    data: DataArgs,
    /// Model file to evaluate (its label level is used unless --level is
    /// given explicitly).
    #[arg(
        short,
        long,
        value_name = "MODEL",
        conflicts_with = "algos",
        required_unless_present = "algos"
    )]
    model: Option<PathBuf>,
    /// Compare algorithms instead: train each on the training captures of
    /// --split and evaluate it on the held-out ones, e.g. nb,c45,forest,ports.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    algos: Vec<String>,
    #[command(flatten)]
    train: ModelArgs,
    /// Draw accuracy versus the first k packets (k = 1..10), one curve per
    /// model, as a PNG (the name must end in .png; checked, with the
    /// directory it goes to, before the evaluation starts).
    #[arg(long, value_name = "CHART.png", value_parser = crate::out_args::png_path)]
    png: Option<PathBuf>,
    /// --model: also draw the reliability diagram (share right against
    /// confidence, per decile) as a PNG.
    #[arg(long, value_name = "CHART.png", value_parser = crate::out_args::png_path, requires = "model")]
    reliability_png: Option<PathBuf>,
    /// --algos: also write the training and held-out flows' feature
    /// vectors (as the engine's trees see them) to DIR/train.csv and
    /// DIR/test.csv, to train other tools on the same features
    /// (scripts/sklearn_compare.py).
    #[arg(long, value_name = "DIR", requires = "algos")]
    features_out: Option<PathBuf>,
    /// --model: also write the full confusion matrix (every class): a PNG
    /// heat map when the name ends in .png, else a text table.
    #[arg(long, value_name = "FILE", requires = "model")]
    confusion: Option<PathBuf>,
    /// Score under packet sampling: the flows are formed from the packets
    /// `flows --sample POLICY:N` keeps (systematic:N, stratified:N,
    /// random:N), their early inter-arrivals divided by N as the inline
    /// classifier sees them (docs/SAMPLING.md).
    #[arg(long, value_name = "POLICY:N")]
    sample: Option<String>,
    /// Seed of the stratified and random draws of --sample (default 1).
    #[arg(long, value_name = "SEED", requires = "sample")]
    sample_seed: Option<u64>,
}

/// The sampling --sample asks for, if any.
fn sampling(a: &EvaluateArgs) -> Result<Option<earlybird::sample::Sampling>, String> {
    a.sample
        .as_deref()
        .map(|s| earlybird::sample::Sampling::parse(s, a.sample_seed.unwrap_or(1)))
        .transpose()
        .map_err(|e| e.to_string())
}

fn chart(path: &PathBuf, reports: &[(String, &EvalReport)]) -> Result<(), earlybird::Error> {
    let named: Vec<(&str, &EvalReport)> = reports.iter().map(|(n, r)| (n.as_str(), *r)).collect();
    EvalReport::write_curves_png(path, &named)
}

pub fn run(a: EvaluateArgs) -> i32 {
    let sample = match sampling(&a) {
        Ok(s) => s,
        Err(e) => return crate::fail(e),
    };
    if let Some(s) = &sample {
        eprintln!(
            "earlybird: scoring under packet sampling: {s} (seed {})",
            s.seed
        );
    }
    let outputs: Vec<&Path> = (a.png.as_deref().into_iter())
        .chain(a.reliability_png.as_deref())
        .chain(a.confusion.as_deref())
        .collect();
    match &a.model {
        Some(path) => {
            let model = match crate::model_arg::load(Some(path)) {
                Ok(m) => m,
                Err(e) => return crate::fail(e),
            };
            let level = match (&a.train.level, model.info.level) {
                (None, Some(l)) => l,
                _ => a.train.level(),
            };
            let (files, labels, mut data) = match a.data.load(level) {
                Ok(x) => x,
                Err(e) => return crate::fail(e),
            };
            data.run.flow.sample = sample;
            let mut inputs = a.data.inputs(&files);
            if path.as_os_str() != crate::model_arg::DEFAULT_NAME {
                inputs.push(path);
            }
            if let Some(code) = crate::out_args::refuse(&outputs, &inputs) {
                return code;
            }
            let (report, summary) =
                match workflow::evaluate_captures(&model, &files, &labels, &data) {
                    Ok(x) => x,
                    Err(e) => return crate::fail(e),
                };
            for s in &summary.captures.skipped {
                eprintln!("earlybird: warning: skipped {s}");
            }
            if model.info.captures.is_empty() {
                eprintln!("earlybird: warning: the model does not record its training captures; overlap with them was not checked");
            }
            for (name, trained) in &summary.overlap {
                eprintln!("earlybird: WARNING: {name} was used to train this model (as {trained})");
            }
            outln!(
                "{model}\nlabels at level {}\n{summary}\n\n{report}",
                level.name()
            );
            if let Some(p) = &a.reliability_png {
                if let Err(e) = report.write_reliability_png(p) {
                    return crate::fail(e);
                }
            }
            if let Some(p) = &a.confusion {
                let written = if p.extension().is_some_and(|e| e == "png") {
                    report.write_confusion_png(p)
                } else {
                    std::fs::write(p, report.confusion_table()).map_err(|e| {
                        earlybird::Error::Output {
                            name: p.display().to_string(),
                            reason: e.to_string(),
                        }
                    })
                };
                if let Err(e) = written {
                    return crate::fail(e);
                }
            }
            if let Some(p) = &a.png {
                if let Err(e) = chart(p, &[(report.algo.clone(), &report)]) {
                    return crate::fail(e);
                }
            }
        }
        None => {
            let level = match a.data.self_labels {
                true => a.train.level_or(earlybird::LabelLevel::Category),
                false => a.train.level(),
            };
            let mut opts = Vec::new();
            for name in &a.algos {
                match name.trim().parse::<Algo>() {
                    Ok(algo) => {
                        let mut o = a.train.options(algo, a.data.seed);
                        o.level = Some(level);
                        opts.push(o)
                    }
                    Err(e) => return crate::fail(e),
                }
            }
            let (files, labels, mut data) = match a.data.load(level) {
                Ok(x) => x,
                Err(e) => return crate::fail(e),
            };
            data.run.flow.sample = sample;
            if let Some(code) = crate::out_args::refuse(&outputs, &a.data.inputs(&files)) {
                return code;
            }
            if let Some(dir) = &a.features_out {
                if let Err(e) = std::fs::create_dir_all(dir) {
                    return crate::fail(format!("{}: {e}", dir.display()));
                }
            }
            let (reports, summary) = match workflow::compare_captures(
                &files,
                &labels,
                &data,
                &opts,
                a.features_out.as_deref(),
            ) {
                Ok(x) => x,
                Err(e) => return crate::fail(e),
            };
            for s in &summary.captures.skipped {
                eprintln!("earlybird: warning: skipped {s}");
            }
            let ports = if a.train.use_ports { " + ports" } else { "" };
            outln!(
                "labels at level {}, N = {}, split {} by capture file (seed {})\n{summary}\n",
                a.train.level().name(),
                a.train.packets,
                a.data.split,
                a.data.seed
            );
            outln!("{:<14} {:>9} {:>9}", "algorithm", "accuracy", "macro F1");
            let names: Vec<String> = reports
                .iter()
                .map(|r| {
                    if r.algo == "nb" || r.algo == "ports" {
                        r.algo.clone()
                    } else {
                        format!("{}{ports}", r.algo)
                    }
                })
                .collect();
            for (n, r) in names.iter().zip(&reports) {
                outln!("{n:<14} {:>8.2}% {:>9.3}", 100.0 * r.accuracy, r.macro_f1);
            }
            for r in &reports {
                outln!("\n{r}");
            }
            if let Some(p) = &a.png {
                let named: Vec<(String, &EvalReport)> = names.into_iter().zip(&reports).collect();
                if let Err(e) = chart(p, &named) {
                    return crate::fail(e);
                }
            }
        }
    }
    0
}
