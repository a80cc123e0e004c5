//! Record precision and semantics on real captures: every per-direction
//! statistic equals what the packets of the flow give when recomputed here
//! from the capture (exact nanosecond inter-arrival extremes, exact sizes),
//! and what was not measured is `None` in the record and empty / `null` in
//! the output, never 0.

use crate::common;

use std::path::Path;

use earlybird::testing::{decode, Decoded, Key};
use earlybird::{
    collect, open_all, to_writer, CaptureFile, CollectedFlow, ExportOptions, FlowRecord, Format,
    ModelRef, RecordBatch, RunOptions,
};

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

/// The records of `flows` as written by the exporter of `format`.
fn text_of(flows: &[CollectedFlow], n: usize, format: Format) -> String {
    let mut batch = RecordBatch::with_capacity(flows.len(), n);
    for f in flows {
        batch.push(f.record, &f.early);
    }
    let out = common::Shared::default();
    let opts = ExportOptions {
        early_packets: n,
        class_names: Vec::new().into(),
        ..Default::default()
    };
    let mut ex = to_writer(format, Box::new(out.clone()), "memory", &opts);
    ex.write_batch(&batch).unwrap();
    ex.finish().unwrap();
    drop(ex);
    let bytes = out.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

fn csv_of(flows: &[CollectedFlow], n: usize) -> String {
    text_of(flows, n, Format::Csv)
}

fn jsonl_of(flows: &[CollectedFlow], n: usize) -> Vec<serde_json::Value> {
    text_of(flows, n, Format::JsonLines)
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
    let ports = |r: &earlybird::Report| {
        r.summary
            .by_port()
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let (bi_ports, uni_ports) = (ports(&bi), ports(&uni));
    let https = |m: &std::collections::BTreeMap<(u8, u16), _>| m[&(6, 443)];
    let (b, u): (earlybird::Totals, _) = (https(&bi_ports), https(&uni_ports));
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

/// Type and code of the ICMP / ICMPv6 message in `pkt` whose innermost IP
/// header is at `ip`, read here from the bytes (IPv6 extension headers
/// stepped over); `None` when fewer than 4 bytes of it are there.
fn icmp_of(pkt: &[u8], ip: usize) -> Option<(u8, u8)> {
    let h = pkt.get(ip..)?;
    let (mut next, mut off, end) = match h.first()? >> 4 {
        4 => {
            let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
            (h[9], usize::from(h[0] & 15) * 4, total)
        }
        _ => (h[6], 40, 40 + usize::from(u16::from_be_bytes([h[4], h[5]]))),
    };
    while matches!(next, 0 | 43 | 60 | 44) {
        let e = h.get(off..off + 2)?;
        next = e[0];
        off += if next == 44 {
            8
        } else {
            (usize::from(e[1]) + 1) * 8
        };
    }
    let m = h.get(off..(off + 4).min(end.max(off)))?;
    (m.len() == 4).then(|| (m[0], m[1]))
}

/// Every ICMP / ICMPv6 record of `path` carries the type and code of its
/// flow's first packet as read from the capture here, every other record
/// none, and CSV writes them as numbers or empty; returns the number of
/// ICMP flows.
fn check_icmp(path: &Path) -> usize {
    let flows = run(path, &RunOptions::default());
    let f = CaptureFile::open(path).unwrap();
    let mut r = f.reader();
    let (mut batch, mut firsts) = (Vec::new(), Vec::new());
    let mut d = Decoded::default();
    while r.next_batch(&mut batch, 256) > 0 {
        for p in &batch {
            if decode(p.link, p.bytes(f.bytes()), &mut d).is_ok() && matches!(d.proto, 1 | 58) {
                let icmp = icmp_of(p.bytes(f.bytes()), d.ip_offset.into());
                firsts.push((p.ts, d, icmp));
            }
        }
    }
    let mut n = 0;
    for fl in &flows {
        let rec = &fl.record;
        let got = rec.icmp.map(|m| (m.ty, m.code));
        if !matches!(rec.key.proto, 1 | 58) {
            assert_eq!(got, None, "{}: {:?}", path.display(), rec.key);
            continue;
        }
        n += 1;
        let c = client_packet(rec);
        let (key, _) = Key::from_decoded(&c, true);
        let want = firsts
            .iter()
            .find(|(ts, d, _)| {
                *ts == rec.first_ts && d.src == c.src && Key::from_decoded(d, true).0 == key
            })
            .map(|(_, _, icmp)| *icmp)
            .expect("the flow's first packet");
        assert_eq!(got, want, "{}: {:?}", path.display(), rec.key);
    }
    let csv = csv_of(&flows, 4);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    for (line, fl) in lines.zip(&flows) {
        let v: Vec<&str> = line.split(',').collect();
        let (ty, code) = (v[col("icmp_type")], v[col("icmp_code")]);
        match fl.record.icmp {
            Some(m) => assert_eq!((ty, code), (&*m.ty.to_string(), &*m.code.to_string())),
            None => assert_eq!((ty, code), ("", ""), "{line}"),
        }
    }
    n
}

/// ICMP and ICMPv6 type and code on a real capture: a port unreachable
/// (192.168.2.17 → 192.168.2.1, type 3 code 3) and IPv6 router
/// solicitation, neighbour solicitation and MLDv2 report (types 133, 135,
/// 143, the last behind a hop-by-hop header).
#[test]
fn icmp_type_and_code_of_the_first_packet() {
    let path = common::testdata().join("pcap/ndpi__iphone.pcap");
    assert_eq!(check_icmp(&path), 4);
    let flows = run(&path, &RunOptions::default());
    let mut types: Vec<(u8, u8, u8)> = flows
        .iter()
        .filter_map(|f| f.record.icmp.map(|m| (f.record.key.proto, m.ty, m.code)))
        .collect();
    types.sort();
    assert_eq!(types, [(1, 3, 3), (58, 133, 0), (58, 135, 0), (58, 143, 0)]);
}

/// The same on the corpus captures with ICMP: QUIC interop traffic with
/// ICMP errors, ICMP in GTP-U and in GRE/PPPoE tunnels, and a malformed
/// (cut) ICMP message.
#[test]
fn icmp_type_and_code_on_corpus_captures() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let mut total = 0;
    for rel in [
        "classify/dev/ndpi/pcap/quic_interop_V.pcapng",
        "classify/dev/ndpi/pcap/malformed_icmp.pcap",
        "tunnels/arkime__gtp-iphone.pcap",
        "tunnels/ndpi__gre.pcap",
    ] {
        let p = corpus.join(rel);
        if !p.exists() {
            eprintln!("SKIPPED: {} not in the corpus", p.display());
            continue;
        }
        let n = check_icmp(&p);
        assert!(n > 0, "{rel}: no ICMP flow");
        total += n;
    }
    eprintln!("{total} ICMP flows checked");
}
