//! Fuzz target for the bounded handshake reassembly
//! (`earlybird::analyze::handshake`): the bytes cut into pieces (4-byte
//! headers: offset, captured length, wire length, then the captured bytes)
//! inserted in any order under a cap from the first byte. The prefix never
//! passes the cap, what it holds stays bounded (twice the cap), and every
//! byte of the prefix is the byte some piece gave at that offset.
#![no_main]

use earlybird::analyze::handshake::Reassembly;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&c, mut rest)) = data.split_first() else {
        return;
    };
    let cap = usize::from(c) * 4 + 1;
    let mut r = Reassembly::default();
    let mut given: Vec<(u64, Vec<u8>)> = Vec::new();
    while rest.len() >= 4 {
        let off = u64::from(rest[0]) * 3;
        let n = usize::from(rest[1]).min(rest.len() - 4);
        let wire = n + usize::from(rest[2] & 0x0f);
        let bytes = &rest[4..4 + n];
        r.insert(off, bytes, wire, cap);
        given.push((off, bytes.to_vec()));
        assert!(r.bytes().len() <= cap);
        assert!(r.held() <= 2 * cap + 64, "held {} for cap {cap}", r.held());
        rest = &rest[4 + n..];
    }
    // Each byte of the prefix came from a piece covering it.
    for (i, b) in r.bytes().iter().enumerate() {
        let i = i as u64;
        assert!(given
            .iter()
            .any(|(o, d)| *o <= i && i < *o + d.len() as u64 && d[(i - o) as usize] == *b));
    }
    r.give_up();
    r.release();
    assert_eq!(r.held(), 0);
});
