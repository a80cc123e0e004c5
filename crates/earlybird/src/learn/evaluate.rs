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
//! extra ones). Pure; allocates the report. [`Report::write_png`] (feature
//! `chart`) draws the k curve; it fails with [`Error::Output`] when the file
//! cannot be written.

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
    /// Samples whose true class is one of the model's classes.
    pub seen: usize,
    /// Accuracy over those samples only (the others cannot be right).
    pub seen_accuracy: f64,
    /// Mean F1 over classes with support.
    pub macro_f1: f64,
    /// Per class, in the order of `classes`.
    pub per_class: Vec<ClassStats>,
    /// `confusion[truth][prediction]`; column `classes.len()` is unknown.
    pub confusion: Vec<Vec<u64>>,
    /// `(k, accuracy with the first k packets)` for k = 1..=10.
    pub accuracy_by_k: Vec<(usize, f64)>,
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
    for s in &data.samples {
        let f = FlowFeatures {
            early: &s.early,
            proto: s.proto,
            sport: s.sport,
            dport: s.dport,
        };
        let truth = s.label as usize;
        confusion[truth][pred_of(model.classify(&f))] += 1;
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
        per_class.push(ClassStats {
            name: name.clone(),
            precision,
            recall,
            f1,
            support: support as usize,
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
    let seen_accuracy = if seen > 0 {
        correct as f64 / seen as f64
    } else {
        0.0
    };
    Report {
        algo: model.kind.algo().to_string(),
        packets: model.info.packets,
        classes,
        total,
        correct: correct as usize,
        unknown: unknown as usize,
        accuracy: ratio(correct as usize),
        seen: seen as usize,
        seen_accuracy,
        macro_f1,
        per_class,
        confusion,
        accuracy_by_k: by_k
            .iter()
            .enumerate()
            .map(|(k, &n)| (k + 1, ratio(n)))
            .collect(),
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
        if self.seen < self.total {
            writeln!(
                f,
                "{} flows are of classes the model does not know; accuracy on the other {}: {:.2} %",
                self.total - self.seen,
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
        writeln!(f, "{:<w$}  precision  recall     f1  support", "class")?;
        let mut order: Vec<&ClassStats> = self.per_class.iter().filter(|c| c.support > 0).collect();
        order.sort_by(|a, b| b.support.cmp(&a.support).then(a.name.cmp(&b.name)));
        for c in order {
            writeln!(
                f,
                "{:<w$}  {:>9.3}  {:>6.3}  {:>5.3}  {:>7}",
                c.name, c.precision, c.recall, c.f1, c.support
            )?;
        }
        writeln!(f)?;
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
        static REGISTER: std::sync::Once = std::sync::Once::new();
        REGISTER.call_once(|| {
            // Cannot fail on the embedded font; a failure would only lose text.
            let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
        });
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
        assert!(r
            .to_string()
            .contains("20 flows are of classes the model does not know"));
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
    }
}
