//! The generic writer of records of any kind but flows: CSV or JSON lines
//! driven only by the kind's field table ([`crate::schema::Kind`]).
//!
//! Contract: a [`RowsExporter`] takes [`RowBatch`]es of its kind and writes
//! one line per row. CSV: a header line of the field names (written even
//! when no row follows, and again when a rotated file is reopened), then
//! the cells of each row, comma-separated. JSON lines: one object per row
//! with one key per field, in table order. Values are written by
//! `super::cells` (null: CSV empty, JSON `null`; integers in full; floats
//! rounded to at most three decimals as in flow records, not finite: CSV
//! empty, JSON `null`; text quoted and escaped as each format needs). Field
//! names are escaped for the format too. The buffer, chunked writes,
//! sticky errors, closed pipes, flush and reopen are the flow exporters'
//! (`super::Output`). A batch of another kind is an error naming both
//! kinds; nothing is written for it. No allocation per row.

use super::cells::{write_row, CellTexts};
use super::output::{Output, Writer};
use super::text::csv_field;
use super::{cells, wrong_kind, Exporter};
use crate::error::Result;
use crate::schema::{Kind, RowBatch};

/// Writes records of one kind as CSV or JSON lines.
pub struct RowsExporter {
    out: Output,
    kind: &'static Kind,
    cells: CellTexts,
    json: bool,
}

impl RowsExporter {
    /// An exporter of `kind` over `w`: JSON lines when `json`, else CSV
    /// (its header buffered at once).
    pub(crate) fn over(kind: &'static Kind, w: Writer, name: &str, json: bool) -> Self {
        let header = match json {
            true => Vec::new(),
            false => csv_header(kind),
        };
        // The cells, the braces and the line end.
        let max = cells::max_len(kind.fields) + 4;
        RowsExporter {
            out: Output::new(w, name, max, &header),
            kind,
            cells: CellTexts::whole(kind.fields, json),
            json,
        }
    }
}

/// The CSV header line of `kind`, with its line end.
fn csv_header(kind: &Kind) -> Vec<u8> {
    let mut head = Vec::new();
    for (j, f) in kind.fields.iter().enumerate() {
        if j > 0 {
            head.push(b',');
        }
        head.extend_from_slice(&csv_field(f.name));
    }
    head.push(b'\n');
    head
}

impl Exporter for RowsExporter {
    fn kind(&self) -> &'static Kind {
        self.kind
    }

    fn write_rows(&mut self, batch: &RowBatch) -> Result<()> {
        self.out.check()?;
        if !batch.kind().is(self.kind) {
            return Err(wrong_kind(
                self.out.name(),
                self.kind,
                batch.kind(),
                batch.len(),
            ));
        }
        let rows = batch.rows();
        for i in 0..rows.len() {
            self.out.room_for_record()?;
            // A checked cursor: this path is not the hot one.
            let buf = &mut self.out.buf.cursor();
            if self.json {
                buf.byte(b'{');
                write_row::<true, true>(buf, &self.cells, rows, i);
                buf.bytes(b"}\n");
            } else {
                write_row::<false, true>(buf, &self.cells, rows, i);
                buf.byte(b'\n');
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        self.out.finish()
    }

    fn name(&self) -> &str {
        self.out.name()
    }

    fn flush(&mut self) -> Result<()> {
        self.out.finish()
    }

    fn reopen(&mut self) -> Result<bool> {
        self.out.reopen()
    }
}
