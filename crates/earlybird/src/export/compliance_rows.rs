//! Compliance test of every format for a record kind other than flows: the
//! same varied rows of a test kind (every value type: u64, i64, f64 with
//! non-finite and huge values, null, text needing CSV quoting and JSON
//! escaping, unicode, text past the length bound; rows with too few and too
//! many cells; a batch larger than one output chunk; field names that need
//! escaping themselves) are written by each format, parsed back with an
//! independent parser (`csv`, `serde_json`) and compared cell by cell with
//! values computed here, independently of the writer. Then what every
//! output shares with the flow exporters: the header again on reopen,
//! flush, a failing writer, a closed pipe, and batches of the wrong kind.

use super::compliance::{check_json, check_text, Shared, V};
use super::tests::{Closed, Failing};
use super::{open_rows, rows_to_writer, to_writer, ExportOptions, Format, CHUNK};
use crate::error::Error;
use crate::flow::record::RecordBatch;
use crate::schema::{Cells, Field, FieldType, Kind, RowBatch, MAX_TEXT};

/// The test kind: one field of each value type, and a name to escape.
const EVENTS: Kind = Kind::new(
    "test_events",
    &[
        Field::new("seq", FieldType::U64, "", "A counter"),
        Field::new("delta", FieldType::I64, "ns", "A signed difference"),
        Field::new("ratio", FieldType::F64, "", "A float"),
        Field::new("label", FieldType::Str, "", "Free text"),
        Field::new("small", FieldType::U8, "", "A byte"),
        Field::new("odd \"name\", too", FieldType::Str, "", "A name to escape"),
    ],
);

/// A cell as the test writes it.
#[derive(Debug, Clone)]
enum C {
    U(u64),
    I(i64),
    F(f64),
    T(String),
    Null,
}

fn t(s: &str) -> C {
    C::T(s.to_string())
}

/// Varied rows (at most one cell too many or too few).
fn sample() -> Vec<Vec<C>> {
    use C::*;
    let controls: String = (0u8..0x20).map(char::from).collect();
    let long_unicode = "é日🎉".repeat(MAX_TEXT);
    let widest = "\u{1}".repeat(MAX_TEXT + 10);
    vec![
        vec![U(0), I(0), F(0.0), t(""), U(0), Null],
        vec![
            U(u64::MAX),
            I(i64::MIN),
            F(-0.0004),
            t("plain"),
            U(255),
            t("x"),
        ],
        vec![U(1), I(i64::MAX), F(f64::NAN), t("a,b"), Null, t(" lead")],
        vec![
            Null,
            I(-1),
            F(f64::INFINITY),
            t("say \"hi\""),
            U(7),
            t("trail "),
        ],
        vec![
            U(2),
            Null,
            F(f64::NEG_INFINITY),
            t("line\nbreak\r\nend"),
            U(8),
            t("\r"),
        ],
        vec![
            U(3),
            I(-42),
            F(1e300),
            t("tab\there \\ back"),
            U(9),
            t(&controls),
        ],
        vec![
            U(4),
            I(42),
            F(1.0 / 3.0),
            t("héllo 日本語 🎉 \u{2028}"),
            U(10),
            t("\u{7f}"),
        ],
        vec![
            U(5),
            I(7),
            F(9_007_199_254_740.993),
            t("null"),
            U(11),
            t("007"),
        ],
        vec![U(6), I(8), F(-2.25), t(&long_unicode), U(12), t(&widest)],
        vec![U(7), I(9), F(12.0), t(&widest), U(13), t(&long_unicode)],
        vec![Null, Null, Null, Null, Null, Null],
        // Too few cells: the rest are null.
        vec![U(8), I(-8)],
        // Too many: the extra one is dropped.
        vec![U(9), I(9), F(1.5), t("seven"), U(14), t("six"), t("extra")],
    ]
}

fn put(c: &mut Cells<'_>, v: &C) {
    match v {
        C::U(x) => c.u64(*x),
        C::I(x) => c.i64(*x),
        C::F(x) => c.f64(*x),
        C::T(s) => c.text(s),
        C::Null => c.null(),
    }
}

/// The value a cell should read back as: text cut at `MAX_TEXT` bytes on a
/// character boundary, non-finite floats as not measured.
fn expected(row: &[C]) -> Vec<V> {
    (0..EVENTS.width())
        .map(|j| match row.get(j) {
            None | Some(C::Null) => V::Null,
            Some(C::U(x)) => V::U(*x),
            Some(C::I(x)) => V::I(*x),
            Some(C::F(x)) => V::F(Some(*x).filter(|x| x.is_finite())),
            Some(C::T(s)) => {
                let mut cut = String::new();
                for ch in s.chars() {
                    if cut.len() + ch.len_utf8() > MAX_TEXT {
                        break;
                    }
                    cut.push(ch);
                }
                V::S(cut)
            }
        })
        .collect()
}

/// Two small batches, then one larger than an output chunk; with the
/// expected values of every row in order.
fn batches() -> (Vec<RowBatch>, Vec<Vec<V>>) {
    let rows = sample();
    let mut out = Vec::new();
    let mut want = Vec::new();
    let (a, b) = rows.split_at(rows.len() / 2);
    for part in [a, b] {
        let mut bt = RowBatch::new(&EVENTS);
        for r in part {
            bt.push(|c| r.iter().for_each(|v| put(c, v)));
            want.push(expected(r));
        }
        out.push(bt);
    }
    let mut big = RowBatch::new(&EVENTS);
    for i in 0..3000u64 {
        let mut r = rows[i as usize % rows.len()].clone();
        if let Some(C::U(x)) = r.first_mut() {
            *x = x.wrapping_add(i);
        }
        big.push(|c| r.iter().for_each(|v| put(c, v)));
        want.push(expected(&r));
    }
    out.push(big);
    (out, want)
}

fn names() -> Vec<&'static str> {
    EVENTS.fields.iter().map(|f| f.name).collect()
}

fn run(format: Format) {
    let (batches, want) = batches();
    let shared = Shared::default();
    let mut ex = rows_to_writer(&EVENTS, format, Box::new(shared.clone()), "test");
    assert_eq!(ex.kind().name, EVENTS.name);
    for b in &batches {
        ex.write_rows(b).unwrap();
    }
    ex.finish().unwrap();
    let bytes = shared.0.lock().unwrap().clone();
    let ctx = format!("{format:?}");
    match format {
        Format::Null => assert!(bytes.is_empty(), "{ctx}: null wrote output"),
        Format::Csv => check_csv(&ctx, &bytes, &want),
        Format::JsonLines => check_jsonl(&ctx, &bytes, &want),
        Format::Ipfix => panic!("{ctx}: IPFIX takes flow records only (ipfix_refuses_other_kinds)"),
        #[cfg(feature = "parquet")]
        Format::Parquet => check_parquet(&ctx, &bytes, &want),
        Format::Netflow | Format::ClickHouse => panic!("{ctx}: flow records only"),
    }
}

#[cfg(feature = "parquet")]
fn check_parquet(ctx: &str, bytes: &[u8], want: &[Vec<V>]) {
    use super::compliance::{check_cell, parquet_cells};
    use super::parquet::arrow_type;
    let (cols, rows) = parquet_cells(ctx, bytes);
    let header: Vec<&str> = cols.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(header, names(), "{ctx}: columns");
    for (f, (_, ty)) in EVENTS.fields.iter().zip(&cols) {
        assert_eq!(*ty, arrow_type(f.ty), "{ctx}: type of {}", f.name);
    }
    assert_eq!(rows.len(), want.len(), "{ctx}: row count");
    for (i, (row, w)) in rows.iter().zip(want).enumerate() {
        for (j, v) in w.iter().enumerate() {
            let c = format!("{ctx} row {i} {}", EVENTS.fields[j].name);
            check_cell(&c, &row[j], v);
        }
    }
}

/// IPFIX carries flow records and early-verdict events only: opening it
/// for another kind fails, and rows given to it are refused, naming the
/// output and both kinds.
#[test]
fn ipfix_refuses_other_kinds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.ipfix");
    let err = open_rows(&EVENTS, Format::Ipfix, &path).err().unwrap();
    let msg = err.to_string();
    assert!(
        msg.contains("events.ipfix") && msg.contains("flow records and early-verdict events"),
        "{msg}"
    );
    assert!(msg.contains(EVENTS.name), "{msg}");
    assert!(!path.exists(), "nothing is created");
    let mut ex = rows_to_writer(
        &EVENTS,
        Format::Ipfix,
        Box::new(Shared::default()),
        "ipfix:t",
    );
    assert_eq!(ex.kind().name, "flows");
    let (batches, _) = batches();
    let msg = ex.write_rows(&batches[0]).unwrap_err().to_string();
    assert!(
        msg.contains("ipfix:t") && msg.contains(EVENTS.name),
        "{msg}"
    );
}

fn check_csv(ctx: &str, bytes: &[u8], want: &[Vec<V>]) {
    assert!(bytes.len() > CHUNK, "{ctx}: the output spans chunks");
    let mut rd = ::csv::ReaderBuilder::new().from_reader(bytes);
    let header: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header, names(), "{ctx}: header");
    let rows: Vec<::csv::StringRecord> = rd.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), want.len(), "{ctx}: row count");
    for (i, (row, w)) in rows.iter().zip(want).enumerate() {
        assert_eq!(row.len(), EVENTS.width(), "{ctx} row {i}: width");
        for (j, v) in w.iter().enumerate() {
            let c = format!("{ctx} row {i} {}", EVENTS.fields[j].name);
            check_text(&c, &row[j], v);
        }
    }
}

fn check_jsonl(ctx: &str, bytes: &[u8], want: &[Vec<V>]) {
    let text = std::str::from_utf8(bytes).unwrap();
    assert!(text.ends_with('\n'), "{ctx}: last line not terminated");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), want.len(), "{ctx}: row count");
    for (i, (line, w)) in lines.iter().zip(want).enumerate() {
        let obj: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line)
            .unwrap_or_else(|err| panic!("{ctx} line {i}: {err}: {line}"));
        // Every key once, in field order.
        assert_eq!(obj.len(), EVENTS.width(), "{ctx} line {i}: key count");
        let mut at = 0;
        for name in names() {
            let key = format!("{}:", serde_json::to_string(name).unwrap());
            let pos = line[at..]
                .find(&key)
                .unwrap_or_else(|| panic!("{ctx} line {i}: {key} missing or out of order"));
            at += pos + key.len();
        }
        for (j, v) in w.iter().enumerate() {
            let name = EVENTS.fields[j].name;
            check_json(&format!("{ctx} line {i} {name}"), &obj[name], v);
        }
    }
}

#[test]
fn every_format_round_trips_every_value_of_another_kind() {
    let formats = [Format::Csv, Format::JsonLines, Format::Null];
    #[cfg(feature = "parquet")]
    let formats = [formats.as_slice(), &[Format::Parquet]].concat();
    for format in formats {
        run(format);
    }
}

/// One row of `EVENTS` holding `ratio` and little else.
fn ratio_row(ratio: f64) -> RowBatch {
    let mut b = RowBatch::new(&EVENTS);
    b.push(|c| {
        c.u64(1);
        c.i64(-1);
        c.f64(ratio);
    });
    b
}

#[test]
fn floats_and_nulls_are_written_as_in_flow_records() {
    // (value, CSV text, JSON text): at most three decimals, trailing zeros
    // dropped, not finite empty / null.
    let cases = [
        (1.5, "1.5", "1.5"),
        (1.0 / 3.0, "0.333", "0.333"),
        (12.0, "12", "12"),
        (-2.25, "-2.25", "-2.25"),
        (-0.0004, "0", "0"),
        (0.0005, "0.001", "0.001"),
        (f64::NAN, "", "null"),
        (f64::NEG_INFINITY, "", "null"),
    ];
    for (v, csv, json) in cases {
        let shared = Shared::default();
        let mut ex = rows_to_writer(&EVENTS, Format::Csv, Box::new(shared.clone()), "c");
        ex.write_rows(&ratio_row(v)).unwrap();
        ex.finish().unwrap();
        let text = String::from_utf8(shared.0.lock().unwrap().clone()).unwrap();
        let line = text.lines().nth(1).unwrap();
        assert_eq!(line, format!("1,-1,{csv},,,"), "{v}");
        let shared = Shared::default();
        let mut ex = rows_to_writer(&EVENTS, Format::JsonLines, Box::new(shared.clone()), "j");
        ex.write_rows(&ratio_row(v)).unwrap();
        ex.finish().unwrap();
        let text = String::from_utf8(shared.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text,
            format!(
                "{{\"seq\":1,\"delta\":-1,\"ratio\":{json},\"label\":null,\"small\":null,\
                 \"odd \\\"name\\\", too\":null}}\n"
            ),
            "{v}"
        );
    }
}

#[test]
fn empty_outputs_and_the_header_again_on_reopen() {
    let header = "seq,delta,ratio,label,small,\"odd \"\"name\"\", too\"\n";
    let shared = Shared::default();
    let mut ex = rows_to_writer(&EVENTS, Format::Csv, Box::new(shared.clone()), "t");
    ex.write_rows(&RowBatch::new(&EVENTS)).unwrap();
    ex.finish().unwrap();
    assert_eq!(*shared.0.lock().unwrap(), header.as_bytes());
    let shared = Shared::default();
    let mut ex = rows_to_writer(&EVENTS, Format::JsonLines, Box::new(shared.clone()), "t");
    ex.finish().unwrap();
    assert!(shared.0.lock().unwrap().is_empty());

    let dir = tempfile::tempdir().unwrap();
    let rows = || ratio_row(0.5);
    for (format, file, head) in [
        (Format::Csv, "events.csv", 1),
        (Format::JsonLines, "events.jsonl", 0),
    ] {
        let path = dir.path().join(file);
        let rotated = dir.path().join(format!("{file}.1"));
        let mut ex = open_rows(&EVENTS, format, &path).unwrap();
        assert_eq!(ex.name(), format!("{}:{}", format.name(), path.display()));
        ex.write_rows(&rows()).unwrap();
        // Buffered until a flush.
        assert_eq!(std::fs::read(&path).unwrap().len(), 0);
        ex.flush().unwrap();
        let first = std::fs::read_to_string(&path).unwrap();
        assert_eq!(first.lines().count(), head + 1, "{format:?}");
        // The path still names the open file: nothing to reopen.
        assert!(!ex.reopen().unwrap());
        ex.write_rows(&rows()).unwrap();
        std::fs::rename(&path, &rotated).unwrap();
        assert!(ex.reopen().unwrap());
        ex.write_rows(&rows()).unwrap();
        ex.finish().unwrap();
        let old = std::fs::read_to_string(&rotated).unwrap();
        let new = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            old.lines().count(),
            head + 2,
            "{format:?}: old file complete"
        );
        assert_eq!(new.lines().count(), head + 1, "{format:?}: fresh file");
        if head == 1 {
            assert_eq!(new.lines().next(), Some(header.trim_end()));
            assert_eq!(old.lines().next(), Some(header.trim_end()));
        }
    }
    // A missing directory is an error naming the path; null opens nothing.
    let bad = dir.path().join("missing/events.csv");
    let err = open_rows(&EVENTS, Format::Csv, &bad).err().unwrap();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    let null = open_rows(&EVENTS, Format::Null, &bad).unwrap();
    assert_eq!(null.kind().name, EVENTS.name);
}

#[test]
fn a_failing_writer_is_a_sticky_error_and_a_closed_pipe_ends_the_output() {
    let (batches, _) = batches();
    let big = &batches[2];
    for format in [Format::Csv, Format::JsonLines] {
        let w = Failing {
            limit: 10_000,
            written: 0,
            fail_flush: false,
        };
        let mut ex = rows_to_writer(&EVENTS, format, Box::new(w), "bad:events");
        let err = ex.write_rows(big).unwrap_err();
        assert!(matches!(err, Error::Output { .. }), "{format:?}: {err:?}");
        let msg = err.to_string();
        assert!(
            msg.contains("bad:events") && msg.contains("disk full"),
            "{msg}"
        );
        assert!(ex.write_rows(&batches[0]).is_err());
        assert!(ex.flush().is_err());
        assert!(ex.finish().unwrap_err().to_string().contains("disk full"));
        // An error held in the buffer surfaces at the end; so does a flush
        // the writer refuses.
        let w = Failing {
            limit: 10,
            written: 0,
            fail_flush: false,
        };
        let mut ex = rows_to_writer(&EVENTS, format, Box::new(w), "small");
        ex.write_rows(&batches[0]).unwrap();
        assert!(ex.finish().unwrap_err().to_string().contains("disk full"));
        let w = Failing {
            limit: usize::MAX,
            written: 0,
            fail_flush: true,
        };
        let mut ex = rows_to_writer(&EVENTS, format, Box::new(w), "noflush");
        ex.write_rows(&batches[0]).unwrap();
        assert!(ex
            .flush()
            .unwrap_err()
            .to_string()
            .contains("flush refused"));

        let name = format!("{}:stdout", format.name());
        let mut ex = rows_to_writer(&EVENTS, format, Box::new(Closed), &name);
        ex.write_rows(&batches[0]).unwrap();
        let e = ex.flush().unwrap_err();
        assert!(matches!(e, Error::OutputClosed { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            format!("output {name}: closed by its reader")
        );
        let e = ex.write_rows(&batches[0]).unwrap_err();
        assert!(matches!(e, Error::OutputClosed { .. }), "sticky: {e}");
    }
}

#[test]
fn batches_of_another_kind_are_refused_naming_both_kinds() {
    const OTHER: Kind = Kind::new("test_other", &[Field::new("n", FieldType::U64, "", "")]);
    let shared = Shared::default();
    let mut ex = rows_to_writer(&EVENTS, Format::JsonLines, Box::new(shared.clone()), "ev");
    let mut other = RowBatch::new(&OTHER);
    other.push(|c| c.u64(1));
    let e = ex.write_rows(&other).unwrap_err();
    assert_eq!(
        e.to_string(),
        "output ev: takes test_events records, not 1 test_other records"
    );
    let mut flows = RecordBatch::with_capacity(1, 0);
    flows.push(Default::default(), &[]);
    let e = ex.write_batch(&flows).unwrap_err();
    assert!(e.to_string().contains("not 1 flows records"), "{e}");
    // A flow output refuses rows the same way.
    let mut fx = to_writer(
        Format::Csv,
        Box::new(std::io::sink()),
        "fl",
        &ExportOptions::default(),
    );
    let e = fx.write_rows(&other).unwrap_err();
    assert!(e.to_string().contains("takes flows records"), "{e}");
    // Refused batches write nothing, and the output goes on.
    ex.finish().unwrap();
    assert!(shared.0.lock().unwrap().is_empty());
}
