//! SLIP captures (LINKTYPE_SLIP 8): a 16-byte pseudo-header (direction,
//! then a copy of the compressed TCP/IP header for VJ-compressed frames)
//! ahead of the uncompressed IP packet, as BSD's BPF writes them.
//!
//! Contract: [`parse`] skips the pseudo-header and returns the IP version
//! from the next byte's high nibble with the header length (16). A packet
//! cut before that byte is [`Skip::Truncated`]; a version other than 4 or
//! 6 is [`Skip::Malformed`]. No allocation; pure.

use super::Skip;

/// SLIP pseudo-header length.
pub const HEADER_LEN: usize = 16;

/// Returns `(ip_version, header_len)`.
#[inline]
pub fn parse(data: &[u8]) -> Result<(u8, usize), Skip> {
    match data.get(HEADER_LEN).ok_or(Skip::Truncated)? >> 4 {
        4 => Ok((4, HEADER_LEN)),
        6 => Ok((6, HEADER_LEN)),
        _ => Err(Skip::Malformed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pseudo_header_then_ip() {
        // Direction 0 (in), TYPE_IP (0x40) marker, zeros, then 45 00.
        let mut p = vec![0x00, 0x40];
        p.resize(HEADER_LEN, 0);
        p.extend_from_slice(&[0x45, 0x00]);
        assert_eq!(parse(&p), Ok((4, 16)));
        p[16] = 0x60;
        assert_eq!(parse(&p), Ok((6, 16)));
        // tcpdump cve2015-0261-crash.pcap: 0x30 bytes, then 0x60 at 16.
        let mut crash = [0x30u8; 20];
        crash[16] = 0x60;
        assert_eq!(parse(&crash), Ok((6, 16)));
        // A byte 16 of 0x30 is version 3.
        assert_eq!(parse(&[0x30; 20]), Err(Skip::Malformed));
        // tcpdump heapoverflow-sl_if_print.pcap: 16 bytes, no IP header.
        assert_eq!(parse(&[0x30; 16]), Err(Skip::Truncated));
    }
}
