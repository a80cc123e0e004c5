//! BSD loopback / null link header (LINKTYPE_NULL 0, LINKTYPE_LOOP 108).
//!
//! Contract: [`parse`] reads the 4-byte address family that precedes the IP
//! packet. The family is written in the capturing host's byte order
//! (LINKTYPE_LOOP: network order), so both byte orders are accepted.
//! AF_INET is 2 everywhere; AF_INET6 is 10 (Linux), 24 (NetBSD/OpenBSD),
//! 28 (FreeBSD) or 30 (macOS). Returns the IP version and the header length
//! (4). Fewer than 4 bytes is [`Skip::Truncated`]; any other family is
//! [`Skip::NotIp`]. No allocation; pure.

use super::Skip;

/// Length of the null/loopback header.
pub const HEADER_LEN: usize = 4;

#[inline]
fn version_of(af: u32) -> Option<u8> {
    match af {
        2 => Some(4),
        10 | 24 | 28 | 30 => Some(6),
        _ => None,
    }
}

/// Returns `(ip_version, header_len)`.
#[inline]
pub fn parse(data: &[u8]) -> Result<(u8, usize), Skip> {
    let h: &[u8; HEADER_LEN] = data.first_chunk().ok_or(Skip::Truncated)?;
    version_of(u32::from_le_bytes(*h))
        .or_else(|| version_of(u32::from_be_bytes(*h)))
        .map(|v| (v, HEADER_LEN))
        .ok_or(Skip::NotIp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_byte_orders() {
        assert_eq!(parse(&[2, 0, 0, 0, 0x45]), Ok((4, 4)));
        assert_eq!(parse(&[0, 0, 0, 2]), Ok((4, 4)));
        assert_eq!(parse(&[30, 0, 0, 0]), Ok((6, 4)));
        assert_eq!(parse(&[0, 0, 0, 24]), Ok((6, 4)));
        assert_eq!(parse(&[28, 0, 0, 0]), Ok((6, 4)));
        assert_eq!(parse(&[0, 0, 0, 10]), Ok((6, 4)));
    }

    #[test]
    fn other_families_and_truncation() {
        assert_eq!(parse(&[7, 0, 0, 0]), Err(Skip::NotIp));
        assert_eq!(parse(&[0, 2, 0, 0]), Err(Skip::NotIp));
        for n in 0..HEADER_LEN {
            assert_eq!(parse(&[2, 0, 0, 0][..n]), Err(Skip::Truncated));
        }
    }
}
