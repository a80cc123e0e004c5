//! DTLS record headers (DTLS 1.0/1.2, RFC 6347; DTLS 1.3, RFC 9147).
//!
//! Contract: [`Record::parse`] reads the record header at the start of
//! `b`. The classic header (content type 20..=25, version 0xFEFF, 0xFEFD or
//! 0xFEFC, epoch, 48-bit sequence number, length: 13 bytes) gives every
//! field; the DTLS 1.3 unified header (first byte 0b001CSLEE) gives the
//! low epoch bits, the low sequence bits and the length when present, and
//! refuses a connection id (its length is agreed in the handshake, so the
//! header's end is not known from the bytes). The record's body must fit
//! the bytes given when its length is known. [`Record::handshake_type`]
//! is the first handshake message's type of an epoch-0 handshake record.
//! Pure view, no allocation, never panics.

/// Why bytes are not a DTLS record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DtlsError {
    /// Fewer bytes than the header needs.
    Short,
    /// First byte neither a content type 20..=25 nor a unified header.
    ContentType(u8),
    /// A version other than DTLS 1.0, 1.2 or 1.3.
    Version(u16),
    /// The length passes the end of the bytes.
    Length,
    /// A unified header with a connection id.
    ConnectionId,
}

/// One record header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Content type (22 handshake, 23 application data, ...); 23 for a
    /// unified header (always protected data).
    pub content_type: u8,
    /// Version on the wire (0 for a unified header, which has none).
    pub version: u16,
    /// Epoch (its two low bits only in a unified header).
    pub epoch: u16,
    /// Sequence number (its low 8 or 16 bits only in a unified header).
    pub seq: u64,
    /// The record's body (to the end of the bytes when a unified header
    /// has no length).
    pub body: &'a [u8],
    /// Header length.
    pub header_len: usize,
}

impl<'a> Record<'a> {
    /// Parses the record header at the start of `b` (see the module docs).
    pub fn parse(b: &'a [u8]) -> Result<Record<'a>, DtlsError> {
        let first = *b.first().ok_or(DtlsError::Short)?;
        if first & 0xe0 == 0x20 {
            return Self::unified(b, first);
        }
        if !(20..=25).contains(&first) {
            return Err(DtlsError::ContentType(first));
        }
        let h: &[u8; 13] = b.first_chunk().ok_or(DtlsError::Short)?;
        let version = u16::from_be_bytes([h[1], h[2]]);
        if !matches!(version, 0xfeff | 0xfefd | 0xfefc) {
            return Err(DtlsError::Version(version));
        }
        let len = usize::from(u16::from_be_bytes([h[11], h[12]]));
        let body = b.get(13..13 + len).ok_or(DtlsError::Length)?;
        Ok(Record {
            content_type: first,
            version,
            epoch: u16::from_be_bytes([h[3], h[4]]),
            seq: u64::from_be_bytes([0, 0, h[5], h[6], h[7], h[8], h[9], h[10]]),
            body,
            header_len: 13,
        })
    }

    fn unified(b: &'a [u8], first: u8) -> Result<Record<'a>, DtlsError> {
        if first & 0x10 != 0 {
            return Err(DtlsError::ConnectionId);
        }
        let long_seq = first & 0x08 != 0;
        let has_len = first & 0x04 != 0;
        let mut off = 1;
        let seq = if long_seq {
            let s: &[u8; 2] = b
                .get(1..3)
                .and_then(|s| s.first_chunk())
                .ok_or(DtlsError::Short)?;
            off += 2;
            u64::from(u16::from_be_bytes(*s))
        } else {
            off += 1;
            u64::from(*b.get(1).ok_or(DtlsError::Short)?)
        };
        let body = if has_len {
            let l: &[u8; 2] = b
                .get(off..off + 2)
                .and_then(|s| s.first_chunk())
                .ok_or(DtlsError::Short)?;
            off += 2;
            b.get(off..off + usize::from(u16::from_be_bytes(*l)))
                .ok_or(DtlsError::Length)?
        } else {
            &b[off..]
        };
        Ok(Record {
            content_type: 23,
            version: 0,
            epoch: u16::from(first & 3),
            seq,
            body,
            header_len: off,
        })
    }

    /// The handshake message type of an epoch-0 handshake record (1
    /// ClientHello, 2 ServerHello, 11 Certificate, ...).
    pub fn handshake_type(&self) -> Option<u8> {
        (self.content_type == 22 && self.epoch == 0)
            .then(|| self.body.first().copied())
            .flatten()
    }

    /// Bytes the record takes (header and body).
    pub fn wire_len(&self) -> usize {
        self.header_len + self.body.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_headers_give_every_field() {
        // A DTLS 1.0 ClientHello record (as in a WebRTC capture): type 22,
        // version FEFF, epoch 0, sequence 0, 5 bytes of body.
        let b = [
            22, 0xfe, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 1, 0, 0, 0x9a, 0,
        ];
        let r = Record::parse(&b).unwrap();
        assert_eq!(
            (r.content_type, r.version, r.epoch, r.seq),
            (22, 0xfeff, 0, 0)
        );
        assert_eq!(r.handshake_type(), Some(1));
        assert_eq!(r.wire_len(), 18);
        // Application data, DTLS 1.2, epoch 1, sequence 0x010203040506.
        let b = [
            23, 0xfe, 0xfd, 0, 1, 1, 2, 3, 4, 5, 6, 0, 2, 0xaa, 0xbb, 0xcc,
        ];
        let r = Record::parse(&b).unwrap();
        assert_eq!(
            (r.epoch, r.seq, r.body),
            (1, 0x0102_0304_0506, &[0xaa, 0xbb][..])
        );
        assert_eq!(r.handshake_type(), None);
    }

    #[test]
    fn unified_headers_of_dtls_1_3() {
        // 0b0010_1101: no CID, 16-bit sequence, length, epoch 1.
        let b = [0x2d, 0x12, 0x34, 0x00, 0x03, 9, 8, 7, 6];
        let r = Record::parse(&b).unwrap();
        assert_eq!(
            (r.epoch, r.seq, r.body, r.header_len),
            (1, 0x1234, &[9, 8, 7][..], 5)
        );
        // 0b0010_0011: 8-bit sequence, no length: the body runs to the end.
        let r = Record::parse(&[0x23, 0x07, 1, 2]).unwrap();
        assert_eq!((r.epoch, r.seq, r.body), (3, 7, &[1, 2][..]));
        assert_eq!(Record::parse(&[0x3c, 0, 0]), Err(DtlsError::ConnectionId));
        assert_eq!(Record::parse(&[0x2c, 0, 0, 0]), Err(DtlsError::Short));
        assert_eq!(
            Record::parse(&[0x2c, 0, 0, 0, 4, 1]),
            Err(DtlsError::Length)
        );
    }

    #[test]
    fn other_bytes_are_refused() {
        assert_eq!(Record::parse(&[]), Err(DtlsError::Short));
        assert_eq!(
            Record::parse(&[0x80, 0, 0]),
            Err(DtlsError::ContentType(0x80))
        );
        assert_eq!(Record::parse(&[22, 0xfe, 0xfd, 0]), Err(DtlsError::Short));
        let mut b = [22u8, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(Record::parse(&b), Err(DtlsError::Version(0x0303)));
        b[1..3].copy_from_slice(&[0xfe, 0xfd]);
        b[12] = 1;
        assert_eq!(Record::parse(&b), Err(DtlsError::Length));
    }
}
