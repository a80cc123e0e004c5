//! The analyzer over TCP segments out of order, cut by a snap length, and
//! over the QUIC Initial packets of RFC 9001 and RFC 9369.

use super::*;
use crate::analyze::TcpStarts;
use crate::schema::{OwnedValue, Rows};

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// RFC 9001 Appendix A.2's ClientHello as one TLS record.
fn client_hello_record() -> Vec<u8> {
    let m = unhex(concat!(
        "010000ed0303ebf8fa56f12939b9584a3896472ec40bb863cfd3e86804fe3a47",
        "f06a2b69484c00000413011302010000c000000010000e00000b6578616d706c",
        "652e636f6dff01000100000a00080006001d0017001800100007000504616c70",
        "6e000500050100000000003300260024001d00209370b2c9caa47fbabaf4559f",
        "edba753de171fa71f50f1ce15d43e994ec74d748002b0003020304000d001000",
        "0e0403050306030203080408050806002d00020101001c000240010039003204",
        "08ffffffffffffffff05048000ffff07048000ffff0801100104800075300901",
        "100f088394c8f03e51570806048000ffff",
    ));
    let mut r = vec![22, 3, 1, 0, m.len() as u8];
    r.extend_from_slice(&m);
    r
}

/// RFC 9001 Appendix A.3's ServerHello as one TLS record.
fn server_hello_record() -> Vec<u8> {
    let m = unhex(concat!(
        "020000560303eefce7f7b37ba1d1632e96677825ddf73988cfc79825df566dc5",
        "430b9a045a1200130100002e00330024001d00209d3c940d89690b84d08a6099",
        "3c144eca684d1081287c834d5311bcf32bb9da1a002b00020304",
    ));
    let mut r = vec![22, 3, 3, 0, m.len() as u8];
    r.extend_from_slice(&m);
    r
}

/// An IPv4 + TCP packet (no options) with `payload`.
fn tcp_packet(seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    use crate::decode::testutil::{ipv4, tcp_seq};
    ipv4(6, &tcp_seq(0xc000, 443, seq, flags, payload))
}

/// Feeds `(from_client, ip packet, wire payload length)` to a fresh flow
/// as the flow table does (the sequence number of a TCP SYN without
/// payload kept in the flow's [`TcpStarts`], a packet without payload not
/// shown) and returns its record's cells.
fn run(proto: u8, packets: &[(bool, Vec<u8>, usize)], payload_at: usize) -> Vec<OwnedValue> {
    let tls = Tls::default();
    let mut st = State::default();
    let mut starts = TcpStarts::NONE;
    for (i, (from_client, ip, wire)) in packets.iter().enumerate() {
        let payload = &ip[payload_at.min(ip.len())..];
        let flags = if proto == TCP { ip[33] } else { 0 };
        if flags & SYN != 0 && *wire == 0 {
            let (seq, _) = tcp_seq(ip).unwrap();
            starts.set(usize::from(!from_client), seq);
        }
        if *wire == 0 {
            continue;
        }
        let view = PacketView {
            ts: i as u64,
            from_client: *from_client,
            index: i as u32 + 1,
            size: ip.len() as u16,
            tcp_flags: flags,
            proto,
            payload_len: *wire as u16,
            payload,
            ip,
            tcp_starts: &starts,
        };
        tls.packet(&mut st, &view);
    }
    tls.finish(&mut st);
    let mut rows = Rows::default();
    rows.push_row(Tls::FIELDS.len(), |c| tls.record(&st, c));
    let cells: Vec<OwnedValue> = rows.row(0).map(|v| v.to_owned()).collect();
    drop(st);
    assert_eq!(
        tls.held.load(Ordering::Relaxed),
        0,
        "every byte returned to the account"
    );
    cells
}

fn text(s: &str) -> OwnedValue {
    OwnedValue::Text(s.into())
}

#[test]
fn tcp_hello_out_of_order_with_retransmission() {
    let ch = client_hello_record();
    let sh = server_hello_record();
    let isn = 0xffff_ff00u32; // the stream wraps the sequence space
    let c = |off: usize, b: &[u8]| {
        (
            true,
            tcp_packet(isn.wrapping_add(1 + off as u32), 0x18, b),
            b.len(),
        )
    };
    let packets = vec![
        (true, tcp_packet(isn, SYN, &[]), 0),
        (false, tcp_packet(7000, SYN | 0x10, &[]), 0),
        c(200, &ch[200..]),
        c(100, &ch[100..200]),
        c(100, &ch[100..150]), // retransmitted
        c(0, &ch[..100]),
        (false, tcp_packet(7001, 0x18, &sh), sh.len()),
    ];
    let cells = run(TCP, &packets, 40);
    assert_eq!(cells[0], text("example.com"));
    assert_eq!(cells[1], text("alpn"));
    assert_eq!(cells[2], text("1.3"));
    assert!(matches!(&cells[3], OwnedValue::Text(j) if j.starts_with("t13d0211an_")));
    assert_eq!(cells[5], OwnedValue::U64(0));
    assert_eq!(cells[6], OwnedValue::Null);
    assert_eq!(cells[7], text("ok"));
}

#[test]
fn tcp_hello_cut_by_the_snap_length_or_a_hole() {
    let ch = client_hello_record();
    // Captured 100 bytes of a 250-byte segment.
    let mut p = tcp_packet(1, 0x18, &ch[..100]);
    p.truncate(140);
    let cells = run(TCP, &[(true, p, ch.len())], 40);
    assert_eq!(cells[0], OwnedValue::Null);
    assert_eq!(cells[7], text("cut-snap"));
    // Bytes 100 to 120 never arrive.
    let cells = run(
        TCP,
        &[
            (true, tcp_packet(0, SYN, &[]), 0),
            (true, tcp_packet(121, 0x18, &ch[120..]), ch.len() - 120),
            (true, tcp_packet(1, 0x18, &ch[..100]), 100),
        ],
        40,
    );
    assert_eq!(cells[0], OwnedValue::Null);
    assert_eq!(cells[7], text("cut-gap"));
    // The stream's start never arrives: not known to be TLS at all.
    let cells = run(
        TCP,
        &[
            (true, tcp_packet(0, SYN, &[]), 0),
            (true, tcp_packet(101, 0x18, &ch[100..]), ch.len() - 100),
        ],
        40,
    );
    assert!(cells.iter().all(|c| *c == OwnedValue::Null));
    // It arrives last: the hello is read.
    let cells = run(
        TCP,
        &[
            (true, tcp_packet(0, SYN, &[]), 0),
            (true, tcp_packet(101, 0x18, &ch[100..]), ch.len() - 100),
            (true, tcp_packet(1, 0x18, &ch[..100]), 100),
        ],
        40,
    );
    assert_eq!(cells[0], text("example.com"));
    // A server's SYN-ACK first (the capture missed the client's SYN): the
    // side that sends the ClientHello is the TLS client.
    let cells = run(
        TCP,
        &[
            (true, tcp_packet(7000, SYN | 0x10, &[]), 0),
            (false, tcp_packet(1, 0x18, &ch), ch.len()),
            (true, tcp_packet(7001, 0x18, &server_hello_record()), 95),
        ],
        40,
    );
    assert_eq!(cells[0], text("example.com"));
    assert_eq!(cells[2], text("1.3"));
    // The server's SYN-ACK comes after the client's hello, its hello's
    // second half before its first: its stream starts after the SYN-ACK.
    let sh = server_hello_record();
    let cells = run(
        TCP,
        &[
            (true, tcp_packet(0, SYN, &[]), 0),
            (true, tcp_packet(1, 0x18, &ch), ch.len()),
            (false, tcp_packet(7000, SYN | 0x10, &[]), 0),
            (false, tcp_packet(7051, 0x18, &sh[50..]), sh.len() - 50),
            (false, tcp_packet(7001, 0x18, &sh[..50]), 50),
        ],
        40,
    );
    assert_eq!(cells[0], text("example.com"));
    assert_eq!(cells[2], text("1.3"));
    // Half the hello, then the flow ends.
    let cells = run(TCP, &[(true, tcp_packet(1, 0x18, &ch[..120]), 120)], 40);
    assert_eq!(cells[7], text("incomplete"));
}

#[test]
fn not_tls_leaves_every_field_empty() {
    let cells = run(
        TCP,
        &[(true, tcp_packet(1, 0x18, b"GET / HTTP/1.1\r\n"), 16)],
        40,
    );
    assert!(cells.iter().all(|c| *c == OwnedValue::Null));
    let dns = vec![0x12u8; 60];
    let cells = run(UDP, &[(true, dns.clone(), 60)], 0);
    assert!(cells.iter().all(|c| *c == OwnedValue::Null));
}

#[test]
fn quic_initials_v1_and_v2() {
    for (packet, version) in [
        (crate::analyze::quic::vectors::V1_CLIENT_PACKET, "1"),
        (crate::analyze::quic::vectors::V2_CLIENT_PACKET, "2"),
    ] {
        let d = unhex(packet);
        let cells = run(UDP, &[(true, d.clone(), d.len())], 0);
        assert_eq!(cells[0], text("example.com"));
        assert!(matches!(&cells[3], OwnedValue::Text(j) if j.starts_with("q13d0211an_")));
        assert_eq!(cells[6], text(version));
        assert_eq!(cells[7], text("ok"));
        // The same packet cut by a 256-byte snap length.
        let cells = run(UDP, &[(true, d[..256].to_vec(), d.len())], 0);
        assert_eq!(cells[0], OwnedValue::Null);
        assert_eq!(cells[7], text("cut-snap"));
    }
}

#[test]
fn quic_unknown_version_is_named_not_guessed() {
    let mut d = unhex(crate::analyze::quic::vectors::V1_CLIENT_PACKET);
    d[1..5].copy_from_slice(&0xabcd_0001u32.to_be_bytes());
    let cells = run(UDP, &[(true, d.clone(), d.len())], 0);
    assert_eq!(cells[0], OwnedValue::Null);
    assert_eq!(cells[6], text("0xabcd0001"));
    assert_eq!(cells[7], text("unsupported QUIC version 0xabcd0001"));
    // A known version whose Initial does not open with its keys.
    d[1..5].copy_from_slice(&0xfaceb002u32.to_be_bytes());
    let cells = run(UDP, &[(true, d.clone(), d.len())], 0);
    assert_eq!(cells[0], OwnedValue::Null);
    assert_eq!(cells[6], text("0xfaceb002"));
    assert_eq!(cells[7], text("no QUIC Initial opened"));
}

/// What every flow of a table pays with the analyzer on, before its first
/// payload looks like a handshake: the per-flow state, no allocation.
#[test]
fn a_flow_that_is_not_a_handshake_costs_32_bytes() {
    assert!(
        std::mem::size_of::<State>() <= 32,
        "{}",
        std::mem::size_of::<State>()
    );
    let tls = Tls::default();
    let mut st = State::default();
    let ip = tcp_packet(1, 0x18, b"GET / HTTP/1.1\r\n");
    let view = PacketView {
        ts: 0,
        from_client: true,
        index: 1,
        size: ip.len() as u16,
        tcp_flags: 0x18,
        proto: TCP,
        payload_len: 16,
        payload: &ip[40..],
        ip: &ip,
        tcp_starts: &crate::analyze::TcpStarts::NONE,
    };
    tls.packet(&mut st, &view);
    assert!(st.hs.is_none() && st.done);
}

#[test]
fn a_client_hello_starts_with_a_handshake_record_of_version_3_and_type_1() {
    let hello = client_hello_record();
    assert!(client_hello_start(&hello));
    assert!(client_hello_start(&hello[..6]));
    assert!(
        !client_hello_start(&hello[..5]),
        "cut before the message type"
    );
    for (at, other) in [(0, 23u8), (1, 2), (5, 2)] {
        let mut b = hello.clone();
        b[at] = other;
        assert!(!client_hello_start(&b), "byte {at} = {other}");
    }
    // Bytes 2 to 4 (minor version, length) may be anything.
    let mut b = hello[..6].to_vec();
    b[2..5].copy_from_slice(&[0xff, 0xff, 0xff]);
    assert!(client_hello_start(&b));
}

/// `declines` says of a flow's first payload what `packet` does with a
/// `Default` state: over TCP, with or without a SYN of either side seen,
/// at its stream's start, past it, on a SYN (TCP Fast Open), from either
/// side, a ClientHello's start or not, its header captured or not. A
/// declined packet leaves a state that is done and records nothing.
#[test]
fn declines_agrees_with_packet_at_and_past_the_stream_start() {
    let tls = Tls::default();
    let hello = client_hello_record();
    let mut declined_with_syn = 0;
    for payload in [
        &b"\x01\x02\x03\x04\x7f\x06"[..],
        b"SSH-2.0-x\r\n",
        &hello[..],
    ] {
        for (seq, flags) in [(8u32, 0x18u8), (100, 0x18), (7, 0x02), (7, 0x12)] {
            for from_client in [true, false] {
                for syns in [
                    [None, None],
                    [Some(7), None],
                    [None, Some(7)],
                    [Some(7), Some(7)],
                ] {
                    for cut in [false, true] {
                        let ip = tcp_packet(seq, flags, payload);
                        // Cut: the TCP header not captured whole.
                        let ip = if cut { &ip[..30] } else { &ip[..] };
                        let mut starts = TcpStarts::NONE;
                        for (side, s) in syns.iter().enumerate() {
                            if let Some(s) = s {
                                starts.set(side, *s);
                            }
                        }
                        let view = PacketView {
                            ts: 0,
                            from_client,
                            index: 2,
                            size: 40 + payload.len() as u16,
                            tcp_flags: flags,
                            proto: TCP,
                            payload_len: payload.len() as u16,
                            payload: if cut { &[] } else { &ip[40..] },
                            ip,
                            tcp_starts: &starts,
                        };
                        let mut st = State::default();
                        tls.packet(&mut st, &view);
                        let case = format!("{payload:?} seq {seq} flags {flags:#x} client {from_client} syns {syns:?} cut {cut}");
                        match tls.declines(&view) {
                            Some(sides) => {
                                assert_eq!(sides, [true; 2], "{case}");
                                assert!(tls.done(&st) && st.hs.is_none(), "{case}");
                                if syns[usize::from(!from_client)].is_some() {
                                    declined_with_syn += 1;
                                }
                            }
                            None => assert!(
                                !(tls.done(&st) && st.hs.is_none()),
                                "declinable, not declined: {case}"
                            ),
                        }
                        tls.finish(&mut st);
                    }
                }
            }
        }
    }
    assert!(
        declined_with_syn > 0,
        "a payload at its stream's start after its SYN"
    );
}
