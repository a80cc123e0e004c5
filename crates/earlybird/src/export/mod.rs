//! Exporters: finished records out to files or stdout.
//!
//! Contract: an [`Exporter`] takes the records of one kind
//! ([`Exporter::kind`], [`crate::schema::Kind`]) and writes every record in
//! its format. Flow records ([`fields::FLOWS`], the default) come in
//! [`RecordBatch`]es and are written by specialised writers: CSV (`csv.rs`),
//! JSON lines (`jsonl.rs`) or nothing (`null.rs`, for benchmarks and dry
//! runs), or as typed Parquet columns (`parquet.rs`, cargo feature
//! `parquet`, which writes records of every kind and has its own buffering:
//! row groups, readable once finished), or as IPFIX messages to a
//! collector or a file (`ipfix/`, which also takes early-verdict events);
//! their fields, order and meaning are defined once in [`fields`]
//! and documented in `docs/RECORD_FIELDS.md`. Records of any other kind come
//! in [`RowBatch`]es and are written by one generic writer driven by the
//! kind's field table ([`rows`]: CSV, JSON lines; [`open_rows`],
//! [`rows_to_writer`]). Records are formatted into one byte buffer
//! allocated when the exporter is built (no allocation per record) that is
//! handed to the output in chunks of about [`CHUNK`] bytes, always at record
//! boundaries, and at [`Exporter::finish`]; every text exporter of every
//! kind shares that machinery (`Output`: buffer, header, sticky errors,
//! flush, reopen).
//!
//! [`Exporter::flush`] writes out what is buffered without ending the output
//! (live runs call it about once a second); [`Exporter::reopen`] opens a
//! file output again at its path when the path names another file or none
//! (log rotation, SIGHUP), the CSV header written again. Which names fit
//! which format: [`Format::for_output`].
//!
//! What can fail: opening the output ([`Error::Io`] naming the path) and
//! writing to it ([`Error::Output`] naming the exporter, e.g.
//! `csv:/tmp/out.csv`). A write error is sticky: every later
//! `write_batch`/`finish` of that exporter returns it again. A writer whose
//! reader went away (EPIPE: a closed pipe) gives [`Error::OutputClosed`]
//! instead, sticky too: the output ended, which is not a failure. Records are
//! trusted values; an inconsistent batch (early array shorter than its
//! stride says) is written with fewer early packets, never a panic.

#[cfg(feature = "parquet")]
pub mod arrow;
pub(crate) mod cells;
pub mod clickhouse;
pub mod community_id;
pub(crate) mod counted;
pub mod csv;
pub mod fields;
pub mod ipfix;
pub mod jsonl;
pub mod netflow;
pub mod null;
pub(crate) mod output;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod rows;
pub(crate) mod text;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::classify::Verdict;
use crate::decode::TunnelKind;
use crate::error::{Error, Result};
use crate::features::early::EarlyPkt;
use crate::flow::record::{EndReason, FlowRecord, RecordBatch};
use crate::schema::{Kind, RowBatch};
use output::{FileOut, Writer};
use text::{Cursor, Snip};

/// Size at which the formatted text is handed to the output.
pub const CHUNK: usize = 256 * 1024;

/// A sink for finished flow records.
///
/// ```
/// use earlybird::{to_writer, ExportOptions, FlowRecord, Format, RecordBatch};
///
/// let opts = ExportOptions { early_packets: 4, ..ExportOptions::default() };
/// let mut ex = to_writer(Format::Csv, Box::new(std::io::sink()), "csv:sink", &opts);
/// let mut batch = RecordBatch::with_capacity(1, 4);
/// batch.push(FlowRecord::default(), &[]);
/// ex.write_batch(&batch)?;
/// ex.finish()?;
/// assert_eq!(ex.name(), "csv:sink");
/// # Ok::<(), earlybird::Error>(())
/// ```
pub trait Exporter: Send {
    /// The kind of records this output takes (the pipeline hands it only
    /// those): flow records unless the exporter says otherwise.
    fn kind(&self) -> &'static Kind {
        &fields::FLOWS
    }
    /// Writes every flow record of the batch. Default (an output of
    /// another kind): an error saying so.
    fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        Err(wrong_kind(
            self.name(),
            self.kind(),
            &fields::FLOWS,
            batch.len(),
        ))
    }
    /// Writes every row of a batch of the output's kind (not flows).
    /// Default (a flow output): an error saying so.
    fn write_rows(&mut self, rows: &RowBatch) -> Result<()> {
        Err(wrong_kind(
            self.name(),
            self.kind(),
            rows.kind(),
            rows.len(),
        ))
    }
    /// Flushes everything buffered; called once at the end (also after an
    /// error elsewhere).
    fn finish(&mut self) -> Result<()>;
    /// Name for messages, e.g. "csv:/tmp/out.csv".
    fn name(&self) -> &str;
    /// A [`Renderer`] that formats records exactly as this exporter writes
    /// them, for another thread to run (the pipeline lets a shard format
    /// while the exporter thread lags); `None` (the default) when the
    /// exporter has no text to render.
    fn renderer(&self) -> Option<Renderer> {
        None
    }
    /// Whether this output reads the records' packet size and
    /// inter-arrival statistics ([`crate::flow::record::FlowRecord::size`],
    /// [`crate::flow::record::FlowRecord::iat`]). When no flow output of a
    /// run does, the pipeline builds records without them (they stay
    /// `None`). Default: it does.
    fn reads_moments(&self) -> bool {
        true
    }
    /// Whether this output reads the records' label cells (the fields of
    /// `crate::classify::labeller::FIELDS` at the end of
    /// [`crate::flow::record::RecordBatch::analyzed`]; the analyzers' and
    /// the sampling cells before them are there either way). When no flow
    /// output of a run does, records are labelled (their `app`, the
    /// summary's counts) without their label cells. Default: it does.
    fn reads_label_cells(&self) -> bool {
        true
    }
    /// Writes text made by this exporter's [`Renderer`] from `records`
    /// records, after everything already buffered. Only called for
    /// exporters that have a renderer.
    fn write_rendered(&mut self, text: &[u8], records: usize) -> Result<()> {
        let _ = records;
        Err(Error::Output {
            name: self.name().to_string(),
            reason: format!("cannot write {} bytes rendered elsewhere", text.len()),
        })
    }
    /// Writes out every record buffered so far and flushes the writer,
    /// without ending the output (a live run calls it about once a second
    /// after records were written, so a reader of the file sees them).
    /// Default: nothing is buffered.
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    /// Reopens a file output at its path (log rotation: SIGHUP). What is
    /// buffered goes to the file open until now, which is flushed; if the
    /// path now names another file or none, it is created (truncated, as
    /// at the start; CSV writes its header again) and `Ok(true)` returned.
    /// `Ok(false)`: nothing was reopened (the path still names the open
    /// file, or the output is not a file: standard output, memory, null).
    fn reopen(&mut self) -> Result<bool> {
        Ok(false)
    }
}

/// The error of an output given records of a kind it does not take.
pub(crate) fn wrong_kind(name: &str, takes: &Kind, given: &Kind, n: usize) -> Error {
    Error::Output {
        name: name.to_string(),
        reason: format!(
            "takes {} records, not {n} {} records",
            takes.name, given.name
        ),
    }
}

/// Formats records into text on any thread: a copy of an exporter (same
/// format, same options, no header) whose output is kept in memory, or a
/// function that appends the text itself (`Renderer::direct`, no copy
/// through a writer).
pub struct Renderer {
    how: Rendering,
}

/// How a [`Renderer`] makes its text.
enum Rendering {
    /// An exporter writing into shared memory.
    Exporter {
        ex: Box<dyn Exporter>,
        text: Arc<Mutex<Vec<u8>>>,
    },
    /// A function appending a batch's text to the vector it is given.
    Direct(Box<RenderFn>),
}

/// What [`Renderer::direct`] runs.
type RenderFn = dyn FnMut(&RecordBatch, &mut Vec<u8>) + Send;

impl Renderer {
    /// A renderer around `make`, which builds the headerless exporter over
    /// the writer it is given.
    pub fn new(make: impl FnOnce(Box<dyn Write + Send>) -> Box<dyn Exporter>) -> Renderer {
        let text = Arc::new(Mutex::new(Vec::new()));
        let ex = make(Box::new(SharedText(text.clone())));
        Renderer {
            how: Rendering::Exporter { ex, text },
        }
    }

    /// A renderer that runs `f` to append the text of a batch to a vector.
    pub(crate) fn direct(f: impl FnMut(&RecordBatch, &mut Vec<u8>) + Send + 'static) -> Renderer {
        Renderer {
            how: Rendering::Direct(Box::new(f)),
        }
    }

    /// Appends the text of every record of the (materialized) `batch` to
    /// `out`.
    pub(crate) fn render(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) {
        match &mut self.how {
            Rendering::Exporter { ex, text } => {
                // Writing to memory cannot fail.
                let _ = ex.write_batch(batch);
                let _ = ex.finish();
                let mut text = text.lock().unwrap_or_else(|p| p.into_inner());
                out.append(&mut text);
            }
            Rendering::Direct(f) => f(batch, out),
        }
    }
}

/// A writer appending to a vector another owner can take the bytes from.
struct SharedText(Arc<Mutex<Vec<u8>>>);

impl Write for SharedText {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        v.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Comma-separated values with one header line.
    Csv,
    /// One JSON object per line.
    JsonLines,
    /// Discards records.
    Null,
    /// IPFIX messages ([`ipfix`]): a `.ipfix` file, or a collector named
    /// `ipfix+udp://HOST:PORT` or `ipfix+tcp://HOST:PORT`.
    Ipfix,
    /// Apache Parquet, typed columns (cargo feature `parquet`; module `export::parquet`).
    #[cfg(feature = "parquet")]
    Parquet,
    /// NetFlow packets (`netflow`) to a collector named
    /// `netflow9+udp://HOST:PORT` (v9) or `netflow5+udp://HOST:PORT` (v5);
    /// over a writer, v9 packets one after the other.
    Netflow,
    /// Batches inserted into a ClickHouse table (`clickhouse`) named
    /// `clickhouse+http://HOST:PORT/TABLE`; over a writer, the JSON lines
    /// it would post.
    ClickHouse,
}

/// The formats an output can be named for, in messages.
#[cfg(not(feature = "parquet"))]
const KNOWN: &str = "known: .csv, .jsonl or .ndjson, .ipfix, ipfix+udp://HOST:PORT, \
                     ipfix+tcp://HOST:PORT, netflow9+udp://HOST:PORT, \
                     netflow5+udp://HOST:PORT, \
                     clickhouse+http://HOST:PORT/TABLE, or \"-\" (standard output) with -f";
#[cfg(feature = "parquet")]
const KNOWN: &str = "known: .csv, .jsonl or .ndjson, .parquet, .ipfix, \
                     ipfix+udp://HOST:PORT, ipfix+tcp://HOST:PORT, \
                     netflow9+udp://HOST:PORT, netflow5+udp://HOST:PORT, \
                     clickhouse+http://HOST:PORT/TABLE, or \"-\" (standard output) with -f";

/// An output name that does not say a record format (see
/// [`Format::for_output`]); each names the output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutputNameError {
    /// An IPFIX or NetFlow collector with another format forced.
    #[error("{}: a collector, but -f says {} (drop -f)", path.display(), forced.name())]
    Collector {
        /// The output.
        path: PathBuf,
        /// The format `-f` names.
        forced: Format,
    },
    /// A file name given with `-f null`.
    #[error(
        "{}: -f null discards the records and writes no file (drop -o {})",
        path.display(),
        path.display()
    )]
    NullNamed {
        /// The output.
        path: PathBuf,
    },
    /// An extension that says another format than `-f`.
    #[error(
        "{}: the name says {} but -f says {} (drop -f or rename the output)",
        path.display(),
        named.name(),
        forced.name()
    )]
    Contradicts {
        /// The output.
        path: PathBuf,
        /// The format the name says.
        named: Format,
        /// The format `-f` names.
        forced: Format,
    },
    /// A `.json` name for JSON lines.
    #[error(
        "{}: records are written as JSON lines (one object per line), not one JSON document: \
         name the file .jsonl or .ndjson",
        path.display()
    )]
    Json {
        /// The output.
        path: PathBuf,
    },
    /// An extension of no record format.
    #[error("{}: unknown extension .{ext} ({KNOWN})", path.display())]
    Extension {
        /// The output.
        path: PathBuf,
        /// The extension (lower case).
        ext: String,
    },
    /// No extension, and not a device or FIFO.
    #[error("{}: no extension to tell the record format ({KNOWN})", path.display())]
    NoExtension {
        /// The output.
        path: PathBuf,
    },
}

impl Format {
    /// The format a file name's extension names: `.csv`, or `.jsonl`,
    /// `.ndjson` (case ignored); `None` for any other name, `.json`
    /// included (see [`Format::for_output`]).
    pub fn from_path(p: &Path) -> Option<Format> {
        let ext = p.extension()?.to_str()?;
        match ext.to_ascii_lowercase().as_str() {
            "csv" => Some(Format::Csv),
            "jsonl" | "ndjson" => Some(Format::JsonLines),
            "ipfix" => Some(Format::Ipfix),
            #[cfg(feature = "parquet")]
            "parquet" => Some(Format::Parquet),
            _ => None,
        }
    }

    /// The format of the record output named `path` when `-f` gave
    /// `forced`, or why the name does not fit (a usage error; nothing is
    /// opened but the metadata of an extensionless name):
    /// - `-` (standard output): `forced`, else CSV;
    /// - `.csv`, `.jsonl`, `.ndjson`: that format; a `forced` other format
    ///   contradicts it (`-f null` writes no file, so it takes no file
    ///   name, only a device such as `/dev/null`);
    /// - `.json`: refused, a `.json` file is read as one JSON document and
    ///   these are JSON lines;
    /// - any other extension: refused;
    /// - no extension: `forced`, or CSV for what is not a regular file
    ///   (`/dev/null`, a FIFO), else refused.
    pub fn for_output(
        path: &Path,
        forced: Option<Format>,
    ) -> std::result::Result<Format, OutputNameError> {
        let path_buf = || path.to_path_buf();
        if ipfix::is_network(path) {
            return match forced {
                None | Some(Format::Ipfix) => Ok(Format::Ipfix),
                Some(f) => Err(OutputNameError::Collector {
                    path: path_buf(),
                    forced: f,
                }),
            };
        }
        if clickhouse::is_network(path) {
            return match forced {
                None | Some(Format::ClickHouse) => Ok(Format::ClickHouse),
                Some(f) => Err(OutputNameError::Collector {
                    path: path_buf(),
                    forced: f,
                }),
            };
        }
        if netflow::is_network(path) {
            return match forced {
                None | Some(Format::Netflow) => Ok(Format::Netflow),
                Some(f) => Err(OutputNameError::Collector {
                    path: path_buf(),
                    forced: f,
                }),
            };
        }
        if path.as_os_str() == "-" {
            return Ok(forced.unwrap_or(Format::Csv));
        }
        let special = || std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir());
        if forced == Some(Format::Null) {
            if special() {
                return Ok(Format::Null);
            }
            return Err(OutputNameError::NullNamed { path: path_buf() });
        }
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match (Format::from_path(path), ext.as_deref(), forced) {
            (Some(named), _, Some(f)) if f != named => Err(OutputNameError::Contradicts {
                path: path_buf(),
                named,
                forced: f,
            }),
            (Some(named), _, _) => Ok(named),
            (None, Some("json"), _) => Err(OutputNameError::Json { path: path_buf() }),
            (None, Some(e), _) => Err(OutputNameError::Extension {
                path: path_buf(),
                ext: e.to_string(),
            }),
            (None, None, Some(f)) => Ok(f),
            (None, None, None) if special() => Ok(Format::Csv),
            (None, None, None) => Err(OutputNameError::NoExtension { path: path_buf() }),
        }
    }

    /// Parses a format name (case-insensitive): `csv`; `jsonl`, `json`,
    /// `ndjson`, `jsonlines`, `json-lines`; `null`, `none`.
    pub fn parse(s: &str) -> Option<Format> {
        match s.to_ascii_lowercase().as_str() {
            "csv" => Some(Format::Csv),
            "jsonl" | "json" | "ndjson" | "jsonlines" | "json-lines" => Some(Format::JsonLines),
            "null" | "none" => Some(Format::Null),
            "ipfix" => Some(Format::Ipfix),
            #[cfg(feature = "parquet")]
            "parquet" => Some(Format::Parquet),
            _ => None,
        }
    }

    /// Short name (`csv`, `jsonl`, `null`), used as the exporter name prefix.
    pub fn name(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::JsonLines => "jsonl",
            Format::Null => "null",
            Format::Ipfix => "ipfix",
            #[cfg(feature = "parquet")]
            Format::Parquet => "parquet",
            Format::Netflow => "netflow",
            Format::ClickHouse => "clickhouse",
        }
    }
}

/// What every exporter needs to know about the run.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// N: number of early-packet columns.
    pub early_packets: usize,
    /// `Verdict.class` → name; empty = no model.
    pub class_names: Arc<[String]>,
    /// The fields the per-flow analyzers of the run add after a record's
    /// own ([`crate::analyze`]; their values are in
    /// [`RecordBatch::analyzed`]); empty when none is on.
    pub analyzed: Arc<[crate::schema::Field]>,
    /// Seed of the records' Community ID (`community_id`); 0 (the
    /// default) is the seed other tools use unless told otherwise.
    pub community_id_seed: u16,
    /// Leave the Community ID out: the field is empty (null) in every
    /// record and IPFIX's templates go without its element. Default false.
    pub no_community_id: bool,
}

impl ExportOptions {
    /// The Community ID's seed, `None` when the run leaves it out
    /// ([`ExportOptions::no_community_id`]).
    pub fn community_id(&self) -> Option<u16> {
        (!self.no_community_id).then_some(self.community_id_seed)
    }
}

/// Opens the output (`-` = stdout) and returns the exporter; errors name the
/// file. [`Format::Null`] opens nothing.
pub fn open(format: Format, path: &Path, opts: &ExportOptions) -> Result<Box<dyn Exporter>> {
    if format == Format::Null {
        return Ok(Box::new(null::NullExporter::new()));
    }
    if format == Format::Ipfix && path.as_os_str() != "-" {
        return ipfix::open(path, opts, &ipfix::IpfixOptions::default());
    }
    if format == Format::Netflow && path.as_os_str() != "-" {
        return netflow::open(path, opts, &netflow::NetflowOptions::default());
    }
    if format == Format::ClickHouse && path.as_os_str() != "-" {
        return clickhouse::open(path, opts, clickhouse::HOLD);
    }
    #[cfg(feature = "parquet")]
    if format == Format::Parquet && path.as_os_str() != "-" {
        let p = parquet::ParquetOptions::default();
        return Ok(Box::new(parquet::ParquetExporter::create_flows(
            path, opts, &p,
        )?));
    }
    let (w, name) = open_writer(format, path)?;
    Ok(over(format, w, &name, opts))
}

/// Opens the output of records of `kind` (`-` = stdout) and returns its
/// exporter (CSV or JSON lines from the kind's field table, Parquet,
/// IPFIX for early-verdict events); errors name the file. [`Format::Null`] opens
/// nothing. For flow records use [`open`].
pub fn open_rows(kind: &'static Kind, format: Format, path: &Path) -> Result<Box<dyn Exporter>> {
    if format == Format::Null {
        return Ok(Box::new(null::NullExporter::of(kind)));
    }
    if format == Format::Ipfix && kind.is(&crate::flow::events::VERDICTS) {
        return ipfix::open_events(path, &ipfix::IpfixOptions::default());
    }
    if format == Format::Netflow || format == Format::ClickHouse {
        return Err(Error::Output {
            name: format!("{}:{}", format.name(), path.display()),
            reason: format!("takes flow records, not {} records", kind.name),
        });
    }
    if format == Format::Ipfix {
        return Err(Error::Output {
            name: format!("ipfix:{}", path.display()),
            reason: format!(
                "IPFIX takes flow records and early-verdict events, not {} records",
                kind.name
            ),
        });
    }
    #[cfg(feature = "parquet")]
    if format == Format::Parquet && path.as_os_str() != "-" {
        let p = parquet::ParquetOptions::default();
        return Ok(Box::new(parquet::ParquetExporter::create_rows(
            kind, path, &p,
        )?));
    }
    let (w, name) = open_writer(format, path)?;
    Ok(rows_over(kind, format, w, &name))
}

/// The writer of a text output at `path` (`-` = stdout) and its name.
fn open_writer(format: Format, path: &Path) -> Result<(Writer, String)> {
    Ok(if path.as_os_str() == "-" {
        (
            Writer::Other(Box::new(std::io::stdout())),
            format!("{}:stdout", format.name()),
        )
    } else {
        let w = FileOut::create(path).map_err(|e| Error::io(path, e))?;
        (
            Writer::File(w),
            format!("{}:{}", format.name(), path.display()),
        )
    })
}

/// Builds an exporter over any writer (in memory, a pipe, a socket).
pub fn to_writer(
    format: Format,
    w: Box<dyn Write + Send>,
    name: &str,
    opts: &ExportOptions,
) -> Box<dyn Exporter> {
    over(format, Writer::Other(w), name, opts)
}

/// Builds an exporter of records of `kind` over any writer (as
/// [`open_rows`] does for files).
pub fn rows_to_writer(
    kind: &'static Kind,
    format: Format,
    w: Box<dyn Write + Send>,
    name: &str,
) -> Box<dyn Exporter> {
    rows_over(kind, format, Writer::Other(w), name)
}

fn rows_over(kind: &'static Kind, format: Format, w: Writer, name: &str) -> Box<dyn Exporter> {
    match format {
        Format::Csv => Box::new(rows::RowsExporter::over(kind, w, name, false)),
        Format::JsonLines => Box::new(rows::RowsExporter::over(kind, w, name, true)),
        Format::Null => Box::new(null::NullExporter::of(kind)),
        // IPFIX takes early-verdict events; rows of other kinds given to a
        // flow exporter are refused (`Exporter::write_rows`).
        Format::Ipfix if kind.is(&crate::flow::events::VERDICTS) => {
            ipfix::events_to_writer(Box::new(w), name, &ipfix::IpfixOptions::default())
        }
        Format::Ipfix => ipfix_over(w, name, &ExportOptions::default()),
        // Refuses rows of other kinds (`Exporter::write_rows`).
        Format::Netflow => netflow_over(w, name, &ExportOptions::default()),
        Format::ClickHouse => Box::new(rows::RowsExporter::over(kind, w, name, true)),
        #[cfg(feature = "parquet")]
        Format::Parquet => parquet::boxed(
            parquet::ParquetExporter::rows_to_writer(
                kind,
                Box::new(w),
                name,
                &parquet::ParquetOptions::default(),
            ),
            name,
            kind,
        ),
    }
}

fn over(format: Format, w: Writer, name: &str, opts: &ExportOptions) -> Box<dyn Exporter> {
    match format {
        Format::Csv => Box::new(csv::CsvExporter::over(w, name, opts, true)),
        Format::JsonLines => Box::new(jsonl::JsonLinesExporter::over(w, name, opts)),
        Format::Null => Box::new(null::NullExporter::new()),
        Format::Ipfix => ipfix_over(w, name, opts),
        Format::Netflow => netflow_over(w, name, opts),
        Format::ClickHouse => Box::new(jsonl::JsonLinesExporter::over(w, name, opts)),
        #[cfg(feature = "parquet")]
        Format::Parquet => parquet::boxed(
            parquet::ParquetExporter::flows_to_writer(
                Box::new(w),
                name,
                opts,
                &parquet::ParquetOptions::default(),
            ),
            name,
            &fields::FLOWS,
        ),
    }
}

/// IPFIX messages written to `w` with the default IPFIX options.
fn ipfix_over(w: Writer, name: &str, opts: &ExportOptions) -> Box<dyn Exporter> {
    ipfix::to_writer(Box::new(w), name, opts, &ipfix::IpfixOptions::default())
}

/// NetFlow v9 packets written to `w` with the default options.
fn netflow_over(w: Writer, name: &str, opts: &ExportOptions) -> Box<dyn Exporter> {
    netflow::to_writer(
        netflow::Version::V9,
        Box::new(w),
        name,
        opts,
        &netflow::NetflowOptions::default(),
    )
}

/// The early packets of record `i`, at most `n`; empty when the batch is
/// inconsistent.
#[inline]
pub(crate) fn early_of(batch: &RecordBatch, i: usize, n: usize) -> &[EarlyPkt] {
    let len = (batch.records[i].early_len as usize)
        .min(batch.stride)
        .min(n);
    let s = i * batch.stride;
    batch.early.get(s..s + len).unwrap_or(&[])
}

/// How many records ahead of the one being written the next records are
/// asked into the cache.
const PREFETCH_AHEAD: usize = 4;

/// Asks the cache for record `i + PREFETCH_AHEAD` of the batch and its early
/// packets (records arrive from another core; a hint, never a fault).
#[inline(always)]
pub(crate) fn prefetch_ahead(batch: &RecordBatch, i: usize) {
    let j = i + PREFETCH_AHEAD;
    let r = batch.records.as_ptr().wrapping_add(j).cast::<u8>();
    let size = std::mem::size_of::<FlowRecord>();
    let mut off = 0;
    while off < size {
        crate::prefetch::read(r.wrapping_add(off));
        off += 64;
    }
    crate::prefetch::read(batch.early.as_ptr().wrapping_add(j * batch.stride));
}

/// Class names pre-escaped for one format, and the text for "unknown".
pub(crate) struct AppNames {
    names: Vec<Snip>,
    unknown: Snip,
}

impl AppNames {
    pub(crate) fn new(class_names: &[String], escape: fn(&str) -> Vec<u8>) -> Self {
        AppNames {
            names: class_names.iter().map(|s| Snip::new(&escape(s))).collect(),
            unknown: Snip::new(&escape("unknown")),
        }
    }

    /// Length of the longest name once escaped.
    pub(crate) fn max_len(&self) -> usize {
        self.names
            .iter()
            .map(Snip::len)
            .chain([self.unknown.len()])
            .max()
            .unwrap_or(0)
    }

    /// Text of a verdict's class: its name, or "unknown" for
    /// [`Verdict::UNKNOWN`], without a model, or for an index the model does
    /// not have.
    #[inline]
    pub(crate) fn get(&self, v: &Verdict) -> &Snip {
        if v.class == Verdict::UNKNOWN {
            return &self.unknown;
        }
        self.names.get(v.class as usize).unwrap_or(&self.unknown)
    }
}

/// The fixed texts of one format, built once per exporter: JSON keys and
/// the names of tunnels and end reasons as [`Snip`]s.
pub(crate) struct Texts {
    /// JSON: `{"name":` for the first field, `,"name":` for the others,
    /// with the opening quote of string values included. Empty for CSV.
    keys: Vec<Snip>,
    /// Name of the tunnel kind whose `as u8` is the index.
    tunnels: Vec<(TunnelKind, Snip)>,
    /// Name of the end reason whose `as usize` is the index.
    ends: Vec<(EndReason, Snip)>,
    /// Seed of the Community ID; `None`: the field is left empty.
    seed: Option<u16>,
}

impl Texts {
    /// Texts for CSV (`json = false`) or JSON lines, Community IDs with
    /// `seed` (`None`: none).
    pub(crate) fn new(json: bool, seed: Option<u16>) -> Self {
        let keys = if json {
            fields::FIELDS
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let open = if i == 0 { "{" } else { "," };
                    // The app is pre-escaped with its quotes; a Community
                    // ID may be null.
                    let quote = if f.ty == crate::schema::FieldType::Str
                        && f.name != "app"
                        && f.name != "community_id"
                    {
                        "\""
                    } else {
                        ""
                    };
                    Snip::new(format!("{open}\"{}\":{quote}", f.name).as_bytes())
                })
                .collect()
        } else {
            Vec::new()
        };
        let tunnels = (0..=u8::MAX)
            .map(TunnelKind::from_u8)
            .enumerate()
            .take_while(|(i, k)| *k as usize == *i)
            .map(|(_, k)| (k, Snip::new(k.name().as_bytes())))
            .collect();
        let ends = EndReason::ALL
            .iter()
            .enumerate()
            .take_while(|(i, e)| **e as usize == *i)
            .map(|(_, e)| (*e, Snip::new(e.name().as_bytes())))
            .collect();
        Texts {
            keys,
            tunnels,
            ends,
            seed,
        }
    }

    #[inline(always)]
    fn tunnel<const C: bool>(&self, buf: &mut Cursor<'_, C>, k: TunnelKind) {
        match self.tunnels.get(k as usize) {
            Some((t, s)) if *t == k => buf.snip(s),
            _ => buf.bytes(k.name().as_bytes()),
        }
    }

    #[inline(always)]
    fn end<const C: bool>(&self, buf: &mut Cursor<'_, C>, e: EndReason) {
        match self.ends.get(e as usize) {
            Some((t, s)) if *t == e => buf.snip(s),
            _ => buf.bytes(e.name().as_bytes()),
        }
    }
}

/// Writes the scalar fields of [`fields::FIELDS`], in that order, for CSV
/// (`JSON = false`: comma-separated) or JSON (`JSON = true`: key `i` of
/// `texts` before field `i`, starting with `{`). `app` is pre-escaped for
/// the format; `early_len` is the number of early packets written after
/// these fields. Takes at most [`text::MAX_FIELD`] bytes per field plus
/// `app.len()`.
#[inline(always)]
pub(crate) fn write_scalars<const JSON: bool, const C: bool>(
    buf: &mut Cursor<'_, C>,
    texts: &Texts,
    r: &FlowRecord,
    app: &Snip,
    early_len: usize,
) {
    // Field positions by name (resolved when compiling), and the runs the
    // loops below walk.
    macro_rules! at {
        ($name:literal) => {{
            const I: usize = fields::index_of($name);
            I
        }};
    }
    const {
        let s = at!("fwd_size_min");
        assert!(at!("bwd_size_min") == s + 4 && at!("fwd_iat_min") == s + 8);
        assert!(at!("bwd_iat_min") == s + 12 && at!("fwd_fin") == s + 16);
        assert!(at!("end_reason") == s + 32 && at!("bwd_cwr") == s + 31);
    };
    // Field i starts with its JSON key (string keys include the opening
    // quote) or, in CSV, a comma unless it is the first.
    macro_rules! key {
        ($i:expr) => {{
            if JSON {
                buf.snip(&texts.keys[$i]);
            } else if $i > 0 {
                buf.byte(b',');
            }
        }};
    }
    // Text that never needs escaping (addresses, MACs, fixed names).
    macro_rules! plain {
        ($i:expr, $put:expr) => {{
            key!($i);
            $put;
            if JSON {
                buf.byte(b'"');
            }
        }};
    }
    macro_rules! uint {
        ($i:expr, $v:expr) => {{
            if JSON || $i == 0 {
                key!($i);
                buf.u64(u64::from($v));
            } else {
                buf.sep_u64(b',', u64::from($v));
            }
        }};
    }
    macro_rules! float {
        ($i:expr, $v:expr) => {{
            key!($i);
            if !buf.f64($v) && JSON {
                buf.bytes(b"null");
            }
        }};
    }
    let k = &r.key;
    plain!(at!("src"), buf.addr(&k.src));
    plain!(at!("dst"), buf.addr(&k.dst));
    uint!(at!("sport"), k.sport);
    uint!(at!("dport"), k.dport);
    // Not measured: an empty CSV field, JSON null.
    macro_rules! none {
        ($i:expr) => {{
            key!($i);
            if JSON {
                buf.bytes(b"null");
            }
        }};
    }
    uint!(at!("proto"), k.proto);
    match r.icmp {
        Some(m) => {
            uint!(at!("icmp_type"), m.ty);
            uint!(at!("icmp_code"), m.code);
        }
        None => {
            none!(at!("icmp_type"));
            none!(at!("icmp_code"));
        }
    }
    uint!(at!("ip_version"), k.ip_version);
    uint!(at!("vlan"), k.vlan);
    plain!(at!("tunnel"), texts.tunnel(buf, k.tunnel));
    uint!(at!("tunnel_id"), k.tunnel_id);
    plain!(at!("src_mac"), buf.mac(&r.src_mac));
    plain!(at!("dst_mac"), buf.mac(&r.dst_mac));
    key!(at!("community_id"));
    match texts
        .seed
        .and_then(|s| community_id::of_record(s, k, r.icmp))
    {
        Some(id) if JSON => {
            buf.byte(b'"');
            buf.bytes(id.as_bytes());
            buf.byte(b'"');
        }
        Some(id) => buf.bytes(id.as_bytes()),
        None if JSON => buf.bytes(b"null"),
        None => {}
    }
    uint!(at!("first_ts"), r.first_ts);
    uint!(at!("last_ts"), r.last_ts);
    uint!(at!("duration_ns"), r.last_ts.saturating_sub(r.first_ts));
    uint!(at!("fwd_packets"), r.packets[0]);
    uint!(at!("bwd_packets"), r.packets[1]);
    uint!(at!("fwd_bytes"), r.bytes[0]);
    uint!(at!("bwd_bytes"), r.bytes[1]);
    let mut i = at!("fwd_size_min");
    for s in [&r.size[0], &r.size[1], &r.iat[0], &r.iat[1]] {
        match s {
            Some(s) => {
                uint!(i, s.min);
                uint!(i + 1, s.max);
                float!(i + 2, s.mean);
                float!(i + 3, s.std);
            }
            None => {
                for j in i..i + 4 {
                    none!(j);
                }
            }
        }
        i += 4;
    }
    match &r.tcp_flags {
        Some(counts) => {
            let flags = counts.as_flattened();
            if !JSON && flags.iter().all(|&c| c < 10) {
                // The common case of one-digit counts: ",d" sixteen times.
                buf.comma_digits16(counts);
                i += flags.len();
            } else {
                for &c in flags {
                    uint!(i, c);
                    i += 1;
                }
            }
        }
        None => {
            for _ in 0..16 {
                none!(i);
                i += 1;
            }
        }
    }
    debug_assert_eq!(i, at!("end_reason"));
    plain!(at!("end_reason"), texts.end(buf, r.end));
    key!(at!("app"));
    buf.snip(app);
    float!(at!("app_confidence"), f64::from(r.verdict.confidence));
    uint!(at!("decided_at_packet"), r.verdict.at_packet);
    uint!(at!("early_len"), early_len as u64);
    const { assert!(at!("early_len") + 1 == fields::FIELDS.len()) };
}

#[cfg(test)]
mod compliance;
#[cfg(test)]
mod compliance_ipfix;
#[cfg(test)]
mod compliance_rows;
#[cfg(test)]
mod tests;
