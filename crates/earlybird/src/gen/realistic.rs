//! Realistic model: a CAIDA-like backbone mix of TCP and UDP connections.
//!
//! Contract: writes exactly `opts.packets` records, Ethernet/IPv4, in
//! non-decreasing time order, caplen = min(frame, snaplen), original length
//! = real frame length (frames under 60 bytes are zero-padded to 60).
//!
//! Traffic model (the reference generator's, in our own code):
//! - Connection sizes are heavy-tailed: 35 % tiny (1–3 packets: scans, DNS,
//!   resets), 65 % 1 + ⌊10·e^(2Z)⌋ packets (Z standard normal) capped at
//!   max(1000, N/20); mean ≈ 49 packets, median ≈ 3. The last connection is
//!   trimmed so the total is exactly N.
//! - About 15 % of the packets are UDP: connections taken in random order
//!   become UDP whenever their packets still fit in 15 % of N.
//! - TCP: SYN (c→s), SYN|ACK, ACK, then data by style — download (66 %:
//!   two server segments per client ACK), upload (12 %: the reverse) or
//!   interactive (22 %: alternating, small and mid sizes) — and FIN|ACK both
//!   ways when the connection has ≥ 6 packets; a one-packet connection is a
//!   SYN (70 %) or a RST. Segments are 1500 B (92 %) or 600–1500 B, the last
//!   ones of a burst sometimes short; ACKs 40 B or 52 B; TCP carries the
//!   timestamp option when the IP packet is ≥ 52 B. Sequence and
//!   acknowledgement numbers follow the bytes sent.
//! - UDP: first packet client→server, then either way; DNS/NTP 60–239 B,
//!   otherwise QUIC-like 1252/1350 B or 40–199 B.
//! - Endpoints: 60,000 clients in 10.0.0.0/10, 20,000 public servers chosen
//!   by a Zipf(1.3) popularity, server ports 443/80/22/25/993/8080 (TCP) or
//!   53/443/123/4500 (UDP) mostly. Every connection has its own 5-tuple
//!   (unique for up to 3.8 billion connections).
//! - Time: each connection gets a normalised start and a lognormal packet
//!   spacing; all packets are merged in that order and then paced on a
//!   `gbps` link at utilisation `load` (wire time of the frame + CRC +
//!   preamble/gap, plus an exponential idle gap).
//!
//! Memory: ~64 bytes per connection plus a heap of the connections that
//! overlap in time; nothing is allocated per packet. Payload bytes are
//! pseudo-random and do not depend on the snaplen; IPv4, TCP and UDP
//! checksums are valid over the whole packet. Failures: the sink's
//! `io::Error` only.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Write};

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp1, StandardNormal, Zipf};
use rand_pcg::Pcg64Mcg;

use super::frame::{self, Ipv4, Tcp, ACK, ETH_LEN, FIN, L4_OFF, MIN_FRAME, PSH, RST, SYN};
use super::{mix64, unit_f64, GenOptions, GenSummary, START_NS};
use crate::source::pcap_writer::PcapOut;

/// Share of the packets that belong to UDP connections (upper bound).
const UDP_PACKET_SHARE: f64 = 0.15;
/// Distinct client addresses.
const CLIENTS: u64 = 60_000;
/// Client ports cycle through 1024..1024+CLIENT_PORTS.
const CLIENT_PORTS: u64 = 64_000;
/// Distinct server addresses.
const SERVERS: usize = 20_000;
/// Largest frame (IP 1500 + Ethernet header).
const MAX_FRAME: usize = 1514;
/// Bytes on the wire besides the frame: CRC 4 + preamble 8 + gap 12.
const WIRE_EXTRA: f64 = 24.0;

/// Server ports of TCP connections with their weights.
const TCP_PORTS: [(u16, f64); 6] = [
    (443, 0.62),
    (80, 0.25),
    (22, 0.04),
    (25, 0.03),
    (993, 0.03),
    (8080, 0.03),
];
/// Server ports of UDP connections with their weights.
const UDP_PORTS: [(u16, f64); 4] = [(53, 0.45), (443, 0.40), (123, 0.10), (4500, 0.05)];

/// Who sends the data in a TCP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Download,
    Upload,
    Interactive,
}

/// Direction of a packet: client→server (0) or server→client (1).
const C2S: usize = 0;
const S2C: usize = 1;

/// One connection: fixed description plus the little state the emitter keeps.
#[derive(Debug, Clone)]
struct Conn {
    /// Normalised time key of the next packet.
    next_key: f64,
    start: f64,
    dur: f64,
    len: u32,
    sent: u32,
    client: u32,
    server: u32,
    cport: u16,
    sport: u16,
    /// Next sequence number per direction.
    seq: [u32; 2],
    udp: bool,
    style: Style,
    /// Bit 0: a client→server packet was sent; bit 1: server→client.
    dirs: u8,
}

/// Picks from a weighted table with a uniform `u` in [0, 1).
fn weighted(table: &[(u16, f64)], u: f64) -> u16 {
    let mut acc = 0.0;
    for &(v, w) in table {
        acc += w;
        if u < acc {
            return v;
        }
    }
    table[table.len() - 1].0
}

/// Draws connection lengths until they add up to `n` (the last is trimmed).
fn draw_lengths(rng: &mut Pcg64Mcg, n: u64) -> Vec<u32> {
    let cap = (n / 20).max(1000) as f64;
    let mut lens = Vec::with_capacity((n / 40 + 16) as usize);
    let mut total = 0u64;
    while total < n {
        let len = if rng.random::<f64>() < 0.35 {
            rng.random_range(1..=3u32)
        } else {
            let z: f64 = StandardNormal.sample(rng);
            (1.0 + (10.0 * (2.0 * z).exp()).floor()).min(cap) as u32
        };
        lens.push(len);
        total += u64::from(len);
    }
    if let Some(last) = lens.last_mut() {
        *last -= (total - n) as u32;
    }
    lens
}

/// Client address and port of connection `f`. The pair is unique per
/// connection: the port is a bijection of f mod 64000, and within one port
/// class the client index advances by one every 64000 connections; client
/// indices map to 10.0.0.0/10 through the affine bijection x·mul + add
/// (mod 2^22, `mul` odd).
fn client_endpoint(f: u64, seed_key: u64, mul: u32, add: u32) -> (u32, u16) {
    let class = f % CLIENT_PORTS;
    let index = (mix64(seed_key ^ class) % CLIENTS + f / CLIENT_PORTS) % CLIENTS;
    let addr = 0x0A00_0000 | ((index as u32).wrapping_mul(mul).wrapping_add(add) & 0x3F_FFFF);
    let port = 1024 + ((f * 7919) % CLIENT_PORTS) as u16;
    (addr, port)
}

/// Builds every connection (in creation order) for a trace of `n` packets.
fn build_conns(rng: &mut Pcg64Mcg, n: u64, seed_key: u64) -> Vec<Conn> {
    let lens = draw_lengths(rng, n);
    let count = lens.len();
    // UDP: connections in random order whenever their packets fit in 15 % of n.
    let mut udp = vec![false; count];
    let mut perm: Vec<u32> = (0..count as u32).collect();
    perm.shuffle(rng);
    let budget = (UDP_PACKET_SHARE * n as f64) as u64;
    let mut used = 0u64;
    for &f in &perm {
        let len = u64::from(lens[f as usize]);
        if used + len <= budget {
            used += len;
            udp[f as usize] = true;
        }
    }
    drop(perm);
    // Endpoints: clients are an affine bijection of 0..CLIENTS into
    // 10.0.0.0/10 (distinct addresses); servers a Zipf-ranked pool.
    let mul = rng.random::<u32>() | 1;
    let add = rng.random::<u32>();
    let servers: Vec<u32> = (0..SERVERS)
        .map(|_| loop {
            let first = rng.random_range(1..=222u32);
            if first != 10 && first != 127 {
                break (first << 24) | (rng.random::<u32>() & 0xFF_FFFF);
            }
        })
        .collect();
    let zipf = Zipf::new(SERVERS as f64, 1.3).expect("valid Zipf parameters");
    let mut conns = Vec::with_capacity(count);
    for (f, (&len, &is_udp)) in lens.iter().zip(&udp).enumerate() {
        let f = f as u64;
        let (client, cport) = client_endpoint(f, seed_key, mul, add);
        let rank = zipf.sample(rng) as usize;
        let server = servers[rank.clamp(1, SERVERS) - 1];
        let known = rng.random::<f64>() < if is_udp { 0.8 } else { 0.85 };
        let u = rng.random::<f64>();
        let sport = match (known, is_udp) {
            (true, false) => weighted(&TCP_PORTS, u),
            (true, true) => weighted(&UDP_PORTS, u),
            (false, _) => rng.random_range(1..=65_535u16),
        };
        let s = rng.random::<f64>();
        let style = if s < 0.66 {
            Style::Download
        } else if s < 0.78 {
            Style::Upload
        } else {
            Style::Interactive
        };
        let z: f64 = StandardNormal.sample(rng);
        let spacing = (1e-4f64.ln() + 1.2 * z).exp();
        let dur = (f64::from(len - 1) * spacing).min(0.9);
        let start = rng.random::<f64>() * (1.0 - dur);
        let seq = [rng.random::<u32>(), rng.random::<u32>()];
        let mut c = Conn {
            next_key: 0.0,
            start,
            dur,
            len,
            sent: 0,
            client,
            server,
            cport,
            sport,
            seq,
            udp: is_udp,
            style,
            dirs: 0,
        };
        c.next_key = key_of(&c, f, 0, seed_key);
        conns.push(c);
    }
    conns
}

/// Normalised time key of packet `k` of connection `f`: increasing in `k`.
fn key_of(c: &Conn, f: u64, k: u32, seed_key: u64) -> f64 {
    let jitter = unit_f64(mix64(mix64(seed_key ^ f) ^ u64::from(k)));
    c.start + c.dur * (f64::from(k) + 0.5 * jitter) / f64::from(c.len)
}

/// Direction, IP total length and TCP flags (0 for UDP) of packet `k`.
fn shape(c: &Conn, k: u32, rng: &mut Pcg64Mcg) -> (usize, u16, u8) {
    let n = c.len;
    if c.udp {
        let dir = if k == 0 || rng.random::<f64>() < 0.5 {
            C2S
        } else {
            S2C
        };
        let size = if c.sport == 53 || c.sport == 123 {
            rng.random_range(60..240u16)
        } else {
            let u = rng.random::<f64>();
            if u < 0.3 {
                1252
            } else if u < 0.55 {
                1350
            } else {
                rng.random_range(40..200u16)
            }
        };
        return (dir, size, 0);
    }
    if n == 1 {
        let flags = if rng.random::<f64>() < 0.7 { SYN } else { RST };
        return (C2S, 52, flags);
    }
    match k {
        0 => return (C2S, 52, SYN),
        1 => return (S2C, 52, SYN | ACK),
        2 => return (C2S, 40, ACK),
        _ => {}
    }
    if n >= 6 && k == n - 2 {
        return (C2S, 40, FIN | ACK);
    }
    if n >= 6 && k == n - 1 {
        return (S2C, 40, FIN | ACK);
    }
    let phase = (k - 3) % 3;
    let (dir, data_dir) = match c.style {
        Style::Download => {
            let d = if phase == 2 { C2S } else { S2C };
            (d, d == S2C)
        }
        Style::Upload => {
            let d = if phase == 2 { S2C } else { C2S };
            (d, d == C2S)
        }
        Style::Interactive => (if k.is_multiple_of(2) { C2S } else { S2C }, true),
    };
    let u = rng.random::<f64>();
    let size = if c.style == Style::Interactive {
        if u < 0.4 {
            40
        } else {
            rng.random_range(60..1000u16)
        }
    } else if data_dir {
        if u > 0.97 {
            rng.random_range(60..1000u16)
        } else if u < 0.92 {
            1500
        } else {
            rng.random_range(600..1500u16)
        }
    } else if u < 0.8 {
        40
    } else {
        52
    };
    let flags = if size <= 52 { ACK } else { PSH | ACK };
    (dir, size, flags)
}

/// Writes the realistic trace described in the module contract.
pub(super) fn generate<W: Write>(opts: &GenOptions, mut out: PcapOut<W>) -> io::Result<GenSummary> {
    let n = opts.packets;
    let seed_key = mix64(opts.seed ^ 0x5245_414C); // "REAL"
    let mut setup_rng = Pcg64Mcg::seed_from_u64(seed_key);
    let mut conns = build_conns(&mut setup_rng, n, seed_key);
    let mut rng = Pcg64Mcg::seed_from_u64(mix64(seed_key));
    let payload_key = mix64(seed_key ^ 0x5041_594C); // "PAYL"
    let payload = frame::PayloadPool::new(payload_key);

    // Connections in order of their first packet; a min-heap merges the
    // packets of the connections that have started.
    let mut order: Vec<u32> = (0..conns.len() as u32).collect();
    order.sort_unstable_by_key(|&f| (conns[f as usize].next_key.to_bits(), f));
    let mut heap: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    let mut next_start = 0usize;

    let idle_factor = 1.0 / opts.load - 1.0;
    let ns_per_byte = 8.0 / opts.gbps;
    let snaplen = opts.snaplen as usize;
    let mut scratch = [0u8; MAX_FRAME];
    let mut clock_ns = 0.0f64;
    let (mut first_ts, mut last_ts) = (0u64, 0u64);
    let (mut bytes_ip, mut tcp_packets, mut written) = (0u64, 0u64, 0u64);

    for i in 0..n {
        while let Some(&f) = order.get(next_start) {
            let key = conns[f as usize].next_key.to_bits();
            match heap.peek() {
                Some(Reverse((top, _))) if *top < key => break,
                _ => {
                    heap.push(Reverse((key, f)));
                    next_start += 1;
                }
            }
        }
        let Some(Reverse((_, f))) = heap.pop() else {
            // Not reached: the lengths add up to exactly n packets; should it
            // ever happen, the summary reports what was really written.
            break;
        };
        let c = &mut conns[f as usize];
        let k = c.sent;
        let (dir, ip_len, flags) = shape(c, k, &mut rng);
        let ip_len_us = usize::from(ip_len);
        let frame_len = (ip_len_us + ETH_LEN).max(MIN_FRAME);
        let wire_ns = (frame_len as f64 + WIRE_EXTRA) * ns_per_byte;
        let idle: f64 = Exp1.sample(&mut rng);
        clock_ns += wire_ns + idle * wire_ns * idle_factor;
        let ts = START_NS + clock_ns as u64;
        if i == 0 {
            first_ts = ts;
        }
        last_ts = ts;

        let (src, dst, sp, dp) = if dir == C2S {
            (c.client, c.server, c.cport, c.sport)
        } else {
            (c.server, c.client, c.sport, c.cport)
        };
        frame::write_eth_ipv4(
            &mut scratch,
            &Ipv4 {
                src,
                dst,
                id: (i as u16).wrapping_mul(31),
                total_len: ip_len,
                proto: if c.udp { 17 } else { 6 },
            },
        );
        let hdr_end = if c.udp {
            frame::write_udp(&mut scratch[L4_OFF..], sp, dp, ip_len - 20);
            L4_OFF + 8
        } else {
            let tsval = (ts / 1_000_000) as u32;
            let tcp = Tcp {
                sport: sp,
                dport: dp,
                seq: c.seq[dir],
                ack: if flags & ACK != 0 { c.seq[1 - dir] } else { 0 },
                flags,
                timestamps: (ip_len >= 52).then_some((
                    tsval,
                    if flags & ACK != 0 {
                        tsval.wrapping_sub(7)
                    } else {
                        0
                    },
                )),
            };
            frame::write_tcp(&mut scratch[L4_OFF..], &tcp);
            let end = L4_OFF + tcp.header_len();
            let payload_len = (ip_len_us + ETH_LEN - end) as u32;
            let consumed = payload_len + u32::from(flags & (SYN | FIN) != 0);
            c.seq[dir] = c.seq[dir].wrapping_add(consumed);
            tcp_packets += 1;
            end
        };
        // The whole payload is generated (not only the captured part) so the
        // L4 checksum is valid and the bytes do not depend on the snaplen.
        let ip_end = ETH_LEN + ip_len_us;
        let payload_sum = payload.fill(&mut scratch[hdr_end..ip_end], mix64(payload_key ^ i));
        scratch[ip_end..frame_len].fill(0);
        let l4_len = ip_len - 20;
        let sum = frame::sum16(
            &scratch[L4_OFF..hdr_end],
            payload_sum + frame::pseudo_header_sum(src, dst, if c.udp { 17 } else { 6 }, l4_len),
        );
        let ck = match (frame::checksum(sum), c.udp) {
            (0, true) => 0xFFFF, // UDP sends a computed zero as all ones
            (ck, _) => ck,
        };
        let ck_at = L4_OFF + if c.udp { 6 } else { 16 };
        scratch[ck_at..ck_at + 2].copy_from_slice(&ck.to_be_bytes());
        let caplen = frame_len.min(snaplen);
        out.record(ts, frame_len as u32, &scratch[..caplen])?;
        bytes_ip += u64::from(ip_len);
        written += 1;
        c.dirs |= 1 << dir;
        c.sent += 1;
        if c.sent < c.len {
            c.next_key = key_of(c, u64::from(f), c.sent, seed_key);
            heap.push(Reverse((c.next_key.to_bits(), f)));
        }
    }
    out.finish()?;
    let unidirectional = conns.iter().map(|c| u64::from(c.dirs.count_ones())).sum();
    Ok(GenSummary {
        packets: written,
        flows: conns.len() as u64,
        unidirectional_flows: unidirectional,
        bytes_ip,
        tcp_packets,
        duration_ns: last_ts - first_ts,
        mean_ip_size: 0.0,
    })
}

#[cfg(test)]
#[path = "realistic_tests.rs"]
mod tests;
