//! Training entry point: data set + options → [`Model`].
//!
//! Contract: [`train`] checks the options and the data set (at least one
//! sample and one class, N in 1..=32, threshold in [0, 1]) and returns
//! [`Error::Config`] otherwise; it never panics. Classes with no sample in
//! `data` are not part of the model. Training runs offline and
//! allocates freely; cost grows with samples × features (trees), classes ×
//! N × 3002 (Naive Bayes) or pairs × samples² (SVM).

use std::str::FromStr;

use crate::classify::dataset::{Dataset, LabelLevel};
use crate::classify::forest::Forest;
use crate::classify::gaussian_nb::GaussianNb;
use crate::classify::model::{Model, ModelInfo, ModelKind};
use crate::classify::naive_bayes::{NaiveBayes, NbOptions};
use crate::classify::ports::PortTable;
use crate::classify::svm::{Svm, SvmOptions};
use crate::classify::tree::{Tree, TreeOptions};
use crate::error::{Error, Result};
use crate::features::early::MAX_EARLY;

/// Learning algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algo {
    /// Naive Bayes with KDE lookup tables (`nb`).
    NaiveBayes,
    /// C4.5 decision tree (`c45`).
    C45,
    /// Random forest of C4.5-style trees (`forest`).
    Forest,
    /// One-vs-one RBF SVM (`svm`).
    Svm,
    /// Port baseline (`ports`).
    Ports,
    /// Gaussian naive Bayes over the numeric features (`gnb`).
    GaussianNb,
}

impl Algo {
    /// All algorithms.
    pub const ALL: [Algo; 6] = [
        Algo::NaiveBayes,
        Algo::C45,
        Algo::Forest,
        Algo::Svm,
        Algo::Ports,
        Algo::GaussianNb,
    ];
    /// Name accepted by [`FromStr`] and written in model files.
    pub fn name(self) -> &'static str {
        match self {
            Algo::NaiveBayes => "nb",
            Algo::C45 => "c45",
            Algo::Forest => "forest",
            Algo::Svm => "svm",
            Algo::Ports => "ports",
            Algo::GaussianNb => "gnb",
        }
    }
}

impl FromStr for Algo {
    type Err = Error;
    fn from_str(s: &str) -> Result<Algo> {
        Algo::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| {
                Error::value(
                    "algorithm",
                    s,
                    "expected one of nb, c45, forest, svm, ports, gnb",
                )
            })
    }
}

impl std::fmt::Display for Algo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything that shapes a model.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainOptions {
    /// Algorithm.
    pub algo: Algo,
    /// N: early packets used (1..=32).
    pub packets: usize,
    /// Trees, forest, SVM and Gaussian naive Bayes: also use protocol and
    /// server port.
    pub use_ports: bool,
    /// Verdicts below this confidence become unknown.
    pub threshold: f32,
    /// Naive Bayes knobs.
    pub nb: NbOptions,
    /// C4.5 knobs (`min_leaf` is shared with the forest).
    pub tree: TreeOptions,
    /// Forest size.
    pub trees: usize,
    /// SVM knobs.
    pub svm: SvmOptions,
    /// Seed for the forest's bootstrap.
    pub seed: u64,
    /// Label level, recorded in the model file.
    pub level: Option<LabelLevel>,
    /// Provenance, recorded in the model file.
    pub trained_on: String,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            algo: Algo::NaiveBayes,
            packets: 4,
            use_ports: false,
            threshold: 0.0,
            nb: NbOptions::default(),
            tree: TreeOptions::default(),
            trees: 20,
            svm: SvmOptions::default(),
            seed: 1,
            level: None,
            trained_on: String::new(),
        }
    }
}

/// Trains a model.
pub fn train(data: &Dataset, opt: &TrainOptions) -> Result<Model> {
    if opt.packets == 0 || opt.packets > MAX_EARLY {
        return Err(Error::Config(format!(
            "packets = {}, expected 1..={MAX_EARLY}",
            opt.packets
        )));
    }
    if !(0.0..=1.0).contains(&opt.threshold) {
        return Err(Error::Config(format!(
            "threshold {} outside [0, 1]",
            opt.threshold
        )));
    }
    if data.samples.is_empty() || data.classes.is_empty() {
        return Err(Error::Training("training set is empty".into()));
    }
    if data.classes.len() >= u16::MAX as usize {
        return Err(Error::Training(format!(
            "{} classes is too many",
            data.classes.len()
        )));
    }
    if data
        .samples
        .iter()
        .any(|s| s.label as usize >= data.classes.len())
    {
        return Err(Error::Training("a sample's label is not a class".into()));
    }
    // Classes without a training sample are left out of the model (a split
    // keeps the full class list on both sides).
    let pruned;
    let data = if data.support().contains(&0) {
        pruned = data.min_class_support(1);
        &pruned
    } else {
        data
    };
    // The port table decides on the first packet.
    let packets = if opt.algo == Algo::Ports {
        1
    } else {
        opt.packets
    };
    let kind = match opt.algo {
        Algo::NaiveBayes => ModelKind::NaiveBayes(NaiveBayes::train(data, packets, &opt.nb)),
        Algo::C45 => ModelKind::Tree(Tree::train(
            data,
            packets,
            opt.use_ports,
            &opt.tree,
            None,
            0,
        )),
        Algo::Forest => ModelKind::Forest(Forest::train(
            data,
            packets,
            opt.use_ports,
            opt.trees,
            opt.tree.min_leaf,
            opt.seed,
        )),
        Algo::Svm => {
            if data.classes.len() > crate::classify::svm::MAX_CLASSES {
                return Err(Error::Training(format!(
                    "svm supports at most {} classes",
                    crate::classify::svm::MAX_CLASSES
                )));
            }
            ModelKind::Svm(Svm::train(data, packets, opt.use_ports, &opt.svm))
        }
        Algo::Ports => ModelKind::Ports(PortTable::train(data)),
        Algo::GaussianNb => ModelKind::GaussianNb(GaussianNb::train(data, packets, opt.use_ports)),
    };
    let model = Model {
        info: ModelInfo {
            classes: data.classes.clone(),
            packets,
            level: opt.level,
            trained_on: opt.trained_on.clone(),
            threshold: opt.threshold,
            ..ModelInfo::default()
        },
        kind,
    };
    model
        .validate()
        .map_err(|e| Error::Training(format!("inconsistent model: {e}")))?;
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::testutil::patterns;

    #[test]
    fn algo_names_round_trip() {
        for a in Algo::ALL {
            assert_eq!(a.name().parse::<Algo>().unwrap(), a);
        }
        assert!("bayes".parse::<Algo>().is_err());
    }

    #[test]
    fn classes_without_samples_are_dropped() {
        let mut d = patterns(5, 0, 1);
        d.classes.insert(1, "absent".into());
        for s in &mut d.samples {
            if s.label >= 1 {
                s.label += 1;
            }
        }
        let m = train(&d, &TrainOptions::default()).unwrap();
        assert_eq!(m.info.classes, vec!["tls", "bulk", "chat"]);
    }

    #[test]
    fn bad_options_are_errors() {
        let d = patterns(5, 0, 1);
        let bad = TrainOptions {
            packets: 0,
            ..TrainOptions::default()
        };
        assert!(train(&d, &bad).is_err());
        let bad = TrainOptions {
            threshold: 2.0,
            ..TrainOptions::default()
        };
        assert!(train(&d, &bad).is_err());
        assert!(train(&Dataset::default(), &TrainOptions::default()).is_err());
    }
}
