//! Naive Bayes over packet sizes and directions, as lookup tables.
//!
//! Contract: for each class `c` and packet position `i < N` the model keeps a
//! table `ln P(size, dir | c, i)` with [`BINS`] entries: index `min(size,1500)`
//! for client→server packets and `1501 + min(size,1500)` for server→client.
//! Each table is a Gaussian kernel density estimate over the training sizes of
//! that class and position (bandwidth `bandwidth` bytes, kernel cut at 4σ),
//! times the direction frequency (Laplace-smoothed; a direction never seen
//! at that position gets its share spread uniformly). It is blended with the
//! same estimate over all classes at that position (weight n / (n + m) for
//! the class's n packets, m = `background`, so a position a class never
//! reached gets the all-classes distribution) and mixed with a uniform floor
//! of weight `floor` so that no entry is `-inf`, and multiplied by the
//! Laplace-smoothed share of the class's flows that reach position `i`
//! (`(n_i + 1) / (n + 2)`), so that a packet at a position the class's flows
//! seldom reach counts against the class. Classification sums the prior and one
//! lookup per available packet (only the first `min(len, N)` packets are
//! used), takes the argmax and reports the softmax posterior of the winner as
//! confidence. Classifying does not allocate and cannot panic; training
//! allocates `C × N × BINS` f32.

use super::dataset::Dataset;
use super::model::Invalid;
use crate::features::early::{EarlyPkt, MAX_EARLY};
use crate::features::Dir;

/// Largest size kept per direction; larger sizes are clamped.
pub const MAX_SIZE: usize = 1500;
/// Entries per table (both directions).
pub const BINS: usize = 2 * (MAX_SIZE + 1);

/// Training knobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NbOptions {
    /// Gaussian kernel standard deviation, bytes.
    pub bandwidth: f32,
    /// Weight of the uniform floor mixed into each table, in (0, 1).
    pub floor: f64,
    /// Pseudo-count of the all-classes distribution of the same position
    /// mixed into each class's table: a class with n packets at position i
    /// gets weight n / (n + background). Keeps rare classes (and positions a
    /// class seldom reached) from owning spiky or flat tables.
    pub background: f64,
}

impl Default for NbOptions {
    fn default() -> Self {
        NbOptions {
            bandwidth: 8.0,
            floor: 1e-4,
            background: 1.0,
        }
    }
}

/// A trained Naive Bayes model.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NaiveBayes {
    /// Number of classes C.
    pub classes: usize,
    /// Number of positions N.
    pub packets: usize,
    /// Kernel bandwidth used in training (informative).
    pub bandwidth: f32,
    /// `ln P(c)`, C entries.
    pub log_prior: Vec<f32>,
    /// `ln P(size, dir | c, i)` at `(i * BINS + index) * C + c` (all classes
    /// of one packet position and size share a cache line).
    pub table: Vec<f32>,
}

/// Table index of one packet.
#[inline]
pub fn bin(p: &EarlyPkt) -> usize {
    let s = (p.size as usize).min(MAX_SIZE);
    match p.dir {
        Dir::Fwd => s,
        Dir::Bwd => MAX_SIZE + 1 + s,
    }
}

/// Gaussian kernel smoothing of a histogram of `MAX_SIZE + 1` bins, result
/// normalised to sum 1 (all zeros when the histogram is empty).
fn kde(hist: &[f64], bandwidth: f64, out: &mut [f64]) {
    let bw = bandwidth.max(1e-3);
    let reach = (4.0 * bw).ceil() as isize;
    let kernel: Vec<f64> = (-reach..=reach)
        .map(|d| (-(d as f64).powi(2) / (2.0 * bw * bw)).exp())
        .collect();
    out.iter_mut().for_each(|o| *o = 0.0);
    let n = hist.len() as isize;
    for (x, &h) in hist.iter().enumerate() {
        if h == 0.0 {
            continue;
        }
        let x = x as isize;
        for (k, &w) in kernel.iter().enumerate() {
            let y = x + k as isize - reach;
            if (0..n).contains(&y) {
                out[y as usize] += h * w;
            }
        }
    }
    let total: f64 = out.iter().sum();
    if total > 0.0 {
        out.iter_mut().for_each(|o| *o /= total);
    }
}

/// Distribution over the [`BINS`] bins of some packets: Gaussian KDE of the
/// sizes within each direction times the Laplace-smoothed direction
/// frequency (a direction never seen gets its share spread uniformly).
/// Returns the number of packets; `out` is all zeros when there is none.
fn density<'a>(
    pkts: impl Iterator<Item = &'a EarlyPkt>,
    bandwidth: f64,
    scratch: &mut (Vec<f64>, Vec<f64>),
    out: &mut [f64],
) -> usize {
    let (hist, dens) = scratch;
    hist.iter_mut().for_each(|h| *h = 0.0);
    let mut dirs = [0usize; 2];
    for p in pkts {
        hist[bin(p)] += 1.0;
        dirs[p.dir as usize] += 1;
    }
    let seen = dirs[0] + dirs[1];
    out.iter_mut().for_each(|o| *o = 0.0);
    if seen == 0 {
        return 0;
    }
    for d in 0..2 {
        let pd = (dirs[d] as f64 + 1.0) / (seen as f64 + 2.0);
        let half = &hist[d * (MAX_SIZE + 1)..][..MAX_SIZE + 1];
        let o = &mut out[d * (MAX_SIZE + 1)..][..MAX_SIZE + 1];
        if dirs[d] == 0 {
            o.iter_mut().for_each(|v| *v = pd / (MAX_SIZE + 1) as f64);
        } else {
            kde(half, bandwidth, dens);
            for (v, &p) in o.iter_mut().zip(dens.iter()) {
                *v = pd * p;
            }
        }
    }
    seen
}

impl NaiveBayes {
    /// Trains on the first `packets` packets of each sample.
    pub fn train(data: &Dataset, packets: usize, opt: &NbOptions) -> NaiveBayes {
        let c_n = data.classes.len();
        let floor = opt.floor.clamp(1e-12, 0.5);
        let m = opt.background.max(0.0);
        let mut counts = vec![0usize; c_n];
        for s in &data.samples {
            counts[s.label as usize] += 1;
        }
        let total = data.samples.len() as f64;
        let log_prior = counts
            .iter()
            .map(|&n| ((n as f64 + 1.0) / (total + c_n as f64)).ln() as f32)
            .collect();
        let mut table = vec![0f32; c_n * packets * BINS];
        let mut global = vec![0f64; BINS];
        let mut own = vec![0f64; BINS];
        let mut scratch = (vec![0f64; BINS], vec![0f64; MAX_SIZE + 1]);
        for i in 0..packets {
            let all = data.samples.iter().filter_map(|s| s.early.get(i));
            if density(all, opt.bandwidth as f64, &mut scratch, &mut global) == 0 {
                global.iter_mut().for_each(|g| *g = 1.0 / BINS as f64);
            }
            for c in 0..c_n {
                let mine = data
                    .samples
                    .iter()
                    .filter(|s| s.label as usize == c)
                    .filter_map(|s| s.early.get(i));
                let n = density(mine, opt.bandwidth as f64, &mut scratch, &mut own) as f64;
                let w = if n + m > 0.0 { n / (n + m) } else { 0.0 };
                // P(a flow of class c reaches position i), Laplace-smoothed:
                // without it a class whose flows end early would be scored
                // on a long flow's later packets by the all-classes
                // distribution alone, which favours it more the longer
                // the flow (Naive Bayes got worse with N).
                let reach = ((n + 1.0) / (counts[c] as f64 + 2.0)).ln();
                for (b, (&p, &g)) in own.iter().zip(&global).enumerate() {
                    let p = (1.0 - floor) * (w * p + (1.0 - w) * g) + floor / BINS as f64;
                    table[(i * BINS + b) * c_n + c] = (p.ln() + reach) as f32;
                }
            }
        }
        NaiveBayes {
            classes: c_n,
            packets,
            bandwidth: opt.bandwidth,
            log_prior,
            table,
        }
    }

    /// Checks that the table sizes agree with C and N (after loading).
    pub fn validate(&self) -> Result<(), Invalid> {
        if self.log_prior.len() != self.classes {
            return Err(Invalid(format!(
                "naive bayes: {} priors for {} classes",
                self.log_prior.len(),
                self.classes
            )));
        }
        if self.table.len() != self.classes * self.packets * BINS {
            return Err(Invalid(format!(
                "naive bayes: table has {} entries, expected {}",
                self.table.len(),
                self.classes * self.packets * BINS
            )));
        }
        if self
            .table
            .iter()
            .chain(&self.log_prior)
            .any(|v| !v.is_finite())
        {
            return Err(Invalid("naive bayes: non-finite log-probability".into()));
        }
        Ok(())
    }

    /// Best class and its posterior, from the first `min(len, N)` packets.
    /// `None` when there are no classes.
    #[inline]
    pub fn predict(&self, early: &[EarlyPkt]) -> Option<(u16, f32)> {
        const BLOCK: usize = 64;
        let c_n = self.classes;
        if c_n == 0 {
            return None;
        }
        let k = early.len().min(self.packets).min(MAX_EARLY);
        let mut rows = [0usize; MAX_EARLY];
        for (i, p) in early[..k].iter().enumerate() {
            rows[i] = (i * BINS + bin(p)) * c_n;
        }
        let mut best = 0usize;
        let mut max = f32::NEG_INFINITY;
        // Online log-sum-exp: sum of exp(score - max) over classes seen.
        let mut sum = 0f32;
        let mut c0 = 0;
        while c0 < c_n {
            let w = BLOCK.min(c_n - c0);
            let mut s = [0f32; BLOCK];
            s[..w].copy_from_slice(&self.log_prior[c0..c0 + w]);
            for &r in &rows[..k] {
                for (acc, &l) in s[..w].iter_mut().zip(&self.table[r + c0..r + c0 + w]) {
                    *acc += l;
                }
            }
            for (j, &v) in s[..w].iter().enumerate() {
                if v > max {
                    sum = sum * (max - v).exp() + 1.0;
                    max = v;
                    best = c0 + j;
                } else {
                    sum += (v - max).exp();
                }
            }
            c0 += w;
        }
        Some((best as u16, 1.0 / sum))
    }
}

#[cfg(test)]
mod tests {
    use super::super::dataset::Sample;
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn bins_fold_direction_and_clamp() {
        let p = |size, dir| EarlyPkt {
            size,
            dir,
            flags: 0,
            iat_us: 0,
        };
        assert_eq!(bin(&p(0, Dir::Fwd)), 0);
        assert_eq!(bin(&p(1500, Dir::Fwd)), 1500);
        assert_eq!(bin(&p(9000, Dir::Fwd)), 1500);
        assert_eq!(bin(&p(0, Dir::Bwd)), 1501);
        assert_eq!(bin(&p(65535, Dir::Bwd)), BINS - 1);
    }

    #[test]
    fn tables_are_normalised_and_finite() {
        // 20 flows per class, all of 4 packets: each table sums to the
        // smoothed share of flows reaching the position, 21/22.
        let d = patterns(20, 0, 1);
        let m = NaiveBayes::train(&d, 4, &NbOptions::default());
        m.validate().unwrap();
        for c in 0..3 {
            for i in 0..4 {
                let s: f64 = (0..BINS)
                    .map(|b| (m.table[(i * BINS + b) * 3 + c] as f64).exp())
                    .sum();
                assert!(
                    (s - 21.0 / 22.0).abs() < 1e-3,
                    "class {c} position {i}: sum {s}"
                );
            }
        }
    }

    #[test]
    fn a_class_of_short_flows_does_not_win_long_flows() {
        // "short": 60 flows of 2 packets; "long": 6 flows of 8 packets
        // whose first two packets look like the short ones. A long flow
        // must be scored as long: the short class never reached its later
        // packets (before the reach factor, the short class took them at
        // the all-classes density, tied there, and won on its prior).
        let pkt = |size, dir| EarlyPkt {
            size,
            dir,
            flags: 0,
            iat_us: 100,
        };
        let head = [pkt(100, Dir::Fwd), pkt(200, Dir::Bwd)];
        let long: Vec<EarlyPkt> = head
            .iter()
            .copied()
            .chain((0..6).map(|j| pkt(300 + 150 * j, Dir::Bwd)))
            .collect();
        let sample = |early: Vec<EarlyPkt>, label, k: usize| Sample {
            early,
            proto: 6,
            sport: 40000 + k as u16,
            dport: 443,
            label,
            group: format!("g{k}"),
        };
        let mut d = Dataset {
            classes: vec!["short".into(), "long".into()],
            samples: Vec::new(),
        };
        for k in 0..60 {
            d.samples.push(sample(head.to_vec(), 0, k));
        }
        for k in 0..6 {
            d.samples.push(sample(long.clone(), 1, 100 + k));
        }
        let m = NaiveBayes::train(&d, 8, &NbOptions::default());
        assert_eq!(m.predict(&long).unwrap().0, 1);
        assert_eq!(m.predict(&head).unwrap().0, 0);
    }

    #[test]
    fn learns_distinct_patterns_perfectly() {
        let d = patterns(30, 0, 2);
        let m = NaiveBayes::train(&d, 4, &NbOptions::default());
        for s in &d.samples {
            let (c, conf) = m.predict(&s.early).unwrap();
            assert_eq!(c, s.label);
            assert!(conf > 0.9 && conf <= 1.0 + 1e-6, "{conf}");
        }
    }

    #[test]
    fn generalises_on_noisy_data() {
        let train = patterns(200, 120, 3);
        let test = patterns(100, 120, 4);
        let m = NaiveBayes::train(&train, 4, &NbOptions::default());
        let ok = test
            .samples
            .iter()
            .filter(|s| m.predict(&s.early).map(|p| p.0) == Some(s.label))
            .count();
        let acc = ok as f64 / test.samples.len() as f64;
        assert!(acc > 0.8, "accuracy {acc}");
    }

    #[test]
    fn empty_flow_uses_prior_only() {
        let d = patterns(10, 0, 1);
        let m = NaiveBayes::train(&d, 4, &NbOptions::default());
        let (_, conf) = m.predict(&[]).unwrap();
        assert!((conf - 1.0 / 3.0).abs() < 0.01, "{conf}");
    }
}
