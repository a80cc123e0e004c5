//! `earlybird flows --filter EXPRESSION`: for captures of the shared corpus
//! and expressions of every kind (host, net, port, proto, vlan, TCP flags),
//! the records of `flows FILE --filter E` are those of `tcpdump -r FILE -w
//! - E | earlybird flows -`, and the summary counts what was left out; the
//! same expressions live on a veth pair (run in the kernel, tagged frames
//! judged once their tag is back) give the records of the file; a bad
//! expression is an error naming it with libpcap's message; the
//! configuration file's `filter` key does what the option does.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::eb;
use crate::lib_common;

/// The corpus captures and the expressions run over each: every one of
/// them keeps some packets of its capture and leaves some out (checked).
fn cases() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        (
            "classify/dev/ndpi/pcap/opera-vpn.pcapng",
            vec![
                "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0",
                "tcp port 51420 or tcp port 51424",
            ],
        ),
        (
            "classify/dev/ndpi/pcap/iphone.pcap",
            vec![
                "host 17.248.176.75",
                "src net 17.0.0.0/8",
                "net 192.168.2.0/24 and udp",
                "tcp",
            ],
        ),
        (
            "tunnels/zeek__mixed-vlan-mpls.pcap",
            vec![
                "vlan",
                "vlan 4093 and tcp",
                "not vlan",
                "tcp[tcpflags] & tcp-syn != 0",
            ],
        ),
        (
            "classify/dev/ndpi/pcap/bad-dns-traffic.pcap",
            vec!["dst host 4.2.2.4", "ip proto 17 and less 100"],
        ),
    ]
}

/// The summary's count after `what` (`packets: N read`, `filter: N packets`).
fn count_after(stderr: &str, what: &str) -> u64 {
    let at = stderr
        .find(what)
        .unwrap_or_else(|| panic!("no {what:?} in {stderr}"));
    stderr[at + what.len()..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count after {what:?} in {stderr}"))
}

/// The records of a CSV, sorted (shards and chunks may order them apart).
fn sorted(csv: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(csv).unwrap();
    let mut v: Vec<String> = text.lines().map(str::to_string).collect();
    v.sort();
    v
}

#[test]
fn a_filtered_file_gives_the_records_of_tcpdumps_copy() {
    let Some(corpus) = lib_common::corpus() else {
        return;
    };
    let Some(tcpdump) = lib_common::tool("tcpdump", "tcpdump") else {
        return;
    };
    let bin = env!("CARGO_BIN_EXE_earlybird");
    let dir = tempfile::tempdir().unwrap();
    let (ours, theirs) = (dir.path().join("ours.csv"), dir.path().join("theirs.csv"));
    for (file, exprs) in cases() {
        let file = corpus.join(file);
        let f = file.to_str().unwrap();
        let (code, _, all) = eb(&["flows", "--no-model", "-o", "/dev/null", f]);
        assert_eq!(code, 0, "{all}");
        let total = count_after(&all, "packets: ");
        for expr in exprs {
            let (code, _, err) = eb(&[
                "flows",
                "--no-model",
                "--filter",
                expr,
                "-o",
                ours.to_str().unwrap(),
                f,
            ]);
            assert_eq!(code, 0, "{f} [{expr}]: {err}");
            // tcpdump's copy keeps the nanoseconds of the capture.
            let mut dump = Command::new(&tcpdump)
                .args(["--time-stamp-precision=nano", "-r", f, "-w", "-", expr])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let piped = Command::new(bin)
                .args(["flows", "--no-model", "-o"])
                .arg(&theirs)
                .arg("-")
                .stdin(dump.stdout.take().unwrap())
                .output()
                .unwrap();
            assert!(dump.wait().unwrap().success());
            let piped_err = String::from_utf8_lossy(&piped.stderr);
            assert!(piped.status.success(), "{piped_err}");
            let kept = count_after(&piped_err, "packets: ");
            assert!(kept > 0 && kept < total, "{f} [{expr}]: {kept} of {total}");
            assert_eq!(count_after(&err, "packets: "), kept, "{f} [{expr}]: {err}");
            assert_eq!(
                count_after(&err, "filter: "),
                total - kept,
                "{f} [{expr}]: {err}"
            );
            assert_eq!(sorted(&ours), sorted(&theirs), "{f} [{expr}]");
        }
    }
}

#[test]
fn a_bad_expression_is_named_with_libpcaps_message() {
    let pcap = lib_common::testdata().join("pcap/ndpi__iphone.pcap");
    let (code, _, err) = eb(&[
        "flows",
        "--no-model",
        "--filter",
        "tcp porrt 80",
        pcap.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("\"tcp porrt 80\""), "{err}");
    assert!(
        err.contains("libpcap: ") && err.contains("syntax error"),
        "{err}"
    );
}

#[test]
fn the_configuration_files_filter_key_filters() {
    let pcap = lib_common::testdata().join("pcap/ndpi__iphone.pcap");
    let dir = tempfile::tempdir().unwrap();
    let (by_file, by_option) = (dir.path().join("a.csv"), dir.path().join("b.csv"));
    let conf = dir.path().join("run.toml");
    std::fs::write(
        &conf,
        format!(
            "inputs = [{:?}]\nfilter = \"udp\"\nno-model = true\noutput = [{:?}]\n",
            pcap.display().to_string(),
            by_file.display().to_string()
        ),
    )
    .unwrap();
    let (code, _, err) = eb(&["flows", "--config", conf.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let left_out = count_after(&err, "filter: ");
    assert!(left_out > 0, "{err}");
    let (code, _, err2) = eb(&[
        "flows",
        "--no-model",
        "--filter",
        "udp",
        "-o",
        by_option.to_str().unwrap(),
        pcap.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err2}");
    assert_eq!(count_after(&err2, "filter: "), left_out);
    assert_eq!(sorted(&by_file), sorted(&by_option));
    let records = sorted(&by_file);
    let mut flows = records.iter().filter(|l| !l.starts_with("src,"));
    assert!(
        flows.all(|l| l.split(',').nth(4) == Some("17")),
        "{records:?}"
    );
}

/// The columns of a record that do not depend on when the packets were
/// sent (a replay keeps neither the capture's times nor its gaps): key,
/// VLAN, tunnel, MACs, then the packet and byte counts and sizes.
pub(crate) fn timeless(csv: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let timed = ["first_ts", "last_ts", "duration_ns"];
    let last = header.iter().position(|h| *h == "bwd_size_std").unwrap();
    let keep: Vec<usize> = (0..=last)
        .filter(|&i| !timed.contains(&header[i]))
        .collect();
    let mut v: Vec<String> = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            keep.iter().map(|&i| f[i]).collect::<Vec<_>>().join(",")
        })
        .collect();
    v.sort();
    v
}

#[test]
fn live_the_kernel_filter_keeps_what_the_file_filter_keeps() {
    let Some(corpus) = lib_common::corpus() else {
        return;
    };
    let Some(net) = lib_common::Veth::create("ebf") else {
        return;
    };
    let bin = env!("CARGO_BIN_EXE_earlybird");
    let dir = tempfile::tempdir().unwrap();
    let (file_csv, live_csv) = (dir.path().join("file.csv"), dir.path().join("live.csv"));
    let pcap = corpus.join("tunnels/zeek__mixed-vlan-mpls.pcap");
    for expr in [
        "vlan 4093 and tcp",
        "not vlan",
        "tcp[tcpflags] & tcp-syn != 0",
    ] {
        let (code, _, ferr) = eb(&[
            "flows",
            "--no-model",
            "--filter",
            expr,
            "-o",
            file_csv.to_str().unwrap(),
            pcap.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{ferr}");
        let live = live_csv.display().to_string();
        let (code, err) =
            net.capture_a_replay(bin, &["--no-model", "--filter", expr, "-o", &live], &pcap);
        assert_eq!(code, Some(130), "{err}");
        assert_eq!(
            count_after(&err, "packets: "),
            count_after(&ferr, "packets: "),
            "[{expr}] {err}"
        );
        // Only the replay's packets cross the pair (IPv6 is off on it).
        assert_eq!(
            count_after(&err, "filter: "),
            count_after(&ferr, "filter: "),
            "[{expr}] {err}"
        );
        assert_eq!(timeless(&live_csv), timeless(&file_csv), "[{expr}]");
    }
}
