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
#[inline]
pub fn count_flags(counts: &mut FlagCounts, dir: usize, flags: u8) {
    let c = &mut counts[dir & 1];
    let mut f = flags;
    while f != 0 {
        c[f.trailing_zeros() as usize & 7] += 1;
        f &= f - 1;
    }
}

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
