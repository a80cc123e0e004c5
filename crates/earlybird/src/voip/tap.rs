//! What reaches the call tracker from a captured frame.
//!
//! Contract: [`extract`] decodes one frame (the decoder's tunnels
//! included) and returns the UDP datagram or TCP segment it carries as a
//! [`VoipPacket`] when the call tracker may want it: UDP payloads that
//! look like SIP, RTP or RTCP (first two bits 2), and TCP segments (every
//! one: whether a connection carries SIP is decided by the tracker's
//! caller, see [`SipConnections`]). The fragments of a UDP datagram
//! are returned as fragments (the tracker reassembles them); other frames
//! the decoder skips give `None`; nothing here panics on any input.
//! [`SipConnections`] is the bounded set of TCP connections a shard has
//! seen SIP on, so that only their segments travel to the call stage.

use std::collections::HashSet;

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
#[derive(Debug, Default)]
pub struct SipConnections {
    set: HashSet<(Addr, u16, Addr, u16)>,
    max: usize,
    /// Connections not remembered because the set was full.
    pub dropped: u64,
}

impl SipConnections {
    /// An empty set of at most `max` connections.
    pub fn new(max: usize) -> SipConnections {
        SipConnections {
            set: HashSet::new(),
            max,
            dropped: 0,
        }
    }

    /// Whether TCP segment `p` belongs to a SIP connection: it does when
    /// its connection was seen with SIP before or its payload starts like
    /// SIP. A FIN or RST forgets the connection (after this segment).
    pub fn wants(&mut self, p: &VoipPacket<'_>) -> bool {
        let key = if (p.src, p.sport) <= (p.dst, p.dport) {
            (p.src, p.sport, p.dst, p.dport)
        } else {
            (p.dst, p.dport, p.src, p.sport)
        };
        let closing = p.tcp.is_some_and(|t| t.flags & 0x05 != 0);
        // An empty set (no SIP over TCP seen) knows no connection: no
        // hashing then.
        if self.set.is_empty() {
            if closing || !looks_like_sip(p.payload) {
                return false;
            }
        } else {
            let known = self.set.contains(&key);
            if closing {
                if known {
                    self.set.remove(&key);
                }
                return known;
            }
            if known {
                return true;
            }
            if !looks_like_sip(p.payload) {
                return false;
            }
        }
        if self.set.len() >= self.max {
            self.dropped += 1;
            return false;
        }
        self.set.insert(key);
        true
    }
}
