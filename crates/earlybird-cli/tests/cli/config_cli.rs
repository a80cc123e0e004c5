//! `earlybird flows --config FILE.toml`: a file gives the same run as the
//! same options on the command line, the command line overrides it, the
//! example probe configuration in docs/ passes `--check-config`, and a
//! bad file is refused naming it.

use crate::common;

use std::path::PathBuf;

use common::eb;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn a_config_file_is_the_command_line_it_stands_for() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = root().join("testdata/pcap/ndpi__iphone.pcap");
    let out = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let conf = dir.path().join("probe.toml");
    std::fs::write(
        &conf,
        format!(
            "inputs = [{pcap:?}]\nquiet = true\nearly_packets = 6\nidle-timeout = 1\n\
             output = {:?}\nstats-out = {:?}\n[alarm-pcap]\nwindow = 5\n",
            out("a.csv"),
            out("a-stats.csv"),
        ),
    )
    .unwrap();
    // --alarm-pcap-window needs --alarm-pcap-dir: refused from a file as on
    // the command line.
    let (code, _, err) = eb(&["flows", "--config", conf.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--alarm-pcap-dir"), "{err}");
    let text = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(&conf, text.replace("[alarm-pcap]\nwindow = 5\n", "")).unwrap();
    let (code, _, err) = eb(&["flows", "--config", conf.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = eb(&[
        "flows",
        pcap.to_str().unwrap(),
        "-q",
        "-n",
        "6",
        "--idle-timeout",
        "1",
        "-o",
        &out("b.csv"),
        "--stats-out",
        &out("b-stats.csv"),
    ]);
    assert_eq!(code, 0, "{err}");
    let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap();
    assert_eq!(read("a.csv"), read("b.csv"));
    assert_eq!(read("a-stats.csv"), read("b-stats.csv"));
    assert!(read("a.csv").lines().next().unwrap().contains("pkt6_size"));
    // The command line overrides the file's single values.
    let (code, _, err) = eb(&[
        "flows",
        "--config",
        conf.to_str().unwrap(),
        "--idle-timeout",
        "15",
        "-o",
        &out("c.csv"),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = eb(&[
        "flows",
        pcap.to_str().unwrap(),
        "-q",
        "-n",
        "6",
        "-o",
        &out("d.csv"),
    ]);
    assert_eq!(code, 0, "{err}");
    // (Per-second statistics, on in the file, cut the batches at second
    // boundaries, which moves when idle flows are swept out: the same
    // records, in another order.)
    let sorted = |n: &str| {
        let mut v: Vec<String> = read(n).lines().map(String::from).collect();
        v.sort();
        v
    };
    assert_eq!(sorted("c.csv"), sorted("d.csv"));
    // (The file's output, a.csv, was written again by that run, with it.)
    assert_eq!(read("a.csv"), read("c.csv"));
    assert_ne!(
        read("c.csv"),
        read("b.csv"),
        "the timeout changed the flows"
    );
}

#[test]
fn the_example_probe_configuration_checks_out() {
    let conf = root().join("docs/probe.example.toml");
    let (code, _, err) = eb(&[
        "flows",
        "--config",
        conf.to_str().unwrap(),
        "--check-config",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("configuration OK"), "{err}");
}

#[test]
fn a_bad_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("bad.toml");
    std::fs::write(&conf, "idle-timeout = \n").unwrap();
    let (code, _, err) = eb(&["flows", "--config", conf.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bad.toml"), "{err}");
    std::fs::write(&conf, "shards = 1\ncolour = \"blue\"\n").unwrap();
    let (code, _, err) = eb(&["flows", "--config", conf.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("bad.toml, line 2: unknown field `colour`"),
        "{err}"
    );
}

#[test]
fn print_config_prints_what_config_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let conf = root().join("docs/probe.example.toml");
    let (code, first, err) = eb(&[
        "flows",
        "--config",
        conf.to_str().unwrap(),
        "--idle-timeout",
        "42",
        "-o",
        "extra.csv",
        "--print-config",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(first.contains("idle-timeout = 42.0"), "{first}");
    assert!(first.contains("\"extra.csv\""), "{first}");
    assert!(
        first.contains("[dump]\ndir = \"/var/lib/earlybird/dump\""),
        "{first}"
    );
    let printed = dir.path().join("printed.toml");
    std::fs::write(&printed, &first).unwrap();
    let (code, again, err) = eb(&[
        "flows",
        "--config",
        printed.to_str().unwrap(),
        "--print-config",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(again, first);
    // An old spelling is read, with a warning.
    let old = dir.path().join("old.toml");
    std::fs::write(&old, "inputs = [\"x.pcap\"]\nidle_timeout = 9\n").unwrap();
    let (code, out, err) = eb(&["flows", "--config", old.to_str().unwrap(), "--print-config"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("idle-timeout = 9.0"), "{out}");
    assert!(
        err.contains("warning") && err.contains("idle-timeout"),
        "{err}"
    );
}
