//! STUN messages (RFC 8489; TURN's methods and attributes, RFC 8656).
//!
//! Contract: [`Stun::parse`] reads one STUN message at the start of `b`:
//! the 20-byte header (two zero bits, message type, length, the magic
//! cookie 0x2112A442, a 96-bit transaction id) and checks that the length
//! is a multiple of 4 and fits the bytes given (bytes after the message are
//! left alone: over TCP the next frame follows). Messages without the
//! magic cookie (RFC 3489) are refused. [`Stun::attrs`] walks the
//! attributes (type, length, value padded to 4 bytes) and stops at the
//! first one that does not fit. Helpers read the attributes the media
//! detector uses: SOFTWARE, USERNAME, XOR-MAPPED-ADDRESS (and
//! XOR-PEER-ADDRESS, the same encoding), DATA. Pure views over `&[u8]`,
//! no allocation, never panics.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The magic cookie of RFC 5389 and later.
pub const MAGIC: u32 = 0x2112_A442;
/// STUN header length.
pub const HEADER: usize = 20;

/// Attribute types used here.
pub mod attr {
    /// USERNAME (ICE: "remote-ufrag:local-ufrag").
    pub const USERNAME: u16 = 0x0006;
    /// XOR-PEER-ADDRESS (TURN).
    pub const XOR_PEER_ADDRESS: u16 = 0x0012;
    /// DATA (TURN Send and Data indications).
    pub const DATA: u16 = 0x0013;
    /// XOR-MAPPED-ADDRESS.
    pub const XOR_MAPPED_ADDRESS: u16 = 0x0020;
    /// SOFTWARE.
    pub const SOFTWARE: u16 = 0x8022;
}

/// Methods used here.
pub mod method {
    /// Binding.
    pub const BINDING: u16 = 0x001;
    /// TURN Send (indication).
    pub const SEND: u16 = 0x006;
    /// TURN Data (indication).
    pub const DATA: u16 = 0x007;
}

/// The class of a message (the C1 C0 bits of its type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// A request.
    Request,
    /// An indication.
    Indication,
    /// A success response.
    Success,
    /// An error response.
    Error,
}

/// Why bytes are not a STUN message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StunError {
    /// Fewer than 20 bytes.
    Short,
    /// The first two bits are not zero.
    TopBits,
    /// No magic cookie at bytes 4..8.
    Cookie,
    /// The length (bytes 2..4) is not a multiple of 4 or passes the end.
    Length,
}

/// One STUN message: its header and its attribute bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stun<'a> {
    /// Class.
    pub class: Class,
    /// Method (12 bits).
    pub method: u16,
    /// Transaction id.
    pub txid: &'a [u8; 12],
    /// The attributes, `length` bytes after the header.
    pub body: &'a [u8],
}

impl<'a> Stun<'a> {
    /// Parses the message at the start of `b` (see the module docs).
    pub fn parse(b: &'a [u8]) -> Result<Stun<'a>, StunError> {
        let h: &[u8; HEADER] = b.first_chunk().ok_or(StunError::Short)?;
        if h[0] & 0xc0 != 0 {
            return Err(StunError::TopBits);
        }
        if u32::from_be_bytes([h[4], h[5], h[6], h[7]]) != MAGIC {
            return Err(StunError::Cookie);
        }
        let t = u16::from_be_bytes([h[0], h[1]]);
        let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
        if len % 4 != 0 || HEADER + len > b.len() {
            return Err(StunError::Length);
        }
        let class = match ((t >> 7) & 2) | ((t >> 4) & 1) {
            0 => Class::Request,
            1 => Class::Indication,
            2 => Class::Success,
            _ => Class::Error,
        };
        let method = (t & 0x000f) | ((t >> 1) & 0x0070) | ((t >> 2) & 0x0f80);
        let txid = h[8..20].first_chunk().ok_or(StunError::Short)?;
        Ok(Stun {
            class,
            method,
            txid,
            body: &b[HEADER..HEADER + len],
        })
    }

    /// The whole message's length on the wire (header and attributes).
    pub fn wire_len(&self) -> usize {
        HEADER + self.body.len()
    }

    /// The attributes in order: `(type, value)` (value without padding).
    pub fn attrs(&self) -> Attrs<'a> {
        Attrs { rest: self.body }
    }

    /// The value of the first attribute of type `t`.
    pub fn attr(&self, t: u16) -> Option<&'a [u8]> {
        self.attrs().find(|(at, _)| *at == t).map(|(_, v)| v)
    }

    /// The SOFTWARE attribute, when it is UTF-8.
    pub fn software(&self) -> Option<&'a str> {
        std::str::from_utf8(self.attr(attr::SOFTWARE)?).ok()
    }

    /// The USERNAME attribute, when it is UTF-8.
    pub fn username(&self) -> Option<&'a str> {
        std::str::from_utf8(self.attr(attr::USERNAME)?).ok()
    }

    /// The DATA attribute (TURN Send and Data indications).
    pub fn data(&self) -> Option<&'a [u8]> {
        self.attr(attr::DATA)
    }

    /// A TURN Send or Data indication.
    pub fn is_turn_data(&self) -> bool {
        self.class == Class::Indication
            && (self.method == method::SEND || self.method == method::DATA)
    }

    /// XOR-MAPPED-ADDRESS decoded.
    pub fn xor_mapped(&self) -> Option<SocketAddr> {
        xor_address(self.attr(attr::XOR_MAPPED_ADDRESS)?, self.txid)
    }

    /// XOR-PEER-ADDRESS decoded (TURN).
    pub fn xor_peer(&self) -> Option<SocketAddr> {
        xor_address(self.attr(attr::XOR_PEER_ADDRESS)?, self.txid)
    }
}

/// Iterator over a message's attributes.
#[derive(Debug, Clone)]
pub struct Attrs<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Attrs<'a> {
    type Item = (u16, &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        let h: &[u8; 4] = self.rest.first_chunk()?;
        let t = u16::from_be_bytes([h[0], h[1]]);
        let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
        let Some(value) = self.rest.get(4..4 + len) else {
            self.rest = &[];
            return None;
        };
        let padded = (4 + len + 3) & !3;
        self.rest = self.rest.get(padded..).unwrap_or(&[]);
        Some((t, value))
    }
}

/// Decodes an XOR-encoded address value (RFC 8489 §14.2).
fn xor_address(v: &[u8], txid: &[u8; 12]) -> Option<SocketAddr> {
    let h: &[u8; 4] = v.first_chunk()?;
    let port = u16::from_be_bytes([h[2], h[3]]) ^ (MAGIC >> 16) as u16;
    let mut key = [0u8; 16];
    key[..4].copy_from_slice(&MAGIC.to_be_bytes());
    key[4..].copy_from_slice(txid);
    let ip = match h[1] {
        1 => {
            let a: &[u8; 4] = v.get(4..8)?.first_chunk()?;
            let mut o = [0u8; 4];
            for i in 0..4 {
                o[i] = a[i] ^ key[i];
            }
            IpAddr::V4(Ipv4Addr::from(o))
        }
        2 => {
            let a: &[u8; 16] = v.get(4..20)?.first_chunk()?;
            let mut o = [0u8; 16];
            for i in 0..16 {
                o[i] = a[i] ^ key[i];
            }
            IpAddr::V6(Ipv6Addr::from(o))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 5769 §2.2: the IPv4 sample response (SOFTWARE "test vector ",
    /// XOR-MAPPED-ADDRESS 192.0.2.1:32853, MESSAGE-INTEGRITY, FINGERPRINT).
    const RFC5769_RESPONSE: &[u8] = &[
        0x01, 0x01, 0x00, 0x3c, 0x21, 0x12, 0xa4, 0x42, 0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34, 0xd6,
        0x86, 0xfa, 0x87, 0xdf, 0xae, 0x80, 0x22, 0x00, 0x0b, 0x74, 0x65, 0x73, 0x74, 0x20, 0x76,
        0x65, 0x63, 0x74, 0x6f, 0x72, 0x20, 0x00, 0x20, 0x00, 0x08, 0x00, 0x01, 0xa1, 0x47, 0xe1,
        0x12, 0xa6, 0x43, 0x00, 0x08, 0x00, 0x14, 0x2b, 0x91, 0xf5, 0x99, 0xfd, 0x9e, 0x90, 0xc3,
        0x8c, 0x74, 0x89, 0xf9, 0x2a, 0xf9, 0xba, 0x53, 0xf0, 0x6b, 0xe7, 0xd7, 0x80, 0x28, 0x00,
        0x04, 0xc0, 0x7d, 0x4c, 0x96,
    ];

    /// RFC 5769 §2.3: the IPv6 sample response (XOR-MAPPED-ADDRESS
    /// [2001:db8:1234:5678:11:2233:4455:6677]:32853).
    const RFC5769_RESPONSE_V6: &[u8] = &[
        0x01, 0x01, 0x00, 0x48, 0x21, 0x12, 0xa4, 0x42, 0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34, 0xd6,
        0x86, 0xfa, 0x87, 0xdf, 0xae, 0x80, 0x22, 0x00, 0x0b, 0x74, 0x65, 0x73, 0x74, 0x20, 0x76,
        0x65, 0x63, 0x74, 0x6f, 0x72, 0x20, 0x00, 0x20, 0x00, 0x14, 0x00, 0x02, 0xa1, 0x47, 0x01,
        0x13, 0xa9, 0xfa, 0xa5, 0xd3, 0xf1, 0x79, 0xbc, 0x25, 0xf4, 0xb5, 0xbe, 0xd2, 0xb9, 0xd9,
        0x00, 0x08, 0x00, 0x14, 0xa3, 0x82, 0x95, 0x4e, 0x4b, 0xe6, 0x7b, 0xf1, 0x17, 0x84, 0xc9,
        0x7c, 0x82, 0x92, 0xc2, 0x75, 0xbf, 0xe3, 0xed, 0x41, 0x80, 0x28, 0x00, 0x04, 0xc8, 0xfb,
        0x0b, 0x4c,
    ];

    #[test]
    fn rfc5769_responses_give_software_and_mapped_address() {
        let s = Stun::parse(RFC5769_RESPONSE).unwrap();
        assert_eq!((s.class, s.method), (Class::Success, method::BINDING));
        assert_eq!(s.wire_len(), RFC5769_RESPONSE.len());
        assert_eq!(s.software(), Some("test vector"));
        assert_eq!(s.xor_mapped(), Some("192.0.2.1:32853".parse().unwrap()));
        assert_eq!(s.attrs().count(), 4);
        let s = Stun::parse(RFC5769_RESPONSE_V6).unwrap();
        assert_eq!(
            s.xor_mapped(),
            Some(
                "[2001:db8:1234:5678:11:2233:4455:6677]:32853"
                    .parse()
                    .unwrap()
            )
        );
    }

    #[test]
    fn classes_methods_and_turn_indications() {
        let mut m = [0u8; 20];
        m[4..8].copy_from_slice(&MAGIC.to_be_bytes());
        for (t, class, meth) in [
            (0x0001u16, Class::Request, method::BINDING),
            (0x0011, Class::Indication, method::BINDING),
            (0x0111, Class::Error, method::BINDING),
            (0x0016, Class::Indication, method::SEND),
            (0x0017, Class::Indication, method::DATA),
            (0x0003, Class::Request, 0x003),
            (0x0113, Class::Error, 0x003),
        ] {
            m[..2].copy_from_slice(&t.to_be_bytes());
            let s = Stun::parse(&m).unwrap();
            assert_eq!((s.class, s.method), (class, meth), "{t:#06x}");
        }
        // A Send indication carrying 4 bytes of DATA (an RTP start).
        let mut send = vec![0x00, 0x16, 0x00, 0x08];
        send.extend_from_slice(&MAGIC.to_be_bytes());
        send.extend_from_slice(&[7; 12]);
        send.extend_from_slice(&[0x00, 0x13, 0x00, 0x04, 0x80, 0x6f, 0x00, 0x01]);
        let s = Stun::parse(&send).unwrap();
        assert!(s.is_turn_data());
        assert_eq!(s.data(), Some(&[0x80, 0x6f, 0x00, 0x01][..]));
    }

    #[test]
    fn bad_headers_are_refused_and_bad_attributes_end_the_walk() {
        assert_eq!(Stun::parse(&RFC5769_RESPONSE[..19]), Err(StunError::Short));
        let mut m = RFC5769_RESPONSE.to_vec();
        m[0] |= 0x80;
        assert_eq!(Stun::parse(&m), Err(StunError::TopBits));
        let mut m = RFC5769_RESPONSE.to_vec();
        m[5] = 0;
        assert_eq!(Stun::parse(&m), Err(StunError::Cookie));
        let mut m = RFC5769_RESPONSE.to_vec();
        m[3] = 0x3d;
        assert_eq!(Stun::parse(&m), Err(StunError::Length));
        assert_eq!(Stun::parse(&RFC5769_RESPONSE[..40]), Err(StunError::Length));
        // An attribute whose length passes the message's end: the walk stops.
        let mut m = RFC5769_RESPONSE.to_vec();
        m[23] = 0xff;
        let s = Stun::parse(&m).unwrap();
        assert_eq!(s.attrs().count(), 0);
        assert_eq!(s.software(), None);
        // Bytes after the message (a next TCP frame) are left alone.
        let mut m = RFC5769_RESPONSE.to_vec();
        m.extend_from_slice(&[1, 2, 3]);
        assert_eq!(Stun::parse(&m).unwrap().wire_len(), RFC5769_RESPONSE.len());
        // Unknown address family, short address.
        assert_eq!(xor_address(&[0, 3, 0, 0, 1, 2, 3, 4], &[0; 12]), None);
        assert_eq!(xor_address(&[0, 1, 0, 0, 1, 2], &[0; 12]), None);
    }
}
