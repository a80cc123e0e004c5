//! `earlybird flows --analyzer media`: the verdict fields in CSV and JSON
//! lines, intervals from `--media-config FILE` and from a `[media]` table of
//! a `--config` file, and a bad media file refused naming it.

mod common;

use std::path::PathBuf;

use common::eb;

/// A SIPp G.711 capture of the corpus (one RTP stream of 236 packets of
/// 280 bytes, every 30 ms), if the corpus is there.
fn g711() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus/voip/sipp__g711a.pcap");
    if p.is_file() {
        Some(p)
    } else {
        eprintln!("SKIPPED: {} not found", p.display());
        None
    }
}

/// The JSON lines records of `flows FILE --analyzer media ARGS…`.
fn records(pcap: &str, args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec![
        "flows",
        pcap,
        "--analyzer",
        "media",
        "--no-model",
        "-q",
        "-o",
        "-",
    ];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "jsonl"]);
    let (code, out, err) = eb(&all);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn media_of(recs: &[serde_json::Value]) -> Vec<(String, serde_json::Value, serde_json::Value)> {
    recs.iter()
        .filter(|r| r["media"] != "")
        .map(|r| {
            (
                r["media"].as_str().unwrap().to_string(),
                r["media_share"].clone(),
                r["media_packet"].clone(),
            )
        })
        .collect()
}

#[test]
fn media_fields_in_every_text_format_and_intervals_from_a_file() {
    let Some(pcap) = g711() else { return };
    let pcap = pcap.to_str().unwrap();
    // Table 6.2: 280-byte packets are above audio's [60, 200] and inside
    // video's [150, 1200]; decided at the 3rd window, packet 30.
    let recs = records(pcap, &[]);
    assert!(recs.iter().all(|r| r.get("media").is_some()));
    assert_eq!(
        media_of(&recs),
        vec![("video".into(), serde_json::json!(1), serde_json::json!(30))]
    );
    // CSV: the three columns after the record's own.
    let (code, out, err) = eb(&[
        "flows",
        pcap,
        "--analyzer",
        "media",
        "--no-model",
        "-q",
        "-o",
        "-",
        "--format",
        "csv",
    ]);
    assert_eq!(code, 0, "{err}");
    let mut lines = out.lines();
    assert!(lines
        .next()
        .unwrap()
        .ends_with(",media,media_share,media_packet"));
    assert_eq!(lines.filter(|l| l.ends_with(",video,1,30")).count(), 1);

    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("media.toml");
    std::fs::write(
        &conf,
        "[audio]\nsize = [[60, 300]]\nsize_share = 0.75\niat_tolerance_ms = 15\niat_share = 0.6\n",
    )
    .unwrap();
    let audio = vec![(
        "audio".to_string(),
        serde_json::json!(1),
        serde_json::json!(30),
    )];
    let recs = records(pcap, &["--media-config", conf.to_str().unwrap()]);
    assert_eq!(media_of(&recs), audio);
    // The same file from a --config file's [media] table.
    let probe = dir.path().join("probe.toml");
    std::fs::write(&probe, format!("[media]\nconfig = {:?}\n", conf)).unwrap();
    let recs = records(pcap, &["--config", probe.to_str().unwrap()]);
    assert_eq!(media_of(&recs), audio);

    std::fs::write(&conf, "[audio]\nsize = [[300, 60]]\n").unwrap();
    let (code, _, err) = eb(&[
        "flows",
        pcap,
        "--analyzer",
        "media",
        "--media-config",
        conf.to_str().unwrap(),
        "-f",
        "null",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("media.toml") && err.contains("interval"),
        "{err}"
    );
}
