//! Parquet exporter (cargo feature `parquet`): records as typed columns
//! through the Apache Arrow crates, for pandas/pyarrow, DuckDB and Polars.
//!
//! Contract: the columns are the CSV columns, same names, same order, one
//! Parquet column each, typed from the field table
//! ([`crate::schema::FieldType`] → [`arrow_type`]: `u8`…`u64` as unsigned
//! integers, `i8`/`i64` signed, `f64` double, text UTF-8; the Parquet types
//! are listed in `docs/RECORD_FIELDS.md`, [`FieldType::parquet_name`]). Flow records
//! ([`super::fields::FIELDS`]): the scalar fields, then `pkt{i}_size`,
//! `pkt{i}_dir`, `pkt{i}_iat_us` for i = 1..=N, then the analyzers' fields
//! ([`ExportOptions::analyzed`]). Records of any other kind ([`RowBatch`]):
//! the kind's fields. Every column is nullable; a value is null exactly
//! where CSV writes an empty field for a value not measured or not finite
//! (ICMP type and code of other protocols, statistics at `--stats basic`,
//! early packets a flow did not have, NaN and infinite floats, a null
//! cell). Text that CSV writes empty without it being a missing value (the
//! tunnel of a flow without one) is an empty string. Floats keep their full
//! `f64` value (CSV rounds them to three decimals). Each column carries the
//! field's unit and description as Arrow field metadata.
//!
//! A cell of another kind whose value does not fit its column (text in a
//! number column, a number out of the column's range, a float in an
//! integer column) is written as null and counted
//! ([`ParquetExporter::unfit`]); a number in a text column is written as
//! its text. Nothing here panics on any value.
//!
//! Rows are gathered into Arrow arrays per incoming batch and handed to the
//! Parquet writer, which encodes them into the row group in progress and
//! writes the row group out once it holds [`ParquetOptions::row_group_rows`]
//! rows, so memory is bounded by one encoded row group plus one batch.
//! Pages are compressed with zstd ([`ParquetOptions::zstd_level`]).
//!
//! Readability: a Parquet file is readable only once its footer is written.
//! [`Exporter::finish`] (end of input, and on SIGINT/SIGTERM, which stop
//! the run and then finish every output) writes the last row group and the
//! footer. [`Exporter::flush`] (a live run's once-a-second flush) hands
//! the bytes of row groups already completed to the operating system but
//! ends no row group and writes no footer: during a live run the file grows
//! one row group at a time and becomes readable when the run ends, or when
//! it is rotated ([`Exporter::reopen`] after the file was moved away: the
//! old file is finished, footer included, and a new one started at the
//! path).
//!
//! Closed parts ([`ParquetOptions::part_rows`], `--parquet-part-rows`):
//! once the file at the path holds that many rows (checked after each
//! batch), it is finished (footer written) and renamed to a part beside
//! it, `STEM.NNNNNN.parquet` (the first number not taken), and a new file
//! is started at the path. A process killed (SIGKILL, a crash) leaves
//! every part whole and readable; only the file at the path, the rows
//! since the last part, has no footer. The parts and the file at the path
//! together are the output (`STEM*.parquet` for a reader). Only for a
//! file (not standard output).
//!
//! What can fail: creating the file ([`Error::Io`] naming the path) and
//! writing or encoding ([`Error::Output`] naming the output, e.g.
//! `parquet:/tmp/out.parquet`); a failure is sticky, every later call
//! returns it again. A reader that closed its pipe (EPIPE) gives
//! [`Error::OutputClosed`]. A batch of another kind is an error naming both
//! kinds.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, Float64Builder, Int64Builder, Int8Builder, StringBuilder, UInt16Builder,
    UInt32Builder, UInt64Builder, UInt8Builder,
};
use arrow_array::{ArrayRef, RecordBatch as ArrowBatch};
use arrow_schema::{DataType, Field as ArrowField, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;

use super::text::TextBuf;
use super::{early_of, fields, wrong_kind, ExportOptions, Exporter};
use crate::classify::Verdict;
use crate::error::{Error, Result};
use crate::features::Dir;
use crate::flow::record::{FlowRecord, RecordBatch};
use crate::schema::{Field, FieldType, Kind, RowBatch, Value};

/// How a Parquet file is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParquetOptions {
    /// Rows per row group (at least 1): a row group is written out when it
    /// is full, and at the end.
    pub row_group_rows: usize,
    /// zstd compression level of the pages (1..=22).
    pub zstd_level: i32,
    /// Close the file as a part once it holds this many rows (see the
    /// module docs); `None`: one file.
    pub part_rows: Option<usize>,
}

impl Default for ParquetOptions {
    fn default() -> Self {
        ParquetOptions {
            row_group_rows: DEFAULT_ROW_GROUP_ROWS,
            zstd_level: 3,
            part_rows: None,
        }
    }
}

/// Default rows per row group: large enough for the columns' encodings and
/// statistics to pay, small enough to keep about 10-40 MB in memory for a
/// flow record of ~150 columns.
pub const DEFAULT_ROW_GROUP_ROWS: usize = 64 * 1024;

/// The Arrow (and so Parquet) type of a field type.
pub fn arrow_type(ty: FieldType) -> DataType {
    match ty {
        FieldType::Str => DataType::Utf8,
        FieldType::U8 => DataType::UInt8,
        FieldType::U16 => DataType::UInt16,
        FieldType::U32 => DataType::UInt32,
        FieldType::U64 => DataType::UInt64,
        FieldType::I8 => DataType::Int8,
        FieldType::I64 => DataType::Int64,
        FieldType::F64 => DataType::Float64,
    }
}

/// One column being filled.
enum Col {
    Str(StringBuilder),
    U8(UInt8Builder),
    U16(UInt16Builder),
    U32(UInt32Builder),
    U64(UInt64Builder),
    I8(Int8Builder),
    I64(Int64Builder),
    F64(Float64Builder),
}

impl Col {
    fn new(ty: FieldType) -> Col {
        match ty {
            FieldType::Str => Col::Str(StringBuilder::new()),
            FieldType::U8 => Col::U8(UInt8Builder::new()),
            FieldType::U16 => Col::U16(UInt16Builder::new()),
            FieldType::U32 => Col::U32(UInt32Builder::new()),
            FieldType::U64 => Col::U64(UInt64Builder::new()),
            FieldType::I8 => Col::I8(Int8Builder::new()),
            FieldType::I64 => Col::I64(Int64Builder::new()),
            FieldType::F64 => Col::F64(Float64Builder::new()),
        }
    }

    fn null(&mut self) {
        match self {
            Col::Str(b) => b.append_null(),
            Col::U8(b) => b.append_null(),
            Col::U16(b) => b.append_null(),
            Col::U32(b) => b.append_null(),
            Col::U64(b) => b.append_null(),
            Col::I8(b) => b.append_null(),
            Col::I64(b) => b.append_null(),
            Col::F64(b) => b.append_null(),
        }
    }

    /// An integer; false (and a null) when it does not fit the column.
    fn int(&mut self, v: i128) -> bool {
        let ok = match self {
            Col::U8(b) => u8::try_from(v).map(|v| b.append_value(v)).is_ok(),
            Col::U16(b) => u16::try_from(v).map(|v| b.append_value(v)).is_ok(),
            Col::U32(b) => u32::try_from(v).map(|v| b.append_value(v)).is_ok(),
            Col::U64(b) => u64::try_from(v).map(|v| b.append_value(v)).is_ok(),
            Col::I8(b) => i8::try_from(v).map(|v| b.append_value(v)).is_ok(),
            Col::I64(b) => i64::try_from(v).map(|v| b.append_value(v)).is_ok(),
            Col::F64(b) => {
                b.append_value(v as f64);
                true
            }
            Col::Str(b) => {
                b.append_value(v.to_string());
                true
            }
        };
        if !ok {
            self.null();
        }
        ok
    }

    #[inline]
    fn u64(&mut self, v: u64) -> bool {
        self.int(i128::from(v))
    }

    /// A float (not finite: null); false (and a null) in an integer
    /// column.
    fn f64(&mut self, v: f64) -> bool {
        match self {
            Col::F64(b) if v.is_finite() => b.append_value(v),
            Col::F64(b) => b.append_null(),
            Col::Str(b) if v.is_finite() => b.append_value(v.to_string()),
            Col::Str(b) => b.append_null(),
            _ => {
                self.null();
                return false;
            }
        }
        true
    }

    /// Text; false (and a null) in a number column.
    fn text(&mut self, s: &str) -> bool {
        match self {
            Col::Str(b) => {
                b.append_value(s);
                true
            }
            _ => {
                self.null();
                false
            }
        }
    }

    /// A cell; false when it did not fit (a null was written).
    fn value(&mut self, v: Value<'_>) -> bool {
        match v {
            Value::Null => {
                self.null();
                true
            }
            Value::U64(v) => self.u64(v),
            Value::I64(v) => self.int(i128::from(v)),
            Value::F64(v) => self.f64(v),
            Value::Text(t) => self.text(t),
        }
    }

    /// The array of the values appended since the last call (the builder
    /// starts again empty).
    fn finish(&mut self) -> ArrayRef {
        match self {
            Col::Str(b) => Arc::new(b.finish()),
            Col::U8(b) => Arc::new(b.finish()),
            Col::U16(b) => Arc::new(b.finish()),
            Col::U32(b) => Arc::new(b.finish()),
            Col::U64(b) => Arc::new(b.finish()),
            Col::I8(b) => Arc::new(b.finish()),
            Col::I64(b) => Arc::new(b.finish()),
            Col::F64(b) => Arc::new(b.finish()),
        }
    }

    fn len(&self) -> usize {
        match self {
            Col::Str(b) => b.len(),
            Col::U8(b) => b.len(),
            Col::U16(b) => b.len(),
            Col::U32(b) => b.len(),
            Col::U64(b) => b.len(),
            Col::I8(b) => b.len(),
            Col::I64(b) => b.len(),
            Col::F64(b) => b.len(),
        }
    }
}

/// What the rows are: flow records with their early packets and analyzer
/// fields, or records of another kind.
enum Shape {
    Flows {
        /// N: early packets per record.
        n: usize,
        /// Class names of the verdicts.
        apps: Arc<[String]>,
        /// Seed of the Community ID; `None`: the column is null.
        seed: Option<u16>,
        /// Number of analyzer fields after the early columns.
        analyzed: usize,
    },
    Rows,
}

/// Where the Parquet bytes go: a file that can be reopened at its path, or
/// any writer. Remembers whether a write failed with EPIPE.
struct Sink {
    w: SinkInner,
    broken_pipe: bool,
}

enum SinkInner {
    File {
        file: File,
        path: PathBuf,
        /// Device and inode of `file`.
        id: (u64, u64),
    },
    Other(Box<dyn Write + Send>),
}

impl Sink {
    fn create(path: &Path) -> std::io::Result<Sink> {
        let file = File::create(path)?;
        let m = file.metadata()?;
        Ok(Sink {
            w: SinkInner::File {
                file,
                path: path.to_path_buf(),
                id: (m.dev(), m.ino()),
            },
            broken_pipe: false,
        })
    }

    fn note<T>(&mut self, r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                self.broken_pipe = true;
            }
        }
        r
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = match &mut self.w {
            SinkInner::File { file, .. } => file.write(buf),
            SinkInner::Other(w) => w.write(buf),
        };
        self.note(r)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let r = match &mut self.w {
            SinkInner::File { file, .. } => file.flush(),
            SinkInner::Other(w) => w.flush(),
        };
        self.note(r)
    }
}

/// Why the output stopped.
enum Ended {
    Failed(String),
    Closed,
    Finished,
}

/// Writes records of one kind as a Parquet file.
pub struct ParquetExporter {
    name: String,
    kind: &'static Kind,
    props: WriterProperties,
    cols: Columns,
    /// `None` once finished or failed.
    w: Option<ArrowWriter<Sink>>,
    ended: Option<Ended>,
    /// Close the file as a part at this many rows.
    part_rows: Option<usize>,
    /// Rows in the file at the path.
    rows_in_file: usize,
    /// The next part number to try.
    next_part: u64,
}

/// The Arrow columns of records being gathered: the schema (as the module
/// docs describe it) and one builder per column. Shared by the Parquet
/// exporter and [`super::arrow::ArrowFlows`].
pub(crate) struct Columns {
    shape: Shape,
    pub(crate) schema: SchemaRef,
    cols: Vec<Col>,
    /// Scratch text for addresses and MACs.
    scratch: TextBuf,
    /// Cells written as null because their value did not fit the column.
    pub(crate) unfit: u64,
}

impl Columns {
    /// The columns of flow records (`Some(opts)`) or of records of `kind`.
    pub(crate) fn new(kind: &'static Kind, flows: Option<&ExportOptions>) -> Columns {
        let (shape, columns) = match flows {
            Some(o) => (
                Shape::Flows {
                    n: o.early_packets,
                    apps: o.class_names.clone(),
                    seed: o.community_id(),
                    analyzed: o.analyzed.len(),
                },
                flow_columns(o),
            ),
            None => (
                Shape::Rows,
                kind.fields
                    .iter()
                    .map(|f| (f.name.to_string(), *f))
                    .collect(),
            ),
        };
        let schema = Arc::new(Schema::new(
            columns
                .iter()
                .map(|(name, f)| {
                    let mut meta = std::collections::HashMap::new();
                    if !f.unit.is_empty() {
                        meta.insert("unit".to_string(), f.unit.to_string());
                    }
                    meta.insert("description".to_string(), f.desc.to_string());
                    ArrowField::new(name, arrow_type(f.ty), true).with_metadata(meta)
                })
                .collect::<Vec<_>>(),
        ));
        let cols = columns.iter().map(|(_, f)| Col::new(f.ty)).collect();
        Columns {
            shape,
            schema,
            cols,
            scratch: TextBuf::new(256),
            unfit: 0,
        }
    }

    /// Whether these are the columns of flow records.
    pub(crate) fn is_flows(&self) -> bool {
        matches!(self.shape, Shape::Flows { .. })
    }

    /// Rows gathered since the last [`Columns::take`].
    pub(crate) fn len(&self) -> usize {
        self.cols.first().map_or(0, Col::len)
    }

    /// The rows gathered so far as one Arrow batch (the builders start
    /// again empty); `None` when there are none.
    pub(crate) fn take(
        &mut self,
    ) -> Option<std::result::Result<ArrowBatch, arrow_schema::ArrowError>> {
        if self.len() == 0 {
            return None;
        }
        let arrays: Vec<ArrayRef> = self.cols.iter_mut().map(Col::finish).collect();
        Some(ArrowBatch::try_new(self.schema.clone(), arrays))
    }

    /// Appends every row of a batch of another kind than flows.
    pub(crate) fn push_rows(&mut self, batch: &RowBatch) {
        let rows = batch.rows();
        for i in 0..rows.len() {
            for (j, col) in self.cols.iter_mut().enumerate() {
                let ok = col.value(rows.get(i, j));
                self.unfit += u64::from(!ok);
            }
        }
    }

    /// Appends record `i` of `batch`: its fields, early packets and
    /// analyzer cells. Nothing for columns of another kind.
    pub(crate) fn push_flow_at(&mut self, batch: &RecordBatch, i: usize) {
        let (n, analyzed) = match &self.shape {
            Shape::Flows { n, analyzed, .. } => (*n, *analyzed),
            Shape::Rows => return,
        };
        let base = fields::FIELDS.len();
        let r = &batch.records[i];
        let early = early_of(batch, i, n);
        self.push_flow(r, early);
        for k in 0..n {
            let at = base + k * fields::EARLY_FIELDS.len();
            match early.get(k) {
                Some(p) => {
                    self.cols[at].u64(p.size.into());
                    self.cols[at + 1].int(if p.dir == Dir::Fwd { 1 } else { -1 });
                    self.cols[at + 2].u64(p.iat_us.into());
                }
                None => (at..at + 3).for_each(|j| self.cols[j].null()),
            }
        }
        let at = base + n * fields::EARLY_FIELDS.len();
        for j in 0..analyzed {
            let ok = self.cols[at + j].value(batch.analyzed.get(i, j));
            self.unfit += u64::from(!ok);
        }
    }

    /// Appends one flow record to the builders.
    fn push_flow(&mut self, r: &FlowRecord, early: &[crate::features::early::EarlyPkt]) {
        let (app, seed) = match &self.shape {
            Shape::Flows { apps, seed, .. } => (app_name(apps, &r.verdict), *seed),
            Shape::Rows => return,
        };
        macro_rules! at {
            ($name:literal) => {{
                const I: usize = fields::index_of($name);
                I
            }};
        }
        let c = &mut self.cols;
        let mut unfit = 0u64;
        let mut u = |c: &mut Col, v: u64| unfit += u64::from(!c.u64(v));
        let k = &r.key;
        self.scratch.clear();
        self.scratch.cursor().addr(&k.src);
        c[at!("src")].text(as_str(self.scratch.as_slice()));
        self.scratch.clear();
        self.scratch.cursor().addr(&k.dst);
        c[at!("dst")].text(as_str(self.scratch.as_slice()));
        u(&mut c[at!("sport")], k.sport.into());
        u(&mut c[at!("dport")], k.dport.into());
        u(&mut c[at!("proto")], k.proto.into());
        match r.icmp {
            Some(m) => {
                u(&mut c[at!("icmp_type")], m.ty.into());
                u(&mut c[at!("icmp_code")], m.code.into());
            }
            None => {
                c[at!("icmp_type")].null();
                c[at!("icmp_code")].null();
            }
        }
        u(&mut c[at!("ip_version")], k.ip_version.into());
        u(&mut c[at!("vlan")], k.vlan.into());
        c[at!("tunnel")].text(k.tunnel.name());
        u(&mut c[at!("tunnel_id")], k.tunnel_id.into());
        self.scratch.clear();
        self.scratch.cursor().mac(&r.src_mac);
        c[at!("src_mac")].text(as_str(self.scratch.as_slice()));
        self.scratch.clear();
        self.scratch.cursor().mac(&r.dst_mac);
        c[at!("dst_mac")].text(as_str(self.scratch.as_slice()));
        match seed.and_then(|s| super::community_id::of_record(s, k, r.icmp)) {
            Some(id) => {
                c[at!("community_id")].text(id.as_str());
            }
            None => c[at!("community_id")].null(),
        }
        u(&mut c[at!("first_ts")], r.first_ts);
        u(&mut c[at!("last_ts")], r.last_ts);
        u(
            &mut c[at!("duration_ns")],
            r.last_ts.saturating_sub(r.first_ts),
        );
        u(&mut c[at!("fwd_packets")], r.packets[0]);
        u(&mut c[at!("bwd_packets")], r.packets[1]);
        u(&mut c[at!("fwd_bytes")], r.bytes[0]);
        u(&mut c[at!("bwd_bytes")], r.bytes[1]);
        // The statistics runs, in field order (checked by write_scalars'
        // assertions on the same table).
        let mut i = at!("fwd_size_min");
        for s in [&r.size[0], &r.size[1], &r.iat[0], &r.iat[1]] {
            match s {
                Some(s) => {
                    u(&mut c[i], s.min);
                    u(&mut c[i + 1], s.max);
                    c[i + 2].f64(s.mean);
                    c[i + 3].f64(s.std);
                }
                None => (i..i + 4).for_each(|j| c[j].null()),
            }
            i += 4;
        }
        match &r.tcp_flags {
            Some(counts) => {
                for &v in counts.as_flattened() {
                    u(&mut c[i], v.into());
                    i += 1;
                }
            }
            None => {
                for _ in 0..16 {
                    c[i].null();
                    i += 1;
                }
            }
        }
        debug_assert_eq!(i, at!("end_reason"));
        c[at!("end_reason")].text(r.end.name());
        c[at!("app")].text(app);
        c[at!("app_confidence")].f64(f64::from(r.verdict.confidence));
        u(&mut c[at!("decided_at_packet")], r.verdict.at_packet.into());
        u(&mut c[at!("early_len")], early.len() as u64);
        const { assert!(at!("early_len") + 1 == fields::FIELDS.len()) };
        self.unfit += unfit;
    }
}

impl ParquetExporter {
    /// A Parquet exporter of flow records over `w`, named `name` in
    /// messages.
    pub fn flows_to_writer(
        w: Box<dyn Write + Send>,
        name: &str,
        opts: &ExportOptions,
        popts: &ParquetOptions,
    ) -> Result<Self> {
        Self::new(
            Sink {
                w: SinkInner::Other(w),
                broken_pipe: false,
            },
            name,
            &fields::FLOWS,
            Some(opts),
            popts,
        )
    }

    /// A Parquet exporter of flow records into the file at `path`
    /// (created, truncated).
    pub fn create_flows(path: &Path, opts: &ExportOptions, popts: &ParquetOptions) -> Result<Self> {
        let sink = Sink::create(path).map_err(|e| Error::io(path, e))?;
        let name = format!("parquet:{}", path.display());
        Self::new(sink, &name, &fields::FLOWS, Some(opts), popts)
    }

    /// A Parquet exporter of records of `kind` (not flows) over `w`.
    pub fn rows_to_writer(
        kind: &'static Kind,
        w: Box<dyn Write + Send>,
        name: &str,
        popts: &ParquetOptions,
    ) -> Result<Self> {
        let sink = Sink {
            w: SinkInner::Other(w),
            broken_pipe: false,
        };
        Self::new(sink, name, kind, None, popts)
    }

    /// A Parquet exporter of records of `kind` (not flows) into the file
    /// at `path`.
    pub fn create_rows(kind: &'static Kind, path: &Path, popts: &ParquetOptions) -> Result<Self> {
        let sink = Sink::create(path).map_err(|e| Error::io(path, e))?;
        let name = format!("parquet:{}", path.display());
        Self::new(sink, &name, kind, None, popts)
    }

    fn new(
        sink: Sink,
        name: &str,
        kind: &'static Kind,
        flows: Option<&ExportOptions>,
        popts: &ParquetOptions,
    ) -> Result<Self> {
        let err = |reason: String| Error::Output {
            name: name.to_string(),
            reason,
        };
        let cols = Columns::new(kind, flows);
        let level = ZstdLevel::try_new(popts.zstd_level).map_err(|e| err(e.to_string()))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(level))
            .set_max_row_group_row_count(Some(popts.row_group_rows.max(1)))
            .set_created_by(format!("earlybird {}", env!("CARGO_PKG_VERSION")))
            .build();
        let w = ArrowWriter::try_new(sink, cols.schema.clone(), Some(props.clone()))
            .map_err(|e| err(e.to_string()))?;
        Ok(ParquetExporter {
            name: name.to_string(),
            kind,
            props,
            cols,
            w: Some(w),
            ended: None,
            part_rows: popts.part_rows.map(|n| n.max(1)),
            rows_in_file: 0,
            next_part: 1,
        })
    }

    /// Finishes the file at the path, renames it to the next free part
    /// name and starts a new file at the path.
    fn close_part(&mut self) -> Result<()> {
        let Some(w) = self.w.as_ref() else {
            return self.check();
        };
        let SinkInner::File { path, .. } = &w.inner().w else {
            return Ok(());
        };
        let path = path.clone();
        let stem = path.with_extension("");
        let part = loop {
            let p = PathBuf::from(format!("{}.{:06}.parquet", stem.display(), self.next_part));
            self.next_part += 1;
            if !p.exists() {
                break p;
            }
        };
        let Some(mut old) = self.w.take() else {
            return Ok(());
        };
        if let Err(e) = old.finish() {
            self.w = Some(old);
            return Err(self.fail(e));
        }
        if let Err(e) = old.inner_mut().flush() {
            self.w = Some(old);
            return Err(self.fail_io(e));
        }
        drop(old);
        if let Err(e) = std::fs::rename(&path, &part) {
            return Err(self.fail_io(e));
        }
        self.rows_in_file = 0;
        let sink = match Sink::create(&path) {
            Ok(s) => s,
            Err(e) => return Err(self.fail_io(e)),
        };
        match ArrowWriter::try_new(sink, self.cols.schema.clone(), Some(self.props.clone())) {
            Ok(w) => {
                self.w = Some(w);
                Ok(())
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Cells written as null because their value did not fit the column's
    /// type (see the module docs).
    pub fn unfit(&self) -> u64 {
        self.cols.unfit
    }

    fn error(&self, reason: &str) -> Error {
        Error::Output {
            name: self.name.clone(),
            reason: reason.to_string(),
        }
    }

    /// Fails when an earlier call failed or the output was finished.
    fn check(&self) -> Result<()> {
        match &self.ended {
            None => Ok(()),
            Some(Ended::Failed(r)) => Err(self.error(r)),
            Some(Ended::Closed) => Err(Error::OutputClosed {
                name: self.name.clone(),
            }),
            Some(Ended::Finished) => Err(self.error("written to after it was finished")),
        }
    }

    /// Records a writer error (sticky) and returns it.
    fn fail(&mut self, e: ParquetError) -> Error {
        let closed = self.w.as_ref().is_some_and(|w| w.inner().broken_pipe)
            || matches!(&e, ParquetError::External(x)
                if x.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe));
        self.w = None;
        if closed {
            self.ended = Some(Ended::Closed);
            return Error::OutputClosed {
                name: self.name.clone(),
            };
        }
        let reason = e.to_string();
        let err = self.error(&reason);
        self.ended = Some(Ended::Failed(reason));
        err
    }

    fn fail_io(&mut self, e: std::io::Error) -> Error {
        self.fail(ParquetError::External(Box::new(e)))
    }

    /// Hands the rows gathered in the builders to the writer.
    fn write_gathered(&mut self) -> Result<()> {
        let batch = match self.cols.take() {
            None => return Ok(()),
            Some(Ok(b)) => b,
            Some(Err(e)) => return Err(self.fail(ParquetError::ArrowError(e.to_string()))),
        };
        let Some(w) = self.w.as_mut() else {
            return self.check();
        };
        if let Err(e) = w.write(&batch) {
            return Err(self.fail(e));
        }
        self.rows_in_file += batch.num_rows();
        match self.part_rows {
            Some(n) if self.rows_in_file >= n => self.close_part(),
            _ => Ok(()),
        }
    }
}

/// Text the scratch buffer holds (addresses and MACs are ASCII).
fn as_str(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap_or("")
}

/// The columns of flow records: (name, field) in CSV order.
fn flow_columns(o: &ExportOptions) -> Vec<(String, Field)> {
    let mut cols: Vec<(String, Field)> = fields::FIELDS
        .iter()
        .map(|f| (f.name.to_string(), *f))
        .collect();
    for i in 1..=o.early_packets {
        for e in &fields::EARLY_FIELDS {
            cols.push((
                format!("pkt{i}_{}", e.suffix),
                Field::new("", e.ty, e.unit, e.desc),
            ));
        }
    }
    cols.extend(o.analyzed.iter().map(|f| (f.name.to_string(), *f)));
    cols
}

/// The name of a verdict's class: "unknown" for [`Verdict::UNKNOWN`],
/// without a model, or for an index the model does not have.
fn app_name<'a>(apps: &'a [String], v: &Verdict) -> &'a str {
    if v.class == Verdict::UNKNOWN {
        return "unknown";
    }
    apps.get(v.class as usize).map_or("unknown", String::as_str)
}

impl Exporter for ParquetExporter {
    fn kind(&self) -> &'static Kind {
        self.kind
    }

    fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        self.check()?;
        if !self.cols.is_flows() {
            return Err(wrong_kind(
                &self.name,
                self.kind,
                &fields::FLOWS,
                batch.len(),
            ));
        }
        for i in 0..batch.records.len() {
            self.cols.push_flow_at(batch, i);
        }
        self.write_gathered()
    }

    fn write_rows(&mut self, batch: &RowBatch) -> Result<()> {
        self.check()?;
        if !batch.kind().is(self.kind) || self.cols.is_flows() {
            return Err(wrong_kind(&self.name, self.kind, batch.kind(), batch.len()));
        }
        self.cols.push_rows(batch);
        self.write_gathered()
    }

    fn finish(&mut self) -> Result<()> {
        if matches!(self.ended, Some(Ended::Finished)) {
            return Ok(());
        }
        self.check()?;
        let Some(w) = self.w.as_mut() else {
            return self.check();
        };
        if let Err(e) = w.finish() {
            return Err(self.fail(e));
        }
        if let Err(e) = w.inner_mut().flush() {
            return Err(self.fail_io(e));
        }
        self.w = None;
        self.ended = Some(Ended::Finished);
        Ok(())
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn flush(&mut self) -> Result<()> {
        if matches!(self.ended, Some(Ended::Finished)) {
            return Ok(());
        }
        self.check()?;
        let Some(w) = self.w.as_mut() else {
            return Ok(());
        };
        match w.sync() {
            Ok(()) => Ok(()),
            Err(e) => Err(self.fail_io(e)),
        }
    }

    fn reopen(&mut self) -> Result<bool> {
        self.flush()?;
        let Some(w) = self.w.as_ref() else {
            return Ok(false);
        };
        let SinkInner::File { path, id, .. } = &w.inner().w else {
            return Ok(false);
        };
        if std::fs::metadata(path).is_ok_and(|m| (m.dev(), m.ino()) == *id) {
            return Ok(false);
        }
        let path = path.clone();
        // The moved file is finished (footer written): it is whole.
        let Some(mut old) = self.w.take() else {
            return Ok(false);
        };
        if let Err(e) = old.finish() {
            self.w = Some(old);
            return Err(self.fail(e));
        }
        let sink = match Sink::create(&path) {
            Ok(s) => s,
            Err(e) => {
                self.w = Some(old);
                return Err(self.fail_io(e));
            }
        };
        match ArrowWriter::try_new(sink, self.cols.schema.clone(), Some(self.props.clone())) {
            Ok(w) => {
                self.w = Some(w);
                self.rows_in_file = 0;
                Ok(true)
            }
            Err(e) => Err(self.fail(e)),
        }
    }
}

/// An exporter that could not be built: every call returns the error it
/// failed with (so [`super::to_writer`], which cannot fail, reports it at
/// the first write).
struct Unbuilt {
    name: String,
    kind: &'static Kind,
    reason: String,
}

impl Unbuilt {
    fn error(&self) -> Error {
        Error::Output {
            name: self.name.clone(),
            reason: self.reason.clone(),
        }
    }
}

impl Exporter for Unbuilt {
    fn kind(&self) -> &'static Kind {
        self.kind
    }
    fn write_batch(&mut self, _: &RecordBatch) -> Result<()> {
        Err(self.error())
    }
    fn write_rows(&mut self, _: &RowBatch) -> Result<()> {
        Err(self.error())
    }
    fn finish(&mut self) -> Result<()> {
        Err(self.error())
    }
    fn name(&self) -> &str {
        &self.name
    }
}

/// The exporter, or one that reports why it could not be built.
pub(crate) fn boxed(
    r: Result<ParquetExporter>,
    name: &str,
    kind: &'static Kind,
) -> Box<dyn Exporter> {
    match r {
        Ok(ex) => Box::new(ex),
        Err(Error::Output { reason, .. }) => Box::new(Unbuilt {
            name: name.to_string(),
            kind,
            reason,
        }),
        Err(e) => Box::new(Unbuilt {
            name: name.to_string(),
            kind,
            reason: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests;
