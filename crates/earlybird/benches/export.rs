//! Exporter throughput: records/s per format on a batch of realistic records
//! (mixed IPv4/IPv6 TCP/UDP flows with non-round statistics, up to N early
//! packets), written to `io::sink()` so only formatting is measured (for
//! NetFlow v9 the packets, for ClickHouse the JSON it posts); and
//! `Summary::add`, the per-record accounting the exporter thread does
//! besides formatting.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use earlybird::testing::map_v4;
use earlybird::{
    to_writer, Dir, EarlyPkt, EndReason, ExportOptions, FlowRecord, Format, RecordBatch, RecordKey,
    Stat, Summary, TunnelKind, Verdict,
};

const RECORDS: usize = 4096;

/// Deterministic pseudo-random numbers (xorshift64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn f(&mut self, scale: f64) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 * scale
    }
}

fn stat(rng: &mut Rng, scale: f64) -> Stat {
    let min = rng.f(scale / 10.0);
    let max = min + rng.f(scale);
    Stat {
        min: min as u64,
        max: max as u64,
        mean: (min + max) / 3.0 + rng.f(1.0),
        std: rng.f(scale / 4.0),
    }
}

fn batch(n: usize) -> RecordBatch {
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let mut b = RecordBatch::with_capacity(RECORDS, n);
    let mut early = Vec::with_capacity(n);
    for i in 0..RECORDS {
        let v6 = i % 4 == 0;
        let addr = |rng: &mut Rng| {
            if v6 {
                let mut a = [0u8; 16];
                a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
                a[8..].copy_from_slice(&rng.next().to_be_bytes());
                a
            } else {
                map_v4((rng.next() as u32).to_be_bytes())
            }
        };
        let tcp = i % 3 != 0;
        let first = 1_700_000_000_000_000_000 + rng.below(3_600_000_000_000);
        let pk = [1 + rng.below(200), rng.below(300)];
        let rec = FlowRecord {
            key: RecordKey {
                src: addr(&mut rng),
                dst: addr(&mut rng),
                sport: 1024 + rng.below(60000) as u16,
                dport: [443, 80, 53, 123, 8443][i % 5],
                proto: if tcp { 6 } else { 17 },
                ip_version: if v6 { 6 } else { 4 },
                vlan: if i % 7 == 0 { 100 } else { 0 },
                tunnel: if i % 50 == 0 {
                    TunnelKind::Vxlan
                } else {
                    TunnelKind::None
                },
                tunnel_id: if i % 50 == 0 { 4242 } else { 0 },
            },
            src_mac: [0, 0x1b, 0x21, 1, 2, (i & 0xff) as u8],
            dst_mac: [0x3c, 0xfd, 0xfe, 9, 8, 7],
            first_ts: first,
            last_ts: first + rng.below(120_000_000_000),
            packets: pk,
            bytes: [
                pk[0] * (40 + rng.below(600)),
                pk[1] * (40 + rng.below(1400)),
            ],
            size: [
                Some(stat(&mut rng, 1500.0)),
                (pk[1] > 0).then(|| stat(&mut rng, 1500.0)),
            ],
            iat: [
                (pk[0] > 1).then(|| stat(&mut rng, 2e9)),
                (pk[1] > 1).then(|| stat(&mut rng, 2e9)),
            ],
            tcp_flags: Some(if tcp {
                [
                    [1, 1, 0, 3, pk[0] as u32, 0, 0, 0],
                    [1, 1, 0, 4, pk[1] as u32, 0, 0, 0],
                ]
            } else {
                [[0; 8]; 2]
            }),
            icmp: None,
            end: [EndReason::Idle, EndReason::Fin, EndReason::Rst][i % 3],
            early_len: 0,
            verdict: Verdict {
                class: if i % 5 == 0 {
                    Verdict::UNKNOWN
                } else {
                    (i % 6) as u16
                },
                confidence: rng.f(1.0) as f32,
                at_packet: 4,
            },
            model_id: None,
        };
        early.clear();
        let len = (pk[0] + pk[1]).min(n as u64) as usize;
        for k in 0..len {
            early.push(EarlyPkt {
                size: 40 + rng.below(1460) as u16,
                dir: if rng.below(2) == 0 {
                    Dir::Fwd
                } else {
                    Dir::Bwd
                },
                flags: 0x18,
                iat_us: if k == 0 { 0 } else { rng.below(200_000) as u32 },
            });
        }
        b.push(rec, &early);
    }
    b
}

fn bench(c: &mut Criterion) {
    let names: Vec<String> = ["tls", "http", "dns", "ntp", "quic", "ssh"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut g = c.benchmark_group("export");
    g.throughput(Throughput::Elements(RECORDS as u64));
    for n in [4usize, 8, 32] {
        let b = batch(n);
        let opts = ExportOptions {
            early_packets: n,
            class_names: names.clone().into(),
            ..Default::default()
        };
        // IPFIX: messages of up to 64 KiB, as to a file or TCP. NetFlow:
        // v9 packets of 1400 bytes (two one-way records per flow with
        // packets both ways). ClickHouse: the JSONEachRow text it posts
        // (formatting only; the posting is the server's speed).
        let formats = [
            Format::Csv,
            Format::JsonLines,
            Format::Null,
            Format::Ipfix,
            Format::Netflow,
            Format::ClickHouse,
        ];
        // Parquet: typed columns, zstd, row groups of 65,536 rows written
        // out as they fill (the sink takes them).
        #[cfg(feature = "parquet")]
        let formats = [formats.as_slice(), &[Format::Parquet]].concat();
        for format in formats {
            let mut ex = to_writer(format, Box::new(std::io::sink()), "bench", &opts);
            g.bench_function(format!("{}/N={n}", format.name()), |bench| {
                bench.iter(|| ex.write_batch(black_box(&b)).unwrap())
            });
            ex.finish().unwrap();
        }
    }
    // The exporter thread folds every batch into the run summary; batches
    // of 512 records as the shards send them.
    let parts: Vec<RecordBatch> = batch(8)
        .records
        .chunks(512)
        .map(|c| RecordBatch::from_records(c.to_vec()))
        .collect();
    let mut summary = Summary::default();
    g.bench_function("summary_add", |bench| {
        bench.iter(|| {
            for part in &parts {
                summary.add(black_box(part));
            }
        })
    });
    black_box(summary.records);
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
