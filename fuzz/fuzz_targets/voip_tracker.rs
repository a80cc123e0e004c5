//! Fuzz target for the call tracker (`earlybird::voip::tracker`) and the
//! frame extraction in front of it (`voip::tap::extract`): the input is cut
//! into packets (2-byte header: length, flags), each both decoded as an
//! Ethernet frame and fed as a UDP datagram, a TCP segment or an IP
//! fragment between a few endpoints, with small tables so that every
//! bound is reached. Nothing may panic; the tables stay within their
//! bounds; `finish` empties them.
#![no_main]

use earlybird::testing::Decoded;
use earlybird::voip::tap::extract;
use earlybird::voip::tracker::{Fragment, Tcp, Tracker, TrackerConfig, VoipPacket};
use earlybird::LinkType;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let cfg = TrackerConfig {
        max_calls: 4,
        max_streams: 8,
        max_tcp: 2,
        tcp_window: 256,
        max_fragments: 2,
        call_timeout_ns: 1_000,
        linger_ns: 100,
        stream_timeout_ns: 500,
        ..TrackerConfig::default()
    };
    let mut t = Tracker::new(cfg);
    let mut d = Decoded::default();
    let mut rest = data;
    let mut ts = 0u64;
    while let Some((h, tail)) = rest.split_first_chunk::<2>() {
        let len = (h[0] as usize).min(tail.len());
        let (payload, next) = tail.split_at(len);
        rest = next;
        ts += u64::from(h[1] & 0x0f) * 37;
        if let Some(p) = extract(ts, LinkType::Ethernet, payload, &mut d) {
            t.packet(&p);
        }
        let mut ip = [0u8; 16];
        ip[15] = h[1] >> 6;
        let mut other = [0u8; 16];
        other[15] = 9;
        let kind = (h[1] >> 4) & 3;
        let p = VoipPacket {
            ts,
            src: ip,
            dst: other,
            sport: 5060 + u16::from(h[1] & 1),
            dport: 5060,
            tcp: (kind == 1).then_some(Tcp {
                seq: u32::from(h[0]) * 7,
                flags: h[1] & 0x07,
            }),
            frag: (kind == 2).then_some(Fragment {
                ident: u32::from(h[1] & 3),
                offset: u32::from(h[0] & 0xf8),
                more: h[0] & 1 == 1,
                version: 4,
            }),
            sctp: kind == 3,
            payload,
        };
        t.packet(&p);
        assert!(t.open_calls() <= 4 && t.open_streams() <= 8);
    }
    t.finish();
    assert_eq!((t.open_calls(), t.open_streams()), (0, 0));
});
