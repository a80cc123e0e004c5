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

/// A server in `dir`, stopped on drop.
struct Server {
    bin: PathBuf,
    data: PathBuf,
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

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn the_same_calls_land_in_postgresql_as_in_sqlite() {
    // SAFETY: plain libc call.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: the PostgreSQL test needs root (it runs the server as postgres)");
        return;
    }
    let Some(bin) = pg_bin() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "PostgreSQL's server (Debian: postgresql) is required under CI"
        );
        eprintln!("SKIPPED: PostgreSQL's server is not installed");
        return;
    };
    let voip = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/voip");
    if !voip.is_dir() {
        eprintln!("SKIPPED: corpus not found at {}", voip.display());
        return;
    }
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
    let (data_s, dir_s) = (data.display().to_string(), dir.display().to_string());
    let init = as_postgres(
        &bin.join("initdb"),
        &["-D", &data_s, "-A", "trust", "-U", "eb", "--no-sync"],
    );
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let port = free_port().to_string();
    let opts = format!("-p {port} -k {dir_s} -c listen_addresses=127.0.0.1 -c fsync=off");
    let start = as_postgres(
        &bin.join("pg_ctl"),
        &[
            "-D",
            &data_s,
            "-o",
            &opts,
            "-l",
            &format!("{dir_s}/log"),
            "-w",
            "start",
        ],
    );
    let _server = Server {
        bin: bin.clone(),
        data: data.clone(),
    };
    assert!(
        start.status.success(),
        "{}",
        String::from_utf8_lossy(&start.stderr)
    );
    let created = as_postgres(
        &bin.join("createdb"),
        &["-h", "127.0.0.1", "-p", &port, "-U", "eb", "calls"],
    );
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );

    let url = format!("postgres://eb@127.0.0.1:{port}/calls");
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
