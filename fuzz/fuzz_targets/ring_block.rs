//! Fuzz target: any bytes as a block of an AF_PACKET TPACKET_V3 receive
//! ring. The walk over its frames must never panic, every packet it hands
//! out must lie inside the block with caplen ≤ orig_len, numbers must
//! increase, and batches never exceed their bound (a restored VLAN tag
//! included), with one link type for the ring or each frame's own, and
//! with a capture filter run over the tagged frames (what it leaves out is
//! counted, never handed out).
#![no_main]

use earlybird::testing::{Frames, Walked};
use earlybird::LinkType;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let vlan = earlybird::CaptureFilter::new("vlan 100 and tcp")
        .and_then(|f| f.program(LinkType::Ethernet))
        .ok();
    for (max, link, filter) in [
        (1usize, Some(LinkType::Ethernet), None),
        (7, None, None),
        (256, Some(LinkType::Ethernet), None),
        (256, Some(LinkType::Ethernet), vlan),
    ] {
        let mut block = data.to_vec();
        let mut frames = Frames::new(&mut block).with_filter(filter);
        let mut walk = Walked::default();
        let mut out = Vec::new();
        let mut last = 0;
        while frames.next_batch(link, &mut out, max, &mut walk) > 0 {
            assert!(out.len() <= max);
            for p in &out {
                assert!(p.offset + p.caplen as usize <= data.len());
                assert!(p.caplen <= p.orig_len);
                assert!(p.number > last);
                last = p.number;
            }
        }
    }
});
