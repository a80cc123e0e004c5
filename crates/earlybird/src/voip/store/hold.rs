//! Calls held in memory while the call database fails (a PostgreSQL
//! server stopped, restarted or unreachable, a SQLite file whose disk is
//! full), written once it works again.
//!
//! Contract: [`HeldStore::write`] inserts a batch of calls (with their
//! streams and DTMF) and of streams without a call, as
//! [`CallStore::insert`] does. When an insert fails the batch is kept in
//! memory, in order, and so is every later batch while the database
//! fails, up to [`HeldStore::bound`] records (a call with its streams is
//! one record, a stream without a call one); what does not fit is
//! counted as not written, never kept. The held batches are inserted
//! again, oldest first, at the next write (one of nothing too) once a
//! back-off has passed ([`RETRY_MIN`] doubling to [`RETRY_MAX`]); for
//! PostgreSQL a lost connection is opened again first (with a connect
//! timeout, `postgres.rs`). [`HeldStore::finish`] tries for at most the
//! linger it is given and counts what is still held as not written.
//! Nothing here waits on the database longer than one insert or one
//! connect, and memory is bounded by the bound.
//!
//! Every failed insert is one transaction rolled back, so a held batch is
//! written once; the exception is a commit whose answer was lost with the
//! connection, which may be written twice.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::CallStore;
use crate::voip::record::{CallRecord, StreamRecord};
pub use crate::voip::run::HoldReport;

/// The first wait before a failed database is tried again.
pub const RETRY_MIN: Duration = Duration::from_millis(250);
/// The longest wait between two tries.
pub const RETRY_MAX: Duration = Duration::from_secs(5);
/// Records held by default (`--voip-db-hold`).
pub const DEFAULT_BOUND: usize = 100_000;

/// Counters a metrics endpoint reads while the run goes.
#[derive(Debug, Default)]
pub struct HoldGauges {
    /// Records held now.
    pub held: AtomicU64,
    /// Records not written so far (the hold was full, or the run ended
    /// while they were held).
    pub not_written: AtomicU64,
}

type Batch = (Vec<CallRecord>, Vec<StreamRecord>);

/// What an error says, without the database's name (the report names it).
fn reason(e: crate::Error) -> String {
    match e {
        crate::Error::Output { reason, .. } => reason,
        e => e.to_string(),
    }
}

fn records(b: &Batch) -> usize {
    b.0.len() + b.1.len()
}

/// A call database with a bounded hold (see the module docs).
pub struct HeldStore {
    store: CallStore,
    held: VecDeque<Batch>,
    held_records: usize,
    bound: usize,
    /// While failing: when to try again, and the wait after that.
    retry: Option<(Instant, Duration)>,
    report: HoldReport,
    gauges: Arc<HoldGauges>,
}

impl HeldStore {
    /// Holds at most `bound` records of `store` while it fails.
    pub fn new(store: CallStore, name: &str, bound: usize) -> HeldStore {
        HeldStore {
            store,
            held: VecDeque::new(),
            held_records: 0,
            bound,
            retry: None,
            report: HoldReport {
                name: name.to_string(),
                bound: bound as u64,
                ..HoldReport::default()
            },
            gauges: Arc::new(HoldGauges::default()),
        }
    }

    /// The hold's bound, in records.
    pub fn bound(&self) -> usize {
        self.bound
    }

    /// The same store with another bound.
    pub fn rebound(mut self, bound: usize) -> HeldStore {
        self.bound = bound;
        self.report.bound = bound as u64;
        self
    }

    /// The counters a metrics endpoint reads.
    pub fn gauges(&self) -> Arc<HoldGauges> {
        self.gauges.clone()
    }

    /// Writes `calls` and `alone` (streams without a call), or holds them
    /// while the database fails (see the module docs); with nothing to
    /// write, tries the held batches again when the back-off has passed.
    pub fn write(&mut self, calls: &[CallRecord], alone: &[StreamRecord]) {
        self.retry_held(false);
        if calls.is_empty() && alone.is_empty() {
            return;
        }
        if self.retry.is_none() {
            match self.store.insert(calls, alone) {
                Ok(()) => return,
                Err(e) => self.failed(reason(e)),
            }
        }
        self.hold(calls, alone);
    }

    /// Tries the held batches for at most `linger`, counts what is still
    /// held as not written, and returns what the hold did.
    pub fn finish(&mut self, linger: Duration) -> HoldReport {
        let until = Instant::now() + linger;
        while !self.held.is_empty() {
            let next = self.retry.map_or(Instant::now(), |(at, _)| at);
            if next > until {
                break;
            }
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
            self.retry_held(true);
        }
        for (c, s) in self.held.drain(..) {
            self.report.calls_not_written += c.len() as u64;
            self.report.streams_not_written += s.len() as u64;
            (self.gauges.not_written).fetch_add((c.len() + s.len()) as u64, Ordering::Relaxed);
        }
        self.held_records = 0;
        self.gauges.held.store(0, Ordering::Relaxed);
        self.report.clone()
    }

    /// A failure: the first of an outage starts the back-off.
    fn failed(&mut self, e: String) {
        match self.retry {
            None => {
                self.report.outages += 1;
                self.retry = Some((Instant::now() + RETRY_MIN, RETRY_MIN));
            }
            Some((_, wait)) => {
                let wait = (wait * 2).min(RETRY_MAX);
                self.retry = Some((Instant::now() + wait, wait));
            }
        }
        self.report.last_error = Some(e);
    }

    /// Inserts the held batches, oldest first, when due (or `now`);
    /// stops at the first failure.
    fn retry_held(&mut self, now: bool) {
        let Some((at, _)) = self.retry else {
            return;
        };
        if !now && Instant::now() < at {
            return;
        }
        while let Some(b) = self.held.front() {
            if let Err(e) = self.store.insert(&b.0, &b.1) {
                self.failed(reason(e));
                return;
            }
            let (c, s) = self.held.pop_front().unwrap_or_default();
            self.report.calls_written_late += c.len() as u64;
            self.report.streams_written_late += s.len() as u64;
            self.held_records -= c.len() + s.len();
            (self.gauges.held).store(self.held_records as u64, Ordering::Relaxed);
        }
        // Everything held is written: the database works again.
        self.retry = None;
    }

    /// Keeps what fits of a batch; counts the rest as not written.
    fn hold(&mut self, calls: &[CallRecord], alone: &[StreamRecord]) {
        let room = self.bound.saturating_sub(self.held_records);
        let c = calls.len().min(room);
        let s = alone.len().min(room - c);
        let b: Batch = (calls[..c].to_vec(), alone[..s].to_vec());
        let (lost_c, lost_s) = (calls.len() - c, alone.len() - s);
        self.report.calls_not_written += lost_c as u64;
        self.report.streams_not_written += lost_s as u64;
        (self.gauges.not_written).fetch_add((lost_c + lost_s) as u64, Ordering::Relaxed);
        if records(&b) > 0 {
            self.held_records += records(&b);
            self.held.push_back(b);
        }
        self.report.peak_held = self.report.peak_held.max(self.held_records as u64);
        (self.gauges.held).store(self.held_records as u64, Ordering::Relaxed);
    }
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::*;

    fn call(id: &str) -> CallRecord {
        CallRecord {
            call_id: id.to_string(),
            caller: "alice".into(),
            caller_name: String::new(),
            caller_uri: "sip:alice@example.org".into(),
            callee: "bob".into(),
            callee_name: String::new(),
            callee_uri: "sip:bob@example.org".into(),
            caller_ua: String::new(),
            callee_ua: String::new(),
            caller_ip: "192.0.2.1".into(),
            callee_ip: "192.0.2.2".into(),
            transport: "UDP",
            invite_ns: 1,
            ringing_ns: None,
            answer_ns: None,
            end_ns: 2,
            status: Some(200),
            reason: "OK".into(),
            end_cause: crate::voip::record::EndCause::Open,
            codecs: Vec::new(),
            dtmf: Vec::new(),
            streams: Vec::new(),
        }
    }

    fn count(path: &std::path::Path) -> usize {
        let mut s = CallStore::open(path.to_str().unwrap()).unwrap();
        s.search(&super::super::Query::default()).unwrap().len()
    }

    /// A SQLite file made read-only and writable again stands for a
    /// database that fails and comes back: what was held is written, in
    /// order, and what went beyond the bound is counted.
    #[test]
    fn held_calls_are_written_when_the_database_is_back_and_the_rest_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("calls.sqlite");
        let store = CallStore::open(path.to_str().unwrap()).unwrap();
        let mut h = HeldStore::new(store, "calls.sqlite", 3);
        h.write(&[call("a")], &[]);
        assert_eq!(count(&path), 1);
        // A second connection holds the write lock: inserts fail (busy)
        // as long as it holds it.
        let other = rusqlite::Connection::open(&path).unwrap();
        other.execute_batch("BEGIN EXCLUSIVE").unwrap();
        if let CallStore::Sqlite(s) = &mut h.store {
            s.set_busy_timeout(Duration::ZERO);
        }
        h.write(&[call("b"), call("c")], &[]);
        h.write(&[call("d"), call("e")], &[]);
        assert_eq!(h.gauges().held.load(Ordering::Relaxed), 3);
        assert_eq!(h.gauges().not_written.load(Ordering::Relaxed), 1);
        other.execute_batch("COMMIT").unwrap();
        drop(other);
        let r = h.finish(Duration::from_secs(10));
        assert_eq!(r.outages, 1);
        assert_eq!(r.calls_written_late, 3);
        assert_eq!(r.calls_not_written, 1);
        assert_eq!(r.peak_held, 3);
        let mut s = CallStore::open(path.to_str().unwrap()).unwrap();
        let mut ids: Vec<String> = (s.search(&super::super::Query::default()).unwrap())
            .into_iter()
            .map(|c| c.call_id)
            .collect();
        ids.sort();
        assert_eq!(ids, ["a", "b", "c", "d"]);
    }
}
