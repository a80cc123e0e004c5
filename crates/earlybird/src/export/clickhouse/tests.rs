//! The shipped DDL, and the HTTP path against small servers of the test's
//! own: one that answers 200 and keeps the bodies, one that refuses with a
//! message, one that never answers (the run goes on; the records are
//! counted as not inserted). The real server is in the CLI's tests
//! (`clickhouse_cli.rs`).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::*;
use crate::export::compliance::sample;
use crate::flow::record::RecordBatch;

fn batch(n: usize) -> RecordBatch {
    let mut b = RecordBatch::with_capacity(n, 4);
    for (r, e) in sample().iter().cycle().take(n) {
        b.push(*r, &e[..e.len().min(4)]);
    }
    b
}

#[test]
fn the_shipped_ddl_is_the_generated_one() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/clickhouse_flows.sql");
    let want = ddl("flows");
    if std::env::var("EARLYBIRD_BLESS").is_ok() {
        std::fs::write(&path, &want).unwrap();
    }
    let got = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        got, want,
        "docs/clickhouse_flows.sql differs (EARLYBIRD_BLESS=1 rewrites it)"
    );
}

/// A server answering every request with `status` and `message`, keeping
/// the bodies.
fn server(status: &'static str, message: &'static str) -> (u16, Arc<Mutex<Vec<String>>>) {
    server_on(TcpListener::bind("127.0.0.1:0").unwrap(), status, message)
}

/// [`server`] on the listener `l`.
fn server_on(
    l: TcpListener,
    status: &'static str,
    message: &'static str,
) -> (u16, Arc<Mutex<Vec<String>>>) {
    let port = l.local_addr().unwrap().port();
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let b = Arc::clone(&bodies);
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut req = Vec::new();
            let mut chunk = [0u8; 65536];
            // Headers, then Content-Length bytes.
            let (head_end, len) = loop {
                let n = s.read(&mut chunk).unwrap();
                req.extend_from_slice(&chunk[..n]);
                let t = String::from_utf8_lossy(&req).to_string();
                if let Some(i) = t.find("\r\n\r\n") {
                    let len = t[..i]
                        .lines()
                        .find_map(|l| l.strip_prefix("Content-Length: "))
                        .unwrap()
                        .parse::<usize>()
                        .unwrap();
                    break (i + 4, len);
                }
            };
            while req.len() < head_end + len {
                let n = s.read(&mut chunk).unwrap();
                req.extend_from_slice(&chunk[..n]);
            }
            b.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&req).to_string());
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n{message}",
                message.len()
            );
        }
    });
    (port, bodies)
}

fn opts() -> ExportOptions {
    ExportOptions {
        early_packets: 4,
        community_id_seed: 5,
        ..Default::default()
    }
}

#[test]
fn batches_are_posted_as_json_lines_inserts() {
    let (port, bodies) = server("200 OK", "");
    let name = format!("clickhouse+http://127.0.0.1:{port}/db1.flows");
    let mut ex = open(Path::new(&name), &opts(), HOLD).unwrap();
    let b = batch(3000);
    ex.write_batch(&b).unwrap();
    ex.flush().unwrap();
    ex.write_batch(&b).unwrap();
    ex.finish().unwrap();
    let bodies = bodies.lock().unwrap();
    assert!(bodies.len() >= 2, "{} posts", bodies.len());
    let mut rows = 0;
    for req in bodies.iter() {
        let (head, body) = req.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("POST /?query=INSERT%20INTO%20db1.flows%20FORMAT%20JSONEachRow&input_format_skip_unknown_fields=1 HTTP/1.1"),
            "{head}"
        );
        for line in body.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let cid = v["community_id"].as_str().map(String::from);
            rows += 1;
            assert!(cid.is_none_or(|c| c.starts_with("1:")), "{line}");
        }
    }
    assert_eq!(rows, 6000);
}

#[test]
fn a_refused_insert_is_reported_with_the_server_message() {
    let (port, _) = server(
        "500 Internal Server Error",
        "Code: 60, e.displayText() = DB::Exception: Table default.nope doesn't exist.",
    );
    let name = format!("clickhouse+http://127.0.0.1:{port}/nope");
    let mut ex = open(Path::new(&name), &opts(), HOLD).unwrap();
    ex.write_batch(&batch(100)).unwrap();
    let err = ex.finish().unwrap_err().to_string();
    assert!(err.contains("100 of 100 records not inserted"), "{err}");
    assert!(err.contains("doesn't exist"), "{err}");
}

#[test]
fn a_server_that_never_answers_never_blocks_the_writer() {
    // Accepts connections (the kernel's backlog) and never reads.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let name = format!("clickhouse+http://127.0.0.1:{port}/flows");
    let mut ex = open(Path::new(&name), &opts(), HOLD).unwrap();
    let b = batch(5000);
    // Far more records than the hold: every call returns, the batches
    // beyond the hold are dropped.
    for _ in 0..(HOLD / 5000 * 2) {
        ex.write_batch(&b).unwrap();
        ex.flush().unwrap();
    }
    let err = ex.finish().unwrap_err().to_string();
    // Nothing was inserted; the hold was reached (the last error names
    // the batches still waiting, not the ones dropped).
    assert!(
        err.contains("200000 of 200000 records not inserted"),
        "{err}"
    );
    assert!(err.contains("at most 100000 records held"), "{err}");
    drop(l);
}

/// Rows of JSON lines in the bodies a server kept.
fn rows_in(bodies: &[String]) -> usize {
    (bodies.iter())
        .map(|r| r.split_once("\r\n\r\n").unwrap().1.lines().count())
        .sum()
}

#[test]
fn a_server_away_then_back_gets_every_batch_held_meanwhile() {
    // A port nothing listens on: connections are refused.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    let name = format!("clickhouse+http://127.0.0.1:{port}/flows");
    let host = format!("127.0.0.1:{port}");
    let mut ex =
        ClickHouseExporter::new(&name, host.parse().unwrap(), &host, "flows", &opts(), HOLD);
    for _ in 0..3 {
        ex.write_batch(&batch(200)).unwrap();
        ex.flush().unwrap();
    }
    // The first post was refused (and is to be tried again).
    let refused = || ex.tally.retries.load(Ordering::Relaxed) > 0;
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while !refused() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(refused());
    // The server comes: the held batch and the queued ones are posted,
    // none twice.
    let (_, bodies) = server_on(
        TcpListener::bind(("127.0.0.1", port)).unwrap(),
        "200 OK",
        "",
    );
    ex.write_batch(&batch(200)).unwrap();
    ex.finish().unwrap();
    let bodies = bodies.lock().unwrap();
    assert_eq!(rows_in(&bodies), 800, "{} posts", bodies.len());
    // The three batches made while it was away waited; the one after it
    // was reached may have too (posted behind them).
    assert!(ex.tally.late.load(Ordering::Relaxed) >= 600);
    assert_eq!(ex.tally.failures.load(Ordering::Relaxed), 0);
}

#[test]
fn names_that_are_not_a_table_are_refused() {
    for bad in [
        "clickhouse+http://127.0.0.1:9/",
        "clickhouse+http://127.0.0.1:9/a;drop",
        "clickhouse+http://127.0.0.1:9/a.b.c",
        "clickhouse+http://127.0.0.1:9",
    ] {
        let err = open(Path::new(bad), &opts(), HOLD)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains(bad), "{err}");
    }
}

/// A server away for more batches than the queue once held (16): within
/// the hold every record waits and is inserted once the server is back;
/// beyond it, whole batches are dropped and counted, and the hold is
/// never passed.
#[test]
fn the_records_held_while_the_server_is_away_are_bounded_by_the_hold() {
    for (hold, kept) in [(10_000, 40 * 100), (1_000, 1_000)] {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let name = format!("clickhouse+http://127.0.0.1:{port}/flows");
        let host = format!("127.0.0.1:{port}");
        let mut ex =
            ClickHouseExporter::new(&name, host.parse().unwrap(), &host, "flows", &opts(), hold);
        // 40 flushes of 100 records while nothing listens.
        for _ in 0..40 {
            ex.write_batch(&batch(100)).unwrap();
            ex.flush().unwrap();
        }
        let held = ex.tally.held.load(Ordering::Relaxed);
        assert_eq!(held, kept as u64, "hold {hold}");
        // The first post was refused (the server comes after).
        let refused = || ex.tally.retries.load(Ordering::Relaxed) > 0;
        let until = std::time::Instant::now() + Duration::from_secs(30);
        while !refused() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(refused(), "hold {hold}");
        let (_, bodies) = server_on(
            TcpListener::bind(("127.0.0.1", port)).unwrap(),
            "200 OK",
            "",
        );
        let end = ex.finish();
        assert_eq!(rows_in(&bodies.lock().unwrap()), kept, "hold {hold}");
        assert!(ex.tally.held_peak.load(Ordering::Relaxed) <= hold as u64);
        // Every record inserted had waited for the server.
        assert_eq!(ex.tally.late.load(Ordering::Relaxed), kept as u64);
        match kept {
            4000 => assert!(end.is_ok(), "{end:?}"),
            _ => {
                let err = end.unwrap_err().to_string();
                assert!(err.contains("3000 of 4000 records not inserted"), "{err}");
                assert!(
                    err.contains("1000 records held (--clickhouse-hold 1000)"),
                    "{err}"
                );
            }
        }
    }
}
