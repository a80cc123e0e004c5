//! Teredo (RFC 4380): IPv6 carried in UDP, port 3544 at the server or
//! relay end.
//!
//! Contract: [`parse`] takes the UDP payload and skips the optional
//! authentication indicator (0x0001, client id length, authentication
//! value length, the two, an 8-byte nonce and a confirmation byte) and
//! origin indicator (0x0000, port, address: 8 bytes), in that order, and
//! returns the offset of the IPv6 header. It accepts the payload only when
//! an IPv6 header (version 6) fits and its payload length fits in what
//! remains, so other traffic on the port is [`Skip::NotIp`]; indicators
//! cut short are [`Skip::Truncated`]. No allocation; pure.

use super::ipv6::HEADER_LEN as IPV6_LEN;
use super::Skip;

/// IANA Teredo UDP port.
pub const PORT: u16 = 3544;

/// Returns the offset of the IPv6 header inside the UDP payload.
#[inline]
pub fn parse(data: &[u8]) -> Result<usize, Skip> {
    let mut off = 0;
    let word = |at: usize| -> Result<u16, Skip> {
        let b: &[u8; 2] = data
            .get(at..)
            .and_then(|d| d.first_chunk())
            .ok_or(Skip::Truncated)?;
        Ok(u16::from_be_bytes(*b))
    };
    if word(0)? == 0x0001 {
        let lens = word(2)?;
        off = 4 + usize::from(lens >> 8) + usize::from(lens & 0xff) + 8 + 1;
    }
    if word(off)? == 0x0000 {
        off += 8;
    }
    let ip = data.get(off..).ok_or(Skip::Truncated)?;
    match ip.get(..IPV6_LEN) {
        Some(h) if h[0] >> 4 == 6 => {
            let payload = usize::from(u16::from_be_bytes([h[4], h[5]]));
            if IPV6_LEN + payload <= ip.len() {
                Ok(off)
            } else {
                Err(Skip::NotIp)
            }
        }
        _ => Err(Skip::NotIp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv6 header with no payload (a bubble: next header 59).
    fn bubble() -> Vec<u8> {
        let mut v = vec![0x60, 0, 0, 0, 0, 0, 59, 255];
        v.resize(40, 0xfe);
        v
    }

    #[test]
    fn indicators_from_a_real_capture() {
        // zeek teredo_bubble_with_payload.pcap, frame 2: authentication
        // indicator 00 01, no id or value, nonce cd 56 69 40 0b 22 df 88,
        // confirmation 00; then origin indicator 00 00, port f1 2a,
        // address b9 c8 28 15; then the IPv6 header.
        let mut p = vec![
            0x00, 0x01, 0x00, 0x00, 0xcd, 0x56, 0x69, 0x40, 0x0b, 0x22, 0xdf,
        ];
        p.extend_from_slice(&[0x88, 0x00, 0x00, 0x00, 0xf1, 0x2a, 0xb9, 0xc8, 0x28, 0x15]);
        p.extend_from_slice(&bubble());
        assert_eq!(parse(&p), Ok(21));
        // Frame 1: the authentication indicator alone.
        let mut q = p[..13].to_vec();
        q.extend_from_slice(&bubble());
        assert_eq!(parse(&q), Ok(13));
        // Frame 3: no indicator.
        assert_eq!(parse(&bubble()), Ok(0));
    }

    #[test]
    fn not_teredo() {
        // A payload length longer than the datagram.
        let mut b = bubble();
        b[5] = 8;
        assert_eq!(parse(&b), Err(Skip::NotIp));
        b[5] = 0;
        b[0] = 0x45;
        assert_eq!(parse(&b), Err(Skip::NotIp));
        assert_eq!(parse(&b[..20]), Err(Skip::NotIp));
        assert_eq!(parse(&[0x00]), Err(Skip::Truncated));
        assert_eq!(parse(&[0x00, 0x01, 0x00]), Err(Skip::Truncated));
    }
}
