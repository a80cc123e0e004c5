//! Flow records as Arrow record batches in memory (cargo feature
//! `parquet`), for a program that hands them on (the Python package hands
//! them to pyarrow through the Arrow C data interface).
//!
//! Contract: the columns are exactly those of the Parquet output (same
//! names, order, types, nullability and metadata; `parquet.rs` builds
//! them, [`ArrowFlows::schema`]). Rows are gathered into batches of
//! `batch_rows` rows (the last one may be shorter) and each full batch is
//! given to the sink at once, so the memory held here is one batch; a
//! flush (a live run's, about once a second) hands on the rows gathered so
//! far as a shorter batch. A sink
//! error stops the output: it is returned from that call and from every
//! later one, and the run reports it as an output error. Empty batches are
//! never handed on.

use arrow_array::RecordBatch as ArrowBatch;
use arrow_schema::SchemaRef;

use super::parquet::Columns;
use super::{fields, ExportOptions, Exporter};
use crate::error::{Error, Result};
use crate::flow::record::RecordBatch;

/// Where full Arrow batches go; an error (the sink's own: a closed
/// channel, a failed write) stops the output, its message in the run's
/// output errors.
pub type ArrowSink = Box<
    dyn FnMut(ArrowBatch) -> std::result::Result<(), Box<dyn std::error::Error + Send + Sync>>
        + Send,
>;

/// An exporter of flow records into Arrow record batches.
pub struct ArrowFlows {
    name: String,
    cols: Columns,
    batch_rows: usize,
    sink: ArrowSink,
    failed: Option<String>,
}

impl ArrowFlows {
    /// Flow records with the columns `opts` gives (early packets, class
    /// names, analyzer fields) into batches of `batch_rows` rows (at least
    /// 1) handed to `sink`; named `name` in messages.
    pub fn new(name: &str, opts: &ExportOptions, batch_rows: usize, sink: ArrowSink) -> Self {
        ArrowFlows {
            name: name.to_string(),
            cols: Columns::new(&fields::FLOWS, Some(opts)),
            batch_rows: batch_rows.max(1),
            sink,
            failed: None,
        }
    }

    /// The schema of the batches (that of the Parquet output for `opts`).
    pub fn schema(opts: &ExportOptions) -> SchemaRef {
        Columns::new(&fields::FLOWS, Some(opts)).schema
    }

    /// Cells written as null because their value did not fit their column
    /// (an analyzer cell of the wrong type).
    pub fn unfit(&self) -> u64 {
        self.cols.unfit
    }

    fn error(&self, reason: &str) -> Error {
        Error::Output {
            name: self.name.clone(),
            reason: reason.to_string(),
        }
    }

    /// Hands the gathered rows to the sink.
    fn emit(&mut self) -> Result<()> {
        let sent = match self.cols.take() {
            None => return Ok(()),
            Some(Ok(b)) => (self.sink)(b).map_err(|e| e.to_string()),
            Some(Err(e)) => Err(e.to_string()),
        };
        sent.map_err(|e| {
            let err = self.error(&e);
            self.failed = Some(e);
            err
        })
    }
}

impl Exporter for ArrowFlows {
    fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        if let Some(e) = &self.failed {
            return Err(self.error(e));
        }
        for i in 0..batch.records.len() {
            self.cols.push_flow_at(batch, i);
            if self.cols.len() >= self.batch_rows {
                self.emit()?;
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        if let Some(e) = &self.failed {
            return Err(self.error(e));
        }
        self.emit()
    }

    fn flush(&mut self) -> Result<()> {
        if let Some(e) = &self.failed {
            return Err(self.error(e));
        }
        self.emit()
    }

    fn name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::record::FlowRecord;
    use std::sync::{Arc, Mutex};

    fn batch(n: usize) -> RecordBatch {
        let mut b = RecordBatch::with_capacity(n, 4);
        for i in 0..n {
            let r = FlowRecord {
                first_ts: i as u64,
                ..FlowRecord::default()
            };
            b.push(r, &[]);
        }
        b
    }

    #[test]
    fn batches_of_the_asked_size_with_the_parquet_schema() {
        let opts = ExportOptions {
            early_packets: 4,
            ..ExportOptions::default()
        };
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        let sink: ArrowSink = Box::new(move |b| {
            g.lock().unwrap().push(b);
            Ok(())
        });
        let mut ex = ArrowFlows::new("arrow:test", &opts, 4, sink);
        ex.write_batch(&batch(3)).unwrap();
        ex.write_batch(&batch(6)).unwrap();
        ex.finish().unwrap();
        let got = got.lock().unwrap();
        let rows: Vec<usize> = got.iter().map(|b| b.num_rows()).collect();
        assert_eq!(rows, [4, 4, 1]);
        let schema = ArrowFlows::schema(&opts);
        assert_eq!(got[0].schema(), schema);
        assert_eq!(schema.fields().len(), fields::FIELDS.len() + 4 * 3);
        assert_eq!(schema.field(0).name(), fields::FIELDS[0].name);
        assert_eq!(schema.field(fields::FIELDS.len()).name(), "pkt1_size");
    }

    #[test]
    fn a_sink_error_is_sticky_and_names_the_output() {
        let sink: ArrowSink = Box::new(|_| Err("receiver gone".into()));
        let mut ex = ArrowFlows::new("arrow:test", &ExportOptions::default(), 2, sink);
        ex.write_batch(&batch(1)).unwrap();
        let e = ex.write_batch(&batch(1)).unwrap_err().to_string();
        assert!(
            e.contains("arrow:test") && e.contains("receiver gone"),
            "{e}"
        );
        assert!(ex.finish().is_err());
        assert!(ex.flush().is_err());
    }

    #[test]
    fn a_flush_hands_on_the_rows_gathered_so_far() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        let sink: ArrowSink = Box::new(move |b| {
            g.lock().unwrap().push(b.num_rows());
            Ok(())
        });
        let mut ex = ArrowFlows::new("arrow:test", &ExportOptions::default(), 10, sink);
        ex.write_batch(&batch(3)).unwrap();
        ex.flush().unwrap();
        // Nothing gathered since: no empty batch.
        ex.flush().unwrap();
        ex.write_batch(&batch(12)).unwrap();
        ex.finish().unwrap();
        assert_eq!(*got.lock().unwrap(), [3, 10, 2]);
    }
}
