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
//! in a handful of loads); the rest through the general walk. That is
//! for the packets of no flow: a packet of a flow reaches the tap in a
//! flows run as the shard decoded it, and [`flow_packet`] reads it
//! without decoding it again (the shard's protocol, ports, direction and
//! flags; the transport found from its IP header offset; addresses built
//! only for what is kept). [`SipConnections`] is the bounded set of TCP connections a shard has
//! seen SIP on, so that only their segments travel to the call stage.
//!
//! [`Follow`] is the candidate mark of a flow: what the packets of a flow
//! tell about the flow's later packets (a shard stops showing the tap a
//! flow that cannot carry SIP, RTP or RTCP). A UDP flow is judged once, at
//! its first packet: it is followed when that datagram looks like SIP, RTP
//! or RTCP, or is a STUN message (ICE checks precede the media on its
//! ports), or the keying that precedes SRTP there (ZRTP, DTLS), or one of
//! its ports is a SIP port (5060, 5061). Ports announced in SDP do not
//! count: the SDP is often run by another shard than the media flow, and a
//! mark set from it would depend on when each shard ran, so the calls
//! written would change with the number of shards. A TCP flow is
//! followed until a segment with payload is neither SIP nor of a
//! connection seen with SIP, unless a port is a SIP port. Other protocols
//! than UDP, TCP and SCTP are never followed; packets the decoder does not
//! take keep the flow followed.

use std::collections::HashMap;

use super::sip::looks_like_sip;
use super::tracker::{Addr, Fragment, Tcp, VoipPacket};
use crate::analyze::media::demux::{self, Demux};
use crate::analyze::media::dtls;
use crate::decode::ipv4::Ipv4;
use crate::decode::ipv6::Ipv6;
use crate::decode::LinkType;
use crate::decode::{decode, fast, ipproto, map_v4, Decoded, Skip};
use crate::flow::packet::{Pkt, V6Icmp};

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

/// Where the transport of a flow packet is in its frame, found from the
/// innermost IP header the shard's decoding placed (see [`flow_packet`]).
#[derive(Debug, Clone, Copy)]
struct Located {
    /// Offset of the transport header.
    l4: usize,
    /// Offset of the transport payload.
    start: usize,
    /// The payload's length according to the headers.
    len: usize,
    /// An IPv4 first fragment (more fragments follow).
    first_fragment: bool,
}

/// The transport of flow packet `p` (protocol `p.key.proto`, UDP, TCP or
/// SCTP) in `frame`, read from the IP header at `p.ip_offset`: the
/// header's own length and the length it declares, and for TCP the data
/// offset. `None` for what the shard's decoding read past more headers
/// than these (IPv6 extension headers, an IPv4 length of 0 (TSO), a
/// jumbogram): such a packet is decoded again.
#[inline(always)]
fn locate(frame: &[u8], p: &Pkt) -> Option<Located> {
    let ip = usize::from(p.ip_offset);
    let proto = p.key.proto;
    let (l4, declared, first_fragment) = if p.key.is_v6() {
        let h: &[u8; 40] = frame.get(ip..)?.first_chunk()?;
        let declared = usize::from(u16::from_be_bytes([h[4], h[5]]));
        if h[6] != proto || declared == 0 {
            return None;
        }
        (ip + 40, declared, false)
    } else {
        let h: &[u8; 20] = frame.get(ip..)?.first_chunk()?;
        let ihl = usize::from(h[0] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
        (ip + ihl, total.checked_sub(ihl)?, h[6] & 0x20 != 0)
    };
    let head = match proto {
        ipproto::UDP => 8,
        ipproto::TCP => usize::from(*frame.get(l4 + 12)? >> 4) * 4,
        _ => 12,
    };
    Some(Located {
        l4,
        start: l4 + head,
        len: declared.checked_sub(head)?,
        first_fragment,
    })
}

/// The addresses of flow packet `p` (its side `side`), source first (an
/// IPv4 address in its mapped form, built as one 128-bit value).
#[inline(always)]
fn ends(p: &Pkt, side: &V6Icmp) -> (Addr, Addr) {
    let k = &p.key;
    let (s, d) = if p.from_a { (0, 1) } else { (1, 0) };
    if k.is_v6() {
        (side.wide[s], side.wide[d])
    } else {
        let mapped = |a: u32| (0xffff_0000_0000_u128 | u128::from(a)).to_be_bytes();
        let (a, b) = if p.from_a { (k.a, k.b) } else { (k.b, k.a) };
        (mapped(a), mapped(b))
    }
}

/// A flow packet as the shard decoded it (`p`, its side `side`, its
/// frame `frame`; `first`: the flow's first packet): the datagram or
/// segment the tracker wants, TCP segments already asked of `conns`, and
/// what it says of the flow's next packets ([`Follow`]). The same packet
/// and the same mark as [`extract_flow`] followed by
/// [`SipConnections::wants`] and [`follow_tcp`], but without decoding
/// the frame again: the protocol, ports, direction and TCP flags are the
/// shard's, the transport is found from its IP header offset, and
/// addresses are built only for a packet that is kept (or asked of a
/// set that knows connections). A TCP segment whose payload starts past
/// the bytes captured keeps its flow followed (so does the general walk;
/// the fast path had judged it as a UDP datagram). Packets `locate`
/// cannot place are decoded again (`link`, scratch `d`).
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn flow_packet<'a>(
    ts: u64,
    link: LinkType,
    frame: &'a [u8],
    (p, side): (&Pkt, &V6Icmp),
    first: bool,
    conns: &mut SipConnections,
    d: &mut Decoded,
) -> (Option<VoipPacket<'a>>, Follow) {
    let k = &p.key;
    let proto = k.proto;
    if !matches!(proto, ipproto::UDP | ipproto::TCP | ipproto::SCTP) {
        return (None, Follow::No);
    }
    let Some(at) = locate(frame, p) else {
        return decode_again(ts, link, frame, d, first, conns);
    };
    let (sport, dport) = if p.from_a { (k.pa, k.pb) } else { (k.pb, k.pa) };
    let end = (at.start + at.len).min(frame.len());
    let payload = frame.get(at.start..end);
    let packet = |payload, tcp, sctp| {
        let (src, dst) = ends(p, side);
        VoipPacket {
            ts,
            src,
            dst,
            sport,
            dport,
            tcp,
            frag: None,
            sctp,
            payload,
        }
    };
    match proto {
        ipproto::UDP => {
            if at.first_fragment {
                let version = if k.is_v6() { 6 } else { 4 };
                let f = fragment(ts, frame, (p.ip_offset, version), (sport, dport), true);
                if f.is_some() {
                    return (f, Follow::Yes);
                }
            } else if let Some(pl) = payload.filter(|pl| wanted_udp(pl)) {
                return (Some(packet(pl, None, false)), Follow::Yes);
            }
            let rest = frame.get(at.start..).unwrap_or(&[]);
            (None, udp_follow(first, sport, dport, rest))
        }
        ipproto::TCP => {
            let (Some(pl), Some(h)) = (payload, frame.get(at.l4..at.l4 + 8)) else {
                return (None, Follow::Yes);
            };
            let flags = p.flags;
            // What `wants` answers first, before any address is built.
            if conns.is_empty() && (flags & 0x05 != 0 || !looks_like_sip(pl)) {
                let keep = pl.is_empty() || is_sip_port(sport) || is_sip_port(dport);
                return (None, if keep { Follow::Yes } else { Follow::No });
            }
            let seq = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
            let v = packet(pl, Some(Tcp { seq, flags }), false);
            let wanted = conns.wants(&v);
            (wanted.then_some(v), follow_tcp(&v, wanted))
        }
        _ => {
            let sip = payload.filter(|pl| super::sctp::messages(pl).any(looks_like_sip));
            (sip.map(|pl| packet(pl, None, true)), Follow::Yes)
        }
    }
}

/// [`flow_packet`] of a packet it cannot place: decoded again.
#[cold]
#[inline(never)]
fn decode_again<'a>(
    ts: u64,
    link: LinkType,
    frame: &'a [u8],
    d: &mut Decoded,
    first: bool,
    conns: &mut SipConnections,
) -> (Option<VoipPacket<'a>>, Follow) {
    let (v, follow) = extract_flow(ts, link, frame, d, first);
    match v {
        Some(v) if v.tcp.is_some() => {
            let wanted = conns.wants(&v);
            (wanted.then_some(v), follow_tcp(&v, wanted))
        }
        v => (v, follow),
    }
}

/// Whether a whole UDP datagram's payload is one the tracker may want:
/// RTP or RTCP (first two bits 2) or SIP, 8 bytes at least.
#[inline]
fn wanted_udp(payload: &[u8]) -> bool {
    payload.len() >= 8 && (payload[0] >> 6 == 2 || looks_like_sip(payload))
}

/// A UDP flow none of whose datagrams the tracker wants so far: judged at
/// its first datagram, `payload` (see the module docs).
#[inline]
fn udp_follow(first: bool, sport: u16, dport: u16, payload: &[u8]) -> Follow {
    if !first
        || is_sip_port(sport)
        || is_sip_port(dport)
        || is_stun(payload)
        || is_media_keying(payload)
    {
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

/// Whether a datagram is the keying that precedes SRTP on the media's own
/// ports, told apart by its first byte as RFC 7983 does
/// (`analyze::media::demux`): a ZRTP message (RFC 6189: the cookie "ZRTP"
/// at bytes 4-7) or a DTLS record (`analyze::media::dtls`: DTLS-SRTP,
/// RFC 5764).
#[inline]
fn is_media_keying(p: &[u8]) -> bool {
    match demux::classify(p) {
        Demux::Zrtp => p.get(4..8) == Some(b"ZRTP"),
        Demux::Dtls => dtls::Record::parse(p).is_ok(),
        _ => false,
    }
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
        Ok(()) if d.first_fragment && d.proto == 17 => {
            let ports = (d.sport, d.dport);
            return fragment(ts, frame, (d.ip_offset, d.ip_version), ports, true);
        }
        Ok(()) => {}
        Err(Skip::FragmentNonFirst) => {
            return fragment(ts, frame, (d.ip_offset, d.ip_version), (0, 0), false)
        }
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

/// A fragment of a UDP datagram (`first`: the one with the ports, `ports`
/// its ports), its IP header of version `version` at `ip_offset`.
fn fragment(
    ts: u64,
    frame: &[u8],
    (ip_offset, version): (u16, u8),
    ports: (u16, u16),
    first: bool,
) -> Option<VoipPacket<'_>> {
    let ip = frame.get(usize::from(ip_offset)..)?;
    let (src, dst, ident, offset, more, proto, start, end) = if version == 4 {
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
        sport: if first { ports.0 } else { 0 },
        dport: if first { ports.1 } else { 0 },
        tcp: None,
        sctp: false,
        frag: Some(Fragment {
            ident,
            offset,
            more,
            version,
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
    /// Whether the set knows no connection (then [`Self::wants`] takes
    /// only a segment that starts SIP, without FIN or RST).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

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

    use crate::decode::testutil::{corpus, corpus_pcaps, eth, ipv4, ipv6, tcp, udp};

    /// The fast path gives the walk's packet for every frame of the
    /// corpus's VoIP and tunnel captures (classic pcap), and `None` alike.
    #[test]
    fn the_fast_path_extracts_what_the_walk_does_on_the_corpus() {
        let Some(root) = corpus() else { return };
        let (mut frames, mut fast, mut kept) = (0, 0, 0);
        for (path, link, packets) in corpus_pcaps(&root, &["voip", "tunnels"]) {
            let (mut d1, mut d2) = (Decoded::default(), Decoded::default());
            for f in &packets {
                frames += 1;
                if link == LinkType::Ethernet && fast::ethernet_ipv4(f).is_some() {
                    fast += 1;
                }
                let a = extract(7, link, f, &mut d1);
                let b = extract_walk(7, link, f, &mut d2);
                assert_eq!(a, b, "{}: a frame of {} bytes", path.display(), f.len());
                kept += usize::from(a.is_some());
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
        // The keying before SRTP on the media ports (ZRTP, DTLS-SRTP
        // without ICE): followed, so the SRTP after it reaches the tap.
        let mut zrtp = vec![0x10, 0x00, 0x00, 0x01];
        zrtp.extend_from_slice(b"ZRTP");
        zrtp.extend_from_slice(&[0x12, 0x34, 0x56, 0x78, 0x50, 0x5a, 0, 0x1d]);
        assert_eq!(
            follow(&frame_v4(17, &udp(40000, 40002, &zrtp)), true),
            (false, Follow::Yes)
        );
        let mut hello = vec![22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 40, 1];
        hello.extend_from_slice(&[0; 39]);
        assert_eq!(
            follow(&frame_v4(17, &udp(40000, 40002, &hello)), true),
            (false, Follow::Yes)
        );
        // Neither with its cookie or version wrong.
        zrtp[5] = b'X';
        hello[2] = 0x03;
        for p in [&zrtp, &hello] {
            assert_eq!(
                follow(&frame_v4(17, &udp(40000, 40002, p)), true),
                (false, Follow::No)
            );
        }
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
