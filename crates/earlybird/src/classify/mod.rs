//! Early classification: which application a flow belongs to, from the sizes,
//! directions and inter-arrival times of its first N packets.
//!
//! Contract: a [`Classifier`] maps a [`FlowFeatures`] view (early packets and,
//! if the model uses them, protocol and ports) to a [`Verdict`]. Classifying
//! never allocates and never panics; a model that is not sure answers
//! [`Verdict::UNKNOWN`]. Models are trained offline ([`crate::learn`]) and
//! stored in a versioned file (`model`).
//!
//! Files: `naive_bayes` (per-position size/direction log-likelihood tables),
//! `tree` (C4.5, flat array), `compiled_tree` (its classification form),
//! `forest` (bagged trees), `gaussian_nb` (Gaussian naive Bayes over the
//! numeric features, scikit-learn's `GaussianNB`), `svm` (RBF, one-vs-one),
//! `ports` (port baseline), `cascade` (one model per early packet),
//! `vector` (features shared by tree/forest/SVM),
//! `model` (the `Model` type and its file format, `docs/MODEL_FORMAT.md`),
//! `dataset` (the labelled samples the models are fitted on),
//! `provenance` (the files a model was trained on, its held-out scores),
//! `pool` (worker threads for costly models), `drift` (the model's
//! agreement with the payload labels),
//! `swap` (models swapped into running shards, `flows --learn`).
//! Algorithms and measured costs: `docs/CLASSIFIERS.md`.

pub mod cascade;
pub mod class_category;
pub mod compiled_tree;
pub mod dataset;
pub mod drift;
pub mod forest;
pub mod gaussian_nb;
pub mod inline;
pub mod labeller;
pub mod model;
pub mod naive_bayes;
pub mod payload_label;
pub mod pool;
pub mod ports;
pub mod provenance;
pub mod services;
pub mod svm;
pub mod swap;
#[cfg(test)]
pub(crate) mod testutil;
pub mod tree;
pub mod vector;

pub use dataset::{Dataset, LabelLevel, Sample};
pub use model::{Model, ModelInfo, ModelKind};

use crate::features::early::EarlyPkt;

/// Application verdict attached to a flow.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Verdict {
    /// Class index into the model's class names; `UNKNOWN` when undecided.
    pub class: u16,
    /// Confidence in [0, 1] (posterior probability or leaf purity).
    pub confidence: f32,
    /// 1-based packet index at which the verdict was taken (0 = never).
    pub at_packet: u8,
}

impl Verdict {
    /// Class index meaning "unknown" (no model, too few packets or low
    /// confidence).
    pub const UNKNOWN: u16 = u16::MAX;
}

/// Confidence in 1/65535 steps: `(c.clamp(0, 1) * 65535).round()` (NaN
/// gives 0) without the `roundf` call: `y + 0.5` is exact in f64 for any
/// f32 `y` in [0, 65535], and rounding half away from zero is
/// `floor(y + 0.5)` for `y >= 0`; `as u16` floors (and saturates NaN to 0).
#[inline]
pub(crate) fn conf_u16(c: f32) -> u16 {
    (f64::from(c.clamp(0.0, 1.0) * 65535.0) + 0.5) as u16
}

/// What a classifier sees of a flow.
#[derive(Debug, Clone, Copy)]
pub struct FlowFeatures<'a> {
    /// The first packets of the flow (at most N).
    pub early: &'a [EarlyPkt],
    /// IP protocol number.
    pub proto: u8,
    /// Client port.
    pub sport: u16,
    /// Server port.
    pub dport: u16,
}

/// A trained model that labels flows.
pub trait Classifier: Send + Sync {
    /// Number of early packets the model needs before it decides.
    fn packets_needed(&self) -> usize;
    /// Labels one flow.
    fn classify(&self, f: &FlowFeatures<'_>) -> Verdict;
    /// Class names, indexed by [`Verdict::class`].
    fn classes(&self) -> &[String];
    /// True when one verdict costs so much (an RBF SVM: support vectors ×
    /// kernel evaluations) that it must run on the classifier pool instead
    /// of inline in the shard. Default false.
    fn costly(&self) -> bool {
        false
    }
    /// The flow table's direct form of this model, when it has one (a C4.5
    /// tree): asked once per table, it gives exactly the verdicts of
    /// [`Self::classify`] without the dynamic call. Default none.
    fn fast_tree(&self) -> Option<compiled_tree::FastTree> {
        None
    }
    /// The flow table's form of this model when it is a cascade (one model
    /// per early packet, `cascade.rs`): the table then asks it at every
    /// packet from K1 until it answers. Default none.
    fn cascade(&self) -> Option<cascade::InlineCascade> {
        None
    }
}
