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

/// A capture truncated by another process while `earlybird flows` reads
/// it: the run is not killed (SIGBUS), it ends with exit code 0, every flow
/// is written, and a warning names the file and the offset from which its
/// bytes vanished. The file (the sample's records repeated, an hour apart,
/// into 80 MB) is cut to half as soon as the process has mapped it.
#[test]
fn capture_truncated_while_read_warns_and_exits_0() {
    let sample = std::fs::read(sample()).unwrap();
    let mut bytes = sample[..24].to_vec();
    let mut copy = 0u32;
    while bytes.len() < 80 << 20 {
        let mut at = 24;
        while at + 16 <= sample.len() {
            let h = &sample[at..at + 16];
            let sec = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) + copy * 86_400;
            let caplen = u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize;
            bytes.extend_from_slice(&sec.to_le_bytes());
            bytes.extend_from_slice(&h[4..16]);
            bytes.extend_from_slice(&sample[at + 16..at + 16 + caplen]);
            at += 16 + caplen;
        }
        copy += 1;
    }
    let (_dir, path) = tmp("big.pcap");
    std::fs::write(&path, &bytes).unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_earlybird"))
        .args(["flows", path.to_str().unwrap(), "-f", "null"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let maps = format!("/proc/{}/maps", child.id());
    let name = path.to_str().unwrap();
    let start = std::time::Instant::now();
    while !std::fs::read_to_string(&maps).is_ok_and(|m| m.contains(name)) {
        assert!(start.elapsed().as_secs() < 60, "the file was never mapped");
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(bytes.len() as u64 / 2)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{:?} {err}", out.status);
    assert!(
        err.contains("warning: ")
            && err.contains("big.pcap: at byte offset")
            && err.contains("the file shrank while it was read"),
        "{err}"
    );
    assert!(err.contains("flows: "), "{err}");
}
