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
//! the decoder skips give `None`; nothing here panics on any input.
//! [`SipConnections`] is the bounded set of TCP connections a shard has
//! seen SIP on, so that only their segments travel to the call stage.

use std::collections::HashMap;

use super::sip::looks_like_sip;
use super::tracker::{Addr, Fragment, Tcp, VoipPacket};
use crate::decode::ipv4::Ipv4;
use crate::decode::ipv6::Ipv6;
use crate::decode::LinkType;
use crate::decode::{decode, map_v4, Decoded, Skip};

/// The datagram or segment of `frame` for the tracker (see the module
/// docs); `d` is scratch space for the decoder.
pub fn extract<'a>(
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
        let lower = (p.src, p.sport) <= (p.dst, p.dport);
        let key = if lower {
            (p.src, p.sport, p.dst, p.dport)
        } else {
            (p.dst, p.dport, p.src, p.sport)
        };
        let flags = p.tcp.map_or(0, |t| t.flags);
        let (fin, rst) = (flags & 0x01 != 0, flags & 0x04 != 0);
        // An empty set (no SIP over TCP seen) knows no connection: no
        // hashing then.
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
