//! `-o FILE.parquet` read by the tools operators use: pyarrow, DuckDB and
//! Polars read the Parquet written for every sample capture and a
//! generated one, and the values equal the CSV of the same run field by
//! field (`parquet_check.py`: nulls where the CSV is empty, floats within
//! the CSV's rounding). Also the file a run stopped by SIGINT leaves: whole
//! (footer written) and equal to the CSV.
//!
//! Needs python3 with pyarrow, duckdb and polars (installed by `.ci/run`):
//! missing, the tests fail under CI (`CI=true`) and say SKIPPED elsewhere.
#![cfg(feature = "parquet")]

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::eb;

const READERS: [&str; 3] = ["pyarrow", "duckdb", "polars"];

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pcap")
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cli/parquet_check.py")
}

/// True when python3 can import every reader; false (the test is skipped,
/// and says so) when it cannot outside CI; a failure under CI.
fn readers_present() -> bool {
    let ok = Command::new("python3")
        .args(["-c", &format!("import {}", READERS.join(", "))])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "python3 with {READERS:?} is needed (.ci/run installs them)"
        );
        eprintln!("SKIPPED: python3 with {READERS:?} not installed");
    }
    ok
}

/// Runs the check script on a run's CSV and Parquet; panics with its
/// message when a reader disagrees. Returns what it printed.
fn check(csv: &Path, parquet: &Path) -> String {
    let out = Command::new("python3")
        .arg(script())
        .args([csv, parquet])
        .args(READERS)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}: {}{}",
        parquet.display(),
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// One run writing both a CSV and a Parquet file; both checked equal.
/// Returns the number of rows.
fn run_both(dir: &Path, tag: &str, input: &Path, extra: &[&str]) -> usize {
    let csv = dir.join(format!("{tag}.csv"));
    let pq = dir.join(format!("{tag}.parquet"));
    let mut args = vec!["flows", input.to_str().unwrap(), "-q", "--no-progress"];
    args.extend_from_slice(extra);
    args.extend(["-o", csv.to_str().unwrap(), "-o", pq.to_str().unwrap()]);
    let (code, _, err) = eb(&args);
    assert_eq!(code, 0, "{tag}: {err}");
    let said = check(&csv, &pq);
    for r in READERS {
        assert!(said.contains(&format!("{r}: ")), "{tag}: {said}");
    }
    let rows = said
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap();
    let csv_rows = std::fs::read_to_string(&csv).unwrap().lines().count() - 1;
    assert_eq!(rows, csv_rows, "{tag}");
    rows
}

#[test]
fn readers_see_the_csv_of_every_sample_capture() {
    if !readers_present() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut captures: Vec<PathBuf> = std::fs::read_dir(testdata())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    captures.sort();
    assert!(captures.len() >= 4, "{captures:?}");
    let mut total = 0;
    for (i, cap) in captures.iter().enumerate() {
        // Defaults; then basic statistics (null columns), more early
        // packets than most flows have, and an analyzer's fields.
        total += run_both(dir.path(), &format!("full{i}"), cap, &[]);
        run_both(
            dir.path(),
            &format!("basic{i}"),
            cap,
            &["--stats", "basic", "-n", "8", "--analyzer", "payload"],
        );
    }
    assert!(total > 10, "the captures hold flows: {total}");
}

#[test]
fn readers_see_the_csv_of_a_generated_capture() {
    if !readers_present() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("realistic.pcap");
    let (code, _, err) = eb(&[
        "gen",
        "realistic",
        "-n",
        "50000",
        "-o",
        cap.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let rows = run_both(dir.path(), "gen", &cap, &["-n", "32", "-s", "2"]);
    assert!(rows > 500, "{rows} flows");
}

/// SIGINT while standard input is open: the run ends with exit code 130
/// and the Parquet file is whole (footer written) and equals the CSV.
#[test]
fn sigint_leaves_a_whole_parquet_file() {
    if !readers_present() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("cut.csv");
    let pq = dir.path().join("cut.parquet");
    let bytes = std::fs::read(testdata().join("ndpi__iphone.pcap")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_earlybird"))
        .args(["flows", "-", "-q", "--no-progress", "-o"])
        .args([&csv, Path::new("-o"), &pq])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // What the process reads besides its input (models, maps, the Public
    // Suffix List) is read before it waits on the pipe: wait (bounded)
    // until one of its threads sleeps in a pipe read, and count from there.
    let pid = child.id();
    let io = format!("/proc/{pid}/io");
    let rchar = || {
        std::fs::read_to_string(&io)
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("rchar: ").map(|v| v.trim().parse::<usize>()))
            })
            .and_then(Result::ok)
            .unwrap_or(0)
    };
    let in_pipe_read = || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|t| {
                std::fs::read_to_string(t.path().join("wchan"))
                    .is_ok_and(|w| w.contains("pipe_read"))
            })
    };
    let start = Instant::now();
    while !in_pipe_read() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the process never waited on its input");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let before = rchar();
    stdin.write_all(&bytes).unwrap();
    // Wait (bounded) until the process has read what was written; the
    // pipe stays open.
    let start = Instant::now();
    loop {
        if rchar() >= before + bytes.len() {
            break;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the input was never read");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: signalling a child process this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    let said = check(&csv, &pq);
    let rows = std::fs::read_to_string(&csv).unwrap().lines().count() - 1;
    assert!(rows > 0, "the open flows were written");
    assert!(said.contains(&format!("pyarrow: {rows} rows")), "{said}");
}

#[test]
fn parquet_names_and_formats() {
    let dir = tempfile::tempdir().unwrap();
    let cap = testdata().join("ndpi__iphone.pcap");
    let cap = cap.to_str().unwrap();
    // -f parquet agrees with the name; -f csv contradicts it.
    let pq = dir.path().join("x.parquet");
    let (code, _, err) = eb(&["flows", cap, "-q", "-f", "csv", "-o", pq.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("the name says parquet but -f says csv"),
        "{err}"
    );
    assert!(!pq.exists());
    let (code, _, err) = eb(&[
        "flows",
        cap,
        "-q",
        "-f",
        "parquet",
        "-o",
        pq.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let data = std::fs::read(&pq).unwrap();
    assert!(
        data.starts_with(b"PAR1") && data.ends_with(b"PAR1"),
        "magic"
    );
    // To standard output with -f parquet: the same file.
    let out = Command::new(env!("CARGO_BIN_EXE_earlybird"))
        .args(["flows", cap, "-q", "-f", "parquet"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.starts_with(b"PAR1") && out.stdout.ends_with(b"PAR1"));
    assert_eq!(out.stdout.len(), data.len());
    // A failing output names the file (exit 3): /dev/full refuses writes.
    let (code, _, err) = eb(&["flows", cap, "-q", "-f", "parquet", "-o", "/dev/full"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("parquet:/dev/full"), "{err}");
}

/// The rows of each row group of a Parquet file, as pyarrow reports them.
fn row_groups(path: &Path) -> Vec<usize> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys, pyarrow.parquet as pq\n\
             m = pq.ParquetFile(sys.argv[1]).metadata\n\
             print(' '.join(str(m.row_group(i).num_rows) for i in range(m.num_row_groups)))",
        ])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect()
}

/// `want` rows in groups of `size`, the last one holding the rest.
fn groups_of(want: usize, size: usize) -> Vec<usize> {
    let mut v = vec![size; want / size];
    if !want.is_multiple_of(size) {
        v.push(want % size);
    }
    v
}

#[test]
fn parquet_row_group_sets_the_rows_of_every_row_group() {
    if !readers_present() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("realistic.pcap");
    // 10 Mbit/s: some 25 seconds of packet time.
    let (code, _, err) = eb(&[
        "gen",
        "realistic",
        "-n",
        "20000",
        "--gbps",
        "0.01",
        "-o",
        cap.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    // Flow records, with the CSV of the same run; the per-second
    // statistics too.
    let rows = run_both(dir.path(), "g", &cap, &["--parquet-row-group", "37"]);
    assert!(rows > 5 * 37, "{rows} flows");
    assert_eq!(
        row_groups(&dir.path().join("g.parquet")),
        groups_of(rows, 37)
    );
    let stats = dir.path().join("stats.parquet");
    let (code, _, err) = eb(&[
        "flows",
        cap.to_str().unwrap(),
        "-q",
        "-f",
        "null",
        "--parquet-row-group",
        "3",
        "--stats-out",
        stats.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let seconds: usize = row_groups(&stats).iter().sum();
    assert!(seconds > 3, "{seconds} seconds");
    assert_eq!(row_groups(&stats), groups_of(seconds, 3));
    // Without the option: one group of the default 65,536 rows at most.
    let (code, _, err) = eb(&[
        "flows",
        cap.to_str().unwrap(),
        "-q",
        "-o",
        dir.path().join("d.parquet").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(row_groups(&dir.path().join("d.parquet")), [rows]);
    // Zero rows is a usage error.
    let (code, _, err) = eb(&["flows", cap.to_str().unwrap(), "--parquet-row-group", "0"]);
    assert_eq!(code, 2, "{err}");
}
