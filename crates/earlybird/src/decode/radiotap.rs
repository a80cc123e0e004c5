//! Radiotap capture header (LINKTYPE_IEEE802_11_RADIOTAP 127), ahead of an
//! 802.11 frame.
//!
//! Contract: [`Radiotap::parse`] reads version 0, the header length
//! (little-endian) and the chain of present-field words (bit 31 extends
//! it), then, when the first word announces it, the Flags field: TSFT
//! (bit 0, 8 bytes aligned to 8 from the header start) comes first, Flags
//! (bit 1) next. It returns the header length (the 802.11 frame follows,
//! [`super::Next::Ieee80211`]) and two flags: the frame ends with a 4-byte FCS
//! (0x10), and the 802.11 header is padded to 4 bytes (0x20). Other fields
//! are not read. A header cut short is [`Skip::Truncated`]; a version other
//! than 0, a length below 8 or present words running past the length are
//! [`Skip::Malformed`]. No allocation; pure.

use super::Skip;

/// Fixed part: version, pad, length, first present word.
pub const MIN_LEN: usize = 8;

const PRESENT_TSFT: u32 = 1 << 0;
const PRESENT_FLAGS: u32 = 1 << 1;
const PRESENT_EXT: u32 = 1 << 31;
const FLAG_FCS: u8 = 0x10;
const FLAG_DATA_PAD: u8 = 0x20;

/// A radiotap header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Radiotap {
    /// Header length: the 802.11 frame starts here.
    pub len: usize,
    /// The frame ends with a 4-byte FCS.
    pub fcs: bool,
    /// The 802.11 header is padded to a multiple of 4 bytes.
    pub pad: bool,
}

#[inline]
fn u32_le(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(*d.get(at..)?.first_chunk()?))
}

impl Radiotap {
    /// Parses the radiotap header at the start of `data`.
    #[inline]
    pub fn parse(data: &[u8]) -> Result<Radiotap, Skip> {
        let h: &[u8; MIN_LEN] = data.first_chunk().ok_or(Skip::Truncated)?;
        if h[0] != 0 {
            return Err(Skip::Malformed);
        }
        let len = usize::from(u16::from_le_bytes([h[2], h[3]]));
        if len < MIN_LEN {
            return Err(Skip::Malformed);
        }
        let hdr = data.get(..len).ok_or(Skip::Truncated)?;
        let first = u32_le(hdr, 4).ok_or(Skip::Malformed)?;
        let mut end = 8;
        let mut word = first;
        while word & PRESENT_EXT != 0 {
            word = u32_le(hdr, end).ok_or(Skip::Malformed)?;
            end += 4;
        }
        let mut flags = 0;
        if first & PRESENT_FLAGS != 0 {
            let mut at = end;
            if first & PRESENT_TSFT != 0 {
                at = ((at + 7) & !7) + 8;
            }
            flags = *hdr.get(at).ok_or(Skip::Malformed)?;
        }
        Ok(Radiotap {
            len,
            fcs: flags & FLAG_FCS != 0,
            pad: flags & FLAG_DATA_PAD != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_from_a_real_capture() {
        // zeek radiotap.pcap, frame 1: length 0x30, present 0x001c086b
        // (TSFT, Flags, …), TSFT e1 61 56 56 00 00 00 00, Flags 0x10 (FCS).
        let f1 = [
            0x00, 0x00, 0x30, 0x00, 0x6b, 0x08, 0x1c, 0x00, 0xe1, 0x61, 0x56, 0x56, 0x00, 0x00,
            0x00, 0x00, 0x10, 0x00, 0xa4, 0x15, 0x40, 0x01, 0xb6, 0xa3, 0x01, 0x4e, 0x34, 0x97,
            0x40, 0x01, 0x01, 0x00, 0xa4, 0x15, 0x6c, 0x22, 0x1f, 0x01, 0x07, 0x00, 0x01, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x88, 0x01,
        ];
        let r = Radiotap::parse(&f1).unwrap();
        assert_eq!(
            r,
            Radiotap {
                len: 48,
                fcs: true,
                pad: false
            }
        );
        // Frame 3: length 0x19, present 0x0000086f, Flags 0x12 (FCS).
        let f3 = [
            0x00, 0x00, 0x19, 0x00, 0x6f, 0x08, 0x00, 0x00, 0x88, 0x67, 0xce, 0x5f, 0x00, 0x00,
            0x00, 0x00, 0x12, 0x0c, 0xa4, 0x15, 0x40, 0x01, 0xc6, 0xa3, 0x01, 0x08, 0x02,
        ];
        assert_eq!(Radiotap::parse(&f3).unwrap().len, 25);
        assert!(Radiotap::parse(&f3).unwrap().fcs);
    }

    #[test]
    fn extended_bitmaps_flags_without_tsft_and_errors() {
        // Two present words (bit 31), Flags only: flags right after them.
        let mut h = vec![0, 0, 13, 0, 0x02, 0, 0, 0x80, 0, 0, 0, 0, 0x20];
        assert_eq!(
            Radiotap::parse(&h),
            Ok(Radiotap {
                len: 13,
                fcs: false,
                pad: true
            })
        );
        // Extension bit on the last word that fits: words run past the length.
        h[11] = 0x80;
        assert_eq!(Radiotap::parse(&h), Err(Skip::Malformed));
        assert_eq!(
            Radiotap::parse(&[1, 0, 8, 0, 0, 0, 0, 0]),
            Err(Skip::Malformed)
        );
        assert_eq!(
            Radiotap::parse(&[0, 0, 4, 0, 0, 0, 0, 0]),
            Err(Skip::Malformed)
        );
        // Flags announced but the header ends first.
        assert_eq!(
            Radiotap::parse(&[0, 0, 8, 0, 2, 0, 0, 0]),
            Err(Skip::Malformed)
        );
        for n in 0..8 {
            assert_eq!(
                Radiotap::parse(&[0, 0, 8, 0, 0, 0, 0, 0][..n]),
                Err(Skip::Truncated)
            );
        }
        assert_eq!(
            Radiotap::parse(&[0, 0, 9, 0, 0, 0, 0, 0]),
            Err(Skip::Truncated)
        );
    }
}
