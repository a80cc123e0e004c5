//! Null exporter: accepts every batch and writes nothing.
//!
//! Contract: for dry runs and for measuring the pipeline without output
//! cost. It counts the records it was given ([`NullExporter::records`]);
//! it never fails and never allocates.

use super::Exporter;
use crate::error::Result;
use crate::flow::record::RecordBatch;

/// Discards records, counting them.
#[derive(Debug, Default)]
pub struct NullExporter {
    records: u64,
}

impl NullExporter {
    /// A new null exporter.
    pub fn new() -> Self {
        NullExporter::default()
    }

    /// Records received so far.
    pub fn records(&self) -> u64 {
        self.records
    }
}

impl Exporter for NullExporter {
    fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        self.records += batch.len() as u64;
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        Ok(())
    }

    fn name(&self) -> &str {
        "null"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::record::FlowRecord;

    #[test]
    fn counts_and_discards() {
        let mut ex = NullExporter::new();
        let mut b = RecordBatch::with_capacity(3, 2);
        b.push(FlowRecord::default(), &[]);
        b.push(FlowRecord::default(), &[]);
        ex.write_batch(&b).unwrap();
        ex.write_batch(&b).unwrap();
        ex.finish().unwrap();
        assert_eq!(ex.records(), 4);
        assert_eq!(ex.name(), "null");
    }
}
