//! The Grafana dashboard (`packaging/grafana/earlybird.json`), checked by
//! `scripts/check_dashboard.py`: its structure against the models of
//! Grafana's dashboard schema (PyPI's grafana-foundation-sdk), and every
//! PromQL expression of it against a real Prometheus (Debian package
//! prometheus) that scrapes a live capture in a network namespace while a
//! replay raises an alarm, fills the probe's ring until the kernel drops
//! packets (seen in the metrics while the run goes), and feeds every series the dashboard shows, media included.
//! Grafana itself is not run. The live part needs root and the corpus
//! (skipped otherwise, and says so); without the Python package or
//! Prometheus the tests are skipped, except under CI where .ci/run
//! installs them.

use crate::lib_common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether python3 imports the Grafana SDK; under CI it must.
fn have_sdk() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import grafana_foundation_sdk"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "python3 cannot import grafana_foundation_sdk (.ci/run installs it)"
        );
        eprintln!("SKIPPED: pip install grafana-foundation-sdk");
    }
    ok
}

/// `scripts/check_dashboard.py` with `args` (in namespace `ns` if given):
/// (success, what it printed).
fn check(ns: Option<&str>, args: &[&str]) -> (bool, String) {
    let mut cmd = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "python3"]);
            c
        }
        None => Command::new("python3"),
    };
    let out = cmd
        .arg(root().join("scripts/check_dashboard.py"))
        .arg(root().join("packaging/grafana/earlybird.json"))
        .args(args)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

#[test]
fn the_dashboard_follows_grafanas_schema() {
    if !have_sdk() {
        return;
    }
    let (ok, said) = check(None, &[]);
    assert!(ok, "{said}");
    assert!(said.contains(" 0 errors"), "{said}");
}

/// `GET path` on `port` of the capture namespace's loopback: the body of
/// a 200 answer.
pub(crate) fn get(net: &lib_common::Veth, port: u16, path: &str) -> Option<String> {
    net.in_capture(|| {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(s, "GET {path} HTTP/1.0\r\nHost: probe\r\n\r\n").ok()?;
        let mut r = String::new();
        s.read_to_string(&mut r).ok()?;
        let (head, body) = r.split_once("\r\n\r\n")?;
        (head.split(' ').nth(1) == Some("200")).then(|| body.to_string())
    })
}

/// The value of the sample `name` (labels included, as written).
pub(crate) fn value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

/// Polls `ok` on the probe's metrics for up to a minute: the last text.
pub(crate) fn until_metrics(
    net: &lib_common::Veth,
    port: u16,
    ok: impl Fn(&str) -> bool,
) -> String {
    let until = Instant::now() + Duration::from_secs(60);
    let mut now = String::new();
    while Instant::now() < until {
        now = get(net, port, "/metrics").unwrap_or_default();
        if ok(&now) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    now
}

/// A child this test started, killed if the test fails before it is
/// stopped.
struct Running(Child);

impl Running {
    /// Ends it with `sig` and waits for it: its exit code.
    fn stop(&mut self, sig: i32) -> Option<i32> {
        // SAFETY: signals a child process this test started.
        unsafe { libc::kill(self.0.id() as i32, sig) };
        self.0.wait().unwrap().code()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[test]
fn every_query_of_the_dashboard_returns_data_from_prometheus() {
    let Some(net) = lib_common::Veth::create("ebgf") else {
        return;
    };
    let Some(prometheus) = lib_common::tool("prometheus", "prometheus") else {
        return;
    };
    let Some(corpus) = lib_common::corpus() else {
        return;
    };
    if !have_sdk() {
        return;
    }
    net.capture_loopback_up();
    let bin = env!("CARGO_BIN_EXE_earlybird");
    let dir = tempfile::tempdir().unwrap();
    // Idle seconds count 0 packets: after a 3-second warm-up, the replay's
    // first busy second raises the alarm on `packets`.
    let alarms = dir.path().join("alarms.toml");
    std::fs::write(
        &alarms,
        "[[alarm]]\nseries = \"packets\"\nmethod = \"ewma\"\nwarmup = 3\n",
    )
    .unwrap();
    let (metrics_port, prom_port) = (19_465, 19_091);
    let mut cap = Running(
        Command::new("ip")
            .args(["netns", "exec", &net.ns_a, bin])
            .args(["flows", "--idle-timeout", "1", "--analyzer", "media"])
            .args(["-i", &net.a, "--duration", "300", "-f", "null"])
            .args(["--ring-mib", "1"])
            .arg("--alarms")
            .arg(&alarms)
            .args(["--metrics-listen", &metrics_port.to_string()])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut err = BufReader::new(cap.0.stderr.take().unwrap());
    let mut said = String::new();
    while !said.contains("capturing on") {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            break;
        }
        said.push_str(&line);
    }
    assert!(said.contains("capturing on"), "{said}");

    // Prometheus in the same namespace, scraping every second.
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: earlybird\n    static_configs:\n\
             \x20     - targets: [\"127.0.0.1:{metrics_port}\"]\n"
        ),
    )
    .unwrap();
    let mut prom = Running(
        Command::new("ip")
            .args(["netns", "exec", &net.ns_a])
            .arg(&prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let until = Instant::now() + Duration::from_secs(60);
    while get(&net, prom_port, "/-/ready").is_none() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        get(&net, prom_port, "/-/ready").is_some(),
        "Prometheus is not ready"
    );

    // The warm-up passes on idle seconds.
    let now = until_metrics(&net, metrics_port, |m| {
        value(m, "earlybird_seconds_total") >= Some(5.0)
    });
    assert!(value(&now, "earlybird_seconds_total") >= Some(5.0), "{now}");
    // Applications and transports (a phone's traffic, 20 times), sent
    // while the probe is stopped: its 1 MiB ring fills and the kernel
    // drops the rest (the summary counts them, and the metrics while the
    // run goes).
    // SAFETY: signals the child process started above.
    unsafe { libc::kill(cap.0.id() as i32, libc::SIGSTOP) };
    let sent = Command::new("ip")
        .args(["netns", "exec", &net.ns, bin, "replay", "--loops", "20"])
        .args(["-i", &net.b])
        .arg(lib_common::testdata().join("pcap/ndpi__iphone.pcap"))
        .output();
    // SAFETY: as above.
    unsafe { libc::kill(cap.0.id() as i32, libc::SIGCONT) };
    assert!(sent.unwrap().status.success());
    // And an RTP call for the media analyzer.
    // The media analyzer decides on the packets' spacing: the call goes
    // at its own pace (33 packets a second, 7 s).
    let sent = Command::new("ip")
        .args(["netns", "exec", &net.ns, bin, "replay", "--pps", "33"])
        .args(["-i", &net.b])
        .arg(corpus.join("voip/sipp__g711a.pcap"))
        .output()
        .unwrap();
    assert!(sent.status.success(), "{sent:?}");
    let now = until_metrics(&net, metrics_port, |m| {
        value(m, "earlybird_alarms_total{series=\"packets\"}") >= Some(1.0)
            && m.lines()
                .any(|l| l.starts_with("earlybird_media_flows_ended_total{"))
    });
    assert!(
        value(&now, "earlybird_alarms_total{series=\"packets\"}") >= Some(1.0),
        "{now}"
    );
    // The kernel's drops are a live metric, not only the summary's.
    let now = until_metrics(&net, metrics_port, |m| {
        value(m, "earlybird_kernel_dropped_packets_total") > Some(0.0)
    });
    let live_drops = value(&now, "earlybird_kernel_dropped_packets_total");
    assert!(live_drops > Some(0.0), "{now}");
    assert!(
        value(&now, "earlybird_kernel_packets_total") > live_drops,
        "{now}"
    );
    assert!(
        value(&now, "earlybird_media_flows_decided_total{kind=\"video\"}") >= Some(1.0)
            || value(&now, "earlybird_media_flows_decided_total{kind=\"audio\"}") >= Some(1.0),
        "{now}"
    );

    let url = format!("http://127.0.0.1:{prom_port}");
    let (ok, said) = check(
        Some(&net.ns_a),
        &[
            "--prometheus",
            &url,
            "--wait",
            "120",
            "--rate-interval",
            "15s",
        ],
    );
    prom.stop(libc::SIGTERM);
    assert_eq!(cap.stop(libc::SIGINT), Some(130));
    let mut summary = String::new();
    err.read_to_string(&mut summary).unwrap();
    let dropped = summary
        .lines()
        .find_map(|l| l.strip_prefix("interface: "))
        .and_then(|l| l.split(", ").nth(1))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok());
    eprintln!("kernel drops: {dropped:?} (metrics during the run: {live_drops:?})");
    assert!(dropped > Some(0), "{summary}");
    // The metric is never ahead of the end's count.
    assert!(live_drops <= dropped.map(|d| d as f64), "{summary}");
    eprintln!("{said}");
    assert!(ok, "{said}");
    // "queries: N of M returned data": all of them, and every panel's.
    let all = said
        .lines()
        .find_map(|l| l.strip_prefix("queries: "))
        .and_then(|l| l.strip_suffix(" returned data"))
        .and_then(|l| l.split_once(" of "))
        .unwrap_or_default();
    assert_eq!(all.0, all.1, "{said}");
    assert!(all.1.parse::<usize>().unwrap_or(0) >= 30, "{said}");
}
