//! Verdicts per second of each classifier on one core.
//!
//! Setting: 8 classes (as in the reference measurements: Web, Encrypted, DNS,
//! Chat, Mail, Network Operation, P2P, Attacks), N = 4 packets, models
//! trained on 2,400 synthetic flows with overlapping size patterns (see
//! `synthetic`), then
//! asked for verdicts on 4,096 other flows. The target for Naive Bayes and
//! C4.5 is 2.8 million verdicts per second. Cascades (`cascade-c45`,
//! `cascade-nb`): stages at k = 1..4 of that algorithm, each stage before
//! N with threshold 1, so a flow goes on to the next stage unless a stage
//! is certain (how many each stage decided is printed).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use earlybird::testing::SplitMix64;
use earlybird::{
    train, Algo, Cascade, Classifier, Dataset, Dir, EarlyPkt, FlowFeatures, Model, ModelInfo,
    ModelKind, Sample, TrainOptions,
};

const CLASSES: usize = 8;

fn synthetic(per_class: usize, seed: u64) -> Dataset {
    // Class patterns are drawn from a fixed seed; flows from `seed`.
    let mut pat_rng = SplitMix64::new(42);
    let patterns: Vec<Vec<(u16, Dir, u32)>> = (0..CLASSES)
        .map(|_| {
            (0..4)
                .map(|i| {
                    let dir = if i == 0 || pat_rng.below(2) == 0 {
                        Dir::Fwd
                    } else {
                        Dir::Bwd
                    };
                    let size = 40 + pat_rng.below(1460) as u16;
                    let iat = pat_rng.below(100_000) as u32;
                    (size, dir, iat)
                })
                .collect()
        })
        .collect();
    let mut rng = SplitMix64::new(seed);
    let mut d = Dataset {
        classes: (0..CLASSES).map(|c| format!("class{c}")).collect(),
        samples: Vec::new(),
    };
    for k in 0..per_class {
        for (c, pat) in patterns.iter().enumerate() {
            let early = pat
                .iter()
                .map(|&(size, dir, iat)| {
                    // One packet in ten goes the other way; sizes move by
                    // up to ±350 bytes, gaps by ±50 %.
                    let dir = match (dir, rng.below(10)) {
                        (Dir::Fwd, 0) => Dir::Bwd,
                        (Dir::Bwd, 0) => Dir::Fwd,
                        (d, _) => d,
                    };
                    EarlyPkt {
                        size: (size as i32 + rng.below(701) as i32 - 350).clamp(40, 1500) as u16,
                        dir,
                        flags: 0,
                        iat_us: (iat as f64 * (0.5 + rng.unit())) as u32,
                    }
                })
                .collect();
            d.samples.push(Sample {
                early,
                proto: 6,
                sport: 40000 + k as u16,
                dport: [80u16, 443, 53, 5222, 25, 161, 6881, 22][c],
                label: c as u16,
                group: String::new(),
            });
        }
    }
    d
}

fn bench(c: &mut Criterion) {
    let train_set = synthetic(300, 1);
    let test_set = synthetic(512, 2);
    let flows: Vec<FlowFeatures<'_>> = test_set
        .samples
        .iter()
        .map(|s| FlowFeatures {
            early: &s.early,
            proto: s.proto,
            sport: s.sport,
            dport: s.dport,
        })
        .collect();
    let mut g = c.benchmark_group("verdicts");
    g.throughput(Throughput::Elements(flows.len() as u64));
    for algo in Algo::ALL {
        let model: Model = train(
            &train_set,
            &TrainOptions {
                algo,
                ..Default::default()
            },
        )
        .expect("training on synthetic data");
        let ok = test_set
            .samples
            .iter()
            .zip(&flows)
            .filter(|(s, f)| model.classify(f).class == s.label)
            .count();
        let detail = match &model.kind {
            ModelKind::Svm(s) => format!(", {} support vectors", s.support_vectors()),
            ModelKind::Tree(t) => format!(", {} nodes, depth {}", t.nodes().len(), t.depth()),
            _ => String::new(),
        };
        eprintln!(
            "{algo}: accuracy {:.1} % on the bench flows{detail}",
            100.0 * ok as f64 / flows.len() as f64
        );
        if algo == Algo::Svm {
            g.sample_size(10);
        }
        g.bench_function(algo.name(), |b| {
            b.iter(|| {
                let mut sum = 0u32;
                for f in &flows {
                    sum = sum.wrapping_add(model.classify(black_box(f)).class as u32);
                }
                sum
            })
        });
    }
    for algo in [Algo::C45, Algo::NaiveBayes] {
        let stages = (1..=4)
            .map(|k| {
                let mut m = train(
                    &train_set,
                    &TrainOptions {
                        algo,
                        packets: k,
                        ..Default::default()
                    },
                )
                .expect("training on synthetic data");
                if k < 4 {
                    m.info.threshold = 1.0;
                }
                m
            })
            .collect();
        let model = Model {
            info: ModelInfo {
                classes: train_set.classes.clone(),
                packets: 4,
                ..ModelInfo::default()
            },
            kind: ModelKind::Cascade(Cascade { stages }),
        };
        model.validate().expect("a valid cascade");
        let mut at = [0usize; 5];
        for f in &flows {
            at[usize::from(model.classify(f).at_packet).min(4)] += 1;
        }
        eprintln!(
            "cascade of {algo}: flows decided at packets 1..4: {:?}",
            &at[1..]
        );
        g.bench_function(format!("cascade-{}", algo.name()), |b| {
            b.iter(|| {
                let mut sum = 0u32;
                for f in &flows {
                    sum = sum.wrapping_add(model.classify(black_box(f)).class as u32);
                }
                sum
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
