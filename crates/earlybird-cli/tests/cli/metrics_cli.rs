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

/// A classic pcap at `path` of UDP packets over Ethernet/IPv4 from
/// 10.0.0.1 to 10.0.0.2:5000, one per `(time in µs, source port)`.
fn udp_capture(path: &std::path::Path, packets: impl IntoIterator<Item = (u64, u16)>) {
    // Header: magic, version 2.4, zone, accuracy, snaplen, Ethernet.
    let mut b = Vec::new();
    for w in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        b.extend_from_slice(&w.to_le_bytes());
    }
    for (us, sport) in packets {
        let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        frame.extend_from_slice(&[0x45, 0, 0, 38, 0, 0, 0x40, 0, 64, 17, 0, 0]);
        frame.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        frame.extend_from_slice(&sport.to_be_bytes());
        frame.extend_from_slice(&[0x13, 0x88, 0, 18, 0, 0]);
        frame.extend_from_slice(&[0x55; 10]);
        let (sec, usec) = (us / 1_000_000, us % 1_000_000);
        for v in [
            sec as u32,
            usec as u32,
            frame.len() as u32,
            frame.len() as u32,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&frame);
    }
    std::fs::write(path, b).unwrap();
}

/// `n` packets ten a second from `start` (Unix seconds), each ten of them
/// a flow of its own (source ports from `port0` on).
fn ten_a_second(start: u64, n: u64, port0: u16) -> impl Iterator<Item = (u64, u16)> {
    (0..n).map(move |i| (start * 1_000_000 + i * 100_000, port0 + (i / 10) as u16))
}

/// Per-second statistics over captures of separate time domains
/// (docs/OPERATIONS.md, "Per-second statistics"): a capture that begins
/// before the one read before it ended is a series of its own, its rows
/// after the other's, their times going back; a capture days later goes
/// on in the same series (the gap skipped). Every packet counts in the
/// second of its timestamp, and the rows are the same at 1, 2 and 3
/// shards (but for the second an idle flow's end is counted in: the
/// table's incremental expiry finds it a little later or earlier
/// depending on the shard).
#[test]
fn stats_rows_of_captures_far_apart_and_overlapping_are_the_same_at_any_shard_count() {
    let bin = env!("CARGO_BIN_EXE_earlybird");
    let dir = tempfile::tempdir().unwrap();
    let t0 = 1_700_000_000;
    // a: 30 s; b: 20 s beginning 10 s into a; c: three days after b.
    let caps = [
        ("a", t0, 300, 1000),
        ("b", t0 + 10, 200, 2000),
        ("c", t0 + 259_200, 50, 3000),
    ];
    for (name, start, n, port0) in caps {
        udp_capture(
            &dir.path().join(format!("{name}.pcap")),
            ten_a_second(start, n, port0),
        );
    }
    let rows = |shards: &str| -> Vec<[u64; 5]> {
        let out = Command::new(bin)
            .args(["flows", "-q", "-f", "null", "-s", shards])
            .args(["--stats-out", "-"])
            .arg(dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let text = String::from_utf8(out.stdout).unwrap();
        let mut lines = text.lines();
        let head: Vec<&str> = lines.next().unwrap().split(',').collect();
        let col = |name| head.iter().position(|h| *h == name).unwrap();
        let cols = ["time", "packets", "bytes", "flows_new", "flows_ended"].map(col);
        lines
            .map(|l| {
                let v: Vec<u64> = l.split(',').map(|x| x.parse().unwrap()).collect();
                cols.map(|c| v[c])
            })
            .collect()
    };
    let one = rows("1");
    // Ten packets of 52 bytes and one new flow a second.
    let want: Vec<[u64; 4]> = (t0..t0 + 30)
        .chain(t0 + 10..t0 + 30)
        .chain(t0 + 259_200..t0 + 259_205)
        .map(|s| [s, 10, 520, 1])
        .collect();
    let got: Vec<[u64; 4]> = one.iter().map(|r| [r[0], r[1], r[2], r[3]]).collect();
    assert_eq!(got, want);
    // Every flow of a ended in a's series (the last ones where b began).
    let a_ended: u64 = one[..30].iter().map(|r| r[4]).sum();
    assert_eq!(a_ended, 30, "{one:?}");
    for shards in ["2", "3"] {
        let other = rows(shards);
        let got: Vec<[u64; 4]> = other.iter().map(|r| [r[0], r[1], r[2], r[3]]).collect();
        assert_eq!(got, want, "{shards} shards");
        let ended = |rows: &[[u64; 5]]| rows.iter().map(|r| r[4]).sum::<u64>();
        assert_eq!(ended(&other[..30]), 30, "{shards} shards: {other:?}");
        assert_eq!(ended(&other), ended(&one), "{shards} shards");
    }
}

/// Flow records do not change with `--stats-out` (which cuts each batch
/// where a second of packet time ends) when time goes back inside a
/// capture: a packet stamped before the latest one of its batch is timed
/// from the clock at the batch's start, not from the part before it.
#[test]
fn stats_out_changes_no_flow_record_when_time_goes_back_in_a_capture() {
    let bin = env!("CARGO_BIN_EXE_earlybird");
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("back.pcap");
    let t0 = 1_700_000_000_000_000u64;
    let ms = |m: u64| t0 + m * 1000;
    // Flow 1000 at 0 ms; flow 2000 across the next second; flow 1000 again
    // stamped 500 ms (before the 1900 ms read just before it), then at
    // 1700 ms: 1.2 s after its packet of 500 ms, past the 1 s idle timeout.
    let mut packets = vec![(ms(0), 1000)];
    packets.extend((100..2000).step_by(200).map(|m| (ms(m), 2000)));
    packets.extend([(ms(500), 1000), (ms(1700), 1000), (ms(2500), 3000)]);
    udp_capture(&pcap, packets);
    let records = |shards: &str, stats: bool| {
        let mut cmd = Command::new(bin);
        cmd.args([
            "flows",
            "-q",
            "-s",
            shards,
            "--idle-timeout",
            "1",
            "-f",
            "csv",
        ]);
        if stats {
            cmd.args([
                "--stats-out",
                &dir.path().join("s.csv").display().to_string(),
            ]);
        }
        let out = cmd.arg(&pcap).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        lines.sort();
        lines
    };
    let plain = records("1", false);
    // Two records of flow 1000: it went idle between 500 and 1700 ms.
    let flow_1000 = plain
        .iter()
        .filter(|l| l.starts_with("10.0.0.1,10.0.0.2,1000,"));
    assert_eq!(flow_1000.count(), 2, "{plain:#?}");
    for shards in ["1", "2"] {
        assert_eq!(records(shards, true), plain, "{shards} shards, --stats-out");
        assert_eq!(records(shards, false), plain, "{shards} shards");
    }
}
