//! ClickHouse export: flow records inserted in batches over ClickHouse's
//! HTTP interface.
//!
//! Contract: an output named `clickhouse+http://HOST:PORT/TABLE`
//! ([`destination`]; TABLE may be `DATABASE.TABLE`) formats the records as
//! the JSON lines exporter does (`jsonl.rs`: the same keys, `null` where a
//! value was not measured, the early packets as arrays) and posts them,
//! about [`BATCH_BYTES`] at a time and at every flush (a live run's, once
//! a second) and at the end, as `INSERT INTO TABLE FORMAT JSONEachRow`
//! (keys the table has no column for, such as analyzer fields, are
//! skipped). The table's DDL is [`ddl`] (`docs/clickhouse_flows.sql`, a
//! test keeps the two equal; it runs on ClickHouse 18.16, Debian 12's, and
//! on 26.9: `crates/earlybird-py/tests/test_clickhouse_current.py`).
//!
//! A failed or slow server never blocks the caller: batches go to a
//! queue that a thread of their own posts (HTTP/1.1 over a TCP
//! connection per batch, with connect and I/O timeouts). The queue is
//! bounded by records, not batches (`--clickhouse-hold`, default
//! [`HOLD`]): the records of the batches waiting and of the one being
//! posted are held in memory, and a batch that would take them past the
//! bound is dropped and counted (one batch always goes when nothing else
//! is held, so a bound smaller than a batch still lets one through at a
//! time). A batch that could not reach the server (no connection, or
//! the connection failed before the whole batch was sent: nothing was
//! inserted) is held and posted again after a back-off ([`RETRY_MIN`]
//! doubling to [`RETRY_MAX`]) until the server takes it, while the
//! queue keeps the batches that come meanwhile: a server stopped and
//! started again gets every record of that time, within the bound. One
//! the server refuses, or does not answer once it was sent (it may have
//! been inserted: it is not sent twice), is dropped and counted. [`Exporter::finish`] waits at most
//! [`LINGER`] for the queue, then returns an [`Error::Output`] stating the
//! records not delivered, the failures and the last (the server's own
//! message for a refused insert).
//!
//! [`open_counted`] also gives the output's [`HoldCounts`]: the records
//! held now and those dropped because the hold was full, read while the
//! run goes (`earlybird_clickhouse_held_records`,
//! `earlybird_clickhouse_dropped_records_total` on `/metrics`) and at its
//! end (a line of the summary).

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};

use super::{fields, jsonl::JsonLinesExporter, ExportOptions, Exporter};
use crate::error::{Error, Result};
use crate::flow::record::RecordBatch;
use crate::schema::{FieldType, Kind};

/// Prefix of a ClickHouse output.
pub const PREFIX: &str = "clickhouse+http://";

/// Bytes of JSON after which a batch is posted.
pub const BATCH_BYTES: usize = 1 << 20;
/// Records held by default (`--clickhouse-hold`): waiting for the server
/// or being posted; more are dropped and counted.
pub const HOLD: usize = 100_000;
/// How long the end of a run waits for the queue.
pub const LINGER: Duration = Duration::from_secs(5);
/// The first wait before a batch that did not reach the server is posted
/// again.
pub const RETRY_MIN: Duration = Duration::from_millis(250);
/// The longest wait between two posts of a batch.
pub const RETRY_MAX: Duration = Duration::from_secs(5);
/// Connect timeout, and the timeout of each read and write.
const CONNECT: Duration = Duration::from_secs(2);
const IO: Duration = Duration::from_secs(10);

/// `(HOST:PORT, TABLE)` of an output name, `None` for any other name.
pub fn destination(out: &std::path::Path) -> Option<(&str, &str)> {
    out.to_str()?.strip_prefix(PREFIX)?.split_once('/')
}

/// Whether the output name is a ClickHouse server.
pub fn is_network(out: &std::path::Path) -> bool {
    out.to_str().is_some_and(|s| s.starts_with(PREFIX))
}

/// The ClickHouse column type of a record field type.
fn column_type(t: FieldType) -> &'static str {
    match t {
        FieldType::U8 => "UInt8",
        FieldType::U16 => "UInt16",
        FieldType::U32 => "UInt32",
        FieldType::U64 => "UInt64",
        FieldType::I8 => "Int8",
        FieldType::I64 => "Int64",
        FieldType::F64 => "Float64",
        FieldType::Str => "String",
    }
}

/// Fields that may be null (not measured, or a float not finite): the
/// statistics, the TCP flag counts, the ICMP type and code, the Community
/// ID and every float.
fn nullable(name: &str, t: FieldType) -> bool {
    t == FieldType::F64
        || matches!(name, "icmp_type" | "icmp_code" | "community_id")
        || ["_size_", "_iat_"].iter().any(|s| name.contains(s))
        || crate::flow::record::TCP_FLAG_NAMES
            .iter()
            .any(|f| name.ends_with(&format!("_{f}")))
}

/// The DDL of a flow table named `table` (`docs/clickhouse_flows.sql`):
/// one column per record field, the early packets as arrays, partitioned
/// by month of the first packet, ordered by the first packet's time.
pub fn ddl(table: &str) -> String {
    let mut s = String::new();
    s.push_str(
        "-- The flow table of `earlybird flows -o clickhouse+http://HOST:PORT/TABLE`.\n\
         -- Generated from crates/earlybird/src/export/fields.rs (clickhouse::ddl);\n\
         -- runs on ClickHouse 18.16 (Debian 12) and 26.9 (tested both). Columns are the\n\
         -- record fields of docs/RECORD_FIELDS.md, the early packets as arrays.\n",
    );
    let _ = writeln!(s, "CREATE TABLE IF NOT EXISTS {table}\n(");
    let mut cols: Vec<String> = fields::FIELDS
        .iter()
        .map(|f| {
            let t = column_type(f.ty);
            match nullable(f.name, f.ty) {
                true => format!("    {} Nullable({t})", f.name),
                false => format!("    {} {t}", f.name),
            }
        })
        .collect();
    for e in &fields::EARLY_FIELDS {
        cols.push(format!("    {} Array({})", e.json, column_type(e.ty)));
    }
    // The label every record ends with (`classify/labeller.rs`); the
    // category and the deciding model may be empty (null).
    for f in crate::classify::labeller::FIELDS {
        let t = column_type(f.ty);
        match f.ty == FieldType::F64 || f.name == "category" || f.name == "model_id" {
            true => cols.push(format!("    {} Nullable({t})", f.name)),
            false => cols.push(format!("    {} {t}", f.name)),
        }
    }
    s.push_str(&cols.join(",\n"));
    s.push_str(
        "\n)\nENGINE = MergeTree()\n\
         PARTITION BY toYYYYMM(toDateTime(intDiv(first_ts, 1000000000)))\n\
         ORDER BY (first_ts, src, dst);\n",
    );
    s
}

/// What the posting thread could not deliver.
#[derive(Default)]
struct Tally {
    records: AtomicU64,
    delivered: AtomicU64,
    dropped: AtomicU64,
    failures: AtomicU64,
    /// Records that waited for a server that could not be reached (a
    /// batch posted again, or made before the server was reached again),
    /// and were inserted then.
    late: AtomicU64,
    /// Posts that did not reach the server and were tried again.
    retries: AtomicU64,
    /// Records queued or being posted.
    held: AtomicU64,
    /// The most records held at once.
    held_peak: AtomicU64,
    /// Records dropped because the hold was full (part of `dropped`).
    beyond_hold: AtomicU64,
    last: Mutex<Option<String>>,
    /// Set by `finish`: the thread posts no batch again after this time.
    give_up: Mutex<Option<std::time::Instant>>,
}

impl Tally {
    fn fail(&self, records: u64, what: String) {
        self.dropped.fetch_add(records, Ordering::Relaxed);
        self.failures.fetch_add(1, Ordering::Relaxed);
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(what);
    }
}

/// One batch: JSON lines and how many records they hold.
struct Batch {
    body: Vec<u8>,
    records: u64,
    /// When it was handed to the posting thread.
    made: std::time::Instant,
}

/// A writer appending to a buffer the exporter takes batches from.
#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Inserts records into a ClickHouse table.
pub struct ClickHouseExporter {
    name: String,
    /// Records held at most (`--clickhouse-hold`).
    hold: u64,
    json: JsonLinesExporter,
    buf: Buf,
    pending: u64,
    tx: Option<Sender<Batch>>,
    done: Receiver<()>,
    tally: Arc<Tally>,
}

/// Opens the ClickHouse output `out`, holding at most `hold` records
/// while the server is away or slow: checks the name and resolves the
/// server (nothing is sent until records come). Errors name the output.
pub fn open(out: &std::path::Path, opts: &ExportOptions, hold: usize) -> Result<Box<dyn Exporter>> {
    open_counted(out, opts, hold).map(|(e, _)| e)
}

/// What a ClickHouse output's hold did so far: cheap to clone, read from
/// any thread while the output runs and after it ended.
#[derive(Clone)]
pub struct HoldCounts {
    name: String,
    hold: u64,
    tally: Arc<Tally>,
}

impl std::fmt::Debug for HoldCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoldCounts")
            .field("name", &self.name)
            .field("held", &self.held())
            .field("dropped_beyond_hold", &self.dropped_beyond_hold())
            .finish()
    }
}

impl HoldCounts {
    /// Records held now: waiting for the server or being posted.
    pub fn held(&self) -> u64 {
        self.tally.held.load(Ordering::Relaxed)
    }

    /// Records dropped so far because the hold was full.
    pub fn dropped_beyond_hold(&self) -> u64 {
        self.tally.beyond_hold.load(Ordering::Relaxed)
    }

    /// The summary's line: records handed over and inserted, the most
    /// held at once against the bound, and those dropped beyond it.
    pub fn line(&self) -> String {
        let t = &self.tally;
        format!(
            "ClickHouse {}: {} of {} records inserted; at most {} held (--clickhouse-hold {}), \
             {} dropped beyond the hold",
            self.name,
            t.delivered.load(Ordering::Relaxed),
            t.records.load(Ordering::Relaxed),
            t.held_peak.load(Ordering::Relaxed),
            self.hold,
            self.dropped_beyond_hold()
        )
    }
}

/// [`open`], and the output's [`HoldCounts`].
pub fn open_counted(
    out: &std::path::Path,
    opts: &ExportOptions,
    hold: usize,
) -> Result<(Box<dyn Exporter>, HoldCounts)> {
    let name = out.display().to_string();
    let err = |reason: String| Error::Output {
        name: name.clone(),
        reason,
    };
    let Some((hostport, table)) = destination(out) else {
        return Err(err("expected clickhouse+http://HOST:PORT/TABLE".into()));
    };
    let ok = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    let parts: Vec<&str> = table.split('.').collect();
    if parts.len() > 2 || !parts.iter().all(|p| ok(p)) {
        return Err(err(format!(
            "table {table:?}: expected TABLE or DATABASE.TABLE of letters, digits and _"
        )));
    }
    let addr = super::ipfix::transport::resolve(hostport).map_err(|e| err(e.to_string()))?;
    let ex = ClickHouseExporter::new(&name, addr, hostport, table, opts, hold);
    let counts = HoldCounts {
        name: name.clone(),
        hold: ex.hold,
        tally: Arc::clone(&ex.tally),
    };
    Ok((Box::new(ex), counts))
}

impl ClickHouseExporter {
    fn new(
        name: &str,
        addr: SocketAddr,
        host: &str,
        table: &str,
        opts: &ExportOptions,
        hold: usize,
    ) -> Self {
        let buf = Buf::default();
        let json = JsonLinesExporter::new(Box::new(buf.clone()), name, opts);
        // Bounded by the records held (see `ship`), not here.
        let (tx, rx) = unbounded::<Batch>();
        let (done_tx, done) = bounded::<()>(1);
        let tally = Arc::new(Tally::default());
        let head = format!(
            "POST /?query=INSERT%20INTO%20{table}%20FORMAT%20JSONEachRow\
             &input_format_skip_unknown_fields=1 HTTP/1.1\r\nHost: {host}\r\n\
             Content-Type: application/x-ndjson\r\nConnection: close\r\n"
        );
        let t = Arc::clone(&tally);
        let spawned = std::thread::Builder::new()
            .name("clickhouse".into())
            .spawn(move || {
                // When the server was last reached after it could not be.
                let mut back = None;
                for b in rx {
                    post_until_taken(&t, addr, &head, &b, &mut back);
                    t.held.fetch_sub(b.records, Ordering::Relaxed);
                }
                let _ = done_tx.send(());
            });
        if let Err(e) = spawned {
            tally.fail(0, format!("cannot start its thread: {e}"));
        }
        ClickHouseExporter {
            name: name.to_string(),
            hold: hold as u64,
            json,
            buf,
            pending: 0,
            tx: Some(tx),
            done,
            tally,
        }
    }

    /// Hands what is buffered to the posting thread (dropped, and
    /// counted, when the records held would pass the bound).
    fn ship(&mut self) -> Result<()> {
        self.json.flush()?;
        let body = std::mem::take(&mut *self.buf.0.lock().unwrap_or_else(|p| p.into_inner()));
        let records = std::mem::take(&mut self.pending);
        if body.is_empty() {
            return Ok(());
        }
        self.tally.records.fetch_add(records, Ordering::Relaxed);
        let Some(tx) = &self.tx else {
            self.tally.fail(records, "output ended".into());
            return Ok(());
        };
        // Only this thread adds to `held`: the check and the add cannot
        // race with another batch.
        let held = self.tally.held.load(Ordering::Relaxed);
        if held > 0 && held + records > self.hold {
            self.tally.beyond_hold.fetch_add(records, Ordering::Relaxed);
            self.tally.fail(
                records,
                format!(
                    "server away or slow: {held} records held (--clickhouse-hold {})",
                    self.hold
                ),
            );
            return Ok(());
        }
        let now = self.tally.held.fetch_add(records, Ordering::Relaxed) + records;
        self.tally.held_peak.fetch_max(now, Ordering::Relaxed);
        let made = std::time::Instant::now();
        if let Err(e) = tx.send(Batch {
            body,
            records,
            made,
        }) {
            self.tally.held.fetch_sub(records, Ordering::Relaxed);
            self.tally.fail(e.0.records, "no thread".into());
        }
        Ok(())
    }
}

/// Posts `b` until the server takes it, refuses it or leaves it
/// unanswered; while it cannot be reached, again after a back-off (see
/// the module docs).
fn post_until_taken(
    t: &Tally,
    addr: SocketAddr,
    head: &str,
    b: &Batch,
    back: &mut Option<std::time::Instant>,
) {
    let mut wait = RETRY_MIN;
    let mut again = false;
    loop {
        match post(addr, head, &b.body) {
            Ok(()) => {
                t.delivered.fetch_add(b.records, Ordering::Relaxed);
                if again {
                    *back = Some(std::time::Instant::now());
                }
                if again || back.is_some_and(|at| b.made < at) {
                    t.late.fetch_add(b.records, Ordering::Relaxed);
                }
                return;
            }
            Err(Failure::Unreached(e)) => {
                let give_up = *t.give_up.lock().unwrap_or_else(|p| p.into_inner());
                let now = std::time::Instant::now();
                if give_up.is_some_and(|g| now + wait > g) {
                    t.fail(b.records, e);
                    return;
                }
                t.retries.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(wait);
                wait = (wait * 2).min(RETRY_MAX);
                again = true;
            }
            Err(Failure::Other(e)) => {
                t.fail(b.records, e);
                return;
            }
        }
    }
}

/// Why a post failed.
enum Failure {
    /// The batch did not reach the server: nothing was inserted.
    Unreached(String),
    /// The server refused it or did not answer.
    Other(String),
}

/// Posts one batch; the error says why it was not inserted.
fn post(addr: SocketAddr, head: &str, body: &[u8]) -> std::result::Result<(), Failure> {
    let mut s = TcpStream::connect_timeout(&addr, CONNECT)
        .map_err(|e| Failure::Unreached(format!("connect {addr}: {e}")))?;
    let _ = s.set_read_timeout(Some(IO));
    let _ = s.set_write_timeout(Some(IO));
    let mut req = head.as_bytes().to_vec();
    req.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    s.write_all(&req)
        .and_then(|()| s.write_all(body))
        .map_err(|e| Failure::Unreached(format!("send to {addr}: {e}")))?;
    let mut resp = Vec::new();
    let mut chunk = [0u8; 4096];
    // The status line and, on an error, the server's message (the
    // connection closes after the response).
    loop {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                resp.extend_from_slice(&chunk[..n]);
                if resp.len() > 64 * 1024 {
                    break;
                }
            }
            Err(e) if resp.is_empty() => {
                return Err(Failure::Other(format!("no answer from {addr}: {e}")))
            }
            Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&resp);
    let status = text.split_whitespace().nth(1).unwrap_or("");
    if status == "200" {
        return Ok(());
    }
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").trim();
    let body: String = body.chars().take(300).collect();
    Err(Failure::Other(format!(
        "insert refused: {} {body}",
        text.lines().next().unwrap_or("no status line")
    )))
}

impl Exporter for ClickHouseExporter {
    fn kind(&self) -> &'static Kind {
        &fields::FLOWS
    }

    fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        self.json.write_batch(batch)?;
        self.pending += batch.len() as u64;
        if self.json_len() >= BATCH_BYTES {
            self.ship()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.ship()
    }

    fn finish(&mut self) -> Result<()> {
        self.ship()?;
        self.tx = None;
        *self.tally.give_up.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(std::time::Instant::now() + LINGER);
        let _ = self.done.recv_timeout(LINGER);
        let t = &self.tally;
        let records = t.records.load(Ordering::Relaxed);
        // Not delivered: dropped, or still queued or posting after the
        // linger time.
        let lost = records - t.delivered.load(Ordering::Relaxed).min(records);
        let failures = t.failures.load(Ordering::Relaxed);
        if lost == 0 && failures == 0 {
            return Ok(());
        }
        let waiting = lost.saturating_sub(t.dropped.load(Ordering::Relaxed));
        let last = match waiting {
            0 => t.last.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            n => Some(format!(
                "{n} records still waiting for the server after {LINGER:?}"
            )),
        };
        Err(Error::Output {
            name: self.name.clone(),
            reason: format!(
                "{lost} of {records} records not inserted; {failures} failure{} (last: {}); \
                 {} records inserted after the server could be reached again; \
                 at most {} records held",
                if failures == 1 { "" } else { "s" },
                last.unwrap_or_default(),
                t.late.load(Ordering::Relaxed),
                t.held_peak.load(Ordering::Relaxed)
            ),
        })
    }

    fn name(&self) -> &str {
        &self.name
    }
}

impl ClickHouseExporter {
    /// Bytes of JSON formatted and not yet shipped (what the JSON
    /// exporter still holds is not counted: at most one output chunk).
    fn json_len(&self) -> usize {
        self.buf.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests;
