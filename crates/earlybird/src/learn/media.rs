//! Learned intervals for the `media` analyzer (`earlybird train-media`):
//! labelled media flows → a `--media-config` TOML, and the held-out
//! measure of any configuration on labelled captures.
//!
//! Contract:
//! - [`MediaLabels::load`] reads media labels: a CSV with the columns
//!   `pcap`, `proto`, `src`, `sport`, `dst`, `dport` and `media_kind`
//!   (`corpus/classify/dev/media_flows.csv`; UDP rows only; kind `audio`,
//!   `video`, anything else "media of unspecified kind"), or a JSON file of
//!   `corpus/voip/voip_reference.json`'s shape, whose RTP streams (any of
//!   `rtp_streams_sdp`, `rtp_streams_heuristic`, `rtp_streams_decode_as`)
//!   are labelled audio. Labels are keyed by capture file name and
//!   unordered 5-tuple. Errors name the file (and the row).
//! - [`read_capture`] reads one capture and keeps every UDP 5-tuple
//!   (unordered, over the whole capture: no timeouts) with its packets
//!   (time, IP length, direction: the client is the sender of the tuple's
//!   first packet) and its label, if any. A capture that cannot be read is
//!   an error naming it.
//! - [`windows`] cuts a tuple's packets into the detector's windows
//!   exactly as `analyze/media.rs` does (per direction, mean IP length,
//!   mean inter-arrival, bitrate).
//! - [`learn`] sets, for each of audio and video with at least
//!   [`LearnOptions::min_flows`] labelled flows of at least
//!   `min_packets` packets, the kind's size interval (and, for a kind
//!   Table 6.2 tests by bitrate, its bitrate interval) to the
//!   [`LearnOptions::low`]–[`LearnOptions::high`] percentiles of the window
//!   means of those flows (each flow's first
//!   [`LearnOptions::windows_per_flow`] windows), rounded outward to whole
//!   bytes and kbit/s. Everything else (inter-arrival tolerance, shares,
//!   the file kind, a kind with too few flows) is Table 6.2's.
//! - [`score`] runs the detector (the analyzer itself, fed the tuple's
//!   packets) over captures and counts, per label kind and for the other
//!   UDP tuples, flows and bytes detected (an `audio` or `video` verdict),
//!   over all tuples and over those of at least `min_packets` packets.
//!   [`leave_one_capture_out`] scores each capture with the intervals
//!   learned from the others.
//!
//! Offline; allocates freely; never panics on input.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::analyze::media::{KindConfig, Media, MediaConfig};
use crate::analyze::{Analyzer, PacketView};
use crate::decode::{map_v4, Decoded};
use crate::error::{Error, Result};
use crate::source::CaptureFile;
use crate::time::Nanos;

/// Unordered UDP 5-tuple: the two (address, port) ends, sorted.
pub type Tuple = ([u8; 16], u16, [u8; 16], u16);

fn tuple(a: [u8; 16], pa: u16, b: [u8; 16], pb: u16) -> Tuple {
    if (a, pa) <= (b, pb) {
        (a, pa, b, pb)
    } else {
        (b, pb, a, pa)
    }
}

/// Label kind of flows labelled media without a kind.
pub const UNSPECIFIED: &str = "unspecified";

/// Media labels: capture file name → tuple → kind (`audio`, `video` or
/// [`UNSPECIFIED`]).
#[derive(Debug, Clone, Default)]
pub struct MediaLabels {
    /// Capture file name → tuple → kind.
    pub by_file: BTreeMap<String, HashMap<Tuple, String>>,
}

/// The address `s`; `err` makes the error from its reason.
fn addr(s: &str, err: impl Fn(String) -> Error) -> Result<[u8; 16]> {
    match s.parse::<IpAddr>() {
        Ok(IpAddr::V4(v)) => Ok(map_v4(v.octets())),
        Ok(IpAddr::V6(v)) => Ok(v.octets()),
        Err(_) => Err(err(format!("bad address {s:?}"))),
    }
}

fn base_name(p: &str) -> String {
    Path::new(p)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.to_string())
}

impl MediaLabels {
    /// Reads and merges label files (see the module docs).
    pub fn load(paths: &[PathBuf]) -> Result<MediaLabels> {
        let mut l = MediaLabels::default();
        for p in paths {
            if p.extension().is_some_and(|e| e == "json") {
                l.load_json(p)?;
            } else {
                l.load_csv(p)?;
            }
        }
        Ok(l)
    }

    /// Labelled tuples of every kind.
    pub fn len(&self) -> usize {
        self.by_file.values().map(HashMap::len).sum()
    }

    /// True when no tuple is labelled.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn load_json(&mut self, p: &Path) -> Result<()> {
        let text = std::fs::read_to_string(p).map_err(|e| Error::io(p, e))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::file(p, Some(e.line()), e.to_string()))?;
        let Some(files) = v.as_object() else {
            return Err(Error::file(p, None, "expected an object of capture files"));
        };
        for (file, entry) in files {
            for var in [
                "rtp_streams_sdp",
                "rtp_streams_heuristic",
                "rtp_streams_decode_as",
            ] {
                for s in entry[var].as_array().into_iter().flatten() {
                    let err =
                        |reason: String| Error::file(p, None, format!("{file} {var}: {reason}"));
                    let port = |k: &str| {
                        s[k].as_u64()
                            .and_then(|v| u16::try_from(v).ok())
                            .ok_or_else(|| err(format!("bad {k}")))
                    };
                    let text = |k: &str| s[k].as_str().ok_or_else(|| err(format!("no {k}")));
                    let tu = tuple(
                        addr(text("src")?, err)?,
                        port("sport")?,
                        addr(text("dst")?, err)?,
                        port("dport")?,
                    );
                    self.by_file
                        .entry(base_name(file))
                        .or_default()
                        .insert(tu, "audio".into());
                }
            }
        }
        Ok(())
    }

    fn load_csv(&mut self, p: &Path) -> Result<()> {
        let text = std::fs::read_to_string(p).map_err(|e| Error::io(p, e))?;
        let mut lines = text.lines();
        let mut h = Vec::new();
        super::dataset::split_csv(lines.next().unwrap_or("").trim_end_matches('\r'), &mut h);
        let col = |n: &str| {
            h.iter()
                .position(|x| x == n)
                .ok_or_else(|| Error::file(p, Some(1), format!("no column {n}")))
        };
        let (pc, pr, s, sp, d, dp, mk) = (
            col("pcap")?,
            col("proto")?,
            col("src")?,
            col("sport")?,
            col("dst")?,
            col("dport")?,
            col("media_kind")?,
        );
        let mut row = Vec::new();
        for (i, line) in lines.enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let err = |reason: String| Error::file(p, Some(i + 2), reason);
            super::dataset::split_csv(line.trim_end_matches('\r'), &mut row);
            let get = |c: usize| row.get(c).map_or("", String::as_str);
            if get(pr) != "UDP" && get(pr) != "17" {
                continue;
            }
            let port = |c: usize| {
                get(c)
                    .parse::<u16>()
                    .map_err(|_| err(format!("bad port {:?}", get(c))))
            };
            let tu = tuple(addr(get(s), err)?, port(sp)?, addr(get(d), err)?, port(dp)?);
            let kind = match get(mk) {
                k @ ("audio" | "video") => k.to_string(),
                _ => UNSPECIFIED.to_string(),
            };
            self.by_file
                .entry(base_name(get(pc)))
                .or_default()
                .insert(tu, kind);
        }
        Ok(())
    }
}

/// One packet of a tuple: time, IP length, sent by the client.
pub type Pkt = (Nanos, u16, bool);

/// One UDP tuple of a capture.
#[derive(Debug, Clone)]
pub struct TupleFlow {
    /// Label kind; `None` for an unlabelled ("other") tuple.
    pub kind: Option<String>,
    /// Its packets, in capture order.
    pub packets: Vec<Pkt>,
    /// Sum of the IP lengths.
    pub bytes: u64,
}

/// The UDP tuples of one capture.
#[derive(Debug, Clone)]
pub struct CaptureFlows {
    /// Capture file name.
    pub name: String,
    /// Its UDP tuples, in order of their first packet.
    pub flows: Vec<TupleFlow>,
}

/// Reads one capture's UDP tuples and labels them (see the module docs).
pub fn read_capture(path: &Path, labels: &MediaLabels) -> Result<CaptureFlows> {
    let cap = CaptureFile::open(path)?;
    let name = cap.name().to_string();
    let file = base_name(&path.display().to_string());
    let lab = labels.by_file.get(&file);
    let mut reader = cap.reader();
    let mut batch = Vec::new();
    let mut d = Decoded::default();
    // Tuple → (index into flows, client end).
    let mut index: HashMap<Tuple, (usize, ([u8; 16], u16))> = HashMap::new();
    let mut flows: Vec<TupleFlow> = Vec::new();
    while reader.next_batch(&mut batch, 1024) > 0 {
        for p in &batch {
            if crate::decode::decode(p.link, p.bytes(reader.data()), &mut d).is_err()
                || d.proto != 17
            {
                continue;
            }
            let tu = tuple(d.src, d.sport, d.dst, d.dport);
            let (i, client) = *index.entry(tu).or_insert_with(|| {
                flows.push(TupleFlow {
                    kind: lab.and_then(|l| l.get(&tu)).cloned(),
                    packets: Vec::new(),
                    bytes: 0,
                });
                (flows.len() - 1, (d.src, d.sport))
            });
            let f = &mut flows[i];
            f.packets.push((p.ts, d.ip_len, (d.src, d.sport) == client));
            f.bytes += u64::from(d.ip_len);
        }
    }
    Ok(CaptureFlows {
        name: if file.is_empty() { name } else { file },
        flows,
    })
}

/// One window of one direction: mean IP length (bytes), mean
/// inter-arrival (ns; 0 when the window has none) and bitrate (kbit/s;
/// infinite when the mean inter-arrival is 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Mean IP length, bytes.
    pub size: f64,
    /// Mean inter-arrival, ns.
    pub iat_ns: f64,
    /// Bitrate, kbit/s.
    pub rate_kbps: f64,
}

/// The windows of `window` packets of a tuple's packets, in the order the
/// detector completes them (see `analyze/media.rs`).
pub fn windows(packets: &[Pkt], window: u32) -> Vec<Window> {
    #[derive(Default, Clone, Copy)]
    struct D {
        seen: u32,
        last: Nanos,
        n: u32,
        size: u64,
        iat: u64,
        iat_n: u32,
    }
    let window = window.max(2);
    let mut dirs = [D::default(); 2];
    let mut out = Vec::new();
    for &(ts, size, from_client) in packets {
        let w = &mut dirs[usize::from(!from_client)];
        if w.seen > 0 {
            w.iat += ts.saturating_sub(w.last);
            w.iat_n += 1;
        }
        w.seen += 1;
        w.last = ts;
        w.n += 1;
        w.size += u64::from(size);
        if w.n >= window {
            let size = w.size as f64 / f64::from(w.n);
            let iat = if w.iat_n == 0 {
                0.0
            } else {
                w.iat as f64 / f64::from(w.iat_n)
            };
            let rate = if iat > 0.0 {
                size * 8.0e6 / iat
            } else {
                f64::INFINITY
            };
            out.push(Window {
                size,
                iat_ns: iat,
                rate_kbps: rate,
            });
            (w.n, w.size, w.iat, w.iat_n) = (0, 0, 0, 0);
        }
    }
    out
}

/// How [`learn`] learns.
#[derive(Debug, Clone)]
pub struct LearnOptions {
    /// Lower percentile of the window means (0..1).
    pub low: f64,
    /// Upper percentile of the window means (0..1).
    pub high: f64,
    /// A kind is learned from at least this many labelled flows of at
    /// least `min_packets` packets; else it keeps Table 6.2's intervals.
    pub min_flows: usize,
    /// Windows taken from each flow (its first ones: the detector decides
    /// early), so that long flows do not dominate.
    pub windows_per_flow: usize,
}

impl Default for LearnOptions {
    fn default() -> Self {
        LearnOptions {
            low: 0.02,
            high: 0.98,
            min_flows: 3,
            windows_per_flow: 12,
        }
    }
}

/// What [`learn`] gave: the configuration and, per kind learned, the
/// flows and windows it was learned from.
#[derive(Debug, Clone)]
pub struct Learned {
    /// The configuration learned.
    pub config: MediaConfig,
    /// (kind, flows, windows) of each kind learned.
    pub kinds: Vec<(String, usize, usize)>,
}

/// The `q` quantile (0..1) of sorted values (nearest rank).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * q.clamp(0.0, 1.0)).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Learns intervals from the labelled tuples of `captures` (see the
/// module docs).
pub fn learn(captures: &[&CaptureFlows], opts: &LearnOptions) -> Learned {
    let mut config = MediaConfig::default();
    let mut kinds = Vec::new();
    for kind in ["audio", "video"] {
        let mut sizes = Vec::new();
        let mut rates = Vec::new();
        let mut n = 0;
        for f in captures.iter().flat_map(|c| &c.flows) {
            if f.kind.as_deref() != Some(kind) || f.packets.len() < config.min_packets as usize {
                continue;
            }
            n += 1;
            for w in windows(&f.packets, config.window)
                .into_iter()
                .take(opts.windows_per_flow)
            {
                sizes.push(w.size);
                if w.rate_kbps.is_finite() {
                    rates.push(w.rate_kbps);
                }
            }
        }
        if n < opts.min_flows || sizes.is_empty() {
            continue;
        }
        sizes.sort_by(f64::total_cmp);
        rates.sort_by(f64::total_cmp);
        let slot = match kind {
            "audio" => &mut config.audio,
            _ => &mut config.video,
        };
        let k: &mut KindConfig = slot.get_or_insert_with(|| KindConfig {
            size: Vec::new(),
            size_share: 0.75,
            iat_tolerance_ms: Some(15.0),
            iat_max_ms: None,
            iat_share: 0.6,
            bitrate_kbps: Vec::new(),
            bitrate_share: 0.0,
            size_cv_min: None,
            size_cv_share: 0.0,
        });
        k.size = vec![[
            quantile(&sizes, opts.low).floor(),
            quantile(&sizes, opts.high).ceil(),
        ]];
        if !k.bitrate_kbps.is_empty() && !rates.is_empty() {
            k.bitrate_kbps = vec![[
                quantile(&rates, opts.low).floor(),
                quantile(&rates, opts.high).ceil(),
            ]];
        }
        kinds.push((kind.to_string(), n, sizes.len()));
    }
    Learned { config, kinds }
}

/// A configuration as `--media-config` TOML (every key written).
pub fn to_toml(c: &MediaConfig) -> String {
    use std::fmt::Write as _;
    let ivs = |v: &[[f64; 2]]| {
        let parts: Vec<String> = v.iter().map(|i| format!("[{}, {}]", i[0], i[1])).collect();
        format!("[{}]", parts.join(", "))
    };
    let mut s = format!(
        "min_packets = {}\nwindow = {}\nsampling_correction = {}\n",
        c.min_packets, c.window, c.sampling_correction
    );
    for (name, k) in [("audio", &c.audio), ("video", &c.video), ("file", &c.file)] {
        let Some(k) = k else { continue };
        let _ = writeln!(s, "\n[{name}]");
        if !k.size.is_empty() {
            let _ = writeln!(s, "size = {}\nsize_share = {}", ivs(&k.size), k.size_share);
        }
        if let Some(t) = k.iat_tolerance_ms {
            let _ = writeln!(s, "iat_tolerance_ms = {t}\niat_share = {}", k.iat_share);
        }
        if let Some(t) = k.iat_max_ms {
            let _ = writeln!(s, "iat_max_ms = {t}");
        }
        if !k.bitrate_kbps.is_empty() {
            let _ = writeln!(
                s,
                "bitrate_kbps = {}\nbitrate_share = {}",
                ivs(&k.bitrate_kbps),
                k.bitrate_share
            );
        }
        if let Some(v) = k.size_cv_min {
            let _ = writeln!(
                s,
                "size_cv_min = {v}
size_cv_share = {}",
                k.size_cv_share
            );
        }
    }
    let (f, x) = (&c.feedback, &c.fixed_size);
    let _ = write!(
        s,
        "\n[feedback]\non = {}\npackets = [{}, {}]\nsize_max = {}\n\n[fixed_size]\non = {}\niat_ms = {}\nshare = {}\n",
        f.on, f.packets[0], f.packets[1], f.size_max, x.on, x.iat_ms, x.share
    );
    let t = &c.tunnel;
    let _ = write!(
        s,
        "\n[tunnel]\non = {}\niat_cv_max = {}\nshare = {}\n",
        t.on, t.iat_cv_max, t.share
    );
    let v = &c.voice_clock;
    let frames: Vec<String> = v.frames_ms.iter().map(|f| f.to_string()).collect();
    let _ = write!(
        s,
        "\n[voice_clock]\non = {}\nframes_ms = [{}]\ntolerance = {}\niat_cv_max = {}\n",
        v.on,
        frames.join(", "),
        v.tolerance,
        v.iat_cv_max
    );
    s
}

/// The detector's verdict on a tuple's packets: `Some("audio")` etc.
pub fn verdict(media: &Media, packets: &[Pkt]) -> Option<&'static str> {
    let mut st = <Media as Analyzer>::State::default();
    for (i, &(ts, size, from_client)) in packets.iter().enumerate() {
        let p = PacketView {
            ts,
            from_client,
            index: u32::try_from(i + 1).unwrap_or(u32::MAX),
            size,
            tcp_flags: 0,
            proto: 17,
            payload_len: 0,
            payload: &[],
            ip: &[],
            tcp_starts: &crate::analyze::TcpStarts::NONE,
        };
        media.packet(&mut st, &p);
        if let Some(k) = st.kind() {
            return Some(k);
        }
    }
    None
}

/// Flows and bytes, all and detected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Count {
    /// Flows (tuples).
    pub flows: u64,
    /// Flows with an audio or video verdict.
    pub hit_flows: u64,
    /// Their IP bytes.
    pub bytes: u64,
    /// IP bytes of the detected flows.
    pub hit_bytes: u64,
}

impl Count {
    /// Detected share of the flows and of the bytes.
    pub fn rates(&self) -> (f64, f64) {
        let r = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        (r(self.hit_flows, self.flows), r(self.hit_bytes, self.bytes))
    }

    fn add(&mut self, o: &Count) {
        self.flows += o.flows;
        self.hit_flows += o.hit_flows;
        self.bytes += o.bytes;
        self.hit_bytes += o.hit_bytes;
    }
}

/// Per row ("audio", "unspecified", "other UDP", each also with
/// " (≥30 packets)"): counts.
pub type Score = BTreeMap<String, Count>;

/// The name of the row of unlabelled tuples.
pub const OTHER: &str = "other UDP";

/// Scores configuration `c` on `captures` (see the module docs).
pub fn score(c: &MediaConfig, captures: &[&CaptureFlows]) -> Score {
    let media = Media::new(c);
    let mut s = Score::new();
    for f in captures.iter().flat_map(|c| &c.flows) {
        let hit = matches!(verdict(&media, &f.packets), Some("audio" | "video"));
        let row = f.kind.clone().unwrap_or_else(|| OTHER.to_string());
        let one = Count {
            flows: 1,
            hit_flows: u64::from(hit),
            bytes: f.bytes,
            hit_bytes: if hit { f.bytes } else { 0 },
        };
        s.entry(row.clone()).or_default().add(&one);
        if f.packets.len() >= c.min_packets as usize {
            s.entry(format!("{row} (≥{} packets)", c.min_packets))
                .or_default()
                .add(&one);
        }
    }
    s
}

/// Each capture scored with the intervals learned from all the others;
/// the counts added up. Returns the score and, per capture, what was
/// learned without it.
pub fn leave_one_capture_out(
    captures: &[CaptureFlows],
    opts: &LearnOptions,
) -> (Score, Vec<(String, Learned)>) {
    let mut total = Score::new();
    let mut folds = Vec::new();
    for (i, held) in captures.iter().enumerate() {
        let rest: Vec<&CaptureFlows> = captures
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, c)| c)
            .collect();
        let l = learn(&rest, opts);
        for (k, c) in score(&l.config, &[held]) {
            total.entry(k).or_default().add(&c);
        }
        folds.push((held.name.clone(), l));
    }
    (total, folds)
}

/// The score as a Markdown table.
pub fn markdown(s: &Score) -> String {
    let mut out = String::from(
        "| label and flows | flows | detected | rate (flows) | MB | rate (bytes) |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for (k, c) in s {
        let (rf, rb) = c.rates();
        out.push_str(&format!(
            "| {k} | {} | {} | {:.1} % | {:.2} | {:.1} % |\n",
            c.flows,
            c.hit_flows,
            rf * 100.0,
            c.bytes as f64 / 1e6,
            rb * 100.0
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream of `n` packets of `size` bytes every `gap_ms`, both ways.
    fn stream(n: usize, size: u16, gap_ms: u64) -> Vec<Pkt> {
        (0..n)
            .map(|i| (i as u64 * gap_ms * 1_000_000 / 2, size, i % 2 == 0))
            .collect()
    }

    fn flows(kind: Option<&str>, size: u16) -> TupleFlow {
        let packets = stream(80, size, 20);
        TupleFlow {
            kind: kind.map(str::to_string),
            bytes: packets.iter().map(|p| u64::from(p.1)).sum(),
            packets,
        }
    }

    #[test]
    fn windows_match_the_detector_and_learning_widens_audio_to_the_labels() {
        // 56-byte packets every 20 ms each way: under Table 6.2's 60 bytes.
        let w = windows(&stream(40, 56, 20), 10);
        assert_eq!(w.len(), 4);
        assert_eq!(w[0].size, 56.0);
        assert_eq!(w[0].iat_ns, 20e6);
        assert!((w[0].rate_kbps - 56.0 * 8.0 / 20.0).abs() < 1e-9);
        let cap = CaptureFlows {
            name: "a".into(),
            flows: vec![
                flows(Some("audio"), 56),
                flows(Some("audio"), 58),
                flows(Some("audio"), 60),
                flows(None, 1400),
            ],
        };
        let before = score(&MediaConfig::default(), &[&cap]);
        assert_eq!(before["audio (≥30 packets)"].hit_flows, 1);
        let l = learn(&[&cap], &LearnOptions::default());
        // 80 packets: 4 windows each way, 8 a flow.
        assert_eq!(l.kinds, vec![("audio".to_string(), 3, 24)]);
        let a = l.config.audio.as_ref().unwrap();
        assert_eq!(a.size, vec![[56.0, 60.0]]);
        let text = to_toml(&l.config);
        assert_eq!(MediaConfig::from_toml(&text, "learned").unwrap(), l.config);
        let after = score(&l.config, &[&cap]);
        assert_eq!(after["audio (≥30 packets)"].hit_flows, 3);
        assert_eq!(after[OTHER].hit_flows, 0);
        // Too few labelled flows: Table 6.2 stays.
        let few = LearnOptions {
            min_flows: 4,
            ..LearnOptions::default()
        };
        assert_eq!(learn(&[&cap], &few).config, MediaConfig::default());
    }
}
