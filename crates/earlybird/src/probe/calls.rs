//! Where call and stream records go: the call database and the record
//! outputs of the calls and streams kinds (`flows --voip-db/--calls-out/
//! --streams-out`, `voip --db/-o/--streams-out`).
//!
//! Contract: [`CallOutputs::open`] opens every output before the run (a
//! database that cannot be opened is an error naming it); [`write`]
//! takes the calls as the tracker ends them; [`finish`] closes the record
//! files and returns the errors of those that failed. Each output fails
//! alone: a record file that fails (a full disk) is written no more and
//! its error is returned by [`finish`], while the database and the other
//! file go on; the database holds what it cannot write within a bound
//! and writes it once it works again (`voip/store/hold.rs`), and the
//! calls it could not write are an error of [`finish`]. A [`write`] of
//! nothing (the call writer's, about once a second when no record comes)
//! lets the database retry what it holds.
//!
//! [`write`]: CallOutputs::write
//! [`finish`]: CallOutputs::finish

use std::path::Path;

use crate::export::{Exporter, Format};
use crate::schema::{Kind, RowBatch};
use crate::voip::record::{push_call, push_stream, CallRecord, StreamRecord, CALLS, STREAMS};
use crate::{Error, Result};

/// How long the end of a run tries to write the calls the database holds.
pub const DB_LINGER: std::time::Duration = std::time::Duration::from_secs(5);

/// A record file of calls or streams, its first failure and the records
/// it did not write from then on (the failing batch's included).
struct RecordOut {
    out: Box<dyn Exporter>,
    failed: Option<String>,
    lost: u64,
}

impl RecordOut {
    /// Writes and flushes `rows` (a batch of ended calls: up to 512, or
    /// what ended in about a second), so that a reader of the file sees
    /// a call soon after it ended.
    fn write(&mut self, rows: &RowBatch) {
        if self.failed.is_none() {
            if let Err(e) = self.out.write_rows(rows).and_then(|()| self.out.flush()) {
                self.failed = Some(e.to_string());
            }
        }
        if self.failed.is_some() {
            self.lost += rows.len() as u64;
        }
    }
}

/// The call database and the call and stream record outputs of a run.
pub struct CallOutputs {
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    db: Option<crate::voip::store::hold::HeldStore>,
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    db_report: Option<crate::voip::store::hold::HoldReport>,
    calls_out: Option<RecordOut>,
    streams_out: Option<RecordOut>,
    rows: RowBatch,
    srows: RowBatch,
    /// Seed of the streams' Community ID (`None`: none).
    seed: Option<u16>,
}

impl CallOutputs {
    /// Opens the database (created if missing) and the record files.
    pub fn open(db: Option<&str>, calls: Option<&Path>, streams: Option<&Path>) -> Result<Self> {
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        let db = match db {
            Some(d) => {
                let store = crate::voip::store::CallStore::open(d)?;
                let name = match &store {
                    #[cfg(feature = "postgres")]
                    crate::voip::store::CallStore::Postgres(p) => p.name().to_string(),
                    #[allow(unreachable_patterns)]
                    _ => d.to_string(),
                };
                Some(crate::voip::store::hold::HeldStore::new(
                    store,
                    &name,
                    crate::voip::store::hold::DEFAULT_BOUND,
                ))
            }
            None => None,
        };
        #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
        if db.is_some() {
            return Err(Error::Usage(
                "a call database needs the `sqlite` or `postgres` feature".into(),
            ));
        }
        let record = |kind, p| {
            open(kind, p).map(|out| RecordOut {
                out,
                failed: None,
                lost: 0,
            })
        };
        Ok(CallOutputs {
            #[cfg(any(feature = "sqlite", feature = "postgres"))]
            db,
            #[cfg(any(feature = "sqlite", feature = "postgres"))]
            db_report: None,
            calls_out: calls.map(|p| record(&CALLS, p)).transpose()?,
            streams_out: streams.map(|p| record(&STREAMS, p)).transpose()?,
            rows: RowBatch::new(&CALLS),
            srows: RowBatch::new(&STREAMS),
            seed: Some(0),
        })
    }

    /// The seed of the stream records' Community ID (default 0; `None`:
    /// the field is null, as `--no-community-id` asks).
    pub fn community_id_seed(mut self, seed: Option<u16>) -> Self {
        self.seed = seed;
        self
    }

    /// Holds at most `records` calls and streams without a call while the
    /// database fails (default `hold::DEFAULT_BOUND`).
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(unused_mut))]
    pub fn db_hold(mut self, records: usize) -> Self {
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        {
            self.db = self.db.take().map(|d| d.rebound(records));
        }
        #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
        let _ = records;
        self
    }

    /// The database's counters of what it holds and could not write
    /// (for a metrics endpoint); `None` without a database.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub fn db_gauges(&self) -> Option<std::sync::Arc<crate::voip::store::hold::HoldGauges>> {
        self.db.as_ref().map(|d| d.gauges())
    }

    /// Adds ended calls (their streams in them) and streams without a call.
    /// Failures are kept for [`CallOutputs::finish`]; this returns `Ok`.
    pub fn write(&mut self, calls: &[CallRecord], alone: &[StreamRecord]) -> Result<()> {
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        if let Some(db) = self.db.as_mut() {
            db.write(calls, alone);
        }
        if calls.is_empty() && alone.is_empty() {
            return Ok(());
        }
        if let Some(out) = self.calls_out.as_mut() {
            self.rows.clear();
            for c in calls {
                push_call(&mut self.rows, c);
            }
            out.write(&self.rows);
        }
        if let Some(out) = self.streams_out.as_mut() {
            self.srows.clear();
            for s in calls.iter().flat_map(|c| c.streams.iter()).chain(alone) {
                push_stream(&mut self.srows, s, self.seed);
            }
            out.write(&self.srows);
        }
        Ok(())
    }

    /// Finishes the record files and tries for at most `DB_LINGER` to
    /// write what the database holds; the errors of the outputs that
    /// failed.
    pub fn finish(&mut self) -> Vec<String> {
        let mut errors = Vec::new();
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        if let Some(db) = self.db.as_mut() {
            let r = db.finish(DB_LINGER);
            if r.lost() {
                errors.push(format!(
                    "call database {}: {} calls and {} streams without a call not written \
                     (failures: {}; hold bound {} records; last error: {})",
                    r.name,
                    r.calls_not_written,
                    r.streams_not_written,
                    r.outages,
                    r.bound,
                    r.last_error.as_deref().unwrap_or("none"),
                ));
            }
            self.db_report = Some(r);
        }
        for o in self.calls_out.iter_mut().chain(self.streams_out.iter_mut()) {
            let finished = o.out.finish();
            if let Some(e) = o.failed.take() {
                errors.push(format!("{e}; {} records not written", o.lost));
            } else if let Err(e) = finished {
                errors.push(e.to_string());
            }
        }
        errors
    }

    /// What the database's hold did (after [`CallOutputs::finish`]).
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub fn db_report(&self) -> Option<&crate::voip::store::hold::HoldReport> {
        self.db_report.as_ref()
    }
}

/// A record output of `kind` at `p`, its format from its name.
fn open(kind: &'static Kind, p: &Path) -> Result<Box<dyn Exporter>> {
    let f = Format::for_output(p, None).map_err(|e| Error::Usage(e.to_string()))?;
    crate::export::open_rows(kind, f, p)
}
