//! `earlybird gen handshakes` read back by the payload labellers
//! (`flows --labellers`) and by tshark: the truth of every flow (SNI and
//! ALPN of its ClientHello, Host and User-Agent of its request, SSH
//! banners, DNS question and A answer) is read here from the capture's
//! bytes by hand (QUIC Initials opened with the engine's
//! `analyze::quic`, as the generator's contract promises they open), and
//! every record must carry it; a TLS or QUIC flow to an address a DNS
//! answer named well before it carries that name in `dns_name`. tshark
//! (SKIPPED when missing) must read the same SNI from every ClientHello,
//! over TCP and in the QUIC Initials it decrypts itself.

use crate::common::eb;
use crate::lib_common;

use std::collections::HashMap;
use std::path::Path;

use earlybird::analyze::quic;

/// A flow: protocol, client (address, port), server (address, port).
type Key = (u8, ([u8; 4], u16), ([u8; 4], u16));

/// What the capture's bytes say a flow's record must carry.
#[derive(Debug, Default)]
struct Truth {
    /// Packet number of the flow's first packet.
    first: usize,
    sni: Option<String>,
    alpn: Vec<String>,
    host: Option<String>,
    user_agent: Option<String>,
    banners: [Option<String>; 2],
    dns_query: Option<String>,
    /// DNS: the A answer's address.
    answer: Option<[u8; 4]>,
}

fn be16(b: &[u8], at: usize) -> usize {
    usize::from(u16::from_be_bytes([b[at], b[at + 1]]))
}

/// SNI and ALPN names of a ClientHello handshake message (type 1).
fn client_hello(m: &[u8]) -> (String, Vec<String>) {
    assert_eq!(m[0], 1, "a ClientHello");
    let mut at = 4 + 2 + 32;
    at += 1 + usize::from(m[at]);
    at += 2 + be16(m, at);
    at += 1 + usize::from(m[at]);
    let end = at + 2 + be16(m, at);
    at += 2;
    let (mut sni, mut alpn) = (String::new(), Vec::new());
    while at < end {
        let (ty, len) = (be16(m, at), be16(m, at + 2));
        let d = &m[at + 4..at + 4 + len];
        match ty {
            0 => sni = String::from_utf8(d[5..].to_vec()).unwrap(),
            16 => {
                let mut i = 2;
                while i < d.len() {
                    let l = usize::from(d[i]);
                    alpn.push(String::from_utf8(d[i + 1..i + 1 + l].to_vec()).unwrap());
                    i += 1 + l;
                }
            }
            _ => {}
        }
        at += 4 + len;
    }
    (sni, alpn)
}

/// The (whole) question name of a DNS message.
fn dns_name(m: &[u8]) -> (String, usize) {
    let mut at = 12;
    let mut labels = Vec::new();
    while m[at] != 0 {
        let l = usize::from(m[at]);
        labels.push(String::from_utf8(m[at + 1..at + 1 + l].to_vec()).unwrap());
        at += 1 + l;
    }
    (labels.join("."), at + 1)
}

/// Every flow's truth, read from a classic little-endian Ethernet pcap.
fn truth(file: &Path) -> HashMap<Key, Truth> {
    let bytes = std::fs::read(file).unwrap();
    let mut flows: HashMap<Key, Truth> = HashMap::new();
    // Client stream of each TLS flow, for a ClientHello in two segments.
    let mut streams: HashMap<Key, Vec<u8>> = HashMap::new();
    let mut at = 24;
    let mut i = 0;
    while at < bytes.len() {
        let caplen = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        let f = &bytes[at + 16..at + 16 + caplen];
        at += 16 + caplen;
        let ip = &f[14..];
        let ip_len = be16(ip, 2);
        let proto = ip[9];
        let src: [u8; 4] = ip[12..16].try_into().unwrap();
        let dst: [u8; 4] = ip[16..20].try_into().unwrap();
        let l4 = &ip[20..ip_len];
        let (sp, dp) = (be16(l4, 0) as u16, be16(l4, 2) as u16);
        let payload = if proto == 6 {
            &l4[usize::from(l4[12] >> 4) * 4..]
        } else {
            &l4[8..]
        };
        // The server's port is the well-known one.
        let to_server = matches!(dp, 22 | 53 | 80 | 443);
        let key = if to_server {
            (proto, (src, sp), (dst, dp))
        } else {
            (proto, (dst, dp), (src, sp))
        };
        let t = flows.entry(key).or_insert_with(|| Truth {
            first: i,
            ..Truth::default()
        });
        i += 1;
        if payload.is_empty() {
            continue;
        }
        match (proto, key.2 .1) {
            (6, 443) if to_server => {
                let s = streams.entry(key).or_default();
                s.extend_from_slice(payload);
                if t.sni.is_none() && s.len() >= 5 && s.len() >= 5 + be16(s, 3) {
                    let (sni, alpn) = client_hello(&s[5..]);
                    (t.sni, t.alpn) = (Some(sni), alpn);
                }
            }
            (17, 443) if to_server && t.sni.is_none() => {
                let h = quic::long_header(payload).unwrap();
                let keys = quic::initial_keys(quic::V1, h.dcid, false).unwrap();
                let plain = quic::open_initial(payload, &h, &keys).unwrap();
                let mut crypto = Vec::new();
                quic::crypto_frames(&plain, |_, d| crypto.extend_from_slice(d)).unwrap();
                let (sni, alpn) = client_hello(&crypto);
                (t.sni, t.alpn) = (Some(sni), alpn);
            }
            (6, 80) if to_server && t.host.is_none() => {
                let text = String::from_utf8(payload.to_vec()).unwrap();
                assert!(text.starts_with("GET /"), "{text}");
                for line in text.lines() {
                    if let Some(v) = line.strip_prefix("Host: ") {
                        t.host = Some(v.into());
                    } else if let Some(v) = line.strip_prefix("User-Agent: ") {
                        t.user_agent = Some(v.into());
                    }
                }
            }
            (6, 22) => {
                let side = usize::from(!to_server);
                if t.banners[side].is_none() {
                    let text = String::from_utf8_lossy(payload);
                    let line = text.split("\r\n").next().unwrap().to_string();
                    assert!(line.starts_with("SSH-2.0-"), "{line}");
                    t.banners[side] = Some(line);
                }
            }
            (17, 53) => {
                let (name, end) = dns_name(payload);
                t.dns_query = Some(name);
                let qtype = be16(payload, end);
                if !to_server && qtype == 1 {
                    t.answer = Some(payload[payload.len() - 4..].try_into().unwrap());
                }
            }
            _ => {}
        }
    }
    flows
}

/// The records of `flows --labellers` on `file`, by flow.
fn records(file: &Path) -> HashMap<Key, serde_json::Value> {
    let (code, out, err) = eb(&[
        "flows",
        &file.display().to_string(),
        "-q",
        "--labellers",
        "-f",
        "jsonl",
        "-o",
        "-",
    ]);
    assert_eq!(code, 0, "{err}");
    let addr = |v: &serde_json::Value| -> [u8; 4] {
        let a: std::net::Ipv4Addr = v.as_str().unwrap().parse().unwrap();
        a.octets()
    };
    let mut map = HashMap::new();
    for line in out.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let key = (
            r["proto"].as_u64().unwrap() as u8,
            (addr(&r["src"]), r["sport"].as_u64().unwrap() as u16),
            (addr(&r["dst"]), r["dport"].as_u64().unwrap() as u16),
        );
        assert!(map.insert(key, r).is_none(), "one record per flow");
    }
    map
}

fn text(r: &serde_json::Value, field: &str) -> String {
    r[field].as_str().unwrap_or_default().to_string()
}

#[test]
fn gen_handshakes_cli_same_seed_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<_> = [("a", "7"), ("b", "7"), ("c", "8")]
        .iter()
        .map(|(name, seed)| {
            let p = dir.path().join(format!("{name}.pcap"));
            let ps = p.display().to_string();
            let (code, _, err) =
                eb(&["gen", "handshakes", "-n", "3000", "-o", &ps, "--seed", seed]);
            assert_eq!(code, 0, "{err}");
            std::fs::read(&p).unwrap()
        })
        .collect();
    assert_eq!(files[0], files[1]);
    assert_ne!(files[0], files[2]);
}

#[test]
fn gen_handshakes_cli_labellers_read_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hs.pcap");
    let fs = file.display().to_string();
    let (code, _, err) = eb(&["gen", "handshakes", "-n", "30000", "-o", &fs, "--seed", "3"]);
    assert_eq!(code, 0, "{err}");
    let truth = truth(&file);
    let recs = records(&file);
    assert_eq!(recs.len(), truth.len());
    // Address → (packet of the A answer, name).
    let mut answers: HashMap<[u8; 4], Vec<(usize, String)>> = HashMap::new();
    for t in truth.values() {
        if let (Some(a), Some(q)) = (t.answer, &t.dns_query) {
            answers.entry(a).or_default().push((t.first + 1, q.clone()));
        }
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut named = 0;
    for (k, t) in &truth {
        let r = &recs[k];
        let kind = match (k.0, k.2 .1) {
            (6, 443) => "tls",
            (17, 443) => "quic",
            (6, 80) => "http",
            (6, 22) => "ssh",
            (17, 53) => "dns",
            other => panic!("unexpected flow {other:?}"),
        };
        *seen.entry(kind).or_default() += 1;
        match kind {
            "tls" | "quic" => {
                let Some(sni) = &t.sni else {
                    // Only the file's last flow may be cut before its hello.
                    assert!(t.first + 20 > 30_000, "{k:?}");
                    continue;
                };
                assert_eq!(&text(r, "sni"), sni, "{r}");
                assert_eq!(text(r, "alpn"), t.alpn.join(","), "{r}");
                assert_eq!(text(r, "tls_status"), "ok", "{r}");
                if t.first + 20 < 30_000 {
                    assert_eq!(text(r, "tls_version"), "1.3", "{r}");
                }
                if kind == "quic" {
                    assert_eq!(text(r, "quic_version"), "1", "{r}");
                    assert_eq!(t.alpn, ["h3"]);
                } else {
                    assert_eq!(t.alpn, ["h2", "http/1.1"]);
                }
                // A name answered (A record) two batches or more before
                // the flow must be there; any name is the SNI's (an
                // address is only ever answered for one host).
                let due = answers
                    .get(&k.2 .0)
                    .and_then(|v| v.iter().find(|(at, _)| at + 600 <= t.first));
                let got = text(r, "dns_name");
                if let Some((_, name)) = due {
                    assert_eq!(&got, name, "{r}");
                    named += 1;
                }
                assert!(got.is_empty() || &got == sni, "{r}");
            }
            "http" => {
                if t.host.is_some() {
                    assert_eq!(Some(text(r, "http_host")), t.host, "{r}");
                    assert_eq!(Some(text(r, "http_user_agent")), t.user_agent, "{r}");
                }
            }
            "ssh" => {
                for (side, field) in [(1, "ssh_server"), (0, "ssh_client")] {
                    if let Some(b) = &t.banners[side] {
                        assert_eq!(&text(r, field), b, "{r}");
                    }
                }
                if t.banners[0].is_some() {
                    assert_eq!(
                        t.banners[1].as_deref(),
                        Some("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3")
                    );
                    assert_eq!(t.banners[0].as_deref(), Some("SSH-2.0-OpenSSH_9.6"));
                }
            }
            _ => {
                assert_eq!(Some(text(r, "dns_query")), t.dns_query, "{r}");
            }
        }
    }
    for kind in ["tls", "quic", "dns", "http", "ssh"] {
        assert!(seen.get(kind).copied().unwrap_or(0) >= 20, "{seen:?}");
    }
    assert!(named > 100, "only {named} flows named by an earlier answer");

    // tshark reads the same SNI from every ClientHello, TCP and QUIC.
    let Some(tshark) = lib_common::tool("tshark", "tshark") else {
        return;
    };
    let out = lib_common::output_ok(
        std::process::Command::new(tshark)
            // QUIC is found by heuristics, after the dissectors of ports:
            // decoding port 443 as QUIC keeps a client port another dissector
            // registered from taking the datagrams.
            .args(["-r", &fs, "-d", "udp.port==443,quic"])
            .args(["-Y", "tls.handshake.type == 1", "-T", "fields"])
            .args(["-E", "separator=|"])
            .args(["-e", "ip.src", "-e", "tcp.srcport", "-e", "udp.srcport"])
            .args(["-e", "tls.handshake.extensions_server_name"]),
    );
    let mut by_client: HashMap<([u8; 4], u16), String> = HashMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let c: Vec<&str> = line.split('|').collect();
        let a: std::net::Ipv4Addr = c[0].parse().unwrap();
        let port = if c[1].is_empty() { c[2] } else { c[1] };
        by_client.insert((a.octets(), port.parse().unwrap()), c[3].to_string());
    }
    let mut checked = 0;
    for (k, t) in &truth {
        if let (443, Some(sni)) = (k.2 .1, &t.sni) {
            assert_eq!(by_client.get(&k.1), Some(sni), "tshark on {k:?}");
            checked += 1;
        }
    }
    assert_eq!(
        checked,
        by_client.len(),
        "tshark found no other ClientHello"
    );
}
