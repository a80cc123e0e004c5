//! The IPFIX part of the compliance test: a small decoder written from RFC
//! 7011, 5103 and 6313 (not from the exporter's code) reads the messages
//! back — templates from the template sets, data records by template, the
//! basicLists element by element — and every field is compared with the
//! value computed here from the record, as `docs/IPFIX.md` documents it.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::compliance::V;
use crate::classify::Verdict;
use crate::decode::fmt_addr;
use crate::features::early::EarlyPkt;
use crate::features::Dir;
use crate::flow::record::FlowRecord;

const REVERSE: u32 = 29305;
const OURS: u32 = 32473;

/// One field specifier of a template.
#[derive(Debug, Clone, Copy)]
struct Spec {
    pen: u32,
    id: u16,
    len: u16,
}

/// A decoded data record: (enterprise, element id, value bytes) in order.
pub(super) type Rec = Vec<(u32, u16, Vec<u8>)>;

fn be(b: &[u8]) -> u64 {
    b.iter().fold(0, |a, &x| (a << 8) | u64::from(x))
}

/// Decodes a stream of messages; checks headers (version, length,
/// sequence numbers counting data records, at most `max` bytes each) and
/// returns the data records in order with their template ids.
pub(super) fn decode(ctx: &str, mut bytes: &[u8], max: usize) -> Vec<(u16, Rec)> {
    let mut templates: HashMap<u16, Vec<Spec>> = HashMap::new();
    let mut out = Vec::new();
    let mut seq_expected: u64 = 0;
    while !bytes.is_empty() {
        assert!(bytes.len() >= 16, "{ctx}: truncated message header");
        assert_eq!(be(&bytes[0..2]), 10, "{ctx}: version");
        let len = be(&bytes[2..4]) as usize;
        assert!(
            len >= 16 && len <= bytes.len() && len <= max,
            "{ctx}: length {len}"
        );
        let seq = be(&bytes[8..12]);
        assert_eq!(seq, seq_expected & 0xFFFF_FFFF, "{ctx}: sequence number");
        let mut sets = &bytes[16..len];
        while !sets.is_empty() {
            let id = be(&sets[0..2]) as u16;
            let slen = be(&sets[2..4]) as usize;
            assert!(slen >= 4 && slen <= sets.len(), "{ctx}: set length");
            let mut body = &sets[4..slen];
            if id == 2 {
                while body.len() >= 4 {
                    let tid = be(&body[0..2]) as u16;
                    let n = be(&body[2..4]) as usize;
                    body = &body[4..];
                    let mut specs = Vec::new();
                    for _ in 0..n {
                        let raw = be(&body[0..2]) as u16;
                        let flen = be(&body[2..4]) as u16;
                        body = &body[4..];
                        let pen = if raw & 0x8000 != 0 {
                            let p = be(&body[0..4]) as u32;
                            body = &body[4..];
                            p
                        } else {
                            0
                        };
                        specs.push(Spec {
                            pen,
                            id: raw & 0x7FFF,
                            len: flen,
                        });
                    }
                    templates.insert(tid, specs);
                }
            } else {
                assert!(id >= 256, "{ctx}: set id {id}");
                let specs = templates
                    .get(&id)
                    .unwrap_or_else(|| panic!("{ctx}: data set {id} before its template"));
                let min: usize = specs
                    .iter()
                    .map(|s| if s.len == 0xFFFF { 1 } else { s.len as usize })
                    .sum();
                while body.len() >= min {
                    let mut rec = Vec::new();
                    for s in specs {
                        let flen = if s.len == 0xFFFF {
                            let l = body[0] as usize;
                            if l < 255 {
                                body = &body[1..];
                                l
                            } else {
                                let l = be(&body[1..3]) as usize;
                                body = &body[3..];
                                l
                            }
                        } else {
                            s.len as usize
                        };
                        rec.push((s.pen, s.id, body[..flen].to_vec()));
                        body = &body[flen..];
                    }
                    out.push((id, rec));
                    seq_expected += 1;
                }
                assert!(body.is_empty(), "{ctx}: {} bytes of padding", body.len());
            }
            sets = &sets[slen..];
        }
        bytes = &bytes[len..];
    }
    out
}

/// A basicList's elements: (semantic, enterprise, id, element length,
/// values).
fn basic_list(b: &[u8]) -> (u8, u32, u16, usize, Vec<u64>) {
    let raw = be(&b[1..3]) as u16;
    let len = be(&b[3..5]) as usize;
    let (pen, rest) = if raw & 0x8000 != 0 {
        (be(&b[5..9]) as u32, &b[9..])
    } else {
        (0, &b[5..])
    };
    assert_eq!(rest.len() % len, 0, "basicList of {len}-byte elements");
    let values = rest.chunks(len).map(be).collect();
    (b[0], pen, raw & 0x7FFF, len, values)
}

/// The value of element (pen, id) of `rec`; panics naming it when absent.
fn field<'a>(ctx: &str, rec: &'a Rec, pen: u32, id: u16) -> &'a [u8] {
    let mut found = rec.iter().filter(|(p, i, _)| *p == pen && *i == id);
    let v = found
        .next()
        .unwrap_or_else(|| panic!("{ctx}: element {pen}/{id} missing"));
    assert!(found.next().is_none(), "{ctx}: element {pen}/{id} twice");
    &v.2
}

/// NTP timestamp of nanoseconds since 1970 decoded back: (seconds since
/// 1900 mod 2³², nanoseconds).
fn ntp_parts(v: &[u8]) -> (u64, u64) {
    let x = be(v);
    (x >> 32, ((x & 0xFFFF_FFFF) * 1_000_000_000) >> 32)
}

/// Checks every decoded record against the records written.
pub(super) fn check(
    ctx: &str,
    bytes: &[u8],
    all: &[(FlowRecord, Vec<EarlyPkt>)],
    n: usize,
    names: &[String],
    biflow: bool,
    max: usize,
) {
    let recs = decode(ctx, bytes, max);
    assert_eq!(recs.len(), all.len(), "{ctx}: record count");
    for (i, ((tid, rec), (r, e))) in recs.iter().zip(all).enumerate() {
        let c = format!("{ctx} record {i}");
        let f = |pen: u32, id: u16| field(&c, rec, pen, id);
        let u = |pen: u32, id: u16| be(f(pen, id));
        let k = &r.key;
        let v6 = k.ip_version != 4;
        let icmp = r.icmp.is_some();
        let want_t = 256 + u16::from(v6) + 2 * u16::from(icmp);
        assert_eq!(*tid, want_t, "{c}: template");
        // Addresses as text, against the CSV writer's formatting.
        let (src, dst) = if v6 {
            let a: [u8; 16] = f(0, 27).try_into().unwrap();
            let b: [u8; 16] = f(0, 28).try_into().unwrap();
            (Ipv6Addr::from(a).to_string(), Ipv6Addr::from(b).to_string())
        } else {
            let a: [u8; 4] = f(0, 8).try_into().unwrap();
            let b: [u8; 4] = f(0, 12).try_into().unwrap();
            (Ipv4Addr::from(a).to_string(), Ipv4Addr::from(b).to_string())
        };
        assert_eq!(V::S(src), V::S(fmt_addr(&k.src)), "{c}: src");
        assert_eq!(V::S(dst), V::S(fmt_addr(&k.dst)), "{c}: dst");
        assert_eq!(u(0, 7), u64::from(k.sport), "{c}: sport");
        assert_eq!(u(0, 11), u64::from(k.dport), "{c}: dport");
        assert_eq!(u(0, 4), u64::from(k.proto), "{c}: proto");
        let icmp_id = if v6 { 139 } else { 32 };
        match r.icmp {
            Some(m) => assert_eq!(u(0, icmp_id), u64::from(m.ty) * 256 + u64::from(m.code)),
            None => assert!(!rec.iter().any(|x| x.1 == 32 || x.1 == 139), "{c}: icmp"),
        }
        for (ns, id_ns, id_ms) in [(r.first_ts, 156, 152), (r.last_ts, 157, 153)] {
            assert_eq!(u(0, id_ms), ns / 1_000_000, "{c}: {id_ms}");
            let (secs, frac) = ntp_parts(f(0, id_ns));
            assert_eq!(secs, (ns / 1_000_000_000 + 2_208_988_800) & 0xFFFF_FFFF);
            assert_eq!(frac, ns % 1_000_000_000, "{c}: {id_ns}");
        }
        assert_eq!(u(0, 1), r.bytes[0], "{c}: octets");
        assert_eq!(u(0, 2), r.packets[0], "{c}: packets");
        let bits = |d: usize| {
            r.tcp_flags.map_or(0, |fl| {
                (0..8).filter(|&b| fl[d][b] > 0).map(|b| 1u64 << b).sum()
            })
        };
        assert_eq!(u(0, 6), bits(0), "{c}: tcpControlBits");
        if biflow {
            assert_eq!(u(REVERSE, 1), r.bytes[1], "{c}: reverse octets");
            assert_eq!(u(REVERSE, 2), r.packets[1], "{c}: reverse packets");
            assert_eq!(u(REVERSE, 6), bits(1), "{c}: reverse flags");
        } else {
            assert!(rec.iter().all(|x| x.0 != REVERSE), "{c}: reverse element");
        }
        assert_eq!(u(0, 58), u64::from(k.vlan), "{c}: vlan");
        let reason = match r.end.name() {
            "idle" => 1,
            "active" => 2,
            "fin" | "rst" => 3,
            "end_of_input" => 4,
            "evicted" => 5,
            other => panic!("{c}: end reason {other}"),
        };
        assert_eq!(u(0, 136), reason, "{c}: flowEndReason");
        assert_eq!(f(0, 56), &r.src_mac, "{c}: src mac");
        assert_eq!(f(0, 80), &r.dst_mac, "{c}: dst mac");
        let app = if r.verdict.class == Verdict::UNKNOWN {
            "unknown"
        } else {
            names
                .get(usize::from(r.verdict.class))
                .map_or("unknown", String::as_str)
        };
        assert_eq!(std::str::from_utf8(f(OURS, 1)).unwrap(), app, "{c}: app");
        let conf = f32::from_be_bytes(f(OURS, 2).try_into().unwrap());
        assert_eq!(conf.to_bits(), r.verdict.confidence.to_bits(), "{c}: conf");
        assert_eq!(u(OURS, 3), u64::from(r.verdict.at_packet), "{c}: at");
        let cid = super::community_id::of_record(super::compliance::SEED, k, r.icmp);
        let want = cid.map_or(String::new(), |c| c.to_string());
        assert_eq!(
            std::str::from_utf8(f(OURS, 11)).unwrap(),
            want,
            "{c}: community id"
        );
        // Three ordered basicLists of our elements 4, 5, 6.
        let len = e.len().min(n);
        let lists: Vec<_> = rec
            .iter()
            .filter(|x| x.0 == 0 && x.1 == 291)
            .map(|x| basic_list(&x.2))
            .collect();
        assert_eq!(lists.len(), 3, "{c}: basicLists");
        let want: [(u16, usize, Vec<u64>); 3] = [
            (4, 2, e[..len].iter().map(|p| u64::from(p.size)).collect()),
            (
                5,
                1,
                e[..len]
                    .iter()
                    .map(|p| if p.dir == Dir::Fwd { 1 } else { 0xFF })
                    .collect(),
            ),
            (6, 4, e[..len].iter().map(|p| u64::from(p.iat_us)).collect()),
        ];
        for (l, (id, elen, values)) in lists.iter().zip(want) {
            assert_eq!(l, &(4, OURS, id, elen, values), "{c}: list {id}");
        }
        // Nothing else.
        let fields = 23 + if biflow { 3 } else { 0 } + usize::from(icmp);
        assert_eq!(rec.len(), fields, "{c}: element count");
    }
}
