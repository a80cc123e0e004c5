//! CSV exporter: one header line, then one line per flow.
//!
//! Contract: input is [`RecordBatch`]es; output is RFC 4180 CSV with `\n` line
//! ends: the header of [`super::fields::csv_columns`] (written even when no
//! record follows), then the scalar fields of each record followed by
//! `N × 3` early columns (`pkt{i}_size, pkt{i}_dir, pkt{i}_iat_us`; empty
//! for packets the flow did not have), then the columns of the analyzers'
//! fields, if any ([`super::cells`]). Class names are escaped once when the
//! exporter is built. A non-finite float and a
//! value not measured (`None` in the record) are an empty field. Fails only when the writer fails (see [`super`]); no
//! allocation per record (the buffer is allocated when the exporter is
//! built).

use super::cells::{write_row, CellTexts};
use super::output::{max_record_len, Output, Writer};
use super::text::csv_field;
use super::{
    early_of, fields, prefetch_ahead, write_scalars, AppNames, ExportOptions, Exporter, Renderer,
    Texts,
};
use crate::error::Result;
use crate::features::Dir;
use crate::flow::record::RecordBatch;

/// Writes records as CSV.
pub struct CsvExporter {
    out: Output,
    apps: AppNames,
    texts: Texts,
    cells: CellTexts,
    n: usize,
    opts: ExportOptions,
}

impl CsvExporter {
    /// A CSV exporter over `w`, with the header buffered or not.
    pub(crate) fn over(w: Writer, name: &str, opts: &ExportOptions, header: bool) -> Self {
        let apps = AppNames::new(&opts.class_names, csv_field);
        let n = opts.early_packets;
        let head = match header {
            true => fields::csv_header_with(n, &opts.analyzed),
            false => String::new(),
        };
        let max = max_record_len(n, apps.max_len(), &opts.analyzed);
        CsvExporter {
            out: Output::new(w, name, max, head.as_bytes()),
            apps,
            texts: Texts::new(false, opts.community_id()),
            cells: CellTexts::after(&opts.analyzed, false),
            n,
            opts: opts.clone(),
        }
    }
}

impl Exporter for CsvExporter {
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
            write_scalars::<false, false>(
                buf,
                &self.texts,
                r,
                self.apps.get(&r.verdict),
                early.len(),
            );
            for p in early {
                buf.sep_u64(b',', u64::from(p.size));
                // ",1," or ",-1," as one store.
                let fwd = p.dir == Dir::Fwd;
                buf.bytes(if fwd { b",1,," } else { b",-1," });
                buf.unwrite(usize::from(fwd));
                buf.u64(u64::from(p.iat_us));
            }
            // Packets the flow did not have: empty, not measured.
            for _ in early.len()..self.n {
                buf.bytes(b",,,");
            }
            if !self.cells.is_empty() {
                write_row::<false, false>(buf, &self.cells, &batch.analyzed, i);
            }
            buf.byte(b'\n');
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
            Box::new(CsvExporter::over(Writer::Other(w), &name, &opts, false))
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
