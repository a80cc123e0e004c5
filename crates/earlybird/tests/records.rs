//! Record precision and semantics on real captures: every per-direction
//! statistic equals what the packets of the flow give when recomputed here
//! from the capture (exact nanosecond inter-arrival extremes, exact sizes),
//! and what was not measured is `None` in the record and empty / `null` in
//! the output, never 0.

mod common;

use std::path::Path;

use earlybird::decode::{decode, Decoded};
use earlybird::export::{to_writer, ExportOptions, Format};
use earlybird::flow::record::{FlowRecord, RecordBatch};
use earlybird::flow::Key;
use earlybird::pipeline::{collect, open_all, CollectedFlow, ModelRef, RunOptions};
use earlybird::source::CaptureFile;

fn run(path: &Path, opts: &RunOptions) -> Vec<CollectedFlow> {
    let files = open_all(&[path.to_path_buf()]).expect("open capture");
    collect(&files, opts, &ModelRef::default())
        .expect("pipeline run")
        .0
}

/// (timestamp, IP length, key, sent by the key's client side) of every
/// packet of `path` that decodes.
fn packets(path: &Path) -> Vec<(u64, u16, Decoded)> {
    let f = CaptureFile::open(path).unwrap();
    let mut r = f.reader();
    let (mut batch, mut out) = (Vec::new(), Vec::new());
    let mut d = Decoded::default();
    while r.next_batch(&mut batch, 256) > 0 {
        for p in &batch {
            if decode(p.link, p.bytes(f.bytes()), &mut d).is_ok() {
                out.push((p.ts, d.ip_len, d));
            }
        }
    }
    out
}

/// The record's key as a decoded packet sent by its client.
fn client_packet(r: &FlowRecord) -> Decoded {
    Decoded {
        src: r.key.src,
        dst: r.key.dst,
        sport: r.key.sport,
        dport: r.key.dport,
        proto: r.key.proto,
        vlan: r.key.vlan,
        tunnel: r.key.tunnel,
        tunnel_id: r.key.tunnel_id,
        ..Default::default()
    }
}

/// Per direction, the timestamps and sizes of the packets of record `r`
/// (same bidirectional key, time inside the flow), recomputed from the
/// capture.
fn directions(r: &FlowRecord, all: &[(u64, u16, Decoded)]) -> [Vec<(u64, u16)>; 2] {
    let c = client_packet(r);
    let (key, _) = Key::from_decoded(&c, true);
    let mut out = [Vec::new(), Vec::new()];
    for (ts, size, d) in all {
        if *ts < r.first_ts || *ts > r.last_ts || Key::from_decoded(d, true).0 != key {
            continue;
        }
        let fwd = d.src == c.src && d.sport == c.sport;
        out[usize::from(!fwd)].push((*ts, *size));
    }
    out
}

/// The inter-arrival minimum and maximum of every direction are the exact
/// nanosecond gaps between its packets (they were `f32`: 4 of the 56 flows
/// of this capture had a maximum above their duration), the sizes exact
/// too, and a direction without two packets has no inter-arrival
/// statistics, without a packet no size statistics.
#[test]
fn statistics_equal_the_packets_exactly() {
    let path = common::testdata().join("pcap/ndpi__iphone.pcap");
    let flows = run(&path, &RunOptions::default());
    let all = packets(&path);
    assert_eq!(flows.len(), 56);
    let (mut two_or_more, mut single, mut empty) = (0, 0, 0);
    for f in &flows {
        let r = &f.record;
        let dirs = directions(r, &all);
        for (d, pk) in dirs.iter().enumerate() {
            let ctx = format!("flow {:?} dir {d}", r.key);
            assert_eq!(pk.len() as u64, r.packets[d], "{ctx}: packets matched");
            let size = r.size[d];
            if pk.is_empty() {
                assert_eq!(size, None, "{ctx}");
                empty += 1;
            } else {
                let s = size.expect("measured");
                let min = pk.iter().map(|p| p.1).min().unwrap();
                let max = pk.iter().map(|p| p.1).max().unwrap();
                assert_eq!((s.min, s.max), (min.into(), max.into()), "{ctx}");
            }
            let iat = r.iat[d];
            if pk.len() < 2 {
                assert_eq!(iat, None, "{ctx}");
                single += usize::from(pk.len() == 1);
                continue;
            }
            two_or_more += 1;
            let gaps: Vec<u64> = pk.windows(2).map(|w| w[1].0 - w[0].0).collect();
            let s = iat.expect("measured");
            let (min, max) = (*gaps.iter().min().unwrap(), *gaps.iter().max().unwrap());
            assert_eq!((s.min, s.max), (min, max), "{ctx}: exact ns");
            assert!(
                s.max <= r.last_ts - r.first_ts,
                "{ctx}: max within the flow"
            );
            let span = (pk[pk.len() - 1].0 - pk[0].0) as f64;
            assert!((s.mean - span / gaps.len() as f64).abs() < 1e-6, "{ctx}");
            assert!(s.min as f64 <= s.mean && s.mean <= s.max as f64, "{ctx}");
        }
    }
    // The capture has every case.
    assert!(
        two_or_more > 30 && single > 5 && empty > 5,
        "{two_or_more} {single} {empty}"
    );
}

fn csv_of(flows: &[CollectedFlow], n: usize) -> String {
    let mut batch = RecordBatch::with_capacity(flows.len(), n);
    for f in flows {
        batch.push(f.record, &f.early);
    }
    let out = common::Shared::default();
    let opts = ExportOptions {
        early_packets: n,
        class_names: Vec::new().into(),
    };
    let mut ex = to_writer(Format::Csv, Box::new(out.clone()), "csv:memory", &opts);
    ex.write_batch(&batch).unwrap();
    ex.finish().unwrap();
    drop(ex);
    let bytes = out.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

fn jsonl_of(flows: &[CollectedFlow], n: usize) -> Vec<serde_json::Value> {
    let mut batch = RecordBatch::with_capacity(flows.len(), n);
    for f in flows {
        batch.push(f.record, &f.early);
    }
    let out = common::Shared::default();
    let opts = ExportOptions {
        early_packets: n,
        class_names: Vec::new().into(),
    };
    let mut ex = to_writer(Format::JsonLines, Box::new(out.clone()), "jsonl", &opts);
    ex.write_batch(&batch).unwrap();
    ex.finish().unwrap();
    drop(ex);
    let bytes = out.0.lock().unwrap().clone();
    String::from_utf8(bytes)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The statistics columns (sizes, gaps, TCP flag counts).
fn stat_columns(header: &[&str]) -> Vec<usize> {
    (0..header.len())
        .filter(|&i| {
            let h = header[i];
            (h.starts_with("fwd_") || h.starts_with("bwd_"))
                && !h.ends_with("_packets")
                && !h.ends_with("_bytes")
        })
        .collect()
}

/// `--stats basic` keeps no size/gap statistics and no flag counts: every
/// one of those 32 fields is empty in CSV and `null` in JSON lines on every
/// flow (they were written as 0), while packets and bytes stay.
#[test]
fn basic_statistics_are_empty_not_zero() {
    let path = common::testdata().join("pcap/ndpi__iphone.pcap");
    let mut opts = RunOptions::default();
    opts.flow.full_stats = false;
    let flows = run(&path, &opts);
    let csv = csv_of(&flows, 4);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let cols = stat_columns(&header);
    assert_eq!(cols.len(), 32);
    for line in lines {
        let v: Vec<&str> = line.split(',').collect();
        for &i in &cols {
            assert_eq!(v[i], "", "{} in {line}", header[i]);
        }
        let p = header.iter().position(|h| *h == "fwd_packets").unwrap();
        assert_ne!(v[p], "");
    }
    for obj in jsonl_of(&flows, 4) {
        for &i in &cols {
            assert!(obj[header[i]].is_null(), "{}: {obj}", header[i]);
        }
        assert!(obj["fwd_packets"].as_u64().unwrap() > 0);
    }
}

/// With full statistics, a one-way flow's server → client statistics are
/// empty (no packet), its gaps empty when it had one packet; early-packet
/// columns beyond the flow's packets are empty; every measured value is
/// a number.
#[test]
fn not_measured_cases_are_empty_on_a_real_capture() {
    let path = common::testdata().join("pcap/ndpi__iphone.pcap");
    let flows = run(&path, &RunOptions::default());
    let csv = csv_of(&flows, 4);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let (mut one_way, mut short) = (0, 0);
    for (line, f) in lines.zip(&flows) {
        let v: Vec<&str> = line.split(',').collect();
        let r = &f.record;
        for (d, dir) in ["fwd", "bwd"].iter().enumerate() {
            for q in ["min", "max", "mean", "std"] {
                let size = v[col(&format!("{dir}_size_{q}"))];
                let iat = v[col(&format!("{dir}_iat_{q}"))];
                assert_eq!(size.is_empty(), r.packets[d] == 0, "{dir}_size_{q}: {line}");
                assert_eq!(iat.is_empty(), r.packets[d] < 2, "{dir}_iat_{q}: {line}");
            }
            // Flag counts are measured (0 for UDP and ICMP).
            assert!(v[col(&format!("{dir}_syn"))].parse::<u32>().is_ok());
        }
        one_way += usize::from(r.packets[1] == 0);
        let len = r.early_len as usize;
        for i in 1..=4 {
            let cells = ["size", "dir", "iat_us"].map(|s| v[col(&format!("pkt{i}_{s}"))]);
            assert_eq!(
                cells.iter().all(|c| c.is_empty()),
                i > len,
                "pkt{i}: {line}"
            );
            assert_eq!(
                cells.iter().any(|c| c.is_empty()),
                i > len,
                "pkt{i}: {line}"
            );
        }
        short += usize::from(len < 4);
    }
    assert!(one_way > 5 && short > 5, "{one_way} {short}");
}

/// `--unidirectional`: each direction is a flow, and the reply direction's
/// destination is the client's ephemeral port; the summary counts it under
/// the service's port. The capture's HTTPS traffic (both directions) is all
/// under tcp/443, as in bidirectional mode, and no client's ephemeral port
/// is named a service (they were: tcp/50575 …).
#[test]
fn unidirectional_summary_names_service_ports() {
    let path = common::testdata().join("pcap/ndpi__iphone.pcap");
    let files = open_all(&[path]).unwrap();
    let bi = collect(&files, &RunOptions::default(), &ModelRef::default())
        .unwrap()
        .1;
    let mut opts = RunOptions::default();
    opts.flow.bidirectional = false;
    let (flows, uni) = collect(&files, &opts, &ModelRef::default()).unwrap();
    let ports = |r: &earlybird::telemetry::summary::Report| {
        r.summary
            .by_port()
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let (bi_ports, uni_ports) = (ports(&bi), ports(&uni));
    let https = |m: &std::collections::BTreeMap<(u8, u16), _>| m[&(6, 443)];
    let (b, u): (earlybird::telemetry::summary::Totals, _) = (https(&bi_ports), https(&uni_ports));
    assert_eq!((u.bytes, u.packets), (b.bytes, b.packets));
    assert!(u.flows > b.flows, "both directions are flows");
    // Reply directions exist (their destination is ephemeral) …
    assert!(flows
        .iter()
        .any(|f| f.record.key.proto == 6 && f.record.key.dport >= 49152));
    // … and none is counted as a service: every group is one the
    // bidirectional run (where the server port is the receiver of the
    // session's first packet) has too.
    for ((proto, port), t) in &uni_ports {
        assert!(
            bi_ports.contains_key(&(*proto, *port)),
            "{proto}/{port} counted as a service: {t:?}"
        );
    }
    let text = uni.to_string();
    assert!(!text.contains("tcp/505"), "{text}");
}
