//! Per-Packet Information header (LINKTYPE_PPI 192): a capture header
//! naming the link type of the frame after it (usually 802.11).
//!
//! Contract: [`Ppi::parse`] reads version 0, flags, the header length and
//! the inner link type (both little-endian) and returns them; the frame of
//! that link type starts at the header length. The field TLVs inside are
//! not read (an 802.11-Common FCS flag is not honoured: the IP length
//! bounds what the walk reads). A header cut short is [`Skip::Truncated`];
//! a version other than 0 or a length below 8 is [`Skip::Malformed`]. No
//! allocation; pure.

use super::Skip;

/// Fixed PPI header length.
pub const HEADER_LEN: usize = 8;

/// A PPI header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ppi {
    /// Header length: the inner frame starts here.
    pub len: usize,
    /// LINKTYPE_* number of the inner frame.
    pub dlt: u32,
}

impl Ppi {
    /// Parses the PPI header at the start of `data`.
    #[inline]
    pub fn parse(data: &[u8]) -> Result<Ppi, Skip> {
        let h: &[u8; HEADER_LEN] = data.first_chunk().ok_or(Skip::Truncated)?;
        let len = usize::from(u16::from_le_bytes([h[2], h[3]]));
        if h[0] != 0 || len < HEADER_LEN {
            return Err(Skip::Malformed);
        }
        if data.len() < len {
            return Err(Skip::Truncated);
        }
        Ok(Ppi {
            len,
            dlt: u32::from_le_bytes([h[4], h[5], h[6], h[7]]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header() {
        // Version 0, flags 0, length 32 (8 + one 24-byte 802.11-Common
        // field: type 2, length 20), DLT 105.
        let mut h = vec![0, 0, 32, 0, 105, 0, 0, 0, 2, 0, 20, 0];
        h.resize(32, 0);
        assert_eq!(Ppi::parse(&h), Ok(Ppi { len: 32, dlt: 105 }));
        assert_eq!(Ppi::parse(&h[..31]), Err(Skip::Truncated));
        for n in 0..HEADER_LEN {
            assert_eq!(Ppi::parse(&h[..n]), Err(Skip::Truncated));
        }
        h[0] = 1;
        assert_eq!(Ppi::parse(&h), Err(Skip::Malformed));
        assert_eq!(Ppi::parse(&[0, 0, 7, 0, 1, 0, 0, 0]), Err(Skip::Malformed));
    }
}
