//! Frame builder for the generator: Ethernet II + IPv4 + TCP/UDP headers.
//!
//! Contract: pure functions that write header fields into a caller-provided
//! byte slice (network byte order) and compute Internet checksums. Each
//! writer documents the minimum slice length it needs; callers size their
//! scratch buffers for the largest headers (14 + 20 + 32 bytes), so these
//! functions never see short slices. No allocation.
//!
//! Frames: destination MAC 02:00:00:00:00:02, source MAC 02:00:00:00:00:01,
//! EtherType 0x0800; IPv4 without options, DF set, TTL 64.

/// Ethernet header length.
pub(super) const ETH_LEN: usize = 14;
/// IPv4 header length (no options).
pub(super) const IP_LEN: usize = 20;
/// Offset of the L4 header in a frame.
pub(super) const L4_OFF: usize = ETH_LEN + IP_LEN;
/// Shortest Ethernet frame without CRC; shorter frames are zero-padded.
pub(super) const MIN_FRAME: usize = 60;

/// TCP flag bits.
pub(super) const FIN: u8 = 0x01;
pub(super) const SYN: u8 = 0x02;
pub(super) const RST: u8 = 0x04;
pub(super) const PSH: u8 = 0x08;
pub(super) const ACK: u8 = 0x10;

/// The IPv4 fields that vary between packets.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ipv4 {
    pub src: u32,
    pub dst: u32,
    pub id: u16,
    pub total_len: u16,
    pub proto: u8,
}

/// Writes the Ethernet and IPv4 headers (with a valid header checksum) into
/// `buf[..34]`.
#[inline]
pub(super) fn write_eth_ipv4(buf: &mut [u8], ip: &Ipv4) {
    buf[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    buf[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    buf[12..14].copy_from_slice(&[0x08, 0x00]);
    let h = &mut buf[ETH_LEN..ETH_LEN + IP_LEN];
    h[0] = 0x45;
    h[1] = 0;
    h[2..4].copy_from_slice(&ip.total_len.to_be_bytes());
    h[4..6].copy_from_slice(&ip.id.to_be_bytes());
    h[6..8].copy_from_slice(&[0x40, 0x00]); // DF, offset 0
    h[8] = 64;
    h[9] = ip.proto;
    h[10..12].fill(0);
    h[12..16].copy_from_slice(&ip.src.to_be_bytes());
    h[16..20].copy_from_slice(&ip.dst.to_be_bytes());
    let ck = checksum(sum16(h, 0));
    h[10..12].copy_from_slice(&ck.to_be_bytes());
}

/// TCP header fields.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tcp {
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    /// Some((TSval, TSecr)): 32-byte header with NOP, NOP, timestamps.
    pub timestamps: Option<(u32, u32)>,
}

impl Tcp {
    /// Header length in bytes (20, or 32 with the timestamp option).
    pub(super) fn header_len(&self) -> usize {
        if self.timestamps.is_some() {
            32
        } else {
            20
        }
    }
}

/// Writes a TCP header (checksum 0, window 65535) into
/// `buf[..tcp.header_len()]`.
#[inline]
pub(super) fn write_tcp(buf: &mut [u8], tcp: &Tcp) {
    buf[0..2].copy_from_slice(&tcp.sport.to_be_bytes());
    buf[2..4].copy_from_slice(&tcp.dport.to_be_bytes());
    buf[4..8].copy_from_slice(&tcp.seq.to_be_bytes());
    buf[8..12].copy_from_slice(&tcp.ack.to_be_bytes());
    buf[12] = ((tcp.header_len() / 4) as u8) << 4;
    buf[13] = tcp.flags;
    buf[14..16].copy_from_slice(&0xFFFFu16.to_be_bytes());
    buf[16..20].fill(0); // checksum, urgent pointer
    if let Some((tsval, tsecr)) = tcp.timestamps {
        buf[20..24].copy_from_slice(&[1, 1, 8, 10]);
        buf[24..28].copy_from_slice(&tsval.to_be_bytes());
        buf[28..32].copy_from_slice(&tsecr.to_be_bytes());
    }
}

/// Writes a UDP header (checksum 0 = not computed) into `buf[..8]`;
/// `udp_len` covers header and payload.
#[inline]
pub(super) fn write_udp(buf: &mut [u8], sport: u16, dport: u16, udp_len: u16) {
    buf[0..2].copy_from_slice(&sport.to_be_bytes());
    buf[2..4].copy_from_slice(&dport.to_be_bytes());
    buf[4..6].copy_from_slice(&udp_len.to_be_bytes());
    buf[6..8].fill(0);
}

/// Adds the 16-bit big-endian words of `data` (an odd last byte is padded
/// with zero) to `acc`, without folding.
#[inline]
pub(super) fn sum16(data: &[u8], mut acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// Folds a sum of 16-bit words and returns its one's complement.
#[inline]
pub(super) fn checksum(mut acc: u64) -> u16 {
    while acc > 0xFFFF {
        acc = (acc & 0xFFFF) + (acc >> 16);
    }
    !(acc as u16)
}

/// Sum of the TCP/UDP pseudo-header words (addresses, protocol, L4 length).
#[inline]
pub(super) fn pseudo_header_sum(src: u32, dst: u32, proto: u8, l4_len: u16) -> u64 {
    u64::from(src >> 16)
        + u64::from(src & 0xFFFF)
        + u64::from(dst >> 16)
        + u64::from(dst & 0xFFFF)
        + u64::from(proto)
        + u64::from(l4_len)
}

/// Fills `buf` with pseudo-random bytes determined by `key` alone.
#[inline]
pub(super) fn fill_payload(buf: &mut [u8], key: u64) {
    let mut chunks = buf.chunks_exact_mut(8);
    let mut n = 0u64;
    for c in &mut chunks {
        c.copy_from_slice(&super::mix64(key ^ n.wrapping_mul(0xD6E8_FEB8_6659_FD93)).to_le_bytes());
        n += 1;
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let v = super::mix64(key ^ n.wrapping_mul(0xD6E8_FEB8_6659_FD93)).to_le_bytes();
        let len = rest.len();
        rest.copy_from_slice(&v[..len]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_checksum_matches_a_known_header() {
        // The classic example header from RFC 1071 discussions:
        // 45 00 00 73 00 00 40 00 40 11 [b8 61] c0 a8 00 01 c0 a8 00 c7
        let mut buf = [0u8; 34];
        write_eth_ipv4(
            &mut buf,
            &Ipv4 {
                src: 0xC0A8_0001,
                dst: 0xC0A8_00C7,
                id: 0,
                total_len: 0x73,
                proto: 17,
            },
        );
        assert_eq!(&buf[12..14], &[0x08, 0x00]);
        assert_eq!(&buf[24..26], &[0xB8, 0x61]);
        // A header including its checksum sums to 0xFFFF.
        assert_eq!(checksum(sum16(&buf[14..34], 0)), 0);
    }

    #[test]
    fn tcp_header_layout() {
        let mut buf = [0xEEu8; 32];
        let t = Tcp {
            sport: 1024,
            dport: 443,
            seq: 0x0102_0304,
            ack: 0x0A0B_0C0D,
            flags: SYN | ACK,
            timestamps: Some((7, 9)),
        };
        write_tcp(&mut buf, &t);
        assert_eq!(&buf[0..4], &[0x04, 0x00, 0x01, 0xBB]);
        assert_eq!(&buf[4..12], &[1, 2, 3, 4, 0x0A, 0x0B, 0x0C, 0x0D]);
        assert_eq!((buf[12], buf[13]), (0x80, 0x12));
        assert_eq!(&buf[16..20], &[0, 0, 0, 0]);
        assert_eq!(&buf[20..24], &[1, 1, 8, 10]);
        assert_eq!(&buf[24..32], &[0, 0, 0, 7, 0, 0, 0, 9]);
        let plain = Tcp {
            timestamps: None,
            ..t
        };
        assert_eq!(plain.header_len(), 20);
        write_tcp(&mut buf, &plain);
        assert_eq!(buf[12], 0x50);
    }

    #[test]
    fn udp_header_layout() {
        let mut buf = [0xEEu8; 8];
        write_udp(&mut buf, 53, 40000, 28);
        assert_eq!(buf, [0, 53, 0x9C, 0x40, 0, 28, 0, 0]);
    }

    #[test]
    fn odd_length_sums_pad_with_zero() {
        assert_eq!(sum16(&[0x01, 0x02, 0x03], 0), 0x0102 + 0x0300);
        assert_eq!(checksum(0x1_FFFE), !0xFFFFu16);
    }

    #[test]
    fn payload_is_deterministic_and_key_dependent() {
        let (mut a, mut b, mut c) = ([0u8; 13], [0u8; 13], [0u8; 13]);
        fill_payload(&mut a, 5);
        fill_payload(&mut b, 5);
        fill_payload(&mut c, 6);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().any(|&x| x != 0));
    }
}
