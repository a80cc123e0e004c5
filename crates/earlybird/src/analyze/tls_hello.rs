//! TLS ClientHello and ServerHello parsing (RFC 8446 section 4.1, with
//! the extensions of RFC 6066, 7301, 8422 and 8701), and the JA3 and JA4
//! client fingerprints computed from a ClientHello.
//!
//! Contract:
//! - Pure functions over bytes: [`record_message`] finds the first
//!   handshake message in the bytes of a TLS stream (the record layer,
//!   messages spanning records), [`crypto_message`] in a QUIC CRYPTO
//!   stream (no record layer); [`client_hello`] and [`server_hello`] read a
//!   message's body. Each answers `Ok(None)` when more bytes are needed,
//!   and an error that says what was wrong at which offset (of the bytes
//!   given) when they cannot be what is expected. Never panics.
//! - Lists keep the wire order and GREASE values (RFC 8701: `0x?a?a` with
//!   both bytes equal); [`is_grease`] tells them, and the fingerprints
//!   leave them out, as JA3 and JA4 say.
//! - [`ja3`]: the MD5 of `version,ciphers,extensions,groups,point formats`
//!   (decimal, `-` between values; the ClientHello's legacy version).
//! - [`ja4`]: FoxIO's JA4 client fingerprint, `a_b_c` (the part of the JA4+
//!   family under the BSD 3-Clause licence): `a` is the transport (`t` TCP,
//!   `q` QUIC), the highest supported version (else the legacy one), `d`
//!   with an SNI or `i`, the counts of cipher suites and extensions (two
//!   digits, at most 99), and the first and last characters of the first
//!   ALPN value (`00` without; the first and last hex digits of the value
//!   when either end is not an ASCII letter or digit); `b` the first 12 hex
//!   digits of the SHA-256 of the sorted cipher suites (4 hex digits each,
//!   comma separated); `c` the same of the sorted extensions less SNI and
//!   ALPN, then `_` and the signature algorithms in wire order (no `_`
//!   without signature algorithms). An empty list hashes to twelve zeros.

use std::borrow::Cow;
use std::fmt;

use md5::Md5;
use sha2::{Digest, Sha256};

use crate::schema::HEX_DIGITS as HEX;

/// A hello that cannot be parsed: what was wrong, at which byte offset of
/// the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HelloError {
    /// Offset in the bytes given to the function that failed.
    pub offset: usize,
    /// What was expected there.
    pub what: &'static str,
}

impl fmt::Display for HelloError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at offset {}", self.what, self.offset)
    }
}

impl std::error::Error for HelloError {}

/// Handshake message types this module reads.
pub const CLIENT_HELLO: u8 = 1;
/// ServerHello (also a HelloRetryRequest).
pub const SERVER_HELLO: u8 = 2;

/// Extension numbers (IANA "TLS ExtensionType Values").
const EXT_SNI: u16 = 0x0000;
const EXT_GROUPS: u16 = 0x000a;
const EXT_POINT_FORMATS: u16 = 0x000b;
const EXT_SIG_ALGS: u16 = 0x000d;
const EXT_ALPN: u16 = 0x0010;
const EXT_VERSIONS: u16 = 0x002b;
/// Encrypted Client Hello (draft-ietf-tls-esni, the code point in use).
const EXT_ECH: u16 = 0xfe0d;

/// A ClientHello's fields (lists in wire order, GREASE kept).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientHello {
    /// `legacy_version`.
    pub version: u16,
    /// Cipher suites.
    pub ciphers: Vec<u16>,
    /// Extension types.
    pub extensions: Vec<u16>,
    /// The first host_name of the server_name extension.
    pub sni: Option<String>,
    /// ALPN protocol names.
    pub alpn: Vec<Vec<u8>>,
    /// supported_versions.
    pub versions: Vec<u16>,
    /// supported_groups.
    pub groups: Vec<u16>,
    /// ec_point_formats.
    pub point_formats: Vec<u8>,
    /// signature_algorithms.
    pub sig_algs: Vec<u16>,
    /// An encrypted_client_hello extension was offered.
    pub ech: bool,
}

/// A ServerHello's fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerHello {
    /// `legacy_version`.
    pub version: u16,
    /// The chosen cipher suite.
    pub cipher: u16,
    /// Extension types.
    pub extensions: Vec<u16>,
    /// The supported_versions extension's selected version.
    pub selected: Option<u16>,
    /// ALPN protocol chosen (TLS 1.2; TLS 1.3 sends it encrypted).
    pub alpn: Option<Vec<u8>>,
}

impl ServerHello {
    /// The version the server chose.
    pub fn chosen(&self) -> u16 {
        self.selected.unwrap_or(self.version)
    }
}

/// RFC 8701 GREASE values: `0x?a?a` with both bytes equal.
pub fn is_grease(v: u16) -> bool {
    v & 0x0f0f == 0x0a0a && v >> 8 == v & 0xff
}

/// A version as text: `1.3`, `1.2`, `1.1`, `1.0`, `ssl3`, or hex.
pub fn version_name(v: u16) -> Cow<'static, str> {
    match v {
        0x0304 => "1.3".into(),
        0x0303 => "1.2".into(),
        0x0302 => "1.1".into(),
        0x0301 => "1.0".into(),
        0x0300 => "ssl3".into(),
        _ => format!("0x{v:04x}").into(),
    }
}

/// Big-endian reader over a slice that knows its offset in the input.
struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
    /// Offset of `b[0]` in the caller's input.
    base: usize,
}

impl<'a> Reader<'a> {
    fn new(b: &'a [u8], base: usize) -> Self {
        Reader { b, pos: 0, base }
    }
    fn err(&self, what: &'static str) -> HelloError {
        HelloError {
            offset: self.base + self.pos,
            what,
        }
    }
    fn left(&self) -> usize {
        self.b.len() - self.pos
    }
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], HelloError> {
        if self.left() < n {
            return Err(self.err(what));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u8(&mut self, what: &'static str) -> Result<u8, HelloError> {
        Ok(self.take(1, what)?[0])
    }
    fn u16(&mut self, what: &'static str) -> Result<u16, HelloError> {
        let s = self.take(2, what)?;
        Ok(u16::from_be_bytes([s[0], s[1]]))
    }
    /// A vector with a 1- or 2-byte length prefix, as a sub-reader.
    fn vec(&mut self, len_bytes: usize, what: &'static str) -> Result<Reader<'a>, HelloError> {
        let n = if len_bytes == 1 {
            usize::from(self.u8(what)?)
        } else {
            usize::from(self.u16(what)?)
        };
        let base = self.base + self.pos;
        Ok(Reader::new(self.take(n, what)?, base))
    }
    fn u16s(mut self, what: &'static str) -> Result<Vec<u16>, HelloError> {
        if !self.left().is_multiple_of(2) {
            return Err(self.err(what));
        }
        let mut v = Vec::with_capacity(self.left() / 2);
        while self.left() > 0 {
            v.push(self.u16(what)?);
        }
        Ok(v)
    }
}

/// A handshake message: its type and body (borrowed from the input when
/// it lies in one record, else joined from several).
pub type Message<'a> = (u8, Cow<'a, [u8]>);

/// The first handshake message in the bytes of a TLS stream (records of
/// content type 22): `(type, body)`, `Ok(None)` while incomplete, an error
/// when a record is not a handshake record.
pub fn record_message(stream: &[u8]) -> Result<Option<Message<'_>>, HelloError> {
    let mut pos = 0;
    let mut joined: Vec<u8> = Vec::new();
    loop {
        let Some(h) = stream.get(pos..pos + 5) else {
            return Ok(None);
        };
        if h[0] != 22 {
            return Err(HelloError {
                offset: pos,
                what: "not a TLS handshake record",
            });
        }
        if h[1] != 3 {
            return Err(HelloError {
                offset: pos + 1,
                what: "unknown TLS record version",
            });
        }
        let len = usize::from(u16::from_be_bytes([h[3], h[4]]));
        if len == 0 {
            return Err(HelloError {
                offset: pos + 3,
                what: "empty handshake record",
            });
        }
        let body_at = pos + 5;
        let Some(body) = stream.get(body_at..body_at + len) else {
            // The record is incomplete; a message already complete in its
            // captured part is still read.
            let have = stream.get(body_at..).unwrap_or(&[]);
            return Ok(if joined.is_empty() {
                crypto_message(have)?.map(|(t, b)| (t, Cow::Borrowed(b)))
            } else {
                joined.extend_from_slice(have);
                crypto_message(&joined)?.map(|(t, b)| (t, Cow::Owned(b.to_vec())))
            });
        };
        if joined.is_empty() {
            if let Some((t, b)) = crypto_message(body)? {
                return Ok(Some((t, Cow::Borrowed(b))));
            }
        }
        joined.extend_from_slice(body);
        if let Some((t, b)) = crypto_message(&joined)? {
            return Ok(Some((t, Cow::Owned(b.to_vec()))));
        }
        pos = body_at + len;
    }
}

/// The first handshake message of a handshake byte stream (a QUIC CRYPTO
/// stream, or the joined bodies of TLS records): `(type, body)`.
pub fn crypto_message(b: &[u8]) -> Result<Option<(u8, &[u8])>, HelloError> {
    let Some(h) = b.get(..4) else {
        return Ok(None);
    };
    let len = (usize::from(h[1]) << 16) | (usize::from(h[2]) << 8) | usize::from(h[3]);
    if h[0] != CLIENT_HELLO && h[0] != SERVER_HELLO {
        return Err(HelloError {
            offset: 0,
            what: "handshake message is not a hello",
        });
    }
    Ok(b.get(4..4 + len).map(|body| (h[0], body)))
}

/// The common start of both hellos: version, random, session id.
fn hello_start(r: &mut Reader<'_>) -> Result<u16, HelloError> {
    let v = r.u16("truncated hello version")?;
    r.take(32, "truncated hello random")?;
    r.vec(1, "truncated session id")?;
    Ok(v)
}

/// Parses a ClientHello's body (after the 4-byte message header; offsets
/// in errors are from the body's start).
pub fn client_hello(body: &[u8]) -> Result<ClientHello, HelloError> {
    let mut r = Reader::new(body, 0);
    let mut ch = ClientHello {
        version: hello_start(&mut r)?,
        ..ClientHello::default()
    };
    ch.ciphers = r
        .vec(2, "truncated cipher suites")?
        .u16s("odd cipher suites length")?;
    r.vec(1, "truncated compression methods")?;
    if r.left() == 0 {
        return Ok(ch);
    }
    let mut exts = r.vec(2, "truncated extensions")?;
    while exts.left() > 0 {
        let ty = exts.u16("truncated extension type")?;
        let mut data = exts.vec(2, "truncated extension")?;
        ch.extensions.push(ty);
        match ty {
            EXT_SNI if ch.sni.is_none() => {
                let mut list = data.vec(2, "truncated server name list")?;
                while list.left() > 0 {
                    let kind = list.u8("truncated server name type")?;
                    let name = list.vec(2, "truncated server name")?;
                    if kind == 0 && ch.sni.is_none() {
                        ch.sni = Some(String::from_utf8_lossy(name.b).into_owned());
                    }
                }
            }
            EXT_ALPN => {
                let mut list = data.vec(2, "truncated ALPN list")?;
                while list.left() > 0 {
                    ch.alpn.push(list.vec(1, "truncated ALPN name")?.b.to_vec());
                }
            }
            EXT_VERSIONS => {
                ch.versions = data
                    .vec(1, "truncated supported versions")?
                    .u16s("odd supported versions length")?;
            }
            EXT_GROUPS => {
                ch.groups = data
                    .vec(2, "truncated supported groups")?
                    .u16s("odd supported groups length")?;
            }
            EXT_POINT_FORMATS => {
                ch.point_formats = data.vec(1, "truncated point formats")?.b.to_vec();
            }
            EXT_SIG_ALGS => {
                ch.sig_algs = data
                    .vec(2, "truncated signature algorithms")?
                    .u16s("odd signature algorithms length")?;
            }
            EXT_ECH => ch.ech = true,
            _ => {}
        }
    }
    Ok(ch)
}

/// Parses a ServerHello's body (as [`client_hello`]).
pub fn server_hello(body: &[u8]) -> Result<ServerHello, HelloError> {
    let mut r = Reader::new(body, 0);
    let mut sh = ServerHello {
        version: hello_start(&mut r)?,
        ..ServerHello::default()
    };
    sh.cipher = r.u16("truncated cipher suite")?;
    r.u8("truncated compression method")?;
    if r.left() == 0 {
        return Ok(sh);
    }
    let mut exts = r.vec(2, "truncated extensions")?;
    while exts.left() > 0 {
        let ty = exts.u16("truncated extension type")?;
        let mut data = exts.vec(2, "truncated extension")?;
        sh.extensions.push(ty);
        match ty {
            EXT_VERSIONS => sh.selected = Some(data.u16("truncated selected version")?),
            EXT_ALPN => {
                let mut list = data.vec(2, "truncated ALPN list")?;
                sh.alpn = Some(list.vec(1, "truncated ALPN name")?.b.to_vec());
            }
            _ => {}
        }
    }
    Ok(sh)
}

// The fingerprints are written into one string each, digit by digit: a
// `format!` per number and a `String` per list cost a hello about 80,000
// instructions (BENCHMARKS.md, "The labellers on real handshakes").

/// Appends `b` in lower-case hex.
fn push_hex(s: &mut String, b: &[u8]) {
    for &x in b {
        s.push(char::from(HEX[usize::from(x >> 4)]));
        s.push(char::from(HEX[usize::from(x & 0x0f)]));
    }
}

/// `b` in lower-case hex.
fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    push_hex(&mut s, b);
    s
}

/// Appends `x` as 4 hex digits.
fn put_hex4(s: &mut String, x: u16) {
    push_hex(s, &x.to_be_bytes());
}

/// Appends `x` in decimal.
fn put_dec(s: &mut String, x: u16) {
    s.push_str(itoa::Buffer::new().format(x));
}

/// Appends the values of `v`, each as `put` writes it, `sep` between two.
fn push_joined(s: &mut String, v: impl Iterator<Item = u16>, sep: char, put: fn(&mut String, u16)) {
    for (i, x) in v.enumerate() {
        if i > 0 {
            s.push(sep);
        }
        put(s, x);
    }
}

/// The values of `v` that are not GREASE.
fn kept(v: &[u16]) -> impl Iterator<Item = u16> + '_ {
    v.iter().copied().filter(|x| !is_grease(*x))
}

/// The JA3 string (before hashing).
pub fn ja3_string(ch: &ClientHello) -> String {
    let mut s = String::with_capacity(
        6 * (ch.ciphers.len() + ch.extensions.len() + ch.groups.len())
            + 4 * ch.point_formats.len()
            + 10,
    );
    put_dec(&mut s, ch.version);
    for v in [&ch.ciphers, &ch.extensions, &ch.groups] {
        s.push(',');
        push_joined(&mut s, kept(v), '-', put_dec);
    }
    s.push(',');
    push_joined(
        &mut s,
        ch.point_formats.iter().map(|&p| u16::from(p)),
        '-',
        put_dec,
    );
    s
}

/// The JA3 fingerprint: MD5 of [`ja3_string`], lower-case hex.
pub fn ja3(ch: &ClientHello) -> String {
    hex(&Md5::digest(ja3_string(ch).as_bytes()))
}

/// Appends the first 12 hex digits of the SHA-256 of `s`; twelve zeros
/// when empty.
fn push_hash12(out: &mut String, s: &str) {
    if s.is_empty() {
        out.push_str("000000000000");
    } else {
        push_hex(out, &Sha256::digest(s.as_bytes())[..6]);
    }
}

/// Appends JA4's two ALPN characters.
fn push_ja4_alpn(out: &mut String, alpn: &[Vec<u8>]) {
    let Some(first) = alpn.first().filter(|a| !a.is_empty()) else {
        out.push_str("00");
        return;
    };
    let (a, z) = (first[0], first[first.len() - 1]);
    if a.is_ascii_alphanumeric() && z.is_ascii_alphanumeric() {
        out.push(char::from(a));
        out.push(char::from(z));
    } else {
        // The first and the last hex digit of the whole value.
        out.push(char::from(HEX[usize::from(a >> 4)]));
        out.push(char::from(HEX[usize::from(z & 0x0f)]));
    }
}

/// JA4's two characters of the highest TLS version offered.
fn ja4_version(v: u16) -> &'static str {
    match v {
        0x0304 => "13",
        0x0303 => "12",
        0x0302 => "11",
        0x0301 => "10",
        0x0300 => "s3",
        0x0200 => "s2",
        0x0100 => "s1",
        0xfeff => "d1",
        0xfefd => "d2",
        0xfefc => "d3",
        _ => "00",
    }
}

/// The JA4 fingerprint of a ClientHello sent over TCP (`quic` false) or
/// in a QUIC Initial (`quic` true).
pub fn ja4(ch: &ClientHello, quic: bool) -> String {
    // The kept ciphers, then the kept extensions, in one buffer.
    let mut ids: Vec<u16> = Vec::with_capacity(ch.ciphers.len() + ch.extensions.len());
    ids.extend(kept(&ch.ciphers));
    let n_ciphers = ids.len();
    ids.extend(kept(&ch.extensions));
    let (ciphers, exts) = ids.split_at_mut(n_ciphers);
    let version = ja4_version(kept(&ch.versions).max().unwrap_or(ch.version));
    let mut out = String::with_capacity(36);
    out.push(if quic { 'q' } else { 't' });
    out.push_str(version);
    out.push(if exts.contains(&EXT_SNI) { 'd' } else { 'i' });
    for n in [ciphers.len(), exts.len()] {
        let n = n.min(99) as u8;
        out.push(char::from(b'0' + n / 10));
        out.push(char::from(b'0' + n % 10));
    }
    push_ja4_alpn(&mut out, &ch.alpn);
    out.push('_');
    ciphers.sort_unstable();
    let mut list = String::with_capacity(5 * ciphers.len().max(exts.len() + ch.sig_algs.len()));
    push_joined(&mut list, ciphers.iter().copied(), ',', put_hex4);
    push_hash12(&mut out, &list);
    out.push('_');
    // The extensions but SNI and ALPN, moved to the front, sorted.
    let mut n = 0;
    for i in 0..exts.len() {
        let x = exts[i];
        if x != EXT_SNI && x != EXT_ALPN {
            exts[n] = x;
            n += 1;
        }
    }
    let e = &mut exts[..n];
    if e.is_empty() {
        push_hash12(&mut out, "");
        return out;
    }
    e.sort_unstable();
    list.clear();
    push_joined(&mut list, e.iter().copied(), ',', put_hex4);
    let mut sigs = kept(&ch.sig_algs).peekable();
    if sigs.peek().is_some() {
        list.push('_');
        push_joined(&mut list, sigs, ',', put_hex4);
    }
    push_hash12(&mut out, &list);
    out
}

#[cfg(test)]
mod tests;
