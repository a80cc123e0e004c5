//! `earlybird flows --analyzer dns,http,ssh` on the shared corpus's dev
//! captures, against tshark as the independent decoder: DNS query names
//! (`dns.qry.name`, mDNS included), HTTP Host headers (`http.host` of the
//! requests over TCP) and SSH identification strings (`ssh.protocol`),
//! per conversation, counted both ways; and the same names with 1 and 3
//! shards.
//!
//! earlybird reads these protocols on any port; tshark only on the ports
//! it knows (and its heuristics). So a name earlybird has on a conversation
//! tshark did not decode is counted and printed, not an error; a name
//! tshark has that earlybird lacks, or a different name on the same
//! conversation, is an error (one exception: tshark cuts a header value at
//! a NUL byte, earlybird keeps it).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::eb;

/// One end of a conversation.
type End = (IpAddr, u16);
/// A conversation: transport and its two ends, in order.
type Conv = (&'static str, End, End);

fn conv(proto: &'static str, a: End, b: End) -> Conv {
    if a <= b {
        (proto, a, b)
    } else {
        (proto, b, a)
    }
}

/// Per protocol ("dns", "http", "ssh"): conversation → names.
type Names = BTreeMap<&'static str, BTreeMap<Conv, BTreeSet<String>>>;

fn corpus() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/classify/dev");
    if p.join("ndpi_truth.csv").is_file() {
        Some(p)
    } else {
        eprintln!("SKIPPED: {} not found", p.display());
        None
    }
}

fn have_tshark() -> bool {
    let ok = Command::new("tshark")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("tshark is not installed (.ci/run installs it)");
        }
        eprintln!("SKIPPED: tshark is not installed");
    }
    ok
}

/// The nDPI captures whose truth has a DNS, HTTP or SSH flow.
fn captures(dir: &Path) -> Vec<PathBuf> {
    let csv = std::fs::read_to_string(dir.join("ndpi_truth.csv")).unwrap();
    let mut out = BTreeSet::new();
    for line in csv.lines().skip(1) {
        // pcap, proto, src, sport, dst, dport, app_label, master_proto,
        // app_proto: the first columns hold no comma.
        let c: Vec<&str> = line.splitn(10, ',').collect();
        if c.len() < 9 {
            continue;
        }
        let label_head = c[6].split('.').next().unwrap_or("");
        if ["DNS", "HTTP", "SSH"]
            .iter()
            .any(|p| c[7] == *p || c[8] == *p || label_head == *p)
        {
            out.insert(dir.join("ndpi/pcap").join(c[0]));
        }
    }
    out.into_iter().filter(|p| p.is_file()).collect()
}

fn earlybird_names(pcap: &Path, shards: &str) -> Names {
    let (code, out, err) = eb(&[
        "flows",
        pcap.to_str().unwrap(),
        "--shards",
        shards,
        "--analyzer",
        "dns,http,ssh",
        "--no-model",
        "-q",
        "-o",
        "-",
        "--format",
        "jsonl",
    ]);
    assert_eq!(code, 0, "{}: {err}", pcap.display());
    let mut names = Names::new();
    for line in out.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let proto = match r["proto"].as_u64() {
            Some(6) => "tcp",
            Some(17) => "udp",
            _ => continue,
        };
        let end = |a: &str, p: &str| -> End {
            (
                r[a].as_str().unwrap().parse().unwrap(),
                r[p].as_u64().unwrap() as u16,
            )
        };
        let c = conv(proto, end("src", "sport"), end("dst", "dport"));
        for (field, kind) in [
            ("dns_query", "dns"),
            ("http_host", "http"),
            ("ssh_client", "ssh"),
            ("ssh_server", "ssh"),
        ] {
            if let Some(v) = r[field].as_str() {
                names
                    .entry(kind)
                    .or_default()
                    .entry(c)
                    .or_default()
                    .insert(v.to_string());
            }
        }
    }
    names
}

fn tshark_names(pcap: &Path) -> Names {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(pcap)
        .args([
            "-Y",
            "dns || mdns || llmnr || (http.request && tcp) || ssh.protocol",
            "-T",
            "fields",
            "-E",
            "occurrence=a",
            "-E",
            "aggregator=|",
        ])
        .args(
            [
                "ip.src",
                "ipv6.src",
                "ip.dst",
                "ipv6.dst",
                "tcp.srcport",
                "tcp.dstport",
                "udp.srcport",
                "udp.dstport",
                "dns.qry.name",
                "http.host",
                "ssh.protocol",
            ]
            .iter()
            .flat_map(|f| ["-e", f]),
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "tshark on {}", pcap.display());
    let text = String::from_utf8_lossy(&out.stdout);
    let mut names = Names::new();
    // The innermost header's value (tunnels repeat fields).
    let last = |v: &str| v.rsplit('|').next().unwrap_or("").to_string();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 11 {
            continue;
        }
        let src = if f[1].is_empty() {
            last(f[0])
        } else {
            last(f[1])
        };
        let dst = if f[3].is_empty() {
            last(f[2])
        } else {
            last(f[3])
        };
        let (Ok(src), Ok(dst)) = (src.parse::<IpAddr>(), dst.parse::<IpAddr>()) else {
            continue;
        };
        let (proto, sp, dp) = if !f[4].is_empty() {
            ("tcp", last(f[4]), last(f[5]))
        } else if !f[6].is_empty() {
            ("udp", last(f[6]), last(f[7]))
        } else {
            continue;
        };
        let (Ok(sp), Ok(dp)) = (sp.parse::<u16>(), dp.parse::<u16>()) else {
            continue;
        };
        let c = conv(proto, (src, sp), (dst, dp));
        for (i, kind, all) in [(8, "dns", false), (9, "http", false), (10, "ssh", true)] {
            let vals: Vec<&str> = f[i].split('|').filter(|v| !v.is_empty()).collect();
            // A message's first question; every banner of the packet.
            let take = if all { vals.len() } else { vals.len().min(1) };
            for v in &vals[..take] {
                names
                    .entry(kind)
                    .or_default()
                    .entry(c)
                    .or_default()
                    .insert(v.to_string());
            }
        }
    }
    names
}

#[test]
fn dns_http_and_ssh_names_equal_tsharks_on_the_dev_corpus() {
    let Some(dir) = corpus() else { return };
    if !have_tshark() {
        return;
    }
    let files = captures(&dir);
    assert!(files.len() > 40, "{} captures", files.len());
    // Per protocol: [same, differs, tshark only, earlybird only].
    let mut count: BTreeMap<&str, [usize; 4]> = BTreeMap::new();
    let mut faults = Vec::new();
    for pcap in &files {
        let e = earlybird_names(pcap, "1");
        // The same names whatever the shard count.
        assert!(
            earlybird_names(pcap, "3") == e,
            "{}: other names with 3 shards",
            pcap.display()
        );
        let t = tshark_names(pcap);
        let name = pcap.file_name().unwrap().to_string_lossy().into_owned();
        for kind in ["dns", "http", "ssh"] {
            let n = count.entry(kind).or_default();
            let (e, t) = (
                e.get(kind).cloned().unwrap_or_default(),
                t.get(kind).cloned().unwrap_or_default(),
            );
            for (c, ours) in &e {
                let Some(theirs) = t.get(c) else {
                    n[3] += 1;
                    eprintln!("{name}: {kind} {ours:?} on {c:?}: earlybird only");
                    continue;
                };
                for v in ours {
                    // tshark ends a header value at a NUL byte.
                    let cut = v.split('\0').next().unwrap_or("");
                    if theirs.contains(v) || (v.contains('\0') && theirs.contains(cut)) {
                        n[0] += 1;
                    } else {
                        n[1] += 1;
                        faults.push(format!("{name}: {kind} {v:?}, tshark {theirs:?} on {c:?}"));
                    }
                }
            }
            for (c, theirs) in &t {
                if !e.contains_key(c) {
                    n[2] += 1;
                    faults.push(format!(
                        "{name}: {kind} tshark {theirs:?} on {c:?}, earlybird none"
                    ));
                }
            }
        }
    }
    eprintln!(
        "{} captures; per protocol [same, differs, tshark only, earlybird only]: {count:?}",
        files.len()
    );
    assert!(faults.is_empty(), "{}", faults.join("\n"));
    // The corpus has that many: a run that read nothing fails.
    assert!(count["dns"][0] >= 140, "{count:?}");
    assert!(count["http"][0] >= 100, "{count:?}");
    assert!(count["ssh"][0] >= 3, "{count:?}");
}
