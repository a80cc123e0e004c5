//! Decoder throughput: one minimum-size Ethernet/IPv4/TCP frame (the 14.88
//! Mpps case), one Ethernet/IPv6/UDP frame and one VXLAN-tunnelled frame,
//! through the general decoder; and the minimum frame through the fast path.
//! Criterion reports the time per packet (`time:` = ns/packet).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use earlybird::decode::LinkType;
use earlybird::decode::{decode, Decoded};

/// 60-byte frame: Ethernet, IPv4 (total length 40), TCP ACK, 6 bytes padding.
fn eth_ipv4_tcp() -> Vec<u8> {
    let mut p = vec![
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x08,
        0x00, // eth
        0x45, 0x00, 0x00, 0x28, 0x12, 0x34, 0x40, 0x00, 0x40, 0x06, 0x00, 0x00, 10, 0, 0, 1, 10, 0,
        0, 2, // ipv4
        0xc0, 0x00, 0x01, 0xbb, 0, 0, 0, 1, 0, 0, 0, 1, 0x50, 0x10, 0xff, 0xff, 0, 0, 0,
        0, // tcp
    ];
    p.resize(60, 0);
    p
}

/// Ethernet, IPv6, UDP with 32 bytes of payload (DNS-sized).
fn eth_ipv6_udp() -> Vec<u8> {
    let mut p = vec![
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x86, 0xdd,
    ];
    p.extend_from_slice(&[0x60, 0, 0, 0, 0, 40, 17, 64]);
    p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    p.extend_from_slice(&[0xd4, 0x31, 0x00, 0x35, 0x00, 40, 0, 0]);
    p.extend_from_slice(&[0u8; 32]);
    p
}

/// Ethernet, IPv4, UDP 4789, VXLAN, the IPv4/TCP frame above.
fn vxlan() -> Vec<u8> {
    let inner = &eth_ipv4_tcp()[..54];
    let udp_len = 8 + 8 + inner.len();
    let total = 20 + udp_len;
    let mut p = eth_ipv4_tcp()[..14].to_vec();
    p.extend_from_slice(&[
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        0,
        0x40,
        0,
        64,
        17,
        0,
        0,
    ]);
    p.extend_from_slice(&[192, 0, 2, 1, 192, 0, 2, 2]);
    p.extend_from_slice(&[
        0xc0,
        0x00,
        0x12,
        0xb5,
        (udp_len >> 8) as u8,
        udp_len as u8,
        0,
        0,
    ]);
    p.extend_from_slice(&[0x08, 0, 0, 0, 0, 0, 0x2a, 0]);
    p.extend_from_slice(inner);
    p
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(1));
    for (name, pkt) in [
        ("eth_ipv4_tcp_60B", eth_ipv4_tcp()),
        ("eth_ipv6_udp", eth_ipv6_udp()),
        ("eth_ipv4_udp_vxlan_ipv4_tcp", vxlan()),
    ] {
        let mut out = Decoded::default();
        assert!(decode(LinkType::Ethernet, &pkt, &mut out).is_ok(), "{name}");
        g.bench_function(name, |b| {
            b.iter(|| {
                let r = decode(LinkType::Ethernet, black_box(&pkt), &mut out);
                black_box((&r, &out));
            })
        });
    }
    // The fast path the shard tries first (same result, decode/fast.rs).
    let pkt = eth_ipv4_tcp();
    assert!(earlybird::decode::fast::ethernet_ipv4(&pkt).is_some());
    // Every field the shard reads is extracted (the view reads lazily).
    g.bench_function("fast_path_eth_ipv4_tcp_60B", |b| {
        b.iter(|| {
            let f = earlybird::decode::fast::ethernet_ipv4(black_box(&pkt));
            black_box(f.map(|f| {
                (
                    f.src(),
                    f.dst(),
                    f.sport(),
                    f.dport(),
                    f.proto,
                    f.ip_len,
                    f.tcp_flags,
                    f.src_mac(),
                    f.dst_mac(),
                )
            }));
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
