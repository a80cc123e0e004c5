//! Real programs between two network namespaces over an emulated lossy
//! link, for the tests that check earlybird against them (sipp_cli.rs,
//! media_lab_cli.rs).
//!
//! [`Link`] builds a client and a server namespace joined by two TAP
//! devices and `lab/linkem.py` (the userspace link emulator of the lab,
//! docs/LAB.md: Bernoulli loss, one-way delay and uniform jitter per
//! direction, seeded, order kept; the kernel here has no `sch_netem`),
//! with static neighbours and no IPv6, so every captured packet belongs to
//! a program the test started. [`Link::stop`] stops the emulator and
//! returns its per-direction counters; dropping the link kills every
//! process left in the namespaces and deletes them, also when the test
//! fails. [`alone`] runs the tests one at a time. [`Proc`] is a child
//! process killed on drop. [`udp_packets`] reads the UDP/IPv4 packets of
//! a tcpdump file (Ethernet), for truth counts taken on both sides of the
//! link.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Whether `tool` is on the PATH.
pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether this run is CI (missing tools are failures there).
pub fn under_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// True when every tool is present; otherwise fails under CI, or prints
/// SKIPPED and returns false.
pub fn tools(names: &[&str]) -> bool {
    let missing: Vec<&str> = names.iter().copied().filter(|t| !have(t)).collect();
    if missing.is_empty() {
        return true;
    }
    assert!(!under_ci(), "required under CI: {missing:?}");
    eprintln!("SKIPPED: not installed: {missing:?}");
    false
}

/// Holds the lab for the calling test until the guard drops: every test
/// of this binary takes it first, so they run one at a time (they time
/// real programs; `main.rs`). A test that failed holding it does not
/// poison it for the next.
pub fn alone() -> std::sync::MutexGuard<'static, ()> {
    static LAB: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LAB.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A child process, killed (SIGKILL) and reaped on drop.
pub struct Proc(pub Child);

impl Proc {
    /// Sends `sig` and waits up to 5 s for the process to end (then kills
    /// it); returns its exit status code, `None` when it was killed.
    pub fn signal_wait(&mut self, sig: i32) -> Option<i32> {
        // SAFETY: signals the child this guard owns.
        unsafe { libc::kill(self.0.id() as i32, sig) };
        for _ in 0..100 {
            if let Ok(Some(st)) = self.0.try_wait() {
                return st.code();
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.0.kill();
        self.0.wait().ok().and_then(|s| s.code())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Packets emulated, lost at random and dropped, per direction, as
/// linkem printed them when stopped.
#[derive(Debug, Default, Clone, Copy)]
pub struct LinkCounts {
    pub forwarded: u64,
    pub lost: u64,
    pub dropped: u64,
    /// Of `lost`, the IPv4 frames.
    pub lost4: u64,
    /// Of `dropped`, the IPv4 frames.
    pub dropped4: u64,
}

/// The emulated link's settings.
#[derive(Debug, Clone, Copy)]
pub struct LinkSpec {
    /// One-way delay, ms.
    pub delay_ms: f64,
    /// Uniform jitter, ± ms.
    pub jitter_ms: f64,
    /// Loss probability per frame and direction.
    pub loss: f64,
    pub seed: u32,
}

/// Client namespace (`ip_c` on `tap_c`) and server namespace (`ip_s` on
/// `tap_s`) joined through linkem.
pub struct Link {
    pub ns_c: String,
    pub ns_s: String,
    pub tap_c: String,
    pub tap_s: String,
    pub ip_c: String,
    pub ip_s: String,
    linkem: Option<Child>,
}

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn lab_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lab")
}

impl Link {
    /// Namespaces `{tag}c{pid}` / `{tag}s{pid}`, addresses 10.`net`.0.1
    /// and .2; `None` (SKIPPED, or a failure under CI) when not root.
    pub fn create(tag: &str, net: u8, spec: LinkSpec) -> Option<Link> {
        // SAFETY: plain libc call.
        if unsafe { libc::geteuid() } != 0 {
            assert!(!under_ci(), "the namespace tests need root under CI");
            eprintln!("SKIPPED: needs root (network namespaces, TAP devices)");
            return None;
        }
        let id = std::process::id() % 100_000;
        let mut l = Link {
            ns_c: format!("{tag}c{id}"),
            ns_s: format!("{tag}s{id}"),
            tap_c: format!("{tag}tc{id}"),
            tap_s: format!("{tag}ts{id}"),
            ip_c: format!("10.{net}.0.1"),
            ip_s: format!("10.{net}.0.2"),
            linkem: None,
        };
        l.remove_namespaces();
        for n in [&l.ns_c, &l.ns_s] {
            assert!(ip(&["netns", "add", n]), "ip netns add {n}");
        }
        let mut em = Command::new("python3")
            .arg(lab_dir().join("linkem.py"))
            .args(["--a", &l.tap_c, "--b", &l.tap_s])
            .args(["--delay", &spec.delay_ms.to_string()])
            .args(["--jitter", &spec.jitter_ms.to_string()])
            .args(["--loss", &spec.loss.to_string()])
            .args(["--seed", &spec.seed.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python3 runs lab/linkem.py");
        let mut line = String::new();
        BufReader::new(em.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        l.linkem = Some(em);
        assert_eq!(line.trim(), "ready", "lab/linkem.py did not start");
        let mut mac = Vec::new();
        for (tap, ns, addr) in [(&l.tap_c, &l.ns_c, &l.ip_c), (&l.tap_s, &l.ns_s, &l.ip_s)] {
            let ok = ip(&["link", "set", tap, "netns", ns])
                && ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", tap])
                && ip(&["-n", ns, "link", "set", tap, "up"])
                && ip(&["-n", ns, "link", "set", "lo", "up"])
                && ip(&[
                    "netns",
                    "exec",
                    ns,
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{tap}.disable_ipv6=1"),
                ]);
            assert!(ok, "cannot set up {tap} in {ns}");
            let out = Command::new("ip")
                .args(["-n", ns, "-o", "link", "show", tap])
                .output()
                .unwrap();
            let s = String::from_utf8_lossy(&out.stdout).to_string();
            mac.push(
                s.split("link/ether ")
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    .unwrap_or_else(|| panic!("no MAC address in {s}"))
                    .to_string(),
            );
        }
        // Static neighbours: no ARP on the link or in the captures.
        let ok = ip(&[
            "-n",
            &l.ns_c,
            "neigh",
            "replace",
            &l.ip_s,
            "lladdr",
            &mac[1],
            "dev",
            &l.tap_c,
            "nud",
            "permanent",
        ]) && ip(&[
            "-n",
            &l.ns_s,
            "neigh",
            "replace",
            &l.ip_c,
            "lladdr",
            &mac[0],
            "dev",
            &l.tap_s,
            "nud",
            "permanent",
        ]);
        assert!(ok, "static neighbours");
        Some(l)
    }

    /// A command run in the client namespace.
    pub fn in_c(&self, prog: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns_c, prog]);
        c
    }

    /// A command run in the server namespace.
    pub fn in_s(&self, prog: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns_s, prog]);
        c
    }

    /// tcpdump on the client (`client` true) or server TAP into `out`
    /// (full frames, nanosecond stamps, written packet by packet); returns
    /// once tcpdump listens.
    pub fn tcpdump(&self, client: bool, out: &Path) -> Proc {
        let (mut c, dev) = if client {
            (self.in_c("tcpdump"), &self.tap_c)
        } else {
            (self.in_s("tcpdump"), &self.tap_s)
        };
        let mut child = c
            .args(["-i", dev, "-s", "0", "-U", "-n"])
            .args(["--time-stamp-precision", "nano", "-w"])
            .arg(out)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tcpdump runs");
        let mut line = String::new();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        err.read_line(&mut line).unwrap();
        assert!(line.contains("listening on"), "tcpdump: {line}");
        // Drain the rest (its summary at exit) so tcpdump never blocks.
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
        });
        Proc(child)
    }

    /// Stops the emulator: (client → server, server → client) counters.
    pub fn stop(&mut self) -> (LinkCounts, LinkCounts) {
        let mut em = self.linkem.take().expect("linkem running");
        // SAFETY: signals the child this link owns.
        unsafe { libc::kill(em.id() as i32, libc::SIGTERM) };
        let mut err = String::new();
        em.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        em.wait().unwrap();
        let mut dirs = [LinkCounts::default(); 2];
        let mut found = [false; 2];
        for l in err.lines() {
            let Some(rest) = l.strip_prefix("linkem ") else {
                continue;
            };
            let i = if rest.starts_with(&format!("{}->", self.tap_c)) {
                0
            } else {
                1
            };
            let num = |k: &str| -> u64 {
                rest.split(&format!("{k} "))
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("no {k} in {l}"))
            };
            dirs[i] = LinkCounts {
                forwarded: num("forwarded"),
                lost: num("lost"),
                dropped: num("dropped"),
                lost4: num("ip4-lost"),
                dropped4: num("ip4-dropped"),
            };
            found[i] = true;
        }
        assert!(found[0] && found[1], "linkem counters: {err}");
        (dirs[0], dirs[1])
    }

    fn remove_namespaces(&self) {
        for n in [&self.ns_c, &self.ns_s] {
            let pids = Command::new("ip")
                .args(["netns", "pids", n])
                .stderr(Stdio::null())
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
                .unwrap_or_default();
            for p in pids
                .split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
            {
                // SAFETY: processes left in the test's own namespace.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
            let _ = ip(&["netns", "del", n]);
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        if let Some(mut em) = self.linkem.take() {
            let _ = em.kill();
            let _ = em.wait();
        }
        self.remove_namespaces();
    }
}

/// One UDP/IPv4 packet of a capture.
#[derive(Debug, Clone)]
pub struct Udp {
    pub ts_ns: u64,
    pub src: std::net::Ipv4Addr,
    pub dst: std::net::Ipv4Addr,
    pub sport: u16,
    pub dport: u16,
    /// IPv4 total length (the IP packet's bytes).
    pub ip_len: usize,
    pub payload: Vec<u8>,
}

/// The UDP/IPv4 packets (Ethernet frames, unfragmented) of a classic pcap
/// file as tcpdump writes it.
pub fn udp_packets(path: &Path) -> Vec<Udp> {
    let bytes = std::fs::read(path).unwrap();
    let (_, cap) = pcap_parser::pcap::parse_pcap(&bytes)
        .unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
    let nano = cap.header.is_nanosecond_precision();
    let mut out = Vec::new();
    for b in &cap.blocks {
        let d = b.data;
        if d.len() < 14 + 20 + 8 || d[12..14] != [0x08, 0x00] {
            continue;
        }
        let ip = &d[14..];
        let ihl = (ip[0] & 0x0f) as usize * 4;
        let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
        if ip[0] >> 4 != 4 || ip[9] != 17 || frag != 0 || ip.len() < ihl + 8 {
            continue;
        }
        let ip_len = u16::from_be_bytes([ip[2], ip[3]]) as usize;
        let u = &ip[ihl..];
        let end = ip_len.min(ip.len()).saturating_sub(ihl).max(8);
        out.push(Udp {
            ts_ns: b.ts_sec as u64 * 1_000_000_000 + b.ts_usec as u64 * if nano { 1 } else { 1000 },
            src: [ip[12], ip[13], ip[14], ip[15]].into(),
            dst: [ip[16], ip[17], ip[18], ip[19]].into(),
            sport: u16::from_be_bytes([u[0], u[1]]),
            dport: u16::from_be_bytes([u[2], u[3]]),
            ip_len,
            payload: u[8..end.min(u.len())].to_vec(),
        });
    }
    out
}

/// How many IPv4 packets from `src` a classic pcap file (Ethernet) holds,
/// whatever their transport.
pub fn ipv4_from(path: &Path, src: std::net::Ipv4Addr) -> usize {
    let bytes = std::fs::read(path).unwrap();
    let (_, cap) = pcap_parser::pcap::parse_pcap(&bytes)
        .unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
    cap.blocks
        .iter()
        .filter(|b| {
            let d = b.data;
            d.len() >= 34 && d[12..14] == [0x08, 0x00] && d[26..30] == src.octets()
        })
        .count()
}
