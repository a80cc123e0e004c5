//! Unit tests of the flow table: direction, bidirectional merge, timeouts,
//! FIN/RST, table full, index deletion.

use super::key::Key;
use super::packet::{Pkt, V6Icmp};
use super::record::EndReason;
use super::table::FlowTable;
use crate::config::FlowConfig;
use crate::decode::{map_v4, Decoded};
use crate::features::tcp::{ACK, FIN, RST, SYN};
use crate::features::Dir;
use crate::time::SECOND;

fn pkt(cfg: &FlowConfig, src: u8, sport: u16, dst: u8, dport: u16, ts: u64, flags: u8) -> Pkt {
    let d = Decoded {
        src: map_v4([10, 0, 0, src]),
        dst: map_v4([10, 0, 0, dst]),
        sport,
        dport,
        proto: 6,
        ip_version: 4,
        ip_len: 100,
        tcp_flags: flags,
        ..Default::default()
    };
    let (key, from_a) = Key::from_decoded(&d, cfg.bidirectional);
    Pkt {
        ts,
        size: d.ip_len,
        flags,
        ..Pkt::from_key(&key, false, from_a)
    }
}

/// A xorshift64 generator of test inputs.
fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut rng = seed;
    move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    }
}

fn cfg() -> FlowConfig {
    FlowConfig {
        max_flows: 64,
        ..FlowConfig::default()
    }
}

#[test]
fn bidirectional_merge_and_direction() {
    let c = cfg();
    let mut t = FlowTable::new(&c, None).unwrap();
    t.packet(&pkt(&c, 2, 443, 1, 5000, 1_000, SYN)); // server speaks first
    t.packet(&pkt(&c, 1, 5000, 2, 443, 2_000, SYN | ACK));
    t.packet(&pkt(&c, 2, 443, 1, 5000, 3_000, ACK));
    assert_eq!(t.len(), 1);
    t.flush();
    t.out.materialize();
    let r = &t.out.records[0];
    assert_eq!(r.key.sport, 443, "first sender is the client");
    assert_eq!(r.packets, [2, 1]);
    assert_eq!(r.end, EndReason::EndOfInput);
    let early = t.out.early_of(0);
    assert_eq!(early.len(), 3);
    assert_eq!(early[1].dir, Dir::Bwd);
    assert_eq!(r.tcp_flags.unwrap()[0][1], 1); // fwd SYN
    assert_eq!(r.tcp_flags.unwrap()[1][4], 1); // bwd ACK
}

#[test]
fn unidirectional_splits_directions() {
    let c = FlowConfig {
        bidirectional: false,
        ..cfg()
    };
    let mut t = FlowTable::new(&c, None).unwrap();
    t.packet(&pkt(&c, 1, 5000, 2, 443, 1_000, SYN));
    t.packet(&pkt(&c, 2, 443, 1, 5000, 2_000, SYN | ACK));
    assert_eq!(t.len(), 2);
    t.flush();
    t.out.materialize();
    assert!(t.out.records.iter().all(|r| r.packets[1] == 0));
}

#[test]
fn idle_timeout_starts_new_flow() {
    let c = cfg();
    let mut t = FlowTable::new(&c, None).unwrap();
    t.packet(&pkt(&c, 1, 5000, 2, 53, 0, 0));
    t.packet(&pkt(&c, 1, 5000, 2, 53, 16 * SECOND, 0));
    assert_eq!(t.out.len(), 1);
    t.out.materialize();
    assert_eq!(t.out.records[0].end, EndReason::Idle);
    assert_eq!(t.len(), 1);
}

#[test]
fn active_timeout_splits_long_flow() {
    let c = FlowConfig {
        active_timeout: 10 * SECOND,
        ..cfg()
    };
    let mut t = FlowTable::new(&c, None).unwrap();
    for i in 0..12 {
        t.packet(&pkt(&c, 1, 5000, 2, 80, i * SECOND, ACK));
    }
    assert_eq!(t.out.len(), 1);
    t.out.materialize();
    assert_eq!(t.out.records[0].end, EndReason::Active);
    assert_eq!(t.out.records[0].packets[0], 11);
}

#[test]
fn fin_both_ways_ends_after_grace_or_new_syn() {
    let c = cfg();
    let mut t = FlowTable::new(&c, None).unwrap();
    t.packet(&pkt(&c, 1, 5000, 2, 80, 0, SYN));
    t.packet(&pkt(&c, 1, 5000, 2, 80, 10, FIN | ACK));
    t.packet(&pkt(&c, 2, 80, 1, 5000, 20, FIN | ACK));
    t.packet(&pkt(&c, 1, 5000, 2, 80, 30, ACK)); // final ACK joins
    assert_eq!(t.out.len(), 0);
    t.packet(&pkt(&c, 1, 5000, 2, 80, 40, SYN)); // port reuse: new flow
    assert_eq!(t.out.len(), 1);
    t.out.materialize();
    assert_eq!(t.out.records[0].end, EndReason::Fin);
    assert_eq!(t.out.records[0].packets, [3, 1]);
    // the sweep ends a closed flow after the grace period
    t.packet(&pkt(&c, 1, 5000, 2, 80, 50, RST));
    t.observe_time(50 + 3 * SECOND);
    t.sweep();
    assert_eq!(t.out.len(), 2);
    t.out.materialize();
    assert_eq!(t.out.records[1].end, EndReason::Rst);
    assert!(t.is_empty());
}

#[test]
fn sweep_expires_idle_flows() {
    let c = cfg();
    let mut t = FlowTable::new(&c, None).unwrap();
    for i in 0..10 {
        t.packet(&pkt(&c, 1, 5000 + i, 2, 80, 0, 0));
    }
    t.observe_time(20 * SECOND);
    t.sweep();
    assert_eq!(t.out.len(), 10);
    t.out.materialize();
    assert!(t.out.records.iter().all(|r| r.end == EndReason::Idle));
}

#[test]
fn full_table_evicts_and_counts() {
    let c = FlowConfig {
        max_flows: 8,
        ..FlowConfig::default()
    };
    let mut t = FlowTable::new(&c, None).unwrap();
    for i in 0..20u16 {
        t.packet(&pkt(&c, 1, 1000 + i, 2, 80, i as u64, 0));
    }
    assert_eq!(t.len(), 8);
    assert_eq!(t.counters.ended[EndReason::Evicted as usize], 12);
    t.flush();
    t.out.materialize();
    let total: u64 = t.out.records.iter().map(|r| r.packets[0]).sum();
    assert_eq!(total, 20, "no packet lost to eviction");
}

#[test]
fn index_survives_many_inserts_and_deletes() {
    let c = FlowConfig {
        max_flows: 1000,
        idle_timeout: 5,
        ..FlowConfig::default()
    };
    let mut t = FlowTable::new(&c, None).unwrap();
    let mut x: u32 = 1;
    for round in 0..50u64 {
        for _ in 0..500 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            t.packet(&pkt(
                &c,
                (x % 7) as u8,
                (x >> 8) as u16,
                9,
                80,
                round * 10,
                0,
            ));
        }
        t.observe_time(round * 10 + 9);
        for _ in 0..10 {
            t.sweep();
        }
    }
    t.flush();
    t.out.materialize();
    let total: u64 = t
        .out
        .records
        .iter()
        .map(|r| r.packets[0] + r.packets[1])
        .sum();
    assert_eq!(total, 50 * 500);
    assert!(t.is_empty());
}

#[test]
fn flush_in_steps_hands_over_every_flow_once() {
    let c = cfg();
    let fill = |t: &mut FlowTable| {
        for i in 0..40u16 {
            t.packet(&pkt(&c, 1, 5000 + i, 2, 443, 1_000 + i as u64, SYN));
        }
    };
    let mut whole = FlowTable::new(&c, None).unwrap();
    fill(&mut whole);
    whole.flush();
    let mut stepped = FlowTable::new(&c, None).unwrap();
    fill(&mut stepped);
    let mut got = Vec::new();
    let mut steps = 0;
    loop {
        let done = stepped.flush_some(7);
        assert!(stepped.out.len() <= 7, "a step appends at most 7 records");
        stepped.out.materialize();
        got.extend(stepped.out.records.drain(..).map(|r| r.key.sport));
        stepped.out.clear();
        steps += 1;
        if done {
            break;
        }
    }
    assert_eq!(steps, 6, "40 flows in steps of 7");
    assert!(stepped.is_empty());
    whole.out.materialize();
    let want: Vec<u16> = whole.out.records.iter().map(|r| r.key.sport).collect();
    assert_eq!(got, want);
    // The emptied table takes new flows.
    stepped.packet(&pkt(&c, 1, 6000, 2, 443, 9_000, SYN));
    assert_eq!(stepped.len(), 1);
}

#[test]
fn a_flush_of_few_flows_empties_the_index_flow_by_flow() {
    // 40 flows in an index of at least 2 × 65,536 buckets: each flow's
    // bucket is removed as it ends (no pass over the whole index); 40 in
    // 64 slots' index: the whole index is cleared. Both leave every bucket
    // empty, and the table takes the same flows again as new ones.
    for max_flows in [65_536, 64] {
        let c = FlowConfig {
            max_flows,
            ..FlowConfig::default()
        };
        let mut t = FlowTable::new(&c, None).unwrap();
        for round in 0..2u64 {
            for i in 0..40u16 {
                let ts = round * 1_000_000 + 1_000 + u64::from(i);
                t.packet(&pkt(&c, 1, 5000 + i, 2, 443, ts, SYN));
                t.packet(&pkt(&c, 2, 443, 1, 5000 + i, ts + 1, SYN | ACK));
            }
            assert_eq!(
                t.len(),
                40,
                "max_flows {max_flows}, round {round}: 40 new flows"
            );
            t.flush();
            assert!(t.is_empty());
            assert!(
                t.index.as_slice().iter().all(|&b| b == 0),
                "max_flows {max_flows}, round {round}: a bucket left"
            );
        }
        t.out.materialize();
        let ports: Vec<u16> = t.out.records.iter().map(|r| r.key.sport).collect();
        assert_eq!(ports.len(), 80);
        assert!(t.out.records.iter().all(|r| r.packets == [1, 1]));
    }
}

#[test]
fn byte_counters_carry_past_4_gib() {
    let c = cfg();
    let mut t = FlowTable::new(&c, None).unwrap();
    let n = 70_000u64; // 70,000 × 65,535 bytes ≈ 4.27 GiB in one direction
    for i in 0..n {
        let mut p = pkt(&c, 1, 5000, 2, 443, 1_000 + i, 0);
        p.size = u16::MAX;
        t.packet(&p);
    }
    t.packet(&pkt(&c, 2, 443, 1, 5000, 1_000 + n, 0));
    t.flush();
    t.out.materialize();
    let r = &t.out.records[0];
    assert_eq!(r.packets, [n, 1]);
    assert_eq!(r.bytes, [n * 65_535, 100]);
}

/// Flag counts stay exact past the 16-bit lanes: a direction spills into
/// the side array every 2^15 packets, and a slot reused by a new flow
/// starts from zero.
#[test]
fn flag_counts_spill_past_16_bits() {
    use crate::features::tcp::SPILL_EVERY;
    let c = cfg();
    let mut t = FlowTable::new(&c, None).unwrap();
    let n = 3 * SPILL_EVERY as u64 + 5; // 98,309 packets client to server
    for i in 0..n {
        let flags = if i % 3 == 0 { ACK | FIN } else { ACK };
        t.packet(&pkt(&c, 1, 5000, 2, 443, 1_000 + i, flags));
    }
    for i in 0..70_000u64 {
        t.packet(&pkt(&c, 2, 443, 1, 5000, 1_000 + n + i, RST | ACK));
    }
    // A second flow in a fresh slot after the first has ended.
    t.flush();
    t.packet(&pkt(&c, 1, 6000, 2, 443, 10 * SECOND, SYN));
    t.flush();
    t.out.materialize();
    assert_eq!(t.out.len(), 2);
    let r = &t.out.records[0];
    assert_eq!(r.packets, [n, 70_000]);
    let flags = r.tcp_flags.unwrap();
    assert_eq!(flags[0][4], n as u32, "ACK forward");
    assert_eq!(flags[0][0], n.div_ceil(3) as u32, "FIN forward");
    assert_eq!(flags[1][2], 70_000, "RST backward");
    assert_eq!(flags[1][4], 70_000, "ACK backward");
    let fresh = t.out.records[1].tcp_flags.unwrap();
    assert_eq!(fresh[0], [0, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(fresh[1], [0; 8]);
}

/// A slot reused after its flow ended starts with empty statistics (fresh
/// slots are zero by construction and are not cleared again).
#[test]
fn reused_slot_starts_with_empty_statistics() {
    let c = cfg();
    let mut t = FlowTable::new(&c, None).unwrap();
    for i in 0..5u64 {
        let mut p = pkt(&c, 1, 5000, 2, 443, 1_000 + i * 7, ACK | FIN);
        p.size = 1400 + i as u16;
        t.packet(&p);
    }
    t.flush();
    for i in 0..2u64 {
        let mut p = pkt(&c, 3, 6000, 4, 80, 10 * SECOND + i * 50, SYN);
        p.size = 60;
        t.packet(&p);
    }
    t.flush();
    t.out.materialize();
    assert_eq!(t.out.len(), 2);
    let r = &t.out.records[1];
    assert_eq!(r.key.sport, 6000);
    let size = r.size[0].unwrap();
    assert_eq!((size.min, size.max, size.std), (60, 60, 0.0));
    let iat = r.iat[0].unwrap();
    assert_eq!((iat.min, iat.max, iat.mean), (50, 50, 50.0));
    assert_eq!(r.tcp_flags.unwrap()[0], [0, 2, 0, 0, 0, 0, 0, 0]);
    assert_eq!((r.size[1], r.iat[1]), (None, None), "no bwd packet");
}

/// Hints from `prefetch_entry` a few packets ahead (as the shard gives
/// them), and stale or wrong hints, give exactly the records of the plain
/// probe: flows that close and reopen (slots freed and reused under the
/// hint), idle ends, a table that fills up and evicts, and hints naming
/// other live flows.
#[test]
fn hinted_lookups_equal_probed_lookups() {
    let mut next = xorshift(0x2545_f491_4f6c_dd1du64);
    let c = FlowConfig {
        max_flows: 40,
        ..cfg()
    };
    let mut pkts = Vec::new();
    let mut ts = SECOND;
    for _ in 0..20_000 {
        let r = next();
        ts += match r % 50 {
            0 => 20 * SECOND, // everything idles out
            _ => (r >> 8) % 1_000,
        };
        let (a, b) = (1 + (r >> 16) % 6, 1 + (r >> 20) % 6);
        let (pa, pb) = (5000 + ((r >> 24) % 12) as u16, 443);
        let flags = match (r >> 32) % 16 {
            0 => SYN,
            1 => FIN | ACK,
            2 => RST,
            _ => ACK,
        };
        let fwd = r & (1 << 40) != 0;
        pkts.push(if fwd {
            pkt(&c, a as u8, pa, b as u8, pb, ts, flags)
        } else {
            pkt(&c, b as u8, pb, a as u8, pa, ts, flags)
        });
    }
    let run = |mode: u8| {
        let mut t = FlowTable::new(&c, None).unwrap();
        const AHEAD: usize = 3;
        let mut hints = vec![0u32; pkts.len()];
        let mut seen = Vec::new();
        for i in 0..pkts.len() {
            if let Some(q) = pkts.get(i + AHEAD) {
                hints[i + AHEAD] = t.prefetch_entry(q.hash);
            }
            let hint = match mode {
                0 => 0,
                1 => hints[i],
                // Any slot ever used: stale, reused or another flow's.
                _ => match seen.len() {
                    0 => 0,
                    n => seen[(i * 7) % n] as u32 + 1,
                },
            };
            let s = t.packet_hinted(&pkts[i], &V6Icmp::default(), hint);
            seen.push(s);
            if i % 64 == 0 {
                t.sweep();
            }
        }
        t.flush();
        t.out.materialize();
        (t.out.records.clone(), t.counters)
    };
    let (plain, counters) = run(0);
    assert!(
        counters.ended[EndReason::Evicted as usize] > 0,
        "the table filled up"
    );
    assert!(counters.ended[EndReason::Fin as usize] + counters.ended[EndReason::Rst as usize] > 0);
    assert!(plain.len() > 1_000, "{} records", plain.len());
    assert!(run(1) == (plain.clone(), counters), "prefetch hints");
    assert!(run(2) == (plain, counters), "wrong hints");
}

/// IPv6 flows whose compact keys are equal (the 32-bit address folds
/// collide) stay apart: the table compares the full addresses, and each
/// record carries its own.
#[test]
fn ipv6_flows_with_equal_folds_stay_apart() {
    let c = cfg();
    let mut t = FlowTable::new(&c, None).unwrap();
    let a: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    // Flip bits of word 0 and the same bits rotated right by 8 in word 1:
    // the fold (w0 ^ rotl(w1, 8) ^ …) is unchanged.
    let x = 0x0000_0100u32;
    let mut a2 = a;
    let w0 = u32::from_be_bytes(a[0..4].try_into().unwrap()) ^ x;
    let w1 = u32::from_be_bytes(a[4..8].try_into().unwrap()) ^ x.rotate_right(8);
    a2[0..4].copy_from_slice(&w0.to_be_bytes());
    a2[4..8].copy_from_slice(&w1.to_be_bytes());
    let b: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    let mut recs = Vec::new();
    for (i, src) in [a, a2, a, a2].into_iter().enumerate() {
        let d = Decoded {
            src,
            dst: b,
            sport: 5000,
            dport: 443,
            proto: 6,
            ip_version: 6,
            ip_len: 80,
            ..Default::default()
        };
        let (key, from_a) = Key::from_decoded(&d, c.bidirectional);
        let p = Pkt {
            ts: 1_000 + i as u64,
            size: 80,
            ..Pkt::from_key(&key, true, from_a)
        };
        recs.push(p.key);
        t.packet_wide(&p, &V6Icmp::of_v6([key.a, key.b]));
    }
    assert_eq!(recs[0], recs[1], "the compact keys collide by construction");
    assert_eq!(t.len(), 2);
    t.flush();
    t.out.materialize();
    let mut got: Vec<_> = t
        .out
        .records
        .iter()
        .map(|r| (r.key.src, r.key.dst, r.key.ip_version, r.packets))
        .collect();
    got.sort();
    let mut want = vec![(a, b, 6, [2, 0]), (a2, b, 6, [2, 0])];
    want.sort();
    assert_eq!(got, want);
}

/// Full statistics through the table: flows of 1 to 3N packets in both
/// directions, with gaps from nanoseconds to over 4.29 s and timestamps
/// that step backwards, end with exactly the moments and flag counts of the
/// packet sequence as each direction saw it (the reference below), whatever
/// N is.
#[test]
fn full_statistics_follow_every_packet() {
    use crate::features::stats::Moments;
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
    for n in [1usize, 4, 8] {
        let c = FlowConfig {
            early_packets: n,
            ..cfg()
        };
        for flow in 0..300u64 {
            let mut t = FlowTable::new(&c, None).unwrap();
            let len = 1 + (next() % (3 * n as u64)) as usize;
            let mut ts = 10 * SECOND;
            let mut want = [Moments::default(); 2];
            let mut flags_want = [[0u32; 8]; 2];
            let mut count = [0u64; 2];
            let mut bytes = [0u64; 2];
            for i in 0..len {
                let r = next();
                // Mostly small gaps; some beyond u32 ns; some backwards.
                ts = match r % 8 {
                    0 => ts + 5 * SECOND + r % 1000,
                    1 if flow % 3 == 0 => ts - (r >> 8) % 2_000_000,
                    _ => ts + (r >> 8) % 3_000_000,
                };
                let fwd = i == 0 || r & 0x100 != 0;
                let flags = [0, ACK, SYN, SYN | ACK, 0x18, 0xe0 | ACK][(r >> 12) as usize % 6];
                let mut p = if fwd {
                    pkt(&c, 1, 5000, 2, 443, ts, flags)
                } else {
                    pkt(&c, 2, 443, 1, 5000, ts, flags)
                };
                p.size = 40 + (r >> 20) as u16 % 1400;
                t.packet(&p);
                let d = usize::from(!fwd);
                want[d].update(p.size, ts, count[d] == 0);
                for (k, n) in flags_want[d].iter_mut().enumerate() {
                    if flags & (1 << k) != 0 {
                        *n += 1;
                    }
                }
                count[d] += 1;
                bytes[d] += p.size as u64;
            }
            t.flush();
            t.out.materialize();
            assert_eq!(t.out.records.len(), 1, "N={n} flow {flow}: one flow");
            let rec = &t.out.records[0];
            for d in 0..2 {
                let ctx = format!("N={n} flow {flow} ({len} packets) dir {d}");
                assert_eq!(rec.packets[d], count[d], "{ctx}");
                assert_eq!(rec.size[d], want[d].size_stat(count[d], bytes[d]), "{ctx}");
                assert_eq!(rec.iat[d], want[d].iat_stat(count[d]), "{ctx}");
            }
            assert_eq!(rec.tcp_flags, Some(flags_want), "N={n} flow {flow}");
        }
    }
}

#[test]
fn confidence_rounding_equals_round() {
    let reference = |c: f32| (c.clamp(0.0, 1.0) * 65535.0).round() as u16;
    let check = |c: f32| assert_eq!(crate::classify::conf_u16(c), reference(c), "{c:e}");
    for c in [
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.0,
        f32::NAN,
        f32::INFINITY,
        f32::MIN_POSITIVE,
        1e-45,
    ] {
        check(c);
    }
    // A sweep over the f32 values of [0, 1]...
    for bits in (0..=1f32.to_bits()).step_by(1021) {
        check(f32::from_bits(bits));
    }
    // ...and every step and the f32 values around each half step.
    for n in 0..=65535u32 {
        for y in [n as f32, n as f32 + 0.5] {
            let c = y / 65535.0;
            let mut lo = c;
            let mut hi = c;
            for _ in 0..6 {
                check(lo);
                check(hi);
                lo = f32::from_bits(lo.to_bits().saturating_sub(1));
                hi = f32::from_bits(hi.to_bits() + 1);
            }
        }
    }
}

/// The same model seen only through `classify` (no fast form).
struct Generic(crate::classify::Model);

impl crate::classify::Classifier for Generic {
    fn packets_needed(&self) -> usize {
        self.0.packets_needed()
    }
    fn classify(&self, f: &crate::classify::FlowFeatures<'_>) -> crate::classify::Verdict {
        self.0.classify(f)
    }
    fn classes(&self) -> &[String] {
        self.0.classes()
    }
}

#[test]
fn tree_fast_path_stores_the_verdicts_of_classify() {
    use crate::classify::dataset::SplitMix64;
    use crate::classify::testutil::patterns;
    use crate::classify::Classifier;
    use crate::learn::{train, Algo, TrainOptions};
    use std::sync::Arc;
    // One label in four drawn at random: impure leaves.
    let mut d = patterns(60, 300, 5);
    let mut rng = SplitMix64::new(21);
    for s in &mut d.samples {
        if rng.below(4) == 0 {
            s.label = rng.below(3) as u16;
        }
    }
    let sizes = [52u16, 60, 80, 100, 200, 300, 500, 900, 1400];
    let mut rng = SplitMix64::new(21);
    for (n, threshold) in [(4, 0.0), (4, 0.9), (4, 0.99), (2, 0.9), (6, 0.95)] {
        let mut m = train(
            &d,
            &TrainOptions {
                algo: Algo::C45,
                use_ports: threshold == 0.0,
                ..TrainOptions::default()
            },
        )
        .unwrap();
        m.info.threshold = threshold;
        let fast: Arc<dyn Classifier> = Arc::new(m.clone());
        assert!(fast.fast_tree().is_some());
        let c = FlowConfig {
            max_flows: 4096,
            early_packets: n,
            ..FlowConfig::default()
        };
        let mut tables = [
            FlowTable::new(&c, Some(fast)).unwrap(),
            FlowTable::new(&c, Some(Arc::new(Generic(m)))).unwrap(),
        ];
        let mut ts = 1_000_000;
        for _ in 0..20_000 {
            let f = rng.below(150) as u8;
            let client = 1 + f;
            let port = [443, 80, 53, 8080][f as usize % 4];
            let cport = 1024 + f as u16 * 7;
            let flags = if rng.below(100) == 0 { FIN | ACK } else { ACK };
            let mut p = if rng.below(2) == 0 {
                pkt(&c, client, cport, 250, port, ts, flags)
            } else {
                pkt(&c, 250, port, client, cport, ts, flags)
            };
            p.size = sizes[rng.below(sizes.len() as u64) as usize] + rng.below(40) as u16;
            for t in &mut tables {
                t.packet(&p);
            }
            ts += if rng.below(3000) == 0 {
                20 * SECOND
            } else {
                [0, 5_000, 90_000, 900_000, 4_000_000][rng.below(5) as usize]
            };
        }
        let records: Vec<_> = tables
            .iter_mut()
            .map(|t| {
                t.flush();
                t.out.materialize();
                t.out.records.clone()
            })
            .collect();
        assert_eq!(records[0], records[1], "n {n} threshold {threshold}");
        assert_eq!(tables[0].counters, tables[1].counters);
        let v = |f: &dyn Fn(&super::record::FlowRecord) -> bool| {
            records[0].iter().filter(|r| f(r)).count()
        };
        let unknown =
            v(
                &|r| {
                    r.verdict.class == crate::classify::Verdict::UNKNOWN && r.verdict.at_packet > 0
                },
            );
        let short = v(&|r| {
            r.verdict.at_packet > 0 && (r.verdict.at_packet as usize) < c.early_packets.min(4)
        });
        let known = v(&|r| r.verdict.class != crate::classify::Verdict::UNKNOWN);
        assert!(short > 20, "n {n}: {short} short");
        if threshold < 0.95 {
            assert!(known > 50, "threshold {threshold}: {known} known");
        }
        if threshold > 0.5 {
            assert!(unknown > 20, "threshold {threshold}: {unknown} unknown");
        }
    }
}

/// An ICMP flow records the type and code of its first packet (a reply of
/// another type later does not change them), also when its slot held an
/// ICMP flow before; a first packet without them, and any flow of another
/// protocol, records none.
#[test]
fn icmp_flows_record_their_first_type_and_code() {
    use crate::decode::icmp::Icmp;
    let c = cfg();
    let mut t = FlowTable::new(&c, None).unwrap();
    let icmp_pkt = |src: u8, dst: u8, ts: u64, proto: u8| {
        let d = Decoded {
            src: map_v4([10, 0, 0, src]),
            dst: map_v4([10, 0, 0, dst]),
            proto,
            ip_version: 4,
            ip_len: 84,
            ..Default::default()
        };
        let (key, from_a) = Key::from_decoded(&d, c.bidirectional);
        Pkt {
            ts,
            size: 84,
            ..Pkt::from_key(&key, false, from_a)
        }
    };
    let side = |ty, code| V6Icmp {
        icmp: Some(Icmp { ty, code }),
        ..V6Icmp::default()
    };
    // Echo request, then its reply (type 0).
    t.packet_wide(&icmp_pkt(1, 2, 1_000, 1), &side(8, 0));
    t.packet_wide(&icmp_pkt(2, 1, 2_000, 1), &side(0, 0));
    t.flush();
    // The same slot again: a first packet too short for a type.
    t.packet_wide(&icmp_pkt(3, 4, 20 * SECOND, 1), &V6Icmp::default());
    t.packet_wide(&icmp_pkt(4, 3, 20 * SECOND + 5, 1), &side(3, 1));
    t.flush();
    // ICMPv6 port unreachable, and a TCP flow.
    t.packet_wide(&icmp_pkt(5, 6, 40 * SECOND, 58), &side(1, 4));
    t.packet(&pkt(&c, 7, 5000, 8, 80, 40 * SECOND, SYN));
    t.flush();
    t.out.materialize();
    let got: Vec<_> = t
        .out
        .records
        .iter()
        .map(|r| (r.key.proto, r.packets, r.icmp.map(|m| (m.ty, m.code))))
        .collect();
    assert_eq!(
        got,
        [
            (1, [1, 1], Some((8, 0))),
            (1, [1, 1], None),
            (58, [1, 0], Some((1, 4))),
            (6, [1, 0], None),
        ]
    );
}
