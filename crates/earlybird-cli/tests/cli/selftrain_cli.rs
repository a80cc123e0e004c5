//! `earlybird train --self-labels` on corpus captures: the flows' own
//! payload names are the labels, the reservoir bounds them per class, the
//! same seed gives the same model file (skips without the corpus).

use crate::common::eb;

use std::path::PathBuf;

fn corpus() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("SKIPPED: corpus not found at {}", p.display());
        None
    }
}

/// The "(self-labels: K kept in the reservoir, D not kept, …)" figures.
fn kept_dropped(out: &str) -> (u64, u64) {
    let s = out.split("(self-labels: ").nth(1).expect(out);
    let n: Vec<u64> = s
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .take(2)
        .map(|w| w.parse().unwrap())
        .collect();
    (n[0], n[1])
}

#[test]
fn train_self_labels() {
    let Some(c) = corpus() else { return };
    let dev = c.join("classify/dev/ndpi/pcap");
    let files: Vec<String> = [
        "alexa-app.pcapng",
        "dns_ambiguous_names.pcap",
        "443-curl.pcap",
        "6in4tunnel.pcap",
    ]
    .iter()
    .map(|n| dev.join(n).display().to_string())
    .collect();
    let tmp = tempfile::Builder::new()
        .prefix("eb-cli-selftrain-")
        .tempdir()
        .unwrap();
    let out = |n: &str| tmp.path().join(n).display().to_string();
    let train = |extra: &[&str], model: &str| {
        let mut a = vec!["train", "--self-labels", "--algo", "c45", "--seed", "3"];
        a.extend_from_slice(extra);
        a.extend(files.iter().map(String::as_str));
        a.extend(["-o", model]);
        eb(&a)
    };
    let (a, b) = (out("a.ebm"), out("b.ebm"));
    let (code, stdout, stderr) = train(&[], &a);
    assert_eq!(code, 0, "{stderr}");
    let (kept, dropped) = kept_dropped(&stdout);
    assert!(kept >= 5 && dropped == 0, "{stdout}");
    assert!(stdout.contains("level category"), "{stdout}");
    assert!(stdout.contains("self-labels (category"), "{stdout}");
    // Same captures and seed: the same model file.
    assert_eq!(train(&[], &b).0, 0);
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    // A reservoir of 2 flows per class keeps 2 of each class at most.
    let (code, stdout, stderr) = train(&["--reservoir", "2", "--level", "app"], &b);
    assert_eq!(code, 0, "{stderr}");
    let (k2, d2) = kept_dropped(&stdout);
    let classes: u64 = stdout
        .lines()
        .find_map(|l| l.split_once(" classes;").map(|(n, _)| n))
        .and_then(|w| w.trim().parse().ok())
        .expect(&stdout);
    assert!(k2 <= 2 * classes && k2 + d2 == kept, "{stdout}");
    assert!(d2 > 0, "{stdout}");
    // A truth file and self-labels together are refused.
    let (code, _, stderr) = eb(&[
        "train",
        "--self-labels",
        "--labels",
        "x.csv",
        &files[0],
        "-o",
        &b,
    ]);
    assert_ne!(code, 0);
    assert!(stderr.contains("--labels"), "{stderr}");
}
