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
//!
//! Speed: values are formatted without branching on their digits where it
//! pays: eight decimal digits are computed at once in the lanes of a `u64`
//! (SWAR), hex groups likewise, and the text is stored as one 8-byte (or
//! [`Snip`]: 32-byte) store whose tail past the value is overwritten by
//! whatever comes next. The buffer keeps [`SLACK`] bytes beyond its
//! capacity for those tails. A [`Cursor`] checks once per value that the
//! widest stores of that value fit in the buffer and then stores unchecked.
//!
//! Record cursors ([`TextBuf::record_cursor`], what the CSV and JSON lines
//! exporters use) skip even that check (measured: ~10 % of the CSV
//! exporter's instructions). They are sound because every field's stores
//! end at most [`MAX_FIELD`] bytes after the field starts: a key or
//! separator stores at most [`SNIP`] bytes, and no value stores more than 48
//! bytes from where it starts (the `need` widths below; debug builds still
//! check each one). A field therefore never writes past the record bound of
//! `super::max_record_len` (fields × `MAX_FIELD` + early values + margin),
//! and the exporter makes room for that bound before each record.

use crate::schema::HEX_DIGITS as HEX;

/// Largest magnitude written with fixed decimals: `v * 1000` is still an
/// exact integer in an `f64` below 2^53.
const FIXED_LIMIT: f64 = 9_007_199_254_740.0;

/// Most bytes one scalar field can take, separator and JSON key included
/// (an IPv6 address in quotes after a 21-byte key is the longest).
pub const MAX_FIELD: usize = 80;

/// Most bytes one early-packet value takes, separator included.
pub const MAX_EARLY_VALUE: usize = 12;

/// Bytes of a [`Snip`]'s fixed-size text.
pub const SNIP: usize = 32;

/// Bytes a store may write past the end of the buffer's capacity (the
/// widest store is one [`Snip`]).
pub const SLACK: usize = SNIP;

/// `b'0'` in every byte.
pub(super) const ZEROS: u64 = 0x3030_3030_3030_3030;

/// The decimal digits of `v < 10^8` as byte values (0..=9, not ASCII),
/// leading zeros included, most significant first in memory order (byte 0
/// of the little-endian word holds the ten-millions digit).
#[inline(always)]
pub(super) fn digits8(v: u32) -> u64 {
    debug_assert!(v < 100_000_000);
    let hi = u64::from(v / 10_000);
    let lo = u64::from(v % 10_000);
    // Two 32-bit lanes of four digits each; x * 10486 >> 20 is x / 100 for
    // x < 10^4 (and x * 103 >> 10 is x / 10 for x < 100), lane by lane.
    let x = hi | (lo << 32);
    let q = ((x * 10_486) >> 20) & 0x0000_007f_0000_007f;
    let x = q | ((x - q * 100) << 16);
    let q = ((x * 103) >> 10) & 0x000f_000f_000f_000f;
    q | ((x - q * 10) << 8)
}

/// `"ddd."` of each octet (1 to 3 digits and a dot) in memory order.
const OCTETS: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut o = 0;
    while o < 256 {
        let d = [(o / 100) as u32, (o / 10 % 10) as u32, (o % 10) as u32];
        let skip = if o >= 100 {
            0
        } else if o >= 10 {
            1
        } else {
            2
        };
        let mut w = 0u32;
        let mut k = 0;
        let mut i = skip;
        while i < 3 {
            w |= (d[i] + b'0' as u32) << (8 * k);
            k += 1;
            i += 1;
        }
        t[o] = w | (b'.' as u32) << (8 * k);
        o += 1;
    }
    t
};

/// Thousandths `f` as `.ddd` with trailing zeros dropped (nothing for 0)
/// in the low bytes, its length in the top byte (1024 entries so that an
/// index masked to 10 bits needs no bounds check; the last 24 are unused).
const THOUSANDTHS: [u64; 1024] = {
    let mut t = [0u64; 1024];
    let mut f = 0;
    while f < 1000 {
        let d = [(f / 100) as u64, (f / 10 % 10) as u64, (f % 10) as u64];
        let len: u64 = if f == 0 {
            0
        } else if d[2] != 0 {
            4
        } else if d[1] != 0 {
            3
        } else {
            2
        };
        let text = b'.' as u64 | (d[0] + 48) << 8 | (d[1] + 48) << 16 | (d[2] + 48) << 24;
        // Bytes past the length are never kept; zero them for tidiness.
        let mask = if len == 0 { 0 } else { (1u64 << (8 * len)) - 1 };
        t[f] = (text & mask) | len << 56;
        f += 1;
    }
    t
};

/// "00".."99": the two digits of each number below 100, in memory order.
const PAIRS: [u16; 100] = {
    let mut t = [0u16; 100];
    let mut v = 0;
    while v < 100 {
        t[v] = (b'0' + (v / 10) as u8) as u16 | ((b'0' + (v % 10) as u8) as u16) << 8;
        v += 1;
    }
    t
};

/// Two lower-case hex digits of each byte, in memory order.
const HEX2: [u16; 256] = {
    let mut t = [0u16; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = HEX[b >> 4] as u16 | (HEX[b & 0xf] as u16) << 8;
        b += 1;
    }
    t
};

/// A short text stored in a fixed-size array so that appending it is one
/// fixed-size copy; texts longer than [`SNIP`] bytes are kept whole and
/// copied by length.
#[derive(Debug, Clone)]
pub struct Snip {
    pad: [u8; SNIP],
    long: Box<[u8]>,
    len: usize,
}

impl Snip {
    /// The snippet holding `s`.
    pub fn new(s: &[u8]) -> Snip {
        let mut pad = [0u8; SNIP];
        let long: Box<[u8]> = if s.len() <= SNIP {
            pad[..s.len()].copy_from_slice(s);
            Box::new([])
        } else {
            s.into()
        };
        Snip {
            pad,
            long,
            len: s.len(),
        }
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
}

/// A byte buffer allocated (and zeroed) once; text is appended through a
/// [`Cursor`]. The caller makes sure a record fits (see [`TextBuf::room`]);
/// a value that does not fit would panic on a bounds check, which the
/// record-size bound in `super` rules out.
pub struct TextBuf {
    /// `cap + SLACK` bytes.
    bytes: Vec<u8>,
    pos: usize,
    cap: usize,
}

impl TextBuf {
    /// A buffer holding up to `cap` bytes.
    pub fn new(cap: usize) -> Self {
        TextBuf {
            bytes: vec![0; cap + SLACK],
            pos: 0,
            cap,
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
        self.cap.saturating_sub(self.pos)
    }

    /// A cursor appending at the end; the buffer's length follows it when
    /// the cursor is dropped. Formatting through a cursor keeps the position
    /// and the buffer's address in registers (a store of text bytes cannot
    /// alias them), so take one per record, not one per value.
    #[inline(always)]
    pub fn cursor(&mut self) -> Cursor<'_> {
        Cursor {
            out: &mut self.bytes,
            pos: self.pos,
            end: &mut self.pos,
        }
    }

    /// A cursor for one record that stores without per-value bounds checks
    /// (module docs).
    ///
    /// # Safety
    /// At least `super::max_record_len(n, app)` bytes must be free
    /// ([`Self::room`]), where `n` is at least the number of early packets
    /// and `app` the length of the longest app name written through it, and
    /// the cursor writes at most one record (`super::write_scalars`, then
    /// early values of at most [`MAX_EARLY_VALUE`] bytes each, then the
    /// line end).
    #[inline(always)]
    pub unsafe fn record_cursor(&mut self) -> Cursor<'_, false> {
        Cursor {
            out: &mut self.bytes,
            pos: self.pos,
            end: &mut self.pos,
        }
    }

    /// Appends bytes.
    pub fn bytes(&mut self, s: &[u8]) {
        self.cursor().bytes(s);
    }
}

/// Appends values to a [`TextBuf`]; see [`TextBuf::cursor`] (`CHECKED`)
/// and [`TextBuf::record_cursor`].
pub struct Cursor<'a, const CHECKED: bool = true> {
    out: &'a mut [u8],
    pos: usize,
    end: &'a mut usize,
}

impl<const CHECKED: bool> Drop for Cursor<'_, CHECKED> {
    #[inline(always)]
    fn drop(&mut self) {
        *self.end = self.pos;
    }
}

/// The record-size bound was wrong (a bug, never input): stop before
/// writing out of bounds.
#[cold]
#[inline(never)]
fn overflow(pos: usize, need: usize, len: usize) -> ! {
    panic!("export text buffer: {need} bytes at {pos} do not fit in {len}")
}

impl<const CHECKED: bool> Cursor<'_, CHECKED> {
    /// Number of bytes in the buffer, this cursor's included.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.pos
    }

    /// Makes sure `n` bytes from the cursor are inside the buffer (one
    /// check per value; the stores that follow are then unchecked). A
    /// record cursor checks only in debug builds (module docs). No value
    /// needs more than 48 bytes.
    #[inline(always)]
    fn need(&self, n: usize) {
        debug_assert!(n <= 48);
        if (CHECKED || cfg!(debug_assertions)) && self.pos + n > self.out.len() {
            overflow(self.pos, n, self.out.len());
        }
    }

    /// Stores 8 bytes at `at` without moving the cursor.
    ///
    /// # Safety
    /// `at + 8 <= self.out.len()`.
    #[inline(always)]
    unsafe fn put8(&mut self, at: usize, w: u64) {
        debug_assert!(at + 8 <= self.out.len());
        // SAFETY: in bounds by the caller's contract; unaligned store.
        unsafe {
            self.out
                .as_mut_ptr()
                .add(at)
                .cast::<[u8; 8]>()
                .write_unaligned(w.to_le_bytes())
        }
    }

    /// Stores one byte at `at`.
    ///
    /// # Safety
    /// `at < self.out.len()`.
    #[inline(always)]
    unsafe fn put1(&mut self, at: usize, b: u8) {
        debug_assert!(at < self.out.len());
        // SAFETY: in bounds by the caller's contract.
        unsafe { *self.out.as_mut_ptr().add(at) = b }
    }

    /// Moves the cursor back by `n` bytes (drops a separator written ahead).
    #[inline(always)]
    pub fn unwrite(&mut self, n: usize) {
        self.pos -= n;
    }

    /// Appends one byte.
    #[inline(always)]
    pub fn byte(&mut self, b: u8) {
        self.need(1);
        // SAFETY: checked just above.
        unsafe { self.put1(self.pos, b) };
        self.pos += 1;
    }

    /// Appends bytes.
    #[inline]
    pub fn bytes(&mut self, s: &[u8]) {
        self.out[self.pos..self.pos + s.len()].copy_from_slice(s);
        self.pos += s.len();
    }

    /// Appends a snippet: one fixed-size copy when it is short.
    #[inline(always)]
    pub fn snip(&mut self, s: &Snip) {
        if s.len <= SNIP {
            self.need(SNIP);
            // SAFETY: SNIP bytes checked just above; unaligned store.
            unsafe {
                self.out
                    .as_mut_ptr()
                    .add(self.pos)
                    .cast::<[u8; SNIP]>()
                    .write_unaligned(s.pad)
            }
            self.pos += s.len;
        } else {
            self.bytes(&s.long);
        }
    }

    /// Appends `v < 10^8` without leading zeros.
    ///
    /// # Safety
    /// 8 bytes from the cursor are in bounds.
    #[inline(always)]
    unsafe fn upto8(&mut self, v: u32) {
        let d = digits8(v);
        // Leading zero digits are the low zero bytes; keep at least one.
        let lead = (d.trailing_zeros() / 8).min(7);
        // SAFETY: by the contract.
        unsafe { self.put8(self.pos, (d | ZEROS) >> (8 * lead)) };
        self.pos += 8 - lead as usize;
    }

    /// Appends exactly 8 digits of `v < 10^8`, leading zeros included.
    ///
    /// # Safety
    /// 8 bytes from the cursor are in bounds.
    #[inline(always)]
    unsafe fn eight(&mut self, v: u32) {
        // SAFETY: by the contract.
        unsafe { self.put8(self.pos, digits8(v) | ZEROS) };
        self.pos += 8;
    }

    /// Appends an unsigned integer (at most 20 digits; stores reach 24
    /// bytes past the cursor).
    ///
    /// # Safety
    /// 24 bytes from the cursor are in bounds.
    #[inline(always)]
    unsafe fn u64_unchecked(&mut self, v: u64) {
        const E8: u64 = 100_000_000;
        // SAFETY: (all arms) at most three 8-byte stores, each starting at
        // most 8 bytes after the previous one.
        unsafe {
            if v < 10 {
                self.put1(self.pos, b'0' + v as u8);
                self.pos += 1;
            } else if v < 10_000 {
                // Two digit pairs, leading zeros shifted out.
                let v = v as u32;
                let (hi, lo) = (v / 100, v % 100);
                let w = u32::from(PAIRS[hi as usize % 100]) | u32::from(PAIRS[lo as usize]) << 16;
                let lead = u32::from(v < 1000) + u32::from(v < 100);
                self.put8(self.pos, u64::from(w >> (8 * lead)));
                self.pos += 4 - lead as usize;
            } else if v < E8 {
                self.upto8(v as u32);
            } else if v < E8 * E8 {
                let hi = v / E8;
                self.upto8(hi as u32);
                self.eight((v - hi * E8) as u32);
            } else {
                let hi = v / (E8 * E8);
                let rest = v - hi * (E8 * E8);
                let mid = rest / E8;
                self.upto8(hi as u32);
                self.eight(mid as u32);
                self.eight((rest - mid * E8) as u32);
            }
        }
    }

    /// Appends an unsigned integer.
    #[inline(always)]
    pub fn u64(&mut self, v: u64) {
        self.need(24);
        // SAFETY: checked just above.
        unsafe { self.u64_unchecked(v) }
    }

    /// Appends `sep` and an unsigned integer.
    #[inline(always)]
    pub fn sep_u64(&mut self, sep: u8, v: u64) {
        self.need(25);
        // SAFETY: checked just above: 1 byte, then 24.
        unsafe {
            self.put1(self.pos, sep);
            self.pos += 1;
            self.u64_unchecked(v)
        }
    }

    /// Appends `,d` for each of 16 one-digit values (each below 10): four
    /// 8-byte stores.
    #[inline(always)]
    pub fn comma_digits16(&mut self, v: &[[u32; 8]; 2]) {
        debug_assert!(v.as_flattened().iter().all(|&d| d < 10));
        self.need(32);
        for (k, q) in v.as_flattened().chunks_exact(4).enumerate() {
            // ",0,0,0,0" plus each digit in its byte (the caller checked
            // every value is below 10; `& 15` keeps a bad one in its byte).
            let d = |j: usize| u64::from(q[j] & 15) << (16 * j + 8);
            let w = 0x302c_302c_302c_302c_u64 | d(0) | d(1) | d(2) | d(3);
            // SAFETY: 32 bytes checked above; stores at 0, 8, 16, 24.
            unsafe { self.put8(self.pos + 8 * k, w) };
        }
        self.pos += 32;
    }

    /// Appends a float rounded to at most 3 decimals, trailing zeros dropped
    /// (`1.5`, `0.333`, `12`). Magnitudes of 2^53/1000 or more are written in
    /// the shortest form that reads back exactly. Returns `false` and writes
    /// nothing when the value is NaN or infinite (the caller decides how to
    /// write that).
    #[inline(always)]
    pub fn f64(&mut self, v: f64) -> bool {
        if !v.is_finite() {
            return false;
        }
        let a = v.abs();
        if a >= FIXED_LIMIT {
            self.ryu(v);
            return true;
        }
        // a * 1000 < 2^53 is exact; + 0.5 and truncation round half up
        // (`f64::round` is a library call on baseline x86-64). The value
        // fits an i64, whose conversion is one instruction.
        let m = (a * 1000.0 + 0.5) as i64 as u64;
        let int = m / 1000;
        self.need(1 + 24 + 8);
        // SAFETY: checked just above: a sign byte, an integer below 2^53
        // (16 digits: stores within 16 bytes), 8 bytes of decimals.
        unsafe {
            // A sign only when something non-zero is left after rounding.
            if v < 0.0 && m != 0 {
                self.put1(self.pos, b'-');
                self.pos += 1;
            }
            self.u64_unchecked(int);
            self.frac3((m - int * 1000) as u32);
        }
        true
    }

    /// Appends `.ddd` of thousandths `f < 1000` with trailing zeros dropped,
    /// nothing when `f` is 0.
    ///
    /// # Safety
    /// 8 bytes from the cursor are in bounds.
    #[inline(always)]
    unsafe fn frac3(&mut self, f: u32) {
        let w = THOUSANDTHS[f as usize & 1023];
        // SAFETY: by the contract.
        unsafe { self.put8(self.pos, w) };
        self.pos += (w >> 56) as usize;
    }

    /// The rare huge float: shortest round-trip text.
    #[cold]
    #[inline(never)]
    fn ryu(&mut self, v: f64) {
        let mut b = ryu::Buffer::new();
        self.bytes(b.format_finite(v).as_bytes());
    }

    /// Appends a 16-bit group in lower-case hex without leading zeros,
    /// followed by `:`.
    ///
    /// # Safety
    /// 8 bytes from the cursor are in bounds.
    #[inline(always)]
    unsafe fn hex16_colon(&mut self, g: u16) {
        let x = u64::from(g);
        // One nibble per byte, most significant first in memory order.
        let n = (x >> 12) | ((x >> 8) & 0xf) << 8 | ((x >> 4) & 0xf) << 16 | (x & 0xf) << 24;
        // Nibbles of 10 and more get 'a' - '0' - 10 = 39 more.
        let ascii = n + 0x3030_3030 + (((n + 0x0606_0606) >> 4) & 0x0101_0101) * 39;
        let digits = (19 - (g | 1).leading_zeros()) / 4;
        let text = ascii >> (8 * (4 - digits)) | u64::from(b':') << (8 * digits);
        // SAFETY: by the contract.
        unsafe { self.put8(self.pos, text) };
        self.pos += digits as usize + 1;
    }

    /// Appends an address stored in [`crate::decode::Decoded`] form, with
    /// the same text as [`crate::decode::fmt_addr`].
    #[inline]
    pub fn addr(&mut self, a: &[u8; 16]) {
        if a[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] {
            self.need(16);
            for &o in &a[12..] {
                let w = u64::from(OCTETS[usize::from(o)]);
                // SAFETY: 16 bytes checked above; four octets of at most
                // 4 bytes each.
                unsafe {
                    self.out
                        .as_mut_ptr()
                        .add(self.pos)
                        .cast::<[u8; 4]>()
                        .write_unaligned((w as u32).to_le_bytes())
                };
                self.pos += 2 + usize::from(o >= 10) + usize::from(o >= 100);
            }
            // No dot after the last octet.
            self.pos -= 1;
            return;
        }
        self.v6(a);
    }

    fn v6(&mut self, a: &[u8; 16]) {
        let mut g = [0u16; 8];
        let mut zero = 0u32;
        for (i, w) in g.iter_mut().enumerate() {
            *w = u16::from_be_bytes([a[2 * i], a[2 * i + 1]]);
            zero |= u32::from(*w == 0) << i;
        }
        // Longest run of zero groups (first one on ties), compressed when
        // ≥ 2: after k rounds of `x &= x >> 1` bit i is set iff groups
        // i..=i+k are all zero.
        let (mut run, mut len, mut x) = (0u32, 0usize, zero);
        while x != 0 {
            run = x;
            len += 1;
            x &= x >> 1;
        }
        // 8 groups of at most 5 bytes, the last store 8 bytes wide.
        self.need(48);
        // SAFETY: checked just above; at most 8 groups and two colons are
        // written.
        unsafe {
            if len < 2 {
                for &w in &g {
                    self.hex16_colon(w);
                }
                self.pos -= 1;
                return;
            }
            let start = run.trailing_zeros() as usize;
            for &w in &g[..start] {
                self.hex16_colon(w);
            }
            if start == 0 {
                self.put1(self.pos, b':');
                self.pos += 1;
            }
            self.put1(self.pos, b':');
            self.pos += 1;
            let end = start + len;
            if end < 8 {
                for &w in &g[end..] {
                    self.hex16_colon(w);
                }
                self.pos -= 1;
            }
        }
    }

    /// Appends a MAC address as `aa:bb:cc:dd:ee:ff`.
    #[inline]
    pub fn mac(&mut self, m: &[u8; 6]) {
        let h = |i: usize| u64::from(HEX2[usize::from(m[i])]);
        let colon = u64::from(b':');
        // "aa:bb:cc" + ":dd:ee:" + "ff": three stores, 17 bytes.
        let w0 = h(0) | colon << 16 | h(1) << 24 | colon << 40 | h(2) << 48;
        let w1 = colon | h(3) << 8 | colon << 24 | h(4) << 32 | colon << 48;
        self.need(24);
        // SAFETY: 24 bytes checked just above; stores at 0, 8 and 9.
        unsafe {
            self.put8(self.pos, w0);
            self.put8(self.pos + 8, w1);
            self.put8(self.pos + 15, h(5));
        }
        self.pos += 17;
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

/// `\u00XX` for each control byte.
const JSON_CONTROL: [[u8; 6]; 32] = {
    let mut t = [[0u8; 6]; 32];
    let mut b = 0;
    while b < 32 {
        t[b] = [b'\\', b'u', b'0', b'0', HEX[b >> 4], HEX[b & 0xf]];
        b += 1;
    }
    t
};

/// How byte `b` of a string is written inside a JSON string literal:
/// `None` when it stands as itself.
#[inline]
pub(crate) fn json_escaped(b: u8) -> Option<&'static [u8]> {
    match b {
        b'"' => Some(b"\\\""),
        b'\\' => Some(b"\\\\"),
        b'\n' => Some(b"\\n"),
        b'\r' => Some(b"\\r"),
        b'\t' => Some(b"\\t"),
        0..=0x1f => Some(&JSON_CONTROL[b as usize]),
        _ => None,
    }
}

/// A JSON string literal (with its quotes) holding `s`.
pub fn json_string(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 2);
    out.push(b'"');
    for b in s.bytes() {
        match json_escaped(b) {
            Some(e) => out.extend_from_slice(e),
            None => out.push(b),
        }
    }
    out.push(b'"');
    out
}
