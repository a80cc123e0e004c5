//! `earlybird voip` against real calls: SIPp (Debian `sip-tester`) makes
//! calls between the two namespaces of a veth pair (uac_pcap scenario: G.711
//! A-law RTP played from SIPp's own capture, an RFC 4733 DTMF digit, BYE
//! from the caller; uas with -rtp_echo, which sends both back). `earlybird voip -i` tracks them
//! live and is stopped with SIGTERM (exit 130, every call written to
//! SQLite and JSON lines); tcpdump captures the same packets to a file,
//! which `earlybird voip` reads afterwards. Every call is recorded with the
//! right parties, status, end cause, DTMF and four streams without loss,
//! and the live and file records agree within 10 ms.
//!
//! Needs root (skipped otherwise, and says so), sipp and tcpdump (a failure
//! under CI when missing).

#[path = "../../earlybird/tests/common.rs"]
mod lib_common;

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
    unsafe { libc::kill(dump.0.id() as i32, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(500));
    drop(dump);

    let out = Command::new(bin)
        .args(["voip", "-q", "-o"])
        .arg(&file)
        .arg(&cap)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (live, file) = (records(&live), records(&file));
    assert_eq!(live.len(), 4, "{live:#?}");
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
