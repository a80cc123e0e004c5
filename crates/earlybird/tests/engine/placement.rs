//! Where records are built and formatted does not change the output: the
//! exporter thread, the shard (records materialized and CSV / JSON lines
//! rendered, IPFIX data records encoded, before the batch is sent) and the
//! automatic choice write the
//! same bytes, on generated traffic of many batches and on real captures
//! (IPv6, VXLAN), with a model labelling flows.

use crate::common;

use std::sync::Arc;

use earlybird::{
    to_writer, CaptureFile, Classifier, ExportOptions, Format, GenKind, GenOptions, Model,
    ModelRef, Placement, RunControl, RunOptions,
};

use common::Shared;

fn inputs() -> Vec<CaptureFile> {
    let mut buf = Vec::new();
    earlybird::generate(&GenOptions::new(GenKind::Realistic, 400_000), &mut buf).unwrap();
    let mut files = vec![CaptureFile::from_bytes("realistic", buf).unwrap()];
    for name in ["pcap/arkime__v6-http.pcap", "pcap/ndpi__vxlan.pcap"] {
        files.push(CaptureFile::open(&common::testdata().join(name)).unwrap());
    }
    files
}

/// CSV, JSON lines and IPFIX bytes of one run.
fn run(files: &[CaptureFile], placement: Placement, model: &ModelRef) -> [Vec<u8>; 3] {
    let eo = ExportOptions {
        early_packets: 4,
        class_names: model.classes.clone(),
        ..Default::default()
    };
    let (csv, json, ipfix) = (Shared::default(), Shared::default(), Shared::default());
    let exporters = vec![
        to_writer(Format::Csv, Box::new(csv.clone()), "csv:mem", &eo),
        to_writer(Format::JsonLines, Box::new(json.clone()), "jsonl:mem", &eo),
        earlybird::ipfix::to_writer(
            Box::new(ipfix.clone()),
            "ipfix:mem",
            &eo,
            &earlybird::ipfix::IpfixOptions::default(),
        ),
    ];
    let opts = RunOptions {
        placement,
        // A short channel, so the automatic choice switches sides.
        channel_batches: 2,
        ..RunOptions::default()
    };
    let r = earlybird::run(files, &opts, model, exporters, &RunControl::default()).unwrap();
    assert!(r.output_errors.is_empty(), "{:?}", r.output_errors);
    let take = |s: Shared| std::mem::take(&mut *s.0.lock().unwrap());
    [take(csv), take(json), take(ipfix)]
}

#[test]
fn every_placement_writes_the_same_bytes() {
    let files = inputs();
    let model = Model::load(common::testdata().join("../models/default.ebm")).unwrap();
    let mref = ModelRef {
        classes: model.classes().to_vec().into(),
        model: Some(Arc::new(model)),
    };
    let [csv, json, ipfix] = run(&files, Placement::Exporter, &mref);
    let lines = csv.iter().filter(|&&b| b == b'\n').count();
    assert!(
        lines > 3 * 2048,
        "several batches of records: {lines} lines"
    );
    assert!(
        ipfix.len() > lines * 50,
        "IPFIX records: {} bytes",
        ipfix.len()
    );
    for p in [Placement::Shard, Placement::Auto] {
        let [c, j, i] = run(&files, p, &mref);
        assert!(c == csv, "{p:?}: CSV differs");
        assert!(j == json, "{p:?}: JSON lines differ");
        assert!(i == ipfix, "{p:?}: IPFIX differs");
    }
}
