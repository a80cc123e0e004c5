//! A DNS message parser (RFC 1035 section 4, RFC 3596 for AAAA): the
//! header, the questions, and the resource records of every section, with
//! the A, AAAA and CNAME data of the answers decoded.
//!
//! Contract: [`parse`] reads one whole message (no TCP length prefix) and
//! either gives every section read to its end, the message's last byte
//! included, or an [`Error`] naming what is wrong and the byte offset in
//! the message where it was found. Names follow compression pointers only
//! backwards (a pointer must point before the name that holds it, so there
//! is no loop) and at most [`MAX_JUMPS`] times, with labels of at most 63
//! bytes and names of at most 255 bytes on the wire (RFC 1035, 2.3.4);
//! label types other than plain labels and pointers (RFC 6891 retired
//! them) are errors. Names are written in the master-file form without the
//! final dot (`www.example.org`; the root is `.`), a label's `.` and `\` as
//! `\.` and `\\`, other bytes outside printable ASCII as `\DDD` (decimal).
//! At most [`MAX_QUESTIONS`] questions and [`MAX_RECORDS`] records in all
//! are read, a message with more is an error; at most [`MAX_ANSWERS`]
//! answers are kept (the rest are read and skipped). Never panics.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Most compression pointers followed in one name.
pub const MAX_JUMPS: usize = 64;
/// Most questions a message may have.
pub const MAX_QUESTIONS: usize = 64;
/// Most resource records (all sections) a message may have.
pub const MAX_RECORDS: usize = 256;
/// Most answers kept of one message.
pub const MAX_ANSWERS: usize = 16;

/// Record type A (an IPv4 address).
pub const TYPE_A: u16 = 1;
/// Record type CNAME (a canonical name).
pub const TYPE_CNAME: u16 = 5;
/// Record type AAAA (an IPv6 address).
pub const TYPE_AAAA: u16 = 28;

/// What is wrong with a message, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Error {
    /// Byte offset in the message where the fault was found.
    pub offset: usize,
    /// What the fault is.
    pub what: &'static str,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DNS message: {} at offset {}", self.what, self.offset)
    }
}

impl std::error::Error for Error {}

fn err<T>(offset: usize, what: &'static str) -> Result<T, Error> {
    Err(Error { offset, what })
}

/// The fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Transaction ID.
    pub id: u16,
    /// A response (QR set).
    pub response: bool,
    /// OPCODE (0 is a standard query).
    pub opcode: u8,
    /// RCODE (the header's four bits).
    pub rcode: u8,
    /// Questions.
    pub qdcount: u16,
    /// Answer records.
    pub ancount: u16,
    /// Authority records.
    pub nscount: u16,
    /// Additional records.
    pub arcount: u16,
}

/// One question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// The name asked for.
    pub name: String,
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS (mDNS's unicast-response bit included).
    pub qclass: u16,
}

/// The data of an answer record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Data {
    /// An A record's address.
    A(Ipv4Addr),
    /// An AAAA record's address.
    Aaaa(Ipv6Addr),
    /// A CNAME record's name.
    Cname(String),
    /// Another type (not decoded).
    Other,
}

/// One answer record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Owner name.
    pub name: String,
    /// TYPE.
    pub rtype: u16,
    /// TTL, seconds.
    pub ttl: u32,
    /// The data.
    pub data: Data,
}

/// A message as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The header.
    pub header: Header,
    /// The questions.
    pub questions: Vec<Question>,
    /// The answer section's first [`MAX_ANSWERS`] records.
    pub answers: Vec<Answer>,
}

fn u16_at(b: &[u8], off: usize, what: &'static str) -> Result<u16, Error> {
    match b.get(off..off + 2) {
        Some(x) => Ok(u16::from_be_bytes([x[0], x[1]])),
        None => err(off.min(b.len()), what),
    }
}

fn u32_at(b: &[u8], off: usize, what: &'static str) -> Result<u32, Error> {
    match b.get(off..off + 4) {
        Some(x) => Ok(u32::from_be_bytes([x[0], x[1], x[2], x[3]])),
        None => err(off.min(b.len()), what),
    }
}

/// Reads the header (the first 12 bytes).
pub fn header(b: &[u8]) -> Result<Header, Error> {
    if b.len() < 12 {
        return err(b.len(), "header cut short (12 bytes needed)");
    }
    let flags = u16::from_be_bytes([b[2], b[3]]);
    Ok(Header {
        id: u16::from_be_bytes([b[0], b[1]]),
        response: flags & 0x8000 != 0,
        opcode: ((flags >> 11) & 0xf) as u8,
        rcode: (flags & 0xf) as u8,
        qdcount: u16::from_be_bytes([b[4], b[5]]),
        ancount: u16::from_be_bytes([b[6], b[7]]),
        nscount: u16::from_be_bytes([b[8], b[9]]),
        arcount: u16::from_be_bytes([b[10], b[11]]),
    })
}

/// Reads the name at `off` into `out` (cleared first); returns the offset
/// just past the name where it starts (past its first pointer, if any).
pub fn read_name(b: &[u8], off: usize, out: &mut String) -> Result<usize, Error> {
    out.clear();
    let mut pos = off;
    // Where the name's bytes continue at `off`'s level (set at the first jump).
    let mut after = None;
    // A pointer must point before the start of the labels that hold it.
    let mut floor = off;
    let mut jumps = 0;
    let mut wire = 1usize;
    loop {
        let Some(&len) = b.get(pos) else {
            return err(pos.min(b.len()), "name runs past the end");
        };
        match len & 0xc0 {
            0x00 => {
                if len == 0 {
                    if out.is_empty() {
                        out.push('.');
                    }
                    return Ok(after.unwrap_or(pos + 1));
                }
                let n = usize::from(len);
                let Some(label) = b.get(pos + 1..pos + 1 + n) else {
                    return err(pos, "label runs past the end");
                };
                wire += n + 1;
                if wire > 255 {
                    return err(pos, "name longer than 255 bytes");
                }
                if !out.is_empty() {
                    out.push('.');
                }
                push_label(out, label);
                pos += 1 + n;
            }
            0xc0 => {
                let Some(&lo) = b.get(pos + 1) else {
                    return err(pos, "compression pointer cut short");
                };
                let target = usize::from(len & 0x3f) << 8 | usize::from(lo);
                if target >= floor {
                    return err(pos, "compression pointer does not point back");
                }
                jumps += 1;
                if jumps > MAX_JUMPS {
                    return err(pos, "too many compression pointers");
                }
                after.get_or_insert(pos + 2);
                floor = target;
                pos = target;
            }
            _ => return err(pos, "unsupported label type"),
        }
    }
}

/// Appends a label in the master-file form (see the module docs).
fn push_label(out: &mut String, label: &[u8]) {
    for &c in label {
        match c {
            b'.' | b'\\' => {
                out.push('\\');
                out.push(char::from(c));
            }
            0x21..=0x7e => out.push(char::from(c)),
            _ => {
                out.push('\\');
                out.push(char::from(b'0' + c / 100));
                out.push(char::from(b'0' + c / 10 % 10));
                out.push(char::from(b'0' + c % 10));
            }
        }
    }
}

/// Reads one whole message (see the module docs).
pub fn parse(b: &[u8]) -> Result<Message, Error> {
    let header = header(b)?;
    let qd = usize::from(header.qdcount);
    if qd > MAX_QUESTIONS {
        return err(4, "too many questions");
    }
    let rr =
        usize::from(header.ancount) + usize::from(header.nscount) + usize::from(header.arcount);
    if rr > MAX_RECORDS {
        return err(6, "too many resource records");
    }
    let mut pos = 12;
    let mut questions = Vec::with_capacity(qd);
    for _ in 0..qd {
        let mut name = String::new();
        pos = read_name(b, pos, &mut name)?;
        let qtype = u16_at(b, pos, "question cut short")?;
        let qclass = u16_at(b, pos + 2, "question cut short")?;
        pos += 4;
        questions.push(Question {
            name,
            qtype,
            qclass,
        });
    }
    let mut answers = Vec::new();
    let mut name = String::new();
    for i in 0..rr {
        pos = read_name(b, pos, &mut name)?;
        let rtype = u16_at(b, pos, "record cut short")?;
        let ttl = u32_at(b, pos + 4, "record cut short")?;
        let rdlen = usize::from(u16_at(b, pos + 8, "record cut short")?);
        let rd = pos + 10;
        let Some(rdata) = b.get(rd..rd + rdlen) else {
            return err(pos + 8, "record data runs past the end");
        };
        pos = rd + rdlen;
        if i >= usize::from(header.ancount) || answers.len() >= MAX_ANSWERS {
            continue;
        }
        let data = match rtype {
            TYPE_A => match <[u8; 4]>::try_from(rdata) {
                Ok(a) => Data::A(Ipv4Addr::from(a)),
                Err(_) => return err(rd, "A record data is not 4 bytes"),
            },
            TYPE_AAAA => match <[u8; 16]>::try_from(rdata) {
                Ok(a) => Data::Aaaa(Ipv6Addr::from(a)),
                Err(_) => return err(rd, "AAAA record data is not 16 bytes"),
            },
            TYPE_CNAME => {
                let mut cname = String::new();
                let end = read_name(b, rd, &mut cname)?;
                if end != pos {
                    return err(rd, "CNAME name does not fill its record data");
                }
                Data::Cname(cname)
            }
            _ => Data::Other,
        };
        answers.push(Answer {
            name: name.clone(),
            rtype,
            ttl,
            data,
        });
    }
    if pos != b.len() {
        return err(pos, "bytes after the last record");
    }
    Ok(Message {
        header,
        questions,
        answers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A response for www.example.org: a CNAME, an A and an AAAA, names
    /// compressed.
    fn response() -> Vec<u8> {
        let mut m = vec![
            0x12, 0x34, 0x81, 0x80, 0, 1, 0, 3, 0, 0, 0, 0, // header
        ];
        m.extend_from_slice(b"\x03www\x07example\x03org\x00"); // at 12
        m.extend_from_slice(&[0, 1, 0, 1]);
        // CNAME www.example.org -> cdn.example.org (cdn + pointer to 16)
        m.extend_from_slice(&[0xc0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 6]);
        let cdn = m.len();
        m.extend_from_slice(b"\x03cdn\xc0\x10");
        // A cdn.example.org
        m.extend_from_slice(&[0xc0, cdn as u8, 0, 1, 0, 1, 0, 0, 1, 0, 0, 4, 192, 0, 2, 7]);
        // AAAA
        m.extend_from_slice(&[0xc0, cdn as u8, 0, 28, 0, 1, 0, 0, 1, 0, 0, 16]);
        m.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        m
    }

    #[test]
    fn a_response_with_compression() {
        let m = parse(&response()).unwrap();
        assert!(m.header.response);
        assert_eq!(m.header.id, 0x1234);
        assert_eq!(m.questions[0].name, "www.example.org");
        assert_eq!(m.questions[0].qtype, TYPE_A);
        assert_eq!(m.answers.len(), 3);
        assert_eq!(m.answers[0].data, Data::Cname("cdn.example.org".into()));
        assert_eq!(m.answers[1].name, "cdn.example.org");
        assert_eq!(m.answers[1].data, Data::A(Ipv4Addr::new(192, 0, 2, 7)));
        assert_eq!(m.answers[1].ttl, 256);
        assert_eq!(
            m.answers[2].data,
            Data::Aaaa("2001:db8::1".parse().unwrap())
        );
    }

    #[test]
    fn every_cut_is_an_error_not_a_panic() {
        let m = response();
        for n in 0..m.len() {
            let e = parse(&m[..n]).unwrap_err();
            assert!(e.offset <= n, "{n}: {e}");
        }
        let mut more = m.clone();
        more.push(0);
        assert_eq!(
            parse(&more).unwrap_err(),
            Error {
                offset: m.len(),
                what: "bytes after the last record"
            }
        );
    }

    #[test]
    fn pointer_loops_and_forward_pointers_are_errors() {
        // A name that points at itself.
        let mut m = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1];
        assert_eq!(
            parse(&m).unwrap_err().what,
            "compression pointer does not point back"
        );
        // Two labels pointing at each other: the second points back to the
        // first, whose pointer points forward.
        m = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(&[1, b'a', 0xc0, 16, 1, b'b', 0xc0, 12, 0, 1, 0, 1]);
        let e = parse(&m).unwrap_err();
        assert_eq!(
            (e.offset, e.what),
            (14, "compression pointer does not point back")
        );
        // A chain backwards is followed.
        let mut out = String::new();
        let b = [1, b'a', 0, 1, b'b', 0xc0, 0, 1, b'c', 0xc0, 3];
        assert_eq!(read_name(&b, 7, &mut out), Ok(11));
        assert_eq!(out, "c.b.a");
    }

    #[test]
    fn bounds_of_names() {
        // 63-byte labels: four make 257 bytes on the wire.
        let mut b = Vec::new();
        for _ in 0..4 {
            b.push(63);
            b.extend_from_slice(&[b'x'; 63]);
        }
        b.push(0);
        let mut out = String::new();
        assert_eq!(
            read_name(&b, 0, &mut out).unwrap_err().what,
            "name longer than 255 bytes"
        );
        assert_eq!(read_name(&b[64..], 0, &mut out), Ok(193));
        assert_eq!(
            read_name(&[0x40, 0], 0, &mut out).unwrap_err().what,
            "unsupported label type"
        );
        assert_eq!(read_name(&[0], 0, &mut out), Ok(1));
        assert_eq!(out, ".");
    }

    #[test]
    fn odd_label_bytes_are_escaped() {
        let mut out = String::new();
        read_name(b"\x04a.\\\x07\x03org\x00", 0, &mut out).unwrap();
        assert_eq!(out, "a\\.\\\\\\007.org");
    }

    #[test]
    fn counts_are_bounded() {
        let m = [0, 1, 0, 0, 0, 65, 0, 0, 0, 0, 0, 0];
        assert_eq!(parse(&m).unwrap_err().what, "too many questions");
        let m = [0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1];
        assert_eq!(parse(&m).unwrap_err().what, "too many resource records");
    }

    #[test]
    fn bad_address_lengths() {
        let mut m = vec![0, 1, 0x81, 0x80, 0, 0, 0, 1, 0, 0, 0, 0];
        m.extend_from_slice(&[0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 3, 1, 2, 3]);
        let e = parse(&m).unwrap_err();
        assert_eq!((e.offset, e.what), (23, "A record data is not 4 bytes"));
    }
}
