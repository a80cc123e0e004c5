//! Fuzz target for the media analyzer's wire parsers: STUN (RFC 8489),
//! TURN ChannelData (RFC 8656), DTLS record headers (RFC 6347/9147),
//! WireGuard message heads and the RFC 9443 demultiplexer. None panics;
//! every view they return lies inside the input; attribute walks end; a
//! WireGuard transport message's inner length is its wire length less 32,
//! a multiple of 16.
#![no_main]

use earlybird::testing::{
    demux_classify, unwrap_turn, ChannelData, DtlsRecord, Stun, WireGuardMessage,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = demux_classify(data);
    if let Ok(s) = Stun::parse(data) {
        assert!(s.wire_len() <= data.len());
        assert_eq!(s.wire_len() % 4, 0);
        let mut n = 0;
        for (_, v) in s.attrs() {
            assert!(v.len() <= s.body.len());
            n += 1;
        }
        assert!(n <= s.body.len() / 4);
        let _ = (
            s.software(),
            s.username(),
            s.data(),
            s.xor_mapped(),
            s.xor_peer(),
        );
    }
    if let Ok(c) = ChannelData::parse(data) {
        assert!(c.data.len() + 4 <= data.len());
        assert!((0x4000..=0x4fff).contains(&c.channel));
    }
    if let Ok(r) = DtlsRecord::parse(data) {
        assert!(r.header_len + r.body.len() <= data.len());
        let _ = r.handshake_type();
    }
    if let Some((_, inner)) = unwrap_turn(data) {
        assert!(inner.len() < data.len());
    }
    // The wire length as any u16, the captured bytes as given.
    let wire = data.len().min(usize::from(u16::MAX)) as u16;
    for len in [wire, wire.wrapping_mul(16), u16::MAX] {
        if let Some(WireGuardMessage::Data(inner)) = WireGuardMessage::parse(data, len) {
            assert_eq!(inner + 32, len);
            assert_eq!(inner % 16, 0);
        }
    }
});
