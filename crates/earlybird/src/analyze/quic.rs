//! QUIC Initial packets: their header, the removal of their protection
//! and the CRYPTO frames inside, and Google QUIC's CHLO.
//!
//! Contract:
//! - [`initial_keys`]: the Initial keys (RFC 9001 section 5.2) of QUIC v1,
//!   v2 (RFC 9369: its salt and `quicv2` labels), the drafts 22 to 32 (their
//!   three salts) and the vendor versions built on them (Facebook mvfst
//!   0xfaceb001/2, Google T050/T051), for the client's or the server's
//!   packets, from the client's first Destination Connection ID. Other
//!   versions: `None`.
//! - [`long_header`] reads one long-header packet at the start of a
//!   datagram (coalesced packets follow it: [`LongHeader::len`] is where
//!   the next starts); [`open_initial`] removes header protection (AES-128,
//!   RFC 9001 section 5.4.3) and the AEAD (AES-128-GCM) and gives the
//!   plaintext frames; [`crypto_frames`] walks them (PADDING, PING, ACK,
//!   CRYPTO, CONNECTION_CLOSE: the frames an Initial packet may carry) and
//!   hands every CRYPTO frame's offset and data to the caller.
//! - [`gquic_sni`]: the SNI tag of a Google QUIC client hello found in a
//!   datagram's clear bytes (Q043 to Q049) or in a Q050 Initial packet's
//!   opened payload.
//! - Errors say what was wrong at which offset of the datagram (or of the
//!   plaintext, for frames); a datagram cut by the snap length is an error
//!   ([`QuicError::what`] says so). Pure functions; never panic.

use aes::cipher::{BlockEncrypt, KeyInit};
use aes::Aes128;
use aes_gcm::aead::AeadInPlace;
use aes_gcm::{Aes128Gcm, Nonce, Tag};
use hkdf::Hkdf;
use sha2::Sha256;

/// A QUIC packet that cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuicError {
    /// Offset in the datagram (frames: in the plaintext payload).
    pub offset: usize,
    /// What was wrong there.
    pub what: &'static str,
}

impl std::fmt::Display for QuicError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at offset {}", self.what, self.offset)
    }
}

impl std::error::Error for QuicError {}

fn err<T>(offset: usize, what: &'static str) -> Result<T, QuicError> {
    Err(QuicError { offset, what })
}

/// QUIC version 1 (RFC 9000).
pub const V1: u32 = 0x0000_0001;
/// QUIC version 2 (RFC 9369).
pub const V2: u32 = 0x6b33_43cf;
/// Google QUIC Q050: IETF-style protected Initial packets carrying a CHLO
/// (read with [`gquic_sni`] from the opened payload).
pub const Q050: u32 = 0x5130_3530;
/// Google T050: TLS in IETF-style packets, CRYPTO frames of type 0x08.
const T050: u32 = 0x5430_3530;
/// Google T051 (as T050).
const T051: u32 = 0x5430_3531;

const SALT_V1: [u8; 20] = [
    0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad,
    0xcc, 0xbb, 0x7f, 0x0a,
];
const SALT_V2: [u8; 20] = [
    0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93, 0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb,
    0xf9, 0xbd, 0x2e, 0xd9,
];
/// draft-ietf-quic-tls-29 to -32.
const SALT_D29: [u8; 20] = [
    0xaf, 0xbf, 0xec, 0x28, 0x99, 0x93, 0xd2, 0x4c, 0x9e, 0x97, 0x86, 0xf1, 0x9c, 0x61, 0x11, 0xe0,
    0x43, 0x90, 0xa8, 0x99,
];
/// draft-ietf-quic-tls-23 to -28.
const SALT_D23: [u8; 20] = [
    0xc3, 0xee, 0xf7, 0x12, 0xc7, 0x2e, 0xbb, 0x5a, 0x11, 0xa7, 0xd2, 0x43, 0x2b, 0xb4, 0x63, 0x65,
    0xbe, 0xf9, 0xf5, 0x02,
];

/// draft-ietf-quic-tls-22.
const SALT_D22: [u8; 20] = [
    0x7f, 0xbc, 0xdb, 0x0e, 0x7c, 0x66, 0xbb, 0xe9, 0x19, 0x3a, 0x96, 0xcd, 0x21, 0x51, 0x9e, 0xbd,
    0x7a, 0x02, 0x64, 0x4a,
];
/// Google's Q050 (its crypto handshake in IETF-style Initial packets).
const SALT_Q50: [u8; 20] = [
    0x50, 0x45, 0x74, 0xef, 0xd0, 0x66, 0xfe, 0x2f, 0x9d, 0x94, 0x5c, 0xfc, 0xdb, 0xd3, 0xa7, 0xf0,
    0xd3, 0xb5, 0x6b, 0x45,
];
/// Google's T050 (TLS handshake in IETF QUIC packets).
const SALT_T50: [u8; 20] = [
    0x7f, 0xf5, 0x79, 0xe5, 0xac, 0xd0, 0x72, 0x91, 0x55, 0x80, 0x30, 0x4c, 0x43, 0xa2, 0x36, 0x7c,
    0x60, 0x48, 0x83, 0x10,
];
/// Google's T051.
const SALT_T51: [u8; 20] = [
    0x7a, 0x4e, 0xde, 0xf4, 0xe7, 0xcc, 0xee, 0x5f, 0xa4, 0x50, 0x6c, 0x19, 0x12, 0x4f, 0xc8, 0xcc,
    0xda, 0x6e, 0x03, 0x3d,
];

/// The Initial salt and whether the labels are v2's, for a version whose
/// Initial packets this module opens: v1, v2, the drafts 22 to 32,
/// Facebook's mvfst versions of drafts 22 and 27, Google's Q050, T050 and
/// T051, and the versions reserved to force version negotiation
/// (`0x?a?a?a?a`, RFC 9000 section 15), whose clients protect Initial
/// packets as v1's (a wrong salt cannot go unnoticed: the packet does not
/// authenticate).
fn version_params(version: u32) -> Option<(&'static [[u8; 20]], bool)> {
    match version {
        V1 => Some((&[SALT_V1], false)),
        V2 => Some((&[SALT_V2], true)),
        0xff00_001d..=0xff00_0020 => Some((&[SALT_D29], false)),
        0xff00_0017..=0xff00_001c | 0xface_b002 => Some((&[SALT_D23], false)),
        0xff00_0016 | 0xface_b001 => Some((&[SALT_D22], false)),
        Q050 => Some((&[SALT_Q50], false)),
        T050 => Some((&[SALT_T50], false)),
        T051 => Some((&[SALT_T51], false)),
        v if v & 0x0f0f_0f0f == 0x0a0a_0a0a => Some((&[SALT_V1, SALT_D29], false)),
        _ => None,
    }
}

/// How many Initial salts a version may use (several for the versions
/// reserved to force negotiation: their clients protect as v1 or as
/// draft 29); 0 for versions this module does not open.
pub fn salt_count(version: u32) -> usize {
    version_params(version).map_or(0, |(s, _)| s.len())
}

/// True for the versions whose Initial packets this module opens.
pub fn supported(version: u32) -> bool {
    version_params(version).is_some()
}

/// True for Google QUIC versions `Q0xx` (their client hello is read from
/// the clear bytes of Q043 to Q049).
pub fn is_gquic(version: u32) -> bool {
    version >> 16 == u32::from_be_bytes(*b"Q0\0\0") >> 16
}

/// A version as text for records: `1`, `2`, `draft-29`, `Q046`, or hex.
pub fn version_name(version: u32) -> String {
    match version {
        V1 => "1".into(),
        V2 => "2".into(),
        0xff00_0000..=0xff00_00ff => format!("draft-{}", version & 0xff),
        v if is_gquic(v) || matches!(v, T050 | T051) => {
            String::from_utf8_lossy(&v.to_be_bytes()).into_owned()
        }
        v => format!("0x{v:08x}"),
    }
}

/// Keys protecting one side's Initial packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitialKeys {
    /// AEAD key.
    pub key: [u8; 16],
    /// AEAD IV.
    pub iv: [u8; 12],
    /// Header protection key.
    pub hp: [u8; 16],
}

/// HKDF-Expand-Label of TLS 1.3 (RFC 8446 section 7.1), empty context.
fn expand_label(prk: &Hkdf<Sha256>, label: &str, out: &mut [u8]) {
    // The HkdfLabel structure in its parts, with no buffer: the output's
    // length, the label's ("tls13 " and `label`, short constants here),
    // the label, an empty context.
    let length = (out.len() as u16).to_be_bytes();
    let label_len = [(6 + label.len()) as u8];
    let info: [&[u8]; 5] = [&length, &label_len, b"tls13 ", label.as_bytes(), &[0]];
    // Lengths here are at most 32 bytes, far below HKDF's limit.
    let _ = prk.expand_multi_info(&info, out);
}

/// The Initial keys of `version` for the client's packets (`server`
/// false) or the server's, from the client's first Destination
/// Connection ID; `None` for versions this module does not open.
pub fn initial_keys(version: u32, dcid: &[u8], server: bool) -> Option<InitialKeys> {
    initial_keys_with(0, version, dcid, server)
}

/// As [`initial_keys`], with the version's `salt`-th salt (see
/// [`salt_count`]).
pub fn initial_keys_with(
    salt: usize,
    version: u32,
    dcid: &[u8],
    server: bool,
) -> Option<InitialKeys> {
    let (salts, v2) = version_params(version)?;
    let salt = salts.get(salt)?;
    let (initial, _) = Hkdf::<Sha256>::extract(Some(salt), dcid);
    let initial = Hkdf::<Sha256>::from_prk(&initial).ok()?;
    let mut secret = [0u8; 32];
    expand_label(
        &initial,
        if server { "server in" } else { "client in" },
        &mut secret,
    );
    let side = Hkdf::<Sha256>::from_prk(&secret).ok()?;
    let mut k = InitialKeys {
        key: [0; 16],
        iv: [0; 12],
        hp: [0; 16],
    };
    let (lk, li, lh) = if v2 {
        ("quicv2 key", "quicv2 iv", "quicv2 hp")
    } else {
        ("quic key", "quic iv", "quic hp")
    };
    expand_label(&side, lk, &mut k.key);
    expand_label(&side, li, &mut k.iv);
    expand_label(&side, lh, &mut k.hp);
    Some(k)
}

/// A long-header packet's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongHeader<'a> {
    /// The first byte (protected bits as on the wire).
    pub first: u8,
    /// Version (0: version negotiation).
    pub version: u32,
    /// Destination Connection ID.
    pub dcid: &'a [u8],
    /// Source Connection ID.
    pub scid: &'a [u8],
    /// True for an Initial packet (of a version this module knows the
    /// packet types of).
    pub initial: bool,
    /// Offset of the (protected) packet number.
    pub pn_offset: usize,
    /// Length of the whole packet in the datagram, from its first byte
    /// (from the Length field of Initial, 0-RTT and Handshake packets of
    /// the versions this module knows; the rest of the datagram for
    /// others and Retry).
    pub len: usize,
}

/// A variable-length integer (RFC 9000 section 16) at `*pos`.
fn varint(b: &[u8], pos: &mut usize, what: &'static str) -> Result<u64, QuicError> {
    let Some(&first) = b.get(*pos) else {
        return err(*pos, what);
    };
    let n = 1usize << (first >> 6);
    let Some(bytes) = b.get(*pos..*pos + n) else {
        return err(*pos, what);
    };
    let mut v = u64::from(first & 0x3f);
    for x in &bytes[1..] {
        v = (v << 8) | u64::from(*x);
    }
    *pos += n;
    Ok(v)
}

/// Reads the long header of the packet starting `d` (see the module docs).
pub fn long_header(d: &[u8]) -> Result<LongHeader<'_>, QuicError> {
    let Some(&first) = d.first() else {
        return err(0, "empty datagram");
    };
    if first & 0x80 == 0 {
        return err(0, "not a long header");
    }
    let Some(v) = d.get(1..5) else {
        return err(1, "truncated version");
    };
    let version = u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
    let mut pos = 5;
    let cid = |pos: &mut usize, what| -> Result<&[u8], QuicError> {
        let n = usize::from(*d.get(*pos).ok_or(QuicError { offset: *pos, what })?);
        let c = d
            .get(*pos + 1..*pos + 1 + n)
            .ok_or(QuicError { offset: *pos, what })?;
        *pos += 1 + n;
        Ok(c)
    };
    if is_gquic(version) && version != Q050 {
        return err(1, "Google QUIC header");
    }
    let dcid = cid(&mut pos, "truncated destination connection id")?;
    let scid = cid(&mut pos, "truncated source connection id")?;
    let ty = (first >> 4) & 3;
    // Packet types: v1 and the drafts Initial 0, 0-RTT 1, Handshake 2,
    // Retry 3; v2 Retry 0, Initial 1, 0-RTT 2, Handshake 3.
    let (initial, retry) = match version {
        V2 => (ty == 1, ty == 0),
        _ if supported(version) => (ty == 0, ty == 3),
        _ => (false, true),
    };
    let mut h = LongHeader {
        first,
        version,
        dcid,
        scid,
        initial,
        pn_offset: pos,
        len: d.len(),
    };
    if retry {
        return Ok(h);
    }
    if initial {
        let token = varint(d, &mut pos, "truncated token length")?;
        pos = pos.saturating_add(usize::try_from(token).unwrap_or(usize::MAX));
        if pos > d.len() {
            return err(pos, "truncated token");
        }
    }
    let len = varint(d, &mut pos, "truncated length")?;
    h.pn_offset = pos;
    h.len = pos.saturating_add(usize::try_from(len).unwrap_or(usize::MAX));
    Ok(h)
}

/// Removes an Initial packet's protection (`d` starts with the packet, as
/// [`long_header`] read it); the plaintext frames.
pub fn open_initial(
    d: &[u8],
    h: &LongHeader<'_>,
    keys: &InitialKeys,
) -> Result<Vec<u8>, QuicError> {
    if h.len > d.len() {
        return err(
            d.len(),
            "Initial packet shorter than its length (snap length?)",
        );
    }
    let sample_at = h.pn_offset + 4;
    let Some(sample) = d.get(sample_at..sample_at + 16) else {
        // The offset where the bytes end, inside the input.
        return err(
            sample_at.min(d.len()),
            "Initial packet too short for its header protection sample",
        );
    };
    let mut mask = aes::Block::clone_from_slice(sample);
    Aes128::new(&keys.hp.into()).encrypt_block(&mut mask);
    let first = h.first ^ (mask[0] & 0x0f);
    let pn_len = usize::from(first & 3) + 1;
    let mut header = d[..h.pn_offset + pn_len].to_vec();
    header[0] = first;
    let mut pn = 0u64;
    for i in 0..pn_len {
        header[h.pn_offset + i] ^= mask[1 + i];
        pn = (pn << 8) | u64::from(header[h.pn_offset + i]);
    }
    // A Length field that ends inside the packet number is refused, not
    // sliced (fuzz input quic_initial crash-c231e12e).
    let Some(body) = d.get(h.pn_offset + pn_len..h.len) else {
        return err(
            h.pn_offset,
            "Initial packet's length ends inside its packet number",
        );
    };
    if body.len() < 16 {
        return err(h.pn_offset + pn_len, "Initial payload shorter than its tag");
    }
    let (ct, tag) = body.split_at(body.len() - 16);
    let mut nonce = keys.iv;
    for (i, b) in pn.to_be_bytes().iter().enumerate() {
        nonce[4 + i] ^= b;
    }
    let mut plain = ct.to_vec();
    Aes128Gcm::new(&keys.key.into())
        .decrypt_in_place_detached(
            Nonce::from_slice(&nonce),
            &header,
            &mut plain,
            Tag::from_slice(tag),
        )
        .or_else(|_| err(h.pn_offset, "Initial packet does not authenticate"))?;
    Ok(plain)
}

/// Walks the frames of an Initial packet's plaintext, calling `crypto`
/// with each CRYPTO frame's stream offset and data.
pub fn crypto_frames(p: &[u8], crypto: impl FnMut(u64, &[u8])) -> Result<(), QuicError> {
    crypto_frames_of(V1, p, crypto)
}

/// As [`crypto_frames`] for the frames of `version` (Google's T050 and
/// T051 number the CRYPTO frame 0x08).
pub fn crypto_frames_of(
    version: u32,
    p: &[u8],
    mut crypto: impl FnMut(u64, &[u8]),
) -> Result<(), QuicError> {
    let crypto_type = if matches!(version, T050 | T051) {
        0x08
    } else {
        0x06
    };
    let mut pos = 0;
    while pos < p.len() {
        let at = pos;
        let ty = varint(p, &mut pos, "truncated frame type")?;
        match ty {
            // A run of PADDING (a client's Initial is padded to 1,200
            // bytes) skipped at once rather than frame by frame.
            0x00 => {
                pos = p[pos..]
                    .iter()
                    .position(|&b| b != 0)
                    .map_or(p.len(), |n| pos + n)
            }
            0x01 => {}
            t if t == crypto_type => {
                let off = varint(p, &mut pos, "truncated CRYPTO offset")?;
                let len = varint(p, &mut pos, "truncated CRYPTO length")?;
                let end = pos.saturating_add(usize::try_from(len).unwrap_or(usize::MAX));
                let Some(data) = p.get(pos..end) else {
                    return err(pos, "truncated CRYPTO data");
                };
                crypto(off, data);
                pos = end;
            }
            0x02 | 0x03 => {
                varint(p, &mut pos, "truncated ACK")?;
                varint(p, &mut pos, "truncated ACK")?;
                let ranges = varint(p, &mut pos, "truncated ACK")?;
                varint(p, &mut pos, "truncated ACK")?;
                for _ in 0..ranges.min(p.len() as u64) {
                    varint(p, &mut pos, "truncated ACK range")?;
                    varint(p, &mut pos, "truncated ACK range")?;
                }
                if ty == 0x03 {
                    for _ in 0..3 {
                        varint(p, &mut pos, "truncated ACK ECN counts")?;
                    }
                }
            }
            0x1c => {
                varint(p, &mut pos, "truncated CONNECTION_CLOSE")?;
                varint(p, &mut pos, "truncated CONNECTION_CLOSE")?;
                let n = varint(p, &mut pos, "truncated CONNECTION_CLOSE")?;
                pos = pos.saturating_add(usize::try_from(n).unwrap_or(usize::MAX));
                if pos > p.len() {
                    return err(at, "truncated CONNECTION_CLOSE reason");
                }
            }
            _ => return err(at, "frame not allowed in an Initial packet"),
        }
    }
    Ok(())
}

/// The SNI of a Google QUIC client hello (`CHLO`, a tag-value map) found
/// in the clear bytes of a datagram: `Ok(None)` when no CHLO is there.
pub fn gquic_sni(d: &[u8]) -> Result<Option<String>, QuicError> {
    let Some(at) = d.windows(4).position(|w| w == b"CHLO") else {
        return Ok(None);
    };
    let Some(h) = d.get(at + 4..at + 8) else {
        return err(at + 4, "truncated CHLO");
    };
    let n = usize::from(u16::from_le_bytes([h[0], h[1]]));
    let index = at + 8;
    let values = index + n * 8;
    if values > d.len() {
        return err(index, "CHLO tag index past the datagram (snap length?)");
    }
    let mut start = 0usize;
    for i in 0..n {
        let e = &d[index + i * 8..index + i * 8 + 8];
        let end = u32::from_le_bytes([e[4], e[5], e[6], e[7]]) as usize;
        if end < start {
            return err(index + i * 8 + 4, "CHLO value offsets go backwards");
        }
        if &e[..4] == b"SNI\0" {
            let Some(v) = d.get(values + start..values + end) else {
                return err(
                    values + start,
                    "CHLO SNI value past the datagram (snap length?)",
                );
            };
            return Ok(Some(String::from_utf8_lossy(v).into_owned()));
        }
        start = end;
    }
    Ok(None)
}

#[cfg(test)]
mod tests;

/// RFC 9001 and RFC 9369 Appendix A packets, for the tests.
#[cfg(test)]
pub(crate) mod vectors;
