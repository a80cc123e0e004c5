//! `earlybird flows -i` as a user runs it: a real capture replayed (by
//! `earlybird replay`, between the two namespaces of a veth pair) into a live
//! capture with two shards, stopped with SIGINT: exit code 130, and the
//! CSV holds every packet of the capture in flows. Needs root (skipped
//! otherwise, and says so).

#[path = "../../earlybird/tests/common.rs"]
mod lib_common;

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

    let mut cap = Command::new("ip")
        .args(["netns", "exec", &net.ns_a, bin])
        .args(["flows", "--no-model", "-s", "2", "-i", &net.a, "-o"])
        .arg(&live_csv)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(cap.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    assert!(first.contains("capturing on"), "{first}");
    let sent = Command::new("ip")
        .args(["netns", "exec", &net.ns, bin, "replay", "-i", &net.b])
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signals the child process started above.
    unsafe { libc::kill(cap.id() as i32, libc::SIGINT) };
    let status = cap.wait().unwrap();
    let mut rest = String::new();
    for line in err.lines() {
        rest.push_str(&line.unwrap());
        rest.push('\n');
    }
    assert_eq!(status.code(), Some(130), "{rest}");
    assert!(rest.contains("interface: "), "{rest}");
    let want = packets_in(&std::fs::read_to_string(&file_csv).unwrap());
    let got = packets_in(&std::fs::read_to_string(&live_csv).unwrap());
    assert!(want > 400);
    assert_eq!(got, want, "{rest}");
}
