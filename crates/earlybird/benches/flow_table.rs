//! Flow-table benchmarks: hash, and packets/s through `FlowTable::packet` for
//! the worst-case pattern (5 packets per flow, 10,000 flows active) and for
//! a table holding many long-lived flows, at several table sizes.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use earlybird::testing::{map_v4, Decoded, FlowTable, Key, Pkt};
use earlybird::FlowConfig;

fn pkt(f: u32, j: u64, ts: u64) -> Pkt {
    let s = 0x0A00_0000u32 + (f & 0xF_FFFF);
    let d = 0xAC10_0000u32 + (f & 0xF_FFFF);
    let dec = Decoded {
        src: map_v4(s.to_be_bytes()),
        dst: map_v4(d.to_be_bytes()),
        sport: 1024 + (f % 64000) as u16,
        dport: 1 + (f % 65000) as u16,
        proto: 6,
        ip_version: 4,
        ip_len: 46,
        tcp_flags: if j == 0 { 2 } else { 0x10 },
        ..Default::default()
    };
    let (key, from_a) = Key::from_decoded(&dec, true);
    Pkt {
        ts,
        size: 46,
        flags: dec.tcp_flags,
        ..Pkt::from_key(&key, false, from_a)
    }
}

/// Worst-case order: blocks of `window` flows, packet j of each before j+1.
fn worst(n: usize, window: u32) -> Vec<Pkt> {
    let mut v = Vec::with_capacity(n);
    let mut block = 0u32;
    'outer: loop {
        for j in 0..5u64 {
            for i in 0..window {
                if v.len() == n {
                    break 'outer;
                }
                let ts = v.len() as u64 * 67;
                v.push(pkt(block * window + i, j, ts));
            }
        }
        block += 1;
    }
    v
}

/// Runs every packet through `t` in batches of 256 (prefetch, update, sweep),
/// then flushes; records are discarded batch by batch.
fn feed(t: &mut FlowTable, pkts: &[Pkt]) {
    for chunk in pkts.chunks(256) {
        for p in chunk {
            t.prefetch(p.hash);
        }
        for p in chunk {
            t.packet(p);
        }
        t.sweep();
        t.out.clear();
    }
    t.flush();
}

fn bench_hash(c: &mut Criterion) {
    let p = worst(1024, 1024);
    let mut g = c.benchmark_group("hash");
    g.throughput(Throughput::Elements(p.len() as u64));
    g.bench_function("flow_hash_1024", |b| {
        b.iter(|| {
            p.iter()
                .map(|x| {
                    let k = black_box(x.key);
                    earlybird::testing::shard_hash_v4(
                        k.a.to_be_bytes(),
                        k.pa,
                        k.b.to_be_bytes(),
                        k.pb,
                        k.proto,
                    )
                })
                .fold(0u64, |a, h| a ^ h)
        })
    });
    g.finish();
}

fn bench_table(c: &mut Criterion) {
    let pkts = worst(1_000_000, 10_000);
    let mut g = c.benchmark_group("flow_table");
    g.throughput(Throughput::Elements(pkts.len() as u64));
    g.sample_size(10);
    for cap in [262_144usize, 1 << 20, 4 << 20] {
        g.bench_with_input(BenchmarkId::new("worst_1M_pkts", cap), &cap, |b, &cap| {
            let cfg = FlowConfig {
                max_flows: cap,
                ..FlowConfig::default()
            };
            b.iter(|| {
                let mut t = FlowTable::new(&cfg, None).unwrap();
                feed(&mut t, &pkts);
                black_box(t.out.len())
            })
        });
    }
    // The same with one table reused across iterations: its memory is
    // already faulted in, which isolates the table's own work from the cost
    // of first-touching fresh pages.
    let cfg = FlowConfig::default();
    let mut t = FlowTable::new(&cfg, None).unwrap();
    g.bench_function("worst_1M_pkts_warm_table", |b| {
        b.iter(|| {
            feed(&mut t, &pkts);
            let n = t.out.len();
            t.out.clear();
            black_box(n)
        })
    });
    g.finish();
}

criterion_group!(benches, bench_hash, bench_table);
criterion_main!(benches);
