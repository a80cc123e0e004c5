//! IEEE 802.2 LLC with a SNAP header (RFC 1042, IEEE 802.1H), as found in
//! 802.3 length frames, 802.11 data frames and ATM LLC encapsulation
//! (RFC 2684), and the SNAP part alone as Frame Relay uses it (RFC 2427).
//!
//! Contract: [`parse`] reads DSAP 0xAA, SSAP 0xAA, control 0x03 (UI), then
//! the SNAP OUI and protocol id via [`snap`], and returns what follows with
//! the length of everything before it. SNAP with OUI 00-00-00 or 00-00-F8
//! carries an EtherType ([`Next::EtherType`]); OUI 00-80-C2 with PID
//! 0x0001/0x0007 carries a bridged Ethernet frame ([`Next::Ethernet`]; in
//! the LLC form a 2-byte pad precedes it, RFC 2684). Other SAPs (STP,
//! NetBIOS, IPX, …) and other OUIs (CDP, …) are [`Skip::NotIp`]; bytes cut
//! short are [`Skip::Truncated`]. No allocation; pure.

use super::{Next, Skip};

/// LLC (3) + SNAP (5) header length.
pub const HEADER_LEN: usize = 8;
/// SNAP header length (OUI + protocol id).
pub const SNAP_LEN: usize = 5;

/// OUI + PID of a SNAP header: what follows, and the pad before it.
#[inline]
pub fn snap(data: &[u8]) -> Result<(Next, usize), Skip> {
    let s: &[u8; SNAP_LEN] = data.first_chunk().ok_or(Skip::Truncated)?;
    let pid = u16::from_be_bytes([s[3], s[4]]);
    match [s[0], s[1], s[2]] {
        [0, 0, 0] | [0, 0, 0xf8] => Ok((Next::EtherType(pid), 0)),
        [0, 0x80, 0xc2] if pid == 0x0001 || pid == 0x0007 => Ok((Next::Ethernet, 2)),
        _ => Err(Skip::NotIp),
    }
}

/// Reads an LLC/SNAP header: what follows and how many bytes precede it.
#[inline]
pub fn parse(data: &[u8]) -> Result<(Next, usize), Skip> {
    let h: &[u8; 3] = data.first_chunk().ok_or(Skip::Truncated)?;
    if *h != [0xaa, 0xaa, 0x03] {
        return Err(Skip::NotIp);
    }
    let (next, pad) = snap(data.get(3..).unwrap_or(&[]))?;
    Ok((next, HEADER_LEN + pad))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snap_ethertypes() {
        // zeek wlanmon.pcap (802.11 data): aa aa 03 00 00 00 08 00, then 45.
        let v4 = [0xaa, 0xaa, 0x03, 0x00, 0x00, 0x00, 0x08, 0x00, 0x45];
        assert_eq!(parse(&v4), Ok((Next::EtherType(0x0800), 8)));
        // Same capture: aa aa 03 00 00 00 86 dd, then 60.
        let v6 = [0xaa, 0xaa, 0x03, 0x00, 0x00, 0x00, 0x86, 0xdd, 0x60];
        assert_eq!(parse(&v6), Ok((Next::EtherType(0x86dd), 8)));
        // 802.1H bridge tunnel OUI.
        let h = [0xaa, 0xaa, 0x03, 0x00, 0x00, 0xf8, 0x08, 0x00];
        assert_eq!(parse(&h), Ok((Next::EtherType(0x0800), 8)));
        // RFC 2684 bridged Ethernet (no FCS) with its 2-byte pad.
        let br = [0xaa, 0xaa, 0x03, 0x00, 0x80, 0xc2, 0x00, 0x07, 0, 0];
        assert_eq!(parse(&br), Ok((Next::Ethernet, 10)));
        assert_eq!(snap(&br[3..]), Ok((Next::Ethernet, 2)));
    }

    #[test]
    fn other_llc_and_truncation() {
        // CDP: SNAP with Cisco's OUI (pcpp llc_vlan.pcap).
        let cdp = [0xaa, 0xaa, 0x03, 0x00, 0x00, 0x0c, 0x20, 0x00];
        assert_eq!(parse(&cdp), Err(Skip::NotIp));
        // STP: DSAP/SSAP 0x42.
        assert_eq!(parse(&[0x42, 0x42, 0x03, 0, 0]), Err(Skip::NotIp));
        // tcpdump llc-xid-heapoverflow (ATM RFC 1483): LLC 30 30 30 ….
        assert_eq!(parse(&[0x30; 23]), Err(Skip::NotIp));
        let v4 = [0xaa, 0xaa, 0x03, 0x00, 0x00, 0x00, 0x08, 0x00];
        for n in 0..HEADER_LEN {
            assert_eq!(parse(&v4[..n]), Err(Skip::Truncated), "len {n}");
        }
    }
}
