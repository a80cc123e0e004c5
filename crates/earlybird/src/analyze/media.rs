//! The `media` analyzer: real-time media detection from packet sizes and
//! capture times alone (no payload), after the Skypeness detector of the
//! thesis (Santiago del Río 2013, Ch. 6.4, Table 6.2).
//!
//! Contract:
//! - The statistical windows examine UDP flows only. The clear-header
//!   layer (`clear.rs`) reads UDP flows and TCP flows whose first payload
//!   is TURN or ICE-TCP framing (`clear::tcp_framing`). Any other flow
//!   gets an empty verdict and the analyzer is done with it at that
//!   packet (its state
//!   never made, nor by a TCP flow's packets before its first payload:
//!   [`Analyzer::declines`]), as it is with a flow the windows or a guard
//!   decided once no RTP stream can replace that verdict (the
//!   clear-header layer off, past its `CLEAR_PACKETS`, or RTP ruled
//!   out: `RTP_TRIES`) and, for a media verdict, the per-second figures
//!   are not taken ([`Media::count_per_second`]): no later packet of those
//!   flows can change their record or the figures taken.
//! - Each direction of a flow is cut into windows of [`MediaConfig::window`]
//!   packets (10 by default). Per window: the mean IP length, the mean
//!   inter-arrival between consecutive packets of that direction (the first
//!   packet of a direction has none, so the first window averages one fewer)
//!   and the bitrate `mean size × 8 / mean inter-arrival`.
//! - Per media kind (audio, video, file transfer, in that order) and per
//!   characteristic the kind tests, the share of the flow's windows (both
//!   directions pooled) that pass: mean size in one of the kind's size
//!   intervals; bitrate in one of its bitrate intervals; mean inter-arrival
//!   within ± the kind's tolerance of the previous window's of the same
//!   direction (this share is over the windows that have a previous one);
//!   size variation: the window's sizes have a coefficient of variation
//!   (population standard deviation / mean) of at least the kind's
//!   `size_cv_min` (not tested unless configured; Table 6.2 has no such
//!   test).
//! - After each window, once the flow has at least
//!   [`MediaConfig::min_packets`] packets and `min_packets / window`
//!   windows, the first kind whose every share is strictly greater than its
//!   threshold is the verdict. The verdict is then fixed (a real-time
//!   decision: the analyzer does no more work for the flow) and the record
//!   says the kind, the smallest of its shares at that moment and the
//!   flow's packet index at which it was decided. A flow never decided has
//!   an empty verdict, and its share and packet are null.
//! - Packet sampling (`--sample POLICY:N`): the detector sees only the
//!   kept packets, so each gap it measures spans about N gaps of the flow.
//!   With [`MediaConfig::sampling_correction`] (the default) every mean
//!   inter-arrival is divided by N before it is tested (and the bitrate
//!   computed from it), as the thesis's modified detector does (Ch. 6.5);
//!   without it the gaps are tested as seen. Packet counts
//!   (`min_packets`, windows, the decision packet) are of kept packets.
//! - Per-second figures: per kind, the analyzer counts the flows it
//!   decides, the media flows that end, and the packets and IP bytes of
//!   media flows from the deciding packet on; the shard takes them each
//!   second of the per-second statistics ([`Media::take_counts`]). A run
//!   that keeps none says so ([`Media::count_per_second`], before its
//!   first packet): the packets and bytes are then not counted, nor are
//!   the flows followed to their ends for them.
//! - A kind with [`KindConfig::iat_max_ms`] (audio by default, 100 ms)
//!   counts a window as stable only when its mean inter-arrival is also at
//!   most that long.
//! - Guards, checked at every check before the kinds (each on by default,
//!   each can be turned off or tuned in TOML): when one fires the flow is
//!   decided not media (fixed like a verdict; the record's verdict is
//!   empty). Transport feedback ([`FeedbackGuard`]): the direction with
//!   fewer packets has between `packets[0]` and `packets[1]` times the
//!   packets of the other (counted since the flow began) at a mean size
//!   under `size_max` times the other's: acknowledgements of a congestion-
//!   controlled transfer (QUIC), not a media clock. Fixed-size bulk
//!   ([`FixedSizeGuard`]): more than `share` of the flow's windows have all
//!   their packets of one size and a mean inter-arrival under `iat_ms`.
//!   With the clear-header layer on, also: most of the flow's first 10
//!   datagrams not media by their shape (a DNS or ONC RPC message, or a
//!   body repeated from the previous datagram of its direction: `shape.rs`),
//!   or a DTLS tunnel (`clear.rs`).
//! - Voice clock ([`VoiceClock`]): when the windows find a flow audio,
//!   its regular windows (not their direction's first, gaps of a
//!   coefficient of variation at most `iat_cv_max`, median gap from the
//!   shortest frame to 100 ms) must not sit more often off every voice
//!   frame duration (`frames_ms`, within `tolerance`) than on one; else
//!   the flow is not media, decided as a guard decides. Each window keeps
//!   its first `GAPS` gaps for the median. Off under packet sampling.
//! - A flow every datagram of which (so far) is a WireGuard message
//!   (`wireguard.rs`) has the windows read its sizes net of the tunnel's
//!   overhead (the inner packet with its padding), and when the windows
//!   find it audio or video, its gaps tell which ([`TunnelRule`]): one
//!   packet per codec frame (regular gaps) is audio, bursts are video.
//!   The inner packets are encrypted, so no other layer can; a size bound
//!   cannot either (Opus runs from 6 to 510 kbit/s).
//! - Intervals and thresholds come from [`MediaConfig`]: Table 6.2 and the
//!   guards by default, or a TOML file ([`MediaConfig::from_toml`]). Pure
//!   arithmetic on sizes and timestamps; never fails.

use serde::Deserialize;

use super::{Action, Analyzer, PacketView};

pub(crate) mod clear;
pub(crate) mod demux;
pub(crate) mod dtls;
pub(crate) mod ports;
pub(crate) mod shape;
pub(crate) mod stun;
pub(crate) mod turn;
pub(crate) mod wireguard;
use crate::schema::{Cells, Field, FieldType};
use crate::time::Nanos;

const UDP: u8 = 17;
const TCP: u8 = 6;
/// Packets of a flow the clear-header layer reads before it decides; a
/// flow it decided is read to its end (for the quality figures).
const CLEAR_PACKETS: u32 = 1000;
/// RTP-class datagrams of a UDP flow that rule RTP out when none of them
/// is a consistent step of a stream and the flow showed no STUN, TURN or
/// DTLS handshake ([`clear::Clear::rtp_ruled_out`]): the clear-header
/// layer then reads no more of it. Datagrams that are not RTP-class do
/// not count (an app's own framing can precede its RTP: LINE's 40 first
/// datagrams of a call on the corpus).
const RTP_TRIES: u32 = 8;

/// Tests of one media kind; a characteristic with no intervals (or no
/// tolerance) is not tested.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KindConfig {
    /// Mean IP length intervals, bytes, inclusive.
    #[serde(default)]
    pub size: Vec<[f64; 2]>,
    /// Share of windows whose mean size must be in `size` (strictly more).
    #[serde(default)]
    pub size_share: f64,
    /// Largest change of the mean inter-arrival from the previous window's,
    /// milliseconds.
    #[serde(default)]
    pub iat_tolerance_ms: Option<f64>,
    /// Longest mean inter-arrival of a stable window, milliseconds (with
    /// `iat_tolerance_ms`; leave out: no bound).
    #[serde(default)]
    pub iat_max_ms: Option<f64>,
    /// Share of windows whose mean inter-arrival must be stable.
    #[serde(default)]
    pub iat_share: f64,
    /// Bitrate intervals, kbit/s, inclusive.
    #[serde(default)]
    pub bitrate_kbps: Vec<[f64; 2]>,
    /// Share of windows whose bitrate must be in `bitrate_kbps`.
    #[serde(default)]
    pub bitrate_share: f64,
    /// Smallest coefficient of variation of the packet sizes inside a
    /// window (standard deviation / mean) for the window to pass the size
    /// variation test; leave out: not tested.
    #[serde(default)]
    pub size_cv_min: Option<f64>,
    /// Share of windows whose size variation must be at least `size_cv_min`.
    #[serde(default)]
    pub size_cv_share: f64,
}

impl KindConfig {
    fn tests(&self) -> bool {
        !self.size.is_empty()
            || self.iat_tolerance_ms.is_some()
            || !self.bitrate_kbps.is_empty()
            || self.size_cv_min.is_some()
    }
}

/// The detector's configuration (defaults: thesis Table 6.2).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MediaConfig {
    /// Flows with fewer packets are never decided. Default 30.
    pub min_packets: u32,
    /// Packets per window. Default 10.
    pub window: u32,
    /// Audio tests (in a file: not tested unless given).
    #[serde(default)]
    pub audio: Option<KindConfig>,
    /// Video tests (in a file: not tested unless given).
    #[serde(default)]
    pub video: Option<KindConfig>,
    /// File-transfer tests (in a file: not tested unless given).
    #[serde(default)]
    pub file: Option<KindConfig>,
    /// With packet sampling 1 in N, divide the measured inter-arrivals by
    /// N (thesis Ch. 6.5). Default true; no effect without sampling.
    pub sampling_correction: bool,
    /// The transport feedback guard (on by default, also in a file that
    /// leaves it out).
    pub feedback: FeedbackGuard,
    /// The fixed-size bulk guard (on by default, also in a file that leaves
    /// it out).
    pub fixed_size: FixedSizeGuard,
    /// The clear-header layer (RTP, also inside TURN; STUN; DTLS), read
    /// before the windows. Default true, also in a file that leaves it out.
    #[serde(default = "yes")]
    pub clear: bool,
    /// Flows seen to be a WireGuard tunnel (on by default, also in a file
    /// that leaves it out).
    pub tunnel: TunnelRule,
    /// The voice clock rule (on by default, also in a file that leaves it
    /// out).
    pub voice_clock: VoiceClock,
}

fn yes() -> bool {
    true
}

/// Transport feedback guard: a flow whose smaller direction (by packets)
/// has between `packets[0]` and `packets[1]` of the bigger direction's
/// packets, at a mean IP size under `size_max` times the bigger one's, is
/// not media. Default on, [0.2, 0.7], 0.5.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FeedbackGuard {
    /// `false`: not tested.
    pub on: bool,
    /// Packets of the smaller direction per packet of the bigger, inclusive.
    pub packets: [f64; 2],
    /// Mean size of the smaller direction's packets over the bigger's
    /// (strictly less).
    pub size_max: f64,
}

impl Default for FeedbackGuard {
    fn default() -> Self {
        FeedbackGuard {
            on: true,
            packets: [0.2, 0.7],
            size_max: 0.5,
        }
    }
}

/// Fixed-size bulk guard: a flow of which more than `share` of the windows
/// have all their packets of one size and a mean inter-arrival under
/// `iat_ms` is not media. Default on, 6 ms, 0.5.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FixedSizeGuard {
    /// `false`: not tested.
    pub on: bool,
    /// A window is fast when its mean inter-arrival is under this, ms.
    pub iat_ms: f64,
    /// Share of the flow's windows that must be fixed-size and fast
    /// (strictly more).
    pub share: f64,
}

impl Default for FixedSizeGuard {
    fn default() -> Self {
        FixedSizeGuard {
            on: true,
            iat_ms: 6.0,
            share: 0.5,
        }
    }
}

/// A flow every datagram of which is a WireGuard message
/// (`wireguard::Message`) has its sizes read net of the tunnel's
/// overhead (the inner packet's length with its padding), and, once the
/// windows find it audio or video, the kind is told by timing: audio when
/// more than `share` of its windows with two gaps or more (and a previous
/// window in their direction: the first holds the setup) have gaps of a
/// coefficient of variation (population standard deviation / mean) of at
/// most `iat_cv_max` (one packet per codec frame), video otherwise (a
/// video frame goes as a burst of packets). Default on, 0.5, 0.5.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TunnelRule {
    /// `false`: WireGuard flows are read as any other.
    pub on: bool,
    /// Largest coefficient of variation of a regular window's gaps.
    pub iat_cv_max: f64,
    /// Share of the windows that must be regular for audio (strictly more).
    pub share: f64,
}

impl Default for TunnelRule {
    fn default() -> Self {
        TunnelRule {
            on: true,
            iat_cv_max: 0.5,
            share: 0.5,
        }
    }
}

impl Default for MediaConfig {
    /// Table 6.2 of the thesis: audio size [60, 200] B (share 0.75),
    /// inter-arrival ±15 ms (0.6), bitrate [0, 150] kbit/s (0.75); video
    /// size [150, 1200] B (0.19), inter-arrival ±15 ms (0.6); file transfer
    /// size [480, 540] ∪ [950, 1050] ∪ [1310, 1380] B (0.44). Besides:
    /// audio's stable windows at most 100 ms apart, and both guards on.
    fn default() -> Self {
        MediaConfig {
            min_packets: 30,
            window: 10,
            audio: Some(KindConfig {
                size: vec![[60.0, 200.0]],
                size_share: 0.75,
                iat_tolerance_ms: Some(15.0),
                iat_max_ms: Some(100.0),
                iat_share: 0.6,
                bitrate_kbps: vec![[0.0, 150.0]],
                bitrate_share: 0.75,
                size_cv_min: None,
                size_cv_share: 0.0,
            }),
            video: Some(KindConfig {
                size: vec![[150.0, 1200.0]],
                size_share: 0.19,
                iat_tolerance_ms: Some(15.0),
                iat_max_ms: None,
                iat_share: 0.6,
                bitrate_kbps: Vec::new(),
                bitrate_share: 0.0,
                size_cv_min: None,
                size_cv_share: 0.0,
            }),
            file: Some(KindConfig {
                size: vec![[480.0, 540.0], [950.0, 1050.0], [1310.0, 1380.0]],
                size_share: 0.44,
                iat_tolerance_ms: None,
                iat_max_ms: None,
                iat_share: 0.0,
                bitrate_kbps: Vec::new(),
                bitrate_share: 0.0,
                size_cv_min: None,
                size_cv_share: 0.0,
            }),
            sampling_correction: true,
            feedback: FeedbackGuard::default(),
            fixed_size: FixedSizeGuard::default(),
            clear: true,
            tunnel: TunnelRule::default(),
            voice_clock: VoiceClock::default(),
        }
    }
}

/// The voice clock rule (`[voice_clock]`): a voice codec sends one packet
/// per frame, and frame durations are few (Opus 2.5–60 ms, RFC 6716 and
/// 7587; G.711, G.729 10–30 ms; iLBC 20/30 ms; AMR and GSM 20 ms; G.723.1
/// 30 ms). When the windows find a flow audio, its regular windows (gaps'
/// coefficient of variation at most `iat_cv_max`, not their direction's
/// first) have their median gap tested: within `tolerance` (relative) of
/// one of `frames_ms`, or not. More windows off a frame than on it: the
/// flow is not media (a periodic exchange at another clock, a game's 30 Hz
/// or 20 Hz tick), decided as a guard decides. Without a regular window
/// the audio verdict stands. Not applied under packet sampling (the gaps
/// seen are then multiples of the sender's). Default on.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VoiceClock {
    /// `false`: not tested.
    pub on: bool,
    /// Frame durations, milliseconds.
    pub frames_ms: Vec<f64>,
    /// Largest relative distance of a window's median gap from a frame
    /// duration.
    pub tolerance: f64,
    /// Largest coefficient of variation of a regular window's gaps.
    pub iat_cv_max: f64,
}

impl Default for VoiceClock {
    fn default() -> Self {
        VoiceClock {
            on: true,
            frames_ms: vec![2.5, 5.0, 10.0, 20.0, 30.0, 40.0, 60.0],
            tolerance: 0.08,
            iat_cv_max: 0.5,
        }
    }
}

/// What is wrong with a media configuration.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The text is not TOML, or a key is unknown or of the wrong type.
    #[error("{what}: {reason}")]
    Toml {
        /// The configuration's source (a file name).
        what: String,
        /// What the TOML reader said (with the line).
        reason: String,
    },
    /// A configuration read from `what` that cannot run.
    #[error("{what}: {source}")]
    In {
        /// The configuration's source (a file name).
        what: String,
        /// What is wrong.
        source: Box<ConfigError>,
    },
    /// The window is out of range.
    #[error("media window must be 2..=1000, got {0}")]
    Window(u32),
    /// No kind to test.
    #[error("media: no kind ([audio], [video] or [file]) to test")]
    NoKind,
    /// A kind with no test.
    #[error("media kind {0} tests nothing")]
    Untested(&'static str),
    /// A kind's interval that is empty or not a number.
    #[error("media kind {kind}: bad interval {interval:?}")]
    Interval {
        /// The kind.
        kind: &'static str,
        /// The interval.
        interval: [f64; 2],
    },
    /// The feedback guard's interval is empty or not a number.
    #[error("media feedback: bad interval {0:?}")]
    Feedback([f64; 2]),
    /// The voice clock rule's frames or tolerance are not positive numbers.
    #[error("media voice_clock: frames_ms must be > 0 and tolerance >= 0")]
    VoiceClock,
}

impl MediaConfig {
    /// Reads a configuration from TOML text (keys as the fields of
    /// [`MediaConfig`] and [`KindConfig`]; a kind the file leaves out is
    /// not tested, `min_packets` and `window` left out keep their
    /// defaults); `what` names the source in errors.
    pub fn from_toml(text: &str, what: &str) -> Result<MediaConfig, ConfigError> {
        let c: MediaConfig = toml::from_str(text).map_err(|e| ConfigError::Toml {
            what: what.to_string(),
            reason: e.to_string(),
        })?;
        c.check().map_err(|e| ConfigError::In {
            what: what.to_string(),
            source: Box::new(e),
        })?;
        Ok(c)
    }

    /// `Ok` when the configuration can run.
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.window < 2 || self.window > 1000 {
            return Err(ConfigError::Window(self.window));
        }
        if self.kinds().next().is_none() {
            return Err(ConfigError::NoKind);
        }
        for (name, k) in self.kinds() {
            if !k.tests() {
                return Err(ConfigError::Untested(name));
            }
            for iv in k.size.iter().chain(&k.bitrate_kbps) {
                if iv[0].is_nan() || iv[1].is_nan() || iv[0] > iv[1] {
                    return Err(ConfigError::Interval {
                        kind: name,
                        interval: *iv,
                    });
                }
            }
        }
        let f = &self.feedback;
        if f.packets[0].is_nan() || f.packets[1].is_nan() || f.packets[0] > f.packets[1] {
            return Err(ConfigError::Feedback(f.packets));
        }
        let v = &self.voice_clock;
        if v.on
            && (v.frames_ms.iter().any(|f| f.is_nan() || *f <= 0.0)
                || v.tolerance.is_nan()
                || v.tolerance < 0.0)
        {
            return Err(ConfigError::VoiceClock);
        }
        Ok(())
    }

    fn kinds(&self) -> impl Iterator<Item = (&'static str, &KindConfig)> {
        [
            ("audio", &self.audio),
            ("video", &self.video),
            ("file", &self.file),
        ]
        .into_iter()
        .filter_map(|(n, k)| k.as_ref().map(|k| (n, k)))
    }
}

/// Kinds, in verdict order.
const KINDS: [&str; 3] = ["audio", "video", "file"];

/// One kind's tests, in the units the analyzer computes in.
#[derive(Debug, Clone)]
struct Kind {
    size: Vec<[f64; 2]>,
    size_share: f64,
    /// Tolerance in nanoseconds.
    iat_tol: Option<f64>,
    /// Longest stable mean inter-arrival, nanoseconds.
    iat_max: Option<f64>,
    iat_share: f64,
    rate: Vec<[f64; 2]>,
    rate_share: f64,
    size_cv: Option<f64>,
    size_cv_share: f64,
}

/// The analyzer: the configuration it runs with.
#[derive(Debug, Clone)]
pub struct Media {
    kinds: [Option<Kind>; 3],
    min_packets: u32,
    window: u32,
    min_windows: u16,
    /// What measured inter-arrivals are divided by (N of the run's
    /// sampling with the correction on, else 1).
    iat_divisor: f64,
    /// Transport feedback guard: packets ratio interval and size ratio
    /// bound (`None`: off).
    feedback: Option<([f64; 2], f64)>,
    /// Fixed-size bulk guard: inter-arrival bound, ns, and share (`None`:
    /// off).
    fixed_size: Option<(f64, f64)>,
    /// Per kind, what the flows of this table did since the counts were
    /// last taken ([`Media::take_counts`]; one shard's table: no sharing).
    counts: [CellCounts; 3],
    /// The clear-header layer is on.
    clear: bool,
    /// [`TunnelRule`]: regular window's gap CV bound and share (`None`:
    /// off).
    tunnel: Option<(f64, f64)>,
    /// Someone takes the per-second figures ([`Media::count_per_second`]):
    /// a media flow is then followed to its end for its packets and bytes.
    counting: bool,
    /// [`VoiceClock`] (`None`: off, or packet sampling).
    voice: Option<Voice>,
}

/// [`VoiceClock`] in the analyzer's units.
#[derive(Debug, Clone)]
struct Voice {
    /// Per frame duration, the interval of median gaps on it, in
    /// [`GAP_UNIT_NS`].
    frames: Vec<[f64; 2]>,
    /// The median gaps that are a clock at all: from the shortest frame's
    /// interval to [`VOICE_GAP_MAX_NS`] (or the longest frame's).
    clocked: [f64; 2],
    iat_cv_max: f64,
}

/// The longest median gap the voice clock rule counts: a conversational
/// codec packetizes at most this much (audio's 100 ms bound); longer is
/// silence (discontinuous transmission), not a clock.
const VOICE_GAP_MAX_NS: u64 = 100_000_000;

/// Gaps of a window kept for its median, at most (a longer window's first).
const GAPS: usize = 16;
/// The unit of a kept gap, ns (0.1 ms; a longer gap saturates at 6.5 s).
const GAP_UNIT_NS: u64 = 100_000;

/// The per-second figures of one media kind in one flow table: flows
/// decided, media flows ended, and the packets and IP bytes media flows
/// carried from the packet that decided them on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KindCounts {
    /// Flows decided of this kind.
    pub decided: u64,
    /// Flows of this kind that ended.
    pub ended: u64,
    /// Packets of flows of this kind, from the deciding packet on.
    pub packets: u64,
    /// IP bytes of those packets.
    pub bytes: u64,
}

/// [`KindCounts`] behind cells: the analyzer sees packets through `&self`.
#[derive(Debug, Clone, Default)]
struct CellCounts {
    decided: std::cell::Cell<u64>,
    ended: std::cell::Cell<u64>,
    packets: std::cell::Cell<u64>,
    bytes: std::cell::Cell<u64>,
}

fn bump(c: &std::cell::Cell<u64>, by: u64) {
    c.set(c.get().wrapping_add(by));
}

impl Default for Media {
    fn default() -> Self {
        Media::new(&MediaConfig::default())
    }
}

impl Media {
    /// The analyzer for `c` (checked by [`MediaConfig::check`]).
    pub fn new(c: &MediaConfig) -> Media {
        let kind = |k: &Option<KindConfig>| {
            k.as_ref().map(|k| Kind {
                size: k.size.clone(),
                size_share: k.size_share,
                iat_tol: k.iat_tolerance_ms.map(|ms| ms * 1e6),
                iat_max: k.iat_max_ms.map(|ms| ms * 1e6),
                iat_share: k.iat_share,
                rate: k.bitrate_kbps.clone(),
                rate_share: k.bitrate_share,
                size_cv: k.size_cv_min,
                size_cv_share: k.size_cv_share,
            })
        };
        let window = c.window.max(2);
        Media {
            kinds: [kind(&c.audio), kind(&c.video), kind(&c.file)],
            min_packets: c.min_packets,
            window,
            min_windows: (c.min_packets / window).min(u32::from(u16::MAX)) as u16,
            iat_divisor: 1.0,
            feedback: c
                .feedback
                .on
                .then_some((c.feedback.packets, c.feedback.size_max)),
            fixed_size: c
                .fixed_size
                .on
                .then_some((c.fixed_size.iat_ms * 1e6, c.fixed_size.share)),
            counts: Default::default(),
            clear: c.clear,
            tunnel: c.tunnel.on.then_some((c.tunnel.iat_cv_max, c.tunnel.share)),
            counting: true,
            voice: c.voice_clock.on.then(|| {
                let frames: Vec<[f64; 2]> = c
                    .voice_clock
                    .frames_ms
                    .iter()
                    .map(|ms| {
                        let unit = ms * 1e6 / GAP_UNIT_NS as f64;
                        let tol = c.voice_clock.tolerance;
                        [unit * (1.0 - tol), unit * (1.0 + tol)]
                    })
                    .collect();
                let lo = frames.iter().map(|f| f[0]).fold(f64::INFINITY, f64::min);
                let hi = frames
                    .iter()
                    .map(|f| f[1])
                    .fold((VOICE_GAP_MAX_NS / GAP_UNIT_NS) as f64, f64::max);
                Voice {
                    frames,
                    clocked: [lo, hi],
                    iat_cv_max: c.voice_clock.iat_cv_max,
                }
            }),
        }
    }

    /// Whether the per-second figures are taken ([`Media::take_counts`];
    /// on by default). Off, a flow the windows decided media is left once
    /// the clear-header layer reads no more of it: only the packets and
    /// bytes counted would have changed.
    pub fn count_per_second(&mut self, on: bool) {
        self.counting = on;
    }

    /// Per kind (audio, video, file): what the flows did since the last
    /// call (see [`KindCounts`]); the counts start again from zero.
    pub fn take_counts(&self) -> [KindCounts; 3] {
        self.counts.each_ref().map(|c| KindCounts {
            decided: c.decided.take(),
            ended: c.ended.take(),
            packets: c.packets.take(),
            bytes: c.bytes.take(),
        })
    }

    /// The analyzer for `c` in a run that keeps 1 packet in `rate`.
    pub fn sampled(c: &MediaConfig, rate: u32) -> Media {
        let mut m = Media::new(c);
        if c.sampling_correction {
            m.iat_divisor = f64::from(rate.max(1));
        }
        if rate > 1 {
            m.voice = None;
        }
        m
    }
}

/// One direction's window in progress.
#[derive(Debug, Clone, Copy, Default)]
struct Dir {
    /// Packets seen in this direction (0: none yet).
    seen: u32,
    /// IP bytes seen in this direction.
    bytes: u64,
    last_ts: Nanos,
    /// Packets in the current window.
    n: u32,
    size_sum: u64,
    /// Sum of the squared sizes of the current window.
    size_sq: u64,
    iat_sum: u64,
    /// Sum of the squared inter-arrivals of the current window, ns².
    iat_sq: f64,
    iat_n: u32,
    /// Mean inter-arrival of the previous window, ns (`None`: no window yet).
    prev_iat: Option<f64>,
    /// The current window's first [`GAPS`] gaps, in [`GAP_UNIT_NS`] (kept
    /// only with the voice clock rule on).
    gaps: [u16; GAPS],
}

/// Per-flow state.
#[derive(Debug, Clone, Default)]
pub struct State {
    dirs: [Dir; 2],
    windows: u16,
    /// Windows that have a previous window in their direction.
    iat_windows: u16,
    /// Per kind: windows passing size, inter-arrival, bitrate, size
    /// variation.
    pass: [[u16; 4]; 3],
    /// Windows of one packet size and a mean inter-arrival under the
    /// fixed-size guard's bound.
    fixed: u16,
    /// Decided: kind index ([`NOT_MEDIA`]: a guard fired), share, packet
    /// index.
    verdict: Option<(u8, f32, u32)>,
    /// What the payload showed (allocated at the first packet the
    /// demultiplexer does not call QUIC or unknown).
    clear: Option<Box<clear::Clear>>,
    /// The layer that decided: [`BY_WINDOWS`], [`BY_RTP`] (0: none).
    by: u8,
    /// Of the flow's first [`SHAPE_PACKETS`] datagrams with a payload: how
    /// many were read, how many had a shape that is not media (a DNS or
    /// RPC message, or a body repeated from the previous datagram of its
    /// direction, [`shape::Body`]).
    shapes: [u8; 2],
    /// Per direction, the last of those datagrams' summary.
    bodies: [shape::Body; 2],
    /// Nothing more to learn or count of the flow ([`Analyzer::done`]).
    done: bool,
    /// A TCP flow's framing, from its first payload.
    tcp: Option<clear::TcpFraming>,
    /// The clear-header layer reads no more of the flow: RTP ruled out
    /// ([`RTP_TRIES`]).
    clear_off: bool,
    /// [`TUNNEL_UNSEEN`], [`TUNNEL_WG`] (every datagram so far a WireGuard
    /// message) or [`TUNNEL_NOT`].
    tunnel: u8,
    /// Of a WireGuard flow's windows with two gaps or more and a previous
    /// window in their direction: how many, and how many had regular gaps
    /// ([`TunnelRule`]).
    gapped: [u16; 2],
    /// Of the flow's windows with regular gaps and a previous window in
    /// their direction: how many, and how many had a median gap on a voice
    /// frame duration ([`VoiceClock`]).
    voiced: [u16; 2],
}

/// `State::tunnel`: no datagram with a payload yet.
const TUNNEL_UNSEEN: u8 = 0;
/// `State::tunnel`: every datagram so far a WireGuard message.
const TUNNEL_WG: u8 = 1;
/// `State::tunnel`: not a WireGuard flow (or the rule off).
const TUNNEL_NOT: u8 = 2;

/// Datagrams per flow the shape guard reads.
const SHAPE_PACKETS: u8 = 10;

/// `State::by`: the statistical windows decided.
const BY_WINDOWS: u8 = 1;
/// `State::by`: an RTP stream in clear decided.
const BY_RTP: u8 = 2;

/// The verdict's kind index when a guard decided the flow is not media.
const NOT_MEDIA: u8 = KINDS.len() as u8;

impl State {
    /// The verdict's kind once decided (`audio`, `video`, `file`); `None`
    /// undecided or not media.
    pub fn kind(&self) -> Option<&'static str> {
        self.verdict
            .and_then(|(k, _, _)| KINDS.get(usize::from(k)).copied())
    }
}

/// Coefficient of variation (population standard deviation / mean) of the
/// `n` sizes of a window from their sum of squares and mean.
fn size_cv(sq: u64, mean: f64, n: u32) -> f64 {
    if mean <= 0.0 {
        return 0.0;
    }
    let var = (sq as f64 / f64::from(n) - mean * mean).max(0.0);
    var.sqrt() / mean
}

fn inside(v: f64, ivs: &[[f64; 2]]) -> bool {
    ivs.iter().any(|iv| v >= iv[0] && v <= iv[1])
}

impl Media {
    /// Accounts a completed window of direction `d` and decides when it can.
    fn window_done(&self, st: &mut State, d: usize, index: u32) {
        let w = &mut st.dirs[d];
        let size = w.size_sum as f64 / f64::from(w.n);
        let iat = if w.iat_n == 0 {
            0.0
        } else {
            w.iat_sum as f64 / f64::from(w.iat_n) / self.iat_divisor
        };
        let rate_kbps = if iat > 0.0 {
            size * 8.0e6 / iat
        } else {
            f64::INFINITY
        };
        let size_cv = size_cv(w.size_sq, size, w.n);
        // The gaps' coefficient of variation (scale-free: no divisor).
        let gaps_cv = (w.iat_n >= 2).then(|| {
            let mean = w.iat_sum as f64 / f64::from(w.iat_n);
            let var = (w.iat_sq / f64::from(w.iat_n) - mean * mean).max(0.0);
            if mean > 0.0 {
                var.sqrt() / mean
            } else {
                0.0
            }
        });
        // The median gap, of the window's first GAPS gaps.
        let median = match &self.voice {
            Some(v) if w.iat_n >= 2 && gaps_cv.is_some_and(|cv| cv <= v.iat_cv_max) => {
                let n = (w.iat_n as usize).min(GAPS);
                let g = &mut w.gaps[..n];
                g.sort_unstable();
                Some((f64::from(g[(n - 1) / 2]) + f64::from(g[n / 2])) / 2.0)
            }
            _ => None,
        };
        // All sizes equal: n Σs² = (Σs)² (exact in integers).
        let one_size = w.size_sq * u64::from(w.n) == w.size_sum * w.size_sum;
        let prev = w.prev_iat.replace(iat);
        w.n = 0;
        w.size_sum = 0;
        w.size_sq = 0;
        w.iat_sum = 0;
        w.iat_sq = 0.0;
        w.iat_n = 0;
        // The first window of a direction holds the flow's setup (the
        // tunnel's handshake, ICE, DTLS): left out, as from the stability
        // share.
        if let (TUNNEL_WG, Some((cv_max, _)), Some(cv), Some(_)) =
            (st.tunnel, self.tunnel, gaps_cv, prev)
        {
            st.gapped[0] = st.gapped[0].saturating_add(1);
            st.gapped[1] = st.gapped[1].saturating_add(u16::from(cv <= cv_max));
        }
        st.windows = st.windows.saturating_add(1);
        if prev.is_some() {
            st.iat_windows = st.iat_windows.saturating_add(1);
            // A median under the shortest frame is a burst (a backlog
            // flushed, packets of one video frame), over 100 ms silence:
            // neither is a clock.
            if let (Some(m), Some(v)) = (median, &self.voice) {
                if m >= v.clocked[0] && m <= v.clocked[1] {
                    let on = v.frames.iter().any(|f| m >= f[0] && m <= f[1]);
                    st.voiced[0] = st.voiced[0].saturating_add(1);
                    st.voiced[1] = st.voiced[1].saturating_add(u16::from(on));
                }
            }
        }
        if one_size && self.fixed_size.is_some_and(|(max, _)| iat < max) {
            st.fixed = st.fixed.saturating_add(1);
        }
        for (k, kind) in self.kinds.iter().enumerate() {
            let Some(kind) = kind else { continue };
            let p = &mut st.pass[k];
            if inside(size, &kind.size) {
                p[0] += 1;
            }
            if let (Some(tol), Some(prev)) = (kind.iat_tol, prev) {
                if (iat - prev).abs() <= tol && kind.iat_max.is_none_or(|max| iat <= max) {
                    p[1] += 1;
                }
            }
            if inside(rate_kbps, &kind.rate) {
                p[2] += 1;
            }
            if kind.size_cv.is_some_and(|min| size_cv >= min) {
                p[3] += 1;
            }
        }
        if index < self.min_packets || st.windows < self.min_windows.max(1) {
            return;
        }
        let all = f64::from(st.windows);
        // A DTLS tunnel: application data records in most packets and no
        // RTP (DTLS-SRTP sends its media as SRTP, not as DTLS records).
        let seen = st.dirs[0].seen + st.dirs[1].seen;
        // Most of the first datagrams DNS or ONC RPC messages, or bodies
        // repeated under a new head.
        let shaped = st.shapes[1] * 2 > st.shapes[0];
        if self.guarded(st, all) || shaped || st.clear.as_ref().is_some_and(|c| c.dtls_tunnel(seen))
        {
            st.verdict = Some((NOT_MEDIA, 0.0, index));
            return;
        }
        let timed = f64::from(st.iat_windows);
        for (k, kind) in self.kinds.iter().enumerate() {
            let Some(kind) = kind else { continue };
            let p = st.pass[k];
            let mut least = f64::INFINITY;
            let mut ok = true;
            if !kind.size.is_empty() {
                let s = f64::from(p[0]) / all;
                ok &= s > kind.size_share;
                least = least.min(s);
            }
            if kind.iat_tol.is_some() {
                let s = if timed > 0.0 {
                    f64::from(p[1]) / timed
                } else {
                    0.0
                };
                ok &= s > kind.iat_share;
                least = least.min(s);
            }
            if !kind.rate.is_empty() {
                let s = f64::from(p[2]) / all;
                ok &= s > kind.rate_share;
                least = least.min(s);
            }
            if kind.size_cv.is_some() {
                let s = f64::from(p[3]) / all;
                ok &= s > kind.size_cv_share;
                least = least.min(s);
            }
            if ok {
                // An RTP stream in clear on its way to a verdict: let it
                // decide (the windows check again at the next window).
                if st.clear.as_ref().is_some_and(|c| c.promising()) {
                    return;
                }
                let (k, least) = self.tunnel_kind(st, k, least);
                // Audio whose regular windows are clocked off every voice
                // frame duration: not media.
                if k == 0
                    && self.voice.is_some()
                    && u32::from(st.voiced[1]) * 2 < u32::from(st.voiced[0])
                {
                    st.verdict = Some((NOT_MEDIA, 0.0, index));
                    return;
                }
                st.verdict = Some((k as u8, least as f32, index));
                st.by = BY_WINDOWS;
                return;
            }
        }
    }
}

impl Media {
    /// Feeds the clear-header layer; true when its verdict was taken at
    /// this packet (and the packet counted for it).
    #[inline(always)]
    fn clear_packet(&self, st: &mut State, p: &PacketView<'_>) -> bool {
        let c = match &mut st.clear {
            Some(c) => c,
            None => {
                if !clear::worth(p.payload) {
                    return false;
                }
                st.clear.insert(Box::new(clear::Clear::FRESH))
            }
        };
        let had = c.verdict.map(|v| v.0);
        if had.is_none() && p.index > CLEAR_PACKETS {
            return false;
        }
        match st.tcp {
            None => c.packet(p.payload, p.from_client, p.ts, p.index),
            Some(f) => c.segment(f, p.payload, p.from_client, p.ts, p.index),
        }
        let Some((kind, conf, at, _)) = c.verdict else {
            return false;
        };
        if had == Some(kind) {
            return false;
        }
        let k: u8 = match kind {
            clear::Kind::Audio => 0,
            clear::Kind::Video => 1,
        };
        let before = st.verdict.replace((k, conf, at)).map(|v| v.0);
        st.by = BY_RTP;
        if before != Some(k) {
            if let Some(c) = self.counts.get(usize::from(k)) {
                bump(&c.decided, 1);
                bump(&c.packets, 1);
                bump(&c.bytes, u64::from(p.size));
            }
            return true;
        }
        false
    }

    /// In a WireGuard flow ([`TunnelRule`]), audio or video as the
    /// windows' gaps say, with the smaller of `least` and the share behind
    /// that; any other flow or kind keeps `k` and `least`.
    fn tunnel_kind(&self, st: &State, k: usize, least: f64) -> (usize, f64) {
        let Some((_, share)) = self.tunnel else {
            return (k, least);
        };
        if st.tunnel != TUNNEL_WG || k > 1 || st.gapped[0] == 0 {
            return (k, least);
        }
        let regular = f64::from(st.gapped[1]) / f64::from(st.gapped[0]);
        if regular > share {
            (0, least.min(regular))
        } else {
            (1, least.min(1.0 - regular))
        }
    }

    /// Whether a guard says the flow is not media (`all`: its windows).
    fn guarded(&self, st: &State, all: f64) -> bool {
        if let Some((packets_iv, size_max)) = self.feedback {
            let [a, b] = &st.dirs;
            let (big, small) = if a.seen >= b.seen { (a, b) } else { (b, a) };
            if small.seen > 0 {
                let packets = f64::from(small.seen) / f64::from(big.seen);
                let size = (small.bytes as f64 / f64::from(small.seen))
                    / (big.bytes as f64 / f64::from(big.seen));
                if packets >= packets_iv[0] && packets <= packets_iv[1] && size < size_max {
                    return true;
                }
            }
        }
        self.fixed_size
            .is_some_and(|(_, share)| f64::from(st.fixed) / all > share)
    }

    /// Counts packet `p` of a flow decided media for the per-second
    /// figures, when they are taken (the shard says so before its first
    /// packet: no count of a run that takes none is ever read).
    #[inline]
    fn count(&self, st: &State, p: &PacketView<'_>) {
        if !self.counting {
            return;
        }
        if let Some(c) = st
            .verdict
            .and_then(|(k, _, _)| self.counts.get(usize::from(k)))
        {
            bump(&c.packets, 1);
            bump(&c.bytes, u64::from(p.size));
        }
    }

    /// Whether no later packet of a flow the windows or a guard decided
    /// (packet `index` just read) can change its record or the counts: the
    /// clear-header layer reads no more of it (off, RTP ruled out, or past
    /// [`CLEAR_PACKETS`]), and the flow is not media or the per-second
    /// figures are not taken.
    #[inline]
    fn settled(&self, st: &State, index: u32) -> bool {
        let read = self.clear && !st.clear_off && index <= CLEAR_PACKETS;
        !read && (!self.counting || st.verdict.is_some_and(|v| v.0 == NOT_MEDIA))
    }
}

impl Analyzer for Media {
    type State = State;
    const NAME: &'static str = "media";
    const ABOUT: &'static str =
        "real-time media (audio, video, file transfer): RTP in clear (also inside TURN, beside STUN and DTLS), then UDP packet sizes and inter-arrivals (Skypeness, thesis Table 6.2); RTP quality, STUN app, ICE call id";
    const PAYLOAD: bool = true;
    const ENDS_EARLY: bool = true;
    const LAZY: bool = true;
    const TCP_EMPTY_DECLINED: bool = true;

    /// What `packet` does with a `Default` state and leaves it so: a flow
    /// neither UDP nor TCP, or TCP without the clear-header layer, is left
    /// at its first packet; a TCP packet without payload captured changes
    /// nothing (no side done); a TCP flow's first payload that is not
    /// TURN or ICE-TCP framing leaves the flow. A UDP flow's state is
    /// always made.
    #[inline(always)]
    fn declines(&self, p: &PacketView<'_>) -> Option<[bool; 2]> {
        match p.proto {
            UDP => None,
            TCP if self.clear => {
                if p.payload.is_empty() {
                    Some([false; 2])
                } else if clear::tcp_framing(p.payload).is_some() {
                    None
                } else {
                    Some([true; 2])
                }
            }
            _ => Some([true; 2]),
        }
    }

    /// As `record` of a `Default` state: empty text where it writes text.
    #[inline(always)]
    fn record_declined(&self, out: &mut Cells<'_>) {
        out.empty_text();
        out.nulls(2);
        out.empty_text();
        out.nulls(7);
        out.empty_text();
        out.empty_text();
    }

    const FIELDS: &'static [Field] = &[
        Field::new(
            "media",
            FieldType::Str,
            "",
            "Media kind: audio or video from an RTP stream in clear (its clock or payload type), else audio, video or file from the UDP flow's windows of packet sizes, inter-arrivals and bitrates; none when a guard ruled the flow out (transport feedback, fixed-size bulk, a DNS-, RPC- or repeated-body shape, a DTLS tunnel, audio off every voice frame duration); empty while undecided (too few packets, no kind's tests passed) or not read (neither UDP nor TURN or ICE-TCP framing over TCP)",
        ),
        Field::new(
            "media_share",
            FieldType::F64,
            "",
            "Confidence of the verdict when it was decided: for media_layer rtp, the share of the flow's RTP/RTCP-looking packets that were consistent steps of an RTP stream; for windows, the smallest share of windows passing one of the kind's tests; null when none or undecided",
        ),
        Field::new(
            "media_packet",
            FieldType::U64,
            "packets",
            "Packet of the flow (1 = first) at which the media verdict was decided (for none: the packet whose window's end ruled it out); null while undecided",
        ),
        Field::new(
            "media_layer",
            FieldType::Str,
            "",
            "What decided the media verdict: rtp (an RTP stream in clear), turn-rtp (an RTP stream inside TURN ChannelData or Send/Data indications), windows (packet sizes and inter-arrivals), guard (media none); empty while undecided",
        ),
        Field::new(
            "media_clock",
            FieldType::U64,
            "Hz",
            "RTP clock rate of the flow's largest RTP stream in clear, from its payload type or inferred from its timestamps over capture time (8000 ... 48000 audio, 90000 video); null without one, or when its timestamps follow no standard clock",
        ),
        Field::new(
            "media_streams",
            FieldType::U64,
            "",
            "RTP streams (SSRC and direction) in clear whose clock was found in the flow, at most 4; null without one",
        ),
        Field::new(
            "media_rtp_packets",
            FieldType::U64,
            "packets",
            "Packets of the flow's largest RTP stream in clear, from its second packet's step on (its first counted); null without one",
        ),
        Field::new(
            "media_rtp_lost",
            FieldType::I64,
            "packets",
            "Lost packets of that stream (RFC 3550: expected - received; negative with duplicates); null without one",
        ),
        Field::new(
            "media_rtp_reordered",
            FieldType::U64,
            "packets",
            "Packets of that stream that came after a higher sequence number; null without one",
        ),
        Field::new(
            "media_jitter_ms",
            FieldType::F64,
            "ms",
            "Mean RFC 3550 interarrival jitter of that stream at its clock, from the packet its clock was last set (an inferred clock is inferred once more after 1 s of the stream); null without one",
        ),
        Field::new(
            "media_jitter_max_ms",
            FieldType::F64,
            "ms",
            "Largest RFC 3550 jitter of that stream; null without one",
        ),
        Field::new(
            "media_app",
            FieldType::Str,
            "",
            "The first STUN SOFTWARE attribute of the flow (also inside TURN), at most 32 bytes; else, for a UDP flow found audio or video, the app whose vendor alone publishes a port of the flow for its media (Zoom 8801-8810, GoogleMeet 19302-19309, Teams 3480-3481); empty without one",
        ),
        Field::new(
            "media_call",
            FieldType::Str,
            "",
            "Call id: 16 hex digits from the ICE USERNAME of the flow's STUN (its two ufrags, sorted), shared by every flow of one ICE session (candidate pairs, TURN legs, RTCP); empty without one",
        ),
    ];

    fn configure(opts: &super::Options<'_>) -> Self {
        Media::sampled(opts.media, opts.sample.map_or(1, |s| s.rate))
    }

    #[inline]
    fn done(&self, st: &State) -> bool {
        st.done
    }

    #[inline]
    fn packet(&self, st: &mut State, p: &PacketView<'_>) -> Action {
        if st.done {
            return Action::Continue;
        }
        if p.proto != UDP {
            // TCP for TURN over TCP and ICE-TCP only, from a first payload
            // that is a STUN or ChannelData frame (with ICE-TCP's length
            // before it); any other flow is left at once.
            if p.proto != TCP || !self.clear {
                st.done = true;
                return Action::Continue;
            }
            if st.tcp.is_none() && !p.payload.is_empty() {
                st.tcp = clear::tcp_framing(p.payload);
                if st.tcp.is_none() {
                    st.done = true;
                    return Action::Continue;
                }
            }
        }
        if st.by == BY_RTP {
            // An RTP stream decided: the flow is read to its end (the
            // quality figures; a video stream can still replace audio).
            if !p.payload.is_empty() && self.clear_packet(st, p) {
                return Action::Continue;
            }
            self.count(st, p);
            return Action::Continue;
        }
        // QUIC, ZRTP or unknown by its first byte (`clear::inert`): the
        // layer would read it and change nothing, nor make its state for
        // it; RTP was not ruled out after the last payload that was read.
        // A TCP segment's first byte can be a frame length's or a frame's
        // middle: each is read (`clear::Clear::segment`).
        if self.clear && !st.clear_off && (st.tcp.is_some() || !clear::inert(p.payload)) {
            if self.clear_packet(st, p) {
                return Action::Continue;
            }
            if p.proto == UDP
                && st
                    .clear
                    .as_deref()
                    .is_some_and(|c| c.rtp_ruled_out(RTP_TRIES))
            {
                st.clear_off = true;
            }
        }
        if st.verdict.is_some() {
            self.count(st, p);
            st.done = self.settled(st, p.index);
            return Action::Continue;
        }
        if p.proto != UDP {
            return Action::Continue;
        }
        let d = usize::from(!p.from_client);
        // The size the windows read: a WireGuard flow's net of the tunnel.
        let mut size = p.size;
        if matches!(st.tunnel, TUNNEL_UNSEEN | TUNNEL_WG) && !p.payload.is_empty() {
            match wireguard::Message::parse(p.payload, p.payload_len) {
                Some(m) if self.tunnel.is_some() => {
                    st.tunnel = TUNNEL_WG;
                    if let wireguard::Message::Data(inner) = m {
                        size = inner;
                    }
                }
                _ => st.tunnel = TUNNEL_NOT,
            }
        }
        if self.clear && st.shapes[0] < SHAPE_PACKETS && !p.payload.is_empty() {
            let body = shape::Body::of(p.payload);
            let repeated = body.repeats(std::mem::replace(&mut st.bodies[d], body));
            st.shapes[0] += 1;
            st.shapes[1] += u8::from(repeated || shape::not_media(p.payload));
        }
        let w = &mut st.dirs[d];
        if w.seen > 0 {
            let gap = p.ts.saturating_sub(w.last_ts);
            if self.voice.is_some() {
                if let Some(g) = w.gaps.get_mut(w.iat_n as usize) {
                    *g = (gap / GAP_UNIT_NS).min(u64::from(u16::MAX)) as u16;
                }
            }
            w.iat_sum += gap;
            w.iat_sq += (gap as f64) * (gap as f64);
            w.iat_n += 1;
        }
        w.seen += 1;
        w.bytes += u64::from(size);
        w.last_ts = p.ts;
        w.n += 1;
        w.size_sum += u64::from(size);
        w.size_sq += u64::from(size) * u64::from(size);
        if w.n >= self.window {
            self.window_done(st, d, p.index);
            if let Some((k, _, _)) = st.verdict {
                if let Some(c) = self.counts.get(usize::from(k)) {
                    bump(&c.decided, 1);
                    bump(&c.packets, 1);
                    bump(&c.bytes, u64::from(p.size));
                }
                st.done = self.settled(st, p.index);
            }
        }
        Action::Continue
    }

    fn finish(&self, st: &mut State) {
        if let Some(c) = st
            .verdict
            .and_then(|(k, _, _)| self.counts.get(usize::from(k)))
        {
            bump(&c.ended, 1);
        }
    }

    fn record(&self, st: &State, out: &mut Cells<'_>) {
        self.record_ports(st, [0; 2], out);
    }

    fn record_ports(&self, st: &State, ports: [u16; 2], out: &mut Cells<'_>) {
        let c = st.clear.as_deref();
        let q = c.and_then(|c| c.quality());
        match st.verdict {
            // A guard ruled the flow out (its share is not a confidence).
            Some((NOT_MEDIA, _, at)) => {
                out.text("none");
                out.null();
                out.u64(u64::from(at));
                out.text("guard");
            }
            Some((k, share, at)) => {
                out.text(KINDS[usize::from(k)]);
                out.f64(f64::from(share));
                out.u64(u64::from(at));
                out.text(match (st.by, c.and_then(|c| c.verdict)) {
                    (BY_RTP, Some((_, _, _, t))) if c.is_some_and(|c| c.relayed_track(t)) => {
                        "turn-rtp"
                    }
                    (BY_RTP, _) => "rtp",
                    _ => "windows",
                });
            }
            None => {
                out.empty_text();
                out.nulls(2);
                out.empty_text();
            }
        }
        match q {
            Some(q) => {
                match q.clock {
                    0 => out.null(),
                    c => out.u64(u64::from(c)),
                }
                out.u64(u64::from(q.streams));
                out.u64(q.packets);
                out.i64(q.lost);
                out.u64(q.reordered);
                match q.jitter_ms {
                    Some(j) => out.f64(j),
                    None => out.null(),
                }
                match q.jitter_max_ms {
                    Some(j) => out.f64(j),
                    None => out.null(),
                }
            }
            None => out.nulls(7),
        }
        // STUN's SOFTWARE, else the app whose published media ports a
        // UDP flow found audio or video in uses (`media/ports.rs`): the
        // server's, or the client's where the capture began with the
        // server's packet (those ports are below every system's
        // ephemeral range, so a client's own is not one of them).
        let by_port = || {
            let av = st.kind().is_some_and(|k| k != "file");
            (av && st.tcp.is_none())
                .then(|| ports::app(ports[1]).or_else(|| ports::app(ports[0])))
                .flatten()
        };
        match c.and_then(|c| c.app()).or_else(by_port) {
            Some(app) => out.text(app),
            None => out.empty_text(),
        }
        match c.map_or(0, |c| c.call) {
            0 => out.empty_text(),
            h => out.text(&format!("{h:016x}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(ts: Nanos, from_client: bool, index: u32, size: u16) -> PacketView<'static> {
        PacketView {
            ts,
            from_client,
            index,
            size,
            tcp_flags: 0,
            proto: UDP,
            payload_len: 0,
            payload: &[],
            ip: &[],
            tcp_starts: &crate::analyze::TcpStarts::NONE,
        }
    }

    /// What one flow costs the detector in memory at most: its state in
    /// the slot, the clear-header layer's (made at the flow's first
    /// datagram worth reading) and, per RTP stream it tracks, the
    /// stream's figures with their window of sequence numbers. The
    /// bounds are the sizes today: a field added to a per-flow state
    /// fails here first, and the docs (docs/MEDIA.md, "Cost") say them.
    #[test]
    fn a_flows_state_is_bounded() {
        use crate::analyze::rtp_stats::{StreamStats, WINDOW};
        let slot = std::mem::size_of::<State>();
        let layer = std::mem::size_of::<clear::Clear>();
        let stream = std::mem::size_of::<StreamStats>() + WINDOW * std::mem::size_of::<u32>();
        let most = slot + layer + clear::TRACKS * stream;
        assert!(slot <= 312, "{slot}");
        assert!(layer <= 512, "{layer}");
        assert!(stream <= 656, "{stream}");
        assert!(most <= 3448, "{most}");
    }

    /// Feeds `n` packets per direction alternating, `gap` ns apart in each
    /// direction, of sizes from `size(i)`; returns the state.
    fn feed(m: &Media, n: u32, gap: u64, size: impl Fn(u32) -> u16) -> State {
        let mut st = State::default();
        let mut index = 0;
        for i in 0..n {
            for d in [true, false] {
                index += 1;
                let ts = u64::from(i) * gap + u64::from(!d) * 1_000_000;
                m.packet(&mut st, &view(ts, d, index, size(i)));
            }
        }
        st
    }

    #[test]
    fn steady_small_packets_every_20ms_are_audio_decided_at_packet_60() {
        let m = Media::default();
        // 20 ms, 160 B both ways: 64 kbit/s per direction.
        let st = feed(&m, 40, 20_000_000, |_| 160);
        let (k, share, at) = st.verdict.unwrap();
        assert_eq!(KINDS[usize::from(k)], "audio");
        assert_eq!(share, 1.0);
        // Windows end at packets 19/20 and 39/40 (2 windows each way after
        // 40 packets) and 59/60: the 3rd window ends at packet 39 (≥ 30).
        assert_eq!(at, 39);
    }

    /// `media_app` of a flow without STUN: the app whose vendor alone
    /// publishes one of its ports for media, for a UDP flow found audio
    /// or video only.
    #[test]
    fn an_audio_flow_on_a_vendors_own_media_port_is_its_app() {
        let m = Media::default();
        let app = |st: &State, ports: [u16; 2]| {
            let mut rows = crate::schema::Rows::default();
            rows.push_row(Media::FIELDS.len(), |c| m.record_ports(st, ports, c));
            let at = Media::FIELDS.iter().position(|f| f.name == "media_app");
            format!("{:?}", rows.row(0).nth(at.unwrap()).unwrap())
        };
        let audio = feed(&m, 40, 20_000_000, |_| 160);
        assert_eq!(audio.kind(), Some("audio"));
        let named = |ports| app(&audio, ports).contains("Zoom");
        // The server's port, or the client's when the capture began with
        // the server's packet.
        assert!(named([51234, 8801]));
        assert!(named([8810, 51234]));
        assert!(app(&audio, [51234, 19305]).contains("GoogleMeet"));
        assert!(app(&audio, [51234, 3481]).contains("Teams"));
        let video = feed(&m, 40, 30_000_000, |_| 1000);
        assert_eq!(video.kind(), Some("video"));
        assert!(app(&video, [51234, 8801]).contains("Zoom"));
        let empty = app(&audio, [51234, 3478]);
        assert!(
            !empty.contains("Zoom") && !empty.contains("Teams"),
            "{empty}"
        );
        // Not media, or not decided: no app from the ports.
        let bulk = feed(&m, 40, 1_000_000, |_| 1400);
        assert_ne!(bulk.kind(), Some("audio"));
        assert_eq!(app(&bulk, [51234, 8801]), empty);
        assert_eq!(app(&State::default(), [51234, 8801]), empty);
        // The record without ports (as before) names nobody.
        let mut rows = crate::schema::Rows::default();
        rows.push_row(Media::FIELDS.len(), |c| m.record(&audio, c));
        let at = Media::FIELDS.iter().position(|f| f.name == "media_app");
        assert_eq!(
            format!("{:?}", rows.row(0).nth(at.unwrap()).unwrap()),
            empty
        );
    }

    /// Two directions of `n` packets each: the client's every `a` ns, the
    /// server's every `b` ns, each packet's arrival moved by up to
    /// `jitter` ns (a fixed pseudo-random sequence), sizes from `size`;
    /// fed in arrival order; returns the state.
    fn two_clocks(m: &Media, n: u64, a: u64, b: u64, jitter: u64, size: fn(u64) -> u16) -> State {
        let mut x = 0x9e37_79b9u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut ev: Vec<(u64, bool, u16)> = (0..n)
            .flat_map(|i| {
                [
                    (i * a + 5_000_000, true, size(i)),
                    (i * b + 6_000_000, false, size(i) + 40),
                ]
            })
            .map(|(t, d, s)| (t + rnd() % (jitter + 1), d, s))
            .collect();
        ev.sort_unstable();
        let mut st = State::default();
        for (i, (t, d, sz)) in ev.into_iter().enumerate() {
            m.packet(&mut st, &view(t, d, i as u32 + 1, sz));
        }
        st
    }

    #[test]
    fn audio_clocked_off_every_voice_frame_is_not_media() {
        const MS: u64 = 1_000_000;
        let m = Media::default();
        let size = |i: u64| 60 + (i * 7 % 31) as u16;
        let kind = |st: &State| st.verdict.map(|v| v.0);
        // A game's tick: inputs at 30 Hz, snapshots at 20 Hz, 0-3 ms late.
        let game = two_clocks(&m, 60, 33_333_333, 50 * MS, 3 * MS, size);
        assert_eq!(kind(&game), Some(NOT_MEDIA));
        assert_eq!(game.by, 0);
        let off = Media::new(&MediaConfig {
            voice_clock: VoiceClock {
                on: false,
                ..VoiceClock::default()
            },
            ..MediaConfig::default()
        });
        let game_off = two_clocks(&off, 60, 33_333_333, 50 * MS, 3 * MS, size);
        assert_eq!(kind(&game_off), Some(0));
        // Voice: 20 ms both ways with 0-5 ms of jitter, 30 ms (G.711,
        // iLBC), 60 ms one way and 20 ms the other (Opus at two frame
        // sizes), 21.3 ms (AAC, 1024 samples at 48 kHz): audio.
        for (a, b) in [(20, 20), (30, 30), (60, 20), (21_333, 21_333)] {
            let (a, b) = if a > 1000 {
                (a * 1000, b * 1000)
            } else {
                (a * MS, b * MS)
            };
            let st = two_clocks(&m, 60, a, b, 5 * MS, size);
            assert_eq!(kind(&st), Some(0), "{a} {b}");
        }
        // An extra packet in a window (RTCP beside RTP: a window mean 10 %
        // short) or a lost one keeps the median on the frame.
        let mut st = State::default();
        let mut i = 0;
        for f in 0..60u64 {
            for d in [true, false] {
                if f % 10 == 4 && !d {
                    continue;
                }
                i += 1;
                m.packet(
                    &mut st,
                    &view(f * 20 * MS + u64::from(!d) * MS, d, i, size(f)),
                );
                if f % 10 == 7 && d {
                    i += 1;
                    m.packet(&mut st, &view(f * 20 * MS + 300_000, d, i, 90));
                }
            }
        }
        assert_eq!(kind(&st), Some(0));
        // A backlog flushed at the start (20 packets each way 0.3 ms
        // apart, as GStreamer's) is a burst, not a clock: not counted.
        let mut st = State::default();
        let mut i = 0;
        for f in 0..120u64 {
            let t = if f < 20 { f * 300_000 } else { f * 20 * MS };
            for d in [true, false] {
                i += 1;
                m.packet(&mut st, &view(t + u64::from(!d) * MS, d, i, size(f)));
            }
        }
        assert_eq!(kind(&st), Some(0));
        assert!(
            st.voiced[0] > 0 && st.voiced[1] == st.voiced[0],
            "{:?}",
            st.voiced
        );
        // The limit: 50 ms packets (G.711 at ptime 50) are not media.
        let st = two_clocks(&m, 60, 50 * MS, 50 * MS, 2 * MS, size);
        assert_eq!(kind(&st), Some(NOT_MEDIA));
        // Under packet sampling the rule is not applied.
        let sampled = Media::sampled(&MediaConfig::default(), 2);
        let st = two_clocks(&sampled, 60, 2 * 33_333_333, 2 * 50 * MS, 0, size);
        assert_eq!(kind(&st), Some(0));
    }

    #[test]
    fn bulk_traffic_is_not_media_and_large_steady_packets_are_video() {
        let m = Media::default();
        // 1400 B every 1 ms: no kind (size outside audio, video, file).
        let st = feed(&m, 40, 1_000_000, |_| 1400);
        assert!(st.kind().is_none());
        // 1000 B every 30 ms: audio fails the size test, video passes.
        let st = feed(&m, 40, 30_000_000, |_| 1000);
        assert_eq!(KINDS[usize::from(st.verdict.unwrap().0)], "video");
    }

    #[test]
    fn unstable_inter_arrivals_fail_the_audio_test() {
        let m = Media::default();
        let mut st = State::default();
        // Windows alternating 5 ms and 60 ms mean gaps, one direction.
        let mut ts = 0;
        for i in 1..=100u32 {
            let gap = if (i - 1) / 10 % 2 == 0 { 5 } else { 60 };
            ts += gap * 1_000_000;
            m.packet(&mut st, &view(ts, true, i, 100));
        }
        assert!(st.kind().is_none(), "{:?}", st.verdict);
    }

    #[test]
    fn short_flows_and_tcp_flows_are_never_decided() {
        let m = Media::default();
        let st = feed(&m, 14, 20_000_000, |_| 160);
        assert!(st.verdict.is_none());
        let mut st = State::default();
        for i in 1..=100u32 {
            let mut v = view(u64::from(i) * 20_000_000, true, i, 160);
            v.proto = 6;
            m.packet(&mut st, &v);
        }
        assert!(st.verdict.is_none());
    }

    #[test]
    fn sampling_correction_divides_the_gaps_by_the_rate() {
        // Audio every 20 ms sampled 1 in 8: the kept packets are 160 ms
        // apart, 160 B each (8 kbit/s as seen).
        let seen = |m: &Media| feed(m, 40, 160_000_000, |_| 160).verdict;
        // Table 6.2's tests alone: without audio's 100 ms bound on stable
        // windows (with it, 160 ms gaps seen uncorrected are not audio).
        let mut table = MediaConfig::default();
        table.audio.as_mut().unwrap().iat_max_ms = None;
        table.voice_clock.on = false;
        let plain = Media::new(&table);
        assert_ne!(seen(&Media::default()).map(|v| v.0), Some(0));
        let corrected = Media::sampled(&MediaConfig::default(), 8);
        // Uncorrected, the gaps are stable and the bitrate is low: it still
        // passes Table 6.2's audio; steadiness is what sampling keeps. A gap that
        // varies by more than 15 ms once multiplied by 8 is what breaks it:
        // windows alternating 18 and 22 ms (x8: 144 and 176 ms).
        assert_eq!(seen(&corrected).map(|v| v.0), Some(0));
        assert_eq!(seen(&plain).map(|v| v.0), Some(0));
        let wobbly = |m: &Media| {
            let mut st = State::default();
            let mut ts = 0;
            for i in 1..=60u32 {
                let gap = if (i - 1) / 10 % 2 == 0 { 144 } else { 176 };
                ts += gap * 1_000_000;
                m.packet(&mut st, &view(ts, true, i, 160));
            }
            st.verdict
        };
        assert!(wobbly(&plain).is_none());
        assert_eq!(wobbly(&corrected).map(|v| v.0), Some(0));
        let off = MediaConfig {
            sampling_correction: false,
            ..MediaConfig::default()
        };
        assert!(wobbly(&Media::sampled(&off, 8)).is_none());
        assert!(MediaConfig::from_toml(
            "sampling_correction = false\n[audio]\nsize = [[1, 2]]\n",
            "x"
        )
        .is_ok_and(|c| !c.sampling_correction));
    }

    #[test]
    fn size_variation_rejects_constant_size_streams_and_keeps_varying_ones() {
        let c = MediaConfig::from_toml(
            "[video]\nsize = [[150, 1200]]\nsize_share = 0.19\niat_tolerance_ms = 15\n\
             iat_share = 0.6\nsize_cv_min = 0.02\nsize_cv_share = 0.6\n",
            "x",
        )
        .unwrap();
        let m = Media::new(&c);
        // 1000 B every 4 ms (bulk of fixed datagrams): sizes never vary.
        assert!(feed(&m, 40, 4_000_000, |_| 1000).kind().is_none());
        // Frames of varying size every 40 ms: CV of 600/1000/1400 is 0.33.
        let st = feed(&m, 40, 40_000_000, |i| 600 + 400 * (i % 3) as u16);
        let (k, share, _) = st.verdict.unwrap();
        assert_eq!(KINDS[usize::from(k)], "video");
        assert_eq!(share, 1.0);
        // Without the test and without the fixed-size guard both are video
        // (with the guard, the default, the first is not media).
        let mut no_guard = MediaConfig::default();
        no_guard.fixed_size.on = false;
        assert_eq!(
            feed(&Media::new(&no_guard), 40, 4_000_000, |_| 1000).kind(),
            Some("video")
        );
        assert_eq!(
            feed(&Media::default(), 40, 4_000_000, |_| 1000)
                .verdict
                .map(|v| v.0),
            Some(NOT_MEDIA)
        );
        assert_eq!(size_cv(10 * 100 * 100, 100.0, 10), 0.0);
    }

    /// Feeds `n` packets of `data(i)` bytes from the client `gap` ns apart
    /// and, after every `every`-th of them, one of `back` bytes the other
    /// way 1 ms later; returns the state.
    fn one_way_with_feedback(
        m: &Media,
        n: u32,
        gap: u64,
        data: impl Fn(u32) -> u16,
        every: u32,
        back: u16,
    ) -> State {
        let mut st = State::default();
        let mut index = 0;
        for i in 0..n {
            index += 1;
            let ts = u64::from(i) * gap;
            m.packet(&mut st, &view(ts, true, index, data(i)));
            if (i + 1) % every == 0 {
                index += 1;
                m.packet(&mut st, &view(ts + 1_000_000, false, index, back));
            }
        }
        st
    }

    #[test]
    fn feedback_guard_rejects_ack_clocked_bulk_and_keeps_calls_and_sparse_feedback() {
        let m = Media::default();
        // QUIC-like: 1228-byte data every 3 ms (sizes vary a little), an
        // 80-byte acknowledgement every 2nd packet: 0.5 packets at 0.07 of
        // the size. Video's tests pass; the guard decides it is not media.
        let quic = |m: &Media| {
            one_way_with_feedback(m, 60, 3_000_000, |i| 1228 - (i % 3) as u16 * 40, 2, 80)
        };
        let st = quic(&m);
        assert_eq!(st.verdict.map(|v| v.0), Some(NOT_MEDIA));
        assert_eq!(st.kind(), None);
        let mut off = MediaConfig::default();
        off.feedback.on = false;
        assert_eq!(quic(&Media::new(&off)).kind(), Some("video"));
        // A two-way call of equal packets (a ratio of 1): audio.
        assert_eq!(feed(&m, 40, 20_000_000, |_| 160).kind(), Some("audio"));
        // Video one way, audio the other on one 5-tuple (WebRTC BUNDLE):
        // about as many packets each way, the smaller ones 0.15 the size.
        let mut st = State::default();
        let mut index = 0;
        for i in 0..60u32 {
            for (d, size) in [(true, 900 + (i % 4) as u16 * 60), (false, 130)] {
                index += 1;
                let ts = u64::from(i) * 20_000_000 + u64::from(!d) * 7_000_000;
                m.packet(&mut st, &view(ts, d, index, size));
            }
        }
        assert_eq!(st.kind(), Some("video"));
        // One-way video with sparse small feedback (an 80-byte RTCP packet
        // per 10 media packets: 0.1 of the packets): video.
        let st = one_way_with_feedback(&m, 60, 20_000_000, |i| 700 + (i % 5) as u16 * 90, 10, 80);
        assert_eq!(st.kind(), Some("video"));
        // Feedback as big as the data (an echo): not transport feedback.
        let st = one_way_with_feedback(&m, 60, 20_000_000, |_| 160, 2, 160);
        assert_eq!(st.kind(), Some("audio"));
    }

    /// A view of `payload` (UDP unless `proto` says otherwise).
    fn with_payload(ts: Nanos, from_client: bool, index: u32, payload: &[u8]) -> PacketView<'_> {
        PacketView {
            payload,
            payload_len: payload.len() as u16,
            ..view(ts, from_client, index, 28 + payload.len() as u16)
        }
    }

    #[test]
    fn flows_that_cannot_be_media_are_left_at_once() {
        let m = Media::default();
        // A TCP flow whose first payload is not TURN framing (an HTTP
        // request): followed through its handshake, done at that payload.
        let mut st = State::default();
        let mut syn = view(0, true, 1, 60);
        syn.proto = TCP;
        m.packet(&mut st, &syn);
        assert!(!m.done(&st));
        let mut get = with_payload(1_000_000, true, 2, b"GET / HTTP/1.1\r\n\r\n");
        get.proto = TCP;
        m.packet(&mut st, &get);
        assert!(m.done(&st) && st.clear.is_none());
        // Another protocol (ICMP): done at its first packet.
        let mut st = State::default();
        let mut icmp = view(0, true, 1, 84);
        icmp.proto = 1;
        m.packet(&mut st, &icmp);
        assert!(m.done(&st));
        // A TCP flow: a first payload, then RTP at 20 ms (Opus at 48 kHz)
        // as `frame` wraps each packet; the flow's state after it.
        let tcp_call = |first: &[u8], frame: &dyn Fn(u16, Vec<u8>) -> Vec<u8>| {
            let mut st = State::default();
            let mut v = with_payload(0, true, 1, first);
            v.proto = TCP;
            m.packet(&mut st, &v);
            let framing = st.tcp;
            for i in 0..20u16 {
                let f = frame(
                    i,
                    clear::tests::rtp(111, 100 + i, 960 * u32::from(i), 0x55, 80),
                );
                let mut v = with_payload(u64::from(i + 1) * 20_000_000, true, u32::from(i) + 2, &f);
                v.proto = TCP;
                m.packet(&mut st, &v);
                assert!(!m.done(&st));
            }
            (framing, st.kind(), st.by)
        };
        let stun = |ty: u8| {
            let mut b = vec![0x00, ty, 0x00, 0x00];
            b.extend_from_slice(&stun::MAGIC.to_be_bytes());
            b.extend_from_slice(&[7; 12]);
            b
        };
        // TURN over TCP: an Allocate request first, then ChannelData
        // frames carrying RTP: followed, audio.
        let channel =
            |_: u16, rtp: Vec<u8>| [vec![0x40, 0x01, 0x00, rtp.len() as u8], rtp].concat();
        let turn = Some(clear::TcpFraming::Turn);
        assert_eq!(
            tcp_call(&stun(0x03), &channel),
            (turn, Some("audio"), BY_RTP)
        );
        // ICE-TCP (RFC 6544): a Binding request after its 16-bit length
        // (RFC 4571), then RTP each after its length, and a segment that
        // starts inside a frame: followed, audio.
        let framed = |b: Vec<u8>| [(b.len() as u16).to_be_bytes().to_vec(), b].concat();
        let ice = |i: u16, rtp: Vec<u8>| if i == 7 { vec![0x33; 60] } else { framed(rtp) };
        let rfc4571 = Some(clear::TcpFraming::Rfc4571);
        assert_eq!(
            tcp_call(&framed(stun(0x01)), &ice),
            (rfc4571, Some("audio"), BY_RTP)
        );
        // A Binding request without the length: TURN over TCP's reading.
        assert_eq!(tcp_call(&stun(0x01), &channel).0, turn);
    }

    #[test]
    fn what_media_declines_a_default_state_leaves_recording_as_declined() {
        let m = Media::default();
        let tcp = |mut v: PacketView<'static>| {
            v.proto = TCP;
            v
        };
        let mut icmp = view(0, true, 1, 84);
        icmp.proto = 1;
        let mut alloc = vec![0x00, 0x03, 0x00, 0x00];
        alloc.extend_from_slice(&stun::MAGIC.to_be_bytes());
        alloc.extend_from_slice(&[7; 12]);
        let alloc: &'static [u8] = alloc.leak();
        let get: &'static [u8] = b"GET / HTTP/1.1\r\n\r\n";
        let cases = [
            (tcp(view(0, true, 1, 60)), Some([false; 2])),
            (tcp(with_payload(0, true, 2, get)), Some([true; 2])),
            (icmp, Some([true; 2])),
            (tcp(with_payload(0, true, 1, alloc)), None),
            (view(0, true, 1, 60), None),
            (with_payload(0, true, 1, get), None),
        ];
        let row = |f: &dyn Fn(&mut Cells<'_>)| {
            let mut rows = crate::schema::Rows::default();
            rows.push_row(Media::FIELDS.len(), |c| f(c));
            rows.row(0).map(|v| format!("{v:?}")).collect::<Vec<_>>()
        };
        let declined = row(&|c| m.record_declined(c));
        assert_eq!(declined, row(&|c| m.record(&State::default(), c)));
        assert_eq!(declined.iter().filter(|v| v.contains("Text")).count(), 4);
        for (p, want) in cases {
            assert_eq!(m.declines(&p), want, "{p:?}");
            let Some(sides) = want else { continue };
            // Shown to a `Default` state, the packet leaves one done with
            // the sides declined and recording what a declined flow does.
            let mut st = State::default();
            m.packet(&mut st, &p);
            assert_eq!(m.done(&st), sides == [true; 2], "{p:?}");
            assert_eq!(row(&|c| m.record(&st, c)), declined, "{p:?}");
        }
    }

    #[test]
    fn a_tcp_flow_media_leaves_makes_no_state_and_records_as_before() {
        let mut a = crate::analyze::Active::new(&["media".to_string()]).unwrap();
        a.start(0);
        let show = |a: &mut crate::analyze::Active, i: u32, flags: u8, payload: &[u8]| {
            let v = PacketView {
                tcp_flags: flags,
                proto: TCP,
                payload_len: payload.len() as u16,
                payload,
                ..view(
                    u64::from(i) * 1_000,
                    i % 2 == 1,
                    i,
                    40 + payload.len() as u16,
                )
            };
            a.packet(0, &v)
        };
        // Of a TCP flow whose state it has not made, media is shown only
        // packets with payload; of a UDP flow, every packet.
        assert_eq!(a.follows_new(true), 0b0101);
        assert_eq!(a.follows_new(false), 0b1111);
        let (_, follows) = show(&mut a, 1, 0x02, b"");
        assert_eq!(follows, 0b0101);
        show(&mut a, 2, 0x12, b"");
        assert!(a.live(0, true, false) && a.live(0, false, false));
        assert_eq!(a.follows(0, true), 0b0101);
        let (_, follows) = show(&mut a, 3, 0x18, b"GET / HTTP/1.1\r\n\r\n");
        assert_eq!(follows, 0, "left at the first payload");
        assert!(!a.each.media.as_ref().unwrap().holds(0));
        let mut rows = crate::schema::Rows::default();
        a.record(0, &mut rows, (3, 0), || [0; 2]);
        let r: Vec<_> = rows.row(0).collect();
        assert_eq!(r[0], crate::schema::Value::Text(""), "{r:?}");
        assert_eq!(r[1], crate::schema::Value::Null, "{r:?}");
        // A UDP flow makes its state at its first datagram.
        a.start(1);
        a.packet(1, &view(0, true, 1, 60));
        assert!(a.each.media.as_ref().unwrap().holds(1));
    }

    #[test]
    fn a_flow_decided_not_media_is_done_once_no_rtp_can_replace_the_verdict() {
        // 1000-byte datagrams every 4 ms, one way: a guard says not media.
        // Payloads: none; or `head` then bytes that look encrypted, each
        // datagram's own (an RTP-class head: a new SSRC every time).
        let run = |m: &Media, packets: u32, head: Option<&[u8]>| {
            let mut st = State::default();
            for i in 1..=packets {
                let body = head.map(|h| opaque(h, 972, i));
                let ts = u64::from(i) * 4_000_000;
                match &body {
                    Some(b) => m.packet(&mut st, &with_payload(ts, true, i, b)),
                    None => m.packet(&mut st, &view(ts, true, i, 1000)),
                };
            }
            st
        };
        let m = Media::default();
        // Without payloads the clear-header layer still reads the first
        // 1000 packets (an RTP stream found there replaces the verdict):
        // not done before.
        let st = run(&m, 200, None);
        assert_eq!(st.verdict.map(|v| v.0), Some(NOT_MEDIA));
        assert!(!st.clear_off && !m.done(&st));
        assert!(m.done(&run(&m, CLEAR_PACKETS + 1, None)));
        // RTP-class datagrams none of which continues a stream: RTP is
        // ruled out after RTP_TRIES of them, the verdict is final.
        let st = run(&m, RTP_TRIES - 1, Some(&[0x80, 0x60]));
        assert!(!st.clear_off);
        let st = run(&m, 200, Some(&[0x80, 0x60]));
        assert_eq!(st.verdict.map(|v| v.0), Some(NOT_MEDIA));
        assert!(st.clear_off && m.done(&st));
        // Other datagrams (an app's own framing) do not rule it out.
        let st = run(&m, 200, Some(&[0xd2, 0x19]));
        assert_eq!(st.verdict.map(|v| v.0), Some(NOT_MEDIA));
        assert!(!st.clear_off && !m.done(&st));
        // Without that layer the guard's verdict is final at once.
        let off = MediaConfig {
            clear: false,
            ..MediaConfig::default()
        };
        let m = Media::new(&off);
        let st = run(&m, 200, None);
        assert_eq!(st.verdict.map(|v| v.0), Some(NOT_MEDIA));
        assert!(m.done(&st));
        // A media verdict is done only when the per-second figures are not
        // taken (its packets are counted for them) and the clear-header
        // layer reads no more of the flow.
        let st = feed(&m, 200, 20_000_000, |_| 160);
        assert_eq!(st.kind(), Some("audio"));
        assert!(!m.done(&st));
        let audio_of = |m: &Media| {
            let mut st = State::default();
            for i in 1..=400u32 {
                let b = opaque(&[0x80, 0x60], 132, i);
                let ts = u64::from(i / 2) * 20_000_000 + u64::from(i % 2) * 1_000_000;
                m.packet(&mut st, &with_payload(ts, i % 2 == 1, i, &b));
            }
            st
        };
        let st = audio_of(&Media::default());
        assert_eq!(st.kind(), Some("audio"));
        assert!(st.clear_off && !Media::default().done(&st));
        let mut m = Media::default();
        m.count_per_second(false);
        let st = audio_of(&m);
        assert_eq!(st.kind(), Some("audio"));
        assert!(st.clear_off && m.done(&st));
        let [audio, _, _] = m.take_counts();
        assert_eq!((audio.decided, audio.packets), (1, 1));
    }

    /// `len` bytes that look encrypted (a different stream per `seed`),
    /// behind `head`.
    fn opaque(head: &[u8], len: usize, seed: u32) -> Vec<u8> {
        let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        let mut v: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        v[..head.len()].copy_from_slice(head);
        v
    }

    /// Feeds a flow of datagrams `(ts, from_client, payload)`; returns the
    /// state.
    fn feed_payloads(m: &Media, packets: &[(Nanos, bool, Vec<u8>)]) -> State {
        let mut st = State::default();
        for (i, (ts, d, b)) in packets.iter().enumerate() {
            m.packet(&mut st, &with_payload(*ts, *d, i as u32 + 1, b));
        }
        st
    }

    /// Both ways: `frames` frames `frame_ns` apart, each `per_frame`
    /// datagrams 0.5 ms apart of `inner` bytes, inside WireGuard transport
    /// data messages (`wg`) or as they are.
    fn stream(
        frames: u64,
        frame_ns: u64,
        per_frame: u64,
        inner: usize,
        wg: bool,
    ) -> Vec<(Nanos, bool, Vec<u8>)> {
        let mut v = Vec::new();
        for f in 0..frames {
            for d in [true, false] {
                for j in 0..per_frame {
                    let ts = f * frame_ns + u64::from(!d) * 3_000_000 + j * 500_000;
                    let seed = (f * 8 + j * 2 + u64::from(d)) as u32;
                    let b = if wg {
                        // Header, the inner packet padded to 16, the tag.
                        opaque(&[4, 0, 0, 0], 16 + inner.div_ceil(16) * 16 + 16, seed)
                    } else {
                        opaque(&[0x55], inner - 28, seed)
                    };
                    v.push((ts, d, b));
                }
            }
        }
        v.sort_by_key(|p| p.0);
        v
    }

    #[test]
    fn a_wireguard_flow_is_told_audio_or_video_by_its_gaps() {
        let m = Media::default();
        let kind = |st: &State| {
            st.verdict
                .map(|(k, _, _)| KINDS.get(usize::from(k)).copied())
        };
        // Opus at a high rate: a 500-byte packet every 20 ms each way is
        // over audio's size and bitrate bounds, so the windows say video
        // of the plain flow; inside WireGuard the gaps say audio.
        assert_eq!(
            kind(&feed_payloads(&m, &stream(40, 20_000_000, 1, 500, false))),
            Some(Some("video"))
        );
        let st = feed_payloads(&m, &stream(40, 20_000_000, 1, 500, true));
        assert_eq!(st.tunnel, TUNNEL_WG);
        assert_eq!(kind(&st), Some(Some("audio")));
        // Video at 15 frames a second, 4 packets a frame: bursts, video.
        let st = feed_payloads(&m, &stream(30, 66_000_000, 4, 1000, true));
        assert_eq!(kind(&st), Some(Some("video")));
        // The rule off: the tunnel's audio is read as any flow.
        let off = Media::new(&MediaConfig {
            tunnel: TunnelRule {
                on: false,
                ..TunnelRule::default()
            },
            ..MediaConfig::default()
        });
        let st = feed_payloads(&off, &stream(40, 20_000_000, 1, 500, true));
        assert_eq!(st.tunnel, TUNNEL_NOT);
        assert_eq!(kind(&st), Some(Some("video")));
    }

    #[test]
    fn a_wireguard_flow_is_sized_net_of_the_tunnel() {
        let m = Media::default();
        // 150-byte inner packets (padded to 160) every 20 ms: 220 bytes of
        // IP on the wire, 160 counted.
        let st = feed_payloads(&m, &stream(40, 20_000_000, 1, 150, true));
        assert_eq!(st.dirs[0].bytes, 160 * u64::from(st.dirs[0].seen));
        // One datagram that is not WireGuard: the flow is not a tunnel.
        let mut p = stream(40, 20_000_000, 1, 150, true);
        p[3].2[1] = 1;
        let st = feed_payloads(&m, &p);
        assert_eq!(st.tunnel, TUNNEL_NOT);
    }

    #[test]
    fn a_load_generator_repeating_one_buffer_is_not_media() {
        // iperf3 over UDP at 1 Mbit/s: 780-byte datagrams (808 IP bytes)
        // every 6.4 ms one way, a counter in front of one buffer. Sizes
        // and gaps are those of video (too slow for the fixed-size guard).
        let buf: Vec<u8> = (0..768u32).map(|i| (i * 37 % 251) as u8).collect();
        let dgrams: Vec<Vec<u8>> = (0..60u32)
            .map(|n| {
                let mut d = vec![0, 0, 0x5c, 0xe4];
                d.extend_from_slice(&(n * 6400).to_be_bytes());
                d.extend_from_slice(&n.to_be_bytes());
                d.extend_from_slice(&buf);
                d
            })
            .collect();
        let run = |m: &Media, fresh: bool| {
            let mut st = State::default();
            for (i, d) in dgrams.iter().enumerate() {
                let mut d = d.clone();
                if fresh {
                    // A body that changes, as ciphertext does.
                    d[20] = i as u8;
                }
                let i = i as u32 + 1;
                m.packet(
                    &mut st,
                    &with_payload(u64::from(i) * 6_400_000, true, i, &d),
                );
            }
            st
        };
        let m = Media::default();
        let st = run(&m, false);
        assert_eq!(st.verdict.map(|v| v.0), Some(NOT_MEDIA));
        assert_eq!(run(&m, true).kind(), Some("video"));
    }

    #[test]
    fn fixed_size_guard_rejects_fast_fixed_datagrams_and_keeps_codecs() {
        let m = Media::default();
        // 1000-byte datagrams every 4 ms, one way: not media.
        let bulk = |m: &Media| one_way_with_feedback(m, 60, 4_000_000, |_| 1000, u32::MAX, 0);
        assert_eq!(bulk(&m).verdict.map(|v| v.0), Some(NOT_MEDIA));
        // Constant-size codecs at their frame intervals: G.711 at 20 ms
        // (200 bytes: audio), at 30 ms (280 bytes: video under Table 6.2),
        // a fixed 1057-byte stream every 8.5 ms (as a Zoom flow of the
        // corpus): not fast, so kept.
        let at = |gap: u64, size: u16| {
            one_way_with_feedback(&m, 60, gap, move |_| size, u32::MAX, 0).kind()
        };
        assert_eq!(at(20_000_000, 200), Some("audio"));
        assert_eq!(at(30_000_000, 280), Some("video"));
        assert_eq!(at(8_500_000, 1057), Some("video"));
        // Fast but of varying sizes (video frames cut to packets): kept.
        let st = one_way_with_feedback(&m, 60, 4_000_000, |i| 1000 + (i % 2) as u16, u32::MAX, 0);
        assert_eq!(st.kind(), Some("video"));
        // Off, or a lower bound: the bulk is video again.
        let mut off = MediaConfig::default();
        off.fixed_size.on = false;
        assert_eq!(bulk(&Media::new(&off)).kind(), Some("video"));
        let mut low = MediaConfig::default();
        low.fixed_size.iat_ms = 3.0;
        assert_eq!(bulk(&Media::new(&low)).kind(), Some("video"));
    }

    #[test]
    fn audio_windows_further_apart_than_100ms_are_not_stable() {
        // Request/response (DNS from one port): 100-byte queries and
        // answers 1 ms apart, lookups 150 ms apart with window means that
        // happen to agree within 15 ms. Table 6.2 alone calls it audio.
        let feed_slow = |m: &Media| feed(m, 30, 150_000_000, |_| 100).kind();
        assert_eq!(feed_slow(&Media::default()), None);
        let mut unbounded = MediaConfig::default();
        unbounded.audio.as_mut().unwrap().iat_max_ms = None;
        // (150 ms is no voice frame: the voice clock rule, off here, would
        // say not media too.)
        unbounded.voice_clock.on = false;
        assert_eq!(feed_slow(&Media::new(&unbounded)), Some("audio"));
        // Audio at 60 ms (as KakaoTalk's in the corpus) is still audio.
        assert_eq!(
            feed(&Media::default(), 40, 60_000_000, |_| 100).kind(),
            Some("audio")
        );
    }

    #[test]
    fn guards_are_on_in_a_file_unless_turned_off_and_bad_ones_are_refused() {
        let c = MediaConfig::from_toml("[video]\nsize = [[150, 1200]]\n", "x").unwrap();
        assert_eq!(c.feedback, FeedbackGuard::default());
        assert_eq!(c.fixed_size, FixedSizeGuard::default());
        let c = MediaConfig::from_toml(
            "[feedback]\non = false\n[fixed_size]\niat_ms = 2.5\nshare = 0.8\n\
             [audio]\nsize = [[1, 2]]\niat_tolerance_ms = 15\niat_max_ms = 80\n",
            "x",
        )
        .unwrap();
        assert!(!c.feedback.on && c.fixed_size.on);
        assert_eq!((c.fixed_size.iat_ms, c.fixed_size.share), (2.5, 0.8));
        assert_eq!(c.audio.unwrap().iat_max_ms, Some(80.0));
        let e = MediaConfig::from_toml(
            "[feedback]\npackets = [0.7, 0.2]\n[audio]\nsize = [[1, 2]]\n",
            "bad.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("bad.toml: ") && e.contains("feedback"), "{e}");
        let e = MediaConfig::from_toml("[fixed_size]\nshar = 1\n", "bad.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("shar"), "{e}");
        assert_eq!(c.voice_clock, VoiceClock::default());
        let c = MediaConfig::from_toml(
            "[voice_clock]\nframes_ms = [20, 50]\ntolerance = 0.05\n[audio]\nsize = [[1, 2]]\n",
            "x",
        )
        .unwrap();
        assert!(c.voice_clock.on);
        assert_eq!(c.voice_clock.frames_ms, vec![20.0, 50.0]);
        let e = MediaConfig::from_toml(
            "[voice_clock]\nframes_ms = [0]\n[audio]\nsize = [[1, 2]]\n",
            "bad.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("voice_clock"), "{e}");
    }

    #[test]
    fn toml_overrides_table_6_2_and_bad_files_are_refused() {
        let c = MediaConfig::from_toml(
            "window = 5\n[audio]\nsize = [[20, 80]]\nsize_share = 0.5\n",
            "x.toml",
        )
        .unwrap();
        assert_eq!(c.window, 5);
        assert_eq!(c.min_packets, 30);
        assert!(c.video.is_none() && c.file.is_none());
        let m = Media::new(&c);
        let st = feed(&m, 40, 20_000_000, |_| 60);
        assert_eq!(KINDS[usize::from(st.verdict.unwrap().0)], "audio");
        let e = MediaConfig::from_toml("[audio]\nsize = [[9, 1]]\n", "bad.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("bad.toml: ") && e.contains("interval"), "{e}");
        let e = MediaConfig::from_toml("[audio]\nsise = 1\n", "bad.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("sise"), "{e}");
        let e = MediaConfig::from_toml("window = 10\n", "none.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no kind"), "{e}");
        assert_eq!(MediaConfig::default().check(), Ok(()));
    }
}
