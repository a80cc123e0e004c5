//! Faults around a live capture (docs/OPERATIONS.md, "What survives
//! what"): in network namespaces of a veth pair, with real components.
//!
//! - SIGHUP a hundred times a second, the file moved away before every
//!   other one, while a capture is replayed: the files together hold every
//!   packet once (none lost, none doubled), each with one header.
//! - The captured link set down and up again: the capture goes on and
//!   takes the packets sent after it is up; the summary counts the down.
//! - The captured interface deleted: the run ends with every flow
//!   flushed, a message naming the interface and exit code 4.
//! - Both of these with AF_XDP (`--capture af-xdp`) too.
//! - nfdump's nfcapd (IPFIX over UDP, and NetFlow v9) stopped and
//!   started again: the records sent
//!   while it was down are counted as not delivered, and those of a
//!   replay after it came back are decoded, the templates having been
//!   sent again before them (`--ipfix-template-refresh`) and delivered
//!   although the kernel still held the closed port's refusal.
//! - Both cores starved by stress-ng while a capture is replayed as fast
//!   as the link takes it: every packet sent was offered to the socket,
//!   each offered packet was read or counted as dropped by the kernel, and
//!   every packet read is in a record.
//! - SIGKILL while records are written: the CSV and JSON lines files hold
//!   whole lines only, the IPFIX file whole messages but perhaps its last,
//!   and the Parquet output's closed parts (`--parquet-part-rows`) read
//!   whole (the file being written has no footer until it is finished).
//! - A full disk under a flow record file and the SQLite call store: each
//!   reports what it could not write, the outputs elsewhere are whole.
//! - The wall clock stepped an hour forward and back during a live run,
//!   as the probe sees it (libfaketime: the probe's `CLOCK_REALTIME`
//!   alone, not the machine's): its flows, calls, seconds and dump files
//!   are those of the same capture read from a file.
//!
//! Needs root (skipped otherwise, and says so); nfcapd and nfdump,
//! stress-ng, faketime and pyarrow (`.ci/run` installs them).

use crate::lib_common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_earlybird")
}

fn iphone() -> PathBuf {
    lib_common::testdata().join("pcap/ndpi__iphone.pcap")
}

/// The packets of the flows in a CSV of records (0 for a missing file).
pub(crate) fn packets_in(path: &Path) -> u64 {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let Some(f) = header.iter().position(|h| *h == "fwd_packets") else {
        return 0;
    };
    let b = header.iter().position(|h| *h == "bwd_packets").unwrap();
    lines
        .map(|l| {
            let v: Vec<&str> = l.split(',').collect();
            v[f].parse::<u64>().unwrap() + v[b].parse::<u64>().unwrap()
        })
        .sum()
}

/// The packets of `pcap` in flows, from a file run.
fn packets_of(pcap: &Path) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("file.csv");
    let run = Command::new(bin())
        .args(["flows", "--no-model", "-q", "-o"])
        .arg(&out)
        .arg(pcap)
        .status()
        .unwrap();
    assert!(run.success());
    packets_in(&out)
}

/// `earlybird flows -i A ARGS` in the capture namespace, once it says it
/// captures.
pub(crate) struct Capture {
    child: Child,
    err: BufReader<ChildStderr>,
}

impl Capture {
    pub(crate) fn start(net: &lib_common::Veth, args: &[&str]) -> Capture {
        Capture::start_with(net, &[], args)
    }

    /// The same, with these environment variables set for the probe alone.
    pub(crate) fn start_with(
        net: &lib_common::Veth,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Capture {
        let vars: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut child = Command::new("ip")
            .args(["netns", "exec", &net.ns_a, "env"])
            .args(&vars)
            .args([bin(), "flows", "-i", &net.a])
            .args(["--no-model", "--duration", "300"])
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        // "capturing on" (after "metrics on …" with --metrics-listen).
        let mut said = String::new();
        for _ in 0..4 {
            let mut line = String::new();
            err.read_line(&mut line).unwrap();
            said.push_str(&line);
            if line.contains("capturing on") {
                return Capture { child, err };
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("{said}");
    }

    fn signal(&self, sig: i32) {
        // SAFETY: signals the child process this test started.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// Waits for the end (after `sig`, if given): exit code and the rest
    /// of what it wrote to stderr.
    pub(crate) fn end(mut self, sig: Option<i32>) -> (Option<i32>, String) {
        if let Some(s) = sig {
            self.signal(s);
        }
        let code = self.child.wait().unwrap().code();
        let mut rest = String::new();
        self.err.read_to_string(&mut rest).unwrap();
        (code, rest)
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Polls `f` every 50 ms for up to `secs` seconds; true once it holds.
pub(crate) fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

/// `earlybird replay --pps PPS` of `pcap` from the peer namespace.
pub(crate) fn replay_paced(net: &lib_common::Veth, pcap: &Path, pps: u32) {
    let sent = Command::new("ip")
        .args(["netns", "exec", &net.ns, bin(), "replay", "-i", &net.b])
        .args(["--pps", &pps.to_string()])
        .arg(pcap)
        .output()
        .unwrap();
    assert!(sent.status.success(), "{sent:?}");
}

#[test]
fn sighup_a_hundred_times_a_second_loses_and_doubles_no_record() {
    let Some(net) = lib_common::Veth::create("ebfh") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.csv");
    let cap = Capture::start(&net, &["--idle-timeout", "1", "-o", out.to_str().unwrap()]);
    // Every 10 ms a SIGHUP; before every other one the file is moved
    // away (when it exists), as logrotate does, so reopenings and no-op
    // SIGHUPs interleave with records being written.
    let stop = Arc::new(AtomicBool::new(false));
    let pid = cap.child.id() as i32;
    let hups = {
        let (stop, out, dir) = (stop.clone(), out.clone(), dir.path().to_path_buf());
        std::thread::spawn(move || {
            let (mut sent, mut moved) = (0u32, 0u32);
            while !stop.load(Ordering::Relaxed) {
                if sent % 2 == 0 && out.exists() {
                    moved += 1;
                    std::fs::rename(&out, dir.join(format!("out.csv.{moved}"))).unwrap();
                }
                // SAFETY: signals the child process this test started.
                unsafe { libc::kill(pid, libc::SIGHUP) };
                sent += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            (sent, moved)
        })
    };
    // About three seconds of packets, so that flows end (idle, 1 s)
    // while the files turn.
    let pcap = iphone();
    replay_paced(&net, &pcap, 200);
    std::thread::sleep(Duration::from_millis(2500));
    stop.store(true, Ordering::Relaxed);
    let (sent, moved) = hups.join().unwrap();
    let (code, rest) = cap.end(Some(libc::SIGINT));
    assert_eq!(code, Some(130), "{rest}");
    assert!(sent > 200 && moved > 20, "{sent} SIGHUPs, {moved} moves");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut got = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let headers = text.lines().filter(|l| l.starts_with("src,")).count();
        assert_eq!(headers, 1, "{}: {headers} headers", f.display());
        assert!(text.ends_with('\n'), "{}: a cut line", f.display());
        got += packets_in(f);
    }
    assert_eq!(got, packets_of(&pcap), "{} files; {rest}", files.len());
}

#[test]
fn a_link_down_and_up_pauses_the_capture_which_then_goes_on() {
    link_down_and_up("ebfl", &[]);
}

/// The same with `--capture af-xdp`: the XDP socket stays bound while the
/// link is down and takes the frames once it is up.
#[test]
fn an_af_xdp_capture_goes_on_after_its_link_went_down_and_up() {
    link_down_and_up("ebxl", &["--capture", "af-xdp"]);
}

/// The link of the capture (options `capture`) set down, then up, then a
/// replay: every packet of it is in the records, and the summary counts
/// the down.
fn link_down_and_up(tag: &str, capture: &[&str]) {
    let Some(net) = lib_common::Veth::create(tag) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.csv");
    let mut args = vec!["-o", out.to_str().unwrap()];
    args.extend_from_slice(capture);
    let mut cap = Capture::start(&net, &args);
    let set = |state: &str| {
        let ok = Command::new("ip")
            .args(["-n", &net.ns_a, "link", "set", &net.a, state])
            .status()
            .unwrap()
            .success();
        assert!(ok, "ip link set {state}");
    };
    set("down");
    // The capture notices (its socket reports the link down) and waits.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        cap.child.try_wait().unwrap().is_none(),
        "the capture ended when the link went down"
    );
    set("up");
    // veth carries packets once both ends are up again.
    let carrier = || {
        let out = Command::new("ip")
            .args(["-n", &net.ns_a, "link", "show", "dev", &net.a])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.contains("LOWER_UP") && !text.contains("NO-CARRIER")
    };
    assert!(eventually(10, carrier), "no carrier after up");
    let pcap = iphone();
    net.replay(bin(), &pcap);
    std::thread::sleep(Duration::from_millis(500));
    let (code, rest) = cap.end(Some(libc::SIGINT));
    assert_eq!(code, Some(130), "{rest}");
    assert!(
        rest.contains("link down 1 time (capture resumed when up)"),
        "{rest}"
    );
    assert_eq!(packets_in(&out), packets_of(&pcap), "{rest}");
}

#[test]
fn a_deleted_interface_ends_the_run_with_exit_code_4_and_every_flow() {
    deleted_interface("ebfd", &["-s", "2"]);
}

/// The same with `--capture af-xdp`.
#[test]
fn an_af_xdp_capture_whose_interface_is_deleted_ends_with_exit_code_4() {
    deleted_interface("ebxd", &["--capture", "af-xdp"]);
}

/// A replay captured (options `capture`), then the interface deleted: the
/// run ends with every flow, a message naming the interface and exit
/// code 4.
fn deleted_interface(tag: &str, capture: &[&str]) {
    let Some(net) = lib_common::Veth::create(tag) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.csv");
    let mut args = vec!["-o", out.to_str().unwrap()];
    args.extend_from_slice(capture);
    let cap = Capture::start(&net, &args);
    let pcap = iphone();
    net.replay(bin(), &pcap);
    std::thread::sleep(Duration::from_millis(500));
    net.remove();
    let started = Instant::now();
    let mut cap = cap;
    assert!(
        eventually(20, || cap.child.try_wait().unwrap().is_some()),
        "the capture still runs {:?} after its interface was deleted",
        started.elapsed()
    );
    let (code, rest) = cap.end(None);
    assert_eq!(code, Some(4), "{rest}");
    assert!(
        rest.contains(&format!(
            "interface {}: capture stopped: the interface was deleted",
            net.a
        )),
        "{rest}"
    );
    assert_eq!(packets_in(&out), packets_of(&pcap), "{rest}");
}

/// nfcapd on 127.0.0.1:`port` of the capture namespace, writing to `dir`.
fn nfcapd(net: &lib_common::Veth, port: u16, dir: &Path) -> Child {
    std::fs::create_dir_all(dir).unwrap();
    let c = Command::new("ip")
        .args(["netns", "exec", &net.ns_a, "nfcapd", "-b", "127.0.0.1"])
        .args(["-p", &port.to_string(), "-w", dir.to_str().unwrap()])
        .args(["-t", "3600"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let want = format!("0100007F:{port:04X}");
    assert!(
        eventually(10, || net.in_capture(|| std::fs::read_to_string(
            "/proc/thread-self/net/udp"
        )
        .is_ok_and(|t| t.contains(&want)))),
        "nfcapd never listened"
    );
    c
}

/// Ends nfcapd (SIGTERM: it writes its file) and waits for it.
fn stop_nfcapd(mut c: Child) {
    // SAFETY: signals the child process this test started.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    let _ = c.wait();
}

/// The number of flows nfdump reads under `dir`.
fn nfdump_flows(dir: &Path) -> usize {
    let out = Command::new("nfdump")
        .args(["-R", dir.to_str().unwrap(), "-o", "csv", "-q"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with("ts,") && l.split(',').count() > 14)
        .count()
}

#[test]
fn nfcapd_stopped_and_started_again_decodes_what_comes_after() {
    collector_restarted("ebfn", "ipfix+udp", 19_311);
}

/// The same with NetFlow v9 (its templates follow the same refresh).
#[test]
fn nfcapd_of_netflow_v9_stopped_and_started_again_decodes_what_comes_after() {
    collector_restarted("ebf9", "netflow9+udp", 19_312);
}

/// nfcapd taking `scheme` (`ipfix+udp`, `netflow9+udp`) on `port`, stopped
/// and started again during a live run (see the module docs).
fn collector_restarted(tag: &str, scheme: &str, port: u16) {
    let Some(net) = lib_common::Veth::create(tag) else {
        return;
    };
    if !crate::ipfix_cli::have("nfcapd", "-V") || !crate::ipfix_cli::have("nfdump", "-V") {
        return;
    }
    net.capture_loopback_up();
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("nf1"), dir.path().join("nf2"));
    let collector = nfcapd(&net, port, &first);
    let csv = dir.path().join("out.csv");
    let cap = Capture::start(
        &net,
        &[
            "--idle-timeout",
            "1",
            "-o",
            &format!("{scheme}://127.0.0.1:{port}"),
            "-o",
            csv.to_str().unwrap(),
            "--ipfix-template-refresh",
            "1",
        ],
    );
    // The collector's records in the CSV so far: one per flow for IPFIX
    // (biflows); for NetFlow one per direction that sent packets.
    let v9 = scheme.starts_with("netflow9");
    let lines = |p: &Path| {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        let mut l = text.lines();
        let header: Vec<&str> = l.next().unwrap_or("").split(',').collect();
        let bwd = header.iter().position(|h| *h == "bwd_packets");
        l.map(|r| match (v9, bwd) {
            (true, Some(b)) => 1 + usize::from(r.split(',').nth(b) != Some("0")),
            _ => 1,
        })
        .sum::<usize>()
    };
    // 1: the collector up.
    let pcap = iphone();
    net.replay(bin(), &pcap);
    let one = packets_of(&pcap);
    assert!(eventually(20, || packets_in(&csv) == one), "first replay");
    std::thread::sleep(Duration::from_millis(1500));
    let before = lines(&csv);
    stop_nfcapd(collector);
    // 2: the collector down: every record of this replay is sent into a
    // closed port.
    net.replay(bin(), &pcap);
    assert!(
        eventually(20, || packets_in(&csv) == 2 * one),
        "second replay"
    );
    let while_down = lines(&csv) - before;
    std::thread::sleep(Duration::from_millis(1500));
    // 3: a new collector, which has seen no template: the next message
    // comes more than a refresh interval (1 s) after the last templates,
    // so templates go before it.
    let collector = nfcapd(&net, port, &second);
    std::thread::sleep(Duration::from_millis(1200));
    let gen = dir.path().join("gen.pcap");
    let made = Command::new(bin())
        .args(["gen", "realistic", "-n", "3000", "-o"])
        .arg(&gen)
        .status()
        .unwrap();
    assert!(made.success());
    let at = lines(&csv);
    net.replay(bin(), &gen);
    let three = packets_of(&gen);
    assert!(
        eventually(30, || packets_in(&csv) == 2 * one + three),
        "third replay"
    );
    std::thread::sleep(Duration::from_millis(1500));
    let after = lines(&csv) - at;
    let (code, rest) = cap.end(Some(libc::SIGINT));
    stop_nfcapd(collector);
    assert_eq!(code, Some(130), "{rest}");
    assert_eq!(nfdump_flows(&first), before, "the first collector");
    assert_eq!(nfdump_flows(&second), after, "after the restart: {rest}");
    // The records sent while nothing listened are counted (the first
    // send to a closed port is refused only by the ICMP error it causes,
    // which fails the next one: at least all but one message's).
    let said = rest
        .lines()
        .find(|l| l.contains(&format!("{scheme}://127.0.0.1:{port}")))
        .unwrap_or_else(|| panic!("no report of the refused sends: {rest}"));
    assert!(said.contains("ICMP port unreachable"), "{said}");
    // "… N of M records not delivered; …"
    let not_delivered: usize = said
        .split(" records not delivered")
        .next()
        .and_then(|h| h.rsplit(" of ").nth(1))
        .and_then(|h| h.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        not_delivered > 0 && not_delivered <= while_down,
        "{not_delivered} of {while_down} records counted: {said}"
    );
}

/// The first number after `prefix` on the line that starts with it.
pub(crate) fn figure(text: &str, prefix: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(prefix))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.trim_end_matches(',').parse().ok())
}

#[test]
fn the_other_core_starved_by_stress_ng_loses_nothing_silently() {
    let Some(net) = lib_common::Veth::create("ebfs") else {
        return;
    };
    if !crate::ipfix_cli::have("stress-ng", "--version") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (out, pcap) = (dir.path().join("out.csv"), dir.path().join("worst.pcap"));
    let made = Command::new(bin())
        .args(["gen", "worst", "-n", "200000", "-o"])
        .arg(&pcap)
        .status()
        .unwrap();
    assert!(made.success());
    // A small ring, so that a starved capture drops.
    let cap = Capture::start(
        &net,
        &["--ring-mib", "1", "-f", "csv", "-o", out.to_str().unwrap()],
    );
    // Every core busy (a CPU hog per core) while the replay goes as fast
    // as the link takes it.
    let mut stress = Command::new("stress-ng")
        .args([
            "--cpu",
            "0",
            "--cpu-method",
            "matrixprod",
            "--timeout",
            "60s",
            "-q",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let sent = Command::new("ip")
        .args(["netns", "exec", &net.ns, bin(), "replay", "-i", &net.b])
        .arg(&pcap)
        .output()
        .unwrap();
    // SAFETY: signals the child process this test started.
    unsafe { libc::kill(stress.id() as i32, libc::SIGTERM) };
    let _ = stress.wait();
    let said = String::from_utf8_lossy(&sent.stderr).into_owned();
    assert!(sent.status.success(), "{said}");
    std::thread::sleep(Duration::from_millis(500));
    let (code, rest) = cap.end(Some(libc::SIGINT));
    assert_eq!(code, Some(130), "{rest}");
    // "replay IFACE: N packets, …"
    let sent: u64 = said
        .split(": ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{said}"));
    let read = figure(&rest, "packets:").unwrap_or_else(|| panic!("{rest}"));
    let offered = figure(&rest, "interface:").unwrap_or_else(|| panic!("{rest}"));
    let dropped = rest
        .lines()
        .find_map(|l| l.strip_prefix("interface: "))
        .and_then(|l| l.split(", ").nth(1))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{rest}"));
    eprintln!("sent {sent}, offered {offered}, dropped {dropped}, read {read}");
    // Every packet sent reached the socket, and each was either read or
    // counted as dropped by the kernel; every packet read is in a record.
    assert_eq!(offered, sent, "{rest}");
    assert_eq!(read + dropped, offered, "{rest}");
    assert_eq!(packets_in(&out), read, "{rest}");
}

#[test]
fn after_sigkill_every_output_reads_up_to_what_it_wrote() {
    let Some(net) = lib_common::Veth::create("ebfk") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).display().to_string();
    let (csv, jsonl, ipfix) = (p("out.csv"), p("out.jsonl"), p("out.ipfix"));
    let parquet = p("out.parquet");
    let mut cap = Capture::start(
        &net,
        &[
            "--idle-timeout",
            "1",
            "-o",
            &csv,
            "-o",
            &jsonl,
            "-o",
            &ipfix,
            "-o",
            &parquet,
            "--parquet-row-group",
            "4",
            "--parquet-part-rows",
            "4",
        ],
    );
    // Killed while packets still come and records are being written.
    let replay = {
        let (ns, b) = (net.ns.clone(), net.b.clone());
        std::thread::spawn(move || {
            Command::new("ip")
                .args(["netns", "exec", &ns, bin(), "replay", "-i", &b])
                .args(["--pps", "100"])
                .arg(iphone())
                .output()
                .unwrap()
        })
    };
    let lines = |p: &str| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .count()
    };
    assert!(eventually(30, || lines(&csv) > 9), "no records while live");
    cap.signal(libc::SIGKILL);
    let code = cap.child.wait().unwrap();
    assert_eq!(code.code(), None, "killed: {code:?}");
    assert!(replay.join().unwrap().status.success());

    // The lines up to the last line end: a kill inside a write of a chunk
    // may cut it short after a line (Linux ends a write to a file at a
    // page when a fatal signal is pending), never inside one before.
    let whole_lines = |t: String| match t.rfind('\n') {
        Some(end) => t[..=end].to_string(),
        None => String::new(),
    };
    // CSV: whole lines, each with the header's columns.
    let text = whole_lines(std::fs::read_to_string(&csv).unwrap());
    let columns = text.lines().next().unwrap().split(',').count();
    assert!(text
        .lines()
        .all(|l| crate::lib_common::split_csv(l).len() == columns));
    let records = text.lines().count() - 1;
    // JSON lines: each one whole.
    let text = whole_lines(std::fs::read_to_string(&jsonl).unwrap());
    for l in text.lines() {
        serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{e}: {l}"));
    }
    // IPFIX: the whole messages decode (a last one may be cut).
    let bytes = std::fs::read(&ipfix).unwrap();
    let mut whole = 0;
    while bytes.len() >= whole + 16 {
        let len = u16::from_be_bytes([bytes[whole + 2], bytes[whole + 3]]) as usize;
        assert_eq!(
            &bytes[whole..whole + 2],
            &[0, 10],
            "not an IPFIX message at {whole}"
        );
        if whole + len > bytes.len() {
            break;
        }
        whole += len;
    }
    let in_ipfix = crate::ipfix_cli::count_records(&bytes[..whole]);
    // Parquet: the parts closed before the kill read whole (pyarrow); the
    // file being written has no footer.
    let mut parts: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|n| n.ends_with(".parquet") && n.contains("out.0"))
        .collect();
    parts.sort();
    assert!(!parts.is_empty(), "no Parquet part closed");
    let read = Command::new("python3")
        .args([
            "-c",
            "import sys, pyarrow.parquet as pq\n\
             print(sum(pq.read_table(p).num_rows for p in sys.argv[1:]))",
        ])
        .args(&parts)
        .output()
        .unwrap();
    assert!(read.status.success(), "{read:?}");
    let in_parts: usize = String::from_utf8_lossy(&read.stdout)
        .trim()
        .parse()
        .unwrap();
    eprintln!(
        "after SIGKILL: {records} CSV records, {} JSON lines, {in_ipfix} IPFIX records, \
         {in_parts} Parquet rows in {} parts",
        text.lines().count(),
        parts.len()
    );
    assert!(records > 5 && in_ipfix > 0 && in_parts >= 4 * parts.len());
}

/// A full disk (a tmpfs of 256 KiB) under a flow record file and the
/// SQLite call store of a run: each is reported with what it could not
/// write (exit code 3), and the outputs on another disk are complete.
#[test]
fn a_full_disk_under_a_record_file_and_the_call_store_is_counted_and_the_rest_goes_on() {
    let Some((_base, fs)) = crate::dump_cli::TinyFs::mount("256k") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("calls.pcap");
    let made = Command::new(bin())
        .args(["gen", "voip", "--calls", "3000", "--rate", "200"])
        .args(["--duration", "0.2", "-o"])
        .arg(&pcap)
        .status()
        .unwrap();
    assert!(made.success());
    let (tiny_csv, tiny_db) = (fs.0.join("flows.csv"), fs.0.join("calls.sqlite"));
    let (json, calls) = (dir.path().join("flows.jsonl"), dir.path().join("calls.csv"));
    let run = Command::new(bin())
        .args(["flows", "--no-model", "-o"])
        .arg(&tiny_csv)
        .arg("-o")
        .arg(&json)
        .arg("--voip-db")
        .arg(&tiny_db)
        .arg("--calls-out")
        .arg(&calls)
        .arg(&pcap)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(3), "{err}");
    let lines = |p: &Path| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .count()
    };
    // The outputs elsewhere are whole: every flow, every call.
    let flows = lines(&json);
    assert_eq!(lines(&calls), 3001, "{err}");
    // The record file: its lines and the records counted as not written
    // cover every flow.
    let in_file = lines(&tiny_csv).saturating_sub(1);
    let line = (err.lines())
        .find(|l| l.contains("flows.csv") && l.contains("No space left on device"))
        .unwrap_or_else(|| panic!("no report of the full disk: {err}"));
    let lost: usize = line
        .split("at most ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(
        in_file < flows && lost >= flows - in_file && lost <= flows,
        "{line}"
    );
    // The call store: the calls it holds and those counted as not written
    // are all the calls.
    let search = Command::new(bin())
        .args(["calls", "search", "--json", "--db"])
        .arg(&tiny_db)
        .output()
        .unwrap();
    assert!(search.status.success(), "{search:?}");
    let stored = String::from_utf8_lossy(&search.stdout).lines().count();
    let db = (err.lines())
        .find(|l| l.starts_with("call database:"))
        .unwrap_or_else(|| panic!("no call database line: {err}"));
    assert!(db.contains("full"), "{db}");
    assert!(
        db.contains(&format!(
            "{} calls and 0 streams not written",
            3000 - stored
        )),
        "{stored} calls stored: {db}"
    );
}

/// `pcap` (classic, little-endian) with the stamps of packets `from..to`
/// moved by `secs` seconds: what a live capture's kernel stamps look like
/// when the wall clock is stepped at packet `from` and stepped back at
/// packet `to`.
fn stepped(pcap: &Path, out: &Path, from: usize, to: usize, secs: i64) {
    let data = std::fs::read(pcap).unwrap();
    let mut o = data[..24].to_vec();
    let (mut at, mut i) = (24, 0);
    while at + 16 <= data.len() {
        let sec = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
        let incl = u32::from_le_bytes(data[at + 8..at + 12].try_into().unwrap()) as usize;
        let sec = if (from..to).contains(&i) {
            (i64::from(sec) + secs) as u32
        } else {
            sec
        };
        o.extend_from_slice(&sec.to_le_bytes());
        o.extend_from_slice(&data[at + 4..at + 16 + incl]);
        at += 16 + incl;
        i += 1;
    }
    std::fs::write(out, o).unwrap();
}

/// The wall clock stepped forward and back during a live run
/// (docs/OPERATIONS.md, "What survives what"), modelled by the packet
/// stamps a live capture gets (the kernel stamps with the wall clock; a
/// test may not step the shared machine's clock): every packet is in a
/// record and in the per-second statistics either way. Forward by an
/// hour: open flows end idle and the hour's seconds are written, empty.
/// Back by an hour: no second is written twice (the stepped packets count
/// in the latest second), and the flows of the stepped stretch are split
/// (today's behaviour, documented).
#[test]
fn a_wall_clock_stepped_forward_and_back_loses_no_packet() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.pcap");
    let made = Command::new(bin())
        .args(["gen", "realistic", "-n", "30000", "--seed", "3", "-o"])
        .arg(&base)
        .status()
        .unwrap();
    assert!(made.success());
    let run = |pcap: &Path, name: &str| {
        let (csv, stats) = (dir.path().join(name), dir.path().join(format!("s{name}")));
        let out = Command::new(bin())
            .args(["flows", "--no-model", "-q", "-o"])
            .arg(&csv)
            .arg("--stats-out")
            .arg(&stats)
            .arg(pcap)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = std::fs::read_to_string(&stats).unwrap();
        let mut l = text.lines();
        let header: Vec<&str> = l.next().unwrap().split(',').collect();
        let k = header.iter().position(|h| *h == "packets").unwrap();
        let rows: Vec<u64> = l
            .map(|r| r.split(',').nth(k).unwrap().parse().unwrap())
            .collect();
        let flows = std::fs::read_to_string(&csv).unwrap().lines().count() - 1;
        (packets_in(&csv), rows, flows)
    };
    let (packets, seconds, flows) = run(&base, "base.csv");
    assert_eq!(packets, 30_000);
    for (secs, name) in [(3600, "fwd.csv"), (-3600, "back.csv")] {
        let p = dir.path().join(format!("{name}.pcap"));
        stepped(&base, &p, 10_000, 20_000, secs);
        let (packets, rows, split) = run(&p, name);
        assert_eq!(packets, 30_000, "{name}: every packet in a record");
        assert_eq!(
            rows.iter().sum::<u64>(),
            30_000,
            "{name}: every packet in a second"
        );
        if secs > 0 {
            assert!(
                rows.len() >= seconds.len() + 3600,
                "{name}: {} seconds",
                rows.len()
            );
        } else {
            assert_eq!(rows.len(), seconds.len(), "{name}: no second written twice");
        }
        assert!(
            split > flows,
            "{name}: {split} flows, {flows} without the step"
        );
    }
}

/// libfaketime's preload library, where Debian's `faketime` puts it.
fn libfaketime() -> Option<PathBuf> {
    let lib = std::fs::read_dir("/usr/lib")
        .ok()?
        .flatten()
        .map(|d| d.path().join("faketime/libfaketime.so.1"))
        .find(|p| p.is_file());
    if lib.is_none() {
        lib_common::tool("faketime", "faketime")?;
        panic!("faketime is installed but not its libfaketime.so.1 under /usr/lib/*/faketime");
    }
    lib
}

/// The lines of a CSV file less its header (0 for a missing file).
fn rows(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().count().saturating_sub(1)
}

/// The wall clock stepped during a live capture, without touching the
/// machine's clock (other work runs on it): libfaketime, preloaded into
/// the probe alone, makes its `CLOCK_REALTIME` an offset read from a file
/// at every call (`FAKETIME_NO_CACHE`), and the test writes +0, +1 h, +0,
/// -1 h, +0 into it while a capture of calls is replayed. The monotonic
/// clock is left alone (`FAKETIME_DONT_FAKE_MONOTONIC`), as a real step
/// leaves it. The kernel's packet stamps are not faked (the kernel reads
/// the real clock); `a_wall_clock_stepped_forward_and_back_loses_no_packet`
/// steps those. What this shows is that nothing in the probe that reads the
/// clock itself (the live idle check of the shards and of the call stage,
/// the stage's once-a-second hand-over, the dumper's and the statistics'
/// seconds) takes a step for time passing: the flows, the calls, the
/// per-second rows and the dump files are those of the capture read from
/// a file, none split, lost or doubled, and no hour of empty seconds.
#[test]
fn a_wall_clock_stepped_under_a_live_capture_splits_and_loses_nothing() {
    let Some(lib) = libfaketime() else {
        return;
    };
    let Some(net) = lib_common::Veth::create("ebft") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).display().to_string();
    let pcap = dir.path().join("calls.pcap");
    // 3,642 packets over 9.5 s: 6 calls of 6 s, two a second.
    let made = Command::new(bin())
        .args([
            "gen",
            "voip",
            "--calls",
            "6",
            "--rate",
            "2",
            "--duration",
            "6",
        ])
        .args(["--seed", "5", "-o"])
        .arg(&pcap)
        .status()
        .unwrap();
    assert!(made.success());
    let file = Command::new(bin())
        .args(["flows", "--no-model", "-q", "-o", &p("file.csv")])
        .args(["--calls-out", &p("file_calls.csv")])
        .arg(&pcap)
        .status()
        .unwrap();
    assert!(file.success());
    let offset = dir.path().join("offset");
    let set = |spec: &str| {
        let tmp = dir.path().join("offset.new");
        std::fs::write(&tmp, format!("{spec}\n")).unwrap();
        std::fs::rename(&tmp, &offset).unwrap();
    };
    set("+0");
    let dump = dir.path().join("dump");
    std::fs::create_dir(&dump).unwrap();
    let lib = lib.display().to_string();
    let env = [
        ("LD_PRELOAD", lib.as_str()),
        ("FAKETIME_TIMESTAMP_FILE", offset.to_str().unwrap()),
        ("FAKETIME_NO_CACHE", "1"),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
    ];
    let cap = Capture::start_with(
        &net,
        &env,
        &[
            "-o",
            &p("live.csv"),
            "--calls-out",
            &p("live_calls.csv"),
            "--stats-out",
            &p("stats.csv"),
            "--dump-dir",
            dump.to_str().unwrap(),
            "--dump-seconds",
            "1",
        ],
    );
    // The probe's clock as it reads it: faked from here on (the library
    // is loaded; the step below must show in the process's own time).
    let started = Instant::now();
    let stepping = std::thread::scope(|s| {
        let steps = s.spawn(|| {
            for spec in ["+3600", "+0", "-3600", "+0"] {
                std::thread::sleep(Duration::from_millis(1500));
                set(spec);
            }
        });
        replay_paced(&net, &pcap, 400);
        steps.join().unwrap();
        started.elapsed()
    });
    // The idle checks run while the link is quiet, the stepped clock too.
    set("+3600");
    std::thread::sleep(Duration::from_millis(1500));
    set("+0");
    std::thread::sleep(Duration::from_millis(500));
    let (code, rest) = cap.end(Some(libc::SIGINT));
    assert_eq!(code, Some(130), "{rest}");
    let want = packets_of(&pcap);
    assert_eq!(packets_in(&dir.path().join("live.csv")), want, "{rest}");
    assert_eq!(
        rows(&dir.path().join("live.csv")),
        rows(&dir.path().join("file.csv")),
        "flows split or lost by the step: {rest}"
    );
    // The same calls, each answered and ended as in the file (a call the
    // step had timed out would end otherwise).
    let calls = |name: &str| -> Vec<String> {
        let text = std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
        let at = |f: &str| header.iter().position(|h| *h == f).unwrap();
        let (id, status, cause) = (at("call_id"), at("status"), at("end_cause"));
        let mut v: Vec<String> = lines
            .map(|l| {
                let c: Vec<&str> = l.split(',').collect();
                format!("{} {} {}", c[id], c[status], c[cause])
            })
            .collect();
        v.sort();
        v
    };
    let file_calls = calls("file_calls.csv");
    assert_eq!(file_calls.len(), 6);
    assert_eq!(
        calls("live_calls.csv"),
        file_calls,
        "calls split, lost or ended otherwise by the step: {rest}"
    );
    // Per-second rows: every packet in one, and no hour of empty seconds.
    let stats = std::fs::read_to_string(dir.path().join("stats.csv")).unwrap();
    let mut lines = stats.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let k = header.iter().position(|h| *h == "packets").unwrap();
    let seconds: Vec<u64> = lines
        .map(|r| r.split(',').nth(k).unwrap().parse().unwrap())
        .collect();
    assert_eq!(seconds.iter().sum::<u64>(), want, "{rest}");
    let ran = stepping.as_secs() + 10;
    assert!(
        (seconds.len() as u64) <= ran,
        "{} seconds written in a run of about {ran} s",
        seconds.len()
    );
    // Dump files: one per second of packet time at most, every packet in
    // exactly one.
    let files = std::fs::read_dir(&dump).unwrap().count() as u64;
    assert!((1..=ran).contains(&files), "{files} dump files");
    assert_eq!(packets_of(&dump), want, "packets dumped");
}
