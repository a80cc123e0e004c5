//! UDP header view (RFC 768).
//!
//! Contract: [`Udp::parse`] takes the captured transport bytes (bounded by
//! the IP length) and the transport length declared by the IP header, and
//! returns the ports. Only the ports (4 bytes) must be captured. A declared
//! length below the 8-byte header is [`Skip::Malformed`]; fewer than 4
//! captured bytes is [`Skip::Truncated`]. The payload length is taken from
//! the IP header, not from the UDP length field (which is reported as is).
//! No allocation; pure. [`tunnel_port`] says whether the walk looks inside
//! a datagram for a tunnel (the fast path and the walk share it).

use super::{capwap, geneve, gtp, teredo, vxlan, Skip};

/// VXLAN's port in the Linux kernel's default configuration (before IANA
/// assigned 4789).
pub const VXLAN_LINUX_PORT: u16 = 8472;

/// Lowest and highest port of [`tunnel_port`]'s list.
const TUNNEL_LO: u16 = gtp::PORT;
const TUNNEL_HI: u16 = VXLAN_LINUX_PORT;

/// True when a datagram between these ports may carry a tunnel the walk
/// follows: destination 4789 or 8472 (VXLAN) or 6081 (Geneve), either
/// port 2152 (GTP-U), 5247 (CAPWAP data) or 3544 (Teredo). One range test
/// of both ports first, so the common ports (below 2152 or ephemeral) pay
/// no more than the two compares of the range.
#[inline(always)]
pub fn tunnel_port(sport: u16, dport: u16) -> bool {
    const SPAN: u16 = TUNNEL_HI - TUNNEL_LO;
    let near = (sport.wrapping_sub(TUNNEL_LO) <= SPAN) | (dport.wrapping_sub(TUNNEL_LO) <= SPAN);
    near && (matches!(dport, vxlan::PORT | VXLAN_LINUX_PORT | geneve::PORT)
        || matches!(sport, gtp::PORT | capwap::PORT | teredo::PORT)
        || matches!(dport, gtp::PORT | capwap::PORT | teredo::PORT))
}

/// UDP header length.
pub const HEADER_LEN: usize = 8;
/// Bytes that must be captured (the ports).
pub const MIN_CAPTURED: usize = 4;

/// The fields of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Udp {
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Length field, when captured.
    pub length: Option<u16>,
}

impl Udp {
    /// Parses the header at the start of `l4`; `declared` is the datagram
    /// length according to the IP header.
    #[inline]
    pub fn parse(l4: &[u8], declared: usize) -> Result<Udp, Skip> {
        if declared < HEADER_LEN {
            return Err(Skip::Malformed);
        }
        let p: &[u8; MIN_CAPTURED] = l4.first_chunk().ok_or(Skip::Truncated)?;
        Ok(Udp {
            sport: u16::from_be_bytes([p[0], p[1]]),
            dport: u16::from_be_bytes([p[2], p[3]]),
            length: match l4 {
                [_, _, _, _, a, b, ..] => Some(u16::from_be_bytes([*a, *b])),
                _ => None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DNS: [u8; 8] = [0xd4, 0x31, 0x00, 0x35, 0x00, 0x21, 0x00, 0x00];

    #[test]
    fn parses_ports_and_length() {
        let u = Udp::parse(&DNS, 33).unwrap();
        assert_eq!((u.sport, u.dport, u.length), (54321, 53, Some(33)));
        let u = Udp::parse(&DNS[..4], 33).unwrap();
        assert_eq!((u.sport, u.dport, u.length), (54321, 53, None));
    }

    #[test]
    fn truncated_and_malformed() {
        for n in 0..MIN_CAPTURED {
            assert_eq!(Udp::parse(&DNS[..n], 33), Err(Skip::Truncated), "len {n}");
        }
        assert_eq!(Udp::parse(&DNS, 7), Err(Skip::Malformed));
        assert!(Udp::parse(&DNS, 8).is_ok());
    }

    #[test]
    fn tunnel_ports() {
        for (s, d) in [(50000, 4789), (1, 8472), (7, 6081), (2152, 9), (9, 2152)] {
            assert!(tunnel_port(s, d), "{s} {d}");
        }
        for (s, d) in [(5247, 40000), (40000, 5247), (3544, 3797), (3797, 3544)] {
            assert!(tunnel_port(s, d), "{s} {d}");
        }
        // VXLAN and Geneve only by destination; the range edges.
        for (s, d) in [
            (4789, 50000),
            (6081, 443),
            (53, 40000),
            (2151, 8473),
            (5353, 5353),
        ] {
            assert!(!tunnel_port(s, d), "{s} {d}");
        }
    }
}
