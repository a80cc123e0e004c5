//! The payload label fields over IPFIX (docs/IPFIX.md, "Payload labels"),
//! decoded by tshark: IANA's elements (`applicationName`,
//! `applicationCategoryName`, `httpRequestHost`, `httpUserAgent`) by name,
//! the enterprise ones as the bytes docs/IPFIX.md describes, each equal to
//! the CSV of the same run, on a capture of TLS and DNS (IPv4) and one of
//! HTTP (IPv6). Without a labeller the templates carry none of them.

use crate::common::eb;
use crate::ipfix_cli::{csv_rows, have, to_pcap, Catcher};
use crate::lib_common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn sample(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/pcap")
        .join(name)
}

/// The record fields of the label's enterprise elements, in template
/// order (after the seven every record has).
const LABEL_PIE: [&str; 14] = [
    "label_source",
    "stat_app",
    "stat_confidence",
    "model_id",
    "sni",
    "alpn",
    "tls_version",
    "ja4",
    "ja3",
    "ech",
    "dns_query",
    "dns_name",
    "ssh_client",
    "ssh_server",
];

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

fn strs(v: &serde_json::Value) -> Vec<String> {
    match v {
        serde_json::Value::Array(a) => a.iter().map(|x| x.as_str().unwrap().to_string()).collect(),
        serde_json::Value::Null => Vec::new(),
        x => vec![x.as_str().unwrap().to_string()],
    }
}

/// The flow records tshark decodes from the IPFIX datagrams of a run of
/// `input` with `args`, and the CSV rows of the same run.
fn run(
    dir: &Path,
    input: &Path,
    args: &[&str],
) -> (Vec<serde_json::Value>, Vec<HashMap<String, String>>) {
    let catcher = Catcher::start();
    let csv = dir.join("out.csv");
    let target = format!("ipfix+udp://127.0.0.1:{}", catcher.port);
    let mut all = vec![
        "flows",
        input.to_str().unwrap(),
        "-o",
        &target,
        "-o",
        csv.to_str().unwrap(),
        "-q",
    ];
    all.extend_from_slice(args);
    let (code, _, err) = eb(&all);
    assert_eq!(code, 0, "{err}");
    std::thread::sleep(Duration::from_millis(200));
    let datagrams = catcher.finish();
    assert!(datagrams.iter().all(|d| d.len() <= 1400), "MTU");
    let pcap = dir.join("ipfix.pcap");
    to_pcap(&datagrams, &pcap);
    let out = lib_common::output_ok(
        Command::new("tshark")
            .args(["-r", pcap.to_str().unwrap(), "-d", "udp.port==4739,cflow"])
            .args(["-T", "json", "--no-duplicate-keys"]),
    );
    let packets: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let mut flows = Vec::new();
    for p in &packets {
        let c = &p["_source"]["layers"]["cflow"];
        for (k, set) in c.as_object().unwrap() {
            if !k.starts_with("Set ") || k.contains("Template") {
                continue;
            }
            for (fk, f) in set.as_object().unwrap() {
                if fk.starts_with("Flow ") {
                    flows.push(f.clone());
                }
            }
        }
    }
    let rows = csv_rows(&csv);
    assert_eq!(flows.len(), rows.len(), "record count");
    (flows, rows)
}

/// A string element tshark decoded by name ("" when absent or empty).
fn named(f: &serde_json::Value, key: &str) -> String {
    f.get(key)
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_string()
}

/// One enterprise element's value as the CSV says it should be.
enum Want {
    Bytes(Vec<u8>),
    F32(f32),
}

/// Checks every record's label elements against its CSV row; returns how
/// many records had each name field filled. tshark leaves empty strings
/// out of its list of enterprise elements, so the label elements are the
/// list's last entries, empty ones left out.
fn check(
    flows: &[serde_json::Value],
    rows: &[HashMap<String, String>],
) -> HashMap<&'static str, usize> {
    let mut filled: HashMap<&'static str, usize> = HashMap::new();
    for (i, (f, r)) in flows.iter().zip(rows).enumerate() {
        let ctx = format!("record {i}: {r:?}");
        assert_eq!(named(f, "cflow.appl_name"), r["app"], "{ctx}");
        assert_eq!(
            named(f, "cflow.application_category_name"),
            r["category"],
            "{ctx}"
        );
        assert_eq!(named(f, "cflow.http_request_host"), r["http_host"], "{ctx}");
        assert_eq!(
            named(f, "cflow.http_user_agent"),
            r["http_user_agent"],
            "{ctx}"
        );
        let pie: Vec<Vec<u8>> = strs(&f["cflow.enterprise_private_entry"])
            .iter()
            .map(|h| hex(h))
            .collect();
        assert_eq!(
            String::from_utf8(pie[0].clone()).unwrap(),
            r["app"],
            "{ctx}"
        );
        let mut want = Vec::new();
        for field in LABEL_PIE {
            match field {
                "stat_confidence" => want.push(Want::F32(r[field].parse().unwrap())),
                "ech" => want.push(Want::Bytes(vec![r[field].parse().unwrap_or(0)])),
                // unsigned16; 65535 when no model decided the flow.
                "model_id" => want.push(Want::Bytes(match r[field].parse::<u16>() {
                    Ok(v) => v.to_be_bytes().to_vec(),
                    Err(_) => vec![0xff, 0xff],
                })),
                _ if r[field].is_empty() => {}
                _ => {
                    *filled.entry(field).or_default() += 1;
                    want.push(Want::Bytes(r[field].as_bytes().to_vec()));
                }
            }
        }
        // The seven of every record (six when the Community ID is empty).
        let head = if r["community_id"].is_empty() { 6 } else { 7 };
        assert_eq!(pie.len(), head + want.len(), "{ctx}");
        for (got, w) in pie[head..].iter().zip(&want) {
            match w {
                Want::Bytes(b) => assert_eq!(got, b, "{ctx}"),
                Want::F32(v) => {
                    let g = f32::from_be_bytes(got.clone().try_into().unwrap());
                    assert!((g - v).abs() <= 0.0005, "{ctx}: {g} {v}");
                }
            }
        }
        for field in ["http_host", "http_user_agent", "category"] {
            if !r[field].is_empty() {
                *filled.entry(field).or_default() += 1;
            }
        }
    }
    filled
}

#[test]
fn ipfix_labels_cli_tshark_decodes_the_label_elements_as_documented() {
    if !have("tshark", "-v") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (flows, rows) = run(dir.path(), &sample("ndpi__iphone.pcap"), &["--labellers"]);
    let filled = check(&flows, &rows);
    for field in [
        "sni",
        "ja4",
        "ja3",
        "alpn",
        "tls_version",
        "dns_query",
        "category",
    ] {
        assert!(
            filled.get(field).copied().unwrap_or(0) >= 5,
            "{field}: {filled:?}"
        );
    }
    // HTTP over IPv6: the IPv6 template carries them too.
    let (flows, rows) = run(
        dir.path(),
        &sample("arkime__v6-http.pcap"),
        &["--labellers"],
    );
    assert!(rows.iter().any(|r| r["ip_version"] == "6"));
    let filled = check(&flows, &rows);
    assert!(
        filled["http_host"] >= 1 && filled["http_user_agent"] >= 1,
        "{filled:?}"
    );
    // A --learn run names the model that decided each flow (0: the run's
    // own; the run trains once, at its end).
    let models = dir.path().join("models");
    let (flows, rows) = run(
        dir.path(),
        &sample("ndpi__iphone.pcap"),
        &["--learn", models.to_str().unwrap()],
    );
    assert!(rows.iter().any(|r| r["model_id"] == "0"), "{rows:?}");
    check(&flows, &rows);
    // Without the labellers: none of them.
    let (flows, _) = run(
        dir.path(),
        &sample("ndpi__iphone.pcap"),
        &["--no-labellers"],
    );
    for f in &flows {
        assert_eq!(strs(&f["cflow.enterprise_private_entry"]).len(), 7);
        assert!(f.get("cflow.application_category_name").is_none());
    }
}
