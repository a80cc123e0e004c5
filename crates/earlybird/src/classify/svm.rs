//! Support vector machine with an RBF kernel, one-vs-one.
//!
//! Contract: features are those of [`super::vector`] with gaps mapped to
//! `ln(1 + µs)` (absent = -1), then standardised with the training mean and
//! standard deviation. One binary C-SVM per pair of classes is trained with
//! SMO (maximal violating pair working set, stop when the KKT gap is below
//! `tol` or after `max_iter` steps) on at most `max_per_class` samples per
//! class (a deterministic subsample; the kernel matrix of a pair is kept in
//! memory). Classification evaluates every pair's decision function
//! `Σ αᵢyᵢ K(svᵢ, x) + b` and votes; ties go to the lower class index; the
//! confidence is the winner's share of its `C-1` contests. Cost per verdict:
//! one kernel evaluation per stored support vector ([`Svm::support_vectors`]),
//! which is why this model is slow. Classification uses stack buffers only
//! (no allocation) and supports at most [`MAX_CLASSES`] classes.
//! No suitable crate was used: smartcore's and linfa's SVCs allocate matrices
//! per prediction and do not serialise to our model file.

use super::dataset::{Dataset, SplitMix64};
use super::model::Invalid;
use super::{vector, FlowFeatures};

/// Largest number of classes an SVM model can vote over.
pub const MAX_CLASSES: usize = 1024;

/// Training knobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SvmOptions {
    /// Box constraint C.
    pub c: f64,
    /// RBF width: K(x, y) = exp(-gamma |x - y|²); `None` = 1 / features.
    pub gamma: Option<f64>,
    /// KKT tolerance.
    pub tol: f64,
    /// SMO step limit per pair.
    pub max_iter: usize,
    /// Samples kept per class for training.
    pub max_per_class: usize,
}

impl Default for SvmOptions {
    fn default() -> Self {
        SvmOptions {
            c: 10.0,
            gamma: None,
            tol: 1e-3,
            max_iter: 200_000,
            max_per_class: 400,
        }
    }
}

/// One binary machine: class `a` (positive) against class `b`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Pair {
    /// Positive class.
    pub a: u16,
    /// Negative class.
    pub b: u16,
    /// Bias b of the decision function.
    pub bias: f32,
    /// First support vector (index into [`Svm::coef`]).
    pub start: u32,
    /// Number of support vectors.
    pub len: u32,
}

/// A trained one-vs-one RBF SVM.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Svm {
    /// Number of early packets N.
    pub packets: usize,
    /// Whether protocol and server port are features.
    pub use_ports: bool,
    /// Number of classes.
    pub classes: usize,
    /// RBF gamma.
    pub gamma: f32,
    /// Per-feature training mean.
    pub mean: Vec<f32>,
    /// Per-feature 1 / standard deviation.
    pub scale: Vec<f32>,
    /// Binary machines.
    pub pairs: Vec<Pair>,
    /// αᵢyᵢ per support vector.
    pub coef: Vec<f32>,
    /// Support vectors, `features` values each, standardised.
    pub sv: Vec<f32>,
}

/// Raw feature value with gaps log-compressed.
fn raw(f: &FlowFeatures<'_>, packets: usize, idx: usize) -> f32 {
    let v = vector::value(f, packets, idx);
    if idx < 2 * packets && idx & 1 == 1 {
        if v < 0.0 {
            -1.0
        } else {
            v.ln_1p()
        }
    } else {
        v
    }
}

#[inline]
fn rbf(gamma: f32, a: &[f32], b: &[f32]) -> f32 {
    let d: f32 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    (-gamma * d).exp()
}

/// Binary SMO; returns (alpha, bias). `k` is the n×n kernel matrix.
fn smo(k: &[f32], y: &[f64], opt: &SvmOptions) -> (Vec<f64>, f64) {
    let n = y.len();
    let c = opt.c;
    let mut a = vec![0f64; n];
    let mut g = vec![-1f64; n];
    let kk = |i: usize, j: usize| k[i * n + j] as f64;
    let up = |a: &[f64], t: usize| (y[t] > 0.0 && a[t] < c) || (y[t] < 0.0 && a[t] > 0.0);
    let low = |a: &[f64], t: usize| (y[t] < 0.0 && a[t] < c) || (y[t] > 0.0 && a[t] > 0.0);
    let (mut m_up, mut m_low) = (0.0, 0.0);
    for _ in 0..opt.max_iter {
        let (mut i, mut j) = (usize::MAX, usize::MAX);
        m_up = f64::NEG_INFINITY;
        m_low = f64::INFINITY;
        for t in 0..n {
            let v = -y[t] * g[t];
            if up(&a, t) && v > m_up {
                m_up = v;
                i = t;
            }
            if low(&a, t) && v < m_low {
                m_low = v;
                j = t;
            }
        }
        if i == usize::MAX || j == usize::MAX || m_up - m_low < opt.tol {
            break;
        }
        let quad = (kk(i, i) + kk(j, j) - 2.0 * kk(i, j)).max(1e-12);
        let lim_i = if y[i] > 0.0 { c - a[i] } else { a[i] };
        let lim_j = if y[j] > 0.0 { a[j] } else { c - a[j] };
        let d = ((m_up - m_low) / quad).min(lim_i).min(lim_j);
        let (di, dj) = (y[i] * d, -y[j] * d);
        a[i] += di;
        a[j] += dj;
        for t in 0..n {
            g[t] += y[t] * (y[i] * kk(t, i) * di + y[j] * kk(t, j) * dj);
        }
    }
    let free: Vec<f64> = (0..n)
        .filter(|&t| a[t] > 1e-9 && a[t] < c - 1e-9)
        .map(|t| -y[t] * g[t])
        .collect();
    let bias = if free.is_empty() {
        if m_up.is_finite() && m_low.is_finite() {
            (m_up + m_low) / 2.0
        } else {
            0.0
        }
    } else {
        free.iter().sum::<f64>() / free.len() as f64
    };
    (a, bias)
}

impl Svm {
    /// Trains one machine per pair of classes.
    pub fn train(data: &Dataset, packets: usize, use_ports: bool, opt: &SvmOptions) -> Svm {
        let packets = packets.min(crate::features::early::MAX_EARLY);
        let nf = vector::count(packets, use_ports);
        let classes = data.classes.len();
        let mut x = vec![0f32; data.samples.len() * nf];
        for (s, row) in data.samples.iter().zip(x.chunks_mut(nf.max(1))) {
            let f = FlowFeatures {
                early: &s.early,
                proto: s.proto,
                sport: s.sport,
                dport: s.dport,
            };
            for (i, v) in row.iter_mut().enumerate().take(nf) {
                *v = raw(&f, packets, i);
            }
        }
        let rows = data.samples.len().max(1) as f64;
        let mut mean = vec![0f32; nf];
        let mut scale = vec![1f32; nf];
        for j in 0..nf {
            let m = x.iter().skip(j).step_by(nf).map(|&v| v as f64).sum::<f64>() / rows;
            let var = x
                .iter()
                .skip(j)
                .step_by(nf)
                .map(|&v| (v as f64 - m).powi(2))
                .sum::<f64>()
                / rows;
            mean[j] = m as f32;
            scale[j] = if var > 1e-12 {
                (1.0 / var.sqrt()) as f32
            } else {
                1.0
            };
        }
        for row in x.chunks_mut(nf.max(1)) {
            for j in 0..nf {
                row[j] = (row[j] - mean[j]) * scale[j];
            }
        }
        let gamma = opt.gamma.unwrap_or(1.0 / nf.max(1) as f64) as f32;
        // Deterministic subsample per class.
        let mut by_class: Vec<Vec<usize>> = vec![Vec::new(); classes];
        for (i, s) in data.samples.iter().enumerate() {
            by_class[s.label as usize].push(i);
        }
        let mut rng = SplitMix64::new(0x5eed);
        for v in &mut by_class {
            for i in (1..v.len()).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                v.swap(i, j);
            }
            v.truncate(opt.max_per_class.max(1));
        }
        let mut svm = Svm {
            packets,
            use_ports,
            classes,
            gamma,
            mean,
            scale,
            pairs: Vec::new(),
            coef: Vec::new(),
            sv: Vec::new(),
        };
        for a in 0..classes {
            for b in a + 1..classes {
                if by_class[a].is_empty() || by_class[b].is_empty() {
                    continue;
                }
                let idx: Vec<usize> = by_class[a].iter().chain(&by_class[b]).copied().collect();
                let y: Vec<f64> = (0..idx.len())
                    .map(|t| if t < by_class[a].len() { 1.0 } else { -1.0 })
                    .collect();
                let n = idx.len();
                let mut k = vec![0f32; n * n];
                for p in 0..n {
                    for q in p..n {
                        let v = rbf(gamma, &x[idx[p] * nf..][..nf], &x[idx[q] * nf..][..nf]);
                        k[p * n + q] = v;
                        k[q * n + p] = v;
                    }
                }
                let (alpha, bias) = smo(&k, &y, opt);
                let start = svm.coef.len() as u32;
                for t in 0..n {
                    if alpha[t] > 1e-8 {
                        svm.coef.push((alpha[t] * y[t]) as f32);
                        svm.sv.extend_from_slice(&x[idx[t] * nf..][..nf]);
                    }
                }
                svm.pairs.push(Pair {
                    a: a as u16,
                    b: b as u16,
                    bias: bias as f32,
                    start,
                    len: svm.coef.len() as u32 - start,
                });
            }
        }
        svm
    }

    /// Number of features per vector.
    pub fn features(&self) -> usize {
        vector::count(self.packets, self.use_ports)
    }

    /// Stored support vectors (kernel evaluations per verdict).
    pub fn support_vectors(&self) -> usize {
        self.coef.len()
    }

    /// Checks a loaded model's sizes and indices.
    pub fn validate(&self) -> Result<(), Invalid> {
        let nf = self.features();
        if self.packets > crate::features::early::MAX_EARLY || self.classes > MAX_CLASSES {
            return Err(Invalid("svm: too many packets or classes".into()));
        }
        if self.mean.len() != nf || self.scale.len() != nf || self.sv.len() != self.coef.len() * nf
        {
            return Err(Invalid(
                "svm: vector sizes disagree with the feature count".into(),
            ));
        }
        for p in &self.pairs {
            let end = p.start as usize + p.len as usize;
            if p.a as usize >= self.classes || p.b as usize >= self.classes || end > self.coef.len()
            {
                return Err(Invalid("svm: pair out of range".into()));
            }
        }
        Ok(())
    }

    /// Voted class and the winner's share of its contests; `None` when the
    /// model has no pair.
    pub fn predict(&self, f: &FlowFeatures<'_>) -> Option<(u16, f32)> {
        if self.pairs.is_empty() || self.classes > MAX_CLASSES {
            return None;
        }
        let nf = self.features();
        let mut x = [0f32; vector::MAX_FEATURES];
        for (j, v) in x.iter_mut().enumerate().take(nf) {
            *v = (raw(f, self.packets, j) - self.mean[j]) * self.scale[j];
        }
        let x = &x[..nf];
        let mut votes = [0u16; MAX_CLASSES];
        for p in &self.pairs {
            let mut s = p.bias;
            let (lo, hi) = (p.start as usize, p.start as usize + p.len as usize);
            for (t, &c) in self.coef[lo..hi].iter().enumerate() {
                s += c * rbf(self.gamma, &self.sv[(lo + t) * nf..][..nf], x);
            }
            let w = if s >= 0.0 { p.a } else { p.b };
            votes[w as usize] += 1;
        }
        let mut best = 0usize;
        for c in 1..self.classes {
            if votes[c] > votes[best] {
                best = c;
            }
        }
        let contests = self.classes.saturating_sub(1).max(1) as f32;
        Some((best as u16, votes[best] as f32 / contests))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{ff, patterns};
    use super::*;

    #[test]
    fn learns_distinct_patterns_perfectly() {
        let d = patterns(20, 0, 1);
        let m = Svm::train(&d, 4, false, &SvmOptions::default());
        m.validate().unwrap();
        assert_eq!(m.pairs.len(), 3);
        for s in &d.samples {
            assert_eq!(m.predict(&ff(s)), Some((s.label, 1.0)));
        }
    }

    #[test]
    fn generalises_on_noisy_data() {
        let train = patterns(100, 120, 3);
        let test = patterns(60, 120, 4);
        let m = Svm::train(&train, 4, false, &SvmOptions::default());
        let ok = test
            .samples
            .iter()
            .filter(|s| m.predict(&ff(s)).map(|p| p.0) == Some(s.label))
            .count();
        let acc = ok as f64 / test.samples.len() as f64;
        assert!(acc > 0.8, "accuracy {acc}");
        assert!(m.support_vectors() > 0);
    }

    #[test]
    fn xor_needs_the_kernel() {
        // Two classes on the diagonals of a square: not linearly separable.
        use crate::features::early::EarlyPkt;
        use crate::features::Dir;
        let mut d = Dataset {
            classes: vec!["x".into(), "y".into()],
            samples: vec![],
        };
        for k in 0..10u16 {
            for (a, b, label) in [
                (100, 100, 0),
                (1000, 1000, 0),
                (100, 1000, 1),
                (1000, 100, 1),
            ] {
                let p = |s: u16| EarlyPkt {
                    size: s + k,
                    dir: Dir::Fwd,
                    flags: 0,
                    iat_us: 0,
                };
                d.samples.push(super::super::dataset::Sample {
                    early: vec![p(a), p(b)],
                    proto: 6,
                    sport: 1,
                    dport: 2,
                    label,
                    group: String::new(),
                });
            }
        }
        let m = Svm::train(
            &d,
            2,
            false,
            &SvmOptions {
                gamma: Some(1.0),
                ..Default::default()
            },
        );
        for s in &d.samples {
            assert_eq!(m.predict(&ff(s)).unwrap().0, s.label);
        }
    }
}
