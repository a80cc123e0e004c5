//! The analyzer framework on a flow table: states per slot, reset per
//! flow, fields in registry order, and flows ended by an analyzer.

use super::{Action, Analyzer, PacketView};
use crate::config::FlowConfig;
use crate::flow::consumer::Consumer;
use crate::flow::key::Key;
use crate::flow::packet::{Payload, Pkt, V6Icmp};
use crate::flow::record::EndReason;
use crate::flow::table::FlowTable;
use crate::schema::{Cells, Field, FieldType, Value};
use crate::shard::consumers::Consumers;

/// Counts the packets it sees and ends the flow at the third.
#[derive(Debug, Default)]
pub(super) struct EndAfter;

impl Analyzer for EndAfter {
    type State = u64;
    const NAME: &'static str = "test_end";
    const ABOUT: &'static str = "ends every flow at its third packet";
    const FIELDS: &'static [Field] = &[Field::new("seen", FieldType::U64, "", "packets seen")];
    const PAYLOAD: bool = false;
    fn packet(&self, seen: &mut u64, p: &PacketView<'_>) -> Action {
        *seen += 1;
        assert_eq!(u64::from(p.index), *seen, "index counts the flow's packets");
        if *seen == 3 {
            Action::End
        } else {
            Action::Continue
        }
    }
    fn record(&self, seen: &u64, out: &mut Cells<'_>) {
        out.u64(*seen);
    }
}

fn table(analyzers: &[&str]) -> FlowTable<Consumers> {
    let cfg = FlowConfig {
        max_flows: 64,
        analyzers: analyzers.iter().map(|s| s.to_string()).collect(),
        ..FlowConfig::default()
    };
    Consumers::table(&cfg, None).unwrap()
}

fn pkt(ts: u64, from_a: bool) -> Pkt {
    let key = Key::from_v4([10, 0, 0, 1], 1234, [10, 0, 0, 2], 80, 6, true).0;
    Pkt {
        ts,
        size: 60,
        from_a,
        ..Pkt::from_key(&key, false, from_a)
    }
}

#[test]
fn an_analyzer_ends_a_flow_and_the_next_packet_starts_another() {
    let mut t = table(&["test_end"]);
    for i in 0..7 {
        t.packet_full(
            &pkt(1_000 + i, i % 2 == 0),
            &V6Icmp::default(),
            0,
            Payload::NONE,
        );
    }
    t.flush();
    let b = &mut t.out;
    b.materialize();
    let ends: Vec<_> = b.records.iter().map(|r| r.end).collect();
    assert_eq!(
        ends,
        [EndReason::Active, EndReason::Active, EndReason::EndOfInput]
    );
    let seen: Vec<_> = (0..3).map(|i| b.analyzed.get(i, 0)).collect();
    assert_eq!(seen, [Value::U64(3), Value::U64(3), Value::U64(1)]);
    assert_eq!(t.counters.ended[EndReason::Active as usize], 2);
}

#[test]
fn payload_reaches_the_analyzer_and_its_fields_follow_in_registry_order() {
    // Named in the other order: fields still come in registry order.
    let mut t = table(&["test_end", "payload"]);
    assert!(t.consumers.reads_payload());
    let names: Vec<_> = t
        .consumers
        .analyzer_fields()
        .iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(
        names,
        [
            "fwd_payload_packets",
            "bwd_payload_packets",
            "fwd_payload_bytes",
            "bwd_payload_bytes",
            "fwd_first_payload",
            "bwd_first_payload",
            "seen"
        ]
    );
    let hello = Payload {
        bytes: b"GET / HTTP/1.1\r\nHost",
        len: 300,
        ip: &[],
    };
    t.packet_full(&pkt(1, true), &V6Icmp::default(), 0, Payload::NONE);
    t.packet_full(&pkt(2, true), &V6Icmp::default(), 0, hello);
    t.flush();
    t.out.materialize();
    let row: Vec<_> = t.out.analyzed.row(0).collect();
    assert_eq!(
        row,
        [
            Value::U64(1),
            Value::U64(0),
            Value::U64(300),
            Value::U64(0),
            Value::Text("474554202f20485454502f312e310d0a"),
            Value::Null,
            Value::U64(2),
        ]
    );
}

#[test]
fn no_analyzer_adds_nothing_and_an_unknown_name_is_refused() {
    let t = table(&[]);
    assert!(!t.consumers.reads_payload());
    assert!(t.consumers.analyzer_fields().is_empty());
    let cfg = FlowConfig {
        analyzers: vec!["nope".into()],
        ..FlowConfig::default()
    };
    let e = cfg.validate().unwrap_err().to_string();
    assert!(
        e.contains("unknown analyzer \"nope\"") && e.contains("payload"),
        "{e}"
    );
}
