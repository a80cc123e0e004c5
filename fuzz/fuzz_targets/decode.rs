//! Fuzz target for the packet decoder (minimal version; the decode owner
//! replaces it): any bytes as one Ethernet frame must decode or be skipped,
//! never panic.
#![no_main]

use earlybird::decode::{decode, Decoded};
use earlybird::source::LinkType;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut out = Decoded::default();
    let _ = decode(LinkType::Ethernet, data, &mut out);
});
