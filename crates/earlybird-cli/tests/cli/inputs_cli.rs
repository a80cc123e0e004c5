//! What `earlybird flows` reads, as a user gives it: standard input, a
//! directory of rotated pieces in shell-glob order, files named out of time
//! order, and the whole shared corpus in one run.

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::eb;

fn sample() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pcap/ndpi__iphone.pcap")
}

/// The records of a CSV output, sorted (their order follows when flows end).
fn sorted_records(csv: &str) -> Vec<String> {
    let mut v: Vec<String> = csv.lines().skip(1).map(str::to_string).collect();
    v.sort();
    v
}

/// The sample's records, with the payload labellers on: `dns_name` comes
/// from the name cache, whose turns are cut every 256 packets of the whole
/// input, wherever its files or a stream's chunks end
/// (`pipeline/files.rs`), so the other ways of reading the sample give
/// these records too.
fn file_records() -> Vec<String> {
    let (code, out, err) = eb(&["flows", "-q", "--labellers", sample().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    sorted_records(&out)
}

/// Cuts the sample into `n` classic pcap files named `cap-1` … `cap-n`.
fn rotated_pieces(dir: &Path, n: usize) -> Vec<PathBuf> {
    let bytes = std::fs::read(sample()).unwrap();
    let (hdr, mut rest) = bytes.split_at(24);
    let mut recs = Vec::new();
    while rest.len() >= 16 {
        let caplen = u32::from_le_bytes(rest[8..12].try_into().unwrap()) as usize;
        let (r, tail) = rest.split_at(16 + caplen);
        recs.push(r);
        rest = tail;
    }
    let per = recs.len().div_ceil(n);
    recs.chunks(per)
        .enumerate()
        .map(|(i, part)| {
            let p = dir.join(format!("cap-{}", i + 1));
            let mut f = std::fs::File::create(&p).unwrap();
            f.write_all(hdr).unwrap();
            for r in part {
                f.write_all(r).unwrap();
            }
            p
        })
        .collect()
}

/// `earlybird flows - OPTION` reading a pipe: the child, the pipe's
/// writing end, and the sample capture's bytes to write into it.
fn flows_on_stdin(option: &str) -> (std::process::Child, std::process::ChildStdin, Vec<u8>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_earlybird"))
        .args(["flows", "-", "--labellers", option])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    (child, stdin, std::fs::read(sample()).unwrap())
}

#[test]
fn standard_input_gives_the_file_records() {
    let (child, mut stdin, bytes) = flows_on_stdin("-q");
    let writer = std::thread::spawn(move || {
        // A slow writer, as tcpdump -U is: small pieces.
        for piece in bytes.chunks(4096) {
            stdin.write_all(piece).unwrap();
        }
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        sorted_records(&String::from_utf8_lossy(&out.stdout)),
        file_records()
    );
}

#[test]
fn rotated_pieces_in_glob_order_give_the_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut pieces = rotated_pieces(dir.path(), 12);
    // What a shell glob gives: cap-1 cap-10 cap-11 cap-12 cap-2 …
    pieces.sort();
    let mut args: Vec<&str> = vec!["flows", "--labellers"];
    args.extend(pieces.iter().map(|p| p.to_str().unwrap()));
    let (code, out, err) = eb(&args);
    assert_eq!(code, 0, "{err}");
    let whole = file_records();
    // A name the cache learnt in one piece is seen in a later one as in
    // the whole file.
    assert!(
        whole.iter().any(|r| r.contains("init.itunes.apple.com")),
        "{whole:?}"
    );
    assert_eq!(sorted_records(&out), whole);
    // Two shards: the same cuts.
    let mut two = args.clone();
    two.extend(["-s", "2"]);
    let (code, out, err2) = eb(&two);
    assert_eq!(code, 0, "{err2}");
    assert_eq!(sorted_records(&out), whole);
    assert!(err.contains("not given in time order"), "{err}");
    assert!(err.contains("inputs: 12 read, 0 skipped"), "{err}");
    assert!(!err.contains("time domain"), "{err}");

    // The directory: natural name order, no warning needed.
    let (code, out, err) = eb(&["flows", "--labellers", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(sorted_records(&out), whole);
    assert!(!err.contains("warning"), "{err}");

    // --input-order given keeps the glob order: the pieces out of order
    // are separate time domains, said so.
    args.extend(["--input-order", "given"]);
    let (code, _, err) = eb(&args);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("separate time domains"), "{err}");
}

#[test]
fn the_whole_corpus_in_one_run() {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    if !corpus.is_dir() {
        eprintln!("SKIPPED: no shared corpus at {}", corpus.display());
        return;
    }
    let (code, _, err) = eb(&["flows", "-f", "null", corpus.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("inputs: "))
        .unwrap_or_else(|| panic!("{err}"));
    // Hundreds of captures read; the ground-truth files beside them are
    // skipped by reason.
    let read: u64 = line["inputs: ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(read > 700, "{line}");
    assert!(line.contains("not_capture"), "{line}");
}

/// An output that is a capture inside an input directory is an input too:
/// refused before anything is written, the capture untouched.
#[test]
fn output_inside_an_input_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let pieces = rotated_pieces(dir.path(), 3);
    let target = dir.path().join("cap-2.pcap");
    std::fs::rename(&pieces[1], &target).unwrap();
    let before = std::fs::read(&target).unwrap();
    let (code, _, err) = eb(&[
        "flows",
        dir.path().to_str().unwrap(),
        "-w",
        target.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is the input"), "{err}");
    assert_eq!(std::fs::read(&target).unwrap(), before);
}

/// SIGINT while standard input is open and quiet (a capture tool that has
/// nothing to send): the run does not wait for the pipe, it ends with
/// exit code 130 and writes its records and summary.
#[test]
fn sigint_ends_a_run_waiting_on_a_quiet_pipe() {
    let (child, mut stdin, bytes) = flows_on_stdin("--no-progress");
    stdin.write_all(&bytes).unwrap();
    // Wait (bounded) until the process has read what was written; the
    // pipe stays open.
    let io = format!("/proc/{}/io", child.id());
    let start = std::time::Instant::now();
    loop {
        let read = std::fs::read_to_string(&io)
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("rchar: ").map(|v| v.trim().parse::<usize>()))
            })
            .and_then(Result::ok)
            .unwrap_or(0);
        if read >= bytes.len() {
            break;
        }
        assert!(start.elapsed().as_secs() < 60, "the input was never read");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: signalling a child process this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("flows: "), "{err}");
    let csv = String::from_utf8_lossy(&out.stdout);
    assert!(csv.starts_with("src,"), "the CSV header is written");
}
