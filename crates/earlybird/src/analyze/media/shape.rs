//! Shapes of datagrams that are not media: a guard of the media analyzer.
//!
//! Contract: [`not_media`] says whether one UDP payload has the header of
//! a request/response protocol that periodic or bulk traffic uses and
//! media does not: a DNS message (standard query opcode, one question
//! whose name is whole labels ending inside the datagram, followed by its
//! type and class; DNS tunnels and exfiltration keep this shape) or an ONC
//! RPC message (RFC 5531: a call of RPC version 2, or a reply whose reply
//! status is 0 or 1; NFS over UDP). Random or encrypted bytes pass these
//! tests with a chance under 2^-40.
//!
//! [`Body::of`] summarises a datagram for the repeated-body test: a
//! datagram whose bytes [`HEAD`]..[`BODY_END`] are those of the previous
//! datagram of its direction while its first [`HEAD`] bytes differ (not a
//! duplicate captured twice) carries no encoded signal. Media cannot do
//! that: a codec's frames differ from one to the next, and every cipher a
//! call uses encrypts each packet under its own keystream or nonce (SRTP,
//! RFC 3711 §4.1.1: the keystream depends on the packet index; DTLS and
//! QUIC: a record or packet number in the nonce), so equal ciphertext at
//! one offset in consecutive packets happens with a chance of 2^-32. A
//! load generator that sends one buffer behind a counter (iperf3 over
//! UDP) or a fill pattern does it in every packet. Pure, no allocation,
//! never panics.

/// Bytes of a datagram's head (headers, counters, timestamps) left out of
/// the repeated-body test.
pub const HEAD: usize = 16;
/// End of the bytes the repeated-body test compares.
pub const BODY_END: usize = 48;

// `Body::of` hashes whole 8-byte words.
const _: () = assert!(HEAD.is_multiple_of(8) && BODY_END.is_multiple_of(8) && HEAD < BODY_END);

/// Whether `b` is a DNS or ONC RPC message (see the module docs).
pub fn not_media(b: &[u8]) -> bool {
    dns(b) || rpc(b)
}

/// A datagram's head and body hashes (32 bits each); zero: the datagram
/// is shorter than [`BODY_END`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Body(u64);

impl Body {
    /// The summary of `b`: each part hashed 8 bytes at a time (a word
    /// xored in, multiplied by an odd constant, rotated: each step one to
    /// one in the word, so parts that differ in one word differ in the
    /// 64-bit hash), folded to 32 bits. Equal parts hash equal; unequal
    /// ones collide with a chance of about 2^-32, as a byte-wise 32-bit
    /// hash's would, at a fraction of its cost.
    #[inline]
    pub fn of(b: &[u8]) -> Body {
        let Some(x) = b.first_chunk::<BODY_END>() else {
            return Body(0);
        };
        let (words, _) = x.as_chunks::<8>();
        let (head, body) = words.split_at(HEAD / 8);
        let hash = |ws: &[[u8; 8]]| {
            let h = ws.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, w| {
                (h ^ u64::from_le_bytes(*w))
                    .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    .rotate_left(29)
            });
            (h ^ h >> 32) as u32
        };
        Body((u64::from(hash(head)) << 32 | u64::from(hash(body))).max(1))
    }

    /// Whether `self` repeats `prev`'s body under another head.
    pub fn repeats(self, prev: Body) -> bool {
        self.0 != 0 && prev.0 != 0 && self.0 as u32 == prev.0 as u32 && self.0 != prev.0
    }
}

fn dns(b: &[u8]) -> bool {
    let Some(h) = b.first_chunk::<12>() else {
        return false;
    };
    let opcode = (h[2] >> 3) & 0xf;
    let qd = u16::from_be_bytes([h[4], h[5]]);
    if opcode != 0 || qd != 1 || h[2] & 0x40 != 0 {
        return false;
    }
    let mut off = 12;
    let mut labels = 0;
    loop {
        let Some(&len) = b.get(off) else {
            return false;
        };
        if len == 0 {
            break;
        }
        if len > 63 || labels > 127 {
            return false;
        }
        labels += 1;
        off += 1 + usize::from(len);
    }
    // The root, then QTYPE and QCLASS (class IN or the mDNS/CH variants).
    let Some(tc) = b.get(off + 1..off + 5) else {
        return false;
    };
    let class = u16::from_be_bytes([tc[2], tc[3]]) & 0x7fff;
    labels > 0 && matches!(class, 1 | 3 | 254 | 255)
}

fn rpc(b: &[u8]) -> bool {
    let Some(h) = b.first_chunk::<12>() else {
        return false;
    };
    let word = |i: usize| u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    match word(4) {
        0 => word(8) == 2 && b.len() >= 40,
        1 => word(8) <= 1 && b.len() >= 24,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_queries_and_answers_are_not_media() {
        // A query for "a.example" type A class IN.
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        q.extend_from_slice(b"\x01a\x07example\x00\x00\x01\x00\x01");
        assert!(not_media(&q));
        // Its answer (QR set, one answer after the question).
        let mut a = q.clone();
        a[2] = 0x81;
        a[7] = 1;
        a.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 1, 2, 3, 4]);
        assert!(not_media(&a));
        // Cut inside the name, a 64-byte label, two questions, no name.
        assert!(!not_media(&q[..16]));
        let mut bad = q.clone();
        bad[12] = 64;
        assert!(!not_media(&bad));
        let mut two = q.clone();
        two[5] = 2;
        assert!(!not_media(&two));
        let mut root = q[..12].to_vec();
        root.extend_from_slice(&[0, 0, 1, 0, 1]);
        assert!(!not_media(&root));
    }

    #[test]
    fn a_repeated_body_under_a_new_head_is_told_from_duplicates_and_media() {
        // iperf3 over UDP: seconds, microseconds, a counter, then one
        // buffer sent again and again.
        let buf: Vec<u8> = (0..796u32).map(|i| (i * 37 % 251) as u8).collect();
        let dgram = |n: u32| {
            let mut d = vec![0, 0, 0x5c, 0xe4];
            d.extend_from_slice(&(n * 6400).to_be_bytes());
            d.extend_from_slice(&n.to_be_bytes());
            d.extend_from_slice(&buf);
            d
        };
        let (a, b) = (Body::of(&dgram(1)), Body::of(&dgram(2)));
        assert!(b.repeats(a));
        // The same datagram captured twice is a duplicate, not a repeat.
        assert!(!a.repeats(Body::of(&dgram(1))));
        // SRTP-like: the same RTP header layout, a payload that changes.
        let srtp = |n: u8| {
            let mut d = vec![0x80, 0x6f, 0, n, 0, 0, 3, n, 1, 2, 3, 4];
            d.extend((0..100u8).map(|i| i.wrapping_mul(n).wrapping_add(n)));
            d
        };
        assert!(!Body::of(&srtp(2)).repeats(Body::of(&srtp(1))));
        // Any one byte of the body changed, or of the head: told apart.
        let d = dgram(5);
        for i in 0..BODY_END {
            for x in [1u8, 0x80, 0xff] {
                let mut e = d.clone();
                e[i] ^= x;
                let (a, b) = (Body::of(&d), Body::of(&e));
                assert_ne!(a, b, "byte {i} ^ {x:#x}");
                // A body under another head repeats; another body does not.
                assert_eq!(b.repeats(a), i < HEAD, "byte {i} ^ {x:#x}");
            }
        }
        // Too short to compare: never a repeat.
        assert_eq!(Body::of(&[7; 47]), Body::default());
        assert!(!Body::of(&[7; 47]).repeats(Body::of(&[7; 47])));
        assert!(!Body::of(&dgram(2)).repeats(Body::default()));
    }

    #[test]
    fn rpc_calls_and_replies_are_not_media_and_rtp_is() {
        let mut call = vec![0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 2];
        call.extend_from_slice(&[0, 1, 0x86, 0xa3, 0, 0, 0, 2, 0, 0, 0, 1]);
        call.resize(64, 0);
        assert!(not_media(&call));
        let mut reply = vec![0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 0];
        reply.resize(32, 0);
        assert!(not_media(&reply));
        reply[11] = 2;
        assert!(!not_media(&reply));
        // RTP: version 2, PT 111.
        let rtp = [
            0x80, 0x6f, 0, 1, 0, 0, 3, 0xc0, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3,
        ];
        assert!(!not_media(&rtp));
        assert!(!not_media(&[]));
    }
}
