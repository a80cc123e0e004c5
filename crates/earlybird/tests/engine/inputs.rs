//! Several inputs in one run mean what `docs/ARCHITECTURE.md` ("Several
//! inputs") says: pieces of one capture, in any order, give the records of
//! the whole; unrelated captures give the sum of their separate runs; an
//! input that starts before the latest time read is a separate time
//! domain; streams and compressed captures give the records of the file.

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};

use earlybird::{
    CaptureFile, CollectedFlow, EndReason, GenKind, GenOptions, InputOrder, Inputs, ModelRef,
    Report, RunOptions, SkipReason,
};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

fn opts(shards: usize) -> RunOptions {
    RunOptions {
        shards,
        // Small batches: every piece is several turns.
        batch: 7,
        ..RunOptions::default()
    }
}

fn run_paths(paths: &[PathBuf], order: InputOrder, shards: usize) -> (Vec<CollectedFlow>, Report) {
    let inputs = Inputs::plan(paths, order).expect("plan");
    earlybird::collect_inputs(inputs, &opts(shards), &ModelRef::default()).expect("run")
}

/// Records as sorted text, so runs compare whatever the order records left
/// the shards in.
fn canon(flows: &[CollectedFlow], unify_end: bool) -> Vec<String> {
    let mut v: Vec<String> = flows
        .iter()
        .map(|f| {
            let mut r = f.record;
            // A flow open when its capture ends is `end_of_input` on its
            // own, `idle` when later captures move time on.
            if unify_end && r.end == EndReason::EndOfInput {
                r.end = EndReason::Idle;
            }
            format!("{r:?} {:?}", f.early)
        })
        .collect();
    v.sort();
    v
}

/// The records of a classic pcap: (global header, records).
fn split_records(bytes: &[u8]) -> (&[u8], Vec<&[u8]>) {
    let (hdr, mut rest) = bytes.split_at(24);
    assert_eq!(
        &hdr[..4],
        &[0xd4, 0xc3, 0xb2, 0xa1],
        "little-endian µs pcap"
    );
    let mut recs = Vec::new();
    while rest.len() >= 16 {
        let caplen = u32::from_le_bytes(rest[8..12].try_into().unwrap()) as usize;
        let (r, tail) = rest.split_at(16 + caplen);
        recs.push(r);
        rest = tail;
    }
    (hdr, recs)
}

fn write_pcap(path: &Path, hdr: &[u8], recs: &[&[u8]]) {
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(hdr).unwrap();
    for r in recs {
        f.write_all(r).unwrap();
    }
}

fn generated() -> Vec<u8> {
    let mut buf = Vec::new();
    let mut o = GenOptions::new(GenKind::Realistic, 3_000);
    o.seed = 7;
    earlybird::generate(&o, &mut buf).unwrap();
    buf
}

fn iphone() -> Vec<u8> {
    std::fs::read(common::testdata().join("pcap/ndpi__iphone.pcap")).unwrap()
}

proptest! {
    // Past failures are replayed from inputs.proptest-regressions beside
    // this file (proptest's default, with main.rs in this folder, would be
    // ../proptest-regressions/inputs.txt).
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    })]

    /// Pieces of one capture named in any order give the records of the
    /// whole, with one and two shards.
    #[test]
    fn pieces_in_any_order_give_the_whole(
        which in 0usize..2,
        cuts in proptest::collection::vec(1usize..10_000, 1..6),
        names in Just(()).prop_perturb(|_, mut rng| {
            let mut v: Vec<u32> = (0..7).collect();
            for i in (1..v.len()).rev() {
                v.swap(i, rng.random_range(0..=i));
            }
            v
        }),
        shards in 1usize..3,
    ) {
        let bytes = if which == 0 { iphone() } else { generated() };
        let (hdr, recs) = split_records(&bytes);
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % recs.len()).filter(|&c| c > 0).collect();
        cuts.sort();
        cuts.dedup();
        let dir = tempfile::tempdir().unwrap();
        let mut paths = Vec::new();
        let mut start = 0;
        for (i, end) in cuts.iter().copied().chain([recs.len()]).enumerate() {
            // Names that say nothing of the order: a shuffled number.
            let p = dir.path().join(format!("part-{}.pcap", names[i]));
            write_pcap(&p, hdr, &recs[start..end]);
            paths.push(p);
            start = end;
        }
        paths.reverse();
        let whole_path = dir.path().join("whole.pcap");
        std::fs::write(&whole_path, &bytes).unwrap();
        let (whole, _) = run_paths(&[whole_path], InputOrder::Time, shards);
        let (parts, report) = run_paths(&paths, InputOrder::Time, shards);
        prop_assert_eq!(report.counters.time_domains, 0);
        prop_assert_eq!(canon(&parts, false), canon(&whole, false));
    }
}

/// The same capture twice: two time domains, twice the records of one run,
/// end reasons included; a warning names the second.
#[test]
fn same_file_twice_is_twice_the_records() {
    let p = common::testdata().join("pcap/ndpi__iphone.pcap");
    for shards in [1, 2] {
        let (one, _) = run_paths(std::slice::from_ref(&p), InputOrder::Time, shards);
        let (two, report) = run_paths(&[p.clone(), p.clone()], InputOrder::Time, shards);
        let mut want = canon(&one, false);
        want.extend(canon(&one, false));
        want.sort();
        assert_eq!(canon(&two, false), want, "{shards} shards");
        assert_eq!(report.counters.time_domains, 1);
        assert!(report
            .warnings
            .iter()
            .any(|w| w.to_string().contains("separate time domain")));
    }
}

/// Unrelated captures in one run (a directory, in any order) give the sum
/// of their separate runs. (A capture whose own timestamps are not in
/// order is left out: in one run with others, a packet that steps back is
/// timed from the latest time read before its batch, which may be another
/// capture's — see docs/INTERNALS.md, "Several inputs".)
#[test]
fn unrelated_captures_give_the_sum_of_their_runs() {
    let mut files = common::captures(&common::testdata().join("pcap"));
    if let Some(c) = common::corpus() {
        let dev = c.join("classify/dev/ndpi/pcap");
        files.extend(common::captures(&dev).into_iter().take(40));
    }
    let dir = tempfile::tempdir().unwrap();
    let mut sum = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let Ok(file) = CaptureFile::open(f) else {
            continue;
        };
        if !in_time_order(&file) {
            continue;
        }
        drop(file);
        // Reverse-numbered names: the directory order is not time order.
        let link = dir.path().join(format!(
            "{:03}-{}",
            999 - i,
            f.file_name().unwrap().to_string_lossy()
        ));
        std::os::unix::fs::symlink(f, &link).unwrap();
        let (flows, _) = run_paths(std::slice::from_ref(&link), InputOrder::Time, 1);
        sum.extend(canon(&flows, true));
    }
    sum.sort();
    for shards in [1, 2] {
        let (all, report) = run_paths(&[dir.path().to_path_buf()], InputOrder::Time, shards);
        let all = canon(&all, true);
        let extra: Vec<_> = all.iter().filter(|r| !sum.contains(r)).take(3).collect();
        let missing: Vec<_> = sum.iter().filter(|r| !all.contains(r)).take(3).collect();
        assert!(
            all == sum,
            "{shards} shards: {} records, {} in the separate runs; only in the whole run: \
             {extra:#?}; only in the separate runs: {missing:#?}",
            all.len(),
            sum.len()
        );
        assert_eq!(report.inputs_skipped, vec![]);
    }
}

fn in_time_order(file: &CaptureFile) -> bool {
    let mut r = file.reader();
    let mut batch = Vec::new();
    let mut last = 0;
    while r.next_batch(&mut batch, 256) > 0 {
        for p in &batch {
            if p.ts < last {
                return false;
            }
            last = p.ts;
        }
    }
    true
}

/// Timestamps stepping back inside one capture are counted, with the
/// largest step.
#[test]
fn backward_steps_are_counted() {
    let bytes = iphone();
    let (hdr, recs) = split_records(&bytes);
    let half = recs.len() / 2;
    let mut stepped: Vec<Vec<u8>> = recs.iter().map(|r| r.to_vec()).collect();
    for r in &mut stepped[half..] {
        let s = u32::from_le_bytes(r[0..4].try_into().unwrap()) - 3600;
        r[0..4].copy_from_slice(&s.to_le_bytes());
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("stepped.pcap");
    let refs: Vec<&[u8]> = stepped.iter().map(|r| r.as_slice()).collect();
    write_pcap(&p, hdr, &refs);
    let (_, report) = run_paths(&[p], InputOrder::Time, 1);
    assert!(
        report.counters.ts_backwards > 100,
        "{:?}",
        report.counters.ts_backwards
    );
    let back = report.counters.ts_max_back;
    assert!((3500..=3600).contains(&(back / 1_000_000_000)), "{back}");
    assert!(report
        .to_string()
        .contains("packets stamped before the latest"));
}

/// Compressed captures and a FIFO give the records of the file.
#[test]
fn streams_and_compressed_give_the_file_records() {
    let bytes = generated();
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("g.pcap");
    std::fs::write(&plain, &bytes).unwrap();
    let (want, _) = run_paths(std::slice::from_ref(&plain), InputOrder::Time, 1);
    let want = canon(&want, false);

    let gz = dir.path().join("g.pcap.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&bytes).unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    let zst = dir.path().join("g.pcap.zst");
    std::fs::write(&zst, zstd::encode_all(&bytes[..], 3).unwrap()).unwrap();
    let xz = dir.path().join("g.pcap.xz");
    let mut e = liblzma::write::XzEncoder::new(Vec::new(), 1);
    e.write_all(&bytes).unwrap();
    std::fs::write(&xz, e.finish().unwrap()).unwrap();
    for p in [&gz, &zst, &xz] {
        for shards in [1, 2] {
            let (got, report) = run_paths(std::slice::from_ref(p), InputOrder::Time, shards);
            assert_eq!(canon(&got, false), want, "{} {shards} shards", p.display());
            assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        }
    }

    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let writer = {
        let (fifo, bytes) = (fifo.clone(), bytes.clone());
        std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
            for piece in bytes.chunks(1000) {
                f.write_all(piece).unwrap();
            }
        })
    };
    let (got, _) = run_paths(&[fifo], InputOrder::Time, 2);
    writer.join().unwrap();
    assert_eq!(canon(&got, false), want, "fifo");
}

/// A capture cut short inside a compressed stream warns with the offset in
/// the decompressed stream, as the file would.
#[test]
fn cut_stream_warns_at_its_offset() {
    let bytes = iphone();
    let cut = &bytes[..bytes.len() - 30];
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("cut.pcap");
    std::fs::write(&plain, cut).unwrap();
    let gz = dir.path().join("cut.pcap.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(cut).unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    let (a, ra) = run_paths(&[plain], InputOrder::Time, 1);
    let (b, rb) = run_paths(&[gz], InputOrder::Time, 1);
    assert_eq!(canon(&a, false), canon(&b, false));
    let off = |r: &Report| r.warnings.iter().map(|w| w.offset).collect::<Vec<_>>();
    assert_eq!(off(&ra).len(), 1);
    assert_eq!(off(&ra), off(&rb));
}

/// A directory: searched recursively; what is not a capture is skipped and
/// counted; a lone input that is not a capture is an error.
#[test]
fn directories_and_bad_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("a/b");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::copy(
        common::testdata().join("pcap/ndpi__iphone.pcap"),
        sub.join("x.pcap"),
    )
    .unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not a capture").unwrap();
    std::fs::write(dir.path().join("old.pcap.bz2"), b"BZh91AY&SY").unwrap();
    let (flows, report) = run_paths(&[dir.path().to_path_buf()], InputOrder::Given, 1);
    assert_eq!(flows.len(), 56);
    assert_eq!(report.inputs_read, 1);
    assert_eq!(
        report.inputs_skipped,
        vec![(SkipReason::NotCapture, 1), (SkipReason::Compression, 1)]
    );
    let lone = Inputs::plan(&[dir.path().join("notes.txt")], InputOrder::Time);
    let e = lone.unwrap_err().to_string();
    assert!(
        e.contains("notes.txt") && e.contains("not a capture"),
        "{e}"
    );
    let empty = tempfile::tempdir().unwrap();
    assert!(Inputs::plan(&[empty.path().to_path_buf()], InputOrder::Time).is_err());
}
