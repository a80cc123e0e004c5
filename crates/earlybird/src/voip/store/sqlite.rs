//! The call store in a SQLite file (rusqlite, SQLite compiled in).
//!
//! Contract: as [`super`] says; WAL journal (searches run while a probe
//! writes), `synchronous = NORMAL` (a committed batch survives a crash of
//! the process; a power cut may lose the last ones), a 10 s busy timeout.

use std::path::Path;

use rusqlite::types::{ToSqlOutput, Value as SqlValue, ValueRef};
use rusqlite::{Connection, OptionalExtension};

use super::{
    call_from, call_values, dtmf_from, dtmf_values, err, needs_version, placeholders, search_sql,
    stream_from, stream_values, Query, Val, CALL_COLUMNS, DTMF_COLUMNS, SCHEMA, SCHEMA_VERSION,
    STREAM_COLUMNS,
};
use crate::error::Result;
use crate::voip::record::{CallRecord, StreamRecord};

impl rusqlite::ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Val::Null => ToSqlOutput::Owned(SqlValue::Null),
            Val::Int(v) => ToSqlOutput::Owned(SqlValue::Integer(*v)),
            Val::Real(v) => ToSqlOutput::Owned(SqlValue::Real(*v)),
            Val::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
        })
    }
}

fn val(r: &rusqlite::Row<'_>, k: usize) -> rusqlite::Result<Val> {
    Ok(match r.get_ref(k)? {
        ValueRef::Null => Val::Null,
        ValueRef::Integer(v) => Val::Int(v),
        ValueRef::Real(v) => Val::Real(v),
        ValueRef::Text(t) | ValueRef::Blob(t) => Val::Text(String::from_utf8_lossy(t).into_owned()),
    })
}

fn row(r: &rusqlite::Row<'_>, n: usize) -> rusqlite::Result<Vec<Val>> {
    (0..n).map(|k| val(r, k)).collect()
}

/// A SQLite call database.
pub struct SqliteStore {
    conn: Connection,
    name: String,
}

impl SqliteStore {
    /// Opens or creates the database at `path`.
    pub fn open(path: &Path) -> Result<SqliteStore> {
        let name = path.display().to_string();
        let e = |x: rusqlite::Error| err(&name, x);
        let conn = Connection::open(path).map_err(e)?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(e)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(e)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(e)?;
        conn.execute_batch(&SCHEMA.replace("{ID}", "INTEGER PRIMARY KEY"))
            .map_err(e)?;
        let version: Option<String> = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(e)?;
        if needs_version(&name, version)? {
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?1)",
                [SCHEMA_VERSION.to_string()],
            )
            .map_err(e)?;
        }
        Ok(SqliteStore { conn, name })
    }

    /// How long an insert waits for another writer's lock (10 s unless
    /// set).
    pub(crate) fn set_busy_timeout(&mut self, d: std::time::Duration) {
        let _ = self.conn.busy_timeout(d);
    }

    /// Writes calls and streams without a call in one transaction.
    pub fn insert(&mut self, calls: &[CallRecord], streams: &[StreamRecord]) -> Result<()> {
        let name = self.name.clone();
        let e = |x: rusqlite::Error| err(&name, x);
        let tx = self.conn.transaction().map_err(e)?;
        {
            let mut call_st = tx
                .prepare_cached(&format!(
                    "INSERT INTO calls ({CALL_COLUMNS}) VALUES ({})",
                    placeholders('?', 1, 24)
                ))
                .map_err(e)?;
            let mut stream_st = tx
                .prepare_cached(&format!(
                    "INSERT INTO streams (call, {STREAM_COLUMNS}) VALUES ({})",
                    placeholders('?', 1, 26)
                ))
                .map_err(e)?;
            let mut dtmf_st = tx
                .prepare_cached(&format!(
                    "INSERT INTO dtmf (call, {DTMF_COLUMNS}) VALUES ({})",
                    placeholders('?', 1, 5)
                ))
                .map_err(e)?;
            for c in calls {
                call_st
                    .execute(rusqlite::params_from_iter(call_values(c)))
                    .map_err(e)?;
                let id = Val::Int(tx.last_insert_rowid());
                for s in &c.streams {
                    let v = std::iter::once(id.clone()).chain(stream_values(s));
                    stream_st
                        .execute(rusqlite::params_from_iter(v))
                        .map_err(e)?;
                }
                for d in &c.dtmf {
                    let v = std::iter::once(id.clone()).chain(dtmf_values(d));
                    dtmf_st.execute(rusqlite::params_from_iter(v)).map_err(e)?;
                }
            }
            for s in streams {
                let v = std::iter::once(Val::Null).chain(stream_values(s));
                stream_st
                    .execute(rusqlite::params_from_iter(v))
                    .map_err(e)?;
            }
        }
        tx.commit().map_err(e)
    }

    /// Calls matching `q`.
    pub fn search(&mut self, q: &Query) -> Result<Vec<CallRecord>> {
        let name = self.name.clone();
        let e = |x: rusqlite::Error| err(&name, x);
        let (sql, args) = search_sql(q, '?');
        let mut st = self.conn.prepare(&sql).map_err(e)?;
        let rows: Vec<Vec<Val>> = st
            .query_map(rusqlite::params_from_iter(args.iter()), |r| row(r, 25))
            .map_err(e)?
            .collect::<rusqlite::Result<_>>()
            .map_err(e)?;
        let mut streams = self
            .conn
            .prepare_cached(&format!(
                "SELECT {STREAM_COLUMNS} FROM streams WHERE call = ?1 ORDER BY first_ns"
            ))
            .map_err(e)?;
        let mut dtmf = self
            .conn
            .prepare_cached(&format!(
                "SELECT {DTMF_COLUMNS} FROM dtmf WHERE call = ?1 ORDER BY ts_ns"
            ))
            .map_err(e)?;
        let mut out = Vec::new();
        for v in rows {
            let mut c = call_from(&v);
            let id = v[0].clone();
            c.streams = streams
                .query_map([&id], |r| row(r, 25))
                .map_err(e)?
                .map(|r| r.map(|v| stream_from(&v)))
                .collect::<rusqlite::Result<_>>()
                .map_err(e)?;
            c.dtmf = dtmf
                .query_map([&id], |r| row(r, 4))
                .map_err(e)?
                .map(|r| r.map(|v| dtmf_from(&v)))
                .collect::<rusqlite::Result<_>>()
                .map_err(e)?;
            out.push(c);
        }
        Ok(out)
    }
}
