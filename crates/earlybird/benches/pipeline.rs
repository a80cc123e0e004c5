//! End-to-end criterion benchmark: the whole pipeline (walk, decode, flow
//! table, early features, records to the null exporter) over in-memory
//! generated captures, 1 and 2 shards. `earlybird bench` measures the same
//! from files and with CSV; this one gives criterion's statistics.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use earlybird::{
    CaptureFile, ExportOptions, Format, GenKind, GenOptions, ModelRef, RunControl, RunOptions,
};

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("pipeline");
    g.sample_size(10);
    for (name, kind) in [("worst", GenKind::Worst), ("realistic", GenKind::Realistic)] {
        let mut buf = Vec::new();
        earlybird::generate(&GenOptions::new(kind, 1_000_000), &mut buf).unwrap();
        let files = [CaptureFile::from_bytes(name, buf).unwrap()];
        g.throughput(Throughput::Elements(1_000_000));
        for shards in [1usize, 2] {
            g.bench_with_input(BenchmarkId::new(name, shards), &shards, |b, &shards| {
                let opts = RunOptions {
                    shards,
                    ..RunOptions::default()
                };
                b.iter(|| {
                    let ex = earlybird::to_writer(
                        Format::Null,
                        Box::new(std::io::sink()),
                        "null",
                        &ExportOptions {
                            early_packets: 4,
                            class_names: Default::default(),
                            ..Default::default()
                        },
                    );
                    let r = earlybird::run(
                        &files,
                        &opts,
                        &ModelRef::default(),
                        vec![ex],
                        &RunControl::default(),
                    )
                    .unwrap();
                    r.counters.packets_read
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
