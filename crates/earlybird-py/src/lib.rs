//! `earlybird._native`: the Python extension module over the engine's
//! public API (the `earlybird` Python package in `python/` wraps it).
//!
//! Contract: [`start`] fills in the engine's one configuration
//! (`earlybird::Config`: a `config` TOML file, then the keyword arguments
//! as `earlybird flows`'s long options, exactly as the CLI lays its
//! options over its `--config` file), plans it (`Config::plan`: inputs
//! planned, an unusable interface raises at once), opens it with one
//! more output and starts the run on a thread of its own: that output is
//! an [`ArrowFlows`] exporter handing batches of `batch_size` rows
//! to a channel of [`QUEUED`] batches. [`Run::next_batch`] gives the next
//! batch as a `pyarrow.RecordBatch` (no Python object per record), `None`
//! at the end; the engine waits while the channel is full, so at most
//! `QUEUED + 2` batches exist at once, whatever the capture's size.
//!
//! Errors: planning errors raise at once, run errors at the end of the
//! batches; a capture that cannot be read raises `CaptureError` (its text
//! names the file and, for a damaged capture, the byte offset), a bad
//! model `ModelError`, a bad option `ValueError`, anything else
//! `EarlybirdError`.
//!
//! Interruption: the pending signals are checked (`Python::check_signals`)
//! before every batch and every 100 ms while waiting; a KeyboardInterrupt
//! (or any exception a signal handler raises) stops the run as SIGINT
//! stops the CLI (`RunControl::stop`: reading ends, open flows are
//! flushed), then propagates; later calls give the flushed batches and end
//! normally, with `interrupted` set in the report. Dropping a run before
//! its end stops it the same way and waits for its thread.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use arrow_array::RecordBatch as ArrowBatch;
use arrow_pyarrow::ToPyArrow;
use arrow_schema::SchemaRef;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use earlybird::{ArrowFlows, Config, Error, Report, RunControl};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

mod learn;
mod model;

create_exception!(
    earlybird,
    EarlybirdError,
    PyException,
    "An error of the earlybird engine."
);
create_exception!(
    earlybird,
    CaptureError,
    EarlybirdError,
    "A capture that cannot be read: the message names the file (and the byte offset in a damaged one)."
);
create_exception!(
    earlybird,
    ModelError,
    EarlybirdError,
    "A model file that cannot be read or used."
);

/// Batches waiting in the channel between the engine and Python.
const QUEUED: usize = 2;

/// The Python exception for an engine error.
pub(crate) fn to_py(e: Error) -> PyErr {
    let text = e.to_string();
    match e {
        Error::Io { .. } | Error::NotCapture { .. } | Error::BadCapture { .. } => {
            CaptureError::new_err(text)
        }
        Error::Model { .. } => ModelError::new_err(text),
        Error::Config(_)
        | Error::Usage(_)
        | Error::Setting { .. }
        | Error::Value { .. }
        | Error::File { .. }
        | Error::Training(_) => PyValueError::new_err(text),
        _ => EarlybirdError::new_err(text),
    }
}

/// A run of the engine whose flow records arrive as Arrow batches.
#[pyclass(module = "earlybird._native", unsendable)]
struct Run {
    rx: Option<Receiver<ArrowBatch>>,
    thread: Option<JoinHandle<earlybird::Result<Report>>>,
    ctl: RunControl,
    schema: SchemaRef,
    report: Option<Report>,
    /// A batch received but not handed over (its import was interrupted).
    pending: Option<ArrowBatch>,
    /// What self-training has learnt so far (`learn=`), else `None`.
    learning: Option<Arc<Mutex<earlybird::learn_online::Status>>>,
}

impl Run {
    /// The batch as a `pyarrow.RecordBatch`. A signal that came while
    /// waiting is handled here, after the import (which runs Python code,
    /// where a handler may raise too), not by the interpreter once this
    /// call has returned, which would drop the batch: when a handler
    /// raises, the batch is kept for the next call (none is lost) and the
    /// run is stopped.
    fn hand_over(&mut self, py: Python<'_>, b: ArrowBatch) -> PyResult<Option<Py<PyAny>>> {
        match b
            .to_pyarrow(py)
            .and_then(|obj| py.check_signals().map(|()| obj))
        {
            Ok(obj) => Ok(Some(obj.unbind())),
            Err(e) => {
                self.pending = Some(b);
                self.ctl.stop.store(true, Ordering::Relaxed);
                Err(e)
            }
        }
    }
}

#[pymethods]
impl Run {
    /// The next batch of records (a `pyarrow.RecordBatch`), or `None` once
    /// the run has ended (its error, if it failed, is raised then).
    fn next_batch(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        loop {
            if let Err(e) = py.check_signals() {
                self.ctl.stop.store(true, Ordering::Relaxed);
                return Err(e);
            }
            if let Some(b) = self.pending.take() {
                return self.hand_over(py, b);
            }
            let Some(rx) = self.rx.as_ref() else {
                return Ok(None);
            };
            match py.detach(|| rx.recv_timeout(Duration::from_millis(100))) {
                Ok(b) => return self.hand_over(py, b),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => {
                    self.rx = None;
                    let Some(t) = self.thread.take() else {
                        return Ok(None);
                    };
                    let joined = py.detach(|| t.join());
                    return match joined {
                        Ok(Ok(report)) => {
                            self.report = Some(report);
                            Ok(None)
                        }
                        Ok(Err(e)) => Err(to_py(e)),
                        Err(_) => Err(EarlybirdError::new_err("the engine's thread panicked")),
                    };
                }
            }
        }
    }

    /// [`Run::next_batch`], appending the batch to `into` before
    /// returning: `true` when one was appended, `false` at the end. A
    /// signal handled as the call returns to the interpreter (a
    /// KeyboardInterrupt raised there) cannot drop the batch: it is in
    /// the caller's list already.
    fn next_batch_into(&mut self, py: Python<'_>, into: &Bound<'_, PyList>) -> PyResult<bool> {
        match self.next_batch(py)? {
            Some(b) => {
                into.append(b)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The schema of the batches (a `pyarrow.Schema`).
    fn schema(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(self.schema.as_ref().to_pyarrow(py)?.unbind())
    }

    /// Asks the run to stop (open flows are flushed; the batches go on to
    /// the end).
    fn stop(&self) {
        self.ctl.stop.store(true, Ordering::Relaxed);
    }

    /// The run's report once it has ended (`None` before): counters,
    /// warnings and the text `earlybird flows` prints.
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(r) = &self.report else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("packets_read", r.counters.packets_read)?;
        d.set_item("bytes_read", r.counters.bytes_read)?;
        d.set_item("packets_flowed", r.counters.packets_flowed)?;
        // Packets the capture filter (`filter`) left out.
        d.set_item("filtered", r.counters.filtered)?;
        d.set_item("records", r.summary.records)?;
        d.set_item("inputs_read", r.inputs_read)?;
        d.set_item("seconds", r.seconds)?;
        d.set_item("interrupted", r.interrupted)?;
        let warnings: Vec<String> = r.warnings.iter().map(|w| w.to_string()).collect();
        d.set_item("warnings", warnings)?;
        d.set_item("output_errors", r.output_errors.clone())?;
        d.set_item("text", r.to_string())?;
        if let Some(note) = &r.live_stamps {
            // Live capture: packets by the stamp the kernel gave them.
            let t = PyDict::new(py);
            t.set_item("hardware", r.counters.live_ts_hardware)?;
            t.set_item("software", r.counters.live_ts_software)?;
            t.set_item("none", r.counters.live_ts_none)?;
            t.set_item("note", note)?;
            d.set_item("timestamps", t)?;
        }
        Ok(Some(d))
    }

    /// What self-training (`learn=`) has learnt so far, while the run goes
    /// on and once it has ended (`None` without `learn=`): the flows
    /// offered and kept, the training thread's time, each model written,
    /// and the first learnt model the shards took in.
    fn learning<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(status) = &self.learning else {
            return Ok(None);
        };
        let l = status.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let d = PyDict::new(py);
        d.set_item("offered", l.offered)?;
        d.set_item("kept", l.kept)?;
        d.set_item("kept_bytes", l.bytes)?;
        d.set_item("deferred", l.deferred)?;
        d.set_item("training_seconds", l.busy)?;
        d.set_item("resting_seconds", l.rested)?;
        // The same keys as the lines of DIR/models.jsonl.
        let models = py
            .import("json")?
            .call_method1("loads", (l.models_json().map_err(to_py)?,))?;
        d.set_item("models", models)?;
        d.set_item("errors", l.errors.clone())?;
        match l.in_use {
            Some(u) => {
                let ud = PyDict::new(py);
                ud.set_item("id", u.id)?;
                ud.set_item("turn", u.turn)?;
                ud.set_item("packet_time", u.packet_time)?;
                d.set_item("first_in_use", ud)?;
            }
            None => d.set_item("first_in_use", py.None())?,
        }
        d.set_item("installs", l.installs)?;
        Ok(Some(d))
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.ctl.stop.store(true, Ordering::Relaxed);
        // Without a receiver the exporter's sends fail and the run ends.
        self.rx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A Python value of an option as a TOML value: bool, int, float, str
/// or a list of them (paths come as str from the Python side).
fn toml_value(v: &Bound<'_, PyAny>, key: &str) -> PyResult<toml::Value> {
    if let Ok(b) = v.extract::<bool>() {
        return Ok(b.into());
    }
    if let Ok(i) = v.extract::<i64>() {
        return Ok(i.into());
    }
    if let Ok(f) = v.extract::<f64>() {
        return Ok(f.into());
    }
    if let Ok(s) = v.extract::<String>() {
        return Ok(s.into());
    }
    if let Ok(l) = v.cast::<PyList>() {
        let items = l.iter().map(|x| toml_value(&x, key));
        return Ok(toml::Value::Array(items.collect::<PyResult<_>>()?));
    }
    Err(PyValueError::new_err(format!(
        "{key}: a bool, number, string or list of them, not {}",
        v.get_type().name()?
    )))
}

/// The configuration of `config`'s file (or the defaults) with `options`
/// laid over it as the command line's are; with `replace_input` or an
/// `interface` among `options`, the file's input is dropped first.
fn configuration(
    config: Option<&std::path::Path>,
    options: Option<&Bound<'_, PyDict>>,
    replace_input: bool,
) -> PyResult<Config> {
    let mut cfg = match config {
        Some(path) => Config::from_file(path).map_err(to_py)?,
        None => Config::default(),
    };
    let mut given = toml::Table::new();
    for (k, v) in options.into_iter().flat_map(|o| o.iter()) {
        let key: String = k.extract()?;
        if !v.is_none() {
            given.insert(key.clone(), toml_value(&v, &key)?);
        }
    }
    if replace_input || given.contains_key("interface") {
        cfg.inputs.clear();
        cfg.interface = None;
    }
    cfg.overlay(given, "keyword arguments").map_err(to_py)?;
    Ok(cfg)
}

/// Starts a run (see the module docs): the configuration is `config`'s
/// TOML file (or the defaults) with `options` laid over it as the command
/// line's are (`idle_timeout`, `dump_dir`: `earlybird flows`'s long
/// options with `_` for `-`); `inputs`, when given, replace the file's
/// input (its interface too); the records come as Arrow batches.
#[pyfunction]
#[pyo3(signature = (inputs, *, batch_size, config=None, options=None))]
fn start(
    inputs: Vec<PathBuf>,
    batch_size: usize,
    config: Option<PathBuf>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Run> {
    if batch_size == 0 {
        return Err(PyValueError::new_err("batch_size must be at least 1"));
    }
    let replace_input = !inputs.is_empty();
    let mut cfg = configuration(config.as_deref(), options, replace_input)?;
    cfg.inputs.extend(inputs);
    let plan = cfg.plan().map_err(to_py)?;
    let schema = ArrowFlows::schema(&plan.export);
    let (tx, rx) = crossbeam_channel::bounded(QUEUED);
    let sink: earlybird::ArrowSink = Box::new(move |b| {
        tx.send(b)
            .map_err(|_| "the Python side stopped reading".into())
    });
    let exporter = ArrowFlows::new("python", &plan.export, batch_size, sink);
    let probe = plan.open_with(vec![Box::new(exporter)]).map_err(to_py)?;
    let learning = probe.learning();
    let ctl = RunControl::default();
    let thread_ctl = ctl.clone();
    let thread = std::thread::Builder::new()
        .name("eb-python-run".into())
        .spawn(move || probe.run(&thread_ctl))
        .map_err(|e| EarlybirdError::new_err(format!("cannot start the run: {e}")))?;
    Ok(Run {
        rx: Some(rx),
        thread: Some(thread),
        ctl,
        schema,
        report: None,
        pending: None,
        learning,
    })
}

/// The effective configuration as TOML (`earlybird flows
/// --print-config`): `config`'s file with `options` over it.
#[pyfunction]
#[pyo3(signature = (*, config=None, options=None))]
fn print_config(config: Option<PathBuf>, options: Option<&Bound<'_, PyDict>>) -> PyResult<String> {
    let cfg = configuration(config.as_deref(), options, false)?;
    Ok(cfg.to_toml())
}

/// The capture files of files and directories, as `earlybird train`
/// finds them (`workflow::capture_files`: directories recursively, sorted).
#[pyfunction]
fn capture_files(paths: Vec<PathBuf>) -> PyResult<Vec<PathBuf>> {
    earlybird::workflow::capture_files(&paths).map_err(to_py)
}

/// The module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(start, m)?)?;
    m.add_function(wrap_pyfunction!(print_config, m)?)?;
    m.add_function(wrap_pyfunction!(capture_files, m)?)?;
    m.add_class::<Run>()?;
    m.add("EarlybirdError", m.py().get_type::<EarlybirdError>())?;
    m.add("CaptureError", m.py().get_type::<CaptureError>())?;
    m.add("ModelError", m.py().get_type::<ModelError>())?;
    model::register(m)?;
    learn::register(m)?;
    Ok(())
}
