//! Fuzz target for the media analyzer's clear-header layer: datagrams cut
//! from the input (a length byte, a direction bit, a gap byte, then the
//! bytes) fed as one flow. It never panics, its verdict's packet is one it
//! saw, and its quality figures stay within the packets given.
#![no_main]

use earlybird::testing::MediaClear;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut c = MediaClear::default();
    let mut rest = data;
    let mut ts = 0u64;
    let mut index = 0u32;
    while let [len, flags, gap, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        index += 1;
        ts += u64::from(*gap) * 1_000_000;
        c.packet(&tail[..n], flags & 1 == 0, ts, index);
        rest = &tail[n..];
    }
    if let Some((_, conf, at, _)) = c.verdict {
        assert!(at >= 1 && at <= index);
        assert!((0.0..=1.0).contains(&conf));
    }
    if let Some(q) = c.quality() {
        assert!(q.packets <= u64::from(index));
    }
});
