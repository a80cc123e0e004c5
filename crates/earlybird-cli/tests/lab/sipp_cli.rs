//! `earlybird voip` against real calls: SIPp (Debian `sip-tester`) makes
//! calls between the two namespaces of a veth pair (uac_pcap scenario: G.711
//! A-law RTP played from SIPp's own capture, an RFC 4733 DTMF digit, BYE
//! from the caller; uas with -rtp_echo, which sends both back). `earlybird
//! voip -i` and the call stage of `earlybird flows -i --calls-out` track
//! them live and are stopped with SIGTERM (exit 130, every call written to
//! SQLite and JSON lines); tcpdump captures the same packets to a file,
//! which `earlybird voip` reads afterwards. Every call is recorded with the
//! right parties, status, end cause, DTMF and four streams without loss,
//! and the live and file records (and the `flows` call stage's) agree
//! within 10 ms.
//!
//! A second run puts `lab/linkem.py` on the path (5 % loss and 20 ± 5 ms of
//! delay each way) and captures on both sides of it, so the packets the
//! link dropped are known exactly: 12 concurrent calls, every one recorded
//! live and from a file with the right parties, status and end cause, its
//! talk time within 10 ms of SIPp's own message log, and per RTP stream
//! and direction the loss earlybird reports equal to the packets missing
//! between the two captures (the echoed direction loses on both ways).
//!
//! Needs root (skipped otherwise, and says so), sipp and tcpdump (a failure
//! under CI when missing).

use crate::lib_common;
use crate::netlab;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn records(path: &std::path::Path) -> BTreeMap<String, serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["call_id"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

/// Kills a child on drop (a failed assertion leaves no SIPp behind).
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn sipp_calls_are_tracked_live_and_from_a_file() {
    let _alone = netlab::alone();
    if !(have("sipp") && have("tcpdump")) {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "sipp (Debian: sip-tester) and tcpdump are required under CI"
        );
        eprintln!("SKIPPED: sipp or tcpdump not installed");
        return;
    }
    let Some(net) = lib_common::Veth::create("ebs") else {
        return;
    };
    let ok = |args: &[&str]| Command::new("ip").args(args).status().unwrap().success();
    assert!(ok(&[
        "-n",
        &net.ns_a,
        "addr",
        "add",
        "10.77.0.1/24",
        "dev",
        &net.a
    ]));
    assert!(ok(&[
        "-n",
        &net.ns,
        "addr",
        "add",
        "10.77.0.2/24",
        "dev",
        &net.b
    ]));

    let bin = env!("CARGO_BIN_EXE_earlybird");
    let dir = tempfile::tempdir().unwrap();
    let pcaps = dir.path().join("pcap");
    std::fs::create_dir(&pcaps).unwrap();
    for f in std::fs::read_dir("/usr/share/sip-tester").unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_some_and(|e| e == "pcap") {
            std::os::unix::fs::symlink(&f, pcaps.join(f.file_name().unwrap())).unwrap();
        }
    }
    let (db, live, cap, file) = (
        dir.path().join("live.sqlite"),
        dir.path().join("live.jsonl"),
        dir.path().join("cap.pcap"),
        dir.path().join("file.jsonl"),
    );

    let mut eb = Command::new("ip")
        .args([
            "netns", "exec", &net.ns_a, bin, "voip", "-i", &net.a, "--db",
        ])
        .arg(&db)
        .arg("-o")
        .arg(&live)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(eb.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    assert!(first.contains("tracking calls on"), "{first}");
    // The same calls through the call stage of a live `flows` run.
    let beside = dir.path().join("flows_calls.jsonl");
    let fl = Command::new("ip")
        .args(["netns", "exec", &net.ns_a, bin, "flows", "-q", "-f", "null"])
        .args(["-i", &net.a, "--calls-out"])
        .arg(&beside)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let dump = Child(
        Command::new("ip")
            .args([
                "netns", "exec", &net.ns_a, "tcpdump", "-i", &net.a, "-s", "0", "-U", "-w",
            ])
            .arg(&cap)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let _uas = Child(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &net.ns,
                "sipp",
                "-sn",
                "uas",
                "-i",
                "10.77.0.2",
            ])
            .args(["-p", "5060", "-mi", "10.77.0.2", "-rtp_echo", "-nostdin"])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(1500));
    let uac = Command::new("timeout")
        .args([
            "60", "ip", "netns", "exec", &net.ns_a, "sipp", "-sn", "uac_pcap",
        ])
        .args([
            "10.77.0.2:5060",
            "-i",
            "10.77.0.1",
            "-p",
            "5061",
            "-mi",
            "10.77.0.1",
        ])
        .args(["-m", "4", "-r", "2", "-l", "4", "-s", "5551234", "-nostdin"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        uac.status.success(),
        "sipp uac: {}",
        String::from_utf8_lossy(&uac.stderr)
    );
    std::thread::sleep(Duration::from_millis(1000));
    // SAFETY: signals the children started above.
    unsafe { libc::kill(eb.id() as i32, libc::SIGTERM) };
    let status = eb.wait().unwrap();
    let mut rest = String::new();
    for line in err.lines() {
        rest.push_str(&line.unwrap());
        rest.push('\n');
    }
    assert_eq!(status.code(), Some(130), "{rest}");
    // SAFETY: as above.
    unsafe { libc::kill(fl.id() as i32, libc::SIGTERM) };
    let fl = fl.wait_with_output().unwrap();
    let fl_err = String::from_utf8_lossy(&fl.stderr);
    assert!(matches!(fl.status.code(), Some(0 | 130)), "{fl_err}");
    // SAFETY: as above.
    unsafe { libc::kill(dump.0.id() as i32, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(500));
    drop(dump);

    lib_common::output_ok(
        Command::new(bin)
            .args(["voip", "-q", "-o"])
            .arg(&file)
            .arg(&cap),
    );
    let (live, file) = (records(&live), records(&file));
    assert_eq!(live.len(), 4, "{live:#?}");
    let beside = records(&beside);
    assert_eq!(
        beside.keys().collect::<Vec<_>>(),
        live.keys().collect::<Vec<_>>(),
        "flows -i --calls-out: {fl_err}"
    );
    for (id, b) in &beside {
        let l = &live[id];
        for k in ["caller", "callee", "status", "end_cause", "dtmf", "streams"] {
            assert_eq!(b[k], l[k], "{id} {k}: flows {b}, voip {l}");
        }
        for k in ["start_ns", "answer_ns", "end_ns"] {
            let (a, v) = (b[k].as_u64().unwrap(), l[k].as_u64().unwrap());
            assert!(a.abs_diff(v) < 10_000_000, "{id} {k}: flows {a}, voip {v}");
        }
    }
    assert_eq!(
        live.keys().collect::<Vec<_>>(),
        file.keys().collect::<Vec<_>>()
    );
    for (id, l) in &live {
        let f = &file[id];
        assert_eq!(l["caller"], "sipp", "{l}");
        assert_eq!(l["callee"], "5551234", "{l}");
        assert_eq!(l["status"], 200, "{l}");
        assert_eq!(l["end_cause"], "bye-caller", "{l}");
        // The digit the caller sent, and its echo from the uas.
        assert_eq!(l["dtmf"], "11", "{l}");
        assert_eq!(l["streams"], 4, "{l}");
        assert!(l["duration_ms"].as_f64().unwrap() > 5000.0, "{l}");
        for k in ["start_ns", "answer_ns", "end_ns"] {
            let (a, b) = (l[k].as_u64().unwrap(), f[k].as_u64().unwrap());
            assert!(a.abs_diff(b) < 10_000_000, "{id} {k}: live {a}, file {b}");
        }
        let (a, b) = (
            l["duration_ms"].as_f64().unwrap(),
            f["duration_ms"].as_f64().unwrap(),
        );
        assert!((a - b).abs() < 10.0, "{id}: duration live {a}, file {b}");
    }
    // The database holds the same calls, streams without loss.
    let (code, o, e) = {
        let o = Command::new(bin)
            .args(["calls", "search", "--json", "--db"])
            .arg(&db)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).to_string(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    assert_eq!(code, Some(0), "{e}");
    let stored: Vec<serde_json::Value> = o
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(stored.len(), 4);
    for c in &stored {
        let keys: Vec<(&str, &str)> = c["dtmf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| (d["sender"].as_str().unwrap(), d["key"].as_str().unwrap()))
            .collect();
        assert_eq!(keys, [("caller", "1"), ("callee", "1")], "{c}");
        let streams = c["streams"].as_array().unwrap();
        let audio: Vec<_> = streams.iter().filter(|s| s["codec"] == "PCMA").collect();
        assert_eq!(audio.len(), 2, "{c}");
        for s in audio {
            assert_eq!(s["lost"], 0, "{s}");
            assert!(s["packets"].as_u64().unwrap() > 200, "{s}");
            assert!(s["mos"].as_f64().unwrap() > 4.0, "{s}");
        }
    }
}

/// JSON lines of a record file.
fn json_lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
}

/// Talk time per Call-ID from SIPp's `-trace_msg` log, in ms: from the
/// first 200 to the INVITE it received to the first BYE it sent (SIPp's
/// own clock, local time; only differences are used).
fn sipp_talk_times(log: &str) -> BTreeMap<String, f64> {
    struct Msg {
        t: f64,
        sent: bool,
        first: String,
        call_id: String,
        cseq: String,
    }
    let mut msgs: Vec<Msg> = Vec::new();
    let mut lines = log.lines().peekable();
    while let Some(l) = lines.next() {
        if !l.starts_with("-----") {
            continue;
        }
        let mut w = l.split_whitespace().skip(1);
        let (Some(date), Some(time)) = (w.next(), w.next()) else {
            continue;
        };
        let d: Vec<i64> = date.split('-').map(|x| x.parse().unwrap()).collect();
        let hms: Vec<f64> = time.split(':').map(|x| x.parse().unwrap()).collect();
        let t = days_from_civil(d[0], d[1], d[2]) as f64 * 86_400.0
            + hms[0] * 3600.0
            + hms[1] * 60.0
            + hms[2];
        let kind = lines.next().unwrap_or("");
        let mut m = Msg {
            t,
            sent: kind.contains("sent"),
            first: String::new(),
            call_id: String::new(),
            cseq: String::new(),
        };
        while let Some(l) = lines.peek() {
            if l.starts_with("-----") {
                break;
            }
            let l = lines.next().unwrap();
            if m.first.is_empty() && !l.trim().is_empty() {
                m.first = l.to_string();
            } else if let Some(v) = l.strip_prefix("Call-ID:") {
                m.call_id = v.trim().to_string();
            } else if let Some(v) = l.strip_prefix("CSeq:") {
                m.cseq = v.trim().to_string();
            }
        }
        msgs.push(m);
    }
    let mut answer: BTreeMap<String, f64> = BTreeMap::new();
    let mut end: BTreeMap<String, f64> = BTreeMap::new();
    for m in &msgs {
        if !m.sent && m.first.starts_with("SIP/2.0 200") && m.cseq.ends_with("INVITE") {
            answer.entry(m.call_id.clone()).or_insert(m.t);
        }
        if m.sent && m.first.starts_with("BYE ") {
            end.entry(m.call_id.clone()).or_insert(m.t);
        }
    }
    answer
        .iter()
        .filter_map(|(id, a)| Some((id.clone(), (end.get(id)? - a) * 1000.0)))
        .collect()
}

/// RTP stream key: (src, sport, dst, dport, ssrc, payload type).
type StreamKey = (std::net::Ipv4Addr, u16, std::net::Ipv4Addr, u16, u32, u8);

/// The RTP packets (version 2, not on the SIP ports) of a capture: their
/// sequence numbers per stream, in capture order.
fn rtp_seqs(pcap: &std::path::Path) -> BTreeMap<StreamKey, Vec<u16>> {
    let mut m: BTreeMap<StreamKey, Vec<u16>> = BTreeMap::new();
    for p in netlab::udp_packets(pcap) {
        let r = &p.payload;
        if [5060, 5061].contains(&p.sport) || [5060, 5061].contains(&p.dport) {
            continue;
        }
        if r.len() < 12 || r[0] >> 6 != 2 {
            continue;
        }
        let ssrc = u32::from_be_bytes([r[8], r[9], r[10], r[11]]);
        m.entry((p.src, p.sport, p.dst, p.dport, ssrc, r[1] & 0x7f))
            .or_default()
            .push(u16::from_be_bytes([r[2], r[3]]));
    }
    m
}

/// A stream record of earlybird matching `k`.
fn stream_of<'a>(recs: &'a [serde_json::Value], k: &StreamKey) -> &'a serde_json::Value {
    recs.iter()
        .find(|s| {
            s["src"] == k.0.to_string()
                && s["sport"] == k.1
                && s["dst"] == k.2.to_string()
                && s["dport"] == k.3
                && s["ssrc"] == k.4
                && s["pt"] == k.5
        })
        .unwrap_or_else(|| panic!("no stream record for {k:?}"))
}

#[test]
fn sipp_calls_over_a_lossy_link_report_the_loss_the_link_made() {
    let _alone = netlab::alone();
    if !netlab::tools(&["sipp", "tcpdump", "python3"]) {
        return;
    }
    const LOSS: f64 = 0.05;
    const CALLS: usize = 12;
    let Some(mut link) = netlab::Link::create(
        "ebsl",
        78,
        netlab::LinkSpec {
            delay_ms: 20.0,
            jitter_ms: 5.0,
            loss: LOSS,
            seed: 19,
        },
    ) else {
        return;
    };
    let bin = env!("CARGO_BIN_EXE_earlybird");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pcaps = d.join("pcap");
    std::fs::create_dir(&pcaps).unwrap();
    for f in std::fs::read_dir("/usr/share/sip-tester").unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_some_and(|e| e == "pcap") {
            std::os::unix::fs::symlink(&f, pcaps.join(f.file_name().unwrap())).unwrap();
        }
    }
    let (cap_c, cap_s) = (d.join("client.pcap"), d.join("server.pcap"));
    let mut dump_c = link.tcpdump(true, &cap_c);
    let mut dump_s = link.tcpdump(false, &cap_s);
    let mut eb = netlab::Proc(
        link.in_c(bin)
            .args(["voip", "-i", &link.tap_c, "-o"])
            .arg(d.join("live.jsonl"))
            .arg("--streams-out")
            .arg(d.join("live_streams.jsonl"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut err = BufReader::new(eb.0.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    assert!(first.contains("tracking calls on"), "{first}");
    let _uas = netlab::Proc(
        link.in_s("sipp")
            .args([
                "-sn", "uas", "-i", &link.ip_s, "-p", "5060", "-mi", &link.ip_s,
            ])
            .args(["-rtp_echo", "-nostdin"])
            .current_dir(d)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(1000));
    let n = CALLS.to_string();
    let uac = link
        .in_c("timeout")
        .args(["60", "sipp", "-sn", "uac_pcap"])
        .arg(format!("{}:5060", link.ip_s))
        .args(["-i", &link.ip_c, "-p", "5061", "-mi", &link.ip_c])
        .args(["-m", &n, "-r", "10", "-l", &n, "-s", "5551234"])
        .args(["-nostdin", "-trace_msg"])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(
        uac.status.success(),
        "sipp uac (every call must succeed; SIP retransmits what the link drops): {}",
        String::from_utf8_lossy(&uac.stdout)
    );
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(eb.signal_wait(libc::SIGTERM), Some(130));
    dump_c.signal_wait(libc::SIGINT);
    dump_s.signal_wait(libc::SIGINT);
    let (c2s, s2c) = link.stop();

    // The truth: what each side's capture holds. The IPv4 frames linkem
    // says it lost at random or could not deliver (a write the TAP
    // refused, as before the far end is up) are exactly the IPv4 packets
    // that went missing between the captures. (Its totals also count ARP
    // and IPv6 neighbour discovery, which the captures' IPv4 counts do
    // not.)
    let (ip_c, ip_s): (std::net::Ipv4Addr, std::net::Ipv4Addr) =
        (link.ip_c.parse().unwrap(), link.ip_s.parse().unwrap());
    let (sent_c, got_s) = (
        netlab::ipv4_from(&cap_c, ip_c),
        netlab::ipv4_from(&cap_s, ip_c),
    );
    let (sent_s, got_c) = (
        netlab::ipv4_from(&cap_s, ip_s),
        netlab::ipv4_from(&cap_c, ip_s),
    );
    assert_eq!(
        sent_c - got_s,
        (c2s.lost4 + c2s.dropped4) as usize,
        "client → server: {c2s:?}"
    );
    assert_eq!(
        sent_s - got_c,
        (s2c.lost4 + s2c.dropped4) as usize,
        "server → client: {s2c:?}"
    );

    // Every call, live and from the file, with its parties and times.
    for side in ["client", "server"] {
        lib_common::output_ok(
            Command::new(bin)
                .args(["voip", "-q", "-o"])
                .arg(d.join(format!("{side}.jsonl")))
                .arg("--streams-out")
                .arg(d.join(format!("{side}_streams.jsonl")))
                .arg(d.join(format!("{side}.pcap"))),
        );
    }
    let live = records(&d.join("live.jsonl"));
    let file = records(&d.join("client.jsonl"));
    let server = records(&d.join("server.jsonl"));
    let log = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .ends_with("_messages.log")
        })
        .expect("SIPp's -trace_msg log");
    let sipp = sipp_talk_times(&std::fs::read_to_string(log).unwrap());
    assert_eq!(sipp.len(), CALLS, "{sipp:?}");
    assert_eq!(
        live.keys().collect::<Vec<_>>(),
        sipp.keys().collect::<Vec<_>>()
    );
    assert_eq!(
        file.keys().collect::<Vec<_>>(),
        sipp.keys().collect::<Vec<_>>()
    );
    assert_eq!(
        server.keys().collect::<Vec<_>>(),
        sipp.keys().collect::<Vec<_>>()
    );
    let mut worst = 0f64;
    for (id, talk) in &sipp {
        for (what, r) in [
            ("live", &live[id]),
            ("file", &file[id]),
            ("server", &server[id]),
        ] {
            assert_eq!(r["caller"], "sipp", "{what} {r}");
            assert_eq!(r["callee"], "5551234", "{what} {r}");
            assert_eq!(r["caller_ip"], link.ip_c, "{what} {r}");
            assert_eq!(r["callee_ip"], link.ip_s, "{what} {r}");
            assert_eq!(r["status"], 200, "{what} {r}");
            assert_eq!(r["end_cause"], "bye-caller", "{what} {r}");
        }
        for r in [&live[id], &file[id]] {
            let dur = r["duration_ms"].as_f64().unwrap();
            assert!(
                (dur - talk).abs() < 10.0,
                "{id}: earlybird {dur} ms, SIPp {talk} ms"
            );
            worst = worst.max((dur - talk).abs());
        }
    }

    // Per RTP stream: the loss earlybird reports is what the link dropped.
    let (truth_c, truth_s) = (rtp_seqs(&cap_c), rtp_seqs(&cap_s));
    let live_st = json_lines(&d.join("live_streams.jsonl"));
    let file_st = json_lines(&d.join("client_streams.jsonl"));
    let server_st = json_lines(&d.join("server_streams.jsonl"));
    // (sent, dropped) per direction, and losses before the first or after
    // the last packet a receiver saw (invisible to any receiver).
    let (mut fwd, mut ret, mut edge) = ((0usize, 0usize), (0usize, 0usize), 0usize);
    let mut audio = 0;
    for (k, sent) in truth_c.iter().filter(|(k, _)| k.0 == ip_c && k.5 == 8) {
        audio += 1;
        let base = sent[0];
        let off = |s: &u16| s.wrapping_sub(base) as u32;
        let sent: std::collections::BTreeSet<u32> = sent.iter().map(off).collect();
        assert_eq!(
            sent.len() as u32,
            sent.last().unwrap() + 1,
            "{k:?} sent in sequence"
        );
        let at_s: std::collections::BTreeSet<u32> = truth_s
            .get(k)
            .map(|v| v.iter().map(off).collect())
            .unwrap_or_default();
        let back = (k.2, k.3, k.0, k.1, k.4, k.5);
        let echoed: std::collections::BTreeSet<u32> = truth_s[&back].iter().map(off).collect();
        let at_c: std::collections::BTreeSet<u32> = truth_c[&back].iter().map(off).collect();
        assert_eq!(echoed, at_s, "{k:?}: the uas echoes every packet it gets");
        let dropped_f: Vec<u32> = sent.difference(&at_s).copied().collect();
        let dropped_r: Vec<u32> = echoed.difference(&at_c).copied().collect();
        fwd = (fwd.0 + sent.len(), fwd.1 + dropped_f.len());
        ret = (ret.0 + echoed.len(), ret.1 + dropped_r.len());
        let within = |set: &std::collections::BTreeSet<u32>, gone: &[u32]| {
            let (lo, hi) = (*set.first().unwrap(), *set.last().unwrap());
            gone.iter().filter(|s| (lo..=hi).contains(*s)).count() as i64
        };
        // Caller → callee: nothing lost where the caller's probe sees it;
        // at the callee, what the link dropped.
        for recs in [&live_st, &file_st] {
            let s = stream_of(recs, k);
            assert_eq!(s["sender"], "caller", "{s}");
            assert_eq!(
                (s["packets"].as_u64(), s["lost"].as_i64()),
                (Some(sent.len() as u64), Some(0)),
                "{s}"
            );
        }
        let s = stream_of(&server_st, k);
        assert_eq!(
            s["lost"].as_i64(),
            Some(within(&at_s, &dropped_f)),
            "{k:?} at the callee: {s}"
        );
        assert_eq!(s["packets"].as_u64(), Some(at_s.len() as u64), "{s}");
        // Callee → caller (the echo): what was dropped on either way.
        let both: Vec<u32> = sent.difference(&at_c).copied().collect();
        assert_eq!(both.len(), dropped_f.len() + dropped_r.len());
        let want = within(&at_c, &both);
        edge += both.len() - want as usize;
        for recs in [&live_st, &file_st] {
            let s = stream_of(recs, &back);
            assert_eq!(s["sender"], "callee", "{s}");
            assert_eq!(
                s["lost"].as_i64(),
                Some(want),
                "{back:?} at the caller: {s}"
            );
            assert_eq!(s["packets"].as_u64(), Some(at_c.len() as u64), "{s}");
            assert_eq!(
                s["expected"].as_i64(),
                Some(want + at_c.len() as i64),
                "{s}"
            );
        }
    }
    assert_eq!(audio, CALLS);
    // And the link dropped what it was told to: within 4 standard
    // deviations of the binomial at the configured rate.
    for (what, (n, x)) in [("caller → callee", fwd), ("callee → caller", ret)] {
        let sd = (LOSS * (1.0 - LOSS) / n as f64).sqrt();
        let rate = x as f64 / n as f64;
        assert!(
            (rate - LOSS).abs() < 4.0 * sd,
            "{what}: {x} of {n} RTP packets dropped"
        );
    }
    eprintln!(
        "lossy link: {CALLS} calls; link c→s {} frames, {} lost, {} refused; s→c {} frames, {} lost, {} refused; \
         RTP caller→callee {} sent, {} dropped; callee→caller {} echoed, {} dropped; \
         {edge} drops at stream edges; talk time vs SIPp worst {worst:.3} ms",
        c2s.forwarded + c2s.lost + c2s.dropped,
        c2s.lost,
        c2s.dropped,
        s2c.forwarded + s2c.lost + s2c.dropped,
        s2c.lost,
        s2c.dropped,
        fwd.0,
        fwd.1,
        ret.0,
        ret.1
    );
}
