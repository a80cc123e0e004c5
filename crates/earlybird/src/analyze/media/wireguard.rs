//! WireGuard messages as they cross the wire (the WireGuard paper,
//! Donenfeld 2017, §5.4), read from a UDP datagram's first bytes.
//!
//! Contract: [`Message::parse`] says whether a UDP payload is one WireGuard
//! message: a type byte 1, 2 or 3 (handshake initiation, response, cookie
//! reply: 148, 92 and 64 bytes exactly) or 4 (transport data), then three
//! zero bytes. A transport data message is a 16-byte header (type,
//! reserved, receiver index, counter), the encrypted inner packet padded
//! to a multiple of 16 bytes, and a 16-byte Poly1305 tag, so its length is
//! at least 32 and a multiple of 16; [`Message::Data`] carries the inner
//! packet's length with its padding (0 for a keepalive). The length is
//! the payload's length on the wire (`wire_len`, whatever the snaplen
//! kept); only the first four bytes are read. Pure, never panics.

/// Bytes a transport data message adds to the inner packet (header and
/// tag; the padding to 16 is not known, it stays in the inner length).
pub const DATA_OVERHEAD: u16 = 32;

/// One WireGuard message, by its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message {
    /// Handshake initiation, response or cookie reply.
    Handshake,
    /// Transport data: the inner packet's length with its padding.
    Data(u16),
}

impl Message {
    /// The message `b` (the captured payload) starts, of `wire_len` bytes
    /// on the wire; `None` when it is not one.
    pub fn parse(b: &[u8], wire_len: u16) -> Option<Message> {
        let head = b.get(..4)?;
        if head[1..] != [0, 0, 0] {
            return None;
        }
        match (head[0], wire_len) {
            (1, 148) | (2, 92) | (3, 64) => Some(Message::Handshake),
            (4, n) if n >= DATA_OVERHEAD && n % 16 == 0 => Some(Message::Data(n - DATA_OVERHEAD)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_head(t: u8, len: usize) -> Vec<u8> {
        let mut v = vec![0xa5; len];
        v[..4].copy_from_slice(&[t, 0, 0, 0]);
        v
    }

    #[test]
    fn handshakes_are_told_by_type_and_exact_length() {
        for (t, n) in [(1u8, 148usize), (2, 92), (3, 64)] {
            let m = with_head(t, n);
            assert_eq!(Message::parse(&m, n as u16), Some(Message::Handshake));
            assert_eq!(Message::parse(&m, n as u16 + 16), None);
        }
    }

    #[test]
    fn transport_data_gives_the_padded_inner_length() {
        // A 60-byte inner IP packet padded to 64: 16 + 64 + 16 on the wire.
        let m = with_head(4, 96);
        assert_eq!(Message::parse(&m, 96), Some(Message::Data(64)));
        // A keepalive: no inner packet.
        assert_eq!(Message::parse(&m[..32], 32), Some(Message::Data(0)));
        // Only the head need be captured: the length is the wire's.
        assert_eq!(Message::parse(&m[..4], 1440), Some(Message::Data(1408)));
    }

    #[test]
    fn other_datagrams_are_not_wireguard() {
        // Not a multiple of 16, too short, reserved bytes set, other types.
        assert_eq!(Message::parse(&with_head(4, 100), 100), None);
        assert_eq!(Message::parse(&with_head(4, 16), 16), None);
        let mut m = with_head(4, 96);
        m[2] = 1;
        assert_eq!(Message::parse(&m, 96), None);
        assert_eq!(Message::parse(&with_head(5, 96), 96), None);
        assert_eq!(Message::parse(&with_head(0, 96), 96), None);
        // RTP (0x80...), fewer than four bytes captured.
        assert_eq!(Message::parse(&[0x80, 0, 0, 0, 1], 96), None);
        assert_eq!(Message::parse(&[4, 0, 0], 96), None);
    }
}
