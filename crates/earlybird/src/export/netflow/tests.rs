//! NetFlow packets decoded by a small decoder written here from RFC 3954
//! and the v5 layout (independent of the encoders), compared field by
//! field with the records; the compliance test (`compliance.rs`) runs
//! [`check_v9`] on the records every exporter gets.

use std::collections::HashMap;
use std::net::UdpSocket;
use std::path::Path;
use std::time::Duration;

use super::*;
use crate::classify::Verdict;
use crate::decode::fmt_addr;
use crate::export::compliance::{sample, Shared};
use crate::flow::record::{FlowRecord, RecordBatch};
use crate::sample::{Policy, Sampling};

/// The first and last times (ms) a record's NetFlow records say: packet
/// headers end in 2106, and a flow of 2^32 ms or more starts 2^32 − 1 ms
/// before the end of its packet's export second.
pub(crate) fn want_times(r: &FlowRecord) -> (u64, u64) {
    let latest = (u64::from(u32::MAX) - 1) * 1000;
    let first = (r.first_ts / 1_000_000).min(latest);
    let last = (r.last_ts / 1_000_000).min(latest).max(first);
    let export = last.div_ceil(1000) * 1000;
    (first.max(export.saturating_sub(u64::from(u32::MAX))), last)
}

fn be(b: &[u8]) -> u64 {
    b.iter().fold(0, |a, &x| (a << 8) | u64::from(x))
}

/// One decoded v9 data record: template id, (type → value), the packet's
/// origin in ms since 1970 (unix_secs × 1000 − sysUptime).
#[derive(Debug)]
pub(crate) struct V9Record {
    pub(crate) template: u16,
    pub(crate) fields: HashMap<u16, Vec<u8>>,
    pub(crate) origin_ms: u64,
}

/// A v9 packet's header values and record count.
#[derive(Debug)]
pub(crate) struct V9Packet {
    pub(crate) len: usize,
    pub(crate) seq: u32,
    pub(crate) source_id: u32,
    pub(crate) templates: usize,
    pub(crate) options: Vec<(u32, u32, u8)>,
}

/// A template's (type, length) pairs.
type Fields = Vec<(u16, u16)>;

/// Decodes a stream of v9 packets (one after the other; each ends when
/// its header's count of records is reached).
pub(crate) fn decode_v9(mut b: &[u8]) -> (Vec<V9Packet>, Vec<V9Record>) {
    let mut templates: HashMap<u16, Vec<(u16, u16)>> = HashMap::new();
    let mut options: HashMap<u16, (Fields, Fields)> = HashMap::new();
    let (mut packets, mut records) = (Vec::new(), Vec::new());
    while !b.is_empty() {
        assert_eq!(be(&b[0..2]), 9, "version");
        let count = be(&b[2..4]) as u16;
        let uptime = be(&b[4..8]);
        let secs = be(&b[8..12]);
        let mut p = V9Packet {
            len: 0,
            seq: be(&b[12..16]) as u32,
            source_id: be(&b[16..20]) as u32,
            templates: 0,
            options: Vec::new(),
        };
        let mut at = 20;
        let mut seen = 0u16;
        while seen < count {
            let id = be(&b[at..at + 2]) as u16;
            let len = be(&b[at + 2..at + 4]) as usize;
            assert!(len >= 4 && len.is_multiple_of(4), "set length {len}");
            let set = &b[at + 4..at + len];
            match id {
                0 => {
                    let mut i = 0;
                    while i + 4 <= set.len() {
                        let tid = be(&set[i..i + 2]) as u16;
                        let n = be(&set[i + 2..i + 4]) as usize;
                        if tid == 0 {
                            break; // padding
                        }
                        let f = (0..n)
                            .map(|k| {
                                let o = i + 4 + 4 * k;
                                (be(&set[o..o + 2]) as u16, be(&set[o + 2..o + 4]) as u16)
                            })
                            .collect();
                        templates.insert(tid, f);
                        i += 4 + 4 * n;
                        seen += 1;
                        p.templates += 1;
                    }
                }
                1 => {
                    let tid = be(&set[0..2]) as u16;
                    let (sl, ol) = (be(&set[2..4]) as usize, be(&set[4..6]) as usize);
                    let pairs = |from: usize, bytes: usize| -> Vec<(u16, u16)> {
                        (0..bytes / 4)
                            .map(|k| {
                                let o = from + 4 * k;
                                (be(&set[o..o + 2]) as u16, be(&set[o + 2..o + 4]) as u16)
                            })
                            .collect()
                    };
                    options.insert(tid, (pairs(6, sl), pairs(6 + sl, ol)));
                    seen += 1;
                }
                t if options.contains_key(&t) => {
                    let (scope, opts) = &options[&t];
                    let mut o = 0;
                    let mut vals = HashMap::new();
                    for (ty, l) in scope.iter().chain(opts) {
                        vals.insert(*ty, be(&set[o..o + usize::from(*l)]));
                        o += usize::from(*l);
                    }
                    p.options
                        .push((vals[&1] as u32, vals[&34] as u32, vals[&35] as u8));
                    seen += 1;
                }
                t => {
                    let f = &templates[&t];
                    let rl: usize = f.iter().map(|x| usize::from(x.1)).sum();
                    let mut o = 0;
                    while o + rl <= set.len() && seen < count {
                        let mut fields = HashMap::new();
                        for (ty, l) in f {
                            fields.insert(*ty, set[o..o + usize::from(*l)].to_vec());
                            o += usize::from(*l);
                        }
                        records.push(V9Record {
                            template: t,
                            fields,
                            origin_ms: secs * 1000 - uptime,
                        });
                        seen += 1;
                    }
                }
            }
            at += len;
        }
        p.len = at;
        packets.push(p);
        b = &b[at..];
    }
    (packets, records)
}

/// The records of `all` in v9: each record gives one data record per
/// direction with packets, in order, every field as the record says.
pub(crate) fn check_v9(
    ctx: &str,
    bytes: &[u8],
    all: &[(FlowRecord, Vec<crate::features::early::EarlyPkt>)],
    names: &[String],
    seed: u16,
) {
    let (_, recs) = decode_v9(bytes);
    let mut it = recs.iter();
    for (i, (r, _)) in all.iter().enumerate() {
        let dirs = if r.packets[1] > 0 { 2 } else { 1 };
        for d in 0..dirs {
            let c = format!("{ctx} record {i} direction {d}");
            let x = it.next().unwrap_or_else(|| panic!("{c}: missing"));
            let f = |ty: u16| {
                x.fields
                    .get(&ty)
                    .unwrap_or_else(|| panic!("{c}: no field {ty}"))
                    .as_slice()
            };
            let k = &r.key;
            let v6 = k.ip_version != 4;
            assert_eq!(x.template, if v6 { 257 } else { 256 }, "{c}");
            let addr = |b: &[u8]| {
                let mut a = [0u8; 16];
                if b.len() == 4 {
                    a[10] = 0xff;
                    a[11] = 0xff;
                    a[12..].copy_from_slice(b);
                } else {
                    a.copy_from_slice(b);
                }
                fmt_addr(&a)
            };
            let (sa, da) = if v6 { (f(27), f(28)) } else { (f(8), f(12)) };
            let (s, dd, sp, dp) = match d {
                0 => (&k.src, &k.dst, k.sport, k.dport),
                _ => (&k.dst, &k.src, k.dport, k.sport),
            };
            assert_eq!(addr(sa), fmt_addr(s), "{c}: src");
            assert_eq!(addr(da), fmt_addr(dd), "{c}: dst");
            assert_eq!(be(f(7)), u64::from(sp), "{c}: sport");
            assert_eq!(be(f(11)), u64::from(dp), "{c}: dport");
            assert_eq!(be(f(4)), u64::from(k.proto), "{c}: proto");
            let flags = r.tcp_flags.map_or(0, |fl| {
                (0..8).filter(|&b| fl[d][b] > 0).map(|b| 1u64 << b).sum()
            });
            assert_eq!(be(f(6)), flags, "{c}: flags");
            assert_eq!(be(f(1)), r.bytes[d], "{c}: bytes");
            assert_eq!(be(f(2)), r.packets[d], "{c}: packets");
            let (first, last) = want_times(r);
            assert_eq!(x.origin_ms + be(f(22)), first, "{c}: first");
            assert_eq!(x.origin_ms + be(f(21)), last, "{c}: last");
            assert_eq!(be(f(58)), u64::from(k.vlan), "{c}: vlan");
            let icmp = r
                .icmp
                .map_or(0, |m| u64::from(m.ty) * 256 + u64::from(m.code));
            assert_eq!(be(f(if v6 { 139 } else { 32 })), icmp, "{c}: icmp");
            let (sm, dm) = if d == 0 {
                (&r.src_mac, &r.dst_mac)
            } else {
                (&r.dst_mac, &r.src_mac)
            };
            assert_eq!(f(56), sm, "{c}: src mac");
            assert_eq!(f(80), dm, "{c}: dst mac");
            assert_eq!(be(f(239)), d as u64 + 1, "{c}: direction");
            let app = if r.verdict.class == Verdict::UNKNOWN {
                "unknown".to_string()
            } else {
                names
                    .get(usize::from(r.verdict.class))
                    .cloned()
                    .unwrap_or("unknown".into())
            };
            let got = f(96);
            assert_eq!(got.len(), 32, "{c}");
            let text = std::str::from_utf8(&got[..got.iter().position(|&b| b == 0).unwrap_or(32)])
                .unwrap();
            assert!(
                app.starts_with(text) && (text.len() == app.len() || app.len() > 32),
                "{c}: app {text:?} of {app:?}"
            );
            let conf = f32::from_be_bytes(f(32770).try_into().unwrap());
            assert_eq!(
                conf.to_bits(),
                r.verdict.confidence.to_bits(),
                "{c}: confidence"
            );
            assert_eq!(
                be(f(32771)),
                u64::from(r.verdict.at_packet),
                "{c}: at packet"
            );
            let want = crate::export::community_id::of_record(seed, k, r.icmp)
                .map_or(vec![0u8; 30], |x| x.as_bytes().to_vec());
            assert_eq!(f(32779), want.as_slice(), "{c}: community id");
            assert_eq!(
                be(f(32794)),
                u64::from(r.model_id.unwrap_or(u16::MAX)),
                "{c}: model id"
            );
        }
    }
    assert!(it.next().is_none(), "{ctx}: more records than flows");
}

fn batch(n: usize) -> RecordBatch {
    let mut b = RecordBatch::with_capacity(n, 4);
    for (i, (r, e)) in sample().iter().cycle().take(n).enumerate() {
        let mut r = *r;
        r.key.sport = r.key.sport.wrapping_add(i as u16);
        // No model, the run's own, learnt models.
        r.model_id = [None, Some(0), Some(3), Some(65534)][i % 4];
        b.push(r, &e[..e.len().min(4)]);
    }
    b
}

fn opts() -> ExportOptions {
    ExportOptions {
        early_packets: 4,
        class_names: vec![
            "tls".to_string(),
            "a-class-name-longer-than-32-bytes-é".to_string(),
        ]
        .into(),
        community_id_seed: 3,
        ..Default::default()
    }
}

#[test]
fn v9_packets_fit_the_mtu_count_their_records_and_refresh_templates() {
    let shared = Shared::default();
    let nf = NetflowOptions {
        ipfix: IpfixOptions {
            mtu: 600,
            domain: 77,
            template_refresh_messages: 4,
            ..IpfixOptions::default()
        },
        sampling: None,
    };
    let mut ex = to_writer(Version::V9, Box::new(shared.clone()), "nf", &opts(), &nf);
    let b = batch(300);
    ex.write_batch(&b).unwrap();
    ex.finish().unwrap();
    let bytes = shared.0.lock().unwrap().clone();
    let (packets, _) = decode_v9(&bytes);
    assert!(packets.len() > 20, "{} packets", packets.len());
    for (i, p) in packets.iter().enumerate() {
        assert!(p.len <= 600, "packet {i}: {} bytes", p.len);
        assert_eq!(p.seq, i as u32, "sequence");
        assert_eq!(p.source_id, 77);
        // Templates in the first packet and every 4th after.
        assert_eq!(p.templates, if i % 4 == 0 { 2 } else { 0 }, "packet {i}");
        assert!(p.options.is_empty());
    }
    let all: Vec<_> = b.iter().map(|(r, e)| (*r, e.to_vec())).collect();
    let names: Vec<String> = opts().class_names.to_vec();
    check_v9("mtu 600", &bytes, &all, &names, 3);
}

#[test]
fn v9_carries_the_sampling_rate_in_an_options_record() {
    let shared = Shared::default();
    let nf = NetflowOptions {
        sampling: Some(Sampling {
            policy: Policy::Random,
            rate: 64,
            seed: 1,
        }),
        ..NetflowOptions::default()
    };
    let mut o = opts();
    o.community_id_seed = 0;
    let mut ex = to_writer(Version::V9, Box::new(shared.clone()), "nf", &o, &nf);
    ex.write_batch(&batch(10)).unwrap();
    ex.finish().unwrap();
    let bytes = shared.0.lock().unwrap().clone();
    let (packets, recs) = decode_v9(&bytes);
    assert_eq!(packets[0].options, [(0, 64, 2)]);
    assert!(!recs.is_empty());
}

/// Decodes a stream of v5 packets: (header fields, records as
/// (src, dst, packets, bytes, first ms, last ms, sport, dport, flags,
/// proto)).
type V5Rec = ([u8; 4], [u8; 4], u64, u64, u64, u64, u16, u16, u8, u8);

fn decode_v5(mut b: &[u8]) -> Vec<(u16, u32, u16, Vec<V5Rec>)> {
    let mut out = Vec::new();
    while !b.is_empty() {
        assert_eq!(be(&b[0..2]), 5);
        let count = be(&b[2..4]) as usize;
        assert!(count <= 30);
        let origin = be(&b[8..12]) * 1000 - be(&b[4..8]);
        let seq = be(&b[16..20]) as u32;
        let sampling = be(&b[22..24]) as u16;
        let mut recs = Vec::new();
        for i in 0..count {
            let r = &b[24 + 48 * i..24 + 48 * (i + 1)];
            recs.push((
                r[0..4].try_into().unwrap(),
                r[4..8].try_into().unwrap(),
                be(&r[16..20]),
                be(&r[20..24]),
                origin + be(&r[24..28]),
                origin + be(&r[28..32]),
                be(&r[32..34]) as u16,
                be(&r[34..36]) as u16,
                r[37],
                r[38],
            ));
        }
        out.push((count as u16, seq, sampling, recs));
        b = &b[24 + 48 * count..];
    }
    out
}

#[test]
fn v5_writes_ipv4_records_and_counts_what_it_leaves_out() {
    let shared = Shared::default();
    let nf = NetflowOptions {
        sampling: Some(Sampling {
            policy: Policy::Systematic,
            rate: 8,
            seed: 1,
        }),
        ..NetflowOptions::default()
    };
    let mut ex = v5::V5Exporter::new(
        Packets::new(Sink::Writer(Box::new(shared.clone())), "nf5"),
        &opts(),
        &nf,
    );
    let b = batch(200);
    ex.write_batch(&b).unwrap();
    ex.finish().unwrap();
    let v6 = b.records.iter().filter(|r| r.key.ip_version != 4).count() as u64;
    assert!(v6 > 0);
    assert_eq!(ex.left_out(), v6);
    let packets = decode_v5(&shared.0.lock().unwrap());
    let mut seq = 0u32;
    let recs: Vec<V5Rec> = packets
        .into_iter()
        .flat_map(|(count, s, sampling, recs)| {
            assert_eq!(s, seq, "flow sequence");
            assert_eq!(sampling, (1 << 14) | 8);
            seq += u32::from(count);
            recs
        })
        .collect();
    let mut it = recs.iter();
    for r in b.records.iter().filter(|r| r.key.ip_version == 4) {
        for d in 0..if r.packets[1] > 0 { 2 } else { 1 } {
            let x = it.next().unwrap();
            let k = &r.key;
            let (s, dd) = if d == 0 {
                (&k.src, &k.dst)
            } else {
                (&k.dst, &k.src)
            };
            assert_eq!(&x.0, &s[12..]);
            assert_eq!(&x.1, &dd[12..]);
            assert_eq!(x.2, r.packets[d].min(u64::from(u32::MAX)));
            assert_eq!(x.3, r.bytes[d].min(u64::from(u32::MAX)));
            assert_eq!((x.4, x.5), want_times(r));
            let (sp, dp) = if d == 0 {
                (k.sport, k.dport)
            } else {
                (k.dport, k.sport)
            };
            let dp = match r.icmp.filter(|_| k.proto == 1) {
                Some(m) => u16::from(m.ty) * 256 + u16::from(m.code),
                None => dp,
            };
            assert_eq!((x.6, x.7), (sp, dp));
            assert_eq!(x.8, v9::flags(r, d));
            assert_eq!(x.9, k.proto);
        }
    }
    assert!(it.next().is_none());
}

#[test]
fn a_udp_collector_gets_the_packets_and_a_refusing_one_is_counted() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let port = rx.local_addr().unwrap().port();
    let name = format!("netflow9+udp://127.0.0.1:{port}");
    assert!(is_network(Path::new(&name)));
    let mut ex = open(Path::new(&name), &opts(), &NetflowOptions::default()).unwrap();
    assert_eq!(ex.name(), name);
    let b = batch(40);
    ex.write_batch(&b).unwrap();
    ex.finish().unwrap();
    let mut stream = Vec::new();
    let mut buf = [0u8; 65536];
    while let Ok(n) = rx.recv(&mut buf) {
        stream.extend_from_slice(&buf[..n]);
    }
    let all: Vec<_> = b.iter().map(|(r, e)| (*r, e.to_vec())).collect();
    check_v9("udp", &stream, &all, &opts().class_names, 3);
    // Nobody listens: the kernel's port unreachable fails a later send;
    // the records are counted as not delivered, nothing blocks.
    drop(rx);
    let mut ex = open(Path::new(&name), &opts(), &NetflowOptions::default()).unwrap();
    for _ in 0..20 {
        let _ = ex.write_batch(&batch(40));
        let _ = ex.flush();
    }
    let err = ex.finish().unwrap_err().to_string();
    assert!(err.contains("not delivered"), "{err}");
}

#[test]
fn flows_that_start_before_the_uptime_origin_move_it() {
    let shared = Shared::default();
    let mut ex = to_writer(
        Version::V9,
        Box::new(shared.clone()),
        "nf",
        &opts(),
        &NetflowOptions::default(),
    );
    let mut b = RecordBatch::with_capacity(3, 4);
    let (r0, _) = sample()[0].clone();
    for first in [
        1_700_000_000_000_000_000u64,
        1_600_000_000_000_000_000,
        1_700_000_500_000_000_000,
    ] {
        let mut r = r0;
        r.first_ts = first;
        r.last_ts = first + 5_000_000_123;
        b.push(r, &[]);
    }
    ex.write_batch(&b).unwrap();
    ex.finish().unwrap();
    let all: Vec<_> = b.iter().map(|(r, e)| (*r, e.to_vec())).collect();
    check_v9(
        "origin",
        &shared.0.lock().unwrap(),
        &all,
        &opts().class_names,
        3,
    );
}
