//! Random forest: bagged C4.5-style trees with random attribute subsets.
//!
//! Contract: each of `trees` trees (at most [`MAX_TREES`]) is grown by
//! [`Tree::train`] on a bootstrap sample of the training set (drawn with a
//! seeded generator), choosing among `⌈√features⌉` random attributes at each
//! node; trees are not pruned (bagging averages their variance away). A flow
//! gets the class most trees vote for (ties: lower class index) and the
//! share of trees that voted for it as confidence. Classification gathers
//! the features once and walks each compiled tree
//! ([`super::compiled_tree`]) in a loop: no recursion, no allocation, no
//! panic.

use super::dataset::{Dataset, SplitMix64};
use super::model::Invalid;
use super::tree::{Tree, TreeOptions};
use super::{compiled_tree, vector, FlowFeatures};

/// Largest number of trees.
pub const MAX_TREES: usize = 64;

/// A trained forest.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Forest {
    /// Number of early packets N.
    pub packets: usize,
    /// Whether protocol and server port are features.
    pub use_ports: bool,
    /// The trees.
    pub trees: Vec<Tree>,
}

impl Forest {
    /// Grows `trees` trees on bootstrap samples.
    pub fn train(
        data: &Dataset,
        packets: usize,
        use_ports: bool,
        trees: usize,
        min_leaf: usize,
        seed: u64,
    ) -> Forest {
        let nf = vector::count(packets, use_ports);
        let opt = TreeOptions {
            min_leaf,
            cf: None,
            features_per_node: Some(((nf as f64).sqrt().ceil() as usize).max(1)),
            ..TreeOptions::default()
        };
        let mut rng = SplitMix64::new(seed);
        let n = data.samples.len() as u64;
        let trees = (0..trees.clamp(1, MAX_TREES))
            .map(|_| {
                let rows: Vec<u32> = (0..n).map(|_| rng.below(n.max(1)) as u32).collect();
                Tree::train(data, packets, use_ports, &opt, Some(&rows), rng.next_u64())
            })
            .collect();
        Forest {
            packets: packets.min(crate::features::early::MAX_EARLY),
            use_ports,
            trees,
        }
    }

    /// Checks a loaded forest.
    pub fn validate(&self, classes: usize) -> Result<(), Invalid> {
        if self.trees.is_empty() || self.trees.len() > MAX_TREES {
            return Err(Invalid(format!(
                "forest has {} trees, expected 1..={MAX_TREES}",
                self.trees.len()
            )));
        }
        for t in &self.trees {
            if t.packets() != self.packets || t.use_ports() != self.use_ports {
                return Err(Invalid("forest trees disagree on features".into()));
            }
            t.validate(classes)?;
        }
        Ok(())
    }

    /// Majority vote and the share of trees behind it.
    pub fn predict(&self, f: &FlowFeatures<'_>) -> (u16, f32) {
        let mut votes = [0u16; MAX_TREES];
        let n = self.trees.len().min(MAX_TREES);
        let x = compiled_tree::Gathered::new(f, self.packets);
        for (v, t) in votes.iter_mut().zip(&self.trees) {
            *v = t.flat().predict_gathered(f, &x).0;
        }
        let votes = &votes[..n];
        let mut best = (0u16, 0usize);
        for &c in votes {
            let k = votes.iter().filter(|&&d| d == c).count();
            if k > best.1 || (k == best.1 && c < best.0) {
                best = (c, k);
            }
        }
        (best.0, best.1 as f32 / n.max(1) as f32)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::patterns;
    use super::*;

    fn acc(m: &Forest, d: &Dataset) -> f64 {
        let ok = d
            .samples
            .iter()
            .filter(|s| {
                let f = FlowFeatures {
                    early: &s.early,
                    proto: s.proto,
                    sport: s.sport,
                    dport: s.dport,
                };
                m.predict(&f).0 == s.label
            })
            .count();
        ok as f64 / d.samples.len() as f64
    }

    #[test]
    fn learns_distinct_patterns_perfectly() {
        let d = patterns(30, 0, 1);
        let m = Forest::train(&d, 4, false, 15, 1, 9);
        m.validate(3).unwrap();
        assert_eq!(acc(&m, &d), 1.0);
    }

    #[test]
    fn generalises_on_noisy_data() {
        let m = Forest::train(&patterns(200, 120, 3), 4, false, 15, 2, 9);
        let a = acc(&m, &patterns(100, 120, 4));
        assert!(a > 0.8, "accuracy {a}");
    }
}
