//! Labelled samples: what the models of this folder are fitted on.
//!
//! Contract: a [`Dataset`] holds one [`Sample`] per labelled flow (its
//! first packets, protocol, ports, class and capture file) and the class
//! names; `group` is the capture file so that [`Dataset::split_by_group`]
//! never puts flows of one capture on both sides. [`LabelLevel`] names the
//! ground-truth column a model's classes come from (it is stored in the
//! model file). Building a data set from capture files and ground-truth
//! CSVs is [`crate::learn::dataset`]'s job. Runs offline; allocates freely.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::features::early::EarlyPkt;

/// Which column of the ground truth becomes the class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LabelLevel {
    /// `app_label`, e.g. `TLS.Google`.
    App,
    /// `master_proto`, e.g. `TLS`.
    Proto,
    /// `category`, e.g. `Web`.
    Category,
}

impl LabelLevel {
    /// CSV column holding the label at this level.
    pub fn column(self) -> &'static str {
        match self {
            LabelLevel::App => "app_label",
            LabelLevel::Proto => "master_proto",
            LabelLevel::Category => "category",
        }
    }
    /// Name used on the command line and in model files.
    pub fn name(self) -> &'static str {
        match self {
            LabelLevel::App => "app",
            LabelLevel::Proto => "proto",
            LabelLevel::Category => "category",
        }
    }
}

impl std::str::FromStr for LabelLevel {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "app" => Ok(LabelLevel::App),
            "proto" => Ok(LabelLevel::Proto),
            "category" => Ok(LabelLevel::Category),
            _ => Err(Error::value(
                "label level",
                s,
                "expected app, proto or category",
            )),
        }
    }
}

/// One labelled flow.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Its first packets.
    pub early: Vec<EarlyPkt>,
    /// IP protocol number.
    pub proto: u8,
    /// Client port.
    pub sport: u16,
    /// Server port.
    pub dport: u16,
    /// Class index into [`Dataset::classes`].
    pub label: u16,
    /// Capture file the flow came from (unit of splitting).
    pub group: String,
}

/// Labelled samples and their class names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dataset {
    /// Class names, indexed by [`Sample::label`].
    pub classes: Vec<String>,
    /// The samples.
    pub samples: Vec<Sample>,
}

impl Dataset {
    /// Index of a class name, adding it when new.
    pub fn class_id(&mut self, label: &str) -> u16 {
        if let Some(i) = self.classes.iter().position(|c| c == label) {
            return i as u16;
        }
        self.classes.push(label.to_string());
        (self.classes.len() - 1) as u16
    }

    /// Number of samples per class.
    pub fn support(&self) -> Vec<usize> {
        let mut n = vec![0; self.classes.len()];
        for s in &self.samples {
            n[s.label as usize] += 1;
        }
        n
    }

    /// Keeps only classes with at least `min` samples (classes renumbered,
    /// order kept).
    pub fn min_class_support(&self, min: usize) -> Dataset {
        let support = self.support();
        let mut map = vec![u16::MAX; self.classes.len()];
        let mut classes = Vec::new();
        for (i, c) in self.classes.iter().enumerate() {
            if support[i] >= min.max(1) {
                map[i] = classes.len() as u16;
                classes.push(c.clone());
            }
        }
        let samples = self
            .samples
            .iter()
            .filter(|s| map[s.label as usize] != u16::MAX)
            .map(|s| Sample {
                label: map[s.label as usize],
                ..s.clone()
            })
            .collect();
        Dataset { classes, samples }
    }

    /// Keeps at most `max` samples per (capture file, class), chosen with
    /// `seed`, so that one long capture does not dominate training or the
    /// evaluation. Order of the kept samples is preserved.
    pub fn cap_per_group(&self, max: usize, seed: u64) -> Dataset {
        let mut buckets: BTreeMap<(&str, u16), Vec<usize>> = BTreeMap::new();
        for (i, s) in self.samples.iter().enumerate() {
            buckets
                .entry((s.group.as_str(), s.label))
                .or_default()
                .push(i);
        }
        let mut rng = SplitMix64::new(seed);
        let mut keep = vec![false; self.samples.len()];
        for v in buckets.values_mut() {
            for i in (1..v.len()).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                v.swap(i, j);
            }
            for &i in v.iter().take(max) {
                keep[i] = true;
            }
        }
        Dataset {
            classes: self.classes.clone(),
            samples: self
                .samples
                .iter()
                .zip(&keep)
                .filter(|(_, &k)| k)
                .map(|(s, _)| s.clone())
                .collect(),
        }
    }

    /// Splits by capture file: groups are shuffled with `seed` and moved to
    /// the test side until it holds at least `test_fraction` of the samples,
    /// skipping a group when one of its classes would then be left with no
    /// sample on the training side (a class seen in one capture only stays
    /// in training, since no model could learn it otherwise). Both sides keep
    /// the full class list. Returns `(train, test)`.
    pub fn split_by_group(&self, test_fraction: f64, seed: u64) -> (Dataset, Dataset) {
        let mut per_group: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for s in &self.samples {
            let v = per_group
                .entry(s.group.as_str())
                .or_insert_with(|| vec![0; self.classes.len()]);
            v[s.label as usize] += 1;
        }
        let mut groups: Vec<(&str, Vec<usize>)> = per_group.into_iter().collect();
        let mut rng = SplitMix64::new(seed);
        for i in (1..groups.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            groups.swap(i, j);
        }
        let want = (test_fraction.clamp(0.0, 1.0) * self.samples.len() as f64).ceil() as usize;
        let mut left_in_train = self.support();
        let mut test_groups = std::collections::HashSet::new();
        let mut taken = 0;
        for (g, counts) in &groups {
            if taken >= want {
                break;
            }
            let starves = counts
                .iter()
                .zip(&left_in_train)
                .any(|(&n, &left)| n > 0 && left <= n);
            if starves {
                continue;
            }
            for (l, &n) in left_in_train.iter_mut().zip(counts) {
                *l -= n;
            }
            test_groups.insert(*g);
            taken += counts.iter().sum::<usize>();
        }
        let mut train = Dataset {
            classes: self.classes.clone(),
            samples: Vec::new(),
        };
        let mut test = train.clone();
        for s in &self.samples {
            if test_groups.contains(s.group.as_str()) {
                test.samples.push(s.clone());
            } else {
                train.samples.push(s.clone());
            }
        }
        (train, test)
    }
}

/// Small deterministic generator (SplitMix64) for shuffles and bagging.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Dataset {
        /// A sample of class `label` from capture `group`, without packets
        /// or ports.
        fn push(&mut self, group: &str, label: &str) {
            let label = self.class_id(label);
            self.samples.push(Sample {
                early: Vec::new(),
                proto: 0,
                sport: 0,
                dport: 0,
                label,
                group: group.to_string(),
            });
        }
    }

    /// Samples of ten captures `g0..g9` (capture `gK` has K + 1 flows, one
    /// in three of class `a`, the others `b`) and one flow of class `rare`
    /// in `g0`.
    fn ds() -> Dataset {
        let mut d = Dataset::default();
        for g in 0..10 {
            for k in 0..(g + 1) {
                let label = if k % 3 == 0 { "a" } else { "b" };
                d.push(&format!("g{g}"), label);
            }
        }
        d.push("g0", "rare");
        d
    }

    #[test]
    fn split_never_cuts_a_group() {
        let d = ds();
        let (train, test) = d.split_by_group(0.3, 7);
        assert_eq!(train.samples.len() + test.samples.len(), d.samples.len());
        assert!(test.samples.len() as f64 >= 0.3 * d.samples.len() as f64);
        assert!(!train.samples.is_empty());
        for s in &test.samples {
            assert!(train.samples.iter().all(|t| t.group != s.group));
        }
        // "rare" lives in one capture only: it stays in training.
        assert!(train
            .samples
            .iter()
            .any(|s| d.classes[s.label as usize] == "rare"));
        for seed in 0..20 {
            let (train, test) = d.split_by_group(0.5, seed);
            let seen: std::collections::HashSet<u16> =
                train.samples.iter().map(|s| s.label).collect();
            assert!(test.samples.iter().all(|s| seen.contains(&s.label)));
        }
        assert_eq!(train.classes, d.classes);
        // Deterministic for a seed.
        assert_eq!(d.split_by_group(0.3, 7).1, test);
    }

    #[test]
    fn cap_per_group_limits_each_capture_and_class() {
        let d = ds();
        let c = d.cap_per_group(2, 1);
        let mut n: BTreeMap<(&str, u16), usize> = BTreeMap::new();
        for s in &c.samples {
            *n.entry((s.group.as_str(), s.label)).or_default() += 1;
        }
        assert!(n.values().all(|&k| k <= 2));
        // g9 has 10 flows: 4 of class a, 6 of b -> 2 + 2 kept.
        assert_eq!(n[&("g9", 0)], 2);
        assert_eq!(n[&("g9", 1)], 2);
        assert_eq!(n[&("g0", 0)], 1);
        assert_eq!(d.cap_per_group(100, 1), d);
    }

    #[test]
    fn min_support_drops_and_renumbers() {
        let d = ds();
        let f = d.min_class_support(2);
        assert_eq!(f.classes, vec!["a".to_string(), "b".to_string()]);
        assert_eq!(f.samples.len(), d.samples.len() - 1);
        assert!(f.samples.iter().all(|s| s.label < 2));
    }
}
