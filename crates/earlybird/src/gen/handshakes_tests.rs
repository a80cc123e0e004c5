//! Tests of the handshakes model: the output is walked with the test-only
//! pcap walker; QUIC Initials are opened with `quic::open_initial`, TLS
//! hellos read with the engine's own hello parser (the CLI test checks
//! them again through the labellers, and against tshark).

use std::collections::HashMap;

use super::super::frame::ETH_LEN;
use super::super::test_pcap::{decode, walk, Pkt};
use super::super::{generate as gen, GenKind};
use super::*;
use crate::analyze::tls_hello;

fn run(o: &GenOptions) -> (Vec<u8>, GenSummary) {
    let mut buf = Vec::new();
    let s = gen(o, &mut buf).unwrap();
    (buf, s)
}

fn counted(n: u64, seed: u64) -> (Vec<u8>, GenSummary, Counts) {
    let mut o = GenOptions::new(GenKind::Handshakes, n);
    o.seed = seed;
    let mut buf = Vec::new();
    let out = PcapOut::new(&mut buf, false, o.snaplen).unwrap();
    let (s, c) = generate_counted(&o, out).unwrap();
    (buf, s, c)
}

/// Protocol and the two endpoints in sorted order.
type ConnKey = (u8, (u32, u16), (u32, u16));

fn conn_key(p: &Pkt) -> ConnKey {
    let a = (p.src, p.sport);
    let b = (p.dst, p.dport);
    (p.proto, a.min(b), a.max(b))
}

/// The payload of a whole generated frame.
fn payload<'a>(data: &'a [u8], p: &Pkt) -> &'a [u8] {
    let l4 = &data[L4_OFF..ETH_LEN + usize::from(p.ip_len)];
    if p.proto == 6 {
        &l4[usize::from(l4[12] >> 4) * 4..]
    } else {
        &l4[8..]
    }
}

#[test]
fn deterministic_and_seeded() {
    let o = GenOptions::new(GenKind::Handshakes, 20_000);
    let (a, sa) = run(&o);
    let (b, sb) = run(&o);
    assert_eq!(a, b);
    assert_eq!(sa, sb);
    let mut o2 = o.clone();
    o2.seed = 2;
    assert_ne!(run(&o2).0, a);
}

#[test]
fn exact_counts_whole_frames_checksums_and_flows() {
    for n in [1u64, 2, 9, 1000, 30_000] {
        let (buf, s, counts) = counted(n, 5);
        let (hdr, recs) = walk(&buf);
        assert_eq!((hdr.snaplen, hdr.linktype, hdr.nanos), (65_535, 1, false));
        assert_eq!(recs.len() as u64, n);
        assert_eq!(s.packets, n);
        assert_eq!(counts.iter().sum::<u64>(), s.flows);
        let mut conns: HashMap<ConnKey, (u64, u8, (u32, u16))> = HashMap::new();
        let (mut bytes, mut tcp) = (0u64, 0u64);
        for r in &recs {
            let p = decode(r.data);
            assert_eq!(r.data.len(), r.orig_len as usize, "whole frames");
            assert_eq!(r.orig_len as usize, (usize::from(p.ip_len) + 14).max(60));
            assert!(p.ip_len <= 1500);
            assert_eq!(frame::checksum(frame::sum16(&r.data[14..34], 0)), 0);
            let pseudo = frame::pseudo_header_sum(p.src, p.dst, p.proto, p.ip_len - 20);
            let l4 = &r.data[34..14 + usize::from(p.ip_len)];
            assert_eq!(frame::checksum(frame::sum16(l4, pseudo)), 0, "{p:?}");
            bytes += u64::from(p.ip_len);
            tcp += u64::from(p.proto == 6);
            let e = conns
                .entry(conn_key(&p))
                .or_insert((0, 0, (p.src, p.sport)));
            e.0 += 1;
            e.1 |= if (p.src, p.sport) == e.2 { 1 } else { 2 };
        }
        assert!(
            recs.windows(2).all(|w| w[0].ts_ns < w[1].ts_ns),
            "time strictly increases (µs)"
        );
        assert_eq!((s.bytes_ip, s.tcp_packets), (bytes, tcp));
        assert_eq!(conns.len() as u64, s.flows, "one 5-tuple per flow");
        let uni: u64 = conns.values().map(|v| u64::from(v.1.count_ones())).sum();
        assert_eq!(uni, s.unidirectional_flows);
    }
}

#[test]
fn mix_follows_the_model_and_flows_have_their_planned_length() {
    let (buf, s, counts) = counted(200_000, 1);
    let share = |i: usize| counts[i] as f64 / s.flows as f64;
    for (i, want) in [0.45, 0.25, 0.20, 0.07, 0.03].into_iter().enumerate() {
        assert!(
            (share(i) - want).abs() < 0.02,
            "{}: {} of {:?}",
            App::ALL[i].name(),
            share(i),
            counts
        );
    }
    // Replan the flows as the generator did: each flow's packets are
    // consecutive and exactly as many as planned (the last may be cut).
    let (_, recs) = walk(&buf);
    let key = mix64(1 ^ 0x4853_484B);
    let mut rng = Pcg64Mcg::seed_from_u64(key);
    let (mul, add) = (rng.random::<u32>() | 1, rng.random::<u32>());
    let mut at = 0u64;
    let mut f = 0u64;
    while at < recs.len() as u64 {
        let fl = plan(&mut rng, f, at, key, mul, add);
        let end = (at + fl.packets).min(recs.len() as u64);
        let first = decode(recs[at as usize].data);
        assert_eq!((first.src, first.sport), (fl.client, fl.cport));
        assert!((32_768..61_000).contains(&fl.cport));
        assert_eq!((first.dst, first.dport), (fl.server, fl.sport));
        for r in &recs[at as usize..end as usize] {
            assert_eq!(conn_key(&decode(r.data)), conn_key(&first), "flow {f}");
        }
        if let Some(r) = recs.get(end as usize) {
            assert_ne!(conn_key(&decode(r.data)), conn_key(&first), "flow {f}");
        }
        at = end;
        f += 1;
    }
    assert_eq!(f, s.flows);
}

#[test]
fn tls_hellos_parse_and_big_ones_span_two_segments() {
    let (buf, _, _) = counted(30_000, 3);
    let (_, recs) = walk(&buf);
    // Client stream bytes of each TLS connection, in sequence order.
    let mut streams: HashMap<ConnKey, (u32, Vec<u8>, u32)> = HashMap::new();
    let mut server_hellos = 0;
    for r in &recs {
        let p = decode(r.data);
        if p.proto != 6 || (p.dport != 443 && p.sport != 443) {
            continue;
        }
        let l4 = &r.data[L4_OFF..];
        let seq = u32::from_be_bytes(l4[4..8].try_into().unwrap());
        let body = payload(r.data, &p);
        assert!(body.len() <= MSS);
        let e = streams.entry(conn_key(&p)).or_default();
        if p.dport == 443 {
            if p.flags & SYN != 0 {
                e.0 = seq.wrapping_add(1);
            } else if !body.is_empty() && e.2 < 2 {
                assert_eq!(seq, e.0.wrapping_add(e.1.len() as u32), "in order");
                e.1.extend_from_slice(body);
                e.2 += 1;
            }
        } else if body.first() == Some(&0x16) {
            let (ty, sh) = tls_hello::record_message(body).unwrap().unwrap();
            assert_eq!(ty, tls_hello::SERVER_HELLO);
            let sh = tls_hello::server_hello(&sh).unwrap();
            assert_eq!(sh.chosen(), 0x0304);
            server_hellos += 1;
        }
    }
    let (mut small, mut big) = (0u32, 0u32);
    for (k, (_, bytes, _)) in &streams {
        let Ok(Some((ty, body))) = tls_hello::record_message(bytes) else {
            continue; // a flow cut at its start, or the hello plus a flight
        };
        assert_eq!(ty, tls_hello::CLIENT_HELLO, "{k:?}");
        let ch = tls_hello::client_hello(&body).unwrap();
        let sni = ch.sni.clone().unwrap();
        assert!(HOSTS.contains(&sni.as_str()));
        assert_eq!(ch.alpn, [b"h2".to_vec(), b"http/1.1".to_vec()]);
        assert!(!ch.ech);
        let rec = 5 + u16::from_be_bytes([bytes[3], bytes[4]]) as usize;
        if ch.groups.contains(&0x11ec) {
            assert!((1700..=1900).contains(&rec), "{rec}");
            big += 1;
        } else {
            assert!(rec < MSS);
            small += 1;
        }
    }
    let share = f64::from(big) / f64::from(big + small);
    assert!(
        (0.25..0.42).contains(&share),
        "{big} big of {}",
        big + small
    );
    assert!(server_hellos > 100);
}

#[test]
fn quic_initials_open_with_the_crate_keys() {
    let (buf, _, _) = counted(20_000, 4);
    let (_, recs) = walk(&buf);
    let (mut clients, mut servers) = (0, 0);
    let mut dcids: HashMap<ConnKey, Vec<u8>> = HashMap::new();
    for r in &recs {
        let p = decode(r.data);
        if p.proto != 17 || (p.dport != 443 && p.sport != 443) {
            continue;
        }
        let d = payload(r.data, &p);
        if d[0] & 0x80 == 0 {
            assert_eq!(d[0] & 0x40, 0x40, "short header with the fixed bit");
            continue;
        }
        let h = quic::long_header(d).unwrap();
        assert_eq!(h.version, quic::V1);
        if !h.initial {
            continue; // the server's Handshake packet
        }
        let client = p.dport == 443;
        if client {
            assert!(d.len() >= 1200, "client Initial datagram of {}", d.len());
            dcids.insert(conn_key(&p), h.dcid.to_vec());
        }
        let dcid = &dcids[&conn_key(&p)];
        let keys = quic::initial_keys(quic::V1, dcid, !client).unwrap();
        let plain = quic::open_initial(d, &h, &keys).unwrap();
        let mut crypto = Vec::new();
        quic::crypto_frames(&plain, |off, data| {
            assert_eq!(off, 0);
            crypto.extend_from_slice(data);
        })
        .unwrap();
        let (ty, body) = tls_hello::crypto_message(&crypto).unwrap().unwrap();
        if client {
            assert_eq!(ty, tls_hello::CLIENT_HELLO);
            let ch = tls_hello::client_hello(body).unwrap();
            assert!(HOSTS.contains(&ch.sni.as_deref().unwrap()));
            assert_eq!(ch.alpn, [b"h3".to_vec()]);
            assert!(ch.extensions.contains(&0x39));
            clients += 1;
        } else {
            assert_eq!(ty, tls_hello::SERVER_HELLO);
            assert_eq!(tls_hello::server_hello(body).unwrap().chosen(), 0x0304);
            servers += 1;
        }
    }
    assert!(clients > 100 && servers > 100, "{clients} {servers}");
    // A wrong key does not open them: the protection is real.
    let (_, recs) = walk(&buf);
    let r = recs
        .iter()
        .find(|r| {
            let p = decode(r.data);
            p.proto == 17 && p.dport == 443 && payload(r.data, &p)[0] & 0x80 != 0
        })
        .unwrap();
    let p = decode(r.data);
    let d = payload(r.data, &p);
    let h = quic::long_header(d).unwrap();
    let wrong = quic::initial_keys(quic::V1, b"otherdcid", false).unwrap();
    assert!(quic::open_initial(d, &h, &wrong).is_err());
}

#[test]
fn dns_answers_name_a_later_tls_or_quic_server() {
    let (buf, _, _) = counted(30_000, 6);
    let (_, recs) = walk(&buf);
    let mut answered: Vec<(usize, u32, String)> = Vec::new();
    let mut first_seen: HashMap<ConnKey, usize> = HashMap::new();
    for (i, r) in recs.iter().enumerate() {
        let p = decode(r.data);
        first_seen.entry(conn_key(&p)).or_insert(i);
        if p.proto == 17 && p.sport == 53 {
            let m = payload(r.data, &p);
            assert_eq!(&m[2..4], &[0x81, 0x80]);
            // Name, then type, class; the answer's RDATA ends the message.
            let mut at = 12;
            let mut name = Vec::new();
            while m[at] != 0 {
                let l = usize::from(m[at]);
                name.push(String::from_utf8(m[at + 1..at + 1 + l].to_vec()).unwrap());
                at += 1 + l;
            }
            let qtype = u16::from_be_bytes([m[at + 1], m[at + 2]]);
            if qtype == 1 {
                let a = u32::from_be_bytes(m[m.len() - 4..].try_into().unwrap());
                answered.push((i, a, name.join(".")));
            }
        }
    }
    // Each answered address: the later flows to it use the name's SNI
    // range, and the first flow after MIN_GAP packets exists mostly.
    let mut later = 0;
    for (i, a, name) in &answered {
        let h = HOSTS.iter().position(|x| x == name).unwrap();
        assert_eq!(*a >> 8, host_address(h, 0) >> 8, "{name} in its range");
        let found = first_seen
            .iter()
            .any(|(k, &at)| at >= i + MIN_GAP as usize - 1 && (k.1 .0 == *a || k.2 .0 == *a));
        later += usize::from(found);
    }
    assert!(answered.len() > 100);
    assert!(
        later * 10 > answered.len() * 9,
        "{later} of {}",
        answered.len()
    );
}

#[test]
fn builders_write_what_they_document() {
    let mut b = Vec::new();
    for (v, want) in [
        (0u32, &[0u8][..]),
        (63, &[63]),
        (64, &[0x40, 64]),
        (16_383, &[0x7f, 0xff]),
        (16_384, &[0x80, 0, 0x40, 0]),
    ] {
        b.clear();
        varint(&mut b, v);
        assert_eq!(b, want);
    }
    b.clear();
    dns_message(&mut b, 0x1234, "a.example", 1, Some((&[1, 2, 3, 4], 60)));
    assert_eq!(
        b,
        [
            0x12, 0x34, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0, 1, b'a', 7, b'e', b'x', b'a', b'm',
            b'p', b'l', b'e', 0, 0, 1, 0, 1, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 1, 2, 3, 4
        ]
    );
    b.clear();
    change_cipher_spec(&mut b);
    assert_eq!(b, [0x14, 3, 3, 0, 1, 1]);
}

#[test]
fn tiny_and_invalid() {
    for n in [0u64, 1, 3] {
        let (buf, s) = run(&GenOptions::new(GenKind::Handshakes, n));
        assert_eq!(walk(&buf).1.len() as u64, n);
        assert_eq!(s.packets, n);
    }
    let mut out = Vec::new();
    let o = GenOptions::new(GenKind::Handshakes, u64::from(u32::MAX) + 1);
    let e = gen(&o, &mut out).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    assert!(out.is_empty());
}
