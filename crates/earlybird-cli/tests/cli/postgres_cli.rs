//! `earlybird voip --db postgres://…`: a real PostgreSQL server (Debian's
//! `postgresql`, started by the test in a temporary data directory as the
//! unprivileged `postgres` user, on loopback) receives the calls of the
//! voip corpus, and `earlybird calls search --json` gives exactly what the
//! same calls give from SQLite. The server is stopped at the end, also
//! when the test fails.
//!
//! Needs root (to run the server as `postgres`; skipped otherwise, and says
//! so), PostgreSQL's server binaries (a failure under CI when missing) and
//! the corpus (`../shared/corpus`).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::clickhouse_cli::csv_records;
use common::eb;

fn pg_bin() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|b| b.join("initdb").exists())
        .collect();
    found.sort();
    found.pop()
}

fn as_postgres(cmd: &Path, args: &[&str]) -> std::process::Output {
    Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(cmd)
        .args(args)
        .output()
        .unwrap()
}

/// A server in a temporary directory (TCP on 127.0.0.1 and a Unix
/// socket in its directory, database `calls`, user `eb`), stopped on
/// drop.
struct Server {
    bin: PathBuf,
    data: PathBuf,
    dir: PathBuf,
    port: String,
    _tmp: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let data = self.data.display().to_string();
        as_postgres(
            &self.bin.join("pg_ctl"),
            &["-D", &data, "-m", "immediate", "stop"],
        );
    }
}

impl Server {
    /// A new server with database `calls`; `None` (the test is skipped,
    /// and says so) without root or PostgreSQL's server.
    fn start() -> Option<Server> {
        // SAFETY: plain libc call.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED: the PostgreSQL test needs root (it runs the server as postgres)");
            return None;
        }
        let Some(bin) = pg_bin() else {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "PostgreSQL's server (Debian: postgresql) is required under CI"
            );
            eprintln!("SKIPPED: PostgreSQL's server is not installed");
            return None;
        };
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("pg");
        std::fs::create_dir(&dir).unwrap();
        assert!(Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(tmp.path())
            .status()
            .unwrap()
            .success());
        let data = dir.join("data");
        let init = as_postgres(
            &bin.join("initdb"),
            &[
                "-D",
                &data.display().to_string(),
                "-A",
                "trust",
                "-U",
                "eb",
                "--no-sync",
            ],
        );
        assert!(
            init.status.success(),
            "{}",
            String::from_utf8_lossy(&init.stderr)
        );
        let s = Server {
            bin,
            data,
            dir,
            port: free_port().to_string(),
            _tmp: tmp,
        };
        s.up();
        let created = as_postgres(
            &s.bin.join("createdb"),
            &["-h", "127.0.0.1", "-p", &s.port, "-U", "eb", "calls"],
        );
        assert!(
            created.status.success(),
            "{}",
            String::from_utf8_lossy(&created.stderr)
        );
        Some(s)
    }

    /// Starts the server (again) and waits until it takes connections.
    fn up(&self) {
        let dir = self.dir.display().to_string();
        let opts = format!(
            "-p {} -k {dir} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port
        );
        let start = as_postgres(
            &self.bin.join("pg_ctl"),
            &[
                "-D",
                &self.data.display().to_string(),
                "-o",
                &opts,
                "-l",
                &format!("{dir}/log"),
                "-w",
                "start",
            ],
        );
        assert!(
            start.status.success(),
            "{}",
            String::from_utf8_lossy(&start.stderr)
        );
    }

    /// Stops the server (fast shutdown: its connections are ended).
    fn down(&self) {
        let stop = as_postgres(
            &self.bin.join("pg_ctl"),
            &[
                "-D",
                &self.data.display().to_string(),
                "-m",
                "fast",
                "-w",
                "stop",
            ],
        );
        assert!(
            stop.status.success(),
            "{}",
            String::from_utf8_lossy(&stop.stderr)
        );
    }

    /// The database over TCP.
    fn url(&self) -> String {
        format!("postgres://eb@127.0.0.1:{}/calls", self.port)
    }

    /// The database over the Unix socket (reachable from any network
    /// namespace).
    fn socket_url(&self) -> String {
        let dir = self.dir.display().to_string().replace('/', "%2F");
        format!("postgres://eb@{dir}:{}/calls", self.port)
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn the_same_calls_land_in_postgresql_as_in_sqlite() {
    let voip = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/voip");
    if !voip.is_dir() {
        eprintln!("SKIPPED: corpus not found at {}", voip.display());
        return;
    }
    let Some(server) = Server::start() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url();
    let sqlite = tmp.path().join("calls.sqlite").display().to_string();
    let corpus = voip.display().to_string();
    for db in [&url, &sqlite] {
        let (code, o, e) = eb(&["voip", &corpus, "--db", db, "-q"]);
        assert_eq!(code, 0, "{db}: {o}\n{e}");
    }
    let (code, from_pg, e) = eb(&["calls", "search", "--db", &url, "--json"]);
    assert_eq!(code, 0, "{e}");
    let (code, from_sqlite, e) = eb(&["calls", "search", "--db", &sqlite, "--json"]);
    assert_eq!(code, 0, "{e}");
    assert!(from_pg.lines().count() > 40, "{from_pg}");
    assert_eq!(from_pg, from_sqlite);
    // An indexed search by status class, the same on both.
    let q = ["calls", "search", "--status", "4xx", "--json", "--db"];
    let (_, a, _) = eb(&[&q[..], &[url.as_str()]].concat());
    let (_, b, _) = eb(&[&q[..], &[sqlite.as_str()]].concat());
    assert!(!a.is_empty());
    assert_eq!(a, b);
    // A server that is not there is an error naming the database.
    let (code, _, e) = eb(&[
        "calls",
        "search",
        "--db",
        &format!("postgres://eb:secret@127.0.0.1:{}/calls", free_port()),
    ]);
    assert_eq!(code, 1);
    assert!(e.contains("call database postgres://eb@127.0.0.1"), "{e}");
    assert!(!e.contains("secret"), "{e}");
}

/// Calls in the database, from `earlybird calls search`.
fn calls_in(url: &str) -> usize {
    let (code, out, e) = eb(&["calls", "search", "--db", url, "--json"]);
    assert_eq!(code, 0, "{e}");
    out.lines().count()
}

/// `earlybird gen voip` of `calls` one-second calls, seed `seed`.
fn voip_pcap(dir: &Path, calls: u32, seed: u32) -> PathBuf {
    let p = dir.join(format!("calls{seed}.pcap"));
    let (code, _, e) = eb(&[
        "gen",
        "voip",
        "--calls",
        &calls.to_string(),
        "--rate",
        "20",
        "--duration",
        "1",
        "--seed",
        &seed.to_string(),
        "-o",
        p.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{e}");
    p
}

/// PostgreSQL stopped and started again under a live capture that tracks
/// calls (docs/OPERATIONS.md, "What survives what"): the calls that end
/// while it is away are held and written once it is back, none lost
/// within the bound (`--voip-db-hold`), the calls beyond the bound
/// counted (the summary and `/metrics`). The capture is in a network
/// namespace and reaches the server over its Unix socket.
#[test]
fn postgresql_stopped_and_started_again_gets_the_calls_held_meanwhile() {
    use crate::faults_cli::{eventually, Capture};
    use crate::metrics_cli::{scrape, value};
    let Some(server) = Server::start() else {
        return;
    };
    let Some(net) = crate::lib_common::Veth::create("ebpg") else {
        return;
    };
    net.capture_loopback_up();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.socket_url();
    let held =
        |port: u16| scrape(&net, port).and_then(|t| value(&t, "earlybird_call_db_held_records"));
    let unwritten = |port: u16| {
        scrape(&net, port).and_then(|t| value(&t, "earlybird_call_db_unwritten_records_total"))
    };
    // 1. A bound larger than what is held: every call reaches the database.
    let csv = tmp.path().join("calls.csv");
    let port = 19_421;
    let cap = Capture::start(
        &net,
        &[
            "--voip-db",
            &url,
            "--calls-out",
            csv.to_str().unwrap(),
            "-f",
            "null",
            "--metrics-listen",
            &port.to_string(),
        ],
    );
    net.replay(crate::faults_cli::bin(), &voip_pcap(tmp.path(), 10, 1));
    assert!(
        eventually(60, || csv_records(&csv) == 10),
        "first calls: {}",
        csv_records(&csv)
    );
    assert!(
        eventually(30, || calls_in(&url) == 10),
        "first calls in the database"
    );
    server.down();
    net.replay(crate::faults_cli::bin(), &voip_pcap(tmp.path(), 15, 2));
    assert!(
        eventually(60, || csv_records(&csv) == 25),
        "calls while down: {}",
        csv_records(&csv)
    );
    assert!(
        eventually(30, || held(port) == Some(15.0)),
        "held: {:?}",
        held(port)
    );
    server.up();
    assert!(
        eventually(60, || held(port) == Some(0.0)),
        "held after: {:?}",
        held(port)
    );
    assert_eq!(calls_in(&url), 25);
    assert_eq!(unwritten(port), Some(0.0));
    let (code, rest) = cap.end(Some(libc::SIGINT));
    assert_eq!(code, Some(130), "{rest}");
    let line = (rest.lines())
        .find(|l| l.starts_with("call database:"))
        .unwrap_or_else(|| panic!("no call database line: {rest}"));
    assert!(line.contains("failed 1 time ("), "{line}");
    assert!(
        line.contains("15 calls and 0 streams held and written after, 0 calls"),
        "{line}"
    );

    // 2. A bound of 5 records: 5 of the 12 calls that end while the server
    // is away are written after, 7 are counted.
    let csv = tmp.path().join("calls2.csv");
    let port = 19_422;
    let cap = Capture::start(
        &net,
        &[
            "--voip-db",
            &url,
            "--voip-db-hold",
            "5",
            "--calls-out",
            csv.to_str().unwrap(),
            "-f",
            "null",
            "--metrics-listen",
            &port.to_string(),
        ],
    );
    server.down();
    net.replay(crate::faults_cli::bin(), &voip_pcap(tmp.path(), 12, 3));
    assert!(
        eventually(60, || csv_records(&csv) == 12),
        "calls: {}",
        csv_records(&csv)
    );
    assert!(
        eventually(30, || unwritten(port) == Some(7.0)),
        "{:?}",
        unwritten(port)
    );
    assert_eq!(held(port), Some(5.0));
    server.up();
    assert!(
        eventually(60, || held(port) == Some(0.0)),
        "held after: {:?}",
        held(port)
    );
    assert_eq!(calls_in(&url), 30);
    let (code, rest) = cap.end(Some(libc::SIGINT));
    assert_eq!(code, Some(130), "{rest}");
    assert!(
        rest.contains("5 calls and 0 streams held and written after, 7 calls and 0 streams not written (hold bound 5 records"),
        "{rest}"
    );
    assert!(
        rest.contains("7 calls and 0 streams without a call not written"),
        "{rest}"
    );
}
