//! Full-flow statistics per direction: packets, bytes, IP size and
//! inter-arrival time (min/max/mean/std), as DetectPro and Tstat report them.
//!
//! Contract: [`DirStats::update`] is O(1), allocation-free and driven only by
//! the packet timestamp it is given; [`DirStats::size_stat`] and
//! [`DirStats::iat_stat`] finish the moments. The sum of sizes is the byte
//! count and the sum of inter-arrivals is `last - first`, so only the sums of
//! squares are kept.

use crate::flow::record::Stat;
use crate::time::Nanos;

/// Statistics of one direction of a flow.
#[derive(Debug, Clone, Copy, Default)]
pub struct DirStats {
    /// Packets seen.
    pub packets: u64,
    /// Sum of IP lengths.
    pub bytes: u64,
    /// Timestamp of the first packet in this direction.
    pub first_ts: Nanos,
    /// Timestamp of the last packet in this direction.
    pub last_ts: Nanos,
    /// Smallest and largest IP length.
    pub size_min: u16,
    pub size_max: u16,
    /// Sum of squared IP lengths.
    pub size_sq: u64,
    /// Smallest and largest inter-arrival (ns).
    pub iat_min: u64,
    pub iat_max: u64,
    /// Sum of squared inter-arrivals (ns²).
    pub iat_sq: f64,
}

impl DirStats {
    /// Accounts one packet of `size` bytes at time `ts`.
    #[inline]
    pub fn update(&mut self, size: u16, ts: Nanos) {
        if self.packets == 0 {
            self.first_ts = ts;
            self.size_min = size;
            self.size_max = size;
            self.iat_min = u64::MAX;
        } else {
            let iat = ts.saturating_sub(self.last_ts);
            self.iat_min = self.iat_min.min(iat);
            self.iat_max = self.iat_max.max(iat);
            self.iat_sq += (iat as f64) * (iat as f64);
            self.size_min = self.size_min.min(size);
            self.size_max = self.size_max.max(size);
        }
        self.last_ts = ts;
        self.packets += 1;
        self.bytes += size as u64;
        self.size_sq = self.size_sq.saturating_add(size as u64 * size as u64);
    }

    /// Size statistics (bytes).
    pub fn size_stat(&self) -> Stat {
        if self.packets == 0 {
            return Stat::default();
        }
        let n = self.packets as f64;
        let mean = self.bytes as f64 / n;
        Stat {
            min: self.size_min as f64,
            max: self.size_max as f64,
            mean,
            std: var(self.size_sq as f64 / n, mean).sqrt(),
        }
    }

    /// Inter-arrival statistics (ns), over `packets - 1` gaps.
    pub fn iat_stat(&self) -> Stat {
        if self.packets < 2 {
            return Stat::default();
        }
        let n = (self.packets - 1) as f64;
        let mean = (self.last_ts - self.first_ts) as f64 / n;
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

    #[test]
    fn moments_match_direct_computation() {
        let mut s = DirStats::default();
        let pkts = [(100u16, 0u64), (300, 10), (200, 40), (400, 50)];
        for (size, ts) in pkts {
            s.update(size, ts);
        }
        let sz = s.size_stat();
        assert_eq!((sz.min, sz.max, sz.mean), (100.0, 400.0, 250.0));
        assert!((sz.std - 111.803_398_874_989_48).abs() < 1e-9);
        let iat = s.iat_stat();
        assert_eq!((iat.min, iat.max), (10.0, 30.0));
        assert!((iat.mean - 50.0 / 3.0).abs() < 1e-12);
        // gaps 10, 30, 10: population std = sqrt(((10-16.67)^2*2 + (30-16.67)^2)/3)
        assert!((iat.std - 9.428_090_415_820_634).abs() < 1e-9);
    }

    #[test]
    fn single_packet_has_no_iat() {
        let mut s = DirStats::default();
        s.update(60, 5);
        assert_eq!(s.iat_stat(), Stat::default());
        assert_eq!(s.size_stat().std, 0.0);
    }
}
