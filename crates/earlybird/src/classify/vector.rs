//! Numeric feature vectors shared by the tree, forest and SVM models.
//!
//! Contract: feature `2i` is the signed size of packet `i` (+size client to
//! server, -size server to client, 0 when the flow has fewer packets), feature
//! `2i+1` its inter-arrival time in microseconds (-1 when absent); with ports,
//! feature `2N` is the IP protocol and `2N+1` the server port. Pure functions,
//! no allocation, never panic (out-of-range indices read as absent).

use super::FlowFeatures;
use crate::features::early::MAX_EARLY;
use crate::features::Dir;

/// Largest number of features any model uses.
pub const MAX_FEATURES: usize = 2 * MAX_EARLY + 2;

/// Number of features for `packets` early packets.
pub fn count(packets: usize, use_ports: bool) -> usize {
    2 * packets.min(MAX_EARLY) + if use_ports { 2 } else { 0 }
}

/// Value of feature `idx` (see module doc) for a model of `packets` packets.
#[inline]
pub fn value(f: &FlowFeatures<'_>, packets: usize, idx: usize) -> f32 {
    let i = idx / 2;
    if i < packets {
        match f.early.get(i) {
            Some(p) if idx & 1 == 0 => match p.dir {
                Dir::Fwd => p.size as f32,
                Dir::Bwd => -(p.size as f32),
            },
            Some(p) => p.iat_us as f32,
            None if idx & 1 == 0 => 0.0,
            None => -1.0,
        }
    } else if idx == 2 * packets {
        f.proto as f32
    } else {
        f.dport as f32
    }
}

/// Fills `out` with the first `out.len()` features.
pub fn fill(f: &FlowFeatures<'_>, packets: usize, out: &mut [f32]) {
    for (idx, o) in out.iter_mut().enumerate() {
        *o = value(f, packets, idx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::early::EarlyPkt;

    #[test]
    fn layout() {
        let early = [
            EarlyPkt {
                size: 60,
                dir: Dir::Fwd,
                flags: 2,
                iat_us: 0,
            },
            EarlyPkt {
                size: 1500,
                dir: Dir::Bwd,
                flags: 0,
                iat_us: 250,
            },
        ];
        let f = FlowFeatures {
            early: &early,
            proto: 6,
            sport: 5000,
            dport: 443,
        };
        let mut v = [0f32; 8];
        fill(&f, 3, &mut v);
        assert_eq!(v, [60.0, 0.0, -1500.0, 250.0, 0.0, -1.0, 6.0, 443.0]);
        assert_eq!(count(3, true), 8);
        assert_eq!(count(3, false), 6);
    }
}
