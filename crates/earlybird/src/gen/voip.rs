//! Call traffic with known calls: `earlybird gen voip`.
//!
//! Contract: [`generate_voip`] writes a classic pcap (Ethernet, IPv4,
//! nanosecond stamps) of `calls` SIP calls over UDP, started `rate` per
//! second, each with the exchange INVITE (SDP offer) → 100 → 180 → 200
//! (SDP answer) → ACK, `duration` seconds of G.711 µ-law RTP both ways
//! (one packet per `ptime`; the caller sends a 1 kHz tone, the callee
//! 500 Hz), then BYE (even calls from the caller, odd ones from the
//! callee) → 200. Every RTP packet but the first and last of a direction
//! is dropped with probability `loss` (its sequence number is used all the
//! same, so every loss shows in the sequence numbers) and delayed by a uniform
//! 0..`jitter_ms`; both are seeded. It returns the ground truth of every
//! call ([`GenCall`]: Call-ID, parties, times, packets sent and lost per
//! direction). Packets are written in time order (a heap of the next
//! packet of each active call), so memory is one small state per call
//! active at once. The same options give the same bytes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Write};

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::frame::{write_eth_ipv4, write_udp, Ipv4, ETH_LEN, IP_LEN, L4_OFF};
use crate::source::pcap_writer::PcapOut;

/// Options of `gen voip`.
#[derive(Debug, Clone, PartialEq)]
pub struct VoipGenOptions {
    /// Calls to generate.
    pub calls: u64,
    /// New calls per second.
    pub rate: f64,
    /// Talk time of each call, seconds.
    pub duration: f64,
    /// RTP packet interval, ms (20 for G.711 at 160 bytes).
    pub ptime_ms: u32,
    /// Probability that an RTP packet is lost.
    pub loss: f64,
    /// Largest extra delay of an RTP packet, ms (uniform).
    pub jitter_ms: f64,
    /// INVITE to answer, ms.
    pub ring_ms: u32,
    /// Seed.
    pub seed: u64,
    /// First INVITE time, Unix ns.
    pub start_ns: u64,
}

impl Default for VoipGenOptions {
    fn default() -> Self {
        VoipGenOptions {
            calls: 100,
            rate: 10.0,
            duration: 10.0,
            ptime_ms: 20,
            loss: 0.0,
            jitter_ms: 0.0,
            ring_ms: 1000,
            seed: 1,
            start_ns: 1_764_115_200_000_000_000,
        }
    }
}

/// The ground truth of one generated call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenCall {
    /// Call-ID.
    pub call_id: String,
    /// Caller user.
    pub caller: String,
    /// Callee user.
    pub callee: String,
    /// INVITE, Unix ns.
    pub invite_ns: u64,
    /// 200 OK to the INVITE.
    pub answer_ns: u64,
    /// BYE.
    pub bye_ns: u64,
    /// Whether the caller sent the BYE.
    pub bye_by_caller: bool,
    /// RTP packets the caller sent (lost ones included) and lost.
    pub caller_rtp: (u64, u64),
    /// RTP packets the callee sent and lost.
    pub callee_rtp: (u64, u64),
}

/// What `gen voip` wrote.
#[derive(Debug, Clone, Default)]
pub struct VoipGenSummary {
    /// Packets written.
    pub packets: u64,
    /// Most calls active at once.
    pub peak_active: u64,
    /// Every call.
    pub calls: Vec<GenCall>,
}

/// µ-law encoding of a 16-bit sample (G.711).
pub fn mulaw(sample: i16) -> u8 {
    const BIAS: i32 = 0x84;
    let mut s = i32::from(sample);
    let sign = if s < 0 {
        s = -s;
        0x80
    } else {
        0
    };
    s = s.min(32_635) + BIAS;
    let x = ((s >> 7) & 0xff) as u32;
    let exp = if x == 0 {
        0
    } else {
        31 - x.leading_zeros() as i32
    };
    let mant = (s >> (exp + 3)) & 0x0f;
    !(sign | (exp << 4) as u8 | mant as u8)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Invite,
    Trying,
    Ringing,
    Answer,
    Ack,
    Rtp { caller: bool, n: u64 },
    Bye,
    ByeOk,
}

fn addr(net: u32, i: u64) -> u32 {
    (10 << 24) | (net << 16) | (i % 65_536) as u32
}

fn rtp_port(i: u64) -> u16 {
    16_384 + 2 * ((i / 65_536) % 16_000) as u16
}

struct Writer<W: Write> {
    out: PcapOut<W>,
    frame: Vec<u8>,
    id: u16,
    packets: u64,
}

impl<W: Write> Writer<W> {
    fn udp(&mut self, ts: u64, src: (u32, u16), dst: (u32, u16), payload: &[u8]) -> io::Result<()> {
        let udp_len = 8 + payload.len();
        let total = IP_LEN + udp_len;
        self.frame.clear();
        self.frame.resize(ETH_LEN + total, 0);
        self.id = self.id.wrapping_add(1);
        write_eth_ipv4(
            &mut self.frame,
            &Ipv4 {
                src: src.0,
                dst: dst.0,
                id: self.id,
                total_len: total as u16,
                proto: 17,
            },
        );
        write_udp(&mut self.frame[L4_OFF..], src.1, dst.1, udp_len as u16);
        self.frame[L4_OFF + 8..].copy_from_slice(payload);
        self.packets += 1;
        self.out.record(ts, self.frame.len() as u32, &self.frame)
    }
}

fn ip(a: u32) -> String {
    std::net::Ipv4Addr::from(a).to_string()
}

/// One SIP message of call `c` (index `i`).
fn sip(step: Step, c: &GenCall, i: u64, cseq: u32) -> String {
    let (a, b) = (ip(addr(1, i)), ip(addr(2, i)));
    let from = format!("\"Caller {i}\" <sip:{}@{a}>;tag=a{i}", c.caller);
    let to_plain = format!("<sip:{}@{b}>", c.callee);
    let to = format!("{to_plain};tag=b{i}");
    let sdp = |host: &str, port: u16, id: u64| {
        format!(
            "v=0\r\no=- {id} 1 IN IP4 {host}\r\ns=-\r\nc=IN IP4 {host}\r\nt=0 0\r\n\
             m=audio {port} RTP/AVP 0 101\r\na=rtpmap:0 PCMU/8000\r\n\
             a=rtpmap:101 telephone-event/8000\r\na=ptime:20\r\n"
        )
    };
    let msg = |start: &str, via: &str, from: &str, to: &str, method: &str, n: u32, body: &str| {
        let ctype = if body.is_empty() {
            String::new()
        } else {
            "Content-Type: application/sdp\r\n".to_string()
        };
        format!(
            "{start}\r\nVia: SIP/2.0/UDP {via}:5060;branch=z9hG4bK{i}x{n}\r\nFrom: {from}\r\n\
             To: {to}\r\nCall-ID: {}\r\nCSeq: {n} {method}\r\nContact: <sip:{via}:5060>\r\n\
             User-Agent: earlybird-gen\r\n{ctype}Content-Length: {}\r\n\r\n{body}",
            c.call_id,
            body.len()
        )
    };
    let invite = format!("INVITE sip:{}@{b} SIP/2.0", c.callee);
    match step {
        Step::Invite => msg(
            &invite,
            &a,
            &from,
            &to_plain,
            "INVITE",
            1,
            &sdp(&a, rtp_port(i), i),
        ),
        Step::Trying => msg("SIP/2.0 100 Trying", &a, &from, &to_plain, "INVITE", 1, ""),
        Step::Ringing => msg("SIP/2.0 180 Ringing", &a, &from, &to, "INVITE", 1, ""),
        Step::Answer => msg(
            "SIP/2.0 200 OK",
            &a,
            &from,
            &to,
            "INVITE",
            1,
            &sdp(&b, rtp_port(i), i),
        ),
        Step::Ack => msg(
            &format!("ACK sip:{}@{b} SIP/2.0", c.callee),
            &a,
            &from,
            &to,
            "ACK",
            1,
            "",
        ),
        Step::Bye if c.bye_by_caller => msg(
            &format!("BYE sip:{}@{b} SIP/2.0", c.callee),
            &a,
            &from,
            &to,
            "BYE",
            cseq,
            "",
        ),
        // From the callee: From and To swap.
        Step::Bye => msg(
            &format!("BYE sip:{}@{a} SIP/2.0", c.caller),
            &b,
            &to,
            &from,
            "BYE",
            cseq,
            "",
        ),
        Step::ByeOk if c.bye_by_caller => msg("SIP/2.0 200 OK", &a, &from, &to, "BYE", cseq, ""),
        _ => msg("SIP/2.0 200 OK", &b, &to, &from, "BYE", cseq, ""),
    }
}

/// Writes the capture (see the module docs).
pub fn generate_voip<W: Write>(o: &VoipGenOptions, sink: W) -> io::Result<(W, VoipGenSummary)> {
    let bad = |m: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, m.to_string()));
    if !(o.rate.is_finite() && o.rate > 0.0) {
        return bad("rate must be > 0 calls per second");
    }
    if !(o.duration.is_finite() && o.duration >= 0.0) {
        return bad("duration must be ≥ 0 seconds");
    }
    if !(0.0..1.0).contains(&o.loss) {
        return bad("loss must be in [0, 1)");
    }
    if !(o.jitter_ms.is_finite() && o.jitter_ms >= 0.0) || o.ptime_ms == 0 {
        return bad("jitter must be ≥ 0 ms and ptime ≥ 1 ms");
    }
    let mut w = Writer {
        out: PcapOut::new(sink, true, 65_535)?,
        frame: Vec::with_capacity(1600),
        id: 0,
        packets: 0,
    };
    let mut rng = Pcg64Mcg::seed_from_u64(o.seed);
    let ms = 1_000_000u64;
    let ptime = u64::from(o.ptime_ms) * ms;
    let talk = (o.duration * 1e9) as u64;
    let rtp_packets = talk / ptime;
    let gap = (1e9 / o.rate) as u64;
    let mut summary = VoipGenSummary::default();
    // (time, call, step): the next packet of each active call.
    let mut heap: BinaryHeap<Reverse<(u64, u64, Step)>> = BinaryHeap::new();
    let mut next_call = 0u64;
    let mut active = 0u64;
    let mut payload = vec![0u8; 12 + 160];
    let jitter_ns = o.jitter_ms * 1e6;
    let delay = |rng: &mut Pcg64Mcg| {
        if jitter_ns > 0.0 {
            (rng.random::<f64>() * jitter_ns) as u64
        } else {
            0
        }
    };
    loop {
        let next_invite = (next_call < o.calls).then(|| o.start_ns + next_call * gap);
        let take_invite = match (next_invite, heap.peek()) {
            (Some(t), Some(Reverse((h, _, _)))) => t <= *h,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let (t, i, step) = if take_invite {
            let i = next_call;
            next_call += 1;
            let invite_ns = o.start_ns + i * gap;
            let answer_ns = invite_ns + u64::from(o.ring_ms) * ms;
            summary.calls.push(GenCall {
                call_id: format!("gen-{}-{i}@earlybird", o.seed),
                caller: format!("1{i:07}"),
                callee: format!("2{i:07}"),
                invite_ns,
                answer_ns,
                bye_ns: answer_ns + talk + 2 * ptime,
                bye_by_caller: i.is_multiple_of(2),
                caller_rtp: (0, 0),
                callee_rtp: (0, 0),
            });
            active += 1;
            summary.peak_active = summary.peak_active.max(active);
            (invite_ns, i, Step::Invite)
        } else {
            let Some(Reverse(e)) = heap.pop() else { break };
            e
        };
        let c = &summary.calls[i as usize];
        let (a, b) = (addr(1, i), addr(2, i));
        let port = rtp_port(i);
        let (invite_ns, answer_ns, bye_ns) = (c.invite_ns, c.answer_ns, c.bye_ns);
        let mut push = |at: u64, s: Step| heap.push(Reverse((at, i, s)));
        match step {
            Step::Rtp { caller, n } => {
                // The first and last packets always arrive, so every loss
                // shows in the sequence numbers.
                let lost = rng.random_bool(o.loss) && n > 0 && n + 1 < rtp_packets;
                let c = &mut summary.calls[i as usize];
                let count = if caller {
                    &mut c.caller_rtp
                } else {
                    &mut c.callee_rtp
                };
                count.0 += 1;
                if lost {
                    count.1 += 1;
                } else {
                    let freq = if caller { 1000.0 } else { 500.0 };
                    payload[0] = 0x80;
                    payload[1] = if n == 0 { 0x80 } else { 0 };
                    payload[2..4].copy_from_slice(&(n as u16).to_be_bytes());
                    payload[4..8].copy_from_slice(&((n * 160) as u32).to_be_bytes());
                    let ssrc = (i as u32).wrapping_mul(2).wrapping_add(u32::from(!caller));
                    payload[8..12].copy_from_slice(&ssrc.to_be_bytes());
                    for (k, s) in payload[12..].iter_mut().enumerate() {
                        let t = (n * 160 + k as u64) as f64 / 8000.0;
                        *s = mulaw((8000.0 * (2.0 * std::f64::consts::PI * freq * t).sin()) as i16);
                    }
                    let (src, dst) = if caller { (a, b) } else { (b, a) };
                    w.udp(t, (src, port), (dst, port), &payload)?;
                }
                if n + 1 < rtp_packets {
                    // Its nominal time plus its own delay: packets are
                    // written in arrival order.
                    let next = answer_ns + ptime * (n + 2) + u64::from(!caller) * ms;
                    push(next + delay(&mut rng), Step::Rtp { caller, n: n + 1 });
                }
                continue;
            }
            _ => {
                let c = &summary.calls[i as usize];
                let text = sip(step, c, i, 2);
                let (from_caller, next) = match step {
                    Step::Invite => (true, Some((invite_ns + ms, Step::Trying))),
                    Step::Trying => (false, Some((invite_ns + 10 * ms, Step::Ringing))),
                    Step::Ringing => (false, Some((answer_ns, Step::Answer))),
                    Step::Answer => (false, Some((answer_ns + ms, Step::Ack))),
                    Step::Ack => (true, Some((bye_ns, Step::Bye))),
                    Step::Bye => (c.bye_by_caller, Some((bye_ns + ms, Step::ByeOk))),
                    _ => (!c.bye_by_caller, None),
                };
                let (src, dst) = if from_caller { (a, b) } else { (b, a) };
                w.udp(t, (src, 5060), (dst, 5060), text.as_bytes())?;
                if step == Step::Ack && rtp_packets > 0 {
                    let d = delay(&mut rng);
                    push(answer_ns + ptime + d, Step::Rtp { caller: true, n: 0 });
                    let d = delay(&mut rng);
                    push(
                        answer_ns + ptime + ms + d,
                        Step::Rtp {
                            caller: false,
                            n: 0,
                        },
                    );
                }
                match next {
                    Some((at, s)) => push(at, s),
                    None => active -= 1,
                }
            }
        }
    }
    summary.packets = w.packets;
    let sink = w.out.finish()?;
    Ok((sink, summary))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mulaw_matches_g711_reference_points() {
        // G.711 µ-law: 0 → 0xFF, full scale positive → 0x80, negative → 0x00.
        assert_eq!(mulaw(0), 0xff);
        assert_eq!(mulaw(32_767), 0x80);
        assert_eq!(mulaw(-32_768), 0x00);
        assert_eq!(mulaw(-1), 0x7f);
    }

    #[test]
    fn the_same_options_give_the_same_bytes_and_truth() {
        let o = VoipGenOptions {
            calls: 5,
            duration: 1.0,
            loss: 0.1,
            jitter_ms: 5.0,
            ..VoipGenOptions::default()
        };
        let (a, sa) = generate_voip(&o, Vec::new()).unwrap();
        let (b, sb) = generate_voip(&o, Vec::new()).unwrap();
        assert_eq!(a, b);
        assert_eq!(sa.calls, sb.calls);
        assert_eq!(sa.calls.len(), 5);
        // 9 SIP messages and 2 × 50 RTP per call, minus the lost ones.
        let lost: u64 = sa
            .calls
            .iter()
            .map(|c| c.caller_rtp.1 + c.callee_rtp.1)
            .sum();
        assert_eq!(sa.packets, 5 * (7 + 100) - lost);
        assert!(lost > 0);
    }
}
