//! Linux "cooked" capture headers: SLL (v1, LINKTYPE 113) and SLL2 (v2,
//! LINKTYPE 276).
//!
//! Contract: [`Sll::parse_v1`] reads the 16-byte v1 header (protocol at
//! offset 14) and [`Sll::parse_v2`] the 20-byte v2 header (protocol at
//! offset 0). Both return the protocol, the ARPHRD type, the sender's
//! link-layer address when it is a 6-byte MAC, and the header length. A
//! header cut short is [`Skip::Truncated`]. [`Sll::next`] says what follows:
//! a protocol of 0x0600 or more is an EtherType; below that Linux uses
//! pseudo-protocols, of which 802.2 LLC (0x0004) is followed, and the
//! ARPHRD type names 802.11 (801) and radiotap (803) frames of monitor-mode
//! interfaces; the rest (CAN, netlink, Novell 802.3, …) is
//! [`Skip::NotIp`]. No allocation; pure.

use super::ethernet::ethertype::MIN_ETHERTYPE;
use super::{Next, Skip};

/// ARPHRD_IEEE80211: bare 802.11 frames.
pub const ARPHRD_IEEE80211: u16 = 801;
/// ARPHRD_IEEE80211_RADIOTAP: radiotap header, then 802.11.
pub const ARPHRD_IEEE80211_RADIOTAP: u16 = 803;
/// ETH_P_802_2: the payload starts with an 802.2 LLC header.
pub const ETH_P_802_2: u16 = 0x0004;

/// What follows a cooked header, beyond what [`Next`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SllNext {
    /// A payload the walk follows.
    Next(Next),
    /// A radiotap header, then 802.11.
    Radiotap,
}

/// SLL v1 header length.
pub const V1_LEN: usize = 16;
/// SLL v2 header length.
pub const V2_LEN: usize = 20;

/// A Linux cooked header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sll {
    /// Protocol of the payload (an EtherType, or a Linux pseudo-protocol
    /// below 0x0600).
    pub protocol: u16,
    /// Packet type (0 to us, 1 broadcast, 2 multicast, 3 other host, 4 outgoing).
    pub packet_type: u16,
    /// ARPHRD_* link-layer address type.
    pub hatype: u16,
    /// Sender MAC when the link-layer address is 6 bytes long.
    pub src_mac: Option<[u8; 6]>,
    /// Header length (offset of the payload).
    pub len: usize,
}

#[inline]
fn mac_of(addr_len: usize, a: &[u8]) -> Option<[u8; 6]> {
    match (addr_len, a) {
        (6, [a0, a1, a2, a3, a4, a5, ..]) => Some([*a0, *a1, *a2, *a3, *a4, *a5]),
        _ => None,
    }
}

impl Sll {
    /// Parses a v1 header: packet type, hatype, address length, 8-byte
    /// address, protocol.
    #[inline]
    pub fn parse_v1(data: &[u8]) -> Result<Sll, Skip> {
        let h: &[u8; V1_LEN] = data.first_chunk().ok_or(Skip::Truncated)?;
        let addr_len = u16::from_be_bytes([h[4], h[5]]) as usize;
        Ok(Sll {
            protocol: u16::from_be_bytes([h[14], h[15]]),
            packet_type: u16::from_be_bytes([h[0], h[1]]),
            hatype: u16::from_be_bytes([h[2], h[3]]),
            src_mac: mac_of(addr_len, &h[6..14]),
            len: V1_LEN,
        })
    }

    /// Parses a v2 header: protocol, reserved, interface index, hatype,
    /// packet type, address length, 8-byte address.
    #[inline]
    pub fn parse_v2(data: &[u8]) -> Result<Sll, Skip> {
        let h: &[u8; V2_LEN] = data.first_chunk().ok_or(Skip::Truncated)?;
        Ok(Sll {
            protocol: u16::from_be_bytes([h[0], h[1]]),
            packet_type: u16::from(h[10]),
            hatype: u16::from_be_bytes([h[8], h[9]]),
            src_mac: mac_of(h[11] as usize, &h[12..20]),
            len: V2_LEN,
        })
    }

    /// What follows the header, from the protocol and the ARPHRD type.
    #[inline]
    pub fn next(&self) -> Result<SllNext, Skip> {
        if self.protocol >= MIN_ETHERTYPE {
            return Ok(SllNext::Next(Next::EtherType(self.protocol)));
        }
        match self.hatype {
            ARPHRD_IEEE80211_RADIOTAP => Ok(SllNext::Radiotap),
            ARPHRD_IEEE80211 => Ok(SllNext::Next(Next::Ieee80211)),
            _ if self.protocol == ETH_P_802_2 => Ok(SllNext::Next(Next::Llc)),
            _ => Err(Skip::NotIp),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// v1: outgoing (4), ARPHRD_ETHER, addr len 6, MAC + 2 pad, IPv6.
    const V1: [u8; 16] = [
        0x00, 0x04, 0x00, 0x01, 0x00, 0x06, 0x00, 0x0c, 0x29, 0x3f, 0x4a, 0x5b, 0x00, 0x00, 0x86,
        0xdd,
    ];
    /// v2: IPv4, reserved, ifindex 2, ARPHRD_ETHER, pkttype 0, addr len 6, MAC + pad.
    const V2: [u8; 20] = [
        0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01, 0x00, 0x06, 0x52, 0x54, 0x00,
        0x12, 0x34, 0x56, 0x00, 0x00,
    ];

    #[test]
    fn v1_header() {
        let s = Sll::parse_v1(&V1).unwrap();
        assert_eq!(s.protocol, 0x86dd);
        assert_eq!(s.packet_type, 4);
        assert_eq!(s.hatype, 1);
        assert_eq!(s.src_mac, Some([0x00, 0x0c, 0x29, 0x3f, 0x4a, 0x5b]));
        assert_eq!(s.len, 16);
    }

    #[test]
    fn v2_header() {
        let s = Sll::parse_v2(&V2).unwrap();
        assert_eq!(s.protocol, 0x0800);
        assert_eq!(s.packet_type, 0);
        assert_eq!(s.src_mac, Some([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]));
        assert_eq!(s.len, 20);
    }

    #[test]
    fn truncated() {
        for n in 0..V1_LEN {
            assert_eq!(Sll::parse_v1(&V1[..n]), Err(Skip::Truncated));
        }
        for n in 0..V2_LEN {
            assert_eq!(Sll::parse_v2(&V2[..n]), Err(Skip::Truncated));
        }
    }

    #[test]
    fn pseudo_protocols_and_odd_address_has_no_mac() {
        assert_eq!(
            Sll::parse_v1(&V1).unwrap().next(),
            Ok(SllNext::Next(Next::EtherType(0x86dd)))
        );
        let mut v1 = V1;
        v1[14] = 0x00;
        v1[15] = 0x04; // ETH_P_802_2
        assert_eq!(
            Sll::parse_v1(&v1).unwrap().next(),
            Ok(SllNext::Next(Next::Llc))
        );
        v1[15] = 0x0c; // ETH_P_CAN
        assert_eq!(Sll::parse_v1(&v1).unwrap().next(), Err(Skip::NotIp));
        // A monitor-mode interface: ARPHRD 803, protocol ETH_P_802_2.
        v1[2] = 0x03;
        v1[3] = 0x23;
        v1[15] = 0x04;
        assert_eq!(Sll::parse_v1(&v1).unwrap().next(), Ok(SllNext::Radiotap));
        v1[3] = 0x21; // ARPHRD 801
        assert_eq!(
            Sll::parse_v1(&v1).unwrap().next(),
            Ok(SllNext::Next(Next::Ieee80211))
        );
        let mut v2 = V2;
        v2[11] = 4; // 4-byte address (e.g. IPIP tunnel device)
        assert_eq!(Sll::parse_v2(&v2).unwrap().src_mac, None);
    }
}
