//! Classification forms of a C4.5 tree: flat 16-byte nodes over a feature
//! vector gathered once per verdict ([`FlatTree`], used by `Model`), and
//! the flow table's [`FastTree`], which also folds the model's verdict rule
//! (threshold, stored confidence) into its leaves.
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
//! [`FastTree`] (contract on the type) is derived from a [`FlatTree`] and
//! gives exactly `Model::classify`'s verdicts.
//! Classifying never allocates and never panics.

use std::mem::MaybeUninit;

use super::tree::{Node, LEAF};
use super::vector::MAX_FEATURES;
use super::FlowFeatures;
use crate::classify::Verdict;
use crate::features::early::{EarlyPkt, MAX_EARLY};

/// Set in a node reference that names a leaf (index in `leaves`); other
/// references are byte offsets of splits in `splits`.
const LEAF_REF: u32 = 1 << 31;

/// Bytes of one [`Split`].
const SPLIT_BYTES: usize = std::mem::size_of::<Split>();

/// Largest node array compiled; nodes past it read as past the end
/// ([`super::tree::Tree::validate`] rejects such trees). Keeps split byte
/// offsets and leaf indices below `LEAF_REF`.
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
        gather(&mut self.x, f.early, self.packets, f.proto, f.dport);
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

/// Writes features `0..=2p+1` of `x` (as [`Gathered::fill`]) for a model
/// of `p <= MAX_EARLY` packets, with N known at compile time for the usual
/// N (the gather unrolls).
#[inline(always)]
fn gather_for(
    p: usize,
    x: &mut [MaybeUninit<f32>; MAX_FEATURES],
    early: &[EarlyPkt],
    proto: u8,
    dport: u16,
) {
    match p {
        1 => gather_n::<1>(x, early, proto, dport),
        2 => gather_n::<2>(x, early, proto, dport),
        3 => gather_n::<3>(x, early, proto, dport),
        4 => gather_n::<4>(x, early, proto, dport),
        5 => gather_n::<5>(x, early, proto, dport),
        6 => gather_n::<6>(x, early, proto, dport),
        7 => gather_n::<7>(x, early, proto, dport),
        8 => gather_n::<8>(x, early, proto, dport),
        p => gather_out_of_line(x, early, p, proto, dport),
    }
}

/// Writes features `0..=2P+1` of `x` (as [`Gathered::fill`]) for a model
/// of `P` packets: unrolled when the flow has them all.
#[inline(always)]
fn gather_n<const P: usize>(
    x: &mut [MaybeUninit<f32>; MAX_FEATURES],
    early: &[EarlyPkt],
    proto: u8,
    dport: u16,
) {
    match early.first_chunk::<P>() {
        Some(e) => {
            let mut i = 0;
            #[cfg(target_arch = "x86_64")]
            while i + 4 <= P {
                let (four, _) = e[i..].split_first_chunk::<4>().unwrap();
                let (out, _) = x[2 * i..].split_first_chunk_mut::<8>().unwrap();
                gather4_sse2(out, four);
                i += 4;
            }
            while i < P {
                let size = f32::from_bits((e[i].size as f32).to_bits() | (e[i].dir as u32) << 31);
                x[2 * i] = MaybeUninit::new(size);
                x[2 * i + 1] = MaybeUninit::new(e[i].iat_us as f32);
                i += 1;
            }
            x[2 * P] = MaybeUninit::new(proto as f32);
            x[2 * P + 1] = MaybeUninit::new(dport as f32);
        }
        None => gather_out_of_line(x, early, P, proto, dport),
    }
}

// `gather4_sse2` reads an `EarlyPkt` as two 32-bit lanes: size (bits
// 0..16), direction (bit 16), flags (bits 24..32); inter-arrival time.
const _: () = assert!(
    std::mem::size_of::<EarlyPkt>() == 8
        && std::mem::offset_of!(EarlyPkt, size) == 0
        && std::mem::offset_of!(EarlyPkt, dir) == 2
        && std::mem::offset_of!(EarlyPkt, iat_us) == 4
);

/// Features `0..8` of four packets, as the scalar gather writes them: the
/// signed size exactly (`cvtdq2ps` of a 16-bit value, the direction as the
/// sign bit) and the inter-arrival time `u32 as f32` rounded once to
/// nearest even as `as f32` does: `hi * 2^16 + lo` computed as
/// `((2^39 + hi * 2^16) - (2^39 + 2^23)) + (2^23 + lo)`, where both
/// operands of the subtraction and its result are exact floats, so only
/// the addition rounds.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn gather4_sse2(out: &mut [MaybeUninit<f32>; 8], e: &[EarlyPkt; 4]) {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of x86_64; the loads read the 32 bytes of `e`
    // (layout asserted above) and the stores write the 32 bytes of `out`,
    // both unaligned.
    unsafe {
        let p = e.as_ptr().cast::<__m128i>();
        let a = _mm_castsi128_ps(_mm_loadu_si128(p));
        let b = _mm_castsi128_ps(_mm_loadu_si128(p.add(1)));
        // Lanes: [w0, t0, w1, t1] and [w2, t2, w3, t3].
        let w = _mm_castps_si128(_mm_shuffle_ps::<0b10_00_10_00>(a, b));
        let t = _mm_castps_si128(_mm_shuffle_ps::<0b11_01_11_01>(a, b));
        let size = _mm_cvtepi32_ps(_mm_and_si128(w, _mm_set1_epi32(0xFFFF)));
        let sign = _mm_and_si128(_mm_slli_epi32::<15>(w), _mm_set1_epi32(i32::MIN));
        let s = _mm_or_ps(size, _mm_castsi128_ps(sign));
        let lo = _mm_or_si128(
            _mm_and_si128(t, _mm_set1_epi32(0xFFFF)),
            _mm_set1_epi32(0x4B00_0000),
        );
        let hi = _mm_or_si128(_mm_srli_epi32::<16>(t), _mm_set1_epi32(0x5300_0000));
        let bias = _mm_set1_ps(f32::from_bits(0x5300_0080));
        let f = _mm_add_ps(_mm_sub_ps(_mm_castsi128_ps(hi), bias), _mm_castsi128_ps(lo));
        let o = out.as_mut_ptr().cast::<f32>();
        _mm_storeu_ps(o, _mm_unpacklo_ps(s, f));
        _mm_storeu_ps(o.add(4), _mm_unpackhi_ps(s, f));
    }
}

/// [`gather`] outside the flow table's fast path (flows shorter than N,
/// N > 8): keeps its registers out of the caller's.
#[cold]
#[inline(never)]
fn gather_out_of_line(
    x: &mut [MaybeUninit<f32>; MAX_FEATURES],
    early: &[EarlyPkt],
    p: usize,
    proto: u8,
    dport: u16,
) {
    gather(x, early, p, proto, dport);
}

/// Writes features `0..=2p+1` of `x`, one pass over the early packets:
/// 2i and 2i+1 as in `vector::value`, then protocol and server port
/// (`p` clamped to `MAX_EARLY`).
#[inline]
fn gather(
    x: &mut [MaybeUninit<f32>; MAX_FEATURES],
    early: &[EarlyPkt],
    p: usize,
    proto: u8,
    dport: u16,
) {
    let p = p.min(MAX_EARLY);
    let used = early.len().min(p);
    for (i, e) in early[..used].iter().enumerate() {
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
    x[2 * p] = MaybeUninit::new(proto as f32);
    x[2 * p + 1] = MaybeUninit::new(dport as f32);
}

/// What the flow table stores of a verdict: the class (or
/// [`Verdict::UNKNOWN`] under the model's threshold), the confidence in
/// 1/65535 steps (`conf_u16` of `inline.rs`) and the packet count it was
/// taken at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryVerdict {
    /// Class, [`Verdict::UNKNOWN`] below the threshold or without packets.
    pub app: u16,
    /// Confidence × 65535, rounded.
    pub conf: u16,
    /// Packets used: `min(early packets, N)`.
    pub at: u8,
}

/// One node of a [`FastTree`]: a split (`next[x[feature] > threshold]`,
/// children as byte offsets), or a leaf whose children are itself, whose
/// feature is 0 and whose threshold bits are its verdict (`app | conf << 16`;
/// any comparison result leads back to the leaf).
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C)]
struct FastNode {
    threshold: f32,
    feature: u32,
    next: [u32; 2],
}

/// Keeps the comparison of a tree step a conditional branch. As a select
/// (`next[(v > t) as usize]`) every level waited for the node, the feature,
/// the comparison and the child's offset in turn (measured: ~13 ns per
/// packet of the worst-case file, a verdict every five packets); a branch
/// lets the CPU run ahead on the predicted child, and a mispredicted level
/// costs about as much as one step of the select chain did. An empty
/// `asm!` is something LLVM cannot turn into a select.
#[inline(always)]
fn keep_branch() {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    // SAFETY: an empty instruction sequence: no memory, stack or flags.
    unsafe {
        std::arch::asm!("", options(nomem, nostack, preserves_flags));
    }
}

/// Bytes of one [`FastNode`].
const FAST_BYTES: usize = std::mem::size_of::<FastNode>();

/// The flow table's form of a C4.5 model: the [`FlatTree`] walk with the
/// model's verdict rule folded into the leaves, features gathered straight
/// from the early packets.
///
/// Contract: [`FastTree::decide`] gives exactly what `Model::classify` of
/// the model it was built from gives, stored as the flow table stores it:
/// `app` = the verdict's class, `conf` = `conf_u16(confidence)`, `at` =
/// `at_packet` (`Model::classify`: `at = min(len, N)`; no packet → unknown,
/// confidence 0; purity below the threshold, or NaN → unknown with the
/// purity as confidence). [`FastTree::verdict`] gives the whole
/// [`Verdict`] by the same walk. Nodes are the splits of the [`FlatTree`]
/// at the same byte offsets followed by its leaves, so every child offset
/// is a node's, a split's children come after it (the walk ends), and the
/// offsets at or past `leaf_base` are leaves, which loop onto themselves:
/// the walk takes two steps at a time and stops on a leaf (unchecked
/// loads, relying on these facts; checked in debug builds). Features come
/// straight from the early packets, with N known at compile time for
/// N <= 8 and, on x86_64, four packets at a time in SSE2 (bit-identical to
/// the scalar gather). Never allocates, never panics.
#[derive(Debug, Clone, PartialEq)]
pub struct FastTree {
    /// N of the features (the tree's, at most `MAX_EARLY`).
    gather: usize,
    /// N of the model: `at = min(len, at_max)`.
    at_max: usize,
    /// Byte offset of the root.
    root: u32,
    /// Byte offset of the first leaf.
    leaf_base: u32,
    nodes: Vec<FastNode>,
    /// Confidence of each leaf (for [`FastTree::verdict`]).
    purity: Vec<f32>,
}

impl FastTree {
    /// The form of a model of `packets` packets (its `ModelInfo::packets`)
    /// whose verdicts below `threshold` are unknown, classifying with `flat`.
    pub fn new(flat: &FlatTree, packets: usize, threshold: f32) -> FastTree {
        let splits = flat.splits.len();
        let mut leaves = flat.leaves.clone();
        // A reference the flat walk would not find (only an empty default
        // `FlatTree` has one: its root) reads as the flat walk's fallback.
        let mut fallback = None;
        let mut node_of = |r: u32, leaves: &mut Vec<(u16, f32)>| -> u32 {
            let i = if r & LEAF_REF != 0 && ((r & !LEAF_REF) as usize) < flat.leaves.len() {
                splits + (r & !LEAF_REF) as usize
            } else if r & LEAF_REF == 0
                && (r as usize).is_multiple_of(SPLIT_BYTES)
                && (r as usize) < splits * SPLIT_BYTES
            {
                r as usize / SPLIT_BYTES
            } else {
                *fallback.get_or_insert_with(|| {
                    leaves.push((0, 0.0));
                    splits + leaves.len() - 1
                })
            };
            (i * FAST_BYTES) as u32
        };
        let mut nodes = Vec::with_capacity(splits + leaves.len() + 1);
        for s in &flat.splits {
            let next = [node_of(s.left, &mut leaves), node_of(s.right, &mut leaves)];
            nodes.push(FastNode {
                threshold: s.threshold,
                feature: s.feature,
                next,
            });
        }
        let root = node_of(flat.root, &mut leaves);
        for &(class, purity) in &leaves {
            let app = if purity >= threshold {
                class
            } else {
                Verdict::UNKNOWN
            };
            let conf = crate::classify::conf_u16(purity);
            let me = (nodes.len() * FAST_BYTES) as u32;
            nodes.push(FastNode {
                threshold: f32::from_bits(app as u32 | (conf as u32) << 16),
                feature: 0,
                next: [me, me],
            });
        }
        FastTree {
            gather: flat.packets,
            at_max: packets,
            root,
            leaf_base: (splits * FAST_BYTES) as u32,
            nodes,
            purity: leaves.iter().map(|l| l.1).collect(),
        }
    }

    /// Byte offset of the leaf the flow reaches (its first `min(len, N)`
    /// early packets, protocol, server port).
    #[inline(always)]
    fn leaf(&self, early: &[EarlyPkt], proto: u8, dport: u16) -> usize {
        let mut x = [MaybeUninit::<f32>::uninit(); MAX_FEATURES];
        gather_for(self.gather, &mut x, early, proto, dport);
        let base = self.nodes.as_ptr().cast::<u8>();
        let step = |r: usize| -> usize {
            debug_assert!(r.is_multiple_of(FAST_BYTES) && r < self.nodes.len() * FAST_BYTES);
            // SAFETY: every offset is a node's (`new`); a feature is at most
            // 2N + 1 (`FlatTree::compile`; leaves read 0), entries written
            // just above.
            unsafe {
                let n = &*base.add(r).cast::<FastNode>();
                let v = x.get_unchecked(n.feature as usize).assume_init();
                if v > n.threshold {
                    keep_branch();
                    n.next[1] as usize
                } else {
                    n.next[0] as usize
                }
            }
        };
        let leaf_base = self.leaf_base as usize;
        let mut r = self.root as usize;
        loop {
            r = step(step(r));
            if r >= leaf_base {
                return r;
            }
        }
    }

    /// The verdict of the flow as the flow table stores it (see the type).
    #[inline(always)]
    pub fn decide(&self, early: &[EarlyPkt], proto: u8, dport: u16) -> EntryVerdict {
        let at = early.len().min(self.at_max);
        if at == 0 {
            return EntryVerdict {
                app: Verdict::UNKNOWN,
                conf: 0,
                at: 0,
            };
        }
        let r = self.leaf(early, proto, dport);
        // SAFETY: `leaf` returns a node's offset.
        let bits =
            unsafe { (*self.nodes.as_ptr().cast::<u8>().add(r).cast::<FastNode>()).threshold }
                .to_bits();
        EntryVerdict {
            app: bits as u16,
            conf: (bits >> 16) as u16,
            at: at as u8,
        }
    }

    /// The whole verdict, as `Model::classify` gives it.
    pub fn verdict(&self, f: &FlowFeatures<'_>) -> Verdict {
        let at = f.early.len().min(self.at_max);
        if at == 0 {
            return Verdict {
                class: Verdict::UNKNOWN,
                confidence: 0.0,
                at_packet: 0,
            };
        }
        let r = self.leaf(f.early, f.proto, f.dport) / FAST_BYTES;
        Verdict {
            class: self.nodes[r].threshold.to_bits() as u16,
            confidence: self.purity[r - self.leaf_base as usize / FAST_BYTES],
            at_packet: at as u8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::dataset::SplitMix64;
    use super::super::model::{Model, ModelInfo, ModelKind};
    use super::super::testutil::{ff, patterns};
    use super::super::tree::{Tree, TreeOptions};
    use super::super::Classifier;
    use super::*;
    use crate::classify::conf_u16;
    use crate::features::early::EarlyPkt;
    use crate::features::Dir;

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

    /// A tree model as `Model::classify` sees it: N = `at_max` (the
    /// tree's N unless the model is inconsistent), `threshold`.
    fn tree_model(t: Tree, at_max: usize, threshold: f32) -> Model {
        Model {
            info: ModelInfo {
                classes: vec!["a".into(); 300],
                packets: at_max,
                level: None,
                trained_on: String::new(),
                threshold,
                ..ModelInfo::default()
            },
            kind: ModelKind::Tree(t),
        }
    }

    /// `FastTree` gives exactly `Model::classify`, whole and as stored.
    fn check_fast(m: &Model, fast: &FastTree, f: &FlowFeatures<'_>) -> Verdict {
        let want = m.classify(f);
        let got = fast.verdict(f);
        assert!(
            got.class == want.class
                && got.confidence.to_bits() == want.confidence.to_bits()
                && got.at_packet == want.at_packet,
            "{got:?} vs {want:?} on {f:?}"
        );
        let stored = EntryVerdict {
            app: want.class,
            conf: conf_u16(want.confidence),
            at: want.at_packet,
        };
        assert_eq!(fast.decide(f.early, f.proto, f.dport), stored, "{f:?}");
        want
    }

    /// Model thresholds: the valid range, its ends and leaf purities, and
    /// values only an inconsistent model has.
    const THRESHOLDS: [f32; 9] = [0.0, 0.25, 0.5, 0.75, 0.9, 1.0, f32::NAN, -1.0, 2.0];

    #[test]
    fn fast_tree_equals_model_classify_on_random_trees_and_flows() {
        let mut rng = SplitMix64::new(11);
        let (mut unknown, mut known, mut short) = (0, 0, 0);
        for round in 0..3000 {
            let p = [1, 2, 3, 4, 5, 8, 9, MAX_EARLY][round % 8];
            let t = Tree::from_nodes(p, round % 2 == 0, random_nodes(&mut rng, p));
            let at_max = if round % 7 == 0 {
                rng.below(p as u64 + 3) as usize
            } else {
                p
            };
            let threshold = if rng.below(3) == 0 {
                rng.unit() as f32
            } else {
                THRESHOLDS[rng.below(THRESHOLDS.len() as u64) as usize]
            };
            let m = tree_model(t, at_max, threshold);
            let fast = m.fast_tree().expect("a tree model has a fast form");
            for _ in 0..40 {
                let (early, proto, dport) = random_flow(&mut rng, p);
                let f = FlowFeatures {
                    early: &early,
                    proto,
                    sport: 4321,
                    dport,
                };
                let v = check_fast(&m, &fast, &f);
                short += usize::from(early.len() < p);
                if v.class == Verdict::UNKNOWN {
                    unknown += 1;
                } else {
                    known += 1;
                }
            }
        }
        assert!(unknown > 10_000 && known > 10_000 && short > 10_000);
    }

    #[test]
    fn fast_tree_equals_model_classify_on_trained_trees() {
        let train = patterns(200, 120, 3);
        let test = patterns(200, 400, 4);
        for (p, ports) in [(4, false), (4, true), (2, true), (8, true), (5, true)] {
            let t = Tree::train(&train, p, ports, &TreeOptions::default(), None, 0);
            for threshold in [0.0, 0.6, 0.95, 1.0] {
                let m = tree_model(t.clone(), p, threshold);
                let fast = m.fast_tree().unwrap();
                let mut unknown = 0;
                for s in test.samples.iter().chain(&train.samples) {
                    for k in 0..=s.early.len() {
                        let f = FlowFeatures {
                            early: &s.early[..k],
                            ..ff(s)
                        };
                        let v = check_fast(&m, &fast, &f);
                        unknown += usize::from(v.class == Verdict::UNKNOWN);
                    }
                }
                if threshold == 0.95 {
                    assert!(unknown > 100, "{unknown}");
                }
            }
        }
    }

    #[test]
    fn fast_tree_of_empty_and_default_trees() {
        let f = FlowFeatures {
            early: &[EarlyPkt {
                size: 60,
                dir: Dir::Bwd,
                flags: 0,
                iat_us: 0,
            }],
            proto: 6,
            sport: 1,
            dport: 2,
        };
        let m = tree_model(Tree::from_nodes(4, true, Vec::new()), 4, 0.0);
        check_fast(&m, &m.fast_tree().unwrap(), &f);
        // The flat walk of an empty default form ends on its fallback leaf.
        let fast = FastTree::new(&FlatTree::default(), 4, 0.0);
        let want = EntryVerdict {
            app: 0,
            conf: 0,
            at: 1,
        };
        assert_eq!(fast.decide(f.early, 6, 2), want);
    }

    /// The fast gather writes exactly `vector::value`'s features.
    fn check_gather(p: usize, early: &[EarlyPkt], proto: u8, dport: u16) {
        let f = FlowFeatures {
            early,
            proto,
            sport: 9,
            dport,
        };
        let mut x = [MaybeUninit::<f32>::uninit(); MAX_FEATURES];
        gather_for(p, &mut x, early, proto, dport);
        for (k, v) in x.iter().enumerate().take(2 * p + 2) {
            let want = super::super::vector::value(&f, p, k);
            // SAFETY: `gather_for` writes entries 0..=2p+1.
            let got = unsafe { v.assume_init() };
            assert_eq!(got.to_bits(), want.to_bits(), "p {p} k {k} {f:?}");
        }
    }

    #[test]
    fn fast_gather_equals_vector_values() {
        let mut rng = SplitMix64::new(13);
        for p in 0..=MAX_EARLY {
            for _ in 0..200 {
                let (early, proto, dport) = random_flow(&mut rng, p);
                check_gather(p, &early, proto, dport);
            }
        }
        // Any bits: every size, direction, flag byte and gap (the
        // four-packet SSE2 gather's rounding of large gaps).
        for _ in 0..20_000 {
            let p = 1 + rng.below(MAX_EARLY as u64) as usize;
            let early: Vec<EarlyPkt> = (0..p)
                .map(|_| {
                    let r = rng.next_u64();
                    EarlyPkt {
                        size: r as u16,
                        dir: if r >> 16 & 1 == 0 { Dir::Fwd } else { Dir::Bwd },
                        flags: (r >> 24) as u8,
                        iat_us: match rng.below(4) {
                            0 => (r >> 32) as u32 | 0xFFFF_FF00,
                            1 => (r >> 32) as u32 >> rng.below(32),
                            _ => (r >> 32) as u32,
                        },
                    }
                })
                .collect();
            check_gather(p, &early, rng.next_u64() as u8, rng.next_u64() as u16);
        }
    }
}
