//! SCTP common header view (RFC 9260).
//!
//! Contract: [`Sctp::parse`] takes the captured transport bytes (bounded by
//! the IP length) and the declared transport length, and returns the ports,
//! which sit where TCP and UDP keep theirs. Only the ports (4 bytes) must be
//! captured. A declared length below the 12-byte common header is
//! [`Skip::Malformed`]; fewer than 4 captured bytes is [`Skip::Truncated`].
//! Chunks are not parsed. No allocation; pure.

use super::Skip;

/// SCTP common header length (ports, verification tag, checksum).
pub const HEADER_LEN: usize = 12;
/// Bytes that must be captured (the ports).
pub const MIN_CAPTURED: usize = 4;

/// The ports of an SCTP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sctp {
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
}

impl Sctp {
    /// Parses the common header at the start of `l4`.
    #[inline]
    pub fn parse(l4: &[u8], declared: usize) -> Result<Sctp, Skip> {
        if declared < HEADER_LEN {
            return Err(Skip::Malformed);
        }
        let p: &[u8; MIN_CAPTURED] = l4.first_chunk().ok_or(Skip::Truncated)?;
        Ok(Sctp {
            sport: u16::from_be_bytes([p[0], p[1]]),
            dport: u16::from_be_bytes([p[2], p[3]]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HDR: [u8; 12] = [0x0b, 0x59, 0x0b, 0x59, 0, 0, 0, 0, 0, 0, 0, 0];

    #[test]
    fn ports() {
        let s = Sctp::parse(&HDR, 28).unwrap();
        assert_eq!((s.sport, s.dport), (2905, 2905));
    }

    #[test]
    fn truncated_and_malformed() {
        for n in 0..MIN_CAPTURED {
            assert_eq!(Sctp::parse(&HDR[..n], 28), Err(Skip::Truncated));
        }
        assert_eq!(Sctp::parse(&HDR, 11), Err(Skip::Malformed));
    }
}
