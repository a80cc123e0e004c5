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

/// The lines of `DIR/models.jsonl` as JSON values.
fn models_index(dir: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("models.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn flows_learn_writes_models_while_it_runs_and_a_last_one_at_the_end() {
    let Some(c) = corpus() else { return };
    let dev = c.join("classify/dev/ndpi/pcap").display().to_string();
    let tmp = tempfile::Builder::new()
        .prefix("eb-cli-learn-")
        .tempdir()
        .unwrap();
    let dir = tmp.path().join("models");
    let d = dir.display().to_string();
    let (code, _, stderr) = eb(&[
        "flows",
        &dev,
        "-f",
        "null",
        "--no-progress",
        "--learn",
        &d,
        "--learn-every-labels",
        "200",
        "--learn-every-seconds",
        "0",
        "--learn-level",
        "proto",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let index = models_index(&dir);
    // Several while the run went on (every 200 labels, when the thread
    // was free), and the last one at the end.
    assert!(index.len() >= 2, "{stderr}");
    for (i, m) in index.iter().enumerate() {
        assert_eq!(m["id"], i as u64 + 1);
        let path = m["path"].as_str().unwrap();
        assert!(std::path::Path::new(path).is_file(), "{path}");
        assert!(m["held_out"].as_u64().unwrap() > 0, "{m}");
        let acc = m["accuracy"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&acc), "{m}");
    }
    // The trained sets grow as flows are labelled.
    let trained: Vec<u64> = index
        .iter()
        .map(|m| m["trained"].as_u64().unwrap())
        .collect();
    assert!(trained.windows(2).all(|w| w[0] <= w[1]), "{trained:?}");
    // best.ebm is a model that beat the one before it (the run's own
    // model first); on these captures a self-trained model may only tie
    // with the default port table at the protocol level.
    let beat = index.iter().any(|m| m["best"] == true);
    assert_eq!(dir.join("best.ebm").is_file(), beat, "{stderr}");
    for m in &index {
        let (acc, before) = (m["accuracy"].as_f64(), m["best_before"].as_f64());
        if m["best"] == true {
            assert!(acc >= before, "{m}");
        } else {
            assert!(acc <= before, "{m}");
        }
    }
    assert!(stderr.contains("earlybird: learning: "), "{stderr}");
    // The model file says where it came from and how it scored.
    let last = index.last().unwrap()["path"].as_str().unwrap().to_string();
    let (code, info, e) = eb(&["model", "info", &last]);
    assert_eq!(code, 0, "{e}");
    assert!(
        info.contains("self-labels online (earlybird flows --learn): proto"),
        "{info}"
    );
    assert!(info.contains("held-out flows"), "{info}");
    // Proto level: the protocols the payload names were read from.
    assert!(info.contains("TLS") && info.contains("DNS"), "{info}");
}

#[test]
fn flows_learn_leaves_the_same_last_model_whatever_the_shards_and_reads_learn_from_the_file() {
    let Some(c) = corpus() else { return };
    let dev = c.join("classify/dev/ndpi/pcap").display().to_string();
    let tmp = tempfile::Builder::new()
        .prefix("eb-cli-learn-shards-")
        .tempdir()
        .unwrap();
    let mut models = Vec::new();
    for shards in ["1", "2", "4"] {
        let dir = tmp.path().join(format!("s{shards}"));
        let d = dir.display().to_string();
        let (code, _, stderr) = eb(&[
            "flows",
            &dev,
            "-f",
            "null",
            "--no-progress",
            "-s",
            shards,
            "--learn",
            &d,
            "--learn-every-labels",
            "0",
            "--learn-every-seconds",
            "0",
        ]);
        assert_eq!(code, 0, "{stderr}");
        let index = models_index(&dir);
        assert_eq!(index.len(), 1, "{stderr}");
        models.push(std::fs::read(dir.join("model-0001.ebm")).unwrap());
    }
    assert!(models[0] == models[1] && models[1] == models[2]);
    // `[learn]` in the configuration file is `--learn-*` on the command line.
    let conf = tmp.path().join("probe.toml");
    let dir = tmp.path().join("fromfile");
    std::fs::write(
        &conf,
        format!(
            "[learn]\ndir = {:?}\nevery-labels = 0\nevery-seconds = 0\n",
            dir.display().to_string()
        ),
    )
    .unwrap();
    let conf = conf.display().to_string();
    let (code, printed, stderr) = eb(&["flows", "--config", &conf, "--print-config"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(printed.contains("[learn]"), "{printed}");
    let (code, _, stderr) = eb(&[
        "flows",
        &dev,
        "-f",
        "null",
        "--no-progress",
        "--config",
        &conf,
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        std::fs::read(dir.join("model-0001.ebm")).unwrap(),
        models[0]
    );
    // Values out of range are usage errors.
    let (code, _, stderr) = eb(&["flows", &dev, "--learn", "x", "--learn-holdout", "1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--learn-holdout"), "{stderr}");
}
