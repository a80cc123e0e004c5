//! `earlybird flows` as a user meets it: bad and cut-off inputs, outputs that
//! fail, exit codes, and the records written.

mod common;

use std::path::PathBuf;

use common::eb;

fn sample() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pcap/ndpi__iphone.pcap")
}

/// A path named `name` in a fresh directory that is removed (with what the
/// test wrote there) when the returned guard is dropped.
fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::Builder::new()
        .prefix("eb-cli-")
        .tempdir()
        .unwrap();
    let p = d.path().join(name);
    (d, p)
}

#[test]
fn writes_one_csv_line_per_flow_and_labels_them() {
    let (_dir, out) = tmp("flows.csv");
    let (code, _, err) = eb(&[
        "flows",
        sample().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("flows: 56 ("), "{err}");
    let csv = std::fs::read_to_string(&out).unwrap();
    assert_eq!(csv.lines().count(), 57, "header + 56 flows");
    assert!(
        csv.lines().skip(1).any(|l| l.contains(",TLS,")),
        "the default model labels TLS flows"
    );
}

#[test]
fn cut_off_capture_is_used_up_to_the_cut_with_a_warning() {
    let bytes = std::fs::read(sample()).unwrap();
    let (_dir, cut) = tmp("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let (code, _, err) = eb(&["flows", cut.to_str().unwrap(), "-f", "null"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("warning: ") && err.contains("cut.pcap: at byte offset"),
        "{err}"
    );
    // The last 100 bytes held the end of one record and the whole next one.
    assert!(err.contains("packets: 498 read"), "{err}");
}

#[test]
fn not_a_capture_is_an_error_naming_the_file() {
    let (_dir, bad) = tmp("notes.txt");
    std::fs::write(&bad, "hello, this is not a capture file at all\n").unwrap();
    let (code, _, err) = eb(&["flows", bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("notes.txt") && err.contains("not a capture"),
        "{err}"
    );
}

#[test]
fn failing_output_exits_3_and_the_other_output_is_complete() {
    let (_dir, good) = tmp("good.jsonl");
    let (code, _, err) = eb(&[
        "flows",
        sample().to_str().unwrap(),
        "-o",
        "/dev/full",
        "-o",
        good.to_str().unwrap(),
        "-f",
        "jsonl",
    ]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("/dev/full"), "{err}");
    let lines = std::fs::read_to_string(&good).unwrap().lines().count();
    assert_eq!(lines, 56);
}
