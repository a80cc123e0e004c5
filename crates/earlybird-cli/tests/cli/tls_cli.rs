//! `earlybird flows --analyzer tls` against independent decoders on the
//! developers' TLS and QUIC captures (`../shared/corpus/classify/dev/`,
//! the captures whose flows nDPI's truth labels TLS or QUIC):
//! - SNI and JA3 per flow equal tshark's (TLS over TCP, QUIC with tshark's
//!   out-of-order CRYPTO reassembly on, Google QUIC's SNI tag), counted
//!   both ways: flows where tshark has a name and earlybird has none, and
//!   the reverse. Only the exceptions in [`EXCEPTIONS`], each explained,
//!   may differ;
//! - JA4 of TLS over TCP equal to PyPI's `ja4plus` (FoxIO's JA4 in Python);
//!   its QUIC fingerprints are not compared (see [`ja4_equals_ja4plus`]).
//!
//! Needs the corpus (SKIPPED without it), tshark and ja4plus (`.ci/run`
//! installs them; SKIPPED when missing, a failure under CI).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::eb;

/// Flows where tshark and earlybird may disagree, and why: (capture,
/// server port, what differs).
const EXCEPTIONS: &[(&str, u16, &str)] = &[
    // The ClientHello follows a SOCKS-like proxy exchange in the same TCP
    // stream; tshark's TLS heuristics find it mid-stream, earlybird reads
    // TLS only at a stream's start.
    (
        "tls_heur__vmess-websocket.pcapng",
        1080,
        "TLS not at the stream's start",
    ),
    // RDP negotiates (X.224) before its TLS handshake: ja4plus reads the
    // ClientHello mid-stream, earlybird does not.
    (
        "rdp_over_tls.pcap",
        3389,
        "TLS after RDP's X.224 negotiation",
    ),
];

fn corpus() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/classify/dev");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("SKIPPED: corpus not found at {}", p.display());
        None
    }
}

/// Whether `prog ARGS` runs; under CI a missing one fails the test.
fn have(prog: &str, args: &[&str]) -> bool {
    let ok = Command::new(prog)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "`{prog} {}` failed: required under CI (.ci/run installs it)",
            args.join(" ")
        );
        eprintln!(
            "SKIPPED: `{prog} {}` failed (not installed)",
            args.join(" ")
        );
    }
    ok
}

/// The dev captures with a TLS or QUIC flow in nDPI's truth.
fn captures(dir: &Path) -> Vec<PathBuf> {
    let truth = std::fs::read_to_string(dir.join("ndpi_truth.csv")).unwrap();
    let mut names: Vec<String> = truth
        .lines()
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split(',').collect();
            let labels = cols.get(6..9)?.join(" ");
            (labels.contains("TLS") || labels.contains("QUIC")).then(|| cols[0].to_string())
        })
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| dir.join("ndpi/pcap").join(n))
        .filter(|p| p.exists())
        .collect()
}

/// (proto, lower endpoint, higher endpoint): either direction.
type Key = (u8, (String, u16), (String, u16));

fn key(proto: u8, a: &str, pa: u16, b: &str, pb: u16) -> Key {
    // One spelling per address (tshark and earlybird both write RFC 5952
    // text, but normalize anyway).
    let norm = |s: &str| {
        s.parse::<std::net::IpAddr>()
            .map(|ip| ip.to_string())
            .unwrap_or_else(|_| s.to_string())
    };
    let x = (norm(a), pa);
    let y = (norm(b), pb);
    if x <= y {
        (proto, x, y)
    } else {
        (proto, y, x)
    }
}

/// earlybird's flows with their tls fields, by key (the first flow of a
/// key with an SNI wins, else the first).
fn earlybird(cap: &Path) -> HashMap<Key, serde_json::Value> {
    let (code, out, err) = eb(&[
        "flows",
        &cap.display().to_string(),
        "--analyzer",
        "tls",
        "-f",
        "jsonl",
        "-o",
        "-",
    ]);
    assert_eq!(code, 0, "{}: {err}", cap.display());
    let mut flows: HashMap<Key, serde_json::Value> = HashMap::new();
    for line in out.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let k = key(
            r["proto"].as_u64().unwrap() as u8,
            r["src"].as_str().unwrap(),
            r["sport"].as_u64().unwrap() as u16,
            r["dst"].as_str().unwrap(),
            r["dport"].as_u64().unwrap() as u16,
        );
        let has = |v: &serde_json::Value| v["sni"].is_string();
        match flows.get(&k) {
            Some(old) if has(old) || !has(&r) => {}
            _ => {
                flows.insert(k, r);
            }
        }
    }
    flows
}

fn last(s: &str) -> &str {
    s.rsplit(',').next().unwrap_or("")
}

/// tshark's first (SNI, JA3) per flow: ClientHellos over TCP and QUIC,
/// and Google QUIC's SNI tag. A tunnelled packet has several addresses:
/// both the innermost IPv4 and IPv6 pairs are returned, and the caller
/// keeps the one earlybird has.
fn tshark(cap: &Path) -> Vec<([Option<Key>; 2], String, String)> {
    // One pass for both: ClientHellos (TLS and QUIC), then Google QUIC's
    // SNI tags (each flow's first name kept, ClientHellos' first).
    let fields = [
        "ip.src",
        "ipv6.src",
        "tcp.srcport",
        "udp.srcport",
        "ip.dst",
        "ipv6.dst",
        "tcp.dstport",
        "udp.dstport",
        "tls.handshake.extensions_server_name",
        "tls.handshake.ja3",
        "tls.handshake.type",
        "gquic.tag.sni",
    ];
    let mut c = Command::new("tshark");
    c.arg("-r")
        .arg(cap)
        .args(["-o", "quic.reassemble_crypto_out_of_order:TRUE"])
        .args(["-Y", "tls.handshake.type == 1 || gquic.tag.sni"])
        .args(["-T", "fields", "-E", "separator=|"]);
    for f in fields {
        c.args(["-e", f]);
    }
    let o = c.output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split('|').collect::<Vec<_>>())
        .filter(|c| c.len() == fields.len())
        .collect();
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut add = |keys: [Option<Key>; 2], sni: &str, ja3: &str| {
        if keys.iter().flatten().any(|k| !seen.insert(k.clone())) {
            return;
        }
        out.push((keys, sni.to_string(), ja3.to_string()));
    };
    for c in rows.iter().filter(|c| c[10].split(',').any(|t| t == "1")) {
        let (proto, sp, dp) = if c[2].is_empty() {
            (17, last(c[3]), last(c[7]))
        } else {
            (6, last(c[2]), last(c[6]))
        };
        let (Ok(sp), Ok(dp)) = (sp.parse(), dp.parse()) else {
            continue;
        };
        let k = |s: &str, d: &str| (!s.is_empty()).then(|| key(proto, last(s), sp, last(d), dp));
        let sni = c[8].split(',').next().unwrap_or("");
        let ja3 = c[9].split(',').next().unwrap_or("");
        add([k(c[1], c[5]), k(c[0], c[4])], sni, ja3);
    }
    for c in rows.iter().filter(|c| !c[11].is_empty()) {
        let (Ok(sp), Ok(dp)) = (last(c[3]).parse(), last(c[7]).parse()) else {
            continue;
        };
        let k = |s: &str, d: &str| (!s.is_empty()).then(|| key(17, last(s), sp, last(d), dp));
        add([k(c[1], c[5]), k(c[0], c[4])], c[11], "");
    }
    out
}

fn excepted(cap: &Path, k: &Key) -> bool {
    let name = cap.file_name().unwrap().to_string_lossy();
    EXCEPTIONS
        .iter()
        .any(|(f, port, _)| name == *f && (k.1 .1 == *port || k.2 .1 == *port))
}

#[test]
fn sni_and_ja3_equal_tsharks_on_the_tls_and_quic_captures() {
    let Some(dir) = corpus() else { return };
    if !have("tshark", &["-v"]) {
        return;
    }
    let caps = captures(&dir);
    assert!(caps.len() > 50, "{} captures", caps.len());
    let mut n: BTreeMap<&str, usize> = BTreeMap::new();
    let mut bad = Vec::new();
    for cap in &caps {
        let ours = earlybird(cap);
        let theirs = tshark(cap);
        let mut matched = HashSet::new();
        for (keys, sni, ja3) in &theirs {
            let Some(k) = keys.iter().flatten().find(|k| ours.contains_key(*k)) else {
                bad.push(format!(
                    "{}: tshark's flow {keys:?} is not in earlybird's",
                    cap.display()
                ));
                continue;
            };
            matched.insert(k.clone());
            let r = &ours[k];
            let our_sni = r["sni"].as_str().unwrap_or("");
            let our_ja3 = r["ja3"].as_str().unwrap_or("");
            let why = || {
                format!(
                    "{} {k:?}: tshark {sni:?} {ja3:?}, earlybird {r}",
                    cap.display()
                )
            };
            if !sni.is_empty() {
                if our_sni.is_empty() {
                    *n.entry("sni: tshark has one, earlybird none").or_default() += 1;
                    if !excepted(cap, k) {
                        bad.push(why());
                    }
                } else if our_sni == sni {
                    *n.entry("sni: equal").or_default() += 1;
                } else {
                    *n.entry("sni: different").or_default() += 1;
                    bad.push(why());
                }
            }
            if !ja3.is_empty() {
                if our_ja3 == ja3 {
                    *n.entry("ja3: equal").or_default() += 1;
                } else if our_ja3.is_empty() {
                    *n.entry("ja3: tshark has one, earlybird none").or_default() += 1;
                    if !excepted(cap, k) {
                        bad.push(why());
                    }
                } else {
                    *n.entry("ja3: different").or_default() += 1;
                    bad.push(why());
                }
            }
        }
        for (k, r) in &ours {
            if r["sni"].is_string() && !matched.contains(k) {
                *n.entry("sni: earlybird has one, tshark none").or_default() += 1;
                bad.push(format!(
                    "{} {k:?}: earlybird {r}, tshark has no hello",
                    cap.display()
                ));
            }
        }
    }
    eprintln!("{} captures: {n:#?}", caps.len());
    assert!(
        bad.is_empty(),
        "{} disagreements:\n{}",
        bad.len(),
        bad.join("\n")
    );
    assert!(n.get("sni: equal").copied().unwrap_or(0) > 400, "{n:?}");
    assert!(n.get("ja3: equal").copied().unwrap_or(0) > 400, "{n:?}");
}

/// JA4 over TCP equal to ja4plus's. Its QUIC path is not compared: on
/// these captures it gives `q00...` (version unknown) for ClientHellos
/// that offer TLS 1.3 in supported_versions, against the specification.
#[test]
fn ja4_equals_ja4plus() {
    let Some(dir) = corpus() else { return };
    if !have("python3", &["-c", "import ja4plus"]) {
        return;
    }
    let caps = captures(&dir);
    let theirs = ja4plus(&caps);
    let mut equal = 0;
    let mut bad = Vec::new();
    for (cap, text) in caps.iter().zip(&theirs) {
        let ours = earlybird(cap);
        let mut seen = HashSet::new();
        for l in text.lines().skip(1) {
            // schema_version,timestamp,type,fingerprint,"raw","raw_o",src_ip,src_port,dst_ip,dst_port,identified_as
            let c: Vec<&str> = l.split(',').collect();
            let n = c.len();
            if n < 11 || !c[3].starts_with('t') {
                continue;
            }
            let (Ok(sp), Ok(dp)) = (c[n - 4].parse(), c[n - 2].parse()) else {
                continue;
            };
            let k = key(6, c[n - 5], sp, c[n - 3], dp);
            if !seen.insert(k.clone()) {
                continue; // the flow's first ClientHello only
            }
            // ja4plus names a tunnelled flow by its outer addresses: then
            // the one flow of earlybird's with the same ports.
            let by_ports: Vec<&serde_json::Value> = ours
                .iter()
                .filter(|(o, _)| {
                    o.0 == 6 && o.1 .1.min(o.2 .1) == sp.min(dp) && o.1 .1.max(o.2 .1) == sp.max(dp)
                })
                .map(|(_, r)| r)
                .collect();
            let Some(r) = ours.get(&k).or((by_ports.len() == 1).then(|| by_ports[0])) else {
                bad.push(format!(
                    "{}: ja4plus's flow {k:?} is not in earlybird's",
                    cap.display()
                ));
                continue;
            };
            match r["ja4"].as_str() {
                Some(j) if j == c[3] => equal += 1,
                _ if excepted(cap, &k) => {}
                other => bad.push(format!(
                    "{} {k:?}: ja4plus {}, earlybird {other:?}",
                    cap.display(),
                    c[3]
                )),
            }
        }
    }
    eprintln!("JA4 equal to ja4plus's on {equal} TCP flows");
    assert!(
        bad.is_empty(),
        "{} disagreements:\n{}",
        bad.len(),
        bad.join("\n")
    );
    assert!(equal > 300, "{equal}");
}

/// What `ja4plus --format csv --types ja4 analyze CAP` prints for each of
/// `caps`, in order, from one interpreter (`ja4plus_many.py`: the same
/// command's function; one process per capture took most of the test's
/// time). A capture ja4plus cannot read fails the test.
fn ja4plus(caps: &[PathBuf]) -> Vec<String> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cli/ja4plus_many.py");
    let o = Command::new("python3")
        .arg(&script)
        .args(caps)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let mut out: Vec<String> = Vec::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("# ") {
            assert!(
                !rest.starts_with("error"),
                "{}: {rest}",
                caps[out.len() - 1].display()
            );
            assert_eq!(Path::new(rest), caps[out.len()], "ja4plus_many.py's order");
            out.push(String::new());
        } else if let Some(cur) = out.last_mut() {
            cur.push_str(l);
            cur.push('\n');
        }
    }
    assert_eq!(
        out.len(),
        caps.len(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}
