//! IPv4 header view (RFC 791).
//!
//! Contract: [`Ipv4::parse`] takes the bytes starting at an IPv4 header and
//! returns its addresses, protocol, header length (options included), total
//! length and fragment fields. Failures:
//! * no byte at all, or fewer bytes than the header length → [`Skip::Truncated`];
//! * version ≠ 4, IHL < 5, or a non-zero total length < header length
//!   → [`Skip::Malformed`].
//!
//! A total length of 0 is what a host doing TCP segmentation offload (TSO /
//! LSO) captures on its own outgoing super-segments: the captured length is
//! used instead (clamped to 65535) and `tso` is set, as Wireshark and nDPI
//! do. A total length larger than the captured bytes is normal (snaplen) and
//! is not an error; the caller bounds the transport view by
//! `min(captured, total length)` so Ethernet padding is never read as
//! payload. Fragment policy (skip non-first fragments) is the caller's. No
//! allocation; pure.

use super::Skip;

/// Minimum IPv4 header length.
pub const MIN_HEADER_LEN: usize = 20;

/// The fields of an IPv4 header the decoder uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4 {
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
    /// Protocol of the payload.
    pub proto: u8,
    /// Header length in bytes (IHL × 4, 20..=60).
    pub header_len: usize,
    /// Total length field (header + payload, as sent); for TSO captures
    /// (field 0) the captured length.
    pub total_len: u16,
    /// The total length field was 0 (segmentation offload capture).
    pub tso: bool,
    /// Fragment offset in 8-byte units.
    pub frag_offset: u16,
    /// More-fragments flag.
    pub more_fragments: bool,
    /// Identification (what fragments of one datagram share).
    pub ident: u16,
    /// Time to live.
    pub ttl: u8,
}

impl Ipv4 {
    /// Parses the header at the start of `data`.
    #[inline]
    pub fn parse(data: &[u8]) -> Result<Ipv4, Skip> {
        let first = *data.first().ok_or(Skip::Truncated)?;
        if first >> 4 != 4 {
            return Err(Skip::Malformed);
        }
        let header_len = usize::from(first & 0x0f) * 4;
        if header_len < MIN_HEADER_LEN {
            return Err(Skip::Malformed);
        }
        let h: &[u8; MIN_HEADER_LEN] = data.first_chunk().ok_or(Skip::Truncated)?;
        let mut total_len = u16::from_be_bytes([h[2], h[3]]);
        let tso = total_len == 0;
        if tso {
            total_len = u16::try_from(data.len()).unwrap_or(u16::MAX);
        }
        if data.len() < header_len {
            return Err(Skip::Truncated);
        }
        if usize::from(total_len) < header_len {
            return Err(Skip::Malformed);
        }
        let frag = u16::from_be_bytes([h[6], h[7]]);
        Ok(Ipv4 {
            src: [h[12], h[13], h[14], h[15]],
            dst: [h[16], h[17], h[18], h[19]],
            proto: h[9],
            header_len,
            total_len,
            tso,
            frag_offset: frag & 0x1fff,
            more_fragments: frag & 0x2000 != 0,
            ident: u16::from_be_bytes([h[4], h[5]]),
            ttl: h[8],
        })
    }

    /// Payload length according to the header (total length − header length).
    #[inline]
    pub fn payload_len(&self) -> usize {
        usize::from(self.total_len) - self.header_len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 192.168.1.1 → 10.0.0.2, TCP, total length 40, DF.
    const HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x28, 0x12, 0x34, 0x40, 0x00, 0x40, 0x06, 0x00, 0x00, 192, 168, 1, 1, 10,
        0, 0, 2,
    ];

    #[test]
    fn parses_plain_header() {
        let h = Ipv4::parse(&HDR).unwrap();
        assert_eq!(h.src, [192, 168, 1, 1]);
        assert_eq!(h.dst, [10, 0, 0, 2]);
        assert_eq!(h.proto, 6);
        assert_eq!(h.header_len, 20);
        assert_eq!(h.total_len, 40);
        assert_eq!(h.payload_len(), 20);
        assert_eq!(h.frag_offset, 0);
        assert!(!h.more_fragments);
        assert_eq!(h.ttl, 64);
    }

    #[test]
    fn options_extend_the_header() {
        let mut b = HDR.to_vec();
        b[0] = 0x46; // IHL 6
        b.extend_from_slice(&[0x94, 0x04, 0x00, 0x00]); // router alert
        let h = Ipv4::parse(&b).unwrap();
        assert_eq!(h.header_len, 24);
        assert_eq!(h.payload_len(), 16);
        assert_eq!(Ipv4::parse(&b[..23]), Err(Skip::Truncated));
    }

    #[test]
    fn truncated_at_every_length() {
        for n in 0..HDR.len() {
            assert_eq!(Ipv4::parse(&HDR[..n]), Err(Skip::Truncated), "len {n}");
        }
    }

    #[test]
    fn malformed_fields() {
        let mut b = HDR;
        b[0] = 0x65;
        assert_eq!(Ipv4::parse(&b), Err(Skip::Malformed), "version 6");
        b[0] = 0x44;
        assert_eq!(Ipv4::parse(&b), Err(Skip::Malformed), "IHL 4");
        b[0] = 0x45;
        b[3] = 19;
        assert_eq!(Ipv4::parse(&b), Err(Skip::Malformed), "total < header");
        b[3] = 1;
        assert_eq!(Ipv4::parse(&b), Err(Skip::Malformed), "total 1");
        b[3] = 20;
        assert_eq!(Ipv4::parse(&b).unwrap().payload_len(), 0);
    }

    #[test]
    fn fragment_fields() {
        let mut b = HDR;
        b[6] = 0x20; // MF, offset 0
        b[7] = 0x00;
        let h = Ipv4::parse(&b).unwrap();
        assert!(h.more_fragments);
        assert_eq!(h.frag_offset, 0);
        b[6] = 0x00; // last fragment, offset 185 (1480 bytes)
        b[7] = 0xb9;
        let h = Ipv4::parse(&b).unwrap();
        assert!(!h.more_fragments);
        assert_eq!(h.frag_offset, 185);
    }

    #[test]
    fn zero_total_length_is_tso() {
        let mut b = HDR.to_vec();
        b[2] = 0;
        b[3] = 0;
        b.extend_from_slice(&[0u8; 100]);
        let h = Ipv4::parse(&b).unwrap();
        assert!(h.tso);
        assert_eq!((h.total_len, h.payload_len()), (120, 100));
        assert!(!Ipv4::parse(&HDR).unwrap().tso);
    }

    #[test]
    fn total_length_beyond_capture_is_fine() {
        let mut b = HDR;
        b[2] = 0x05;
        b[3] = 0xdc; // 1500
        assert_eq!(Ipv4::parse(&b).unwrap().total_len, 1500);
    }
}
