//! Worst-case model (HPTRAC): minimum-size frames, many short flows at once.
//!
//! Contract: writes exactly `opts.packets` records. Every frame is 60 bytes
//! (Ethernet 14 + IPv4 20 + TCP 20 + 6 payload bytes; IP total length 46,
//! valid IPv4 and TCP checksums). Flow `f` (numbered from 0) is
//! 10.0.0.0+(f mod 2^20):1024+f%64000 → 172.16.0.0+(f mod 2^20):1+f%65000,
//! client→server only, and has `P = packets_per_flow` packets: SYN, ACK,
//! PSH|ACK…, FIN|ACK (P = 1: SYN; P = 2: SYN, FIN|ACK). Flows come in blocks
//! of `W = window`: packet j of every flow of the block is written (round
//! robin) before packet j+1, so W flows are active at all times. When
//! `packets` is not a multiple of W·P the last block is cut short exactly as
//! the reference generator cuts it (its flows lose their last packets).
//! Packet i is stamped START_NS + ⌊i · 672 / gbps⌋ ns (back-to-back 64-byte
//! frames plus 20 bytes of preamble and gap: 67.2 ns apart at 10 Gbit/s).
//!
//! No per-flow state: every field is arithmetic in (block, j, flow), so a
//! window of 10,000,000 costs no memory. No allocation per packet; the only
//! failure is the sink's `io::Error`.

use std::io::{self, Write};

use super::frame::{self, Ipv4, Tcp, ACK, FIN, L4_OFF, MIN_FRAME, PSH, SYN};
use super::{GenOptions, GenSummary, START_NS};
use crate::source::pcap_writer::PcapOut;

/// IP total length of every worst-case packet.
const IP_TOTAL: u16 = 46;
/// TCP segment length (header + 6 payload bytes).
const TCP_SEG: u16 = 26;
/// Wire bytes of one minimum frame: 60 + CRC 4 + preamble 8 + gap 12.
const WIRE_BYTES: f64 = 84.0;

/// TCP flags of packet `j` of a flow of `p` packets.
fn flags_of(j: u32, p: u32) -> u8 {
    if j == 0 {
        SYN
    } else if j == p - 1 {
        FIN | ACK
    } else if j == 1 {
        ACK
    } else {
        PSH | ACK
    }
}

/// Number of flows (all unidirectional) in a trace of `n` packets.
pub(super) fn flow_count(n: u64, window: u64, ppf: u32) -> u64 {
    let block = window * u64::from(ppf);
    (n / block) * window + window.min(n % block)
}

/// Writes the worst-case trace described in the module contract.
pub(super) fn generate<W: Write>(opts: &GenOptions, mut out: PcapOut<W>) -> io::Result<GenSummary> {
    let n = opts.packets;
    let w = opts.window;
    let p = opts.packets_per_flow;
    // i·672 is exact in f64, so one correctly rounded division per packet
    // gives exact integers where the true time is one.
    let wire_bits = WIRE_BYTES * 8.0;
    let caplen = (opts.snaplen as usize).min(MIN_FRAME);
    let payload_key = super::mix64(opts.seed ^ 0x5752_5354); // "WRST"
    let mut frame = [0u8; MIN_FRAME];
    let mut i: u64 = 0;
    let mut block_first_flow: u64 = 0;
    'blocks: while i < n {
        for j in 0..p {
            for f in block_first_flow..block_first_flow + w {
                if i == n {
                    break 'blocks;
                }
                let low = (f % (1 << 20)) as u32;
                let src = 0x0A00_0000 | low;
                let dst = 0xAC10_0000 | low;
                frame::write_eth_ipv4(
                    &mut frame,
                    &Ipv4 {
                        src,
                        dst,
                        id: i as u16,
                        total_len: IP_TOTAL,
                        proto: 6,
                    },
                );
                frame::write_tcp(
                    &mut frame[L4_OFF..],
                    &Tcp {
                        sport: 1024 + (f % 64_000) as u16,
                        dport: 1 + (f % 65_000) as u16,
                        seq: 1000u32.wrapping_add(j.wrapping_mul(6)),
                        ack: u32::from(j > 0),
                        flags: flags_of(j, p),
                        timestamps: None,
                    },
                );
                let payload_bytes = super::mix64(payload_key ^ i).to_le_bytes();
                frame[L4_OFF + 20..].copy_from_slice(&payload_bytes[..6]);
                let sum = frame::sum16(
                    &frame[L4_OFF..],
                    frame::pseudo_header_sum(src, dst, 6, TCP_SEG),
                );
                let ck = frame::checksum(sum);
                frame[L4_OFF + 16..L4_OFF + 18].copy_from_slice(&ck.to_be_bytes());
                let ts = START_NS + (i as f64 * wire_bits / opts.gbps) as u64;
                out.record(ts, MIN_FRAME as u32, &frame[..caplen])?;
                i += 1;
            }
        }
        block_first_flow += w;
    }
    out.finish()?;
    let flows = if n == 0 { 0 } else { flow_count(n, w, p) };
    Ok(GenSummary {
        packets: n,
        flows,
        unidirectional_flows: flows,
        bytes_ip: n * u64::from(IP_TOTAL),
        tcp_packets: n,
        duration_ns: if n == 0 {
            0
        } else {
            ((n - 1) as f64 * wire_bits / opts.gbps) as u64
        },
        mean_ip_size: 0.0,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::super::test_pcap::{decode, walk};
    use super::super::{generate as gen, GenKind};
    use super::*;

    fn opts(n: u64, w: u64, p: u32) -> GenOptions {
        let mut o = GenOptions::new(GenKind::Worst, n);
        o.window = w;
        o.packets_per_flow = p;
        o
    }

    fn run(o: &GenOptions) -> (Vec<u8>, GenSummary) {
        let mut buf = Vec::new();
        let s = gen(o, &mut buf).unwrap();
        (buf, s)
    }

    #[test]
    fn flags_sequences() {
        let seq = |p: u32| (0..p).map(|j| flags_of(j, p)).collect::<Vec<_>>();
        assert_eq!(seq(5), [SYN, ACK, PSH | ACK, PSH | ACK, FIN | ACK]);
        assert_eq!(seq(1), [SYN]);
        assert_eq!(seq(2), [SYN, FIN | ACK]);
        assert_eq!(seq(7)[2..6], [PSH | ACK, PSH | ACK, PSH | ACK, PSH | ACK]);
    }

    #[test]
    fn exact_counts_frames_flags_and_checksums() {
        let (w, p) = (100u64, 5u32);
        let o = opts(10 * w * u64::from(p), w, p);
        let (buf, s) = run(&o);
        let (hdr, recs) = walk(&buf);
        assert_eq!((hdr.linktype, hdr.nanos), (1, false));
        assert_eq!(recs.len() as u64, o.packets);
        assert_eq!(
            (s.packets, s.flows, s.unidirectional_flows),
            (5000, 1000, 1000)
        );
        assert_eq!(
            (s.tcp_packets, s.bytes_ip, s.mean_ip_size),
            (5000, 5000 * 46, 46.0)
        );
        let mut per_flow: HashMap<(u32, u32, u16, u16), Vec<u8>> = HashMap::new();
        for r in &recs {
            assert_eq!((r.data.len(), r.orig_len), (60, 60));
            let k = decode(r.data);
            assert_eq!((k.proto, k.ip_len), (6, 46));
            assert_eq!(k.src >> 20, 0x0A0, "client in 10.0.0.0/12");
            assert_eq!(k.dst >> 20, 0xAC1, "server in 172.16.0.0/12");
            let ip = &r.data[14..34];
            assert_eq!(frame::checksum(frame::sum16(ip, 0)), 0, "IPv4 checksum");
            let tcp = &r.data[34..60];
            let pseudo = frame::pseudo_header_sum(k.src, k.dst, 6, 26);
            assert_eq!(
                frame::checksum(frame::sum16(tcp, pseudo)),
                0,
                "TCP checksum"
            );
            per_flow
                .entry((k.src, k.dst, k.sport, k.dport))
                .or_default()
                .push(k.flags);
        }
        assert_eq!(per_flow.len(), 1000);
        for flags in per_flow.values() {
            assert_eq!(flags, &[SYN, ACK, PSH | ACK, PSH | ACK, FIN | ACK]);
        }
        // Flow 7: arithmetic addresses and ports.
        let k = decode(recs[7].data);
        assert_eq!(
            (k.src, k.dst, k.sport, k.dport),
            (0x0A00_0007, 0xAC10_0007, 1031, 8)
        );
    }

    #[test]
    fn window_flows_are_concurrently_active() {
        let (w, p) = (64u64, 4u32);
        let (buf, _) = run(&opts(6 * w * u64::from(p), w, p));
        let (_, recs) = walk(&buf);
        let mut span: HashMap<(u32, u16), (usize, usize)> = HashMap::new();
        for (i, r) in recs.iter().enumerate() {
            let k = decode(r.data);
            span.entry((k.src, k.sport)).or_insert((i, i)).1 = i;
        }
        // Sweep: +1 at a flow's first packet, -1 after its last.
        let mut delta = vec![0i64; recs.len() + 1];
        for &(a, b) in span.values() {
            delta[a] += 1;
            delta[b + 1] -= 1;
        }
        let mut active = 0i64;
        let mut max = 0i64;
        for (i, d) in delta.iter().enumerate().take(recs.len()) {
            active += d;
            max = max.max(active);
            assert!(active >= 1, "packet {i} outside every flow");
        }
        assert_eq!(max, w as i64);
        // Packet j of flows 0..W before packet j+1 of any of them.
        for j in 0..p as usize {
            for r in &recs[j * w as usize..(j + 1) * w as usize] {
                let k = decode(r.data);
                assert_eq!(k.flags, flags_of(j as u32, p));
            }
        }
    }

    #[test]
    fn partial_last_block_counts_like_the_reference() {
        let (w, p) = (100u64, 5u32);
        let o = opts(2 * w * u64::from(p) + 250, w, p);
        let (buf, s) = run(&o);
        let (_, recs) = walk(&buf);
        assert_eq!(recs.len(), 1250);
        let flows: std::collections::HashSet<u32> =
            recs.iter().map(|r| decode(r.data).src).collect();
        assert_eq!(s.flows, 300);
        assert_eq!(flows.len(), 300);
        assert_eq!(flow_count(1_000_000, 10_000, 5), 200_000);
        assert_eq!(flow_count(30, 100, 5), 30);
    }

    #[test]
    fn line_rate_timestamps_in_micro_and_nanoseconds() {
        let mut o = opts(1000, 10, 5);
        let (buf, s) = run(&o);
        let (_, recs) = walk(&buf);
        assert_eq!(recs[0].ts_ns, START_NS);
        // 67.2 ns apart, truncated to microseconds: packet 15 at 1008 ns.
        assert_eq!(recs[15].ts_ns - START_NS, 1000);
        assert_eq!(s.duration_ns, (999.0 * 67.2) as u64);
        o.nanos = true;
        let (buf, _) = run(&o);
        let (hdr, recs) = walk(&buf);
        assert!(hdr.nanos);
        assert_eq!(recs[15].ts_ns - START_NS, 1008);
        assert!(recs.windows(2).all(|p| p[0].ts_ns <= p[1].ts_ns));
    }

    #[test]
    fn deterministic_and_seeded() {
        let o = opts(20_000, 1000, 5);
        assert_eq!(run(&o).0, run(&o).0);
        let mut o2 = o.clone();
        o2.seed = 2;
        let (a, b) = (run(&o).0, run(&o2).0);
        assert_eq!(a.len(), b.len());
        assert_ne!(a, b, "payload bytes follow the seed");
    }

    #[test]
    fn snaplen_cuts_captured_bytes_only() {
        let mut o = opts(100, 10, 5);
        o.snaplen = 54;
        let (buf, _) = run(&o);
        let (hdr, recs) = walk(&buf);
        assert_eq!(hdr.snaplen, 54);
        assert!(recs.iter().all(|r| r.data.len() == 54 && r.orig_len == 60));
    }

    #[test]
    fn huge_window_needs_no_per_flow_memory() {
        // 10,000,000 concurrently active flows, 2 packets each: only the
        // first 2,000 packets are written, which must be SYNs of 2,000 flows.
        let o = opts(2_000, 10_000_000, 2);
        let (buf, s) = run(&o);
        let (_, recs) = walk(&buf);
        assert_eq!(s.flows, 2_000);
        assert!(recs.iter().all(|r| decode(r.data).flags == SYN));
    }
}
