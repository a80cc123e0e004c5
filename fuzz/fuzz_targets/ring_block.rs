//! Fuzz target: any bytes as a block of an AF_PACKET TPACKET_V3 receive
//! ring. The walk over its frames must never panic, every packet it hands
//! out must lie inside the block with caplen ≤ orig_len, numbers must
//! increase, and batches never exceed their bound (a restored VLAN tag
//! included), with one link type for the ring or each frame's own.
#![no_main]

use earlybird::source::af_packet::{Frames, Walked};
use earlybird::decode::LinkType;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for (max, link) in [(1usize, Some(LinkType::Ethernet)), (7, None), (256, Some(LinkType::Ethernet))] {
        let mut block = data.to_vec();
        let mut frames = Frames::new(&mut block);
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
