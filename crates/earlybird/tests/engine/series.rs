//! Per-second statistics: every packet in the second its timestamp says
//! (counted here from the capture's own record headers), the seconds
//! adding up to the run's totals, the same rows whatever the number of
//! shards, per-application figures equal to the flow records', and the
//! Prometheus metrics equal to the rows.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::Shared;
use earlybird::{
    CaptureFile, ExportOptions, Format, GenKind, GenOptions, Metrics, Model, ModelRef, Report,
    RunControl, RunOptions, APP_STATS, STATS,
};
use serde_json::Value;

/// A generated capture of ~35 s (10 Mbit/s link at half load).
fn spread() -> CaptureFile {
    let mut o = GenOptions::new(GenKind::Realistic, 30_000);
    o.gbps = 0.01;
    let mut buf = Vec::new();
    earlybird::generate(&o, &mut buf).unwrap();
    CaptureFile::from_bytes("spread", buf).unwrap()
}

fn sample() -> CaptureFile {
    CaptureFile::open(&common::testdata().join("pcap/ndpi__iphone.pcap")).unwrap()
}

/// Packets per second of a classic pcap, read from its record headers.
fn packets_per_second(bytes: &[u8]) -> BTreeMap<u64, u64> {
    let magic = u32::from_le_bytes(bytes[0..4].try_into().unwrap());
    let nanos = match magic {
        0xa1b2_c3d4 => false,
        0xa1b2_3c4d => true,
        m => panic!("not a little-endian classic pcap: {m:#x}"),
    };
    let mut per = BTreeMap::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let u = |o: usize| u32::from_le_bytes(bytes[at + o..at + o + 4].try_into().unwrap());
        let (sec, frac, caplen) = (u(0) as u64, u(4) as u64, u(8) as usize);
        assert!(frac < if nanos { 1_000_000_000 } else { 1_000_000 });
        *per.entry(sec).or_insert(0) += 1;
        at += 16 + caplen;
    }
    per
}

fn lines(s: &Shared) -> Vec<Value> {
    let text = String::from_utf8(s.0.lock().unwrap().clone()).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

struct Run {
    stats: Vec<Value>,
    apps: Vec<Value>,
    flows: Vec<Value>,
    report: Report,
    metrics: Arc<Metrics>,
}

fn run(files: &[CaptureFile], mref: &ModelRef, shards: usize) -> Run {
    let (stats, apps, flows) = (Shared::default(), Shared::default(), Shared::default());
    let eopts = ExportOptions {
        early_packets: 4,
        class_names: mref.classes.clone(),
        ..Default::default()
    };
    let exporters = vec![
        earlybird::to_writer(Format::JsonLines, Box::new(flows.clone()), "flows", &eopts),
        earlybird::rows_to_writer(&STATS, Format::JsonLines, Box::new(stats.clone()), "s"),
        earlybird::rows_to_writer(&APP_STATS, Format::JsonLines, Box::new(apps.clone()), "a"),
    ];
    let metrics = Arc::new(Metrics::new());
    let opts = RunOptions {
        shards,
        metrics: Some(metrics.clone()),
        ..RunOptions::default()
    };
    let report = earlybird::run(files, &opts, mref, exporters, &RunControl::default()).unwrap();
    assert!(
        report.output_errors.is_empty(),
        "{:?}",
        report.output_errors
    );
    Run {
        stats: lines(&stats),
        apps: lines(&apps),
        flows: lines(&flows),
        report,
        metrics,
    }
}

fn default_model() -> ModelRef {
    let path = common::testdata().join("../models/default.ebm");
    let m = Model::load(&path).unwrap();
    ModelRef {
        classes: m.info.classes.clone().into(),
        model: Some(Arc::new(m)),
    }
}

fn sum(rows: &[Value], key: &str) -> u64 {
    rows.iter().map(|r| r[key].as_u64().unwrap()).sum()
}

/// The metric `name` (with its labels, as written) in Prometheus text.
fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
        .parse()
        .unwrap()
}

/// The port class of a flow record, by the rule docs/OPERATIONS.md
/// states: TCP and UDP only; the server port when it is a listed service,
/// else the client port when that is listed, else the server port's range.
fn port_class_of(f: &Value) -> Option<String> {
    let (tcp, udp): (&[u64], &[u64]) = (
        &[22, 25, 53, 80, 443, 445, 993, 3306, 3389, 5432, 8080],
        &[53, 67, 123, 137, 443, 1900, 5060, 5353],
    );
    let (t, listed) = match f["proto"].as_u64().unwrap() {
        6 => ("tcp", tcp),
        17 => ("udp", udp),
        _ => return None,
    };
    let (sport, dport) = (f["sport"].as_u64().unwrap(), f["dport"].as_u64().unwrap());
    let class = if listed.contains(&dport) {
        dport.to_string()
    } else if listed.contains(&sport) {
        sport.to_string()
    } else if dport < 1024 {
        "system".to_string()
    } else if dport < 32768 {
        "registered".to_string()
    } else {
        "ephemeral".to_string()
    };
    Some(format!("{t}/{class}"))
}

fn check(file: &[CaptureFile]) {
    let bytes = file[0].bytes();
    let mref = default_model();
    let one = run(file, &mref, 1);
    let (rows, c) = (&one.stats, &one.report.counters);
    // Contiguous seconds, each holding exactly its packets.
    let per = packets_per_second(bytes);
    let first = *per.keys().next().unwrap();
    let last = *per.keys().last().unwrap();
    assert_eq!(rows.len() as u64, last - first + 1);
    for (i, r) in rows.iter().enumerate() {
        let sec = first + i as u64;
        assert_eq!(r["time"].as_u64().unwrap(), sec);
        let want = per.get(&sec).copied().unwrap_or(0);
        assert_eq!(r["packets"].as_u64().unwrap(), want, "second {sec}");
    }
    // The seconds add up to the run.
    assert_eq!(sum(rows, "packets"), c.packets_read);
    assert_eq!(sum(rows, "bytes"), c.bytes_read);
    assert_eq!(sum(rows, "packets_flowed"), c.packets_flowed);
    assert_eq!(sum(rows, "skipped"), c.skipped.iter().sum::<u64>());
    assert_eq!(sum(rows, "flows_new"), c.flows.created);
    assert_eq!(sum(rows, "flows_ended"), c.flows_ended());
    assert_eq!(sum(rows, "ended_idle"), c.flows.ended[0]);
    assert_eq!(sum(rows, "flows_classified"), c.flows.classified);
    assert_eq!(
        rows.last().unwrap()["flows_active"],
        0,
        "all ended at the end"
    );
    // Per application: the flow records' sums.
    let mut by_app: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for f in &one.flows {
        let e = by_app
            .entry(f["app"].as_str().unwrap().to_string())
            .or_default();
        e.0 += 1;
        e.1 += f["fwd_packets"].as_u64().unwrap() + f["bwd_packets"].as_u64().unwrap();
        e.2 += f["fwd_bytes"].as_u64().unwrap() + f["bwd_bytes"].as_u64().unwrap();
    }
    let mut from_rows: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for r in one.apps.iter().filter(|r| r["of"] == "app") {
        let e = from_rows
            .entry(r["name"].as_str().unwrap().to_string())
            .or_default();
        e.0 += r["flows_ended"].as_u64().unwrap();
        e.1 += r["packets"].as_u64().unwrap();
        e.2 += r["bytes"].as_u64().unwrap();
    }
    from_rows.retain(|_, v| v.0 > 0);
    assert_eq!(from_rows, by_app);
    let transports: u64 = one
        .apps
        .iter()
        .filter(|r| r["of"] == "transport")
        .map(|r| r["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(transports, c.ip_bytes_flowed);
    // Per port class: the flow records' TCP and UDP flows, each in the
    // class of its server port (docs/OPERATIONS.md).
    let mut by_port: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for f in &one.flows {
        let Some(class) = port_class_of(f) else {
            continue;
        };
        let e = by_port.entry(class).or_default();
        e.0 += 1;
        e.1 += f["fwd_packets"].as_u64().unwrap() + f["bwd_packets"].as_u64().unwrap();
        e.2 += f["fwd_bytes"].as_u64().unwrap() + f["bwd_bytes"].as_u64().unwrap();
    }
    let mut port_rows: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for r in one.apps.iter().filter(|r| r["of"] == "port") {
        assert_eq!(r["flows_classified"], 0, "{r}");
        let e = port_rows
            .entry(r["name"].as_str().unwrap().to_string())
            .or_default();
        e.0 += r["flows_ended"].as_u64().unwrap();
        e.1 += r["packets"].as_u64().unwrap();
        e.2 += r["bytes"].as_u64().unwrap();
    }
    assert!(by_port.len() >= 3, "{by_port:?}");
    assert_eq!(port_rows, by_port);
    // The metrics say the same.
    let text = one.metrics.render();
    assert_eq!(metric(&text, "earlybird_packets_total"), c.packets_read);
    assert_eq!(
        metric(&text, "earlybird_flows_created_total"),
        c.flows.created
    );
    assert_eq!(metric(&text, "earlybird_seconds_total"), rows.len() as u64);
    for (class, (flows, packets, bytes)) in &by_port {
        let m = |name: &str| metric(&text, &format!("{name}{{port=\"{class}\"}}"));
        assert_eq!(m("earlybird_port_flows_ended_total"), *flows, "{class}");
        assert_eq!(m("earlybird_port_packets_total"), *packets, "{class}");
        assert_eq!(m("earlybird_port_ip_bytes_total"), *bytes, "{class}");
    }
    // Several shards: the same packets in the same seconds. When a flow
    // ends (and a short flow is decided) depends on when the incremental
    // expiry of its shard reaches it, so those figures may move by a
    // second or so; their totals do not.
    let two = run(file, &mref, 2);
    assert_eq!(two.stats.len(), rows.len());
    const PACKETS: [&str; 7] = [
        "time",
        "packets",
        "bytes",
        "packets_flowed",
        "ip_bytes_flowed",
        "skipped",
        "flows_new",
    ];
    for (a, b) in rows.iter().zip(&two.stats) {
        for k in PACKETS {
            assert_eq!(a[k], b[k], "{k} in\n{a}\n{b}");
        }
    }
    for k in ["flows_ended", "flows_classified", "ended_idle", "ended_fin"] {
        assert_eq!(sum(rows, k), sum(&two.stats, k), "{k}");
    }
    assert_eq!(two.stats.last().unwrap()["flows_active"], 0);
}

#[test]
fn a_generated_capture_second_by_second() {
    check(&[spread()]);
}

#[test]
fn a_real_capture_second_by_second() {
    check(&[sample()]);
}

/// With the media analyzer on, the `media` rows of the per-second
/// statistics add up to the flow records' verdicts: per kind, the flows
/// decided and ended are the records of that kind, and the packets are
/// the records' packets from the deciding one on; the metrics say the
/// same and `promtool check metrics` accepts them. A heplify capture of
/// SIP and RTP (its RTP streams are audio).
#[test]
fn media_kinds_per_second_add_up_to_the_records() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let file = CaptureFile::open(&corpus.join("voip/heplify__rtp_rtcp_sip.pcap")).unwrap();
    let (stats, apps, flows) = (Shared::default(), Shared::default(), Shared::default());
    let media = vec!["media".to_string()];
    let eopts = ExportOptions {
        early_packets: 4,
        analyzed: earlybird::analyze::fields_of(&media).into(),
        ..Default::default()
    };
    let exporters = vec![
        earlybird::to_writer(Format::JsonLines, Box::new(flows.clone()), "flows", &eopts),
        earlybird::rows_to_writer(&STATS, Format::JsonLines, Box::new(stats.clone()), "s"),
        earlybird::rows_to_writer(&APP_STATS, Format::JsonLines, Box::new(apps.clone()), "a"),
    ];
    let metrics = Arc::new(Metrics::new());
    let mut opts = RunOptions {
        shards: 2,
        metrics: Some(metrics.clone()),
        ..RunOptions::default()
    };
    opts.flow.analyzers = media;
    let mref = ModelRef::default();
    earlybird::run(&[file], &opts, &mref, exporters, &RunControl::default()).unwrap();
    let (apps, flows) = (lines(&apps), lines(&flows));
    let text = metrics.render();
    let mut audio = 0;
    for kind in ["audio", "video", "file"] {
        let recs: Vec<&Value> = flows.iter().filter(|f| f["media"] == kind).collect();
        let rows: Vec<&Value> = apps
            .iter()
            .filter(|r| r["of"] == "media" && r["name"] == kind)
            .collect();
        let n = recs.len() as u64;
        assert_eq!(sum_refs(&rows, "flows_classified"), n, "{kind}");
        assert_eq!(sum_refs(&rows, "flows_ended"), n, "{kind}");
        let packets: u64 = recs
            .iter()
            .map(|f| {
                let all = f["fwd_packets"].as_u64().unwrap() + f["bwd_packets"].as_u64().unwrap();
                all + 1 - f["media_packet"].as_u64().unwrap()
            })
            .sum();
        assert_eq!(sum_refs(&rows, "packets"), packets, "{kind}");
        let bytes: u64 = recs
            .iter()
            .map(|f| f["fwd_bytes"].as_u64().unwrap() + f["bwd_bytes"].as_u64().unwrap())
            .sum();
        assert!(sum_refs(&rows, "bytes") <= bytes, "{kind}");
        if n > 0 {
            let l = format!("{{kind=\"{kind}\"}}");
            assert_eq!(
                metric(&text, &format!("earlybird_media_flows_decided_total{l}")),
                n
            );
            assert_eq!(
                metric(&text, &format!("earlybird_media_packets_total{l}")),
                packets
            );
        } else {
            assert!(!text.contains(&format!("kind=\"{kind}\"")), "{text}");
        }
        if kind == "audio" {
            audio = n;
        }
    }
    assert!(audio >= 2, "the RTP streams are audio: {flows:?}");
    if let Some(promtool) = common::tool("promtool", "prometheus") {
        let mut child = std::process::Command::new(promtool)
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "promtool: {}{}\n{text}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn sum_refs(rows: &[&Value], key: &str) -> u64 {
    rows.iter().map(|r| r[key].as_u64().unwrap()).sum()
}
