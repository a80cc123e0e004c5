//! JSON lines exporter: one JSON object per flow, one per line.
//!
//! Contract: input is [`RecordBatch`]es; output is one object per record with
//! the keys of [`super::fields::FIELDS`] in that order, then the arrays
//! `early_size`, `early_dir` (1 / -1) and `early_iat_us`, each of length
//! `early_len` (at most N), then the keys of the analyzers' fields, if any
//! ([`super::cells`]), and `\n`. Strings are JSON-escaped (class names
//! once, when the exporter is built; other strings never need it). A
//! non-finite float and a value not measured (`None` in the record) are
//! `null`. Fails only when the writer fails (see
//! [`super`]); no allocation per record (the buffer is allocated when the
//! exporter is built).

use std::io::Write;

use super::cells::{write_row, CellTexts};
use super::output::{max_record_len, Output, Writer};
use super::text::{json_string, Snip};
use super::{
    early_of, fields, prefetch_ahead, write_scalars, AppNames, ExportOptions, Exporter, Renderer,
    Texts,
};
use crate::error::Result;
use crate::features::Dir;
use crate::flow::record::RecordBatch;

/// Writes records as JSON lines.
pub struct JsonLinesExporter {
    out: Output,
    apps: AppNames,
    /// Keys of the scalar fields.
    texts: Texts,
    /// `,"early_size":[` and friends.
    early_keys: [Snip; 3],
    /// Keys of the analyzers' fields.
    cells: CellTexts,
    n: usize,
    opts: ExportOptions,
}

impl JsonLinesExporter {
    /// A JSON lines exporter writing to `w`.
    pub fn new(w: Box<dyn Write + Send>, name: &str, opts: &ExportOptions) -> Self {
        Self::over(Writer::Other(w), name, opts)
    }

    /// A JSON lines exporter over `w`.
    pub(crate) fn over(w: Writer, name: &str, opts: &ExportOptions) -> Self {
        let early_keys =
            fields::EARLY_FIELDS.map(|e| Snip::new(format!(",\"{}\":[", e.json).as_bytes()));
        let apps = AppNames::new(&opts.class_names, json_string);
        let max = max_record_len(opts.early_packets, apps.max_len(), &opts.analyzed);
        JsonLinesExporter {
            out: Output::new(w, name, max, b""),
            apps,
            texts: Texts::new(true, opts.community_id()),
            early_keys,
            cells: CellTexts::after(&opts.analyzed, true),
            n: opts.early_packets,
            opts: opts.clone(),
        }
    }
}

impl Exporter for JsonLinesExporter {
    fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        self.out.check()?;
        for (i, r) in batch.records.iter().enumerate() {
            prefetch_ahead(batch, i);
            self.out.room_for_record()?;
            let start = self.out.buf.len();
            let early = early_of(batch, i, self.n);
            // SAFETY: `room_for_record` left `max_record_len(self.n, longest
            // app name)` bytes free, and one record follows.
            let buf = &mut unsafe { self.out.buf.record_cursor() };
            write_scalars::<true, false>(
                buf,
                &self.texts,
                r,
                self.apps.get(&r.verdict),
                early.len(),
            );
            // Each value is followed by a comma; the last one is taken back.
            let last = usize::from(!early.is_empty());
            buf.snip(&self.early_keys[0]);
            for p in early {
                buf.u64(u64::from(p.size));
                buf.byte(b',');
            }
            buf.unwrite(last);
            buf.byte(b']');
            buf.snip(&self.early_keys[1]);
            for p in early {
                // "1," or "-1," as one store.
                let fwd = p.dir == Dir::Fwd;
                buf.bytes(if fwd { b"1,," } else { b"-1," });
                buf.unwrite(usize::from(fwd));
            }
            buf.unwrite(last);
            buf.byte(b']');
            buf.snip(&self.early_keys[2]);
            for p in early {
                buf.u64(u64::from(p.iat_us));
                buf.byte(b',');
            }
            buf.unwrite(last);
            buf.byte(b']');
            if !self.cells.is_empty() {
                write_row::<true, false>(buf, &self.cells, &batch.analyzed, i);
            }
            buf.bytes(b"}\n");
            debug_assert!(buf.len() - start <= self.out.max_record);
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        self.out.finish()
    }

    fn name(&self) -> &str {
        self.out.name()
    }

    fn renderer(&self) -> Option<Renderer> {
        let (name, opts) = (self.out.name().to_string(), self.opts.clone());
        Some(Renderer::new(move |w| {
            Box::new(JsonLinesExporter::new(w, &name, &opts))
        }))
    }

    fn write_rendered(&mut self, text: &[u8], _records: usize) -> Result<()> {
        self.out.write_text(text)
    }

    fn flush(&mut self) -> Result<()> {
        self.out.finish()
    }

    fn reopen(&mut self) -> Result<bool> {
        self.out.reopen()
    }
}
