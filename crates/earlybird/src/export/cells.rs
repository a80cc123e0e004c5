//! The cells of a record's run-time fields (what per-flow analyzers add,
//! [`crate::schema::Rows`]) in CSV and JSON lines.
//!
//! Contract: [`CellTexts`] is built once per exporter from the field table;
//! [`write_row`] appends row `i`'s cells after a record's own fields: CSV
//! `,value` per cell (null: empty; text quoted, with doubled quotes, only
//! when it holds a comma, quote, CR or LF or starts or ends with a space),
//! JSON `,"name":value` per cell (null: `null`; text as a JSON string).
//! At most [`max_len`] bytes per row, so the record bound of the exporters
//! covers it. No allocation per row.

use super::text::{json_escaped, Cursor, Snip, MAX_FIELD};
use crate::schema::{Field, FieldType, Rows, Value, MAX_TEXT};

/// The fixed texts of the run-time fields, for one format.
pub(crate) struct CellTexts {
    /// JSON: `,"name":` per field; empty for CSV.
    keys: Vec<Snip>,
    /// Number of fields.
    width: usize,
}

impl CellTexts {
    /// Texts for `fields`, CSV (`json = false`) or JSON lines.
    pub(crate) fn new(fields: &[Field], json: bool) -> Self {
        let keys = if json {
            fields
                .iter()
                .map(|f| Snip::new(format!(",\"{}\":", f.name).as_bytes()))
                .collect()
        } else {
            Vec::new()
        };
        CellTexts {
            keys,
            width: fields.len(),
        }
    }

    /// True when there is no run-time field.
    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        self.width == 0
    }
}

/// Most bytes [`write_row`] writes for `fields`.
pub(crate) fn max_len(fields: &[Field]) -> usize {
    fields
        .iter()
        .map(|f| {
            let value = match f.ty {
                // Every byte escaped as \u00XX, and the quotes.
                FieldType::Str => 6 * MAX_TEXT + 2,
                _ => MAX_FIELD,
            };
            f.name.len() + 4 + value
        })
        .sum()
}

/// Appends the cells of row `i` of `rows` (see the module docs).
#[inline]
pub(crate) fn write_row<const JSON: bool, const C: bool>(
    buf: &mut Cursor<'_, C>,
    texts: &CellTexts,
    rows: &Rows,
    i: usize,
) {
    for j in 0..texts.width {
        if JSON {
            buf.snip(&texts.keys[j]);
        } else {
            buf.byte(b',');
        }
        match rows.get(i, j) {
            Value::Null => {
                if JSON {
                    buf.bytes(b"null");
                }
            }
            Value::U64(v) => buf.u64(v),
            Value::I64(v) => {
                if v < 0 {
                    buf.byte(b'-');
                }
                buf.u64(v.unsigned_abs());
            }
            Value::F64(v) => {
                if !buf.f64(v) && JSON {
                    buf.bytes(b"null");
                }
            }
            Value::Text(t) if JSON => json_text(buf, t),
            Value::Text(t) => csv_text(buf, t),
        }
    }
}

fn csv_text<const C: bool>(buf: &mut Cursor<'_, C>, t: &str) {
    let quote = t.bytes().any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r'))
        || t.starts_with(' ')
        || t.ends_with(' ');
    if !quote {
        buf.bytes(t.as_bytes());
        return;
    }
    buf.byte(b'"');
    for part in t.split('"').enumerate() {
        if part.0 > 0 {
            buf.bytes(b"\"\"");
        }
        buf.bytes(part.1.as_bytes());
    }
    buf.byte(b'"');
}

fn json_text<const C: bool>(buf: &mut Cursor<'_, C>, t: &str) {
    buf.byte(b'"');
    for &b in t.as_bytes() {
        match json_escaped(b) {
            Some(e) => buf.bytes(e),
            None => buf.byte(b),
        }
    }
    buf.byte(b'"');
}
