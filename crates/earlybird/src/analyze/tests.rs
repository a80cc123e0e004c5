//! The analyzer framework on a flow table: states per slot, reset per
//! flow, fields in registry order, and flows ended by an analyzer.

use super::{Action, Analyzer, PacketView, TcpStarts};
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
    let hello = Payload::of(b"GET / HTTP/1.1\r\nHost", 300);
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

/// An IPv4 and TCP header (sequence number `seq`, flags `flags`) followed
/// by `payload`.
fn tcp_packet(seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&((40 + payload.len()) as u16).to_be_bytes());
    p[9] = 6;
    p[24..28].copy_from_slice(&seq.to_be_bytes());
    p[32] = 0x50;
    p[33] = flags;
    p.extend_from_slice(payload);
    p
}

#[test]
fn analyzers_done_with_a_flow_see_no_more_of_it_and_record_the_same() {
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let labellers = names(&super::LABELLERS);
    let mut gated = super::Active::new(&labellers).unwrap();
    // `payload` never says it is done: the flow stays in the analyzers,
    // the labellers done with it are shown no more of it.
    let mut with_payload = labellers.clone();
    with_payload.push("payload".into());
    let mut open = super::Active::new(&with_payload).unwrap();
    assert!(gated.early && open.early && gated.all != open.all);
    let req = b"GET /x HTTP/1.1\r\nHost: example.org\r\nUser-Agent: t/1\r\n\r\n";
    // (from the client, TCP flags, payload): a handshake, an HTTP
    // request and its reply, then packets no labeller reads.
    let flow: [(bool, u8, &[u8]); 7] = [
        (true, 0x02, b""),
        (false, 0x12, b""),
        (true, 0x10, b""),
        (true, 0x18, req),
        (false, 0x18, b"HTTP/1.1 200 OK\r\n\r\n"),
        (true, 0x18, b"GET /y HTTP/1.1\r\nHost: other.org\r\n\r\n"),
        (false, 0x18, b"SSH-2.0-x\r\n"),
    ];
    let mut seq = [1000u32, 5000u32];
    let mut done_at = None;
    for a in [&mut gated, &mut open] {
        a.start(0);
    }
    for (i, (client, flags, payload)) in flow.iter().enumerate() {
        let d = usize::from(!client);
        let ip = tcp_packet(seq[d], *flags, payload);
        seq[d] = seq[d].wrapping_add(payload.len() as u32 + u32::from(flags & 0x02 != 0));
        let view = PacketView {
            ts: 1_000 + i as u64,
            from_client: *client,
            index: i as u32 + 1,
            size: ip.len() as u16,
            tcp_flags: *flags,
            proto: 6,
            payload_len: payload.len() as u16,
            payload,
            ip: &ip,
            tcp_starts: &crate::analyze::TcpStarts::NONE,
        };
        gated.packet(0, &view);
        open.packet(0, &view);
        if done_at.is_none() && gated.done[0][..2] == [gated.all; 2] {
            done_at = Some(i);
        }
    }
    assert!(open.live(0, true, false) && open.live(0, false, true));
    assert!(!gated.live(0, true, false) && !gated.live(0, false, true));
    assert_eq!(
        open.done[0][..2],
        [gated.all; 2],
        "each labeller done, payload not"
    );
    // Done once the client's first payload is an HTTP request (not TLS,
    // not SSH, not DNS) and its header block was read.
    assert_eq!(done_at, Some(3));
    let (mut a, mut b) = (
        crate::schema::Rows::default(),
        crate::schema::Rows::default(),
    );
    gated.record(0, &mut a, (7, 0), || [0; 2]);
    open.record(0, &mut b, (7, 0), || [0; 2]);
    let n = a.width();
    let ra: Vec<_> = a.row(0).collect();
    // `payload`'s fields come first (registry order).
    let rb: Vec<_> = b.row(0).skip(b.width() - n).collect();
    assert!(ra.contains(&Value::Text("example.org")), "{ra:?}");
    assert_eq!(ra, rb);
    // A new flow in the slot is shown to every analyzer again.
    gated.start(0);
    assert!(gated.live(0, true, false) && gated.done[0][..2] == [0; 2]);
}

#[test]
fn a_side_the_labellers_are_done_with_and_empty_packets_are_not_shown() {
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut a = super::Active::new(&names(&["http", "ssh"])).unwrap();
    a.start(0);
    let show = |a: &mut super::Active, i: u32, client: bool, payload: &[u8]| {
        let ip = tcp_packet(1000 + i, 0x18, payload);
        let view = PacketView {
            ts: 1_000 + u64::from(i),
            from_client: client,
            index: i,
            size: ip.len() as u16,
            tcp_flags: 0x18,
            proto: 6,
            payload_len: payload.len() as u16,
            payload,
            ip: &ip,
            tcp_starts: &crate::analyze::TcpStarts::NONE,
        };
        a.packet(0, &view);
    };
    // Neither reads packets without payload, from either side.
    assert!(!a.live(0, true, true) && !a.live(0, false, true));
    assert!(a.live(0, true, false) && a.live(0, false, false));
    // The server speaks first, its banner: HTTP is done with the server's
    // side (its first payload is not a request), SSH too (the banner is
    // read); both wait for the client's.
    show(&mut a, 1, false, b"SSH-2.0-srv\r\n");
    assert!(!a.live(0, false, false), "{:?}", a.done[0]);
    assert!(a.live(0, true, false));
    // The client's request: HTTP reads it, SSH's client side ends without
    // a banner; the flow leaves the analyzers.
    show(
        &mut a,
        2,
        true,
        b"GET / HTTP/1.1\r\nHost: h.example\r\n\r\n",
    );
    assert_eq!(a.done[0][..2], [a.all; 2]);
    let mut rows = crate::schema::Rows::default();
    a.record(0, &mut rows, (2, 0), || [0; 2]);
    let r: Vec<_> = rows.row(0).collect();
    assert!(r.contains(&Value::Text("h.example")), "{r:?}");
    assert!(r.contains(&Value::Text("SSH-2.0-srv")), "{r:?}");
}

#[test]
fn the_labellers_are_shown_no_packet_without_payload_and_tls_and_http_read_tcp_starts() {
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut a = super::Active::new(&names(&super::LABELLERS)).unwrap();
    a.start(0);
    // `tls` and `http` learn where the streams start from the flow table.
    assert!(a.reads_starts());
    assert_eq!(a.skip(0, true, true), None);
    assert_eq!(a.skip(0, false, true), None);
    assert!(!a.live(0, true, true) && a.live(0, true, false));
    // The flows' mask: nothing without payload on either side.
    assert_eq!(a.follows(0, true), 0b0101);
    assert_eq!(a.follows_new(true), 0b0101);
    let b = super::Active::new(&names(&["ssh", "dns"])).unwrap();
    assert!(!b.reads_starts());
    let c = super::Active::new(&names(&["http"])).unwrap();
    assert!(c.reads_starts());
}

#[test]
fn a_flow_the_labellers_decline_makes_no_state_and_records_nulls() {
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut a = super::Active::new(&names(&super::LABELLERS)).unwrap();
    assert_eq!(a.lazy, a.all);
    let starts = |st: &'static TcpStarts| {
        move |ip: &'static [u8], client: bool, flags: u8, payload: &'static [u8]| PacketView {
            ts: 1_000,
            from_client: client,
            index: 1,
            size: ip.len() as u16,
            tcp_flags: flags,
            proto: 6,
            payload_len: payload.len() as u16,
            payload,
            ip,
            tcp_starts: st,
        }
    };
    let view = starts(&TcpStarts::NONE);
    // Bits in registry order: payload, media, http, ssh, dns, tls.
    let (http, tls) = (1 << 2, 1 << 5);
    // A TCP client's first payload none of them reads (no SYN before it;
    // to `dns` a message with OPCODE 15): `http` waits for the server's.
    let six: &'static [u8] = b"\x01\x02\x03\x04\x7f\x06";
    let ip: &'static [u8] = tcp_packet(7, 0x18, six).leak();
    a.start(0);
    let (_, follows) = a.packet(0, &view(ip, true, 0x18, six));
    assert_eq!(follows, 0b0100, "the server's payload");
    assert_eq!(a.done[0], [a.all, a.all & !http, a.lazy], "none made");
    assert!(a.each.tls.as_ref().unwrap().states.is_empty());
    assert!(a.each.http.as_ref().unwrap().states.is_empty());
    let mut rows = crate::schema::Rows::default();
    a.record(0, &mut rows, (1, 46), || [0; 2]);
    assert!(rows.row(0).all(|v| v == Value::Null));
    // A SYN is shown to none (the table keeps where its stream starts);
    // a server's first payload that is not a request leaves `http`
    // waiting for the client's, and `tls` declines it (no SYN of the
    // server's side).
    a.start(1);
    let syn: &'static [u8] = tcp_packet(7, 0x02, b"").leak();
    a.packet(1, &view(syn, true, 0x02, b""));
    assert_eq!(a.done[1], [0, 0, a.lazy]);
    let client_syn: &'static TcpStarts = Box::leak(Box::new({
        let mut st = TcpStarts::NONE;
        st.set(0, 7);
        st
    }));
    let view = starts(client_syn);
    let (_, follows) = a.packet(1, &view(ip, false, 0x18, six));
    assert_eq!(a.done[1][1] & http, http);
    assert_eq!(a.done[1][0] & http, 0);
    assert_eq!(a.done[1][2] & tls, tls, "declined");
    assert_eq!(a.done[1][0] & tls, tls);
    assert_ne!(follows & 1, 0, "the client's payload is still read");
    let req: &'static [u8] = b"GET / HTTP/1.1\r\nHost: h.example\r\n\r\n";
    let ip2: &'static [u8] = tcp_packet(8, 0x18, req).leak();
    a.packet(1, &view(ip2, true, 0x18, req));
    assert_eq!(a.done[1][2] & http, 0, "made for the request");
    a.record(1, &mut rows, (3, 0), || [0; 2]);
    let r: Vec<_> = rows.row(1).collect();
    assert!(r.contains(&Value::Text("h.example")), "{r:?}");
}

#[test]
fn a_lazy_analyzers_states_are_made_for_the_flows_it_reads_and_return_with_their_records() {
    let mut a = super::Active::new(&["http".to_string()]).unwrap();
    let request = |host: &str| -> &'static [u8] {
        format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n")
            .into_bytes()
            .leak()
    };
    let view = |payload: &'static [u8]| PacketView {
        ts: 1_000,
        from_client: true,
        index: 1,
        size: 40 + payload.len() as u16,
        tcp_flags: 0x18,
        proto: 6,
        payload_len: payload.len() as u16,
        payload,
        ip: &[],
        tcp_starts: &TcpStarts::NONE,
    };
    let slots = |a: &super::Active| {
        let h = a.each.http.as_ref().unwrap();
        (h.states.len(), h.free.len(), h.index.len())
    };
    // Flows in slots 0, 5 and 9 read, the one in slot 3 declined: three
    // states, one index per slot up to the last.
    for (s, host) in [(0, "a.example"), (5, "b.example"), (9, "c.example")] {
        a.start(s);
        a.packet(s, &view(request(host)));
    }
    a.start(3);
    a.packet(3, &view(b"\x16\x03\x01\x00\x05\x01"));
    assert_eq!(slots(&a), (3, 0, 10));
    let mut rows = crate::schema::Rows::default();
    let host = |rows: &crate::schema::Rows, i| rows.row(i).any(|v| v == Value::Text("b.example"));
    a.record(5, &mut rows, (1, 0), || [0; 2]);
    assert!(host(&rows, 0));
    assert_eq!(slots(&a), (3, 1, 10), "slot 5's state returned");
    // The next flow made reuses it; a slot whose earlier flow was not
    // recorded (slot 0) starts its new flow with a fresh state there.
    a.start(12);
    a.packet(12, &view(request("d.example")));
    a.start(0);
    a.packet(0, &view(request("e.example")));
    assert_eq!(slots(&a), (3, 0, 13));
    for (s, want) in [
        (3, None),
        (0, Some("e.example")),
        (9, Some("c.example")),
        (12, Some("d.example")),
    ] {
        let mut rows = crate::schema::Rows::default();
        a.record(s, &mut rows, (1, 0), || [0; 2]);
        let row: Vec<_> = rows.row(0).collect();
        match want {
            Some(h) => assert!(row.contains(&Value::Text(h)), "slot {s}: {row:?}"),
            None => assert!(row.iter().all(|v| *v == Value::Null), "slot {s}: {row:?}"),
        }
    }
    assert_eq!(slots(&a), (3, 3, 13), "every state returned");
}

#[test]
fn a_slot_started_holds_a_fresh_state_whatever_the_array_held() {
    let mut v = vec![1, 2];
    super::start_slot(&mut v, 0, || 9);
    assert_eq!(v, [9, 2]);
    super::start_slot(&mut v, 2, || 7);
    assert_eq!(v, [9, 2, 7]);
    super::start_slot(&mut v, 5, || 4);
    assert_eq!(v, [9, 2, 7, 4, 4, 4]);
}

#[test]
fn arrays_reserved_for_a_tables_slots_do_not_move_while_its_flows_start() {
    // The labellers and media: the sparse analyzers' indexes and the
    // done words, populated ahead of use by the table's helper thread
    // (`flow/prefault.rs`), must stay where they were reserved while
    // every slot fills; media's states (lazy) are reserved, not
    // populated ahead.
    let names: Vec<String> = ["tls", "http", "ssh", "dns", "media"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut a = super::Active::new(&names).unwrap();
    let capacity = 5000;
    let arrays = a.reserve(capacity);
    assert_eq!(arrays.len(), 5, "four indexes and the done words");
    assert!(a.each.media.as_ref().unwrap().states.capacity() >= capacity);
    // A DNS query over UDP: `dns` makes the flow's state.
    let query = [
        0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, b'w', b'w', b'w', 0, 0, 1, 0, 1,
    ];
    for s in 0..capacity {
        a.start(s);
        a.packet(
            s,
            &PacketView {
                ts: 1,
                from_client: true,
                index: 1,
                size: 49,
                tcp_flags: 0,
                proto: 17,
                payload_len: query.len() as u16,
                payload: &query,
                ip: &[],
                tcp_starts: &TcpStarts::NONE,
            },
        );
    }
    let dns = &a.each.dns.as_ref().unwrap().index;
    assert_eq!(dns.len(), capacity, "a state made for every flow");
    assert!(arrays.contains(&(dns.as_ptr().cast(), 4)));
    assert_eq!(a.done.len(), capacity);
    assert!(arrays.contains(&(a.done.as_ptr().cast(), 6)));
    assert_eq!(a.reserve(capacity), arrays, "nothing moved");
}

/// Shows the same packets to `names` through the loop made for them and
/// through the one for any set: the same actions, follow masks, done bits
/// and records.
/// [`tcp_packet`], made a UDP datagram's when `udp`.
fn ip_packet(udp: bool, seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut ip = tcp_packet(seq, flags, payload);
    if udp {
        ip[9] = 17;
    }
    ip
}

/// The view of IP packet `ip` (from [`ip_packet`]), whose payload is
/// `payload`, at `ts`, the flow's packet `index`.
fn view_of<'a>(
    ip: &'a [u8],
    udp: bool,
    ts: u64,
    from_client: bool,
    index: u32,
    flags: u8,
    payload: &'a [u8],
) -> PacketView<'a> {
    PacketView {
        ts,
        from_client,
        index,
        size: ip.len() as u16,
        tcp_flags: flags,
        proto: if udp { 17 } else { 6 },
        payload_len: payload.len() as u16,
        payload,
        ip,
        tcp_starts: &crate::analyze::TcpStarts::NONE,
    }
}

fn same_through_either_loop(names: &[&str], route: super::Route) {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let mut own = super::Active::new(&names).unwrap();
    assert_eq!(own.route, route);
    let mut any = super::Active::new(&names).unwrap();
    any.route = super::Route::Any;
    let hello: &[u8] = b"\x16\x03\x01\x00\x40\x01\x00\x00\x3c\x03\x03";
    let dns_q: &[u8] = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x01a\x00\x00\x01\x00\x01";
    let mut dns_tcp = (dns_q.len() as u16).to_be_bytes().to_vec();
    dns_tcp.extend_from_slice(dns_q);
    let rtp: &[u8] = &[
        0x80, 0x00, 0x01, 0x02, 0, 0, 0, 160, 1, 2, 3, 4, 0xd5, 0xd5, 0xd5, 0xd5,
    ];
    let payloads: [&[u8]; 9] = [
        b"",
        hello,
        b"SSH-2.0-x\r\n",
        b"GET / HTTP/1.1\r\nHost: h.example\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n\r\n",
        b"\x01\x02\x03\x04\x7f\x06",
        &dns_tcp,
        dns_q,
        rtp,
    ];
    let (mut rows_own, mut rows_any) = (
        crate::schema::Rows::default(),
        crate::schema::Rows::default(),
    );
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for flow in 0..400u64 {
        let s = (flow % 13) as usize;
        own.start(s);
        any.start(s);
        let udp = next(4) == 0;
        for i in 0..1 + next(8) {
            let client = i == 0 || next(2) == 0;
            let flags = if udp {
                0
            } else {
                [0x02, 0x12, 0x10, 0x18][next(4) as usize]
            };
            let payload = payloads[next(payloads.len() as u64) as usize];
            let ip = ip_packet(udp, 1000 + i as u32, flags, payload);
            let ts = 1_000_000 * flow + 20_000_000 * i;
            let view = view_of(&ip, udp, ts, client, i as u32 + 1, flags, payload);
            assert_eq!(
                own.packet(s, &view),
                any.packet(s, &view),
                "flow {flow} packet {i}"
            );
            assert_eq!(own.follows(s, !udp), any.follows(s, !udp));
        }
        assert_eq!(own.done, any.done, "flow {flow}");
        own.record(s, &mut rows_own, (8, 800), || [0; 2]);
        any.record(s, &mut rows_any, (8, 800), || [0; 2]);
        let r = flow as usize;
        assert_eq!(
            rows_own.row(r).collect::<Vec<_>>(),
            rows_any.row(r).collect::<Vec<_>>(),
            "flow {flow}"
        );
    }
}

#[test]
fn a_loop_made_for_the_analyzers_on_shows_them_what_the_general_one_does() {
    same_through_either_loop(&super::LABELLERS, super::Route::Labellers);
    same_through_either_loop(&["media"], super::Route::media);
    same_through_either_loop(&["tls"], super::Route::tls);
    same_through_either_loop(&["http"], super::Route::http);
    same_through_either_loop(&["payload"], super::Route::payload);
    // Two analyzers: the general loop.
    same_through_either_loop(&["media", "tls"], super::Route::Any);
}

/// [`super::Active::declines_first`] of the first packets of 400 flows
/// against showing them (`packet`): where it says declined, the packet
/// leaves the flow followed by none and changes nothing its record
/// says; returns how many it declined.
fn declined_first_as_shown(names: &[&str]) -> usize {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let mut screened = super::Active::new(&names).unwrap();
    let mut shown = super::Active::new(&names).unwrap();
    let hello: &[u8] = b"\x16\x03\x01\x00\x40\x01\x00\x00\x3c\x03\x03";
    let dns_q: &[u8] = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x01a\x00\x00\x01\x00\x01";
    let quic = [0xc3u8; 1250];
    let payloads: [&[u8]; 8] = [
        hello,
        b"SSH-2.0-x\r\n",
        b"GET / HTTP/1.1\r\nHost: h.example\r\n\r\n",
        b"\x01\x02\x03\x04\x7f\x06",
        b"\x00\x10\x00\x00",
        dns_q,
        &quic,
        &[0x80, 0x00, 0x01, 0x02, 0, 0, 0, 160, 1, 2, 3, 4],
    ];
    let (mut rows_a, mut rows_b) = (
        crate::schema::Rows::default(),
        crate::schema::Rows::default(),
    );
    let mut declined = 0;
    for flow in 0..400usize {
        let s = flow % 13;
        screened.start(s);
        shown.start(s);
        let udp = flow % 3 == 0;
        let payload = payloads[flow % payloads.len()];
        let flags = if udp { 0 } else { [0x02, 0x18][flow / 8 % 2] };
        let ip = ip_packet(udp, 1000, flags, payload);
        let view = view_of(&ip, udp, 1_000_000 * flow as u64, true, 1, flags, payload);
        let seen = shown.packet(s, &view);
        if screened.declines_first(&view) {
            declined += 1;
            assert_eq!(seen, (super::Action::Continue, 0), "flow {flow}");
        } else {
            assert_eq!(screened.packet(s, &view), seen, "flow {flow}");
        }
        screened.record(s, &mut rows_a, (1, 100), || [40000, 443]);
        shown.record(s, &mut rows_b, (1, 100), || [40000, 443]);
        assert_eq!(
            rows_a.row(flow).collect::<Vec<_>>(),
            rows_b.row(flow).collect::<Vec<_>>(),
            "flow {flow}"
        );
    }
    declined
}

#[test]
fn a_first_packet_declined_before_the_call_is_one_the_call_would_let_go() {
    let all = |n: usize| n > 0 && n < 400;
    assert!(all(declined_first_as_shown(&super::LABELLERS)));
    assert!(all(declined_first_as_shown(&["tls"])));
    assert!(all(declined_first_as_shown(&["media"])));
    // The general route: both lazy.
    assert!(all(declined_first_as_shown(&["media", "tls"])));
    // Not lazy: never declined before the call.
    assert_eq!(declined_first_as_shown(&["payload"]), 0);
    assert_eq!(declined_first_as_shown(&["payload", "tls"]), 0);
}
