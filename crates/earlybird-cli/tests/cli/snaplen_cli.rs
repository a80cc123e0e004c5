//! A short snap length keeps whole the frames that may carry a handshake
//! (`source/snaprule.rs`): captures of the shared corpus (QUIC v1 and
//! draft-29 Initials of 1,250 bytes and more) and the project's test data
//! (TLS ClientHellos) replayed over a veth pair and captured with
//! `--snaplen 128`, through AF_PACKET (the rule in the kernel's program)
//! and AF_XDP (the rule in the walk), give the SNIs the files give. Cut
//! at 128 bytes, no QUIC Initial would show its name.
//! Needs root and the corpus (skipped otherwise, and says so).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::lib_common;

/// The (flow key, SNI) pairs of a JSON lines output.
fn snis(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            let r: serde_json::Value = serde_json::from_str(l).ok()?;
            let sni = r["sni"].as_str()?;
            Some(format!(
                "{} {}:{} {}:{} {sni}",
                r["proto"], r["src"], r["sport"], r["dst"], r["dport"]
            ))
        })
        .collect()
}

#[test]
fn live_snaplen_128_keeps_the_handshakes_whole() {
    let Some(corpus) = lib_common::corpus() else {
        return;
    };
    let Some(net) = lib_common::Veth::create("ebs") else {
        return;
    };
    let bin = env!("CARGO_BIN_EXE_earlybird");
    let ndpi = corpus.join("classify/dev/ndpi/pcap");
    // (Not Google QUIC before Q046, whose packets have no long header: the
    // rule does not keep them whole.)
    let pcaps = [
        ndpi.join("quic-29.pcap"),
        lib_common::testdata().join("pcap/ndpi__iphone.pcap"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for pcap in &pcaps {
        let out = Command::new(bin)
            .args([
                "flows",
                "--no-model",
                "-q",
                "--analyzer",
                "tls",
                "-f",
                "jsonl",
            ])
            .args(["-o", "-"])
            .arg(pcap)
            .output()
            .unwrap();
        assert!(out.status.success());
        let want = snis(&String::from_utf8_lossy(&out.stdout));
        assert!(!want.is_empty(), "{}", pcap.display());
        for how in ["af-packet", "af-xdp"] {
            let json = dir.path().join(format!("{how}.jsonl"));
            let path = json.display().to_string();
            let args = [
                "--no-model",
                "--analyzer",
                "tls",
                "--snaplen",
                "128",
                "--capture",
                how,
                "-f",
                "jsonl",
                "-o",
                &path,
            ];
            let (code, err) = net.capture_a_replay(bin, &args, Path::new(pcap));
            assert_eq!(code, Some(130), "{err}");
            let got = snis(&std::fs::read_to_string(&json).unwrap());
            assert_eq!(got, want, "{how}: {}", pcap.display());
        }
    }
}
