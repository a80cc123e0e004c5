//! Today's calls on the corpus (BENCHMARKS.md, "Media detection";
//! docs/MEDIA.md, "Scoring"): the call flows of the developer half (`media_flows.csv`, UDP,
//! at least 30 packets) and every other labelled UDP flow of at least 30
//! packets of the same half (`ndpi_truth.csv`, and `nfstream_truth.csv`
//! rows whose 5-tuple was verified). A flow is found (or flagged) when a
//! record of its unordered 5-tuple has an audio or video verdict.
//! `scripts/media_eval.py` computes the same table from the CLI's CSV; this
//! test asserts the floors and ceilings measured on 2026-11-29 with the
//! default (clear-header layer on) and that the clear layer finds more
//! call flows and flags fewer others than the windows alone. SKIPPED
//! without the corpus.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use earlybird::analyze::media::MediaConfig;
use earlybird::testing::map_v4;
use earlybird::{CaptureFile, ModelRef, OwnedValue, RunOptions};

type End = ([u8; 16], u16);
type Tuple = (End, End);

fn tuple(a: End, b: End) -> Tuple {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

fn end(ip: &str, port: &str) -> Option<End> {
    let a = match ip.parse::<IpAddr>().ok()? {
        IpAddr::V4(v) => map_v4(v.octets()),
        IpAddr::V6(v) => v.octets(),
    };
    Some((a, port.parse().ok()?))
}

/// capture → (call flows, other labelled flows), both of ≥ 30 packets.
type Sets = BTreeMap<PathBuf, (BTreeSet<Tuple>, BTreeSet<Tuple>)>;

fn sets(dev: &Path) -> Sets {
    let mut media: BTreeSet<(PathBuf, Tuple)> = BTreeSet::new();
    let mut r = csv::Reader::from_path(dev.join("media_flows.csv")).unwrap();
    for row in r.deserialize::<BTreeMap<String, String>>() {
        let row = row.unwrap();
        if row["proto"] != "UDP" {
            continue;
        }
        let sub = if row["truth_file"].starts_with("nfstream") {
            "nfstream"
        } else {
            "ndpi"
        };
        let (Some(a), Some(b)) = (
            end(&row["src"], &row["sport"]),
            end(&row["dst"], &row["dport"]),
        ) else {
            continue;
        };
        media.insert((dev.join(sub).join("pcap").join(&row["pcap"]), tuple(a, b)));
    }
    let mut out = Sets::new();
    for (file, sub) in [
        ("ndpi_truth.csv", "ndpi"),
        ("nfstream_truth.csv", "nfstream"),
    ] {
        let mut r = csv::Reader::from_path(dev.join(file)).unwrap();
        for row in r.deserialize::<BTreeMap<String, String>>() {
            let row = row.unwrap();
            if row["proto"] != "UDP" || row.get("mapping_verified").is_some_and(|v| v != "1") {
                continue;
            }
            let n = |k: &str| row.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            let packets = n("c2s_pkts") + n("s2c_pkts") + n("bidirectional_packets");
            if packets < 30 {
                continue;
            }
            let (Some(a), Some(b)) = (
                end(&row["src"], &row["sport"]),
                end(&row["dst"], &row["dport"]),
            ) else {
                continue;
            };
            let path = dev.join(sub).join("pcap").join(&row["pcap"]);
            let t = tuple(a, b);
            let e = out.entry(path.clone()).or_default();
            if media.contains(&(path, t)) {
                e.0.insert(t);
            } else if row["app_label"] != "Unknown" {
                e.1.insert(t);
            }
        }
    }
    out
}

/// (call flows found, call flows, others flagged, others) under `media`.
fn measure(s: &Sets, media: &MediaConfig) -> (usize, usize, usize, usize) {
    let mut r = (0, 0, 0, 0);
    for (path, (calls, others)) in s {
        let files = vec![CaptureFile::open(path).unwrap()];
        let mut opts = RunOptions::default();
        opts.flow.analyzers = vec!["media".into()];
        opts.flow.media = media.clone();
        let flows = earlybird::collect(&files, &opts, &ModelRef::default())
            .unwrap()
            .0;
        let mut hit = BTreeSet::new();
        for f in &flows {
            let k = &f.record.key;
            if k.proto != 17 {
                continue;
            }
            if let OwnedValue::Text(v) = &f.analyzed[0] {
                if v == "audio" || v == "video" {
                    hit.insert(tuple((k.src, k.sport), (k.dst, k.dport)));
                }
            }
        }
        r.0 += calls.iter().filter(|t| hit.contains(t)).count();
        r.1 += calls.len();
        r.2 += others.iter().filter(|t| hit.contains(t)).count();
        r.3 += others.len();
    }
    r
}

#[test]
fn the_clear_layer_finds_more_calls_and_flags_fewer_other_flows() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let s = sets(&corpus.join("classify/dev"));
    let on = measure(&s, &MediaConfig::default());
    let windows = MediaConfig {
        clear: false,
        ..MediaConfig::default()
    };
    let off = measure(&s, &windows);
    eprintln!("default: calls {}/{}, others {}/{}", on.0, on.1, on.2, on.3);
    eprintln!(
        "windows only: calls {}/{}, others {}/{}",
        off.0, off.1, off.2, off.3
    );
    // The sets (2026-11-29): 20 call flows, 55 other labelled UDP flows.
    assert_eq!((on.1, on.3), (20, 55));
    // Floors and ceilings measured on 2026-11-29 (BENCHMARKS.md, "Media
    // detection").
    // 10, not the 11 of before the repeated-body guard: Zoom's P2P flow
    // 10.78.14.178:49586-192.168.12.156:49579 (zoom_p2p.pcapng) carries
    // 92-byte plain-text messages (an address and a GUID) that repeat one
    // body behind a changing 4-byte field: no encoded media, and the guard
    // says so; the windows alone called it audio.
    assert!(on.0 >= 10, "call flows found {}/{}", on.0, on.1);
    assert!(on.2 == 0, "other flows flagged {}/{}", on.2, on.3);
    assert!(on.0 > off.0 && on.2 < off.2, "{on:?} vs {off:?}");
}

/// `media_app` from a vendor's published media ports (docs/MEDIA.md,
/// "What the payload shows in clear") against nDPI's labels: every flow
/// of the call captures, and of every capture with a labelled UDP flow on
/// such a port, that gets an app from its ports has nDPI's label of that
/// vendor where nDPI labels it; Google's 19305 flow of stun_dtls_rtp
/// (DTLS.GoogleCall) is named.
#[test]
fn an_app_from_a_vendors_media_ports_agrees_with_ndpi() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let dev = corpus.join("classify/dev");
    let vendor = |p: u16| matches!(p, 8801..=8810 | 19302..=19309 | 3480..=3481);
    let mut labels: BTreeMap<(String, Tuple), String> = BTreeMap::new();
    let mut caps: BTreeSet<String> = BTreeSet::new();
    let mut r = csv::Reader::from_path(dev.join("ndpi_truth.csv")).unwrap();
    for row in r.deserialize::<BTreeMap<String, String>>() {
        let row = row.unwrap();
        let (Some(a), Some(b)) = (
            end(&row["src"], &row["sport"]),
            end(&row["dst"], &row["dport"]),
        ) else {
            continue;
        };
        if row["proto"] == "UDP" && (vendor(a.1) || vendor(b.1)) {
            caps.insert(row["pcap"].clone());
        }
        labels.insert((row["pcap"].clone(), tuple(a, b)), row["app_label"].clone());
    }
    let mut r = csv::Reader::from_path(dev.join("media_flows.csv")).unwrap();
    for row in r.deserialize::<BTreeMap<String, String>>() {
        let row = row.unwrap();
        if row["truth_file"] == "ndpi_truth.csv" {
            caps.insert(row["pcap"].clone());
        }
    }
    use earlybird::analyze::Analyzer;
    let at = earlybird::analyze::media::Media::FIELDS
        .iter()
        .position(|f| f.name == "media_app")
        .unwrap();
    let (mut named, mut agree, mut unlabelled) = (Vec::new(), 0, 0);
    for cap in &caps {
        let files = vec![CaptureFile::open(&dev.join("ndpi/pcap").join(cap)).unwrap()];
        let mut opts = RunOptions::default();
        opts.flow.analyzers = vec!["media".into()];
        let flows = earlybird::collect(&files, &opts, &ModelRef::default())
            .unwrap()
            .0;
        for f in &flows {
            let k = &f.record.key;
            let OwnedValue::Text(app) = &f.analyzed[at] else {
                continue;
            };
            let want = match app.as_str() {
                "Zoom" => "Zoom",
                "GoogleMeet" => "Google",
                "Teams" => "Teams",
                _ => continue,
            };
            let t = tuple((k.src, k.sport), (k.dst, k.dport));
            named.push(format!("{cap} {}:{} {app}", k.dport, k.sport));
            match labels.get(&(cap.clone(), t)) {
                Some(l) => {
                    assert!(l.contains(want), "{cap} {t:?}: {app}, nDPI {l}");
                    agree += 1;
                }
                None => unlabelled += 1,
            }
        }
    }
    eprintln!(
        "{} captures; named by their ports: {named:?}; {agree} as nDPI, {unlabelled} unlabelled",
        caps.len()
    );
    assert!(
        named
            .iter()
            .any(|n| n.starts_with("stun_dtls_rtp.pcapng 19305:") && n.ends_with("GoogleMeet")),
        "{named:?}"
    );
}

/// A flow a guard rules out says so: `media` `none`, `media_layer`
/// `guard`, the packet it was ruled out at (a window's end, from the
/// 30th packet on) and no share; a flow too short to decide stays empty.
/// Real captures whose UDP flows are not media: a DNS tunnel (iodine),
/// NFS over UDP, TFTP.
#[test]
fn a_flow_a_guard_rules_out_is_none_with_the_packet_it_was_ruled_out_at() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    use earlybird::analyze::Analyzer;
    let fields = earlybird::analyze::media::Media::FIELDS;
    let at = |name: &str| fields.iter().position(|f| f.name == name).unwrap();
    let pcap = corpus.join("classify/dev/ndpi/pcap");
    for cap in ["dns-tunnel-iodine.pcap", "nfsv2.pcap", "tftp.pcap"] {
        let files = vec![CaptureFile::open(&pcap.join(cap)).unwrap()];
        let mut opts = RunOptions::default();
        opts.flow.analyzers = vec!["media".into()];
        let flows = earlybird::collect(&files, &opts, &ModelRef::default())
            .unwrap()
            .0;
        let mut none = 0;
        for f in &flows {
            let packets = f.record.packets[0] + f.record.packets[1];
            let v = |name: &str| f.analyzed[at(name)].clone();
            let OwnedValue::Text(kind) = v("media") else {
                panic!("{cap}: media {:?}", v("media"));
            };
            if kind == "none" {
                none += 1;
                assert_eq!(v("media_layer"), OwnedValue::Text("guard".into()), "{cap}");
                assert_eq!(v("media_share"), OwnedValue::Null, "{cap}");
                let OwnedValue::U64(p) = v("media_packet") else {
                    panic!("{cap}: media_packet {:?}", v("media_packet"));
                };
                assert!(
                    (30..=packets).contains(&p),
                    "{cap}: ruled out at {p} of {packets}"
                );
            } else if packets < 30 {
                assert_eq!(kind, "", "{cap}: {packets} packets");
                assert_eq!(v("media_packet"), OwnedValue::Null, "{cap}");
            }
            assert!(kind != "audio" && kind != "video", "{cap}: {kind}");
        }
        assert!(none >= 1, "{cap}: no flow ruled out");
    }
}
