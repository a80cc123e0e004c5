//! SIP over SCTP (RFC 4168): the user messages of an SCTP packet's DATA
//! chunks.
//!
//! Contract: [`messages`] walks the chunks that follow the SCTP common
//! header (RFC 9260 §3.2: type, flags, length, value, padded to four
//! bytes) and yields the user data of each DATA chunk (type 0) that holds
//! a whole user message (its B and E flags both set), in chunk order.
//! Fragmented user messages, I-DATA chunks and every other chunk type are
//! passed over; [`Walk::fragments`] counts the DATA chunks passed over
//! because they held part of a message. A chunk whose length is below its
//! header or runs past the captured bytes ends the walk. Pure, bounded by
//! the packet, never panics.

/// Chunk type of DATA.
const DATA: u8 = 0;
/// DATA chunk flags: the first (B) and last (E) fragment of a message.
const BEGIN_END: u8 = 0x03;
/// Bytes of a DATA chunk before its user data (type, flags, length, TSN,
/// stream id, stream sequence number, payload protocol id).
const DATA_HEAD: usize = 16;

/// The chunks of one SCTP packet (see the module docs).
#[derive(Debug, Clone)]
pub struct Walk<'a> {
    rest: &'a [u8],
    /// DATA chunks passed over because they held part of a user message.
    pub fragments: u32,
}

/// The whole user messages in `chunks`, the bytes after the common header.
pub fn messages(chunks: &[u8]) -> Walk<'_> {
    Walk {
        rest: chunks,
        fragments: 0,
    }
}

impl<'a> Iterator for Walk<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        loop {
            let head = self.rest.get(..4)?;
            let (kind, flags) = (head[0], head[1]);
            let len = usize::from(u16::from_be_bytes([head[2], head[3]]));
            if len < 4 || len > self.rest.len() {
                self.rest = &[];
                return None;
            }
            let chunk = &self.rest[..len];
            let padded = len.div_ceil(4) * 4;
            self.rest = self.rest.get(padded..).unwrap_or(&[]);
            if kind != DATA || len < DATA_HEAD {
                continue;
            }
            if flags & BEGIN_END != BEGIN_END {
                self.fragments += 1;
                continue;
            }
            return Some(&chunk[DATA_HEAD..]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DATA chunk with `flags` carrying `data`, padded.
    fn data(flags: u8, data: &[u8]) -> Vec<u8> {
        let len = (DATA_HEAD + data.len()) as u16;
        let mut c = vec![DATA, flags];
        c.extend_from_slice(&len.to_be_bytes());
        c.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
        c.extend_from_slice(data);
        c.resize(c.len().div_ceil(4) * 4, 0);
        c
    }

    #[test]
    fn bundled_chunks_give_their_whole_messages_in_order() {
        // A SACK (type 3, 16 bytes), two whole messages (the first of odd
        // length, so padded), a middle fragment, another whole message.
        let mut p = vec![3, 0, 0, 16];
        p.extend_from_slice(&[0; 12]);
        p.extend(data(0x03, b"INVITE sip:a SIP/2.0\r\n\r\nx"));
        p.extend(data(0x07, b"SIP/2.0 100 Trying\r\n\r\n"));
        p.extend(data(0x00, b"middle"));
        p.extend(data(0x03, b"ACK sip:a SIP/2.0\r\n\r\n"));
        let mut w = messages(&p);
        let got: Vec<&[u8]> = w.by_ref().collect();
        assert_eq!(
            got,
            [
                &b"INVITE sip:a SIP/2.0\r\n\r\nx"[..],
                b"SIP/2.0 100 Trying\r\n\r\n",
                b"ACK sip:a SIP/2.0\r\n\r\n"
            ]
        );
        assert_eq!(w.fragments, 1);
    }

    #[test]
    fn bad_lengths_end_the_walk() {
        let whole = data(0x03, b"OPTIONS sip:a SIP/2.0\r\n\r\n");
        // Cut by the capture: the chunk runs past the bytes.
        assert_eq!(messages(&whole[..whole.len() - 5]).count(), 0);
        // A length below the chunk header, and a DATA chunk too short for
        // its own header.
        assert_eq!(messages(&[0, 3, 0, 2, 0, 0, 0, 0]).count(), 0);
        assert_eq!(messages(&[0, 3, 0, 8, 1, 2, 3, 4]).count(), 0);
        for n in 0..whole.len() {
            let _ = messages(&whole[..n]).count();
        }
    }
}
