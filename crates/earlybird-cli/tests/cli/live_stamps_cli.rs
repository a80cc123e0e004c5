//! Live capture stamps (`source/hwstamp.rs`): a real capture replayed
//! between the two namespaces of a veth pair is captured with its packets
//! counted by the stamp the kernel gave them; veth offers software stamps
//! only, so the summary says software for every packet, and asking for
//! hardware stamps on it is an error naming the interface. Needs root
//! (skipped otherwise, and says so; CI runs as root).

use crate::lib_common;

use std::process::Command;

/// The number before `word` in `line` (`packets: 12 read` → 12).
fn number_before(text: &str, prefix: &str, word: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(prefix))?;
    let at = line.find(word)?;
    line[..at].split_whitespace().last()?.parse().ok()
}

#[test]
fn the_summary_says_which_stamp_every_live_packet_got() {
    let Some(net) = lib_common::Veth::create("ebts") else {
        return;
    };
    let bin = env!("CARGO_BIN_EXE_earlybird");
    let pcap = lib_common::testdata().join("pcap/ndpi__iphone.pcap");
    let (code, rest) = net.capture_a_replay(
        bin,
        &["--no-model", "-f", "null", "-s", "2", "--duration", "60"],
        &pcap,
    );
    assert_eq!(code, Some(130), "{rest}");
    let read = number_before(&rest, "packets: ", "read").unwrap();
    assert!(read > 400, "{rest}");
    let line = rest
        .lines()
        .find(|l| l.starts_with("timestamps: "))
        .unwrap_or_else(|| panic!("no timestamps line: {rest}"));
    assert_eq!(
        line,
        format!(
            "timestamps: software {read} packets ({} offers no hardware stamps)",
            net.a
        ),
        "{rest}"
    );

    // Hardware stamps asked for on veth: an error naming the interface,
    // before anything is captured.
    let out = Command::new("ip")
        .args(["netns", "exec", &net.ns_a, bin])
        .args(["flows", "--no-model", "-f", "null", "-i", &net.a])
        .args(["--hw-timestamps", "--duration", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("{} offers no hardware receive timestamps", net.a)),
        "{err}"
    );
    assert!(!err.contains("capturing on"), "{err}");
}
