//! Community ID version 1: one string per flow that Zeek, Suricata,
//! Arkime and others compute the same way from the same 5-tuple, so
//! records of different tools can be joined on it.
//!
//! Contract: [`v1`] hashes a seed (16 bits), the two addresses (4 bytes
//! for IPv4, 16 for IPv6), the protocol and, for TCP, UDP, SCTP, ICMP and
//! ICMPv6, two 16-bit "ports", endpoints ordered so that the smaller
//! address:port comes first, with SHA-1, and returns `1:` and the base64
//! of the digest (30 bytes of ASCII). ICMP and ICMPv6 have no ports: their
//! type and code become them ([`icmp_ports`]: a request and its reply get
//! the same pair, so they give the same ID; a type without a counterpart
//! is one-way and keeps its order). [`of_record`] computes it for a flow
//! record: from the record's client and server, or for an ICMP flow its
//! first packet's type and code; `None` for an ICMP flow whose first
//! packet was too short to carry them and for a key that is not IPv4 or
//! IPv6. The flow's VLAN and tunnel are not part of the ID (the
//! specification leaves them out). Pure functions; nothing fails or
//! allocates.

use crate::decode::icmp::Icmp;
use crate::flow::record::RecordKey;

/// Length of a version 1 Community ID: `1:` and 28 characters of base64.
pub const LEN: usize = 30;

/// A version 1 Community ID (ASCII, [`LEN`] bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CommunityId([u8; LEN]);

impl CommunityId {
    /// The ID as text, e.g. `1:LQU9qZlK+B5F3KDmev6m5PMibrg=`.
    pub fn as_str(&self) -> &str {
        // Only ASCII is ever stored (see `v1`).
        std::str::from_utf8(&self.0).unwrap_or("")
    }

    /// The ID's bytes.
    pub fn as_bytes(&self) -> &[u8; LEN] {
        &self.0
    }
}

impl std::fmt::Display for CommunityId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// IP protocol numbers whose "ports" enter the hash.
const ICMP: u8 = 1;
const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP6: u8 = 58;
const SCTP: u8 = 132;

/// The Community ID of a flow between `src` and `dst` (both 4 or both 16
/// bytes, network order) of protocol `proto`; `ports` are the source and
/// destination ports (ICMP: [`icmp_ports`]), ignored for protocols other
/// than TCP, UDP, SCTP, ICMP and ICMPv6. `one_way`: keep the given order
/// (a one-way ICMP type); otherwise the smaller endpoint goes first.
pub fn v1(
    seed: u16,
    src: &[u8],
    dst: &[u8],
    proto: u8,
    ports: (u16, u16),
    one_way: bool,
) -> CommunityId {
    let has_ports = matches!(proto, TCP | UDP | SCTP | ICMP | ICMP6);
    let (sp, dp) = if has_ports { ports } else { (0, 0) };
    let swap = !one_way && (src, sp) > (dst, dp);
    let (a, b, pa, pb) = match swap {
        true => (dst, src, dp, sp),
        false => (src, dst, sp, dp),
    };
    // The hashed bytes (at most 2 + 16 + 16 + 2 + 4 = 40) always fit in
    // one SHA-1 block with its padding (55 bytes at most), so the block is
    // laid out here and compressed once: the streaming hasher's buffering
    // and the base64 crate's general encoder cost a third as much again as
    // the compression itself.
    let mut block = [0u8; 64];
    let mut n = 0;
    for part in [&seed.to_be_bytes()[..], a, b, &[proto, 0]] {
        block[n..n + part.len()].copy_from_slice(part);
        n += part.len();
    }
    if has_ports {
        block[n..n + 2].copy_from_slice(&pa.to_be_bytes());
        block[n + 2..n + 4].copy_from_slice(&pb.to_be_bytes());
        n += 4;
    }
    block[n] = 0x80;
    block[56..].copy_from_slice(&(n as u64 * 8).to_be_bytes());
    let mut state = SHA1_INIT;
    sha1::compress(&mut state, &[block.into()]);
    let mut digest = [0u8; 21];
    for (d, w) in digest.chunks_exact_mut(4).zip(state) {
        d.copy_from_slice(&w.to_be_bytes());
    }
    let mut out = [0u8; LEN];
    out[..2].copy_from_slice(b"1:");
    // 20 bytes are 28 characters of padded base64: six groups of three
    // bytes, then two bytes (three characters and one `=`); the 21st byte
    // of `digest` is a zero that lets the last group be read as three.
    for (g, o) in digest.chunks_exact(3).zip(out[2..].chunks_exact_mut(4)) {
        let v = u32::from(g[0]) << 16 | u32::from(g[1]) << 8 | u32::from(g[2]);
        for (k, c) in o.iter_mut().enumerate() {
            *c = BASE64[(v >> (18 - 6 * k) & 63) as usize];
        }
    }
    out[LEN - 1] = b'=';
    CommunityId(out)
}

/// SHA-1's initial state (FIPS 180-4, 5.3.1).
const SHA1_INIT: [u32; 5] = [
    0x6745_2301,
    0xEFCD_AB89,
    0x98BA_DCFE,
    0x1032_5476,
    0xC3D2_E1F0,
];

/// The standard base64 alphabet (RFC 4648, table 1).
const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The "ports" of an ICMP (`v6 = false`) or ICMPv6 message of `ty` and
/// `code`, and whether they are one-way: a request or reply type with a
/// counterpart gives (its type, the counterpart's type), so both ways of
/// an exchange give one ID; any other type gives (type, code), one-way.
pub fn icmp_ports(v6: bool, ty: u8, code: u8) -> ((u16, u16), bool) {
    let other = match v6 {
        false => match ty {
            0 => Some(8), // echo reply / request
            8 => Some(0),
            9 => Some(10), // router advertisement / solicitation
            10 => Some(9),
            13 => Some(14), // timestamp request / reply
            14 => Some(13),
            15 => Some(16), // information request / reply
            16 => Some(15),
            17 => Some(18), // address mask request / reply
            18 => Some(17),
            _ => None,
        },
        true => match ty {
            128 => Some(129), // echo request / reply
            129 => Some(128),
            130 => Some(131), // multicast listener query / report
            131 => Some(130),
            133 => Some(134), // router solicitation / advertisement
            134 => Some(133),
            135 => Some(136), // neighbor solicitation / advertisement
            136 => Some(135),
            139 => Some(140), // node information query / response
            140 => Some(139),
            144 => Some(145), // home agent address discovery request / reply
            145 => Some(144),
            _ => None,
        },
    };
    match other {
        Some(o) => ((u16::from(ty), o), false),
        None => ((u16::from(ty), u16::from(code)), true),
    }
}

/// The Community ID of a flow record's key with `seed`; `icmp` is the
/// record's ICMP type and code (see the module docs for `None`).
#[inline]
pub fn of_record(seed: u16, key: &RecordKey, icmp: Option<Icmp>) -> Option<CommunityId> {
    let (src, dst): (&[u8], &[u8]) = match key.ip_version {
        4 => (&key.src[12..], &key.dst[12..]),
        6 => (&key.src[..], &key.dst[..]),
        _ => return None,
    };
    let (ports, one_way) = match key.proto {
        ICMP | ICMP6 => {
            let m = icmp?;
            icmp_ports(key.proto == ICMP6, m.ty, m.code)
        }
        _ => ((key.sport, key.dport), false),
    };
    Some(v1(seed, src, dst, key.proto, ports, one_way))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn id(seed: u16, proto: u8, s: &str, d: &str, sp: u16, dp: u16) -> String {
        let ip = |t: &str| match t.parse::<IpAddr>().unwrap() {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        };
        let (ports, one_way) = match proto {
            ICMP | ICMP6 => icmp_ports(proto == ICMP6, sp as u8, dp as u8),
            _ => ((sp, dp), false),
        };
        v1(seed, &ip(s), &ip(d), proto, ports, one_way).to_string()
    }

    /// The specification's published baseline (`baseline/baseline_deflt.json`
    /// and `baseline_seed1.json` of corelight/community-id-spec): ICMP rows
    /// give type and code.
    #[test]
    fn specification_vectors() {
        let cases: &[(u16, u8, &str, &str, u16, u16, &str)] = &[
            (
                0,
                6,
                "128.232.110.120",
                "66.35.250.204",
                34855,
                80,
                "1:LQU9qZlK+B5F3KDmev6m5PMibrg=",
            ),
            (
                0,
                6,
                "66.35.250.204",
                "128.232.110.120",
                80,
                34855,
                "1:LQU9qZlK+B5F3KDmev6m5PMibrg=",
            ),
            (
                0,
                17,
                "192.168.1.52",
                "8.8.8.8",
                54585,
                53,
                "1:d/FP5EW3wiY1vCndhwleRRKHowQ=",
            ),
            (
                0,
                17,
                "8.8.8.8",
                "192.168.1.52",
                53,
                54585,
                "1:d/FP5EW3wiY1vCndhwleRRKHowQ=",
            ),
            (
                0,
                132,
                "192.168.170.8",
                "192.168.170.56",
                7,
                7,
                "1:MP2EtRCAUIZvTw6MxJHLV7N7JDs=",
            ),
            (
                0,
                132,
                "192.168.170.56",
                "192.168.170.8",
                7,
                7,
                "1:MP2EtRCAUIZvTw6MxJHLV7N7JDs=",
            ),
            (
                0,
                6,
                "2001:470:e5bf:dead:4957:2174:e82c:4887",
                "2607:f8b0:400c:c03::1a",
                63943,
                25,
                "1:/qFaeAR+gFe1KYjMzVDsMv+wgU4=",
            ),
            (
                0,
                6,
                "2607:f8b0:400c:c03::1a",
                "2001:470:e5bf:dead:4957:2174:e82c:4887",
                25,
                63943,
                "1:/qFaeAR+gFe1KYjMzVDsMv+wgU4=",
            ),
            // RSVP: no ports.
            (
                0,
                46,
                "10.1.12.1",
                "10.1.12.2",
                0,
                0,
                "1:KHlLkgoJW7ifUTyTSgyVfkFHzKw=",
            ),
            (
                0,
                46,
                "10.1.12.2",
                "10.1.12.1",
                0,
                0,
                "1:KHlLkgoJW7ifUTyTSgyVfkFHzKw=",
            ),
            // ICMP echo request and its reply; time exceeded (one-way).
            (
                0,
                1,
                "192.168.0.89",
                "192.168.0.1",
                8,
                0,
                "1:X0snYXpgwiv9TZtqg64sgzUn6Dk=",
            ),
            (
                0,
                1,
                "192.168.0.1",
                "192.168.0.89",
                0,
                0,
                "1:X0snYXpgwiv9TZtqg64sgzUn6Dk=",
            ),
            (
                0,
                1,
                "10.0.0.1",
                "10.0.0.2",
                11,
                0,
                "1:YHxtAirCG//0OzkcVAukqKQN9xM=",
            ),
            // ICMPv6 neighbor solicitation / advertisement, echo, router
            // solicitation and advertisement, time exceeded, unreachable.
            (
                0,
                58,
                "fe80::200:86ff:fe05:80da",
                "fe80::260:97ff:fe07:69ea",
                135,
                0,
                "1:dGHyGvjMfljg6Bppwm3bg0LO8TY=",
            ),
            (
                0,
                58,
                "fe80::260:97ff:fe07:69ea",
                "fe80::200:86ff:fe05:80da",
                136,
                0,
                "1:dGHyGvjMfljg6Bppwm3bg0LO8TY=",
            ),
            (
                0,
                58,
                "fe80::260:97ff:fe07:69ea",
                "fe80::200:86ff:fe05:80da",
                135,
                0,
                "1:zavyT/cezQr1fmImYCwYnMXbgck=",
            ),
            (
                0,
                58,
                "fe80::200:86ff:fe05:80da",
                "fe80::260:97ff:fe07:69ea",
                136,
                0,
                "1:zavyT/cezQr1fmImYCwYnMXbgck=",
            ),
            (
                0,
                58,
                "3ffe:507:0:1:200:86ff:fe05:80da",
                "3ffe:501:0:1001::2",
                128,
                0,
                "1:+TW+HtLHvV1xnGhV1lv7XoJrqQg=",
            ),
            (
                0,
                58,
                "3ffe:501:0:1001::2",
                "3ffe:507:0:1:200:86ff:fe05:80da",
                129,
                0,
                "1:+TW+HtLHvV1xnGhV1lv7XoJrqQg=",
            ),
            (
                0,
                58,
                "fe80::200:86ff:fe05:80da",
                "ff02::2",
                133,
                0,
                "1:hO+sN4H+MG5MY/8hIrXPqc4ZQz0=",
            ),
            (
                0,
                58,
                "fe80::260:97ff:fe07:69ea",
                "ff02::1",
                134,
                0,
                "1:pkvHqCL88/tg1k4cPigmZXUtL00=",
            ),
            (
                0,
                58,
                "3ffe:501:1800:2345::2",
                "3ffe:507:0:1:200:86ff:fe05:80da",
                3,
                0,
                "1:2ObVBgIn28oZvibYZhZMBgh7WdQ=",
            ),
            (
                0,
                58,
                "3ffe:501:410:0:2c0:dfff:fe47:33e",
                "3ffe:507:0:1:200:86ff:fe05:80da",
                1,
                4,
                "1:hLZd0XGWojozrvxqE0dWB1iM6R0=",
            ),
            // Seed 1.
            (
                1,
                6,
                "128.232.110.120",
                "66.35.250.204",
                34855,
                80,
                "1:3V71V58M3Ksw/yuFALMcW0LAHvc=",
            ),
            (
                1,
                17,
                "8.8.8.8",
                "192.168.1.52",
                53,
                54585,
                "1:Q9We8WO3piVF8yEQBNJF4uiSVrI=",
            ),
            (
                1,
                1,
                "192.168.0.1",
                "192.168.0.89",
                0,
                0,
                "1:03g6IloqVBdcZlPyX8r0hgoE7kA=",
            ),
            (
                1,
                46,
                "10.1.12.2",
                "10.1.12.1",
                0,
                0,
                "1:rYir8gphR31noO9iDRQmF/BteEI=",
            ),
            (
                1,
                58,
                "fe80::260:97ff:fe07:69ea",
                "fe80::200:86ff:fe05:80da",
                135,
                0,
                "1:2hSqmsDZ2kdcY9kbiUzOEBic0iM=",
            ),
        ];
        for &(seed, proto, s, d, sp, dp, want) in cases {
            assert_eq!(
                id(seed, proto, s, d, sp, dp),
                want,
                "{proto} {s} {d} {sp} {dp} seed {seed}"
            );
        }
    }

    #[test]
    fn records_use_the_client_first_and_the_icmp_type() {
        let mut key = RecordKey {
            ip_version: 4,
            proto: 6,
            sport: 34855,
            dport: 80,
            ..RecordKey::default()
        };
        key.src[10..].copy_from_slice(&[0xff, 0xff, 128, 232, 110, 120]);
        key.dst[10..].copy_from_slice(&[0xff, 0xff, 66, 35, 250, 204]);
        let got = of_record(0, &key, None).unwrap();
        assert_eq!(got.as_str(), "1:LQU9qZlK+B5F3KDmev6m5PMibrg=");
        key.proto = 1;
        key.sport = 0;
        key.dport = 0;
        assert_eq!(of_record(0, &key, None), None, "ICMP without a type");
        assert!(of_record(0, &key, Some(Icmp { ty: 8, code: 0 })).is_some());
        key.ip_version = 0;
        assert_eq!(of_record(0, &key, None), None);
    }

    /// The one block compressed and the base64 written by hand give what
    /// the streaming SHA-1 and the base64 crate give, over addresses,
    /// protocols, ports and seeds drawn from a fixed generator (both
    /// orders and both address families; every protocol with and without
    /// ports).
    #[test]
    fn one_block_equals_the_streaming_hash() {
        use base64::Engine as _;
        use sha1::{Digest, Sha1};
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..4000 {
            let len = if i % 2 == 0 { 4 } else { 16 };
            let mut src = [0u8; 16];
            let mut dst = [0u8; 16];
            for b in src.iter_mut().chain(dst.iter_mut()) {
                *b = next() as u8;
            }
            if i % 7 == 0 {
                dst = src; // equal addresses: the ports decide the order
            }
            let proto = [ICMP, TCP, UDP, ICMP6, SCTP, 46, 0, 255][i % 8];
            let ports = (next() as u16, next() as u16);
            let seed = if i % 3 == 0 { 0 } else { next() as u16 };
            let one_way = i % 5 == 0;
            let (s, d) = (&src[..len], &dst[..len]);
            let has_ports = matches!(proto, TCP | UDP | SCTP | ICMP | ICMP6);
            let (sp, dp) = if has_ports { ports } else { (0, 0) };
            let swap = !one_way && (s, sp) > (d, dp);
            let (a, b, pa, pb) = if swap { (d, s, dp, sp) } else { (s, d, sp, dp) };
            let mut h = Sha1::new();
            h.update(seed.to_be_bytes());
            h.update(a);
            h.update(b);
            h.update([proto, 0]);
            if has_ports {
                h.update(pa.to_be_bytes());
                h.update(pb.to_be_bytes());
            }
            let want = format!(
                "1:{}",
                base64::engine::general_purpose::STANDARD.encode(h.finalize())
            );
            let got = v1(seed, s, d, proto, ports, one_way);
            assert_eq!(got.as_str(), want, "case {i}");
        }
    }
}
