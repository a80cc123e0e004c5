//! The labelled traffic lab (`lab/run.py`, docs/LAB.md) end to end: two
//! short lab captures (different seeds and link conditions) of real
//! servers and clients between network namespaces; every flow of the truth
//! CSV is a flow `earlybird flows` finds (same 5-tuple) and every TCP or
//! UDP flow it finds is in the truth CSV, every service's label is
//! present, nDPI (`lab/ndpi_check.py`) agrees with the labels of the
//! protocols it dissects whatever the port, and a C4.5 tree trained
//! without ports on one capture classifies the other above a measured
//! floor.
//!
//! Needs root and the lab's programs (Debian packages installed by
//! `.ci/run`); without them the test says SKIPPED, and fails under CI.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

fn lab_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lab")
}

/// Runs `lab/run.py`; `None` (SKIPPED outside CI) when a program is missing.
fn lab_run(out: &Path, seed: u32, conditions: &str, secs: u32) -> Option<()> {
    let r = Command::new("python3")
        .arg(lab_dir().join("run.py"))
        .args(["--seed", &seed.to_string(), "--conditions", conditions])
        .args(["--duration", &secs.to_string(), "-o"])
        .arg(out)
        .output()
        .expect("python3 runs");
    let err = String::from_utf8_lossy(&r.stderr);
    if !r.status.success() && err.contains("missing programs") && !under_ci() {
        eprintln!("SKIPPED: {}", err.trim());
        return None;
    }
    assert!(r.status.success(), "lab/run.py --seed {seed}: {err}");
    Some(())
}

type Tuple = (String, String, String, String, String);

/// (proto number, lower endpoint, higher endpoint): direction-free key.
fn key(proto: &str, a: &str, ap: &str, b: &str, bp: &str) -> Tuple {
    let p = match proto {
        "TCP" => "6",
        "UDP" => "17",
        x => x,
    };
    let (x, y) = ((a, ap), (b, bp));
    let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
    (p.into(), lo.0.into(), lo.1.into(), hi.0.into(), hi.1.into())
}

fn csv_rows(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = text.lines();
    let head = lines
        .next()
        .unwrap_or("")
        .split(',')
        .map(String::from)
        .collect();
    let rows = lines
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    (head, rows)
}

fn col(head: &[String], name: &str) -> usize {
    head.iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name}"))
}

/// Accuracy in % printed by `evaluate` ("model c45 (N = 4): 498 flows,
/// accuracy 95.58 %, ...").
fn accuracy(report: &str) -> f64 {
    report
        .lines()
        .find_map(|l| {
            let rest = l.strip_prefix("model ")?.split("accuracy ").nth(1)?;
            rest.split_whitespace().next()?.parse::<f64>().ok()
        })
        .unwrap_or_else(|| panic!("no accuracy in:\n{report}"))
}

#[test]
fn lab_captures_are_labelled_flow_by_flow_and_train_a_classifier() {
    let _alone = crate::netlab::alone();
    // SAFETY: plain libc call.
    if unsafe { libc::geteuid() } != 0 {
        assert!(!under_ci(), "the lab test needs root under CI");
        eprintln!("SKIPPED: the lab needs root (network namespaces, TAP devices)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    if lab_run(d, 101, "wan", 15).is_none() {
        return;
    }
    lab_run(d, 102, "lan", 15).expect("programs checked by the first run");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let (a_pcap, a_truth) = (d.join("lab-101.pcap"), d.join("lab-101.truth.csv"));
    let (b_pcap, b_truth) = (d.join("lab-102.pcap"), d.join("lab-102.truth.csv"));

    // Every truth flow is a flow of `earlybird flows`, every label present.
    let all_labels: HashSet<&str> = [
        "HTTP.h1",
        "HTTP.h2c",
        "TLS.h1_tls12",
        "TLS.h2_tls12",
        "TLS.h1_tls13",
        "TLS.h2_tls13",
        "DNS.dnsmasq",
        "SSH.openssh",
        "SMTP.opensmtpd",
        "PostgreSQL.postgres",
        "Redis.redis",
        "MQTT.mosquitto",
        "iPerf.iperf3",
        "FTP_CONTROL.vsftpd",
        "FTP_DATA.vsftpd",
        "OpenVPN.udp",
    ]
    .into_iter()
    .collect();
    let mut labels_seen: HashSet<&str> = HashSet::new();
    for (pcap, truth) in [(&a_pcap, &a_truth), (&b_pcap, &b_truth)] {
        let flows_csv = d.join("flows.csv");
        let (code, _, err) =
            common::eb(&["flows", "--no-model", "-q", "-o", &s(&flows_csv), &s(pcap)]);
        assert_eq!(code, 0, "{err}");
        let (fh, frows) = csv_rows(&std::fs::read_to_string(&flows_csv).unwrap());
        let (src, dst, sp, dp, pr) = (
            col(&fh, "src"),
            col(&fh, "dst"),
            col(&fh, "sport"),
            col(&fh, "dport"),
            col(&fh, "proto"),
        );
        let found: HashSet<Tuple> = frows
            .iter()
            .map(|r| key(&r[pr], &r[src], &r[sp], &r[dst], &r[dp]))
            .collect();
        let (th, trows) = csv_rows(&std::fs::read_to_string(truth).unwrap());
        assert!(trows.len() > 150, "{} flows in {}", trows.len(), s(truth));
        let mut per_label: HashMap<&str, usize> = HashMap::new();
        let (tp, ts, tsp, td, tdp, tl, tc) = (
            col(&th, "proto"),
            col(&th, "src"),
            col(&th, "sport"),
            col(&th, "dst"),
            col(&th, "dport"),
            col(&th, "app_label"),
            col(&th, "confidence"),
        );
        for r in &trows {
            let k = key(&r[tp], &r[ts], &r[tsp], &r[td], &r[tdp]);
            assert!(
                found.contains(&k),
                "truth flow {r:?} not among earlybird's flows"
            );
            assert_eq!(r[tc], "lab");
            *per_label
                .entry(
                    all_labels
                        .get(r[tl].as_str())
                        .copied()
                        .unwrap_or_else(|| panic!("unexpected label {}", r[tl])),
                )
                .or_default() += 1;
        }
        // And the converse: every TCP/UDP flow earlybird finds is labelled.
        let labelled: HashSet<Tuple> = trows
            .iter()
            .map(|r| key(&r[tp], &r[ts], &r[tsp], &r[td], &r[tdp]))
            .collect();
        for k in &found {
            assert!(
                !(k.0 == "6" || k.0 == "17") || labelled.contains(k),
                "earlybird flow {k:?} has no label in {}",
                s(truth)
            );
        }
        // The rarest sessions (OpenVPN, iperf3: one at a time) may miss a
        // short run; each run has nearly all, the two together all.
        assert!(
            per_label.len() >= all_labels.len() - 2,
            "{}: {per_label:?}",
            s(truth)
        );
        labels_seen.extend(per_label.keys());
    }
    assert_eq!(labels_seen, all_labels);

    // nDPI agrees on the protocols it dissects whatever the port (not h2c
    // and iperf3: no dissector in nDPI 4.2; not FTP data; not DNS, Redis,
    // FTP control and OpenVPN, found only on or near their standard ports).
    let ndpi = Command::new("python3")
        .arg(lab_dir().join("ndpi_check.py"))
        .args([
            s(&b_pcap),
            s(&b_truth),
            "--json".into(),
            s(&d.join("ndpi.json")),
        ])
        .output()
        .unwrap();
    let ndpi_err = String::from_utf8_lossy(&ndpi.stderr);
    if !ndpi.status.success() && ndpi_err.contains("No such file") && !under_ci() {
        eprintln!("SKIPPED (nDPI part): ndpiReader not installed");
    } else {
        assert!(ndpi.status.success(), "{ndpi_err}");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("ndpi.json")).unwrap()).unwrap();
        for label in [
            "HTTP.h1",
            "MQTT.mosquitto",
            "PostgreSQL.postgres",
            "SMTP.opensmtpd",
            "SSH.openssh",
            "TLS.h1_tls12",
            "TLS.h2_tls12",
            "TLS.h1_tls13",
            "TLS.h2_tls13",
        ] {
            let e = &v[label];
            let seen = e["ndpi_seen"].as_f64().unwrap_or(0.0);
            let agree = e["agree"].as_f64().unwrap_or(0.0);
            assert!(seen > 0.0 && agree / seen >= 0.95, "nDPI on {label}: {e}");
        }
    }

    // Train on one capture, evaluate on the other (other seed and link).
    let model = d.join("m.ebm");
    let (code, _, err) = common::eb(&[
        "train",
        "--algo",
        "c45",
        "--level",
        "app",
        "--labels",
        &s(&a_truth),
        &s(&a_pcap),
        "-o",
        &s(&model),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = common::eb(&[
        "evaluate",
        "--model",
        &s(&model),
        "--labels",
        &s(&b_truth),
        &s(&b_pcap),
    ]);
    assert_eq!(code, 0, "{err}");
    let acc = accuracy(&out);
    eprintln!("lab: C4.5 app level, k = 4, no ports, train seed 101 wan, test seed 102 lan: {acc}");
    assert!(
        acc >= FLOOR,
        "accuracy {acc} below the floor {FLOOR}:\n{out}"
    );
}

/// Floor in % for the short runs above, well above the majority class
/// (about 24 %): measured 97.5 % and 98.3 % (2026-11-25, shared build
/// machine), but 82.0 % in a CI run of 2026-11-26 where the 15 s training
/// run happened to hold few SMTP, FTP and OpenVPN sessions (the schedule
/// depends on how fast the programs answer on a loaded machine); 95.5-98.7 %
/// for 60 s runs, see docs/LAB.md. A lab whose labels or flows were wrong
/// scores near the majority class.
const FLOOR: f64 = 60.0;
