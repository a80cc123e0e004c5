//! `earlybird flows --dump-dir` as a user runs it: the dump files, read
//! back by an independent pcap reader (the `pcap-parser` crate), hold
//! exactly the input packets (all of them, or those of the flows the
//! filters select), rotation splits them without loss or repetition, and
//! a full disk (a tiny tmpfs, as root) is counted and reported while the
//! flow records stay complete. A nanosecond pcap input, whose records
//! the dumper of one shard copies file to file in the kernel, gives the
//! same files byte for byte, and the same counts when the disk fills.
//! `--dump-format pcapng` files hold the
//! same packets, read back by earlybird's reader and by tshark (which
//! must be installed: `.ci/run` does; without it that test says SKIPPED,
//! and fails under CI).

use crate::lib_common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One packet: timestamp (ns), original length, captured bytes.
type Packet = (u64, u32, Vec<u8>);

/// The packets of a capture as earlybird's reader yields them.
fn input_packets(path: &Path) -> Vec<Packet> {
    let file = earlybird::CaptureFile::open(path).unwrap();
    let mut r = file.reader();
    let mut batch = Vec::new();
    let mut all = Vec::new();
    while r.next_batch(&mut batch, earlybird::BATCH) > 0 {
        for p in &batch {
            all.push((p.ts, p.orig_len, p.bytes(r.data()).to_vec()));
        }
    }
    all
}

/// A dump file read with pcap-parser: nanosecond classic pcap, every byte
/// used.
fn read_dump(path: &Path) -> Vec<Packet> {
    let bytes = std::fs::read(path).unwrap();
    let (rest, cap) = pcap_parser::pcap::parse_pcap(&bytes)
        .unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
    assert!(
        rest.is_empty(),
        "{}: {} bytes left",
        path.display(),
        rest.len()
    );
    assert!(cap.header.is_nanosecond_precision(), "{}", path.display());
    cap.blocks
        .iter()
        .map(|b| {
            assert_eq!(b.caplen as usize, b.data.len());
            (
                b.ts_sec as u64 * 1_000_000_000 + b.ts_usec as u64,
                b.origlen,
                b.data.to_vec(),
            )
        })
        .collect()
}

/// The dump files of `dir` with their shard and sequence numbers (parsed
/// from `eb-SECONDS.NANOS-sKK-QQQQQQ.pcap`), sorted by shard, sequence.
fn dump_files(dir: &Path) -> Vec<(usize, u64, PathBuf)> {
    let mut v: Vec<(usize, u64, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_str().unwrap().to_string();
            let parts: Vec<&str> = name.trim_end_matches(".pcap").split('-').collect();
            assert_eq!(parts.len(), 4, "{name}");
            assert_eq!(parts[0], "eb");
            let (s, n) = parts[1].split_once('.').unwrap();
            assert_eq!((s.len(), n.len()), (10, 9), "{name}");
            let shard = parts[2].trim_start_matches('s').parse().unwrap();
            (shard, parts[3].parse().unwrap(), p)
        })
        .collect();
    v.sort();
    v
}

/// Every packet dumped into `dir`, per shard in file order.
fn dumped(dir: &Path) -> HashMap<usize, Vec<Packet>> {
    let mut by_shard: HashMap<usize, Vec<Packet>> = HashMap::new();
    for (shard, _, p) in dump_files(dir) {
        by_shard.entry(shard).or_default().extend(read_dump(&p));
    }
    by_shard
}

fn run(args: &[&str], input: &[&Path]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_earlybird"))
        .arg("flows")
        .args(args)
        .args(input)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `input` rewritten as a nanosecond classic pcap at `out` (records the
/// one-shard dumper copies as they are); returns `out`.
fn nanosecond_copy(input: &Path, out: &Path) -> PathBuf {
    let mut bytes = Vec::new();
    for v in [0xa1b2_3c4du32, 0x0004_0002, 0, 0, 262_144, 1] {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    for (ts, orig, data) in input_packets(input) {
        let secs = (ts / 1_000_000_000) as u32;
        let nanos = (ts % 1_000_000_000) as u32;
        for v in [secs, nanos, data.len() as u32, orig] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        bytes.extend_from_slice(&data);
    }
    std::fs::write(out, bytes).unwrap();
    out.to_path_buf()
}

/// Every file of `dir` by name, with its bytes.
fn file_bytes(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    dump_files(dir)
        .into_iter()
        .map(|(_, _, p)| {
            let b = std::fs::read(&p).unwrap();
            (PathBuf::from(p.file_name().unwrap()), b)
        })
        .collect()
}

/// Whether `part` is a subsequence of `whole`.
fn subsequence(part: &[Packet], whole: &[Packet]) -> bool {
    let mut it = whole.iter();
    part.iter().all(|p| it.any(|w| w == p))
}

fn sorted(mut v: Vec<Packet>) -> Vec<Packet> {
    v.sort();
    v
}

#[test]
fn every_packet_of_the_sample_captures_is_dumped_once_in_order() {
    let mut inputs = lib_common::captures(&lib_common::testdata().join("pcap"));
    if let Some(c) = lib_common::corpus() {
        inputs.extend(lib_common::captures(&c.join("classify/dev/ndpi/pcap")));
    }
    let mut total = 0;
    for input in &inputs {
        let want = input_packets(input);
        let mut one_shard = Vec::new();
        for (shards, direct) in [("1", false), ("2", false), ("1", true)] {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path().join("dump");
            let mut args = vec!["--no-model", "-q", "-f", "null", "-s", shards];
            if direct {
                args.push("--dump-direct");
            }
            args.push("--dump-dir");
            let (code, err) = run(&args, &[&d, input]);
            assert_eq!(code, 0, "{}: {err}", input.display());
            if direct {
                // Past the page cache, the same files byte for byte.
                assert!(
                    file_bytes(&d) == one_shard,
                    "{}: --dump-direct",
                    input.display()
                );
                continue;
            }
            let got = dumped(&d);
            if shards == "1" {
                one_shard = file_bytes(&d);
                let one = got.get(&0).cloned().unwrap_or_default();
                assert!(
                    one == want,
                    "{}: {} packets dumped, {} read",
                    input.display(),
                    one.len(),
                    want.len()
                );
            } else {
                // Each shard's packets in input order; together, every
                // packet once.
                for part in got.values() {
                    assert!(subsequence(part, &want), "{}", input.display());
                }
                let all: Vec<Packet> = got.into_values().flatten().collect();
                assert!(
                    sorted(all) == sorted(want.clone()),
                    "{}: two shards",
                    input.display()
                );
            }
        }
        total += want.len();
    }
    assert!(total > 1000, "{total} packets");
}

/// A capture of the shared corpus (`None`, and says so, without it).
fn corpus_file(name: &str) -> Option<PathBuf> {
    let p = lib_common::corpus()?
        .join("classify/dev/ndpi/pcap")
        .join(name);
    assert!(p.is_file(), "{}", p.display());
    Some(p)
}

/// (header, rows) of a CSV file.
fn csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = lib_common::split_csv(lines.next().unwrap());
    (header, lines.map(lib_common::split_csv).collect())
}

fn col(header: &[String], name: &str) -> usize {
    header.iter().position(|h| h == name).unwrap()
}

#[test]
fn rotation_by_time_and_size_loses_and_repeats_nothing() {
    let input = lib_common::testdata().join("pcap/ndpi__iphone.pcap");
    let want = input_packets(&input);
    let second = 1_000_000_000u64;
    // By time: one file per 2-second period that has packets.
    let mut periods: Vec<u64> = want.iter().map(|p| p.0 / (2 * second)).collect();
    periods.dedup();
    assert!(
        periods.windows(2).all(|w| w[0] < w[1]),
        "capture in time order"
    );
    // By size (64 KiB): files filled greedily, never past the bound.
    let bound = 65_536u64;
    let mut by_size = 1;
    let mut size = 24u64;
    for p in &want {
        let need = 16 + p.2.len() as u64;
        if size + need > bound && size > 24 {
            by_size += 1;
            size = 24;
        }
        size += need;
    }
    assert!(by_size > 3 && periods.len() > 3);
    let dir = tempfile::tempdir().unwrap();
    let nanos = nanosecond_copy(&input, &dir.path().join("ns.pcap"));
    for (k, (args, expected, input)) in [
        (vec!["--dump-seconds", "2"], periods.len(), &input),
        (vec!["--dump-max-mib", "0.0625"], by_size, &input),
        (vec!["--dump-seconds", "2"], periods.len(), &nanos),
        (vec!["--dump-max-mib", "0.0625"], by_size, &nanos),
        (
            vec!["--dump-seconds", "2", "--dump-direct"],
            periods.len(),
            &input,
        ),
        (
            vec!["--dump-max-mib", "0.0625", "--dump-direct"],
            by_size,
            &nanos,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let d = dir.path().join(format!("dump{k}"));
        let mut all = vec!["--no-model", "-q", "-f", "null", "--dump-dir"];
        all.push(d.to_str().unwrap());
        all.extend(args.iter().copied());
        let (code, err) = run(&all, &[input]);
        assert_eq!(code, 0, "{err}");
        let files = dump_files(&d);
        assert_eq!(files.len(), expected, "{args:?}");
        let mut got = Vec::new();
        let mut names: Vec<String> = Vec::new();
        for (_, _, p) in &files {
            let pkts = read_dump(p);
            assert!(!pkts.is_empty());
            if args[0] == "--dump-seconds" {
                let first = pkts[0].0 / (2 * second);
                assert!(pkts.iter().all(|q| q.0 / (2 * second) == first));
            } else {
                assert!(std::fs::metadata(p).unwrap().len() <= bound);
            }
            got.extend(pkts);
            names.push(p.file_name().unwrap().to_str().unwrap().into());
        }
        assert!(got == want, "{args:?}: {} of {}", got.len(), want.len());
        // Names sort by time: the sequence order is the name order.
        let mut by_name = names.clone();
        by_name.sort();
        assert_eq!(by_name, names);
        if k >= 2 {
            // The records copied from the nanosecond input make the same
            // files as those the dumper wrote from the microsecond one;
            // written past the page cache, the same files again.
            let before = file_bytes(&dir.path().join(format!("dump{}", k - 2)));
            assert!(file_bytes(&d) == before, "{args:?}: files differ");
        }
    }
}

#[test]
fn port_filter_dumps_exactly_the_packets_of_the_flows_on_that_port() {
    let Some(input) = corpus_file("teams.pcap") else {
        return;
    };
    let want = input_packets(&input);
    for shards in ["1", "2"] {
        let dir = tempfile::tempdir().unwrap();
        let (d, out) = (dir.path().join("dump"), dir.path().join("f.csv"));
        let (code, err) = run(
            &["--no-model", "-q", "-s", shards, "--dump-port", "443", "-o"],
            &[&out, Path::new("--dump-dir"), &d, &input],
        );
        assert_eq!(code, 0, "{err}");
        let (h, rows) = csv(&out);
        let (sp, dp, fp, bp) = (
            col(&h, "sport"),
            col(&h, "dport"),
            col(&h, "fwd_packets"),
            col(&h, "bwd_packets"),
        );
        let on_443: u64 = rows
            .iter()
            .filter(|r| r[sp] == "443" || r[dp] == "443")
            .map(|r| r[fp].parse::<u64>().unwrap() + r[bp].parse::<u64>().unwrap())
            .sum();
        let got: Vec<Packet> = dumped(&d).into_values().flatten().collect();
        assert!(on_443 > 100 && (on_443 as usize) < want.len());
        assert_eq!(got.len() as u64, on_443, "{shards} shards");
        let mut rest = sorted(want.clone());
        for p in sorted(got) {
            let i = rest
                .binary_search(&p)
                .expect("a dumped packet is an input packet");
            rest.remove(i);
        }
    }
}

#[test]
fn app_filter_dumps_the_packets_after_the_verdict_of_flows_with_that_app() {
    let Some(input) = corpus_file("teams.pcap") else {
        return;
    };
    // The app most flows of the capture get from the default model.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("all.csv");
    let (code, err) = run(&["-q", "-o"], &[&out, &input]);
    assert_eq!(code, 0, "{err}");
    let (h, rows) = csv(&out);
    // (--dump-app names a class of the model: its verdict is `stat_app`,
    // beside the payload label in `app`.)
    let (app, at, fp, bp) = (
        col(&h, "stat_app"),
        col(&h, "decided_at_packet"),
        col(&h, "fwd_packets"),
        col(&h, "bwd_packets"),
    );
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for r in rows.iter().filter(|r| r[app] != "unknown") {
        *counts.entry(&r[app]).or_default() += 1;
    }
    let (name, _) = counts
        .iter()
        .max_by_key(|(n, c)| (**c, *n))
        .expect("some flow is labelled");
    let after: u64 = rows
        .iter()
        .filter(|r| r[app] == *name)
        .map(|r| {
            let n = r[fp].parse::<u64>().unwrap() + r[bp].parse::<u64>().unwrap();
            n - r[at].parse::<u64>().unwrap()
        })
        .sum();
    let want = input_packets(&input);
    for shards in ["1", "2"] {
        let d = dir.path().join(format!("dump{shards}"));
        let (code, err) = run(
            &[
                "-q",
                "-f",
                "null",
                "-s",
                shards,
                "--dump-app",
                name,
                "--dump-hold-mib",
                "0",
            ],
            &[Path::new("--dump-dir"), &d, &input],
        );
        assert_eq!(code, 0, "{err}");
        let got: Vec<Packet> = dumped(&d).into_values().flatten().collect();
        assert!(after > 0);
        assert_eq!(got.len() as u64, after, "{name}, {shards} shards");
        for part in dumped(&d).values() {
            assert!(subsequence(part, &want));
        }
    }
    let (code, err) = run(
        &["-q", "-f", "null", "--dump-app", "NoSuchApp"],
        &[Path::new("--dump-dir"), &dir.path().join("x"), &input],
    );
    assert_ne!(code, 0);
    assert!(
        err.contains("NoSuchApp") && err.contains("available classes"),
        "{err}"
    );
}

/// The count on the summary line of packets held until their verdict:
/// (dumped, dropped, not held).
fn held_line(err: &str) -> (u64, u64, u64) {
    let line = err
        .lines()
        .find(|l| l.starts_with("packets held until their flow's verdict:"))
        .unwrap_or_else(|| panic!("no held line in {err}"));
    let n: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    (n[0], n[1], n[2])
}

#[test]
fn app_filter_holds_the_packets_before_the_verdict_and_dumps_whole_flows() {
    let Some(input) = corpus_file("teams.pcap") else {
        return;
    };
    // A model that decides at the 4th packet (trained on this capture's
    // nDPI labels: the dumper is under test here, not the model).
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.ebm");
    let truth = input.parent().unwrap().join("../../ndpi_truth.csv");
    let out = Command::new(env!("CARGO_BIN_EXE_earlybird"))
        .args([
            "train",
            "--algo",
            "c45",
            "--use-ports",
            "-n",
            "4",
            "--labels",
        ])
        .args([&truth, Path::new("-o"), &model, &input])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let m = model.to_str().unwrap();
    let out = dir.path().join("all.csv");
    let (code, err) = run(&["-q", "--model", m, "-o"], &[&out, &input]);
    assert_eq!(code, 0, "{err}");
    let (h, rows) = csv(&out);
    // (--dump-app names a class of the model: its verdict is `stat_app`,
    // beside the payload label in `app`.)
    let (app, at, fp, bp) = (
        col(&h, "stat_app"),
        col(&h, "decided_at_packet"),
        col(&h, "fwd_packets"),
        col(&h, "bwd_packets"),
    );
    let packets = |r: &Vec<String>| r[fp].parse::<u64>().unwrap() + r[bp].parse::<u64>().unwrap();
    // Two apps: the one of most flows, and the one of the fewest.
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for r in rows.iter().filter(|r| r[app] != "unknown") {
        *counts.entry(&r[app]).or_default() += 1;
    }
    let mut by_count: Vec<(&str, usize)> = counts.into_iter().collect();
    by_count.sort_by_key(|&(n, c)| (std::cmp::Reverse(c), n));
    let names = [by_count[0].0, by_count[by_count.len() - 1].0];
    let chosen = |r: &&Vec<String>| names.contains(&r[app].as_str());
    let whole: u64 = rows.iter().filter(chosen).map(packets).sum();
    let after: u64 = rows
        .iter()
        .filter(chosen)
        .map(|r| packets(r) - r[at].parse::<u64>().unwrap())
        .sum();
    // Flows of other apps that were held: every packet up to the verdict.
    let others: u64 = rows
        .iter()
        .filter(|r| !chosen(r) && r[app] != "unknown")
        .map(|r| r[at].parse::<u64>().unwrap().min(packets(r)))
        .sum();
    assert!(whole > after && after > 0);
    let want = sorted(input_packets(&input));
    let list = names.join(",");
    for shards in ["1", "2"] {
        let d = dir.path().join(format!("dump{shards}"));
        let (code, err) = run(
            &[
                "-f",
                "null",
                "--model",
                m,
                "-s",
                shards,
                "--dump-app",
                &list,
            ],
            &[Path::new("--dump-dir"), &d, &input],
        );
        assert_eq!(code, 0, "{err}");
        let got: Vec<Packet> = dumped(&d).into_values().flatten().collect();
        assert_eq!(
            got.len() as u64,
            whole,
            "{list}, {shards} shards: whole flows"
        );
        let mut rest = want.clone();
        for p in sorted(got) {
            let i = rest
                .binary_search(&p)
                .expect("a dumped packet is an input packet");
            rest.remove(i);
        }
        // Held and written: the packets before each flow's verdict (the
        // packet that decides it is written at once, unless the flow was
        // decided at its end).
        let (written, dropped, not_held) = held_line(&err);
        assert_eq!(not_held, 0, "{err}");
        assert!(written > 0 && written <= whole - after, "{err}");
        assert!(dropped > 0 && dropped <= others, "{err}");

        // A store of 4 KiB: some packets are not held, and counted.
        let small = dir.path().join(format!("small{shards}"));
        let (code, err) = run(
            &[
                "-f",
                "null",
                "--model",
                m,
                "-s",
                shards,
                "--dump-app",
                &list,
                "--dump-hold-mib",
                "0.004",
            ],
            &[Path::new("--dump-dir"), &small, &input],
        );
        assert_eq!(code, 0, "{err}");
        let got = dumped(&small).into_values().flatten().count() as u64;
        let (written, _, not_held) = held_line(&err);
        assert!(not_held > 0 && written < whole - after, "{err}");
        assert!(got >= after + written && got < whole, "{err}");
        assert!(got + not_held >= whole, "{err}");
    }
}

/// A tmpfs mounted for the test, unmounted (and its mount point removed)
/// on drop.
pub(crate) struct TinyFs(pub(crate) PathBuf);

impl TinyFs {
    /// Mounts `size` of tmpfs at a new directory; `None` (skipped, and
    /// says so) when not root outside CI; fails under CI.
    pub(crate) fn mount(size: &str) -> Option<(tempfile::TempDir, TinyFs)> {
        // SAFETY: plain libc call.
        if unsafe { libc::geteuid() } != 0 {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "the disk-full test needs root (mount) under CI"
            );
            eprintln!("SKIPPED: the disk-full test needs root to mount a tmpfs");
            return None;
        }
        let base = tempfile::tempdir().unwrap();
        let at = base.path().join("tiny");
        std::fs::create_dir(&at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&at)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount -t tmpfs at {}", at.display());
        Some((base, TinyFs(at)))
    }
}

impl Drop for TinyFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_is_counted_and_reported_and_the_flows_go_on() {
    let Some(input) = corpus_file("reddit.pcap") else {
        return;
    };
    let want = input_packets(&input);
    let bytes: u64 = want.iter().map(|p| 16 + p.2.len() as u64).sum();
    assert!(bytes > 512 << 10, "the capture must not fit in 256 KiB");
    let Some((base, fs)) = TinyFs::mount("256k") else {
        return;
    };
    let nanos = nanosecond_copy(&input, &base.path().join("ns.pcap"));
    // Small files, so several are written before the disk is full; and
    // the same written past the page cache (tmpfs takes O_DIRECT from
    // Linux 6.6).
    for extra in [&[][..], &["--dump-direct"][..]] {
        for input in [&input, &nanos] {
            let mut args = vec!["--dump-max-mib", "0.05"];
            args.extend(extra);
            full_disk_run(input, &want, base.path(), &fs.0, &args);
            for e in std::fs::read_dir(&fs.0).unwrap() {
                std::fs::remove_file(e.unwrap().path()).unwrap();
            }
        }
    }
    drop(fs);
}

/// Past the page cache, the disk fills in the middle of a file larger
/// than the dumper's buffer: the file keeps its whole records, and the
/// packets counted dumped are exactly those it holds.
#[test]
fn a_disk_filled_by_direct_writes_keeps_whole_records_and_counts_the_rest() {
    let Some((base, fs)) = TinyFs::mount("10m") else {
        return;
    };
    // 200,000 records of 76 bytes: 15 MB, three and more of the
    // dumper's 4 MiB writes.
    let input = base.path().join("worst.pcap");
    let out = Command::new(env!("CARGO_BIN_EXE_earlybird"))
        .args(["gen", "worst", "-n", "200000", "-o"])
        .arg(&input)
        .output()
        .unwrap();
    assert!(out.status.success());
    let want = input_packets(&input);
    full_disk_run(&input, &want, base.path(), &fs.0, &["--dump-direct"]);
    let files = dump_files(&fs.0);
    assert_eq!(files.len(), 1, "one file, cut back: {files:?}");
    let len = std::fs::metadata(&files[0].2).unwrap().len();
    assert!(len > 4 << 20, "the file kept {len} bytes");
    drop(fs);
}

/// One run of [`a_full_disk_is_counted_and_reported_and_the_flows_go_on`]
/// into the tiny file system `tiny` with the dump options `dump`, scratch
/// files in `base`.
fn full_disk_run(input: &Path, want: &[Packet], base: &Path, tiny: &Path, dump: &[&str]) {
    let (full, clean) = (base.join("full.csv"), base.join("clean.csv"));
    let (code, _) = run(&["--no-model", "-q", "-o"], &[&clean, input]);
    assert_eq!(code, 0);
    let mut args = vec![full.as_path(), Path::new("--dump-dir"), tiny];
    args.extend(dump.iter().map(Path::new));
    args.push(input);
    let (code, err) = run(&["--no-model", "-o"], &args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read_to_string(&full).unwrap(),
        std::fs::read_to_string(&clean).unwrap(),
        "flow records complete"
    );
    assert!(
        err.contains("dump error: ") && err.contains("No space left"),
        "{err}"
    );
    let line = err
        .lines()
        .find(|l| l.starts_with("packets dumped: "))
        .unwrap_or_else(|| panic!("{err}"));
    let num = |after: &str| -> u64 {
        let i = line.find(after).unwrap() + after.len();
        line[i..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (written, lost) = (num("packets dumped: "), num("), "));
    assert!(written > 0 && lost > 0, "{line}");
    assert_eq!(written + lost, want.len() as u64, "{line}");
    // What is on disk is whole files of the first packets, in order.
    let on_disk: Vec<Packet> = dumped(tiny).remove(&0).unwrap_or_default();
    assert_eq!(on_disk.len() as u64, written);
    assert!(on_disk[..] == want[..on_disk.len()]);
    // -q: the failure is still said on stderr.
    let (code, err) = run(
        &["--no-model", "-q", "-f", "null", "--dump-dir"],
        &[tiny, input],
    );
    assert_eq!(code, 0);
    assert!(err.contains("earlybird: dump error: "), "{err}");
}

/// A live capture (two shards in a fanout group, a veth pair in network
/// namespaces, as root) dumps every packet replayed into it, once: the
/// dump files together hold the capture's packets (their first 256 bytes,
/// the live snaplen), stamped by the kernel.
#[test]
fn a_live_capture_dumps_every_packet() {
    let Some(net) = lib_common::Veth::create("ebd") else {
        return;
    };
    let bin = env!("CARGO_BIN_EXE_earlybird");
    let pcap = lib_common::testdata().join("pcap/ndpi__iphone.pcap");
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("dump");
    let mut cap = Command::new("ip")
        .args(["netns", "exec", &net.ns_a, bin])
        .args([
            "flows",
            "--no-model",
            "--no-progress",
            "-s",
            "2",
            "-f",
            "null",
        ])
        .args(["-i", &net.a, "--duration", "120", "--dump-dir"])
        .arg(&dump)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The sockets capture from the moment the run says so.
    let mut err = std::io::BufReader::new(cap.stderr.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut err, &mut first).unwrap();
    assert!(first.contains("capturing on"), "{first}");
    let sent = Command::new("ip")
        .args(["netns", "exec", &net.ns, bin, "replay", "-i", &net.b])
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(sent.status.success());
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: signals the child process started above.
    unsafe { libc::kill(cap.id() as i32, libc::SIGINT) };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert_eq!(cap.wait().unwrap().code(), Some(130), "{rest}");
    assert!(rest.contains("packets dumped"), "{rest}");
    let cut = |(_, len, b): Packet| (len, b[..b.len().min(256)].to_vec());
    let want = sorted_bytes(input_packets(&pcap).into_iter().map(cut).collect());
    let got = sorted_bytes(dumped(&dump).into_values().flatten().map(cut).collect());
    assert_eq!(got.len(), want.len(), "packets dumped");
    assert!(
        got == want,
        "the dump holds other packets than the capture's"
    );
}

fn sorted_bytes(mut v: Vec<(u32, Vec<u8>)>) -> Vec<(u32, Vec<u8>)> {
    v.sort();
    v
}

/// Whether `tool` runs; under CI a missing tool fails the test.
fn have(tool: &str, arg: &str) -> bool {
    let ok = Command::new(tool)
        .arg(arg)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{tool} is not installed (.ci/run installs it)");
        }
        eprintln!("SKIPPED: {tool} is not installed");
    }
    ok
}

/// The Ethernet packets of `from` that carry IPv4 or IPv6, as a
/// nanosecond classic pcap of link type 101 (raw IP), `shift` ns later.
fn raw_ip_copy(from: &Path, to: &Path, shift: u64) -> Vec<Packet> {
    // Magic (nanoseconds), version 2.4, zone, sigfigs, snaplen, link type.
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    out.extend_from_slice(&[2, 0, 4, 0]);
    for v in [0u32, 0, 262_144, 101] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let mut kept = Vec::new();
    for (ts, orig, b) in input_packets(from) {
        if b.len() <= 14 || !matches!((b[12], b[13]), (0x08, 0x00) | (0x86, 0xdd)) {
            continue;
        }
        let ts = ts + shift;
        for v in [
            (ts / 1_000_000_000) as u32,
            (ts % 1_000_000_000) as u32,
            (b.len() - 14) as u32,
            orig - 14,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&b[14..]);
        kept.push((ts, orig - 14, b[14..].to_vec()));
    }
    std::fs::write(to, out).unwrap();
    assert_eq!(input_packets(to), kept);
    kept
}

/// The dump files of `dir` ending in `ext`, in shard and sequence order.
fn files_ending(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort_by_key(|p| {
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        assert!(name.ends_with(ext), "{name}");
        let parts: Vec<&str> = name.trim_end_matches(ext).split('-').collect();
        (parts[2].to_string(), parts[3].parse::<u64>().unwrap())
    });
    v
}

#[test]
fn pcapng_dumps_hold_the_packets_of_the_pcap_dump_for_earlybird_and_tshark() {
    let dir = tempfile::tempdir().unwrap();
    let eth = lib_common::testdata().join("pcap/ndpi__iphone.pcap");
    let raw = dir.path().join("raw.pcap");
    let mut want = input_packets(&eth);
    want.extend(raw_ip_copy(&eth, &raw, 100_000_000_000));
    let run_dump = |format: &str, extra: &[&str]| -> PathBuf {
        let d = dir.path().join(format!("{format}{}", extra.join("")));
        let mut args = vec!["--no-model", "-q", "-f", "null", "--dump-format", format];
        args.extend(extra);
        args.push("--dump-dir");
        let (code, err) = run(&args, &[&d, &eth, &raw]);
        assert_eq!(code, 0, "{err}");
        d
    };
    // Classic pcap: one file per link type.
    let pcap = files_ending(&run_dump("pcap", &[]), ".pcap");
    assert_eq!(pcap.len(), 2, "{pcap:?}");
    let from_pcap: Vec<Packet> = pcap.iter().flat_map(|p| read_dump(p)).collect();
    assert!(from_pcap == want, "{} of {}", from_pcap.len(), want.len());
    // pcapng: both link types in one file, the same packets.
    let ng = files_ending(&run_dump("pcapng", &[]), ".pcapng");
    assert_eq!(ng.len(), 1, "{ng:?}");
    let from_ng = input_packets(&ng[0]);
    assert!(from_ng == want, "{} of {}", from_ng.len(), want.len());
    // Rotated by time (2 s periods) and by size (64 KiB): the same packets,
    // no file past the bound.
    for extra in [&["--dump-seconds", "2"][..], &["--dump-max-mib", "0.0625"]] {
        let files = files_ending(&run_dump("pcapng", extra), ".pcapng");
        assert!(files.len() > 3, "{extra:?}: {files:?}");
        let back: Vec<Packet> = files.iter().flat_map(|p| input_packets(p)).collect();
        assert!(back == want, "{extra:?}: {} of {}", back.len(), want.len());
        if extra[0] == "--dump-max-mib" {
            assert!(files
                .iter()
                .all(|p| std::fs::metadata(p).unwrap().len() <= 65_536));
        }
    }
    // capinfos: a pcapng of two interfaces with nanosecond stamps.
    if !have("tshark", "-v") || !have("capinfos", "-h") {
        return;
    }
    let info = Command::new("capinfos").arg(&ng[0]).output().unwrap();
    let info = String::from_utf8_lossy(&info.stdout).into_owned();
    for want_line in [
        "pcapng",
        &format!("Number of packets:   {}", want.len()),
        "Number of interfaces in file: 2",
        "Ethernet (1 - ether)",
        "Time precision = nanoseconds (9)",
    ] {
        assert!(info.contains(want_line), "{want_line:?} in\n{info}");
    }
    // tshark: every packet with its interface, timestamp, length and bytes.
    let out = Command::new("tshark")
        .arg("-r")
        .arg(&ng[0])
        .args(["-T", "json", "-x", "-j", "frame"])
        .stderr(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    let shown: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let mut by_iface: Vec<Vec<Packet>> = vec![Vec::new(); 2];
    for p in &shown {
        let layers = &p["_source"]["layers"];
        let field = |k: &str| layers["frame"][k].as_str().unwrap().to_string();
        let (sec, ns) = field("frame.time_epoch")
            .split_once('.')
            .map(|(s, n)| (s.parse::<u64>().unwrap(), n.parse::<u64>().unwrap()))
            .unwrap();
        let hex = layers["frame_raw"][0].as_str().unwrap();
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let iface: usize = field("frame.interface_id").parse().unwrap();
        let orig: u32 = field("frame.len").parse().unwrap();
        by_iface[iface].push((sec * 1_000_000_000 + ns, orig, bytes));
    }
    // Interface 0 is the Ethernet capture, 1 the raw IP copy: each equals
    // the pcap dump's file of that link type.
    for (iface, pcap_file) in pcap.iter().enumerate() {
        assert!(
            by_iface[iface] == read_dump(pcap_file),
            "interface {iface}: {} packets",
            by_iface[iface].len()
        );
    }
}

/// `--dump-direct` writes classic pcap: with pcapng it is refused before
/// the run, naming both options.
#[test]
fn direct_dumps_refuse_pcapng_before_the_run() {
    let input = lib_common::testdata().join("pcap/ndpi__iphone.pcap");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("dump");
    let (code, err) = run(
        &[
            "--no-model",
            "-q",
            "-f",
            "null",
            "--dump-direct",
            "--dump-format",
            "pcapng",
            "--dump-dir",
        ],
        &[&d, &input],
    );
    assert_ne!(code, 0);
    assert!(
        err.contains("--dump-direct") && err.contains("pcapng"),
        "{err}"
    );
    assert!(dump_files(&d).is_empty());
}
