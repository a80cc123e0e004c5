//! The `ndpi` analyzer on a flow table fed hand-built IPv4/UDP packets:
//! nDPI's per-flow state is freed when its verdict is final, when the flow
//! ends, and when the table is dropped with flows still open ([`LIVE`]
//! returns to zero); a DNS query is labelled `DNS` by payload.

use super::ndpi::live_flows;
use crate::config::FlowConfig;
use crate::flow::key::Key;
use crate::flow::packet::{Payload, Pkt, V6Icmp};
use crate::flow::table::FlowTable;
use crate::schema::Value;
use crate::shard::consumers::Consumers;

/// An IPv4/UDP packet 10.0.0.1:sport → 10.0.0.2:dport carrying `payload`
/// (the other way when `back`).
fn udp_dir(sport: u16, dport: u16, payload: &[u8], back: bool) -> Vec<u8> {
    let len = 28 + payload.len();
    let mut p = vec![
        0x45,
        0,
        (len >> 8) as u8,
        len as u8,
        0,
        0,
        0,
        0,
        64,
        17,
        0,
        0,
    ];
    if back {
        p.extend_from_slice(&[10, 0, 0, 2, 10, 0, 0, 1]);
    } else {
        p.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    }
    p.extend_from_slice(&sport.to_be_bytes());
    p.extend_from_slice(&dport.to_be_bytes());
    p.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    p
}

fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    udp_dir(sport, dport, payload, false)
}

/// Feeds `ip` as one packet of its flow (addresses and ports as in
/// [`udp_dir`]).
fn feed_dir(t: &mut FlowTable<Consumers>, ts: u64, sport: u16, dport: u16, ip: &[u8], back: bool) {
    let (a, b) = if back {
        ([10, 0, 0, 2], [10, 0, 0, 1])
    } else {
        ([10, 0, 0, 1], [10, 0, 0, 2])
    };
    let key = Key::from_v4(a, sport, b, dport, 17, true);
    let p = Pkt {
        ts,
        size: ip.len() as u16,
        ..Pkt::from_key(&key.0, false, key.1)
    };
    let pl = Payload::in_ip(ip, 28, (ip.len() - 28) as u16);
    t.packet_full(&p, &V6Icmp::default(), 0, pl);
}

fn feed(t: &mut FlowTable<Consumers>, ts: u64, sport: u16, dport: u16, ip: &[u8]) {
    feed_dir(t, ts, sport, dport, ip, false)
}

fn table() -> FlowTable<Consumers> {
    let cfg = FlowConfig {
        max_flows: 1024,
        analyzers: vec!["ndpi".into()],
        ..FlowConfig::default()
    };
    Consumers::table(&cfg, None).unwrap()
}

/// A DNS query for example.com.
const DNS_QUERY: &[u8] = &[
    0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 7, b'e', b'x', b'a', b'm', b'p', b'l', b'e', 3, b'c',
    b'o', b'm', 0, 0, 1, 0, 1,
];

/// Its answer: example.com A 93.184.216.34.
const DNS_ANSWER: &[u8] = &[
    0x12, 0x34, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0, 7, b'e', b'x', b'a', b'm', b'p', b'l', b'e', 3,
    b'c', b'o', b'm', 0, 0, 1, 0, 1, 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0x0e, 0x10, 0, 4, 93, 184, 216,
    34,
];

// One test: `LIVE` counts the states of the whole process.
#[test]
fn ndpi_state_is_freed_at_the_verdict_at_flow_end_and_on_drop() {
    assert_eq!(live_flows(), 0);
    // Undecided flows (payload nDPI does not know, high ports) hold a
    // state each until the table is dropped.
    let mut t = table();
    for i in 0..200u16 {
        let ip = udp(
            40_000 + i,
            50_000,
            &[0xA5, (i & 0xff) as u8, 0x5A, 0x01, 0x77, 0x13],
        );
        feed(&mut t, 1_000_000 + u64::from(i), 40_000 + i, 50_000, &ip);
    }
    assert_eq!(live_flows(), 200, "one nDPI state per undecided flow");
    drop(t);
    assert_eq!(live_flows(), 0, "dropping the table frees every state");

    // Ended flows free theirs and record nDPI's verdict.
    let mut t = table();
    for i in 0..50u16 {
        let ip = udp(40_000 + i, 50_000, &[0xA5, 0x5A, 0x01, 0x77, 0x13, i as u8]);
        feed(&mut t, 1_000_000 + u64::from(i), 40_000 + i, 50_000, &ip);
    }
    // A DNS query and its answer: nDPI's verdict is final and the state
    // goes at once, with the flow still open.
    feed(&mut t, 2_000_000, 5353, 53, &udp(5353, 53, DNS_QUERY));
    feed_dir(
        &mut t,
        2_100_000,
        53,
        5353,
        &udp_dir(53, 5353, DNS_ANSWER, true),
        true,
    );
    assert_eq!(live_flows(), 50, "a decided flow keeps no state");
    t.flush();
    assert_eq!(live_flows(), 0, "ended flows keep no state");
    let b = &mut t.out;
    b.materialize();
    assert_eq!(b.records.len(), 51);
    let dns = (0..b.records.len())
        .find(|&i| b.records[i].key.dport == 53 || b.records[i].key.sport == 53)
        .unwrap();
    let row: Vec<_> = b.analyzed.row(dns).collect();
    assert_eq!(row[0], Value::Text("DNS"), "{row:?}");
    assert_eq!(row[4], Value::Text("DPI"), "{row:?}");
    assert_eq!(row[5], Value::U64(2), "{row:?}");
    let other: Vec<_> = b.analyzed.row((dns + 1) % 51).collect();
    assert_eq!(other[5], Value::U64(1), "{other:?}");
    drop(t);
    assert_eq!(live_flows(), 0);
}
