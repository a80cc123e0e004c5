//! Cisco HDLC framing (LINKTYPE_C_HDLC 104, and the Cisco form of
//! LINKTYPE_PPP_HDLC 50): address (0x0F unicast, 0x8F broadcast), control
//! (0x00), then a 2-byte EtherType.
//!
//! Contract: [`parse`] reads the 4-byte header and returns the EtherType
//! as [`Next::EtherType`] with the header length; the walk follows it like
//! an Ethernet payload (SLARP 0x8035, CDP and other non-IP types end as
//! [`Skip::NotIp`] there). The address byte is not checked (captures use
//! both values and tcpdump accepts any). Fewer than 4 bytes is
//! [`Skip::Truncated`]. [`is_cisco_address`] tells a Cisco HDLC frame from
//! a PPP one in LINKTYPE_PPP_HDLC. No allocation; pure.

use super::{Next, Skip};

/// Cisco HDLC header length.
pub const HEADER_LEN: usize = 4;

/// True for the address bytes of Cisco HDLC (unicast 0x0F, broadcast 0x8F).
#[inline]
pub fn is_cisco_address(b: u8) -> bool {
    b == 0x0f || b == 0x8f
}

/// Returns what follows the header and the header length.
#[inline]
pub fn parse(data: &[u8]) -> Result<(Next, usize), Skip> {
    let h: &[u8; HEADER_LEN] = data.first_chunk().ok_or(Skip::Truncated)?;
    Ok((
        Next::EtherType(u16::from_be_bytes([h[2], h[3]])),
        HEADER_LEN,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header() {
        // nDPI BGP_redist.pcap (LINKTYPE_C_HDLC): 0f 00 08 00, then 45 c0.
        let f = [0x0f, 0x00, 0x08, 0x00, 0x45, 0xc0];
        assert_eq!(parse(&f), Ok((Next::EtherType(0x0800), 4)));
        // Broadcast SLARP keepalive: 8f 00 80 35.
        assert_eq!(
            parse(&[0x8f, 0x00, 0x80, 0x35]),
            Ok((Next::EtherType(0x8035), 4))
        );
        for n in 0..HEADER_LEN {
            assert_eq!(parse(&f[..n]), Err(Skip::Truncated));
        }
        assert!(is_cisco_address(0x0f) && is_cisco_address(0x8f));
        assert!(!is_cisco_address(0xff));
    }
}
