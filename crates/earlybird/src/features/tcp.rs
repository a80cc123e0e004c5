//! TCP flag counting and connection close tracking.
//!
//! Contract: [`count_flags`] counts every flag bit of a packet in its
//! direction; [`TcpState::update`] follows the close handshake. A connection is *closed* once a
//! RST is seen or a FIN has been seen in both directions; the flow table then
//! ends the flow when the close grace period passes or a new SYN reuses the
//! 5-tuple. O(1), no allocation.

/// FIN flag bit.
pub const FIN: u8 = 0x01;
/// SYN flag bit.
pub const SYN: u8 = 0x02;
/// RST flag bit.
pub const RST: u8 = 0x04;
/// ACK flag bit.
pub const ACK: u8 = 0x10;

/// Count of each flag bit (FIN = bit 0 … CWR = bit 7) per direction.
pub type FlagCounts = [[u32; 8]; 2];

/// Adds one packet's `flags` sent in direction `dir` (0 fwd, 1 bwd).
///
/// Branch-free: the counters of flags 0–3 and 4–7 are each one 128-bit
/// word of four 32-bit lanes, and each nibble of `flags` selects the word
/// of 0/1 lanes to add (a loop over the set bits mispredicted on mixed
/// SYN / ACK / PSH|ACK / FIN|ACK traffic). No lane carries into the next: a
/// count never exceeds the direction's packet count, which stays below
/// 2^32 (the flow table ends a flow before it overflows).
#[inline]
pub fn count_flags(counts: &mut FlagCounts, dir: usize, flags: u8) {
    let c = &mut counts[dir & 1];
    #[cfg(target_endian = "little")]
    {
        let p = c.as_mut_ptr().cast::<u128>();
        // SAFETY: `c` is 32 bytes of plain integers; the two unaligned
        // 16-byte accesses cover exactly its halves, and on a little-endian
        // target lane k of each word is counter k of that half.
        unsafe {
            let lo = p
                .read_unaligned()
                .wrapping_add(NIBBLE_LANES[usize::from(flags & 15)]);
            p.write_unaligned(lo);
            let hi = p
                .add(1)
                .read_unaligned()
                .wrapping_add(NIBBLE_LANES[usize::from(flags >> 4)]);
            p.add(1).write_unaligned(hi);
        }
    }
    #[cfg(not(target_endian = "little"))]
    for (k, n) in c.iter_mut().enumerate() {
        *n += u32::from(flags >> k & 1);
    }
}

/// For each nibble, a 1 in the 32-bit lane of each of its set bits.
#[cfg(target_endian = "little")]
const NIBBLE_LANES: [u128; 16] = {
    let mut t = [0u128; 16];
    let mut n = 0;
    while n < 16 {
        let mut b = 0;
        while b < 4 {
            if n & (1 << b) != 0 {
                t[n] |= 1u128 << (32 * b);
            }
            b += 1;
        }
        n += 1;
    }
    t
};

/// Close state of one TCP connection (1 byte).
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpState {
    /// Bit 0: FIN seen forward; bit 1: FIN seen backward; bit 2: RST seen.
    pub close: u8,
}

impl TcpState {
    /// Follows the close handshake with one packet's `flags` sent in
    /// direction `dir` (0 fwd, 1 bwd).
    #[inline]
    pub fn update(&mut self, dir: usize, flags: u8) {
        if flags & FIN != 0 {
            self.close |= 1 << (dir & 1);
        }
        if flags & RST != 0 {
            self.close |= 4;
        }
    }

    /// True after a RST or FINs in both directions.
    #[inline]
    pub fn closed(&self) -> bool {
        self.close & 4 != 0 || self.close & 3 == 3
    }

    /// True when the close came from a RST.
    pub fn reset(&self) -> bool {
        self.close & 4 != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fin_both_ways_closes() {
        let mut t = TcpState::default();
        t.update(0, SYN);
        t.update(1, SYN | ACK);
        t.update(0, FIN | ACK);
        assert!(!t.closed());
        t.update(1, FIN | ACK);
        assert!(t.closed() && !t.reset());
    }

    #[test]
    fn counts_every_set_bit() {
        let mut c = FlagCounts::default();
        count_flags(&mut c, 0, SYN);
        count_flags(&mut c, 1, SYN | ACK);
        count_flags(&mut c, 1, 0xff);
        assert_eq!(c[0], [0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(c[1], [1, 2, 1, 1, 2, 1, 1, 1]);
    }

    #[test]
    fn rst_closes() {
        let mut t = TcpState::default();
        t.update(1, RST);
        assert!(t.closed() && t.reset());
    }
}
