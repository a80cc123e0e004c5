//! Allocation-free text formatting of record values into a byte buffer.
//!
//! Contract: [`TextBuf`] appends the text of one value at a time to a byte
//! buffer allocated once (no allocation per record); the caller guarantees
//! room for a whole record beforehand (bounded by [`MAX_FIELD`] per scalar
//! field and [`MAX_EARLY_VALUE`] per early value), so writing cannot fail.
//! Addresses are written exactly as [`crate::decode::fmt_addr`] writes them
//! (IPv4-mapped → dotted quad, otherwise RFC 5952 IPv6); MACs as lower-case
//! `aa:bb:cc:dd:ee:ff`; floats rounded to at most
//! [`super::fields::FLOAT_DECIMALS`] (3) decimals. The escape functions run
//! once per output (for class names), not per record.

const HEX: &[u8; 16] = b"0123456789abcdef";

/// "00".."99", two bytes per number.
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Largest magnitude written with fixed decimals: `v * 1000` is still an
/// exact integer in an `f64` below 2^53.
const FIXED_LIMIT: f64 = 9_007_199_254_740.0;

/// Most bytes one scalar field can take, separator and JSON key included
/// (an IPv6 address in quotes after a 21-byte key is the longest).
pub const MAX_FIELD: usize = 80;

/// Most bytes one early-packet value takes, separator included.
pub const MAX_EARLY_VALUE: usize = 12;

/// A byte buffer written through a cursor: its bytes are allocated (and
/// zeroed) once, so writing a value is a bounds-checked store, not a `Vec`
/// growth check and a `memcpy` call. The caller makes sure a record fits
/// (see [`TextBuf::room`]); a value that does not fit would panic on the
/// bounds check, which the record-size bound in `super` rules out.
pub struct TextBuf {
    bytes: Vec<u8>,
    pos: usize,
}

impl TextBuf {
    /// A buffer holding up to `cap` bytes.
    pub fn new(cap: usize) -> Self {
        TextBuf {
            bytes: vec![0; cap],
            pos: 0,
        }
    }

    /// The bytes written so far.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.pos]
    }

    /// Number of bytes written.
    #[inline]
    pub fn len(&self) -> usize {
        self.pos
    }

    /// True when nothing is written.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pos == 0
    }

    /// Forgets the written bytes.
    #[inline]
    pub fn clear(&mut self) {
        self.pos = 0;
    }

    /// Free room left.
    #[inline]
    pub fn room(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// Appends one byte.
    #[inline]
    pub fn byte(&mut self, b: u8) {
        self.bytes[self.pos] = b;
        self.pos += 1;
    }

    /// Appends bytes.
    #[inline]
    pub fn bytes(&mut self, s: &[u8]) {
        self.bytes[self.pos..self.pos + s.len()].copy_from_slice(s);
        self.pos += s.len();
    }

    /// Appends an unsigned integer, digits written in place.
    #[inline(always)]
    pub fn u64(&mut self, v: u64) {
        if v < 10 {
            self.byte(b'0' + v as u8);
            return;
        }
        let len = v.ilog10() as usize + 1;
        let out = &mut self.bytes[self.pos..self.pos + len];
        let mut i = len;
        let mut v = v;
        while v >= 10_000 {
            let r = (v % 10_000) as u32;
            v /= 10_000;
            let (h, l) = ((r / 100) as usize * 2, (r % 100) as usize * 2);
            i -= 4;
            out[i..i + 4].copy_from_slice(&[PAIRS[h], PAIRS[h + 1], PAIRS[l], PAIRS[l + 1]]);
        }
        if v >= 100 {
            let r = (v % 100) as usize * 2;
            v /= 100;
            i -= 2;
            out[i..i + 2].copy_from_slice(&[PAIRS[r], PAIRS[r + 1]]);
        }
        if v >= 10 {
            let r = v as usize * 2;
            out[0] = PAIRS[r];
            out[1] = PAIRS[r + 1];
        } else {
            out[0] = b'0' + v as u8;
        }
        self.pos += len;
    }

    /// Appends a float rounded to at most 3 decimals, trailing zeros dropped
    /// (`1.5`, `0.333`, `12`). Magnitudes of 2^53/1000 or more are written in
    /// the shortest form that reads back exactly. Returns `false` and writes
    /// nothing when the value is NaN or infinite (the caller decides how to
    /// write that).
    #[inline]
    pub fn f64(&mut self, v: f64) -> bool {
        if !v.is_finite() {
            return false;
        }
        let a = v.abs();
        if a >= FIXED_LIMIT {
            let mut b = ryu::Buffer::new();
            self.bytes(b.format_finite(v).as_bytes());
            return true;
        }
        // a * 1000 < 2^53 is exact; + 0.5 and truncation round half up
        // (`f64::round` is a library call on baseline x86-64).
        let m = (a * 1000.0 + 0.5) as u64;
        if v < 0.0 && m != 0 {
            self.byte(b'-');
        }
        self.u64(m / 1000);
        let frac = (m % 1000) as usize;
        if frac != 0 {
            let hi = frac / 10 * 2;
            let lo = b'0' + (frac % 10) as u8;
            self.byte(b'.');
            self.byte(PAIRS[hi]);
            if lo != b'0' {
                self.byte(PAIRS[hi + 1]);
                self.byte(lo);
            } else if PAIRS[hi + 1] != b'0' {
                self.byte(PAIRS[hi + 1]);
            }
        }
        true
    }

    /// Appends a 16-bit group in lower-case hex without leading zeros.
    #[inline]
    fn hex16(&mut self, g: u16) {
        let digits = if g == 0 {
            1
        } else {
            (19 - g.leading_zeros() as usize) / 4
        };
        for k in (0..digits).rev() {
            self.byte(HEX[((g >> (4 * k)) & 0xf) as usize]);
        }
    }

    /// Appends an address stored in [`crate::decode::Decoded`] form, with
    /// the same text as [`crate::decode::fmt_addr`].
    pub fn addr(&mut self, a: &[u8; 16]) {
        if a[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] {
            for (i, o) in a[12..].iter().enumerate() {
                if i > 0 {
                    self.byte(b'.');
                }
                self.u64(u64::from(*o));
            }
            return;
        }
        let mut g = [0u16; 8];
        for (i, w) in g.iter_mut().enumerate() {
            *w = u16::from_be_bytes([a[2 * i], a[2 * i + 1]]);
        }
        // Longest run of zero groups (first one on ties), compressed when ≥ 2.
        let (mut best_start, mut best_len) = (8usize, 0usize);
        let (mut cur_start, mut cur_len) = (0usize, 0usize);
        for (i, &w) in g.iter().enumerate() {
            if w == 0 {
                if cur_len == 0 {
                    cur_start = i;
                }
                cur_len += 1;
                if cur_len > best_len {
                    best_start = cur_start;
                    best_len = cur_len;
                }
            } else {
                cur_len = 0;
            }
        }
        if best_len < 2 {
            best_len = 0;
            best_start = 8;
        }
        let mut i = 0;
        while i < 8 {
            if i == best_start {
                self.bytes(b"::");
                i += best_len;
                continue;
            }
            if i > 0 && i != best_start + best_len {
                self.byte(b':');
            }
            self.hex16(g[i]);
            i += 1;
        }
    }

    /// Appends a MAC address as `aa:bb:cc:dd:ee:ff`.
    #[inline]
    pub fn mac(&mut self, m: &[u8; 6]) {
        let mut out = [b':'; 17];
        for (i, b) in m.iter().enumerate() {
            out[3 * i] = HEX[(b >> 4) as usize];
            out[3 * i + 1] = HEX[(b & 0xf) as usize];
        }
        self.bytes(&out);
    }
}

/// A CSV field holding `s`: quoted (with doubled quotes) only when it
/// contains a comma, quote, CR or LF, or starts or ends with a space.
pub fn csv_field(s: &str) -> Vec<u8> {
    let needs = s.bytes().any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r'))
        || s.starts_with(' ')
        || s.ends_with(' ');
    if !needs {
        return s.as_bytes().to_vec();
    }
    let mut out = Vec::with_capacity(s.len() + 2);
    out.push(b'"');
    for b in s.bytes() {
        if b == b'"' {
            out.push(b'"');
        }
        out.push(b);
    }
    out.push(b'"');
    out
}

/// A JSON string literal (with its quotes) holding `s`.
pub fn json_string(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 2);
    out.push(b'"');
    for b in s.bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..=0x1f => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(b >> 4) as usize]);
                out.push(HEX[(b & 0xf) as usize]);
            }
            _ => out.push(b),
        }
    }
    out.push(b'"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{fmt_addr, map_v4};

    fn addr(a: &[u8; 16]) -> String {
        let mut b = TextBuf::new(MAX_FIELD);
        b.addr(a);
        String::from_utf8(b.as_slice().to_vec()).unwrap()
    }

    fn float(v: f64) -> String {
        let mut b = TextBuf::new(MAX_FIELD);
        if !b.f64(v) {
            return "<none>".into();
        }
        String::from_utf8(b.as_slice().to_vec()).unwrap()
    }

    #[test]
    fn integers_match_std() {
        let mut b = TextBuf::new(64);
        let mut cases = vec![0, 9, 10, 99, 100, 101, 999, 1000, u64::MAX, u64::MAX - 1];
        for p in 0..20 {
            cases.push(10u64.pow(p));
            cases.push(10u64.pow(p) - 1);
            cases.push(10u64.pow(p) + 7);
        }
        for v in cases {
            b.clear();
            b.u64(v);
            assert_eq!(b.as_slice(), v.to_string().as_bytes());
        }
    }

    #[test]
    fn addresses_match_fmt_addr() {
        let mut cases: Vec<[u8; 16]> = vec![
            [0; 16],
            map_v4([0, 0, 0, 0]),
            map_v4([192, 168, 1, 255]),
            map_v4([10, 0, 0, 1]),
            "2001:db8::1"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
            "::1".parse::<std::net::Ipv6Addr>().unwrap().octets(),
            "1::".parse::<std::net::Ipv6Addr>().unwrap().octets(),
            "1:0:0:2:0:0:0:3"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
            "1:0:0:2:0:0:3:4"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
            "1:0:2:3:4:5:6:7"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
            "fe80::abcd:ef01:2345:6789"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
            "::1.2.3.4".parse::<std::net::Ipv6Addr>().unwrap().octets(),
            "64:ff9b::1.2.3.4"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
        ];
        // Pseudo-random addresses with many zero groups (xorshift).
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            let mut a = [0u8; 16];
            for g in 0..8 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // About one group in three stays zero; some are short.
                let mask = match x % 15 {
                    0..=4 => 0x00,
                    5..=7 => 0x0f,
                    _ => 0xff,
                };
                a[2 * g] = (x >> 8) as u8 & mask;
                a[2 * g + 1] = if mask == 0 { 0 } else { (x >> 16) as u8 };
            }
            cases.push(a);
        }
        for a in &cases {
            assert_eq!(addr(a), fmt_addr(a), "{a:?}");
        }
    }

    #[test]
    fn macs_are_lower_hex() {
        let mut b = TextBuf::new(17);
        b.mac(&[0x00, 0x1b, 0xAC, 0xff, 0x09, 0x10]);
        assert_eq!(b.as_slice(), b"00:1b:ac:ff:09:10");
        assert_eq!(b.room(), 0);
    }

    #[test]
    fn floats_round_to_three_decimals() {
        assert_eq!(float(0.0), "0");
        assert_eq!(float(-0.0), "0");
        assert_eq!(float(1.5), "1.5");
        assert_eq!(float(1.0 / 3.0), "0.333");
        assert_eq!(float(2.0 / 3.0), "0.667");
        assert_eq!(float(0.0005), "0.001");
        assert_eq!(float(0.0004), "0");
        assert_eq!(float(1499.9996), "1500");
        assert_eq!(float(12.05), "12.05");
        assert_eq!(float(-3.25), "-3.25");
        assert_eq!(float(-0.0001), "0");
        assert_eq!(float(1e12 + 0.125), "1000000000000.125");
        assert_eq!(float(1e13), "10000000000000.0");
        assert_eq!(float(1e300), "1e300");
        assert_eq!(float(f64::NAN), "<none>");
        assert_eq!(float(f64::INFINITY), "<none>");
    }

    #[test]
    fn floats_read_back_within_half_a_thousandth() {
        let mut x: u64 = 12345;
        for _ in 0..50_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = (x >> 11) as f64 / (1u64 << 53) as f64 * 10f64.powi((x % 13) as i32);
            let back: f64 = float(v).parse().unwrap();
            assert!((back - v).abs() <= 0.0005 + v * 1e-15, "{v} -> {back}");
        }
    }

    #[test]
    fn csv_quotes_only_when_needed() {
        assert_eq!(csv_field("tls"), b"tls");
        assert_eq!(csv_field("a,b"), b"\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), b"\"say \"\"hi\"\"\"");
        assert_eq!(csv_field(" x"), b"\" x\"");
    }

    #[test]
    fn json_strings_escape_controls() {
        assert_eq!(
            json_string("a\"b\\c\u{1}é"),
            "\"a\\\"b\\\\c\\u0001é\"".as_bytes()
        );
        let v: String = serde_json::from_slice(&json_string("x\ny\t\u{1f}")).unwrap();
        assert_eq!(v, "x\ny\t\u{1f}");
    }
}
