//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// A `Write` that appends into a shared buffer (an exporter owns its
/// writer; the test keeps a clone to read what was written).
#[derive(Clone, Default)]
pub struct Shared(pub Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `../shared/corpus` beside the project root, if present.
pub fn corpus() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!(
            "SKIPPED: corpus not found at {} (the test needs ../shared/corpus beside the project)",
            p.display()
        );
        None
    }
}

/// The project's `testdata/` directory.
pub fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// Every capture-like file under `dir`, recursively, sorted.
pub fn captures(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let skip = [".out", ".txt", ".md", ".json", ".csv", ".py", ".sh", ".log"]
                    .iter()
                    .any(|s| name.ends_with(s));
                if !skip {
                    out.push(p);
                }
            }
        }
    }
    out.sort();
    out
}

/// Protocol name as nDPI prints it → IP protocol number.
pub fn proto_number(name: &str) -> Option<u8> {
    Some(match name {
        "TCP" => 6,
        "UDP" => 17,
        "ICMP" => 1,
        "ICMPV6" => 58,
        "IGMP" => 2,
        "ESP" => 50,
        "OSPF" => 89,
        "PGM" => 113,
        "SCTP" => 132,
        "GRE" => 47,
        n => return n.parse().ok(),
    })
}

/// Minimal CSV line splitter (the truth files have no quoted commas in the
/// columns we read; quoted fields are unquoted).
pub fn split_csv(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut q = false;
    for ch in line.chars() {
        match ch {
            '"' => q = !q,
            ',' if !q => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// A model seen only through the three required `Classifier` methods: no
/// fast form (the flow table then calls `classify`) and not costly (it runs
/// inline, never on the classifier pool).
pub struct ClassifyOnly(pub std::sync::Arc<dyn earlybird::Classifier>);

impl earlybird::Classifier for ClassifyOnly {
    fn packets_needed(&self) -> usize {
        self.0.packets_needed()
    }
    fn classify(&self, f: &earlybird::FlowFeatures<'_>) -> earlybird::Verdict {
        self.0.classify(f)
    }
    fn classes(&self) -> &[String] {
        self.0.classes()
    }
}

/// Test hosts for live capture: a veth pair whose two ends live in two
/// network namespaces of their own (`a` in `ns_a`, `b` in `ns`), so what a
/// test sends out of one end reaches only the other and nothing touches the
/// machine's own namespace. IPv6 is off on both ends and neither has an
/// address, so the kernel sends nothing of its own. Code runs in a
/// namespace through [`Veth::in_capture`] / [`Veth::in_peer`] (a thread that
/// enters it); commands through `ip netns exec`. Removed on drop, even when
/// the test fails.
pub struct Veth {
    /// The capture end, in namespace `ns_a`.
    pub a: String,
    /// The sending end, in namespace `ns`.
    pub b: String,
    /// The namespace of `a`.
    pub ns_a: String,
    /// The namespace of `b`.
    pub ns: String,
}

fn ip(args: &[&str]) -> bool {
    std::process::Command::new("ip")
        .args(args)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// `ip` for clean-ups that may find nothing to remove (no error printed).
fn ip_quiet(args: &[&str]) {
    let _ = std::process::Command::new("ip")
        .args(args)
        .stderr(std::process::Stdio::null())
        .status();
}

impl Veth {
    /// Sends `pcap` from `ns` over `b` with `earlybird replay` (binary
    /// `bin`), which must succeed.
    pub fn replay(&self, bin: &str, pcap: &std::path::Path) {
        let sent = std::process::Command::new("ip")
            .args(["netns", "exec", &self.ns, bin, "replay", "-i", &self.b])
            .arg(pcap)
            .output()
            .unwrap();
        assert!(
            sent.status.success(),
            "{}",
            String::from_utf8_lossy(&sent.stderr)
        );
    }

    /// Runs `earlybird flows -i A ARGS` (binary `bin`) in `ns_a` while
    /// `earlybird replay` sends `pcap` from `ns`, then stops it with
    /// SIGINT: its exit code and what it wrote to stderr after its first
    /// line (which must say it is capturing).
    pub fn capture_a_replay(
        &self,
        bin: &str,
        args: &[&str],
        pcap: &std::path::Path,
    ) -> (Option<i32>, String) {
        use std::io::{BufRead, Read};
        use std::process::{Command, Stdio};
        let mut cap = Command::new("ip")
            .args(["netns", "exec", &self.ns_a, bin, "flows", "-i", &self.a])
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = std::io::BufReader::new(cap.stderr.take().unwrap());
        let mut first = String::new();
        err.read_line(&mut first).unwrap();
        assert!(first.contains("capturing on"), "{first}");
        self.replay(bin, pcap);
        std::thread::sleep(std::time::Duration::from_millis(500));
        // SAFETY: signals the child process started above.
        unsafe { libc::kill(cap.id() as i32, libc::SIGINT) };
        let status = cap.wait().unwrap();
        let mut rest = String::new();
        err.read_to_string(&mut rest).unwrap();
        (status.code(), rest)
    }
}

impl Veth {
    /// A pair named after `tag` and this process; `None` (the test is
    /// skipped, and says so) when the process is not root.
    pub fn create(tag: &str) -> Option<Veth> {
        // SAFETY: plain libc call.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED: live capture tests need root (veth pairs and packet sockets)");
            return None;
        }
        let id = std::process::id() % 100_000;
        let v = Veth {
            a: format!("{tag}a{id}"),
            b: format!("{tag}b{id}"),
            ns_a: format!("{tag}m{id}"),
            ns: format!("{tag}n{id}"),
        };
        v.remove_namespaces();
        let no_v6 = |ns: &str, dev: &str| {
            ip(&[
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{dev}.disable_ipv6=1"),
            ])
        };
        let ok = ip(&["netns", "add", &v.ns_a])
            && ip(&["netns", "add", &v.ns])
            && ip(&[
                "-n", &v.ns_a, "link", "add", &v.a, "type", "veth", "peer", "name", &v.b, "netns",
                &v.ns,
            ])
            && no_v6(&v.ns_a, &v.a)
            && no_v6(&v.ns, &v.b)
            && ip(&["-n", &v.ns_a, "link", "set", &v.a, "mtu", "9000", "up"])
            && ip(&["-n", &v.ns, "link", "set", &v.b, "mtu", "9000", "up"]);
        assert!(
            ok,
            "cannot set up the veth pair {} / {} (netns {} / {})",
            v.a, v.b, v.ns_a, v.ns
        );
        Some(v)
    }

    /// A second pair between the same two namespaces, named after the
    /// first: (capture end, sending end).
    pub fn add_pair(&self) -> (String, String) {
        let (a, b) = (format!("{}x", self.a), format!("{}x", self.b));
        let ok = ip(&[
            "-n", &self.ns_a, "link", "add", &a, "type", "veth", "peer", "name", &b, "netns",
            &self.ns,
        ]) && ip(&[
            "netns",
            "exec",
            &self.ns_a,
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{a}.disable_ipv6=1"),
        ]) && ip(&[
            "netns",
            "exec",
            &self.ns,
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{b}.disable_ipv6=1"),
        ]) && ip(&["-n", &self.ns_a, "link", "set", &a, "mtu", "9000", "up"])
            && ip(&["-n", &self.ns, "link", "set", &b, "mtu", "9000", "up"]);
        assert!(ok, "cannot set up the second veth pair {a} / {b}");
        (a, b)
    }

    /// Brings up the loopback interface of the capture namespace.
    pub fn capture_loopback_up(&self) {
        assert!(
            ip(&["-n", &self.ns_a, "link", "set", "lo", "up"]),
            "lo up in {}",
            self.ns_a
        );
    }

    /// Brings up the loopback interface of the peer namespace.
    pub fn peer_loopback_up(&self) {
        assert!(
            ip(&["-n", &self.ns, "link", "set", "lo", "up"]),
            "lo up in {}",
            self.ns
        );
    }

    /// Deletes the pair now (both ends go), as when an interface disappears
    /// under a capture.
    pub fn remove(&self) {
        assert!(
            ip(&["-n", &self.ns_a, "link", "del", &self.a]),
            "ip link del {}",
            self.a
        );
    }

    /// Runs `f` on a thread that has entered the namespace of `a`.
    pub fn in_capture<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        in_namespace(&self.ns_a, f)
    }

    /// Runs `f` on a thread that has entered the namespace of `b`.
    pub fn in_peer<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        in_namespace(&self.ns, f)
    }

    fn remove_namespaces(&self) {
        // Deleting a namespace deletes its end of the pair, and so the pair.
        ip_quiet(&["netns", "del", &self.ns_a]);
        ip_quiet(&["netns", "del", &self.ns]);
    }
}

/// Runs `f` on a thread that has entered network namespace `ns` (network
/// namespaces belong to threads, so only that thread moves; threads it
/// starts are in `ns` too).
fn in_namespace<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::scope(|s| {
        s.spawn(|| {
            use std::os::fd::AsRawFd;
            let file = std::fs::File::open(&path).expect("netns file");
            // SAFETY: setns on an open namespace file, for this thread.
            let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns {path}: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("thread in a test namespace")
    })
}

impl Drop for Veth {
    fn drop(&mut self) {
        self.remove_namespaces();
    }
}

/// An exporter that counts the records and their packets (records,
/// packets), for tests that check nothing is lost.
pub struct Count(pub Arc<Mutex<(u64, u64)>>);

impl earlybird::Exporter for Count {
    fn write_batch(&mut self, b: &earlybird::RecordBatch) -> earlybird::Result<()> {
        let mut c = self.0.lock().unwrap();
        c.0 += b.len() as u64;
        c.1 += b
            .records
            .iter()
            .map(|r| r.packets[0] + r.packets[1])
            .sum::<u64>();
        Ok(())
    }
    fn finish(&mut self) -> earlybird::Result<()> {
        Ok(())
    }
    fn name(&self) -> &str {
        "count"
    }
}

/// Runs `cmd` to its end and returns its output; fails the test, with
/// the command's standard error, when it exits with an error.
pub fn output_ok(cmd: &mut std::process::Command) -> std::process::Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The path of tool `name` if it is installed. Under CI (`CI` set) a
/// missing tool fails the test, since `.ci/run` installs it; elsewhere the
/// test is skipped, and says so.
pub fn tool(name: &str, package: &str) -> Option<std::path::PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{name} is missing (Debian package {package}; .ci/run installs it)"
        );
        eprintln!("SKIPPED: {name} is not installed (apt-get install {package})");
    }
    found
}
