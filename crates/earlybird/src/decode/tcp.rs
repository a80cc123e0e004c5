//! TCP header view (RFC 9293).
//!
//! Contract: [`Tcp::parse`] takes the captured transport bytes (already bounded
//! by the IP length) and the transport length declared by the IP header, and
//! returns the ports, the flags byte and the header length (data offset).
//! Only the first 14 bytes (ports … flags) must be captured; options may be
//! cut by the snaplen. Failures:
//! * declared length < 20, data offset < 5, or a data offset beyond the
//!   declared length → [`Skip::Malformed`];
//! * fewer than 14 bytes captured → [`Skip::Truncated`].
//!
//! No allocation; pure.

use super::Skip;

/// Bytes that must be captured: ports, sequence, acknowledgement, data
/// offset and flags.
pub const MIN_CAPTURED: usize = 14;
/// Minimum header length (data offset 5).
pub const MIN_HEADER_LEN: usize = 20;

/// The fields of a TCP header the decoder uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tcp {
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Flags byte (FIN = 0x01 … CWR = 0x80).
    pub flags: u8,
    /// Header length in bytes (data offset × 4).
    pub header_len: usize,
}

impl Tcp {
    /// Parses the header at the start of `l4`; `declared` is the segment
    /// length according to the IP header.
    #[inline]
    pub fn parse(l4: &[u8], declared: usize) -> Result<Tcp, Skip> {
        if declared < MIN_HEADER_LEN {
            return Err(Skip::Malformed);
        }
        let h: &[u8; MIN_CAPTURED] = l4.first_chunk().ok_or(Skip::Truncated)?;
        let header_len = usize::from(h[12] >> 4) * 4;
        if header_len < MIN_HEADER_LEN || header_len > declared {
            return Err(Skip::Malformed);
        }
        Ok(Tcp {
            sport: u16::from_be_bytes([h[0], h[1]]),
            dport: u16::from_be_bytes([h[2], h[3]]),
            flags: h[13],
            header_len,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 49152 → 443, SYN, data offset 5.
    const SYN: [u8; 20] = [
        0xc0, 0x00, 0x01, 0xbb, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
    ];

    #[test]
    fn parses_syn() {
        let t = Tcp::parse(&SYN, 20).unwrap();
        assert_eq!(
            (t.sport, t.dport, t.flags, t.header_len),
            (49152, 443, 0x02, 20)
        );
    }

    #[test]
    fn options_may_be_cut_by_snaplen() {
        let mut b = SYN;
        b[12] = 0xa0; // data offset 10 (40 bytes)
        let t = Tcp::parse(&b[..14], 60).unwrap();
        assert_eq!(t.header_len, 40);
    }

    #[test]
    fn truncated_below_flags() {
        for n in 0..MIN_CAPTURED {
            assert_eq!(Tcp::parse(&SYN[..n], 20), Err(Skip::Truncated), "len {n}");
        }
    }

    #[test]
    fn malformed_lengths() {
        assert_eq!(Tcp::parse(&SYN, 19), Err(Skip::Malformed), "segment < 20");
        let mut b = SYN;
        b[12] = 0x40; // data offset 4
        assert_eq!(Tcp::parse(&b, 20), Err(Skip::Malformed));
        b[12] = 0x60; // 24 > segment 20
        assert_eq!(Tcp::parse(&b, 20), Err(Skip::Malformed));
        assert_eq!(Tcp::parse(&b, 24).unwrap().header_len, 24);
    }
}
