//! Every record's label (`app`, `category`, `label_source`, `stat_app`,
//! `stat_confidence`) from the CLI, on a real capture of an iPhone
//! (`testdata/pcap/ndpi__iphone.pcap`: TLS to Apple's and iCloud's names,
//! DNS queries), with `--services` maps of the user's over the shipped
//! one and `--names keep|hash|drop`.

use crate::common::eb;

use std::collections::BTreeMap;
use std::path::PathBuf;

fn pcap() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/pcap/ndpi__iphone.pcap")
        .display()
        .to_string()
}

/// The records of `flows` with `args` (JSON lines), each a map of field
/// to its value as text (`null`: empty).
fn records(dir: &std::path::Path, args: &[&str]) -> Vec<BTreeMap<String, String>> {
    let out = dir.join("flows.jsonl");
    let p = pcap();
    let mut all = vec!["flows", p.as_str(), "-q", "-o", out.to_str().unwrap()];
    all.extend_from_slice(args);
    let (code, _, err) = eb(&all);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    text.lines()
        .map(|l| {
            let v: serde_json::Map<String, serde_json::Value> = serde_json::from_str(l).unwrap();
            v.into_iter()
                .map(|(k, v)| {
                    let t = match v {
                        serde_json::Value::Null => String::new(),
                        serde_json::Value::String(s) => s,
                        v => v.to_string(),
                    };
                    (k, t)
                })
                .collect()
        })
        .collect()
}

const SOURCES: &[&str] = &["sni", "quic", "http", "dns", "ssh", "stat", "port", "none"];

#[test]
fn payload_labels_cli_every_record_is_labelled_and_keeps_the_verdict_beside() {
    let dir = tempfile::tempdir().unwrap();
    let plain = records(dir.path(), &["--no-labellers"]);
    assert!(!plain.is_empty());
    for r in &plain {
        // Without the labellers the label is the model's verdict (the
        // default model is a port table), and no name is read.
        assert!(!r.contains_key("sni") && !r.contains_key("dns_query"));
        assert_eq!(r["app"], r["stat_app"], "{r:?}");
        assert_eq!(r["app_confidence"], r["stat_confidence"]);
        assert!(r["label_source"] == "port" || r["label_source"] == "none");
        assert_eq!(r["label_source"] == "none", r["app"] == "unknown");
    }
    // By default (and with --labellers) the four labellers run; with
    // --no-labellers, --analyzer runs those named alone.
    let named = records(dir.path(), &[]);
    assert_eq!(named.len(), plain.len());
    assert_eq!(named, records(dir.path(), &["--labellers"]));
    let four = records(
        dir.path(),
        &["--no-labellers", "--analyzer", "tls,http,ssh,dns"],
    );
    assert_eq!(named, four);
    let some = records(dir.path(), &["--no-labellers", "--analyzer", "tls,dns"]);
    assert!(some[0].contains_key("sni") && !some[0].contains_key("http_host"));
    let mut by_source = BTreeMap::new();
    for (r, p) in named.iter().zip(&plain) {
        assert!(SOURCES.contains(&r["label_source"].as_str()), "{r:?}");
        *by_source.entry(r["label_source"].clone()).or_insert(0) += 1;
        // The verdict is kept as it was, beside the payload label.
        assert_eq!(
            (&r["stat_app"], &r["app_confidence"]),
            (&p["app"], &p["app_confidence"])
        );
        if !r["sni"].is_empty() {
            assert_eq!(r["label_source"], "sni", "{r:?}");
        } else if !r["dns_query"].is_empty() {
            assert_eq!(r["label_source"], "dns", "{r:?}");
        }
        if r["label_source"] == "port" {
            // A port verdict carries its class's category (TLS: Web).
            assert!(!r["category"].is_empty(), "{r:?}");
        }
        if r["sni"].ends_with(".icloud.com") {
            // The shipped map's entry (Apple's published iCloud names).
            assert_eq!(
                (r["app"].as_str(), r["category"].as_str()),
                ("iCloud", "Cloud")
            );
        }
    }
    assert!(
        by_source["sni"] >= 10 && by_source["dns"] >= 10,
        "{by_source:?}"
    );
}

#[test]
fn payload_labels_cli_services_and_names() {
    let dir = tempfile::tempdir().unwrap();
    let map = dir.path().join("mine.txt");
    std::fs::write(&map, "@source a test\n*.icloud.com MyCloud Collaborative\n").unwrap();
    let m = map.to_str().unwrap();
    let kept = records(dir.path(), &["--analyzer", "tls", "--services", m]);
    let icloud: Vec<_> = kept
        .iter()
        .filter(|r| r["sni"].ends_with(".icloud.com"))
        .collect();
    assert!(!icloud.is_empty());
    for r in &icloud {
        assert_eq!(
            (r["app"].as_str(), r["category"].as_str()),
            ("MyCloud", "Collaborative")
        );
    }
    // Names hashed with a key, or dropped: the labels stay those of the names.
    let hashed = records(
        dir.path(),
        &[
            "--analyzer",
            "tls",
            "--services",
            m,
            "--names",
            "hash",
            "--names-key",
            "k",
        ],
    );
    let dropped = records(
        dir.path(),
        &["--analyzer", "tls", "--services", m, "--names", "drop"],
    );
    let other_key = records(
        dir.path(),
        &[
            "--analyzer",
            "tls",
            "--services",
            m,
            "--names",
            "hash",
            "--names-key",
            "k2",
        ],
    );
    for (((k, h), d), o) in kept.iter().zip(&hashed).zip(&dropped).zip(&other_key) {
        assert_eq!((&k["app"], &k["category"]), (&h["app"], &h["category"]));
        assert_eq!(
            (&k["app"], &k["label_source"]),
            (&d["app"], &d["label_source"])
        );
        assert!(d["sni"].is_empty());
        if k["sni"].is_empty() {
            assert!(h["sni"].is_empty());
        } else {
            assert_eq!(h["sni"].len(), 32);
            assert!(h["sni"].bytes().all(|b| b.is_ascii_hexdigit()));
            assert_ne!(h["sni"], o["sni"]);
        }
    }
    // The same name hashes the same under one key.
    let same: Vec<_> = hashed
        .iter()
        .zip(&kept)
        .filter(|(_, k)| k["sni"] == icloud[0]["sni"])
        .map(|(h, _)| h["sni"].clone())
        .collect();
    assert!(same.windows(2).all(|w| w[0] == w[1]));
    // A map that does not read stops the run, naming its file and line.
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "x.example.org App NoSuchCategory\n").unwrap();
    let p = pcap();
    let (code, _, err) = eb(&[
        "flows",
        p.as_str(),
        "-q",
        "-o",
        "/dev/null",
        "--services",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("bad.txt, line 1") && err.contains("unknown category"),
        "{err}"
    );
}

#[test]
fn payload_labels_cli_the_summary_counts_handshakes_cut_by_the_snap_length() {
    if std::process::Command::new("editcap")
        .arg("-h")
        .output()
        .is_err()
    {
        eprintln!("skipped: no editcap (Wireshark's tools)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The capture kept to 120 bytes a frame, as archives often are: the
    // ClientHellos do not fit.
    let cut = dir.path().join("cut.pcap");
    let st = std::process::Command::new("editcap")
        .args(["-s", "120", &pcap(), cut.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = dir.path().join("flows.jsonl");
    let (code, _, err) = eb(&[
        "flows",
        cut.to_str().unwrap(),
        "--no-progress",
        "--labellers",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    let cut_snap = text
        .lines()
        .filter(|l| l.contains("\"tls_status\":\"cut-snap\""))
        .count();
    assert!(cut_snap >= 10, "{cut_snap} handshakes cut");
    assert!(
        err.contains(&format!(
            "handshakes cut by the snap length: {cut_snap} (TLS {cut_snap}, QUIC 0;"
        )),
        "{err}"
    );
    // Whole frames: nothing cut, no line.
    let (code, _, err) = eb(&[
        "flows",
        &pcap(),
        "--no-progress",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("cut by the snap length"), "{err}");
}
