//! GRE header view (RFC 2784 with RFC 2890 key/sequence, and version 1
//! "enhanced GRE" of PPTP, RFC 2637), plus the ERSPAN headers carried in it.
//!
//! Contract: [`Gre::parse`] takes the bytes after the outer IP header and
//! returns the payload protocol (an EtherType), the key (version 0) or call
//! id (version 1), the sequence flag and the header length.
//! * Version 0: C adds 4 bytes (checksum + reserved), K 4 (key), S 4
//!   (sequence). The routing bit R (RFC 1701 source routes) is
//!   [`Skip::Malformed`], as RFC 2784 requires.
//! * Version 1: K must be set (payload length + call id), C and R must be
//!   clear, S and A (acknowledgement) add 4 bytes each; protocol must be PPP
//!   (0x880B). A frame with no payload (acknowledgement only) is
//!   [`Skip::NotIp`].
//! * Other versions are [`Skip::Malformed`]; a header cut short is
//!   [`Skip::Truncated`].
//!
//! [`erspan_len`] gives the length of the ERSPAN header before the mirrored
//! Ethernet frame: type I (0x88BE without sequence) 0, type II (0x88BE with
//! sequence) 8, type III (0x22EB) 12, +8 with the platform sub-header; a
//! type III frame type other than Ethernet is [`Skip::NotIp`]. No allocation;
//! pure.

use super::ethernet::ethertype;
use super::Skip;

/// Fixed part of a GRE header (flags/version + protocol).
pub const BASE_LEN: usize = 4;

const FLAG_C: u8 = 0x80;
const FLAG_R: u8 = 0x40;
const FLAG_K: u8 = 0x20;
const FLAG_S: u8 = 0x10;
const FLAG_A: u8 = 0x80; // second byte, version 1

/// A parsed GRE header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gre {
    /// GRE version (0 or 1).
    pub version: u8,
    /// Payload protocol (EtherType).
    pub protocol: u16,
    /// Key (version 0) or call id (version 1), 0 when absent.
    pub key: u32,
    /// Whether the sequence number field is present.
    pub has_seq: bool,
    /// Header length (offset of the payload).
    pub len: usize,
}

impl Gre {
    /// Parses the GRE header at the start of `data`.
    #[inline]
    pub fn parse(data: &[u8]) -> Result<Gre, Skip> {
        let h: &[u8; BASE_LEN] = data.first_chunk().ok_or(Skip::Truncated)?;
        let (f, version) = (h[0], h[1] & 0x07);
        let protocol = u16::from_be_bytes([h[2], h[3]]);
        let word = |off: usize| -> Result<u32, Skip> {
            data.get(off..)
                .and_then(|d| d.first_chunk::<4>())
                .map(|w| u32::from_be_bytes(*w))
                .ok_or(Skip::Truncated)
        };
        let has_seq = f & FLAG_S != 0;
        match version {
            0 => {
                if f & FLAG_R != 0 {
                    return Err(Skip::Malformed);
                }
                let mut len = BASE_LEN;
                if f & FLAG_C != 0 {
                    word(len)?;
                    len += 4;
                }
                let mut key = 0;
                if f & FLAG_K != 0 {
                    key = word(len)?;
                    len += 4;
                }
                if has_seq {
                    word(len)?;
                    len += 4;
                }
                Ok(Gre {
                    version,
                    protocol,
                    key,
                    has_seq,
                    len,
                })
            }
            1 => {
                if f & (FLAG_C | FLAG_R) != 0 || f & FLAG_K == 0 || protocol != ethertype::PPP {
                    return Err(Skip::Malformed);
                }
                let k = word(BASE_LEN)?;
                let payload_len = k >> 16;
                let mut len = BASE_LEN + 4;
                if has_seq {
                    word(len)?;
                    len += 4;
                }
                if h[1] & FLAG_A != 0 {
                    word(len)?;
                    len += 4;
                }
                if payload_len == 0 || !has_seq {
                    // Acknowledgement-only frame: nothing to decode.
                    return Err(Skip::NotIp);
                }
                Ok(Gre {
                    version,
                    protocol,
                    key: k & 0xffff,
                    has_seq,
                    len,
                })
            }
            _ => Err(Skip::Malformed),
        }
    }
}

/// Length of the ERSPAN header that precedes the mirrored Ethernet frame.
#[inline]
pub fn erspan_len(gre: &Gre, payload: &[u8]) -> Result<usize, Skip> {
    match gre.protocol {
        ethertype::ERSPAN_II if !gre.has_seq => Ok(0),
        ethertype::ERSPAN_II => {
            let h: &[u8; 8] = payload.first_chunk().ok_or(Skip::Truncated)?;
            if h[0] >> 4 != 1 {
                return Err(Skip::Malformed);
            }
            Ok(8)
        }
        ethertype::ERSPAN_III => {
            let h: &[u8; 12] = payload.first_chunk().ok_or(Skip::Truncated)?;
            if h[0] >> 4 != 2 {
                return Err(Skip::Malformed);
            }
            if (h[10] >> 2) & 0x1f != 0 {
                return Err(Skip::NotIp);
            }
            Ok(if h[11] & 1 != 0 { 20 } else { 12 })
        }
        _ => Err(Skip::NotIp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_ipv4() {
        let g = Gre::parse(&[0x00, 0x00, 0x08, 0x00, 0x45]).unwrap();
        assert_eq!((g.version, g.protocol, g.key, g.has_seq, g.len), (0, 0x0800, 0, false, 4));
    }

    #[test]
    fn checksum_key_sequence() {
        let b = [
            0xb0, 0x00, 0x86, 0xdd, // C K S, IPv6
            0x12, 0x34, 0x00, 0x00, // checksum, reserved
            0x00, 0x00, 0x04, 0xd2, // key 1234
            0x00, 0x00, 0x00, 0x07, // sequence
        ];
        let g = Gre::parse(&b).unwrap();
        assert_eq!((g.protocol, g.key, g.has_seq, g.len), (0x86dd, 1234, true, 16));
        for n in 0..b.len() {
            assert_eq!(Gre::parse(&b[..n]), Err(Skip::Truncated), "len {n}");
        }
    }

    #[test]
    fn routing_and_unknown_version_are_malformed() {
        assert_eq!(Gre::parse(&[0x40, 0x00, 0x08, 0x00]), Err(Skip::Malformed));
        assert_eq!(Gre::parse(&[0x00, 0x02, 0x08, 0x00]), Err(Skip::Malformed));
    }

    /// PPTP data: K S A, version 1, PPP, payload length 0x28, call id 0x4000.
    const PPTP: [u8; 16] = [
        0x30, 0x81, 0x88, 0x0b, 0x00, 0x28, 0x40, 0x00, 0, 0, 0, 5, 0, 0, 0, 4,
    ];

    #[test]
    fn enhanced_gre() {
        let g = Gre::parse(&PPTP).unwrap();
        assert_eq!((g.version, g.key, g.len), (1, 0x4000, 16));
        for n in 0..PPTP.len() {
            assert_eq!(Gre::parse(&PPTP[..n]), Err(Skip::Truncated), "len {n}");
        }
        // Acknowledgement only: K A, no sequence, payload length 0.
        let ack = [0x20, 0x81, 0x88, 0x0b, 0, 0, 0x40, 0, 0, 0, 0, 4];
        assert_eq!(Gre::parse(&ack), Err(Skip::NotIp));
        let mut no_key = PPTP;
        no_key[0] = 0x10;
        assert_eq!(Gre::parse(&no_key), Err(Skip::Malformed));
        let mut not_ppp = PPTP;
        not_ppp[3] = 0x00;
        assert_eq!(Gre::parse(&not_ppp), Err(Skip::Malformed));
    }

    #[test]
    fn erspan_headers() {
        let t1 = Gre::parse(&[0x00, 0x00, 0x88, 0xbe]).unwrap();
        assert_eq!(erspan_len(&t1, &[]), Ok(0));
        let t2 = Gre::parse(&[0x10, 0x00, 0x88, 0xbe, 0, 0, 0, 1]).unwrap();
        let h2 = [0x10, 0x64, 0x00, 0x01, 0, 0, 0, 0];
        assert_eq!(erspan_len(&t2, &h2), Ok(8));
        assert_eq!(erspan_len(&t2, &h2[..7]), Err(Skip::Truncated));
        assert_eq!(erspan_len(&t2, &[0x20, 0, 0, 0, 0, 0, 0, 0]), Err(Skip::Malformed));
        let t3 = Gre::parse(&[0x10, 0x00, 0x22, 0xeb, 0, 0, 0, 1]).unwrap();
        let mut h3 = [0x20, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(erspan_len(&t3, &h3), Ok(12));
        h3[11] = 1; // platform sub-header follows
        assert_eq!(erspan_len(&t3, &h3), Ok(20));
        h3[10] = 2 << 2; // frame type 2: not Ethernet
        assert_eq!(erspan_len(&t3, &h3), Err(Skip::NotIp));
        assert_eq!(erspan_len(&t3, &h3[..11]), Err(Skip::Truncated));
    }
}
