//! The call store: call records, their streams and DTMF in SQLite
//! (feature `sqlite`, a file) or PostgreSQL (feature `postgres`, a
//! `postgres://` URL), and the searches `earlybird calls` runs.
//!
//! Contract:
//! - [`CallStore::open`] takes a file path (SQLite) or a `postgres://` /
//!   `postgresql://` URL, creates the schema of version [`SCHEMA_VERSION`]
//!   when missing (tables `calls`, `streams`, `dtmf`, `meta`; indexes on
//!   Call-ID, caller and callee (user part and URI) and start time;
//!   `docs/VOIP.md` lists the columns; indexes missing from an older file
//!   are added) and refuses a database of another version, naming it.
//! - [`CallStore::insert`] writes a batch of calls (with their streams and
//!   DTMF) and of streams without a call in one transaction: a crash or a
//!   kill loses at most the batch being written, never a committed one.
//! - [`CallStore::search`] returns the calls that match every condition of
//!   a [`Query`], newest first, streams and DTMF included; both backends
//!   run the same SQL and give the same records.
//! - Errors are [`crate::Error::Output`] naming the database (a URL without
//!   its password).

pub mod hold;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
pub mod sqlite;

use super::record::{CallRecord, Dtmf, EndCause, StreamRecord};
use crate::error::{Error, Result};

/// The schema version this code writes and reads.
pub const SCHEMA_VERSION: i64 = 1;

/// What a search asks for (every condition given must hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// Caller: the user part, or the whole From URI.
    pub from: Option<String>,
    /// Callee: the user part, or the whole To URI.
    pub to: Option<String>,
    /// Started at or after (Unix ns).
    pub since_ns: Option<u64>,
    /// Started before (Unix ns).
    pub until_ns: Option<u64>,
    /// Final status in this range (inclusive).
    pub status: Option<(u16, u16)>,
    /// Calls that got no final status at all.
    pub no_status: bool,
    /// This Call-ID.
    pub call_id: Option<String>,
    /// At most this many calls (newest first).
    pub limit: Option<u64>,
}

/// A status filter that is neither a code, a class nor `none`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("status {given:?}: a code (486), a class (4xx) or none")]
pub struct StatusError {
    /// The filter given.
    pub given: String,
}

impl Query {
    /// Parses a status filter: `404`, `4xx`, or `none` (`Ok(None)`).
    pub fn parse_status(s: &str) -> std::result::Result<Option<(u16, u16)>, StatusError> {
        if s == "none" {
            return Ok(None);
        }
        let bad = || StatusError {
            given: s.to_string(),
        };
        if s.len() == 3 && s.ends_with("xx") {
            let d = s[..1].parse::<u16>().map_err(|_| bad())?;
            if !(1..=6).contains(&d) {
                return Err(bad());
            }
            return Ok(Some((d * 100, d * 100 + 99)));
        }
        let c = s.parse::<u16>().map_err(|_| bad())?;
        if !(100..=699).contains(&c) {
            return Err(bad());
        }
        Ok(Some((c, c)))
    }
}

/// A value read from or written to either backend.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Val {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

impl Val {
    fn int(&self) -> Option<i64> {
        match self {
            Val::Int(v) => Some(*v),
            _ => None,
        }
    }

    fn real(&self) -> Option<f64> {
        match self {
            Val::Real(v) => Some(*v),
            Val::Int(v) => Some(*v as f64),
            _ => None,
        }
    }

    fn text(&self) -> String {
        match self {
            Val::Text(s) => s.clone(),
            _ => String::new(),
        }
    }

    fn u64(&self) -> u64 {
        self.int().map_or(0, |v| v.max(0) as u64)
    }
}

fn i(v: u64) -> Val {
    Val::Int(i64::try_from(v).unwrap_or(i64::MAX))
}

fn oi(v: Option<u64>) -> Val {
    v.map_or(Val::Null, i)
}

fn of(v: Option<f64>) -> Val {
    v.map_or(Val::Null, Val::Real)
}

fn t(s: &str) -> Val {
    Val::Text(s.to_string())
}

/// The tables, in the SQL both backends take (`BIGINT`/`DOUBLE PRECISION`
/// are SQLite's INTEGER/REAL affinities as well); `{ID}` is the row id
/// column's type.
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS calls (
    id {ID},
    call_id TEXT NOT NULL,
    caller TEXT NOT NULL, caller_name TEXT NOT NULL, caller_uri TEXT NOT NULL,
    callee TEXT NOT NULL, callee_name TEXT NOT NULL, callee_uri TEXT NOT NULL,
    caller_ua TEXT NOT NULL, callee_ua TEXT NOT NULL,
    caller_ip TEXT NOT NULL, callee_ip TEXT NOT NULL, transport TEXT NOT NULL,
    start_ns BIGINT NOT NULL, ringing_ns BIGINT, answer_ns BIGINT,
    end_ns BIGINT NOT NULL, setup_ms DOUBLE PRECISION, duration_ms DOUBLE PRECISION,
    status BIGINT, reason TEXT NOT NULL, end_cause TEXT NOT NULL,
    codecs TEXT NOT NULL, mos DOUBLE PRECISION, dtmf TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_call_id ON calls (call_id);
CREATE INDEX IF NOT EXISTS calls_caller ON calls (caller);
CREATE INDEX IF NOT EXISTS calls_callee ON calls (callee);
CREATE INDEX IF NOT EXISTS calls_caller_uri ON calls (caller_uri);
CREATE INDEX IF NOT EXISTS calls_callee_uri ON calls (callee_uri);
CREATE INDEX IF NOT EXISTS calls_start ON calls (start_ns);
CREATE TABLE IF NOT EXISTS streams (
    call BIGINT REFERENCES calls (id),
    call_id TEXT, sender TEXT,
    src TEXT NOT NULL, sport BIGINT NOT NULL, dst TEXT NOT NULL, dport BIGINT NOT NULL,
    ssrc BIGINT NOT NULL, pt BIGINT NOT NULL, codec TEXT NOT NULL, clock BIGINT NOT NULL,
    first_ns BIGINT NOT NULL, last_ns BIGINT NOT NULL,
    packets BIGINT NOT NULL, bytes BIGINT NOT NULL, expected BIGINT NOT NULL,
    lost BIGINT NOT NULL, duplicates BIGINT NOT NULL, reordered BIGINT NOT NULL,
    jitter_mean_ms DOUBLE PRECISION, jitter_max_ms DOUBLE PRECISION,
    max_delta_ms DOUBLE PRECISION NOT NULL,
    rtcp_lost BIGINT, rtcp_fraction_lost DOUBLE PRECISION, rtcp_jitter_ms DOUBLE PRECISION,
    mos DOUBLE PRECISION
);
CREATE INDEX IF NOT EXISTS streams_call ON streams (call);
CREATE INDEX IF NOT EXISTS streams_first ON streams (first_ns);
CREATE TABLE IF NOT EXISTS dtmf (
    call BIGINT NOT NULL REFERENCES calls (id),
    ts_ns BIGINT NOT NULL, key TEXT NOT NULL, duration_ms DOUBLE PRECISION NOT NULL,
    sender TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS dtmf_call ON dtmf (call);
";

/// Columns of `calls` written by [`call_values`] (after `id`).
pub(crate) const CALL_COLUMNS: &str = "call_id, caller, caller_name, caller_uri, callee, \
    callee_name, callee_uri, caller_ua, callee_ua, caller_ip, callee_ip, transport, start_ns, \
    ringing_ns, answer_ns, end_ns, setup_ms, duration_ms, status, reason, end_cause, codecs, mos, \
    dtmf";

/// Columns of `streams` written by [`stream_values`] (after `call`).
pub(crate) const STREAM_COLUMNS: &str = "call_id, sender, src, sport, dst, dport, ssrc, pt, \
    codec, clock, first_ns, last_ns, packets, bytes, expected, lost, duplicates, reordered, \
    jitter_mean_ms, jitter_max_ms, max_delta_ms, rtcp_lost, rtcp_fraction_lost, rtcp_jitter_ms, \
    mos";

/// Columns of `dtmf` (after `call`).
pub(crate) const DTMF_COLUMNS: &str = "ts_ns, key, duration_ms, sender";

/// `n` placeholders from `first` in a backend's style (`?1` or `$1`).
pub(crate) fn placeholders(style: char, first: usize, n: usize) -> String {
    (first..first + n)
        .map(|k| format!("{style}{k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn call_values(c: &CallRecord) -> Vec<Val> {
    vec![
        t(&c.call_id),
        t(&c.caller),
        t(&c.caller_name),
        t(&c.caller_uri),
        t(&c.callee),
        t(&c.callee_name),
        t(&c.callee_uri),
        t(&c.caller_ua),
        t(&c.callee_ua),
        t(&c.caller_ip),
        t(&c.callee_ip),
        t(c.transport),
        i(c.invite_ns),
        oi(c.ringing_ns),
        oi(c.answer_ns),
        i(c.end_ns),
        of(c.setup_delay_ms()),
        of(c.duration_ms()),
        oi(c.status.map(u64::from)),
        t(&c.reason),
        t(c.end_cause.name()),
        t(&c.codecs.join(",")),
        of(c.mos()),
        t(&c.dtmf_keys()),
    ]
}

pub(crate) fn stream_values(s: &StreamRecord) -> Vec<Val> {
    vec![
        s.call_id.as_deref().map_or(Val::Null, t),
        s.sender.map_or(Val::Null, t),
        t(&s.src),
        i(u64::from(s.sport)),
        t(&s.dst),
        i(u64::from(s.dport)),
        i(u64::from(s.ssrc)),
        i(u64::from(s.pt)),
        t(&s.codec),
        i(u64::from(s.clock)),
        i(s.first_ns),
        i(s.last_ns),
        i(s.packets),
        i(s.bytes),
        i(s.expected),
        Val::Int(s.lost),
        i(s.duplicates),
        i(s.reordered),
        of(s.jitter_mean_ms),
        of(s.jitter_max_ms),
        Val::Real(s.max_delta_ms),
        s.rtcp_lost.map_or(Val::Null, Val::Int),
        of(s.rtcp_fraction_lost),
        of(s.rtcp_jitter_ms),
        of(s.mos),
    ]
}

pub(crate) fn dtmf_values(d: &Dtmf) -> Vec<Val> {
    vec![
        i(d.ts),
        t(&d.key.to_string()),
        Val::Real(d.duration_ms),
        t(d.sender),
    ]
}

/// The SELECT of a search (columns: `id`, then [`CALL_COLUMNS`]) and its
/// arguments, placeholders in `style`.
pub(crate) fn search_sql(q: &Query, style: char) -> (String, Vec<Val>) {
    let mut sql = format!("SELECT id, {CALL_COLUMNS} FROM calls WHERE 1 = 1");
    let mut args = Vec::new();
    let mut add = |cond: &str, v: Val, sql: &mut String| {
        args.push(v);
        // Every placeholder of the condition takes this argument.
        sql.push_str(&cond.replace('?', &format!("{style}{}", args.len())));
    };
    if let Some(f) = &q.from {
        add(" AND (caller = ? OR caller_uri = ?)", t(f), &mut sql);
    }
    if let Some(to) = &q.to {
        add(" AND (callee = ? OR callee_uri = ?)", t(to), &mut sql);
    }
    if let Some(s) = q.since_ns {
        add(" AND start_ns >= ?", i(s), &mut sql);
    }
    if let Some(u) = q.until_ns {
        add(" AND start_ns < ?", i(u), &mut sql);
    }
    if let Some((lo, hi)) = q.status {
        add(" AND status >= ?", i(lo.into()), &mut sql);
        add(" AND status <= ?", i(hi.into()), &mut sql);
    }
    if q.no_status {
        sql.push_str(" AND status IS NULL");
    }
    if let Some(id) = &q.call_id {
        add(" AND call_id = ?", t(id), &mut sql);
    }
    sql.push_str(" ORDER BY start_ns DESC, id DESC");
    if let Some(l) = q.limit {
        sql.push_str(&format!(" LIMIT {l}"));
    }
    (sql, args)
}

/// A call from a row of [`search_sql`] (id first).
pub(crate) fn call_from(v: &[Val]) -> CallRecord {
    let g = |k: usize| v.get(k).cloned().unwrap_or(Val::Null);
    CallRecord {
        call_id: g(1).text(),
        caller: g(2).text(),
        caller_name: g(3).text(),
        caller_uri: g(4).text(),
        callee: g(5).text(),
        callee_name: g(6).text(),
        callee_uri: g(7).text(),
        caller_ua: g(8).text(),
        callee_ua: g(9).text(),
        caller_ip: g(10).text(),
        callee_ip: g(11).text(),
        transport: if g(12).text() == "TCP" { "TCP" } else { "UDP" },
        invite_ns: g(13).u64(),
        ringing_ns: g(14).int().map(|x| x.max(0) as u64),
        answer_ns: g(15).int().map(|x| x.max(0) as u64),
        end_ns: g(16).u64(),
        // 17, 18: setup and duration, derived from the times.
        status: g(19).int().and_then(|s| u16::try_from(s).ok()),
        reason: g(20).text(),
        end_cause: EndCause::from_name(&g(21).text()).unwrap_or(EndCause::Open),
        codecs: g(22)
            .text()
            .split(',')
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect(),
        dtmf: Vec::new(),
        streams: Vec::new(),
    }
}

/// A stream from a row of [`STREAM_COLUMNS`].
pub(crate) fn stream_from(v: &[Val]) -> StreamRecord {
    let g = |k: usize| v.get(k).cloned().unwrap_or(Val::Null);
    StreamRecord {
        call_id: match g(0) {
            Val::Text(s) => Some(s),
            _ => None,
        },
        sender: match g(1).text().as_str() {
            "caller" => Some("caller"),
            "callee" => Some("callee"),
            _ => None,
        },
        src: g(2).text(),
        sport: g(3).u64() as u16,
        dst: g(4).text(),
        dport: g(5).u64() as u16,
        ssrc: g(6).u64() as u32,
        pt: g(7).u64() as u8,
        codec: g(8).text(),
        clock: g(9).u64() as u32,
        first_ns: g(10).u64(),
        last_ns: g(11).u64(),
        packets: g(12).u64(),
        bytes: g(13).u64(),
        expected: g(14).u64(),
        lost: g(15).int().unwrap_or(0),
        duplicates: g(16).u64(),
        reordered: g(17).u64(),
        jitter_mean_ms: g(18).real(),
        jitter_max_ms: g(19).real(),
        max_delta_ms: g(20).real().unwrap_or(0.0),
        rtcp_lost: g(21).int(),
        rtcp_fraction_lost: g(22).real(),
        rtcp_jitter_ms: g(23).real(),
        mos: g(24).real(),
    }
}

/// A DTMF event from a row of [`DTMF_COLUMNS`].
pub(crate) fn dtmf_from(v: &[Val]) -> Dtmf {
    let g = |k: usize| v.get(k).cloned().unwrap_or(Val::Null);
    Dtmf {
        ts: g(0).u64(),
        key: g(1).text().chars().next().unwrap_or('?'),
        duration_ms: g(2).real().unwrap_or(0.0),
        sender: if g(3).text() == "callee" {
            "callee"
        } else {
            "caller"
        },
    }
}

/// What the `schema_version` stored in database `name` means: `true`
/// when there is none yet (the caller writes it), `false` when it is
/// [`SCHEMA_VERSION`], an error naming the database otherwise.
pub(crate) fn needs_version(name: &str, found: Option<String>) -> Result<bool> {
    match found {
        None => Ok(true),
        Some(v) if v == SCHEMA_VERSION.to_string() => Ok(false),
        Some(v) => Err(err(
            name,
            format!("schema version {v}; this earlybird reads version {SCHEMA_VERSION}"),
        )),
    }
}

/// The error of database `name`.
pub(crate) fn err(name: &str, e: impl std::fmt::Display) -> Error {
    Error::Output {
        name: format!("call database {name}"),
        reason: e.to_string(),
    }
}

/// A call database (see the module docs).
pub enum CallStore {
    /// A SQLite file.
    #[cfg(feature = "sqlite")]
    Sqlite(sqlite::SqliteStore),
    /// A PostgreSQL database.
    #[cfg(feature = "postgres")]
    Postgres(Box<postgres::PgStore>),
}

impl CallStore {
    /// Whether `db` names a PostgreSQL database.
    pub fn is_url(db: &str) -> bool {
        db.starts_with("postgres://") || db.starts_with("postgresql://")
    }

    /// Opens or creates the database `db` (see the module docs).
    pub fn open(db: &str) -> Result<CallStore> {
        if Self::is_url(db) {
            #[cfg(feature = "postgres")]
            return Ok(CallStore::Postgres(Box::new(postgres::PgStore::open(db)?)));
            #[cfg(not(feature = "postgres"))]
            return Err(err(db, "PostgreSQL needs the `postgres` feature"));
        }
        #[cfg(feature = "sqlite")]
        return Ok(CallStore::Sqlite(sqlite::SqliteStore::open(
            std::path::Path::new(db),
        )?));
        #[cfg(not(feature = "sqlite"))]
        Err(err(db, "SQLite needs the `sqlite` feature"))
    }

    /// Writes calls and streams without a call in one transaction.
    pub fn insert(&mut self, calls: &[CallRecord], streams: &[StreamRecord]) -> Result<()> {
        match self {
            #[cfg(feature = "sqlite")]
            CallStore::Sqlite(s) => s.insert(calls, streams),
            #[cfg(feature = "postgres")]
            CallStore::Postgres(s) => s.insert(calls, streams),
        }
    }

    /// Calls matching `q` (see the module docs).
    pub fn search(&mut self, q: &Query) -> Result<Vec<CallRecord>> {
        match self {
            #[cfg(feature = "sqlite")]
            CallStore::Sqlite(s) => s.search(q),
            #[cfg(feature = "postgres")]
            CallStore::Postgres(s) => s.search(q),
        }
    }
}
