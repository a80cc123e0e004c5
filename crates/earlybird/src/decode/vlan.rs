//! IEEE 802.1Q / 802.1ad VLAN tag view.
//!
//! Contract: [`VlanTag::parse`] takes the 4 bytes that follow a VLAN TPID
//! (0x8100, 0x88A8 or the older 0x9100) — the tag control information and the
//! next EtherType — and returns the 12-bit VLAN id and that EtherType. It
//! fails only with [`Skip::Truncated`] when fewer than 4 bytes are present.
//! QinQ is handled by the caller calling it again while the EtherType is a
//! TPID. No allocation; pure.

use super::ethernet::ethertype;
use super::Skip;

/// Bytes after the TPID: TCI (2) + EtherType (2).
pub const TAG_LEN: usize = 4;

/// True when `et` is a VLAN tag protocol id the decoder follows.
#[inline]
pub fn is_tpid(et: u16) -> bool {
    matches!(
        et,
        ethertype::VLAN | ethertype::QINQ | ethertype::QINQ_OLD
    )
}

/// One VLAN tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanTag {
    /// VLAN identifier (low 12 bits of the TCI).
    pub id: u16,
    /// Priority code point (3 bits).
    pub pcp: u8,
    /// EtherType of what follows the tag.
    pub ethertype: u16,
}

impl VlanTag {
    /// Parses the tag control information and next EtherType.
    #[inline]
    pub fn parse(data: &[u8]) -> Result<VlanTag, Skip> {
        let t: &[u8; TAG_LEN] = data.first_chunk().ok_or(Skip::Truncated)?;
        let tci = u16::from_be_bytes([t[0], t[1]]);
        Ok(VlanTag {
            id: tci & 0x0fff,
            pcp: (tci >> 13) as u8,
            ethertype: u16::from_be_bytes([t[2], t[3]]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tag() {
        // PCP 5, DEI 0, VID 200 (0x0c8), then IPv4.
        let t = VlanTag::parse(&[0xa0, 0xc8, 0x08, 0x00, 0x45]).unwrap();
        assert_eq!(t.id, 200);
        assert_eq!(t.pcp, 5);
        assert_eq!(t.ethertype, 0x0800);
        let t = VlanTag::parse(&[0x1f, 0xff, 0x81, 0x00]).unwrap();
        assert_eq!(t.id, 0xfff);
        assert_eq!(t.pcp, 0);
        assert_eq!(t.ethertype, 0x8100);
    }

    #[test]
    fn truncated() {
        let b = [0x00, 0x64, 0x08, 0x00];
        for n in 0..TAG_LEN {
            assert_eq!(VlanTag::parse(&b[..n]), Err(Skip::Truncated));
        }
    }

    #[test]
    fn tpids() {
        assert!(is_tpid(0x8100) && is_tpid(0x88a8) && is_tpid(0x9100));
        assert!(!is_tpid(0x0800) && !is_tpid(0x8847));
    }
}
