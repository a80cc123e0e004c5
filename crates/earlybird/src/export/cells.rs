//! The cells of records whose fields are declared at run time
//! ([`crate::schema::Rows`]) in CSV and JSON lines: the fields per-flow
//! analyzers add after a flow record's own, and the records of the other
//! kinds (`super::rows`).
//!
//! Contract: [`CellTexts`] is built once per exporter from the field table,
//! for cells that follow a record's own fields ([`CellTexts::after`]) or
//! make a whole record ([`CellTexts::whole`]); [`write_row`] appends row
//! `i`'s cells: CSV `,value` per cell (null: empty; text quoted, with
//! doubled quotes, only when it holds a comma, quote, CR or LF or starts or
//! ends with a space), JSON `,"name":value` per cell (null: `null`; text as
//! a JSON string), without the separator before the first cell of a whole
//! record. Floats are written as the flow exporters write theirs (at most
//! three decimals; not finite: CSV empty, JSON `null`). At most [`max_len`]
//! bytes per row, so the record bound of the exporters covers it. No
//! allocation per row.

use super::text::{json_escaped, json_string, Cursor, Snip, MAX_FIELD};
use crate::schema::{Field, FieldType, Rows, Value, MAX_TEXT};

/// The fixed texts of the run-time fields, for one format.
pub(crate) struct CellTexts {
    /// JSON: `,"name":` per field (no comma before the first field of a
    /// whole record); empty for CSV.
    keys: Vec<Snip>,
    /// Number of fields.
    width: usize,
    /// The cells follow a record's own fields: the first one is separated
    /// from them too.
    after: bool,
}

impl CellTexts {
    /// Texts for `fields` written after a record's own fields, CSV
    /// (`json = false`) or JSON lines.
    pub(crate) fn after(fields: &[Field], json: bool) -> Self {
        Self::new(fields, json, true)
    }

    /// Texts for `fields` making a whole record (the caller writes the
    /// JSON braces and the line end).
    pub(crate) fn whole(fields: &[Field], json: bool) -> Self {
        Self::new(fields, json, false)
    }

    fn new(fields: &[Field], json: bool, after: bool) -> Self {
        let keys = if json {
            fields
                .iter()
                .enumerate()
                .map(|(j, f)| {
                    let mut key = Vec::new();
                    if j > 0 || after {
                        key.push(b',');
                    }
                    key.extend_from_slice(&json_string(f.name));
                    key.push(b':');
                    Snip::new(&key)
                })
                .collect()
        } else {
            Vec::new()
        };
        CellTexts {
            keys,
            width: fields.len(),
            after,
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
            // The key with its comma and colon.
            json_string(f.name).len() + 2 + value
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
        } else if j > 0 || texts.after {
            buf.byte(b',');
        }
        write_value::<JSON, C>(buf, rows.get(i, j));
    }
}

/// Appends one value (see the module docs).
#[inline]
fn write_value<const JSON: bool, const C: bool>(buf: &mut Cursor<'_, C>, v: Value<'_>) {
    match v {
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
