//! Drift in sight: how often the early model agrees with the payload label.
//!
//! Contract: a [`Drift`] is shared by a run's [`super::labeller::Labeller`]
//! (which counts on whichever thread labels records) and its readers (the
//! metrics at each scrape, the per-second statistics and the summary on
//! the exporter thread). A flow counts when it has both labels: its label
//! came from its payload (`label_source` sni, quic, http, dns or ssh) and
//! the model gave it a class (`stat_app` not `unknown`). It is one
//! labelled flow of the payload label's class at the run's level
//! (`--learn-level`: `category` the label's category, `app` its
//! application, `proto` the protocol the name was read from), and one
//! agreeing flow when the model's verdict is that class at the same level
//! (`category`: the category of the model's class, which is the class
//! itself for a model trained on categories; `app` and `proto`: the
//! class's name). A payload label without a class at the level (an empty
//! category) is not counted.
//!
//! Counts only grow ([`Drift::classes`], [`Drift::totals`]): they are
//! exact, whichever thread labelled a record and when. [`Drift::count`]
//! also tells its caller whether the flow counted and agreed, so the
//! per-second statistics can count it in the second its record was made
//! ([`crate::flow::record::MadeIn`], added up on the exporter thread by
//! `telemetry/series.rs`): the rows depend on the input only, not on when
//! a thread labelled the record. Counting is two relaxed atomic additions
//! per flow with both labels; classes are bounded by the level's names.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::dataset::LabelLevel;
use super::payload_label::Source;
use super::services::CATEGORIES;

/// The protocols a payload name is read from (level `proto`).
const PROTOCOLS: [&str; 5] = ["TLS", "QUIC", "HTTP", "DNS", "SSH"];

/// Flows with both labels and those that agreed, per class, and since the
/// last per-second row (see the module docs).
#[derive(Debug)]
pub struct Drift {
    level: LabelLevel,
    names: Vec<String>,
    index: HashMap<String, usize>,
    /// Per class: labelled, agreeing.
    counts: Vec<[AtomicU64; 2]>,
}

/// One class's counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassAgreement {
    /// The class (at the run's level).
    pub class: String,
    /// Flows with a payload label of this class and a model verdict.
    pub labelled: u64,
    /// Of them, flows whose model verdict was this class.
    pub agreeing: u64,
}

impl Drift {
    /// Counts at `level`; `apps` are the application names a label can
    /// take (level `app`; the labeller's names).
    pub fn new(level: LabelLevel, apps: &[String]) -> Drift {
        let names: Vec<String> = match level {
            LabelLevel::Category => CATEGORIES.iter().map(|c| c.to_string()).collect(),
            LabelLevel::Proto => PROTOCOLS.iter().map(|c| c.to_string()).collect(),
            LabelLevel::App => apps.to_vec(),
        };
        let mut index = HashMap::new();
        for (i, n) in names.iter().enumerate() {
            index.entry(n.clone()).or_insert(i);
        }
        Drift {
            level,
            counts: names.iter().map(|_| Default::default()).collect(),
            names,
            index,
        }
    }

    /// The level classes are compared at.
    pub fn level(&self) -> LabelLevel {
        self.level
    }

    /// A labelled flow: its label came from `source` with application
    /// `app` and category `category`; the model said `stat_app`, of
    /// category `stat_category` (`None`: the model gave no class).
    /// Returns whether the flow counted and, if so, whether the model
    /// agreed (`Some(true)`).
    pub fn count(
        &self,
        source: Source,
        app: &str,
        category: &str,
        stat: Option<(&str, &str)>,
    ) -> Option<bool> {
        let (stat_app, stat_category) = stat?;
        let proto = match source {
            Source::Sni => "TLS",
            Source::Quic => "QUIC",
            Source::Http => "HTTP",
            Source::Dns => "DNS",
            Source::Ssh => "SSH",
            Source::Stat | Source::Port | Source::None => return None,
        };
        let (class, said) = match self.level {
            LabelLevel::Category => (category, stat_category),
            LabelLevel::App => (app, stat_app),
            LabelLevel::Proto => (proto, stat_app),
        };
        let &i = self.index.get(class)?;
        let agree = class == said;
        self.counts[i][0].fetch_add(1, Relaxed);
        self.counts[i][1].fetch_add(u64::from(agree), Relaxed);
        Some(agree)
    }

    /// Every class with a labelled flow so far, in the level's order.
    pub fn classes(&self) -> Vec<ClassAgreement> {
        (self.names.iter().zip(&self.counts))
            .map(|(n, c)| ClassAgreement {
                class: n.clone(),
                labelled: c[0].load(Relaxed),
                agreeing: c[1].load(Relaxed),
            })
            .filter(|c| c.labelled > 0)
            .collect()
    }

    /// Labelled and agreeing flows, all classes.
    pub fn totals(&self) -> (u64, u64) {
        self.counts.iter().fold((0, 0), |(l, a), c| {
            (l + c[0].load(Relaxed), a + c[1].load(Relaxed))
        })
    }
}

/// The agreement on `/metrics` (feature `metrics`):
/// `earlybird_learn_labelled_flows_total{class}`,
/// `earlybird_learn_agreeing_flows_total{class}` and, in a `--learn` run
/// whose models are swapped in, `earlybird_learn_model_id` (the number of
/// the model a shard took in last, 0 while the run's own decides),
/// brought up to date at each scrape.
#[cfg(feature = "metrics")]
pub struct AgreementMetrics {
    drift: std::sync::Arc<Drift>,
    swap: Option<std::sync::Arc<super::swap::Swap>>,
    labelled: prometheus::IntCounterVec,
    agreeing: prometheus::IntCounterVec,
    model: prometheus::IntGauge,
}

#[cfg(feature = "metrics")]
impl AgreementMetrics {
    /// The metrics of `drift` and of `swap`'s model in use.
    pub fn new(
        drift: std::sync::Arc<Drift>,
        swap: Option<std::sync::Arc<super::swap::Swap>>,
    ) -> AgreementMetrics {
        use prometheus::{IntCounterVec, IntGauge, Opts};
        let vec = |name: &str, help: &str| {
            IntCounterVec::new(Opts::new(name, help), &["class"])
                .unwrap_or_else(|_| unreachable!("the names and label are valid"))
        };
        AgreementMetrics {
            drift,
            swap,
            labelled: vec(
                "earlybird_learn_labelled_flows_total",
                "Flow records with a payload label and a model verdict, by the payload label's class at --learn-level.",
            ),
            agreeing: vec(
                "earlybird_learn_agreeing_flows_total",
                "Of them, records whose model verdict was the same class.",
            ),
            model: IntGauge::new(
                "earlybird_learn_model_id",
                "Number of the learnt model the shards took in last (DIR/models.jsonl); 0 while the run's own model decides.",
            )
            .unwrap_or_else(|_| unreachable!("the name is valid")),
        }
    }
}

#[cfg(feature = "metrics")]
impl prometheus::core::Collector for AgreementMetrics {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        let mut d = self.labelled.desc();
        d.extend(self.agreeing.desc());
        if self.swap.is_some() {
            d.extend(self.model.desc());
        }
        d
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        for c in self.drift.classes() {
            let l = [c.class.as_str()];
            let up = |v: &prometheus::IntCounterVec, n: u64| {
                let m = v.with_label_values(&l);
                m.inc_by(n.saturating_sub(m.get()));
            };
            up(&self.labelled, c.labelled);
            up(&self.agreeing, c.agreeing);
        }
        let mut out = self.labelled.collect();
        out.extend(self.agreeing.collect());
        if let Some(sw) = &self.swap {
            self.model.set(i64::from(sw.in_use()));
            out.extend(self.model.collect());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flow_counts_at_the_level_only_with_both_labels() {
        let d = Drift::new(LabelLevel::Category, &[]);
        let counted = [
            d.count(Source::Sni, "Netflix", "Video", Some(("TLS", "Web"))),
            d.count(Source::Quic, "YouTube", "Video", Some(("Video", "Video"))),
            d.count(Source::Dns, "DNS", "Network", Some(("DNS", "Network"))),
            // No model verdict, a label of the model, no category: not counted.
            d.count(Source::Sni, "Netflix", "Video", None),
            d.count(Source::Stat, "TLS", "Web", Some(("TLS", "Web"))),
            d.count(Source::Sni, "TLS", "", Some(("TLS", "Web"))),
        ];
        assert_eq!(
            counted,
            [Some(false), Some(true), Some(true), None, None, None]
        );
        let got = d.classes();
        let of = |c: &str| got.iter().find(|x| x.class == c).cloned();
        assert_eq!(of("Video").map(|c| (c.labelled, c.agreeing)), Some((2, 1)));
        assert_eq!(
            of("Network").map(|c| (c.labelled, c.agreeing)),
            Some((1, 1))
        );
        assert_eq!(got.len(), 2);
        assert_eq!(d.totals(), (3, 2));

        let p = Drift::new(LabelLevel::Proto, &[]);
        p.count(Source::Sni, "Netflix", "Video", Some(("TLS", "Web")));
        p.count(Source::Quic, "YouTube", "Video", Some(("TLS", "Web")));
        assert_eq!(p.totals(), (2, 1));
        let apps = ["TLS".to_string(), "Netflix".to_string()];
        let a = Drift::new(LabelLevel::App, &apps);
        a.count(Source::Sni, "Netflix", "Video", Some(("TLS", "Web")));
        a.count(Source::Sni, "TLS", "Web", Some(("TLS", "Web")));
        assert_eq!(a.totals(), (2, 1));
    }
}
