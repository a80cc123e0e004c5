//! Fuzz target: any bytes as an Ethernet frame judged by the snap-length
//! rule. It never panics and keeps either the snap length or the whole
//! frame.
#![no_main]

use earlybird::testing::snaprule::{keep, WHOLE};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let k = keep(data, 128);
    assert!(k == 128 || k == WHOLE);
});
