//! A costly model (RBF SVM) runs on the classifier pool: shards never wait
//! for it, and every verdict that comes back is the one the model gives
//! inline.

use crate::common;

use std::sync::Arc;

use earlybird::{
    train, Algo, CaptureFile, Classifier, Dataset, GenKind, GenOptions, ModelRef, RunOptions,
    TrainOptions,
};

fn capture() -> Vec<CaptureFile> {
    let mut buf = Vec::new();
    earlybird::generate(&GenOptions::new(GenKind::Realistic, 40_000), &mut buf).unwrap();
    vec![CaptureFile::from_bytes("realistic", buf).unwrap()]
}

#[test]
fn svm_on_the_pool_gives_the_inline_verdicts() {
    let files = capture();
    // Label generated flows by server port class (web / other) and train an SVM.
    let (flows, _) =
        earlybird::collect(&files, &RunOptions::default(), &ModelRef::default()).unwrap();
    let mut ds = Dataset::default();
    for f in flows.iter().filter(|f| f.early.len() >= 4).take(400) {
        let label = if matches!(f.record.key.dport, 80 | 443 | 8080) {
            "web"
        } else {
            "other"
        };
        ds.add("gen", &f.record, &f.early, label);
    }
    let model = train(
        &ds,
        &TrainOptions {
            algo: Algo::Svm,
            ..TrainOptions::default()
        },
    )
    .unwrap();
    assert!(model.costly(), "an SVM runs on the pool");
    let names: Arc<[String]> = model.classes().to_vec().into();
    let m: Arc<dyn Classifier> = Arc::new(model);

    let run = |model: Arc<dyn Classifier>, shards| {
        let opts = RunOptions {
            shards,
            ..RunOptions::default()
        };
        let mref = ModelRef {
            model: Some(model),
            classes: names.clone(),
        };
        earlybird::collect(&files, &opts, &mref).unwrap()
    };
    let (inline, _) = run(Arc::new(common::ClassifyOnly(m.clone())), 1);
    let (pooled, report) = run(m, 2);
    assert_eq!(inline.len(), pooled.len());
    let c = &report.counters.flows;
    let decided = pooled
        .iter()
        .filter(|f| f.record.verdict.at_packet > 0)
        .count() as u64;
    assert!(decided > 100, "pool returned {decided} verdicts");
    assert_eq!(decided, c.classified);
    let mut same = 0;
    for (a, b) in inline.iter().zip(&pooled) {
        assert_eq!(a.record.key, b.record.key);
        if b.record.verdict.at_packet > 0 {
            assert_eq!(a.record.verdict.class, b.record.verdict.class);
            same += 1;
        }
    }
    let long = pooled.iter().filter(|f| f.early.len() >= 4).count() as u64;
    assert_eq!(
        decided + c.verdicts_late,
        long,
        "every flow with N packets was decided or counted late"
    );
    eprintln!(
        "pool: {same} verdicts identical to inline, {} late, {} queue-full retries",
        c.verdicts_late, c.classify_queue_full
    );
}
