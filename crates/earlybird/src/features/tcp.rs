//! TCP flag counting and connection close tracking.
//!
//! Contract: [`TcpState::update`] counts every flag bit of a packet in its
//! direction and follows the close handshake. A connection is *closed* once a
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

/// Flag counts and close state of one TCP flow.
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpState {
    /// Count of each flag bit (FIN = bit 0 … CWR = bit 7) per direction.
    pub counts: [[u32; 8]; 2],
    /// Bit 0: FIN seen forward; bit 1: FIN seen backward; bit 2: RST seen.
    pub close: u8,
}

impl TcpState {
    /// Accounts one packet's `flags` sent in direction `dir` (0 fwd, 1 bwd).
    #[inline]
    pub fn update(&mut self, dir: usize, flags: u8) {
        if flags == 0 {
            return;
        }
        let c = &mut self.counts[dir & 1];
        for (bit, n) in c.iter_mut().enumerate() {
            *n += ((flags >> bit) & 1) as u32;
        }
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
        assert_eq!(t.counts[0][1], 1);
        assert_eq!(t.counts[1][4], 2);
    }

    #[test]
    fn rst_closes() {
        let mut t = TcpState::default();
        t.update(1, RST);
        assert!(t.closed() && t.reset());
    }
}
