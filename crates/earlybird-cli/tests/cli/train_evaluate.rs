//! `earlybird train` then `earlybird evaluate` on a few corpus captures, and
//! `earlybird flows` labelling with the built-in model (skips without the
//! corpus).

use crate::common;

use std::path::PathBuf;

use common::eb;

fn corpus() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("SKIPPED: corpus not found at {}", p.display());
        None
    }
}

#[test]
fn train_then_evaluate() {
    let Some(c) = corpus() else { return };
    let dev = c.join("classify/dev");
    let pcap = |n: &str| dev.join("ndpi/pcap").join(n).display().to_string();
    let truth = dev.join("ndpi_truth.csv").display().to_string();
    let tmp = tempfile::Builder::new()
        .prefix("eb-cli-train-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let model = dir.join("m.ebm").display().to_string();
    let png = dir.join("k.png").display().to_string();
    let files = [
        pcap("alexa-app.pcapng"),
        pcap("dns_ambiguous_names.pcap"),
        pcap("6in4tunnel.pcap"),
        pcap("443-curl.pcap"),
    ];
    let mut args = vec!["train", "--algo", "c45", "--use-ports", "-n", "3"];
    args.extend(["--labels", &truth, "-o", &model]);
    args.extend(files.iter().map(|s| s.as_str()));
    let (code, out, err) = eb(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("c45 model"), "{out}");
    // The model lists its training captures by content: evaluating it on
    // them is refused, naming them (even under another name)...
    let renamed = dir.join("renamed.pcap");
    std::fs::copy(&files[3], &renamed).unwrap();
    let renamed = renamed.display().to_string();
    let mut args = vec!["evaluate", "--model", &model, "--labels", &truth];
    args.extend(files.iter().map(|s| s.as_str()));
    let (code, _, err) = eb(&args);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("4 of the 4 evaluation captures were used to train this model")
            && err.contains("alexa-app.pcapng"),
        "{err}"
    );
    let (code, out, err) = eb(&["model", "info", &model, "--captures"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("training captures: 4 files") && out.contains("443-curl.pcap"),
        "{out}"
    );
    // ... and allowed knowingly, with a warning on both streams.
    let mut args = vec![
        "evaluate",
        "--model",
        &model,
        "--labels",
        &truth,
        "--png",
        &png,
        "--allow-overlap",
    ];
    args.extend(files.iter().map(|s| s.as_str()));
    args.push(&renamed);
    let (code, out, err) = eb(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("WARNING: 4 of the 4 evaluated captures were used to train"),
        "{out}"
    );
    assert!(
        err.contains("WARNING: 443-curl.pcap was used to train"),
        "{err}"
    );
    for want in [
        "accuracy",
        "macro F1",
        "precision",
        "k =  1",
        "TLS",
        "level proto",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
    assert!(std::fs::metadata(&png).unwrap().len() > 1000);
    // Trained with a split, evaluated on the same split: no overlap, and
    // the held-out scores are in the model file.
    let mut args = vec!["train", "--algo", "ports", "--split", "0.5", "--seed", "3"];
    args.extend(["--labels", &truth, "-o", &model]);
    args.extend(files.iter().map(|s| s.as_str()));
    let (code, out, err) = eb(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    let mut args = vec![
        "evaluate", "--model", &model, "--split", "0.5", "--seed", "3",
    ];
    args.extend(["--labels", &truth]);
    args.extend(files.iter().map(|s| s.as_str()));
    let (code, out, err) = eb(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(!out.contains("WARNING"), "{out}");
    let (code, info, err) = eb(&["model", "info", &model]);
    assert_eq!(code, 0, "{err}");
    assert!(
        info.contains("measured on ") && info.contains("held-out flows"),
        "{info}"
    );
    // Compare several algorithms on a split by capture file.
    let mut args = vec!["evaluate", "--algos", "nb,c45,ports", "--split", "0.5"];
    args.extend(["--labels", &truth]);
    args.extend(files.iter().map(|s| s.as_str()));
    let (code, out, err) = eb(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("ports") && out.contains("nb"), "{out}");
}

#[test]
fn errors_name_the_file() {
    let (code, _, err) = eb(&[
        "train",
        "--labels",
        "/nonexistent/t.csv",
        "-o",
        "/tmp/x.ebm",
        "/nonexistent/a.pcap",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("/nonexistent/a.pcap"), "{err}");
    let (code, _, err) = eb(&[
        "flows",
        "--model",
        "/nonexistent/m.ebm",
        "/nonexistent/a.pcap",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("/nonexistent/m.ebm"), "{err}");
}

#[test]
fn flows_labels_with_the_built_in_model() {
    let Some(c) = corpus() else { return };
    let cap = c
        .join("classify/dev/ndpi/pcap/alexa-app.pcapng")
        .display()
        .to_string();
    let (code, out, err) = eb(&["flows", "-q", "--no-progress", &cap]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(",TLS,") || out.contains("\"TLS\""), "{out}");
    // (Without the labellers, whose SNI would name TLS whatever the
    // model.)
    let no_labels = ["flows", "-q", "--no-progress", "--no-labellers"];
    let (code, out, err) = eb(&[&no_labels[..], &["--no-model", &cap]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains(",TLS,"), "{out}");
    // `default` names the built-in model; --threshold replaces its own:
    // no confidence reaches 1, so every flow is unknown.
    let (code, named, err) = eb(&[&no_labels[..], &["--model", "default", &cap]].concat());
    assert_eq!(code, 0, "{err}");
    let (code, strict, err) = eb(&[&no_labels[..], &["--threshold", "1", &cap]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(
        named.contains(",TLS,") && !strict.contains(",TLS,"),
        "{strict}"
    );
    assert_eq!(named.lines().count(), strict.lines().count());
    let (code, _, err) = eb(&["flows", "-q", "--threshold", "1.5", &cap]);
    assert_eq!(code, 1);
    assert!(err.contains("--threshold 1.5"), "{err}");
}

#[test]
fn outputs_are_checked_before_training_or_evaluating() {
    let tmp = tempfile::Builder::new()
        .prefix("eb-cli-outs-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let cap = dir.join("iphone.pcap");
    std::fs::copy(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pcap/ndpi__iphone.pcap"),
        &cap,
    )
    .unwrap();
    let labels = dir.join("truth.csv");
    let text = "pcap,proto,src,sport,dst,dport,master_proto\n\
                iphone.pcap,UDP,192.168.2.1,53,192.168.2.17,57621,DNS\n";
    std::fs::write(&labels, text).unwrap();
    let (c, l) = (cap.to_str().unwrap(), labels.to_str().unwrap());
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/default.ebm");
    let m = model.to_str().unwrap();
    // The model file may not be an input: refused, inputs untouched.
    for out in [l, c] {
        let (code, _, err) = eb(&["train", "--labels", l, "-o", out, c]);
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains(&format!("output {out}: is the input {out}")),
            "{err}"
        );
    }
    assert_eq!(std::fs::read_to_string(&labels).unwrap(), text);
    // A chart that is not a .png, or cannot be written, is refused before
    // any work.
    for png in ["chart", "chart.jpg"] {
        let (code, _, err) = eb(&["evaluate", "--model", m, "--labels", l, "--png", png, c]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("must end in .png"), "{err}");
        let (code, _, err) = eb(&[
            "train", "--split", "0.5", "--labels", l, "-o", "m.ebm", "--png", png, c,
        ]);
        assert_eq!(code, 2, "{err}");
    }
    let nowhere = dir.join("no/such/chart.png");
    let (code, out, err) = eb(&[
        "evaluate",
        "--model",
        m,
        "--labels",
        l,
        "--png",
        nowhere.to_str().unwrap(),
        c,
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("does not exist") && out.is_empty(),
        "{out}\n{err}"
    );
    let (code, _, err) = eb(&["evaluate", "--model", m, "--labels", l, "--png", m, c]);
    assert_eq!(code, 2, "{err}");
}

/// Whether Python has scikit-learn; under CI its absence fails the test.
fn sklearn() -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import sklearn"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "scikit-learn is missing (pip install scikit-learn; .ci/run installs it)"
        );
        eprintln!("SKIPPED: scikit-learn is not installed");
    }
    ok
}

#[test]
fn features_go_to_scikit_learn_unchanged() {
    let Some(c) = corpus() else { return };
    let dev = c.join("classify/dev");
    let truth = dev.join("ndpi_truth.csv").display().to_string();
    let pcaps = dev.join("ndpi/pcap");
    let files: Vec<String> = [
        "alexa-app.pcapng",
        "dns_ambiguous_names.pcap",
        "6in4tunnel.pcap",
        "443-curl.pcap",
        "google_ssl.pcap",
        "dnscrypt-v2-doh.pcap",
    ]
    .iter()
    .map(|n| pcaps.join(n).display().to_string())
    .collect();
    let tmp = tempfile::Builder::new()
        .prefix("eb-cli-features-")
        .tempdir()
        .unwrap();
    let dir = tmp.path().join("feat");
    let dir_s = dir.display().to_string();
    let mut args = vec!["evaluate", "--algos", "c45", "-n", "3", "--split", "0.4"];
    args.extend(["--labels", &truth, "--features-out", &dir_s]);
    args.extend(files.iter().map(|s| s.as_str()));
    let (code, out, err) = eb(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    // The summary's flow counts are the files' rows; the columns are the
    // engine's feature layout.
    let rows = |name: &str| {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let mut lines = text.lines();
        let head = lines.next().unwrap().to_string();
        (head, lines.count())
    };
    let (head, train) = rows("train.csv");
    assert_eq!(
        head,
        "capture,label,size_1,gap_us_1,size_2,gap_us_2,size_3,gap_us_3,proto,server_port"
    );
    let (_, test) = rows("test.csv");
    assert!(
        out.contains(&format!("training {train} flows"))
            && out.contains(&format!("evaluation {test} flows")),
        "{train}/{test}\n{out}"
    );
    if !sklearn() {
        return;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/sklearn_compare.py");
    let o = std::process::Command::new("python3")
        .arg(&script)
        .args([&dir_s, "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    // Three models at k = 1, 2, 3, each scored on every held-out flow.
    assert_eq!(text.lines().count(), 9, "{text}");
    for l in text.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["flows"].as_u64(), Some(test as u64), "{l}");
        let acc = v["accuracy"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&acc), "{l}");
    }
}

/// `(packet, flows, answered, precision %)` of the "verdict taken at
/// packet" lines of a cascade's report.
fn decisions(report: &str) -> Vec<(usize, usize, usize, f64)> {
    let num = |s: &str| s.trim().trim_end_matches([',', ':', '%']).to_string();
    report
        .lines()
        .skip_while(|l| !l.starts_with("verdict taken at packet"))
        .skip(1)
        .take_while(|l| l.trim_start().starts_with("k ="))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            // k = 1: 521 flows ( 88.16 %), 463 answered, precision 89.85 %; ...
            let at = |word: &str| w.iter().position(|x| x.starts_with(word)).unwrap();
            (
                num(w[2]).parse().unwrap(),
                num(w[3]).parse().unwrap(),
                num(w[at("answered") - 1]).parse().unwrap(),
                num(w[at("precision") + 1]).parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_cascade_decides_earlier_with_its_precision_on_held_out_captures() {
    let Some(c) = corpus() else { return };
    let dev = c.join("classify/dev");
    let s = |p: PathBuf| p.display().to_string();
    let tmp = tempfile::Builder::new()
        .prefix("eb-cli-cascade-")
        .tempdir()
        .unwrap();
    let model = s(tmp.path().join("casc.ebm"));
    let (ndpi, nfs) = (s(dev.join("ndpi/pcap")), s(dev.join("nfstream/pcap")));
    let (t1, t2) = (
        s(dev.join("ndpi_truth.csv")),
        s(dev.join("nfstream_truth.csv")),
    );
    let split = [
        "--split",
        "0.3",
        "--max-per-capture",
        "20",
        "--seed",
        "1",
        "--level",
        "proto",
    ];
    let mut args = vec!["train", "--algo", "c45", "--use-ports", "-n", "4"];
    args.extend(["--earliest", "1", "--target-precision", "0.7", "-o", &model]);
    args.extend(split);
    args.extend(["--labels", &t1, "--labels", &t2, &ndpi, &nfs]);
    let (code, out, err) = eb(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("cascade model ("), "{out}");
    // On the held-out captures (2026-11-26: 591 flows, 521 decided at
    // packet 1 with precision 89.85 %, mean decision packet 1.23).
    let d = decisions(&out);
    let total: usize = d.iter().map(|x| x.1).sum();
    assert!(total > 300, "{out}");
    let first = d
        .iter()
        .find(|x| x.0 == 1)
        .expect("flows decided at packet 1");
    assert!(
        first.1 * 2 > total,
        "most flows are decided at packet 1: {d:?}"
    );
    assert!(
        first.3 >= 70.0,
        "precision at packet 1 below the 0.7 target: {d:?}"
    );
    // The flow engine takes the same decisions: records say the packet.
    let csv = s(tmp.path().join("flows.csv"));
    let one = s(dev.join("ndpi/pcap/443-curl.pcap"));
    let (code, _, err) = eb(&["flows", "--model", &model, "-q", "-o", &csv, &one]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let head: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let col = head.iter().position(|h| *h == "decided_at_packet").unwrap();
    let at: Vec<u32> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(col).unwrap().parse().unwrap())
        .collect();
    assert!(
        !at.is_empty() && at.iter().all(|&k| (1..=4).contains(&k)),
        "{at:?}"
    );
    // A cascade's stages have their own thresholds: --threshold is refused.
    let (code, _, err) = eb(&["flows", "--model", &model, "--threshold", "0.5", "-q", &one]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cascade"), "{err}");
}

/// A report printed into a pipe whose reader is gone (`model info | head`
/// after head exited) ends quietly with the command's own exit code; the
/// write used to panic. The pipe's read end is closed before the command
/// starts, so every write fails.
#[test]
fn a_report_into_a_closed_pipe_is_not_a_panic() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    for args in [&["model", "info"][..], &["gen", "--help"][..]] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_earlybird"))
            .args(args)
            .stdout(writer.try_clone().unwrap())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
}
