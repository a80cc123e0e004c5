//! C4.5 decision tree over early-packet features, compiled to a flat array.
//!
//! Contract: training (offline, allocates) grows a binary tree on the
//! features of [`super::vector`] (signed size and gap per position, optionally
//! protocol and server port). At each node every continuous attribute is
//! sorted and every boundary between distinct values is a candidate
//! threshold; an attribute's best threshold maximises information gain, which
//! is then reduced by `log2(candidates)/n` (C4.5 release 8). Among attributes
//! whose gain is at least the average gain, the one with the best gain ratio
//! wins. A node becomes a leaf when it is pure, smaller than `2 × min_leaf`,
//! at `max_depth`, or no split has positive gain. Each subtree is then
//! replaced by a leaf when the leaf's pessimistic error (upper bound of the
//! binomial confidence interval at `cf`, 0.25 by default) is no larger than
//! the sum over the subtree's leaves (subtree raising is not done).
//! The result is a `Vec<Node>` in pre-order, the serialized form. Every
//! [`Tree`] (trained or deserialized) also carries its
//! [`FlatTree`], derived from the nodes and
//! used to classify: features gathered once, then a loop over 16-byte splits
//! (no recursion, no allocation) to the leaf's class and purity. The fields
//! are read-only so the two forms cannot disagree. A loaded tree is checked
//! by [`Tree::validate`]: children come after their parent and lie inside
//! the array, features and classes exist.

use super::compiled_tree::{FlatTree, MAX_NODES};
use super::dataset::{Dataset, SplitMix64};
use super::model::Invalid;
use super::{vector, FlowFeatures};

/// `feature` value of a leaf node.
pub const LEAF: u8 = u8::MAX;

/// One node of a compiled tree.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Node {
    /// Feature index tested, or [`LEAF`].
    pub feature: u8,
    /// Go left when `value <= threshold`.
    pub threshold: f32,
    /// Index of the left child (split nodes).
    pub left: u32,
    /// Index of the right child (split nodes).
    pub right: u32,
    /// Majority class of the training samples that reached the node.
    pub class: u16,
    /// Share of those samples in the majority class.
    pub purity: f32,
}

/// Training knobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TreeOptions {
    /// Smallest number of samples on each side of a split.
    pub min_leaf: usize,
    /// Confidence factor of pessimistic pruning; `None` disables pruning.
    pub cf: Option<f64>,
    /// Depth limit (guards against degenerate data).
    pub max_depth: usize,
    /// Random forests: number of attributes drawn at each node (`None` = all).
    pub features_per_node: Option<usize>,
}

impl Default for TreeOptions {
    fn default() -> Self {
        TreeOptions {
            min_leaf: 2,
            cf: Some(0.25),
            max_depth: 48,
            features_per_node: None,
        }
    }
}

/// A C4.5 tree: its nodes (serialized) and their compiled form.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(from = "TreeBody")]
pub struct Tree {
    /// Number of early packets N the features describe.
    packets: usize,
    /// Whether features `2N` (protocol) and `2N+1` (server port) are used.
    use_ports: bool,
    /// Nodes in pre-order; node 0 is the root.
    nodes: Vec<Node>,
    /// Derived from `packets` and `nodes`; not in the model file.
    #[serde(skip_serializing)]
    flat: FlatTree,
}

/// The serialized fields of a [`Tree`] (the model file's `c45` body).
#[derive(serde::Deserialize)]
struct TreeBody {
    packets: usize,
    use_ports: bool,
    nodes: Vec<Node>,
}

impl From<TreeBody> for Tree {
    fn from(b: TreeBody) -> Tree {
        Tree::from_nodes(b.packets, b.use_ports, b.nodes)
    }
}

/// Tree under construction.
enum Grow {
    Leaf {
        class: u16,
        n: usize,
        majority: usize,
    },
    Split {
        feature: u8,
        threshold: f32,
        left: Box<Grow>,
        right: Box<Grow>,
        class: u16,
        n: usize,
        majority: usize,
    },
}

/// `x ln x` with `0 ln 0 = 0`.
fn xlnx(x: usize) -> f64 {
    if x == 0 {
        0.0
    } else {
        let x = x as f64;
        x * x.ln()
    }
}

/// Entropy in bits of counts summing to `n`, from `s = Σ xlnx(count)`.
fn entropy(n: usize, s: f64) -> f64 {
    if n == 0 {
        0.0
    } else {
        (xlnx(n) - s) / n as f64 / std::f64::consts::LN_2
    }
}

/// Standard normal quantile for upper tail probability `p` in (0, 0.5]
/// (Abramowitz & Stegun 26.2.23, error < 4.5e-4).
fn z_upper(p: f64) -> f64 {
    let p = p.clamp(1e-9, 0.5);
    let t = (-2.0 * p.ln()).sqrt();
    t - (2.515517 + 0.802853 * t + 0.010328 * t * t)
        / (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t)
}

/// Pessimistic number of errors of a leaf with `n` samples and `e` errors:
/// `n` times the upper bound of the error rate at confidence `cf`.
pub fn pessimistic_errors(n: f64, e: f64, cf: f64) -> f64 {
    if n <= 0.0 {
        return 0.0;
    }
    if e < 1e-9 {
        return n * (1.0 - cf.powf(1.0 / n));
    }
    if e + 0.5 >= n {
        return e + 0.67 * (n - e);
    }
    let z = z_upper(cf);
    let f = (e + 0.5) / n;
    let z2 = z * z;
    let u =
        (f + z2 / (2.0 * n) + z * (f * (1.0 - f) / n + z2 / (4.0 * n * n)).sqrt()) / (1.0 + z2 / n);
    n * u
}

struct Builder<'a> {
    x: &'a [f32],
    y: &'a [u16],
    nf: usize,
    classes: usize,
    opt: TreeOptions,
    rng: SplitMix64,
    scratch: Vec<(f32, u16)>,
}

impl Builder<'_> {
    fn majority(&self, idx: &[u32]) -> (u16, usize, Vec<usize>) {
        let mut counts = vec![0usize; self.classes];
        for &i in idx {
            counts[self.y[i as usize] as usize] += 1;
        }
        let (c, &m) = counts
            .iter()
            .enumerate()
            .max_by_key(|&(c, &n)| (n, std::cmp::Reverse(c)))
            .unwrap_or((0, &0));
        (c as u16, m, counts)
    }

    /// Best threshold of one feature: (gain, gain ratio, threshold).
    fn best_threshold(
        &mut self,
        idx: &[u32],
        f: usize,
        counts: &[usize],
    ) -> Option<(f64, f64, f32)> {
        let n = idx.len();
        self.scratch.clear();
        for &i in idx {
            let i = i as usize;
            self.scratch.push((self.x[i * self.nf + f], self.y[i]));
        }
        self.scratch.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        let v = &self.scratch;
        if v[0].0 == v[n - 1].0 {
            return None;
        }
        let s_all: f64 = counts.iter().map(|&c| xlnx(c)).sum();
        let h = entropy(n, s_all);
        let mut left = vec![0usize; self.classes];
        let mut right = counts.to_vec();
        let (mut sl, mut sr) = (0.0, s_all);
        let mut best: Option<(f64, usize)> = None;
        let mut candidates = 0usize;
        let min_leaf = self.opt.min_leaf.max(1);
        for j in 0..n - 1 {
            let k = v[j].1 as usize;
            sl += xlnx(left[k] + 1) - xlnx(left[k]);
            sr += xlnx(right[k] - 1) - xlnx(right[k]);
            left[k] += 1;
            right[k] -= 1;
            if v[j].0 == v[j + 1].0 {
                continue;
            }
            let nl = j + 1;
            let nr = n - nl;
            if nl < min_leaf || nr < min_leaf {
                continue;
            }
            candidates += 1;
            let gain = h - (nl as f64 * entropy(nl, sl) + nr as f64 * entropy(nr, sr)) / n as f64;
            if !matches!(best, Some((g, _)) if gain <= g) {
                best = Some((gain, j));
            }
        }
        let (gain, j) = best?;
        let gain = gain - (candidates.max(1) as f64).log2() / n as f64;
        if gain <= 1e-12 {
            return None;
        }
        let nl = (j + 1) as f64 / n as f64;
        let split_info = -(nl * nl.log2() + (1.0 - nl) * (1.0 - nl).log2());
        let (a, b) = (v[j].0, v[j + 1].0);
        let mut thr = a + (b - a) / 2.0;
        if thr >= b || !thr.is_finite() {
            thr = a;
        }
        Some((gain, gain / split_info.max(1e-12), thr))
    }

    fn grow(&mut self, idx: &mut [u32], depth: usize) -> Grow {
        let n = idx.len();
        let (class, majority, counts) = self.majority(idx);
        let leaf = Grow::Leaf { class, n, majority };
        if majority == n || n < 2 * self.opt.min_leaf.max(1) || depth >= self.opt.max_depth {
            return leaf;
        }
        let mut feats: Vec<usize> = (0..self.nf).collect();
        if let Some(m) = self.opt.features_per_node {
            for i in (1..feats.len()).rev() {
                let j = self.rng.below(i as u64 + 1) as usize;
                feats.swap(i, j);
            }
            feats.truncate(m.clamp(1, self.nf));
        }
        let mut found = Vec::new();
        for &f in &feats {
            if let Some((g, r, t)) = self.best_threshold(idx, f, &counts) {
                found.push((f, g, r, t));
            }
        }
        if found.is_empty() {
            return leaf;
        }
        let avg = found.iter().map(|c| c.1).sum::<f64>() / found.len() as f64;
        let Some(&(f, _, _, thr)) = found
            .iter()
            .filter(|c| c.1 >= avg - 1e-12)
            .max_by(|a, b| a.2.total_cmp(&b.2))
        else {
            return leaf;
        };
        let nf = self.nf;
        let x = self.x;
        let mut split = 0;
        for i in 0..n {
            if x[idx[i] as usize * nf + f] <= thr {
                idx.swap(i, split);
                split += 1;
            }
        }
        if split == 0 || split == n {
            return leaf;
        }
        let (l, r) = idx.split_at_mut(split);
        let left = Box::new(self.grow(l, depth + 1));
        let right = Box::new(self.grow(r, depth + 1));
        let node = Grow::Split {
            feature: f as u8,
            threshold: thr,
            left,
            right,
            class,
            n,
            majority,
        };
        match self.opt.cf {
            Some(cf) => {
                let as_leaf = pessimistic_errors(n as f64, (n - majority) as f64, cf);
                if as_leaf <= subtree_errors(&node, cf) + 0.1 {
                    leaf
                } else {
                    node
                }
            }
            None => node,
        }
    }
}

fn subtree_errors(g: &Grow, cf: f64) -> f64 {
    match g {
        Grow::Leaf { n, majority, .. } => pessimistic_errors(*n as f64, (n - majority) as f64, cf),
        Grow::Split { left, right, .. } => subtree_errors(left, cf) + subtree_errors(right, cf),
    }
}

fn compile(g: &Grow, out: &mut Vec<Node>) {
    let at = out.len();
    match g {
        Grow::Leaf { class, n, majority } => out.push(Node {
            feature: LEAF,
            threshold: 0.0,
            left: 0,
            right: 0,
            class: *class,
            purity: (*majority as f32 / (*n).max(1) as f32),
        }),
        Grow::Split {
            feature,
            threshold,
            left,
            right,
            class,
            n,
            majority,
        } => {
            out.push(Node {
                feature: *feature,
                threshold: *threshold,
                left: 0,
                right: 0,
                class: *class,
                purity: (*majority as f32 / (*n).max(1) as f32),
            });
            out[at].left = out.len() as u32;
            compile(left, out);
            out[at].right = out.len() as u32;
            compile(right, out);
        }
    }
}

/// Feature matrix (row-major, `vector::count` columns) of a data set.
pub fn matrix(data: &Dataset, packets: usize, use_ports: bool) -> (Vec<f32>, usize) {
    let nf = vector::count(packets, use_ports);
    let mut x = vec![0f32; data.samples.len() * nf];
    for (s, row) in data.samples.iter().zip(x.chunks_mut(nf.max(1))) {
        let f = FlowFeatures {
            early: &s.early,
            proto: s.proto,
            sport: s.sport,
            dport: s.dport,
        };
        vector::fill(&f, packets, &mut row[..nf]);
    }
    (x, nf)
}

impl Tree {
    /// Grows and prunes a tree on the given rows of `data` (all rows when
    /// `rows` is `None`; rows may repeat, for bagging).
    pub fn train(
        data: &Dataset,
        packets: usize,
        use_ports: bool,
        opt: &TreeOptions,
        rows: Option<&[u32]>,
        seed: u64,
    ) -> Tree {
        let packets = packets.min(crate::features::early::MAX_EARLY);
        let (x, nf) = matrix(data, packets, use_ports);
        let y: Vec<u16> = data.samples.iter().map(|s| s.label).collect();
        let mut idx: Vec<u32> = match rows {
            Some(r) => r.to_vec(),
            None => (0..data.samples.len() as u32).collect(),
        };
        let mut b = Builder {
            x: &x,
            y: &y,
            nf,
            classes: data.classes.len(),
            opt: *opt,
            rng: SplitMix64::new(seed),
            scratch: Vec::new(),
        };
        let mut nodes = Vec::new();
        if idx.is_empty() || nf == 0 {
            nodes.push(Node {
                feature: LEAF,
                threshold: 0.0,
                left: 0,
                right: 0,
                class: b.majority(&idx).0,
                purity: 0.0,
            });
        } else {
            let g = b.grow(&mut idx, 0);
            compile(&g, &mut nodes);
        }
        Tree::from_nodes(packets, use_ports, nodes)
    }

    /// A tree of `nodes` (checked by [`Self::validate`], not here) and its
    /// compiled form.
    pub fn from_nodes(packets: usize, use_ports: bool, nodes: Vec<Node>) -> Tree {
        Tree {
            flat: FlatTree::compile(packets, &nodes),
            packets,
            use_ports,
            nodes,
        }
    }

    /// Number of early packets N the features describe.
    pub fn packets(&self) -> usize {
        self.packets
    }

    /// Whether features `2N` (protocol) and `2N+1` (server port) are used.
    pub fn use_ports(&self) -> bool {
        self.use_ports
    }

    /// Nodes in pre-order; node 0 is the root.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The compiled form [`Self::predict`] walks.
    pub fn flat(&self) -> &FlatTree {
        &self.flat
    }

    /// Checks a loaded tree: the walk must end and classes must exist.
    pub fn validate(&self, classes: usize) -> Result<(), Invalid> {
        let nf = vector::count(self.packets, self.use_ports);
        if self.nodes.is_empty() {
            return Err(Invalid("tree has no nodes".into()));
        }
        if self.nodes.len() > MAX_NODES {
            return Err(Invalid(format!(
                "tree has {} nodes, at most {MAX_NODES}",
                self.nodes.len()
            )));
        }
        if self.packets > crate::features::early::MAX_EARLY {
            return Err(Invalid(format!("tree uses {} packets", self.packets)));
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if (n.class as usize) >= classes {
                return Err(Invalid(format!(
                    "tree node {i}: class {} out of range",
                    n.class
                )));
            }
            if n.feature == LEAF {
                continue;
            }
            let ok = (n.feature as usize) < nf
                && (n.left as usize) > i
                && (n.right as usize) > i
                && (n.left as usize) < self.nodes.len()
                && (n.right as usize) < self.nodes.len();
            if !ok {
                return Err(Invalid(format!(
                    "tree node {i}: bad feature or child index"
                )));
            }
        }
        Ok(())
    }

    /// Class and purity of the leaf the flow reaches (compiled form).
    #[inline]
    pub fn predict(&self, f: &FlowFeatures<'_>) -> (u16, f32) {
        self.flat.predict(f)
    }

    /// The walk over the nodes that [`Self::predict`] replaces: one
    /// `vector::value` per node (test reference of the compiled form).
    #[cfg(test)]
    pub fn predict_reference(&self, f: &FlowFeatures<'_>) -> (u16, f32) {
        let mut i = 0usize;
        // Children always follow their parent (validated), so this ends.
        while let Some(n) = self.nodes.get(i) {
            if n.feature == LEAF {
                return (n.class, n.purity);
            }
            let v = vector::value(f, self.packets, n.feature as usize);
            let next = if v <= n.threshold { n.left } else { n.right } as usize;
            if next <= i {
                return (n.class, n.purity);
            }
            i = next;
        }
        (0, 0.0)
    }

    /// Number of leaves.
    pub fn leaves(&self) -> usize {
        self.nodes.iter().filter(|n| n.feature == LEAF).count()
    }

    /// Depth (edges on the longest root-to-leaf path).
    pub fn depth(&self) -> usize {
        let mut d = vec![0usize; self.nodes.len()];
        let mut best = 0;
        for i in 0..self.nodes.len() {
            let n = self.nodes[i];
            best = best.max(d[i]);
            if n.feature != LEAF {
                for c in [n.left as usize, n.right as usize] {
                    if c < d.len() {
                        d[c] = d[i] + 1;
                    }
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{ff, patterns};
    use super::*;

    #[test]
    fn pessimistic_bound_matches_c45_figures() {
        // Quinlan's example: a leaf with 6 samples and no error is
        // charged 0.206 errors per sample at CF = 25 %.
        let u = pessimistic_errors(6.0, 0.0, 0.25) / 6.0;
        assert!((u - 0.206).abs() < 0.001, "{u}");
        // 16 samples with 1 error: U ≈ 0.157.
        let u = pessimistic_errors(16.0, 1.0, 0.25) / 16.0;
        assert!((u - 0.157).abs() < 0.01, "{u}");
        assert!((z_upper(0.25) - 0.6745).abs() < 1e-3);
    }

    #[test]
    fn learns_distinct_patterns_perfectly() {
        let d = patterns(30, 0, 1);
        let t = Tree::train(&d, 4, false, &TreeOptions::default(), None, 0);
        t.validate(3).unwrap();
        assert!(t.leaves() >= 3);
        for s in &d.samples {
            assert_eq!(t.predict(&ff(s)), (s.label, 1.0));
        }
    }

    #[test]
    fn generalises_on_noisy_data() {
        let train = patterns(200, 120, 3);
        let test = patterns(100, 120, 4);
        let t = Tree::train(&train, 4, false, &TreeOptions::default(), None, 0);
        let ok = test
            .samples
            .iter()
            .filter(|s| t.predict(&ff(s)).0 == s.label)
            .count();
        let acc = ok as f64 / test.samples.len() as f64;
        assert!(acc > 0.8, "accuracy {acc}");
    }

    #[test]
    fn pruning_shrinks_noisy_trees() {
        // 20 % of the labels are wrong: the unpruned tree learns the noise.
        let mut train = patterns(200, 100, 5);
        let mut rng = SplitMix64::new(3);
        for s in &mut train.samples {
            if rng.below(5) == 0 {
                s.label = rng.below(3) as u16;
            }
        }
        let full = TreeOptions {
            cf: None,
            ..TreeOptions::default()
        };
        let a = Tree::train(&train, 4, false, &full, None, 0);
        let b = Tree::train(&train, 4, false, &TreeOptions::default(), None, 0);
        assert!(
            b.nodes.len() < a.nodes.len(),
            "{} vs {}",
            b.nodes.len(),
            a.nodes.len()
        );
    }

    #[test]
    fn ports_feature_is_used() {
        // Same packets for every class; only the port tells them apart.
        let mut d = patterns(20, 0, 1);
        let first = d.samples[0].early.clone();
        for s in &mut d.samples {
            s.early = first.clone();
        }
        let t = Tree::train(&d, 4, true, &TreeOptions::default(), None, 0);
        for s in &d.samples {
            assert_eq!(t.predict(&ff(s)).0, s.label);
        }
        let t = Tree::train(&d, 4, false, &TreeOptions::default(), None, 0);
        assert_eq!(t.nodes.len(), 1);
    }

    #[test]
    fn validate_rejects_loops() {
        let mut t = Tree::train(
            &patterns(10, 0, 1),
            4,
            false,
            &TreeOptions::default(),
            None,
            0,
        );
        t.nodes[0].left = 0;
        assert!(t.validate(3).is_err());
        let empty = Tree::from_nodes(4, false, vec![]);
        assert!(empty.validate(3).is_err());
    }
}
