//! Full-flow statistics per direction: IP size and inter-arrival time
//! (min/max/mean/std), as DetectPro and Tstat report them.
//!
//! Contract: [`Moments::update`] is O(1), allocation-free and driven only by
//! the packet timestamp it is given. Packet and byte counts live in the flow
//! entry itself (they are always kept); this struct holds what `--stats
//! full` adds: the sum of sizes is the byte count and the sum of
//! inter-arrivals is `last - first`, so only extremes and sums of squares
//! are stored. Inter-arrival extremes are `f32` nanoseconds (7 significant
//! digits), their sum of squares `f64`.

use crate::flow::record::Stat;
use crate::time::Nanos;

/// Size and inter-arrival moments of one direction of a flow. 48 bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Moments {
    /// Timestamp of the first packet in this direction.
    pub first_ts: Nanos,
    /// Timestamp of the last packet in this direction.
    pub last_ts: Nanos,
    /// Sum of squared IP lengths.
    pub size_sq: u64,
    /// Sum of squared inter-arrivals (ns²).
    pub iat_sq: f64,
    /// Smallest inter-arrival (ns).
    pub iat_min: f32,
    /// Largest inter-arrival (ns).
    pub iat_max: f32,
    /// Smallest IP length.
    pub size_min: u16,
    /// Largest IP length.
    pub size_max: u16,
}

impl Moments {
    /// Accounts one packet of `size` bytes at time `ts`; `first` is true for
    /// the direction's first packet.
    #[inline]
    pub fn update(&mut self, size: u16, ts: Nanos, first: bool) {
        if first {
            self.first_ts = ts;
            self.size_min = size;
            self.size_max = size;
            self.iat_min = f32::INFINITY;
        } else {
            let iat = ts.saturating_sub(self.last_ts) as f64;
            self.iat_min = self.iat_min.min(iat as f32);
            self.iat_max = self.iat_max.max(iat as f32);
            self.iat_sq += iat * iat;
            self.size_min = self.size_min.min(size);
            self.size_max = self.size_max.max(size);
        }
        self.last_ts = ts;
        self.size_sq = self.size_sq.saturating_add(size as u64 * size as u64);
    }

    /// Size statistics (bytes) given the direction's packet and byte counts.
    pub fn size_stat(&self, packets: u64, bytes: u64) -> Stat {
        if packets == 0 {
            return Stat::default();
        }
        let n = packets as f64;
        let mean = bytes as f64 / n;
        Stat {
            min: self.size_min as f64,
            max: self.size_max as f64,
            mean,
            std: var(self.size_sq as f64 / n, mean).sqrt(),
        }
    }

    /// Inter-arrival statistics (ns) over `packets - 1` gaps.
    pub fn iat_stat(&self, packets: u64) -> Stat {
        if packets < 2 {
            return Stat::default();
        }
        let n = (packets - 1) as f64;
        // Out-of-order timestamps can put `last_ts` before `first_ts`.
        let mean = self.last_ts.saturating_sub(self.first_ts) as f64 / n;
        Stat {
            min: self.iat_min as f64,
            max: self.iat_max as f64,
            mean,
            std: var(self.iat_sq / n, mean).sqrt(),
        }
    }
}

fn var(mean_sq: f64, mean: f64) -> f64 {
    (mean_sq - mean * mean).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pkts: &[(u16, u64)]) -> (Moments, u64, u64) {
        let mut m = Moments::default();
        let mut bytes = 0;
        for (i, (size, ts)) in pkts.iter().enumerate() {
            m.update(*size, *ts, i == 0);
            bytes += *size as u64;
        }
        (m, pkts.len() as u64, bytes)
    }

    #[test]
    fn moments_match_direct_computation() {
        let (m, n, b) = run(&[(100, 0), (300, 10), (200, 40), (400, 50)]);
        let sz = m.size_stat(n, b);
        assert_eq!((sz.min, sz.max, sz.mean), (100.0, 400.0, 250.0));
        assert!((sz.std - 111.803_398_874_989_48).abs() < 1e-9);
        let iat = m.iat_stat(n);
        assert_eq!((iat.min, iat.max), (10.0, 30.0));
        assert!((iat.mean - 50.0 / 3.0).abs() < 1e-12);
        // gaps 10, 30, 10: population std
        assert!((iat.std - 9.428_090_415_820_634).abs() < 1e-9);
    }

    #[test]
    fn single_packet_has_no_iat() {
        let (m, n, b) = run(&[(60, 5)]);
        assert_eq!(m.iat_stat(n), Stat::default());
        assert_eq!(m.size_stat(n, b).std, 0.0);
    }
}
