//! `earlybird flows --sample POLICY:N`: the records of a sampled run carry
//! the sampling fields (and the records of an unsampled run do not), the
//! skipped packets are counted in the summary, several shards keep 1 in N
//! too, the config file reaches the option, bad specs and `-w` are
//! refused, and `evaluate --sample` scores under sampling.

use crate::common;

use std::path::PathBuf;

use common::eb;

fn pcap() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/pcap/ndpi__iphone.pcap")
        .display()
        .to_string()
}

/// The summary's "N read" and the sampling line's skipped count.
fn counts(err: &str) -> (u64, Option<u64>) {
    let read = err
        .lines()
        .find_map(|l| l.strip_prefix("packets: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{err}"));
    let skipped = err
        .lines()
        .find_map(|l| l.strip_prefix("sampling: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok());
    (read, skipped)
}

#[test]
fn sampled_records_say_so_and_skipped_packets_are_counted() {
    let p = pcap();
    let (code, plain, err) = eb(&["flows", &p, "--no-model"]);
    assert_eq!(code, 0, "{err}");
    let (read, skipped) = counts(&err);
    assert_eq!(skipped, None, "{err}");
    assert!(!plain.lines().next().unwrap().contains("sampling"));

    // (Without the labellers: the CSV is split on every comma below.)
    let (code, out, err) = eb(&[
        "flows",
        &p,
        "--no-model",
        "--no-labellers",
        "--sample",
        "systematic:4",
    ]);
    assert_eq!(code, 0, "{err}");
    let (read4, skipped) = counts(&err);
    assert_eq!(read4, read, "every packet is still read");
    let skipped = skipped.unwrap();
    // The first of every 4: ⌈read/4⌉ kept.
    assert_eq!(skipped, read - read.div_ceil(4), "{err}");
    let mut lines = out.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    // The four sampling fields, in this order (other fields, such as the
    // label's, may follow them).
    let at = head.iter().position(|h| *h == "sampling").unwrap();
    assert_eq!(
        &head[at..at + 4],
        [
            "sampling",
            "sampling_rate",
            "packets_estimated",
            "bytes_estimated"
        ]
    );
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
    let (pf, pb, est, rate, pol) = (
        col("fwd_packets"),
        col("bwd_packets"),
        col("packets_estimated"),
        col("sampling_rate"),
        col("sampling"),
    );
    let mut seen = 0u64;
    for l in lines {
        let c: Vec<&str> = l.split(',').collect();
        let n: u64 = c[pf].parse::<u64>().unwrap() + c[pb].parse::<u64>().unwrap();
        assert_eq!(c[pol], "systematic");
        assert_eq!(c[rate], "4");
        assert_eq!(c[est].parse::<u64>().unwrap(), 4 * n);
        seen += n;
    }
    assert!(seen <= read - skipped && seen > 0);

    // Two shards sample the turns they read: 1 in 4 all the same.
    let (code, _, err) = eb(&[
        "flows",
        &p,
        "--no-model",
        "-f",
        "null",
        "-s",
        "2",
        "--sample",
        "stratified:4",
    ]);
    assert_eq!(code, 0, "{err}");
    let (read2, skipped2) = counts(&err);
    assert_eq!(read2, read);
    let kept = read - skipped2.unwrap();
    assert!(kept.abs_diff(read / 4) <= 2, "{kept} of {read}");

    // The same seed keeps the same packets; the config file reaches both
    // options.
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("probe.toml");
    std::fs::write(&cfg, "sample = \"random:4\"\nsample-seed = 9\n").unwrap();
    let cfg = cfg.display().to_string();
    let a = eb(&["flows", &p, "--no-model", "--config", &cfg]);
    let b = eb(&[
        "flows",
        &p,
        "--no-model",
        "--sample",
        "random:4",
        "--sample-seed",
        "9",
    ]);
    let c = eb(&[
        "flows",
        &p,
        "--no-model",
        "--sample",
        "random:4",
        "--sample-seed",
        "10",
    ]);
    assert_eq!(a.0, 0, "{}", a.2);
    assert_eq!(a.1, b.1);
    assert_ne!(b.1, c.1);
    assert!(a.1.contains(",random,4,"));
}

#[test]
fn bad_specs_and_write_are_refused() {
    let p = pcap();
    for bad in ["every:4", "random:1", "systematic"] {
        let (code, _, err) = eb(&["flows", &p, "--no-model", "--sample", bad]);
        assert_ne!(code, 0, "{bad}");
        assert!(err.contains("--sample"), "{err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("copy.pcap").display().to_string();
    let (code, _, err) = eb(&[
        "flows",
        &p,
        "--no-model",
        "-f",
        "null",
        "--sample",
        "systematic:8",
        "-w",
        &w,
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("-w"), "{err}");
    let (_, help, _) = eb(&["flows", "--help"]);
    assert!(help.contains("--sample <POLICY:N>") && help.contains("--sample-seed"));
    let (_, help, _) = eb(&["evaluate", "--help"]);
    assert!(help.contains("--sample <POLICY:N>"));
}
