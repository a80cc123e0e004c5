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

/// The dev corpus's nDPI captures (a directory `flows` reads whole).
fn dev() -> Option<String> {
    let c = corpus()?;
    Some(c.join("classify/dev/ndpi/pcap").display().to_string())
}

/// A temporary directory named after the test.
fn tmp(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(prefix).tempdir().unwrap()
}

/// `earlybird flows INPUT --no-progress ARGS…`, which must exit 0: its
/// stderr.
fn flows_ok(input: &str, args: &[&str]) -> String {
    let mut a = vec!["flows", input, "--no-progress"];
    a.extend_from_slice(args);
    let (code, _, stderr) = eb(&a);
    assert_eq!(code, 0, "{stderr}");
    stderr
}

/// `--learn DIR` with a model every `labels` labelled flows and none by
/// packet time.
fn learn<'a>(dir: &'a str, labels: &'a str) -> [&'a str; 6] {
    [
        "--learn",
        dir,
        "--learn-every-labels",
        labels,
        "--learn-every-seconds",
        "0",
    ]
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
    let tmp = tmp("eb-cli-selftrain-");
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
    let Some(dev) = dev() else { return };
    let tmp = tmp("eb-cli-learn-");
    let dir = tmp.path().join("models");
    let d = dir.display().to_string();
    // Swap points closer than the default's 1,000,000 packets (more than
    // these captures hold): models are due only at points.
    let mut args = vec!["-f", "null", "--learn-level", "proto"];
    args.extend(["--learn-swap-packets", "100000"]);
    args.extend(learn(&d, "200"));
    let stderr = flows_ok(&dev, &args);
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
    // The bounds as configured (the defaults here) beside what was used:
    // the training thread's seconds training the models above, and
    // resting.
    assert!(
        stderr.contains("KiB; --learn-reservoir 2000 a class), "),
        "{stderr}"
    );
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("earlybird: training thread: "))
        .expect(&stderr);
    let figures: Vec<f64> = line.split(' ').filter_map(|w| w.parse().ok()).collect();
    assert!(figures[0] > 0.0 && figures[1] >= 0.0, "{line}");
    assert!(line.contains("s resting (--learn-cpu 0.5), "), "{line}");
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
    let Some(dev) = dev() else { return };
    let tmp = tmp("eb-cli-learn-shards-");
    let mut models = Vec::new();
    for shards in ["1", "2", "4"] {
        let dir = tmp.path().join(format!("s{shards}"));
        let d = dir.display().to_string();
        let mut args = vec!["-f", "null", "-s", shards];
        args.extend(learn(&d, "0"));
        let stderr = flows_ok(&dev, &args);
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
    flows_ok(&dev, &["-f", "null", "--config", &conf]);
    assert_eq!(
        std::fs::read(dir.join("model-0001.ebm")).unwrap(),
        models[0]
    );
    // Values out of range are usage errors.
    let (code, _, stderr) = eb(&["flows", &dev, "--learn", "x", "--learn-holdout", "1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--learn-holdout"), "{stderr}");
}

/// The rows of a CSV of records, sorted (shards write in their own order).
fn sorted_rows(csv: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(csv).unwrap();
    let mut rows: Vec<String> = text.lines().skip(1).map(str::to_string).collect();
    rows.sort();
    rows
}

#[test]
fn flows_learn_swaps_models_at_the_same_points_whatever_the_shards() {
    let Some(dev) = dev() else { return };
    let tmp = tmp("eb-cli-learn-swap-");
    let mut runs = Vec::new();
    for shards in ["1", "2", "4"] {
        let dir = tmp.path().join(format!("s{shards}"));
        let csv = tmp.path().join(format!("s{shards}.csv"));
        let (d, o) = (dir.display().to_string(), csv.display().to_string());
        let mut args = vec!["-o", &o, "-s", shards, "--learn-swap-packets", "5000"];
        args.extend(learn(&d, "100"));
        let stderr = flows_ok(&dev, &args);
        assert!(stderr.contains("in use from packet time"), "{stderr}");
        let index = models_index(&dir);
        let models: Vec<Vec<u8>> = index
            .iter()
            .map(|m| std::fs::read(m["path"].as_str().unwrap()).unwrap())
            .collect();
        runs.push((sorted_rows(&csv), models, index));
    }
    let (rows, models, index) = &runs[0];
    // Several models were swapped in while the run went on.
    let swapped: Vec<u64> = index
        .iter()
        .filter(|m| m["best"] == true)
        .map(|m| m["id"].as_u64().unwrap())
        .collect();
    assert!(swapped.len() >= 3, "{index:?}");
    let header = std::fs::read_to_string(tmp.path().join("s1.csv")).unwrap();
    let header: Vec<&str> = header.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "model_id").unwrap();
    let mut used: Vec<u64> = rows
        .iter()
        .filter_map(|r| r.split(',').nth(col).and_then(|v| v.parse().ok()))
        .collect();
    used.sort();
    used.dedup();
    // The run's own model (0) and at least two learnt ones decided flows,
    // each a model that beat the one before it.
    assert!(used.len() >= 3 && used[0] == 0, "{used:?}");
    assert!(used[1..].iter().all(|u| swapped.contains(u)), "{used:?}");
    // Identical models and identical records at 1, 2 and 4 shards.
    for (r, m, _) in &runs[1..] {
        assert_eq!(m, models);
        assert!(r == rows, "records differ between shard counts");
    }
}

/// Number of records and sum of `fwd_packets` + `bwd_packets` of a CSV.
fn flows_and_packets(csv: &std::path::Path) -> (usize, u64) {
    let text = std::fs::read_to_string(csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (f, b) = (col("fwd_packets"), col("bwd_packets"));
    let mut n = 0;
    let mut packets = 0;
    for l in lines {
        let v: Vec<&str> = l.split(',').collect();
        packets += v[f].parse::<u64>().unwrap() + v[b].parse::<u64>().unwrap();
        n += 1;
    }
    (n, packets)
}

/// A live capture in a network namespace while a capture is replayed into
/// it three times, a second and a half apart (flows idle for a second
/// end in between): `extra` are the run's own options; `look` runs after
/// the replays, before the capture is stopped. Returns its stderr.
fn live_replays(
    net: &crate::lib_common::Veth,
    csv: &str,
    extra: &[&str],
    look: &mut dyn FnMut(),
) -> String {
    use std::io::{BufRead, Read};
    use std::process::{Command, Stdio};
    let bin = env!("CARGO_BIN_EXE_earlybird");
    let pcap = crate::lib_common::testdata().join("pcap/ndpi__iphone.pcap");
    let mut cap = Command::new("ip")
        .args(["netns", "exec", &net.ns_a, bin, "flows", "-i", &net.a])
        .args(["--idle-timeout", "1", "-s", "2", "-o", csv])
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(cap.stderr.take().unwrap());
    let mut first = String::new();
    while !first.contains("capturing on") {
        if err.read_line(&mut first).unwrap() == 0 {
            break;
        }
    }
    assert!(first.contains("capturing on"), "{first}");
    for _ in 0..3 {
        net.replay(bin, &pcap);
        std::thread::sleep(std::time::Duration::from_millis(2500));
    }
    look();
    // SAFETY: signals the child process started above.
    unsafe { libc::kill(cap.id() as i32, libc::SIGINT) };
    let status = cap.wait().unwrap();
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert_eq!(status.code(), Some(130), "{rest}");
    rest
}

#[test]
fn a_live_capture_swaps_learnt_models_without_losing_or_splitting_a_flow() {
    let Some(net) = crate::lib_common::Veth::create("ebls") else {
        return;
    };
    let tmp = tmp("eb-cli-learn-live-");
    let (plain, learnt) = (tmp.path().join("plain.csv"), tmp.path().join("learnt.csv"));
    let dir = tmp.path().join("models");
    let rest = live_replays(&net, &plain.display().to_string(), &[], &mut || {});
    let (flows, packets) = flows_and_packets(&plain);
    let d = dir.display().to_string();
    let rest2 = live_replays(
        &net,
        &learnt.display().to_string(),
        &[&learn(&d, "5")[..], &["--learn-cpu", "1"]].concat(),
        &mut || {},
    );
    // Models were learnt from the first replays and swapped in while the
    // capture went on: later flows name them.
    assert!(rest2.contains("in use from packet time"), "{rest2}");
    let text = std::fs::read_to_string(&learnt).unwrap();
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "model_id").unwrap();
    let learnt_ids = text
        .lines()
        .skip(1)
        .filter(|l| {
            l.split(',')
                .nth(col)
                .is_some_and(|v| !v.is_empty() && v != "0")
        })
        .count();
    assert!(learnt_ids > 0, "{rest2}");
    // Every packet is in a flow and no flow was split by a swap: the same
    // flows and packets as the capture without swaps.
    assert_eq!(
        flows_and_packets(&learnt),
        (flows, packets),
        "{rest}\n{rest2}"
    );
    // Three replays of a capture of several hundred packets.
    assert!(packets > 1000, "{rest}");
}

/// Sums of the per-second columns `names` of a stats CSV.
fn column_sums(csv: &std::path::Path, names: &[&str]) -> Vec<u64> {
    let text = std::fs::read_to_string(csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let cols: Vec<usize> = (names.iter())
        .map(|n| header.iter().position(|h| h == n).expect(n))
        .collect();
    let mut sums = vec![0; names.len()];
    for l in lines {
        let v: Vec<&str> = l.split(',').collect();
        for (s, &c) in sums.iter_mut().zip(&cols) {
            *s += v[c].parse::<u64>().unwrap();
        }
    }
    sums
}

/// Records with a payload label and a model verdict, and those whose
/// verdict is the label's class at `level` (proto: the protocol the name
/// was read from; app: the application), counted from JSON-lines records.
fn agreement_of_records(jsonl: &std::path::Path, level: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(jsonl).unwrap();
    let (mut labelled, mut agreeing) = (0, 0);
    for l in text.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let text = |k: &str| v[k].as_str().unwrap_or("").to_string();
        let proto = match text("label_source").as_str() {
            "sni" => "TLS",
            "quic" => "QUIC",
            "http" => "HTTP",
            "dns" => "DNS",
            "ssh" => "SSH",
            _ => continue,
        };
        let stat = text("stat_app");
        if stat == "unknown" {
            continue;
        }
        labelled += 1;
        let class = if level == "proto" {
            proto.to_string()
        } else {
            text("app")
        };
        agreeing += u64::from(stat == class);
    }
    (labelled, agreeing)
}

#[test]
fn drift_columns_count_the_records_whose_model_verdict_and_payload_label_agree() {
    let Some(dev) = dev() else { return };
    let tmp = tmp("eb-cli-drift-");
    for (level, shards) in [("proto", "1"), ("app", "2")] {
        let csv = tmp.path().join(format!("{level}.jsonl"));
        let stats = tmp.path().join(format!("{level}-stats.csv"));
        let alarms = tmp.path().join(format!("{level}-alarms.csv"));
        let (csv_s, stats_s) = (csv.display().to_string(), stats.display().to_string());
        let alarms_s = alarms.display().to_string();
        let stderr = flows_ok(
            &dev,
            &[
                "--labellers",
                "--learn-level",
                level,
                "-s",
                shards,
                "-o",
                &csv_s,
                "--stats-out",
                &stats_s,
                // The drift series is one an alarm can watch.
                "--alarm",
                "disagreeing_flows:cusum",
                "--alarms-out",
                &alarms_s,
            ],
        );
        let (labelled, agreeing) = agreement_of_records(&csv, level);
        let sums = column_sums(
            &stats,
            &["labelled_flows", "agreeing_flows", "disagreeing_flows"],
        );
        assert_eq!(sums, [labelled, agreeing, labelled - agreeing], "{level}");
        // The dev corpus has hundreds of named flows, and the default
        // model is neither always right nor always wrong on them.
        assert!(labelled > 300, "{labelled}");
        assert!(
            agreeing > 0 && agreeing < labelled,
            "{agreeing} of {labelled}"
        );
        assert!(alarms.is_file());
        // The summary says the same, per class: the classes' counts add
        // up to the records'.
        let line = format!(
            "model against payload labels ({level}): {agreeing} of {labelled} flows agree ("
        );
        let per = stderr.split(&line).nth(1).expect(&stderr);
        let per = per.lines().next().unwrap().trim_end_matches(')');
        let (mut l, mut a) = (0, 0);
        for class in per.split(", ") {
            let (ca, cl) = class.rsplit_once(' ').unwrap().1.split_once('/').unwrap();
            a += ca.parse::<u64>().unwrap();
            l += cl.parse::<u64>().unwrap();
        }
        assert_eq!((l, a), (labelled, agreeing), "{per}");
    }
    // Without the payload labellers nothing is counted.
    let stats = tmp.path().join("none-stats.csv");
    let stderr = flows_ok(
        &dev,
        &[
            "--no-labellers",
            "-f",
            "null",
            "--stats-out",
            &stats.display().to_string(),
        ],
    );
    assert_eq!(column_sums(&stats, &["labelled_flows"]), [0]);
    assert!(!stderr.contains("model against payload labels"), "{stderr}");
}

/// The first line where two CSV texts differ (1-based, after the
/// header), with both lines; `None` when they are the same.
fn first_difference(a: &str, b: &str) -> Option<(usize, String, String)> {
    let (mut la, mut lb) = (a.lines(), b.lines());
    for n in 0.. {
        match (la.next(), lb.next()) {
            (None, None) => return None,
            (x, y) if x == y => {}
            (x, y) => {
                let show = |l: Option<&str>| l.unwrap_or("(none)").to_string();
                return Some((n, show(x), show(y)));
            }
        }
    }
    None
}

/// Rows of a stats CSV whose `labelled_flows` exceed their
/// `flows_ended`, and rows with a labelled flow.
fn labelled_beyond_ended(csv: &str) -> (usize, usize) {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let (labelled, ended) = (col("labelled_flows"), col("flows_ended"));
    let (mut beyond, mut with) = (0, 0);
    for l in lines {
        let v: Vec<u64> = l.split(',').map(|x| x.parse().unwrap()).collect();
        beyond += usize::from(v[labelled] > v[ended]);
        with += usize::from(v[labelled] > 0);
    }
    (beyond, with)
}

#[test]
fn drift_columns_are_the_same_run_after_run() {
    // Records are labelled on a shard or on the exporter thread, when a
    // thread gets to them; the drift columns count a record in the second
    // its flow ended, so the rows depend on the input only. (The other
    // columns are the same run after run but not across shard counts: a
    // flow ended by a timeout counts in the second the incremental expiry
    // finds it, docs/OPERATIONS.md. Across shard counts the sums agree and
    // no row counts more labelled flows than flows ended.)
    let Some(dev) = dev() else { return };
    let tmp = tmp("eb-cli-drift-same-");
    let stats_of = |shards: &str, run: usize| {
        let stats = tmp.path().join(format!("stats-{shards}-{run}.csv"));
        let stats_s = stats.display().to_string();
        let args = [
            "--labellers",
            "--learn-level",
            "proto",
            "-s",
            shards,
            "-f",
            "null",
            "--stats-out",
            &stats_s,
        ];
        flows_ok(&dev, &args);
        let sums = column_sums(&stats, &["labelled_flows", "agreeing_flows"]);
        let text = std::fs::read_to_string(&stats).unwrap();
        std::fs::remove_file(&stats).unwrap();
        (text, sums)
    };
    let mut sums_of_one = None;
    for (shards, runs) in [("1", 2), ("2", 3), ("4", 2)] {
        let (first, sums) = stats_of(shards, 0);
        // Hundreds of flows counted, in the rows of many seconds.
        assert!(sums[0] > 300, "{sums:?}");
        assert_eq!(
            sums_of_one.get_or_insert(sums.clone()),
            &sums,
            "-s {shards}"
        );
        let (beyond, with) = labelled_beyond_ended(&first);
        assert_eq!(beyond, 0, "-s {shards}: rows with more labelled than ended");
        assert!(with > 50, "-s {shards}: {with} rows with a labelled flow");
        for run in 1..runs {
            let (other, _) = stats_of(shards, run);
            if let Some((line, a, b)) = first_difference(&first, &other) {
                panic!("-s {shards}: row {line} of run {run} differs from run 0's:\n{b}\n{a}");
            }
        }
    }
}

#[test]
fn flows_learn_refuses_a_model_on_the_classifier_pool() {
    let tmp = tmp("eb-cli-learn-svm-");
    let pcap = crate::lib_common::testdata().join("pcap/ndpi__iphone.pcap");
    let pcap = pcap.display().to_string();
    let svm = tmp.path().join("svm.ebm").display().to_string();
    let (code, _, stderr) = eb(&["train", "--algo", "svm", "--self-labels", &pcap, "-o", &svm]);
    assert_eq!(code, 0, "{stderr}");
    let d = tmp.path().join("models").display().to_string();
    let (code, _, stderr) = eb(&["flows", &pcap, "-f", "null", "--model", &svm, "--learn", &d]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("classifier pool"), "{stderr}");
    assert!(!tmp.path().join("models").exists());
}

/// The sum of the samples of metric `name` over its labels.
fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn a_live_capture_shows_the_agreement_and_the_learnt_model_on_metrics() {
    let Some(net) = crate::lib_common::Veth::create("ebld") else {
        return;
    };
    net.capture_loopback_up();
    let tmp = tmp("eb-cli-learn-metrics-");
    let csv = tmp.path().join("learnt.jsonl");
    let d = tmp.path().join("models").display().to_string();
    let port = 19_473;
    let mut scraped = String::new();
    let rest = live_replays(
        &net,
        &csv.display().to_string(),
        &[
            &learn(&d, "5")[..],
            &["--learn-cpu", "1", "--learn-level", "proto"],
            &["--metrics-listen", &port.to_string()],
        ]
        .concat(),
        &mut || {
            scraped = crate::metrics_cli::scrape(&net, port).unwrap_or_default();
        },
    );
    // The first learnt model is announced while the capture runs, and
    // /metrics names the model the shards use.
    assert!(rest.contains("first learnt model"), "{rest}");
    let id = crate::metrics_cli::value(&scraped, "earlybird_learn_model_id");
    assert!(id.is_some_and(|id| id >= 1.0), "{scraped}");
    // The agreement counters count the records with both labels: at most
    // those the run wrote in all (the scrape came before its end), and
    // most of them (their flows had ended).
    let (labelled, agreeing) = agreement_of_records(&csv, "proto");
    let m_labelled = metric_sum(&scraped, "earlybird_learn_labelled_flows_total");
    let m_agreeing = metric_sum(&scraped, "earlybird_learn_agreeing_flows_total");
    assert!(labelled > 0, "{rest}");
    assert!(
        m_labelled > 0.0 && m_labelled <= labelled as f64,
        "{m_labelled} of {labelled}\n{scraped}"
    );
    assert!(
        m_agreeing <= m_labelled && m_agreeing <= agreeing as f64,
        "{scraped}"
    );
    assert!(
        scraped.contains("earlybird_learn_labelled_flows_total{class=\"DNS\"}"),
        "{scraped}"
    );
}
