//! `earlybird._native`: the Python extension module over the engine's
//! public API (the `earlybird` Python package in `python/` wraps it).
//!
//! Contract: [`start`] plans the inputs (files and directories, as
//! `earlybird flows` does: `Inputs::plan`), or with `interface` opens the
//! live capture's sockets (`open_live`, as `earlybird flows -i`: an
//! unusable interface raises at once), builds the run's options from
//! the CLI's option names (unset options take the engine's defaults, which
//! are the CLI's) and starts `run_inputs` (`run_live`, until `duration`
//! or a stop) on a thread of its own with one
//! output, an [`ArrowFlows`] exporter handing batches of `batch_size` rows
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
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use arrow_array::RecordBatch as ArrowBatch;
use arrow_pyarrow::ToPyArrow;
use arrow_schema::SchemaRef;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use earlybird::{
    ArrowFlows, Error, ExportOptions, ExportPolicy, Fanout, FlowConfig, FlowHash, InputOrder,
    Inputs, LiveConfig, Model, ModelRef, Report, RunControl, RunOptions, SECOND,
};
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

/// The CLI's built-in default model (`earlybird flows` without
/// `--model`), the same file embedded the same way.
static DEFAULT_MODEL: &[u8] = include_bytes!("../../../models/default.ebm");

/// Batches waiting in the channel between the engine and Python.
const QUEUED: usize = 2;

/// Live capture: record batches a shard keeps waiting for a slow reader
/// before it drops the oldest (the CLI's default for `-i`, `--drop-after`).
const LIVE_PENDING: usize = 64;

/// The live capture's options, named as `earlybird flows -i`'s; `None`
/// without an interface.
struct Live {
    config: LiveConfig,
    duration: Option<Duration>,
}

#[allow(clippy::too_many_arguments)]
fn live(
    interface: Option<String>,
    duration: Option<f64>,
    snaplen: Option<u32>,
    ring_mib: Option<u32>,
    no_promisc: bool,
    fanout: Option<&str>,
) -> PyResult<Option<Live>> {
    let Some(iface) = interface else {
        if duration.is_some()
            || snaplen.is_some()
            || ring_mib.is_some()
            || no_promisc
            || fanout.is_some()
        {
            return Err(PyValueError::new_err(
                "duration, snaplen, ring_mib, no_promisc and fanout need interface",
            ));
        }
        return Ok(None);
    };
    let d = LiveConfig::new(&iface);
    let blocks = ring_mib.unwrap_or(d.blocks);
    if blocks == 0 {
        return Err(PyValueError::new_err("ring_mib must be at least 1"));
    }
    let fanout = match fanout {
        None => Fanout::Hosts,
        Some(f) => Fanout::parse(f).ok_or_else(|| {
            PyValueError::new_err(format!("fanout must be \"hosts\" or \"flows\", not {f:?}"))
        })?,
    };
    let duration = match duration {
        None => None,
        Some(_) => Some(Duration::from_nanos(secs(duration, "duration", 0)?)),
    };
    Ok(Some(Live {
        config: LiveConfig {
            blocks,
            snaplen: snaplen.unwrap_or(d.snaplen),
            promiscuous: !no_promisc,
            fanout,
            ..d
        },
        duration,
    }))
}

/// The Python exception for an engine error.
pub(crate) fn to_py(e: Error) -> PyErr {
    let text = e.to_string();
    match e {
        Error::Io { .. } | Error::NotCapture { .. } | Error::BadCapture { .. } => {
            CaptureError::new_err(text)
        }
        Error::Model { .. } => ModelError::new_err(text),
        Error::Config(_) => PyValueError::new_err(text),
        _ => EarlybirdError::new_err(text),
    }
}

/// Seconds as nanoseconds; positive and finite, as the CLI requires.
fn secs(s: Option<f64>, name: &str, default: u64) -> PyResult<u64> {
    match s {
        None => Ok(default),
        Some(s) if s > 0.0 && s.is_finite() => Ok((s * SECOND as f64).round() as u64),
        Some(_) => Err(PyValueError::new_err(format!(
            "{name} must be a positive number of seconds"
        ))),
    }
}

/// The model of a run: `"default"` the built-in one (the CLI's, from
/// `models/default.ebm`), a path a model file, `None` no model;
/// `threshold` replaces the model's.
fn model_ref(model: Option<&str>, threshold: Option<f32>) -> PyResult<ModelRef> {
    let Some(name) = model else {
        return Ok(ModelRef::default());
    };
    let mut m = if name == "default" {
        Model::from_bytes(DEFAULT_MODEL)
            .map_err(|e| ModelError::new_err(format!("built-in default model: {e}")))?
    } else {
        Model::load(name).map_err(|e| ModelError::new_err(e.to_string()))?
    };
    if let Some(t) = threshold {
        if !(0.0..=1.0).contains(&t) {
            return Err(PyValueError::new_err(format!(
                "threshold {t} is outside [0, 1]"
            )));
        }
        m.info.threshold = t;
    }
    let classes: Arc<[String]> = m.info.classes.clone().into();
    Ok(ModelRef {
        model: Some(Arc::new(m)),
        classes,
    })
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

/// Starts a run over capture files and directories, or a live interface;
/// see the module docs.
#[pyfunction]
#[pyo3(signature = (
    inputs, *, batch_size, shards=None, idle_timeout=None, active_timeout=None,
    tcp_close_timeout=None, early_packets=None, max_flows=None, stats=None,
    analyzers=Vec::new(), hash=None, unidirectional=false, input_order=None,
    model=Some("default".to_string()), threshold=None, pin=false, interface=None,
    duration=None, snaplen=None, ring_mib=None, no_promisc=false, fanout=None,
    drop_after=None
))]
#[allow(clippy::too_many_arguments)]
fn start(
    inputs: Vec<PathBuf>,
    batch_size: usize,
    shards: Option<usize>,
    idle_timeout: Option<f64>,
    active_timeout: Option<f64>,
    tcp_close_timeout: Option<f64>,
    early_packets: Option<usize>,
    max_flows: Option<usize>,
    stats: Option<&str>,
    analyzers: Vec<String>,
    hash: Option<&str>,
    unidirectional: bool,
    input_order: Option<&str>,
    model: Option<String>,
    threshold: Option<f32>,
    pin: bool,
    interface: Option<String>,
    duration: Option<f64>,
    snaplen: Option<u32>,
    ring_mib: Option<u32>,
    no_promisc: bool,
    fanout: Option<&str>,
    drop_after: Option<usize>,
) -> PyResult<Run> {
    let live = live(interface, duration, snaplen, ring_mib, no_promisc, fanout)?;
    let d = FlowConfig::default();
    let flow = FlowConfig {
        bidirectional: !unidirectional,
        idle_timeout: secs(idle_timeout, "idle_timeout", d.idle_timeout)?,
        active_timeout: secs(active_timeout, "active_timeout", d.active_timeout)?,
        tcp_close_timeout: secs(tcp_close_timeout, "tcp_close_timeout", d.tcp_close_timeout)?,
        early_packets: early_packets.unwrap_or(d.early_packets),
        max_flows: max_flows.unwrap_or(d.max_flows),
        full_stats: match stats {
            None | Some("full") => true,
            Some("basic") => false,
            Some(s) => {
                return Err(PyValueError::new_err(format!(
                    "stats must be \"full\" or \"basic\", not {s:?}"
                )))
            }
        },
        hash: match hash {
            None | Some("fold") => FlowHash::Fold,
            Some("toeplitz") => FlowHash::Toeplitz,
            Some(h) => {
                return Err(PyValueError::new_err(format!(
                    "hash must be \"fold\" or \"toeplitz\", not {h:?}"
                )))
            }
        },
        analyzers,
        ..d
    };
    flow.validate().map_err(to_py)?;
    if batch_size == 0 {
        return Err(PyValueError::new_err("batch_size must be at least 1"));
    }
    let opts = RunOptions {
        flow,
        shards: shards.unwrap_or(1),
        pin,
        // As the CLI: files wait for the reader (lossless), a live capture
        // drops batches past `drop_after` rather than stall the shards.
        export_policy: match (drop_after, &live) {
            (Some(n), _) => ExportPolicy::Drop { max_pending: n },
            (None, Some(_)) => ExportPolicy::Drop {
                max_pending: LIVE_PENDING,
            },
            (None, None) => ExportPolicy::Block,
        },
        ..RunOptions::default()
    };
    let order = match input_order {
        None => InputOrder::default(),
        Some(o) => InputOrder::parse(o).ok_or_else(|| {
            PyValueError::new_err(format!(
                "input_order must be \"time\" or \"given\", not {o:?}"
            ))
        })?,
    };
    let model = model_ref(model.as_deref(), threshold)?;
    let source = match live {
        Some(l) => {
            if !inputs.is_empty() {
                return Err(PyValueError::new_err(
                    "give either capture files or an interface, not both",
                ));
            }
            let sockets = earlybird::open_live(&l.config, opts.shards).map_err(to_py)?;
            Source::Live(sockets, l.duration)
        }
        None => Source::Files(Inputs::plan(&inputs, order).map_err(to_py)?),
    };
    let eopts = ExportOptions {
        early_packets: opts.flow.early_packets,
        class_names: model.classes.clone(),
        analyzed: earlybird::analyze::fields_of(&opts.flow.analyzers).into(),
    };
    let schema = ArrowFlows::schema(&eopts);
    let (tx, rx) = crossbeam_channel::bounded(QUEUED);
    let sink: earlybird::ArrowSink = Box::new(move |b| {
        tx.send(b)
            .map_err(|_| "the Python side stopped reading".to_string())
    });
    let exporter = ArrowFlows::new("python", &eopts, batch_size, sink);
    let ctl = RunControl::default();
    let thread_ctl = ctl.clone();
    let thread = std::thread::Builder::new()
        .name("eb-python-run".into())
        .spawn(move || {
            let out: Vec<Box<dyn earlybird::Exporter>> = vec![Box::new(exporter)];
            match source {
                Source::Files(planned) => {
                    earlybird::run_inputs(planned, &opts, &model, out, &thread_ctl)
                }
                Source::Live(sockets, duration) => {
                    earlybird::run_live(sockets, duration, &opts, &model, out, &thread_ctl)
                }
            }
        })
        .map_err(|e| EarlybirdError::new_err(format!("cannot start the run: {e}")))?;
    Ok(Run {
        rx: Some(rx),
        thread: Some(thread),
        ctl,
        schema,
        report: None,
        pending: None,
    })
}

/// What a run reads.
enum Source {
    /// Planned capture files.
    Files(Inputs),
    /// A live capture's open sockets, and how long to capture.
    Live(earlybird::LiveInput, Option<Duration>),
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
    m.add_function(wrap_pyfunction!(capture_files, m)?)?;
    m.add_class::<Run>()?;
    m.add("EarlybirdError", m.py().get_type::<EarlybirdError>())?;
    m.add("CaptureError", m.py().get_type::<CaptureError>())?;
    m.add("ModelError", m.py().get_type::<ModelError>())?;
    model::register(m)?;
    learn::register(m)?;
    Ok(())
}
