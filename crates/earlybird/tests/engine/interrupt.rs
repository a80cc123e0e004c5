//! Raising `RunControl::stop` (what SIGINT/SIGTERM do in the CLI) stops the
//! reading early, and every flow seen so far is still flushed to the outputs:
//! the records hold exactly the packets that were read.

use crate::common;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use earlybird::{CaptureFile, GenKind, GenOptions, ModelRef, RunControl, RunOptions};

#[test]
fn stop_flushes_every_flow_seen() {
    for shards in [1, 2, 3] {
        stop_with(shards);
    }
}

fn stop_with(shards: usize) {
    let mut buf = Vec::new();
    earlybird::generate(&GenOptions::new(GenKind::Realistic, 3_000_000), &mut buf).unwrap();
    let total = buf.len() as u64;
    let files = [CaptureFile::from_bytes("big", buf).unwrap()];
    let ctl = RunControl::default();
    let stopper = {
        let ctl = ctl.clone();
        std::thread::spawn(move || {
            // Stop once some (but not all) of the input has been read.
            while ctl.progress.load(Ordering::Relaxed) < total / 10 {
                std::thread::yield_now();
            }
            ctl.stop.store(true, Ordering::Relaxed);
        })
    };
    let seen = Arc::new(Mutex::new((0, 0)));
    let opts = RunOptions {
        shards,
        ..RunOptions::default()
    };
    let report = earlybird::run(
        &files,
        &opts,
        &ModelRef::default(),
        vec![Box::new(common::Count(seen.clone()))],
        &ctl,
    )
    .unwrap();
    stopper.join().unwrap();
    let (records, packets) = *seen.lock().unwrap();
    let c = &report.counters;
    assert!(report.interrupted);
    assert!(
        c.packets_read < 3_000_000,
        "the run stopped early ({} packets)",
        c.packets_read
    );
    assert!(records > 0);
    assert_eq!(records, c.flows_ended(), "every flow ended is written");
    assert_eq!(
        packets, c.packets_flowed,
        "every packet in a flow is in a record"
    );
    // With several shards each batch is read by one shard and run by all:
    // every packet counted as read was run through a table or counted as
    // skipped, even when the stop came while batches were read ahead.
    assert_eq!(
        c.packets_read,
        c.packets_flowed + c.skipped.iter().sum::<u64>(),
        "every packet read is in a flow or counted as skipped"
    );
}
