//! Compliance test every exporter passes: the same varied records (IPv4,
//! IPv6, tunnels, unknown and named apps, NaN statistics, fewer and more
//! early packets than N, N = 4 and N = 32, a batch larger than one output
//! chunk) are written by each format, parsed back with an independent parser
//! (`csv`, `serde_json`, the IPFIX decoder of `compliance_ipfix.rs`, the
//! `parquet` crate's Arrow reader) and compared field by field with values
//! computed here from the records, independently of the exporters'
//! formatting code.

use std::io::Write;
use std::sync::{Arc, Mutex};

use super::{fields, to_writer, ExportOptions, Format};
use crate::classify::Verdict;
use crate::decode::icmp::Icmp;
use crate::decode::{fmt_addr, map_v4, TunnelKind};
use crate::features::early::EarlyPkt;
use crate::features::stats::Stat;
use crate::features::Dir;
use crate::flow::record::{EndReason, FlowRecord, RecordBatch, RecordKey, TCP_FLAG_NAMES};

/// A writer whose bytes the test can read after the exporter took it.
#[derive(Clone, Default)]
pub(super) struct Shared(pub(super) Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An expected value.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum V {
    U(u64),
    I(i64),
    /// None: not finite (CSV empty, JSON null).
    F(Option<f64>),
    /// Not measured (CSV empty, JSON null).
    Null,
    S(String),
}

fn v6(s: &str) -> [u8; 16] {
    s.parse::<std::net::Ipv6Addr>().unwrap().octets()
}

fn stat(min: u64, max: u64, mean: f64, std: f64) -> Option<Stat> {
    Some(Stat {
        min,
        max,
        mean,
        std,
    })
}

fn early(n: usize, seed: u32) -> Vec<EarlyPkt> {
    (0..n as u32)
        .map(|k| EarlyPkt {
            size: (40 + (k * 97 + seed) % 1460) as u16,
            dir: if (k + seed) % 3 < 1 {
                Dir::Bwd
            } else {
                Dir::Fwd
            },
            flags: (k % 256) as u8,
            iat_us: if k == 0 { 0 } else { k * 1000 + seed },
        })
        .collect()
}

/// Varied records with their early packets.
pub(super) fn sample() -> Vec<(FlowRecord, Vec<EarlyPkt>)> {
    let mut v = Vec::new();
    // IPv4 TCP, named app, VLAN, MACs, flags.
    let mut r = FlowRecord {
        key: RecordKey {
            src: map_v4([192, 168, 1, 10]),
            dst: map_v4([93, 184, 216, 34]),
            sport: 51234,
            dport: 443,
            proto: 6,
            ip_version: 4,
            vlan: 100,
            tunnel: TunnelKind::None,
            tunnel_id: 0,
        },
        src_mac: [0x00, 0x1b, 0x21, 0xaa, 0xbb, 0xcc],
        dst_mac: [0xff, 0xee, 0x0d, 0x01, 0x02, 0x03],
        first_ts: 1_700_000_000_123_456_789,
        last_ts: 1_700_000_005_000_000_000,
        packets: [12, 10],
        bytes: [2345, 45678],
        size: [
            stat(40, 517, 195.4166666, 150.12345678),
            stat(40, 1500, 4567.8 / 10.0, 600.0 / 7.0),
        ],
        iat: [
            stat(1000, 2_000_000_001, 1.0 / 3.0, 2.0 / 3.0),
            stat(0, 6_022_558_000, 1499.9996, 12.05),
        ],
        tcp_flags: Some([[1, 1, 0, 5, 11, 0, 0, 0], [1, 1, 0, 7, 10, 2, 3, 4]]),
        icmp: None,
        end: EndReason::Fin,
        early_len: 0,
        verdict: Verdict {
            class: 0,
            confidence: 0.95,
            at_packet: 4,
        },
        model_id: None,
    };
    v.push((r, early(10, 1)));
    // IPv6 UDP, unknown verdict, two early packets.
    r.key = RecordKey {
        src: v6("2001:db8::1"),
        dst: v6("fe80::1:0:0:abcd"),
        sport: 5353,
        dport: 53,
        proto: 17,
        ip_version: 6,
        vlan: 0,
        tunnel: TunnelKind::None,
        tunnel_id: 0,
    };
    r.tcp_flags = Some([[0; 8]; 2]);
    r.end = EndReason::Idle;
    r.verdict = Verdict {
        class: Verdict::UNKNOWN,
        confidence: 0.0,
        at_packet: 0,
    };
    v.push((r, early(2, 2)));
    // GRE tunnel, class whose name needs escaping.
    r.key.src = map_v4([10, 0, 0, 1]);
    r.key.dst = map_v4([10, 0, 0, 2]);
    r.key.ip_version = 4;
    r.key.tunnel = TunnelKind::Gre;
    r.key.tunnel_id = 42;
    r.end = EndReason::Rst;
    r.verdict = Verdict {
        class: 1,
        confidence: 0.5,
        at_packet: 8,
    };
    v.push((r, early(4, 3)));
    // VXLAN over IPv6 inner, class index the model does not have.
    r.key.src = v6("::1");
    r.key.dst = v6("1:0:0:2::3");
    r.key.ip_version = 6;
    r.key.tunnel = TunnelKind::Vxlan;
    r.key.tunnel_id = 0x00ff_ffff;
    r.end = EndReason::Evicted;
    r.verdict.class = 77;
    v.push((r, early(32, 4)));
    // An all-zero record.
    v.push((FlowRecord::default(), Vec::new()));
    // Extremes: huge counters, huge and non-finite statistics, ICMP in IPIP.
    let mut x = FlowRecord::default();
    x.key.src = map_v4([255, 255, 255, 255]);
    x.key.dst = map_v4([0, 0, 0, 0]);
    x.key.sport = 0x0800;
    x.key.proto = 1;
    x.icmp = Some(Icmp { ty: 8, code: 0 });
    x.key.ip_version = 4;
    x.key.vlan = 4095;
    x.key.tunnel = TunnelKind::IpInIp;
    x.key.tunnel_id = u32::MAX;
    x.first_ts = 5;
    x.last_ts = u64::MAX;
    x.packets = [u64::MAX, 1];
    x.bytes = [u64::MAX, u64::MAX - 1];
    x.size = [stat(20, 65535, 1e300, f64::NAN), None];
    x.iat = [stat(0, 9_007_199_254_740_993, 123456789.987654, 0.0), None];
    x.tcp_flags = Some([[u32::MAX; 8], [7; 8]]);
    x.end = EndReason::EndOfInput;
    x.verdict = Verdict {
        class: 2,
        confidence: 1.0,
        at_packet: 255,
    };
    let mut e = early(32, 5);
    e[31].iat_us = u32::MAX;
    e[31].size = u16::MAX;
    v.push((x, e));
    // Active timeout in GTP-U, ends before it starts (saturating duration).
    let mut y = v[0].0;
    y.key.tunnel = TunnelKind::Gtp;
    y.key.tunnel_id = 0xdead_beef;
    y.end = EndReason::Active;
    y.first_ts = 10;
    y.last_ts = 3;
    v.push((y, early(5, 6)));
    // ICMPv6 with the largest type and code.
    let mut w = v[1].0;
    w.key.proto = 58;
    w.key.sport = 0;
    w.key.dport = 0;
    w.icmp = Some(Icmp { ty: 255, code: 255 });
    v.push((w, early(3, 8)));
    // Basic statistics: nothing measured.
    let mut z = v[0].0;
    z.size = [None; 2];
    z.iat = [None; 2];
    z.tcp_flags = None;
    v.push((z, early(1, 7)));
    v
}

fn mac(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The Community ID seed of the runs (not the default, so that a writer
/// that ignored it would be caught).
pub(super) const SEED: u16 = 7;

/// The scalar fields of `r` as (name, value), independent of the exporters.
fn expected(r: &FlowRecord, early_len: usize, names: &[String]) -> Vec<(String, V)> {
    let mut out: Vec<(String, V)> = Vec::new();
    let mut push = |n: &str, v: V| out.push((n.to_string(), v));
    let k = &r.key;
    push("src", V::S(fmt_addr(&k.src)));
    push("dst", V::S(fmt_addr(&k.dst)));
    push("sport", V::U(k.sport.into()));
    push("dport", V::U(k.dport.into()));
    push("proto", V::U(k.proto.into()));
    let (ty, code) = match r.icmp {
        Some(m) => (V::U(m.ty.into()), V::U(m.code.into())),
        None => (V::Null, V::Null),
    };
    push("icmp_type", ty);
    push("icmp_code", code);
    push("ip_version", V::U(k.ip_version.into()));
    push("vlan", V::U(k.vlan.into()));
    push("tunnel", V::S(k.tunnel.name().into()));
    push("tunnel_id", V::U(k.tunnel_id.into()));
    push("src_mac", V::S(mac(&r.src_mac)));
    push("dst_mac", V::S(mac(&r.dst_mac)));
    push(
        "community_id",
        super::community_id::of_record(SEED, k, r.icmp).map_or(V::Null, |c| V::S(c.to_string())),
    );
    push("first_ts", V::U(r.first_ts));
    push("last_ts", V::U(r.last_ts));
    push("duration_ns", V::U(r.last_ts.saturating_sub(r.first_ts)));
    for (d, dir) in ["fwd", "bwd"].iter().enumerate() {
        push(&format!("{dir}_packets"), V::U(r.packets[d]));
        push(&format!("{dir}_bytes"), V::U(r.bytes[d]));
        for (q, st) in [("size", &r.size[d]), ("iat", &r.iat[d])] {
            let finite = |v: f64| V::F(Some(v).filter(|v| v.is_finite()));
            let (min, max, mean, std) = match st {
                Some(s) => (V::U(s.min), V::U(s.max), finite(s.mean), finite(s.std)),
                None => (V::Null, V::Null, V::Null, V::Null),
            };
            push(&format!("{dir}_{q}_min"), min);
            push(&format!("{dir}_{q}_max"), max);
            push(&format!("{dir}_{q}_mean"), mean);
            push(&format!("{dir}_{q}_std"), std);
        }
        for (b, flag) in TCP_FLAG_NAMES.iter().enumerate() {
            let v = r.tcp_flags.map_or(V::Null, |f| V::U(f[d][b].into()));
            push(&format!("{dir}_{flag}"), v);
        }
    }
    push("end_reason", V::S(r.end.name().into()));
    let app = if r.verdict.class == Verdict::UNKNOWN {
        "unknown".to_string()
    } else {
        names
            .get(r.verdict.class as usize)
            .cloned()
            .unwrap_or_else(|| "unknown".into())
    };
    push("app", V::S(app));
    push(
        "app_confidence",
        V::F(Some(f64::from(r.verdict.confidence))),
    );
    push("decided_at_packet", V::U(r.verdict.at_packet.into()));
    push("early_len", V::U(early_len as u64));
    out
}

pub(super) fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 0.0005 + want.abs() * 1e-15
}

pub(super) fn check_text(ctx: &str, got: &str, want: &V) {
    let ok = match want {
        V::U(w) => got.parse::<u64>().ok() == Some(*w),
        V::I(w) => got.parse::<i64>().ok() == Some(*w),
        V::F(None) | V::Null => got.is_empty(),
        V::F(Some(w)) => got.parse::<f64>().is_ok_and(|g| close(g, *w)),
        V::S(w) => got == w,
    };
    assert!(ok, "{ctx}: got {got:?}, want {want:?}");
}

pub(super) fn check_json(ctx: &str, got: &serde_json::Value, want: &V) {
    let ok = match want {
        V::U(w) => got.as_u64() == Some(*w),
        V::I(w) => got.as_i64() == Some(*w),
        V::F(None) | V::Null => got.is_null(),
        V::F(Some(w)) => got.as_f64().is_some_and(|g| close(g, *w)),
        V::S(w) => got.as_str() == Some(w.as_str()),
    };
    assert!(ok, "{ctx}: got {got}, want {want:?}");
}

fn dir(p: &EarlyPkt) -> i64 {
    if p.dir == Dir::Fwd {
        1
    } else {
        -1
    }
}

fn batches(recs: &[(FlowRecord, Vec<EarlyPkt>)], stride: usize) -> Vec<RecordBatch> {
    // Two small batches, then one larger than an output chunk.
    let mut out = Vec::new();
    let (a, b) = recs.split_at(recs.len() / 2);
    for part in [a, b] {
        let mut bt = RecordBatch::with_capacity(part.len(), stride);
        for (r, e) in part {
            bt.push(*r, e);
        }
        out.push(bt);
    }
    let mut big = RecordBatch::with_capacity(3000, stride);
    for i in 0..3000u64 {
        let (mut r, e) = recs[(i as usize) % recs.len()].clone();
        r.first_ts = r.first_ts.wrapping_add(i);
        r.key.sport = r.key.sport.wrapping_add(i as u16);
        r.bytes[1] = r.bytes[1].wrapping_add(i);
        if let Some(s) = &mut r.size[0] {
            s.mean += i as f64 / 7.0;
        }
        big.push(r, &e[..e.len().min(i as usize % 40)]);
    }
    out.push(big);
    out
}

fn run(format: Format, n: usize, stride: usize, names: &[String]) {
    let recs = sample();
    let batches = batches(&recs, stride);
    let shared = Shared::default();
    let opts = ExportOptions {
        early_packets: n,
        class_names: names.to_vec().into(),
        community_id_seed: SEED,
        ..Default::default()
    };
    let mut ex = to_writer(format, Box::new(shared.clone()), "test", &opts);
    for b in &batches {
        ex.write_batch(b).unwrap();
    }
    ex.finish().unwrap();
    let bytes = shared.0.lock().unwrap().clone();
    // Every (record, early packets) in output order.
    let all: Vec<(FlowRecord, Vec<EarlyPkt>)> = batches
        .iter()
        .flat_map(|b| b.iter().map(|(r, e)| (*r, e.to_vec())))
        .collect();
    let ctx = format!("{format:?} N={n} stride={stride} names={}", names.len());
    match format {
        Format::Null => assert!(bytes.is_empty(), "{ctx}: null wrote output"),
        Format::Csv => check_csv(&ctx, &bytes, &all, n, names),
        Format::JsonLines => check_jsonl(&ctx, &bytes, &all, n, names),
        Format::Ipfix => super::compliance_ipfix::check(&ctx, &bytes, &all, n, names, true, 65535),
        #[cfg(feature = "parquet")]
        Format::Parquet => check_parquet(&ctx, &bytes, &all, n, names),
        Format::Netflow => super::netflow::tests::check_v9(&ctx, &bytes, &all, names, SEED),
        // What it posts: JSON lines.
        Format::ClickHouse => check_jsonl(&ctx, &bytes, &all, n, names),
    }
}

fn check_csv(
    ctx: &str,
    bytes: &[u8],
    all: &[(FlowRecord, Vec<EarlyPkt>)],
    n: usize,
    names: &[String],
) {
    let mut rd = ::csv::ReaderBuilder::new().from_reader(bytes);
    let header: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header, fields::csv_columns(n), "{ctx}: header");
    let rows: Vec<::csv::StringRecord> = rd.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), all.len(), "{ctx}: record count");
    for (row_i, (row, (r, e))) in rows.iter().zip(all).enumerate() {
        let col = |name: &str| {
            let i = header.iter().position(|h| h == name).unwrap();
            row.get(i).unwrap().to_string()
        };
        let len = e.len().min(n);
        for (name, want) in expected(r, len, names) {
            check_text(&format!("{ctx} row {row_i} {name}"), &col(&name), &want);
        }
        for i in 0..n {
            let p = e.get(i).filter(|_| i < len);
            let (s, d, t) = p.map_or((V::Null, V::Null, V::Null), |p| {
                (V::U(p.size.into()), V::I(dir(p)), V::U(p.iat_us.into()))
            });
            let c = format!("{ctx} row {row_i} pkt{}", i + 1);
            check_text(&c, &col(&format!("pkt{}_size", i + 1)), &s);
            check_text(&c, &col(&format!("pkt{}_dir", i + 1)), &d);
            check_text(&c, &col(&format!("pkt{}_iat_us", i + 1)), &t);
        }
    }
}

fn check_jsonl(
    ctx: &str,
    bytes: &[u8],
    all: &[(FlowRecord, Vec<EarlyPkt>)],
    n: usize,
    names: &[String],
) {
    let text = std::str::from_utf8(bytes).unwrap();
    assert!(text.ends_with('\n'), "{ctx}: last line not terminated");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), all.len(), "{ctx}: record count");
    let keys: Vec<&str> = fields::FIELDS
        .iter()
        .map(|f| f.name)
        .chain(fields::EARLY_FIELDS.iter().map(|e| e.json))
        .collect();
    for (li, (line, (r, e))) in lines.iter().zip(all).enumerate() {
        // Keys appear exactly once each, in field-list order.
        let mut at = 0;
        for k in &keys {
            let pat = format!("\"{k}\":");
            let pos = line[at..]
                .find(&pat)
                .unwrap_or_else(|| panic!("{ctx} line {li}: {k} missing or out of order"));
            at += pos + pat.len();
        }
        let obj: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line)
            .unwrap_or_else(|err| panic!("{ctx} line {li}: {err}: {line}"));
        assert_eq!(obj.len(), keys.len(), "{ctx} line {li}: key count");
        let len = e.len().min(n);
        for (name, want) in expected(r, len, names) {
            check_json(&format!("{ctx} line {li} {name}"), &obj[&name], &want);
        }
        let arr = |k: &str| obj[k].as_array().unwrap().clone();
        let (sz, dr, iat) = (arr("early_size"), arr("early_dir"), arr("early_iat_us"));
        assert_eq!(
            (sz.len(), dr.len(), iat.len()),
            (len, len, len),
            "{ctx} line {li}"
        );
        for (i, p) in e[..len].iter().enumerate() {
            let c = format!("{ctx} line {li} early[{i}]");
            check_json(&c, &sz[i], &V::U(p.size.into()));
            check_json(&c, &dr[i], &V::I(dir(p)));
            check_json(&c, &iat[i], &V::U(p.iat_us.into()));
        }
    }
}

#[test]
fn every_exporter_round_trips_every_field() {
    let names: Vec<String> = vec!["tls".into(), "we,ird \"name\"\n\\x".into(), "dns".into()];
    let formats = [
        Format::Csv,
        Format::JsonLines,
        Format::Null,
        Format::Ipfix,
        Format::Netflow,
        Format::ClickHouse,
    ];
    #[cfg(feature = "parquet")]
    let formats = [formats.as_slice(), &[Format::Parquet]].concat();
    for format in formats {
        for (n, stride) in [(4, 4), (32, 32), (4, 32), (32, 8), (0, 4)] {
            run(format, n, stride, &names);
        }
        // No model: every app is "unknown".
        run(format, 8, 8, &[]);
    }
}

/// The columns of a Parquet file read with the `parquet` crate's Arrow
/// reader: (name, Arrow type) per column, and every cell as a [`V`] (null:
/// [`V::Null`]; floats as `V::F(Some)`, exact).
#[cfg(feature = "parquet")]
pub(super) fn parquet_cells(
    ctx: &str,
    bytes: &[u8],
) -> (Vec<(String, arrow_schema::DataType)>, Vec<Vec<V>>) {
    use arrow_array::cast::AsArray;
    use arrow_array::types::*;
    use arrow_array::{Array, RecordBatchReader};
    use arrow_schema::DataType as T;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    let mut f = tempfile::tempfile().unwrap();
    f.write_all(bytes).unwrap();
    let rd = ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap_or_else(|e| panic!("{ctx}: not a Parquet file: {e}"))
        .with_batch_size(1000)
        .build()
        .unwrap();
    let schema = rd.schema();
    let cols: Vec<(String, T)> = schema
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .collect();
    let mut rows = Vec::new();
    for b in rd {
        let b = b.unwrap_or_else(|e| panic!("{ctx}: {e}"));
        for i in 0..b.num_rows() {
            let row = b
                .columns()
                .iter()
                .map(|a| {
                    if a.is_null(i) {
                        return V::Null;
                    }
                    match a.data_type() {
                        T::UInt8 => V::U(a.as_primitive::<UInt8Type>().value(i).into()),
                        T::UInt16 => V::U(a.as_primitive::<UInt16Type>().value(i).into()),
                        T::UInt32 => V::U(a.as_primitive::<UInt32Type>().value(i).into()),
                        T::UInt64 => V::U(a.as_primitive::<UInt64Type>().value(i)),
                        T::Int8 => V::I(a.as_primitive::<Int8Type>().value(i).into()),
                        T::Int64 => V::I(a.as_primitive::<Int64Type>().value(i)),
                        T::Float64 => V::F(Some(a.as_primitive::<Float64Type>().value(i))),
                        T::Utf8 => V::S(a.as_string::<i32>().value(i).to_string()),
                        t => panic!("{ctx}: unexpected column type {t}"),
                    }
                })
                .collect();
            rows.push(row);
        }
    }
    (cols, rows)
}

/// A Parquet cell against its expected value: the same variant and value
/// (floats exact: Parquet keeps the `f64`); not measured and not finite
/// are null.
#[cfg(feature = "parquet")]
pub(super) fn check_cell(ctx: &str, got: &V, want: &V) {
    let ok = match (want, got) {
        (V::F(None) | V::Null, g) => *g == V::Null,
        (V::F(Some(w)), V::F(Some(g))) => g.to_bits() == w.to_bits(),
        (w, g) => w == g,
    };
    assert!(ok, "{ctx}: got {got:?}, want {want:?}");
}

#[cfg(feature = "parquet")]
fn check_parquet(
    ctx: &str,
    bytes: &[u8],
    all: &[(FlowRecord, Vec<EarlyPkt>)],
    n: usize,
    names: &[String],
) {
    use crate::export::parquet::arrow_type;
    let (cols, rows) = parquet_cells(ctx, bytes);
    let header: Vec<String> = cols.iter().map(|c| c.0.clone()).collect();
    assert_eq!(header, fields::csv_columns(n), "{ctx}: the CSV's columns");
    for (f, (name, ty)) in fields::FIELDS.iter().zip(&cols) {
        assert_eq!(*ty, arrow_type(f.ty), "{ctx}: type of {name}");
    }
    for (k, (name, ty)) in cols[fields::FIELDS.len()..].iter().enumerate() {
        let e = &fields::EARLY_FIELDS[k % fields::EARLY_FIELDS.len()];
        assert_eq!(*ty, arrow_type(e.ty), "{ctx}: type of {name}");
    }
    assert_eq!(rows.len(), all.len(), "{ctx}: record count");
    for (row_i, (row, (r, e))) in rows.iter().zip(all).enumerate() {
        let col = |name: &str| &row[header.iter().position(|h| h == name).unwrap()];
        let len = e.len().min(n);
        for (name, want) in expected(r, len, names) {
            check_cell(&format!("{ctx} row {row_i} {name}"), col(&name), &want);
        }
        for i in 0..n {
            let p = e.get(i).filter(|_| i < len);
            let (s, d, t) = p.map_or((V::Null, V::Null, V::Null), |p| {
                (V::U(p.size.into()), V::I(dir(p)), V::U(p.iat_us.into()))
            });
            let c = format!("{ctx} row {row_i} pkt{}", i + 1);
            check_cell(&c, col(&format!("pkt{}_size", i + 1)), &s);
            check_cell(&c, col(&format!("pkt{}_dir", i + 1)), &d);
            check_cell(&c, col(&format!("pkt{}_iat_us", i + 1)), &t);
        }
    }
}
