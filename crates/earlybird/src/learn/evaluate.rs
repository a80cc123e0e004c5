//! Evaluation of a model on a labelled data set.
//!
//! Contract: [`evaluate`] classifies every sample through the [`Classifier`]
//! interface (threshold included; an unknown verdict counts as wrong) and
//! returns a [`Report`]: accuracy, macro F1 (mean over the classes present in
//! the test set), accuracy over the samples whose class the model knows,
//! per-class precision/recall/F1/support, the confusion matrix
//! (rows = truth, columns = prediction, last column = unknown) and accuracy
//! as a function of k = 1..=10 packets. For the k curve each flow is cut to
//! its first k packets; a model trained on N packets uses `min(k, N)` of them,
//! so for k ≥ N the curve stays at the k = N value. Classes are matched by
//! name, so a model may be evaluated on a data set with other classes (the
//! report's class list is the test set's classes followed by the model's
//! extra ones). At the model's threshold it also gives precision where the
//! model answers and coverage (the share it answers), overall and per
//! class; from the confidences before the threshold, a reliability table
//! (per confidence decile: flows, mean confidence, share right) and
//! precision and coverage at other thresholds ([`threshold_for_precision`]
//! picks the lowest threshold that reaches a precision). Pure; allocates
//! the report. [`Report::write_png`] (feature `chart`) draws the k curve,
//! [`Report::write_reliability_png`] the reliability diagram; they fail
//! with [`Error::Output`] when the file cannot be written.

use std::fmt;

use crate::classify::dataset::Dataset;
use crate::classify::model::Model;
use crate::classify::Verdict;
use crate::classify::{Classifier, FlowFeatures};
#[cfg(feature = "chart")]
use crate::error::{Error, Result};

/// Largest k of the accuracy-versus-packets curve.
pub const MAX_K: usize = 10;

/// Scores of one class.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassStats {
    /// Class name.
    pub name: String,
    /// Correct predictions of the class / predictions of the class.
    pub precision: f64,
    /// Correct predictions of the class / samples of the class.
    pub recall: f64,
    /// Harmonic mean of precision and recall.
    pub f1: f64,
    /// Samples of the class in the test set.
    pub support: usize,
    /// Share of the class's samples the model answered (not unknown).
    pub coverage: f64,
}

/// Flows whose confidence (before the threshold) fell in one decile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReliabilityBin {
    /// Lower bound of the bin (the bin is `[lo, lo + 0.1)`, the last one
    /// includes 1).
    pub lo: f64,
    /// Flows in the bin.
    pub flows: usize,
    /// Their mean confidence.
    pub confidence: f64,
    /// Share of them the model's class was right.
    pub accuracy: f64,
}

/// Precision and coverage at one threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThresholdPoint {
    /// The threshold.
    pub threshold: f32,
    /// Share of the flows answered.
    pub coverage: f64,
    /// Share of the answered flows answered right.
    pub precision: f64,
}

/// Thresholds shown in [`Report::by_threshold`].
pub const THRESHOLDS: [f32; 12] = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99];

/// The flows whose verdict was taken at one packet.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionPoint {
    /// 1-based packet of the verdict (`Verdict::at_packet`).
    pub packet: usize,
    /// Flows decided there (answered or unknown).
    pub flows: usize,
    /// Of those, flows answered with a class.
    pub answered: usize,
    /// Of those, flows answered right.
    pub right: usize,
}

/// Result of an evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Algorithm name.
    pub algo: String,
    /// N of the model.
    pub packets: usize,
    /// Class names (rows and columns of [`Report::confusion`]).
    pub classes: Vec<String>,
    /// Samples evaluated.
    pub total: usize,
    /// Samples classified correctly.
    pub correct: usize,
    /// Samples the model left unknown.
    pub unknown: usize,
    /// correct / total.
    pub accuracy: f64,
    /// correct / answered (answered = total − unknown; 0 when none).
    pub precision: f64,
    /// answered / total.
    pub coverage: f64,
    /// Threshold the model ran at.
    pub threshold: f32,
    /// Samples whose true class is one of the model's classes.
    pub seen: usize,
    /// Accuracy over those samples only (the others cannot be right).
    pub seen_accuracy: f64,
    /// Samples of classes the model does not know that it answered
    /// unknown (the right answer for them); the others were mislabelled.
    pub unseen_unknown: usize,
    /// Mean F1 over classes with support.
    pub macro_f1: f64,
    /// Per class, in the order of `classes`.
    pub per_class: Vec<ClassStats>,
    /// `confusion[truth][prediction]`; column `classes.len()` is unknown.
    pub confusion: Vec<Vec<u64>>,
    /// `(k, accuracy with the first k packets)` for k = 1..=10.
    pub accuracy_by_k: Vec<(usize, f64)>,
    /// Confidence deciles (before the threshold), 10 bins.
    pub reliability: Vec<ReliabilityBin>,
    /// Precision and coverage at each of [`THRESHOLDS`].
    pub by_threshold: Vec<ThresholdPoint>,
    /// Flows by the packet their verdict was taken at (ascending, only
    /// packets where some flow was decided): a cascade decides flows at
    /// the earliest confident packet, a single model at min(len, N).
    pub by_decision: Vec<DecisionPoint>,
    /// `(confidence, right)` of every flow the algorithm answered before
    /// the threshold, by decreasing confidence (for
    /// [`threshold_for_precision`]).
    pub scored: Vec<(f32, bool)>,
}

/// Lowest threshold at which the precision over the flows answered is at
/// least `target`, from a report's `scored` flows; `None` when no
/// threshold reaches it. Precision is measured over all flows with
/// confidence ≥ the threshold, so the answer is one of their confidences.
pub fn threshold_for_precision(scored: &[(f32, bool)], target: f64) -> Option<f32> {
    let mut best = None;
    let (mut n, mut right) = (0usize, 0usize);
    let mut i = 0;
    while i < scored.len() {
        // All flows of equal confidence come in together.
        let c = scored[i].0;
        while i < scored.len() && scored[i].0 == c {
            n += 1;
            right += scored[i].1 as usize;
            i += 1;
        }
        if right as f64 >= target * n as f64 {
            best = Some(c);
        }
    }
    best
}

/// Evaluates `model` on `data`.
pub fn evaluate(model: &Model, data: &Dataset) -> Report {
    let mut classes = data.classes.clone();
    let model_to_report: Vec<usize> = model
        .info
        .classes
        .iter()
        .map(|c| match classes.iter().position(|d| d == c) {
            Some(i) => i,
            None => {
                classes.push(c.clone());
                classes.len() - 1
            }
        })
        .collect();
    let nc = classes.len();
    let pred_of = |v: Verdict| -> usize {
        if v.class == Verdict::UNKNOWN {
            nc
        } else {
            model_to_report.get(v.class as usize).copied().unwrap_or(nc)
        }
    };
    let mut confusion = vec![vec![0u64; nc + 1]; nc];
    let mut by_k = [0usize; MAX_K];
    let mut scored: Vec<(f32, bool)> = Vec::with_capacity(data.samples.len());
    let mut decisions = [(0usize, 0usize, 0usize); 256];
    for s in &data.samples {
        let f = FlowFeatures {
            early: &s.early,
            proto: s.proto,
            sport: s.sport,
            dport: s.dport,
        };
        let truth = s.label as usize;
        let v = model.classify(&f);
        let pred = pred_of(v);
        confusion[truth][pred] += 1;
        let d = &mut decisions[v.at_packet as usize];
        d.0 += 1;
        d.1 += (pred != nc) as usize;
        d.2 += (pred == truth) as usize;
        if !s.early.is_empty() {
            if let Some((class, conf)) = model.raw_decision(&f) {
                let raw = Verdict {
                    class,
                    confidence: conf,
                    at_packet: 1,
                };
                scored.push((conf, pred_of(raw) == truth));
            }
        }
        for (k, hits) in by_k.iter_mut().enumerate() {
            let cut = FlowFeatures {
                early: &s.early[..s.early.len().min(k + 1)],
                ..f
            };
            if pred_of(model.classify(&cut)) == truth {
                *hits += 1;
            }
        }
    }
    let total = data.samples.len();
    let correct: u64 = (0..nc).map(|i| confusion[i][i]).sum();
    let unknown: u64 = confusion.iter().map(|r| r[nc]).sum();
    let mut per_class = Vec::with_capacity(nc);
    for (i, name) in classes.iter().enumerate() {
        let tp = confusion[i][i] as f64;
        let support: u64 = confusion[i].iter().sum();
        let predicted: u64 = confusion.iter().map(|r| r[i]).sum();
        let precision = if predicted > 0 {
            tp / predicted as f64
        } else {
            0.0
        };
        let recall = if support > 0 {
            tp / support as f64
        } else {
            0.0
        };
        let f1 = if precision + recall > 0.0 {
            2.0 * precision * recall / (precision + recall)
        } else {
            0.0
        };
        let coverage = if support > 0 {
            (support - confusion[i][nc]) as f64 / support as f64
        } else {
            0.0
        };
        per_class.push(ClassStats {
            name: name.clone(),
            precision,
            recall,
            f1,
            support: support as usize,
            coverage,
        });
    }
    let with_support: Vec<&ClassStats> = per_class.iter().filter(|c| c.support > 0).collect();
    let macro_f1 = if with_support.is_empty() {
        0.0
    } else {
        with_support.iter().map(|c| c.f1).sum::<f64>() / with_support.len() as f64
    };
    let ratio = |n: usize| {
        if total > 0 {
            n as f64 / total as f64
        } else {
            0.0
        }
    };
    let known: Vec<bool> = (0..nc).map(|i| model_to_report.contains(&i)).collect();
    let seen: u64 = (0..nc)
        .filter(|&i| known[i])
        .map(|i| confusion[i].iter().sum::<u64>())
        .sum();
    let unseen_unknown: u64 = (0..nc)
        .filter(|&i| !known[i])
        .map(|i| confusion[i][nc])
        .sum();
    let seen_accuracy = if seen > 0 {
        correct as f64 / seen as f64
    } else {
        0.0
    };
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
    let answered = total - unknown as usize;
    let mut reliability: Vec<ReliabilityBin> = (0..10)
        .map(|i| ReliabilityBin {
            lo: i as f64 / 10.0,
            flows: 0,
            confidence: 0.0,
            accuracy: 0.0,
        })
        .collect();
    for &(c, right) in &scored {
        let b = &mut reliability[((c as f64 * 10.0) as usize).min(9)];
        b.flows += 1;
        b.confidence += c as f64;
        b.accuracy += right as u8 as f64;
    }
    for b in &mut reliability {
        if b.flows > 0 {
            b.confidence /= b.flows as f64;
            b.accuracy /= b.flows as f64;
        }
    }
    let by_threshold = THRESHOLDS
        .iter()
        .map(|&t| {
            let above = scored.iter().take_while(|s| s.0 >= t);
            let (n, right) = above.fold((0usize, 0usize), |(n, r), s| (n + 1, r + s.1 as usize));
            ThresholdPoint {
                threshold: t,
                coverage: ratio(n),
                precision: if n > 0 { right as f64 / n as f64 } else { 0.0 },
            }
        })
        .collect();
    Report {
        algo: model.kind.algo().to_string(),
        packets: model.info.packets,
        classes,
        total,
        correct: correct as usize,
        unknown: unknown as usize,
        accuracy: ratio(correct as usize),
        precision: if answered > 0 {
            correct as f64 / answered as f64
        } else {
            0.0
        },
        coverage: ratio(answered),
        threshold: model.info.threshold,
        seen: seen as usize,
        seen_accuracy,
        unseen_unknown: unseen_unknown as usize,
        macro_f1,
        per_class,
        confusion,
        accuracy_by_k: by_k
            .iter()
            .enumerate()
            .map(|(k, &n)| (k + 1, ratio(n)))
            .collect(),
        reliability,
        by_threshold,
        by_decision: decisions
            .iter()
            .enumerate()
            .filter(|(_, d)| d.0 > 0)
            .map(|(packet, &(flows, answered, right))| DecisionPoint {
                packet,
                flows,
                answered,
                right,
            })
            .collect(),
        scored,
    }
}

/// Classes shown in full in the text confusion matrix.
const MAX_MATRIX: usize = 12;

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "model {} (N = {}): {} flows, accuracy {:.2} %, macro F1 {:.3}, unknown {}",
            self.algo,
            self.packets,
            self.total,
            100.0 * self.accuracy,
            self.macro_f1,
            self.unknown
        )?;
        writeln!(
            f,
            "at threshold {}: precision {:.2} % where it answers, coverage {:.2} %",
            self.threshold,
            100.0 * self.precision,
            100.0 * self.coverage
        )?;
        if self.seen < self.total {
            writeln!(
                f,
                "{} flows are of classes the model does not know ({} answered unknown, {} mislabelled); accuracy on the other {}: {:.2} %",
                self.total - self.seen,
                self.unseen_unknown,
                self.total - self.seen - self.unseen_unknown,
                self.seen,
                100.0 * self.seen_accuracy
            )?;
        }
        let w = self
            .classes
            .iter()
            .map(|c| c.len())
            .max()
            .unwrap_or(5)
            .clamp(5, 40);
        writeln!(f)?;
        writeln!(
            f,
            "{:<w$}  precision  recall     f1  support  coverage",
            "class"
        )?;
        let mut order: Vec<&ClassStats> = self.per_class.iter().filter(|c| c.support > 0).collect();
        order.sort_by(|a, b| b.support.cmp(&a.support).then(a.name.cmp(&b.name)));
        for c in order {
            writeln!(
                f,
                "{:<w$}  {:>9.3}  {:>6.3}  {:>5.3}  {:>7}  {:>8.3}",
                c.name, c.precision, c.recall, c.f1, c.support, c.coverage
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "reliability (confidence before the threshold; right = share answered right):"
        )?;
        for b in self.reliability.iter().filter(|b| b.flows > 0) {
            writeln!(
                f,
                "  [{:.1}, {:.1}{}  {:>7} flows  mean confidence {:.3}  right {:>6.2} %",
                b.lo,
                b.lo + 0.1,
                if b.lo >= 0.9 { "]" } else { ")" },
                b.flows,
                b.confidence,
                100.0 * b.accuracy
            )?;
        }
        writeln!(f)?;
        writeln!(f, "threshold  precision  coverage")?;
        for t in &self.by_threshold {
            writeln!(
                f,
                "  {:>7.2}  {:>8.2} %  {:>6.2} %",
                t.threshold,
                100.0 * t.precision,
                100.0 * t.coverage
            )?;
        }
        writeln!(f)?;
        if self.algo == "cascade" {
            self.write_decisions(f)?;
        }
        writeln!(f, "accuracy with the first k packets:")?;
        for (k, a) in &self.accuracy_by_k {
            writeln!(f, "  k = {k:>2}: {:>6.2} %", 100.0 * a)?;
        }
        writeln!(f)?;
        let nc = self.classes.len();
        if nc <= MAX_MATRIX {
            writeln!(f, "confusion matrix (rows = truth, columns = prediction):")?;
            write!(f, "{:<w$}", "")?;
            for i in 0..nc {
                write!(f, " {:>6}", format!("[{i}]"))?;
            }
            writeln!(f, " {:>7}", "unknown")?;
            for (i, row) in self.confusion.iter().enumerate() {
                write!(f, "{:<w$}", format!("[{i}] {}", self.classes[i]))?;
                for v in &row[..nc] {
                    write!(f, " {v:>6}")?;
                }
                writeln!(f, " {:>7}", row[nc])?;
            }
        } else {
            writeln!(f, "most frequent confusions (truth -> prediction):")?;
            let mut pairs: Vec<(u64, usize, usize)> = Vec::new();
            for (i, row) in self.confusion.iter().enumerate() {
                for (j, &v) in row.iter().enumerate() {
                    if i != j && v > 0 {
                        pairs.push((v, i, j));
                    }
                }
            }
            pairs.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
            for (v, i, j) in pairs.into_iter().take(15) {
                let to = self.classes.get(j).map(|s| s.as_str()).unwrap_or("unknown");
                writeln!(f, "  {v:>6}  {} -> {to}", self.classes[i])?;
            }
        }
        Ok(())
    }
}

impl Report {
    /// The decision packets: per packet, flows decided there, precision
    /// where answered, and coverage and accuracy of all flows decided by
    /// then.
    fn write_decisions(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "verdict taken at packet (flows decided there; precision where answered there; coverage and accuracy of all flows by that packet):"
        )?;
        let total = self.total.max(1) as f64;
        let (mut answered, mut right) = (0usize, 0usize);
        for d in &self.by_decision {
            answered += d.answered;
            right += d.right;
            writeln!(
                f,
                "  k = {:>2}: {:>7} flows ({:>6.2} %), {:>6} answered, precision {:>6.2} %; by then coverage {:>6.2} %, accuracy {:>6.2} %",
                d.packet,
                d.flows,
                100.0 * d.flows as f64 / total,
                d.answered,
                100.0 * d.right as f64 / d.answered.max(1) as f64,
                100.0 * answered as f64 / total,
                100.0 * right as f64 / total
            )?;
        }
        let mean = self
            .by_decision
            .iter()
            .map(|d| d.packet * d.flows)
            .sum::<usize>() as f64
            / total;
        writeln!(f, "  mean decision packet {mean:.2}")?;
        writeln!(f)
    }
}

#[cfg(feature = "chart")]
static FONT: &[u8] = include_bytes!("../../../../testdata/fonts/DejaVuSansMono.ttf");

impl Report {
    /// Draws accuracy versus k as a PNG (800 × 500).
    #[cfg(feature = "chart")]
    pub fn write_png(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        Self::write_curves_png(path, &[(self.algo.as_str(), self)])
    }

    /// Draws the accuracy-versus-k curves of several reports on one chart.
    #[cfg(feature = "chart")]
    pub fn write_curves_png(
        path: impl AsRef<std::path::Path>,
        reports: &[(&str, &Report)],
    ) -> Result<()> {
        use plotters::prelude::*;
        let path = path.as_ref();
        let err = |e: String| Error::Output {
            name: path.display().to_string(),
            reason: e,
        };
        register_font();
        let root = BitMapBackend::new(path, (800, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Accuracy vs packets used", ("sans-serif", 24))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(55)
            .build_cartesian_2d(1f64..MAX_K as f64, 0f64..100f64)
            .map_err(|e| err(e.to_string()))?;
        chart
            .configure_mesh()
            .x_desc("first k packets")
            .y_desc("accuracy (%)")
            .x_labels(MAX_K)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .light_line_style(WHITE)
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(|e| err(e.to_string()))?;
        for (i, (name, r)) in reports.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let pts: Vec<(f64, f64)> = r
                .accuracy_by_k
                .iter()
                .map(|&(k, a)| (k as f64, 100.0 * a))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(|e| err(e.to_string()))?
                .label(name.to_string())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
                .map_err(|e| err(e.to_string()))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
        Ok(())
    }
}

impl Report {
    /// Draws the reliability diagram as a PNG (600 × 600): the share of
    /// right answers against the mean confidence of each decile that has
    /// flows, beside the diagonal of a calibrated model.
    #[cfg(feature = "chart")]
    pub fn write_reliability_png(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        use plotters::prelude::*;
        let path = path.as_ref();
        let err = |e: String| Error::Output {
            name: path.display().to_string(),
            reason: e,
        };
        register_font();
        let root = BitMapBackend::new(path, (600, 600)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("Reliability: {} (N = {})", self.algo, self.packets),
                ("sans-serif", 22),
            )
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(55)
            .build_cartesian_2d(0f64..1f64, 0f64..1f64)
            .map_err(|e| err(e.to_string()))?;
        chart
            .configure_mesh()
            .x_desc("confidence")
            .y_desc("share right")
            .light_line_style(WHITE)
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(|e| err(e.to_string()))?;
        chart
            .draw_series(LineSeries::new(
                vec![(0.0, 0.0), (1.0, 1.0)],
                BLACK.mix(0.4),
            ))
            .map_err(|e| err(e.to_string()))?;
        let pts: Vec<(f64, f64)> = self
            .reliability
            .iter()
            .filter(|b| b.flows > 0)
            .map(|b| (b.confidence, b.accuracy))
            .collect();
        let color = Palette99::pick(0).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| err(e.to_string()))?;
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))
            .map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
        Ok(())
    }
}

impl Report {
    /// Classes with a flow in their row or column of the confusion matrix,
    /// by index.
    fn present(&self) -> Vec<usize> {
        let nc = self.classes.len();
        (0..nc)
            .filter(|&i| {
                self.confusion[i].iter().any(|&v| v > 0) || self.confusion.iter().any(|r| r[i] > 0)
            })
            .collect()
    }

    /// The full confusion matrix as text: one row per true class and one
    /// column per predicted class (every class with a flow in its row or
    /// column, numbered as in the rows), then unknown.
    pub fn confusion_table(&self) -> String {
        use std::fmt::Write as _;
        let nc = self.classes.len();
        let idx = self.present();
        let w = idx
            .iter()
            .map(|&i| self.classes[i].len())
            .max()
            .unwrap_or(5)
            .max(5)
            + 7;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "confusion matrix, {} (N = {}), {} flows: rows = truth, columns = prediction",
            self.algo, self.packets, self.total
        );
        let _ = write!(out, "{:<w$}", "");
        for &j in &idx {
            let _ = write!(out, " {:>5}", format!("[{j}]"));
        }
        let _ = writeln!(out, " {:>7}", "unknown");
        for &i in &idx {
            let _ = write!(out, "{:<w$}", format!("[{i}] {}", self.classes[i]));
            for &j in &idx {
                let _ = write!(out, " {:>5}", self.confusion[i][j]);
            }
            let _ = writeln!(out, " {:>7}", self.confusion[i][nc]);
        }
        out
    }

    /// Draws the confusion matrix as a heat map PNG: every class with a
    /// flow (as in [`Report::confusion_table`]) plus an unknown column,
    /// each cell shaded by its share of the row (green on the diagonal,
    /// red elsewhere).
    #[cfg(feature = "chart")]
    pub fn write_confusion_png(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        use plotters::prelude::*;
        let path = path.as_ref();
        let err = |e: String| Error::Output {
            name: path.display().to_string(),
            reason: e,
        };
        register_font();
        let nc = self.classes.len();
        let idx = self.present();
        let n = idx.len().max(1);
        let small = n > 60;
        let cell: u32 = if small { 8 } else { 16 };
        let longest = idx
            .iter()
            .map(|&i| self.classes[i].len())
            .max()
            .unwrap_or(7)
            .max(7) as u32;
        let label = longest * if small { 5 } else { 7 } + 10;
        let side = (n as u32 + 1) * cell;
        let root =
            BitMapBackend::new(path, (side + label + 30, side + label + 60)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let font = if small { 9 } else { 12 };
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "Confusion: {} (N = {}), rows = truth",
                    self.algo, self.packets
                ),
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(label)
            .y_label_area_size(label)
            .build_cartesian_2d(
                (0i32..n as i32 + 1).into_segmented(),
                (0i32..n as i32).into_segmented(),
            )
            .map_err(|e| err(e.to_string()))?;
        let names: Vec<String> = idx
            .iter()
            .map(|&i| self.classes[i].clone())
            .chain(std::iter::once("unknown".to_string()))
            .collect();
        // Rows from the top: the first class is drawn at y = n - 1.
        let name = |v: &SegmentValue<i32>, flip: bool| match v {
            SegmentValue::CenterOf(i) => {
                let i = if flip { n as i32 - 1 - i } else { *i };
                names.get(i as usize).cloned().unwrap_or_default()
            }
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(n + 1)
            .y_labels(n)
            .x_label_formatter(&|x| name(x, false))
            .y_label_formatter(&|y| name(y, true))
            .x_label_style(
                ("sans-serif", font)
                    .into_font()
                    .transform(FontTransform::Rotate90),
            )
            .y_label_style(("sans-serif", font))
            .draw()
            .map_err(|e| err(e.to_string()))?;
        let mut cells = Vec::new();
        for (r, &i) in idx.iter().enumerate() {
            let row_total: u64 = self.confusion[i].iter().sum();
            let cols = idx.iter().copied().chain(std::iter::once(nc));
            for (c, j) in cols.enumerate() {
                let v = self.confusion[i][j];
                if v == 0 || row_total == 0 {
                    continue;
                }
                let share = v as f64 / row_total as f64;
                let shade = 255 - (share * 225.0) as u8;
                let color = if r == c {
                    RGBColor(shade, 255 - (255 - shade) / 3, shade)
                } else {
                    RGBColor(255, shade, shade)
                };
                let y = n as i32 - 1 - r as i32;
                cells.push(Rectangle::new(
                    [
                        (SegmentValue::Exact(c as i32), SegmentValue::Exact(y)),
                        (
                            SegmentValue::Exact(c as i32 + 1),
                            SegmentValue::Exact(y + 1),
                        ),
                    ],
                    color.filled(),
                ));
            }
        }
        chart.draw_series(cells).map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
        Ok(())
    }
}

#[cfg(feature = "chart")]
fn register_font() {
    static REGISTER: std::sync::Once = std::sync::Once::new();
    REGISTER.call_once(|| {
        // Cannot fail on the embedded font; a failure would only lose text.
        let _ =
            plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, FONT);
    });
}

#[cfg(test)]
mod tests {
    use super::super::train::{train, Algo, TrainOptions};
    use super::*;
    use crate::classify::testutil::patterns;

    #[test]
    fn perfect_model_scores_one() {
        let d = patterns(20, 0, 1);
        let m = train(
            &d,
            &TrainOptions {
                algo: Algo::C45,
                ..Default::default()
            },
        )
        .unwrap();
        let r = evaluate(&m, &d);
        assert_eq!(r.accuracy, 1.0);
        assert_eq!(r.macro_f1, 1.0);
        assert_eq!(r.total, 60);
        assert_eq!(r.confusion[1], vec![0, 20, 0, 0]);
        assert_eq!(r.accuracy_by_k.len(), MAX_K);
        // Beyond N = 4 the curve is flat.
        assert_eq!(r.accuracy_by_k[9].1, r.accuracy_by_k[3].1);
        let text = r.to_string();
        assert!(text.contains("accuracy 100.00 %"), "{text}");
        assert!(text.contains("bulk"));
    }

    #[test]
    fn counts_errors_unknowns_and_foreign_classes() {
        let d = patterns(20, 0, 1);
        let mut m = train(&d, &TrainOptions::default()).unwrap();
        // Rename one model class: its verdicts no longer match the truth.
        m.info.classes[2] = "other".into();
        let r = evaluate(&m, &d);
        assert_eq!(r.classes.len(), 4);
        assert!((r.accuracy - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(r.confusion[2][3], 20);
        assert_eq!(r.per_class[2].recall, 0.0);
        assert_eq!((r.seen, r.seen_accuracy), (40, 1.0));
        assert!(r.to_string().contains(
            "20 flows are of classes the model does not know (0 answered unknown, 20 mislabelled)"
        ));
        assert_eq!(r.unseen_unknown, 0);
        assert!((r.macro_f1 - 2.0 / 3.0).abs() < 1e-9);
        let mut noisy = patterns(20, 300, 2);
        let mut m = train(&noisy, &TrainOptions::default()).unwrap();
        // With one packet the classes overlap and posteriors are low.
        noisy.samples.iter_mut().for_each(|s| s.early.truncate(1));
        m.info.threshold = 0.99;
        let r = evaluate(&m, &noisy);
        assert!(r.unknown > 0);
        assert_eq!(
            r.confusion.iter().map(|row| row[3]).sum::<u64>(),
            r.unknown as u64
        );
    }

    #[test]
    fn precision_coverage_and_thresholds() {
        let d = patterns(20, 0, 1);
        let mut noisy = patterns(30, 300, 2);
        let mut m = train(&d, &TrainOptions::default()).unwrap();
        noisy.samples.iter_mut().for_each(|s| s.early.truncate(1));
        m.info.threshold = 0.6;
        let r = evaluate(&m, &noisy);
        let answered = r.total - r.unknown;
        assert!(r.unknown > 0 && answered > 0, "{r}");
        assert!((r.coverage - answered as f64 / r.total as f64).abs() < 1e-12);
        assert!((r.precision - r.correct as f64 / answered as f64).abs() < 1e-12);
        // Per class, coverage is the share of its flows not left unknown.
        for (i, c) in r.per_class.iter().enumerate() {
            let unknown = r.confusion[i][r.classes.len()] as f64;
            assert!((c.coverage - (1.0 - unknown / c.support as f64)).abs() < 1e-12);
        }
        // Every flow with packets was scored; the deciles hold them all.
        assert_eq!(r.scored.len(), r.total);
        assert_eq!(
            r.reliability.iter().map(|b| b.flows).sum::<usize>(),
            r.total
        );
        // At the model's own threshold the sweep agrees with the verdicts.
        let at = |t: f32| {
            let n = r.scored.iter().filter(|s| s.0 >= t).count();
            let right = r.scored.iter().filter(|s| s.0 >= t && s.1).count();
            (n, right)
        };
        let (n, right) = at(0.6);
        assert_eq!((n, right), (answered, r.correct));
        let p6 = r.by_threshold.iter().find(|p| p.threshold == 0.6).unwrap();
        assert!((p6.coverage - r.coverage).abs() < 1e-12);
        assert_eq!(r.by_threshold[0].coverage, 1.0);
        // The chosen threshold reaches the target, and any lower distinct
        // confidence does not.
        let base = r.by_threshold[0].precision;
        let target = (base + 0.05).min(0.99);
        if let Some(t) = threshold_for_precision(&r.scored, target) {
            let (n, right) = at(t);
            assert!(right as f64 >= target * n as f64);
            for &(c, _) in r.scored.iter().filter(|s| s.0 < t) {
                let (n, right) = at(c);
                assert!(
                    (right as f64) < target * n as f64,
                    "{c} also reaches {target}"
                );
            }
        }
        assert_eq!(
            threshold_for_precision(&[(0.9, false), (0.5, false)], 0.5),
            None
        );
        assert_eq!(
            threshold_for_precision(&[(0.9, true), (0.8, false), (0.7, true), (0.2, false)], 0.6),
            Some(0.7)
        );
        let text = r.to_string();
        assert!(text.contains("at threshold 0.6: precision"), "{text}");
        assert!(text.contains("reliability"), "{text}");
    }

    #[cfg(feature = "chart")]
    #[test]
    fn png_is_written() {
        let d = patterns(20, 60, 1);
        let m = train(&d, &TrainOptions::default()).unwrap();
        let r = evaluate(&m, &d);
        let p = std::env::temp_dir().join(format!("earlybird-eval-{}.png", std::process::id()));
        r.write_png(&p).unwrap();
        let b = std::fs::read(&p).unwrap();
        assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n");
        assert!(b.len() > 5000);
        if let Ok(keep) = std::env::var("EARLYBIRD_KEEP_PNG") {
            r.write_png(keep).unwrap();
        }
        let bad = r.write_png("/nonexistent-dir/x.png").unwrap_err();
        assert!(bad.to_string().contains("/nonexistent-dir/x.png"), "{bad}");
        r.write_reliability_png(&p).unwrap();
        let b = std::fs::read(&p).unwrap();
        assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n");
        let bad = r
            .write_reliability_png("/nonexistent-dir/r.png")
            .unwrap_err();
        assert!(bad.to_string().contains("/nonexistent-dir/r.png"), "{bad}");
        r.write_confusion_png(&p).unwrap();
        let b = std::fs::read(&p).unwrap();
        assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n");
        if let Ok(keep) = std::env::var("EARLYBIRD_KEEP_CONFUSION_PNG") {
            r.write_confusion_png(keep).unwrap();
        }
        let t = r.confusion_table();
        // One line per class with flows, after the title and column heads.
        assert_eq!(t.lines().count(), 2 + 3, "{t}");
        let first: Vec<u64> = t
            .lines()
            .nth(2)
            .unwrap()
            .split_whitespace()
            .skip(2)
            .map(|v| v.parse().unwrap())
            .collect();
        assert_eq!(first, r.confusion[0], "{t}");
    }
}
