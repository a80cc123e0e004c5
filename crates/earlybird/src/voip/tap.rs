//! What reaches the call tracker from a captured frame.
//!
//! Contract: [`extract`] decodes one frame (the decoder's tunnels
//! included) and returns the UDP datagram or TCP segment it carries as a
//! [`VoipPacket`] when the call tracker may want it: UDP payloads that
//! look like SIP, RTP or RTCP (first two bits 2), TCP segments (every
//! one: whether a connection carries SIP is decided by the tracker's
//! caller, see [`SipConnections`]), and SCTP packets with a whole DATA
//! message that looks like SIP (their chunks as the payload, RFC 4168;
//! `voip/sctp.rs`). The fragments of a UDP datagram
//! are returned as fragments (the tracker reassembles them); other frames
//! the decoder skips give `None`; nothing here panics on any input. The
//! common frame (untagged Ethernet, IPv4 without options, TCP or UDP) is
//! read through the decoder's fast path (`decode/fast.rs`, the same result
//! in a handful of loads); the rest through the general walk.
//! [`SipConnections`] is the bounded set of TCP connections a shard has
//! seen SIP on, so that only their segments travel to the call stage.
//!
//! [`Follow`] is the candidate mark of a flow: what the packets of a flow
//! tell about the flow's later packets (a shard stops showing the tap a
//! flow that cannot carry SIP, RTP or RTCP). A UDP flow is judged once, at
//! its first packet: it is followed when that datagram looks like SIP, RTP
//! or RTCP, or is a STUN message (ICE checks precede the media on its
//! ports), or one of its ports is a SIP port (5060, 5061). A TCP flow is
//! followed until a segment with payload is neither SIP nor of a
//! connection seen with SIP, unless a port is a SIP port. Other protocols
//! than UDP, TCP and SCTP are never followed; packets the decoder does not
//! take keep the flow followed.

use std::collections::HashMap;

use super::sip::looks_like_sip;
use super::tracker::{Addr, Fragment, Tcp, VoipPacket};
use crate::decode::ipv4::Ipv4;
use crate::decode::ipv6::Ipv6;
use crate::decode::LinkType;
use crate::decode::{decode, fast, ipproto, map_v4, Decoded, Skip};

/// What the call tap does with the flow of a packet after it (see the
/// module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// Show the tap the flow's next packets.
    Yes,
    /// The flow cannot carry what the tracker wants: its next packets
    /// need not reach the tap.
    No,
}

/// True for the ports SIP is registered on (RFC 3261: 5060, 5061 for TLS).
#[inline]
pub fn is_sip_port(port: u16) -> bool {
    port == 5060 || port == 5061
}

/// [`extract`] of a packet of a flow (`first`: the flow's first packet),
/// with what it says of the flow's next packets ([`Follow`]; a TCP
/// segment's is for the caller to decide with [`follow_tcp`], once it
/// knows whether the segment is wanted).
#[inline]
pub fn extract_flow<'a>(
    ts: u64,
    link: LinkType,
    frame: &'a [u8],
    d: &mut Decoded,
    first: bool,
) -> (Option<VoipPacket<'a>>, Follow) {
    if link == LinkType::Ethernet {
        if let Some(f) = fast::ethernet_ipv4(frame) {
            let v = from_fast(ts, frame, &f);
            let follow = match v {
                Some(_) => Follow::Yes,
                None => {
                    let p = frame.get(usize::from(f.payload_offset)..).unwrap_or(&[]);
                    udp_follow(first, f.sport(), f.dport(), p)
                }
            };
            return (v, follow);
        }
    }
    // What the walk found stays in `d` (its protocol 0 when it found
    // nothing: the flow stays followed).
    d.proto = 0;
    let v = extract_walk(ts, link, frame, d);
    if v.is_some() {
        return (v, Follow::Yes);
    }
    let follow = match d.proto {
        ipproto::UDP => {
            let p = frame.get(usize::from(d.payload_offset)..).unwrap_or(&[]);
            udp_follow(first, d.sport, d.dport, p)
        }
        0 | ipproto::TCP | ipproto::SCTP => Follow::Yes,
        _ => Follow::No,
    };
    (None, follow)
}

/// A UDP flow none of whose datagrams the tracker wants so far: judged at
/// its first datagram, `payload` (see the module docs).
#[inline]
fn udp_follow(first: bool, sport: u16, dport: u16, payload: &[u8]) -> Follow {
    if !first || is_sip_port(sport) || is_sip_port(dport) || is_stun(payload) {
        Follow::Yes
    } else {
        Follow::No
    }
}

/// Whether a datagram is a STUN message (RFC 5389: first two bits 0, the
/// magic cookie at bytes 4-7): ICE checks come before the media on the
/// media's own ports.
#[inline]
fn is_stun(p: &[u8]) -> bool {
    p.len() >= 20 && p[0] >> 6 == 0 && p[4..8] == [0x21, 0x12, 0xa4, 0x42]
}

/// A TCP segment of a flow after [`SipConnections::wants`] said `wanted`:
/// the flow is no longer followed once a segment with payload is not
/// wanted, unless a port is a SIP port.
#[inline]
pub fn follow_tcp(p: &VoipPacket<'_>, wanted: bool) -> Follow {
    if wanted || p.payload.is_empty() || is_sip_port(p.sport) || is_sip_port(p.dport) {
        Follow::Yes
    } else {
        Follow::No
    }
}

/// The packet of a frame the fast path decoded (never a fragment).
#[inline]
fn from_fast<'a>(ts: u64, frame: &'a [u8], f: &fast::Fast<'_>) -> Option<VoipPacket<'a>> {
    let start = usize::from(f.payload_offset);
    let end = (start + usize::from(f.payload_len)).min(frame.len());
    let payload = frame.get(start..end)?;
    let tcp = match f.proto {
        ipproto::UDP => {
            if payload.len() < 8 || !(payload[0] >> 6 == 2 || looks_like_sip(payload)) {
                return None;
            }
            None
        }
        _ => {
            // The fast path checked 14 bytes of the TCP header captured,
            // at offset 34.
            let h = frame.get(34..42)?;
            Some(Tcp {
                seq: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
                flags: f.tcp_flags,
            })
        }
    };
    Some(VoipPacket {
        ts,
        src: map_v4(f.src()),
        dst: map_v4(f.dst()),
        sport: f.sport(),
        dport: f.dport(),
        tcp,
        frag: None,
        sctp: false,
        payload,
    })
}

/// The datagram or segment of `frame` for the tracker (see the module
/// docs); `d` is scratch space for the decoder.
pub fn extract<'a>(
    ts: u64,
    link: LinkType,
    frame: &'a [u8],
    d: &mut Decoded,
) -> Option<VoipPacket<'a>> {
    if link == LinkType::Ethernet {
        if let Some(f) = fast::ethernet_ipv4(frame) {
            return from_fast(ts, frame, &f);
        }
    }
    extract_walk(ts, link, frame, d)
}

/// [`extract`] through the general walk.
fn extract_walk<'a>(
    ts: u64,
    link: LinkType,
    frame: &'a [u8],
    d: &mut Decoded,
) -> Option<VoipPacket<'a>> {
    match decode(link, frame, d) {
        Ok(()) if d.first_fragment && d.proto == 17 => return fragment(ts, frame, d, true),
        Ok(()) => {}
        Err(Skip::FragmentNonFirst) => return fragment(ts, frame, d, false),
        Err(_) => return None,
    }
    let start = d.payload_offset as usize;
    let end = (start + d.payload_len as usize).min(frame.len());
    let payload = frame.get(start..end)?;
    let tcp = match d.proto {
        17 => {
            if payload.len() < 8 || !(payload[0] >> 6 == 2 || looks_like_sip(payload)) {
                return None;
            }
            None
        }
        6 => {
            let h = tcp_header(frame, start, d)?;
            let seq = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
            Some(Tcp {
                seq,
                flags: d.tcp_flags,
            })
        }
        132 => {
            // SIP over SCTP: wanted when one of its whole messages is.
            if !super::sctp::messages(payload).any(looks_like_sip) {
                return None;
            }
            None
        }
        _ => return None,
    };
    Some(VoipPacket {
        ts,
        src: d.src,
        dst: d.dst,
        sport: d.sport,
        dport: d.dport,
        tcp,
        frag: None,
        sctp: d.proto == 132,
        payload,
    })
}

/// A fragment of a UDP datagram (`first`: the one with the ports), its
/// IP header at `d.ip_offset`.
fn fragment<'a>(ts: u64, frame: &'a [u8], d: &Decoded, first: bool) -> Option<VoipPacket<'a>> {
    let off = d.ip_offset as usize;
    let ip = frame.get(off..)?;
    let (src, dst, ident, offset, more, proto, start, end) = if d.ip_version == 4 {
        let h = Ipv4::parse(ip).ok()?;
        (
            map_v4(h.src),
            map_v4(h.dst),
            u32::from(h.ident),
            u32::from(h.frag_offset) * 8,
            h.more_fragments,
            h.proto,
            h.header_len,
            usize::from(h.total_len),
        )
    } else {
        let h = Ipv6::parse(ip).ok()?;
        (
            h.src,
            h.dst,
            h.ident,
            u32::from(h.frag_offset) * 8,
            h.more_fragments,
            h.proto,
            h.header_len,
            40 + usize::from(h.payload_len),
        )
    };
    if proto != 17 {
        return None;
    }
    let payload = ip.get(start..end.min(ip.len()))?;
    Some(VoipPacket {
        ts,
        src,
        dst,
        sport: if first { d.sport } else { 0 },
        dport: if first { d.dport } else { 0 },
        tcp: None,
        sctp: false,
        frag: Some(Fragment {
            ident,
            offset,
            more,
            version: d.ip_version,
        }),
        payload,
    })
}

/// The TCP header that ends at `start` (the payload's offset): the one
/// whose data offset says so and whose ports are the decoder's.
fn tcp_header<'a>(frame: &'a [u8], start: usize, d: &Decoded) -> Option<&'a [u8]> {
    (5..=15).find_map(|words| {
        let h = frame.get(start.checked_sub(4 * words)?..start)?;
        let fits = usize::from(h[12] >> 4) == words
            && u16::from_be_bytes([h[0], h[1]]) == d.sport
            && u16::from_be_bytes([h[2], h[3]]) == d.dport;
        fits.then_some(h)
    })
}

/// The TCP connections (both directions) a shard has seen SIP on, at most
/// `max` (see the module docs).
///
/// A connection is forgotten once both ends have sent their FIN, or at a
/// RST, and the segment that closes it still goes to the tracker, so the
/// tracker ends both directions too. Forgetting it at the first FIN lost
/// the other end's FIN, and a later connection on the same four-tuple
/// (phones reuse 5060 ↔ 5060) then met the old connection's sequence
/// numbers in the tracker and lost its messages.
#[derive(Debug, Default)]
pub struct SipConnections {
    /// Per connection, the ends that have sent a FIN (bit 0: the lower
    /// endpoint of the key, bit 1: the other).
    set: HashMap<(Addr, u16, Addr, u16), u8>,
    max: usize,
    /// Connections not remembered because the set was full.
    pub dropped: u64,
}

impl SipConnections {
    /// An empty set of at most `max` connections.
    pub fn new(max: usize) -> SipConnections {
        SipConnections {
            set: HashMap::new(),
            max,
            dropped: 0,
        }
    }

    /// Whether TCP segment `p` belongs to a SIP connection: it does when
    /// its connection was seen with SIP before or its payload starts like
    /// SIP. A RST, or the second end's FIN, forgets the connection (after
    /// this segment, which is wanted).
    pub fn wants(&mut self, p: &VoipPacket<'_>) -> bool {
        let flags = p.tcp.map_or(0, |t| t.flags);
        let (fin, rst) = (flags & 0x01 != 0, flags & 0x04 != 0);
        // An empty set (no SIP over TCP seen) knows no connection: no key
        // then, unless the segment starts one.
        if self.set.is_empty() && (fin || rst || !looks_like_sip(p.payload)) {
            return false;
        }
        let lower = (p.src, p.sport) <= (p.dst, p.dport);
        let key = if lower {
            (p.src, p.sport, p.dst, p.dport)
        } else {
            (p.dst, p.dport, p.src, p.sport)
        };
        if !self.set.is_empty() {
            if let Some(ends) = self.set.get_mut(&key) {
                if fin {
                    *ends |= if lower { 1 } else { 2 };
                }
                if rst || *ends == 3 {
                    self.set.remove(&key);
                }
                return true;
            }
        }
        if fin || rst || !looks_like_sip(p.payload) {
            return false;
        }
        if self.set.len() >= self.max {
            self.dropped += 1;
            return false;
        }
        self.set.insert(key, 0);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(from_a: bool, flags: u8, payload: &[u8]) -> VoipPacket<'_> {
        let (a, b) = ([1; 16], [2; 16]);
        let (src, dst) = if from_a { (a, b) } else { (b, a) };
        VoipPacket {
            ts: 0,
            src,
            dst,
            sport: 5060,
            dport: 5060,
            tcp: Some(Tcp { seq: 0, flags }),
            frag: None,
            sctp: false,
            payload,
        }
    }

    const INVITE: &[u8] = b"INVITE sip:b@x SIP/2.0\r\n";

    #[test]
    fn a_connection_is_followed_until_both_ends_close_it() {
        let mut c = SipConnections::new(8);
        assert!(
            !c.wants(&seg(true, 0x02, b"")),
            "a SYN of no SIP connection"
        );
        assert!(c.wants(&seg(true, 0x18, INVITE)));
        assert!(c.wants(&seg(false, 0x18, b"SIP/2.0 200 OK\r\n")));
        // Each end's FIN reaches the tracker; the second forgets it.
        assert!(c.wants(&seg(true, 0x11, b"")));
        assert!(c.wants(&seg(false, 0x11, b"")));
        assert!(!c.wants(&seg(true, 0x10, b"")), "forgotten after both FINs");
        // The same four-tuple again: followed from its first SIP bytes.
        assert!(c.wants(&seg(true, 0x18, INVITE)));
        assert!(c.wants(&seg(false, 0x10, b"")));
        // A RST from either end forgets it at once.
        assert!(c.wants(&seg(false, 0x14, b"")));
        assert!(!c.wants(&seg(true, 0x10, b"")));
        assert!(
            !c.wants(&seg(true, 0x11, b"")),
            "a FIN of no SIP connection"
        );
    }

    use crate::decode::testutil::{corpus, eth, ipv4, ipv6, read_pcap, tcp, udp};

    /// The fast path gives the walk's packet for every frame of the
    /// corpus's VoIP and tunnel captures (classic pcap), and `None` alike.
    #[test]
    fn the_fast_path_extracts_what_the_walk_does_on_the_corpus() {
        let Some(root) = corpus() else { return };
        let (mut frames, mut fast, mut kept) = (0, 0, 0);
        for dir in ["voip", "tunnels"] {
            let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
                continue;
            };
            for e in entries.flatten() {
                let Ok(bytes) = std::fs::read(e.path()) else {
                    continue;
                };
                let Some((link, packets)) = read_pcap(&bytes) else {
                    continue;
                };
                let Some(link) = LinkType::from_pcap(link) else {
                    continue;
                };
                let (mut d1, mut d2) = (Decoded::default(), Decoded::default());
                for f in &packets {
                    frames += 1;
                    if link == LinkType::Ethernet && fast::ethernet_ipv4(f).is_some() {
                        fast += 1;
                    }
                    let a = extract(7, link, f, &mut d1);
                    let b = extract_walk(7, link, f, &mut d2);
                    assert_eq!(a, b, "{}: a frame of {} bytes", e.path().display(), f.len());
                    kept += usize::from(a.is_some());
                }
            }
        }
        eprintln!("{frames} frames, {fast} on the fast path, {kept} for the tracker");
        assert!(fast > 1000 && kept > 1000, "{frames} {fast} {kept}");
    }

    fn frame_v4(proto: u8, l4: &[u8]) -> Vec<u8> {
        eth(0x0800, &ipv4(proto, l4))
    }

    fn follow(frame: &[u8], first: bool) -> (bool, Follow) {
        let mut d = Decoded::default();
        let (v, f) = extract_flow(0, LinkType::Ethernet, frame, &mut d, first);
        (v.is_some(), f)
    }

    #[test]
    fn a_udp_flow_is_judged_at_its_first_datagram() {
        let rtp = [0x80, 0x00, 0, 1, 0, 0, 0, 160, 1, 2, 3, 4, 9, 9];
        let dns = [0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        // RTP-like (version 2) and SIP are wanted, and keep the flow.
        assert_eq!(
            follow(&frame_v4(17, &udp(4000, 4002, &rtp)), true),
            (true, Follow::Yes)
        );
        let invite = b"INVITE sip:b@x SIP/2.0\r\n\r\n";
        assert_eq!(
            follow(&frame_v4(17, &udp(7000, 7002, invite)), true),
            (true, Follow::Yes)
        );
        // A first datagram of neither ends the flow's showing ...
        assert_eq!(
            follow(&frame_v4(17, &udp(5353, 53, &dns)), true),
            (false, Follow::No)
        );
        // ... unless a port is SIP's, or it is not the first (then only
        // the datagram is left out), over IPv6 too.
        assert_eq!(
            follow(&frame_v4(17, &udp(5060, 53, &dns)), true),
            (false, Follow::Yes)
        );
        assert_eq!(
            follow(&frame_v4(17, &udp(5353, 53, &dns)), false),
            (false, Follow::Yes)
        );
        let v6 = eth(0x86dd, &ipv6(17, &udp(5353, 53, &dns)));
        assert_eq!(follow(&v6, true), (false, Follow::No));
        // A STUN binding request first (ICE before the media): followed.
        let mut stun = vec![0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42];
        stun.extend_from_slice(&[7; 12]);
        assert_eq!(
            follow(&frame_v4(17, &udp(50000, 50002, &stun)), true),
            (false, Follow::Yes)
        );
        // Other protocols than UDP, TCP and SCTP: never followed.
        assert_eq!(
            follow(&frame_v4(1, &[8, 0, 0, 0, 0, 1, 0, 1]), true),
            (false, Follow::No)
        );
    }

    #[test]
    fn a_tcp_flow_is_followed_until_a_segment_with_payload_is_not_sip() {
        let mut c = SipConnections::new(8);
        let mut d = Decoded::default();
        let mut run = |l4: Vec<u8>| {
            let f = frame_v4(6, &l4);
            let (v, follow) = extract_flow(0, LinkType::Ethernet, &f, &mut d, false);
            let v = v.expect("every TCP segment is extracted");
            assert_eq!(follow, Follow::Yes);
            let wanted = c.wants(&v);
            (wanted, follow_tcp(&v, wanted))
        };
        // A SYN: not wanted, still followed; SIP: wanted; the connection's
        // later segments too.
        assert_eq!(run(tcp(40000, 15060, 0x02, b"")), (false, Follow::Yes));
        assert_eq!(run(tcp(40000, 15060, 0x18, INVITE)), (true, Follow::Yes));
        assert_eq!(
            run(tcp(40000, 15060, 0x18, b"v=0\r\n")),
            (true, Follow::Yes)
        );
        // Another connection whose first payload is not SIP: no more.
        assert_eq!(
            run(tcp(40001, 443, 0x18, b"\x16\x03\x01")),
            (false, Follow::No)
        );
        // On a SIP port it stays followed.
        assert_eq!(
            run(tcp(40002, 5060, 0x18, b"\x16\x03\x01")),
            (false, Follow::Yes)
        );
    }

    #[test]
    fn the_set_is_bounded_and_counts_what_it_cannot_follow() {
        let mut c = SipConnections::new(1);
        assert!(c.wants(&seg(true, 0x18, INVITE)));
        let mut other = seg(true, 0x18, INVITE);
        other.sport = 5061;
        assert!(!c.wants(&other));
        assert_eq!(c.dropped, 1);
    }
}
