//! An output that fails alone and says what it lost: every output of a
//! run (`probe/build.rs`) is wrapped in one.
//!
//! Contract: [`Counted`] passes everything to the exporter it wraps until
//! that exporter fails (a full disk, a device that refuses writes). From
//! then on the wrapped exporter is written no more and every record
//! handed over is counted as not written, and so are the records handed
//! over since its last successful flush, the failing call's included
//! (buffered text may have been lost with the failure; some of these may
//! have reached the file: the count is an upper bound); [`Exporter::finish`]
//! finishes the wrapped exporter and returns the first failure with that
//! count. The run's other outputs are not affected (the pipeline already
//! stops writing an output that failed; here it also learns how much that
//! output missed). A reader that went away ([`Error::OutputClosed`]) is
//! not a failure and passes through as it is.

use super::{Exporter, Renderer};
use crate::error::{Error, Result};
use crate::flow::record::RecordBatch;
use crate::schema::{Kind, RowBatch};

/// An exporter and its first failure (see the module docs).
pub(crate) struct Counted {
    inner: Box<dyn Exporter>,
    failed: Option<String>,
    lost: u64,
    /// Records handed over since the last successful flush.
    since_flush: u64,
}

/// `ex` wrapped in a [`Counted`].
pub(crate) fn counted(ex: Box<dyn Exporter>) -> Box<dyn Exporter> {
    Box::new(Counted {
        inner: ex,
        failed: None,
        lost: 0,
        since_flush: 0,
    })
}

/// What an error says, without the output's name.
fn reason(e: Error) -> String {
    match e {
        Error::Output { reason, .. } => reason,
        e => e.to_string(),
    }
}

impl Counted {
    /// The result of a write of `n` records.
    fn wrote(&mut self, r: Result<()>, n: u64) -> Result<()> {
        match r {
            Ok(()) => {
                self.since_flush += n;
                Ok(())
            }
            Err(e @ Error::OutputClosed { .. }) => Err(e),
            Err(e) => {
                self.failed = Some(reason(e));
                self.lost += self.since_flush + n;
                Ok(())
            }
        }
    }
}

impl Exporter for Counted {
    fn kind(&self) -> &'static Kind {
        self.inner.kind()
    }

    fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        let n = batch.len() as u64;
        if self.failed.is_some() {
            self.lost += n;
            return Ok(());
        }
        let r = self.inner.write_batch(batch);
        self.wrote(r, n)
    }

    fn write_rows(&mut self, rows: &RowBatch) -> Result<()> {
        let n = rows.len() as u64;
        if self.failed.is_some() {
            self.lost += n;
            return Ok(());
        }
        let r = self.inner.write_rows(rows);
        self.wrote(r, n)
    }

    fn write_rendered(&mut self, text: &[u8], records: usize) -> Result<()> {
        let n = records as u64;
        if self.failed.is_some() {
            self.lost += n;
            return Ok(());
        }
        let r = self.inner.write_rendered(text, records);
        self.wrote(r, n)
    }

    fn finish(&mut self) -> Result<()> {
        let r = self.inner.finish();
        match self.failed.take() {
            None => r,
            Some(first) => Err(Error::Output {
                name: self.inner.name().to_string(),
                reason: format!(
                    "{}; at most {} records not written (from the last flush before the \
                     failure on)",
                    first, self.lost
                ),
            }),
        }
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn renderer(&self) -> Option<Renderer> {
        self.inner.renderer()
    }

    fn reads_moments(&self) -> bool {
        self.inner.reads_moments()
    }

    fn reads_label_cells(&self) -> bool {
        self.inner.reads_label_cells()
    }

    fn flush(&mut self) -> Result<()> {
        if self.failed.is_some() {
            return Ok(());
        }
        let r = self.inner.flush();
        self.wrote(r, 0)?;
        if self.failed.is_none() {
            self.since_flush = 0;
        }
        Ok(())
    }

    fn reopen(&mut self) -> Result<bool> {
        if self.failed.is_some() {
            return Ok(false);
        }
        match self.inner.reopen() {
            Ok(b) => Ok(b),
            Err(e @ Error::OutputClosed { .. }) => Err(e),
            Err(e) => {
                self.failed = Some(reason(e));
                Ok(false)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::{to_writer, ExportOptions, Format};
    use crate::flow::record::FlowRecord;

    /// A writer that takes `room` bytes, then fails as a full disk does.
    struct Full(usize);

    impl std::io::Write for Full {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.0 == 0 {
                return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
            }
            let n = b.len().min(self.0);
            self.0 -= n;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_full_disk_is_reported_at_the_end_with_the_records_not_written() {
        let opts = ExportOptions {
            early_packets: 4,
            ..ExportOptions::default()
        };
        let ex = to_writer(Format::Csv, Box::new(Full(100)), "csv:full", &opts);
        let mut ex = counted(ex);
        let mut batch = RecordBatch::with_capacity(10, 4);
        for _ in 0..10 {
            batch.push(FlowRecord::default(), &[]);
        }
        // Every call returns: the failure is kept for the end.
        for _ in 0..30 {
            ex.write_batch(&batch).unwrap();
            ex.flush().unwrap();
        }
        let err = ex.finish().unwrap_err().to_string();
        assert!(err.starts_with("output csv:full: "), "{err}");
        assert!(err.contains("No space left on device"), "{err}");
        // 30 batches of 10: the CSV output holds its text until a chunk is
        // full or it is flushed, so the first flush fails, with the first
        // batch; all 300 records were lost.
        assert!(err.contains("at most 300 records not written"), "{err}");
    }

    #[test]
    fn records_rendered_elsewhere_are_counted_as_records_not_as_lines() {
        let opts = ExportOptions {
            early_packets: 4,
            ..ExportOptions::default()
        };
        let ex = to_writer(Format::Csv, Box::new(Full(0)), "csv:full", &opts);
        let mut ex = counted(ex);
        // Text made by a renderer, which need not be lines (IPFIX's is
        // binary): what counts is the records it holds.
        let text = b"\n\n\n\n\n\n\n";
        for _ in 0..3 {
            ex.write_rendered(text, 2).unwrap();
            ex.flush().unwrap();
        }
        let err = ex.finish().unwrap_err().to_string();
        assert!(err.contains("at most 6 records not written"), "{err}");
    }
}
