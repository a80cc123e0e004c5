//! GTP-U header view (3GPP TS 29.281), UDP port 2152.
//!
//! Contract: [`GtpU::parse`] takes the UDP payload and, for a version-1 GTP
//! (PT = 1) G-PDU (message type 255), returns the TEID and the length of the
//! header — 8 bytes, +4 when any of the E/S/PN flags is set, plus the chain
//! of extension headers when E is set — after which the user's IP packet
//! starts; the caller checks its version nibble. A header cut short is
//! [`Skip::Truncated`]; other versions, GTP' and other message types (echo,
//! error indication, end marker) are [`Skip::NotIp`]; a zero-length
//! extension header is [`Skip::Malformed`]; more than [`MAX_EXTENSIONS`]
//! extension headers is [`Skip::TooDeep`]. No allocation; pure.

use super::Skip;

/// IANA GTP-U port.
pub const PORT: u16 = 2152;
/// Mandatory header length.
pub const HEADER_LEN: usize = 8;
/// Longest extension-header chain followed.
pub const MAX_EXTENSIONS: usize = 4;
/// Message type of a G-PDU (carries a user packet).
pub const G_PDU: u8 = 255;

/// A GTP-U G-PDU header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GtpU {
    /// Tunnel endpoint identifier.
    pub teid: u32,
    /// Header length (offset of the user packet).
    pub len: usize,
}

impl GtpU {
    /// Parses the header at the start of the UDP payload.
    pub fn parse(data: &[u8]) -> Result<GtpU, Skip> {
        let h: &[u8; HEADER_LEN] = data.first_chunk().ok_or(Skip::Truncated)?;
        let flags = h[0];
        // Version 1 (bits 7-5) and protocol type GTP (bit 4).
        if flags & 0xf0 != 0x30 || h[1] != G_PDU {
            return Err(Skip::NotIp);
        }
        let teid = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
        if flags & 0x07 == 0 {
            return Ok(GtpU {
                teid,
                len: HEADER_LEN,
            });
        }
        // Sequence (2), N-PDU (1), next extension header type (1).
        let opt: &[u8; 4] = data
            .get(HEADER_LEN..)
            .and_then(|d| d.first_chunk())
            .ok_or(Skip::Truncated)?;
        let mut len = HEADER_LEN + 4;
        let mut next = if flags & 0x04 != 0 { opt[3] } else { 0 };
        for _ in 0..MAX_EXTENSIONS {
            if next == 0 {
                return Ok(GtpU { teid, len });
            }
            // Extension: length in 4-byte units, content, next type (last byte).
            let units = usize::from(*data.get(len).ok_or(Skip::Truncated)?);
            if units == 0 {
                return Err(Skip::Malformed);
            }
            let end = len + units * 4;
            next = *data.get(end - 1).ok_or(Skip::Truncated)?;
            len = end;
        }
        if next == 0 {
            Ok(GtpU { teid, len })
        } else {
            Err(Skip::TooDeep)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// G-PDU, no options, length 0x54, TEID 0x1f4.
    const PLAIN: [u8; 8] = [0x30, 0xff, 0x00, 0x54, 0x00, 0x00, 0x01, 0xf4];

    #[test]
    fn plain_gpdu() {
        assert_eq!(GtpU::parse(&PLAIN), Ok(GtpU { teid: 500, len: 8 }));
        for n in 0..HEADER_LEN {
            assert_eq!(GtpU::parse(&PLAIN[..n]), Err(Skip::Truncated));
        }
    }

    #[test]
    fn sequence_and_extension_header() {
        // E and S set; next extension 0x85 (PDU session container), one
        // 4-byte extension whose last byte ends the chain.
        let b = [
            0x36, 0xff, 0x00, 0x30, 0x00, 0x00, 0x00, 0x07, 0x00, 0x01, 0x00, 0x85, 0x01, 0x10,
            0x01, 0x00, 0x45,
        ];
        assert_eq!(GtpU::parse(&b), Ok(GtpU { teid: 7, len: 16 }));
        for n in 0..16 {
            assert_eq!(GtpU::parse(&b[..n]), Err(Skip::Truncated), "len {n}");
        }
        let mut zero = b;
        zero[12] = 0;
        assert_eq!(GtpU::parse(&zero), Err(Skip::Malformed));
        // Only S set: 4 optional bytes, no extension chain.
        let s = [0x32, 0xff, 0, 0, 0, 0, 0, 9, 0, 1, 0, 0x85];
        assert_eq!(GtpU::parse(&s), Ok(GtpU { teid: 9, len: 12 }));
    }

    #[test]
    fn endless_extensions_are_too_deep() {
        let mut b = vec![0x34, 0xff, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x85];
        for _ in 0..=MAX_EXTENSIONS {
            b.extend_from_slice(&[1, 0, 0, 0x85]);
        }
        assert_eq!(GtpU::parse(&b), Err(Skip::TooDeep));
    }

    #[test]
    fn other_messages_are_not_ip() {
        let mut echo = PLAIN;
        echo[1] = 1;
        assert_eq!(GtpU::parse(&echo), Err(Skip::NotIp));
        let mut gtp_prime = PLAIN;
        gtp_prime[0] = 0x20;
        assert_eq!(GtpU::parse(&gtp_prime), Err(Skip::NotIp));
        let mut v2 = PLAIN;
        v2[0] = 0x48;
        assert_eq!(GtpU::parse(&v2), Err(Skip::NotIp));
    }
}
