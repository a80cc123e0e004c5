//! Where call and stream records go: the call database and the record
//! outputs of the calls and streams kinds (`flows --voip-db/--calls-out/
//! --streams-out`, `voip --db/-o/--streams-out`).
//!
//! Contract: [`CallOutputs::open`] opens every output before the run (a
//! database that cannot be opened is an error naming it); [`write`]
//! takes the calls as the tracker ends them; [`finish`] closes the record
//! files and returns the errors of those that failed.
//!
//! [`write`]: CallOutputs::write
//! [`finish`]: CallOutputs::finish

use std::path::Path;

use crate::export::{Exporter, Format};
use crate::schema::{Kind, RowBatch};
use crate::voip::record::{push_call, push_stream, CallRecord, StreamRecord, CALLS, STREAMS};
use crate::{Error, Result};

/// The call database and the call and stream record outputs of a run.
pub struct CallOutputs {
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    db: Option<crate::voip::store::CallStore>,
    calls_out: Option<Box<dyn Exporter>>,
    streams_out: Option<Box<dyn Exporter>>,
    rows: RowBatch,
    srows: RowBatch,
    /// Seed of the streams' Community ID.
    seed: u16,
}

impl CallOutputs {
    /// Opens the database (created if missing) and the record files.
    pub fn open(db: Option<&str>, calls: Option<&Path>, streams: Option<&Path>) -> Result<Self> {
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        let db = db.map(crate::voip::store::CallStore::open).transpose()?;
        #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
        if db.is_some() {
            return Err(Error::Usage(
                "a call database needs the `sqlite` or `postgres` feature".into(),
            ));
        }
        Ok(CallOutputs {
            #[cfg(any(feature = "sqlite", feature = "postgres"))]
            db,
            calls_out: calls.map(|p| open(&CALLS, p)).transpose()?,
            streams_out: streams.map(|p| open(&STREAMS, p)).transpose()?,
            rows: RowBatch::new(&CALLS),
            srows: RowBatch::new(&STREAMS),
            seed: 0,
        })
    }

    /// The seed of the stream records' Community ID (default 0).
    pub fn community_id_seed(mut self, seed: u16) -> Self {
        self.seed = seed;
        self
    }

    /// Adds ended calls (their streams in them) and streams without a call.
    pub fn write(&mut self, calls: &[CallRecord], alone: &[StreamRecord]) -> Result<()> {
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        if let Some(db) = self.db.as_mut() {
            db.insert(calls, alone)?;
        }
        if let Some(out) = self.calls_out.as_mut() {
            self.rows.clear();
            for c in calls {
                push_call(&mut self.rows, c);
            }
            out.write_rows(&self.rows)?;
        }
        if let Some(out) = self.streams_out.as_mut() {
            self.srows.clear();
            for s in calls.iter().flat_map(|c| c.streams.iter()).chain(alone) {
                push_stream(&mut self.srows, s, self.seed);
            }
            out.write_rows(&self.srows)?;
        }
        Ok(())
    }

    /// Finishes the record files; the errors of those that failed.
    pub fn finish(&mut self) -> Vec<String> {
        (self.calls_out.iter_mut().chain(self.streams_out.iter_mut()))
            .filter_map(|o| o.finish().err().map(|e| e.to_string()))
            .collect()
    }
}

/// A record output of `kind` at `p`, its format from its name.
fn open(kind: &'static Kind, p: &Path) -> Result<Box<dyn Exporter>> {
    let f = Format::for_output(p, None).map_err(|e| Error::Usage(e.to_string()))?;
    crate::export::open_rows(kind, f, p)
}
