//! Whole-stack decoder tests over hand-built packets (byte arrays assembled
//! by the helpers in `testutil`), and a random-bytes robustness test.

use super::icmp::Icmp;
use super::testutil::*;
use super::walk::MAX_TUNNELS;
use super::LinkType;
use super::{decode, map_v4, Decoded, Skip, TunnelKind};

fn eth_v4_tcp() -> Vec<u8> {
    eth(0x0800, &ipv4(6, &tcp(49152, 443, 0x18, b"hello")))
}

#[test]
fn ethernet_ipv4_tcp_all_fields() {
    let p = eth_v4_tcp();
    let d = ok(LinkType::Ethernet, &p);
    assert_eq!(d.src, map_v4(V4_A));
    assert_eq!(d.dst, map_v4(V4_B));
    assert_eq!(
        (d.sport, d.dport, d.proto, d.ip_version),
        (49152, 443, 6, 4)
    );
    assert_eq!((d.ip_len, d.ip_offset, d.tcp_flags), (45, 14, 0x18));
    assert_eq!((d.payload_offset, d.payload_len), (54, 5));
    assert_eq!((d.src_mac, d.dst_mac), (MAC_A, MAC_B));
    assert_eq!(
        (d.vlan, d.tunnel, d.tunnel_id, d.first_fragment),
        (0, TunnelKind::None, 0, false)
    );
    assert_eq!(&p[d.payload_offset as usize..], b"hello");
}

#[test]
fn ethernet_ipv6_udp() {
    let p = eth(0x86dd, &ipv6(17, &udp(5353, 53, &[1, 2, 3])));
    let d = ok(LinkType::Ethernet, &p);
    assert_eq!((d.src, d.dst), (V6_A, V6_B));
    assert_eq!((d.sport, d.dport, d.proto, d.ip_version), (5353, 53, 17, 6));
    assert_eq!(
        (d.ip_len, d.ip_offset, d.payload_offset, d.payload_len),
        (51, 14, 62, 3)
    );
    assert!(!d.is_ipv4());
}

#[test]
fn truncated_at_every_length() {
    let p = eth_v4_tcp();
    for n in 0..p.len() {
        let r = {
            let mut d = Decoded::default();
            decode(LinkType::Ethernet, &p[..n], &mut d)
        };
        if n < 14 + 20 + 14 {
            assert_eq!(r, Err(Skip::Truncated), "len {n}");
        } else {
            assert_eq!(r, Ok(()), "len {n}");
        }
    }
    let p = eth(0x86dd, &ipv6(17, &udp(1, 2, &[])));
    for n in 0..14 + 40 + 4 {
        assert_eq!(
            skip(LinkType::Ethernet, &p[..n]),
            Skip::Truncated,
            "v6 len {n}"
        );
    }
    assert_eq!(ok(LinkType::Ethernet, &p[..58]).dport, 2);
}

#[test]
fn ethernet_padding_is_not_payload() {
    let mut p = eth(0x0800, &ipv4(17, &udp(1000, 2000, &[0xaa, 0xbb])));
    p.resize(60, 0);
    let d = ok(LinkType::Ethernet, &p);
    assert_eq!((d.ip_len, d.payload_len), (30, 2));
    // A TCP header that only fits thanks to padding is malformed.
    let mut ip = ipv4(6, &tcp(1, 2, 0x02, &[]));
    ip[3] = 30; // total length 30: 10 bytes of TCP
    let mut p = eth(0x0800, &ip);
    p.resize(60, 0);
    assert_eq!(skip(LinkType::Ethernet, &p), Skip::Malformed);
}

#[test]
fn non_ip_and_802_3() {
    assert_eq!(
        skip(LinkType::Ethernet, &eth(0x0806, &[0; 28])),
        Skip::NotIp
    );
    assert_eq!(
        skip(LinkType::Ethernet, &eth(0x0026, &[0x42, 0x42, 0x03])),
        Skip::NotIp
    );
    assert_eq!(
        skip(LinkType::Ethernet, &eth(0x8863, &[0x11, 0x09, 0, 0, 0, 0])),
        Skip::NotIp
    );
}

#[test]
fn vlan_qinq_and_tag_limit() {
    let inner = ipv4(17, &udp(1, 53, &[]));
    let d = ok(LinkType::Ethernet, &eth(0x8100, &tag(200, 0x0800, &inner)));
    assert_eq!((d.vlan, d.ip_offset, d.dport), (200, 18, 53));
    let qinq = eth(0x88a8, &tag(100, 0x8100, &tag(300, 0x0800, &inner)));
    let d = ok(LinkType::Ethernet, &qinq);
    assert_eq!((d.vlan, d.ip_offset), (100, 22));
    let old = eth(0x9100, &tag(0x2000 | 7, 0x8100, &tag(8, 0x0800, &inner)));
    assert_eq!(ok(LinkType::Ethernet, &old).vlan, 7);
    let mut deep = tag(5, 0x0800, &inner);
    for _ in 0..4 {
        deep = tag(5, 0x8100, &deep);
    }
    assert_eq!(skip(LinkType::Ethernet, &eth(0x8100, &deep)), Skip::TooDeep);
    assert_eq!(
        skip(LinkType::Ethernet, &eth(0x8100, &[0x00, 0xc8, 0x08])),
        Skip::Truncated
    );
    assert_eq!(
        skip(LinkType::Ethernet, &eth(0x8100, &tag(1, 0x0806, &[0; 28]))),
        Skip::NotIp
    );
}

#[test]
fn mpls_label_stack() {
    let inner = ipv4(6, &tcp(80, 1234, 0x10, &[]));
    let labels = [0x00, 0x01, 0x00, 0x40, 0x00, 0x01, 0x11, 0x40];
    let d = ok(LinkType::Ethernet, &eth(0x8847, &cat(&[&labels, &inner])));
    assert_eq!((d.ip_offset, d.sport, d.ip_version), (22, 80, 4));
    let v6 = ipv6(58, &[128, 0, 0, 0, 0, 1, 0, 1]);
    let d = ok(LinkType::Ethernet, &eth(0x8848, &cat(&[&labels[4..], &v6])));
    assert_eq!((d.ip_version, d.proto, d.sport, d.dport), (6, 58, 0, 0));
    // Ethernet pseudowire with a control word.
    let pw = cat(&[&labels[4..], &[0, 0, 0, 0], &eth(0x0800, &inner)]);
    assert_eq!(skip(LinkType::Ethernet, &eth(0x8847, &pw)), Skip::NotIp);
    // MPLS under a VLAN tag.
    let d = ok(
        LinkType::Ethernet,
        &eth(0x8100, &tag(9, 0x8847, &cat(&[&labels, &inner]))),
    );
    assert_eq!((d.vlan, d.ip_offset), (9, 26));
}

#[test]
fn pppoe_session() {
    let inner = ipv6(17, &udp(546, 547, &[1]));
    let mut s = vec![0x11, 0x00, 0x00, 0x2a];
    s.extend_from_slice(&((inner.len() + 2) as u16).to_be_bytes());
    s.extend_from_slice(&[0x00, 0x57]);
    let d = ok(LinkType::Ethernet, &eth(0x8864, &cat(&[&s, &inner])));
    assert_eq!(
        (d.ip_version, d.ip_offset, d.sport, d.dport),
        (6, 22, 546, 547)
    );
    let lcp = [0x11, 0x00, 0x00, 0x2a, 0x00, 0x06, 0xc0, 0x21, 1, 1, 0, 4];
    assert_eq!(skip(LinkType::Ethernet, &eth(0x8864, &lcp)), Skip::NotIp);
    // PPPoE inside a VLAN, IPv4 (as in nDPI's gre.pcap).
    s[7] = 0x21;
    let v4 = ipv4(17, &udp(1, 2, &[]));
    let d = ok(
        LinkType::Ethernet,
        &eth(0x8100, &tag(10, 0x8864, &cat(&[&s, &v4]))),
    );
    assert_eq!((d.vlan, d.ip_version, d.ip_offset), (10, 4, 26));
}

#[test]
fn linux_cooked_null_and_raw() {
    let ip = ipv4(6, &tcp(1, 2, 0x02, &[]));
    let mut sll = vec![0, 0, 0, 1, 0, 6];
    sll.extend_from_slice(&MAC_A);
    sll.extend_from_slice(&[0, 0, 0x08, 0x00]);
    let d = ok(LinkType::LinuxSll, &cat(&[&sll, &ip]));
    assert_eq!(
        (d.ip_offset, d.sport, d.src_mac, d.dst_mac),
        (16, 1, MAC_A, [0; 6])
    );
    let mut sll2 = vec![0x86, 0xdd, 0, 0, 0, 0, 0, 3, 0, 1, 4, 6];
    sll2.extend_from_slice(&MAC_B);
    sll2.extend_from_slice(&[0, 0]);
    let v6 = ipv6(17, &udp(7, 8, &[]));
    let d = ok(LinkType::LinuxSll2, &cat(&[&sll2, &v6]));
    assert_eq!(
        (d.ip_offset, d.ip_version, d.dport, d.src_mac),
        (20, 6, 8, MAC_B)
    );
    // SLL carrying a VLAN tag.
    let n = sll.len();
    sll[n - 2..].copy_from_slice(&[0x81, 0x00]);
    let d = ok(LinkType::LinuxSll, &cat(&[&sll, &tag(42, 0x0800, &ip)]));
    assert_eq!((d.vlan, d.ip_offset), (42, 20));
    let d = ok(LinkType::Null, &cat(&[&[2, 0, 0, 0], &ip]));
    assert_eq!((d.ip_offset, d.sport), (4, 1));
    let d = ok(LinkType::Null, &cat(&[&[0, 0, 0, 30], &v6]));
    assert_eq!((d.ip_offset, d.ip_version), (4, 6));
    assert_eq!(skip(LinkType::Null, &[0, 0, 0, 7, 0x45]), Skip::NotIp);
    assert_eq!(ok(LinkType::Raw, &ip).ip_offset, 0);
    assert_eq!(ok(LinkType::Raw, &v6).ip_version, 6);
    assert_eq!(ok(LinkType::Ipv4, &ip).ip_version, 4);
    assert_eq!(ok(LinkType::Ipv6, &v6).ip_version, 6);
    assert_eq!(skip(LinkType::Raw, &[0x55; 40]), Skip::Malformed);
    assert_eq!(skip(LinkType::Raw, &[]), Skip::Truncated);
    assert_eq!(skip(LinkType::Ipv4, &v6), Skip::Malformed);
    assert_eq!(skip(LinkType::Ipv6, &ip), Skip::Malformed);
    // Cisco HDLC: address, control, EtherType.
    let d = ok(LinkType::CHdlc, &cat(&[&[0x0f, 0, 0x08, 0x00], &ip]));
    assert_eq!((d.ip_offset, d.ip_version, d.sport), (4, 4, 1));
    assert_eq!(
        skip(LinkType::CHdlc, &[0x8f, 0, 0x80, 0x35, 0, 0]),
        Skip::NotIp
    );
    assert_eq!(skip(LinkType::CHdlc, &[0x0f, 0]), Skip::Truncated);
}

#[test]
fn ipv4_malformed_headers() {
    let mut ip = ipv4(6, &tcp(1, 2, 0x02, &[]));
    ip[0] = 0x44;
    assert_eq!(skip(LinkType::Ethernet, &eth(0x0800, &ip)), Skip::Malformed);
    ip[0] = 0x65;
    assert_eq!(skip(LinkType::Ethernet, &eth(0x0800, &ip)), Skip::Malformed);
    ip[0] = 0x45;
    ip[2] = 0;
    ip[3] = 16;
    assert_eq!(skip(LinkType::Ethernet, &eth(0x0800, &ip)), Skip::Malformed);
}

#[test]
fn tso_capture_with_zero_total_length() {
    let mut ip = ipv4(6, &tcp(1, 443, 0x18, &[0x17; 3000]));
    ip[2] = 0;
    ip[3] = 0;
    let d = ok(LinkType::Ethernet, &eth(0x0800, &ip));
    assert_eq!(
        (d.ip_len, d.payload_offset, d.payload_len),
        (3040, 54, 3000)
    );
}

#[test]
fn snaplen_cut_payload_keeps_wire_lengths() {
    let p = eth(0x0800, &ipv4(6, &tcp(1, 2, 0x10, &[0x55; 1400])));
    let d = ok(LinkType::Ethernet, &p[..68]);
    assert_eq!(
        (d.ip_len, d.payload_len, d.payload_offset),
        (1440, 1400, 54)
    );
}

#[test]
fn icmp_and_other_protocols_have_no_ports() {
    let d = ok(
        LinkType::Raw,
        &ipv4(1, &[8, 0, 0xf7, 0xff, 0, 1, 0, 1, 9, 9]),
    );
    assert_eq!(
        (d.proto, d.sport, d.dport, d.payload_offset, d.payload_len),
        (1, 0, 0, 28, 2)
    );
    assert_eq!(d.icmp, Some(Icmp { ty: 8, code: 0 }));
    let d = ok(LinkType::Raw, &ipv4(1, &[]));
    assert_eq!((d.proto, d.payload_len, d.icmp), (1, 0, None));
    // Type and code need 4 bytes; fewer still make a packet of the flow.
    let d = ok(LinkType::Raw, &ipv4(1, &[3, 3, 0]));
    assert_eq!((d.proto, d.icmp), (1, None));
    let d = ok(LinkType::Raw, &ipv4(1, &[3, 3, 0, 0]));
    assert_eq!(d.icmp, Some(Icmp { ty: 3, code: 3 }));
    // Not ICMP: no type, whatever the bytes.
    assert_eq!(
        ok(LinkType::Raw, &ipv4(17, &udp(1, 2, &[8, 0, 0, 0]))).icmp,
        None
    );
    let d = ok(LinkType::Raw, &ipv4(50, &[0, 0, 1, 0, 0, 0, 0, 1]));
    assert_eq!(
        (d.proto, d.sport, d.dport, d.payload_offset, d.payload_len),
        (50, 0, 0, 20, 8)
    );
    let d = ok(LinkType::Raw, &ipv6(58, &[135, 0, 0, 0]));
    assert_eq!((d.proto, d.sport, d.dport), (58, 0, 0));
    assert_eq!(d.icmp, Some(Icmp { ty: 135, code: 0 }));
    let sctp = [0x0b, 0x59, 0x0b, 0x5a, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 4];
    let d = ok(LinkType::Raw, &ipv4(132, &sctp));
    assert_eq!(
        (d.sport, d.dport, d.payload_offset, d.payload_len),
        (2905, 2906, 32, 4)
    );
}

#[test]
fn transport_cut_short() {
    let ip = ipv4(6, &tcp(1, 2, 0x02, &[]));
    assert_eq!(skip(LinkType::Raw, &ip[..20 + 13]), Skip::Truncated);
    assert_eq!(ok(LinkType::Raw, &ip[..20 + 14]).tcp_flags, 0x02);
    let ip = ipv4(17, &udp(1, 2, &[]));
    assert_eq!(skip(LinkType::Raw, &ip[..23]), Skip::Truncated);
    assert_eq!(ok(LinkType::Raw, &ip[..24]).dport, 2);
    let mut bad = ipv4(17, &udp(1, 2, &[]));
    bad[3] = 27; // UDP of 7 bytes
    assert_eq!(skip(LinkType::Raw, &bad[..27]), Skip::Malformed);
}

#[test]
fn ipv4_fragments() {
    let first = ipv4_frag(17, 0x2000, &udp(1, 2, &[0; 16]));
    let d = ok(LinkType::Raw, &first);
    assert!(d.first_fragment);
    assert_eq!((d.sport, d.dport, d.payload_len), (1, 2, 16));
    let later = ipv4_frag(17, 0x0003, &[0; 16]);
    assert_eq!(skip(LinkType::Raw, &later), Skip::FragmentNonFirst);
    let middle = ipv4_frag(17, 0x2003, &[0; 16]);
    assert_eq!(skip(LinkType::Raw, &middle), Skip::FragmentNonFirst);
    assert!(!ok(LinkType::Raw, &ipv4(17, &udp(1, 2, &[]))).first_fragment);
}

#[test]
fn ipv6_extension_headers_and_fragments() {
    let hbh = [44, 0, 1, 4, 0, 0, 0, 0];
    let frag_first = [17, 0, 0x00, 0x01, 0, 0, 0, 9];
    let p = ipv6(0, &cat(&[&hbh, &frag_first, &udp(500, 4500, &[0; 8])]));
    let d = ok(LinkType::Raw, &p);
    assert!(d.first_fragment);
    assert_eq!(
        (d.proto, d.sport, d.dport, d.ip_len),
        (17, 500, 4500, 40 + 32)
    );
    assert_eq!((d.payload_offset, d.payload_len), (64, 8));
    let frag_later = [17, 0, 0x00, 0x09, 0, 0, 0, 9];
    let p = ipv6(44, &cat(&[&frag_later, &[0; 16]]));
    assert_eq!(skip(LinkType::Raw, &p), Skip::FragmentNonFirst);
    // Atomic fragment (offset 0, no M): a whole datagram.
    let atomic = [6, 0, 0, 0, 0, 0, 0, 1];
    let d = ok(
        LinkType::Raw,
        &ipv6(44, &cat(&[&atomic, &tcp(1, 2, 0x02, &[])])),
    );
    assert!(!d.first_fragment);
    assert_eq!(d.proto, 6);
    // Routing + destination options + AH, then ICMPv6.
    let rt = [60, 0, 4, 0, 0, 0, 0, 0];
    let dst = [51, 0, 1, 4, 0, 0, 0, 0];
    let ah = [58, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1];
    let p = ipv6(43, &cat(&[&rt, &dst, &ah, &[128, 0, 0, 0, 0, 0, 0, 0]]));
    let d = ok(LinkType::Raw, &p);
    assert_eq!((d.proto, d.payload_offset), (58, 40 + 28 + 8));
    assert_eq!(d.icmp, Some(Icmp { ty: 128, code: 0 }));
    // ESP ends the chain.
    let d = ok(
        LinkType::Raw,
        &ipv6(60, &cat(&[&[50, 0, 1, 4, 0, 0, 0, 0], &[0; 12]])),
    );
    assert_eq!((d.proto, d.sport, d.payload_offset), (50, 0, 48));
}

#[test]
fn ip_in_ip() {
    let inner = ipv4(6, &tcp(33000, 80, 0x02, &[]));
    let d = ok(LinkType::Ethernet, &eth(0x0800, &ipv4(4, &inner)));
    assert_eq!(
        (d.tunnel, d.tunnel_id, d.ip_offset, d.sport, d.dport),
        (TunnelKind::IpInIp, 0, 34, 33000, 80)
    );
    let v6 = ipv6(17, &udp(53, 53, &[]));
    let d = ok(LinkType::Ethernet, &eth(0x0800, &ipv4(41, &v6)));
    assert_eq!(
        (d.tunnel, d.ip_version, d.src, d.ip_offset),
        (TunnelKind::IpInIp, 6, V6_A, 34)
    );
    let d = ok(LinkType::Ethernet, &eth(0x86dd, &ipv6(4, &inner)));
    assert_eq!((d.ip_version, d.ip_offset, d.ip_len), (4, 54, 40));
    let d = ok(LinkType::Raw, &ipv6(41, &v6));
    assert_eq!(
        (d.ip_version, d.ip_offset, d.tunnel),
        (6, 40, TunnelKind::IpInIp)
    );
    // Protocol 4 carrying IPv6 is malformed; a cut inner header is truncated.
    assert_eq!(skip(LinkType::Raw, &ipv4(4, &v6)), Skip::Malformed);
    assert_eq!(skip(LinkType::Raw, &ipv4(4, &inner[..10])), Skip::Truncated);
    // Nesting is bounded.
    let mut p = inner.clone();
    for _ in 0..MAX_TUNNELS {
        p = ipv4(4, &p);
    }
    assert_eq!(ok(LinkType::Raw, &p).ip_offset, 20 * MAX_TUNNELS as u16);
    assert_eq!(skip(LinkType::Raw, &ipv4(4, &p)), Skip::TooDeep);
}

fn gre(flags_ver: u16, proto: u16, extra: &[u8], payload: &[u8]) -> Vec<u8> {
    cat(&[
        &flags_ver.to_be_bytes(),
        &proto.to_be_bytes(),
        extra,
        payload,
    ])
}

#[test]
fn gre_tunnels() {
    let inner = ipv4(17, &udp(514, 514, b"syslog"));
    // Key present: it becomes the tunnel id.
    let p = eth(
        0x0800,
        &ipv4(47, &gre(0x2000, 0x0800, &[0, 0, 0x30, 0x39], &inner)),
    );
    let d = ok(LinkType::Ethernet, &p);
    assert_eq!(
        (d.tunnel, d.tunnel_id, d.ip_offset, d.sport),
        (TunnelKind::Gre, 12345, 42, 514)
    );
    assert_eq!((d.proto, d.payload_len, d.src_mac), (17, 6, MAC_A));
    // Checksum + sequence, IPv6 payload.
    let v6 = ipv6(6, &tcp(1, 2, 0x11, &[]));
    let p = ipv4(47, &gre(0x9000, 0x86dd, &[0; 8], &v6));
    let d = ok(LinkType::Raw, &p);
    assert_eq!(
        (d.ip_version, d.ip_offset, d.tcp_flags, d.tunnel_id),
        (6, 32, 0x11, 0)
    );
    // Transparent Ethernet bridging: MACs stay the outer ones.
    let mut inner_eth = eth(0x0800, &inner);
    inner_eth[..6].copy_from_slice(&[0xee; 6]);
    let p = eth(0x0800, &ipv4(47, &gre(0x0000, 0x6558, &[], &inner_eth)));
    let d = ok(LinkType::Ethernet, &p);
    assert_eq!(
        (d.ip_offset, d.dst_mac, d.tunnel),
        (14 + 20 + 4 + 14, MAC_B, TunnelKind::Gre)
    );
    // Keepalive / unknown payload: the GRE packet itself is the flow.
    let p = eth(0x0800, &ipv4(47, &gre(0x0000, 0x0000, &[], &[])));
    let d = ok(LinkType::Ethernet, &p);
    assert_eq!(
        (d.proto, d.tunnel, d.sport, d.ip_offset, d.payload_len),
        (47, TunnelKind::None, 0, 14, 4)
    );
    // A cut GRE header: the outer packet is the flow too.
    let d = ok(LinkType::Raw, &ipv4(47, &[0x20, 0x00]));
    assert_eq!((d.proto, d.tunnel), (47, TunnelKind::None));
    // MPLS over GRE.
    let mpls = cat(&[&[0x00, 0x01, 0x01, 0x40], &inner]);
    let d = ok(LinkType::Raw, &ipv4(47, &gre(0x0000, 0x8847, &[], &mpls)));
    assert_eq!((d.tunnel, d.ip_offset, d.dport), (TunnelKind::Gre, 28, 514));
    // Once an inner IP header is found, its errors are the packet's.
    let bad = ipv4(47, &gre(0, 0x0800, &[], &inner[..21]));
    assert_eq!(skip(LinkType::Raw, &bad), Skip::Truncated);
}

#[test]
fn erspan_type_ii_and_iii() {
    let inner = eth(
        0x8100,
        &tag(11, 0x0800, &ipv4(1, &[8, 0, 0, 0, 0, 0, 0, 0])),
    );
    let hdr2 = [0x10, 0x64, 0x00, 0x01, 0, 0, 0, 0];
    let p = ipv4(
        47,
        &gre(0x1000, 0x88be, &[0, 0, 0, 1], &cat(&[&hdr2, &inner])),
    );
    let d = ok(LinkType::Raw, &p);
    assert_eq!(
        (d.tunnel, d.vlan, d.proto, d.ip_offset),
        (TunnelKind::Gre, 11, 1, 20 + 8 + 8 + 18)
    );
    assert_eq!(d.src_mac, MAC_A);
    let hdr3 = [0x20, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    let p = ipv4(
        47,
        &gre(0x1000, 0x22eb, &[0, 0, 0, 1], &cat(&[&hdr3, &inner])),
    );
    assert_eq!(ok(LinkType::Raw, &p).ip_offset, 20 + 8 + 12 + 18);
    // Type I: no sequence, no ERSPAN header.
    let p = ipv4(47, &gre(0x0000, 0x88be, &[], &inner));
    assert_eq!(ok(LinkType::Raw, &p).ip_offset, 20 + 4 + 18);
}

#[test]
fn pptp_enhanced_gre() {
    let inner = ipv4(6, &tcp(1723, 5000, 0x10, &[]));
    let ppp = cat(&[&[0xff, 0x03, 0x00, 0x21], &inner]);
    let mut hdr = vec![0x30, 0x01, 0x88, 0x0b];
    hdr.extend_from_slice(&(ppp.len() as u16).to_be_bytes());
    hdr.extend_from_slice(&[0x80, 0x01, 0, 0, 0, 1]);
    let p = eth(0x0800, &ipv4(47, &cat(&[&hdr, &ppp])));
    let d = ok(LinkType::Ethernet, &p);
    assert_eq!(
        (d.tunnel, d.tunnel_id, d.sport, d.ip_offset),
        (TunnelKind::Gre, 0, 1723, 14 + 20 + 12 + 4)
    );
    // PPP LCP inside: the GRE packet is the flow.
    let lcp = [0xff, 0x03, 0xc0, 0x21, 1, 1, 0, 4];
    let mut hdr = vec![0x30, 0x01, 0x88, 0x0b, 0, 8, 0x80, 0x01, 0, 0, 0, 2];
    hdr.extend_from_slice(&lcp);
    let d = ok(LinkType::Raw, &ipv4(47, &hdr));
    assert_eq!((d.proto, d.tunnel), (47, TunnelKind::None));
}

#[test]
fn vxlan_and_gtp() {
    let inner_ip = ipv4(1, &[0, 0, 0, 0, 0, 1, 0, 1]);
    let vx = cat(&[&[0x08, 0, 0, 0, 0, 0x01, 0x00, 0], &eth(0x0800, &inner_ip)]);
    let p = eth(0x0800, &ipv4(17, &udp(40000, 4789, &vx)));
    let d = ok(LinkType::Ethernet, &p);
    assert_eq!(
        (d.tunnel, d.tunnel_id, d.proto, d.sport, d.dport),
        (TunnelKind::Vxlan, 256, 1, 0, 0)
    );
    assert_eq!((d.ip_offset, d.src_mac), (14 + 20 + 8 + 8 + 14, MAC_A));
    // ARP inside VXLAN: the outer UDP datagram is the flow.
    let arp = cat(&[&[0x08, 0, 0, 0, 0, 0x01, 0x00, 0], &eth(0x0806, &[0; 28])]);
    let d = ok(LinkType::Raw, &ipv4(17, &udp(40000, 4789, &arp)));
    assert_eq!(
        (d.tunnel, d.proto, d.sport, d.dport, d.payload_offset),
        (TunnelKind::None, 17, 40000, 4789, 28)
    );
    // No I flag: plain UDP.
    let d = ok(LinkType::Raw, &ipv4(17, &udp(1, 4789, &[0; 8])));
    assert_eq!((d.tunnel, d.dport), (TunnelKind::None, 4789));
    // GTP-U G-PDU carrying TCP.
    let user = ipv4(6, &tcp(40001, 80, 0x02, &[]));
    let gtp = cat(&[&[0x30, 0xff, 0, user.len() as u8, 0, 0, 0x10, 0x01], &user]);
    let d = ok(LinkType::Raw, &ipv4(17, &udp(2152, 2152, &gtp)));
    assert_eq!(
        (d.tunnel, d.tunnel_id, d.sport, d.dport, d.ip_offset),
        (TunnelKind::Gtp, 0, 40001, 80, 36)
    );
    // GTP echo request: plain UDP flow.
    let d = ok(
        LinkType::Raw,
        &ipv4(
            17,
            &udp(2152, 2152, &[0x32, 0x01, 0, 4, 0, 0, 0, 0, 0, 1, 0, 0]),
        ),
    );
    assert_eq!((d.tunnel, d.dport), (TunnelKind::None, 2152));
}

#[test]
fn output_is_reset_between_packets() {
    let mut d = Decoded::default();
    let vx = cat(&[
        &[0x08, 0, 0, 0, 0, 0, 9, 0],
        &eth(0x8100, &tag(3, 0x0800, &ipv4(6, &tcp(1, 2, 0x12, &[])))),
    ]);
    decode(
        LinkType::Ethernet,
        &eth(0x8100, &tag(7, 0x0800, &ipv4(17, &udp(9, 4789, &vx)))),
        &mut d,
    )
    .unwrap();
    assert_eq!((d.vlan, d.tunnel_id, d.tcp_flags), (7, 9, 0x12));
    decode(LinkType::Raw, &ipv4(1, &[8, 0, 0, 0]), &mut d).unwrap();
    let mut fresh = Decoded::default();
    decode(LinkType::Raw, &ipv4(1, &[8, 0, 0, 0]), &mut fresh).unwrap();
    assert_eq!(d, fresh);
    assert_eq!(
        (d.vlan, d.tunnel, d.tcp_flags, d.src_mac),
        (0, TunnelKind::None, 0, [0; 6])
    );
}

/// xorshift64* pseudo-random generator (deterministic, no dependency).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn check_invariants(link: LinkType, buf: &[u8], d: &mut Decoded) {
    if decode(link, buf, d).is_ok() {
        assert!(d.ip_version == 4 || d.ip_version == 6);
        assert!((d.ip_offset as usize) < buf.len());
        if d.tunnel == TunnelKind::None {
            assert_eq!(d.tunnel_id, 0);
        }
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut buf = [0u8; 256];
    let mut d = Decoded::default();
    for i in 0..200_000 {
        let len = (rng.next() % 257) as usize;
        for chunk in buf[..len].chunks_mut(8) {
            let r = rng.next().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
        // Bias half of the buffers towards plausible headers so the walk
        // gets past the first layer.
        if i % 2 == 0 && len > 40 {
            let first = [0x45, 0x46, 0x4f, 0x60][(rng.next() % 4) as usize];
            match LinkType::ALL[i % LinkType::ALL.len()] {
                LinkType::Ethernet => {
                    let et: [u16; 8] = [
                        0x0800, 0x86dd, 0x8100, 0x88a8, 0x8847, 0x8864, 0x0800, 0x86dd,
                    ];
                    buf[12..14].copy_from_slice(&et[(rng.next() % 8) as usize].to_be_bytes());
                    buf[14] = first;
                }
                LinkType::Raw | LinkType::Ipv4 | LinkType::Ipv6 => buf[0] = first,
                _ => {}
            }
        }
        for link in LinkType::ALL {
            check_invariants(link, &buf[..len], &mut d);
        }
    }
}

#[test]
fn mutated_packets_never_panic() {
    let seeds: Vec<(LinkType, Vec<u8>)> = vec![
        (LinkType::Ethernet, eth_v4_tcp()),
        (
            LinkType::Ethernet,
            eth(
                0x86dd,
                &ipv6(
                    0,
                    &cat(&[
                        &[44, 0, 1, 4, 0, 0, 0, 0],
                        &[17, 0, 0, 1, 0, 0, 0, 9],
                        &udp(1, 2, &[0; 8]),
                    ]),
                ),
            ),
        ),
        (
            LinkType::Raw,
            ipv4(
                47,
                &gre(
                    0x3000,
                    0x6558,
                    &[0, 0, 0, 1, 0, 0, 0, 2],
                    &eth(
                        0x8100,
                        &tag(
                            1,
                            0x0800,
                            &ipv4(
                                17,
                                &udp(
                                    1,
                                    4789,
                                    &cat(&[
                                        &[8, 0, 0, 0, 0, 0, 1, 0],
                                        &eth(0x0800, &ipv4(4, &ipv4(6, &tcp(1, 2, 2, &[])))),
                                    ]),
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        ),
        (
            LinkType::Raw,
            ipv4(
                17,
                &udp(
                    2152,
                    2152,
                    &cat(&[
                        &[0x34, 0xff, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x85, 1, 0, 0, 0],
                        &ipv6(58, &[128, 0, 0, 0]),
                    ]),
                ),
            ),
        ),
        (
            LinkType::Ethernet,
            eth(
                0x8864,
                &cat(&[&[0x11, 0, 0, 1, 0, 30, 0, 0x21], &ipv4(132, &[0; 12])]),
            ),
        ),
        (
            LinkType::Raw,
            ipv4(
                47,
                &gre(
                    0x3081,
                    0x880b,
                    &[0, 24, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1],
                    &cat(&[&[0x21], &ipv4(6, &tcp(1, 2, 2, &[]))]),
                ),
            ),
        ),
    ];
    let mut rng = Rng(12345);
    let mut d = Decoded::default();
    for (link, seed) in &seeds {
        check_invariants(*link, seed, &mut d);
        for _ in 0..20_000 {
            let mut p = seed.clone();
            for _ in 0..1 + rng.next() % 4 {
                let i = (rng.next() as usize) % p.len();
                p[i] = rng.next() as u8;
            }
            let cut = (rng.next() as usize) % (p.len() + 1);
            check_invariants(*link, &p[..cut], &mut d);
            check_invariants(*link, &p, &mut d);
        }
    }
}

#[test]
fn tunnel_kind_round_trips_through_u8() {
    for k in [
        TunnelKind::None,
        TunnelKind::Gre,
        TunnelKind::Vxlan,
        TunnelKind::IpInIp,
        TunnelKind::Gtp,
        TunnelKind::Geneve,
        TunnelKind::Teredo,
        TunnelKind::Capwap,
    ] {
        assert_eq!(TunnelKind::from_u8(k as u8), k);
    }
    assert_eq!(TunnelKind::from_u8(200), TunnelKind::None);
}
