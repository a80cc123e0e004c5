//! Offline learning: ground-truth labels, data sets built from capture
//! files, training and evaluation. Nothing on the data path imports this
//! folder; it drives the data path ([`crate::pipeline::collect`]) to turn
//! captures into labelled samples.
//!
//! Files: `dataset` (ground-truth labels and the samples built from flow
//! records), `train` (options → [`crate::classify::Model`]), `evaluate`
//! (scores and the accuracy-versus-packets curve), `workflow` (capture files
//! and label CSVs → data sets, models, reports: `earlybird train` and
//! `earlybird evaluate`), `media` (intervals of the `media` analyzer
//! learned from labelled media flows: `earlybird train-media`), `self_label` (payload labels as training
//! labels and the bounded per-class reservoir: `earlybird train
//! --self-labels`), `online` (the same while `flows --learn` runs: models
//! trained in the background from the run's own payload labels).

pub mod dataset;
pub mod evaluate;
pub mod label;
pub mod media;
pub mod online;
pub mod self_label;
pub mod train;
pub mod workflow;

pub use dataset::{LabelOptions, LabelSet};
pub use evaluate::evaluate;
pub use train::{train, Algo, TrainOptions};
