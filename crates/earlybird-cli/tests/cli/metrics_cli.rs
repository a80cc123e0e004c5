//! `--metrics-listen` as an operator uses it: a live capture in a network
//! namespace serves Prometheus metrics that `promtool check metrics`
//! accepts and whose counters move as a real capture is replayed into the
//! interface, and SIGINT leaves its per-second files complete; and
//! `--stats-out` of a capture file. The live part needs root
//! and promtool (Debian package prometheus; skipped otherwise, and says so,
//! except under CI where .ci/run installs them).

use crate::lib_common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `GET /metrics` on `port` of the loopback of the capture namespace.
pub(crate) fn scrape(net: &lib_common::Veth, port: u16) -> Option<String> {
    net.in_capture(|| {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(s, "GET /metrics HTTP/1.0\r\nHost: probe\r\n\r\n").ok()?;
        let mut r = String::new();
        s.read_to_string(&mut r).ok()?;
        let (head, body) = r.split_once("\r\n\r\n")?;
        let status = head.split(' ').nth(1);
        (status == Some("200")).then(|| body.to_string())
    })
}

/// The value of the sample `name` (labels included, as written).
pub(crate) fn value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

/// `promtool check metrics` on `text`: (success, what it said).
fn promtool(promtool: &std::path::Path, text: &str) -> (bool, String) {
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

#[test]
fn a_live_capture_serves_metrics_that_move() {
    let Some(net) = lib_common::Veth::create("ebp") else {
        return;
    };
    let Some(promtool_bin) = lib_common::tool("promtool", "prometheus") else {
        return;
    };
    net.capture_loopback_up();
    let bin = env!("CARGO_BIN_EXE_earlybird");
    let pcap = lib_common::testdata().join("pcap/ndpi__iphone.pcap");
    let dir = tempfile::tempdir().unwrap();
    let port = 19_464;
    let mut cap = Command::new("ip")
        .args(["netns", "exec", &net.ns_a, bin])
        .args(["flows", "--no-model", "--idle-timeout", "1", "-i", &net.a])
        .args(["--duration", "120", "-o"])
        .arg(dir.path().join("out.csv"))
        .args(["--metrics-listen", &port.to_string()])
        .arg("--stats-out")
        .arg(dir.path().join("stats.csv"))
        .arg("--app-stats-out")
        .arg(dir.path().join("apps.jsonl"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(cap.stderr.take().unwrap());
    let mut said = String::new();
    while !said.contains("capturing on") {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            break;
        }
        said.push_str(&line);
    }
    assert!(
        said.contains(&format!("metrics on http://127.0.0.1:{port}/metrics")),
        "{said}"
    );
    let before = scrape(&net, port).expect("the endpoint answers");
    let (ok, why) = promtool(&promtool_bin, &before);
    assert!(ok, "promtool check metrics: {why}\n{before}");
    assert_eq!(value(&before, "earlybird_packets_total"), Some(0.0));

    let sent = Command::new("ip")
        .args(["netns", "exec", &net.ns, bin, "replay", "-i", &net.b])
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(sent.status.success());
    // The capture's 500 packets are counted once the seconds they arrived
    // in are complete (the shards' clocks follow the system clock while the
    // interface is idle).
    let until = Instant::now() + Duration::from_secs(20);
    let mut now = String::new();
    while Instant::now() < until {
        now = scrape(&net, port).unwrap_or_default();
        if value(&now, "earlybird_packets_total") >= Some(500.0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(value(&now, "earlybird_packets_total"), Some(500.0), "{now}");
    assert!(
        value(&now, "earlybird_flows_created_total") > Some(40.0),
        "{now}"
    );
    assert!(
        value(&now, "earlybird_skipped_packets_total{reason=\"not_ip\"}") > Some(0.0),
        "{now}"
    );
    assert!(
        value(&now, "earlybird_packet_time_seconds") > Some(1.7e9),
        "{now}"
    );
    let (ok, why) = promtool(&promtool_bin, &now);
    assert!(ok, "promtool check metrics: {why}\n{now}");

    // SAFETY: signals the child process started above.
    unsafe { libc::kill(cap.id() as i32, libc::SIGINT) };
    assert_eq!(cap.wait().unwrap().code(), Some(130));
    // SIGINT ended every flow and flushed the statistics: every packet is
    // in a second, and every flow ended in one.
    let stats = std::fs::read_to_string(dir.path().join("stats.csv")).unwrap();
    let head: Vec<&str> = stats.lines().next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let sum = |name: &str| -> u64 {
        let c = col(name);
        stats
            .lines()
            .skip(1)
            .map(|l| l.split(',').nth(c).unwrap().parse::<u64>().unwrap())
            .sum()
    };
    assert_eq!(sum("packets"), 500, "{stats}");
    assert_eq!(sum("flows_new"), sum("flows_ended"), "{stats}");
    let apps = std::fs::read_to_string(dir.path().join("apps.jsonl")).unwrap();
    let ended: u64 = apps
        .lines()
        .filter(|l| l.contains("\"of\":\"transport\""))
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["flows_ended"].as_u64().unwrap()
        })
        .sum();
    assert_eq!(ended, sum("flows_ended"), "{apps}");
}

#[test]
fn a_capture_file_gives_one_row_per_second() {
    let bin = env!("CARGO_BIN_EXE_earlybird");
    let pcap = lib_common::testdata().join("pcap/ndpi__iphone.pcap");
    let out = Command::new(bin)
        .args(["flows", "-q", "-f", "null", "--stats-out", "-"])
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(head[..3], ["time", "packets", "bytes"]);
    let rows: Vec<Vec<u64>> = lines
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    assert!(
        rows.windows(2).all(|w| w[1][0] == w[0][0] + 1),
        "contiguous"
    );
    assert_eq!(rows.iter().map(|r| r[1]).sum::<u64>(), 500);
    // Standard output given twice is refused.
    let out = Command::new(bin)
        .args(["flows", "-q", "--stats-out", "-"])
        .arg(&pcap)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

/// `/metrics` scraped in a tight loop (wrk: one thread, four connections,
/// as fast as the endpoint answers) while a capture is replayed into the
/// probe: no packet is dropped, every packet read is in a record, and
/// every scrape is answered; the scrape latency wrk measured is printed
/// (docs/OPERATIONS.md, "What survives what"). Needs root and wrk
/// (Debian's; `.ci/run` installs it).
#[test]
fn metrics_scraped_in_a_tight_loop_cause_no_drop() {
    use crate::faults_cli::{bin, figure, packets_in, replay_paced, Capture};
    let Some(net) = lib_common::Veth::create("ebw") else {
        return;
    };
    let have = Command::new("wrk")
        .arg("-v")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !have {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "wrk is not installed (.ci/run installs it)"
        );
        eprintln!("SKIPPED: wrk is not installed");
        return;
    }
    net.capture_loopback_up();
    let dir = tempfile::tempdir().unwrap();
    let (out, pcap) = (dir.path().join("out.csv"), dir.path().join("mix.pcap"));
    let made = Command::new(bin())
        .args(["gen", "realistic", "-n", "20000", "-o"])
        .arg(&pcap)
        .status()
        .unwrap();
    assert!(made.success());
    let port = 19_466;
    let cap = Capture::start(
        &net,
        &[
            "--idle-timeout",
            "1",
            "-o",
            out.to_str().unwrap(),
            "--metrics-listen",
            &port.to_string(),
        ],
    );
    let wrk = Command::new("ip")
        .args([
            "netns",
            "exec",
            &net.ns_a,
            "wrk",
            "-t1",
            "-c4",
            "-d8s",
            "--latency",
        ])
        .arg(format!("http://127.0.0.1:{port}/metrics"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    replay_paced(&net, &pcap, 4000);
    let w = wrk.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&w.stdout).into_owned();
    assert!(
        w.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&w.stderr)
    );
    std::thread::sleep(Duration::from_millis(1500));
    let (code, rest) = cap.end(Some(libc::SIGINT));
    assert_eq!(code, Some(130), "{rest}");
    // "  12345 requests in 8.00s, …"
    let requests: u64 = said
        .lines()
        .find_map(|l| l.trim().split_once(" requests in "))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("{said}"));
    let latency: Vec<&str> = said
        .lines()
        .filter(|l| {
            ["50%", "90%", "99%"]
                .iter()
                .any(|p| l.trim().starts_with(p))
        })
        .collect();
    eprintln!("wrk: {requests} scrapes in 8 s; latency {latency:?}");
    assert!(requests > 100, "{said}");
    assert!(
        !said.contains("Non-2xx") && !said.contains("Socket errors"),
        "{said}"
    );
    let read = figure(&rest, "packets:").unwrap_or_else(|| panic!("{rest}"));
    let offered = figure(&rest, "interface:").unwrap_or_else(|| panic!("{rest}"));
    let dropped = rest
        .lines()
        .find_map(|l| l.strip_prefix("interface: "))
        .and_then(|l| l.split(", ").nth(1))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{rest}"));
    assert_eq!(offered, 20_000, "{rest}");
    assert_eq!(dropped, 0, "{rest}");
    assert_eq!(read, offered, "{rest}");
    assert_eq!(packets_in(&out), read, "{rest}");
}
