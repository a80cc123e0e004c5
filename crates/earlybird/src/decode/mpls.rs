//! MPLS label stack view (RFC 3032), EtherTypes 0x8847 / 0x8848.
//!
//! Contract: [`LabelStack::parse`] takes the bytes after the EtherType, walks
//! the 4-byte label stack entries up to the one with the bottom-of-stack bit
//! and looks at the first nibble of the payload: 4 → IPv4, 6 → IPv6. Anything
//! else (pseudowire control word, Ethernet over MPLS, …) is
//! [`Skip::NotIp`]. A stack cut short, or no payload byte, is
//! [`Skip::Truncated`]; more than [`MAX_LABELS`] entries is
//! [`Skip::TooDeep`]. No allocation; pure.

use super::Skip;

/// Size of one label stack entry.
pub const ENTRY_LEN: usize = 4;
/// Deepest label stack followed.
pub const MAX_LABELS: usize = 8;

/// What the label stack leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelStack {
    /// Top (outermost) label.
    pub top_label: u32,
    /// Number of entries in the stack.
    pub depth: u8,
    /// Bytes taken by the stack (offset of the payload).
    pub len: usize,
    /// IP version of the payload (4 or 6).
    pub ip_version: u8,
}

impl LabelStack {
    /// Walks the label stack at the start of `data`.
    #[inline]
    pub fn parse(data: &[u8]) -> Result<LabelStack, Skip> {
        let mut off = 0usize;
        let mut top_label = 0u32;
        for i in 0..MAX_LABELS {
            let e: &[u8; ENTRY_LEN] = data
                .get(off..)
                .and_then(|d| d.first_chunk())
                .ok_or(Skip::Truncated)?;
            let entry = u32::from_be_bytes(*e);
            if i == 0 {
                top_label = entry >> 12;
            }
            off += ENTRY_LEN;
            if entry & 0x100 != 0 {
                let first = *data.get(off).ok_or(Skip::Truncated)?;
                let ip_version = match first >> 4 {
                    4 => 4,
                    6 => 6,
                    _ => return Err(Skip::NotIp),
                };
                return Ok(LabelStack {
                    top_label,
                    depth: (i + 1) as u8,
                    len: off,
                    ip_version,
                });
            }
        }
        Err(Skip::TooDeep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Label 16, TC 0, S=0, TTL 64; label 17, S=1, TTL 64; IPv4 first byte.
    const TWO: [u8; 9] = [0x00, 0x01, 0x00, 0x40, 0x00, 0x01, 0x11, 0x40, 0x45];

    #[test]
    fn two_labels_then_ipv4() {
        let s = LabelStack::parse(&TWO).unwrap();
        assert_eq!(s.top_label, 16);
        assert_eq!(s.depth, 2);
        assert_eq!(s.len, 8);
        assert_eq!(s.ip_version, 4);
    }

    #[test]
    fn ipv6_payload() {
        let s = LabelStack::parse(&[0x00, 0x00, 0x21, 0x40, 0x60, 0, 0, 0]).unwrap();
        assert_eq!((s.top_label, s.depth, s.len, s.ip_version), (2, 1, 4, 6));
    }

    #[test]
    fn truncated_at_every_length() {
        for n in 0..TWO.len() {
            assert_eq!(LabelStack::parse(&TWO[..n]), Err(Skip::Truncated), "len {n}");
        }
    }

    #[test]
    fn pseudowire_control_word_is_not_ip() {
        let b = [0x00, 0x01, 0x01, 0x40, 0x00, 0x00, 0x00, 0x00];
        assert_eq!(LabelStack::parse(&b), Err(Skip::NotIp));
    }

    #[test]
    fn endless_stack_is_too_deep() {
        let b = [0x00u8, 0x01, 0x00, 0x40].repeat(MAX_LABELS + 1);
        assert_eq!(LabelStack::parse(&b), Err(Skip::TooDeep));
    }
}
