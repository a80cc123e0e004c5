//! Geneve header view (RFC 8926), UDP destination port 6081.
//!
//! Contract: [`Geneve::parse`] takes the UDP payload and, for version 0,
//! returns the VNI, what follows ([`Next::Ethernet`] for protocol type
//! 0x6558, transparent Ethernet bridging; [`Next::EtherType`] for any other
//! protocol type, e.g. IPv4/IPv6 directly) and the header length: 8 bytes
//! plus the option length (6 bits, in 4-byte words); the options are
//! skipped, not read. A header or options cut short is
//! [`Skip::Truncated`]; another version or an OAM frame (O bit) is
//! [`Skip::NotIp`]. No allocation; pure.

use super::ethernet::ethertype;
use super::{Next, Skip};

/// IANA Geneve UDP port.
pub const PORT: u16 = 6081;
/// Fixed header length.
pub const HEADER_LEN: usize = 8;

const FLAG_OAM: u8 = 0x80;

/// A Geneve header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geneve {
    /// Virtual network identifier (24 bits).
    pub vni: u32,
    /// What the tunnel carries.
    pub next: Next,
    /// Header length including options.
    pub len: usize,
}

impl Geneve {
    /// Parses the header at the start of the UDP payload.
    #[inline]
    pub fn parse(data: &[u8]) -> Result<Geneve, Skip> {
        let h: &[u8; HEADER_LEN] = data.first_chunk().ok_or(Skip::Truncated)?;
        if h[0] >> 6 != 0 || h[1] & FLAG_OAM != 0 {
            return Err(Skip::NotIp);
        }
        let len = HEADER_LEN + 4 * usize::from(h[0] & 0x3f);
        if data.len() < len {
            return Err(Skip::Truncated);
        }
        let next = match u16::from_be_bytes([h[2], h[3]]) {
            ethertype::TEB => Next::Ethernet,
            et => Next::EtherType(et),
        };
        Ok(Geneve {
            vni: u32::from_be_bytes([0, h[4], h[5], h[6]]),
            next,
            len,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_from_real_captures() {
        // zeek geneve.pcap: 2 words of options, Ethernet, VNI 0.
        let zeek = [
            0x02, 0x00, 0x65, 0x58, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
            0x00, 0x0a, 0x76, 0xb5,
        ];
        assert_eq!(
            Geneve::parse(&zeek),
            Ok(Geneve {
                vni: 0,
                next: Next::Ethernet,
                len: 16
            })
        );
        // tcpdump geneve-gcp.pcap: 10 words of options, IPv4 directly.
        let mut gcp = vec![0x0a, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00];
        gcp.extend_from_slice(&[0x01, 0x32, 0x01, 0x01, 0x80, 0x00, 0x00, 0xd1]);
        gcp.resize(48, 0);
        let g = Geneve::parse(&gcp).unwrap();
        assert_eq!((g.next, g.len), (Next::EtherType(0x0800), 48));
        assert_eq!(Geneve::parse(&gcp[..47]), Err(Skip::Truncated));
    }

    #[test]
    fn vni_version_oam_truncation() {
        let h = [0x00, 0x00, 0x65, 0x58, 0xab, 0xcd, 0xef, 0x00];
        assert_eq!(Geneve::parse(&h).unwrap().vni, 0xabcdef);
        let mut v1 = h;
        v1[0] = 0x40;
        assert_eq!(Geneve::parse(&v1), Err(Skip::NotIp));
        let mut oam = h;
        oam[1] = 0x80;
        assert_eq!(Geneve::parse(&oam), Err(Skip::NotIp));
        for n in 0..HEADER_LEN {
            assert_eq!(Geneve::parse(&h[..n]), Err(Skip::Truncated));
        }
    }
}
