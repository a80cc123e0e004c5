//! CSV exporter: one header line, then one line per flow.
//!
//! Contract: input is [`RecordBatch`]es; output is RFC 4180 CSV with `\n` line
//! ends: the header of [`super::fields::csv_columns`] (written even when no
//! record follows), then the scalar fields of each record followed by
//! `N × 3` early columns (`pkt{i}_size, pkt{i}_dir, pkt{i}_iat_us`; `0,0,0`
//! for packets the flow did not have). Only class names can need quoting;
//! they are escaped once when the exporter is built. A non-finite float is
//! an empty field. Fails only when the writer fails (see [`super`]); no
//! allocation per record once the buffer has grown.

use std::io::Write;

use super::text::{csv_field, put_i64, put_u64};
use super::{early_of, fields, write_scalars, AppNames, ExportOptions, Exporter, Output};
use crate::error::Result;
use crate::flow::record::{Dir, RecordBatch};

/// Writes records as CSV.
pub struct CsvExporter {
    out: Output,
    apps: AppNames,
    n: usize,
}

impl CsvExporter {
    /// A CSV exporter writing to `w`; the header is buffered at once.
    pub fn new(w: Box<dyn Write + Send>, name: &str, opts: &ExportOptions) -> Self {
        let mut out = Output::new(w, name);
        out.buf
            .extend_from_slice(fields::csv_header(opts.early_packets).as_bytes());
        CsvExporter {
            out,
            apps: AppNames::new(&opts.class_names, csv_field),
            n: opts.early_packets,
        }
    }
}

impl Exporter for CsvExporter {
    fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        self.out.check()?;
        for (i, r) in batch.records.iter().enumerate() {
            let early = early_of(batch, i, self.n);
            let buf = &mut self.out.buf;
            write_scalars::<false>(buf, &[], r, self.apps.get(&r.verdict), early.len());
            for p in early {
                buf.push(b',');
                put_u64(buf, u64::from(p.size));
                buf.push(b',');
                put_i64(buf, if p.dir == Dir::Fwd { 1 } else { -1 });
                buf.push(b',');
                put_u64(buf, u64::from(p.iat_us));
            }
            for _ in early.len()..self.n {
                buf.extend_from_slice(b",0,0,0");
            }
            buf.push(b'\n');
            self.out.maybe_drain()?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        self.out.finish()
    }

    fn name(&self) -> &str {
        self.out.name()
    }
}
