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
        err.contains("ipfix+tcp://stalled") && err.contains("of 20000 flow records not delivered"),
        "{err}"
    );
    drop(listener);
}
