//! IPv6 header and extension-header chain view (RFC 8200, RFC 4302).
//!
//! Contract: [`Ipv6::parse`] takes the bytes starting at an IPv6 header,
//! reads the fixed 40-byte header and follows the extension headers
//! hop-by-hop (0), routing (43), fragment (44), destination options (60) and
//! authentication header (51) to the upper-layer protocol. It stops at ESP
//! (50) and no-next-header (59), which become the protocol, and right after a
//! fragment header whose offset is not zero (what follows is not a header).
//! Failures:
//! * no byte, fewer than 40 bytes, or an extension header cut by the capture
//!   → [`Skip::Truncated`];
//! * version ≠ 6, or extension headers longer than the payload length
//!   → [`Skip::Malformed`];
//! * more than [`MAX_EXT_HEADERS`] extension headers → [`Skip::TooDeep`].
//!
//! A payload length of 0 with a hop-by-hop header (jumbogram, BIG TCP)
//! means "the rest of the capture"; a payload length beyond the captured
//! bytes is normal (snaplen). No allocation; pure.

use super::Skip;

/// Fixed IPv6 header length.
pub const HEADER_LEN: usize = 40;
/// Longest extension-header chain followed.
pub const MAX_EXT_HEADERS: usize = 8;

/// Extension header numbers.
pub mod ext {
    /// Hop-by-hop options.
    pub const HOP_BY_HOP: u8 = 0;
    /// Routing header.
    pub const ROUTING: u8 = 43;
    /// Fragment header.
    pub const FRAGMENT: u8 = 44;
    /// Authentication header.
    pub const AH: u8 = 51;
    /// Destination options.
    pub const DEST_OPTS: u8 = 60;
}

/// An IPv6 header with its extension headers walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6 {
    /// Source address.
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
    /// Payload length field (0 for jumbograms).
    pub payload_len: u16,
    /// Payload length 0 with a hop-by-hop header: the length is in a jumbo
    /// option (or, for BIG TCP captures, only in the capture).
    pub jumbo: bool,
    /// Upper-layer protocol after the extension headers.
    pub proto: u8,
    /// Offset of the upper-layer header from the start of the IPv6 header.
    pub header_len: usize,
    /// Fragment offset (8-byte units) from a fragment header, 0 when none.
    pub frag_offset: u16,
    /// More-fragments flag from a fragment header.
    pub more_fragments: bool,
    /// Identification of the Fragment header (0 without one).
    pub ident: u32,
    /// Hop limit.
    pub hop_limit: u8,
}

impl Ipv6 {
    /// Parses the header and its extension-header chain.
    pub fn parse(data: &[u8]) -> Result<Ipv6, Skip> {
        let first = *data.first().ok_or(Skip::Truncated)?;
        if first >> 4 != 6 {
            return Err(Skip::Malformed);
        }
        let h: &[u8; HEADER_LEN] = data.first_chunk().ok_or(Skip::Truncated)?;
        let mut src = [0u8; 16];
        src.copy_from_slice(&h[8..24]);
        let mut dst = [0u8; 16];
        dst.copy_from_slice(&h[24..40]);
        let payload_len = u16::from_be_bytes([h[4], h[5]]);
        let jumbo = payload_len == 0 && h[6] == ext::HOP_BY_HOP;
        let mut v = Ipv6 {
            src,
            dst,
            payload_len,
            jumbo,
            proto: h[6],
            header_len: HEADER_LEN,
            frag_offset: 0,
            more_fragments: false,
            ident: 0,
            hop_limit: h[7],
        };
        // Where the payload ends according to the header (jumbo: capture end).
        let end = if jumbo {
            data.len()
        } else {
            HEADER_LEN + usize::from(payload_len)
        };
        for _ in 0..MAX_EXT_HEADERS {
            let (next, len) = match v.proto {
                ext::HOP_BY_HOP | ext::ROUTING | ext::DEST_OPTS => {
                    let e = ext_head(data, v.header_len)?;
                    (e[0], (usize::from(e[1]) + 1) * 8)
                }
                ext::AH => {
                    let e = ext_head(data, v.header_len)?;
                    (e[0], (usize::from(e[1]) + 2) * 4)
                }
                ext::FRAGMENT => {
                    let f: &[u8; 8] = data
                        .get(v.header_len..)
                        .and_then(|d| d.first_chunk())
                        .ok_or(Skip::Truncated)?;
                    let fo = u16::from_be_bytes([f[2], f[3]]);
                    v.frag_offset = fo >> 3;
                    v.more_fragments = fo & 1 != 0;
                    v.ident = u32::from_be_bytes([f[4], f[5], f[6], f[7]]);
                    (f[0], 8)
                }
                _ => return Ok(v),
            };
            let new_len = v.header_len + len;
            if new_len > end {
                return Err(Skip::Malformed);
            }
            if new_len > data.len() {
                return Err(Skip::Truncated);
            }
            v.header_len = new_len;
            v.proto = next;
            if v.frag_offset != 0 {
                return Ok(v);
            }
        }
        match v.proto {
            ext::HOP_BY_HOP | ext::ROUTING | ext::DEST_OPTS | ext::AH | ext::FRAGMENT => {
                Err(Skip::TooDeep)
            }
            _ => Ok(v),
        }
    }

    /// Upper-layer length according to the header: payload length minus the
    /// extension headers (jumbogram: `captured` − header length).
    #[inline]
    pub fn upper_len(&self, captured: usize) -> usize {
        if self.jumbo {
            captured.saturating_sub(self.header_len)
        } else {
            (HEADER_LEN + usize::from(self.payload_len)).saturating_sub(self.header_len)
        }
    }
}

/// First two bytes (next header, length) of the extension header at `off`.
#[inline]
fn ext_head(data: &[u8], off: usize) -> Result<&[u8; 2], Skip> {
    data.get(off..)
        .and_then(|d| d.first_chunk())
        .ok_or(Skip::Truncated)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fe80::1 → ff02::1, given next header and payload length.
    fn header(next: u8, payload_len: u16) -> Vec<u8> {
        let mut b = vec![0x60, 0x00, 0x00, 0x00];
        b.extend_from_slice(&payload_len.to_be_bytes());
        b.push(next);
        b.push(64);
        b.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        b.extend_from_slice(&[0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        b
    }

    #[test]
    fn plain_udp() {
        let mut b = header(17, 8);
        b.extend_from_slice(&[0, 53, 0, 53, 0, 8, 0, 0]);
        let v = Ipv6::parse(&b).unwrap();
        assert_eq!(v.proto, 17);
        assert_eq!(v.header_len, 40);
        assert_eq!(v.payload_len, 8);
        assert_eq!(v.upper_len(b.len()), 8);
        assert_eq!(v.src[0..2], [0xfe, 0x80]);
        assert_eq!(v.dst[15], 1);
        assert_eq!(v.hop_limit, 64);
    }

    #[test]
    fn truncated_fixed_header() {
        let b = header(17, 0);
        for n in 0..HEADER_LEN {
            assert_eq!(Ipv6::parse(&b[..n]), Err(Skip::Truncated), "len {n}");
        }
        let mut v4 = b.clone();
        v4[0] = 0x45;
        assert_eq!(Ipv6::parse(&v4), Err(Skip::Malformed));
    }

    /// Hop-by-hop (8) → routing (24) → destination options (8) → AH (16) → TCP.
    fn chain() -> Vec<u8> {
        let mut b = header(0, 8 + 24 + 8 + 16 + 20);
        b.extend_from_slice(&[43, 0, 1, 4, 0, 0, 0, 0]);
        b.extend_from_slice(&[60, 2, 0, 0, 0, 0, 0, 0]);
        b.extend_from_slice(&[0u8; 16]);
        b.extend_from_slice(&[51, 0, 1, 4, 0, 0, 0, 0]);
        b.extend_from_slice(&[6, 2, 0, 0, 0, 0, 0, 1]);
        b.extend_from_slice(&[0u8; 8]);
        b.extend_from_slice(&[0u8; 20]);
        b
    }

    #[test]
    fn extension_chain_to_tcp() {
        let b = chain();
        let v = Ipv6::parse(&b).unwrap();
        assert_eq!(v.proto, 6);
        assert_eq!(v.header_len, 40 + 8 + 24 + 8 + 16);
        assert_eq!(v.upper_len(b.len()), 20);
        // Cut anywhere inside the extension headers.
        for n in 40..v.header_len {
            assert_eq!(Ipv6::parse(&b[..n]), Err(Skip::Truncated), "len {n}");
        }
    }

    #[test]
    fn extension_longer_than_payload_is_malformed() {
        let mut b = chain();
        b[4] = 0;
        b[5] = 20; // payload length 20 < extension headers
        assert_eq!(Ipv6::parse(&b), Err(Skip::Malformed));
    }

    #[test]
    fn fragment_header() {
        let mut b = header(44, 16);
        b.extend_from_slice(&[17, 0, 0x00, 0x01, 0, 0, 0, 7]); // offset 0, M
        b.extend_from_slice(&[0, 53, 0, 53, 0, 8, 0, 0]);
        let v = Ipv6::parse(&b).unwrap();
        assert_eq!(
            (v.proto, v.header_len, v.frag_offset, v.more_fragments),
            (17, 48, 0, true)
        );
        b[42] = 0x05;
        b[43] = 0xa8; // offset 181 (1448 bytes), last
        let v = Ipv6::parse(&b).unwrap();
        assert_eq!((v.frag_offset, v.more_fragments), (181, false));
    }

    #[test]
    fn stops_at_esp_and_no_next() {
        let mut b = header(50, 16);
        b.extend_from_slice(&[0u8; 16]);
        assert_eq!(Ipv6::parse(&b).unwrap().proto, 50);
        let mut b = header(60, 8);
        b.extend_from_slice(&[59, 0, 1, 4, 0, 0, 0, 0]);
        let v = Ipv6::parse(&b).unwrap();
        assert_eq!((v.proto, v.header_len), (59, 48));
    }

    #[test]
    fn endless_chain_is_too_deep() {
        let n = MAX_EXT_HEADERS + 1;
        let mut b = header(60, (8 * n) as u16);
        for _ in 0..n {
            b.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]);
        }
        assert_eq!(Ipv6::parse(&b), Err(Skip::TooDeep));
    }

    #[test]
    fn zero_payload_without_hop_by_hop_is_empty() {
        let mut b = header(59, 0);
        b.extend_from_slice(&[0u8; 6]); // Ethernet padding
        let v = Ipv6::parse(&b).unwrap();
        assert!(!v.jumbo);
        assert_eq!(v.upper_len(b.len()), 0);
        let mut b = header(60, 0);
        b.extend_from_slice(&[59, 0, 1, 4, 0, 0, 0, 0]);
        assert_eq!(Ipv6::parse(&b), Err(Skip::Malformed));
    }

    #[test]
    fn jumbo_payload_uses_capture() {
        let mut b = header(0, 0);
        b.extend_from_slice(&[6, 0, 0xc2, 4, 0, 1, 0, 0]); // jumbo option
        b.extend_from_slice(&[0u8; 20]);
        let v = Ipv6::parse(&b).unwrap();
        assert_eq!(v.proto, 6);
        assert_eq!(v.upper_len(b.len()), 20);
    }
}
