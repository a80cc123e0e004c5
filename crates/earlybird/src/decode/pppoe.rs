//! PPPoE session header (RFC 2516) and the PPP protocol field (RFC 1661).
//!
//! Contract: [`PppoeSession::parse`] takes the bytes after EtherType 0x8864
//! (6-byte PPPoE header, then the 2-byte PPP protocol) and says which IP
//! version the PPP frame carries. [`ppp_ip`] does the same for a bare PPP
//! frame (as in enhanced GRE/PPTP), accepting the optional 0xFF 0x03
//! address/control bytes and a compressed one-byte protocol field. PPP
//! protocol 0x0021 is IPv4, 0x0057 IPv6; anything else (LCP, IPCP, CHAP, …)
//! and PPPoE discovery (0x8863) are [`Skip::NotIp`]. A header cut short is
//! [`Skip::Truncated`], a version/type other than 1/1 is
//! [`Skip::Malformed`]. No allocation; pure.

use super::Skip;

/// PPPoE session header length (without the PPP protocol field).
pub const HEADER_LEN: usize = 6;
/// PPP protocol number of IPv4.
pub const PPP_IPV4: u16 = 0x0021;
/// PPP protocol number of IPv6.
pub const PPP_IPV6: u16 = 0x0057;

/// A PPPoE session frame carrying IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PppoeSession {
    /// PPPoE session id.
    pub session_id: u16,
    /// IP version carried (4 or 6).
    pub ip_version: u8,
    /// Bytes before the IP header (PPPoE header + PPP protocol).
    pub len: usize,
}

impl PppoeSession {
    /// Parses a PPPoE session header and its PPP protocol field.
    #[inline]
    pub fn parse(data: &[u8]) -> Result<PppoeSession, Skip> {
        let h: &[u8; HEADER_LEN + 2] = data.first_chunk().ok_or(Skip::Truncated)?;
        if h[0] != 0x11 {
            return Err(Skip::Malformed);
        }
        let ip_version = ip_version_of(u16::from_be_bytes([h[6], h[7]]))?;
        Ok(PppoeSession {
            session_id: u16::from_be_bytes([h[2], h[3]]),
            ip_version,
            len: HEADER_LEN + 2,
        })
    }
}

#[inline]
fn ip_version_of(ppp_proto: u16) -> Result<u8, Skip> {
    match ppp_proto {
        PPP_IPV4 => Ok(4),
        PPP_IPV6 => Ok(6),
        _ => Err(Skip::NotIp),
    }
}

/// Reads the head of a bare PPP frame: returns the IP version carried and
/// the number of bytes before the IP header.
#[inline]
pub fn ppp_ip(data: &[u8]) -> Result<(u8, usize), Skip> {
    let mut off = 0;
    if data.first() == Some(&0xff) {
        // Address 0xFF, control 0x03 (RFC 1662 HDLC-like framing).
        if data.get(1) != Some(&0x03) {
            return Err(Skip::Malformed);
        }
        off = 2;
    }
    let b0 = *data.get(off).ok_or(Skip::Truncated)?;
    if b0 & 1 == 1 {
        // Protocol field compression: one odd byte.
        return Ok((ip_version_of(u16::from(b0))?, off + 1));
    }
    let b1 = *data.get(off + 1).ok_or(Skip::Truncated)?;
    Ok((ip_version_of(u16::from_be_bytes([b0, b1]))?, off + 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Version/type 0x11, code 0 (session data), session 0x2a, length 0x40, PPP IPv6.
    const SESSION_V6: [u8; 8] = [0x11, 0x00, 0x00, 0x2a, 0x00, 0x40, 0x00, 0x57];

    #[test]
    fn session_ipv6() {
        let s = PppoeSession::parse(&SESSION_V6).unwrap();
        assert_eq!(s.session_id, 0x2a);
        assert_eq!(s.ip_version, 6);
        assert_eq!(s.len, 8);
        let mut v4 = SESSION_V6;
        v4[7] = 0x21;
        assert_eq!(PppoeSession::parse(&v4).unwrap().ip_version, 4);
    }

    #[test]
    fn session_truncated_and_malformed() {
        for n in 0..SESSION_V6.len() {
            assert_eq!(PppoeSession::parse(&SESSION_V6[..n]), Err(Skip::Truncated));
        }
        let mut bad = SESSION_V6;
        bad[0] = 0x21;
        assert_eq!(PppoeSession::parse(&bad), Err(Skip::Malformed));
    }

    #[test]
    fn lcp_is_not_ip() {
        let mut lcp = SESSION_V6;
        lcp[6] = 0xc0;
        lcp[7] = 0x21;
        assert_eq!(PppoeSession::parse(&lcp), Err(Skip::NotIp));
    }

    #[test]
    fn bare_ppp_forms() {
        assert_eq!(ppp_ip(&[0xff, 0x03, 0x00, 0x21, 0x45]), Ok((4, 4)));
        assert_eq!(ppp_ip(&[0x00, 0x57, 0x60]), Ok((6, 2)));
        assert_eq!(ppp_ip(&[0x21, 0x45]), Ok((4, 1)));
        assert_eq!(ppp_ip(&[0xff, 0x03, 0x57]), Ok((6, 3)));
        assert_eq!(ppp_ip(&[0xff, 0x03, 0xc0, 0x21]), Err(Skip::NotIp));
        assert_eq!(ppp_ip(&[0xff, 0x05, 0x00, 0x21]), Err(Skip::Malformed));
        assert_eq!(ppp_ip(&[]), Err(Skip::Truncated));
        assert_eq!(ppp_ip(&[0xff, 0x03]), Err(Skip::Truncated));
        assert_eq!(ppp_ip(&[0xff, 0x03, 0x00]), Err(Skip::Truncated));
    }
}
