//! Fuzz target for the packet decoder: every input is decoded once per link
//! type (`LinkType::ALL`: Ethernet, null, raw IP, SLL, C-HDLC, PPP, Frame
//! Relay, 802.11, radiotap, PPI, NFLOG, SLIP, ATM LLC). The decoder must
//! never panic, a decoded packet must describe an IPv4 or IPv6 header
//! inside the input (with an ICMP type only when it is ICMP), and the
//! fast path must agree with the general
//! decoder on every frame it takes.
#![no_main]

use earlybird::decode::{decode, Decoded, TunnelKind};
use earlybird::decode::LinkType;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut out = Decoded::default();
    // The fast path, when it takes a frame, agrees with the general decoder.
    if let Some(f) = earlybird::decode::fast::ethernet_ipv4(data) {
        assert!(decode(LinkType::Ethernet, data, &mut out).is_ok());
        assert_eq!(f.to_decoded(), out);
    }
    for link in LinkType::ALL {
        if decode(link, data, &mut out).is_ok() {
            assert!(out.ip_version == 4 || out.ip_version == 6);
            assert!((out.ip_offset as usize) < data.len());
            assert!(out.tunnel != TunnelKind::None || out.tunnel_id == 0);
            // An ICMP type and code only on ICMP / ICMPv6 packets.
            assert!(out.icmp.is_none() || out.proto == 1 || out.proto == 58);
        }
    }
});
