//! The Parquet exporter's own behaviour: row groups, flush and reopen,
//! failures, cells that do not fit their column, analyzer columns. The
//! values of every field are checked by the compliance tests
//! (`compliance.rs`, `compliance_rows.rs`).

use std::fs::File;

use parquet::file::reader::{FileReader, SerializedFileReader};

use super::*;
use crate::export::compliance::{check_cell, parquet_cells, Shared, V};
use crate::export::tests::{Closed, Failing};
use crate::export::{open, open_rows, to_writer, Format};
use crate::flow::record::FlowRecord;
use crate::schema::Rows;

fn batch(n: usize) -> RecordBatch {
    let mut b = RecordBatch::with_capacity(n, 4);
    for i in 0..n {
        let r = FlowRecord {
            first_ts: i as u64,
            ..FlowRecord::default()
        };
        b.push(r, &[]);
    }
    b
}

fn opts() -> ExportOptions {
    ExportOptions {
        early_packets: 4,
        ..ExportOptions::default()
    }
}

/// Row counts of the row groups of the Parquet file at `path`.
fn row_groups(path: &Path) -> Vec<i64> {
    let rd = SerializedFileReader::new(File::open(path).unwrap()).unwrap();
    rd.metadata()
        .row_groups()
        .iter()
        .map(|g| g.num_rows())
        .collect()
}

#[test]
fn row_groups_hold_the_configured_rows_and_the_rest_at_finish() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flows.parquet");
    let p = ParquetOptions {
        row_group_rows: 1000,
        ..ParquetOptions::default()
    };
    let mut ex = ParquetExporter::create_flows(&path, &opts(), &p).unwrap();
    assert_eq!(ex.name(), format!("parquet:{}", path.display()));
    for _ in 0..5 {
        ex.write_batch(&batch(700)).unwrap();
    }
    ex.finish().unwrap();
    assert_eq!(row_groups(&path), [1000, 1000, 1000, 500]);
    // Finished: finishing again and flushing do nothing; writing fails.
    ex.finish().unwrap();
    ex.flush().unwrap();
    let e = ex.write_batch(&batch(1)).unwrap_err();
    assert!(e.to_string().contains("after it was finished"), "{e}");
}

#[test]
fn flush_ends_no_row_group_and_the_file_is_readable_once_finished() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flows.parquet");
    let mut ex = open(Format::Parquet, &path, &opts()).unwrap();
    ex.write_batch(&batch(10)).unwrap();
    ex.flush().unwrap();
    // No footer yet: not a Parquet file to a reader.
    assert!(SerializedFileReader::new(File::open(&path).unwrap()).is_err());
    ex.write_batch(&batch(5)).unwrap();
    ex.finish().unwrap();
    assert_eq!(row_groups(&path), [15]);
}

#[test]
fn reopen_finishes_the_moved_file_and_starts_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flows.parquet");
    let rotated = dir.path().join("flows.parquet.1");
    let mut ex = open(Format::Parquet, &path, &opts()).unwrap();
    ex.write_batch(&batch(3)).unwrap();
    // The path still names the open file: nothing to reopen.
    assert!(!ex.reopen().unwrap());
    ex.write_batch(&batch(4)).unwrap();
    std::fs::rename(&path, &rotated).unwrap();
    assert!(ex.reopen().unwrap());
    // The moved file is whole at once.
    assert_eq!(row_groups(&rotated), [7]);
    ex.write_batch(&batch(2)).unwrap();
    ex.finish().unwrap();
    assert_eq!(row_groups(&path), [2]);
    // Standard output and other writers are not reopened.
    let mut ex = to_writer(Format::Parquet, Box::new(std::io::sink()), "p", &opts());
    assert!(!ex.reopen().unwrap());
    ex.finish().unwrap();
}

#[test]
fn an_empty_output_is_a_parquet_file_with_the_columns_and_no_row() {
    let shared = Shared::default();
    let mut ex = to_writer(Format::Parquet, Box::new(shared.clone()), "p", &opts());
    ex.write_batch(&RecordBatch::with_capacity(0, 4)).unwrap();
    ex.finish().unwrap();
    let bytes = shared.0.lock().unwrap().clone();
    let (cols, rows) = parquet_cells("empty", &bytes);
    let names: Vec<String> = cols.into_iter().map(|c| c.0).collect();
    assert_eq!(names, fields::csv_columns(4));
    assert!(rows.is_empty());
}

#[test]
fn a_failing_writer_is_a_sticky_error_naming_the_output() {
    let p = ParquetOptions {
        row_group_rows: 100,
        ..ParquetOptions::default()
    };
    let w = Failing {
        limit: 5_000,
        written: 0,
        fail_flush: false,
    };
    let mut ex =
        ParquetExporter::flows_to_writer(Box::new(w), "parquet:/full/disk", &opts(), &p).unwrap();
    let mut err = None;
    for _ in 0..50 {
        if let Err(e) = ex.write_batch(&batch(100)) {
            err = Some(e);
            break;
        }
    }
    let e = err.expect("the writer's failure is reported");
    assert!(matches!(e, Error::Output { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("parquet:/full/disk") && msg.contains("disk full"),
        "{msg}"
    );
    assert!(ex.write_batch(&batch(1)).is_err());
    assert!(ex.flush().is_err());
    assert!(ex.finish().unwrap_err().to_string().contains("disk full"));

    // A failure held in the buffers surfaces at the end.
    let w = Failing {
        limit: 10,
        written: 0,
        fail_flush: false,
    };
    let mut ex = to_writer(Format::Parquet, Box::new(w), "parquet:small", &opts());
    ex.write_batch(&batch(3)).unwrap();
    let e = ex.finish().unwrap_err();
    assert!(e.to_string().contains("disk full"), "{e}");
}

#[test]
fn a_closed_pipe_is_the_output_ending_not_an_error() {
    let mut ex = to_writer(Format::Parquet, Box::new(Closed), "parquet:stdout", &opts());
    ex.write_batch(&batch(1)).unwrap();
    let e = ex.finish().unwrap_err();
    assert!(matches!(e, Error::OutputClosed { .. }), "{e}");
    let e = ex.write_batch(&batch(1)).unwrap_err();
    assert!(matches!(e, Error::OutputClosed { .. }), "sticky: {e}");
}

#[test]
fn a_missing_directory_is_an_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("missing/flows.parquet");
    let e = open(Format::Parquet, &bad, &opts()).err().unwrap();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    assert!(e.to_string().contains("missing/flows.parquet"), "{e}");
    const K: Kind = Kind::new("test_k", &[Field::new("n", FieldType::U64, "", "")]);
    let e = open_rows(&K, Format::Parquet, &bad).err().unwrap();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
}

/// A kind whose cells do not all fit their columns.
const MIXED: Kind = Kind::new(
    "test_mixed",
    &[
        Field::new("small", FieldType::U8, "", "A byte"),
        Field::new("signed", FieldType::I8, "", "A signed byte"),
        Field::new("count", FieldType::U32, "", "A count"),
        Field::new("ratio", FieldType::F64, "", "A float"),
        Field::new("label", FieldType::Str, "", "Text"),
    ],
);

#[test]
fn cells_that_do_not_fit_their_column_are_null_and_counted() {
    let shared = Shared::default();
    let mut ex = ParquetExporter::rows_to_writer(
        &MIXED,
        Box::new(shared.clone()),
        "m",
        &ParquetOptions::default(),
    )
    .unwrap();
    let mut b = RowBatch::new(&MIXED);
    // Fits: converted losslessly.
    b.push(|c| {
        c.u64(255);
        c.i64(-128);
        c.i64(7);
        c.u64(3);
        c.u64(12);
    });
    // Does not fit: out of range, a float or text in an integer column.
    b.push(|c| {
        c.u64(256);
        c.u64(200);
        c.f64(1.5);
        c.text("x");
        c.f64(f64::NAN);
    });
    ex.write_rows(&b).unwrap();
    ex.finish().unwrap();
    assert_eq!(ex.unfit(), 4);
    let bytes = shared.0.lock().unwrap().clone();
    let (_, rows) = parquet_cells("mixed", &bytes);
    let want = [
        vec![
            V::U(255),
            V::I(-128),
            V::U(7),
            V::F(Some(3.0)),
            V::S("12".into()),
        ],
        vec![V::Null, V::Null, V::Null, V::Null, V::Null],
    ];
    for (i, (row, w)) in rows.iter().zip(&want).enumerate() {
        for (j, (g, w)) in row.iter().zip(w).enumerate() {
            check_cell(&format!("row {i} col {j}"), g, w);
        }
    }
    assert_eq!(rows.len(), 2);
}

#[test]
fn analyzer_fields_follow_the_early_columns() {
    let analyzed = [
        Field::new("a_count", FieldType::U64, "", "A count"),
        Field::new("a_text", FieldType::Str, "", "Text"),
    ];
    let o = ExportOptions {
        early_packets: 2,
        analyzed: analyzed.to_vec().into(),
        ..ExportOptions::default()
    };
    let mut b = RecordBatch::with_capacity(2, 2);
    b.analyzed = Rows::default();
    b.push(FlowRecord::default(), &[]);
    b.push(FlowRecord::default(), &[]);
    b.analyzed.clear();
    b.analyzed.push_row(2, |c| {
        c.u64(9);
        c.text("nine");
    });
    b.analyzed.push_row(2, |c| c.null());
    let shared = Shared::default();
    let mut ex = to_writer(Format::Parquet, Box::new(shared.clone()), "p", &o);
    ex.write_batch(&b).unwrap();
    ex.finish().unwrap();
    let bytes = shared.0.lock().unwrap().clone();
    let (cols, rows) = parquet_cells("analyzed", &bytes);
    let names: Vec<String> = cols.into_iter().map(|c| c.0).collect();
    let want: Vec<String> = fields::csv_header_with(2, &analyzed)
        .trim_end()
        .split(',')
        .map(String::from)
        .collect();
    assert_eq!(names, want);
    let w = names.len();
    assert_eq!(rows[0][w - 2..], [V::U(9), V::S("nine".into())]);
    assert_eq!(rows[1][w - 2..], [V::Null, V::Null]);
}

#[test]
fn columns_carry_units_and_descriptions() {
    let shared = Shared::default();
    let mut ex = to_writer(Format::Parquet, Box::new(shared.clone()), "p", &opts());
    ex.write_batch(&batch(1)).unwrap();
    ex.finish().unwrap();
    let mut f = tempfile::tempfile().unwrap();
    f.write_all(&shared.0.lock().unwrap()).unwrap();
    let rd = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f).unwrap();
    let schema = rd.schema();
    let ts = schema.field_with_name("first_ts").unwrap().metadata();
    assert_eq!(ts.get("unit").map(String::as_str), Some("ns"));
    assert!(ts["description"].starts_with("Timestamp of the first packet"));
    assert!(!schema
        .field_with_name("src")
        .unwrap()
        .metadata()
        .contains_key("unit"));
    // Compressed with zstd.
    let meta = rd.metadata();
    let groups = meta.row_groups();
    assert_eq!(groups.len(), 1);
    assert!(groups[0]
        .columns()
        .iter()
        .all(|c| matches!(c.compression(), Compression::ZSTD(_))));
}

/// The column types the field reference names (`FieldType::parquet_name`)
/// are the ones written.
#[test]
fn written_types_are_the_documented_ones() {
    const ALL: Kind = Kind::new(
        "test_all",
        &[
            Field::new("s", FieldType::Str, "", ""),
            Field::new("u8", FieldType::U8, "", ""),
            Field::new("u16", FieldType::U16, "", ""),
            Field::new("u32", FieldType::U32, "", ""),
            Field::new("u64", FieldType::U64, "", ""),
            Field::new("i8", FieldType::I8, "", ""),
            Field::new("i64", FieldType::I64, "", ""),
            Field::new("f64", FieldType::F64, "", ""),
        ],
    );
    assert_eq!(ALL.fields.len(), FieldType::ALL.len());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("all.parquet");
    let mut ex = open_rows(&ALL, Format::Parquet, &path).unwrap();
    ex.finish().unwrap();
    let rd = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
    let schema = rd.metadata().file_metadata().schema_descr_ptr();
    for (i, f) in ALL.fields.iter().enumerate() {
        let c = schema.column(i);
        let physical = format!("{:?}", c.physical_type());
        let logical = match c.logical_type_ref() {
            Some(parquet::basic::LogicalType::Integer(t)) => {
                let sign = if t.is_signed { "signed" } else { "unsigned" };
                format!("{physical}, INT({}, {sign})", t.bit_width)
            }
            Some(parquet::basic::LogicalType::String) => format!("{physical}, STRING"),
            None => physical,
            Some(l) => panic!("{}: {l:?}", f.name),
        };
        let want = f.ty.parquet_name();
        assert!(
            want.ends_with(&format!("({logical})")),
            "{}: {logical} vs {want}",
            f.name
        );
    }
}

#[test]
fn parts_are_closed_whole_as_they_fill_and_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flows.parquet");
    // A part of an earlier run is kept: the next free number is taken.
    std::fs::write(dir.path().join("flows.000001.parquet"), b"earlier").unwrap();
    let p = ParquetOptions {
        row_group_rows: 100,
        part_rows: Some(200),
        ..ParquetOptions::default()
    };
    let mut ex = ParquetExporter::create_flows(&path, &opts(), &p).unwrap();
    for _ in 0..5 {
        ex.write_batch(&batch(100)).unwrap();
    }
    // Before the end (as after a SIGKILL): two parts, whole, and the
    // file at the path without its footer.
    let part = |n: u32| dir.path().join(format!("flows.{n:06}.parquet"));
    assert_eq!(std::fs::read(part(1)).unwrap(), b"earlier");
    assert_eq!(row_groups(&part(2)), [100, 100]);
    assert_eq!(row_groups(&part(3)), [100, 100]);
    assert!(!part(4).exists());
    assert!(SerializedFileReader::new(File::open(&path).unwrap()).is_err());
    ex.finish().unwrap();
    assert_eq!(row_groups(&path), [100]);
}
