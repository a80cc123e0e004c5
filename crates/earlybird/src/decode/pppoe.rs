//! PPPoE session header (RFC 2516) and the PPP protocol field (RFC 1661).
//!
//! Contract: [`PppoeSession::parse`] takes the bytes after EtherType 0x8864
//! (6-byte PPPoE header, then the 2-byte PPP protocol) and says what the
//! PPP frame carries (see [`super::ppp`]: IPv4, IPv6, MPLS). Anything else
//! (LCP, IPCP, CHAP, …) and PPPoE discovery (0x8863) are [`Skip::NotIp`].
//! A header cut short is [`Skip::Truncated`], a version/type other than
//! 1/1 is [`Skip::Malformed`]. No allocation; pure.

use super::{ppp, Next, Skip};

/// PPPoE session header length (without the PPP protocol field).
pub const HEADER_LEN: usize = 6;

/// A PPPoE session frame carrying IP or MPLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PppoeSession {
    /// PPPoE session id.
    pub session_id: u16,
    /// What the PPP frame carries.
    pub next: Next,
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
        let next = ppp::next_of(u16::from_be_bytes([h[6], h[7]]))?;
        Ok(PppoeSession {
            session_id: u16::from_be_bytes([h[2], h[3]]),
            next,
            len: HEADER_LEN + 2,
        })
    }
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
        assert_eq!(s.next, Next::Ip(6));
        assert_eq!(s.len, 8);
        let mut v4 = SESSION_V6;
        v4[7] = 0x21;
        assert_eq!(PppoeSession::parse(&v4).unwrap().next, Next::Ip(4));
        let mut mpls = SESSION_V6;
        mpls[6] = 0x02;
        mpls[7] = 0x81;
        assert_eq!(
            PppoeSession::parse(&mpls).unwrap().next,
            Next::EtherType(0x8847)
        );
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
}
