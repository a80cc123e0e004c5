//! Cross-check against an independent implementation: earlybird's
//! bidirectional flows (5-tuples and packet counts) on the nDPI test
//! captures must match the flow lists nDPI wrote for them
//! (`classify/dev/ndpi_truth.csv`). Every file where they differ is listed
//! in `tests/engine/expect/ndpi_flow_diffs.tsv` with the reason; the test
//! fails when a file differs that is not listed, or a listed file now
//! matches.
//! `EARLYBIRD_BLESS=1` rewrites the list (keeping the reasons already
//! written) for review in the diff.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use earlybird::testing::fmt_addr;
use earlybird::{CaptureFile, ModelRef, RunOptions};

type FlowId = (u8, String, u16, String, u16); // proto, lower endpoint, higher endpoint

fn id(proto: u8, a: String, pa: u16, b: String, pb: u16) -> FlowId {
    if (a.as_str(), pa) <= (b.as_str(), pb) {
        (proto, a, pa, b, pb)
    } else {
        (proto, b, pb, a, pa)
    }
}

/// nDPI prints IPv6 addresses in its own style ("face:b00c::2" where
/// RFC 5952 writes "face:b00c:0:2"): compare parsed addresses, not text.
fn norm(a: &str) -> String {
    a.parse::<std::net::IpAddr>()
        .map(|ip| ip.to_string())
        .unwrap_or_else(|_| a.to_string())
}

fn expect_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/engine/expect/ndpi_flow_diffs.tsv")
}

#[test]
fn flows_match_ndpi() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let dev = corpus.join("classify/dev");
    let text = std::fs::read_to_string(dev.join("ndpi_truth.csv")).expect("truth csv");
    let mut lines = text.lines();
    let header = common::split_csv(lines.next().unwrap());
    let col = |n: &str| header.iter().position(|h| h == n).unwrap();
    let (c_pcap, c_proto, c_src, c_sport, c_dst, c_dport) = (
        col("pcap"),
        col("proto"),
        col("src"),
        col("sport"),
        col("dst"),
        col("dport"),
    );
    let (c_p1, c_p2) = (col("c2s_pkts"), col("s2c_pkts"));
    let mut truth: BTreeMap<String, BTreeMap<FlowId, u64>> = BTreeMap::new();
    for l in lines {
        let f = common::split_csv(l);
        let Some(proto) = common::proto_number(&f[c_proto]) else {
            continue;
        };
        let k = id(
            proto,
            norm(&f[c_src]),
            f[c_sport].parse().unwrap_or(0),
            norm(&f[c_dst]),
            f[c_dport].parse().unwrap_or(0),
        );
        let pk: u64 = f[c_p1].parse::<u64>().unwrap_or(0) + f[c_p2].parse::<u64>().unwrap_or(0);
        *truth
            .entry(f[c_pcap].clone())
            .or_default()
            .entry(k)
            .or_default() += pk;
    }
    let mut diffs: BTreeMap<String, String> = BTreeMap::new();
    let (mut files, mut same_files, mut flows_total, mut flows_same) = (0, 0, 0, 0);
    for (pcap, want) in &truth {
        let path = dev.join("ndpi/pcap").join(pcap);
        if !path.exists() {
            continue;
        }
        files += 1;
        let cf = match CaptureFile::open(&path) {
            Ok(c) => c,
            Err(e) => {
                let msg = e.to_string().replace(&path.display().to_string(), pcap);
                diffs.insert(pcap.clone(), format!("open error: {msg}"));
                continue;
            }
        };
        let (recs, _) =
            earlybird::collect(&[cf], &RunOptions::default(), &ModelRef::default()).unwrap();
        let mut got: BTreeMap<FlowId, u64> = BTreeMap::new();
        for r in &recs {
            let k = &r.record.key;
            let fid = id(
                k.proto,
                fmt_addr(&k.src),
                k.sport,
                fmt_addr(&k.dst),
                k.dport,
            );
            *got.entry(fid).or_default() += r.record.packets[0] + r.record.packets[1];
        }
        flows_total += want.len();
        flows_same += want.iter().filter(|(k, v)| got.get(*k) == Some(v)).count();
        if &got == want {
            same_files += 1;
            continue;
        }
        if std::env::var_os("EARLYBIRD_DETAIL").is_some() {
            for (k, v) in want.iter().filter(|(k, v)| got.get(*k) != Some(v)) {
                eprintln!("{pcap}: ndpi {k:?} {v} packets, earlybird {:?}", got.get(k));
            }
            for (k, v) in got.iter().filter(|(k, _)| !want.contains_key(*k)) {
                eprintln!("{pcap}: earlybird only {k:?} {v} packets");
            }
        }
        let missing = want.keys().filter(|k| !got.contains_key(*k)).count();
        let extra = got.keys().filter(|k| !want.contains_key(*k)).count();
        let count_diff = want
            .iter()
            .filter(|(k, v)| got.get(*k).is_some_and(|g| g != *v))
            .count();
        diffs.insert(
            pcap.clone(),
            format!("ndpi {} flows, earlybird {}: {missing} missing, {extra} extra, {count_diff} with other packet counts", want.len(), got.len()),
        );
    }
    eprintln!(
        "nDPI cross-check: {files} captures, {same_files} identical; {flows_same}/{flows_total} nDPI flows matched exactly; {} files differ",
        diffs.len()
    );
    // Compare with the reviewed expectation list.
    let old = std::fs::read_to_string(expect_path()).unwrap_or_default();
    let mut reasons: BTreeMap<String, String> = BTreeMap::new();
    for l in old.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let mut it = l.splitn(3, '\t');
        let (f, _, r) = (it.next().unwrap_or(""), it.next(), it.next().unwrap_or(""));
        reasons.insert(f.to_string(), r.to_string());
    }
    if std::env::var_os("EARLYBIRD_BLESS").is_some() {
        let mut s = String::from("# capture\tmeasured difference\treason (reviewed by hand)\n");
        for (f, d) in &diffs {
            let r = reasons
                .get(f)
                .cloned()
                .unwrap_or_else(|| "TODO: explain".into());
            s.push_str(&format!("{f}\t{d}\t{r}\n"));
        }
        std::fs::write(expect_path(), s).unwrap();
        return;
    }
    let listed: BTreeSet<&String> = reasons.keys().collect();
    let found: BTreeSet<&String> = diffs.keys().collect();
    let new: Vec<_> = found
        .difference(&listed)
        .map(|f| format!("{f}: {}", diffs[*f]))
        .collect();
    let fixed: Vec<_> = listed.difference(&found).collect();
    assert!(
        new.is_empty(),
        "captures that now differ from nDPI (unexplained):\n{}",
        new.join("\n")
    );
    assert!(
        fixed.is_empty(),
        "captures listed as different that now match nDPI: {fixed:?}"
    );
    assert!(
        reasons.values().all(|r| !r.starts_with("TODO")),
        "every listed difference needs a reason"
    );
}
