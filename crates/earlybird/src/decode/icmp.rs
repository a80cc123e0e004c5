//! ICMP (RFC 792) and ICMPv6 (RFC 4443) header view.
//!
//! Contract: an ICMP flow is keyed on the host pair only (ports 0, as nDPI
//! and CICFlowMeter do: an echo request and its reply, or the neighbour
//! discovery between two hosts, are one session), so the decoder needs no
//! ICMP byte to account the packet; a truncated or empty ICMP message is
//! still a packet of its flow. The type and code of a flow's first packet
//! are recorded (`icmp_type`, `icmp_code`) instead of being put in the
//! port fields as NetFlow does. [`Icmp::parse`] reads type and code when at
//! least 4 bytes (type, code, checksum) are present, else
//! [`Skip::Truncated`] (the walk then records no type); [`payload_len`]
//! gives the message body length after the 8-byte header. No allocation;
//! pure.

use super::Skip;

/// ICMP/ICMPv6 header length (type, code, checksum, 4 bytes of rest).
pub const HEADER_LEN: usize = 8;

/// Type and code of an ICMP or ICMPv6 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmp {
    /// Message type.
    pub ty: u8,
    /// Message code.
    pub code: u8,
}

impl Icmp {
    /// Parses type and code at the start of `l4`.
    #[inline]
    pub fn parse(l4: &[u8]) -> Result<Icmp, Skip> {
        let h: &[u8; 4] = l4.first_chunk().ok_or(Skip::Truncated)?;
        Ok(Icmp {
            ty: h[0],
            code: h[1],
        })
    }

    /// True for ICMPv4 error messages (which quote the offending packet).
    pub fn is_v4_error(&self) -> bool {
        matches!(self.ty, 3 | 4 | 5 | 11 | 12)
    }

    /// True for ICMPv6 error messages (types below 128).
    pub fn is_v6_error(&self) -> bool {
        self.ty < 128
    }
}

/// Body length after the 8-byte header, given the declared message length.
#[inline]
pub fn payload_len(declared: usize) -> usize {
    declared.saturating_sub(HEADER_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_request_and_errors() {
        let echo = Icmp::parse(&[8, 0, 0xf7, 0xff, 0, 1, 0, 1]).unwrap();
        assert_eq!((echo.ty, echo.code), (8, 0));
        assert!(!echo.is_v4_error());
        let unreach = Icmp::parse(&[3, 3, 0, 0]).unwrap();
        assert!(unreach.is_v4_error());
        let ns = Icmp::parse(&[135, 0, 0, 0]).unwrap();
        assert!(!ns.is_v6_error());
        assert!(Icmp::parse(&[1, 4, 0, 0]).unwrap().is_v6_error());
    }

    #[test]
    fn truncated_and_payload() {
        for n in 0..4 {
            assert_eq!(Icmp::parse(&[8, 0, 0, 0][..n]), Err(Skip::Truncated));
        }
        assert_eq!(payload_len(64), 56);
        assert_eq!(payload_len(3), 0);
    }
}
