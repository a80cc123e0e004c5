//! VXLAN header view (RFC 7348), UDP destination port 4789.
//!
//! Contract: [`Vxlan::parse`] takes the UDP payload and returns the VNI when
//! the 8-byte header is present and its I flag (0x08) is set; the mirrored
//! Ethernet frame follows the header. Fewer than 8 bytes is
//! [`Skip::Truncated`]; a clear I flag (not VXLAN, or no valid VNI) is
//! [`Skip::NotIp`]. Other flag bits (e.g. the group-policy extension) are
//! ignored. No allocation; pure.

use super::Skip;

/// IANA VXLAN UDP port.
pub const PORT: u16 = 4789;
/// VXLAN header length.
pub const HEADER_LEN: usize = 8;

const FLAG_I: u8 = 0x08;

/// A VXLAN header with a valid VNI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vxlan {
    /// VXLAN network identifier (24 bits).
    pub vni: u32,
}

impl Vxlan {
    /// Parses the header at the start of the UDP payload.
    #[inline]
    pub fn parse(data: &[u8]) -> Result<Vxlan, Skip> {
        let h: &[u8; HEADER_LEN] = data.first_chunk().ok_or(Skip::Truncated)?;
        if h[0] & FLAG_I == 0 {
            return Err(Skip::NotIp);
        }
        Ok(Vxlan {
            vni: u32::from_be_bytes([0, h[4], h[5], h[6]]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vni() {
        // I flag plus the group-policy G bit, VNI 0x64 (100).
        let v = Vxlan::parse(&[0x88, 0x00, 0x00, 0x00, 0x00, 0x00, 0x64, 0x00]).unwrap();
        assert_eq!(v.vni, 100);
        let v = Vxlan::parse(&[0x08, 0, 0, 0, 0xab, 0xcd, 0xef, 0x99]).unwrap();
        assert_eq!(v.vni, 0xabcdef);
    }

    #[test]
    fn truncated_and_no_i_flag() {
        let h = [0x08, 0, 0, 0, 0, 0, 1, 0];
        for n in 0..HEADER_LEN {
            assert_eq!(Vxlan::parse(&h[..n]), Err(Skip::Truncated));
        }
        assert_eq!(Vxlan::parse(&[0, 0, 0, 0, 0, 0, 1, 0]), Err(Skip::NotIp));
    }
}
