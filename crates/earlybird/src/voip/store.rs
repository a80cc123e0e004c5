//! The call store: call records, their streams and DTMF in SQLite
//! (feature `sqlite`), and the searches `earlybird calls` runs.
//!
//! Contract:
//! - [`CallStore::open`] opens or creates a database of schema version
//!   [`SCHEMA_VERSION`] (tables `calls`, `streams`, `dtmf`, `meta`; indexes
//!   on Call-ID, caller, callee and start time; `docs/VOIP.md` lists the
//!   columns) and refuses a file of another version, naming it.
//! - [`CallStore::insert`] writes a batch of calls (with their streams and
//!   DTMF) and of streams without a call in one transaction: a crash or a
//!   kill loses at most the batch being written, never a committed one.
//!   WAL journal, so searches can run while a probe writes.
//! - [`CallStore::search`] returns the calls that match every condition of
//!   a [`Query`] (each condition uses an index or a range of one), newest
//!   first, streams and DTMF included.
//! - Errors are [`Error::Output`] naming the database file.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};

use super::record::{CallRecord, Dtmf, EndCause, StreamRecord};
use crate::error::{Error, Result};

/// The schema version this code writes and reads.
pub const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY,
    call_id TEXT NOT NULL,
    caller TEXT NOT NULL, caller_name TEXT NOT NULL, caller_uri TEXT NOT NULL,
    callee TEXT NOT NULL, callee_name TEXT NOT NULL, callee_uri TEXT NOT NULL,
    caller_ua TEXT NOT NULL, callee_ua TEXT NOT NULL,
    caller_ip TEXT NOT NULL, callee_ip TEXT NOT NULL, transport TEXT NOT NULL,
    start_ns INTEGER NOT NULL, ringing_ns INTEGER, answer_ns INTEGER,
    end_ns INTEGER NOT NULL, setup_ms REAL, duration_ms REAL,
    status INTEGER, reason TEXT NOT NULL, end_cause TEXT NOT NULL,
    codecs TEXT NOT NULL, mos REAL, dtmf TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_call_id ON calls (call_id);
CREATE INDEX IF NOT EXISTS calls_caller ON calls (caller);
CREATE INDEX IF NOT EXISTS calls_callee ON calls (callee);
CREATE INDEX IF NOT EXISTS calls_start ON calls (start_ns);
CREATE TABLE IF NOT EXISTS streams (
    call INTEGER REFERENCES calls (id),
    call_id TEXT, sender TEXT,
    src TEXT NOT NULL, sport INTEGER NOT NULL, dst TEXT NOT NULL, dport INTEGER NOT NULL,
    ssrc INTEGER NOT NULL, pt INTEGER NOT NULL, codec TEXT NOT NULL, clock INTEGER NOT NULL,
    first_ns INTEGER NOT NULL, last_ns INTEGER NOT NULL,
    packets INTEGER NOT NULL, bytes INTEGER NOT NULL, expected INTEGER NOT NULL,
    lost INTEGER NOT NULL, duplicates INTEGER NOT NULL, reordered INTEGER NOT NULL,
    jitter_mean_ms REAL, jitter_max_ms REAL, max_delta_ms REAL NOT NULL,
    rtcp_lost INTEGER, rtcp_fraction_lost REAL, rtcp_jitter_ms REAL, mos REAL
);
CREATE INDEX IF NOT EXISTS streams_call ON streams (call);
CREATE INDEX IF NOT EXISTS streams_first ON streams (first_ns);
CREATE TABLE IF NOT EXISTS dtmf (
    call INTEGER NOT NULL REFERENCES calls (id),
    ts_ns INTEGER NOT NULL, key TEXT NOT NULL, duration_ms REAL NOT NULL, sender TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS dtmf_call ON dtmf (call);
";

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
    /// Final status in this range (inclusive); `None` in a range: no status.
    pub status: Option<(u16, u16)>,
    /// Calls that got no final status at all.
    pub no_status: bool,
    /// This Call-ID.
    pub call_id: Option<String>,
    /// At most this many calls (newest first).
    pub limit: Option<u64>,
}

impl Query {
    /// Parses a status filter: `404`, `4xx`, `2xx`, or `none`.
    pub fn parse_status(s: &str) -> std::result::Result<Option<(u16, u16)>, String> {
        if s == "none" {
            return Ok(None);
        }
        let bad = || format!("status {s:?}: a code (486), a class (4xx) or none");
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

/// A SQLite call database (see the module docs).
pub struct CallStore {
    conn: Connection,
    path: PathBuf,
}

fn err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Output {
        name: format!("call database {}", path.display()),
        reason: e.to_string(),
    }
}

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl CallStore {
    /// Opens or creates the database at `path` (see the module docs).
    pub fn open(path: &Path) -> Result<CallStore> {
        let conn = Connection::open(path).map_err(|e| err(path, e))?;
        let e = |x| err(path, x);
        conn.pragma_update(None, "journal_mode", "WAL").map_err(e)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(e)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(e)?;
        conn.execute_batch(SCHEMA).map_err(e)?;
        let version: Option<String> = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(e)?;
        match version {
            None => {
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?1)",
                    [SCHEMA_VERSION.to_string()],
                )
                .map_err(e)?;
            }
            Some(v) if v == SCHEMA_VERSION.to_string() => {}
            Some(v) => {
                return Err(err(
                    path,
                    format!("schema version {v}; this earlybird reads version {SCHEMA_VERSION}"),
                ))
            }
        }
        Ok(CallStore {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// Writes calls and streams without a call in one transaction.
    pub fn insert(&mut self, calls: &[CallRecord], streams: &[StreamRecord]) -> Result<()> {
        let path = self.path.clone();
        let e = |x| err(&path, x);
        let tx = self.conn.transaction().map_err(e)?;
        {
            let mut call_st = tx
                .prepare_cached(
                    "INSERT INTO calls (call_id, caller, caller_name, caller_uri, callee, \
                     callee_name, callee_uri, caller_ua, callee_ua, caller_ip, callee_ip, \
                     transport, start_ns, ringing_ns, answer_ns, end_ns, setup_ms, duration_ms, \
                     status, reason, end_cause, codecs, mos, dtmf) VALUES (?1, ?2, ?3, ?4, ?5, \
                     ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, \
                     ?22, ?23, ?24)",
                )
                .map_err(e)?;
            let mut dtmf_st = tx
                .prepare_cached(
                    "INSERT INTO dtmf (call, ts_ns, key, duration_ms, sender) VALUES (?1, ?2, ?3, \
                     ?4, ?5)",
                )
                .map_err(e)?;
            for c in calls {
                call_st
                    .execute(params![
                        c.call_id,
                        c.caller,
                        c.caller_name,
                        c.caller_uri,
                        c.callee,
                        c.callee_name,
                        c.callee_uri,
                        c.caller_ua,
                        c.callee_ua,
                        c.caller_ip,
                        c.callee_ip,
                        c.transport,
                        i(c.invite_ns),
                        c.ringing_ns.map(i),
                        c.answer_ns.map(i),
                        i(c.end_ns),
                        c.setup_delay_ms(),
                        c.duration_ms(),
                        c.status,
                        c.reason,
                        c.end_cause.name(),
                        c.codecs.join(","),
                        c.mos(),
                        c.dtmf_keys(),
                    ])
                    .map_err(e)?;
                let row = tx.last_insert_rowid();
                for s in &c.streams {
                    insert_stream(&tx, Some(row), s).map_err(e)?;
                }
                for d in &c.dtmf {
                    dtmf_st
                        .execute(params![
                            row,
                            i(d.ts),
                            d.key.to_string(),
                            d.duration_ms,
                            d.sender
                        ])
                        .map_err(e)?;
                }
            }
            for s in streams {
                insert_stream(&tx, None, s).map_err(e)?;
            }
        }
        tx.commit().map_err(e)
    }

    /// Calls matching `q` (see the module docs).
    pub fn search(&self, q: &Query) -> Result<Vec<CallRecord>> {
        let e = |x| err(&self.path, x);
        let mut sql = String::from(
            "SELECT id, call_id, caller, caller_name, caller_uri, callee, callee_name, callee_uri, \
             caller_ua, callee_ua, caller_ip, callee_ip, transport, start_ns, ringing_ns, \
             answer_ns, end_ns, status, reason, end_cause, codecs FROM calls WHERE 1",
        );
        let mut args: Vec<rusqlite::types::Value> = Vec::new();
        let mut add = |cond: &str, v: rusqlite::types::Value, sql: &mut String| {
            args.push(v);
            sql.push_str(&cond.replace('?', &format!("?{}", args.len())));
        };
        use rusqlite::types::Value as V;
        if let Some(f) = &q.from {
            // Both placeholders take the same argument.
            add(
                " AND (caller = ? OR caller_uri = ?)",
                V::Text(f.clone()),
                &mut sql,
            );
        }
        if let Some(t) = &q.to {
            add(
                " AND (callee = ? OR callee_uri = ?)",
                V::Text(t.clone()),
                &mut sql,
            );
        }
        if let Some(s) = q.since_ns {
            add(" AND start_ns >= ?", V::Integer(i(s)), &mut sql);
        }
        if let Some(u) = q.until_ns {
            add(" AND start_ns < ?", V::Integer(i(u)), &mut sql);
        }
        if let Some((lo, hi)) = q.status {
            add(" AND status >= ?", V::Integer(lo.into()), &mut sql);
            add(" AND status <= ?", V::Integer(hi.into()), &mut sql);
        }
        if q.no_status {
            sql.push_str(" AND status IS NULL");
        }
        if let Some(id) = &q.call_id {
            add(" AND call_id = ?", V::Text(id.clone()), &mut sql);
        }
        sql.push_str(" ORDER BY start_ns DESC, id DESC");
        if let Some(l) = q.limit {
            sql.push_str(&format!(" LIMIT {l}"));
        }
        let mut st = self.conn.prepare(&sql).map_err(e)?;
        let rows = st
            .query_map(rusqlite::params_from_iter(args.iter()), |r| {
                let u = |k: usize| r.get::<_, i64>(k).map(|v| v.max(0) as u64);
                let ou = |k: usize| {
                    r.get::<_, Option<i64>>(k)
                        .map(|v| v.map(|v| v.max(0) as u64))
                };
                Ok((
                    r.get::<_, i64>(0)?,
                    CallRecord {
                        call_id: r.get(1)?,
                        caller: r.get(2)?,
                        caller_name: r.get(3)?,
                        caller_uri: r.get(4)?,
                        callee: r.get(5)?,
                        callee_name: r.get(6)?,
                        callee_uri: r.get(7)?,
                        caller_ua: r.get(8)?,
                        callee_ua: r.get(9)?,
                        caller_ip: r.get(10)?,
                        callee_ip: r.get(11)?,
                        transport: if r.get::<_, String>(12)? == "TCP" {
                            "TCP"
                        } else {
                            "UDP"
                        },
                        invite_ns: u(13)?,
                        ringing_ns: ou(14)?,
                        answer_ns: ou(15)?,
                        end_ns: u(16)?,
                        status: r.get(17)?,
                        reason: r.get(18)?,
                        end_cause: EndCause::from_name(&r.get::<_, String>(19)?)
                            .unwrap_or(EndCause::Open),
                        codecs: r
                            .get::<_, String>(20)?
                            .split(',')
                            .filter(|c| !c.is_empty())
                            .map(str::to_string)
                            .collect(),
                        dtmf: Vec::new(),
                        streams: Vec::new(),
                    },
                ))
            })
            .map_err(e)?;
        let mut out = Vec::new();
        for row in rows {
            let (id, mut c) = row.map_err(e)?;
            c.streams = self.streams_of(id)?;
            c.dtmf = self.dtmf_of(id)?;
            out.push(c);
        }
        Ok(out)
    }

    fn streams_of(&self, call: i64) -> Result<Vec<StreamRecord>> {
        let e = |x| err(&self.path, x);
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT call_id, sender, src, sport, dst, dport, ssrc, pt, codec, clock, first_ns, \
                 last_ns, packets, bytes, expected, lost, duplicates, reordered, jitter_mean_ms, \
                 jitter_max_ms, max_delta_ms, rtcp_lost, rtcp_fraction_lost, rtcp_jitter_ms, mos \
                 FROM streams WHERE call = ?1 ORDER BY first_ns",
            )
            .map_err(e)?;
        let rows = st
            .query_map([call], |r| {
                let u = |k: usize| r.get::<_, i64>(k).map(|v| v.max(0) as u64);
                Ok(StreamRecord {
                    call_id: r.get(0)?,
                    sender: match r.get::<_, Option<String>>(1)?.as_deref() {
                        Some("caller") => Some("caller"),
                        Some("callee") => Some("callee"),
                        _ => None,
                    },
                    src: r.get(2)?,
                    sport: r.get(3)?,
                    dst: r.get(4)?,
                    dport: r.get(5)?,
                    ssrc: r.get(6)?,
                    pt: r.get(7)?,
                    codec: r.get(8)?,
                    clock: r.get(9)?,
                    first_ns: u(10)?,
                    last_ns: u(11)?,
                    packets: u(12)?,
                    bytes: u(13)?,
                    expected: u(14)?,
                    lost: r.get(15)?,
                    duplicates: u(16)?,
                    reordered: u(17)?,
                    jitter_mean_ms: r.get(18)?,
                    jitter_max_ms: r.get(19)?,
                    max_delta_ms: r.get(20)?,
                    rtcp_lost: r.get(21)?,
                    rtcp_fraction_lost: r.get(22)?,
                    rtcp_jitter_ms: r.get(23)?,
                    mos: r.get(24)?,
                })
            })
            .map_err(e)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(e)
    }

    fn dtmf_of(&self, call: i64) -> Result<Vec<Dtmf>> {
        let e = |x| err(&self.path, x);
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT ts_ns, key, duration_ms, sender FROM dtmf WHERE call = ?1 ORDER BY ts_ns",
            )
            .map_err(e)?;
        let rows = st
            .query_map([call], |r| {
                Ok(Dtmf {
                    ts: r.get::<_, i64>(0)?.max(0) as u64,
                    key: r.get::<_, String>(1)?.chars().next().unwrap_or('?'),
                    duration_ms: r.get(2)?,
                    sender: if r.get::<_, String>(3)? == "callee" {
                        "callee"
                    } else {
                        "caller"
                    },
                })
            })
            .map_err(e)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(e)
    }
}

fn insert_stream(
    tx: &rusqlite::Transaction<'_>,
    call: Option<i64>,
    s: &StreamRecord,
) -> rusqlite::Result<usize> {
    let mut st = tx.prepare_cached(
        "INSERT INTO streams (call, call_id, sender, src, sport, dst, dport, ssrc, pt, codec, \
         clock, first_ns, last_ns, packets, bytes, expected, lost, duplicates, reordered, \
         jitter_mean_ms, jitter_max_ms, max_delta_ms, rtcp_lost, rtcp_fraction_lost, \
         rtcp_jitter_ms, mos) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, \
         ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26)",
    )?;
    st.execute(params![
        call,
        s.call_id,
        s.sender,
        s.src,
        s.sport,
        s.dst,
        s.dport,
        s.ssrc,
        s.pt,
        s.codec,
        s.clock,
        i(s.first_ns),
        i(s.last_ns),
        i(s.packets),
        i(s.bytes),
        i(s.expected),
        s.lost,
        i(s.duplicates),
        i(s.reordered),
        s.jitter_mean_ms,
        s.jitter_max_ms,
        s.max_delta_ms,
        s.rtcp_lost,
        s.rtcp_fraction_lost,
        s.rtcp_jitter_ms,
        s.mos,
    ])
}
