//! Allocation-free text formatting of record values into a byte buffer.
//!
//! Contract: every `put_*` function appends the text of one value to a
//! caller-owned `Vec<u8>` (which only grows when it lacks capacity, so a
//! reused buffer allocates nothing per record) and cannot fail or panic.
//! Addresses are written exactly as [`crate::decode::fmt_addr`] writes them
//! (IPv4-mapped → dotted quad, otherwise RFC 5952 IPv6); MACs as lower-case
//! `aa:bb:cc:dd:ee:ff`; floats rounded to at most
//! [`super::fields::FLOAT_DECIMALS`] (3) decimals. The escape functions run
//! once per output (for class names), not per record.

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends an unsigned integer.
#[inline]
pub fn put_u64(buf: &mut Vec<u8>, v: u64) {
    let mut b = itoa::Buffer::new();
    buf.extend_from_slice(b.format(v).as_bytes());
}

/// Appends a signed integer.
#[inline]
pub fn put_i64(buf: &mut Vec<u8>, v: i64) {
    let mut b = itoa::Buffer::new();
    buf.extend_from_slice(b.format(v).as_bytes());
}

/// Largest magnitude written with fixed decimals: `v * 1000` is still an
/// exact integer in an `f64` below 2^53.
const FIXED_LIMIT: f64 = 9_007_199_254_740.0;

/// Appends a float rounded to at most 3 decimals, trailing zeros dropped
/// (`1.5`, `0.333`, `12`). Magnitudes of 2^53/1000 or more are written in the
/// shortest form that reads back exactly. Returns `false` and writes nothing
/// when the value is NaN or infinite (the caller decides how to write that).
#[inline]
pub fn put_f64(buf: &mut Vec<u8>, v: f64) -> bool {
    if !v.is_finite() {
        return false;
    }
    let a = v.abs();
    if a >= FIXED_LIMIT {
        let mut b = ryu::Buffer::new();
        buf.extend_from_slice(b.format_finite(v).as_bytes());
        return true;
    }
    // Exact: a * 1000 < 2^53, and rounding half away from zero.
    let m = (a * 1000.0).round() as u64;
    if v < 0.0 && m != 0 {
        buf.push(b'-');
    }
    put_u64(buf, m / 1000);
    let frac = m % 1000;
    if frac != 0 {
        let d = [
            b'0' + (frac / 100) as u8,
            b'0' + (frac / 10 % 10) as u8,
            b'0' + (frac % 10) as u8,
        ];
        let keep = if d[2] != b'0' {
            3
        } else if d[1] != b'0' {
            2
        } else {
            1
        };
        buf.push(b'.');
        buf.extend_from_slice(&d[..keep]);
    }
    true
}

/// Appends an IPv4 address in dotted-quad form.
#[inline]
fn put_v4(buf: &mut Vec<u8>, a: &[u8]) {
    for (i, o) in a.iter().enumerate() {
        if i > 0 {
            buf.push(b'.');
        }
        put_u64(buf, u64::from(*o));
    }
}

/// Appends a 16-bit group in lower-case hex without leading zeros.
#[inline]
fn put_hex16(buf: &mut Vec<u8>, g: u16) {
    let mut started = false;
    for shift in [12u16, 8, 4, 0] {
        let nib = (g >> shift) & 0xf;
        if nib != 0 || started || shift == 0 {
            buf.push(HEX[nib as usize]);
            started = true;
        }
    }
}

/// Appends an address stored in [`crate::decode::Decoded`] form, with the
/// same text as [`crate::decode::fmt_addr`].
pub fn put_addr(buf: &mut Vec<u8>, a: &[u8; 16]) {
    if a[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] {
        put_v4(buf, &a[12..]);
        return;
    }
    let mut g = [0u16; 8];
    for (i, w) in g.iter_mut().enumerate() {
        *w = u16::from_be_bytes([a[2 * i], a[2 * i + 1]]);
    }
    // Longest run of zero groups (first one on ties), compressed when ≥ 2.
    let (mut best_start, mut best_len) = (0usize, 0usize);
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
            buf.extend_from_slice(b"::");
            i += best_len;
            continue;
        }
        if i > 0 && i != best_start + best_len {
            buf.push(b':');
        }
        put_hex16(buf, g[i]);
        i += 1;
    }
}

/// Appends a MAC address as `aa:bb:cc:dd:ee:ff`.
#[inline]
pub fn put_mac(buf: &mut Vec<u8>, m: &[u8; 6]) {
    let mut out = [b':'; 17];
    for (i, b) in m.iter().enumerate() {
        out[3 * i] = HEX[(b >> 4) as usize];
        out[3 * i + 1] = HEX[(b & 0xf) as usize];
    }
    buf.extend_from_slice(&out);
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
        let mut b = Vec::new();
        put_addr(&mut b, a);
        String::from_utf8(b).unwrap()
    }

    fn float(v: f64) -> String {
        let mut b = Vec::new();
        if !put_f64(&mut b, v) {
            return "<none>".into();
        }
        String::from_utf8(b).unwrap()
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
        let mut b = Vec::new();
        put_mac(&mut b, &[0x00, 0x1b, 0xAC, 0xff, 0x09, 0x10]);
        assert_eq!(b, b"00:1b:ac:ff:09:10");
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
