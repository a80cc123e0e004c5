//! `earlybird.train` / `earlybird.evaluate`: the library's learn workflow
//! (`workflow::train_captures`, `workflow::evaluate_captures`) as
//! `earlybird train` and `earlybird evaluate --model` call it, with the
//! CLI's option names and defaults (set in `python/earlybird/__init__.py`).
//!
//! Contract: capture files and directories plus ground-truth CSVs in; the
//! model file written (train) or the model read (evaluate); a dict out with
//! the figures of the held-out or evaluated captures (accuracy, precision,
//! coverage, macro F1, counts) and the text the CLI prints. Errors as
//! `earlybird.flows` raises them (`CaptureError` naming the file, ...).

use std::path::PathBuf;

use earlybird::workflow::{self, DataOptions};
use earlybird::{Algo, EvalReport, LabelLevel, LabelOptions, Model, TrainOptions};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::{to_py, ModelError};

fn level_of(s: &str) -> PyResult<LabelLevel> {
    s.parse().map_err(|_| {
        PyValueError::new_err(format!("level must be app, proto or category, not {s:?}"))
    })
}

#[allow(clippy::too_many_arguments)]
fn data(
    files: &[PathBuf],
    labels: &[PathBuf],
    level: LabelLevel,
    dpi_only: bool,
    max_per_capture: Option<usize>,
    min_support: usize,
    split: f64,
    seed: u64,
    allow_overlap: bool,
) -> PyResult<(Vec<PathBuf>, earlybird::LabelSet, DataOptions)> {
    let files = workflow::capture_files(files).map_err(to_py)?;
    let opt = LabelOptions {
        keep_unknown: false,
        dpi_only,
    };
    let labels = workflow::load_labels(labels, level, &opt).map_err(to_py)?;
    let data = DataOptions {
        max_per_capture,
        min_support,
        test_fraction: split,
        seed,
        allow_overlap,
        ..DataOptions::default()
    };
    Ok((files, labels, data))
}

/// An evaluation report as a dict.
fn report<'py>(py: Python<'py>, r: &EvalReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("algo", &r.algo)?;
    d.set_item("packets", r.packets)?;
    d.set_item("classes", r.classes.clone())?;
    d.set_item("flows", r.total)?;
    d.set_item("correct", r.correct)?;
    d.set_item("unknown", r.unknown)?;
    d.set_item("accuracy", r.accuracy)?;
    d.set_item("precision", r.precision)?;
    d.set_item("coverage", r.coverage)?;
    d.set_item("macro_f1", r.macro_f1)?;
    d.set_item("threshold", r.threshold)?;
    d.set_item("text", r.to_string())?;
    Ok(d)
}

/// Trains a model on labelled captures and writes it; see the module docs.
#[pyfunction]
#[pyo3(signature = (files, labels, output, algo, level, packets, use_ports, threshold,
    target_precision, trees, dpi_only, max_per_capture, min_support, split, seed))]
#[allow(clippy::too_many_arguments)]
fn train<'py>(
    py: Python<'py>,
    files: Vec<PathBuf>,
    labels: Vec<PathBuf>,
    output: PathBuf,
    algo: &str,
    level: &str,
    packets: usize,
    use_ports: bool,
    threshold: f32,
    target_precision: Option<f64>,
    trees: usize,
    dpi_only: bool,
    max_per_capture: Option<usize>,
    min_support: usize,
    split: f64,
    seed: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let algo: Algo = algo.parse().map_err(to_py)?;
    let level = level_of(level)?;
    let (files, labels, data) = data(
        &files,
        &labels,
        level,
        dpi_only,
        max_per_capture,
        min_support,
        split,
        seed,
        false,
    )?;
    let opts = TrainOptions {
        algo,
        packets,
        use_ports,
        threshold,
        trees,
        seed,
        level: Some(level),
        ..TrainOptions::default()
    };
    let (model, summary, held_out) = py
        .detach(|| workflow::train_captures(&files, &labels, &data, &opts, target_precision))
        .map_err(to_py)?;
    model.save(&output).map_err(to_py)?;
    let d = PyDict::new(py);
    d.set_item("model", model.to_string())?;
    d.set_item("summary", summary.to_string())?;
    let skipped: Vec<String> = summary.captures.skipped.clone();
    d.set_item("skipped", skipped)?;
    match held_out {
        Some(r) => d.set_item("held_out", report(py, &r)?)?,
        None => d.set_item("held_out", py.None())?,
    }
    Ok(d)
}

/// Scores a model file on labelled captures; see the module docs.
#[pyfunction]
#[pyo3(signature = (model, files, labels, level, dpi_only, max_per_capture, min_support,
    split, seed, allow_overlap))]
#[allow(clippy::too_many_arguments)]
fn evaluate<'py>(
    py: Python<'py>,
    model: PathBuf,
    files: Vec<PathBuf>,
    labels: Vec<PathBuf>,
    level: Option<&str>,
    dpi_only: bool,
    max_per_capture: Option<usize>,
    min_support: usize,
    split: f64,
    seed: u64,
    allow_overlap: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let m = Model::load(&model).map_err(|e| ModelError::new_err(e.to_string()))?;
    let level = match (level, m.info.level) {
        (Some(l), _) => level_of(l)?,
        (None, Some(l)) => l,
        (None, None) => LabelLevel::Proto,
    };
    let (files, labels, data) = data(
        &files,
        &labels,
        level,
        dpi_only,
        max_per_capture,
        min_support,
        split,
        seed,
        allow_overlap,
    )?;
    let (r, summary) = py
        .detach(|| workflow::evaluate_captures(&m, &files, &labels, &data))
        .map_err(to_py)?;
    let d = report(py, &r)?;
    d.set_item("summary", summary.to_string())?;
    d.set_item("skipped", summary.captures.skipped.clone())?;
    let overlap: Vec<String> = summary
        .overlap
        .iter()
        .map(|(name, _)| name.clone())
        .collect();
    d.set_item("overlap", overlap)?;
    Ok(d)
}

/// Adds the functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(train, m)?)?;
    m.add_function(wrap_pyfunction!(evaluate, m)?)?;
    Ok(())
}
