//! PPP frames (RFC 1661), bare or in HDLC-like framing (RFC 1662):
//! LINKTYPE_PPP (9), LINKTYPE_PPP_HDLC (50), LINKTYPE_PPP_WITH_DIR (204),
//! and the PPP inside PPPoE and enhanced GRE.
//!
//! Contract: [`parse`] reads the head of a PPP frame — the optional
//! 0xFF 0x03 address/control bytes, then the protocol field, two bytes or
//! one odd byte (protocol field compression) — and says what follows:
//! 0x0021 IPv4 and 0x0057 IPv6 as [`Next::Ip`], 0x0281/0x0283 MPLS as
//! [`Next::EtherType`] of MPLS, with the number of bytes before it.
//! Anything else (LCP, IPCP, CHAP, multilink, VJ-compressed TCP, …) is
//! [`Skip::NotIp`]; an address byte 0xFF with a control byte other than
//! 0x03 is [`Skip::Malformed`]; a frame cut before its protocol field is
//! [`Skip::Truncated`]. [`next_of`] maps a protocol number alone (PPPoE
//! reads it at a fixed place). No allocation; pure.

use super::ethernet::ethertype;
use super::{Next, Skip};

/// PPP protocol number of IPv4.
pub const PPP_IPV4: u16 = 0x0021;
/// PPP protocol number of IPv6.
pub const PPP_IPV6: u16 = 0x0057;
/// PPP protocol number of MPLS unicast.
pub const PPP_MPLS_UC: u16 = 0x0281;
/// PPP protocol number of MPLS multicast.
pub const PPP_MPLS_MC: u16 = 0x0283;

/// What a PPP protocol number carries.
#[inline]
pub fn next_of(protocol: u16) -> Result<Next, Skip> {
    match protocol {
        PPP_IPV4 => Ok(Next::Ip(4)),
        PPP_IPV6 => Ok(Next::Ip(6)),
        PPP_MPLS_UC => Ok(Next::EtherType(ethertype::MPLS_UC)),
        PPP_MPLS_MC => Ok(Next::EtherType(ethertype::MPLS_MC)),
        _ => Err(Skip::NotIp),
    }
}

/// Reads the head of a PPP frame: what follows and the number of bytes
/// before it.
#[inline]
pub fn parse(data: &[u8]) -> Result<(Next, usize), Skip> {
    let mut off = 0;
    if data.first() == Some(&0xff) {
        // Address 0xFF, control 0x03 (RFC 1662 HDLC-like framing).
        match data.get(1) {
            Some(0x03) => off = 2,
            Some(_) => return Err(Skip::Malformed),
            None => return Err(Skip::Truncated),
        }
    }
    let b0 = *data.get(off).ok_or(Skip::Truncated)?;
    if b0 & 1 == 1 {
        // Protocol field compression: one odd byte.
        return Ok((next_of(u16::from(b0))?, off + 1));
    }
    let b1 = *data.get(off + 1).ok_or(Skip::Truncated)?;
    Ok((next_of(u16::from_be_bytes([b0, b1]))?, off + 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_of_the_header() {
        // suricata-verify defrag-ppp (LINKTYPE_PPP): protocol field
        // compressed to 0x21, then the IPv4 header 45 00 00 1c.
        let suri = [0x21, 0x45, 0x00, 0x00, 0x1c];
        assert_eq!(parse(&suri), Ok((Next::Ip(4), 1)));
        // tcpdump mpls-traceroute (LINKTYPE_PPP): ff 03, MPLS unicast,
        // then label 0x18960 with bottom of stack.
        let mpls = [0xff, 0x03, 0x02, 0x81, 0x18, 0x96, 0x01, 0x01, 0x45];
        assert_eq!(parse(&mpls), Ok((Next::EtherType(0x8847), 4)));
        // Same capture, IPv4 frames: ff 03 00 21 45.
        assert_eq!(parse(&[0xff, 0x03, 0x00, 0x21, 0x45]), Ok((Next::Ip(4), 4)));
        assert_eq!(parse(&[0x00, 0x57, 0x60]), Ok((Next::Ip(6), 2)));
        assert_eq!(parse(&[0xff, 0x03, 0x57]), Ok((Next::Ip(6), 3)));
        assert_eq!(parse(&[0x02, 0x83]), Ok((Next::EtherType(0x8848), 2)));
    }

    #[test]
    fn control_protocols_truncation_and_bad_control() {
        // LCP, PAP (tcpdump truncated-aack), multilink (mlppp-oobr).
        assert_eq!(parse(&[0xff, 0x03, 0xc0, 0x21]), Err(Skip::NotIp));
        assert_eq!(parse(&[0xff, 0x03, 0xc0, 0x23]), Err(Skip::NotIp));
        assert_eq!(parse(&[0xff, 0x03, 0x00, 0x3d]), Err(Skip::NotIp));
        // tcpdump ppp_error_hexdump (LINKTYPE_PPP_HDLC): ff 60 …
        assert_eq!(parse(&[0xff, 0x60, 0x7e, 0x80]), Err(Skip::Malformed));
        assert_eq!(parse(&[]), Err(Skip::Truncated));
        assert_eq!(parse(&[0xff]), Err(Skip::Truncated));
        assert_eq!(parse(&[0xff, 0x03]), Err(Skip::Truncated));
        assert_eq!(parse(&[0xff, 0x03, 0x00]), Err(Skip::Truncated));
        assert_eq!(next_of(0x0057), Ok(Next::Ip(6)));
        assert_eq!(next_of(0x002d), Err(Skip::NotIp)); // VJ-compressed TCP
    }
}
