//! `earlybird voip` and `earlybird calls` on the voip corpus:
//! - the calls land in the SQLite database (read back with Python's own
//!   sqlite3 module, an independent reader) and in the JSON lines file, the
//!   same calls in both, every call of tshark's reference among them;
//! - `calls search` filters by status class, caller and time, `--json`
//!   gives the keys scripts rely on, `calls show` finds a call by Call-ID;
//! - running twice adds to the database (a probe appends);
//! - a corrupt capture among the inputs is reported by name and offset,
//!   and the calls before it are kept;
//! - `voip --rtp-dir` and `calls wav`: the WAV of a generated G.711 call
//!   holds the tones that were sent (1 kHz from the caller, 500 Hz from
//!   the callee), as sox measures them.
//!
//! Needs the corpus (`../shared/corpus`; SKIPPED without it) and sox for
//! the WAV test (a failure under CI when missing).

use crate::common;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use common::eb;

fn voip_dir() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/voip");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("SKIPPED: corpus not found at {}", p.display());
        None
    }
}

fn lines(s: &str) -> Vec<serde_json::Value> {
    s.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn calls_go_to_sqlite_and_back_out() {
    let Some(dir) = voip_dir() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("calls.sqlite");
    let jsonl = tmp.path().join("calls.jsonl");
    let (db_s, jsonl_s) = (db.display().to_string(), jsonl.display().to_string());
    let (code, o, e) = eb(&[
        "voip",
        &dir.display().to_string(),
        "--db",
        &db_s,
        "-o",
        &jsonl_s,
    ]);
    assert_eq!(code, 0, "{o}\n{e}");
    assert!(o.contains("calls"), "{o}");

    let records = lines(&std::fs::read_to_string(&jsonl).unwrap());
    let ids: BTreeSet<String> = records
        .iter()
        .map(|r| r["call_id"].as_str().unwrap().to_string())
        .collect();
    let reference: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("voip_reference.json")).unwrap()).unwrap();
    let mut want = BTreeSet::new();
    for v in reference.as_object().unwrap().values() {
        // The reference also covers captures in other folders.
        if !v["file"].as_str().unwrap().starts_with("voip/") {
            continue;
        }
        for c in v["calls"].as_array().unwrap() {
            want.insert(c["call_id"].as_str().unwrap().to_string());
        }
    }
    let missing: Vec<_> = want.difference(&ids).collect();
    assert!(missing.is_empty(), "missing: {missing:?}");
    assert!(want.len() > 40, "{} reference calls in voip/", want.len());

    // The database, read by another SQLite implementation's client.
    let py = Command::new("python3")
        .arg("-c")
        .arg(
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); \
             print(c.execute('select count(*) from calls').fetchone()[0]); \
             print(c.execute(\"select value from meta where key='schema_version'\").fetchone()[0]); \
             print(c.execute('select count(*) from streams where call is not null').fetchone()[0])",
        )
        .arg(&db)
        .output()
        .expect("python3");
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );
    let out = String::from_utf8_lossy(&py.stdout).to_string();
    let nums: Vec<&str> = out.lines().collect();
    assert_eq!(nums[0].parse::<usize>().unwrap(), records.len(), "{out}");
    assert_eq!(nums[1], "1", "schema version");
    let streams_in_calls: u64 = records.iter().map(|r| r["streams"].as_u64().unwrap()).sum();
    assert_eq!(nums[2].parse::<u64>().unwrap(), streams_in_calls);

    // search: by status class, with the keys scripts rely on.
    let (code, o, e) = eb(&[
        "calls", "search", "--db", &db_s, "--status", "4xx", "--json",
    ]);
    assert_eq!(code, 0, "{e}");
    let found = lines(&o);
    let want_4xx = records
        .iter()
        .filter(|r| {
            r["status"]
                .as_u64()
                .is_some_and(|s| (400..500).contains(&s))
        })
        .count();
    assert_eq!(found.len(), want_4xx);
    assert!(want_4xx > 0);
    for f in &found {
        for k in [
            "call_id", "caller", "callee", "status", "start_ns", "end_ns", "codecs", "streams",
        ] {
            assert!(f.get(k).is_some(), "key {k} missing in {f}");
        }
        let s = f["status"].as_u64().unwrap();
        assert!((400..500).contains(&s), "{f}");
    }
    // by caller and time window.
    let (code, o, _) = eb(&[
        "calls",
        "search",
        "--db",
        &db_s,
        "--from",
        "20008777",
        "--since",
        "2018-05-11T00:00:00Z",
        "--until",
        "1526100000",
        "--json",
    ]);
    assert_eq!(code, 0);
    let found = lines(&o);
    assert!(!found.is_empty());
    assert!(found.iter().all(|f| f["caller"] == "20008777"));
    // show, as a table and as JSON.
    let id = "ddd141f1d982d8989fb73db754a8fbb7@192.168.1.191";
    let (code, o, _) = eb(&["calls", "show", id, "--db", &db_s, "--json"]);
    assert_eq!(code, 0);
    let shown = lines(&o);
    assert!(!shown.is_empty() && shown.iter().all(|c| c["call_id"] == id));
    assert_eq!(shown[0]["end_cause"], "bye-callee");
    let (code, _, e) = eb(&["calls", "show", "no-such-call", "--db", &db_s]);
    assert_eq!(code, 1);
    assert!(e.contains("no call no-such-call"), "{e}");
    // A bad status filter is a usage error.
    let (code, _, e) = eb(&["calls", "search", "--db", &db_s, "--status", "9xx"]);
    assert_eq!(code, 2, "{e}");

    // A second run appends.
    let (code, _, e) = eb(&["voip", &dir.display().to_string(), "--db", &db_s, "-q"]);
    assert_eq!(code, 0, "{e}");
    let (_, o, _) = eb(&["calls", "search", "--db", &db_s, "--json"]);
    assert_eq!(lines(&o).len(), 2 * records.len());
}

#[test]
fn a_corrupt_capture_is_named_and_the_calls_before_it_kept() {
    let Some(dir) = voip_dir() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let good = dir.join("heplify__erspan_sip_ipv4_udp.pcapng");
    let cut = tmp.path().join("cut.pcapng");
    let bytes = std::fs::read(&good).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let out = tmp.path().join("calls.csv");
    let (code, o, e) = eb(&[
        "voip",
        &cut.display().to_string(),
        "-o",
        &out.display().to_string(),
    ]);
    assert_eq!(code, 0, "{o}\n{e}");
    assert!(e.contains("cut.pcapng") && e.contains("offset"), "{e}");
    let csv = std::fs::read_to_string(&out).unwrap();
    assert!(csv.starts_with("call_id,caller,"), "{csv}");
    assert!(
        csv.lines().count() > 1,
        "the calls before the cut are written"
    );
    // An unreadable input is an error naming it.
    let missing = tmp.path().join("missing.pcap");
    let (code, _, e) = eb(&[
        "voip",
        &missing.display().to_string(),
        "-o",
        "/dev/null.csv",
    ]);
    assert_eq!(code, 1, "{e}");
    assert!(e.contains("missing.pcap"), "{e}");
}

fn sox_freq(wav: &std::path::Path, channel: &str) -> f64 {
    let o = Command::new("sox")
        .arg(wav)
        .args(["-n", "remix", channel, "stat"])
        .output()
        .expect("sox");
    let text = String::from_utf8_lossy(&o.stderr).to_string();
    text.lines()
        .find(|l| l.starts_with("Rough   frequency:"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("sox stat: {text}"))
}

#[test]
fn a_call_comes_back_as_audio() {
    if Command::new("sox").arg("--version").output().is_err() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "sox is required under CI"
        );
        eprintln!("SKIPPED: sox not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let p = |n: &str| tmp.path().join(n).display().to_string();
    let (code, _, e) = eb(&[
        "gen",
        "voip",
        "--calls",
        "2",
        "--rate",
        "1",
        "--duration",
        "4",
        "--loss",
        "0.02",
        "-o",
        &p("calls.pcap"),
    ]);
    assert_eq!(code, 0, "{e}");
    let (code, o, e) = eb(&[
        "voip",
        &p("calls.pcap"),
        "--db",
        &p("calls.sqlite"),
        "--rtp-dir",
        &p("rtp"),
    ]);
    assert_eq!(code, 0, "{o}\n{e}");
    assert!(o.contains("rtp kept: "), "{o}");
    let (code, o, e) = eb(&[
        "calls",
        "wav",
        "gen-1-1@earlybird",
        "--db",
        &p("calls.sqlite"),
        "--rtp-dir",
        &p("rtp"),
        "-o",
        &p("call.wav"),
    ]);
    assert_eq!(code, 0, "{o}\n{e}");
    let wav = tmp.path().join("call.wav");
    let (left, right) = (sox_freq(&wav, "1"), sox_freq(&wav, "2"));
    assert!((left - 1000.0).abs() < 50.0, "caller: {left} Hz");
    assert!((right - 500.0).abs() < 25.0, "callee: {right} Hz");
    let (code, _, e) = eb(&[
        "calls",
        "wav",
        "gen-1-0@earlybird",
        "--db",
        &p("calls.sqlite"),
        "--rtp-dir",
        &p("rtp"),
        "-o",
        &p("mono.wav"),
        "--mono",
    ]);
    assert_eq!(code, 0, "{e}");
    let soxi = Command::new("soxi")
        .args(["-c"])
        .arg(p("mono.wav"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&soxi.stdout).trim(), "1");
    // A call whose RTP was not kept is an error naming it.
    let (code, _, e) = eb(&[
        "calls",
        "wav",
        "gen-1-0@earlybird",
        "--db",
        &p("calls.sqlite"),
        "--rtp-dir",
        &p("none"),
        "-o",
        &p("x.wav"),
    ]);
    assert_eq!(code, 1);
    assert!(e.contains("gen-1-0@earlybird"), "{e}");
}
