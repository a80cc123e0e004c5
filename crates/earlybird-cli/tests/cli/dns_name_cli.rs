//! `dns_name`: a flow to an address a DNS answer named earlier carries the
//! name and the answer's age, the same at 1, 2 and 4 shards (the answer
//! and the flow are on different shards), in CSV, JSON lines and Parquet.
//! The capture is made here: 48 DNS answers (A records of
//! `hostN.example.org`), filler traffic (more than two batches of the
//! input, so the answers are visible: `analyze/dns_cache.rs`), then a TCP
//! connection to each answered address, and to 8 of them a connection
//! right after the answer, which sees no name yet at any shard count.

use crate::common::eb;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const NAMES: u8 = 48;
/// Answers whose address also gets a connection right after the answer.
const EARLY: u8 = 8;
const STEP_US: u64 = 1_000;
const T0: u64 = 1_700_000_000;

/// A pcap writer of Ethernet/IPv4 frames, one every [`STEP_US`].
struct Pcap {
    bytes: Vec<u8>,
    us: u64,
}

impl Pcap {
    fn new() -> Pcap {
        let mut bytes = Vec::new();
        for v in [
            0xa1b2_c3d4u32.to_le_bytes().as_slice(),
            &2u16.to_le_bytes(),
            &4u16.to_le_bytes(),
        ] {
            bytes.extend_from_slice(v);
        }
        bytes.extend_from_slice(&[0; 8]);
        bytes.extend_from_slice(&65535u32.to_le_bytes());
        bytes.extend_from_slice(&1u32.to_le_bytes());
        Pcap { bytes, us: 0 }
    }

    /// Microseconds since the first packet of the next frame.
    fn now(&self) -> u64 {
        self.us
    }

    fn frame(&mut self, proto: u8, src: [u8; 4], dst: [u8; 4], l4: &[u8]) {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        let len = 20 + l4.len() as u16;
        f.extend_from_slice(&[0x45, 0]);
        f.extend_from_slice(&len.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0x40, 0, 64, proto, 0, 0]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        f.extend_from_slice(l4);
        let (s, u) = (T0 + self.us / 1_000_000, self.us % 1_000_000);
        self.bytes.extend_from_slice(&(s as u32).to_le_bytes());
        self.bytes.extend_from_slice(&(u as u32).to_le_bytes());
        self.bytes
            .extend_from_slice(&(f.len() as u32).to_le_bytes());
        self.bytes
            .extend_from_slice(&(f.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(&f);
        self.us += STEP_US;
    }

    fn udp(&mut self, src: [u8; 4], sp: u16, dst: [u8; 4], dp: u16, payload: &[u8]) {
        let mut l4 = Vec::new();
        l4.extend_from_slice(&sp.to_be_bytes());
        l4.extend_from_slice(&dp.to_be_bytes());
        l4.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
        l4.extend_from_slice(&[0, 0]);
        l4.extend_from_slice(payload);
        self.frame(17, src, dst, &l4);
    }

    fn tcp(&mut self, src: [u8; 4], sp: u16, dst: [u8; 4], dp: u16, flags: u8) {
        let mut l4 = Vec::new();
        l4.extend_from_slice(&sp.to_be_bytes());
        l4.extend_from_slice(&dp.to_be_bytes());
        l4.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
        self.frame(6, src, dst, &l4);
    }
}

/// A DNS message for `name` (type A): the query, or the response with
/// one A record `addr`.
fn dns(id: u16, name: &str, answer: Option<[u8; 4]>) -> Vec<u8> {
    let mut m = id.to_be_bytes().to_vec();
    m.extend_from_slice(if answer.is_some() {
        &[0x81, 0x80]
    } else {
        &[0x01, 0x00]
    });
    m.extend_from_slice(&[0, 1, 0, u8::from(answer.is_some()), 0, 0, 0, 0]);
    for l in name.split('.') {
        m.push(l.len() as u8);
        m.extend_from_slice(l.as_bytes());
    }
    m.extend_from_slice(&[0, 0, 1, 0, 1]);
    if let Some(a) = answer {
        m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
        m.extend_from_slice(&a);
    }
    m
}

const CLIENT: [u8; 4] = [10, 0, 0, 1];
const RESOLVER: [u8; 4] = [10, 0, 0, 53];

fn server(i: u8) -> [u8; 4] {
    [198, 51, 100, i]
}

/// The capture, and per server address the microseconds from its answer
/// to the connection that should carry the name.
fn capture(path: &Path) -> BTreeMap<String, u64> {
    let mut p = Pcap::new();
    let mut answered = BTreeMap::new();
    for i in 0..NAMES {
        let name = format!("host{i}.example.org");
        let port = 30_000 + u16::from(i);
        p.udp(CLIENT, port, RESOLVER, 53, &dns(u16::from(i), &name, None));
        answered.insert(i, p.now());
        p.udp(
            RESOLVER,
            53,
            CLIENT,
            port,
            &dns(u16::from(i), &name, Some(server(i))),
        );
        if i < EARLY {
            // Too soon: the answer's batch is still being run.
            p.tcp(CLIENT, 40_000 + u16::from(i), server(i), 443, 0x02);
        }
    }
    // Filler: more than two batches (256 packets each) of other traffic.
    for k in 0..700u16 {
        p.udp(
            [10, 9, (k >> 8) as u8, k as u8],
            5000 + k,
            [10, 8, 0, 1],
            9999,
            b"filler",
        );
    }
    let mut ages = BTreeMap::new();
    for i in 0..NAMES {
        let sp = 50_000 + u16::from(i);
        ages.insert(
            std::net::Ipv4Addr::from(server(i)).to_string(),
            p.now() - answered[&i],
        );
        p.tcp(CLIENT, sp, server(i), 443, 0x02);
        p.tcp(server(i), 443, CLIENT, sp, 0x12);
        p.tcp(CLIENT, sp, server(i), 443, 0x10);
    }
    std::fs::write(path, &p.bytes).unwrap();
    ages
}

/// The CSV lines of `flows` on `cap` with `shards`, sorted (the header
/// first), also writing JSON lines and (with the feature) Parquet.
fn run(dir: &Path, cap: &Path, shards: usize) -> (Vec<String>, String) {
    let csv = dir.join(format!("s{shards}.csv"));
    let jsonl = dir.join(format!("s{shards}.jsonl"));
    let mut args = vec![
        "flows".to_string(),
        cap.display().to_string(),
        "--analyzer".into(),
        "dns".into(),
        "-s".into(),
        shards.to_string(),
        "-o".into(),
        csv.display().to_string(),
        "-o".into(),
        jsonl.display().to_string(),
    ];
    if cfg!(feature = "parquet") {
        args.push("-o".into());
        args.push(dir.join(format!("s{shards}.parquet")).display().to_string());
    }
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, err) = eb(&a);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[1..].sort();
    (lines, err)
}

fn column(header: &str, name: &str) -> usize {
    header.split(',').position(|h| h == name).unwrap()
}

#[test]
fn dns_name_cli_the_cached_name_is_the_same_at_every_shard_count() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("answers.pcap");
    let ages = capture(&cap);
    let (one, summary) = run(dir.path(), &cap, 1);
    assert!(
        summary.contains(&format!(
            "DNS name cache: {NAMES} addresses held at most, 0 evicted"
        )),
        "{summary}"
    );
    let (name_at, age_at) = (
        column(&one[0], "dns_name"),
        column(&one[0], "dns_name_age_ns"),
    );
    let (dst_at, dport_at, sport_at) = (
        column(&one[0], "dst"),
        column(&one[0], "dport"),
        column(&one[0], "sport"),
    );
    let (mut named, mut early) = (0, 0);
    for l in &one[1..] {
        let c: Vec<&str> = l.split(',').collect();
        let Some(age) = ages.get(c[dst_at]).filter(|_| c[dport_at] == "443") else {
            // DNS and filler flows: no answer named their server.
            assert_eq!((c[name_at], c[age_at]), ("", ""), "{l}");
            continue;
        };
        let i: u8 = c[dst_at].rsplit('.').next().unwrap().parse().unwrap();
        if c[sport_at].starts_with("40") {
            assert_eq!((c[name_at], c[age_at]), ("", ""), "too soon: {l}");
            early += 1;
        } else {
            assert_eq!(c[name_at], format!("host{i}.example.org"), "{l}");
            assert_eq!(c[age_at], (age * 1000).to_string(), "{l}");
            named += 1;
        }
    }
    assert_eq!((named, early), (usize::from(NAMES), usize::from(EARLY)));
    for shards in [2, 4] {
        let (other, _) = run(dir.path(), &cap, shards);
        assert_eq!(other, one, "{shards} shards");
    }
    // JSON lines: the same names and ages as the CSV.
    let json = std::fs::read_to_string(dir.path().join("s4.jsonl")).unwrap();
    let mut from_json: Vec<(String, u64)> = json
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            Some((
                v["dns_name"].as_str()?.to_string(),
                v["dns_name_age_ns"].as_u64()?,
            ))
        })
        .collect();
    from_json.sort();
    let mut from_csv: Vec<(String, u64)> = one[1..]
        .iter()
        .filter_map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            Some((c[name_at].to_string(), c[age_at].parse().ok()?))
        })
        .collect();
    from_csv.sort();
    assert_eq!(from_json, from_csv);
    assert_eq!(from_json.len(), usize::from(NAMES));
    if cfg!(feature = "parquet") {
        // Parquet, read by pyarrow: the same pairs.
        let py = "import pyarrow.parquet as pq, sys, json\n\
                  t = pq.read_table(sys.argv[1]).to_pydict()\n\
                  print(json.dumps(sorted([n, a] for n, a in zip(t['dns_name'], t['dns_name_age_ns']) if n)))";
        let out = Command::new("python3")
            .args(["-c", py])
            .arg(dir.path().join("s2.parquet"))
            .output();
        match out {
            Ok(o) if o.status.success() => {
                let v: Vec<(String, u64)> = serde_json::from_slice(&o.stdout).unwrap();
                assert_eq!(v, from_csv);
            }
            _ => {
                assert!(
                    std::env::var("CI").is_err(),
                    "python3 with pyarrow is needed under CI"
                );
                eprintln!("SKIPPED: the Parquet check (python3 with pyarrow missing)");
            }
        }
    }
}

#[test]
fn dns_name_cli_a_flood_of_unique_names_keeps_the_cache_bounded() {
    // More answered addresses than the cache holds: the oldest are
    // evicted and counted, the newest still name their flows.
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("flood.pcap");
    let mut p = Pcap::new();
    let n: u32 = 70_000;
    for k in 0..n {
        let name = format!("u{k}.flood.example");
        let a = (0xc000_0000u32 | k).to_be_bytes();
        let client = [10, (k >> 16) as u8, (k >> 8) as u8, k as u8];
        p.udp(RESOLVER, 53, client, 1024, &dns(k as u16, &name, Some(a)));
    }
    for k in 0..600u16 {
        p.udp(
            [10, 9, (k >> 8) as u8, k as u8],
            5000 + k,
            [10, 8, 0, 1],
            9999,
            b"filler",
        );
    }
    let last = (0xc000_0000u32 | (n - 1)).to_be_bytes();
    let first = 0xc000_0000u32.to_be_bytes();
    p.tcp(CLIENT, 50_001, last, 443, 0x02);
    p.tcp(CLIENT, 50_002, first, 443, 0x02);
    std::fs::write(&cap, &p.bytes).unwrap();
    let csv = dir.path().join("flood.csv");
    let (code, _, err) = eb(&[
        "flows",
        cap.to_str().unwrap(),
        "--analyzer",
        "dns",
        "-s",
        "2",
        "-o",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let cache = 65_536u64;
    assert!(
        err.contains(&format!(
            "DNS name cache: {cache} addresses held at most, {} evicted because it was full",
            u64::from(n) - cache
        )),
        "{err}"
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let header = text.lines().next().unwrap();
    let (name_at, dport_at, sport_at) = (
        column(header, "dns_name"),
        column(header, "dport"),
        column(header, "sport"),
    );
    let mut seen = BTreeMap::new();
    for l in text.lines().skip(1) {
        let c: Vec<&str> = l.split(',').collect();
        if c[dport_at] == "443" {
            seen.insert(c[sport_at].to_string(), c[name_at].to_string());
        }
    }
    assert_eq!(seen["50001"], format!("u{}.flood.example", n - 1));
    assert_eq!(seen["50002"], "", "evicted");
}
