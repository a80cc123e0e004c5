//! Capture-file walk throughput: an in-memory classic pcap of 1M 60-byte
//! packets (little-endian, microseconds, Ethernet), drained in batches of
//! `source::BATCH` through the public `CaptureFile`/`CaptureReader` API.
//! A pcapng file of the same packets (EPBs) is measured for comparison, and
//! so is a bare "floor" loop that only hops from record header to record
//! header (the dependency chain every pcap reader must follow), so results
//! from a busy or slow machine can be read relative to it. `pcap_10k_60B`
//! repeats the walk on a file small enough to stay in cache (CPU cost only).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use earlybird::{CaptureFile, PacketRef, BATCH};

const PACKETS: usize = 1_000_000;
const LEN: usize = 60;

fn pcap_bytes(packets: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(24 + packets * (16 + LEN));
    v.extend_from_slice(&[0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    v.extend_from_slice(&65535u32.to_le_bytes());
    v.extend_from_slice(&1u32.to_le_bytes());
    for i in 0..packets as u32 {
        v.extend_from_slice(&(1_700_000_000 + i / 1_000_000).to_le_bytes());
        v.extend_from_slice(&(i % 1_000_000).to_le_bytes());
        v.extend_from_slice(&(LEN as u32).to_le_bytes());
        v.extend_from_slice(&(LEN as u32).to_le_bytes());
        v.resize(v.len() + LEN, i as u8);
    }
    v
}

fn pcapng_bytes() -> Vec<u8> {
    let mut v = Vec::with_capacity(48 + PACKETS * (32 + LEN));
    let block = |v: &mut Vec<u8>, kind: u32, body: &[u8]| {
        let len = (12 + body.len()) as u32;
        v.extend_from_slice(&kind.to_le_bytes());
        v.extend_from_slice(&len.to_le_bytes());
        v.extend_from_slice(body);
        v.extend_from_slice(&len.to_le_bytes());
    };
    let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    shb.extend_from_slice(&[1, 0, 0, 0]);
    shb.extend_from_slice(&[0xff; 8]);
    block(&mut v, 0x0a0d_0d0a, &shb);
    block(&mut v, 1, &[1, 0, 0, 0, 0xff, 0xff, 0, 0]);
    let mut epb = vec![0u8; 20 + LEN];
    for i in 0..PACKETS as u64 {
        let ts = 1_700_000_000_000_000 + i;
        epb[4..8].copy_from_slice(&((ts >> 32) as u32).to_le_bytes());
        epb[8..12].copy_from_slice(&(ts as u32).to_le_bytes());
        epb[12..16].copy_from_slice(&(LEN as u32).to_le_bytes());
        epb[16..20].copy_from_slice(&(LEN as u32).to_le_bytes());
        block(&mut v, 6, &epb);
    }
    v
}

fn drain(file: &CaptureFile, batch: &mut Vec<PacketRef>) -> u64 {
    let mut r = file.reader();
    let mut sum = 0u64;
    while r.next_batch(batch, BATCH) > 0 {
        for p in batch.iter() {
            sum = sum.wrapping_add(p.ts ^ p.offset as u64);
        }
    }
    sum
}

/// Hops over the records reading only caplen: the lower bound of a walk.
fn floor(bytes: &[u8]) -> u64 {
    let mut pos = 24;
    let mut n = 0u64;
    while let Some(h) = bytes.get(pos + 8..pos + 12) {
        let caplen = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
        pos += 16 + caplen;
        n += 1;
    }
    n
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("capture");
    g.throughput(Throughput::Elements(PACKETS as u64));
    g.sample_size(20);
    let mut batch = Vec::with_capacity(BATCH);
    let pcap = CaptureFile::from_bytes("bench.pcap", pcap_bytes(PACKETS)).expect("valid pcap");
    g.bench_function("pcap_1M_60B", |b| {
        b.iter(|| black_box(drain(&pcap, &mut batch)))
    });
    g.bench_function("floor_1M_60B", |b| {
        b.iter(|| black_box(floor(black_box(pcap.bytes()))))
    });
    let ng = CaptureFile::from_bytes("bench.pcapng", pcapng_bytes()).expect("valid pcapng");
    g.bench_function("pcapng_1M_60B", |b| {
        b.iter(|| black_box(drain(&ng, &mut batch)))
    });
    g.finish();
    let mut g = c.benchmark_group("capture_in_cache");
    g.throughput(Throughput::Elements(10_000));
    let small = CaptureFile::from_bytes("small.pcap", pcap_bytes(10_000)).expect("valid pcap");
    g.bench_function("pcap_10k_60B", |b| {
        b.iter(|| black_box(drain(&small, &mut batch)))
    });
    g.bench_function("floor_10k_60B", |b| {
        b.iter(|| black_box(floor(black_box(small.bytes()))))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
