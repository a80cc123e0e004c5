//! CAPWAP data channel header (RFC 5415 §4.3), UDP port 5247, and its
//! IEEE 802.11 binding (RFC 5416).
//!
//! Contract: [`Capwap::parse`] takes the UDP payload: the preamble (version
//! 0, type 0 = clear header; type 1 is a DTLS record, [`Skip::Encrypted`]),
//! then HLEN (header length in 4-byte words, Radio MAC and wireless
//! information included), RID, WBID and the T, F, K flags. It returns the
//! header length, the radio id and what follows: with T clear an IEEE
//! 802.3 frame ([`Next::Ethernet`]), with T set a native frame of the
//! binding, of which IEEE 802.11 (WBID 1) is followed ([`Next::Ieee80211`]).
//! A keep-alive (K), a non-first fragment (F with a non-zero offset), a
//! native frame of another binding and another version are
//! [`Skip::NotIp`]; a header cut short, or one whose HLEN is below 8 bytes,
//! is [`Skip::Truncated`] / [`Skip::Malformed`]. No allocation; pure.

use super::{Next, Skip};

/// IANA CAPWAP data channel port.
pub const PORT: u16 = 5247;
/// Fixed header length.
pub const HEADER_LEN: usize = 8;

const WBID_IEEE80211: u8 = 1;
const FLAG_F: u8 = 0x80;
const FLAG_K: u8 = 0x08;

/// A CAPWAP data header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capwap {
    /// Radio id.
    pub rid: u8,
    /// What follows the header.
    pub next: Next,
    /// Header length (HLEN × 4).
    pub len: usize,
}

impl Capwap {
    /// Parses the header at the start of the UDP payload.
    #[inline]
    pub fn parse(data: &[u8]) -> Result<Capwap, Skip> {
        let h: &[u8; HEADER_LEN] = data.first_chunk().ok_or(Skip::Truncated)?;
        match h[0] {
            0x00 => {}
            0x01 => return Err(Skip::Encrypted),
            _ => return Err(Skip::NotIp),
        }
        let len = 4 * usize::from(h[1] >> 3);
        if len < HEADER_LEN {
            return Err(Skip::Malformed);
        }
        let rid = ((h[1] & 0x07) << 2) | (h[2] >> 6);
        let wbid = (h[2] >> 1) & 0x1f;
        let native = h[2] & 0x01 != 0;
        let frag_offset = u16::from_be_bytes([h[6], h[7]]) >> 3;
        if h[3] & FLAG_K != 0 || (h[3] & FLAG_F != 0 && frag_offset != 0) {
            return Err(Skip::NotIp);
        }
        let next = match (native, wbid) {
            (false, _) => Next::Ethernet,
            (true, WBID_IEEE80211) => Next::Ieee80211,
            _ => return Err(Skip::NotIp),
        };
        if data.len() < len {
            return Err(Skip::Truncated);
        }
        Ok(Capwap { rid, next, len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// nDPI capwap.pcap: preamble 00, HLEN 4 (16 bytes), RID 0, WBID 1,
    /// T set, W set; fragment id/offset 0; wireless information 01 04 ….
    const NDPI: [u8; 16] = [
        0x00, 0x20, 0x03, 0x20, 0x00, 0x00, 0x00, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00,
    ];

    #[test]
    fn header_from_a_real_capture() {
        assert_eq!(
            Capwap::parse(&NDPI),
            Ok(Capwap {
                rid: 0,
                next: Next::Ieee80211,
                len: 16
            })
        );
        assert_eq!(Capwap::parse(&NDPI[..15]), Err(Skip::Truncated));
    }

    #[test]
    fn ethernet_rid_and_skips() {
        // HLEN 2, RID 3, WBID 1, T clear: an 802.3 frame follows.
        let h = [0x00, 0x10, 0xc2, 0x00, 0, 0, 0, 0];
        assert_eq!(
            Capwap::parse(&h),
            Ok(Capwap {
                rid: 3,
                next: Next::Ethernet,
                len: 8
            })
        );
        let mut dtls = h;
        dtls[0] = 0x01;
        assert_eq!(Capwap::parse(&dtls), Err(Skip::Encrypted));
        let mut ka = h;
        ka[3] = FLAG_K;
        assert_eq!(Capwap::parse(&ka), Err(Skip::NotIp));
        let mut frag = h;
        frag[3] = FLAG_F;
        frag[7] = 0x08; // offset 1
        assert_eq!(Capwap::parse(&frag), Err(Skip::NotIp));
        let mut other = h;
        other[2] = 0x05; // WBID 2, native
        assert_eq!(Capwap::parse(&other), Err(Skip::NotIp));
        let mut short = h;
        short[1] = 0x08; // HLEN 1
        assert_eq!(Capwap::parse(&short), Err(Skip::Malformed));
        for n in 0..HEADER_LEN {
            assert_eq!(Capwap::parse(&h[..n]), Err(Skip::Truncated));
        }
    }
}
