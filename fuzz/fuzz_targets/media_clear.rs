//! Fuzz target for the media analyzer's clear-header layer: the first
//! byte picks how the rest is read (UDP datagrams, or TCP segments framed
//! as TURN over TCP or ICE-TCP sends them), then segments are cut from it
//! (a length byte, a direction bit, a gap byte, then the bytes) and fed as
//! one flow. It never panics, its verdict's packet is one it saw, and its
//! quality figures stay within the packets (datagrams) or frames (at
//! least 3 bytes each, TCP) given.
#![no_main]

use earlybird::testing::{MediaClear, MediaTcpFraming};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, mut rest)) = data.split_first() else {
        return;
    };
    let framing = match mode % 3 {
        0 => None,
        1 => Some(MediaTcpFraming::Turn),
        _ => Some(MediaTcpFraming::Rfc4571),
    };
    let mut c = MediaClear::default();
    let mut ts = 0u64;
    let mut index = 0u32;
    let mut bytes = 0u64;
    while let [len, flags, gap, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        index += 1;
        ts += u64::from(*gap) * 1_000_000;
        bytes += n as u64;
        match framing {
            None => c.packet(&tail[..n], flags & 1 == 0, ts, index),
            Some(f) => c.segment(f, &tail[..n], flags & 1 == 0, ts, index),
        }
        rest = &tail[n..];
    }
    if let Some((_, conf, at, _)) = c.verdict {
        assert!(at >= 1 && at <= index);
        assert!((0.0..=1.0).contains(&conf));
    }
    if let Some(q) = c.quality() {
        match framing {
            None => assert!(q.packets <= u64::from(index)),
            Some(_) => assert!(q.packets <= bytes / 3 + 1),
        }
    }
});
