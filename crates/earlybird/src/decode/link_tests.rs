//! Whole-stack decoder tests for the link types beyond Ethernet/null/raw
//! and the UDP tunnels VXLAN-on-8472, Geneve, Teredo and CAPWAP, over
//! packets assembled from the `testutil` helpers (field layouts in the
//! comments), plus mutations of each to check the walk's invariants.

use super::testutil::*;
use super::LinkType;
use super::{decode, map_v4, Decoded, Skip, TunnelKind};

fn v4_tcp() -> Vec<u8> {
    ipv4(6, &tcp(49152, 443, 0x02, b"x"))
}

/// LLC/SNAP header carrying `ethertype`.
fn snap(ethertype: u16) -> Vec<u8> {
    cat(&[&[0xaa, 0xaa, 0x03, 0, 0, 0], &ethertype.to_be_bytes()])
}

/// 802.11 data frame, to-DS: frame control 08 01, duration, BSSID (A1),
/// SA (A2 = MAC_A), DA (A3 = MAC_B), sequence control; then `body`.
fn wlan_data(body: &[u8]) -> Vec<u8> {
    cat(&[
        &[0x08, 0x01, 0, 0],
        &[2; 6],
        &MAC_A,
        &MAC_B,
        &[0x10, 0x00],
        body,
    ])
}

/// Radiotap header with TSFT and Flags (`flags`): length 17.
fn radiotap(flags: u8, frame: &[u8]) -> Vec<u8> {
    cat(&[&[0, 0, 17, 0, 0x03, 0, 0, 0], &[0; 8], &[flags], frame])
}

#[test]
fn ppp_and_hdlc_framings() {
    let ip = v4_tcp();
    for p in [
        cat(&[&[0x00, 0x21], &ip]),
        cat(&[&[0xff, 0x03, 0x00, 0x21], &ip]),
        cat(&[&[0x21], &ip]),
    ] {
        let d = ok(LinkType::Ppp, &p);
        assert_eq!(
            (d.src, d.dport, d.ip_offset),
            (map_v4(V4_A), 443, (p.len() - ip.len()) as u16)
        );
    }
    // PPP → MPLS (bottom of stack) → IPv4.
    let mpls = cat(&[&[0xff, 0x03, 0x02, 0x81, 0x00, 0x01, 0x01, 0x40], &ip]);
    assert_eq!(ok(LinkType::Ppp, &mpls).ip_offset, 8);
    // LINKTYPE_PPP_HDLC: PPP, or Cisco HDLC by its address byte.
    assert_eq!(
        ok(LinkType::PppHdlc, &cat(&[&[0xff, 0x03, 0x00, 0x21], &ip])).ip_offset,
        4
    );
    assert_eq!(
        ok(LinkType::PppHdlc, &cat(&[&[0x0f, 0x00, 0x08, 0x00], &ip])).ip_offset,
        4
    );
    // LINKTYPE_PPP too: a router's capture that holds both framings.
    for hdlc in [[0x0f, 0x00, 0x08, 0x00], [0x8f, 0x00, 0x08, 0x00]] {
        let d = ok(LinkType::Ppp, &cat(&[&hdlc, &ip]));
        assert_eq!((d.src, d.dport, d.ip_offset), (map_v4(V4_A), 443, 4));
    }
    assert_eq!(
        ok(
            LinkType::Ppp,
            &cat(&[&[0x0f, 0x00, 0x86, 0xdd], &ipv6(17, &udp(5060, 5060, b"x"))])
        )
        .ip_offset,
        4
    );
    assert_eq!(skip(LinkType::Ppp, &[0x0f, 0x00]), Skip::Truncated);
    assert_eq!(
        skip(LinkType::Ppp, &[0xff, 0x03, 0xc0, 0x21, 1]),
        Skip::NotIp
    );
    assert_eq!(
        skip(LinkType::PppHdlc, &[0x8f, 0x00, 0x80, 0x35, 0]),
        Skip::NotIp
    );
}

#[test]
fn frame_relay_slip_atm() {
    let ip = v4_tcp();
    let fr = cat(&[&[0x18, 0x41, 0x03, 0xcc], &ip]);
    assert_eq!(ok(LinkType::FrameRelay, &fr).ip_offset, 4);
    // Bridged Ethernet over Frame Relay (NLPID SNAP, OUI 00-80-C2).
    let br = cat(&[
        &[0x18, 0x41, 0x03, 0x00, 0x80, 0x00, 0x80, 0xc2, 0x00, 0x07],
        &eth(0x0800, &ip),
    ]);
    let d = ok(LinkType::FrameRelay, &br);
    assert_eq!((d.ip_offset, d.src_mac), (24, MAC_A));
    let slip = cat(&[&[0; 16], &ip]);
    assert_eq!(ok(LinkType::Slip, &slip).ip_offset, 16);
    assert_eq!(
        ok(LinkType::AtmLlc, &cat(&[&snap(0x0800), &ip])).ip_offset,
        8
    );
    assert_eq!(ok(LinkType::AtmLlc, &ip).ip_offset, 0);
}

#[test]
fn ieee80211_radiotap_ppi() {
    let ip = v4_tcp();
    let frame = wlan_data(&cat(&[&snap(0x0800), &ip]));
    let d = ok(LinkType::Ieee80211, &frame);
    assert_eq!((d.ip_offset, d.src_mac, d.dst_mac), (32, MAC_A, MAC_B));
    assert_eq!((d.sport, d.dport), (49152, 443));
    // Radiotap without and with an FCS after the frame.
    let r = radiotap(0x00, &frame);
    assert_eq!(ok(LinkType::Radiotap, &r).ip_offset, 17 + 32);
    let with_fcs = cat(&[&radiotap(0x10, &frame), &[0xde, 0xad, 0xbe, 0xef]]);
    assert_eq!(
        ok(LinkType::Radiotap, &with_fcs),
        ok(LinkType::Radiotap, &r)
    );
    // An FCS flag on fewer than 4 bytes of anything.
    assert_eq!(
        skip(LinkType::Radiotap, &radiotap(0x10, &[])[..17]),
        Skip::Truncated
    );
    // Radiotap's data-pad flag: a 26-byte QoS header padded to 28.
    let mut qos = wlan_data(&[0x00, 0x00, 0xee, 0xee]);
    qos[0] = 0x88;
    qos.extend_from_slice(&cat(&[&snap(0x0800), &ip]));
    assert_eq!(
        ok(LinkType::Radiotap, &radiotap(0x20, &qos)).ip_offset,
        17 + 28 + 8
    );
    // PPI carrying 802.11; PPI inside PPI is malformed.
    let ppi = cat(&[&[0, 0, 8, 0, 105, 0, 0, 0], &frame]);
    assert_eq!(ok(LinkType::Ppi, &ppi).ip_offset, 8 + 32);
    assert_eq!(
        skip(LinkType::Ppi, &cat(&[&[0, 0, 8, 0, 192, 0, 0, 0], &ppi])),
        Skip::Malformed
    );
    assert_eq!(
        skip(LinkType::Ppi, &cat(&[&[0, 0, 8, 0, 147, 0, 0, 0], &frame])),
        Skip::NotIp
    );
    // Protected and management frames.
    let mut prot = frame.clone();
    prot[1] |= 0x40;
    assert_eq!(skip(LinkType::Ieee80211, &prot), Skip::Encrypted);
    assert_eq!(skip(LinkType::Ieee80211, &[0x80, 0x00, 0, 0]), Skip::NotIp);
}

#[test]
fn sll_with_monitor_mode_and_llc_payloads() {
    let ip = v4_tcp();
    let frame = wlan_data(&cat(&[&snap(0x0800), &ip]));
    // SLL v1: packet type, ARPHRD 803, address length 0, address, ETH_P_802_2.
    let sll = |hatype: u16, proto: u16, rest: &[u8]| {
        cat(&[
            &[0, 0],
            &hatype.to_be_bytes(),
            &[0, 0],
            &[0; 8],
            &proto.to_be_bytes(),
            rest,
        ])
    };
    let d = ok(LinkType::LinuxSll, &sll(803, 4, &radiotap(0, &frame)));
    assert_eq!(d.ip_offset, 16 + 17 + 32);
    assert_eq!(
        ok(LinkType::LinuxSll, &sll(801, 4, &frame)).ip_offset,
        16 + 32
    );
    assert_eq!(
        ok(LinkType::LinuxSll, &sll(1, 4, &cat(&[&snap(0x0800), &ip]))).ip_offset,
        24
    );
    assert_eq!(
        skip(LinkType::LinuxSll, &sll(280, 0x000c, &[0; 16])),
        Skip::NotIp
    );
}

#[test]
fn ethernet_802_3_llc_snap() {
    let ip = v4_tcp();
    // An 802.3 length then LLC/SNAP IPv4 (zeek snap-tcp.pcap's layout).
    let len = (8 + ip.len()) as u16;
    let p = eth(len, &cat(&[&snap(0x0800), &ip]));
    let d = ok(LinkType::Ethernet, &p);
    assert_eq!((d.ip_offset, d.dport), (22, 443));
    // After a VLAN tag too; STP stays not IP.
    let t = eth(0x8100, &tag(7, len, &cat(&[&snap(0x0800), &ip])));
    assert_eq!(ok(LinkType::Ethernet, &t).vlan, 7);
    assert_eq!(
        skip(LinkType::Ethernet, &eth(0x26, &[0x42, 0x42, 0x03, 0, 0])),
        Skip::NotIp
    );
    // Bridged Ethernet inside bridged Ethernet, again and again: bounded.
    let mut nest = eth(0x0800, &ip);
    for _ in 0..40 {
        nest = eth(
            10,
            &cat(&[
                &[0xaa, 0xaa, 0x03, 0x00, 0x80, 0xc2, 0x00, 0x07, 0, 0],
                &nest,
            ]),
        );
    }
    assert_eq!(skip(LinkType::Ethernet, &nest), Skip::TooDeep);
}

#[test]
fn nflog_ends_at_its_payload() {
    let ip = v4_tcp();
    // Header AF_INET; TLV 8/1; payload TLV (len 4 + IP, type 9); another TLV.
    let mut p = vec![2, 0, 0, 1, 8, 0, 1, 0, 0, 0, 8, 0];
    p.extend_from_slice(&((4 + ip.len()) as u16).to_le_bytes());
    p.extend_from_slice(&[9, 0]);
    p.extend_from_slice(&ip);
    p.extend_from_slice(&[0; 3]); // pad to 4
    p.extend_from_slice(&[8, 0, 10, 0, 0xff, 0xff, 0xff, 0xff]);
    let d = ok(LinkType::Nflog, &p);
    assert_eq!((d.ip_offset, d.ip_len, d.dport), (16, ip.len() as u16, 443));
}

fn vxlan_like(port: u16, hdr: &[u8], inner: &[u8]) -> Vec<u8> {
    eth(0x0800, &ipv4(17, &udp(40000, port, &cat(&[hdr, inner]))))
}

#[test]
fn udp_tunnels() {
    let inner = eth(0x0800, &v4_tcp());
    // VXLAN on the Linux port 8472, VNI 100.
    let d = ok(
        LinkType::Ethernet,
        &vxlan_like(8472, &[0x08, 0, 0, 0, 0, 0, 100, 0], &inner),
    );
    assert_eq!(
        (d.tunnel, d.tunnel_id, d.dport),
        (TunnelKind::Vxlan, 100, 443)
    );
    // Geneve: 2 words of options, Ethernet, VNI 0x123456; then IPv4 direct.
    let g = [
        0x02, 0, 0x65, 0x58, 0x12, 0x34, 0x56, 0, 0, 1, 2, 0, 0, 0, 0, 0,
    ];
    let d = ok(LinkType::Ethernet, &vxlan_like(6081, &g, &inner));
    assert_eq!(
        (d.tunnel, d.tunnel_id, d.dport),
        (TunnelKind::Geneve, 0x123456, 443)
    );
    let g4 = [0x00, 0, 0x08, 0x00, 0, 0, 9, 0];
    assert_eq!(
        ok(LinkType::Ethernet, &vxlan_like(6081, &g4, &v4_tcp())).tunnel_id,
        9
    );
    // Geneve carrying ARP: the outer UDP flow.
    let arp = eth(0x0806, &[0; 28]);
    let d = ok(LinkType::Ethernet, &vxlan_like(6081, &g, &arp));
    assert_eq!((d.tunnel, d.dport), (TunnelKind::None, 6081));
    // Teredo from the server's port, with an origin indicator.
    let v6 = ipv6(17, &udp(1, 2, &[]));
    let t = eth(
        0x0800,
        &ipv4(
            17,
            &udp(3544, 40000, &cat(&[&[0, 0, 1, 2, 3, 4, 5, 6], &v6])),
        ),
    );
    let d = ok(LinkType::Ethernet, &t);
    assert_eq!(
        (d.tunnel, d.ip_version, d.sport, d.ip_offset),
        (TunnelKind::Teredo, 6, 1, 50)
    );
    // Not Teredo (an IPv4 payload on 3544): the outer flow.
    let not = eth(0x0800, &ipv4(17, &udp(3544, 40000, &v4_tcp())));
    assert_eq!(ok(LinkType::Ethernet, &not).tunnel, TunnelKind::None);
    // CAPWAP data with an 802.3 frame (T clear), radio id 3; with 802.11
    // (T set, WBID 1, frame control swapped as Cisco sends it).
    let c = [0x00, 0x10, 0xc2, 0x00, 0, 0, 0, 0];
    let d = ok(LinkType::Ethernet, &vxlan_like(5247, &c, &inner));
    assert_eq!(
        (d.tunnel, d.tunnel_id, d.dport),
        (TunnelKind::Capwap, 3, 443)
    );
    let mut w = wlan_data(&cat(&[&snap(0x0800), &v4_tcp()]));
    w.swap(0, 1);
    let c11 = [0x00, 0x10, 0x03, 0x00, 0, 0, 0, 0];
    let d = ok(LinkType::Ethernet, &vxlan_like(5247, &c11, &w));
    // The MACs stay those of the outer Ethernet header.
    assert_eq!(
        (d.tunnel, d.dport, d.src_mac),
        (TunnelKind::Capwap, 443, MAC_A)
    );
    // A DTLS-protected CAPWAP packet stays the outer flow.
    let d = ok(
        LinkType::Ethernet,
        &vxlan_like(5247, &[0x01, 0, 0, 0, 0, 0, 0, 0], &inner),
    );
    assert_eq!(d.tunnel, TunnelKind::None);
}

/// Random one-byte mutations and cuts of each new stack never panic and
/// keep the decoder's invariants.
#[test]
fn mutated_link_stacks_never_panic() {
    let ip = v4_tcp();
    let frame = wlan_data(&cat(&[&snap(0x0800), &ip]));
    let seeds = [
        (
            LinkType::Ppp,
            cat(&[&[0xff, 0x03, 0x02, 0x81, 0, 1, 1, 0x40], &ip]),
        ),
        (
            LinkType::FrameRelay,
            cat(&[&[0x18, 0x41, 0x03, 0x00, 0x80, 0, 0, 0, 8, 0], &ip]),
        ),
        (LinkType::Radiotap, radiotap(0x30, &frame)),
        (LinkType::Ppi, cat(&[&[0, 0, 8, 0, 105, 0, 0, 0], &frame])),
        (LinkType::AtmLlc, cat(&[&snap(0x0800), &ip])),
        (
            LinkType::Ethernet,
            vxlan_like(
                6081,
                &[2, 0, 0x65, 0x58, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                &eth(0x0800, &ip),
            ),
        ),
        (
            LinkType::Ethernet,
            vxlan_like(5247, &[0, 0x10, 0x03, 0, 0, 0, 0, 0], &frame),
        ),
        (
            LinkType::Ethernet,
            eth(
                0x0800,
                &ipv4(
                    17,
                    &udp(3544, 1, &cat(&[&[0, 1, 0, 0], &[0; 9], &ipv6(59, &[])])),
                ),
            ),
        ),
    ];
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut d = Decoded::default();
    for (link, seed) in &seeds {
        for _ in 0..20_000 {
            let mut p = seed.clone();
            for _ in 0..1 + next() % 3 {
                let i = (next() as usize) % p.len();
                p[i] = next() as u8;
            }
            let cut = (next() as usize) % (p.len() + 1);
            for q in [&p[..cut], &p[..]] {
                if decode(*link, q, &mut d).is_ok() {
                    assert!(d.ip_version == 4 || d.ip_version == 6);
                    assert!((d.ip_offset as usize) < q.len());
                    assert!(d.tunnel != TunnelKind::None || d.tunnel_id == 0);
                }
            }
        }
    }
}
