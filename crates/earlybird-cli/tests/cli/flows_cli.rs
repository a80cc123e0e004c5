//! `earlybird flows` as a user meets it: bad and cut-off inputs, outputs that
//! fail, exit codes, and the records written.

use crate::common;

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

/// A copy of the sample capture in a fresh directory.
fn sample_copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    let (dir, p) = tmp(name);
    std::fs::copy(sample(), &p).unwrap();
    (dir, p)
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_kept() {
    let (dir, input) = sample_copy("x.pcap");
    let original = std::fs::read(&input).unwrap();
    let hard = dir.path().join("hard.csv");
    std::fs::hard_link(&input, &hard).unwrap();
    let soft = dir.path().join("soft.jsonl");
    std::os::unix::fs::symlink(&input, &soft).unwrap();
    let map = dir.path().join("map.toml");
    std::fs::write(&map, "default = 0\n").unwrap();
    let i = input.to_str().unwrap();
    for args in [
        vec!["-o", i],
        vec!["-w", i],
        vec!["-o", hard.to_str().unwrap()],
        vec!["-o", soft.to_str().unwrap()],
    ] {
        let mut all = vec!["flows", i, "--no-progress"];
        all.extend(&args);
        let (code, _, err) = eb(&all);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.contains(&format!("output {}: is the input {i}", args[1])),
            "{args:?}: {err}"
        );
        assert_eq!(std::fs::read(&input).unwrap(), original, "{args:?}");
    }
    // The mark map is an input too.
    let out_pcap = dir.path().join("map.pcap");
    std::fs::hard_link(&map, &out_pcap).unwrap();
    let (code, _, err) = eb(&[
        "flows",
        i,
        "--mark",
        map.to_str().unwrap(),
        "-w",
        out_pcap.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("is the input") && err.contains("map.toml"),
        "{err}"
    );
    // Appending standard output to the input is refused as well.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_earlybird"))
        .args(["flows", i, "-q"])
        .stdout(
            std::fs::OpenOptions::new()
                .append(true)
                .open(&input)
                .unwrap(),
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("(standard output) is the input"), "{err}");
    assert_eq!(std::fs::read(&input).unwrap(), original);
}

#[test]
fn output_names_that_do_not_say_their_format_are_usage_errors() {
    let (dir, _) = tmp("unused");
    for (out, format, want) in [
        (
            "x.xlsx",
            None,
            "unknown extension .xlsx (known: .csv, .jsonl or .ndjson",
        ),
        ("x.json", None, "name the file .jsonl or .ndjson"),
        (
            "x.csv",
            Some("jsonl"),
            "the name says csv but -f says jsonl",
        ),
        ("flows", None, "no extension to tell the record format"),
        ("x.csv", Some("null"), "-f null discards the records"),
    ] {
        let path = dir.path().join(out);
        let mut args: Vec<String> = vec!["flows".into(), sample().to_str().unwrap().into()];
        args.extend(["-o".to_owned(), path.to_str().unwrap().to_owned()]);
        if let Some(f) = format {
            args.extend(["-f".to_owned(), f.to_owned()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, err) = eb(&args);
        assert_eq!(code, 2, "{out}: {err}");
        assert!(err.contains(want), "{out}: {err}");
        assert!(!path.exists(), "{out} was created");
    }
    // With -f, a name without an extension is fine; so is a device.
    let plain = dir.path().join("flows");
    let (code, _, err) = eb(&[
        "flows",
        sample().to_str().unwrap(),
        "-q",
        "-f",
        "jsonl",
        "-o",
        plain.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read_to_string(&plain).unwrap().starts_with('{'));
    let (code, _, err) = eb(&["flows", sample().to_str().unwrap(), "-q", "-o", "/dev/null"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn directories_and_missing_directories_are_refused_before_any_work() {
    let (dir, _) = tmp("unused");
    let missing = dir.path().join("no/such/out.csv");
    let as_dir = dir.path().join("out.csv");
    std::fs::create_dir(&as_dir).unwrap();
    for (out, want) in [(&missing, "does not exist"), (&as_dir, "is a directory")] {
        let (code, _, err) = eb(&[
            "flows",
            sample().to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains(&format!("output {}", out.display())) && err.contains(want),
            "{err}"
        );
        assert!(!err.contains("packets:"), "refused before the run: {err}");
    }
    let a = dir.path().join("a.csv");
    let (code, _, err) = eb(&[
        "flows",
        sample().to_str().unwrap(),
        "-o",
        a.to_str().unwrap(),
        "-o",
        dir.path().join("./a.csv").to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("names the same file"), "{err}");
}

#[test]
fn a_closed_pipe_ends_standard_output_quietly_and_the_files_complete() {
    let (dir, big) = tmp("worst.pcap");
    let (code, _, err) = eb(&["gen", "worst", "-n", "100000", "-o", big.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let all = dir.path().join("all.csv");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_earlybird"))
        .args([
            "flows",
            big.to_str().unwrap(),
            "--no-progress",
            "-o",
            "-",
            "-o",
        ])
        .arg(&all)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::BufRead;
        let mut first = String::new();
        let mut r = std::io::BufReader::new(child.stdout.take().unwrap());
        r.read_line(&mut first).unwrap();
        assert!(first.starts_with("src,dst,"), "{first}");
        // The reader goes away, as `head -1` does.
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("error"), "{err}");
    assert!(err.contains("csv:stdout: closed by its reader"), "{err}");
    // 100,000 packets of 5 each: 20,000 flows, every one in the file.
    let lines = std::fs::read_to_string(&all).unwrap().lines().count();
    assert_eq!(lines, 20_001);
}

#[test]
fn write_without_mark_is_a_copy_of_the_packets_read() {
    use earlybird::CaptureFile;
    let packets = |f: &CaptureFile| {
        let (mut r, mut all, mut batch) = (f.reader(), Vec::new(), Vec::new());
        while r.next_batch(&mut batch, 256) > 0 {
            for p in &batch {
                all.push((p.ts, p.orig_len, p.bytes(f.bytes()).to_vec()));
            }
        }
        all
    };
    let (_dir, out) = tmp("copy.pcap");
    for shards in ["1", "2"] {
        let (code, _, err) = eb(&[
            "flows",
            sample().to_str().unwrap(),
            "-s",
            shards,
            "-f",
            "null",
            "-w",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(err.contains("pcap written: 500 packets"), "{err}");
        let want = packets(&CaptureFile::open(&sample()).unwrap());
        let got = packets(&CaptureFile::open(&out).unwrap());
        assert!(got == want, "{shards} shards: the copy differs");
    }
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

#[test]
fn an_analyzer_adds_its_fields_to_csv_and_json_lines() {
    let (_dir, csv_out) = tmp("flows.csv");
    let json_out = csv_out.with_extension("jsonl");
    let (code, _, err) = eb(&[
        "flows",
        sample().to_str().unwrap(),
        "--no-labellers",
        "--analyzer",
        "payload",
        "-o",
        csv_out.to_str().unwrap(),
        "-o",
        json_out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let csv = std::fs::read_to_string(&csv_out).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(
        header.ends_with(
            ",pkt4_iat_us,fwd_payload_packets,bwd_payload_packets,fwd_payload_bytes,\
             bwd_payload_bytes,fwd_first_payload,bwd_first_payload,\
             category,label_source,stat_app,stat_confidence,model_id"
        ),
        "{header}"
    );
    let width = header.split(',').count();
    assert!(csv.lines().all(|l| l.split(',').count() == width));
    // TLS flows: the client's first payload is a TLS handshake record.
    let json = std::fs::read_to_string(&json_out).unwrap();
    assert!(
        json.lines()
            .any(|l| l.contains("\"fwd_first_payload\":\"160301")),
        "no TLS client hello"
    );
    let (code, _, err) = eb(&["flows", sample().to_str().unwrap(), "--analyzer", "nope"]);
    assert_eq!(code, 1);
    assert!(
        // (`ndpi` follows when the build has the feature.)
        err.contains("unknown analyzer \"nope\" (known: payload, media"),
        "{err}"
    );
}

#[test]
fn early_verdict_events_go_to_their_own_output() {
    let (dir, out) = tmp("flows.csv");
    let events = dir.path().join("events.jsonl");
    let (code, _, err) = eb(&[
        "flows",
        sample().to_str().unwrap(),
        "-q",
        "-o",
        out.to_str().unwrap(),
        "--events",
        events.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let csv = std::fs::read_to_string(&out).unwrap();
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let at = head.iter().position(|h| *h == "decided_at_packet").unwrap();
    let decided = csv
        .lines()
        .skip(1)
        .filter(|l| l.split(',').nth(at) != Some("0"))
        .count();
    let ev = std::fs::read_to_string(&events).unwrap();
    assert!(decided > 40, "{decided} flows decided");
    assert_eq!(ev.lines().count(), decided, "one event per decided flow");
    assert!(ev.lines().all(|l| l.starts_with("{\"src\":")), "{ev}");
    // Without a model there is nothing to send: a usage error.
    let (code, _, err) = eb(&[
        "flows",
        sample().to_str().unwrap(),
        "--no-model",
        "-f",
        "null",
        "--events",
        events.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    // The events' name says their format as -o's does.
    let (code, _, err) = eb(&[
        "flows",
        sample().to_str().unwrap(),
        "-f",
        "null",
        "--events",
        dir.path().join("e.json").to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("JSON lines"), "{err}");
}
