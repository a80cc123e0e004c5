//! Packet sampling against the unsampled truth, in the shape of the
//! thesis's Tables 6.7–6.9 (Ch. 6.5): media detection (share of the media
//! flows' bytes with an audio or video verdict) with and without the
//! inter-arrival correction, for systematic, stratified and random
//! sampling at 1/8, 1/64 and 1/128, on generated calls (`gen voip`: G.711
//! every 20 ms with loss and jitter) and on the nDPI-labelled media flows
//! of `corpus/classify/dev/media_flows.csv`; and the error of the packet
//! and byte estimates (seen × N) against the unsampled counts. Prints the
//! tables BENCHMARKS.md quotes ("Sampling accuracy (from docs/SAMPLING.md)";
//! docs/SAMPLING.md says what they show) and asserts that the correction helps
//! where the thesis says it does and that the estimates are within their
//! expected error.

use crate::common;

use std::collections::HashMap;
use std::path::Path;

use earlybird::sample::{Policy, Sampling};
use earlybird::{generate_voip, CaptureFile, CollectedFlow, ModelRef, OwnedValue, RunOptions};
use earlybird::{Report, VoipGenOptions};

const POLICIES: [Policy; 3] = [Policy::Systematic, Policy::Stratified, Policy::Random];
const RATES: [u32; 3] = [8, 64, 128];

/// Unordered 5-tuple.
type Tuple = (u8, [u8; 16], u16, [u8; 16], u16);

fn tuple(f: &CollectedFlow) -> Tuple {
    let k = &f.record.key;
    if (k.src, k.sport) <= (k.dst, k.dport) {
        (k.proto, k.src, k.sport, k.dst, k.dport)
    } else {
        (k.proto, k.dst, k.dport, k.src, k.sport)
    }
}

fn run(paths: &[&Path], sample: Option<Sampling>, correct: bool) -> (Vec<CollectedFlow>, Report) {
    let files: Vec<CaptureFile> = paths
        .iter()
        .map(|p| CaptureFile::open(p).unwrap())
        .collect();
    let mut opts = RunOptions::default();
    opts.flow.analyzers = vec!["media".into()];
    opts.flow.media.sampling_correction = correct;
    // The thesis's tables are of the windows: the clear-header layer (RTP
    // in clear, which sampling does not hide) off.
    opts.flow.media.clear = false;
    opts.flow.sample = sample;
    // A 1/128 sample of a 20 ms stream keeps a packet every ~2.6 s: far
    // from the 15 s idle timeout, which is left as it is.
    earlybird::collect(&files, &opts, &ModelRef::default()).unwrap()
}

fn text(v: &OwnedValue) -> &str {
    match v {
        OwnedValue::Text(s) => s,
        other => panic!("not text: {other:?}"),
    }
}

fn num(v: &OwnedValue) -> u64 {
    match v {
        OwnedValue::U64(n) => *n,
        other => panic!("not a number: {other:?}"),
    }
}

/// Per tuple: (packets, bytes, detected as audio or video) summed over
/// the tuple's records.
fn per_tuple(flows: &[CollectedFlow]) -> HashMap<Tuple, (u64, u64, bool)> {
    let mut m: HashMap<Tuple, (u64, u64, bool)> = HashMap::new();
    for f in flows {
        let e = m.entry(tuple(f)).or_default();
        e.0 += f.record.packets[0] + f.record.packets[1];
        e.1 += f.record.bytes[0] + f.record.bytes[1];
        let v = text(&f.analyzed[0]);
        e.2 |= v == "audio" || v == "video";
    }
    m
}

/// Share of the bytes (unsampled truth) of the `media` tuples that are
/// detected in `flows`, over the tuples that have at least 30 packets in
/// `flows` (the detector's minimum, as the thesis counts); `None` when no
/// tuple qualifies. Also returns how many qualify.
fn accuracy(
    flows: &[CollectedFlow],
    media: &[Tuple],
    truth: &HashMap<Tuple, (u64, u64, bool)>,
) -> (Option<f64>, usize) {
    let seen = per_tuple(flows);
    let (mut all, mut hit, mut n) = (0u64, 0u64, 0);
    for t in media {
        let Some(&(packets, _, detected)) = seen.get(t) else {
            continue;
        };
        if packets < 30 {
            continue;
        }
        let bytes = truth[t].1;
        n += 1;
        all += bytes;
        if detected {
            hit += bytes;
        }
    }
    ((all > 0).then(|| hit as f64 / all as f64), n)
}

fn pct(a: Option<f64>) -> String {
    a.map_or("–".into(), |a| format!("{:.1}", a * 100.0))
}

/// Relative error of the estimates (packets, bytes) of the tuples with at
/// least `min` unsampled packets: (mean, standard deviation) of
/// (estimate − truth) / truth per tuple, and the expected standard
/// deviation of the packet estimate under independent 1/N draws,
/// √((N − 1)/n) averaged in quadrature over the tuples.
fn estimate_error(
    flows: &[CollectedFlow],
    truth: &HashMap<Tuple, (u64, u64, bool)>,
    rate: u32,
    min: u64,
) -> ([(f64, f64); 2], f64, usize) {
    let mut est: HashMap<Tuple, (u64, u64)> = HashMap::new();
    for f in flows {
        let e = est.entry(tuple(f)).or_default();
        // The last four fields (after the media analyzer's): sampling,
        // sampling_rate, packets_estimated, bytes_estimated.
        let n = f.analyzed.len();
        assert_eq!(num(&f.analyzed[n - 3]), u64::from(rate));
        e.0 += num(&f.analyzed[n - 2]);
        e.1 += num(&f.analyzed[n - 1]);
    }
    let mut errs: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut expected = 0.0;
    for (t, &(p, b, _)) in truth {
        if p < min {
            continue;
        }
        let (ep, eb) = est.get(t).copied().unwrap_or((0, 0));
        errs[0].push((ep as f64 - p as f64) / p as f64);
        errs[1].push((eb as f64 - b as f64) / b as f64);
        expected += (f64::from(rate) - 1.0) / p as f64;
    }
    let n = errs[0].len();
    let ms = |v: &[f64]| {
        let m = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64;
        (m, var.sqrt())
    };
    (
        [ms(&errs[0]), ms(&errs[1])],
        (expected / n as f64).sqrt(),
        n,
    )
}

/// The thesis's Tables 6.7–6.9, Trace 1 (Skype audio and video calls, %
/// of bytes): (uncorrected, corrected) at 1/8, 1/64, 1/128.
const THESIS_TRACE1: [[(f64, f64); 3]; 3] = [
    [(3.87, 90.72), (0.15, 95.02), (0.04, 95.53)],
    [(0.61, 90.27), (0.02, 93.55), (1.23, 94.98)],
    [(0.05, 87.65), (11.92, 91.60), (0.17, 93.20)],
];

/// One cell of a table: accuracy uncorrected, corrected, and the flows
/// counted.
type Cell = (Option<f64>, Option<f64>, usize);

/// Prints one table in the shape of Tables 6.7–6.9 and returns the
/// accuracies [policy][rate] = (uncorrected, corrected).
fn table(
    title: &str,
    paths: &[&Path],
    media: &[Tuple],
    truth: &HashMap<Tuple, (u64, u64, bool)>,
    base: Option<f64>,
) -> [[Cell; 3]; 3] {
    println!("\n{title}: % of the media flows' bytes detected (flows of ≥ 30 packets as sampled), uncorrected / corrected; unsampled {}", pct(base));
    println!("| policy | 1/8 | 1/64 | 1/128 | thesis Trace 1: 1/8 | 1/64 | 1/128 |");
    println!("|---|---|---|---|---|---|---|");
    let mut out = [[(None, None, 0); 3]; 3];
    for (i, policy) in POLICIES.iter().enumerate() {
        let mut row = format!("| {} |", policy.name());
        for (j, &rate) in RATES.iter().enumerate() {
            let s = Sampling {
                policy: *policy,
                rate,
                seed: 1,
            };
            let (plain, _) = run(paths, Some(s), false);
            let (fixed, _) = run(paths, Some(s), true);
            let (a, n) = accuracy(&plain, media, truth);
            let (b, _) = accuracy(&fixed, media, truth);
            out[i][j] = (a, b, n);
            row += &format!(" {} / {} ({n} flows) |", pct(a), pct(b));
        }
        for (u, c) in THESIS_TRACE1[i] {
            row += &format!(" {u:.2} / {c:.2} |");
        }
        println!("{row}");
    }
    out
}

#[test]
fn generated_calls_sampled_are_found_with_the_correction_and_counted_within_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.pcap");
    // 12 calls of 200 s, 10 000 RTP packets each way, 1 % loss, up to 5 ms
    // jitter, all talking at once: one interleaved stream of 480 000
    // packets.
    let o = VoipGenOptions {
        calls: 12,
        rate: 10.0,
        duration: 200.0,
        loss: 0.01,
        jitter_ms: 5.0,
        seed: 7,
        ..VoipGenOptions::default()
    };
    let (bytes, _) = generate_voip(&o, Vec::new()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    let paths = [path.as_path()];
    let (all, report) = run(&paths, None, true);
    assert_eq!(report.counters.sampled_out, 0);
    let read_all = report.counters.packets_read;
    let truth = per_tuple(&all);
    // The RTP flows: UDP with more than 1000 packets (the SIP dialogs have
    // a handful).
    let media: Vec<Tuple> = truth
        .iter()
        .filter(|(t, v)| t.0 == 17 && v.0 > 1000)
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(media.len(), 12);
    let (base, _) = accuracy(&all, &media, &truth);
    assert_eq!(base, Some(1.0), "every call is audio unsampled");

    let t = table("gen voip, 12 calls", &paths, &media, &truth, base);
    for row in &t {
        for (j, &(plain, fixed, n)) in row.iter().enumerate() {
            assert_eq!(n, 12, "every call keeps ≥ 30 packets at 1/{}", RATES[j]);
            let (plain, fixed) = (plain.unwrap(), fixed.unwrap());
            // The thesis's finding: without the correction sampling hides
            // the calls (gaps N times wider, no longer steady within
            // ±15 ms); with it they are found again.
            // Measured 2026-11-26: at most 25 % uncorrected (the thesis's
            // Trace 2 kept 35 % at 1/8), 100 % corrected.
            assert!(plain <= 0.35, "uncorrected at 1/{}: {plain}", RATES[j]);
            assert!(fixed >= 0.9, "corrected at 1/{}: {fixed}", RATES[j]);
            assert!(
                fixed - plain >= 0.6,
                "the correction helps at 1/{}",
                RATES[j]
            );
        }
    }

    println!("\ngen voip, 12 calls: error of the estimates (seen × N) against the unsampled counts, per flow of ≥ 1000 packets");
    println!("| policy | N | flows | packets: mean ± sd | bytes: mean ± sd | expected sd (random, √((N−1)/n)) | packets skipped |");
    println!("|---|---|---|---|---|---|---|");
    for policy in POLICIES {
        for rate in RATES {
            let s = Sampling {
                policy,
                rate,
                seed: 1,
            };
            let (flows, report) = run(&paths, Some(s), true);
            let c = &report.counters;
            // Nothing lost silently: every packet read is kept or counted
            // as sampled out.
            assert_eq!(c.packets_read, read_all);
            let kept = c.packets_read - c.sampled_out;
            let share = kept as f64 / c.packets_read as f64;
            assert!(
                (share * f64::from(rate) - 1.0).abs() < 0.05,
                "{policy:?} 1/{rate}: kept {share}"
            );
            let ([(pm, psd), (bm, bsd)], expected, n) =
                estimate_error_checked(&flows, &truth, rate, policy);
            println!(
                "| {} | {rate} | {n} | {:+.2} % ± {:.2} % | {:+.2} % ± {:.2} % | {:.2} % | {} |",
                policy.name(),
                pm * 100.0,
                psd * 100.0,
                bm * 100.0,
                bsd * 100.0,
                expected * 100.0,
                c.sampled_out
            );
            // Unbiased: the mean error is within 3 expected deviations of
            // the mean (√n flows), and the spread within 1.5× the
            // independent-draw figure (systematic and stratified spread
            // the kept packets more evenly than random draws).
            let bound = 3.0 * expected / (n as f64).sqrt() + 0.005;
            assert!(
                pm.abs() <= bound,
                "{policy:?} 1/{rate}: mean {pm} > {bound}"
            );
            assert!(
                psd <= 1.5 * expected + 0.005,
                "{policy:?} 1/{rate}: sd {psd} vs {expected}"
            );
            assert!(
                bsd <= 1.5 * expected + 0.01,
                "{policy:?} 1/{rate}: bytes sd {bsd}"
            );
        }
    }
}

/// [`estimate_error`] over the generated calls' RTP flows, checking the
/// sampling fields first.
fn estimate_error_checked(
    flows: &[CollectedFlow],
    truth: &HashMap<Tuple, (u64, u64, bool)>,
    rate: u32,
    policy: Policy,
) -> ([(f64, f64); 2], f64, usize) {
    for f in flows {
        assert_eq!(text(&f.analyzed[f.analyzed.len() - 4]), policy.name());
    }
    estimate_error(flows, truth, rate, 1000)
}

#[test]
fn labelled_media_flows_sampled_in_the_shape_of_tables_6_7_to_6_9() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let dev = corpus.join("classify/dev");
    let mut r = csv::Reader::from_path(dev.join("media_flows.csv")).unwrap();
    let mut by_file: HashMap<std::path::PathBuf, Vec<Tuple>> = HashMap::new();
    for row in r.records() {
        let row = row.unwrap();
        if &row[2] != "UDP" {
            continue;
        }
        let dir = if row[0].starts_with("nfstream") {
            "nfstream"
        } else {
            "ndpi"
        };
        let addr = |s: &str| match s.parse::<std::net::IpAddr>().unwrap() {
            std::net::IpAddr::V4(v) => earlybird::testing::map_v4(v.octets()),
            std::net::IpAddr::V6(v) => v.octets(),
        };
        let (a, pa, b, pb) = (
            addr(&row[3]),
            row[4].parse::<u16>().unwrap(),
            addr(&row[5]),
            row[6].parse::<u16>().unwrap(),
        );
        let t = if (a, pa) <= (b, pb) {
            (17, a, pa, b, pb)
        } else {
            (17, b, pb, a, pa)
        };
        by_file
            .entry(dev.join(dir).join("pcap").join(&row[1]))
            .or_default()
            .push(t);
    }
    // One run over every capture that has labelled media flows (time
    // order; a capture that starts earlier is its own time domain).
    let mut files: Vec<&std::path::PathBuf> = by_file.keys().collect();
    files.sort();
    let paths: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
    let media: Vec<Tuple> = by_file.values().flatten().copied().collect();
    let (all, _) = run(&paths, None, true);
    let truth = per_tuple(&all);
    let (base, n) = accuracy(&all, &media, &truth);
    println!("unsampled: {n} labelled media flows of ≥ 30 packets");
    let t = table("nDPI-labelled media flows", &paths, &media, &truth, base);
    // At 1/8 the correction finds at least as much as the uncorrected
    // detector for every policy (the higher rates leave few flows of 30
    // packets: printed, not asserted).
    for row in &t {
        let (plain, fixed, n) = row[0];
        if n > 0 {
            assert!(fixed.unwrap() >= plain.unwrap(), "{row:?}");
        }
    }
}

/// The held-out split of `evaluate --split F --sample P:N` is the one the
/// same options take without sampling (the model's training run): no
/// capture changes side, sampling only leaves fewer flows in them. Before
/// the split was taken after sampling, one of these captures moved.
#[test]
fn the_split_under_sampling_is_the_unsampled_one() {
    use earlybird::workflow::{self, DataOptions};
    use earlybird::{LabelLevel, LabelOptions};
    use std::collections::BTreeSet;
    let Some(corpus) = common::corpus() else {
        return;
    };
    let dev = corpus.join("classify/dev");
    let files: Vec<std::path::PathBuf> = [
        "dns_ambiguous_names.pcap",
        "443-curl.pcap",
        "6in4tunnel.pcap",
        "whatsapp.pcap",
        "quic046.pcap",
        "git.pcap",
        "ssh.pcap",
        "sip.pcap",
        "dtls.pcap",
        "443-git.pcap",
        "stun.pcap",
        "tftp.pcap",
        "netbios.pcap",
        "smtp.pcap",
        "dns_doh.pcap",
        "443-safari.pcap",
        "quic-27.pcap",
        "google_ssl.pcap",
    ]
    .iter()
    .map(|n| dev.join("ndpi/pcap").join(n))
    .collect();
    let labels = workflow::load_labels(
        &[dev.join("ndpi_truth.csv")],
        LabelLevel::Proto,
        &LabelOptions::default(),
    )
    .unwrap();
    let groups = |d: &earlybird::Dataset| -> BTreeSet<String> {
        d.samples.iter().map(|s| s.group.clone()).collect()
    };
    let mut opt = DataOptions {
        test_fraction: 0.3,
        seed: 2,
        ..DataOptions::default()
    };
    let plain = workflow::prepare(&files, &labels, &opt, 3).unwrap();
    let (train, test) = (groups(&plain.train), groups(&plain.test));
    assert!(!test.is_empty() && !train.is_empty());
    for spec in ["systematic:8", "random:8"] {
        opt.run.flow.sample = Some(Sampling::parse(spec, 1).unwrap());
        let p = workflow::prepare(&files, &labels, &opt, 3).unwrap();
        let (strain, stest) = (groups(&p.train), groups(&p.test));
        assert!(stest.is_subset(&test), "{spec}: {stest:?} not in {test:?}");
        assert!(
            strain.is_subset(&train),
            "{spec}: {strain:?} not in {train:?}"
        );
        assert!(!stest.is_empty(), "{spec}");
    }
}
