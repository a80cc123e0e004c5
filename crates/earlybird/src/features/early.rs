//! Early features: size, direction, TCP flags and inter-arrival time of the
//! first N packets of a flow — the input of the early classifiers.
//!
//! Contract: [`push`] appends one packet to the flow's fixed slice of N
//! entries while fewer than N are kept; afterwards it does nothing. No
//! allocation: the slice lives in the flow table.

use super::Dir;
use crate::time::Nanos;

/// Largest number of early packets a flow can keep (`--early-packets`).
pub const MAX_EARLY: usize = 32;

/// One of the first N packets of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct EarlyPkt {
    /// IP length of the packet (header + payload, from the IP header).
    pub size: u16,
    /// Direction relative to the flow's first packet.
    pub dir: Dir,
    /// TCP flags of the packet (0 for non-TCP).
    pub flags: u8,
    /// Time since the previous packet of the flow (either direction) in
    /// microseconds, saturating at `u32::MAX` (~71 min); 0 for the first.
    pub iat_us: u32,
}

/// Records packet number `*len` (if below `slot.len()`).
#[inline]
pub fn push(
    slot: &mut [EarlyPkt],
    len: &mut u8,
    size: u16,
    dir: Dir,
    flags: u8,
    ts: Nanos,
    prev_ts: Nanos,
) {
    let i = *len as usize;
    if i < slot.len() {
        let iat = if i == 0 {
            0
        } else {
            ts.saturating_sub(prev_ts) / 1000
        };
        slot[i] = EarlyPkt {
            size,
            dir,
            flags,
            iat_us: iat.min(u32::MAX as u64) as u32,
        };
        *len += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_first_n_only() {
        let mut s = [EarlyPkt::default(); 2];
        let mut n = 0;
        push(&mut s, &mut n, 60, Dir::Fwd, 2, 1_000, 0);
        push(&mut s, &mut n, 1500, Dir::Bwd, 0x12, 3_500, 1_000);
        push(&mut s, &mut n, 40, Dir::Fwd, 0x10, 9_000, 3_500);
        assert_eq!(n, 2);
        assert_eq!(s[0].iat_us, 0);
        assert_eq!((s[1].size, s[1].dir, s[1].iat_us), (1500, Dir::Bwd, 2));
    }
}
