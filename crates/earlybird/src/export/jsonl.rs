//! JSON lines exporter: one JSON object per flow, one per line.
//!
//! Contract: input is [`RecordBatch`]es; output is one object per record with
//! the keys of [`super::fields::FIELDS`] in that order, then the arrays
//! `early_size`, `early_dir` (1 / -1) and `early_iat_us`, each of length
//! `early_len` (at most N), and `\n`. Strings are JSON-escaped (class names
//! once, when the exporter is built; other strings never need it). A
//! non-finite float is `null`. Fails only when the writer fails (see
//! [`super`]); no allocation per record (the buffer is allocated when the
//! exporter is built).

use std::io::Write;

use super::text::json_string;
use super::{
    early_of, fields, max_record_len, write_scalars, AppNames, ExportOptions, Exporter, Output,
};
use crate::error::Result;
use crate::flow::record::{Dir, RecordBatch};

/// Writes records as JSON lines.
pub struct JsonLinesExporter {
    out: Output,
    apps: AppNames,
    /// `{"name":` for the first field, `,"name":` for the others.
    keys: Vec<Vec<u8>>,
    /// `,"early_size":[` and friends.
    early_keys: [Vec<u8>; 3],
    n: usize,
}

impl JsonLinesExporter {
    /// A JSON lines exporter writing to `w`.
    pub fn new(w: Box<dyn Write + Send>, name: &str, opts: &ExportOptions) -> Self {
        let keys = fields::FIELDS
            .iter()
            .enumerate()
            .map(|(i, f)| format!("{}\"{}\":", if i == 0 { "{" } else { "," }, f.name).into_bytes())
            .collect();
        let early_keys = fields::EARLY_FIELDS.map(|e| format!(",\"{}\":[", e.json).into_bytes());
        let apps = AppNames::new(&opts.class_names, json_string);
        let max = max_record_len(opts.early_packets, apps.max_len());
        JsonLinesExporter {
            out: Output::new(w, name, max),
            apps,
            keys,
            early_keys,
            n: opts.early_packets,
        }
    }
}

impl Exporter for JsonLinesExporter {
    fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        self.out.check()?;
        for (i, r) in batch.records.iter().enumerate() {
            self.out.room_for_record()?;
            let start = self.out.buf.len();
            let early = early_of(batch, i, self.n);
            let buf = &mut self.out.buf;
            write_scalars::<true>(buf, &self.keys, r, self.apps.get(&r.verdict), early.len());
            buf.bytes(&self.early_keys[0]);
            for (k, p) in early.iter().enumerate() {
                if k > 0 {
                    buf.byte(b',');
                }
                buf.u64(u64::from(p.size));
            }
            buf.byte(b']');
            buf.bytes(&self.early_keys[1]);
            for (k, p) in early.iter().enumerate() {
                if k > 0 {
                    buf.byte(b',');
                }
                buf.bytes(if p.dir == Dir::Fwd { b"1" } else { b"-1" });
            }
            buf.byte(b']');
            buf.bytes(&self.early_keys[2]);
            for (k, p) in early.iter().enumerate() {
                if k > 0 {
                    buf.byte(b',');
                }
                buf.u64(u64::from(p.iat_us));
            }
            buf.bytes(b"]}\n");
            debug_assert!(self.out.buf.len() - start <= self.out.max_record);
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
