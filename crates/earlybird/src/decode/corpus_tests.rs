//! Decoder tests over the real captures of the shared corpus (skipped with a
//! message when the corpus is absent), including the fast path's agreement
//! with the general decoder on every packet it takes.

use super::testutil::{corpus, corpus_pcap, read_pcap};
use super::LinkType;
use super::{decode, fmt_addr, Decoded, Skip, TunnelKind};

/// Decodes every packet of a corpus file: per packet Ok(decoded) or the skip.
fn decode_file(rel: &str) -> Option<Vec<Result<Decoded, Skip>>> {
    let (linktype, packets) = corpus_pcap(rel)?;
    let link = LinkType::from_pcap(linktype)?;
    Some(
        packets
            .iter()
            .map(|p| {
                let mut d = Decoded::default();
                decode(link, p, &mut d).map(|()| d)
            })
            .collect(),
    )
}

/// Every classic-pcap file of the corpus with a supported link type decodes
/// without a panic.
#[test]
fn whole_corpus_never_panics() {
    let Some(root) = corpus() else { return };
    let mut files = 0;
    let mut packets = 0u64;
    let mut fast = 0u64;
    let mut stack = vec![root];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            let Some((linktype, pkts)) = read_pcap(&bytes) else {
                continue;
            };
            let Some(link) = LinkType::from_pcap(linktype) else {
                continue;
            };
            files += 1;
            let mut d = Decoded::default();
            for p in &pkts {
                let general = decode(link, p, &mut d).map(|()| d);
                if link == LinkType::Ethernet {
                    if let Some(f) = super::fast::ethernet_ipv4(p) {
                        assert_eq!(Ok(f.to_decoded()), general, "{}", path.display());
                        let b = p[super::fast::TCP_OFFSET_AT];
                        assert_eq!(
                            super::fast::payload_place(f.proto, f.ip_len, b),
                            (f.payload_offset, f.payload_len),
                            "{}",
                            path.display()
                        );
                        fast += 1;
                    }
                }
                packets += 1;
            }
        }
    }
    eprintln!("decoded {packets} packets from {files} files, {fast} also by the fast path");
    assert!(files > 100);
    assert!(fast > packets / 10, "the fast path agrees on a large share");
}

/// Per-file tally: (flows, not_ip, fragment_non_first, truncated, malformed).
type Tally = (usize, usize, usize, usize, usize);

fn tally(res: &[Result<Decoded, Skip>]) -> Tally {
    let n = |s: Skip| res.iter().filter(|r| **r == Err(s)).count();
    let ok = res.iter().filter(|r| r.is_ok()).count();
    (
        ok,
        n(Skip::NotIp),
        n(Skip::FragmentNonFirst),
        n(Skip::Truncated),
        n(Skip::Malformed),
    )
}

/// Skip counts per file, checked against the protocol hierarchy and
/// fragment counts of the corpus manifest (tshark).
#[test]
fn corpus_skip_counts() {
    let cases: &[(&str, Tally)] = &[
        // 3 frames, 3 fragments: the first is decoded, 2 are not.
        ("tunnels/pcpp__IPv4Frag.pcap", (1, 0, 2, 0, 0)),
        // 11 fragment frames of one request.
        ("tunnels/pcpp__frag_http_req.pcap", (1, 0, 10, 0, 0)),
        // 6 frames, 4 of them fragments (1 first, 3 later).
        ("tunnels/pcpp__ipv6-frag.pcap", (3, 0, 3, 0, 0)),
        ("tunnels/zeek__fragmented-4.pcap", (3, 0, 3, 0, 0)),
        // PPPoE discovery and PPP control only: no IP at all.
        ("tunnels/suri__pppoe_input.pcap", (0, 37, 0, 0, 0)),
        // 65 frames: discovery/LCP/PAP/IPCP/IPv6CP, and IPv6 data.
        ("tunnels/zeek__pppoe.pcap", (25, 40, 0, 0, 0)),
        // ARP under QinQ.
        ("tunnels/tcpdump__802.1ad_QinQ.pcap", (0, 2, 0, 0, 0)),
        // Linux cooked capture of ARP only.
        ("tunnels/zeek__linuxsll-arp.pcap", (0, 12, 0, 0, 0)),
        // The second destination-options header claims 40 bytes of a
        // 36-byte payload.
        ("tunnels/zeek__ipv6-mobility-dst-opts.pcap", (2, 0, 0, 0, 1)),
        // GTP-U with fragmented outer packets.
        (
            "tunnels/zeek__gtp1_gn_normal_incl_fragmentation.pcap",
            (72, 0, 36, 0, 0),
        ),
    ];
    for (rel, want) in cases {
        let Some(res) = decode_file(rel) else { return };
        assert_eq!(tally(&res), *want, "{rel}");
    }
}

/// One summary line of a decoded packet, for comparison with hand-read
/// headers.
fn line(d: &Decoded) -> String {
    format!(
        "{}:{} > {}:{} p{} off{} len{} vlan{} {}/{} pay{}+{}",
        fmt_addr(&d.src),
        d.sport,
        fmt_addr(&d.dst),
        d.dport,
        d.proto,
        d.ip_offset,
        d.ip_len,
        d.vlan,
        d.tunnel.name(),
        d.tunnel_id,
        d.payload_offset,
        d.payload_len
    )
}

/// Known packets of the tunnel captures (fields read by hand from the bytes).
#[test]
fn corpus_known_packets() {
    let cases: &[(&str, usize, &str)] = &[
        // VXLAN with the group-policy flag, VNI 3000001, inner ICMP echo.
        ("tunnels/pcpp__Vxlan1.pcap", 0, "192.168.203.3:0 > 192.168.203.5:0 p1 off64 len84 vlan0 vxlan/3000001 pay92+56"),
        // VLAN 5 outside, VXLAN VNI 1111, inner DNS.
        ("tunnels/ndpi__vxlan.pcap", 0, "10.10.20.4:44437 > 8.8.8.8:53 p17 off68 len58 vlan5 vxlan/1111 pay96+30"),
        // IPv6 in IPv6 in IPv6.
        ("tunnels/zeek__6in6in6.pcap", 0, "dead::beef:30000 > cafe::babe:13000 p17 off94 len52 vlan0 ipip/0 pay142+4"),
        // VLAN 215, one MPLS label, HTTP request.
        ("tunnels/pcpp__MplsPackets.pcap", 0, "2.3.4.6:20636 > 12.13.14.15:80 p6 off26 len335 vlan215 /0 pay66+295"),
        // PPPoE session carrying DHCPv6 (frame 0 is LCP).
        ("tunnels/pcpp__PPPoESession.pcap", 1, "fe80::c801:eff:fe88:8:547 > fe80::ce05:eff:fe88:0:546 p17 off22 len144 vlan0 /0 pay70+96"),
        // PPPoE over QinQ: outer tag 3704.
        ("tunnels/zeek__pppoe-over-qinq.pcap", 0, "1.1.1.1:20394 > 2.2.2.2:443 p6 off30 len64 vlan3704 /0 pay94+0"),
        // PPTP (enhanced GRE, call id 6016: one per direction, so not in the key) under VLAN 100.
        ("tunnels/zeek__gre-pptp.pcap", 0, "172.16.44.3:40768 > 8.8.8.8:53 p17 off98 len99 vlan100 gre/0 pay126+71"),
        // ERSPAN type III.
        ("tunnels/zeek__erspanIII.pcap", 0, "192.168.15.47:0 > 1.1.1.1:0 p1 off68 len84 vlan0 gre/0 pay96+56"),
        // GRE under VLAN 6 carrying syslog.
        ("tunnels/suri__bug-5633-gre-01_gre-udp.pcap", 0, "2.2.2.3:12345 > 2.2.2.2:514 p17 off42 len32 vlan6 gre/0 pay70+4"),
        // Linux cooked v1 and v2.
        ("tunnels/pcpp__SllPacket.pcap", 0, "2404:6800:8004::68:80 > 2404:138:4002:4000:230:48ff:fedd:53:50243 p6 off16 len1280 vlan0 /0 pay88+1208"),
        ("tunnels/pcpp__Sll2Packet.pcap", 0, "7.249.151.114:57292 > 116.63.66.108:443 p6 off20 len40 vlan0 /0 pay60+0"),
        // GTP-U carrying IPv6 LLMNR (TEID 2436252775, one per direction, so not in the key).
        ("tunnels/zeek__gtp7_ipv6.pcap", 0, "fe80::224c:4fff:fe43:414c:1234 > ff02::1:3:5355 p17 off50 len80 vlan0 gtp/0 pay98+32"),
        // First fragment of an NFS reply: ports from the first fragment.
        ("tunnels/pcpp__IPv4Frag.pcap", 0, "192.168.0.254:2049 > 192.168.0.2:1023 p17 off14 len1500 vlan0 /0 pay42+1472"),
    ];
    for (rel, idx, want) in cases {
        let Some(res) = decode_file(rel) else { return };
        match &res[*idx] {
            Ok(d) => assert_eq!(line(d), *want, "{rel} #{idx}"),
            Err(e) => panic!("{rel} #{idx}: {e:?}"),
        }
    }
    let Some(res) = decode_file("tunnels/pcpp__IPv4Frag.pcap") else {
        return;
    };
    assert_eq!(res[0].map(|d| d.first_fragment), Ok(true));
    let Some(res) = decode_file("tunnels/pcpp__Vxlan1.pcap") else {
        return;
    };
    assert_eq!(res[0].map(|d| d.tunnel), Ok(TunnelKind::Vxlan));
}

/// Windows hosts capturing their own TSO super-segments write IPv4 total
/// length 0; nDPI counts those packets in their flow (thrift.pcap: 66
/// client packets including #31, #33 and #154), so must we.
#[test]
fn corpus_tso_segments_are_flow_packets() {
    let Some(res) = decode_file("classify/dev/ndpi/pcap/thrift.pcap") else {
        return;
    };
    assert!(res.iter().all(|r| r.is_ok()));
    let d = res[31].expect("TSO packet decodes");
    assert_eq!(
        (d.sport, d.dport, d.ip_len, d.payload_offset),
        (53387, 11010, 2960, 54)
    );
    let c2s = res
        .iter()
        .flatten()
        .filter(|d| d.proto == 6 && d.sport == 53387 && d.dport == 11010)
        .count();
    assert_eq!(c2s, 66);
}
