//! TCP flag counting and connection close tracking.
//!
//! Contract: [`count_flags`] counts every flag bit of a packet in its
//! direction's 16-bit lanes ([`spill`] moves them into 32-bit counters);
//! [`TcpState::update`] follows the close handshake. A connection is
//! *closed* once a RST is seen or a FIN has been seen in both directions;
//! the flow table then ends the flow when the close grace period passes or
//! a new SYN reuses the 5-tuple. O(1), no allocation.

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

/// Counts of each flag bit of one direction in 16-bit lanes: what the flow
/// table keeps per packet. The table moves them into 32-bit counters
/// ([`spill`]) every [`SPILL_EVERY`] packets of the direction, so a lane
/// never exceeds 2^15.
pub type FlagLanes = [u16; 8];

/// A direction's lanes are spilled when its packet count is a multiple of
/// this (a power of two).
pub const SPILL_EVERY: u32 = 1 << 15;

/// Adds one packet's `flags` to `lanes`.
///
/// Branch-free: the eight lanes are one 128-bit word, and each nibble of
/// `flags` selects a 64-bit word of 0/1 lanes to add (a loop over the set
/// bits mispredicted on mixed SYN / ACK / PSH|ACK / FIN|ACK traffic). No
/// lane carries into the next while the caller spills every
/// [`SPILL_EVERY`] packets.
#[inline]
pub fn count_flags(lanes: &mut FlagLanes, flags: u8) {
    #[cfg(target_endian = "little")]
    {
        let add = NIBBLE_LANES[usize::from(flags & 15)] as u128
            | (NIBBLE_LANES[usize::from(flags >> 4)] as u128) << 64;
        let p = lanes.as_mut_ptr().cast::<u128>();
        // SAFETY: `lanes` is 16 bytes of plain integers, read and written
        // as one unaligned 16-byte word; on a little-endian target lane k
        // of the word is counter k.
        unsafe { p.write_unaligned(p.read_unaligned().wrapping_add(add)) };
    }
    #[cfg(not(target_endian = "little"))]
    for (k, n) in lanes.iter_mut().enumerate() {
        *n += u16::from(flags >> k & 1);
    }
}

/// Moves `lanes` into the 32-bit counters `hi` and clears them.
#[inline]
pub fn spill(lanes: &mut FlagLanes, hi: &mut [u32; 8]) {
    for (h, l) in hi.iter_mut().zip(lanes.iter_mut()) {
        *h += u32::from(std::mem::take(l));
    }
}

/// The full counts of one direction: its lanes plus what was spilled.
#[inline]
pub fn total(lanes: &FlagLanes, hi: Option<&[u32; 8]>) -> [u32; 8] {
    let mut t = [0u32; 8];
    for k in 0..8 {
        t[k] = u32::from(lanes[k]) + hi.map_or(0, |h| h[k]);
    }
    t
}

/// For each nibble, a 1 in the 16-bit lane of each of its set bits.
#[cfg(target_endian = "little")]
const NIBBLE_LANES: [u64; 16] = {
    let mut t = [0u64; 16];
    let mut n = 0;
    while n < 16 {
        let mut b = 0;
        while b < 4 {
            if n & (1 << b) != 0 {
                t[n] |= 1u64 << (16 * b);
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
    /// Bits 4–7 are not the close state's: the flow table keeps in them
    /// which packets of the flow its consumers read
    /// (`crate::flow::entry::FOLLOW_SHIFT`); the methods here leave them
    /// as they are.
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
        let mut c = [FlagLanes::default(); 2];
        count_flags(&mut c[0], SYN);
        count_flags(&mut c[1], SYN | ACK);
        count_flags(&mut c[1], 0xff);
        assert_eq!(c[0], [0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(c[1], [1, 2, 1, 1, 2, 1, 1, 1]);
    }

    #[test]
    fn lanes_hold_a_spill_period_and_spill_adds_up() {
        let mut lanes = FlagLanes::default();
        let mut hi = [0u32; 8];
        for i in 1..=3 * SPILL_EVERY {
            count_flags(&mut lanes, 0xff);
            if i % SPILL_EVERY == 0 {
                assert_eq!(lanes, [SPILL_EVERY as u16; 8], "no lane carried");
                spill(&mut lanes, &mut hi);
            }
        }
        count_flags(&mut lanes, ACK);
        assert_eq!(lanes[4], 1);
        let t = total(&lanes, Some(&hi));
        assert_eq!(t[4], 3 * SPILL_EVERY + 1);
        assert_eq!(t[0], 3 * SPILL_EVERY);
        assert_eq!(total(&lanes, None)[4], 1);
    }

    #[test]
    fn rst_closes() {
        let mut t = TcpState::default();
        t.update(1, RST);
        assert!(t.closed() && t.reset());
    }
}
