//! `earlybird label` (DPI labelling with nDPI, feature `ndpi`):
//! - its flows and labels agree with ndpiReader of the same libndpi on the
//!   developers' nDPI captures (floors: docs/CLASSIFIERS.md, "DPI
//!   labelling"; measured 2026-11-25: BENCHMARKS.md, "Classifiers");
//! - `label` → `train --labels` → `flows --model` works end to end, the
//!   model's verdicts matching the labels on most training flows.
//!
//! Needs the corpus (`../shared/corpus`; SKIPPED without it) and ndpiReader
//! (Debian: libndpi-bin; SKIPPED when missing, a failure under CI).
//! Without the `ndpi` feature, it checks that `label` says how to build it.

use crate::common;

use common::eb;

#[cfg(not(feature = "ndpi"))]
#[test]
fn label_without_ndpi_says_how_to_build_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t.csv").display().to_string();
    let cap = tmp.path().join("x.pcap");
    std::fs::write(&cap, b"").unwrap();
    let (code, o, e) = eb(&["label", &cap.display().to_string(), "-o", &out]);
    assert_eq!(code, 1, "{o}\n{e}");
    assert!(e.contains("--features ndpi"), "{e}");
    assert!(!tmp.path().join("t.csv").exists(), "no truth file is left");
}

#[cfg(feature = "ndpi")]
mod with_ndpi {
    use super::eb;
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use std::process::Command;

    fn corpus() -> Option<PathBuf> {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
        if p.is_dir() {
            Some(p)
        } else {
            eprintln!("SKIPPED: corpus not found at {}", p.display());
            None
        }
    }

    /// Whether ndpiReader runs; under CI a missing one fails the test.
    fn have_ndpi_reader() -> bool {
        let ok = Command::new("ndpiReader").arg("-h").output().is_ok();
        if !ok {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "ndpiReader (Debian: libndpi-bin) is required under CI"
            );
            eprintln!("SKIPPED: ndpiReader is not installed");
        }
        ok
    }

    /// An IP protocol as a number ("TCP" → 6; numbers stay).
    fn proto(s: &str) -> String {
        match s.to_ascii_uppercase().as_str() {
            "TCP" => "6".into(),
            "UDP" => "17".into(),
            "ICMP" => "1".into(),
            "ICMPV6" => "58".into(),
            "IGMP" => "2".into(),
            "GRE" => "47".into(),
            "ESP" => "50".into(),
            "SCTP" => "132".into(),
            "VRRP" => "112".into(),
            other => other.to_string(),
        }
    }

    /// (proto, lower endpoint, higher endpoint): either direction.
    type FlowKey = (String, (String, u16), (String, u16));

    fn key(p: &str, a: &str, pa: &str, b: &str, pb: &str) -> Option<FlowKey> {
        // One spelling per address (ndpiReader writes `b00c::24d9` where
        // Rust writes `b00c:0:24d9`).
        let addr = |s: &str| {
            let s = s.trim_matches(['[', ']']);
            s.parse::<std::net::IpAddr>()
                .map_or_else(|_| s.to_string(), |ip| ip.to_string())
        };
        let x = (addr(a), pa.parse().ok()?);
        let y = (addr(b), pb.parse().ok()?);
        Some(if x <= y {
            (proto(p), x, y)
        } else {
            (proto(p), y, x)
        })
    }

    /// Rows of a CSV as maps column → value (no quoted commas in these).
    fn rows(path: &Path) -> Vec<HashMap<String, String>> {
        let text = std::fs::read_to_string(path).unwrap();
        let mut lines = text.lines();
        let head: Vec<&str> = lines.next().unwrap().split(',').collect();
        lines
            .map(|l| {
                head.iter()
                    .zip(l.split(','))
                    .map(|(h, v)| (h.to_string(), v.to_string()))
                    .collect()
            })
            .collect()
    }

    /// ndpiReader's flows of one capture (`-v 2`): key → (label,
    /// confidence kind).
    fn ndpi_reader(pcap: &Path) -> HashMap<FlowKey, (String, String)> {
        let out = Command::new("ndpiReader")
            .args(["-q", "-v", "2", "-i"])
            .arg(pcap)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let mut flows = HashMap::new();
        for line in text.lines() {
            // "\tN\tPROTO A:PA <-> B:PB [proto: ID/LABEL]…[Confidence: C]…"
            let mut parts = line.splitn(3, '\t');
            let (Some(""), Some(n), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            if n.trim().parse::<u64>().is_err() || !rest.contains("[proto: ") {
                continue;
            }
            let t: Vec<&str> = rest.splitn(5, ' ').collect();
            if t.len() < 5 {
                continue;
            }
            let (Some((a, pa)), Some((b, pb))) = (t[1].rsplit_once(':'), t[3].rsplit_once(':'))
            else {
                continue;
            };
            let Some(k) = key(t[0], a, pa, b, pb) else {
                continue;
            };
            let field = |name: &str| {
                rest.split_once(name)
                    .and_then(|(_, r)| r.split_once(']'))
                    .map(|(v, _)| v.to_string())
            };
            let label = field("[proto: ")
                .and_then(|p| p.split_once('/').map(|(_, l)| l.to_string()))
                .unwrap_or_default();
            let conf = field("[Confidence: ").unwrap_or_else(|| "Unknown".into());
            flows.entry(k).or_insert((label, conf));
        }
        flows
    }

    #[test]
    fn labels_agree_with_ndpi_reader_on_the_developers_captures() {
        let Some(c) = corpus() else { return };
        if !have_ndpi_reader() {
            return;
        }
        let dir = c.join("classify/dev/ndpi/pcap");
        let tmp = tempfile::tempdir().unwrap();
        let truth = tmp.path().join("truth.csv");
        let (code, o, e) = eb(&[
            "label",
            &dir.display().to_string(),
            "-o",
            &truth.display().to_string(),
        ]);
        assert_eq!(code, 0, "{o}\n{e}");
        assert!(o.contains("259 captures (0 skipped)"), "{o}");
        // earlybird's records by capture and key (the first record of a key:
        // later ones are the same 5-tuple after a timeout).
        let mut ours: HashMap<String, HashMap<FlowKey, (String, String)>> = HashMap::new();
        for r in rows(&truth) {
            let k = key(&r["proto"], &r["src"], &r["sport"], &r["dst"], &r["dport"]).unwrap();
            ours.entry(r["pcap"].clone())
                .or_default()
                .entry(k)
                .or_insert((r["app_label"].clone(), r["confidence"].clone()));
        }
        let (mut flows, mut found, mut same, mut conf) = (0usize, 0usize, 0usize, 0usize);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let mut differ = Vec::new();
        for f in &files {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            let mine = ours.get(&name);
            for (k, (label, c)) in ndpi_reader(f) {
                flows += 1;
                let Some((l, cc)) = mine.and_then(|m| m.get(&k)) else {
                    differ.push(format!(
                        "{name} {k:?}: ndpiReader {label}, no earlybird record"
                    ));
                    continue;
                };
                found += 1;
                if *l == label {
                    same += 1;
                } else {
                    differ.push(format!("{name} {k:?}: ndpiReader {label}, earlybird {l}"));
                }
                if *cc == c {
                    conf += 1;
                }
            }
        }
        let rate = |n: usize, d: usize| n as f64 / d.max(1) as f64;
        eprintln!(
            "ndpiReader flows {flows}: found {found} ({:.4}), same label {same} ({:.4} of found), same confidence {conf} ({:.4} of found)\n{}",
            rate(found, flows),
            rate(same, found),
            rate(conf, found),
            differ.join("\n")
        );
        assert!(flows > 4000, "{flows} ndpiReader flows");
        // Measured 2026-11-25 (nDPI 4.2, Debian 12): 4498/4520 found,
        // 4495/4498 same label, 4464/4498 same confidence.
        assert!(rate(found, flows) >= 0.99, "flows found");
        assert!(rate(same, found) >= 0.998, "labels");
        assert!(rate(conf, found) >= 0.99, "confidence kinds");
    }

    #[test]
    fn label_then_train_then_flows_with_the_model() {
        let Some(c) = corpus() else { return };
        let dir = c.join("classify/dev/ndpi/pcap");
        let files: Vec<String> = [
            "alexa-app.pcapng",
            "dns_ambiguous_names.pcap",
            "443-curl.pcap",
            "6in4tunnel.pcap",
        ]
        .iter()
        .map(|n| dir.join(n).display().to_string())
        .collect();
        let tmp = tempfile::tempdir().unwrap();
        let p = |n: &str| tmp.path().join(n).display().to_string();
        let (truth, model, recs) = (p("truth.csv"), p("m.ebm"), p("flows.csv"));
        let run = |args: Vec<&str>| {
            let (code, o, e) = eb(&args);
            assert_eq!(code, 0, "{args:?}\n{o}\n{e}");
            o
        };
        let mut a = vec!["label", "-o", &truth];
        a.extend(files.iter().map(String::as_str));
        let o = run(a);
        assert!(o.contains("4 captures (0 skipped), 199 flows"), "{o}");
        let mut a = vec!["train", "--dpi-only", "--labels", &truth, "-o", &model];
        a.extend(files.iter().map(String::as_str));
        let o = run(a);
        assert!(o.contains("c45 model"), "{o}");
        let mut a = vec!["flows", "--model", &model, "-o", &recs];
        a.extend(files.iter().map(String::as_str));
        run(a);
        let mut labels = HashMap::new();
        for r in rows(Path::new(&truth)) {
            if r["confidence"].starts_with("DPI") {
                let k = key(&r["proto"], &r["src"], &r["sport"], &r["dst"], &r["dport"]).unwrap();
                labels.entry(k).or_insert(r["master_proto"].clone());
            }
        }
        let (mut n, mut ok) = (0, 0);
        for r in rows(Path::new(&recs)) {
            let k = key(&r["proto"], &r["src"], &r["sport"], &r["dst"], &r["dport"]).unwrap();
            if let Some(want) = labels.get(&k) {
                n += 1;
                ok += usize::from(r["app"] == *want);
            }
        }
        eprintln!("model verdict = DPI label on {ok}/{n} training flows");
        // Measured 2026-11-25: 170/174.
        assert!(n >= 170, "{n} labelled flows found in the records");
        assert!(ok as f64 >= 0.95 * n as f64, "{ok}/{n}");
    }
}
