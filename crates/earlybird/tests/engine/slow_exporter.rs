//! A slow exporter never stalls the shards under the drop policy: what the
//! queue cannot hold is dropped and counted, so written + dropped = every
//! flow. Under the default (block) policy nothing is lost.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use earlybird::{
    CaptureFile, ExportPolicy, Exporter, GenKind, GenOptions, ModelRef, RecordBatch, RunControl,
    RunOptions,
};

struct Slow(Arc<Mutex<u64>>, u64);

impl Exporter for Slow {
    fn write_batch(&mut self, b: &RecordBatch) -> earlybird::Result<()> {
        std::thread::sleep(Duration::from_millis(self.1));
        *self.0.lock().unwrap() += b.len() as u64;
        Ok(())
    }
    fn finish(&mut self) -> earlybird::Result<()> {
        Ok(())
    }
    fn name(&self) -> &str {
        "slow"
    }
}

fn run(policy: ExportPolicy, ms_per_batch: u64) -> (u64, u64, u64) {
    let mut buf = Vec::new();
    // ~43,000 connections, most ending (FIN, RST, idle) while packets
    // still flow, so records leave the shard all along the run.
    earlybird::generate(&GenOptions::new(GenKind::Realistic, 2_000_000), &mut buf).unwrap();
    let files = [CaptureFile::from_bytes("realistic", buf).unwrap()];
    let written = Arc::new(Mutex::new(0));
    // A one-batch channel, so the queue overflows quickly.
    let opts = RunOptions {
        export_policy: policy,
        channel_batches: 1,
        ..RunOptions::default()
    };
    let r = earlybird::run(
        &files,
        &opts,
        &ModelRef::default(),
        vec![Box::new(Slow(written.clone(), ms_per_batch))],
        &RunControl::default(),
    )
    .unwrap();
    let w = *written.lock().unwrap();
    (w, r.counters.export_dropped, r.counters.flows_ended())
}

#[test]
fn drop_policy_counts_what_it_drops() {
    let (written, dropped, flows) = run(ExportPolicy::Drop { max_pending: 1 }, 200);
    eprintln!("written {written} dropped {dropped} flows {flows}");
    assert!(flows > 40_000, "{flows}");
    assert!(dropped > 0, "a 200 ms/batch exporter cannot keep up");
    assert_eq!(written + dropped, flows, "no silent loss");
}

#[test]
fn block_policy_loses_nothing() {
    let (written, dropped, flows) = run(ExportPolicy::Block, 5);
    assert_eq!((written, dropped), (flows, 0));
}
