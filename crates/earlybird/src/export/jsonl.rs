//! JSON lines exporter: one JSON object per flow, one per line.
//!
//! Contract: input is [`RecordBatch`]es; output is one object per record with
//! the keys of [`super::fields::FIELDS`] in that order, then the arrays
//! `early_size`, `early_dir` (1 / -1) and `early_iat_us`, each of length
//! `early_len` (at most N), and `\n`. Strings are JSON-escaped (class names
//! once, when the exporter is built; other strings never need it). A
//! non-finite float is `null`. Fails only when the writer fails (see
//! [`super`]); no allocation per record once the buffer has grown.

use std::io::Write;

use super::text::{json_string, put_u64};
use super::{early_of, fields, write_scalars, AppNames, ExportOptions, Exporter, Output};
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
        JsonLinesExporter {
            out: Output::new(w, name),
            apps: AppNames::new(&opts.class_names, json_string),
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
            let early = early_of(batch, i, self.n);
            let buf = &mut self.out.buf;
            write_scalars::<true>(buf, &self.keys, r, self.apps.get(&r.verdict), early.len());
            buf.extend_from_slice(&self.early_keys[0]);
            for (k, p) in early.iter().enumerate() {
                if k > 0 {
                    buf.push(b',');
                }
                put_u64(buf, u64::from(p.size));
            }
            buf.push(b']');
            buf.extend_from_slice(&self.early_keys[1]);
            for (k, p) in early.iter().enumerate() {
                if k > 0 {
                    buf.push(b',');
                }
                buf.extend_from_slice(if p.dir == Dir::Fwd { b"1" } else { b"-1" });
            }
            buf.push(b']');
            buf.extend_from_slice(&self.early_keys[2]);
            for (k, p) in early.iter().enumerate() {
                if k > 0 {
                    buf.push(b',');
                }
                put_u64(buf, u64::from(p.iat_us));
            }
            buf.extend_from_slice(b"]}\n");
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
