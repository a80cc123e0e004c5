//! Every file of the malformed and tunnel corpora goes through the whole
//! pipeline without a panic or a hang; errors must name the file.

use crate::common;

use earlybird::{CaptureFile, ModelRef, RunOptions};

fn run_dir(sub: &str) {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let files = common::captures(&corpus.join(sub));
    assert!(files.len() > 50, "expected many files under {sub}");
    let (mut ok, mut refused, mut packets, mut flows) = (0, 0, 0u64, 0u64);
    for f in &files {
        match CaptureFile::open(f) {
            Err(e) => {
                let msg = e.to_string();
                let name = f.file_name().unwrap().to_string_lossy().to_string();
                assert!(msg.contains(&name), "error must name the file: {msg}");
                refused += 1;
            }
            Ok(cf) => {
                let files = [cf];
                let (recs, report) =
                    earlybird::collect(&files, &RunOptions::default(), &ModelRef::default())
                        .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
                let c = &report.counters;
                assert_eq!(
                    c.packets_read,
                    c.packets_flowed + c.skipped.iter().sum::<u64>(),
                    "{}: every packet is either in a flow or counted as skipped",
                    f.display()
                );
                let in_records: u64 = recs
                    .iter()
                    .map(|r| r.record.packets[0] + r.record.packets[1])
                    .sum();
                assert_eq!(
                    in_records,
                    c.packets_flowed,
                    "{}: records hold every packet",
                    f.display()
                );
                packets += c.packets_read;
                flows += recs.len() as u64;
                ok += 1;
            }
        }
    }
    eprintln!("{sub}: {} files: {ok} processed ({packets} packets, {flows} flows), {refused} refused with an error", files.len());
}

#[test]
fn malformed_corpus_never_panics() {
    run_dir("malformed");
}

#[test]
fn tunnel_corpus_never_panics() {
    run_dir("tunnels");
}
