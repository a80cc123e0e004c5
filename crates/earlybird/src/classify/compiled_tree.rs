//! Classification form of a C4.5 tree: flat 16-byte nodes over a feature
//! vector gathered once per verdict.
//!
//! Contract: [`FlatTree::compile`] derives, from ANY node array (validated or
//! not) and any N up to `MAX_EARLY`, a form whose walk gives exactly what the
//! reference walk over the nodes gives (the walk that calls
//! [`super::vector::value`] at each node): same class, same purity bits.
//! This holds for malformed arrays too: a child at or before its parent ends
//! the walk with the parent's class and purity, a child past the end gives
//! class 0 and purity 0, a feature past `2N + 1` reads the server port (as
//! `vector::value` does). The compiled form is private and never serialized
//! (the model file keeps the `Node` array, `docs/MODEL_FORMAT.md`).
//!
//! By construction every node reference is either the byte offset of a
//! split inside the split array, larger than the referring split's (so the
//! walk ends after at most `nodes.len()` steps), or a leaf index inside the
//! leaf table; every feature index is at most `2N + 1`, and the walk reads
//! the first `2N + 2` entries of a [`Gathered`] vector of the same N, which
//! its constructor writes. The walk relies on these facts (unchecked loads,
//! checked in debug builds).
//! Classifying never allocates and never panics.

use std::mem::MaybeUninit;

use super::tree::{Node, LEAF};
use super::vector::MAX_FEATURES;
use super::FlowFeatures;
use crate::flow::record::MAX_EARLY;

/// Set in a node reference that names a leaf (index in `leaves`); other
/// references are byte offsets of splits in `splits`.
const LEAF_REF: u32 = 1 << 31;

/// Bytes of one [`Split`].
const SPLIT_BYTES: usize = std::mem::size_of::<Split>();

/// Largest node array compiled; nodes past it read as past the end
/// ([`super::tree::Tree::validate`] rejects such trees). Keeps split byte
/// offsets and leaf indices below [`LEAF_REF`].
pub const MAX_NODES: usize = 1 << 26;

/// One split: go to `left` when `x[feature] <= threshold`, else to `right`.
/// Features are never NaN (they come from integers), so with a NaN threshold
/// compiled as -inf, `x > threshold` is exactly `!(x <= threshold)` of the
/// reference walk (NaN: always right).
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C)]
struct Split {
    threshold: f32,
    feature: u32,
    left: u32,
    right: u32,
}

/// A tree compiled for classification (see the module doc).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FlatTree {
    /// N, at most `MAX_EARLY`: the walk reads features `0..2N+2`.
    packets: usize,
    /// Reference of the root.
    root: u32,
    splits: Vec<Split>,
    /// Class and purity of each leaf.
    leaves: Vec<(u16, f32)>,
}

/// Features `0..2N+2` of one flow: 2i and 2i+1 as in `vector::value`, then
/// protocol and server port; entries past `2N + 1` are never written.
pub struct Gathered {
    packets: usize,
    x: [MaybeUninit<f32>; MAX_FEATURES],
}

impl Gathered {
    /// Gathers the features of `f` for a model of `packets` packets
    /// (clamped to `MAX_EARLY`).
    #[inline]
    pub fn new(f: &FlowFeatures<'_>, packets: usize) -> Gathered {
        let mut g = Gathered::unfilled(packets);
        g.fill(f);
        g
    }

    /// Entries not written yet: [`Self::fill`] must run before any read.
    #[inline(always)]
    fn unfilled(packets: usize) -> Gathered {
        Gathered {
            packets: packets.min(MAX_EARLY),
            x: [MaybeUninit::uninit(); MAX_FEATURES],
        }
    }

    /// Writes entries `0..=2N+1`, one pass over the early packets.
    #[inline(always)]
    fn fill(&mut self, f: &FlowFeatures<'_>) {
        let p = self.packets.min(MAX_EARLY);
        let x = &mut self.x;
        let used = f.early.len().min(p);
        for (i, e) in f.early[..used].iter().enumerate() {
            // -size for server-to-client packets: the sign bit is the
            // direction (`Dir` is 0 or 1); size 0 gives -0.0 as
            // `-(0 as f32)` does.
            let size = f32::from_bits((e.size as f32).to_bits() | (e.dir as u32) << 31);
            x[2 * i] = MaybeUninit::new(size);
            x[2 * i + 1] = MaybeUninit::new(e.iat_us as f32);
        }
        for i in used..p {
            x[2 * i] = MaybeUninit::new(0.0);
            x[2 * i + 1] = MaybeUninit::new(-1.0);
        }
        x[2 * p] = MaybeUninit::new(f.proto as f32);
        x[2 * p + 1] = MaybeUninit::new(f.dport as f32);
    }

    /// Feature `k`; `k <= 2N + 1` (checked in debug builds).
    #[inline(always)]
    fn get(&self, k: u32) -> f32 {
        debug_assert!((k as usize) <= 2 * self.packets + 1);
        // SAFETY: k <= 2N + 1 < MAX_FEATURES (N <= MAX_EARLY), and `fill`
        // (run by every public constructor) wrote entries 0..=2N+1; the
        // walk passes features of a `FlatTree` of the same N, which
        // `compile` bounded by 2N + 1.
        unsafe { self.x.get_unchecked(k as usize).assume_init() }
    }
}

impl FlatTree {
    /// Compiles `nodes` (pre-order or not; see the module doc) for a model
    /// of `packets` packets.
    pub fn compile(packets: usize, nodes: &[Node]) -> FlatTree {
        let p = packets.min(MAX_EARLY);
        let nodes = &nodes[..nodes.len().min(MAX_NODES)];
        let mut leaves = Vec::new();
        // Reference of each node: splits numbered in array order, so a
        // child after its parent has a larger offset (the walk ends).
        let mut refs = Vec::with_capacity(nodes.len());
        let mut splits = 0usize;
        for n in nodes {
            if n.feature == LEAF {
                refs.push(LEAF_REF | leaves.len() as u32);
                leaves.push((n.class, n.purity));
            } else {
                refs.push((splits * SPLIT_BYTES) as u32);
                splits += 1;
            }
        }
        let mut out = Vec::with_capacity(splits);
        for (i, n) in nodes.iter().enumerate() {
            if n.feature == LEAF {
                continue;
            }
            let mut child = |to: u32| {
                let to = to as usize;
                if to <= i {
                    leaves.push((n.class, n.purity));
                    LEAF_REF | (leaves.len() - 1) as u32
                } else if to >= nodes.len() {
                    leaves.push((0, 0.0));
                    LEAF_REF | (leaves.len() - 1) as u32
                } else {
                    refs[to]
                }
            };
            let (left, right) = (child(n.left), child(n.right));
            out.push(Split {
                threshold: if n.threshold.is_nan() {
                    f32::NEG_INFINITY
                } else {
                    n.threshold
                },
                feature: (n.feature as u32).min(2 * p as u32 + 1),
                left,
                right,
            });
        }
        let root = match refs.first() {
            Some(&r) => r,
            None => {
                leaves.push((0, 0.0));
                LEAF_REF
            }
        };
        FlatTree {
            packets: p,
            root,
            splits: out,
            leaves,
        }
    }

    /// N of the features this tree reads.
    pub fn packets(&self) -> usize {
        self.packets
    }

    /// Class and purity of the leaf `f` reaches.
    #[inline]
    pub fn predict(&self, f: &FlowFeatures<'_>) -> (u16, f32) {
        let mut x = Gathered::unfilled(self.packets);
        x.fill(f);
        self.walk(&x)
    }

    /// Same as [`Self::predict`] from features already gathered (gathered
    /// again when they were gathered for another N).
    #[inline]
    pub fn predict_gathered(&self, f: &FlowFeatures<'_>, x: &Gathered) -> (u16, f32) {
        if x.packets == self.packets {
            self.walk(x)
        } else {
            self.predict(f)
        }
    }

    #[inline(always)]
    fn walk(&self, x: &Gathered) -> (u16, f32) {
        debug_assert_eq!(x.packets, self.packets);
        let base = self.splits.as_ptr().cast::<u8>();
        let mut r = self.root;
        while r & LEAF_REF == 0 {
            debug_assert!(
                (r as usize) & (SPLIT_BYTES - 1) == 0
                    && (r as usize) < self.splits.len() * SPLIT_BYTES
            );
            // SAFETY: a reference without LEAF_REF is the byte offset of a
            // split inside `splits` (compile).
            let s = unsafe { &*base.add(r as usize).cast::<Split>() };
            let next = if x.get(s.feature) > s.threshold {
                s.right
            } else {
                s.left
            };
            debug_assert!(next & LEAF_REF != 0 || next > r, "the walk goes forward");
            r = next;
        }
        self.leaves
            .get((r & !LEAF_REF) as usize)
            .copied()
            .unwrap_or((0, 0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::super::dataset::SplitMix64;
    use super::super::testutil::{ff, patterns};
    use super::super::tree::{Tree, TreeOptions};
    use super::*;
    use crate::flow::record::{Dir, EarlyPkt};

    fn same(a: (u16, f32), b: (u16, f32)) -> bool {
        a.0 == b.0 && a.1.to_bits() == b.1.to_bits()
    }

    /// Values a feature takes, and thresholds around them.
    const EDGES: [f32; 12] = [
        0.0,
        -0.0,
        -1.0,
        60.0,
        -60.0,
        443.0,
        16_777_217.0,
        4_294_967_295.0,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.5,
    ];

    fn random_flow(rng: &mut SplitMix64, p: usize) -> (Vec<EarlyPkt>, u8, u16) {
        let len = rng.below(p as u64 + 3) as usize;
        let early = (0..len)
            .map(|_| EarlyPkt {
                size: match rng.below(4) {
                    0 => 0,
                    1 => 60,
                    2 => u16::MAX,
                    _ => rng.below(1600) as u16,
                },
                dir: if rng.below(2) == 0 {
                    Dir::Fwd
                } else {
                    Dir::Bwd
                },
                flags: 0,
                iat_us: match rng.below(5) {
                    0 => 0,
                    1 => u32::MAX,
                    2 => (1 << 24) + 1,
                    _ => rng.below(100_000) as u32,
                },
            })
            .collect();
        let proto = [6u8, 17, 1, 255][rng.below(4) as usize];
        (early, proto, rng.below(65536) as u16)
    }

    /// Any node array: splits on features inside and past `2N + 1`, children
    /// forward (mostly), backward, on themselves or past the end.
    fn random_nodes(rng: &mut SplitMix64, p: usize) -> Vec<Node> {
        let len = 1 + rng.below(40) as usize;
        (0..len)
            .map(|i| {
                let child = |rng: &mut SplitMix64| match rng.below(12) {
                    0 => rng.below(i as u64 + 1) as u32,
                    1 => (len + rng.below(3) as usize) as u32,
                    2 => u32::MAX,
                    _ => (i + 1 + rng.below((len - i) as u64) as usize) as u32,
                };
                let leaf = rng.below(10) < 3;
                Node {
                    feature: if leaf {
                        LEAF
                    } else if rng.below(20) == 0 {
                        254
                    } else {
                        rng.below(2 * p as u64 + 4) as u8
                    },
                    threshold: if rng.below(2) == 0 {
                        EDGES[rng.below(EDGES.len() as u64) as usize]
                    } else {
                        rng.below(3000) as f32 - 1500.0
                    },
                    left: child(rng),
                    right: child(rng),
                    class: rng.below(300) as u16,
                    purity: if rng.below(30) == 0 {
                        f32::NAN
                    } else {
                        rng.unit() as f32
                    },
                }
            })
            .collect()
    }

    #[test]
    fn equals_reference_walk_on_random_trees_and_flows() {
        let mut rng = SplitMix64::new(7);
        let mut flows = 0;
        for round in 0..3000 {
            let p = [0, 1, 2, 4, 8, MAX_EARLY][round % 6];
            let ports = round % 2 == 0;
            let t = Tree::from_nodes(p, ports, random_nodes(&mut rng, p));
            for _ in 0..40 {
                let (early, proto, dport) = random_flow(&mut rng, p);
                let f = FlowFeatures {
                    early: &early,
                    proto,
                    sport: 1234,
                    dport,
                };
                let (a, b) = (t.predict(&f), t.predict_reference(&f));
                assert!(same(a, b), "{a:?} vs {b:?}: {:?} on {f:?}", t.nodes());
                flows += 1;
            }
        }
        assert_eq!(flows, 120_000);
    }

    #[test]
    fn equals_reference_walk_on_trained_trees() {
        let train = patterns(200, 120, 3);
        let test = patterns(200, 400, 4);
        for (p, ports) in [(4, false), (4, true), (2, true), (8, true)] {
            let t = Tree::train(&train, p, ports, &TreeOptions::default(), None, 0);
            t.validate(3).unwrap();
            assert!(t.nodes().len() > 3);
            for s in test.samples.iter().chain(&train.samples) {
                for k in 0..=s.early.len() {
                    let f = FlowFeatures {
                        early: &s.early[..k],
                        ..ff(s)
                    };
                    assert!(same(t.predict(&f), t.predict_reference(&f)));
                }
            }
        }
    }

    #[test]
    fn oversized_n_and_empty_trees_never_panic() {
        let mut rng = SplitMix64::new(1);
        for _ in 0..200 {
            let t = Tree::from_nodes(40, true, random_nodes(&mut rng, 40));
            let (early, proto, dport) = random_flow(&mut rng, 40);
            let f = FlowFeatures {
                early: &early,
                proto,
                sport: 1,
                dport,
            };
            t.predict(&f);
        }
        let empty = Tree::from_nodes(4, true, Vec::new());
        let f = FlowFeatures {
            early: &[],
            proto: 6,
            sport: 1,
            dport: 2,
        };
        assert!(same(empty.predict(&f), (0, 0.0)));
    }

    #[test]
    fn gathered_features_equal_vector_values() {
        let mut rng = SplitMix64::new(3);
        for p in 0..=MAX_EARLY {
            for _ in 0..50 {
                let (early, proto, dport) = random_flow(&mut rng, p);
                let f = FlowFeatures {
                    early: &early,
                    proto,
                    sport: 9,
                    dport,
                };
                let x = Gathered::new(&f, p);
                for k in 0..=2 * p + 1 {
                    let want = super::super::vector::value(&f, p, k);
                    assert_eq!(x.get(k as u32).to_bits(), want.to_bits(), "p {p} k {k}");
                }
            }
        }
    }
}
