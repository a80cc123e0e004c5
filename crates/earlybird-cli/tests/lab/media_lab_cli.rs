//! `earlybird flows --analyzer media` against real programs: between two
//! network namespaces joined by `lab/linkem.py` (2 % loss, 20 ± 10 ms of
//! delay and jitter each way), ffmpeg sends audio (G.711 µ-law, Opus) and
//! video (VP8, H.264) as RTP and SIPp makes G.711 calls with echoed RTP,
//! while iperf3 sends bulk UDP (1448- and 1000-byte datagrams), dig asks
//! dnsmasq (from one port, and from a port per lookup), and a real QUIC
//! client and server (aioquic, `lab/quic_pair.py`) fetch objects. tcpdump
//! captures behind the link (server side); `flows --analyzer media` reads
//! the capture with the default (Table 6.2's intervals and the guards of
//! docs/MEDIA.md, "Guards"), with docs/MEDIA.md's wider
//! audio intervals, with those plus a video bitrate cap, and with those plus
//! the size variation test on video (`size_cv_min`). Flows are
//! labelled by the ports the test gave each program.
//!
//! Asserted under every configuration: each ffmpeg flow is detected with
//! its kind (under Table 6.2 a video may be called file: its file test has
//! no inter-arrival test); SIPp's 30 ms G.711 flows (280-byte packets, above Table 6.2's
//! audio sizes) are media under Table 6.2 and audio under the wider
//! intervals; the 1448-byte iperf3 flow and the one-lookup DNS flows are
//! not media; the QUIC and 1000-byte iperf3 flows are not audio, and with
//! the size variation test the 1000-byte iperf3 flow is not media. Under
//! the default, QUIC, both iperf3 flows and both kinds of DNS flow are not
//! media (the guards); Table 6.2's tests alone call QUIC and the 1000-byte
//! iperf3 flow video and the one-port DNS flow sometimes audio
//! (BENCHMARKS.md, "Against real programs", with the table this test
//! prints). With `EARLYBIRD_MEDIA_LAB_PCAP=FILE` the capture is kept.
//!
//! Needs root and ffmpeg, sipp, iperf3, dnsmasq, dig, tcpdump, python3 with
//! aioquic (SKIPPED without them outside CI, a failure under CI).

use crate::netlab;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use netlab::Proc;

/// Seconds each ffmpeg stream lasts.
const SECS: u32 = 15;

/// Ports the test gives each program (server side), and the label of a
/// flow that uses one.
const AUDIO_PCMU: u16 = 7000;
const AUDIO_OPUS: u16 = 7002;
const VIDEO_VP8: u16 = 7004;
const VIDEO_H264: u16 = 7006;
const SIP: u16 = 5060;
const SIPP_RTP: u16 = 6000;
const IPERF: u16 = 5201;
const IPERF_1000: u16 = 5202;
const DNS: u16 = 53;
/// The client port of the DNS lookups that reuse one port.
const DNS_STUB_PORT: u16 = 35353;
const QUIC: u16 = 4433;

/// (label, what a right verdict is): the label of a UDP flow by its server
/// port, `None` for a flow no program of the test makes.
fn label(sport: u16, dport: u16) -> Option<&'static str> {
    let p = |x: u16| sport == x || dport == x;
    Some(if p(AUDIO_PCMU) {
        "ffmpeg audio G.711 µ-law 20 ms"
    } else if p(AUDIO_OPUS) {
        "ffmpeg audio Opus 32 kbit/s"
    } else if p(VIDEO_VP8) {
        "ffmpeg video VP8 500 kbit/s"
    } else if p(VIDEO_H264) {
        "ffmpeg video H.264 500 kbit/s"
    } else if [7001, 7003, 7005, 7007].into_iter().any(p) {
        "ffmpeg RTCP"
    } else if p(SIP) {
        "SIPp SIP"
    } else if p(SIPP_RTP) {
        "SIPp RTP G.711 A-law 30 ms, echoed"
    } else if p(IPERF) {
        "iperf3 UDP 2 Mbit/s, 1448-byte datagrams"
    } else if p(IPERF_1000) {
        "iperf3 UDP 2 Mbit/s, 1000-byte datagrams"
    } else if p(DNS) && p(DNS_STUB_PORT) {
        "DNS (dig, dnsmasq), one client port"
    } else if p(DNS) {
        "DNS (dig, dnsmasq), a port per lookup"
    } else if p(QUIC) {
        "QUIC (aioquic)"
    } else {
        return None;
    })
}

/// What a flow's verdict must be.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Want {
    /// One of these verdicts (flows of at least 30 packets).
    OneOf(&'static [&'static str]),
    /// Neither audio nor video.
    NotMedia,
    /// Not audio (called video by the configuration: reported, a known
    /// limit of its video test).
    NotAudio,
    /// Not asserted (RTCP, SIP: short or signalling).
    Any,
}

/// The verdict a flow of `label` must get under configuration `cfg`
/// (0 the default: Table 6.2 and the guards, 1 wider audio, 2 wider audio with video bitrates capped,
/// 3 wider audio with the size variation test on video).
fn expected(label: &str, cfg: usize) -> Want {
    if label.starts_with("ffmpeg audio") {
        Want::OneOf(&["audio"])
    } else if label.starts_with("ffmpeg video") {
        // Table 6.2's file test has no inter-arrival test: when a video's
        // first windows come unevenly (ffmpeg starting on a busy machine)
        // and enough of their mean sizes fall in [950, 1050], file passes
        // before video does (VP8: 1 run in 6). The wider files have no file
        // kind.
        if cfg == 0 {
            Want::OneOf(&["video", "file"])
        } else {
            Want::OneOf(&["video"])
        }
    } else if label.starts_with("SIPp RTP") {
        // 280-byte packets: above Table 6.2's audio sizes [60, 200], inside
        // its video sizes [150, 1200]; audio with the wider intervals.
        if cfg == 0 {
            Want::OneOf(&["audio", "video"])
        } else {
            Want::OneOf(&["audio"])
        }
    } else if label.starts_with("iperf3 UDP 2 Mbit/s, 1448") || label.ends_with("per lookup") {
        Want::NotMedia
    } else if cfg == 0
        && (label.starts_with("QUIC") || label.starts_with("iperf3") || label.starts_with("DNS"))
    {
        // The default's guards (docs/MEDIA.md, "Guards"): QUIC's reverse
        // direction is ACK-clocked (transport feedback), iperf3's 1000-byte
        // datagrams are of one size a few ms apart (fixed-size bulk), and
        // DNS lookups from one port are further apart than audio's 100 ms
        // bound on stable windows.
        Want::NotMedia
    } else if label.starts_with("iperf3") && cfg == 3 {
        // Fixed 1000-byte datagrams: no window's sizes vary, so the size
        // variation test on video rejects them (docs/MEDIA.md, "Size
        // variation").
        Want::NotMedia
    } else if label.starts_with("QUIC") || label.starts_with("iperf3") {
        // Bulk transfers of packets within video's sizes: Table 6.2's video
        // test has no bitrate, and the inter-arrival of a bulk transfer is
        // stable, so they pass it (BENCHMARKS.md, "Against real
        // programs"); capping video's bitrate removes some, not all, and the
        // size variation test removes iperf3's but not QUIC's.
        let _ = cfg;
        Want::NotAudio
    } else {
        // RTCP, SIP; and DNS lookups from one port: small packets at a low
        // rate, whose first windows are sometimes stable enough to be called
        // audio (BENCHMARKS.md, "Against real programs").
        Want::Any
    }
}

const WIDER_AUDIO: &str = "\
[audio]
size = [[40, 300]]
size_share = 0.75
iat_tolerance_ms = 15
iat_share = 0.6
bitrate_kbps = [[0, 150]]
bitrate_share = 0.75
[video]
size = [[300, 1200]]
size_share = 0.19
iat_tolerance_ms = 15
iat_share = 0.6
";

/// The wider audio intervals, video windows also held to at most
/// 1.5 Mbit/s (three quarters of them): a bound chosen on this test's
/// traffic (its videos run at 0.5 Mbit/s, its bulk transfers mostly
/// faster) to measure how far a video bitrate test goes; not a general
/// setting, and not enough (see `expected`).
const VIDEO_CAPPED: &str = "bitrate_kbps = [[0, 1500]]\nbitrate_share = 0.75\n";

/// The wider audio intervals with the size variation test on video
/// (docs/MEDIA.md, "Size variation"): more than 60 % of windows must have
/// sizes whose standard deviation is at least 2 % of their mean.
const VIDEO_SIZE_CV: &str = "size_cv_min = 0.02\nsize_cv_share = 0.6\n";

/// One UDP flow of the capture: label, packets, bytes, verdict.
struct Flow {
    label: &'static str,
    packets: u64,
    bytes: u64,
    media: String,
}

fn flows(bin: &str, pcap: &std::path::Path, config: Option<&std::path::Path>) -> Vec<Flow> {
    let mut c = Command::new(bin);
    c.arg("flows")
        .arg(pcap)
        .args(["--analyzer", "media", "--no-model", "-q", "-o", "-"])
        .args(["--format", "jsonl"]);
    if let Some(f) = config {
        c.arg("--media-config").arg(f);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut v = Vec::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let r: serde_json::Value = serde_json::from_str(l).unwrap();
        if r["proto"] != 17 {
            continue;
        }
        let (sp, dp) = (
            r["sport"].as_u64().unwrap() as u16,
            r["dport"].as_u64().unwrap() as u16,
        );
        let label = label(sp, dp).unwrap_or_else(|| panic!("a UDP flow no program made: {r}"));
        let n = |k: &str| r[k].as_u64().unwrap();
        v.push(Flow {
            label,
            packets: n("fwd_packets") + n("bwd_packets"),
            bytes: n("fwd_bytes") + n("bwd_bytes"),
            media: r["media"].as_str().unwrap_or("").to_string(),
        });
    }
    v
}

/// A tiny seeded generator (xorshift) for think times and names.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn spawn_quiet(mut c: Command) -> Proc {
    Proc(
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

#[test]
fn media_of_real_programs_is_detected_and_their_other_udp_is_not() {
    let _alone = netlab::alone();
    if !netlab::tools(&[
        "ffmpeg", "sipp", "iperf3", "dnsmasq", "dig", "tcpdump", "python3",
    ]) {
        return;
    }
    let aioquic = Command::new("python3")
        .args(["-c", "import aioquic"])
        .status()
        .is_ok_and(|s| s.success());
    if !aioquic {
        assert!(!netlab::under_ci(), "python3 -m pip install aioquic");
        eprintln!("SKIPPED: the Python package aioquic is not installed");
        return;
    }
    let Some(mut link) = netlab::Link::create(
        "ebmd",
        79,
        netlab::LinkSpec {
            delay_ms: 20.0,
            jitter_ms: 10.0,
            loss: 0.02,
            seed: 20,
        },
    ) else {
        return;
    };
    let bin = env!("CARGO_BIN_EXE_earlybird");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lab = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lab");
    let quic = lab.join("quic_pair.py");
    let (ip_c, ip_s) = (link.ip_c.clone(), link.ip_s.clone());
    let started = Instant::now();

    // Servers, behind the link.
    let cap = d.join("server.pcap");
    let mut dump = link.tcpdump(false, &cap);
    let mut sink = link.in_s("python3");
    sink.args([
        "-c",
        "import socket,select,sys\n\
         ss=[socket.socket(socket.AF_INET,socket.SOCK_DGRAM) for _ in range(8)]\n\
         [s.bind((sys.argv[1],7000+i)) for i,s in enumerate(ss)]\n\
         while True:\n [s.recv(65536) for s in select.select(ss,[],[])[0]]",
        &ip_s,
    ]);
    let _sink = spawn_quiet(sink);
    let pcaps = d.join("pcap");
    std::fs::create_dir(&pcaps).unwrap();
    for f in std::fs::read_dir("/usr/share/sip-tester").unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_some_and(|e| e == "pcap") {
            std::os::unix::fs::symlink(&f, pcaps.join(f.file_name().unwrap())).unwrap();
        }
    }
    let mut uas = link.in_s("sipp");
    uas.args(["-sn", "uas", "-i", &ip_s, "-p", "5060", "-mi", &ip_s])
        .args(["-rtp_echo", "-nostdin"])
        .current_dir(d);
    let _uas = spawn_quiet(uas);
    let mut iperfs = Vec::new();
    for port in [IPERF, IPERF_1000] {
        let mut c = link.in_s("iperf3");
        c.args(["-s", "-1", "-B", &ip_s, "-p", &port.to_string()]);
        iperfs.push(spawn_quiet(c));
    }
    let conf = d.join("dnsmasq.conf");
    let mut zone = format!(
        "port=53\nlisten-address={ip_s}\nbind-interfaces\nno-resolv\nno-hosts\n\
         address=/lab/10.79.0.77\nuser=root\ngroup=root\nmx-host=lab,mail.lab,10\n"
    );
    for i in 0..8 {
        zone += &format!("txt-record=t{i}.lab,{}\n", "x".repeat(20 + 30 * i));
    }
    std::fs::write(&conf, zone).unwrap();
    let mut dnsmasq = link.in_s("dnsmasq");
    dnsmasq
        .args(["-k", "-C"])
        .arg(&conf)
        .arg(format!("--pid-file={}", d.join("dnsmasq.pid").display()));
    let _dnsmasq = spawn_quiet(dnsmasq);
    let cert = d.join("cert");
    let ok = Command::new("python3")
        .arg(&quic)
        .arg("cert")
        .arg(&cert)
        .status()
        .unwrap()
        .success();
    assert!(ok, "quic_pair.py cert");
    let mut qs = link.in_s("python3");
    qs.arg(&quic)
        .args(["server", "--host", &ip_s, "--port", &QUIC.to_string()])
        .arg("--cert")
        .arg(cert.join("cert.pem"))
        .arg("--key")
        .arg(cert.join("key.pem"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut quic_server = Proc(qs.spawn().unwrap());
    let mut ready = String::new();
    BufReader::new(quic_server.0.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready", "quic_pair.py server");
    std::thread::sleep(Duration::from_millis(500));

    // Clients, all at once.
    let secs = SECS.to_string();
    let ffmpeg = |input: &[&str], codec: &[&str], port: u16| {
        let mut c = link.in_c("ffmpeg");
        c.args(["-hide_banner", "-loglevel", "error", "-nostdin", "-re"])
            .args(["-f", "lavfi"])
            .args(input)
            .args(["-t", &secs])
            .args(codec)
            .args(["-f", "rtp"])
            .arg(format!("rtp://{ip_s}:{port}"));
        spawn_quiet(c)
    };
    let mut senders = vec![
        ffmpeg(
            &[
                "-i",
                "sine=frequency=440:sample_rate=8000:samples_per_frame=160",
            ],
            &["-c:a", "pcm_mulaw"],
            AUDIO_PCMU,
        ),
        ffmpeg(
            &["-i", "sine=frequency=440:sample_rate=48000"],
            &["-c:a", "libopus", "-b:a", "32k"],
            AUDIO_OPUS,
        ),
        ffmpeg(
            &["-i", "testsrc=size=320x240:rate=25"],
            &["-c:v", "libvpx", "-b:v", "500k", "-deadline", "realtime"],
            VIDEO_VP8,
        ),
        ffmpeg(
            &["-i", "testsrc=size=320x240:rate=25"],
            &[
                "-c:v",
                "libx264",
                "-preset",
                "ultrafast",
                "-tune",
                "zerolatency",
                "-b:v",
                "500k",
            ],
            VIDEO_H264,
        ),
    ];
    let mut uac = link.in_c("sipp");
    uac.args(["-sn", "uac_pcap"])
        .arg(format!("{ip_s}:5060"))
        .args(["-i", &ip_c, "-p", "5061", "-mi", &ip_c])
        .args(["-m", "4", "-r", "1", "-l", "4", "-s", "5551234", "-nostdin"])
        .current_dir(d);
    senders.push(spawn_quiet(uac));
    let mut qc = link.in_c("python3");
    qc.arg(&quic)
        .args(["client", "--host", &ip_s, "--port", &QUIC.to_string()])
        .args(["--sizes", "30000,150000,8000,80000,40000"])
        .args(["--connections", "3", "--pause", "1", "--seed", "20"]);
    senders.push(spawn_quiet(qc));
    for (port, len) in [(IPERF, None), (IPERF_1000, Some("1000"))] {
        let mut c = link.in_c("iperf3");
        c.args(["-c", &ip_s, "-p", &port.to_string(), "-u", "-b", "2M"])
            .args(["-t", "10"]);
        if let Some(l) = len {
            c.args(["-l", l]);
        }
        senders.push(spawn_quiet(c));
    }
    // DNS: a stub resolver on one port looking names up with random think
    // times (exponential, mean 100 ms), every fifth lookup from a fresh
    // port.
    let dns = std::thread::scope(|s| {
        let h = s.spawn(|| {
            let mut rng = Rng(20);
            let (mut asked, mut answered) = (0, 0);
            let names = ["lab", "www.lab", "mail.lab", "t3.lab", "t7.lab"];
            let types = ["A", "TXT", "MX", "AAAA"];
            while started.elapsed() < Duration::from_secs(SECS as u64 - 2) {
                // One to three names per lookup (as A then AAAA, or a page's
                // names), asked one after another.
                let mut q = Vec::new();
                for _ in 0..1 + (rng.next() * 3.0) as usize {
                    q.push(names[(rng.next() * names.len() as f64) as usize]);
                    q.push(types[(rng.next() * types.len() as f64) as usize]);
                }
                let bind = if asked % 5 == 4 {
                    ip_c.clone()
                } else {
                    format!("{ip_c}#{DNS_STUB_PORT}")
                };
                let o = link
                    .in_c("dig")
                    .args(["+tries=1", "+time=1", "+short", "-b", &bind])
                    .arg(format!("@{ip_s}"))
                    .args(&q)
                    .output()
                    .unwrap();
                asked += 1;
                answered += o.status.success() as u32;
                std::thread::sleep(Duration::from_secs_f64(-0.1 * (1.0 - rng.next()).ln()));
            }
            (asked, answered)
        });
        h.join().unwrap()
    });
    for p in &mut senders {
        let deadline = Instant::now() + Duration::from_secs(40);
        while p.0.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    dump.signal_wait(libc::SIGINT);
    let (c2s, s2c) = link.stop();
    drop(senders);
    assert!(dns.1 * 2 >= dns.0, "DNS answered {} of {}", dns.1, dns.0);
    if let Ok(keep) = std::env::var("EARLYBIRD_MEDIA_LAB_PCAP") {
        std::fs::copy(&cap, &keep).unwrap();
    }

    // Detection with Table 6.2 and with the wider audio intervals.
    let wider = d.join("wider.toml");
    std::fs::write(&wider, WIDER_AUDIO).unwrap();
    let capped = d.join("capped.toml");
    std::fs::write(&capped, format!("{WIDER_AUDIO}{VIDEO_CAPPED}")).unwrap();
    let varied = d.join("varied.toml");
    std::fs::write(&varied, format!("{WIDER_AUDIO}{VIDEO_SIZE_CV}")).unwrap();
    let mut report = format!(
        "link: 2 % loss, 20 ± 10 ms; c→s {:?}, s→c {:?}; DNS {} lookups (dig runs), {} answered; \
         {:.1} s of traffic\n",
        c2s,
        s2c,
        dns.0,
        dns.1,
        started.elapsed().as_secs_f64()
    );
    let mut problems = Vec::new();
    for (ci, (name, cfg)) in [
        ("default (Table 6.2 and guards)", None),
        ("wider audio", Some(wider.as_path())),
        ("wider audio, video ≤ 1.5 Mbit/s", Some(capped.as_path())),
        ("wider audio, video sizes varying", Some(varied.as_path())),
    ]
    .into_iter()
    .enumerate()
    {
        let all = flows(bin, &cap, cfg);
        // Per label: (flows, ≥30 packets, audio, video, file, bytes,
        // bytes detected as audio or video).
        let mut t: BTreeMap<&str, [u64; 7]> = BTreeMap::new();
        for f in &all {
            let e = t.entry(f.label).or_default();
            e[0] += 1;
            e[1] += (f.packets >= 30) as u64;
            match f.media.as_str() {
                "audio" => e[2] += 1,
                "video" => e[3] += 1,
                "file" => e[4] += 1,
                _ => {}
            }
            e[5] += f.bytes;
            if f.media == "audio" || f.media == "video" {
                e[6] += f.bytes;
            }
            let media = f.media == "audio" || f.media == "video";
            let ok = match expected(f.label, ci) {
                Want::OneOf(k) => f.packets < 30 || k.contains(&f.media.as_str()),
                Want::NotMedia => !media,
                Want::NotAudio => f.media != "audio",
                Want::Any => true,
            };
            if !ok {
                problems.push(format!(
                    "{name}: a {} flow of {} packets called {:?}, wanted {:?}",
                    f.label,
                    f.packets,
                    f.media,
                    expected(f.label, ci)
                ));
            }
        }
        for want in [
            "ffmpeg audio G.711 µ-law 20 ms",
            "ffmpeg audio Opus 32 kbit/s",
            "ffmpeg video VP8 500 kbit/s",
            "ffmpeg video H.264 500 kbit/s",
            "SIPp RTP G.711 A-law 30 ms, echoed",
            "iperf3 UDP 2 Mbit/s, 1448-byte datagrams",
            "iperf3 UDP 2 Mbit/s, 1000-byte datagrams",
            "DNS (dig, dnsmasq), one client port",
            "QUIC (aioquic)",
        ] {
            assert!(
                t.get(want).is_some_and(|e| e[1] > 0),
                "no {want} flow of 30 packets"
            );
        }
        report += &format!(
            "\n{name}:\n| flows | n | ≥30 pkts | audio | video | file | MB | MB as media |\n"
        );
        for (l, e) in &t {
            report += &format!(
                "| {l} | {} | {} | {} | {} | {} | {:.2} | {:.2} |\n",
                e[0],
                e[1],
                e[2],
                e[3],
                e[4],
                e[5] as f64 / 1e6,
                e[6] as f64 / 1e6
            );
        }
    }
    eprintln!("{report}");
    assert!(problems.is_empty(), "{problems:#?}");
}
