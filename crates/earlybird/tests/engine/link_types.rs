//! Link types and tunnels beyond Ethernet, on the real captures of the
//! shared corpus.
//!
//! Every corpus capture under `tunnels/` and `malformed/` whose link type
//! used to make the run fail (PPP, PPP-HDLC, Frame Relay, 802.11, radiotap,
//! NFLOG, SLIP, ATM, and the exotic Juniper / SunATM / ARCnet / MFR ones)
//! must now run without error, with every packet read or counted as
//! `unsupported_link` (the MANIFEST's packet count), and packets in flows
//! wherever tshark's protocol stack in the MANIFEST holds IP and tshark
//! reported no error. The clean `tunnels/` captures must have every packet
//! in a flow, and the PPP copy of a suricata-verify test must decode like
//! its Ethernet twin. The tunnels added with them (VXLAN on 8472, Geneve,
//! Teredo, CAPWAP) must give flows of their kind. Skips cleanly without
//! the corpus.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use earlybird::{collect, CaptureFile, ModelRef, Report, RunOptions, Skip, TunnelKind};

/// Link types that ended the run before (pcap LINKTYPE numbers).
const FORMERLY_FATAL: [u32; 16] = [
    8, 9, 50, 100, 105, 106, 107, 123, 127, 129, 132, 137, 164, 178, 182, 239,
];

/// Link types still not decoded (no IP in them, or too rare): SunATM,
/// ARCnet, Juniper ES/ATM1/monitor/Ethernet, multilink Frame Relay.
const UNDECODED: [u32; 7] = [123, 129, 132, 137, 164, 178, 182];

/// The link type of a capture file's header (first interface for pcapng).
fn linktype(bytes: &[u8]) -> Option<u32> {
    let word = |at: usize, be: bool| -> Option<u32> {
        let b: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
        Some(if be {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    };
    match bytes.get(..4)? {
        [0x0a, 0x0d, 0x0d, 0x0a] => {
            let be = bytes.get(8..12)? == [0x1a, 0x2b, 0x3c, 0x4d];
            let idb = word(4, be)? as usize;
            if word(idb, be)? != 1 {
                return None;
            }
            // Link type: the first 2 bytes after the block type and length.
            let lt = word(idb + 8, be)?;
            Some(if be { lt >> 16 } else { lt & 0xffff })
        }
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => Some(word(20, false)? & 0xffff),
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => Some(word(20, true)? & 0xffff),
        _ => None,
    }
}

/// One MANIFEST row of `tunnels/` or `malformed/`.
struct Row {
    pkts: u64,
    stack: String,
    frag_frames: u64,
    tshark_errors: u64,
    read_error: bool,
}

/// MANIFEST rows by path relative to the corpus root.
fn manifest(root: &Path) -> BTreeMap<PathBuf, Row> {
    let text = std::fs::read_to_string(root.join("MANIFEST.md")).expect("MANIFEST.md");
    let mut rows = BTreeMap::new();
    let mut section = "";
    for line in text.lines() {
        if let Some(s) = line.strip_prefix("## ") {
            section = s.trim_end_matches('/');
            continue;
        }
        if section != "tunnels" && section != "malformed" {
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 12 || cells[1] == "file" || cells[1].starts_with("---") {
            continue;
        }
        let Ok(pkts) = cells[6].parse() else {
            continue;
        };
        rows.insert(
            Path::new(section).join(cells[1]),
            Row {
                pkts,
                stack: cells[7].to_string(),
                frag_frames: cells[8].parse().unwrap_or(0),
                tshark_errors: cells[10].parse().unwrap_or(0),
                read_error: !cells[11].is_empty(),
            },
        );
    }
    rows
}

fn run(path: &Path) -> (Vec<earlybird::CollectedFlow>, Report) {
    let f = CaptureFile::open(path).unwrap_or_else(|e| panic!("{e}"));
    collect(&[f], &RunOptions::default(), &ModelRef::default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn skipped(r: &Report) -> u64 {
    Skip::ALL
        .iter()
        .map(|&k| r.counters.skipped[k as usize])
        .sum()
}

#[test]
fn formerly_fatal_link_types_run_and_flow() {
    let Some(root) = common::corpus() else {
        return;
    };
    let rows = manifest(&root);
    let mut checked = 0;
    let mut with_ip = 0;
    let mut problems = Vec::new();
    for dir in ["tunnels", "malformed"] {
        for path in common::captures(&root.join(dir)) {
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            let Some(lt) = linktype(&bytes) else {
                continue;
            };
            if !FORMERLY_FATAL.contains(&lt) {
                continue;
            }
            let rel = path.strip_prefix(&root).unwrap().to_path_buf();
            // Runs without error (else `run` panics naming the file).
            let (_, r) = run(&path);
            let c = &r.counters;
            checked += 1;
            let name = rel.display();
            if c.packets_flowed + skipped(&r) != c.packets_read {
                problems.push(format!("{name}: a packet neither flowed nor skipped"));
            }
            if UNDECODED.contains(&lt) {
                let warned = r
                    .warnings
                    .iter()
                    .any(|w| w.message.contains(&format!("link type {lt} ")));
                if c.packets_read != 0 || !warned {
                    problems.push(format!("{name}: link type {lt} read or not warned"));
                }
            }
            // Rows whose packet count tshark could not give ("None") are
            // not in `rows`: nothing more to compare.
            let Some(row) = rows.get(&rel) else {
                continue;
            };
            if !row.read_error && c.packets_read + c.unsupported_link != row.pkts {
                problems.push(format!(
                    "{name}: {} read + {} unsupported_link != {} in the MANIFEST",
                    c.packets_read, c.unsupported_link, row.pkts
                ));
            }
            if UNDECODED.contains(&lt) {
                continue;
            }
            let ip = row.stack.split(' ').any(|p| p == "ip" || p == "ipv6");
            // Only fragments (suricata-verify's PPP defrag test: its first
            // fragment holds 8 bytes of TCP) make no flow, as over Ethernet.
            if ip && row.tshark_errors == 0 && row.frag_frames < row.pkts {
                with_ip += 1;
                if c.packets_flowed == 0 {
                    problems.push(format!("{name}: tshark sees IP ({}), no flow", row.stack));
                }
            }
        }
    }
    eprintln!("{checked} captures of formerly fatal link types, {with_ip} with IP per tshark");
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(checked >= 45, "only {checked} captures checked");
    assert!(with_ip >= 5, "only {with_ip} captures with IP");
}

#[test]
fn clean_captures_have_every_packet_in_a_flow() {
    let Some(root) = common::corpus() else {
        return;
    };
    // (file, link type, packets per the MANIFEST: all IP per tshark).
    for (file, lt, pkts) in [
        ("tunnels/zeek__radiotap.pcap", 127, 3),
        ("tunnels/zeek__wlanmon.pcap", 105, 3),
        ("tunnels/zeek__nflog-http.pcap", 239, 13),
        ("tunnels/tcpdump__mpls-traceroute.pcap", 9, 18),
        ("tunnels/tcpdump__mpls-ldp-hello.pcap", 9, 1),
        (
            "malformed/tcpdump/tcpdump__vrrp-vrrp_print-oobr.pcap",
            107,
            3,
        ),
        ("malformed/tcpdump/tcpdump__icmp-cksum-oobr-4.pcapng", 9, 1),
    ] {
        let path = root.join(file);
        assert_eq!(linktype(&std::fs::read(&path).unwrap()), Some(lt), "{file}");
        let (flows, r) = run(&path);
        assert_eq!(
            (r.counters.packets_read, r.counters.packets_flowed),
            (pkts, pkts),
            "{file}"
        );
        let in_flows: u64 = flows
            .iter()
            .map(|f| f.record.packets[0] + f.record.packets[1])
            .sum();
        assert_eq!(in_flows, pkts, "{file}");
    }
    // 802.11: the DNS query of zeek's wlanmon.pcap (to-DS QoS data, LLC/SNAP)
    // is 172.17.156.76:61738 → 208.67.220.220:53, the same in radiotap.pcap.
    for file in ["tunnels/zeek__wlanmon.pcap", "tunnels/zeek__radiotap.pcap"] {
        let (flows, _) = run(&root.join(file));
        let dns = flows
            .iter()
            .find(|f| f.record.key.dport == 53 || f.record.key.sport == 53)
            .unwrap_or_else(|| panic!("{file}: no DNS flow"));
        let k = &dns.record.key;
        let ends = [
            (earlybird::testing::fmt_addr(&k.src), k.sport),
            (earlybird::testing::fmt_addr(&k.dst), k.dport),
        ];
        assert!(
            ends.contains(&("172.17.156.76".to_string(), 61738)),
            "{file}: {ends:?}"
        );
        assert!(
            ends.contains(&("208.67.220.220".to_string(), 53)),
            "{file}: {ends:?}"
        );
        assert_eq!(dns.record.packets[0] + dns.record.packets[1], 2, "{file}");
    }
}

#[test]
fn ppp_decodes_like_its_ethernet_twin() {
    let Some(root) = common::corpus() else {
        return;
    };
    // suricata-verify's defrag test captured over PPP and over Ethernet +
    // VLAN: the same three IPv4 fragments.
    let t = root.join("tunnels");
    let (_, ppp) =
        run(&t.join("suri__defrag_bug-6887-defrag-ppp-ipv4-tcp-syn_frag-ppp-ip-tcp-syn.pcap"));
    let (_, eth) = run(
        &t.join("suri__defrag_bug-6887-defrag-eth-vlan-ipv4-tcp-syn_frag-eth-vlan-ip-tcp-syn.pcap")
    );
    assert_eq!(ppp.counters.packets_read, 3);
    assert_eq!(ppp.counters.packets_flowed, eth.counters.packets_flowed);
    assert_eq!(ppp.counters.skipped, eth.counters.skipped);
}

/// Packets of `file`'s flows by tunnel kind.
fn by_tunnel(root: &Path, file: &str) -> BTreeMap<&'static str, (u64, Vec<u32>)> {
    let (flows, r) = run(&root.join(file));
    assert_eq!(
        r.counters.packets_read,
        r.counters.packets_flowed + skipped(&r),
        "{file}"
    );
    let mut m: BTreeMap<&'static str, (u64, Vec<u32>)> = BTreeMap::new();
    for f in &flows {
        let e = m.entry(f.record.key.tunnel.name()).or_default();
        e.0 += f.record.packets[0] + f.record.packets[1];
        if !e.1.contains(&f.record.key.tunnel_id) {
            e.1.push(f.record.key.tunnel_id);
        }
    }
    m
}

#[test]
fn new_tunnels_are_followed() {
    let Some(root) = common::corpus() else {
        return;
    };
    // tcpdump's VXLAN on the Linux port: ICMP echo in VNI 100 (8 packets),
    // the 2 ARP frames inside stay outer UDP flows.
    let m = by_tunnel(&root, "tunnels/tcpdump__vxlan_port_8472.pcap");
    assert_eq!(m.get("vxlan"), Some(&(8, vec![100])), "{m:?}");
    assert_eq!(m.get("").map(|e| e.0), Some(2), "{m:?}");
    // Geneve, inner Ethernet with options (zeek) and inner IPv4 with 40
    // bytes of options (tcpdump's GCP capture).
    let m = by_tunnel(&root, "tunnels/zeek__geneve.pcap");
    assert_eq!(m.get("geneve").map(|e| e.0), Some(6), "{m:?}");
    let m = by_tunnel(&root, "tunnels/tcpdump__geneve-gcp.pcap");
    assert_eq!(m.get("geneve").map(|e| e.0), Some(1), "{m:?}");
    let m = by_tunnel(&root, "tunnels/tcpdump__geneve.pcap");
    let (n, vnis) = m.get("geneve").expect("geneve flows");
    assert!(
        *n > 0 && vnis.contains(&0xa) && vnis.contains(&0xb),
        "{m:?}"
    );
    // Teredo with authentication and origin indicators: IPv6 inside.
    let (flows, _) = run(&root.join("tunnels/zeek__teredo_bubble_with_payload.pcap"));
    let teredo: Vec<_> = flows
        .iter()
        .filter(|f| f.record.key.tunnel == TunnelKind::Teredo)
        .collect();
    assert!(!teredo.is_empty());
    assert!(teredo.iter().all(|f| f.record.key.ip_version == 6));
    // CAPWAP data from a Cisco AP (802.11 with swapped frame control): the
    // DHCP request and ICMPv6 nDPI reports inside, radio id 1.
    let (flows, _) = run(&root.join("classify/dev/ndpi/pcap/capwap.pcap"));
    let capwap: Vec<_> = flows
        .iter()
        .filter(|f| f.record.key.tunnel == TunnelKind::Capwap)
        .collect();
    assert!(capwap.iter().all(|f| f.record.key.tunnel_id == 1));
    assert!(capwap
        .iter()
        .any(|f| (f.record.key.sport, f.record.key.dport) == (68, 67)));
    assert!(capwap.iter().any(|f| f.record.key.proto == 58));
}

/// A classic pcap (microseconds, little-endian) of link type `lt` holding
/// `frames`, one a millisecond.
fn pcap(lt: u32, frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for w in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, lt] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    for (i, f) in frames.iter().enumerate() {
        for w in [
            1_700_000_000u32,
            1000 * i as u32,
            f.len() as u32,
            f.len() as u32,
        ] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(f);
    }
    out
}

/// An IPv4 TCP segment 10.0.0.1:40000 → 10.0.0.2:80 with `flags`.
fn segment(flags: u8) -> Vec<u8> {
    let mut ip = vec![
        0x45, 0, 0, 40, 0, 1, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    ip.extend_from_slice(&40000u16.to_be_bytes());
    ip.extend_from_slice(&80u16.to_be_bytes());
    ip.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    ip
}

#[test]
fn a_ppp_capture_that_also_holds_cisco_hdlc_frames_gives_one_flow() {
    // A router's PPP capture (LINKTYPE_PPP, 9) whose serial link also
    // carries Cisco HDLC frames (address 0x0F unicast, 0x8F broadcast;
    // EtherType 0x0800 after the control byte): every frame is the same
    // connection, so one flow of six packets, none skipped.
    let frames: Vec<Vec<u8>> = [
        (&[0xff, 0x03, 0x00, 0x21][..], 0x02),
        (&[0x0f, 0x00, 0x08, 0x00][..], 0x12),
        (&[0x00, 0x21][..], 0x10),
        (&[0x8f, 0x00, 0x08, 0x00][..], 0x18),
        (&[0x21][..], 0x10),
        (&[0x0f, 0x00, 0x08, 0x00][..], 0x11),
    ]
    .iter()
    .map(|(head, flags)| [head.to_vec(), segment(*flags)].concat())
    .collect();
    let dir = std::env::temp_dir().join(format!("eb-ppp-hdlc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ppp_with_chdlc.pcap");
    std::fs::write(&path, pcap(9, &frames)).unwrap();
    let (flows, r) = run(&path);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(r.counters.packets_read, 6);
    assert_eq!(skipped(&r), 0, "{:?}", r.counters.skipped);
    assert_eq!(flows.len(), 1);
    let total: u64 = flows
        .iter()
        .map(|f| f.record.packets[0] + f.record.packets[1])
        .sum();
    assert_eq!(total, 6);
}

/// An IPv4 packet `src` → `dst` of protocol `proto` around `body`.
fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], body: &[u8]) -> Vec<u8> {
    let len = (20 + body.len()) as u16;
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&len.to_be_bytes());
    ip.extend_from_slice(&[0, 1, 0, 0, 64, proto, 0, 0]);
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    ip.extend_from_slice(body);
    ip
}

/// A TCP segment of the inner session 10.0.0.1:40000 ↔ 10.0.0.2:80, sent
/// by the client when `up`.
fn inner(up: bool, flags: u8) -> Vec<u8> {
    let (a, b) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    let (src, dst, sp, dp) = if up {
        (a, b, 40000u16, 80u16)
    } else {
        (b, a, 80, 40000)
    };
    let mut t = Vec::new();
    t.extend_from_slice(&sp.to_be_bytes());
    t.extend_from_slice(&dp.to_be_bytes());
    t.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    ipv4(6, src, dst, &t)
}

/// Runs raw-IP `frames` and returns the flows and the report.
fn run_frames(name: &str, frames: &[Vec<u8>]) -> (Vec<earlybird::CollectedFlow>, Report) {
    let dir = std::env::temp_dir().join(format!("eb-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.pcap"));
    std::fs::write(&path, pcap(101, frames)).unwrap();
    let out = run(&path);
    std::fs::remove_dir_all(&dir).ok();
    out
}

/// The handshake and a FIN exchange of the inner session: (uplink, flags).
const SESSION: [(bool, u8); 5] = [
    (true, 0x02),
    (false, 0x12),
    (true, 0x10),
    (true, 0x11),
    (false, 0x11),
];

#[test]
fn a_gtp_u_session_with_a_teid_each_way_is_one_two_way_flow() {
    // eNodeB 192.168.0.1 ↔ gateway 192.168.0.2, GTP-U on 2152 both ways;
    // each end sends the TEID the receiver handed out (TS 29.281): 0x1
    // uplink, 0x2 downlink. One inner TCP session, so one flow.
    let (enb, gw) = ([192, 168, 0, 1], [192, 168, 0, 2]);
    let frames: Vec<Vec<u8>> = SESSION
        .iter()
        .map(|&(up, flags)| {
            let user = inner(up, flags);
            let teid: u32 = if up { 1 } else { 2 };
            let mut g = vec![0x30, 0xff];
            g.extend_from_slice(&(user.len() as u16).to_be_bytes());
            g.extend_from_slice(&teid.to_be_bytes());
            g.extend_from_slice(&user);
            let mut u = Vec::new();
            for w in [2152u16, 2152, (8 + g.len()) as u16, 0] {
                u.extend_from_slice(&w.to_be_bytes());
            }
            u.extend_from_slice(&g);
            let (s, d) = if up { (enb, gw) } else { (gw, enb) };
            ipv4(17, s, d, &u)
        })
        .collect();
    let (flows, r) = run_frames("gtp-two-teids", &frames);
    assert_eq!(skipped(&r), 0, "{:?}", r.counters.skipped);
    assert_eq!(flows.len(), 1, "{flows:#?}");
    let k = &flows[0].record;
    assert_eq!(k.key.tunnel, TunnelKind::Gtp);
    assert_eq!((k.packets[0], k.packets[1]), (3, 2));
    assert_eq!((k.key.sport, k.key.dport), (40000, 80));
}

#[test]
fn a_pptp_call_with_a_call_id_each_way_is_one_two_way_flow() {
    // PPTP's enhanced GRE (version 1): each side puts the peer's call id
    // in the key field, 0x4000 client → server and 0x0007 back.
    let (pns, pac) = ([192, 168, 0, 1], [192, 168, 0, 2]);
    let frames: Vec<Vec<u8>> = SESSION
        .iter()
        .enumerate()
        .map(|(i, &(up, flags))| {
            let ppp = [&[0xff, 0x03, 0x00, 0x21][..], &inner(up, flags)].concat();
            let call: u16 = if up { 0x4000 } else { 0x0007 };
            let mut g = vec![0x30, 0x01, 0x88, 0x0b];
            g.extend_from_slice(&(ppp.len() as u16).to_be_bytes());
            g.extend_from_slice(&call.to_be_bytes());
            g.extend_from_slice(&(i as u32).to_be_bytes());
            g.extend_from_slice(&ppp);
            let (s, d) = if up { (pns, pac) } else { (pac, pns) };
            ipv4(47, s, d, &g)
        })
        .collect();
    let (flows, r) = run_frames("pptp-two-calls", &frames);
    assert_eq!(skipped(&r), 0, "{:?}", r.counters.skipped);
    assert_eq!(flows.len(), 1, "{flows:#?}");
    let k = &flows[0].record;
    assert_eq!(k.key.tunnel, TunnelKind::Gre);
    assert_eq!((k.packets[0], k.packets[1]), (3, 2));
}
