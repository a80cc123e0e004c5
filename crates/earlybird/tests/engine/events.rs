//! Early-verdict events: one event per verdict, naming the flow as its
//! record does, with the record's verdict, taken at the packet the record
//! says, at the packet time of that packet — inline, from several shards,
//! and from the classifier pool.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;

use common::Shared;
use earlybird::{
    train, Algo, CaptureFile, Classifier, Dataset, ExportOptions, Format, GenKind, GenOptions,
    ModelRef, RunControl, RunOptions, TrainOptions, VERDICTS,
};
use serde_json::Value;

fn generated() -> Vec<CaptureFile> {
    let mut buf = Vec::new();
    earlybird::generate(&GenOptions::new(GenKind::Realistic, 30_000), &mut buf).unwrap();
    vec![CaptureFile::from_bytes("realistic", buf).unwrap()]
}

/// A model trained on the generated flows (web ports or not), as `algo`.
fn model(files: &[CaptureFile], algo: Algo) -> ModelRef {
    let (flows, _) =
        earlybird::collect(files, &RunOptions::default(), &ModelRef::default()).unwrap();
    let mut ds = Dataset::default();
    for f in flows.iter().filter(|f| f.early.len() >= 4).take(400) {
        let web = matches!(f.record.key.dport, 80 | 443 | 8080);
        ds.add(
            "gen",
            &f.record,
            &f.early,
            if web { "web" } else { "other" },
        );
    }
    let m = train(
        &ds,
        &TrainOptions {
            algo,
            ..TrainOptions::default()
        },
    )
    .unwrap();
    ModelRef {
        classes: m.classes().to_vec().into(),
        model: Some(Arc::new(m)),
    }
}

fn lines(s: &Shared) -> Vec<Value> {
    let text = String::from_utf8(s.0.lock().unwrap().clone()).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Runs `files` with flow records and events both as JSON lines; returns
/// (records, events, verdicts the run counted).
fn run(files: &[CaptureFile], mref: &ModelRef, shards: usize) -> (Vec<Value>, Vec<Value>, u64) {
    let (flows, events) = (Shared::default(), Shared::default());
    let opts = ExportOptions {
        early_packets: 4,
        class_names: mref.classes.clone(),
        ..Default::default()
    };
    let exporters = vec![
        earlybird::to_writer(Format::JsonLines, Box::new(flows.clone()), "flows", &opts),
        earlybird::rows_to_writer(
            &VERDICTS,
            Format::JsonLines,
            Box::new(events.clone()),
            "events",
        ),
    ];
    let ro = RunOptions {
        shards,
        ..RunOptions::default()
    };
    let report = earlybird::run(files, &ro, mref, exporters, &RunControl::default()).unwrap();
    assert!(
        report.output_errors.is_empty(),
        "{:?}",
        report.output_errors
    );
    (
        lines(&flows),
        lines(&events),
        report.counters.flows.classified,
    )
}

/// The key fields an event and a record share.
const KEY: [&str; 9] = [
    "src",
    "dst",
    "sport",
    "dport",
    "proto",
    "vlan",
    "tunnel",
    "tunnel_id",
    "first_ts",
];

fn key(v: &Value) -> String {
    KEY.map(|k| v[k].to_string()).join("|")
}

/// Every event matches one record: same verdict, taken at the packet the
/// record says, at that packet's time (the early gaps are whole µs,
/// truncated, so the time lies within a few µs above their sum); `pooled`:
/// at that packet or later.
fn check(flows: &[Value], events: &[Value], classified: u64, pooled: bool) -> usize {
    assert_eq!(events.len() as u64, classified, "one event per verdict");
    let by_key: HashMap<String, &Value> = flows.iter().map(|f| (key(f), f)).collect();
    let mut later = 0;
    for e in events {
        let f = by_key
            .get(&key(e))
            .unwrap_or_else(|| panic!("no record for event {e}"));
        assert_eq!(e["app"], f["app"], "{e}\n{f}");
        assert_eq!(e["app_confidence"], f["app_confidence"], "{e}\n{f}");
        assert_eq!(e["decided_at_packet"], f["decided_at_packet"], "{e}\n{f}");
        let (first, at) = (
            e["first_ts"].as_u64().unwrap(),
            e["decided_ts"].as_u64().unwrap(),
        );
        assert_eq!(e["time_to_decision_ns"].as_u64().unwrap(), at - first);
        assert!(at <= f["last_ts"].as_u64().unwrap());
        let k = f["decided_at_packet"].as_u64().unwrap() as usize;
        let iat: u64 = f["early_iat_us"].as_array().unwrap()[..k]
            .iter()
            .map(|v| v.as_u64().unwrap())
            .sum();
        let took = at - first;
        // A pooled verdict is known when it comes back: at that packet or
        // a later one.
        assert!(
            took >= iat * 1000 && (pooled || took < (iat + k as u64) * 1000),
            "decided {took} ns after the first packet; early gaps sum to {iat} µs\n{e}\n{f}"
        );
        later += usize::from(took > 0);
    }
    later
}

#[test]
fn an_event_per_inline_verdict_at_the_packet_it_was_taken() {
    let files = generated();
    let mref = model(&files, Algo::C45);
    let (flows, events, classified) = run(&files, &mref, 1);
    assert!(classified > 500, "{classified} verdicts");
    let later = check(&flows, &events, classified, true);
    assert!(later > 100, "only {later} verdicts after the first packet");
    // Several shards: the same events, in another order.
    let (flows2, events2, classified2) = run(&files, &mref, 2);
    assert_eq!(classified2, classified);
    check(&flows2, &events2, classified2, false);
    let sorted = |mut v: Vec<Value>| {
        v.sort_by_key(|e| e.to_string());
        v
    };
    assert_eq!(sorted(events), sorted(events2));
}

#[test]
fn pooled_verdicts_give_events_too() {
    let files = generated();
    let mref = model(&files, Algo::Svm);
    assert!(mref.model.as_ref().unwrap().costly());
    let (flows, events, classified) = run(&files, &mref, 1);
    assert!(classified > 100, "{classified} verdicts");
    check(&flows, &events, classified, true);
}
