//! Early classification: which application a flow belongs to, from the sizes,
//! directions and inter-arrival times of its first N packets.
//!
//! Contract: a [`Classifier`] maps a [`FlowFeatures`] view (early packets and,
//! if the model uses them, protocol and ports) to a [`Verdict`]. Classifying
//! never allocates and never panics; a model that is not sure answers
//! [`Verdict::UNKNOWN`]. Models are trained offline (`train`) and stored in a
//! versioned file (`model`).
//!
//! Files: `naive_bayes` (per-position size/direction log-likelihood tables),
//! `tree` (C4.5, flat array), `compiled_tree` (its classification form),
//! `forest` (bagged trees), `svm` (RBF, one-vs-one),
//! `ports` (port baseline), `vector` (features shared by tree/forest/SVM),
//! `model` (the `Model` type and its file format, `docs/MODEL_FORMAT.md`),
//! `dataset` (ground-truth labels and samples), `train`, `evaluate`,
//! `workflow` (capture files + label CSVs → data sets, models, reports).
//! Algorithms and measured costs: `docs/CLASSIFIERS.md`.

pub mod compiled_tree;
pub mod dataset;
pub mod evaluate;
pub mod forest;
pub mod inline;
pub mod model;
pub mod naive_bayes;
pub mod pool;
pub mod ports;
pub mod svm;
#[cfg(test)]
pub(crate) mod testutil;
pub mod train;
pub mod tree;
pub mod vector;
pub mod workflow;

pub use dataset::{Dataset, LabelLevel, LabelOptions, LabelSet, Sample};
pub use evaluate::{evaluate, Report};
pub use model::{Model, ModelInfo, ModelKind};
pub use train::{train, Algo, TrainOptions};

use crate::flow::record::{EarlyPkt, Verdict};

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
}
