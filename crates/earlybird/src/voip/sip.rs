//! SIP messages (RFC 3261): start line, headers, body.
//!
//! Contract: [`parse`] reads one message at the start of a buffer — a
//! datagram, or the bytes of a TCP stream — and returns views into it (no
//! copy, no allocation): the start line, up to [`MAX_HEADERS`] header
//! fields (name and value, folded continuation lines kept inside the value
//! and unfolded by the readers), and the body. [`Message::len`] is the
//! number of bytes the message took, so a stream holding several messages
//! is read by calling [`parse`] again after them. The body is
//! `Content-Length` bytes (`l` in compact form); without that header it is
//! the rest of a datagram ([`Framing::Datagram`]) and empty in a stream
//! ([`Framing::Stream`], where RFC 3261 makes the header mandatory). In a
//! datagram, a Content-Length that is not a number or claims more than
//! the datagram holds does not lose the message: the body is the rest of
//! the datagram and [`Message::anomaly`] says what was wrong (in a stream
//! it is an error, since the next message cannot be found). A
//! stream buffer that ends before the message does is
//! [`SipError::Incomplete`]; every other failure names the offset of the
//! first byte that does not fit. Header names are matched without regard
//! to case and in their compact forms (`i` Call-ID, `f` From, `t` To, `m`
//! Contact, `l` Content-Length, `c` Content-Type, `v` Via, `k` Supported,
//! `s` Subject, `e` Content-Encoding, `o` Event, `r` Refer-To, `b`
//! Referred-By, `u` Allow-Events, `x` Session-Expires, `a` Accept-Contact,
//! `j` Reject-Contact, `d` Request-Disposition, `y` Identity, `n`
//! Identity-Info). Never panics on any input.

/// Most header fields kept per message; a message with more is
/// [`SipError::TooManyHeaders`].
pub const MAX_HEADERS: usize = 64;
/// Longest header section (start line and headers) accepted.
pub const MAX_HEAD: usize = 16 * 1024;

/// How the end of the body is found when there is no Content-Length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// A UDP datagram: the body is the rest of it.
    Datagram,
    /// A TCP (or TLS) stream: no Content-Length means no body.
    Stream,
}

/// Why a buffer is not one SIP message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SipError {
    /// The buffer does not start like a SIP request or response.
    NotSip,
    /// A stream buffer that ends inside the message; more bytes are
    /// needed (at least `needed` in all when the body length is known).
    Incomplete {
        /// Total length of the message when known, else 0.
        needed: usize,
    },
    /// The start line is malformed at this offset.
    BadStartLine {
        /// Offset of the first byte that does not fit.
        offset: usize,
    },
    /// A header line is malformed (no colon, empty name) at this offset.
    BadHeader {
        /// Offset of the line.
        offset: usize,
    },
    /// More than [`MAX_HEADERS`] header fields, or a header section
    /// longer than [`MAX_HEAD`]; the offset is where it was cut.
    TooManyHeaders {
        /// Offset of the field or byte that went over.
        offset: usize,
    },
    /// Content-Length is not a number, or claims more than a datagram has.
    BadContentLength {
        /// Offset of the header's value.
        offset: usize,
    },
}

impl std::fmt::Display for SipError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SipError::NotSip => write!(f, "not a SIP message"),
            SipError::Incomplete { needed: 0 } => write!(f, "incomplete SIP message"),
            SipError::Incomplete { needed } => {
                write!(f, "incomplete SIP message ({needed} bytes needed)")
            }
            SipError::BadStartLine { offset } => write!(f, "bad SIP start line at byte {offset}"),
            SipError::BadHeader { offset } => write!(f, "bad SIP header at byte {offset}"),
            SipError::TooManyHeaders { offset } => {
                write!(f, "SIP header section too large at byte {offset}")
            }
            SipError::BadContentLength { offset } => {
                write!(f, "bad SIP Content-Length at byte {offset}")
            }
        }
    }
}

/// The first line of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartLine<'a> {
    /// `METHOD Request-URI SIP/2.0`.
    Request {
        /// The method token (INVITE, ACK, BYE, CANCEL, UPDATE, …).
        method: &'a [u8],
        /// The Request-URI.
        uri: &'a [u8],
    },
    /// `SIP/2.0 CODE Reason`.
    Response {
        /// Status code, 100..=699.
        code: u16,
        /// Reason phrase (may be empty).
        reason: &'a [u8],
    },
}

/// One parsed message (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    /// Request or response line.
    pub start: StartLine<'a>,
    headers: [(&'a [u8], &'a [u8]); MAX_HEADERS],
    count: usize,
    /// The body (SDP for an offer or answer).
    pub body: &'a [u8],
    /// Bytes of the buffer the message took (head and body).
    pub len: usize,
    /// A datagram's Content-Length that could not be used (see the module
    /// docs); `None` when the message is well formed.
    pub anomaly: Option<SipError>,
}

/// Compact forms (RFC 3261 §7.3.3 and later RFCs) and their long names.
const COMPACT: [(u8, &[u8]); 20] = [
    (b'i', b"call-id"),
    (b'f', b"from"),
    (b't', b"to"),
    (b'm', b"contact"),
    (b'l', b"content-length"),
    (b'c', b"content-type"),
    (b'v', b"via"),
    (b'k', b"supported"),
    (b's', b"subject"),
    (b'e', b"content-encoding"),
    (b'o', b"event"),
    (b'r', b"refer-to"),
    (b'b', b"referred-by"),
    (b'u', b"allow-events"),
    (b'x', b"session-expires"),
    (b'a', b"accept-contact"),
    (b'j', b"reject-contact"),
    (b'd', b"request-disposition"),
    (b'y', b"identity"),
    (b'n', b"identity-info"),
];

/// Whether header `name` (as on the wire) is `long` (lower case) or its
/// compact form.
fn name_is(name: &[u8], long: &[u8]) -> bool {
    if name.eq_ignore_ascii_case(long) {
        return true;
    }
    match name {
        [c] => COMPACT
            .iter()
            .any(|(short, l)| *short == c.to_ascii_lowercase() && *l == long),
        _ => false,
    }
}

/// `b` without leading and trailing spaces, tabs, CR and LF.
pub fn trim(b: &[u8]) -> &[u8] {
    let is_ws = |c: &u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    let start = b.iter().position(|c| !is_ws(c)).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !is_ws(c)).map_or(start, |e| e + 1);
    &b[start..end]
}

/// A token character (RFC 3261 §25.1).
fn is_token(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"-.!%*_+`'~".contains(&c)
}

/// Offset of the first CRLF (or bare LF) at or after `from`, and the
/// length of the line break.
fn line_end(buf: &[u8], from: usize) -> Option<(usize, usize)> {
    let i = from + buf.get(from..)?.iter().position(|&c| c == b'\n')?;
    if i > from && buf[i - 1] == b'\r' {
        Some((i - 1, 2))
    } else {
        Some((i, 1))
    }
}

/// Whether `buf` starts like a SIP message (a request line ending in
/// `SIP/2.0` or a `SIP/2.0 NNN` status line), whatever the port: the
/// content test for spotting SIP on any port. Reads at most one line.
pub fn looks_like_sip(buf: &[u8]) -> bool {
    // A request's method is tokens up to the first space: a buffer whose
    // first byte that is not a token is anything else is not SIP, found
    // without looking for the line's end (TCP payloads are mostly not).
    if !buf.starts_with(b"SIP/2.0 ") {
        match buf.iter().position(|&c| !is_token(c)) {
            Some(sp) if sp > 0 && buf[sp] == b' ' => {}
            _ => return false,
        }
    }
    sip_start_line(buf)
}

/// Whether the first line of `buf` is a SIP request or status line (the
/// whole-line test behind [`looks_like_sip`]).
fn sip_start_line(buf: &[u8]) -> bool {
    let line = match line_end(buf, 0) {
        Some((e, _)) => &buf[..e],
        None => return false,
    };
    if line.len() >= 12 && line.starts_with(b"SIP/2.0 ") {
        return line[8..11].iter().all(u8::is_ascii_digit);
    }
    let Some(sp) = line.iter().position(|&c| c == b' ') else {
        return false;
    };
    sp > 0 && line[..sp].iter().all(|&c| is_token(c)) && line.ends_with(b" SIP/2.0")
}

fn parse_start(line: &[u8]) -> Result<StartLine<'_>, SipError> {
    if let Some(rest) = line.strip_prefix(b"SIP/2.0 ") {
        let digits = rest.get(..3).ok_or(SipError::BadStartLine { offset: 8 })?;
        if !digits.iter().all(u8::is_ascii_digit) || rest.get(3).is_some_and(|&c| c != b' ') {
            return Err(SipError::BadStartLine { offset: 8 });
        }
        let code = digits
            .iter()
            .fold(0u16, |n, &d| n * 10 + u16::from(d - b'0'));
        if !(100..=699).contains(&code) {
            return Err(SipError::BadStartLine { offset: 8 });
        }
        return Ok(StartLine::Response {
            code,
            reason: trim(rest.get(4..).unwrap_or(&[])),
        });
    }
    let sp1 = line
        .iter()
        .position(|&c| c == b' ')
        .ok_or(SipError::NotSip)?;
    let method = &line[..sp1];
    if method.is_empty() || !method.iter().all(|&c| is_token(c)) {
        return Err(SipError::NotSip);
    }
    let version = b" SIP/2.0";
    if !line.ends_with(version) || line.len() < sp1 + 1 + version.len() {
        return Err(SipError::NotSip);
    }
    let uri = &line[sp1 + 1..line.len() - version.len()];
    if uri.is_empty() || uri.contains(&b' ') {
        return Err(SipError::BadStartLine { offset: sp1 + 1 });
    }
    Ok(StartLine::Request { method, uri })
}

/// Reads one message at the start of `buf` (see the module docs).
pub fn parse(buf: &[u8], framing: Framing) -> Result<Message<'_>, SipError> {
    let incomplete = |b: &[u8]| {
        if framing == Framing::Stream && b.len() < MAX_HEAD {
            SipError::Incomplete { needed: 0 }
        } else {
            SipError::NotSip
        }
    };
    let Some((end, brk)) = line_end(buf, 0) else {
        return Err(if looks_partial(buf) {
            incomplete(buf)
        } else {
            SipError::NotSip
        });
    };
    let start = parse_start(&buf[..end])?;
    let mut msg = Message {
        start,
        headers: [(&[][..], &[][..]); MAX_HEADERS],
        count: 0,
        body: &[],
        len: 0,
        anomaly: None,
    };
    let mut pos = end + brk;
    let body_at = loop {
        if pos > MAX_HEAD {
            return Err(SipError::TooManyHeaders { offset: pos });
        }
        let Some((e, brk)) = line_end(buf, pos) else {
            return Err(incomplete(buf));
        };
        if e == pos {
            break pos + brk;
        }
        let line = &buf[pos..e];
        if matches!(line[0], b' ' | b'\t') {
            // A continuation line: the previous value goes on.
            if msg.count == 0 {
                return Err(SipError::BadHeader { offset: pos });
            }
            let (name, value) = msg.headers[msg.count - 1];
            let from = value.as_ptr() as usize - buf.as_ptr() as usize;
            msg.headers[msg.count - 1] = (name, &buf[from..e]);
            pos = e + brk;
            continue;
        }
        let colon = line
            .iter()
            .position(|&c| c == b':')
            .ok_or(SipError::BadHeader { offset: pos })?;
        let name = trim(&line[..colon]);
        if name.is_empty() || !name.iter().all(|&c| is_token(c)) {
            return Err(SipError::BadHeader { offset: pos });
        }
        if msg.count == MAX_HEADERS {
            return Err(SipError::TooManyHeaders { offset: pos });
        }
        msg.headers[msg.count] = (name, &line[colon + 1..]);
        msg.count += 1;
        pos = e + brk;
    };
    let rest = buf.len() - body_at;
    let length = match msg.field(b"content-length") {
        Some(v) => {
            let v = trim(v);
            let at = v.as_ptr() as usize - buf.as_ptr() as usize;
            let bad = SipError::BadContentLength { offset: at };
            if v.is_empty() || v.len() > 9 || !v.iter().all(u8::is_ascii_digit) {
                match framing {
                    Framing::Stream => return Err(bad),
                    Framing::Datagram => {
                        msg.anomaly = Some(bad);
                        rest
                    }
                }
            } else {
                let n = v
                    .iter()
                    .fold(0usize, |n, &d| n * 10 + usize::from(d - b'0'));
                match framing {
                    _ if n <= rest => n,
                    Framing::Stream => {
                        return Err(SipError::Incomplete {
                            needed: body_at + n,
                        })
                    }
                    Framing::Datagram => {
                        msg.anomaly = Some(bad);
                        rest
                    }
                }
            }
        }
        None => match framing {
            Framing::Datagram => rest,
            Framing::Stream => 0,
        },
    };
    msg.body = &buf[body_at..body_at + length];
    msg.len = body_at + length;
    Ok(msg)
}

/// Whether a buffer without a line break could still become a SIP start
/// line (for streams cut inside the first line).
fn looks_partial(buf: &[u8]) -> bool {
    let n = buf.len().min(8);
    if b"SIP/2.0 ".starts_with(&buf[..n]) {
        return true;
    }
    let token = buf.iter().take_while(|&&c| is_token(c)).count();
    token > 0 && (token == buf.len() || buf[token] == b' ')
}

/// A `From`/`To`/`Contact` value: `"Display" <uri>;params` or `uri;params`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NameAddr<'a> {
    /// Display name without quotes (may be empty).
    pub display: &'a [u8],
    /// The URI, without angle brackets.
    pub uri: &'a [u8],
    /// The `tag` parameter, when present.
    pub tag: Option<&'a [u8]>,
}

impl<'a> NameAddr<'a> {
    /// Parses a header value (see the type docs); `None` when there is no
    /// URI in it.
    pub fn parse(value: &'a [u8]) -> Option<NameAddr<'a>> {
        let v = trim(value);
        let (display, uri, params) = match v.iter().position(|&c| c == b'<') {
            Some(lt) => {
                let close = lt + v[lt..].iter().position(|&c| c == b'>')?;
                let d = trim(&v[..lt]);
                let d = d
                    .strip_prefix(b"\"")
                    .and_then(|d| d.strip_suffix(b"\""))
                    .unwrap_or(d);
                (d, trim(&v[lt + 1..close]), &v[close + 1..])
            }
            None => {
                let semi = v.iter().position(|&c| c == b';').unwrap_or(v.len());
                (&v[..0], trim(&v[..semi]), &v[semi..])
            }
        };
        if uri.is_empty() {
            return None;
        }
        let tag = params.split(|&c| c == b';').find_map(|p| {
            let p = trim(p);
            let (k, val) = p.split_at(p.iter().position(|&c| c == b'=')?);
            trim(k)
                .eq_ignore_ascii_case(b"tag")
                .then(|| trim(&val[1..]))
        });
        Some(NameAddr { display, uri, tag })
    }

    /// The user part of a `sip:`/`sips:`/`tel:` URI (`alice` of
    /// `sip:alice@host;transport=udp`), or the URI when it has none.
    pub fn user(&self) -> &'a [u8] {
        let u = self.uri;
        let rest = [&b"sips:"[..], b"sip:", b"tel:"]
            .iter()
            .find_map(|s| {
                (u.len() >= s.len() && u[..s.len()].eq_ignore_ascii_case(s)).then(|| &u[s.len()..])
            })
            .unwrap_or(u);
        let end = rest
            .iter()
            .position(|&c| c == b'@' || c == b';' || c == b'?')
            .unwrap_or(rest.len());
        if rest.get(end) == Some(&b'@') || u.len() >= 4 && u[..4].eq_ignore_ascii_case(b"tel:") {
            &rest[..end]
        } else {
            &rest[..0]
        }
    }
}

impl<'a> Message<'a> {
    /// Header fields in order, as (name, raw value).
    pub fn fields(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + '_ {
        self.headers[..self.count].iter().copied()
    }

    /// The raw value of the first header named `long` (lower case long
    /// form; the compact form matches too).
    pub fn field(&self, long: &[u8]) -> Option<&'a [u8]> {
        self.fields()
            .find(|(n, _)| name_is(n, long))
            .map(|(_, v)| v)
    }

    /// The first header named `long`, trimmed.
    pub fn value(&self, long: &[u8]) -> Option<&'a [u8]> {
        self.field(long).map(trim)
    }

    /// Call-ID.
    pub fn call_id(&self) -> Option<&'a [u8]> {
        self.value(b"call-id").filter(|v| !v.is_empty())
    }

    /// From.
    pub fn from(&self) -> Option<NameAddr<'a>> {
        self.field(b"from").and_then(NameAddr::parse)
    }

    /// To.
    pub fn to(&self) -> Option<NameAddr<'a>> {
        self.field(b"to").and_then(NameAddr::parse)
    }

    /// CSeq as (number, method).
    pub fn cseq(&self) -> Option<(u32, &'a [u8])> {
        let v = self.value(b"cseq")?;
        let sp = v.iter().position(u8::is_ascii_whitespace)?;
        let n = std::str::from_utf8(&v[..sp]).ok()?.parse().ok()?;
        Some((n, trim(&v[sp..])))
    }

    /// The method of a request, or of the request a response answers
    /// (from CSeq).
    pub fn method(&self) -> Option<&'a [u8]> {
        match self.start {
            StartLine::Request { method, .. } => Some(method),
            StartLine::Response { .. } => self.cseq().map(|(_, m)| m),
        }
    }

    /// The status code of a response.
    pub fn status(&self) -> Option<u16> {
        match self.start {
            StartLine::Response { code, .. } => Some(code),
            StartLine::Request { .. } => None,
        }
    }

    /// User-Agent (requests) or Server (responses).
    pub fn user_agent(&self) -> Option<&'a [u8]> {
        self.value(b"user-agent").or_else(|| self.value(b"server"))
    }

    /// Whether the body is SDP (Content-Type application/sdp).
    pub fn has_sdp(&self) -> bool {
        !self.body.is_empty()
            && self.value(b"content-type").is_some_and(|t| {
                let t = trim(t.split(|&c| c == b';').next().unwrap_or(t));
                t.eq_ignore_ascii_case(b"application/sdp")
            })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_early_test_gives_what_the_whole_line_gives() {
        let mut cases: Vec<Vec<u8>> = [
            &b"INVITE sip:a@b SIP/2.0\r\nVia: x\r\n"[..],
            b"SIP/2.0 200 OK\r\n",
            b"SIP/2.0 2x0 OK\r\n",
            b"SIP/2.0 200\n",
            b"BYE sip:x SIP/2.0\n",
            b" INVITE sip:a SIP/2.0\r\n",
            b"INVITE\r\n SIP/2.0\r\n",
            b"IN/VITE sip:a SIP/2.0\r\n",
            b"INVITE sip:a SIP/2.0",
            b"GET / HTTP/1.1\r\n",
            b"\x16\x03\x01\x02\x00",
            b"",
            b"A B\rC SIP/2.0\n",
        ]
        .iter()
        .map(|c| c.to_vec())
        .collect();
        // Random buffers over an alphabet rich in the bytes that matter.
        let alphabet = b"AZaz09-.!~ /\r\nSIP2.0";
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = (x % 24) as usize;
            let mut v = Vec::with_capacity(n);
            for k in 0..n {
                let r = x.rotate_left(k as u32 * 5);
                v.push(alphabet[(r % alphabet.len() as u64) as usize]);
            }
            if x.is_multiple_of(5) {
                v.splice(0..0, b"SIP/2.0 ".iter().copied());
            }
            if x.is_multiple_of(7) {
                v.extend_from_slice(b" SIP/2.0\r\n");
            }
            cases.push(v);
        }
        for c in &cases {
            assert_eq!(
                looks_like_sip(c),
                sip_start_line(c),
                "{:?}",
                String::from_utf8_lossy(c)
            );
        }
    }

    use super::*;

    const INVITE: &[u8] = b"INVITE sip:bob@biloxi.example.com SIP/2.0\r\n\
Via: SIP/2.0/UDP pc33.atlanta.example.com;branch=z9hG4bK776asdhds\r\n\
Max-Forwards: 70\r\n\
To: Bob <sip:bob@biloxi.example.com>\r\n\
From: \"Alice Liddell\" <sip:alice@atlanta.example.com>;tag=1928301774\r\n\
Call-ID: a84b4c76e66710@pc33.atlanta.example.com\r\n\
CSeq: 314159 INVITE\r\n\
User-Agent: softphone 1.0\r\n\
Content-Type: application/sdp\r\n\
Content-Length: 5\r\n\
\r\n\
v=0\r\n";

    #[test]
    fn request_headers_and_body() {
        let m = parse(INVITE, Framing::Datagram).unwrap();
        assert_eq!(
            m.start,
            StartLine::Request {
                method: b"INVITE",
                uri: b"sip:bob@biloxi.example.com"
            }
        );
        assert_eq!(
            m.call_id(),
            Some(&b"a84b4c76e66710@pc33.atlanta.example.com"[..])
        );
        let from = m.from().unwrap();
        assert_eq!(from.display, b"Alice Liddell");
        assert_eq!(from.user(), b"alice");
        assert_eq!(from.tag, Some(&b"1928301774"[..]));
        let to = m.to().unwrap();
        assert_eq!(
            (to.display, to.user(), to.tag),
            (&b"Bob"[..], &b"bob"[..], None)
        );
        assert_eq!(m.cseq(), Some((314159, &b"INVITE"[..])));
        assert_eq!(m.user_agent(), Some(&b"softphone 1.0"[..]));
        assert!(m.has_sdp());
        assert_eq!(m.body, b"v=0\r\n");
        assert_eq!(m.len, INVITE.len());
        assert!(looks_like_sip(INVITE));
    }

    #[test]
    fn compact_forms_folding_and_responses() {
        let msg = b"SIP/2.0 180 Ringing\r\n\
i: 77@h\r\n\
f: <sip:a@h>;tag=x\r\n\
t: sip:b@h\r\n\
CSeq: 1\r\n INVITE\r\n\
l: 0\r\n\r\n";
        let m = parse(msg, Framing::Stream).unwrap();
        assert_eq!(m.status(), Some(180));
        assert_eq!(
            m.start,
            StartLine::Response {
                code: 180,
                reason: b"Ringing"
            }
        );
        assert_eq!(m.call_id(), Some(&b"77@h"[..]));
        assert_eq!(m.to().unwrap().user(), b"b");
        // The folded CSeq value is read across its continuation line.
        assert_eq!(m.cseq(), Some((1, &b"INVITE"[..])));
        assert_eq!(m.method(), Some(&b"INVITE"[..]));
        assert!(m.body.is_empty() && m.len == msg.len());
        assert!(looks_like_sip(msg));
    }

    #[test]
    fn streams_hold_several_messages_and_wait_for_more() {
        let one = b"BYE sip:a@h SIP/2.0\r\nCall-ID: 1\r\nContent-Length: 3\r\n\r\nabc";
        let mut two = one.to_vec();
        two.extend_from_slice(b"ACK sip:a@h SIP/2.0\r\nCall-ID: 2\r\nContent-Length: 0\r\n\r\n");
        let m = parse(&two, Framing::Stream).unwrap();
        assert_eq!((m.len, m.body), (one.len(), &b"abc"[..]));
        let n = parse(&two[m.len..], Framing::Stream).unwrap();
        assert_eq!(n.call_id(), Some(&b"2"[..]));
        // Cut anywhere inside, a stream asks for more.
        for cut in 1..one.len() {
            match parse(&one[..cut], Framing::Stream) {
                Err(SipError::Incomplete { .. }) => {}
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
        assert_eq!(
            parse(&one[..one.len() - 1], Framing::Stream).unwrap_err(),
            SipError::Incomplete { needed: one.len() }
        );
        // A datagram that claims more body than it has keeps the rest,
        // and says so.
        let short = parse(&one[..one.len() - 1], Framing::Datagram).unwrap();
        assert_eq!(short.body, b"ab");
        assert_eq!(
            short.anomaly,
            Some(SipError::BadContentLength { offset: 49 })
        );
        assert_eq!(parse(one, Framing::Datagram).unwrap().anomaly, None);
        // Without Content-Length a datagram's body is the rest.
        let d = b"MESSAGE sip:a@h SIP/2.0\r\nCall-ID: 3\r\n\r\nhello";
        assert_eq!(parse(d, Framing::Datagram).unwrap().body, b"hello");
        assert!(parse(d, Framing::Stream).unwrap().body.is_empty());
    }

    #[test]
    fn not_sip_and_malformed() {
        for bad in [
            &b""[..],
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
            b"\x16\x03\x01\x02\x00",
            b"SIP/2.0 9x9 Bad\r\n\r\n",
        ] {
            assert!(parse(bad, Framing::Datagram).is_err(), "{bad:?}");
            assert!(!looks_like_sip(bad), "{bad:?}");
        }
        assert_eq!(
            parse(
                b"INVITE sip:a@h SIP/2.0\r\nno colon\r\n\r\n",
                Framing::Datagram
            )
            .unwrap_err(),
            SipError::BadHeader { offset: 24 }
        );
        let bad_length = b"INVITE sip:a@h SIP/2.0\r\nContent-Length: x\r\n\r\n";
        assert_eq!(
            parse(bad_length, Framing::Stream).unwrap_err(),
            SipError::BadContentLength { offset: 40 }
        );
        let m = parse(bad_length, Framing::Datagram).unwrap();
        assert_eq!(m.anomaly, Some(SipError::BadContentLength { offset: 40 }));
        assert!(m.body.is_empty());
        let mut many = b"OPTIONS sip:a@h SIP/2.0\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert!(matches!(
            parse(&many, Framing::Datagram),
            Err(SipError::TooManyHeaders { .. })
        ));
    }

    #[test]
    fn name_addr_forms() {
        let n = NameAddr::parse(b" sip:+15551234@gw;user=phone;tag=9 ").unwrap();
        assert_eq!(
            (n.uri, n.user(), n.tag),
            (&b"sip:+15551234@gw"[..], &b"+15551234"[..], Some(&b"9"[..]))
        );
        let t = NameAddr::parse(b"<tel:+4930123>").unwrap();
        assert_eq!(t.user(), b"+4930123");
        let h = NameAddr::parse(b"<sip:host.example>").unwrap();
        assert_eq!(h.user(), b"");
        assert!(NameAddr::parse(b"\"Only a name\" <>").is_none());
    }
}
