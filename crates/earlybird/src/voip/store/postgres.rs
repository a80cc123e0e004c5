//! The call store in PostgreSQL (the `postgres` crate, synchronous).
//!
//! Contract: as [`super`] says; the URL is libpq's (`postgres://user:pass@
//! host:port/db`, or `host=/run/postgresql` in the query for a socket); the
//! schema is created in the connection's default schema; errors name the
//! URL without its password. A connection that was lost (the server
//! stopped or restarted) is opened again at the next insert; a connect
//! gives up after [`CONNECT_TIMEOUT`] unless the URL sets
//! `connect_timeout`.

use postgres::types::{IsNull, ToSql, Type};
use postgres::{Client, NoTls};

use super::{
    call_from, call_values, dtmf_from, dtmf_values, err, needs_version, placeholders, search_sql,
    stream_from, stream_values, Query, Val, CALL_COLUMNS, DTMF_COLUMNS, SCHEMA, SCHEMA_VERSION,
    STREAM_COLUMNS,
};
use crate::error::Result;
use crate::voip::record::{CallRecord, StreamRecord};

impl ToSql for Val {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Val::Null => Ok(IsNull::Yes),
            Val::Int(v) => v.to_sql(ty, out),
            Val::Real(v) => v.to_sql(ty, out),
            Val::Text(s) => s.to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        <i64 as ToSql>::accepts(ty) || <f64 as ToSql>::accepts(ty) || <String as ToSql>::accepts(ty)
    }

    postgres::types::to_sql_checked!();
}

/// How long a connect waits for the server unless the URL says.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// A URL without its password.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let user = &url[s + 3..at];
            let user = user.split(':').next().unwrap_or("");
            format!("{}{user}@{}", &url[..s + 3], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

fn row(r: &postgres::Row) -> Vec<Val> {
    (0..r.len())
        .map(|k| {
            let ty = r.columns()[k].type_();
            if *ty == Type::INT8 {
                r.get::<_, Option<i64>>(k).map_or(Val::Null, Val::Int)
            } else if *ty == Type::FLOAT8 {
                r.get::<_, Option<f64>>(k).map_or(Val::Null, Val::Real)
            } else {
                r.get::<_, Option<String>>(k).map_or(Val::Null, Val::Text)
            }
        })
        .collect()
}

/// The values as the `postgres` crate takes parameters.
fn refs(v: &[Val]) -> Vec<&(dyn ToSql + Sync)> {
    v.iter().map(|x| x as &(dyn ToSql + Sync)).collect()
}

/// A PostgreSQL call database.
pub struct PgStore {
    client: Client,
    name: String,
    url: String,
}

/// A connection to `url` (`name`: the URL without its password).
fn connect(url: &str, name: &str) -> Result<Client> {
    let mut cfg: postgres::Config = url.parse().map_err(|x| err(name, x))?;
    if cfg.get_connect_timeout().is_none() {
        cfg.connect_timeout(CONNECT_TIMEOUT);
    }
    cfg.connect(NoTls).map_err(|x| err(name, x))
}

impl PgStore {
    /// Connects to `url` and creates the schema when missing.
    pub fn open(url: &str) -> Result<PgStore> {
        let name = redact(url);
        let e = |x: postgres::Error| err(&name, x);
        let mut client = connect(url, &name)?;
        client
            .batch_execute(&SCHEMA.replace("{ID}", "BIGSERIAL PRIMARY KEY"))
            .map_err(e)?;
        let version = client
            .query_opt("SELECT value FROM meta WHERE key = 'schema_version'", &[])
            .map_err(e)?
            .map(|r| r.get::<_, String>(0));
        if needs_version(&name, version)? {
            client
                .execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', $1)",
                    &[&SCHEMA_VERSION.to_string()],
                )
                .map_err(e)?;
        }
        Ok(PgStore {
            client,
            name,
            url: url.to_string(),
        })
    }

    /// The URL without its password.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Writes calls and streams without a call in one transaction.
    pub fn insert(&mut self, calls: &[CallRecord], streams: &[StreamRecord]) -> Result<()> {
        let name = self.name.clone();
        let e = |x: postgres::Error| err(&name, x);
        if self.client.is_closed() {
            self.client = connect(&self.url, &name)?;
        }
        let mut tx = self.client.transaction().map_err(e)?;
        let call_st = tx
            .prepare(&format!(
                "INSERT INTO calls ({CALL_COLUMNS}) VALUES ({}) RETURNING id",
                placeholders('$', 1, 24)
            ))
            .map_err(e)?;
        let stream_st = tx
            .prepare(&format!(
                "INSERT INTO streams (call, {STREAM_COLUMNS}) VALUES ({})",
                placeholders('$', 1, 26)
            ))
            .map_err(e)?;
        let dtmf_st = tx
            .prepare(&format!(
                "INSERT INTO dtmf (call, {DTMF_COLUMNS}) VALUES ({})",
                placeholders('$', 1, 5)
            ))
            .map_err(e)?;
        for c in calls {
            let v = call_values(c);
            let id: i64 = tx.query_one(&call_st, &refs(&v)).map_err(e)?.get(0);
            for s in &c.streams {
                let v: Vec<Val> = std::iter::once(Val::Int(id))
                    .chain(stream_values(s))
                    .collect();
                tx.execute(&stream_st, &refs(&v)).map_err(e)?;
            }
            for d in &c.dtmf {
                let v: Vec<Val> = std::iter::once(Val::Int(id))
                    .chain(dtmf_values(d))
                    .collect();
                tx.execute(&dtmf_st, &refs(&v)).map_err(e)?;
            }
        }
        for s in streams {
            let v: Vec<Val> = std::iter::once(Val::Null).chain(stream_values(s)).collect();
            tx.execute(&stream_st, &refs(&v)).map_err(e)?;
        }
        tx.commit().map_err(e)
    }

    /// Calls matching `q`.
    pub fn search(&mut self, q: &Query) -> Result<Vec<CallRecord>> {
        let name = self.name.clone();
        let e = |x: postgres::Error| err(&name, x);
        let (sql, args) = search_sql(q, '$');
        let rows = self.client.query(&sql, &refs(&args)).map_err(e)?;
        let streams_st = self
            .client
            .prepare(&format!(
                "SELECT {STREAM_COLUMNS} FROM streams WHERE call = $1 ORDER BY first_ns"
            ))
            .map_err(e)?;
        let dtmf_st = self
            .client
            .prepare(&format!(
                "SELECT {DTMF_COLUMNS} FROM dtmf WHERE call = $1 ORDER BY ts_ns"
            ))
            .map_err(e)?;
        let mut out = Vec::new();
        for r in rows {
            let v = row(&r);
            let id: i64 = r.get(0);
            let mut c = call_from(&v);
            c.streams = self
                .client
                .query(&streams_st, &[&id])
                .map_err(e)?
                .iter()
                .map(|r| stream_from(&row(r)))
                .collect();
            c.dtmf = self
                .client
                .query(&dtmf_st, &[&id])
                .map_err(e)?
                .iter()
                .map(|r| dtmf_from(&row(r)))
                .collect();
            out.push(c);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn urls_lose_their_password_in_messages() {
        assert_eq!(
            super::redact("postgres://eb:secret@127.0.0.1:5432/calls"),
            "postgres://eb@127.0.0.1:5432/calls"
        );
        assert_eq!(
            super::redact("postgres://localhost/calls"),
            "postgres://localhost/calls"
        );
    }
}
