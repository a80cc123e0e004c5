//! Unit tests of the consumer interface on a real flow table: what a
//! consumer is told and in which order, the per-packet call compiled out,
//! a flow ended by a consumer, and the table's own consumers (the tally,
//! early-verdict events, the ends of held flows).

use std::sync::Arc;

use super::consumer::{Consumer, FlowRef, Follows, FOLLOW_ALL};
use super::events::Events;
use super::held::HeldEnds;
use super::key::Key;
use super::packet::{Payload, Pkt, V6Icmp};
use super::record::{EndReason, RecordBatch};
use super::table::FlowTable;
use super::tally::Tally;
use crate::classify::inline::Inline;
use crate::classify::{Classifier, FlowFeatures, Verdict};
use crate::config::FlowConfig;
use crate::schema::Value;

/// A model that gives class 1 ("b") at the second packet.
struct Second(Vec<String>);

impl Classifier for Second {
    fn packets_needed(&self) -> usize {
        2
    }
    fn classify(&self, f: &FlowFeatures<'_>) -> Verdict {
        Verdict {
            class: 1,
            confidence: 1.0,
            at_packet: f.early.len() as u8,
        }
    }
    fn classes(&self) -> &[String] {
        &self.0
    }
}

fn model() -> Arc<dyn Classifier> {
    Arc::new(Second(vec!["a".into(), "b".into()]))
}

fn cfg() -> FlowConfig {
    FlowConfig {
        max_flows: 16,
        early_packets: 2,
        ..FlowConfig::default()
    }
}

/// A TCP packet from 10.0.0.1:`sport` to 10.0.0.2:443 at `ts` ns.
fn pkt(sport: u16, ts: u64) -> Pkt {
    let (key, from_a) = Key::from_v4([10, 0, 0, 1], sport, [10, 0, 0, 2], 443, 6, true);
    Pkt {
        ts,
        size: 100,
        ..Pkt::from_key(&key, false, from_a)
    }
}

/// Logs every call; with `end_at`, ends a flow at that packet.
#[derive(Default)]
struct Log {
    seen: Vec<String>,
    packets: bool,
    end_at: Option<u64>,
}

impl Consumer for Log {
    fn reads_packets(&self) -> bool {
        self.packets
    }
    fn start(&mut self, slot: usize) {
        self.seen.push(format!("start {slot}"));
    }
    fn packet(&mut self, flow: FlowRef<'_>, p: &Pkt, _: Payload<'_>) -> Option<Follows> {
        let n = flow.packets();
        self.seen.push(format!(
            "packet {} #{n} client={}",
            flow.slot,
            flow.sent_by_client(p)
        ));
        (self.end_at != Some(n)).then_some(FOLLOW_ALL)
    }
    fn verdict(&mut self, flow: FlowRef<'_>, model: &Inline) {
        let name = model.class_name(flow.entry.app).unwrap_or("?");
        self.seen.push(format!("verdict {} {name}", flow.slot));
    }
    fn end(&mut self, flow: FlowRef<'_>, reason: EndReason, out: &mut RecordBatch) {
        self.seen.push(format!(
            "end {} {reason:?} {} packets {} bytes, {} in out",
            flow.slot,
            flow.packets(),
            flow.bytes(),
            out.len()
        ));
    }
}

fn run(log: Log, pkts: &[Pkt]) -> FlowTable<Log> {
    let mut t = FlowTable::with_consumers(&cfg(), Some(model()), log).unwrap();
    for p in pkts {
        t.packet_wide(p, &V6Icmp::default());
    }
    t.flush();
    t
}

#[test]
fn a_consumer_is_told_of_start_packets_verdict_and_end_in_order() {
    let log = Log {
        packets: true,
        ..Log::default()
    };
    let t = run(log, &[pkt(5000, 1_000), pkt(5000, 2_000), pkt(5000, 3_000)]);
    assert_eq!(
        t.consumers.seen,
        [
            "start 0",
            "packet 0 #1 client=true",
            // The verdict is taken in the update, before the consumers
            // see the packet that completed the early packets.
            "verdict 0 b",
            "packet 0 #2 client=true",
            "packet 0 #3 client=true",
            "end 0 EndOfInput 3 packets 300 bytes, 1 in out",
        ]
    );
}

#[test]
fn without_reads_packets_no_packet_call_is_made() {
    let t = run(Log::default(), &[pkt(5000, 1_000), pkt(5000, 2_000)]);
    assert_eq!(
        t.consumers.seen,
        [
            "start 0",
            "verdict 0 b",
            "end 0 EndOfInput 2 packets 200 bytes, 1 in out"
        ]
    );
}

#[test]
fn a_consumer_ends_a_flow_and_the_next_packet_starts_another() {
    let log = Log {
        packets: true,
        end_at: Some(1),
        ..Log::default()
    };
    let mut t = run(log, &[pkt(5000, 1_000), pkt(5000, 2_000)]);
    // Each flow ends at its first packet (decided then, shorter than
    // the model's two packets); slot 0 is freed by the end and taken
    // again by the next flow.
    assert_eq!(
        t.consumers.seen,
        [
            "start 0",
            "packet 0 #1 client=true",
            "verdict 0 b",
            "end 0 Active 1 packets 100 bytes, 1 in out",
            "start 0",
            "packet 0 #1 client=true",
            "verdict 0 b",
            "end 0 Active 1 packets 100 bytes, 2 in out",
        ]
    );
    t.out.materialize();
    assert_eq!(t.out.records.len(), 2);
}

/// Reads only what its mask says; after its first packet, nothing.
struct Picky {
    first: Follows,
    seen: Vec<(bool, bool)>,
    /// [`Consumer::reads_tcp_starts`].
    starts: bool,
    /// The flow's [`FlowRef::tcp_starts`] at each packet shown (client,
    /// server).
    starts_seen: Vec<[Option<u32>; 2]>,
}

impl Picky {
    fn new(first: Follows, starts: bool) -> Picky {
        Picky {
            first,
            seen: Vec::new(),
            starts,
            starts_seen: Vec::new(),
        }
    }
}

impl Consumer for Picky {
    fn reads_packets(&self) -> bool {
        true
    }
    fn reads_tcp_starts(&self) -> bool {
        self.starts
    }
    fn follows_new(&self, _: FlowRef<'_>) -> Follows {
        self.first
    }
    fn packet(&mut self, flow: FlowRef<'_>, p: &Pkt, pl: Payload<'_>) -> Option<Follows> {
        self.seen.push((flow.sent_by_client(p), pl.len == 0));
        let st = flow.tcp_starts;
        self.starts_seen.push([st.syn(0), st.syn(1)]);
        Some(0)
    }
}

#[test]
fn a_consumer_is_called_only_for_the_packets_it_follows() {
    // The client's and the server's packets, with and without payload,
    // for a client that is endpoint `a` of the key and one that is `b`.
    let (ka, a_first) = Key::from_v4([10, 0, 0, 1], 5000, [10, 0, 0, 2], 443, 6, true);
    let (kb, b_first) = Key::from_v4([10, 0, 0, 2], 443, [10, 0, 0, 1], 5000, 6, true);
    assert_ne!(a_first, b_first);
    let bytes = [1u8; 4];
    for (key, client_a) in [(ka, a_first), (kb, b_first)] {
        // Bits: client with payload 0, client empty 1, server with 2,
        // server empty 3.
        for (bit, from_client, empty) in [
            (0, true, false),
            (1, true, true),
            (2, false, false),
            (3, false, true),
        ] {
            let mut t =
                FlowTable::with_consumers(&cfg(), None, Picky::new(1 << bit, false)).unwrap();
            let mut ts = 1_000;
            let mut send = |t: &mut FlowTable<Picky>, client: bool, empty: bool| {
                ts += 1_000;
                let p = Pkt {
                    ts,
                    size: 100,
                    ..Pkt::from_key(&key, false, client == client_a)
                };
                let pl = if empty {
                    Payload::NONE
                } else {
                    Payload::of(&bytes, 4)
                };
                t.packet_full(&p, &V6Icmp::default(), 0, pl);
            };
            // The flow's first packet (its client's, empty) opens it.
            send(&mut t, true, true);
            for (c, e) in [(true, false), (false, false), (false, true), (true, true)] {
                send(&mut t, c, e);
            }
            // Once the consumer follows nothing, no packet reaches it.
            for (c, e) in [(true, false), (false, false), (false, true), (true, true)] {
                send(&mut t, c, e);
            }
            assert_eq!(
                t.consumers.seen,
                [(from_client, empty)],
                "bit {bit}, client is a: {client_a}"
            );
        }
    }
}

/// An IPv4 packet of TCP segment `seq` with `flags` and `payload` (20
/// bytes of IP header, 20 of TCP).
fn tcp_ip(seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    use crate::decode::testutil::{ipv4, tcp_seq};
    ipv4(6, &tcp_seq(5000, 443, seq, flags, payload))
}

#[test]
fn the_table_keeps_where_the_tcp_streams_of_the_sides_it_follows_start() {
    // Where a side's last SYN without payload says its stream starts.
    let (ka, a_first) = Key::from_v4([10, 0, 0, 1], 5000, [10, 0, 0, 2], 443, 6, true);
    let (kb, b_first) = Key::from_v4([10, 0, 0, 2], 443, [10, 0, 0, 1], 5000, 6, true);
    // (whether the consumer reads them, which packets it follows, what
    // it is told at the client's payload, on a SYN).
    let cases = [
        (true, 0b0101, [Some(100), Some(700)]),
        // The server's packets not followed: its SYN is not kept.
        (true, 0b0001, [Some(100), None]),
        (false, 0b0101, [None, None]),
    ];
    for (key, client_a) in [(ka, a_first), (kb, b_first)] {
        for (starts, first, told) in cases {
            let mut t = FlowTable::with_consumers(&cfg(), None, Picky::new(first, starts)).unwrap();
            let mut ts = 1_000;
            let mut send =
                |t: &mut FlowTable<Picky>, client: bool, seq: u32, flags: u8, data: &[u8]| {
                    ts += 1_000;
                    let ip = tcp_ip(seq, flags, data);
                    let p = Pkt {
                        ts,
                        size: ip.len() as u16,
                        flags,
                        ..Pkt::from_key(&key, false, client == client_a)
                    };
                    let pl = Payload::in_ip(&ip, 40, data.len() as u16);
                    t.packet_full(&p, &V6Icmp::default(), 0, pl);
                };
            // The client's SYN is retransmitted with another number: the
            // last one counts.
            send(&mut t, true, 99, 0x02, b"");
            send(&mut t, true, 100, 0x02, b"");
            send(&mut t, false, 700, 0x12, b"");
            send(&mut t, true, 101, 0x10, b"");
            // A SYN with payload is shown, not kept.
            send(&mut t, true, 300, 0x02, b"hello");
            assert_eq!(
                t.consumers.seen,
                [(true, false)],
                "only the payload is shown"
            );
            assert_eq!(
                t.consumers.starts_seen,
                [told],
                "{starts} {first:#b} {client_a}"
            );
            // The next flow of the slot starts with none: its first
            // packet has payload.
            t.flush();
            t.consumers.first = 0b0101;
            send(&mut t, true, 5, 0x18, b"again");
            assert_eq!(t.consumers.starts_seen[1], [None, None]);
        }
    }
}

#[test]
fn the_tally_counts_verdicts_and_ended_flows() {
    let mut t = FlowTable::with_consumers(&cfg(), Some(model()), Tally::new(2)).unwrap();
    // Two packets (decided "b") and one packet (decided at its end).
    for p in [pkt(5000, 1_000), pkt(5000, 2_000), pkt(5001, 3_000)] {
        t.packet(&p);
    }
    t.flush();
    let b = &t.consumers.apps[1];
    assert_eq!((b.classified, b.ended, b.packets, b.bytes), (2, 2, 3, 300));
    let https = super::tally::PORT_CLASSES
        .iter()
        .position(|n| *n == "tcp/443")
        .unwrap();
    assert_eq!(t.consumers.ports[https].ended, 2);
    assert_eq!(t.consumers.transports[0].packets, 3);
}

#[test]
fn events_get_one_row_per_verdict_naming_the_class() {
    let mut t = FlowTable::with_consumers(&cfg(), Some(model()), Events::default()).unwrap();
    for p in [pkt(5000, 1_000), pkt(5000, 4_000), pkt(5000, 9_000)] {
        t.packet(&p);
    }
    t.flush();
    let rows = &t.consumers.rows;
    assert_eq!(rows.len(), 1);
    let at = |name: &str| {
        let i = super::events::VERDICTS
            .fields
            .iter()
            .position(|f| f.name == name)
            .unwrap();
        rows.rows().get(0, i)
    };
    assert_eq!(at("app"), Value::Text("b"));
    assert_eq!(at("sport"), Value::U64(5000));
    assert_eq!(at("time_to_decision_ns"), Value::U64(3_000));
    assert_eq!(at("decided_at_packet"), Value::U64(2));
}

#[test]
fn held_ends_list_only_the_marked_flows_with_their_final_verdict() {
    let mut t = FlowTable::with_consumers(&cfg(), Some(model()), HeldEnds::default()).unwrap();
    let held = t.packet(&pkt(5000, 1_000));
    t.set_held(held, true);
    t.packet(&pkt(5001, 2_000));
    t.flush();
    let ended = &t.consumers.ended;
    assert_eq!(ended.len(), 1, "only the marked flow");
    // Shorter than two packets: decided at its end.
    assert_eq!(ended[0].ident.0, 1_000);
    assert_eq!(ended[0].class, Some(1));
}
