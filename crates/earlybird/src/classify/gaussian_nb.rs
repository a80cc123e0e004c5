//! Gaussian Naive Bayes over the numeric feature vector (`gnb`): the model
//! scikit-learn's `GaussianNB` fits, so a fitted one can be imported.
//!
//! Contract: the features are those of the trees ([`super::vector`]: per
//! early packet the signed size and the gap in µs, then with `use_ports`
//! the IP protocol and the server port), taken as f32 and widened to f64.
//! For each class c the model keeps `theta[c][i]` (mean of feature i),
//! `var[c][i]` (its variance, smoothing included: every entry finite and
//! positive) and `class_prior[c]` (in [0, 1], not all 0). A flow's joint log
//! likelihood is computed in f64 in scikit-learn's order
//! (`GaussianNB._joint_log_likelihood`):
//! `ln(prior) + (-0.5 Σ ln(2π var) - 0.5 Σ (x - theta)² / var)`, each Σ in
//! numpy's pairwise order ([`np_sum`]); the verdict is the first class of
//! greatest joint log likelihood (numpy's `argmax`), the confidence its
//! posterior (softmax of the joint log likelihoods). Classification
//! allocates nothing and cannot panic on a validated model.
//!
//! [`GaussianNb::train`] fits as scikit-learn does with its defaults, in
//! f64: per class the mean and the population variance of each feature,
//! plus `1e-9` × the largest variance of any feature over all samples
//! (`var_smoothing`; `1e-9` itself when every feature is constant), and
//! priors the classes' shares of the samples.
//!
//! File form (`docs/MODEL_FORMAT.md`): `packets`, `use_ports`, `theta`
//! and `var` (C lists of F numbers), `class_prior` (C numbers). The
//! numbers are read with Rust's correctly rounded parser (the JSON
//! parser's own float reading may be one unit in the last place off), so
//! the values scikit-learn wrote (Python's `repr`, shortest round trip)
//! come back bit for bit.

use serde_json::value::RawValue;

use super::dataset::Dataset;
use super::model::Invalid;
use super::{vector, FlowFeatures};
use crate::features::early::MAX_EARLY;

/// scikit-learn's default `var_smoothing`.
pub const VAR_SMOOTHING: f64 = 1e-9;

/// A Gaussian Naive Bayes model (see the module docs).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "RawBody", into = "Body")]
pub struct GaussianNb {
    /// Number of early packets N.
    pub packets: usize,
    /// Whether protocol and server port are features.
    pub use_ports: bool,
    /// Means, C × F, row-major.
    theta: Vec<f64>,
    /// Variances (smoothing included), C × F, row-major.
    var: Vec<f64>,
    /// Class priors, C.
    class_prior: Vec<f64>,
    /// Derived on construction: `ln(class_prior[c])`.
    ln_prior: Vec<f64>,
    /// Derived on construction: `-0.5 Σ_i ln(2π var[c][i])`.
    norm: Vec<f64>,
}

/// The file form, written.
#[derive(serde::Serialize)]
struct Body {
    packets: usize,
    use_ports: bool,
    theta: Vec<Vec<f64>>,
    var: Vec<Vec<f64>>,
    class_prior: Vec<f64>,
}

/// The file form, read: numbers as their text (see the module docs).
#[derive(serde::Deserialize)]
struct RawBody {
    packets: usize,
    use_ports: bool,
    theta: Vec<Vec<Box<RawValue>>>,
    var: Vec<Vec<Box<RawValue>>>,
    class_prior: Vec<Box<RawValue>>,
}

fn number(v: &RawValue, what: &str) -> Result<f64, Invalid> {
    v.get()
        .trim()
        .parse::<f64>()
        .map_err(|_| Invalid(format!("{what}: {} is not a number", v.get())))
}

impl TryFrom<RawBody> for GaussianNb {
    type Error = Invalid;
    fn try_from(r: RawBody) -> Result<GaussianNb, Invalid> {
        let flat = |rows: &[Vec<Box<RawValue>>], what: &str| -> Result<Vec<f64>, Invalid> {
            let f = rows.first().map_or(0, Vec::len);
            let mut out = Vec::with_capacity(rows.len() * f);
            for (c, row) in rows.iter().enumerate() {
                if row.len() != f {
                    return Err(Invalid(format!(
                        "{what}[{c}] has {} numbers, {what}[0] {f}",
                        row.len()
                    )));
                }
                for v in row {
                    out.push(number(v, what)?);
                }
            }
            Ok(out)
        };
        let theta = flat(&r.theta, "theta")?;
        let var = flat(&r.var, "var")?;
        if r.theta.len() != r.var.len() || theta.len() != var.len() {
            return Err(Invalid("theta and var differ in shape".into()));
        }
        let class_prior = r
            .class_prior
            .iter()
            .map(|v| number(v, "class_prior"))
            .collect::<Result<Vec<f64>, Invalid>>()?;
        Ok(GaussianNb::new(
            r.packets,
            r.use_ports,
            theta,
            var,
            class_prior,
        ))
    }
}

impl From<GaussianNb> for Body {
    fn from(m: GaussianNb) -> Body {
        let f = m.features().max(1);
        Body {
            packets: m.packets,
            use_ports: m.use_ports,
            theta: m.theta.chunks(f).map(<[f64]>::to_vec).collect(),
            var: m.var.chunks(f).map(<[f64]>::to_vec).collect(),
            class_prior: m.class_prior,
        }
    }
}

/// numpy's sum of a float64 vector (`pairwise_sum` of
/// `numpy/_core/src/umath/loops_utils.h.src`, reduced from 0): below 8
/// numbers one after the other; up to 128 eight running sums combined as
/// `((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))`, then the rest one
/// by one; above, the two halves (cut at a multiple of 8) summed apart.
pub fn np_sum(a: &[f64]) -> f64 {
    0.0 + pairwise(a)
}

fn pairwise(a: &[f64]) -> f64 {
    let n = a.len();
    if n < 8 {
        let mut res = 0.0;
        for &x in a {
            res += x;
        }
        res
    } else if n <= 128 {
        let mut r = [0f64; 8];
        r.copy_from_slice(&a[..8]);
        let whole = n - n % 8;
        let mut i = 8;
        while i < whole {
            for (j, rj) in r.iter_mut().enumerate() {
                *rj += a[i + j];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &x in &a[whole..] {
            res += x;
        }
        res
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        pairwise(&a[..n2]) + pairwise(&a[n2..])
    }
}

impl GaussianNb {
    /// A model from its parameters (C × F means and variances, row-major,
    /// and C priors); [`GaussianNb::validate`] says whether they fit.
    pub fn new(
        packets: usize,
        use_ports: bool,
        theta: Vec<f64>,
        var: Vec<f64>,
        class_prior: Vec<f64>,
    ) -> GaussianNb {
        let f = vector::count(packets, use_ports).max(1);
        let ln_prior = class_prior.iter().map(|p| p.ln()).collect();
        let two_pi = 2.0 * std::f64::consts::PI;
        let mut logs = Vec::with_capacity(f);
        let norm = var
            .chunks(f)
            .map(|row| {
                logs.clear();
                logs.extend(row.iter().map(|v| (two_pi * v).ln()));
                -0.5 * np_sum(&logs)
            })
            .collect();
        GaussianNb {
            packets,
            use_ports,
            theta,
            var,
            class_prior,
            ln_prior,
            norm,
        }
    }

    /// Number of features F.
    pub fn features(&self) -> usize {
        vector::count(self.packets, self.use_ports)
    }

    /// Number of classes C.
    pub fn classes(&self) -> usize {
        self.class_prior.len()
    }

    /// Means of class `c` (F numbers; empty when there is no such class).
    pub fn theta(&self, c: usize) -> &[f64] {
        let f = self.features();
        self.theta.get(c * f..(c + 1) * f).unwrap_or(&[])
    }

    /// Variances of class `c`, smoothing included.
    pub fn var(&self, c: usize) -> &[f64] {
        let f = self.features();
        self.var.get(c * f..(c + 1) * f).unwrap_or(&[])
    }

    /// The class priors.
    pub fn class_prior(&self) -> &[f64] {
        &self.class_prior
    }

    /// Fits the model on `data` (see the module docs).
    pub fn train(data: &Dataset, packets: usize, use_ports: bool) -> GaussianNb {
        let packets = packets.min(MAX_EARLY);
        let f = vector::count(packets, use_ports);
        let c = data.classes.len();
        let rows: Vec<(usize, Vec<f64>)> = data
            .samples
            .iter()
            .map(|s| {
                let ff = FlowFeatures {
                    early: &s.early,
                    proto: s.proto,
                    sport: s.sport,
                    dport: s.dport,
                };
                let x = (0..f)
                    .map(|i| vector::value(&ff, packets, i) as f64)
                    .collect();
                (s.label as usize, x)
            })
            .collect();
        // Mean and population variance of each feature over `pick`ed rows.
        let moments = |pick: &dyn Fn(usize) -> bool| {
            let mut n = 0usize;
            let mut mean = vec![0f64; f];
            for (l, x) in &rows {
                if pick(*l) {
                    n += 1;
                    mean.iter_mut().zip(x).for_each(|(m, v)| *m += v);
                }
            }
            let nf = n.max(1) as f64;
            mean.iter_mut().for_each(|m| *m /= nf);
            let mut var = vec![0f64; f];
            for (l, x) in &rows {
                if pick(*l) {
                    for ((s, v), m) in var.iter_mut().zip(x).zip(&mean) {
                        *s += (v - m) * (v - m);
                    }
                }
            }
            var.iter_mut().for_each(|s| *s /= nf);
            (n, mean, var)
        };
        let (total, _, all_var) = moments(&|_| true);
        let widest = all_var.iter().copied().fold(0.0, f64::max);
        let epsilon = if widest > 0.0 {
            VAR_SMOOTHING * widest
        } else {
            VAR_SMOOTHING
        };
        let mut theta = Vec::with_capacity(c * f);
        let mut var = Vec::with_capacity(c * f);
        let mut class_prior = Vec::with_capacity(c);
        for class in 0..c {
            let (n, m, v) = moments(&|l| l == class);
            theta.extend(m);
            var.extend(v.into_iter().map(|v| v + epsilon));
            class_prior.push(n as f64 / total.max(1) as f64);
        }
        GaussianNb::new(packets, use_ports, theta, var, class_prior)
    }

    /// Checks a loaded model for `classes` classes.
    pub fn validate(&self, classes: usize) -> Result<(), Invalid> {
        let f = self.features();
        if self.packets == 0 || self.packets > MAX_EARLY {
            return Err(Invalid(format!(
                "packets = {}, expected 1..={MAX_EARLY}",
                self.packets
            )));
        }
        if self.class_prior.len() != classes {
            return Err(Invalid(format!(
                "header has {classes} classes, body {} priors",
                self.class_prior.len()
            )));
        }
        for (what, v) in [("theta", &self.theta), ("var", &self.var)] {
            if v.len() != classes * f {
                return Err(Invalid(format!(
                    "{what} has {} numbers, expected {classes} classes × {f} features",
                    v.len()
                )));
            }
        }
        if let Some(x) = self.theta.iter().find(|x| !x.is_finite()) {
            return Err(Invalid(format!("theta holds {x}, expected finite means")));
        }
        if let Some(x) = self.var.iter().find(|x| !(x.is_finite() && **x > 0.0)) {
            return Err(Invalid(format!(
                "var holds {x}, expected finite variances > 0"
            )));
        }
        if let Some(p) = self.class_prior.iter().find(|p| !(0.0..=1.0).contains(*p)) {
            return Err(Invalid(format!("class prior {p} outside [0, 1]")));
        }
        if self.class_prior.iter().all(|p| *p == 0.0) {
            return Err(Invalid("every class prior is 0".into()));
        }
        if let Some(x) = self.norm.iter().find(|x| !x.is_finite()) {
            return Err(Invalid(format!("a class's normalising term is {x}")));
        }
        Ok(())
    }

    /// The joint log likelihood of class `c` for features `x` (F numbers,
    /// at most [`vector::MAX_FEATURES`] < 128), in scikit-learn's order:
    /// the terms `(x - theta)² / var` summed as [`np_sum`] sums them,
    /// computed as they are added (no buffer).
    #[inline]
    fn jll(&self, c: usize, x: &[f64]) -> f64 {
        let f = x.len();
        let (Some(theta), Some(var)) = (
            self.theta.get(c * f..(c + 1) * f),
            self.var.get(c * f..(c + 1) * f),
        ) else {
            return f64::NEG_INFINITY;
        };
        let term = |i: usize| {
            let d = x[i] - theta[i];
            (d * d) / var[i]
        };
        let s = if f < 8 {
            let mut res = 0.0;
            for i in 0..f {
                res += term(i);
            }
            res
        } else {
            let mut r = [0f64; 8];
            for (j, rj) in r.iter_mut().enumerate() {
                *rj = term(j);
            }
            let whole = f - f % 8;
            let mut i = 8;
            while i < whole {
                for (j, rj) in r.iter_mut().enumerate() {
                    *rj += term(i + j);
                }
                i += 8;
            }
            let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
            for k in whole..f {
                res += term(k);
            }
            res
        };
        self.ln_prior[c] + (self.norm[c] - 0.5 * (0.0 + s))
    }

    /// The class of greatest joint log likelihood (the first on ties) and
    /// its posterior.
    pub fn predict(&self, f: &FlowFeatures<'_>) -> (u16, f32) {
        let nf = self.features().min(vector::MAX_FEATURES);
        let mut x = [0f64; vector::MAX_FEATURES];
        for (i, xi) in x[..nf].iter_mut().enumerate() {
            *xi = vector::value(f, self.packets, i) as f64;
        }
        let x = &x[..nf];
        // Running argmax and Σ exp(jll - max) (rescaled when the max moves).
        let mut best = (0usize, f64::NEG_INFINITY);
        let mut sum = 0.0f64;
        for c in 0..self.classes() {
            let j = self.jll(c, x);
            if c == 0 || j > best.1 {
                sum = if best.1 == f64::NEG_INFINITY {
                    1.0
                } else {
                    sum * (best.1 - j).exp() + 1.0
                };
                best = (c, j);
            } else if j - best.1 > -37.0 {
                // Below, exp(j - best) < 8.6e-17 is less than half a unit
                // in the last place of sum (>= 1): adding it would leave
                // sum as it is, so skipping it changes nothing.
                sum += (j - best.1).exp();
            }
        }
        let conf = if best.1 == f64::NEG_INFINITY {
            0.0
        } else {
            (1.0 / sum) as f32
        };
        (best.0 as u16, conf)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{ff, patterns};
    use super::*;

    fn acc(m: &GaussianNb, d: &Dataset) -> f64 {
        let ok = d
            .samples
            .iter()
            .filter(|s| m.predict(&ff(s)).0 == s.label)
            .count();
        ok as f64 / d.samples.len() as f64
    }

    #[test]
    fn numpy_pairwise_order() {
        // Sums whose value depends on the order: 1e16 ± 1 loses the 1.
        let a = [1e16, 1.0, -1e16, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0];
        // One after the other: ((1e16 + 1) - 1e16) + 1 + ... + 1 = 2.
        assert_eq!(a.iter().fold(0.0, |s, x| s + x), 2.0);
        // Eight running sums: ((1e16 + 1) + (-1e16 + 1)) + 0 = 0, then + 1
        // (numpy's np.sum of this array is 1.0).
        assert_eq!(np_sum(&a), 1.0);
        // Below eight, one after the other (numpy: 1.0).
        assert_eq!(np_sum(&a[..4]), 1.0);
        let big: Vec<f64> = (0..300).map(|i| i as f64).collect();
        assert_eq!(np_sum(&big), 44850.0);
    }

    #[test]
    fn jll_sums_in_numpys_order() {
        // F from 2 (below 8) to 66 (eight running sums and a rest).
        for packets in [1, 3, 4, 5, 32] {
            for use_ports in [false, true] {
                let d = patterns(10, 300, 3);
                let m = GaussianNb::train(&d, packets, use_ports);
                let f = m.features();
                for s in &d.samples {
                    let x: Vec<f64> = (0..f)
                        .map(|i| vector::value(&ff(s), packets, i) as f64)
                        .collect();
                    for c in 0..m.classes() {
                        let terms: Vec<f64> = (0..f)
                            .map(|i| (x[i] - m.theta(c)[i]).powi(2) / m.var(c)[i])
                            .collect();
                        let want = m.ln_prior[c] + (m.norm[c] - 0.5 * np_sum(&terms));
                        assert_eq!(m.jll(c, &x).to_bits(), want.to_bits());
                    }
                }
            }
        }
    }

    #[test]
    fn learns_patterns_and_round_trips() {
        let d = patterns(40, 60, 1);
        let m = GaussianNb::train(&d, 4, false);
        m.validate(3).unwrap();
        let a = acc(&m, &patterns(40, 60, 2));
        assert!(a > 0.9, "accuracy {a}");
        let json = serde_json::to_vec(&m).unwrap();
        let back: GaussianNb = serde_json::from_slice(&json).unwrap();
        assert_eq!(back, m);
        for s in &d.samples {
            let (c, p) = m.predict(&ff(s));
            assert!(p > 0.0 && p <= 1.0, "{p}");
            assert_eq!(back.predict(&ff(s)), (c, p));
        }
    }

    #[test]
    fn fits_as_scikit_learn() {
        // Two classes, one packet: means, population variances plus 1e-9 ×
        // the widest variance over all samples, priors by share.
        let mut d = patterns(1, 0, 1);
        d.samples.truncate(2);
        d.samples.push(d.samples[0].clone());
        d.classes.truncate(2);
        d.samples[2].early[0].size += 10;
        let m = GaussianNb::train(&d, 1, false);
        let s0 = d.samples[0].early[0].size as f64;
        let s1 = d.samples[1].early[0].size as f64;
        let sizes = [s0, s1, s0 + 10.0];
        let mean_all = sizes.iter().sum::<f64>() / 3.0;
        let var_all = sizes.iter().map(|s| (s - mean_all).powi(2)).sum::<f64>() / 3.0;
        // The first gaps are all 0: the sizes have the widest variance.
        let eps = 1e-9 * var_all;
        assert_eq!(m.theta(0)[0], s0 + 5.0);
        assert_eq!(m.var(0)[0], 25.0 + eps);
        assert_eq!(m.theta(1)[0], s1);
        assert_eq!(m.var(1)[0], eps);
        assert_eq!(m.var(1)[1], eps);
        assert_eq!(m.class_prior(), &[2.0 / 3.0, 1.0 / 3.0]);
    }

    #[test]
    fn exact_numbers_and_bad_bodies() {
        // 0.1 + 0.2's shortest form has 17 digits.
        let t = 0.1f64 + 0.2;
        let body = format!(
            r#"{{"packets":1,"use_ports":false,"theta":[[{t:?},-3.0],[1e-300,2]],"var":[[1,2],[3,4]],"class_prior":[0.5,0.5]}}"#
        );
        let m: GaussianNb = serde_json::from_str(&body).unwrap();
        assert_eq!(m.theta(0)[0].to_bits(), t.to_bits());
        assert_eq!(m.theta(1)[0], 1e-300);
        m.validate(2).unwrap();
        assert!(m.validate(3).is_err());
        for (bad, want) in [
            (body.replace("[3,4]", "[3,0]"), "var holds 0"),
            (body.replace("[3,4]", "[3,-1]"), "var holds -1"),
            (body.replace("[0.5,0.5]", "[0,0]"), "every class prior is 0"),
            (body.replace("[0.5,0.5]", "[1.5,0.5]"), "outside [0, 1]"),
            (body.replace("[[1,2],[3,4]]", "[[1,2]]"), "differ in shape"),
            (body.replace("[3,4]", "[3]"), "var[1] has 1 numbers"),
            (body.replace("[3,4]", "[3,\"x\"]"), ""),
        ] {
            let e = match serde_json::from_str::<GaussianNb>(&bad) {
                Err(e) => e.to_string(),
                Ok(m) => m.validate(2).unwrap_err().to_string(),
            };
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    #[test]
    fn ties_go_to_the_first_class_and_far_classes_keep_a_posterior() {
        let m = GaussianNb::new(
            1,
            false,
            vec![0.0, 0.0, 0.0, 0.0, 1e6, 0.0],
            vec![1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
            vec![0.25, 0.25, 0.5],
        );
        m.validate(3).unwrap();
        let f = FlowFeatures {
            early: &[],
            proto: 0,
            sport: 0,
            dport: 0,
        };
        // Absent packet: size 0, gap -1; classes 0 and 1 tie, class 2 is
        // 1e6 away.
        assert_eq!(m.predict(&f), (0, 0.5));
    }
}
