//! systemd's notifications (`NOTIFY_SOCKET`, `WATCHDOG_USEC`), read from a
//! datagram socket the test binds in place of systemd's: a live capture in
//! a network namespace says READY=1 once capturing, WATCHDOG=1 twice per
//! interval while its shards run (idle or not), STOPPING=1 on SIGTERM, and
//! sends no ping when WATCHDOG_PID names another process. Needs root
//! (skipped otherwise, and says so).

use crate::lib_common;

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `earlybird flows -i` in the capture namespace with `env`, waits
/// for its first line, reads the notifications for `secs` seconds, stops
/// it with SIGTERM and reads until STOPPING=1: (messages, exit code).
fn notified(
    net: &lib_common::Veth,
    sock: &UnixDatagram,
    env: &[(&str, String)],
    secs: u64,
) -> (Vec<String>, Option<i32>) {
    let bin = env!("CARGO_BIN_EXE_earlybird");
    let mut cap = Command::new("ip")
        .args(["netns", "exec", &net.ns_a, bin])
        .args(["flows", "--no-model", "-i", &net.a, "--duration", "120"])
        .args(["-f", "null"])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(cap.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    assert!(first.contains("capturing on"), "{first}");
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    let mut read = |got: &mut Vec<String>| {
        if let Ok(n) = sock.recv(&mut buf) {
            got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    };
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        read(&mut got);
    }
    // SAFETY: signals the child started above.
    unsafe { libc::kill(cap.id() as i32, libc::SIGTERM) };
    let code = cap.wait().unwrap().code();
    for _ in 0..10 {
        read(&mut got);
    }
    (got, code)
}

#[test]
fn a_live_capture_says_ready_pings_the_watchdog_and_says_stopping() {
    let Some(net) = lib_common::Veth::create("ebsd") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify");
    let sock = UnixDatagram::bind(&path).unwrap();
    // 400 ms: a ping every 200 ms; 3 s of an idle interface.
    let env = [
        ("NOTIFY_SOCKET", path.display().to_string()),
        ("WATCHDOG_USEC", "400000".to_string()),
    ];
    let (got, code) = notified(&net, &sock, &env, 3);
    assert_eq!(code, Some(130), "{got:?}");
    assert_eq!(got.first().map(String::as_str), Some("READY=1"), "{got:?}");
    assert_eq!(
        got.last().map(String::as_str),
        Some("STOPPING=1"),
        "{got:?}"
    );
    let pings = got.iter().filter(|m| *m == "WATCHDOG=1").count();
    assert!(pings >= 5, "{pings} pings in 3 s: {got:?}");
    assert_eq!(pings + 2, got.len(), "{got:?}");
}

#[test]
fn an_abstract_socket_is_reached_and_another_watchdog_pid_gets_no_ping() {
    let Some(net) = lib_common::Veth::create("ebse") else {
        return;
    };
    // An abstract address belongs to a network namespace: bound in the
    // capture's.
    let name = format!("earlybird-test-{}", std::process::id());
    let sock = net.in_capture(|| {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        UnixDatagram::bind_addr(&addr).unwrap()
    });
    let env = [
        ("NOTIFY_SOCKET", format!("@{name}")),
        ("WATCHDOG_USEC", "200000".to_string()),
        // PID 1 is never the probe.
        ("WATCHDOG_PID", "1".to_string()),
    ];
    let (got, code) = notified(&net, &sock, &env, 2);
    assert_eq!(code, Some(130), "{got:?}");
    assert_eq!(got, ["READY=1", "STOPPING=1"]);
}
