//! Null exporter: accepts every batch and writes nothing.
//!
//! Contract: for dry runs and for measuring the pipeline without output
//! cost. It takes the records of one kind (flows unless built with
//! [`NullExporter::of`]) and counts those it was given
//! ([`NullExporter::records`]); it never fails and never allocates.

use super::{fields, Exporter};
use crate::error::Result;
use crate::flow::record::RecordBatch;
use crate::schema::{Kind, RowBatch};

/// Discards records, counting them.
#[derive(Debug)]
pub struct NullExporter {
    records: u64,
    kind: &'static Kind,
}

impl Default for NullExporter {
    fn default() -> Self {
        NullExporter::of(&fields::FLOWS)
    }
}

impl NullExporter {
    /// A new null exporter of flow records.
    pub fn new() -> Self {
        NullExporter::default()
    }

    /// A new null exporter of records of `kind`.
    pub fn of(kind: &'static Kind) -> Self {
        NullExporter { records: 0, kind }
    }

    /// Records received so far.
    pub fn records(&self) -> u64 {
        self.records
    }
}

impl Exporter for NullExporter {
    fn kind(&self) -> &'static Kind {
        self.kind
    }

    fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        self.records += batch.len() as u64;
        Ok(())
    }

    fn write_rows(&mut self, rows: &RowBatch) -> Result<()> {
        self.records += rows.len() as u64;
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        Ok(())
    }

    fn name(&self) -> &str {
        "null"
    }

    fn reads_moments(&self) -> bool {
        false
    }

    fn reads_label_cells(&self) -> bool {
        false
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
        assert_eq!(ex.kind().name, "flows");
    }
}
