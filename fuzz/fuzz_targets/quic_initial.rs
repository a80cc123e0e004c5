//! Fuzz target for the QUIC Initial reader (`earlybird::analyze::quic`)
//! and the `tls` analyzer: the bytes as a datagram (long header, header
//! protection and AEAD removal with the keys of its own connection ID),
//! as Initial plaintext frames, as a Google QUIC datagram; then as the
//! packets of a UDP flow and of a TCP flow (2-byte headers: direction and
//! length) through the analyzer. Nothing may panic; errors' offsets lie
//! within the bytes.
#![no_main]

use earlybird::analyze::tls::Tls;
use earlybird::analyze::{handshake, quic, Analyzer, PacketView, TcpStarts};
use libfuzzer_sys::fuzz_target;

fn flow(proto: u8, mut data: &[u8]) {
    let tls = Tls::default();
    let mut st = Default::default();
    let mut i = 0;
    // Where the streams start: with bit 1 of a packet's first header byte,
    // as if its side's SYN without payload (sequence number one before
    // this segment's) had come first.
    let mut starts = TcpStarts::NONE;
    while data.len() >= 2 {
        let n = usize::from(data[1]) * 8;
        let n = n.min(data.len() - 2);
        let pkt = &data[2..2 + n];
        // TCP: a 20-byte IPv4 header and a 20-byte TCP header first.
        let mut ip = Vec::new();
        if proto == 6 {
            ip.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0, 0, 64, 6]);
            ip.resize(20, 0);
        }
        ip.extend_from_slice(pkt);
        let at = if proto == 6 {
            (20 + 20).min(ip.len())
        } else {
            0
        };
        let side = usize::from(data[0] & 1);
        if proto == 6 && data[0] & 2 != 0 && starts.syn(side).is_none() {
            if let Some((seq, _)) = handshake::tcp_seq(&ip) {
                starts.set(side, seq.wrapping_sub(1));
            }
        }
        let view = PacketView {
            ts: i,
            from_client: data[0] & 1 == 0,
            index: i as u32 + 1,
            size: ip.len() as u16,
            tcp_flags: ip.get(33).copied().unwrap_or(0),
            proto,
            payload_len: (ip.len() - at + usize::from(data[0] >> 4)) as u16,
            payload: &ip[at..],
            ip: &ip,
            tcp_starts: &starts,
        };
        tls.packet(&mut st, &view);
        data = &data[2 + n..];
        i += 1;
    }
    tls.finish(&mut st);
    let mut rows = earlybird::Rows::default();
    rows.push_row(Tls::FIELDS.len(), |c| tls.record(&st, c));
}

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = quic::long_header(data) {
        assert!(h.pn_offset <= data.len());
        if let Some(keys) = quic::initial_keys(h.version, h.dcid, false) {
            if let Err(e) = quic::open_initial(data, &h, &keys) {
                assert!(e.offset <= data.len());
            }
        }
    }
    let _ = quic::crypto_frames(data, |_, d| assert!(d.len() <= data.len()));
    let _ = quic::gquic_sni(data);
    flow(17, data);
    flow(6, data);
});
