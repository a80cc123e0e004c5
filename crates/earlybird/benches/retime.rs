//! Batch-timestamp correction cost (`source/retime.rs`), per packet.
//!
//! A real trace (`EB_RETIME_PCAP`, default `/work/cg/real300k.pcap`; the
//! repository's `testdata/pcap/ndpi__iphone.pcap` when that is missing) is
//! read once into memory and stamped as an engine that stamps batches of 32
//! writes it: every packet gets the stamp of its batch's last packet. Each
//! iteration copies those packets into a work buffer (`copy`, measured
//! alone) and corrects them in batches of `BATCH`, as a shard reads them,
//! with `udts` and `wdts`. The cost of the correction is the difference
//! between a mode's time and `copy`'s. `per_packet_stamps` corrects the
//! original trace (exact stamps: the pass that finds no runs).
//!
//! The trace (12 MB of `PacketRef`s) is larger than the caches, so those
//! passes also time reading it back from memory. The `by_batch_` variants
//! copy one batch of `BATCH` and correct it at once, while it is in the
//! cache, as a shard corrects the batch it has just read; their cost is
//! the difference from `by_batch_copy`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use earlybird::testing::Retimer;
use earlybird::{CaptureFile, PacketRef, Timestamps, BATCH};

fn trace() -> Vec<PacketRef> {
    let path = std::env::var("EB_RETIME_PCAP").unwrap_or("/work/cg/real300k.pcap".into());
    let path = if std::path::Path::new(&path).exists() {
        std::path::PathBuf::from(path)
    } else {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/pcap/ndpi__iphone.pcap")
    };
    let f = CaptureFile::open(&path).unwrap();
    let mut r = f.reader();
    let (mut all, mut b) = (Vec::new(), Vec::new());
    while r.next_batch(&mut b, BATCH) > 0 {
        all.extend_from_slice(&b);
    }
    eprintln!("{}: {} packets", path.display(), all.len());
    all
}

/// The retimer's look past a batch: each call hands out the next `max`
/// packets of `rest`.
fn reading(rest: &[PacketRef]) -> impl FnMut(&mut Vec<PacketRef>, usize) -> usize + '_ {
    let mut at = 0;
    move |v: &mut Vec<PacketRef>, max: usize| {
        v.clear();
        let end = (at + max).min(rest.len());
        v.extend_from_slice(&rest[at..end]);
        at = end;
        v.len()
    }
}

/// Corrects `work` (a copy of `src`) in batches of `BATCH`.
fn correct(rt: &mut Retimer, work: &mut [PacketRef], src: &[PacketRef]) {
    work.copy_from_slice(src);
    rt.start_file();
    let n = work.len();
    let mut from = 0;
    while from < n {
        let to = (from + BATCH).min(n);
        let (head, rest) = work.split_at_mut(to);
        rt.batch(&mut head[from..to], &mut reading(rest));
        from = to;
    }
}

/// Copies `src` into `work` a batch of `BATCH` at a time, correcting each
/// batch right after its copy (`rt`: none, copy only).
fn by_batch(mut rt: Option<&mut Retimer>, work: &mut [PacketRef], src: &[PacketRef]) {
    if let Some(rt) = rt.as_deref_mut() {
        rt.start_file();
    }
    let n = src.len();
    let mut from = 0;
    while from < n {
        let to = (from + BATCH).min(n);
        let b = &mut work[from..to];
        b.copy_from_slice(&src[from..to]);
        if let Some(rt) = rt.as_deref_mut() {
            // The packets after the batch, as the file holds them.
            rt.batch(b, &mut reading(&src[to..]));
        }
        black_box(&mut *b);
        from = to;
    }
}

fn bench(c: &mut Criterion) {
    let exact = trace();
    let batched: Vec<PacketRef> = exact
        .chunks(32)
        .flat_map(|c| {
            let t = c.last().unwrap().ts;
            c.iter().map(move |p| PacketRef { ts: t, ..*p })
        })
        .collect();
    let mut work = batched.clone();
    let mut g = c.benchmark_group("retime");
    g.throughput(Throughput::Elements(batched.len() as u64));
    g.bench_function("copy", |b| {
        b.iter(|| {
            work.copy_from_slice(&batched);
            black_box(&mut work);
        })
    });
    for mode in [Timestamps::Udts, Timestamps::Wdts] {
        let mut rt = Retimer::new(mode);
        g.bench_function(format!("batch32_{}", mode.name()), |b| {
            b.iter(|| {
                correct(&mut rt, &mut work, &batched);
                black_box(&mut work);
            })
        });
        assert!(rt.retimed > 0);
    }
    let mut rt = Retimer::new(Timestamps::Udts);
    g.bench_function("per_packet_stamps_udts", |b| {
        b.iter(|| {
            correct(&mut rt, &mut work, &exact);
            black_box(&mut work);
        })
    });
    g.bench_function("by_batch_copy", |b| {
        b.iter(|| by_batch(None, &mut work, &batched));
    });
    for mode in [Timestamps::Udts, Timestamps::Wdts] {
        let mut rt = Retimer::new(mode);
        g.bench_function(format!("by_batch_batch32_{}", mode.name()), |b| {
            b.iter(|| by_batch(Some(&mut rt), &mut work, &batched));
        });
        assert!(rt.retimed > 0);
        // The same stamps as the whole-trace pass.
        let mut whole = batched.clone();
        correct(&mut Retimer::new(mode), &mut whole, &batched);
        assert!(whole == work, "{mode:?}: by batch differs");
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
