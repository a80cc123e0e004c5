//! The lab of today's calls (`lab/calls.py`, docs/MEDIA.md, "The lab of
//! today's calls") against `flows --analyzer media`: one short run with
//! both WebRTC stacks (aiortc, GStreamer's webrtcbin) making audio, VP8
//! and H.264 video, bundled audio+video and data-channel sessions,
//! directly (UDP, and ICE-TCP for GStreamer) and through coturn over UDP
//! and TCP, beside the negatives (QUIC, collectd, syslog, SNMP, a
//! games-like exchange, DNS, NTP, iperf3, a WireGuard download) and a
//! call inside WireGuard, through
//! `lab/linkem.py` with loss and jitter. `lab/call_eval.py` scores the
//! verdicts against the labels and runs tshark's RTP stream analysis.
//!
//! Asserted: the lab itself (most sessions connect; every connected call
//! has a labelled flow of 30 packets or more; every negative program made
//! a labelled flow; tshark finds RTP headers in clear in every UDP call
//! flow of audio or video, direct or relayed through TURN) and today's
//! detector (docs/MEDIA.md, "The default") at floors one flow below what
//! it does on this run (`FOUND_FLOOR`, `FLAGGED_CEILING`, `KIND_FLOOR`
//! over UDP; over TCP one miss): call flows found, negatives flagged,
//! audio told from video. The scores table is printed. With `EARLYBIRD_CALLS_LAB_DIR=DIR` the captures and labels are
//! kept there.
//!
//! Needs root, python3 with aiortc and aioquic, Debian's python3 with
//! GStreamer's introspection and webrtcbin, and the programs in `TOOLS`
//! (SKIPPED without them outside CI, a failure under CI).

use crate::netlab;

use std::process::Command;

const TOOLS: &[&str] = &[
    "python3",
    "/usr/bin/python3",
    "tcpdump",
    "turnserver",
    "espeak-ng",
    "sox",
    "ffmpeg",
    "collectd",
    "rsyslogd",
    "logger",
    "snmpd",
    "snmpget",
    "dnsmasq",
    "dig",
    "chronyd",
    "iperf3",
    "wg",
    "wireguard-go",
    "tshark",
    "gst-inspect-1.0",
];

/// The UDP call flows of this run found as audio or video: at least this
/// share (9 of 9 at 1437bccb; one miss is let pass, a call starved of the
/// CPU on a busy machine).
const FOUND_FLOOR: f64 = 0.85;
/// The negatives flagged: at most this share (0 of 11 at 1437bccb; one is
/// let pass).
const FLAGGED_CEILING: f64 = 0.1;
/// The found call flows whose audio or video verdict is the label's: at
/// least this share (9 of 9 at 1437bccb).
const KIND_FLOOR: f64 = 0.85;

fn python_ok(py: &str, code: &str) -> bool {
    Command::new(py)
        .args(["-c", code])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn todays_calls_are_labelled_and_scored() {
    let _alone = netlab::alone();
    // SAFETY: plain libc call.
    if unsafe { libc::geteuid() } != 0 {
        assert!(!netlab::under_ci(), "the calls lab needs root under CI");
        eprintln!("SKIPPED: needs root (network namespaces, TAP devices)");
        return;
    }
    if !netlab::tools(TOOLS) {
        return;
    }
    let mods = [
        (
            "python3",
            "import aiortc, aioquic",
            "pip install aiortc aioquic",
        ),
        (
            "/usr/bin/python3",
            "import gi; gi.require_version('Gst', '1.0'); gi.require_version('GstWebRTC', '1.0'); \
             from gi.repository import Gst; Gst.init(None); \
             assert all(Gst.ElementFactory.find(e) for e in \
             ['webrtcbin', 'nicesrc', 'opusenc', 'vp8enc', 'x264enc', 'y4mdec'])",
            "apt-get install python3-gi gir1.2-gst-plugins-bad-1.0 gstreamer1.0-plugins-bad \
             gstreamer1.0-plugins-good gstreamer1.0-plugins-ugly gstreamer1.0-nice",
        ),
    ];
    for (py, code, fix) in mods {
        if !python_ok(py, code) {
            assert!(!netlab::under_ci(), "{py}: {fix}");
            eprintln!("SKIPPED: {py} lacks what the lab needs ({fix})");
            return;
        }
    }
    let bin = env!("CARGO_BIN_EXE_earlybird");
    let lab = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lab");
    let tmp = tempfile::tempdir().unwrap();
    let dir = match std::env::var("EARLYBIRD_CALLS_LAB_DIR") {
        Ok(d) => std::path::PathBuf::from(d),
        Err(_) => tmp.path().to_path_buf(),
    };
    let out = Command::new("python3")
        .arg(lab.join("calls.py"))
        .args(["--seed", "1", "--seconds", "8", "--parallel", "4"])
        .args([
            "--calls",
            "audio-direct,vp8-direct,h264-direct,av-turn-udp,data-direct,audio-turn-tcp,audio-ice-tcp",
        ])
        .arg("-o")
        .arg(&dir)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "calls.py: {log}");
    eprintln!("{log}");

    // The lab: sessions, labels.
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("calls-1.meta.json")).unwrap()).unwrap();
    let sessions = meta["sessions"].as_array().unwrap();
    let ok: Vec<&str> = sessions
        .iter()
        .filter(|s| s["ok"] == true)
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    // 2 stacks × 6 calls, GStreamer's ICE-TCP call, and the call over
    // WireGuard.
    assert_eq!(sessions.len(), 14, "{meta}");
    assert!(ok.len() >= 12, "sessions connected: {ok:?} of {meta}");
    let labels = std::fs::read_to_string(dir.join("calls-1.labels.csv")).unwrap();
    let rows: Vec<Vec<&str>> = labels
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    let packets = |r: &Vec<&str>| r[10].parse::<u64>().unwrap() + r[11].parse::<u64>().unwrap();
    for s in sessions.iter().filter(|s| s["ok"] == true) {
        let name = s["name"].as_str().unwrap();
        let class = match s["media"].as_str().unwrap() {
            "audio" => "audio",
            "video" | "av" => "video",
            _ => "not-media",
        };
        assert!(
            rows.iter()
                .any(|r| r[9] == name && r[6] == class && packets(r) >= 30),
            "no {class} flow of 30 packets labelled {name}"
        );
    }
    for neg in [
        "quic-download",
        "quic-segments",
        "collectd",
        "syslog",
        "snmp",
        "game",
        "dns",
        "ntp",
        "iperf-udp",
        "wg-download",
    ] {
        assert!(
            rows.iter().any(|r| r[9] == neg && r[6] == "not-media"),
            "no flow labelled {neg}"
        );
    }

    // The scores.
    let json = dir.join("scores.json");
    let ev = Command::new("python3")
        .arg(lab.join("call_eval.py"))
        .arg(&dir)
        .args(["--earlybird", bin, "--tshark", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        ev.status.success(),
        "call_eval.py: {}",
        String::from_utf8_lossy(&ev.stderr)
    );
    eprintln!("{}", String::from_utf8_lossy(&ev.stdout));
    let scores: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let udp = &scores["default"]["UDP"];
    let found = udp["found_share"].as_f64().unwrap_or(0.0);
    let flagged = udp["flagged_share"].as_f64().unwrap();
    assert!(udp["calls"].as_u64().unwrap() >= 8, "{udp}");
    assert!(udp["negatives"].as_u64().unwrap() >= 8, "{udp}");
    assert!(found >= FOUND_FLOOR, "UDP call flows found: {udp}");
    assert!(flagged <= FLAGGED_CEILING, "negatives flagged: {udp}");
    let kind = udp["kind_share"].as_f64().unwrap_or(0.0);
    assert!(kind >= KIND_FLOOR, "audio and video told apart: {udp}");
    // Over TCP (TURN-TCP of both stacks, GStreamer's ICE-TCP): RTP in
    // clear after each frame's length; one miss is let pass. ICE-TCP's
    // session connects most of the time (libnice's TCP checks over the
    // lossy link can fail on a busy machine); when it did, its call flow
    // is found.
    let tcp = &scores["default"]["TCP"];
    let (calls, found) = (
        tcp["calls"].as_u64().unwrap(),
        tcp["found"].as_u64().unwrap(),
    );
    assert!(calls >= 2, "{tcp}");
    assert!(found + 1 >= calls, "TCP call flows found: {tcp}");
    assert_eq!(tcp["kind_right"], tcp["found"], "{tcp}");
    if ok.contains(&"gst-audio-ice-tcp") {
        let ice = &scores["default"]["ICE-TCP"];
        assert!(ice["calls"].as_u64().unwrap() >= 1, "{ice}");
        assert_eq!(
            ice["found"], ice["calls"],
            "ICE-TCP call flows found: {ice}"
        );
    }

    // tshark finds the RTP header in clear in every UDP call flow's
    // server-to-client direction (SRTP, direct or in TURN channel data).
    let streams = scores["tshark"]["streams"].as_array().unwrap();
    for r in rows
        .iter()
        .filter(|r| r[1] == "UDP" && (r[6] == "audio" || r[6] == "video") && r[8] != "vpn")
        .filter(|r| packets(r) >= 30)
    {
        assert!(
            streams
                .iter()
                .any(|s| s["session"] == r[9] && s["pkts"].as_u64().unwrap() > 0),
            "tshark found no RTP stream in {r:?}"
        );
    }
}
