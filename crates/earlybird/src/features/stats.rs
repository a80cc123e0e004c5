//! Full-flow statistics per direction: IP size and inter-arrival time
//! (min/max/mean/std), as DetectPro and Tstat report them.
//!
//! Contract: [`Moments::update`] is O(1), allocation-free and driven only by
//! the packet timestamp it is given. Packet and byte counts live in the flow
//! entry itself (they are always kept); this struct holds what `--stats
//! full` adds: the sum of sizes is the byte count and the sum of
//! inter-arrivals is `last - first`, so only extremes and sums of squares
//! are stored. Extremes are exact integers: the inter-arrival extremes in
//! nanoseconds up to [`IAT_CAP`] (2^48 − 1 ns, 3.26 days; a longer gap
//! within one flow, possible only with an active timeout above that or
//! timestamps that jump back that far, is kept as `IAT_CAP`), packed with
//! the size extremes into two words; the sums of squares are `u64` (sizes)
//! and `f64` (ns²), so means and standard deviations are floating point.
//!
//! Why packed (BENCHMARKS.md "Exact inter-arrival extremes"): a direction's
//! moments and flag counts share one 64-byte line; `f32` extremes, which
//! fitted, were off by up to ~128 ns at a few seconds (an IAT max above the
//! flow's duration); two `u64` extremes do not fit beside the sizes, 48-bit
//! ones do.

use crate::time::Nanos;

/// Summary statistics of one quantity in one direction (a record holds one
/// only where the quantity was measured, see
/// [`crate::flow::record::FlowRecord::size`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Stat {
    /// Smallest value, exact.
    pub min: u64,
    /// Largest value, exact.
    pub max: u64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Population standard deviation.
    pub std: f64,
}

/// Largest inter-arrival kept exactly (ns): 2^48 − 1, about 3.26 days.
pub const IAT_CAP: u64 = (1 << 48) - 1;

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
    /// Smallest inter-arrival (ns) << 16 | smallest IP length. The
    /// inter-arrival part is [`IAT_CAP`] until a second packet.
    lo: u64,
    /// Largest inter-arrival (ns) << 16 | largest IP length.
    hi: u64,
}

impl Moments {
    /// Accounts one packet of `size` bytes at time `ts`; `first` is true for
    /// the direction's first packet.
    #[inline]
    pub fn update(&mut self, size: u16, ts: Nanos, first: bool) {
        if first {
            self.first_ts = ts;
            self.lo = IAT_CAP << 16 | u64::from(size);
            self.hi = u64::from(size);
        } else {
            let iat = ts.saturating_sub(self.last_ts).min(IAT_CAP);
            let (lo, hi) = (self.lo, self.hi);
            self.lo = (lo >> 16).min(iat) << 16 | u64::from((lo as u16).min(size));
            self.hi = (hi >> 16).max(iat) << 16 | u64::from((hi as u16).max(size));
            let f = iat as f64;
            self.iat_sq += f * f;
        }
        self.last_ts = ts;
        self.size_sq = self
            .size_sq
            .saturating_add(u64::from(size) * u64::from(size));
    }

    /// Smallest and largest IP length (bytes).
    #[inline]
    pub fn size_range(&self) -> (u16, u16) {
        (self.lo as u16, self.hi as u16)
    }

    /// Smallest and largest inter-arrival (ns); meaningful after two
    /// packets.
    #[inline]
    pub fn iat_range(&self) -> (u64, u64) {
        (self.lo >> 16, self.hi >> 16)
    }

    /// Size statistics (bytes) given the direction's packet and byte
    /// counts; `None` without a packet.
    pub fn size_stat(&self, packets: u64, bytes: u64) -> Option<Stat> {
        if packets == 0 {
            return None;
        }
        let n = packets as f64;
        let mean = bytes as f64 / n;
        let (min, max) = self.size_range();
        Some(Stat {
            min: min.into(),
            max: max.into(),
            mean,
            std: var(self.size_sq as f64 / n, mean).sqrt(),
        })
    }

    /// Inter-arrival statistics (ns) over `packets - 1` gaps; `None` with
    /// fewer than two packets.
    pub fn iat_stat(&self, packets: u64) -> Option<Stat> {
        if packets < 2 {
            return None;
        }
        let n = (packets - 1) as f64;
        // Out-of-order timestamps can put `last_ts` before `first_ts`.
        let mean = self.last_ts.saturating_sub(self.first_ts) as f64 / n;
        let (min, max) = self.iat_range();
        Some(Stat {
            min,
            max,
            mean,
            std: var(self.iat_sq / n, mean).sqrt(),
        })
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
        let sz = m.size_stat(n, b).unwrap();
        assert_eq!((sz.min, sz.max, sz.mean), (100, 400, 250.0));
        assert!((sz.std - 111.803_398_874_989_48).abs() < 1e-9);
        let iat = m.iat_stat(n).unwrap();
        assert_eq!((iat.min, iat.max), (10, 30));
        assert!((iat.mean - 50.0 / 3.0).abs() < 1e-12);
        // gaps 10, 30, 10: population std
        assert!((iat.std - 9.428_090_415_820_634).abs() < 1e-9);
    }

    #[test]
    fn single_packet_has_no_iat() {
        let (m, n, b) = run(&[(60, 5)]);
        assert_eq!(m.iat_stat(n), None);
        assert_eq!(m.size_stat(n, b).unwrap().std, 0.0);
        assert_eq!(Moments::default().size_stat(0, 0), None);
    }

    /// Gaps of a few seconds at nanosecond resolution, which `f32` rounded
    /// (6,022,558,000 ns became 6,022,558,208), are kept exactly; sizes
    /// beside them are independent of the gaps.
    #[test]
    fn extremes_are_exact_nanoseconds() {
        let t0 = 1_700_000_000_123_456_789;
        let (m, n, b) = run(&[
            (1500, t0),
            (40, t0 + 6_022_558_000),
            (65535, t0 + 6_022_558_000 + 1),
            (41, t0 + 6_022_558_000 + 1 + 3_039_909_001),
        ]);
        let iat = m.iat_stat(n).unwrap();
        assert_eq!((iat.min, iat.max), (1, 6_022_558_000));
        assert!(iat.max <= t0 + 9_062_467_002 - t0);
        let sz = m.size_stat(n, b).unwrap();
        assert_eq!((sz.min, sz.max), (40, 65535));
    }

    /// The largest representable gap and beyond: kept as the cap, sizes
    /// untouched; a timestamp going back is a gap of 0.
    #[test]
    fn huge_and_backward_gaps() {
        let (m, n, _) = run(&[(60, 0), (70, IAT_CAP), (80, u64::MAX), (90, 5)]);
        let iat = m.iat_stat(n).unwrap();
        assert_eq!((iat.min, iat.max), (0, IAT_CAP));
        assert_eq!(m.size_range(), (60, 90));
    }
}
