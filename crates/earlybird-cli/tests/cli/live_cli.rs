//! `earlybird flows -i` as a user runs it: a real capture replayed (by
//! `earlybird replay`, between the two namespaces of a veth pair) into a live
//! capture with two shards, stopped with SIGINT: exit code 130, and the
//! CSV holds every packet of the capture in flows. Needs root (skipped
//! otherwise, and says so).

use crate::lib_common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Sums the fwd_packets and bwd_packets columns of a CSV of records.
fn packets_in(csv: &str) -> u64 {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (f, b) = (col("fwd_packets"), col("bwd_packets"));
    lines
        .map(|l| {
            let v: Vec<&str> = l.split(',').collect();
            v[f].parse::<u64>().unwrap() + v[b].parse::<u64>().unwrap()
        })
        .sum()
}

#[test]
fn sigint_ends_a_live_capture_with_every_flow_written() {
    let Some(net) = lib_common::Veth::create("ebc") else {
        return;
    };
    let bin = env!("CARGO_BIN_EXE_earlybird");
    let pcap = lib_common::testdata().join("pcap/ndpi__iphone.pcap");
    let dir = tempfile::tempdir().unwrap();
    let (file_csv, live_csv) = (dir.path().join("file.csv"), dir.path().join("live.csv"));
    let out = Command::new(bin)
        .args(["flows", "--no-model", "-q", "-o"])
        .arg(&file_csv)
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(out.status.success());

    let live = live_csv.display().to_string();
    let (code, rest) = net.capture_a_replay(bin, &["--no-model", "-s", "2", "-o", &live], &pcap);
    assert_eq!(code, Some(130), "{rest}");
    assert!(rest.contains("interface: "), "{rest}");
    let want = packets_in(&std::fs::read_to_string(&file_csv).unwrap());
    let got = packets_in(&std::fs::read_to_string(&live_csv).unwrap());
    assert!(want > 400);
    assert_eq!(got, want, "{rest}");
}

/// Polls `f` every 50 ms for up to 20 s; true once it holds.
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < until {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

/// Complete lines of a CSV file (0 when it does not exist).
fn lines(p: &std::path::Path) -> usize {
    std::fs::read_to_string(p).map_or(0, |t| t.lines().count())
}

#[test]
fn records_reach_the_file_while_live_and_sighup_reopens_it() {
    let Some(net) = lib_common::Veth::create("ebh") else {
        return;
    };
    let bin = env!("CARGO_BIN_EXE_earlybird");
    let pcap = lib_common::testdata().join("pcap/ndpi__iphone.pcap");
    let dir = tempfile::tempdir().unwrap();
    let (out, rotated) = (dir.path().join("out.csv"), dir.path().join("out.csv.1"));
    let mut cap = Command::new("ip")
        .args(["netns", "exec", &net.ns_a, bin])
        .args(["flows", "--no-model", "--idle-timeout", "1", "-i", &net.a])
        .args(["--duration", "120", "-o"])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(cap.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    assert!(first.contains("capturing on"), "{first}");
    let replay = || net.replay(bin, &pcap);
    replay();
    // Flows idle for a second end, and their records are in the file while
    // the capture goes on (the run lasts two minutes unless stopped).
    assert!(
        eventually(|| lines(&out) > 1),
        "no record in the file while the capture runs"
    );
    assert!(cap.try_wait().unwrap().is_none(), "the capture ended");
    // Log rotation: move the file away, SIGHUP, and new records go to a
    // fresh file with its own header; the old one is complete.
    std::fs::rename(&out, &rotated).unwrap();
    // SAFETY: signals the child process started above.
    unsafe { libc::kill(cap.id() as i32, libc::SIGHUP) };
    assert!(
        eventually(|| out.exists()),
        "SIGHUP did not reopen the file"
    );
    replay();
    assert!(
        eventually(|| lines(&out) > 1),
        "no record in the reopened file"
    );
    // SAFETY: as above.
    unsafe { libc::kill(cap.id() as i32, libc::SIGINT) };
    let status = cap.wait().unwrap();
    let mut rest = String::new();
    for line in err.lines() {
        rest.push_str(&line.unwrap());
        rest.push('\n');
    }
    assert_eq!(status.code(), Some(130), "{rest}");
    let header = |t: &str| t.lines().next().unwrap_or("").to_string();
    let (old, new) = (
        std::fs::read_to_string(&rotated).unwrap(),
        std::fs::read_to_string(&out).unwrap(),
    );
    assert!(header(&old).starts_with("src,dst,") && header(&new) == header(&old));
    assert!(old.ends_with('\n') && new.ends_with('\n'));
    assert!(!new.lines().skip(1).any(|l| l.starts_with("src,")));
    // Every packet of the two replays is in one file or the other.
    let want = 2 * {
        let out = Command::new(bin)
            .args(["flows", "--no-model", "-q", "-f", "csv"])
            .arg(&pcap)
            .output()
            .unwrap();
        packets_in(&String::from_utf8_lossy(&out.stdout))
    };
    let got = packets_in(&old) + packets_in(&new);
    assert_eq!(got, want, "{rest}");
}
