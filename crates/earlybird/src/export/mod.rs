//! Exporters: finished flow records out to files or stdout.
//!
//! Contract: an [`Exporter`] takes [`RecordBatch`]es and writes every record
//! in its format: CSV (`csv.rs`), JSON lines (`jsonl.rs`) or nothing
//! (`null.rs`, for benchmarks and dry runs). The fields, their order and
//! meaning are defined once in [`fields`] and documented in
//! `docs/RECORD_FIELDS.md`. Records are formatted into one byte buffer
//! allocated when the exporter is built (no allocation per record) that is
//! handed to the output in chunks of about [`CHUNK`] bytes, always at record
//! boundaries, and at [`Exporter::finish`].
//!
//! What can fail: opening the output ([`Error::Io`] naming the path) and
//! writing to it ([`Error::Output`] naming the exporter, e.g.
//! `csv:/tmp/out.csv`). A write error is sticky: every later
//! `write_batch`/`finish` of that exporter returns it again. Records are
//! trusted values; an inconsistent batch (early array shorter than its
//! stride says) is written with fewer early packets, never a panic.

pub mod csv;
pub mod fields;
pub mod jsonl;
pub mod null;
pub(crate) mod text;

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::flow::record::{EarlyPkt, FlowRecord, RecordBatch, Verdict};
use text::TextBuf;

/// Size at which the formatted text is handed to the output.
pub const CHUNK: usize = 256 * 1024;

/// A sink for finished flow records.
///
/// ```
/// use earlybird::export::{to_writer, ExportOptions, Format};
/// use earlybird::flow::record::{FlowRecord, RecordBatch};
///
/// let opts = ExportOptions { early_packets: 4, class_names: vec![].into() };
/// let mut ex = to_writer(Format::Csv, Box::new(std::io::sink()), "csv:sink", &opts);
/// let mut batch = RecordBatch::with_capacity(1, 4);
/// batch.push(FlowRecord::default(), &[]);
/// ex.write_batch(&batch)?;
/// ex.finish()?;
/// assert_eq!(ex.name(), "csv:sink");
/// # Ok::<(), earlybird::Error>(())
/// ```
pub trait Exporter: Send {
    /// Writes every record of the batch.
    fn write_batch(&mut self, batch: &RecordBatch) -> Result<()>;
    /// Flushes everything buffered; called once at the end (also after an
    /// error elsewhere).
    fn finish(&mut self) -> Result<()>;
    /// Name for messages, e.g. "csv:/tmp/out.csv".
    fn name(&self) -> &str;
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
}

impl Format {
    /// The format implied by a file name's extension: `.csv`, or `.jsonl`,
    /// `.ndjson`, `.json`; `None` otherwise (the caller picks a default).
    pub fn from_path(p: &Path) -> Option<Format> {
        let ext = p.extension()?.to_str()?;
        match ext.to_ascii_lowercase().as_str() {
            "csv" => Some(Format::Csv),
            "jsonl" | "ndjson" | "json" => Some(Format::JsonLines),
            _ => None,
        }
    }

    /// Parses a format name (case-insensitive): `csv`; `jsonl`, `json`,
    /// `ndjson`, `jsonlines`, `json-lines`; `null`, `none`.
    pub fn parse(s: &str) -> Option<Format> {
        match s.to_ascii_lowercase().as_str() {
            "csv" => Some(Format::Csv),
            "jsonl" | "json" | "ndjson" | "jsonlines" | "json-lines" => Some(Format::JsonLines),
            "null" | "none" => Some(Format::Null),
            _ => None,
        }
    }

    /// Short name (`csv`, `jsonl`, `null`), used as the exporter name prefix.
    pub fn name(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::JsonLines => "jsonl",
            Format::Null => "null",
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
}

/// Opens the output (`-` = stdout) and returns the exporter; errors name the
/// file. [`Format::Null`] opens nothing.
pub fn open(format: Format, path: &Path, opts: &ExportOptions) -> Result<Box<dyn Exporter>> {
    if format == Format::Null {
        return Ok(Box::new(null::NullExporter::new()));
    }
    let (w, name): (Box<dyn Write + Send>, String) = if path.as_os_str() == "-" {
        (
            Box::new(std::io::stdout()),
            format!("{}:stdout", format.name()),
        )
    } else {
        let f = File::create(path).map_err(|e| Error::io(path, e))?;
        (Box::new(f), format!("{}:{}", format.name(), path.display()))
    };
    Ok(to_writer(format, w, &name, opts))
}

/// Builds an exporter over any writer (tests, Python later).
pub fn to_writer(
    format: Format,
    w: Box<dyn Write + Send>,
    name: &str,
    opts: &ExportOptions,
) -> Box<dyn Exporter> {
    match format {
        Format::Csv => Box::new(csv::CsvExporter::new(w, name, opts)),
        Format::JsonLines => Box::new(jsonl::JsonLinesExporter::new(w, name, opts)),
        Format::Null => Box::new(null::NullExporter::new()),
    }
}

/// The formatted-text buffer and the writer it drains into.
pub(crate) struct Output {
    w: Box<dyn Write + Send>,
    /// Formatted text not yet written.
    pub(crate) buf: TextBuf,
    /// Most bytes one record can take.
    max_record: usize,
    name: String,
    /// The first write error, returned again by every later call.
    failed: Option<String>,
}

/// Most bytes one record can take with `n` early packets and class names
/// of at most `app_max` bytes once escaped.
pub(crate) fn max_record_len(n: usize, app_max: usize) -> usize {
    fields::FIELDS.len() * text::MAX_FIELD
        + app_max
        + n * fields::EARLY_FIELDS.len() * text::MAX_EARLY_VALUE
        + 128
}

impl Output {
    /// An output whose records take at most `max_record` bytes.
    pub(crate) fn new(w: Box<dyn Write + Send>, name: &str, max_record: usize) -> Self {
        Output {
            w,
            buf: TextBuf::new(CHUNK + max_record),
            max_record,
            name: name.to_string(),
            failed: None,
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    fn error(&self, reason: &str) -> Error {
        Error::Output {
            name: self.name.clone(),
            reason: reason.to_string(),
        }
    }

    /// Fails when an earlier write failed.
    pub(crate) fn check(&self) -> Result<()> {
        match &self.failed {
            Some(r) => Err(self.error(r)),
            None => Ok(()),
        }
    }

    /// Makes room for one more record, writing the buffer out when needed.
    #[inline]
    pub(crate) fn room_for_record(&mut self) -> Result<()> {
        if self.buf.room() < self.max_record {
            self.drain()
        } else {
            Ok(())
        }
    }

    /// Writes the whole buffer out.
    pub(crate) fn drain(&mut self) -> Result<()> {
        self.check()?;
        if self.buf.is_empty() {
            return Ok(());
        }
        let r = self.w.write_all(self.buf.as_slice());
        self.buf.clear();
        r.map_err(|e| self.fail(e))
    }

    /// Writes the buffer and flushes the writer.
    pub(crate) fn finish(&mut self) -> Result<()> {
        self.drain()?;
        self.w.flush().map_err(|e| self.fail(e))
    }

    fn fail(&mut self, e: std::io::Error) -> Error {
        let reason = e.to_string();
        let err = self.error(&reason);
        self.failed = Some(reason);
        err
    }
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

/// Class names pre-escaped for one format, and the text for "unknown".
pub(crate) struct AppNames {
    names: Vec<Vec<u8>>,
    unknown: Vec<u8>,
}

impl AppNames {
    pub(crate) fn new(class_names: &[String], escape: fn(&str) -> Vec<u8>) -> Self {
        AppNames {
            names: class_names.iter().map(|s| escape(s)).collect(),
            unknown: escape("unknown"),
        }
    }

    /// Length of the longest name once escaped.
    pub(crate) fn max_len(&self) -> usize {
        self.names
            .iter()
            .map(Vec::len)
            .chain([self.unknown.len()])
            .max()
            .unwrap_or(0)
    }

    /// Text of a verdict's class: its name, or "unknown" for
    /// [`Verdict::UNKNOWN`], without a model, or for an index the model does
    /// not have.
    #[inline]
    pub(crate) fn get(&self, v: &Verdict) -> &[u8] {
        if v.class == Verdict::UNKNOWN {
            return &self.unknown;
        }
        self.names
            .get(v.class as usize)
            .map_or(&self.unknown[..], |n| &n[..])
    }
}

/// Writes the scalar fields of [`fields::FIELDS`], in that order, for CSV
/// (`JSON = false`: comma-separated) or JSON (`JSON = true`: `keys[i]` before
/// field `i`, starting with `{`). `app` is pre-escaped for the format;
/// `early_len` is the number of early packets written after these fields.
/// Takes at most [`text::MAX_FIELD`] bytes per field plus `app.len()`.
#[inline]
pub(crate) fn write_scalars<const JSON: bool>(
    buf: &mut TextBuf,
    keys: &[Vec<u8>],
    r: &FlowRecord,
    app: &[u8],
    early_len: usize,
) {
    let mut i = 0usize;
    let mut key = |buf: &mut TextBuf| {
        if JSON {
            buf.bytes(&keys[i]);
        } else if i > 0 {
            buf.byte(b',');
        }
        i += 1;
    };
    // Text that never needs escaping (addresses, MACs, fixed names).
    macro_rules! plain {
        ($put:expr) => {{
            key(buf);
            if JSON {
                buf.byte(b'"');
            }
            $put;
            if JSON {
                buf.byte(b'"');
            }
        }};
    }
    macro_rules! uint {
        ($v:expr) => {{
            key(buf);
            buf.u64(u64::from($v));
        }};
    }
    macro_rules! float {
        ($v:expr) => {{
            key(buf);
            if !buf.f64($v) && JSON {
                buf.bytes(b"null");
            }
        }};
    }
    let k = &r.key;
    plain!(buf.addr(&k.src));
    plain!(buf.addr(&k.dst));
    uint!(k.sport);
    uint!(k.dport);
    uint!(k.proto);
    uint!(k.ip_version);
    uint!(k.vlan);
    plain!(buf.bytes(k.tunnel.name().as_bytes()));
    uint!(k.tunnel_id);
    plain!(buf.mac(&r.src_mac));
    plain!(buf.mac(&r.dst_mac));
    uint!(r.first_ts);
    uint!(r.last_ts);
    uint!(r.last_ts.saturating_sub(r.first_ts));
    uint!(r.packets[0]);
    uint!(r.packets[1]);
    uint!(r.bytes[0]);
    uint!(r.bytes[1]);
    for s in r.size.iter().chain(r.iat.iter()) {
        float!(s.min);
        float!(s.max);
        float!(s.mean);
        float!(s.std);
    }
    for dir in &r.tcp_flags {
        for &c in dir {
            uint!(c);
        }
    }
    plain!(buf.bytes(r.end.name().as_bytes()));
    key(buf);
    buf.bytes(app);
    float!(f64::from(r.verdict.confidence));
    uint!(r.verdict.at_packet);
    uint!(early_len as u64);
    debug_assert_eq!(i, fields::FIELDS.len());
}

#[cfg(test)]
mod compliance;
#[cfg(test)]
mod tests;
