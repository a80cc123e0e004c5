//! `earlybird flows -i IFACE --capture af-xdp` on a veth pair (copy mode,
//! generic XDP): a replayed capture gives the records of `--capture
//! af-packet` (the columns that do not depend on when the packets were
//! sent) and the flows and packets of the file; the XDP program is on the interface while the
//! capture runs and gone after SIGTERM and after SIGKILL (the BPF link
//! dies with the process); an interface with an address is refused unless
//! `--xdp-take-traffic`, and what AF_XDP cannot do names `--capture
//! af-packet`. With two receive queues and two shards, frames spread over
//! the queues by source address (the two directions of a session on
//! different queues, sent by `replay --capture af-xdp --spread sources`)
//! or by host pair give the records of AF_PACKET's two shards. Needs root
//! (skipped otherwise, and says so). Every frame carries the stamp the XDP
//! program took (the kernel's clock, veth having no receive stamp of its
//! own), also frames that came together; the sockets' statistics are live
//! metrics (`earlybird_xdp_*`), never ahead of the summary's line. The
//! kernel sender (`replay --capture xdp-live`) sends the file's frames.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::filter_cli::timeless;
use crate::lib_common;

const BIN: &str = env!("CARGO_BIN_EXE_earlybird");

/// Writes the records of `pcap` read as a file to `csv`.
fn file_records(pcap: &std::path::Path, csv: &std::path::Path) {
    lib_common::output_ok(
        Command::new(BIN)
            .args(["flows", "--no-model", "-q", "-o"])
            .arg(csv)
            .arg(pcap),
    );
}

/// A running `flows -i A ARGS` in the capture namespace, past its first
/// line (which says it captures); killed if the test fails first.
struct Live {
    cap: Killed,
    err: BufReader<std::process::ChildStderr>,
}

impl Live {
    fn start(net: &lib_common::Veth, args: &[&str]) -> Live {
        let mut cap = Killed(
            Command::new("ip")
                .args(["netns", "exec", &net.ns_a, BIN, "flows", "-i", &net.a])
                .args(args)
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut err = BufReader::new(cap.0.stderr.take().unwrap());
        let mut first = String::new();
        err.read_line(&mut first).unwrap();
        assert!(first.contains("capturing on"), "{first}");
        Live { cap, err }
    }

    /// Stops it with SIGINT after half a second (the last frames are
    /// read): what it wrote to stderr after its first line.
    fn stop(mut self) -> String {
        std::thread::sleep(std::time::Duration::from_millis(500));
        // SAFETY: signals the child process started above.
        unsafe { libc::kill(self.cap.0.id() as i32, libc::SIGINT) };
        self.cap.0.wait().unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.err, &mut rest).unwrap();
        rest
    }
}

/// `replay -i B ARGS PCAP` from the peer namespace, which must succeed:
/// its report line.
fn send(net: &lib_common::Veth, args: &[&str], pcap: &std::path::Path) -> String {
    let sent = Command::new("ip")
        .args(["netns", "exec", &net.ns, BIN, "replay", "-i", &net.b])
        .args(args)
        .arg(pcap)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&sent.stderr).into_owned();
    assert!(sent.status.success(), "{said}");
    said
}

/// Flow keys (the first 14 columns) of timeless rows, each once.
fn keys(rows: &[String]) -> Vec<String> {
    let mut k: Vec<String> = rows
        .iter()
        .map(|r| r.split(',').take(14).collect::<Vec<_>>().join(","))
        .collect();
    k.dedup();
    k
}

/// Packets of timeless rows, both ways.
fn packets(rows: &[String]) -> u64 {
    rows.iter()
        .map(|r| {
            let f: Vec<&str> = r.split(',').collect();
            f[14].parse::<u64>().unwrap() + f[15].parse::<u64>().unwrap()
        })
        .sum()
}

/// A timeless row seen from its other end: addresses, ports, MACs and the
/// two directions' counts and sizes swapped.
fn mirrored(row: &str) -> String {
    let mut f: Vec<&str> = row.split(',').collect();
    for (a, b) in [
        (0, 1),
        (2, 3),
        (11, 12),
        (14, 15),
        (16, 17),
        (18, 22),
        (19, 23),
        (20, 24),
        (21, 25),
    ] {
        f.swap(a, b);
    }
    f.join(",")
}

/// Asserts that `got` holds the rows of `want`, each as it is or seen
/// from its other end ([`mirrored`]); how many were mirrored.
fn same_or_mirrored(want: &[String], got: &[String]) -> usize {
    let mut left: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for w in want {
        *left.entry(w.as_str()).or_default() += 1;
    }
    let mut flipped = 0;
    for g in got {
        let m = mirrored(g);
        let hit = if left.get(g.as_str()).is_some_and(|&n| n > 0) {
            g.as_str()
        } else if left.get(m.as_str()).is_some_and(|&n| n > 0) {
            flipped += 1;
            m.as_str()
        } else {
            panic!("{g}: no such flow either way in {want:#?}");
        };
        *left.get_mut(hit).unwrap() -= 1;
    }
    let missing: Vec<&&str> = left
        .iter()
        .filter(|(_, &n)| n > 0)
        .map(|(k, _)| k)
        .collect();
    assert!(missing.is_empty(), "flows missing: {missing:#?}");
    flipped
}

/// Sets the MTU of both ends of `net` (at 1500 veth runs XDP in its
/// driver; above, only multi-buffer programs).
fn mtu(net: &lib_common::Veth, mtu: &str) {
    for (ns, dev) in [(&net.ns_a, &net.a), (&net.ns, &net.b)] {
        let ok = Command::new("ip")
            .args(["-n", ns, "link", "set", dev, "mtu", mtu])
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

#[test]
fn af_xdp_gives_the_records_of_af_packet_and_of_the_file() {
    let Some(net) = lib_common::Veth::create("ebx") else {
        return;
    };
    let pcap = lib_common::testdata().join("pcap/ndpi__iphone.pcap");
    let dir = tempfile::tempdir().unwrap();
    let (file, packet, xdp) = (
        dir.path().join("file.csv"),
        dir.path().join("packet.csv"),
        dir.path().join("xdp.csv"),
    );
    file_records(&pcap, &file);
    for (csv, how) in [(&packet, "af-packet"), (&xdp, "af-xdp")] {
        let path = csv.display().to_string();
        let (code, err) =
            net.capture_a_replay(BIN, &["--no-model", "--capture", how, "-o", &path], &pcap);
        assert_eq!(code, Some(130), "{err}");
        assert!(
            err.contains("interface: 500 packets offered"),
            "{how}: {err}"
        );
        if how == "af-xdp" {
            assert!(err.contains("AF_XDP (copy mode"), "{err}");
        }
    }
    // The two live captures of the same replay: the same records.
    let live = timeless(&packet);
    assert!(live.len() > 40);
    assert_eq!(timeless(&xdp), live);
    // The file: the same flows (a replay closes the capture's gaps, so a
    // flow the file ends on idle time is one flow live) and packets.
    let want = timeless(&file);
    assert_eq!(keys(&live), keys(&want));
    assert_eq!(packets(&live), packets(&want));
}

/// Whether an XDP program is attached to `dev` in namespace `ns`.
fn has_xdp(ns: &str, dev: &str) -> bool {
    let out = Command::new("ip")
        .args(["-n", ns, "link", "show", "dev", dev])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains("prog/xdp")
}

#[test]
fn the_xdp_program_is_gone_after_sigterm_and_after_sigkill() {
    let Some(net) = lib_common::Veth::create("ebk") else {
        return;
    };
    for signal in [libc::SIGTERM, libc::SIGKILL] {
        assert!(!has_xdp(&net.ns_a, &net.a));
        let mut live = Live::start(
            &net,
            &["--no-model", "-o", "/dev/null", "--capture", "af-xdp"],
        );
        assert!(has_xdp(&net.ns_a, &net.a), "signal {signal}");
        // SAFETY: signals the child started above (`ip netns exec` runs
        // earlybird in its own process).
        unsafe { libc::kill(live.cap.0.id() as i32, signal) };
        live.cap.0.wait().unwrap();
        assert!(!has_xdp(&net.ns_a, &net.a), "after signal {signal}");
    }
}

#[test]
fn an_interface_with_addresses_is_refused_unless_told() {
    let Some(net) = lib_common::Veth::create("ebr") else {
        return;
    };
    let ok = Command::new("ip")
        .args([
            "-n",
            &net.ns_a,
            "addr",
            "add",
            "10.213.7.1/24",
            "dev",
            &net.a,
        ])
        .status()
        .unwrap();
    assert!(ok.success());
    let run = |extra: &[&str]| {
        Command::new("ip")
            .args(["netns", "exec", &net.ns_a, BIN])
            .args(["flows", "--no-model", "-i", &net.a, "--capture", "af-xdp"])
            .args(extra)
            .args(["--duration", "0.2", "-o", "/dev/null"])
            .output()
            .unwrap()
    };
    let out = run(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("has addresses") && err.contains("--xdp-take-traffic"),
        "{err}"
    );
    assert!(err.contains("--capture af-packet"), "{err}");
    let out = run(&["--xdp-take-traffic"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("AF_XDP ("), "{err}");
    // Two shards on an interface of one receive queue: one shard reads
    // each queue, and the error says so and what can.
    let out = run(&["--xdp-take-traffic", "-s", "2"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("1 receive queue(s) for 2 shard(s)") && err.contains("--capture af-packet"),
        "{err}"
    );
}

/// Remakes the pair of `net` with two queues each way (MTU 1500: veth
/// runs XDP in its driver above that only with multi-buffer programs).
fn two_queues(net: &lib_common::Veth) {
    let ip = |args: &[&str]| {
        let ok = Command::new("ip").args(args).status().unwrap().success();
        assert!(ok, "ip {args:?}");
    };
    ip(&["-n", &net.ns_a, "link", "del", &net.a]);
    ip(&[
        "-n",
        &net.ns_a,
        "link",
        "add",
        &net.a,
        "numtxqueues",
        "2",
        "numrxqueues",
        "2",
        "type",
        "veth",
        "peer",
        "name",
        &net.b,
        "netns",
        &net.ns,
        "numtxqueues",
        "2",
        "numrxqueues",
        "2",
    ]);
    for (ns, dev) in [(&net.ns_a, &net.a), (&net.ns, &net.b)] {
        ip(&[
            "netns",
            "exec",
            ns,
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{dev}.disable_ipv6=1"),
        ]);
        ip(&["-n", ns, "link", "set", dev, "mtu", "1500", "up"]);
    }
}

#[test]
fn two_shards_on_two_queues_keep_flows_whole() {
    let Some(net) = lib_common::Veth::create("ebq") else {
        return;
    };
    two_queues(&net);
    let pcap = lib_common::testdata().join("pcap/ndpi__iphone.pcap");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file.csv");
    file_records(&pcap, &file);
    let mut got = Vec::new();
    for (how, spread) in [
        ("af-packet", "sources"),
        ("af-xdp", "sources"),
        ("af-xdp", "hosts"),
    ] {
        let csv = dir.path().join(format!("{how}-{spread}.csv"));
        let path = csv.display().to_string();
        let live = Live::start(
            &net,
            &["--no-model", "-s", "2", "--capture", how, "-o", &path],
        );
        // Paced, so that a frame handed between shards is run before the
        // next frame of its session comes.
        let said = send(
            &net,
            &[
                "--capture",
                "af-xdp",
                "--queues",
                "2",
                "--spread",
                spread,
                "--pps",
                "1000",
            ],
            &pcap,
        );
        assert!(said.contains("500 packets"), "{said}");
        let rest = live.stop();
        assert!(
            rest.contains("interface: 500 packets offered by the kernel, 0 dropped"),
            "{how} {spread}: {rest}"
        );
        if how == "af-xdp" {
            // Spread by source, frames crossed between the shards; by host
            // pair, none did.
            let line = rest
                .lines()
                .find(|l| l.starts_with("AF_XDP sockets:"))
                .unwrap_or_default();
            let handed: u64 = line
                .split("; ")
                .nth(1)
                .and_then(|p| p.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            // Every frame handed over was run before the end (the line is
            // printed when a count is not 0).
            assert!(
                line.is_empty() || line.contains(" 0 still in the exchange when the run stopped"),
                "{rest}"
            );
            if spread == "sources" {
                assert!(handed > 50, "{rest}");
            } else if rest.contains("driver XDP") {
                // (Generic XDP on veth does not know the receive queue:
                // every frame reads as queue 0's.)
                assert_eq!(handed, 0, "{rest}");
            }
        }
        got.push(timeless(&csv));
    }
    assert!(got[0].len() > 40);
    // Spread by source, the two directions of a session reach different
    // shards, and a frame handed over runs a take after the frames its
    // owner's socket received at the same time (xdp_mesh's contract): on
    // a busy machine a reply can run before the packet it answers, and
    // the flow is reported from its far end. It is whole all the same:
    // AF_PACKET's row, or that row seen from the other end.
    let flipped = same_or_mirrored(&got[0], &got[1]);
    eprintln!("af-xdp spread by source: {flipped} flows reported from their far end");
    assert_eq!(got[2], got[0], "af-xdp, spread by host pair");
    // The file: the same flows (by key) as the live captures.
    assert_eq!(keys(&got[0]), keys(&timeless(&file)));
}

/// A replay over two transmit queues, the two directions of each session
/// on different queues and sent as fast as it goes (what a sender behind
/// its pace does), leaves in the file's order: one AF_PACKET socket sees
/// every flow in the file's orientation (its first packet first). Sent
/// queue by queue, a reply queued on queue 0 left before the packet it
/// answers on queue 1, and the flow was reported from its far end.
#[test]
fn a_replay_over_two_queues_keeps_the_files_order() {
    let Some(net) = lib_common::Veth::create("ebo") else {
        return;
    };
    two_queues(&net);
    let pcap = lib_common::testdata().join("pcap/ndpi__iphone.pcap");
    let dir = tempfile::tempdir().unwrap();
    let (file, live) = (dir.path().join("file.csv"), dir.path().join("live.csv"));
    file_records(&pcap, &file);
    let path = live.display().to_string();
    let cap = Live::start(&net, &["--no-model", "--capture", "af-packet", "-o", &path]);
    let said = send(
        &net,
        &[
            "--capture",
            "af-xdp",
            "--queues",
            "2",
            "--spread",
            "sources",
        ],
        &pcap,
    );
    assert!(said.contains("500 packets"), "{said}");
    let rest = cap.stop();
    assert!(
        rest.contains("interface: 500 packets offered by the kernel, 0 dropped"),
        "{rest}"
    );
    // Keys in their orientation (addresses and ports as the first packet
    // had them) and the packets each way.
    let keyed = |csv: &std::path::Path| {
        let mut k: Vec<String> = timeless(csv)
            .iter()
            .map(|r| {
                let f: Vec<&str> = r.split(',').collect();
                format!("{} {} {}", f[..14].join(","), f[14], f[15])
            })
            .collect();
        k.dedup();
        k
    };
    let (got, want) = (keyed(&live), keyed(&file));
    assert!(got.len() > 40);
    // (The file's flows that idle time ends are one flow live: compare the
    // TCP flows, which the file holds whole.)
    let tcp = |v: &[String]| -> Vec<String> {
        v.iter()
            .filter(|r| r.split(',').nth(4) == Some("6"))
            .cloned()
            .collect()
    };
    assert_eq!(tcp(&got), tcp(&want));
}

/// `pcap` (classic pcap, microsecond stamps) with packet k stamped
/// `spacing_us` × k after the first packet.
fn retimed(pcap: &std::path::Path, spacing_us: u64, out: &std::path::Path) {
    let b = std::fs::read(pcap).unwrap();
    assert_eq!(
        &b[..4],
        &[0xd4, 0xc3, 0xb2, 0xa1],
        "a little-endian µs pcap"
    );
    let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let mut w = b[..24].to_vec();
    let start = u64::from(u32_at(24)) * 1_000_000 + u64::from(u32_at(28));
    let (mut at, mut k) = (24, 0u64);
    while at + 16 <= b.len() {
        let caplen = u32_at(at + 8) as usize;
        let t = start + k * spacing_us;
        w.extend_from_slice(&((t / 1_000_000) as u32).to_le_bytes());
        w.extend_from_slice(&((t % 1_000_000) as u32).to_le_bytes());
        w.extend_from_slice(&b[at + 8..at + 16 + caplen]);
        at += 16 + caplen;
        k += 1;
    }
    std::fs::write(out, w).unwrap();
}

/// Flow key (the first 14 columns) → (duration_ns, fwd_packets,
/// fwd_iat_min) of a flows CSV.
fn timings(csv: &std::path::Path) -> std::collections::BTreeMap<String, (u64, u64, Option<f64>)> {
    let text = std::fs::read_to_string(csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (dur, fwd, iat) = (col("duration_ns"), col("fwd_packets"), col("fwd_iat_min"));
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[..14].join(","),
                (
                    f[dur].parse().unwrap(),
                    f[fwd].parse().unwrap(),
                    f[iat].parse().ok(),
                ),
            )
        })
        .collect()
}

#[test]
fn af_xdp_stamps_every_frame_in_the_kernel() {
    let Some(net) = lib_common::Veth::create("ebt") else {
        return;
    };
    // MTU 1500: veth runs the program in its driver, bound to the device,
    // where it asks the driver for its receive stamp (veth has none: 0).
    mtu(&net, "1500");
    let pcap = lib_common::testdata().join("pcap/ndpi__iphone.pcap");
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("xdp.csv");
    let path = csv.display().to_string();

    // At full speed the frames of a take come together: each still has
    // the kernel's stamp of its own.
    let (code, err) = net.capture_a_replay(
        BIN,
        &["--no-model", "--capture", "af-xdp", "-o", &path],
        &pcap,
    );
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("driver XDP"), "{err}");
    assert!(
        err.contains("timestamps: software 500 packets (AF_XDP")
            && err.contains("receive stamp (bpf_xdp_metadata_rx_timestamp)"),
        "{err}"
    );
    let mut pairs = 0;
    for (key, (_, fwd, iat)) in timings(&csv) {
        if fwd >= 2 {
            pairs += 1;
            assert!(iat.unwrap() > 0.0, "{key}: two frames with one stamp");
        }
    }
    assert!(pairs > 20);

    // Paced at 5,000 packets a second (the file's packets 200 µs apart):
    // every frame is stamped when it arrived, so each stamp lies between
    // the clock read before the sender started and the clock read after it
    // ended, and the flows begin and end in the file's order, each at a
    // time of its own. (No bound on the gaps: a busy machine may hold the
    // sender back for any time, so durations are not compared.)
    let paced = dir.path().join("paced.pcap");
    retimed(&pcap, 200, &paced);
    let file_csv = dir.path().join("file.csv");
    file_records(&paced, &file_csv);
    let cap = Live::start(&net, &["--no-model", "--capture", "af-xdp", "-o", &path]);
    let now_ns = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    };
    let before = now_ns();
    send(&net, &["--pps", "5000"], &pcap);
    let after = now_ns();
    let rest = cap.stop();
    assert!(rest.contains("timestamps: software 500 packets"), "{rest}");
    let (live, file) = (spans(&csv), spans(&file_csv));
    assert_eq!(
        live.keys().collect::<Vec<_>>(),
        file.keys().collect::<Vec<_>>()
    );
    for (key, &(a, b)) in &live {
        assert!(
            before <= a && a <= b && b <= after,
            "{key}: stamps {a}..{b} outside the sending {before}..{after}"
        );
    }
    // Flows in the order of their first (last) packet, ties apart.
    let order = |m: &std::collections::BTreeMap<String, (u64, u64)>, last: bool| {
        let mut v: Vec<(u64, &String)> = m
            .iter()
            .map(|(k, &(a, b))| (if last { b } else { a }, k))
            .collect();
        v.sort();
        let ties = v.windows(2).filter(|w| w[0].0 == w[1].0).count();
        (
            v.into_iter().map(|(_, k)| k.clone()).collect::<Vec<_>>(),
            ties,
        )
    };
    for last in [false, true] {
        let (got, ties) = order(&live, last);
        assert_eq!(ties, 0, "flows with one stamp (last packet: {last})");
        assert_eq!(got, order(&file, last).0, "last packet: {last}");
    }
}

/// Flow key (the first 14 columns) → (first_ts, last_ts) of a flows CSV.
fn spans(csv: &std::path::Path) -> std::collections::BTreeMap<String, (u64, u64)> {
    let text = std::fs::read_to_string(csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (first, last) = (col("first_ts"), col("last_ts"));
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[..14].join(","),
                (f[first].parse().unwrap(), f[last].parse().unwrap()),
            )
        })
        .collect()
}

/// A child process killed (and waited for) if the test fails before it
/// ends it.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[test]
fn the_xdp_sockets_statistics_are_live_metrics() {
    use crate::grafana_cli::{until_metrics, value};
    let Some(net) = lib_common::Veth::create("ebm") else {
        return;
    };
    // The endpoint listens on the namespace's loopback (down in a new
    // namespace: every scrape failed).
    net.capture_loopback_up();
    let port = 9464;
    // A ring of 512 frames: stopped, the probe lets it fill.
    let cap = Command::new("ip")
        .args(["netns", "exec", &net.ns_a, BIN])
        .args(["flows", "--no-model", "-o", "/dev/null", "-i", &net.a])
        .args(["--capture", "af-xdp", "--ring-mib", "1"])
        .args(["--metrics-listen", &port.to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut cap = Killed(cap);
    // (The endpoint's address comes first, then the capture.)
    let mut said = String::new();
    {
        let mut err = BufReader::new(cap.0.stderr.as_mut().unwrap());
        while !said.contains("capturing on") {
            if err.read_line(&mut said).unwrap() == 0 {
                break;
            }
        }
    }
    assert!(said.contains("capturing on"), "{said}");
    let names = [
        "earlybird_xdp_rx_dropped_total",
        "earlybird_xdp_rx_ring_full_total",
        "earlybird_xdp_fill_ring_empty_total",
        "earlybird_xdp_invalid_descs_total",
        "earlybird_xdp_exchange_handed_packets_total",
        "earlybird_xdp_exchange_dropped_packets_total",
        "earlybird_xdp_exchange_waiting_packets",
    ];
    let now = until_metrics(&net, port, |m| value(m, names[0]).is_some());
    for n in names {
        assert_eq!(value(&now, n), Some(0.0), "{n}: {now}");
    }
    // SAFETY: signals the child process started above.
    unsafe { libc::kill(cap.0.id() as i32, libc::SIGSTOP) };
    let sent = Command::new("ip")
        .args(["netns", "exec", &net.ns, BIN, "replay", "--loops", "10"])
        .args(["-i", &net.b])
        .arg(lib_common::testdata().join("pcap/ndpi__iphone.pcap"))
        .output();
    // SAFETY: as above.
    unsafe { libc::kill(cap.0.id() as i32, libc::SIGCONT) };
    assert!(sent.unwrap().status.success());
    // The frames lost: rx_dropped + rx_ring_full (in copy mode a frame that
    // found the fill ring empty is in rx_dropped and in fill_ring_empty).
    let lost = |m: &str| -> f64 { names[..2].iter().filter_map(|n| value(m, n)).sum() };
    let now = until_metrics(&net, port, |m| lost(m) > 0.0);
    let live = lost(&now);
    assert!(live > 0.0, "{now}");
    // SAFETY: as above.
    unsafe { libc::kill(cap.0.id() as i32, libc::SIGINT) };
    cap.0.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(cap.0.stderr.as_mut().unwrap(), &mut rest).unwrap();
    // The summary's line: the same counters, at the end of the run (the
    // metric is never ahead of it).
    let line = rest
        .lines()
        .find(|l| l.starts_with("AF_XDP sockets:"))
        .unwrap_or_else(|| panic!("{rest}"));
    let number = |name: &str| -> f64 {
        let at = line.find(name).unwrap() + name.len() + 1;
        line[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let end = number("rx_dropped") + number("rx_ring_full");
    assert!(live <= end, "{live} live, {end} at the end: {rest}");
    // Stopped, the probe let the fill ring run empty: on veth (copy mode)
    // each frame that found it so is counted in rx_dropped as well, and the
    // drops of the `interface:` line count it once.
    let fill = number("fill_ring_empty_descs");
    assert!(fill > 0.0 && fill <= number("rx_dropped"), "{rest}");
    let iface = rest
        .lines()
        .find(|l| l.starts_with("interface:"))
        .unwrap_or_else(|| panic!("{rest}"));
    let dropped: f64 = iface
        .split(" dropped")
        .next()
        .and_then(|h| h.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{iface}"));
    assert_eq!(dropped, end, "{rest}");
}

/// The frames veth refused on `net`'s sending end (its peer's ring was
/// full): `tx_queue_*_xdp_xmit_errors` of `ethtool -S`.
fn xmit_errors(net: &lib_common::Veth) -> u64 {
    let out = Command::new("ip")
        .args(["netns", "exec", &net.ns, "ethtool", "-S", &net.b])
        .output()
        .unwrap();
    assert!(out.status.success(), "ethtool -S {}", net.b);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("xdp_xmit_errors:"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

/// `replay --capture xdp-live`: the kernel sends the file's frames (an XDP
/// program run in live-frame mode writes each into a page and redirects it
/// out of the sending end). Into an AF_XDP capture (whose program gives
/// the peer the XDP a redirect needs): paced, every frame arrives and the
/// records have the file's flows and packets; at full speed, over ten
/// laps, every frame the sender counts was read or refused by veth (its
/// peer's ring full: counted by the sending end).
#[test]
fn the_kernel_sender_sends_the_files_frames() {
    let Some(net) = lib_common::Veth::create("ebl") else {
        return;
    };
    mtu(&net, "1500");
    let pcap = lib_common::testdata().join("pcap/ndpi__iphone.pcap");
    let dir = tempfile::tempdir().unwrap();
    let (file, live) = (dir.path().join("file.csv"), dir.path().join("live.csv"));
    file_records(&pcap, &file);
    let path = live.display().to_string();
    let cap = Live::start(&net, &["--no-model", "--capture", "af-xdp", "-o", &path]);
    let said = send(&net, &["--capture", "xdp-live", "--pps", "20000"], &pcap);
    assert!(said.contains("500 packets"), "{said}");
    let rest = cap.stop();
    assert!(
        rest.contains("interface: 500 packets offered by the kernel, 0 dropped"),
        "{rest}"
    );
    let (got, want) = (timeless(&live), timeless(&file));
    assert!(got.len() > 40);
    assert_eq!(keys(&got), keys(&want));
    assert_eq!(packets(&got), packets(&want));

    let refused = xmit_errors(&net);
    let cap = Live::start(
        &net,
        &["--no-model", "--capture", "af-xdp", "-o", "/dev/null"],
    );
    let said = send(&net, &["--capture", "xdp-live", "--loops", "10"], &pcap);
    assert!(said.contains("5000 packets"), "{said}");
    let rest = cap.stop();
    let offered: u64 = rest
        .lines()
        .find_map(|l| l.strip_prefix("interface: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{rest}"));
    assert_eq!(offered + xmit_errors(&net) - refused, 5000, "{rest}");

    // One core sends to one queue: more is refused, naming what works.
    let out = Command::new("ip")
        .args(["netns", "exec", &net.ns, BIN, "replay", "-i", &net.b])
        .args(["--capture", "xdp-live", "--queues", "2"])
        .arg(&pcap)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("xdp-live sends from one core to one queue"),
        "{err}"
    );
}
