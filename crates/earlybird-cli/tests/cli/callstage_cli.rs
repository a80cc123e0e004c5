//! `earlybird flows --voip-db/--calls-out/--streams-out`: the call stage
//! fed by the shards tracks the same calls as `earlybird voip`.
//! - on the captures of `../shared/corpus/voip/` (SIP over UDP and TCP,
//!   split, retransmitted and fragmented; RTP, RTCP, DTMF) and on a
//!   generated call-heavy capture, read with 1, 2 and 3 shards: the call
//!   database (`calls search --json`), the call records and the stream
//!   records hold exactly what `earlybird voip` writes from the same
//!   files;
//! - the flow records do not change when calls are tracked too;
//! - the summary names the call stage's figures.
//!
//! The corpus test is SKIPPED without the corpus.

use crate::common;

use std::path::{Path, PathBuf};

use common::eb;

fn corpus_files() -> Option<Vec<String>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/voip");
    if !dir.is_dir() {
        eprintln!("SKIPPED: corpus not found at {}", dir.display());
        return None;
    }
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "pcapng"))
        .map(|p| p.display().to_string())
        .collect();
    files.sort();
    assert!(files.len() > 20, "{files:?}");
    Some(files)
}

/// The lines of a file, sorted.
fn sorted_lines(p: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

/// Every call of database `db`, as `calls search --json` gives them, sorted.
fn search(db: &Path) -> Vec<String> {
    let (code, o, e) = eb(&[
        "calls",
        "search",
        "--db",
        &db.display().to_string(),
        "--json",
    ]);
    assert_eq!(code, 0, "{e}");
    let mut v: Vec<String> = o.lines().map(str::to_string).collect();
    v.sort();
    v
}

/// What `earlybird voip` and `earlybird flows` with a call stage (1, 2 and
/// 3 shards) write from `files`: the same calls and streams.
fn same_as_voip(files: &[String], tmp: &Path) -> usize {
    let p = |n: &str| tmp.join(n);
    let s = |n: &str| p(n).display().to_string();
    let mut args: Vec<&str> = vec!["voip"];
    args.extend(files.iter().map(String::as_str));
    let (db, calls, streams) = (
        s("voip.sqlite"),
        s("voip_calls.jsonl"),
        s("voip_streams.jsonl"),
    );
    args.extend(["--db", &db, "-o", &calls, "--streams-out", &streams, "-q"]);
    let (code, _, e) = eb(&args);
    assert_eq!(code, 0, "{e}");
    let want_db = search(&p("voip.sqlite"));
    let want_calls = sorted_lines(&p("voip_calls.jsonl"));
    let want_streams = sorted_lines(&p("voip_streams.jsonl"));
    assert!(!want_calls.is_empty() && !want_streams.is_empty());
    assert_eq!(want_db.len(), want_calls.len());
    for shards in ["1", "2", "3"] {
        let (db, calls, streams) = (
            s(&format!("flows{shards}.sqlite")),
            s(&format!("flows{shards}_calls.jsonl")),
            s(&format!("flows{shards}_streams.jsonl")),
        );
        let mut args: Vec<&str> = vec!["flows"];
        args.extend(files.iter().map(String::as_str));
        args.extend([
            "--input-order",
            "given",
            "-f",
            "null",
            "--no-model",
            "-s",
            shards,
            "--voip-db",
            &db,
            "--calls-out",
            &calls,
            "--streams-out",
            &streams,
        ]);
        let (code, o, e) = eb(&args);
        assert_eq!(code, 0, "{o}\n{e}");
        assert!(e.contains("to the call tracker"), "{e}");
        assert_eq!(
            search(Path::new(&db)),
            want_db,
            "{shards} shards: calls search differs"
        );
        assert_eq!(
            sorted_lines(Path::new(&calls)),
            want_calls,
            "{shards} shards: call records differ"
        );
        assert_eq!(
            sorted_lines(Path::new(&streams)),
            want_streams,
            "{shards} shards: stream records differ"
        );
    }
    want_calls.len()
}

#[test]
fn flows_tracks_the_calls_of_the_corpus_as_voip_does() {
    let Some(files) = corpus_files() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let calls = same_as_voip(&files, tmp.path());
    assert!(calls > 40, "{calls} calls");
}

/// A copy of the classic pcap `src` (Ethernet, IPv4 without options) in
/// which the first datagram of every RTP or RTCP flow off port 5060 is
/// preceded by a copy of it whose payload is keying (ZRTP on even
/// flows, a DTLS ClientHello record on odd ones): SRTP keyed on the
/// media's own ports. Returns the number of flows so keyed.
fn key_the_media(src: &Path, dst: &Path) -> usize {
    let b = std::fs::read(src).unwrap();
    assert_eq!(b[..4], [0xd4, 0xc3, 0xb2, 0xa1], "little-endian pcap");
    assert_eq!(b[20], 1, "Ethernet");
    let (mut out, mut seen) = (b[..24].to_vec(), std::collections::HashSet::new());
    let mut at = 24;
    while at + 16 <= b.len() {
        let caplen = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        let rec = &b[at..at + 16 + caplen];
        let f = &rec[16..];
        let udp = f.len() > 42 && f[12..14] == [8, 0] && f[14] == 0x45 && f[23] == 17;
        if udp {
            let (sp, dp) = (
                u16::from_be_bytes([f[34], f[35]]),
                u16::from_be_bytes([f[36], f[37]]),
            );
            let mut ends = [(&f[26..30], sp), (&f[30..34], dp)];
            ends.sort();
            let media = f[42] >> 6 == 2 && sp != 5060 && dp != 5060;
            if media && f.len() >= 42 + 13 && seen.insert(format!("{ends:?}")) {
                let mut k = rec.to_vec();
                let p = &mut k[16 + 42..];
                if seen.len() % 2 == 0 {
                    p[..8].copy_from_slice(&[0x10, 0, 0, 1, b'Z', b'R', b'T', b'P']);
                } else {
                    // A record header whose length is the rest of the
                    // datagram.
                    let body = (p.len() - 13) as u16;
                    p[..3].copy_from_slice(&[22, 0xfe, 0xfd]);
                    p[11..13].copy_from_slice(&body.to_be_bytes());
                }
                // The UDP checksum no longer holds: none.
                k[16 + 40..16 + 42].copy_from_slice(&[0, 0]);
                out.extend_from_slice(&k);
            }
        }
        out.extend_from_slice(rec);
        at += 16 + caplen;
    }
    std::fs::write(dst, out).unwrap();
    seen.len()
}

#[test]
fn media_keyed_on_its_own_ports_is_tracked_as_voip_does() {
    let Some(files) = corpus_files() else { return };
    let src = files
        .iter()
        .find(|f| f.ends_with("heplify__rtp_rtcp_sip.pcap"))
        .expect("heplify__rtp_rtcp_sip.pcap in the corpus");
    let tmp = tempfile::tempdir().unwrap();
    let keyed = tmp.path().join("keyed.pcap");
    let flows = key_the_media(Path::new(src), &keyed);
    assert!(flows >= 2, "{flows} media flows keyed");
    // The keying before the media changes none of the streams `voip`
    // writes (its call tap follows the keyed flows; before, a flow whose
    // first datagram was ZRTP or DTLS was dropped from the tap there).
    let streams = |input: &str, name: &str| {
        let out = tmp.path().join(name);
        let o = out.display().to_string();
        let db = tmp
            .path()
            .join(format!("{name}.sqlite"))
            .display()
            .to_string();
        let (code, _, e) = eb(&["voip", input, "--db", &db, "--streams-out", &o, "-q"]);
        assert_eq!(code, 0, "{e}");
        sorted_lines(&out)
    };
    let keyed = keyed.display().to_string();
    let want = streams(src, "plain.jsonl");
    assert!(want.len() >= 2, "{want:?}");
    assert_eq!(streams(&keyed, "keyed.jsonl"), want);
    // The shards' call tap follows the keyed flows: the same calls and
    // streams at 1, 2 and 3 shards.
    let sub = tmp.path().join("flows");
    std::fs::create_dir(&sub).unwrap();
    same_as_voip(&[keyed], &sub);
}

#[test]
fn flows_tracks_generated_calls_as_voip_does_and_its_flows_do_not_change() {
    let tmp = tempfile::tempdir().unwrap();
    let pcap = tmp.path().join("calls.pcap").display().to_string();
    let (code, _, e) = eb(&[
        "gen",
        "voip",
        "--calls",
        "300",
        "--rate",
        "60",
        "--duration",
        "3",
        "--loss",
        "0.02",
        "-o",
        &pcap,
    ]);
    assert_eq!(code, 0, "{e}");
    let calls = same_as_voip(std::slice::from_ref(&pcap), tmp.path());
    assert_eq!(calls, 300);

    // The flow records with and without the call stage.
    for shards in ["1", "2"] {
        let out = |n: &str| tmp.path().join(format!("{n}{shards}.csv"));
        let plain = out("plain").display().to_string();
        let (code, _, e) = eb(&[
            "flows",
            &pcap,
            "--no-model",
            "-s",
            shards,
            "-o",
            &plain,
            "-q",
        ]);
        assert_eq!(code, 0, "{e}");
        let with = out("with").display().to_string();
        let db = tmp.path().join(format!("with{shards}.sqlite"));
        let (code, _, e) = eb(&[
            "flows",
            &pcap,
            "--no-model",
            "-s",
            shards,
            "-o",
            &with,
            "-q",
            "--voip-db",
            &db.display().to_string(),
        ]);
        assert_eq!(code, 0, "{e}");
        let (a, b) = (
            sorted_lines(Path::new(&plain)),
            sorted_lines(Path::new(&with)),
        );
        assert!(a.len() > 600, "{} flow records", a.len());
        assert_eq!(a, b, "{shards} shards: flow records differ");
        if shards == "1" {
            // One shard writes its records in one order.
            assert_eq!(
                std::fs::read(&plain).unwrap(),
                std::fs::read(&with).unwrap()
            );
        }
    }
}

#[test]
fn rtp_dir_without_a_call_output_is_a_usage_error() {
    let (code, _, e) = eb(&["flows", "x.pcap", "--rtp-dir", "/tmp/nowhere"]);
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("--voip-db"), "{e}");
}

/// A small generated capture of `calls` calls in `dir`.
fn gen_calls(dir: &Path, calls: &str, duration: &str) -> String {
    let pcap = dir.join("calls.pcap").display().to_string();
    let (code, _, e) = eb(&[
        "gen",
        "voip",
        "--calls",
        calls,
        "--rate",
        "20",
        "--duration",
        duration,
        "-o",
        &pcap,
    ]);
    assert_eq!(code, 0, "{e}");
    pcap
}

#[test]
fn the_call_stage_takes_its_options_from_a_config_file() {
    let tmp = tempfile::tempdir().unwrap();
    let pcap = gen_calls(tmp.path(), "6", "2");
    let db = tmp.path().join("calls.sqlite");
    let toml = tmp.path().join("probe.toml");
    std::fs::write(
        &toml,
        format!(
            "format = \"null\"\nno-model = true\ncalls-out = {:?}\n[voip]\ndb = {:?}\n",
            tmp.path().join("calls.csv").display().to_string(),
            db.display().to_string()
        ),
    )
    .unwrap();
    let (code, _, e) = eb(&[
        "flows",
        "--config",
        &toml.display().to_string(),
        &pcap,
        "-q",
    ]);
    assert_eq!(code, 0, "{e}");
    assert_eq!(search(&db).len(), 6);
    // The CSV: a header and one line per call.
    assert_eq!(sorted_lines(&tmp.path().join("calls.csv")).len(), 7);
}

#[test]
fn sigterm_writes_the_calls_still_open() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let tmp = tempfile::tempdir().unwrap();
    // Calls of 60 s: none has ended in the first part of the capture.
    let pcap = gen_calls(tmp.path(), "5", "60");
    let bytes = std::fs::read(&pcap).unwrap();
    let db = tmp.path().join("calls.sqlite");
    let mut child = Command::new(env!("CARGO_BIN_EXE_earlybird"))
        .args(["flows", "-", "-f", "null", "--no-model", "-q", "--voip-db"])
        .arg(&db)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // A fifth of the capture; the pipe stays open (a live-like stream).
    let part = bytes.len() / 5;
    stdin.write_all(&bytes[..part]).unwrap();
    stdin.flush().unwrap();
    // Until the run has read what was written (its read bytes, from
    // /proc), then a moment for the shard to run it.
    let pid = child.id().to_string();
    let read = || -> u64 {
        let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
        io.lines()
            .find_map(|l| l.strip_prefix("rchar: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    for _ in 0..600 {
        if read() >= part as u64 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let calls: Vec<serde_json::Value> = search(&db)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(calls.len(), 5, "{calls:?}");
    assert!(calls.iter().all(|c| c["end_cause"] == "open"), "{calls:?}");
}
