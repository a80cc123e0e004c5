//! The `community_id` of every flow equals what PyPI's `communityid`
//! (Corelight's reference implementation, an independent code base)
//! computes from the same record's 5-tuple: on every flow of the corpus's
//! tunnel captures (IPv4, IPv6, ICMP, ICMPv6, SCTP, GRE, ...; seed 0, the
//! default) and of its nDPI captures (seed from a `--config` file), by
//! `community_id_check.py`.
//!
//! Needs python3 with `communityid` (installed by `.ci/run`) and the corpus
//! (`../shared/corpus`): missing, the tests fail under CI (`CI=true`) and
//! say SKIPPED elsewhere.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::eb;

fn corpus() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    let ci = std::env::var("CI").as_deref() == Ok("true");
    let py = Command::new("python3")
        .args(["-c", "import communityid"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !py || !p.is_dir() {
        assert!(!ci, "python3 with communityid and the corpus are needed");
        eprintln!("SKIPPED: python3 with communityid, or the corpus, missing");
        return None;
    }
    Some(p)
}

/// Runs the check script; returns what it printed, panics with it when a
/// row differs.
fn check(csv: &Path, seed: u16) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cli/community_id_check.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(csv)
        .arg(seed.to_string())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{text}");
    text
}

/// Flows checked, from the script's summary line.
fn flows_checked(summary: &str) -> usize {
    summary
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn every_flow_of_the_tunnel_captures_has_the_reference_id() {
    let Some(c) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("flows.csv");
    let dir = c.join("tunnels");
    let (code, _, err) = eb(&[
        "flows",
        dir.to_str().unwrap(),
        "-o",
        csv.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(code, 0, "{err}");
    let text = check(&csv, 0);
    assert!(flows_checked(&text) > 500, "{text}");
    // The set covers what the ID treats apart: IPv6, ICMP, ICMPv6, ports
    // (TCP, UDP) and protocols without them.
    for proto in [" 1:", " 6:", " 17:", " 58:"] {
        assert!(text.contains(proto), "no flow of protocol{proto} {text}");
    }
    assert!(!text.contains("(0 IPv6)"), "{text}");
}

#[test]
fn a_seed_from_the_configuration_file_gives_the_reference_ids_of_that_seed() {
    let Some(c) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("flows.csv");
    let conf = tmp.path().join("probe.toml");
    let pcaps = c.join("classify/dev/ndpi/pcap");
    let inputs: Vec<String> = [
        "443-curl.pcap",
        "dns_ambiguous_names.pcap",
        "6in4tunnel.pcap",
        "bfd.pcap",
        "diameter.pcap",
    ]
    .iter()
    .map(|n| format!("{:?}", pcaps.join(n).display().to_string()))
    .collect();
    std::fs::write(
        &conf,
        format!(
            "inputs = [{}]\noutput = {:?}\ncommunity-id-seed = 4242\nquiet = true\n",
            inputs.join(", "),
            csv.display().to_string()
        ),
    )
    .unwrap();
    let (code, _, err) = eb(&["flows", "--config", conf.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let text = check(&csv, 4242);
    assert!(flows_checked(&text) > 20, "{text}");
    // The seed changes the IDs: the same run's seed-0 check must fail.
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cli/community_id_check.py");
    let st = Command::new("python3")
        .arg(script)
        .arg(&csv)
        .arg("0")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(!st.success(), "seed 4242 gave the IDs of seed 0");
}

/// The RTP stream records carry the Community ID of their UDP 5-tuple:
/// each equals the reference's and the `community_id` of a flow record of
/// the same run (the stream's flow), with the run's seed.
#[test]
fn rtp_streams_carry_the_id_of_their_flow() {
    let Some(c) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (flows, streams) = (tmp.path().join("flows.csv"), tmp.path().join("streams.csv"));
    let input = c.join("voip/heplify__rtp_rtcp_sip.pcap");
    let (code, _, err) = eb(&[
        "flows",
        input.to_str().unwrap(),
        "-o",
        flows.to_str().unwrap(),
        "--streams-out",
        streams.to_str().unwrap(),
        "--community-id-seed",
        "77",
        "-q",
    ]);
    assert_eq!(code, 0, "{err}");
    check(&flows, 77);
    let ids = |p: &Path| -> Vec<(String, String, String, String, String)> {
        crate::ipfix_cli::csv_rows(p)
            .into_iter()
            .map(|r| {
                let g = |k: &str| r[k].clone();
                (
                    g("src"),
                    g("sport"),
                    g("dst"),
                    g("dport"),
                    g("community_id"),
                )
            })
            .collect()
    };
    let (f, s) = (ids(&flows), ids(&streams));
    assert!(!s.is_empty(), "no RTP stream");
    for st in &s {
        assert!(st.4.starts_with("1:"), "{st:?}");
        // The flow of either direction of the stream.
        let found = f.iter().any(|x| {
            x.4 == st.4
                && ((x.0 == st.0 && x.1 == st.1 && x.2 == st.2 && x.3 == st.3)
                    || (x.0 == st.2 && x.1 == st.3 && x.2 == st.0 && x.3 == st.1))
        });
        assert!(found, "stream {st:?} has no flow of its 5-tuple and ID");
    }
}
