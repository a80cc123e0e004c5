//! DSCP values: per-hop-behaviour names and the in-place rewrite of an IP
//! header's DSCP bits.
//!
//! Contract:
//! - [`parse_phb`] maps a standard PHB name (CS0–CS7, AF11–AF43, EF, LE, DF;
//!   any case) to its 6-bit DSCP value; unknown names give `None`.
//! - [`rewrite_dscp`] sets the 6 DSCP bits of the IP header starting at
//!   `ip_offset` in a captured packet and keeps the 2 ECN bits. For IPv4 the
//!   header checksum is updated incrementally (RFC 1624, eqn. 3), so a header
//!   whose checksum was valid stays valid and one that was wrong (e.g. left
//!   to checksum offload) stays wrong by the same amount. TCP, UDP, SCTP and
//!   ICMPv6 checksums do not cover the IPv4 TOS byte nor the IPv6 traffic
//!   class (the pseudo-header holds addresses, protocol and length only), so
//!   nothing else needs updating. For IPv6 the traffic class spans bytes 0–1
//!   (after the version nibble); the flow label is kept.
//! - It returns `false` and changes nothing when the header is not fully
//!   captured (IPv4: the IHL-given length, IPv6: 40 bytes), when the version
//!   nibble does not match `ip_version`, when the IPv4 IHL is below 5 or when
//!   `dscp` > 63. It never panics and allocates nothing.

/// Largest DSCP value (6 bits).
pub const MAX_DSCP: u8 = 63;

/// DSCP of a standard per-hop-behaviour name: `CS0`–`CS7` (class selectors,
/// RFC 2474), `AF11`–`AF43` (assured forwarding, RFC 2597), `EF` (expedited
/// forwarding, RFC 3246), `LE` (lower effort, RFC 8622) and `DF` (default
/// forwarding, = CS0). Case-insensitive.
pub fn parse_phb(name: &str) -> Option<u8> {
    let upper = name.trim().to_ascii_uppercase();
    let b = upper.as_bytes();
    match b {
        b"EF" => Some(46),
        b"LE" => Some(1),
        b"DF" => Some(0),
        [b'C', b'S', d @ b'0'..=b'7'] => Some((d - b'0') << 3),
        [b'A', b'F', c @ b'1'..=b'4', p @ b'1'..=b'3'] => {
            Some(((c - b'0') << 3) | ((p - b'0') << 1))
        }
        _ => None,
    }
}

/// Sets the DSCP bits of the IP header at `pkt[ip_offset..]` (see the module
/// contract). Returns whether the packet now carries `dscp`.
pub fn rewrite_dscp(pkt: &mut [u8], ip_offset: usize, ip_version: u8, dscp: u8) -> bool {
    if dscp > MAX_DSCP {
        return false;
    }
    let Some(hdr) = pkt.get_mut(ip_offset..) else {
        return false;
    };
    match ip_version {
        4 => rewrite_v4(hdr, dscp),
        6 => rewrite_v6(hdr, dscp),
        _ => false,
    }
}

fn rewrite_v4(hdr: &mut [u8], dscp: u8) -> bool {
    let Some(&b0) = hdr.first() else {
        return false;
    };
    let ihl = usize::from(b0 & 0x0f) * 4;
    if b0 >> 4 != 4 || ihl < 20 || hdr.len() < ihl {
        return false;
    }
    let old_word = u16::from_be_bytes([hdr[0], hdr[1]]);
    hdr[1] = (dscp << 2) | (hdr[1] & 0x03);
    let new_word = u16::from_be_bytes([hdr[0], hdr[1]]);
    let old_sum = u16::from_be_bytes([hdr[10], hdr[11]]);
    let new_sum = checksum_update(old_sum, old_word, new_word);
    hdr[10..12].copy_from_slice(&new_sum.to_be_bytes());
    true
}

fn rewrite_v6(hdr: &mut [u8], dscp: u8) -> bool {
    if hdr.len() < 40 || hdr[0] >> 4 != 6 {
        return false;
    }
    // Traffic class = low nibble of byte 0 + high nibble of byte 1;
    // DSCP is its top 6 bits, ECN the next 2 (bits 5–4 of byte 1).
    hdr[0] = (hdr[0] & 0xf0) | (dscp >> 2);
    hdr[1] = ((dscp & 0x03) << 6) | (hdr[1] & 0x3f);
    true
}

/// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), in one's-complement arithmetic.
fn checksum_update(hc: u16, m: u16, m_new: u16) -> u16 {
    let mut sum = u32::from(!hc) + u32::from(!m) + u32::from(m_new);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The DSCP of the IP header at `pkt[ip_offset..]`, if its first bytes are
/// captured and the version nibble matches.
pub fn read_dscp(pkt: &[u8], ip_offset: usize, ip_version: u8) -> Option<u8> {
    let hdr = pkt.get(ip_offset..)?;
    match (ip_version, hdr.first()? >> 4) {
        (4, 4) => Some(hdr.get(1)? >> 2),
        (6, 6) => Some(((hdr[0] & 0x0f) << 2) | (hdr.get(1)? >> 6)),
        _ => None,
    }
}

/// Internet checksum (RFC 1071) of `data`, computed from scratch; 0 over a
/// header whose checksum field is right.
pub fn ones_complement_sum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 20-byte IPv4 header (UDP 10.0.0.1 → 10.0.0.2) with a correct
    /// checksum, behind `pad` bytes of link header.
    fn v4_packet(pad: usize, tos: u8) -> Vec<u8> {
        let mut p = vec![0xee; pad];
        let mut h = [
            0x45, tos, 0x00, 0x30, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0, 0, 10, 0, 0, 1, 10, 0, 0,
            2,
        ];
        let c = ones_complement_sum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        p.extend_from_slice(&h);
        p.extend_from_slice(&[0x11; 28]);
        p
    }

    #[test]
    fn phb_names() {
        assert_eq!(parse_phb("EF"), Some(46));
        assert_eq!(parse_phb("cs0"), Some(0));
        assert_eq!(parse_phb("CS7"), Some(56));
        assert_eq!(parse_phb("AF11"), Some(10));
        assert_eq!(parse_phb("af41"), Some(34));
        assert_eq!(parse_phb("AF43"), Some(38));
        assert_eq!(parse_phb("LE"), Some(1));
        assert_eq!(parse_phb("DF"), Some(0));
        for bad in ["CS8", "AF44", "AF51", "AF1", "E", "", "EFX", "46"] {
            assert_eq!(parse_phb(bad), None, "{bad}");
        }
    }

    #[test]
    fn ipv4_checksum_stays_valid_for_every_dscp_and_ecn() {
        for ecn in 0..4u8 {
            for old in [0u8, 10, 46, 63] {
                for new in 0..=MAX_DSCP {
                    let mut p = v4_packet(14, (old << 2) | ecn);
                    let before = p.clone();
                    assert!(rewrite_dscp(&mut p, 14, 4, new));
                    assert_eq!(p[15], (new << 2) | ecn, "ECN kept");
                    assert_eq!(read_dscp(&p, 14, 4), Some(new));
                    // Recomputed from scratch over the whole header.
                    assert_eq!(ones_complement_sum(&p[14..34]), 0, "{old}->{new} ecn {ecn}");
                    // Nothing but TOS and checksum moved.
                    for i in (0..p.len()).filter(|&i| ![15, 24, 25].contains(&i)) {
                        assert_eq!(p[i], before[i], "byte {i}");
                    }
                }
            }
        }
    }

    #[test]
    fn ipv4_with_options_and_a_wrong_checksum_keeps_its_error() {
        let mut h = vec![
            0x46, 0x00, 0x00, 0x20, 0, 1, 0, 0, 64, 6, 0, 0, 192, 168, 1, 1, 192, 168, 1, 2, 1, 1,
            1, 0,
        ];
        let good = ones_complement_sum(&h);
        let bad = good.wrapping_add(0x0101);
        h[10..12].copy_from_slice(&bad.to_be_bytes());
        let wrong_by = ones_complement_sum(&h);
        assert!(rewrite_dscp(&mut h, 0, 4, 34));
        assert_eq!(h[1], 34 << 2);
        assert_eq!(ones_complement_sum(&h), wrong_by);
        // Options cut off: header not fully captured.
        let mut cut = h[..22].to_vec();
        let copy = cut.clone();
        assert!(!rewrite_dscp(&mut cut, 0, 4, 0));
        assert_eq!(cut, copy);
    }

    #[test]
    fn ipv6_traffic_class_spans_two_bytes() {
        let mut p = vec![0u8; 14 + 40];
        // Version 6, TC = 0b1111_1111 (DSCP 63, ECN 3), flow label 0xabcde.
        p[14..18].copy_from_slice(&[0x6f, 0xfa, 0xbc, 0xde]);
        p[18..]
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = i as u8);
        let before = p.clone();
        assert!(rewrite_dscp(&mut p, 14, 6, 46));
        // TC = 46 << 2 | 3 = 0xbb → byte0 = 0x6b, byte1 = 0xb0 | 0x0a.
        assert_eq!(&p[14..18], &[0x6b, 0xba, 0xbc, 0xde]);
        assert_eq!(read_dscp(&p, 14, 6), Some(46));
        assert_eq!(p[..14], before[..14]);
        assert_eq!(p[16..], before[16..]);
        assert!(rewrite_dscp(&mut p, 14, 6, 0));
        assert_eq!(
            &p[14..18],
            &[0x60, 0x3a, 0xbc, 0xde],
            "ECN 3 and flow label kept"
        );
    }

    #[test]
    fn truncated_or_mismatched_headers_are_left_alone() {
        let full = v4_packet(14, 0);
        for len in 0..34 {
            let mut p = full[..len].to_vec();
            assert!(!rewrite_dscp(&mut p, 14, 4, 46), "len {len}");
            assert_eq!(p, full[..len]);
        }
        let mut p = full.clone();
        assert!(
            !rewrite_dscp(&mut p, 14, 6, 46),
            "IPv4 header declared as IPv6"
        );
        assert!(!rewrite_dscp(&mut p, 14, 4, 64), "DSCP out of range");
        assert!(
            !rewrite_dscp(&mut p, usize::MAX, 4, 1),
            "offset past the end"
        );
        assert!(!rewrite_dscp(&mut p, 14, 5, 1));
        p[14] = 0x44; // IHL 4 < 5
        assert!(!rewrite_dscp(&mut p, 14, 4, 1));
        p[14] = 0x45;
        assert_eq!(p, full);
        let mut v6 = vec![0x60; 39];
        assert!(!rewrite_dscp(&mut v6, 0, 6, 46));
        assert_eq!(v6, vec![0x60; 39]);
    }
}
