//! Record schemas: the descriptor tables that name, type and describe the
//! fields of a record kind, and [`Rows`], the cells of records whose fields
//! are declared at run time (per-flow analyzers, record kinds other than
//! flows).
//!
//! Contract: a record kind is a [`Kind`]: a name and a table of [`Field`]s,
//! declared once as a `const` next to the code that fills it; every output
//! format (CSV header and columns, JSON keys, the field reference in
//! `docs/`) is generated from that table, so a field is declared once.
//! Flow records are the kind `crate::export::fields::FLOWS`, written by
//! their own specialised exporters; records of every other kind travel as a
//! [`RowBatch`] (the kind and its rows) and are written by the generic
//! writer `crate::export::rows`. Kind names are unique: outputs and batches
//! are matched by name.
//!
//! [`Rows`] holds records of a fixed width as a flat array of cells plus
//! one byte array for their text: pushing a row allocates only when the
//! arrays grow (they are reused batch after batch), a row always has
//! exactly the declared width (missing cells are null, extra cells are
//! dropped) and text is cut at [`MAX_TEXT`] bytes on a character boundary.
//! A row nothing was written in keeps no cells (most flows' analyzer
//! cells): it reads as nulls, and is known to be null without a look at
//! its cells.
//! A cell carries its own value type; the field's [`FieldType`] documents
//! what its producer writes there. Nothing here panics on any value.

/// Value type of a field as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    /// Text (CSV: quoted only when needed; JSON: string).
    Str,
    /// Unsigned integer of at most 8 bits.
    U8,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// Signed 8-bit integer.
    I8,
    /// Signed 64-bit integer.
    I64,
    /// Floating point, rounded to at most 3 decimals by the text formats.
    F64,
}

impl FieldType {
    /// Name used in the field reference.
    pub fn name(self) -> &'static str {
        match self {
            FieldType::Str => "string",
            FieldType::U8 => "u8",
            FieldType::U16 => "u16",
            FieldType::U32 => "u32",
            FieldType::U64 => "u64",
            FieldType::I8 => "i8",
            FieldType::I64 => "i64",
            FieldType::F64 => "f64",
        }
    }

    /// Every type, in declaration order.
    pub const ALL: [FieldType; 8] = [
        FieldType::Str,
        FieldType::U8,
        FieldType::U16,
        FieldType::U32,
        FieldType::U64,
        FieldType::I8,
        FieldType::I64,
        FieldType::F64,
    ];

    /// The column type of the Parquet output: the Arrow type (as pyarrow
    /// names it) and the Parquet physical and logical type it is stored as.
    pub fn parquet_name(self) -> &'static str {
        match self {
            FieldType::Str => "string (BYTE_ARRAY, STRING)",
            FieldType::U8 => "uint8 (INT32, INT(8, unsigned))",
            FieldType::U16 => "uint16 (INT32, INT(16, unsigned))",
            FieldType::U32 => "uint32 (INT32, INT(32, unsigned))",
            FieldType::U64 => "uint64 (INT64, INT(64, unsigned))",
            FieldType::I8 => "int8 (INT32, INT(8, signed))",
            FieldType::I64 => "int64 (INT64)",
            FieldType::F64 => "double (DOUBLE)",
        }
    }
}

/// One field of a record kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Column name (CSV header) and key (JSON).
    pub name: &'static str,
    /// Value type.
    pub ty: FieldType,
    /// Unit, empty when the value has none.
    pub unit: &'static str,
    /// What the value means.
    pub desc: &'static str,
}

impl Field {
    /// A field (usable in `const` tables).
    pub const fn new(
        name: &'static str,
        ty: FieldType,
        unit: &'static str,
        desc: &'static str,
    ) -> Field {
        Field {
            name,
            ty,
            unit,
            desc,
        }
    }
}

/// A record kind: its name and its fields, in output order (see the module
/// docs). Declared as a `const`:
///
/// ```
/// use earlybird::{Field, FieldType, Kind};
///
/// const CALLS: Kind = Kind::new(
///     "calls",
///     &[
///         Field::new("call_id", FieldType::Str, "", "SIP Call-ID"),
///         Field::new("duration_ms", FieldType::U64, "ms", "Answer to hang-up"),
///     ],
/// );
/// assert_eq!(CALLS.width(), 2);
/// assert_eq!(CALLS.position("duration_ms"), Some(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    /// Unique name (outputs and batches are matched by it), e.g. "flows".
    pub name: &'static str,
    /// The fields of a record, in output order.
    pub fields: &'static [Field],
}

impl Kind {
    /// A kind (usable in `const` tables).
    pub const fn new(name: &'static str, fields: &'static [Field]) -> Kind {
        Kind { name, fields }
    }

    /// Number of fields: the cells of each row.
    pub const fn width(&self) -> usize {
        self.fields.len()
    }

    /// Index of the field named `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }

    /// True when `other` is the same kind (same name).
    #[inline]
    pub fn is(&self, other: &Kind) -> bool {
        self.name == other.name
    }
}

/// Longest text a cell keeps, in bytes (longer text is cut on a character
/// boundary).
pub const MAX_TEXT: usize = 256;

/// One cell as stored: text refers to the rows' byte array.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cell {
    Null,
    U64(u64),
    I64(i64),
    F64(f64),
    Text { start: u32, len: u32 },
}

/// Lower-case hexadecimal digits, for text cells and the writers.
pub(crate) const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// A row of nulls, the widest [`Rows::push_row`] lays down by copying.
const NULL_ROW: [Cell; 64] = [Cell::Null; 64];

/// One cell as read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// Not measured (CSV: empty; JSON: `null`).
    Null,
    /// An unsigned integer.
    U64(u64),
    /// A signed integer.
    I64(i64),
    /// A float.
    F64(f64),
    /// Text (at most 256 bytes).
    Text(&'a str),
}

impl Value<'_> {
    /// The value with its text copied.
    pub fn to_owned(self) -> OwnedValue {
        match self {
            Value::Null => OwnedValue::Null,
            Value::U64(v) => OwnedValue::U64(v),
            Value::I64(v) => OwnedValue::I64(v),
            Value::F64(v) => OwnedValue::F64(v),
            Value::Text(t) => OwnedValue::Text(t.to_string()),
        }
    }
}

/// A [`Value`] that owns its text (records collected in memory).
#[derive(Debug, Clone, PartialEq)]
pub enum OwnedValue {
    /// Not measured.
    Null,
    /// An unsigned integer.
    U64(u64),
    /// A signed integer.
    I64(i64),
    /// A float.
    F64(f64),
    /// Text.
    Text(String),
}

/// Records of one width as cells (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Rows {
    width: usize,
    cells: Vec<Cell>,
    text: Vec<u8>,
    /// Per row: where its cells start in `cells`, or [`NULLS`] for a row
    /// of nulls, which keeps no cells (most records' analyzer cells: the
    /// analyzers found nothing in most flows).
    at: Vec<usize>,
    /// A cell of the row being filled was written.
    wrote: bool,
    /// The rows a batch expects: room for them is made when the width is
    /// first set ([`Rows::expecting`]).
    expect: usize,
}

/// [`Rows::at`] of a row of nulls.
const NULLS: usize = usize::MAX;

impl Rows {
    /// Number of rows.
    pub fn len(&self) -> usize {
        if self.width == 0 {
            return 0;
        }
        self.at.len()
    }

    /// True when there is no row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Cells per row (of the rows pushed last).
    pub fn width(&self) -> usize {
        self.width
    }

    /// Rows of `width` from here on: a width other than the rows' so far
    /// clears them first.
    #[inline]
    fn set_width(&mut self, width: usize) {
        if width != self.width {
            self.clear();
            self.width = width;
            self.cells.reserve(self.expect * width);
            self.at.reserve(self.expect);
        }
    }

    /// Appends a row of `width` cells written by `fill` (cells it does not
    /// write are null; cells past `width` are dropped). A width other than
    /// the rows' so far clears them first.
    #[inline]
    pub fn push_row(&mut self, width: usize, fill: impl FnOnce(&mut Cells<'_>)) {
        self.set_width(width);
        // The row is laid down as nulls in one go and `fill` writes over
        // them in turn: what it leaves is null without a fill per section.
        let start = self.cells.len();
        // A row of a usual width is copied from a row of nulls (one copy
        // of its bytes, not a store per cell).
        match NULL_ROW.get(..width) {
            Some(nulls) => self.cells.extend_from_slice(nulls),
            None => self.cells.resize(start + width, Cell::Null),
        }
        self.wrote = false;
        let mut c = Cells {
            rows: self,
            at: start,
            end: start + width,
        };
        fill(&mut c);
        if self.wrote {
            self.at.push(start);
        } else {
            self.cells.truncate(start);
            self.at.push(NULLS);
        }
    }

    /// Appends the row `t` holds (`Template`), in one copy of its
    /// cells, or as a row of nulls.
    #[inline]
    pub fn push_template(&mut self, width: usize, t: &Template) {
        if t.cells.is_empty() {
            self.push_null(width);
            return;
        }
        debug_assert_eq!(t.cells.len(), width);
        self.set_width(width);
        let start = self.cells.len();
        self.cells.extend_from_slice(&t.cells);
        self.at.push(start);
    }

    /// No rows; room for `rows` rows is made when their width is known
    /// (their first row): a batch of records whose analyzers' width the
    /// batch's maker does not know.
    pub fn expecting(rows: usize) -> Rows {
        Rows {
            expect: rows,
            ..Rows::default()
        }
    }

    /// No rows, with room for `rows` rows of `width` cells and `text`
    /// bytes of text.
    pub fn with_capacity(rows: usize, width: usize, text: usize) -> Rows {
        Rows {
            width,
            cells: Vec::with_capacity(rows * width),
            text: Vec::with_capacity(text),
            at: Vec::with_capacity(rows),
            wrote: false,
            expect: rows,
        }
    }

    /// No rows, with room for `rows` rows of `width` cells, holding a copy
    /// of `src`'s text and room for `more` bytes after it: the cells of
    /// `src` copied as they are ([`Cells::row_as_is`]) read the same text
    /// here.
    pub(crate) fn sharing_text(src: &Rows, rows: usize, width: usize, more: usize) -> Rows {
        let mut text = Vec::with_capacity(src.text.len() + more);
        text.extend_from_slice(&src.text);
        Rows {
            width,
            cells: Vec::with_capacity(rows * width),
            text,
            at: Vec::with_capacity(rows),
            wrote: false,
            expect: rows,
        }
    }

    /// Bytes of text the rows hold.
    pub fn text_len(&self) -> usize {
        self.text.len()
    }

    /// Appends a row of nulls (it keeps no cells).
    #[inline]
    pub fn push_null(&mut self, width: usize) {
        self.set_width(width);
        self.at.push(NULLS);
    }

    /// The cells of row `i`; `None` for a row of nulls or outside the
    /// rows.
    #[inline]
    fn cells_of(&self, i: usize) -> Option<&[Cell]> {
        match self.at.get(i) {
            Some(&a) if a != NULLS => self.cells.get(a..a + self.width),
            _ => None,
        }
    }

    /// True when the cells `cols` of row `i` are all null (cells outside
    /// the rows count as null).
    #[inline]
    pub fn nulls(&self, i: usize, cols: &[usize]) -> bool {
        let Some(row) = self.cells_of(i) else {
            return true;
        };
        cols.iter()
            .all(|&j| matches!(row.get(j), None | Some(Cell::Null)))
    }

    /// Cell `j` of row `i`; `Null` outside the rows.
    pub fn get(&self, i: usize, j: usize) -> Value<'_> {
        match self.cells_of(i).and_then(|row| row.get(j)) {
            None | Some(Cell::Null) => Value::Null,
            Some(Cell::U64(v)) => Value::U64(*v),
            Some(Cell::I64(v)) => Value::I64(*v),
            Some(Cell::F64(v)) => Value::F64(*v),
            Some(Cell::Text { start, len }) => {
                let (s, l) = (*start as usize, *len as usize);
                // Text is stored only from `&str` cut at a boundary.
                Value::Text(
                    self.text
                        .get(s..s + l)
                        .and_then(|b| std::str::from_utf8(b).ok())
                        .unwrap_or(""),
                )
            }
        }
    }

    /// The cells of row `i`.
    pub fn row(&self, i: usize) -> impl Iterator<Item = Value<'_>> + '_ {
        (0..self.width).map(move |j| self.get(i, j))
    }

    /// Empties the rows, keeping the arrays.
    pub fn clear(&mut self) {
        self.cells.clear();
        self.text.clear();
        self.at.clear();
    }
}

/// Rows of one [`Kind`]: what a producer hands to the exporter path. Every
/// row has the kind's width.
///
/// ```
/// use earlybird::{Field, FieldType, Kind, RowBatch, Value};
///
/// const ALARMS: Kind = Kind::new(
///     "alarms",
///     &[
///         Field::new("ts", FieldType::U64, "ns", "When"),
///         Field::new("what", FieldType::Str, "", "Text"),
///     ],
/// );
/// let mut b = RowBatch::new(&ALARMS);
/// b.push(|c| {
///     c.u64(1_700_000_000_000_000_000);
///     c.text("link down");
/// });
/// assert_eq!(b.len(), 1);
/// assert_eq!(b.rows().get(0, 1), Value::Text("link down"));
/// ```
#[derive(Debug, Clone)]
pub struct RowBatch {
    kind: &'static Kind,
    rows: Rows,
}

impl RowBatch {
    /// An empty batch of `kind` (nothing is allocated until a row is
    /// pushed).
    pub fn new(kind: &'static Kind) -> RowBatch {
        RowBatch {
            kind,
            rows: Rows::default(),
        }
    }

    /// The kind of the rows.
    pub fn kind(&self) -> &'static Kind {
        self.kind
    }

    /// The rows, for writers.
    pub fn rows(&self) -> &Rows {
        &self.rows
    }

    /// Appends a row written by `fill`, in the kind's field order (see
    /// [`Rows::push_row`]).
    #[inline]
    pub fn push(&mut self, fill: impl FnOnce(&mut Cells<'_>)) {
        self.rows.push_row(self.kind.width(), fill);
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when there is no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Empties the batch, keeping its arrays.
    pub fn clear(&mut self) {
        self.rows.clear();
    }

    /// Empties the batch and makes it a batch of `kind` (a batch taken
    /// back for reuse keeps its arrays whatever kind it held).
    pub fn reset(&mut self, kind: &'static Kind) {
        self.rows.clear();
        self.kind = kind;
    }
}

/// A row that is the same for every record it is written for (the
/// analyzers' fields of a flow none of them made a state for): its cells
/// kept once and copied into [`Rows`] as they are
/// ([`Rows::push_template`]). Only rows whose text cells are all empty:
/// those point nowhere in the rows' text.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    /// The row's cells; none for a row of nulls.
    cells: Vec<Cell>,
}

impl Template {
    /// The row of `width` cells `fill` writes (as [`Rows::push_row`]
    /// takes it), when it writes no text but empty text.
    pub fn of(width: usize, fill: impl FnOnce(&mut Cells<'_>)) -> Option<Template> {
        let mut rows = Rows::default();
        rows.push_row(width, fill);
        let Some(cells) = rows.cells_of(0) else {
            return Some(Template { cells: Vec::new() });
        };
        let mut kept = Vec::with_capacity(width);
        for c in cells {
            kept.push(match *c {
                Cell::Text { len: 0, .. } => Cell::Text { start: 0, len: 0 },
                Cell::Text { .. } => return None,
                other => other,
            });
        }
        Some(Template { cells: kept })
    }

    /// True for a row of nulls.
    pub fn is_null(&self) -> bool {
        self.cells.is_empty()
    }
}

/// Writes the cells of one row, in field order ([`Rows::push_row`]).
pub struct Cells<'a> {
    rows: &'a mut Rows,
    /// The next cell written (the row's cells up to `end` are there,
    /// null until written).
    at: usize,
    end: usize,
}

impl Cells<'_> {
    #[inline]
    fn put(&mut self, c: Cell) {
        if self.at < self.end {
            self.rows.cells[self.at] = c;
            self.rows.wrote = true;
            self.at += 1;
        }
    }

    /// Runs `fill` on the next `n` cells of the row: what it leaves
    /// unwritten is null, what it writes past them is dropped.
    #[inline]
    pub fn section(&mut self, n: usize, fill: impl FnOnce(&mut Cells<'_>)) {
        let end = (self.at + n).min(self.end);
        fill(&mut Cells {
            rows: self.rows,
            at: self.at,
            end,
        });
        self.at = end;
    }

    /// An unsigned integer.
    #[inline]
    pub fn u64(&mut self, v: u64) {
        self.put(Cell::U64(v));
    }

    /// A signed integer.
    #[inline]
    pub fn i64(&mut self, v: i64) {
        self.put(Cell::I64(v));
    }

    /// A float.
    #[inline]
    pub fn f64(&mut self, v: f64) {
        self.put(Cell::F64(v));
    }

    /// A value that was not measured.
    #[inline]
    pub fn null(&mut self) {
        self.put(Cell::Null);
    }

    /// `n` values that were not measured: the row's cells are laid down
    /// null ([`Rows::push_row`]) and written in order, so the next `n`
    /// are null already and are left as they are.
    #[inline]
    pub fn nulls(&mut self, n: usize) {
        self.at = (self.at + n).min(self.end);
    }

    /// Empty text (as `text("")`, without the cut).
    #[inline]
    pub fn empty_text(&mut self) {
        let start = self.rows.text.len();
        self.put(Cell::Text {
            start: start as u32,
            len: 0,
        });
    }

    /// Text, cut at 256 bytes (`MAX_TEXT`) on a character boundary.
    pub fn text(&mut self, s: &str) {
        let mut n = s.len().min(MAX_TEXT);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.text_bytes(&s.as_bytes()[..n]);
    }

    /// Bytes as lower-case hexadecimal text (at most `MAX_TEXT / 2` bytes).
    pub fn hex(&mut self, b: &[u8]) {
        let b = &b[..b.len().min(MAX_TEXT / 2)];
        let start = self.rows.text.len();
        for &x in b {
            self.rows.text.push(HEX_DIGITS[(x >> 4) as usize]);
            self.rows.text.push(HEX_DIGITS[(x & 15) as usize]);
        }
        let len = self.rows.text.len() - start;
        self.put(Cell::Text {
            start: start as u32,
            len: len as u32,
        });
    }

    /// The cells of row `i` of `src`, as they are (nothing when `src` has
    /// no row `i`): what [`Rows::get`] would read of each, written in turn,
    /// without reading each cell as a [`Value`].
    pub fn row_of(&mut self, src: &Rows, i: usize) {
        let Some(cells) = self.src_row(src, i) else {
            return;
        };
        for c in cells {
            match *c {
                Cell::Text { start, len } => {
                    let (s, l) = (start as usize, len as usize);
                    self.text_bytes(src.text.get(s..s + l).unwrap_or(&[]));
                }
                other => self.put(other),
            }
        }
    }

    /// The cells of row `i` of `src` as they are, in one copy (nothing
    /// when `src` has no row `i`), into rows made by
    /// [`Rows::sharing_text`] of `src` (whose text their text cells point
    /// into): what [`Cells::row_of`] writes there.
    pub(crate) fn row_as_is(&mut self, src: &Rows, i: usize) {
        let Some(cells) = self.src_row(src, i) else {
            return;
        };
        let n = cells.len().min(self.end.saturating_sub(self.at));
        self.rows.cells[self.at..self.at + n].copy_from_slice(&cells[..n]);
        self.rows.wrote |= n > 0;
        self.at += n;
    }

    /// The cells of row `i` of `src` to copy; `None` when there are
    /// none: `src` has no row `i`, or it is a row of nulls, whose cells
    /// are passed over here (they are null already).
    #[inline]
    fn src_row<'s>(&mut self, src: &'s Rows, i: usize) -> Option<&'s [Cell]> {
        let row = src.cells_of(i);
        if row.is_none() && i < src.len() {
            self.nulls(src.width);
        }
        row
    }

    fn text_bytes(&mut self, b: &[u8]) {
        let start = self.rows.text.len();
        self.rows.text.extend_from_slice(b);
        self.put(Cell::Text {
            start: start as u32,
            len: b.len() as u32,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_have_their_width_whatever_is_written() {
        let mut r = Rows::default();
        r.push_row(3, |c| {
            c.u64(7);
            c.text("héllo");
        });
        r.push_row(3, |c| {
            for i in 0..5 {
                c.i64(-i);
            }
        });
        assert_eq!(r.len(), 2);
        assert_eq!(
            r.row(0).collect::<Vec<_>>(),
            [Value::U64(7), Value::Text("héllo"), Value::Null]
        );
        assert_eq!(
            r.row(1).collect::<Vec<_>>(),
            [Value::I64(0), Value::I64(-1), Value::I64(-2)]
        );
        assert_eq!(r.get(5, 0), Value::Null);
        assert_eq!(r.get(0, 3), Value::Null);
    }

    #[test]
    fn rows_wider_than_the_copied_nulls_are_null_where_not_written() {
        for width in [NULL_ROW.len() - 1, NULL_ROW.len(), NULL_ROW.len() + 7] {
            let mut r = Rows::default();
            for i in 0..3u64 {
                r.push_row(width, |c| {
                    c.nulls(width - 2);
                    c.u64(i);
                });
            }
            assert_eq!(r.len(), 3);
            for i in 0..3u64 {
                let row: Vec<_> = r.row(i as usize).collect();
                assert_eq!(row.len(), width);
                assert!(row[..width - 2].iter().all(|v| *v == Value::Null));
                assert_eq!(row[width - 2..], [Value::U64(i), Value::Null]);
            }
        }
    }

    #[test]
    fn nulls_and_empty_text_read_as_null_cells_and_text_of_nothing() {
        let fill_each = |c: &mut Cells<'_>| {
            c.text("");
            c.null();
            c.null();
            c.u64(3);
            c.text("");
            c.null();
        };
        let fill_at_once = |c: &mut Cells<'_>| {
            c.empty_text();
            c.nulls(2);
            c.u64(3);
            c.empty_text();
            c.nulls(1);
        };
        let (mut a, mut b) = (Rows::default(), Rows::default());
        for r in [&mut a, &mut b] {
            // A row before, with text, so that text starts further on.
            r.push_row(6, |c| c.text("before"));
        }
        a.push_row(6, fill_each);
        b.push_row(6, fill_at_once);
        let row: Vec<_> = a.row(1).collect();
        assert_eq!(
            row,
            [
                Value::Text(""),
                Value::Null,
                Value::Null,
                Value::U64(3),
                Value::Text(""),
                Value::Null
            ]
        );
        assert_eq!(b.row(1).collect::<Vec<_>>(), row);
        // Past the row's end: nothing written, the next row its own.
        b.push_row(6, |c| {
            c.nulls(9);
            c.u64(1);
        });
        assert_eq!(b.row(2).collect::<Vec<_>>(), [Value::Null; 6]);
        assert_eq!(b.len(), 3);
    }

    #[test]
    fn a_template_row_reads_as_the_row_it_was_made_from() {
        let fill = |c: &mut Cells<'_>| {
            c.empty_text();
            c.nulls(2);
            c.u64(7);
            c.empty_text();
        };
        let t = Template::of(6, fill).expect("no text but empty text");
        assert!(!t.is_null());
        let mut by_template = Rows::default();
        let mut by_fill = Rows::default();
        for rows in [&mut by_template, &mut by_fill] {
            rows.push_row(6, |c| c.text("before"));
        }
        by_template.push_template(6, &t);
        by_fill.push_row(6, fill);
        for i in 0..2 {
            let a: Vec<Value<'_>> = by_template.row(i).collect();
            let b: Vec<Value<'_>> = by_fill.row(i).collect();
            assert_eq!(a, b, "row {i}");
        }
        assert_eq!(by_template.get(1, 0), Value::Text(""));
        assert_eq!(by_template.get(1, 5), Value::Null);
        // Text other than empty would point into one rows' text: no
        // template; a row of nulls is laid down as one.
        assert_eq!(Template::of(3, |c| c.text("x")), None);
        let null = Template::of(3, |c| c.nulls(3)).unwrap();
        assert!(null.is_null());
        let mut rows = Rows::default();
        rows.push_template(3, &null);
        assert_eq!(rows.len(), 1);
        assert!(rows.nulls(0, &[0, 1, 2]));
    }

    #[test]
    fn rows_of_nulls_keep_no_cells_and_read_as_null_rows() {
        let mut r = Rows::expecting(8);
        r.push_null(3);
        r.push_row(3, |c| c.u64(9));
        r.push_row(3, |c| c.nulls(3));
        r.push_row(3, |c| c.null());
        r.push_null(3);
        assert_eq!(r.len(), 5);
        // The rows of nulls hold no cells; a null written is kept.
        assert_eq!(r.cells.len(), 6);
        assert!(r.cells.capacity() >= 8 * 3);
        let nulls = [Value::Null; 3];
        for i in [0, 2, 3, 4] {
            assert_eq!(r.row(i).collect::<Vec<_>>(), nulls, "row {i}");
            assert!(r.nulls(i, &[0, 1, 2]), "row {i}");
        }
        assert_eq!(
            r.row(1).collect::<Vec<_>>(),
            [Value::U64(9), Value::Null, Value::Null]
        );
        assert!(!r.nulls(1, &[0]) && r.nulls(1, &[1, 2]));
        // Copied cell by cell and as they are, a row of nulls moves the
        // writer past its cells: what follows lands after them.
        for as_is in [false, true] {
            let mut out = Rows::sharing_text(&r, 5, 4, 0);
            for i in 0..5 {
                out.push_row(4, |c| {
                    if as_is {
                        c.row_as_is(&r, i)
                    } else {
                        c.row_of(&r, i)
                    }
                    c.u64(i as u64);
                });
            }
            for i in 0..5 {
                let mut want: Vec<_> = r.row(i).collect();
                want.push(Value::U64(i as u64));
                assert_eq!(
                    out.row(i).collect::<Vec<_>>(),
                    want,
                    "row {i}, as is {as_is}"
                );
            }
        }
        // A width other than the rows' so far clears them.
        r.push_null(2);
        assert_eq!((r.len(), r.cells.len()), (1, 0));
        r.clear();
        assert!(r.is_empty());
    }

    #[test]
    fn a_row_copied_cell_by_cell_reads_as_the_original() {
        let mut src = Rows::default();
        src.push_row(4, |c| {
            c.text("first");
            c.u64(1);
        });
        src.push_row(4, |c| {
            c.f64(0.5);
            c.text("héllo");
            c.hex(&[0xab, 0x01]);
            c.i64(-3);
        });
        // Cell by cell, and as they are into rows holding a copy of the
        // source's text: the same values.
        for as_is in [false, true] {
            let mut out = if as_is {
                Rows::sharing_text(&src, 2, 6, 0)
            } else {
                Rows::default()
            };
            let copy = |c: &mut Cells<'_>, i| {
                if as_is {
                    c.row_as_is(&src, i)
                } else {
                    c.row_of(&src, i)
                }
            };
            // Wider rows: the copy's cells, then nulls; narrower: cut.
            out.push_row(6, |c| {
                c.section(5, |c| copy(c, 1));
                c.text("after");
            });
            out.push_row(6, |c| {
                c.section(2, |c| copy(c, 0));
                c.section(2, |c| copy(c, 9));
            });
            assert_eq!(
                out.row(0).collect::<Vec<_>>(),
                [
                    Value::F64(0.5),
                    Value::Text("héllo"),
                    Value::Text("ab01"),
                    Value::I64(-3),
                    Value::Null,
                    Value::Text("after"),
                ]
            );
            assert_eq!(
                out.row(1).collect::<Vec<_>>(),
                [
                    Value::Text("first"),
                    Value::U64(1),
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                ]
            );
        }
    }

    #[test]
    fn a_row_batch_has_its_kinds_width_and_keeps_it_across_resets() {
        const A: Kind = Kind::new(
            "test_a",
            &[
                Field::new("x", FieldType::U64, "", ""),
                Field::new("y", FieldType::Str, "", ""),
            ],
        );
        const B: Kind = Kind::new("test_b", &[Field::new("z", FieldType::I64, "", "")]);
        assert!(A.is(&A) && !A.is(&B));
        assert_eq!(
            (A.width(), A.position("y"), A.position("z")),
            (2, Some(1), None)
        );
        let mut b = RowBatch::new(&A);
        b.push(|c| c.u64(1));
        b.push(|c| {
            c.u64(2);
            c.text("two");
            c.text("dropped");
        });
        assert_eq!((b.len(), b.rows().width()), (2, 2));
        assert_eq!(
            b.rows().row(0).collect::<Vec<_>>(),
            [Value::U64(1), Value::Null]
        );
        assert_eq!(b.rows().get(1, 1), Value::Text("two"));
        b.reset(&B);
        assert!(b.is_empty() && b.kind().is(&B));
        b.push(|c| c.i64(-3));
        assert_eq!(b.rows().row(0).collect::<Vec<_>>(), [Value::I64(-3)]);
        b.clear();
        assert!(b.is_empty() && b.kind().is(&B));
    }

    #[test]
    fn text_is_cut_on_a_character_boundary_and_hex_is_lower_case() {
        let mut r = Rows::default();
        let long = "é".repeat(MAX_TEXT);
        r.push_row(2, |c| {
            c.text(&long);
            c.hex(&[0x00, 0xab, 0xff]);
        });
        match r.get(0, 0) {
            Value::Text(t) => {
                assert!(t.len() <= MAX_TEXT && t.len() >= MAX_TEXT - 1);
                assert!(t.chars().all(|c| c == 'é'));
            }
            v => panic!("{v:?}"),
        }
        assert_eq!(r.get(0, 1), Value::Text("00abff"));
        assert_eq!(r.get(0, 1).to_owned(), OwnedValue::Text("00abff".into()));
    }
}
