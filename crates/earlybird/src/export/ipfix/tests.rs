//! Tests of the IPFIX exporter: unidirectional records, UDP messages
//! within the MTU with templates refreshed, a TCP queue that drops instead
//! of waiting (loopback only).

use std::net::{TcpListener, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

use super::transport::{NetConfig, TcpTransport, Transport};
use super::*;
use crate::export::compliance::{sample, Shared};
use crate::export::compliance_ipfix;
use crate::flow::record::RecordBatch;

fn batch(n: usize) -> RecordBatch {
    let mut b = RecordBatch::with_capacity(n, 8);
    for (r, e) in sample().iter().cycle().take(n) {
        b.push(*r, e);
    }
    b
}

fn opts() -> ExportOptions {
    ExportOptions {
        early_packets: 8,
        class_names: vec!["tls".to_string(), "dns".to_string()].into(),
        community_id_seed: crate::export::compliance::SEED,
        ..Default::default()
    }
}

#[test]
fn unidirectional_records_have_no_reverse_elements() {
    let shared = Shared::default();
    let uni = IpfixOptions {
        biflow: false,
        ..IpfixOptions::default()
    };
    let mut ex = to_writer(Box::new(shared.clone()), "ipfix:t", &opts(), &uni);
    let b = batch(500);
    ex.write_batch(&b).unwrap();
    ex.finish().unwrap();
    let bytes = shared.0.lock().unwrap().clone();
    let all: Vec<_> = b.iter().map(|(r, e)| (*r, e.to_vec())).collect();
    let names = ["tls".to_string(), "dns".to_string()];
    compliance_ipfix::check("uni", &bytes, &all, 8, &names, false, 65535);
}

#[test]
fn udp_messages_fit_the_mtu_and_templates_are_refreshed() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let port = rx.local_addr().unwrap().port();
    let o = IpfixOptions {
        mtu: 600,
        domain: 9,
        template_refresh_messages: 5,
        ..IpfixOptions::default()
    };
    let out = format!("ipfix+udp://127.0.0.1:{port}");
    let mut ex = open(Path::new(&out), &opts(), &o).unwrap();
    assert_eq!(ex.name(), out);
    let b = batch(200);
    ex.write_batch(&b).unwrap();
    ex.finish().unwrap();
    let mut stream = Vec::new();
    let (mut templates, mut data) = (0usize, 0usize);
    let mut buf = [0u8; 2048];
    while let Ok(n) = rx.recv(&mut buf) {
        assert!(n <= 600, "{n} bytes");
        assert_eq!(&buf[12..16], &9u32.to_be_bytes());
        if message::set_id(&buf[..n]) == message::TEMPLATE_SET {
            templates += 1;
        } else {
            data += 1;
        }
        stream.extend_from_slice(&buf[..n]);
    }
    // Templates first, then again every 5 data messages.
    assert!(data > 10, "{data} data messages");
    let per_refresh = message::template_messages(&elements::templates(true), 600, 9)
        .unwrap()
        .len();
    assert_eq!(templates, per_refresh * data.div_ceil(5));
    let all: Vec<_> = b.iter().map(|(r, e)| (*r, e.to_vec())).collect();
    let names = ["tls".to_string(), "dns".to_string()];
    compliance_ipfix::check("udp", &stream, &all, 8, &names, true, 600);
}

#[test]
fn a_tiny_mtu_is_an_error_naming_the_output() {
    let o = IpfixOptions {
        mtu: 100,
        ..IpfixOptions::default()
    };
    let err = open(Path::new("ipfix+udp://127.0.0.1:9"), &opts(), &o)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("ipfix+udp://127.0.0.1:9") && err.contains("cannot hold"),
        "{err}"
    );
}

#[test]
fn a_stalled_tcp_collector_fills_the_queue_and_sends_never_wait() {
    // Accepts (the kernel does), never reads.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = NetConfig {
        refresh: Duration::from_secs(60),
        refresh_messages: 100,
        queue: 4,
        linger: Duration::from_millis(200),
    };
    let mut t = TcpTransport::start(addr, Vec::new(), cfg, "ipfix+tcp://stalled").unwrap();
    let msg = vec![0u8; 60_000];
    let start = Instant::now();
    // 120 MB: far more than the socket buffers hold.
    for _ in 0..2000 {
        t.send(&msg, 10).unwrap();
    }
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert!(t.dropped() > 0);
    let err = t.finish().unwrap_err().to_string();
    assert!(
        err.contains("ipfix+tcp://stalled") && err.contains("of 20000 records not delivered"),
        "{err}"
    );
    drop(listener);
}

/// Early-verdict events: each row one data record of template 260 (IPv4)
/// or 261 (IPv6), read back by the independent decoder field by field.
#[test]
fn events_are_data_records_of_their_own_templates() {
    use crate::flow::events::VERDICTS;
    use crate::schema::RowBatch;
    let mut rows = RowBatch::new(&VERDICTS);
    let events: [(&str, &str, u64, u64, &str); 3] = [
        (
            "10.0.0.1",
            "192.0.2.7",
            1_600_000_000_000_000_000,
            1_600_000_000_250_000_000,
            "TLS",
        ),
        (
            "2001:db8::1",
            "2001:db8::2",
            1_600_000_001_000_000_000,
            1_600_000_001_000_004_000,
            "DNS",
        ),
        (
            "10.0.0.9",
            "2001:db8::2",
            1,
            2,
            "mixed families: not encoded",
        ),
    ];
    for (src, dst, first, at, app) in events {
        rows.push(|c| {
            c.text(src);
            c.text(dst);
            c.u64(40_000);
            c.u64(443);
            c.u64(6);
            c.u64(7);
            c.text("");
            c.u64(0);
            c.u64(first);
            c.u64(at);
            c.u64(at - first);
            c.text(app);
            c.f64(0.75);
            c.u64(4);
        });
    }
    let out = Shared::default();
    let mut ex = events_to_writer(
        Box::new(out.clone()),
        "ipfix:events",
        &IpfixOptions::default(),
    );
    assert!(ex.kind().is(&VERDICTS));
    ex.write_rows(&rows).unwrap();
    ex.finish().unwrap();
    // A flow batch is refused by an events output.
    assert!(ex.write_batch(&batch(1)).is_err());
    let bytes = out.0.lock().unwrap().clone();
    let recs = compliance_ipfix::decode("events", &bytes, 65535);
    assert_eq!(recs.len(), 2, "the mixed-family row is left out");
    let field = |r: &compliance_ipfix::Rec, pen: u32, id: u16| -> Vec<u8> {
        r.iter()
            .find(|(p, i, _)| *p == pen && *i == id)
            .map(|(_, _, v)| v.clone())
            .unwrap_or_else(|| panic!("no element {pen}/{id}"))
    };
    let be = |b: Vec<u8>| b.iter().fold(0u64, |a, &x| (a << 8) | u64::from(x));
    let (t4, r4) = &recs[0];
    assert_eq!(*t4, 260);
    assert_eq!(field(r4, 0, 8), vec![10, 0, 0, 1]);
    assert_eq!(field(r4, 0, 12), vec![192, 0, 2, 7]);
    assert_eq!(be(field(r4, 0, 7)), 40_000);
    assert_eq!(be(field(r4, 0, 11)), 443);
    assert_eq!(be(field(r4, 0, 4)), 6);
    assert_eq!(be(field(r4, 0, 58)), 7);
    assert_eq!(field(r4, PEN_EARLYBIRD, 1), b"TLS");
    assert_eq!(field(r4, PEN_EARLYBIRD, 2), 0.75f32.to_be_bytes());
    assert_eq!(be(field(r4, PEN_EARLYBIRD, 3)), 4);
    assert_eq!(be(field(r4, PEN_EARLYBIRD, 7)), 250_000_000);
    // Times: NTP seconds since 1900 and a binary fraction.
    let ntp = be(field(r4, 0, 325));
    assert_eq!((ntp >> 32) - 2_208_988_800, 1_600_000_000);
    let frac_ns = ((ntp & 0xffff_ffff) * 1_000_000_000) >> 32;
    assert!((249_999_999..=250_000_000).contains(&frac_ns), "{frac_ns}");
    let (t6, r6) = &recs[1];
    assert_eq!(*t6, 261);
    let v6: std::net::Ipv6Addr = "2001:db8::1".parse().unwrap();
    assert_eq!(field(r6, 0, 27), v6.octets().to_vec());
    assert_eq!(field(r6, PEN_EARLYBIRD, 1), b"DNS");
    assert_eq!(be(field(r6, PEN_EARLYBIRD, 7)), 4_000);
}
