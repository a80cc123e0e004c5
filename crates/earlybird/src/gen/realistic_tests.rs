//! Tests of the realistic model: the output is walked with the test-only
//! pcap walker and checked against the model's promises and the summary.

use std::collections::HashMap;

use super::super::test_pcap::{decode, walk, Pkt};
use super::super::{generate as gen, GenKind};
use super::*;

fn run(o: &GenOptions) -> (Vec<u8>, GenSummary) {
    let mut buf = Vec::new();
    let s = gen(o, &mut buf).unwrap();
    (buf, s)
}

/// Per connection: packets, direction bits, first packets' flags and the
/// client endpoint (source of the first packet).
#[derive(Debug, Default)]
struct ConnView {
    packets: u64,
    dirs: u8,
    client: (u32, u16),
    flags: Vec<u8>,
    seq_ack: Vec<(u32, u32)>,
}

fn conn_key(p: &Pkt) -> (u8, (u32, u16), (u32, u16)) {
    let a = (p.src, p.sport);
    let b = (p.dst, p.dport);
    (p.proto, a.min(b), a.max(b))
}

fn connections(
    recs: &[super::super::test_pcap::Rec<'_>],
) -> HashMap<(u8, (u32, u16), (u32, u16)), ConnView> {
    let mut map: HashMap<_, ConnView> = HashMap::new();
    for r in recs {
        let p = decode(r.data);
        let v = map.entry(conn_key(&p)).or_default();
        if v.packets == 0 {
            v.client = (p.src, p.sport);
        }
        v.packets += 1;
        v.dirs |= if (p.src, p.sport) == v.client { 1 } else { 2 };
        if v.flags.len() < 3 && p.proto == 6 {
            v.flags.push(p.flags);
            let l4 = &r.data[34..];
            let seq = u32::from_be_bytes(l4[4..8].try_into().unwrap());
            let ack = u32::from_be_bytes(l4[8..12].try_into().unwrap());
            v.seq_ack.push((seq, ack));
        }
    }
    map
}

#[test]
fn traffic_mix_matches_the_model() {
    for seed in [1u64, 2, 3] {
        let mut o = GenOptions::new(GenKind::Realistic, 300_000);
        o.seed = seed;
        let (buf, s) = run(&o);
        let (hdr, recs) = walk(&buf);
        assert_eq!((hdr.snaplen, hdr.linktype), (128, 1));
        assert_eq!(recs.len(), 300_000);
        assert_eq!(s.packets, 300_000);

        let mut ip_bytes = 0u64;
        let mut tcp = 0u64;
        for r in &recs {
            let p = decode(r.data);
            ip_bytes += u64::from(p.ip_len);
            tcp += u64::from(p.proto == 6);
            assert!(p.proto == 6 || p.proto == 17);
            assert_eq!(r.orig_len as usize, (usize::from(p.ip_len) + 14).max(60));
            assert_eq!(
                r.data.len(),
                (r.orig_len as usize).min(128),
                "caplen ≤ snaplen"
            );
            assert_eq!(frame::checksum(frame::sum16(&r.data[14..34], 0)), 0);
        }
        assert!(
            recs.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns),
            "time order"
        );
        assert_eq!((s.bytes_ip, s.tcp_packets), (ip_bytes, tcp));

        let mean_ip = ip_bytes as f64 / 300_000.0;
        assert!(
            (744.0 * 0.9..=744.0 * 1.1).contains(&mean_ip),
            "seed {seed}: mean IP {mean_ip}"
        );
        let tcp_share = tcp as f64 / 300_000.0;
        assert!(
            (0.80..=0.90).contains(&tcp_share),
            "seed {seed}: TCP share {tcp_share}"
        );

        let conns = connections(&recs);
        assert_eq!(
            conns.len() as u64,
            s.flows,
            "seed {seed}: one 5-tuple per connection"
        );
        let per_flow = 300_000.0 / s.flows as f64;
        assert!(
            (35.0..=65.0).contains(&per_flow),
            "seed {seed}: {per_flow} packets/flow"
        );
        let uni: u64 = conns.values().map(|v| u64::from(v.dirs.count_ones())).sum();
        assert_eq!(uni, s.unidirectional_flows);
        assert!(uni > s.flows * 3 / 2, "most connections are two-way");
        let mut sizes: Vec<u64> = conns.values().map(|v| v.packets).collect();
        sizes.sort_unstable();
        assert!(sizes[sizes.len() / 2] <= 5, "median connection is small");
        assert!(*sizes.last().unwrap() >= 1000, "heavy tail");
    }
}

#[test]
fn tcp_connections_handshake_in_both_directions() {
    let (buf, _) = run(&GenOptions::new(GenKind::Realistic, 100_000));
    let (_, recs) = walk(&buf);
    let conns = connections(&recs);
    let mut checked = 0;
    for v in conns.values().filter(|v| v.flags.len() >= 3) {
        assert_eq!(v.dirs, 3, "a handshake is two-way");
        assert_eq!(v.flags, [SYN, SYN | ACK, ACK]);
        let (syn, synack, ack) = (v.seq_ack[0], v.seq_ack[1], v.seq_ack[2]);
        assert_eq!(
            synack.1,
            syn.0.wrapping_add(1),
            "SYN|ACK acknowledges the SYN"
        );
        assert_eq!(ack, (syn.0.wrapping_add(1), synack.0.wrapping_add(1)));
        checked += 1;
    }
    assert!(checked > 500, "only {checked} handshakes");
    let one_packet_tcp = conns
        .iter()
        .filter(|(k, v)| k.0 == 6 && v.packets == 1)
        .map(|(_, v)| v.flags[0]);
    assert!(one_packet_tcp.into_iter().all(|f| f == SYN || f == RST));
}

#[test]
fn deterministic_and_seeded() {
    let o = GenOptions::new(GenKind::Realistic, 50_000);
    let (a, sa) = run(&o);
    let (b, sb) = run(&o);
    assert_eq!(a, b);
    assert_eq!(sa, sb);
    let mut o2 = o.clone();
    o2.seed = 7;
    assert_ne!(run(&o2).0, a);
}

#[test]
fn snaplen_changes_only_the_cut() {
    let mut o = GenOptions::new(GenKind::Realistic, 20_000);
    let (cut, s_cut) = run(&o);
    o.snaplen = 65_535;
    let (full, s_full) = run(&o);
    assert_eq!(s_cut, s_full);
    let (_, rc) = walk(&cut);
    let (hdr, rf) = walk(&full);
    assert_eq!(hdr.snaplen, 65_535);
    for (c, f) in rc.iter().zip(&rf) {
        assert_eq!(f.data.len(), f.orig_len as usize);
        assert_eq!(c.data, &f.data[..c.data.len()]);
        assert_eq!((c.ts_ns, c.orig_len), (f.ts_ns, f.orig_len));
        // Ethernet padding of short frames is zero.
        let ip_len = usize::from(decode(f.data).ip_len);
        assert!(f.data[14 + ip_len..].iter().all(|&b| b == 0));
    }
}

#[test]
fn pacing_follows_link_speed_and_load() {
    let mut o = GenOptions::new(GenKind::Realistic, 50_000);
    o.nanos = true;
    let (_, half) = run(&o);
    o.load = 1.0;
    let (buf, full) = run(&o);
    let (hdr, recs) = walk(&buf);
    assert!(hdr.nanos);
    // At load 1 the link is busy back to back: the duration is the wire
    // time of all frames but the first.
    let wire: f64 = recs[1..]
        .iter()
        .map(|r| (r.orig_len as f64 + 24.0) * 8.0)
        .sum();
    let d = full.duration_ns as f64;
    assert!((d - wire).abs() < recs.len() as f64, "{d} vs {wire}");
    let ratio = half.duration_ns as f64 / full.duration_ns as f64;
    assert!(
        (1.9..2.1).contains(&ratio),
        "50 % load doubles the time: {ratio}"
    );
}

#[test]
fn lengths_add_up_exactly() {
    let mut rng = Pcg64Mcg::seed_from_u64(9);
    for n in [1u64, 2, 3, 10, 999, 123_457] {
        let lens = draw_lengths(&mut rng, n);
        assert_eq!(lens.iter().map(|&l| u64::from(l)).sum::<u64>(), n);
        assert!(lens.iter().all(|&l| l >= 1 && l <= 1000.max(n as u32 / 20)));
    }
}

#[test]
fn tiny_traces_work() {
    for n in [1u64, 2, 7, 100] {
        let (buf, s) = run(&GenOptions::new(GenKind::Realistic, n));
        let (_, recs) = walk(&buf);
        assert_eq!(recs.len() as u64, n);
        assert_eq!(s.packets, n);
        assert!(s.flows >= 1 && s.flows <= n);
    }
}

#[test]
fn weighted_table_covers_the_range() {
    assert_eq!(weighted(&TCP_PORTS, 0.0), 443);
    assert_eq!(weighted(&TCP_PORTS, 0.7), 80);
    assert_eq!(weighted(&TCP_PORTS, 0.999_999), 8080);
    assert_eq!(weighted(&UDP_PORTS, 0.5), 443);
}
