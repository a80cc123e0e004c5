//! `earlybird flows --analyzer media`: the verdict fields in CSV and JSON
//! lines, intervals from `--media-config FILE` and from a `[media]` table of
//! a `--config` file, and a bad media file refused naming it.

use crate::common;

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
        .filter(|r| r["media"] != "" && r["media"] != "none")
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
    // The clear-header layer reads the RTP header (payload type 8, an
    // 8 kHz clock): audio at the 6th packet, 5 of 6 steps consistent.
    // (Table 6.2's windows alone call these 280-byte packets video.)
    let recs = records(pcap, &[]);
    assert!(recs.iter().all(|r| r.get("media").is_some()));
    assert_eq!(
        media_of(&recs),
        vec![(
            "audio".into(),
            serde_json::json!(0.833),
            serde_json::json!(6)
        )]
    );
    // CSV: the media columns after the record's own.
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
        .contains(",media,media_share,media_packet,media_layer,media_clock,"));
    assert_eq!(
        lines
            .filter(|l| l.contains(",audio,0.833,6,rtp,8000,"))
            .count(),
        1
    );

    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("media.toml");
    // The windows alone (`clear = false`), with audio's sizes widened to
    // 300 bytes: audio at the 3rd window.
    std::fs::write(
        &conf,
        "clear = false\n[audio]\nsize = [[60, 300]]\nsize_share = 0.75\niat_tolerance_ms = 15\niat_share = 0.6\n",
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

/// One row of a Markdown table `train-media` prints: (flows, detected,
/// byte rate in %).
fn table_row(section: &str, name: &str) -> (u64, u64, f64) {
    let line = section
        .lines()
        .find(|l| l.starts_with(&format!("| {name} |")))
        .unwrap_or_else(|| panic!("no row {name} in\n{section}"));
    let cells: Vec<&str> = line.split('|').map(str::trim).collect();
    let pct = |s: &str| s.trim_end_matches(" %").parse::<f64>().unwrap();
    (
        cells[2].parse().unwrap(),
        cells[3].parse().unwrap(),
        pct(cells[6]),
    )
}

/// `earlybird train-media` on the media labels of the corpus (nDPI's media
/// flows and tshark's RTP streams): the TOML it writes is read by `flows
/// --media-config` (and makes the 280-byte G.711 stream that Table 6.2
/// calls video audio), and its leave-one-capture-out figures are those
/// BENCHMARKS.md reports ("Learned intervals"; measured 2026-11-26: 5 of 10 labelled audio
/// flows of >= 30 packets, 80.2 % of their bytes; 2 of 16 other UDP flows
/// of >= 30 packets, 10.3 % of their bytes), as floors one flow and 5
/// points under and ceilings one flow and 5 points over.
#[test]
fn train_media_learns_intervals_that_flows_reads() {
    let Some(g711) = g711() else { return };
    let corpus = g711.parent().unwrap().parent().unwrap().to_path_buf();
    let dev = corpus.join("classify/dev");
    let labels = dev.join("media_flows.csv");
    let text = std::fs::read_to_string(&labels).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
    let (tf, pc) = (col("truth_file"), col("pcap"));
    let mut caps: Vec<String> = lines
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            let dir = if c[tf].starts_with("nfstream") {
                "nfstream"
            } else {
                "ndpi"
            };
            dev.join(dir).join("pcap").join(c[pc]).display().to_string()
        })
        .collect();
    caps.sort();
    caps.dedup();
    let tmp = tempfile::tempdir().unwrap();
    let toml = tmp.path().join("learned.toml").display().to_string();
    let reference = corpus
        .join("voip/voip_reference.json")
        .display()
        .to_string();
    let voip = corpus.join("voip").display().to_string();
    let labels = labels.display().to_string();
    let mut args = vec!["train-media", "--labels", &labels, "--labels", &reference];
    args.extend(["-o", &toml, &voip]);
    args.extend(caps.iter().map(String::as_str));
    let (code, out, err) = eb(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("learned audio from 10 flows"), "{out}");
    let held = &out[out.find("leave one capture out").expect("held-out table")..];
    let (flows, hit, bytes) = table_row(held, "audio (≥30 packets)");
    assert_eq!(flows, 10, "{held}");
    assert!(hit >= 4 && bytes >= 75.2, "{held}");
    let (flows, hit, bytes) = table_row(held, "other UDP (≥30 packets)");
    assert_eq!(flows, 16, "{held}");
    assert!(hit <= 3 && bytes <= 15.3, "{held}");
    // flows reads the file; G.711 at 30 ms (280 bytes), which Table 6.2's
    // windows call video, is audio with it. The windows alone
    // (`clear = false`): the clear-header layer would call it audio from
    // its RTP header whatever the windows say.
    let g = g711.display().to_string();
    let learned_text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(&toml, format!("clear = false\n{learned_text}")).unwrap();
    let learned = media_of(&records(&g, &["--media-config", &toml]));
    assert_eq!(learned.len(), 1);
    assert_eq!(learned[0].0, "audio");
}

/// ICE-TCP in a capture written by others: nDPI's `stun.pcap` holds a
/// Teams call's TCP candidate pair (10.77.110.51:41588 to
/// 10.206.50.239:42000, nDPI: STUN.Skype_TeamsCall), its connectivity
/// checks each after an RFC 4571 length. The media analyzer reads the
/// flow through its frames: the call id from the checks' USERNAME, no
/// media verdict (no RTP in it).
#[test]
fn an_ice_tcp_flow_of_the_corpus_is_read_through_its_frames() {
    let Some(g711) = g711() else { return };
    let corpus = g711.parent().unwrap().parent().unwrap().to_path_buf();
    let pcap = corpus.join("classify/dev/ndpi/pcap/stun.pcap");
    let recs = records(pcap.to_str().unwrap(), &[]);
    let ice = recs
        .iter()
        .find(|r| r["proto"] == 6 && (r["sport"] == 42000 || r["dport"] == 42000))
        .expect("the ICE-TCP flow");
    let call = ice["media_call"].as_str().unwrap();
    assert_eq!(call.len(), 16, "{ice}");
    assert!(call.bytes().all(|b| b.is_ascii_hexdigit()), "{ice}");
    assert_eq!(ice["media"], "", "{ice}");
    // Beside it, coturn's TURN over TCP (port 3478), read as before.
    let turn = recs
        .iter()
        .find(|r| r["proto"] == 6 && (r["sport"] == 3478 || r["dport"] == 3478))
        .expect("the TURN-TCP flow");
    assert_eq!(turn["media_app"], "Coturn-4.5.0.5 'dan Eider'", "{turn}");
    assert_ne!(turn["media_call"], ice["media_call"], "{turn}");
}
