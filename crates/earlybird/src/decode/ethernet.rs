//! Ethernet II header view (IEEE 802.3 / DIX).
//!
//! Contract: [`Ethernet::parse`] takes the bytes starting at the Ethernet
//! header and returns the MAC addresses and the type/length field that
//! follows them: an EtherType, or below 0x0600 the length of an IEEE 802.3
//! frame, whose LLC header the walk reads next (LLC/SNAP may carry IP;
//! STP, CDP, … do not). It fails with [`Skip::Truncated`] when fewer than
//! 14 bytes are present. No allocation; pure function of the input bytes.

use super::Skip;

/// Length of an Ethernet II header (no FCS, no tags).
pub const HEADER_LEN: usize = 14;

/// EtherType values the decoder follows.
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// IPv6.
    pub const IPV6: u16 = 0x86DD;
    /// IEEE 802.1Q customer VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// IEEE 802.1ad service VLAN tag (QinQ).
    pub const QINQ: u16 = 0x88A8;
    /// Pre-standard QinQ tag used by some vendors.
    pub const QINQ_OLD: u16 = 0x9100;
    /// MPLS unicast.
    pub const MPLS_UC: u16 = 0x8847;
    /// MPLS multicast.
    pub const MPLS_MC: u16 = 0x8848;
    /// PPPoE session stage.
    pub const PPPOE_SESSION: u16 = 0x8864;
    /// Transparent Ethernet bridging (GRE payload type).
    pub const TEB: u16 = 0x6558;
    /// ERSPAN type II (GRE payload type).
    pub const ERSPAN_II: u16 = 0x88BE;
    /// ERSPAN type III (GRE payload type).
    pub const ERSPAN_III: u16 = 0x22EB;
    /// PPP (enhanced GRE / PPTP payload type).
    pub const PPP: u16 = 0x880B;
    /// Smallest value that is an EtherType rather than an 802.3 length.
    pub const MIN_ETHERTYPE: u16 = 0x0600;
}

/// The fields of an Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ethernet {
    /// Destination MAC address.
    pub dst: [u8; 6],
    /// Source MAC address.
    pub src: [u8; 6],
    /// EtherType of the next header (may be a VLAN tag, MPLS, …), or an
    /// 802.3 length below [`ethertype::MIN_ETHERTYPE`].
    pub ethertype: u16,
}

impl Ethernet {
    /// Parses the 14-byte header at the start of `data`.
    #[inline]
    pub fn parse(data: &[u8]) -> Result<Ethernet, Skip> {
        let h: &[u8; HEADER_LEN] = data.first_chunk().ok_or(Skip::Truncated)?;
        let ethertype = u16::from_be_bytes([h[12], h[13]]);
        Ok(Ethernet {
            dst: [h[0], h[1], h[2], h[3], h[4], h[5]],
            src: [h[6], h[7], h[8], h[9], h[10], h[11]],
            ethertype,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: [u8; 16] = [
        0x00, 0x16, 0x3e, 0x08, 0x71, 0xcf, // dst
        0x36, 0xdc, 0x85, 0x1e, 0xb3, 0x40, // src
        0x08, 0x00, // IPv4
        0x45, 0x00,
    ];

    #[test]
    fn parses_dix_header() {
        let e = Ethernet::parse(&FRAME).unwrap();
        assert_eq!(e.dst, [0x00, 0x16, 0x3e, 0x08, 0x71, 0xcf]);
        assert_eq!(e.src, [0x36, 0xdc, 0x85, 0x1e, 0xb3, 0x40]);
        assert_eq!(e.ethertype, ethertype::IPV4);
    }

    #[test]
    fn truncated_at_every_length() {
        for n in 0..HEADER_LEN {
            assert_eq!(
                Ethernet::parse(&FRAME[..n]),
                Err(Skip::Truncated),
                "len {n}"
            );
        }
        assert!(Ethernet::parse(&FRAME[..HEADER_LEN]).is_ok());
    }

    #[test]
    fn ieee_802_3_length_is_returned() {
        let mut f = FRAME;
        // 802.3 length 0x0026 followed by LLC (STP).
        f[12] = 0x00;
        f[13] = 0x26;
        assert_eq!(Ethernet::parse(&f).unwrap().ethertype, 0x0026);
        f[12] = 0x06;
        f[13] = 0x00;
        assert_eq!(Ethernet::parse(&f).unwrap().ethertype, 0x0600);
    }
}
