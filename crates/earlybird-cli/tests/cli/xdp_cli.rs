//! `earlybird flows -i IFACE --capture af-xdp` on a veth pair (copy mode,
//! generic XDP): a replayed capture gives the records of `--capture
//! af-packet` (the columns that do not depend on when the packets were
//! sent) and the flows and packets of the file; the XDP program is on the interface while the
//! capture runs and gone after SIGTERM and after SIGKILL (the BPF link
//! dies with the process); an interface with an address is refused unless
//! `--xdp-take-traffic`, and what AF_XDP cannot do names `--capture
//! af-packet`. Needs root (skipped otherwise, and says so).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::filter_cli::timeless;
use crate::lib_common;

#[test]
fn af_xdp_gives_the_records_of_af_packet_and_of_the_file() {
    let Some(net) = lib_common::Veth::create("ebx") else {
        return;
    };
    let bin = env!("CARGO_BIN_EXE_earlybird");
    let pcap = lib_common::testdata().join("pcap/ndpi__iphone.pcap");
    let dir = tempfile::tempdir().unwrap();
    let (file, packet, xdp) = (
        dir.path().join("file.csv"),
        dir.path().join("packet.csv"),
        dir.path().join("xdp.csv"),
    );
    let out = Command::new(bin)
        .args(["flows", "--no-model", "-q", "-o"])
        .arg(&file)
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(out.status.success());
    for (csv, how) in [(&packet, "af-packet"), (&xdp, "af-xdp")] {
        let path = csv.display().to_string();
        let (code, err) =
            net.capture_a_replay(bin, &["--no-model", "--capture", how, "-o", &path], &pcap);
        assert_eq!(code, Some(130), "{err}");
        assert!(
            err.contains("interface: 500 packets offered"),
            "{how}: {err}"
        );
        if how == "af-xdp" {
            assert!(err.contains("AF_XDP (copy mode"), "{err}");
        }
    }
    // The two live captures of the same replay: the same records.
    let live = timeless(&packet);
    assert!(live.len() > 40);
    assert_eq!(timeless(&xdp), live);
    // The file: the same flows (a replay closes the capture's gaps, so a
    // flow the file ends on idle time is one flow live) and packets.
    let keys = |rows: &[String]| {
        let mut k: Vec<String> = rows
            .iter()
            .map(|r| r.split(',').take(14).collect::<Vec<_>>().join(","))
            .collect();
        k.dedup();
        k
    };
    let packets = |rows: &[String]| -> u64 {
        rows.iter()
            .map(|r| {
                let f: Vec<&str> = r.split(',').collect();
                f[14].parse::<u64>().unwrap() + f[15].parse::<u64>().unwrap()
            })
            .sum()
    };
    let want = timeless(&file);
    assert_eq!(keys(&live), keys(&want));
    assert_eq!(packets(&live), packets(&want));
}

/// Whether an XDP program is attached to `dev` in namespace `ns`.
fn has_xdp(ns: &str, dev: &str) -> bool {
    let out = Command::new("ip")
        .args(["-n", ns, "link", "show", "dev", dev])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains("prog/xdp")
}

/// Starts `flows -i A --capture af-xdp ARGS` in the capture namespace and
/// waits for it to say it captures.
fn start(net: &lib_common::Veth, args: &[&str]) -> std::process::Child {
    let mut cap = Command::new("ip")
        .args(["netns", "exec", &net.ns_a, env!("CARGO_BIN_EXE_earlybird")])
        .args(["flows", "--no-model", "-o", "/dev/null", "-i", &net.a])
        .args(["--capture", "af-xdp"])
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(cap.stderr.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("capturing on"), "{first}");
    cap
}

#[test]
fn the_xdp_program_is_gone_after_sigterm_and_after_sigkill() {
    let Some(net) = lib_common::Veth::create("ebk") else {
        return;
    };
    for signal in [libc::SIGTERM, libc::SIGKILL] {
        assert!(!has_xdp(&net.ns_a, &net.a));
        let mut cap = start(&net, &[]);
        assert!(has_xdp(&net.ns_a, &net.a), "signal {signal}");
        // SAFETY: signals the child started above (`ip netns exec` runs
        // earlybird in its own process).
        unsafe { libc::kill(cap.id() as i32, signal) };
        cap.wait().unwrap();
        assert!(!has_xdp(&net.ns_a, &net.a), "after signal {signal}");
    }
}

#[test]
fn an_interface_with_addresses_is_refused_unless_told() {
    let Some(net) = lib_common::Veth::create("ebr") else {
        return;
    };
    let bin = env!("CARGO_BIN_EXE_earlybird");
    let ok = Command::new("ip")
        .args([
            "-n",
            &net.ns_a,
            "addr",
            "add",
            "10.213.7.1/24",
            "dev",
            &net.a,
        ])
        .status()
        .unwrap();
    assert!(ok.success());
    let run = |extra: &[&str]| {
        Command::new("ip")
            .args(["netns", "exec", &net.ns_a, bin])
            .args(["flows", "--no-model", "-i", &net.a, "--capture", "af-xdp"])
            .args(extra)
            .args(["--duration", "0.2", "-o", "/dev/null"])
            .output()
            .unwrap()
    };
    let out = run(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("has addresses") && err.contains("--xdp-take-traffic"),
        "{err}"
    );
    assert!(err.contains("--capture af-packet"), "{err}");
    let out = run(&["--xdp-take-traffic"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("AF_XDP ("), "{err}");
    // Two shards: not with AF_XDP (yet), and the error says what can.
    let out = run(&["--xdp-take-traffic", "-s", "2"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("one shard") && err.contains("--capture af-packet"),
        "{err}"
    );
}
