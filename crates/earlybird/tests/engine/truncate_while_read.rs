//! A capture file that shrinks while it is read (another process truncates
//! it) does not kill the run: what was read is processed, every flow is
//! flushed, and a warning names the file and the offset where its bytes
//! vanished. Without the guard in `source::vanish` every test here dies of
//! SIGBUS.
//!
//! The captures are a real one (testdata/pcap/ndpi__iphone.pcap) repeated
//! with shifted timestamps into a file of several MiB, as classic pcap and
//! as pcapng.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use earlybird::testing::BACKGROUND_FROM;
use earlybird::{CaptureFile, CollectedFlow, ModelRef, Report, RunControl, RunOptions, BATCH};

/// The records of the real capture: (ts µs, captured bytes, original length).
fn iphone() -> Vec<(u64, Vec<u8>, u32)> {
    let f = CaptureFile::open(&common::testdata().join("pcap/ndpi__iphone.pcap")).unwrap();
    let mut r = f.reader();
    let mut b = Vec::new();
    let mut out = Vec::new();
    while r.next_batch(&mut b, BATCH) > 0 {
        for p in &b {
            out.push((p.ts / 1_000, p.bytes(r.data()).to_vec(), p.orig_len));
        }
    }
    assert_eq!(out.len(), 500);
    out
}

/// The packets of `iphone()` repeated until the data holds `min_bytes`,
/// each copy an hour after the one before: (ts µs, bytes, original length).
fn repeated(min_bytes: usize) -> Vec<(u64, Vec<u8>, u32)> {
    let one = iphone();
    let span = one.last().unwrap().0 - one[0].0 + 3_600_000_000;
    let mut all = Vec::new();
    let mut bytes = 0;
    let mut k = 0;
    while bytes < min_bytes {
        for (ts, data, orig) in &one {
            bytes += data.len() + 32;
            all.push((ts + k * span, data.clone(), *orig));
        }
        k += 1;
    }
    all
}

/// Little-endian microsecond pcap, Ethernet.
fn pcap(packets: &[(u64, Vec<u8>, u32)]) -> Vec<u8> {
    let mut v = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    v.extend_from_slice(&262_144u32.to_le_bytes());
    v.extend_from_slice(&1u32.to_le_bytes());
    for (ts, data, orig) in packets {
        v.extend_from_slice(&((ts / 1_000_000) as u32).to_le_bytes());
        v.extend_from_slice(&((ts % 1_000_000) as u32).to_le_bytes());
        v.extend_from_slice(&(data.len() as u32).to_le_bytes());
        v.extend_from_slice(&orig.to_le_bytes());
        v.extend_from_slice(data);
    }
    v
}

/// Little-endian pcapng: one section, one Ethernet interface (µs), the
/// packets as Enhanced Packet Blocks.
fn pcapng(packets: &[(u64, Vec<u8>, u32)]) -> Vec<u8> {
    fn block(v: &mut Vec<u8>, kind: u32, body: &[u8]) {
        let len = (12 + body.len().div_ceil(4) * 4) as u32;
        v.extend_from_slice(&kind.to_le_bytes());
        v.extend_from_slice(&len.to_le_bytes());
        v.extend_from_slice(body);
        v.resize(v.len() + (4 - body.len() % 4) % 4, 0);
        v.extend_from_slice(&len.to_le_bytes());
    }
    let mut v = Vec::new();
    let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    shb.extend_from_slice(&[1, 0, 0, 0]);
    shb.extend_from_slice(&[0xff; 8]);
    block(&mut v, 0x0a0d_0d0a, &shb);
    let mut idb = vec![1, 0, 0, 0];
    idb.extend_from_slice(&262_144u32.to_le_bytes());
    block(&mut v, 1, &idb);
    let mut epb = Vec::new();
    for (ts, data, orig) in packets {
        epb.clear();
        epb.extend_from_slice(&0u32.to_le_bytes());
        epb.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(*ts as u32).to_le_bytes());
        epb.extend_from_slice(&(data.len() as u32).to_le_bytes());
        epb.extend_from_slice(&orig.to_le_bytes());
        epb.extend_from_slice(data);
        block(&mut v, 6, &epb);
    }
    v
}

fn opts(shards: usize) -> RunOptions {
    RunOptions {
        shards,
        ..RunOptions::default()
    }
}

/// Writes `bytes` to `path`, maps it, truncates it to `cut` bytes before
/// any packet is read, and runs it with `shards` shards.
fn run_cut_under_map(
    path: &Path,
    bytes: &[u8],
    cut: u64,
    shards: usize,
) -> (Vec<CollectedFlow>, Report) {
    std::fs::write(path, bytes).unwrap();
    let files = [CaptureFile::open(path).unwrap()];
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(cut)
        .unwrap();
    earlybird::collect(&files, &opts(shards), &ModelRef::default()).unwrap()
}

/// The file shrinks to `cut` after it was mapped: every shard count gives
/// the records of a copy of the file cut at `cut` — the packets before the
/// vanished bytes, none decoded from zeros — and one warning naming the
/// file and `cut`.
fn check_cut(name: &str, bytes: &[u8], cut: u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    let copy = [CaptureFile::from_bytes("copy", bytes[..cut as usize].to_vec()).unwrap()];
    let (expected, copy_report) =
        earlybird::collect(&copy, &opts(1), &ModelRef::default()).unwrap();
    assert!(expected.len() > 100, "{name}: {} records", expected.len());
    let mut first: Option<Vec<CollectedFlow>> = None;
    for shards in [1, 2] {
        let (flows, report) = run_cut_under_map(&path, bytes, cut, shards);
        let w = &report.warnings;
        assert_eq!(w.len(), 1, "{name}, {shards} shards: {w:?}");
        assert_eq!(w[0].file, path.display().to_string());
        assert_eq!(w[0].offset, cut, "{name}, {shards} shards: {}", w[0]);
        assert!(w[0].message.contains("shrank"), "{}", w[0]);
        assert_eq!(
            report.counters.packets_read, copy_report.counters.packets_read,
            "{name}, {shards} shards"
        );
        assert_eq!(
            report.counters.skipped, copy_report.counters.skipped,
            "{name}, {shards} shards: nothing decoded from zeros"
        );
        assert!(
            flows == expected,
            "{name}, {shards} shards: records differ from the cut copy"
        );
        match &first {
            None => first = Some(flows),
            Some(f) => assert!(*f == flows, "{name}: 1 and {shards} shards differ"),
        }
    }
}

/// Truncated right after it was mapped (populated in one call: a small
/// file), at an offset inside a page and inside a record.
#[test]
fn pcap_cut_after_mapping() {
    let bytes = pcap(&repeated(6 << 20));
    check_cut("cut.pcap", &bytes, bytes.len() as u64 / 2 + 123);
}

#[test]
fn pcapng_cut_after_mapping() {
    let bytes = pcapng(&repeated(6 << 20));
    check_cut("cut.pcapng", &bytes, bytes.len() as u64 / 2 + 1001);
}

/// Cut on a page boundary, and inside the last page only (no page
/// vanishes: the readers find it from the file's size).
#[test]
fn pcap_cut_on_a_page_and_in_the_last_page() {
    let bytes = pcap(&repeated(3 << 20));
    check_cut("page.pcap", &bytes, (bytes.len() as u64 / 3) & !4095);
    let last = (bytes.len() as u64 - 1) & !4095;
    let cut = last + (bytes.len() as u64 - last) / 2;
    check_cut("tail.pcap", &bytes, cut.max(last + 1));
}

/// A file large enough to be populated in the background (the helper's
/// or the shards' `madvise(MADV_POPULATE_READ)` meets the vanished pages
/// and stops, no signal).
#[test]
fn large_pcap_cut_after_mapping() {
    let bytes = pcap(&repeated(BACKGROUND_FROM + (4 << 20)));
    check_cut("large.pcap", &bytes, bytes.len() as u64 * 2 / 5 + 7);
}

/// Truncated by another thread while the shards read: once the readers
/// are `at` of the way through, to `to` of its length (ahead of them, or
/// behind them). The run ends normally with every flow flushed, a warning
/// names the file, and every packet counted as read is in a record or
/// counted as skipped. False when the cut did not land while the readers
/// read: on a busy machine the cutting thread may be descheduled after it
/// saw them `at` of the way until they have read all `packets` of the
/// file (then nothing vanished under them, and no warning is due).
fn cut_mid_run(
    path: &PathBuf,
    bytes: &[u8],
    packets_in_file: u64,
    shards: usize,
    at: f64,
    to: f64,
) -> bool {
    std::fs::write(path, bytes).unwrap();
    let total = bytes.len() as u64;
    let files = [CaptureFile::open(path).unwrap()];
    let ctl = RunControl::default();
    let cutter = {
        let (ctl, path) = (ctl.clone(), path.clone());
        std::thread::spawn(move || {
            while ctl.progress.load(Ordering::Relaxed) < (total as f64 * at) as u64 {
                std::thread::yield_now();
            }
            let reached = ctl.progress.load(Ordering::Relaxed);
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len((total as f64 * to) as u64)
                .unwrap();
            reached
        })
    };
    let seen = Arc::new(Mutex::new((0, 0)));
    let report = earlybird::run(
        &files,
        &opts(shards),
        &ModelRef::default(),
        vec![Box::new(common::Count(seen.clone()))],
        &ctl,
    )
    .unwrap();
    let reached = cutter.join().unwrap();
    let (records, packets) = *seen.lock().unwrap();
    let c = &report.counters;
    let what = format!("{shards} shards, cut to {to} at {reached} of {total} bytes");
    assert!(!report.interrupted);
    assert!(records > 0, "{what}");
    assert_eq!(records, c.flows_ended(), "{what}: every flow is written");
    assert_eq!(packets, c.packets_flowed, "{what}");
    assert_eq!(
        c.packets_read,
        c.packets_flowed + c.skipped.iter().sum::<u64>(),
        "{what}: every packet read is in a flow or counted as skipped"
    );
    if report.warnings.is_empty() && c.packets_read == packets_in_file {
        eprintln!("{what}: every packet was read before the cut landed");
        return false;
    }
    assert_eq!(report.warnings.len(), 1, "{what}: {:?}", report.warnings);
    let w = &report.warnings[0];
    assert_eq!(w.file, path.display().to_string(), "{what}");
    assert!(w.message.contains("shrank"), "{what}: {w}");
    assert!(w.offset <= (total as f64 * to) as u64, "{what}: {w}");
    eprintln!(
        "{what}: {} packets read, {records} records; {w}",
        c.packets_read
    );
    true
}

/// [`cut_mid_run`] again (at most 5 runs) until its cut lands while the
/// readers read.
fn cut_while_reading(path: &PathBuf, bytes: &[u8], packets: u64, shards: usize, at: f64, to: f64) {
    let landed = (0..5).any(|_| cut_mid_run(path, bytes, packets, shards, at, to));
    assert!(
        landed,
        "{shards} shards, cut to {to} at {at}: the readers were through the file before the cut in 5 runs"
    );
}

#[test]
fn cut_mid_run_ahead_of_and_behind_the_readers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mid.pcap");
    let packets = repeated(BACKGROUND_FROM + (8 << 20));
    let (bytes, n) = (pcap(&packets), packets.len() as u64);
    for shards in [1, 2] {
        cut_while_reading(&path, &bytes, n, shards, 0.1, 0.6);
        cut_while_reading(&path, &bytes, n, shards, 0.5, 0.25);
    }
    let path = dir.path().join("mid.pcapng");
    let packets = repeated(24 << 20);
    let (bytes, n) = (pcapng(&packets), packets.len() as u64);
    for shards in [1, 2] {
        cut_while_reading(&path, &bytes, n, shards, 0.1, 0.6);
        cut_while_reading(&path, &bytes, n, shards, 0.5, 0.25);
    }
}
