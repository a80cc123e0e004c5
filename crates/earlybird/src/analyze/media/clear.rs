//! The media analyzer's first layer: what a flow's payload shows in clear.
//!
//! Contract: [`Clear::packet`] takes each packet's transport payload (UDP
//! datagrams; of TCP, each frame [`Clear::segment`] finds in a segment:
//! TURN's STUN and ChannelData messages, ICE-TCP's RFC 4571 frames, each
//! frame's start known from the previous frame's length) and:
//! - demultiplexes it by its first byte (RFC 9443, [`super::demux`]),
//!   taking a TURN ChannelData message or Send/Data indication off once;
//! - for RTP (also inside TURN), follows up to [`TRACKS`] streams, each one
//!   SSRC in one direction: a step from the stream's previous packet is
//!   consistent when the sequence number moves 1..=[`SEQ_GAP`] ahead and
//!   the RTP timestamp moves 0..=[`TS_STEP_MAX`] ahead. After
//!   [`RUN_MIN`] consistent steps and at least [`SPAN_MIN_NS`] of capture
//!   time, the stream's clock is inferred from its timestamp span over its
//!   arrival span (the nearest of 8, 16, 24, 32, 44.1, 48 kHz for audio and
//!   90 kHz for video, within a factor of [`CLOCK_TOLERANCE`]), or taken
//!   from a static payload type (RFC 3551); a stream whose frames often
//!   span several packets (equal timestamps) is video whatever its clock.
//!   A stream read at 90 kHz whose packets, each its own frame, mostly
//!   step fewer ticks than a 60 fps frame ([`VIDEO_STEP_MIN`]) is an
//!   audio sender draining a backlog at about twice real time (which no
//!   segment's rate shows as a flush): its spans start again, up to
//!   [`RESTARTS_MAX`] times, and the clock is read from the segments
//!   after the drain.
//!   An inferred clock is inferred once more when the stream's spans
//!   reach [`REFINE_NS`]: a rate read over the first ~100 ms can sit
//!   nearer 44.1 than 48 kHz (a sender settling after ICE and DTLS),
//!   while over a second it is within a few per cent of the true rate. A
//!   new rate of the same kind (audio for audio, 90 kHz for video)
//!   replaces the clock of that stream and of the streams that took it
//!   from it (same payload type); the verdict's kind does not change.
//!   Consistent steps are summed in segments of at least [`SEGMENT_NS`]
//!   of capture time; a segment whose timestamps advance faster than the
//!   fastest clock allows ([`RATE_MAX`]) is a sender's backlog flushed at
//!   once (a pipeline that queued seconds of audio while ICE and DTLS
//!   completed) and is left out of the spans, whereas packets that jitter
//!   bunched keep their timestamps in their segment; before any segment
//!   was counted, the one after a flushed segment (the flush's tail with
//!   the first paced packets) is left out too. A stream of
//!   [`CLOCKLESS_RUN`] consistent steps in a row whose rate is no
//!   standard clock is audio (video by its frames) at an unknown clock. A stream whose
//!   payload type is that of a stream of the flow that already has a kind
//!   takes that kind and clock: on one 5-tuple a payload type names one
//!   codec configuration (RFC 8843 §7.5 for bundled media; RFC 3264
//!   §6.1 has the answer use the offer's numbers, so both directions
//!   agree). The first stream that has a clock decides the flow's
//!   verdict: audio or video, the share of the flow's RTP-class packets
//!   that were consistent steps as the confidence, and the packet index;
//!   a video stream found later in a flow decided audio (audio and video
//!   bundled on one 5-tuple) makes it video, at that packet.
//! - keeps each stream's quality (packets, loss, reordering, RFC 3550
//!   jitter at the inferred clock, from the packet the clock was last
//!   set: figures at one clock only)
//!   in [`crate::analyze::rtp_stats::StreamStats`], from the stream's
//!   second packet on (its first is replayed into it);
//! - reads STUN messages (also inside TURN): the first SOFTWARE attribute
//!   (the app, up to [`APP_MAX`] bytes) and the ICE USERNAME, whose two
//!   ufrags, sorted, give a call id that every flow of one ICE session
//!   shares (its candidate pairs, its TURN legs, RTCP on its own port);
//! - counts DTLS records by content type (application data outside
//!   DTLS-SRTP's handshake marks a DTLS tunnel, not media).
//!
//! State per flow is bounded: [`TRACKS`] tracks, a fixed app buffer and
//! counters (512 bytes), and one `StreamStats` per stream tracked (656
//! bytes with its window of sequence numbers). No allocation but a
//! stream's statistics (once per stream); never panics.

use super::demux::{classify, unwrap_turn, Demux, Relay};
use super::dtls::Record;
use super::stun::Stun;
use crate::analyze::rtp::Rtp;
use crate::analyze::rtp_stats::StreamStats;
use crate::time::Nanos;

/// Streams followed per flow.
pub const TRACKS: usize = 4;
/// Largest sequence step taken as consistent (losses in between).
pub const SEQ_GAP: u16 = 10;
/// Largest RTP timestamp step taken as consistent (10 s at 90 kHz).
pub const TS_STEP_MAX: u32 = 900_000;
/// Consistent steps before a stream can decide.
pub const RUN_MIN: u32 = 5;
/// Consistent steps in a row before a stream whose rate is no standard
/// clock is media all the same (clock unknown).
pub const CLOCKLESS_RUN: u32 = 10;
/// Capture time a stream must span before its clock is inferred.
pub const SPAN_MIN_NS: u64 = 80_000_000;
/// Capture time of a stream's spans at which an inferred clock is
/// inferred once more, from the longer span.
pub const REFINE_NS: u64 = 1_000_000_000;
/// Capture time a segment of consistent steps spans before its rate is
/// tested (about one video frame interval; packets of one frame, or
/// bunched by jitter, fall in one segment).
pub const SEGMENT_NS: u64 = 30_000_000;
/// An inferred clock within this factor of a standard rate is that rate.
pub const CLOCK_TOLERANCE: f64 = 1.25;
/// Fastest timestamp rate a segment may show, ticks per second: the
/// fastest standard clock (90 kHz) times [`CLOCK_TOLERANCE`]. Faster is a
/// backlog flushed at once, not a sender pacing its media in real time.
pub const RATE_MAX: f64 = 90_000.0 * CLOCK_TOLERANCE;
/// Fewest RTP timestamp ticks between two frames of a 90 kHz video
/// stream (60 frames a second). A stream read at 90 kHz whose packets
/// mostly step less, each its own frame, is no video sender: it is an
/// audio sender draining its backlog at about twice real time (an Opus
/// packet's 960 ticks, 10.7 ms at 90 kHz).
pub const VIDEO_STEP_MIN: u32 = 1_500;
/// Times a stream's spans start again because they read 90 kHz from
/// steps under [`VIDEO_STEP_MIN`] (one [`SPAN_MIN_NS`] each at least);
/// after that, the reading stands.
pub const RESTARTS_MAX: u8 = 12;
/// Longest app name kept from a SOFTWARE attribute, bytes.
pub const APP_MAX: usize = 32;

/// Standard clocks: (rate, is video).
const CLOCKS: [(u32, bool); 7] = [
    (8_000, false),
    (16_000, false),
    (24_000, false),
    (32_000, false),
    (44_100, false),
    (48_000, false),
    (90_000, true),
];

/// A media kind as the clear layer tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An audio clock or payload type.
    Audio,
    /// A video clock or payload type, or frames of several packets.
    Video,
}

/// One RTP stream (one SSRC, one direction).
#[derive(Debug, Clone, Default)]
struct Track {
    ssrc: u32,
    from_client: bool,
    pt: u8,
    used: bool,
    last_seq: u16,
    last_ts: u32,
    last_ns: Nanos,
    first_ns: Nanos,
    /// The first packet's length, kept to replay it into `stats`.
    first_len: usize,
    /// Consistent steps in a row (counted until the stream has a kind
    /// and no clock to infer again, as `steps`, `same_ts` and the spans).
    run: u32,
    /// Consistent steps in all.
    steps: u32,
    /// Steps with an unchanged timestamp (packets of one video frame).
    same_ts: u32,
    /// Steps whose timestamp moved less than [`VIDEO_STEP_MIN`] a packet.
    small: u32,
    /// Times the spans started again ([`RESTARTS_MAX`]).
    restarts: u8,
    /// Sum of the timestamp steps of consistent steps.
    ts_span: u64,
    /// Capture time of those steps, ns.
    ns_span: u64,
    /// The segment in progress: timestamp steps and capture time.
    seg_ts: u64,
    seg_ns: u64,
    /// The last segment ran faster than [`RATE_MAX`] (a backlog flushed).
    flushed: bool,
    clock: u32,
    /// The clock was inferred from this stream's timestamps (not a static
    /// payload type's, not taken from another stream) and is yet to be
    /// inferred again at [`REFINE_NS`].
    refine: bool,
    kind: Option<Kind>,
    relay: Option<Relay>,
    stats: Option<Box<StreamStats>>,
}

/// What a flow showed in clear (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Clear {
    tracks: [Track; TRACKS],
    /// Packets whose (inner) datagram demultiplexed as RTP or RTCP.
    rtp_class: u32,
    /// Consistent RTP steps of all streams.
    consistent: u32,
    /// RTCP packets.
    pub rtcp: u32,
    /// STUN messages.
    pub stun: u32,
    /// DTLS records: handshake (content type 22), application data (23).
    pub dtls: [u32; 2],
    /// Datagrams relayed through TURN.
    pub relayed: u32,
    /// Decided: kind, confidence, packet index, track.
    pub verdict: Option<(Kind, f32, u32, u8)>,
    app: [u8; APP_MAX],
    app_len: u8,
    /// FNV-1a of the sorted ICE ufrags (0: none seen).
    pub call: u64,
    /// A TCP flow's, per direction (client's first): the bytes of the
    /// last frame a segment began that the next segments hold
    /// ([`Clear::segment`]).
    carry: [u32; 2],
}

impl Track {
    /// A slot no stream holds (`Default`).
    const FREE: Track = Track {
        ssrc: 0,
        from_client: false,
        pt: 0,
        used: false,
        last_seq: 0,
        last_ts: 0,
        last_ns: 0,
        first_ns: 0,
        first_len: 0,
        run: 0,
        steps: 0,
        same_ts: 0,
        small: 0,
        restarts: 0,
        ts_span: 0,
        ns_span: 0,
        seg_ts: 0,
        seg_ns: 0,
        flushed: false,
        clock: 0,
        refine: false,
        kind: None,
        relay: None,
        stats: None,
    };
}

impl Clear {
    /// A flow that showed nothing yet (`Default`), as one constant: the
    /// media analyzer boxes one at most flows' first datagram that is not
    /// inert, and copying it costs less than building it field by field.
    pub const FRESH: Clear = Clear {
        tracks: [Track::FREE; TRACKS],
        rtp_class: 0,
        consistent: 0,
        rtcp: 0,
        stun: 0,
        dtls: [0; 2],
        relayed: 0,
        verdict: None,
        app: [0; APP_MAX],
        app_len: 0,
        call: 0,
        carry: [0; 2],
    };
}

/// The quality of a flow's largest RTP stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quality {
    /// SSRC.
    pub ssrc: u32,
    /// Clock rate, Hz (0: not inferred).
    pub clock: u32,
    /// Packets.
    pub packets: u64,
    /// Lost (expected − received).
    pub lost: i64,
    /// Reordered.
    pub reordered: u64,
    /// Mean RFC 3550 jitter, ms (`None` without a clock).
    pub jitter_ms: Option<f64>,
    /// Largest jitter, ms.
    pub jitter_max_ms: Option<f64>,
    /// Streams with a clock in the flow.
    pub streams: u32,
    /// How the stream was carried: 0 plain, 1 TURN ChannelData, 2 TURN
    /// indication.
    pub relay: u8,
}

/// Whether a payload is worth the layer's state: the demultiplexer (after
/// TURN) calls it RTP, RTCP, STUN, DTLS or TURN (not QUIC, not unknown).
pub fn worth(payload: &[u8]) -> bool {
    let inner = unwrap_turn(payload).map_or(payload, |(_, d)| d);
    !matches!(classify(inner), Demux::Quic | Demux::Other | Demux::Zrtp)
}

/// Whether [`Clear::packet`] does nothing with a payload, whatever the
/// flow showed before: its first byte is no TURN framing's (0..=3,
/// 64..=79) and demultiplexes as unknown, ZRTP or QUIC (4..=19, 80..=127,
/// 192..=255), or it is empty. Such a payload is not [`worth`] the
/// layer's state either.
#[inline(always)]
pub fn inert(payload: &[u8]) -> bool {
    payload
        .first()
        .is_none_or(|&b| matches!(b, 4..=19 | 80..=127 | 192..=255))
}

/// How a TCP flow's segments carry STUN, DTLS and RTP, from its first
/// payload ([`tcp_framing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpFraming {
    /// TURN over TCP (RFC 8656 §12.5): STUN and ChannelData messages, one
    /// after the other with no other framing.
    Turn,
    /// ICE-TCP (RFC 6544): each STUN, DTLS or RTP message after a 16-bit
    /// length (RFC 4571 §2); [`unframe`] takes it off.
    Rfc4571,
}

/// How a TCP flow's first payload frames media, if it does: a STUN
/// message with the magic cookie or a ChannelData message at its start
/// (TURN over TCP), or a 16-bit length followed by a whole STUN message
/// of that length with the cookie (ICE-TCP's first connectivity check).
/// Any other TCP flow is left by the media analyzer.
pub fn tcp_framing(payload: &[u8]) -> Option<TcpFraming> {
    match payload.first() {
        Some(0..=3) if Stun::parse(payload).is_ok() => return Some(TcpFraming::Turn),
        Some(64..=79) if super::turn::ChannelData::parse(payload).is_ok() => {
            return Some(TcpFraming::Turn)
        }
        _ => {}
    }
    let (&[hi, lo], rest) = payload.split_first_chunk::<2>()?;
    let frame = rest.get(..usize::from(u16::from_be_bytes([hi, lo])))?;
    let stun = Stun::parse(frame).ok()?;
    (frame.first().is_some_and(|&b| b <= 3) && stun.wire_len() == frame.len())
        .then_some(TcpFraming::Rfc4571)
}

/// The longest frame [`Clear::segment`] takes a TCP segment's bytes for:
/// RTP, DTLS and STUN over ICE-TCP and TURN keep to the path's MTU as they
/// would over UDP, so a longer length is bytes in the middle of a frame,
/// and following it would skip the frames after it.
pub const FRAME_MAX: usize = 2048;

impl TcpFraming {
    /// The frame `b` starts with: what the layer reads of it (the STUN,
    /// ChannelData, DTLS or RTP message, cut where `b` ends) and its
    /// length on the wire. `None` when `b` does not start a frame as far
    /// as its first bytes tell: too short to hold the length, a first
    /// byte no frame of this framing has, an RFC 4571 length of 0, or a
    /// frame longer than [`FRAME_MAX`].
    fn frame(self, b: &[u8]) -> Option<(&[u8], usize)> {
        match self {
            TcpFraming::Rfc4571 => {
                let (&[hi, lo], rest) = b.split_first_chunk::<2>()?;
                let len = usize::from(u16::from_be_bytes([hi, lo]));
                // STUN, DTLS, RTP/RTCP (RFC 9443): what ICE-TCP carries.
                let known = rest
                    .first()
                    .is_some_and(|&x| matches!(x, 0..=3 | 20..=63 | 128..=191));
                (len > 0 && len <= FRAME_MAX && known)
                    .then(|| (&rest[..len.min(rest.len())], 2 + len))
            }
            TcpFraming::Turn => {
                let h: &[u8; 4] = b.first_chunk()?;
                let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
                let wire = match h[0] {
                    0..=3 => 20 + len,
                    // RFC 8656 §12.5: padded to 4 bytes over TCP.
                    64..=79 => (4 + len + 3) & !3,
                    _ => return None,
                };
                (wire <= FRAME_MAX).then(|| (&b[..wire.min(b.len())], wire))
            }
        }
    }
}

fn fnv(h: &mut u64, b: &[u8]) {
    for &x in b {
        *h ^= u64::from(x);
        *h = h.wrapping_mul(0x100_0000_01b3);
    }
}

/// Audio and video static payload types of RFC 3551 with their clocks.
fn static_pt(pt: u8) -> Option<(u32, Kind)> {
    match pt {
        0 | 3 | 4 | 5 | 7 | 8 | 9 | 12 | 13 | 15 | 18 => Some((8_000, Kind::Audio)),
        6 => Some((16_000, Kind::Audio)),
        10 | 11 => Some((44_100, Kind::Audio)),
        14 => Some((90_000, Kind::Audio)),
        25 | 26 | 28 | 31 | 32 | 33 | 34 => Some((90_000, Kind::Video)),
        _ => None,
    }
}

/// The standard clock nearest `rate` within [`CLOCK_TOLERANCE`].
fn nearest_clock(rate: f64) -> Option<(u32, bool)> {
    if !rate.is_finite() || rate <= 0.0 {
        return None;
    }
    let (best, dist) = CLOCKS
        .iter()
        .map(|&(c, v)| ((c, v), (rate / f64::from(c)).ln().abs()))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    (dist <= CLOCK_TOLERANCE.ln()).then_some(best)
}

impl Clear {
    /// The app named by the first SOFTWARE attribute seen.
    pub fn app(&self) -> Option<&str> {
        let b = self.app.get(..usize::from(self.app_len))?;
        (!b.is_empty())
            .then(|| std::str::from_utf8(b).ok())
            .flatten()
    }

    /// Reads a TCP segment's payload of a flow framed as `framing`
    /// says: each frame it holds, in order, as [`Clear::packet`] reads a
    /// datagram. The first frame starts where the previous segment's
    /// last one ends (its `carry`), or, when no frame starts there (a
    /// segment lost before the capture, repeated or out of order), at the
    /// segment's start; a segment that starts no frame is not read. The
    /// frame the segment ends in is read as far as it goes: a ChannelData
    /// message's datagram, or an RTP header, are read from their first
    /// bytes (an RTP packet's length is then what the segment holds of
    /// it).
    pub fn segment(
        &mut self,
        framing: TcpFraming,
        payload: &[u8],
        from_client: bool,
        ts: Nanos,
        index: u32,
    ) {
        let d = usize::from(!from_client);
        let skip = std::mem::take(&mut self.carry[d]) as usize;
        let mut rest = payload;
        if skip > 0 {
            match payload.get(skip..) {
                Some(after) if !after.is_empty() => {
                    if framing.frame(after).is_some() {
                        rest = after;
                    }
                }
                _ => {
                    self.carry[d] = (skip - payload.len()) as u32;
                    return;
                }
            }
        }
        // Each turn moves at least 3 bytes on, or stops.
        while let Some((frame, wire)) = framing.frame(rest) {
            match rest.get(wire..) {
                Some(next) => {
                    self.packet(frame, from_client, ts, index);
                    if next.is_empty() {
                        break;
                    }
                    rest = next;
                }
                None => {
                    // Cut by the segment's end: its first bytes are read
                    // (an RTP header, inside ChannelData too), and the
                    // rest is skipped in the next segment.
                    match (framing, frame.first()) {
                        (TcpFraming::Turn, Some(64..=79)) => {
                            self.relayed = self.relayed.saturating_add(1);
                            let data = frame.get(4..).unwrap_or_default();
                            self.cut_datagram(data, from_client, ts, index);
                        }
                        _ => self.packet(frame, from_client, ts, index),
                    }
                    self.carry[d] = (wire - rest.len()) as u32;
                    break;
                }
            }
        }
    }

    /// Reads one packet's payload (see the module docs); `index` is the
    /// packet's number in the flow.
    pub fn packet(&mut self, payload: &[u8], from_client: bool, ts: Nanos, index: u32) {
        let (relay, inner) = match unwrap_turn(payload) {
            Some((r, d)) => {
                self.relayed = self.relayed.saturating_add(1);
                (Some(r), d)
            }
            None => (None, payload),
        };
        match classify(inner) {
            Demux::Rtp => {
                self.rtp_class = self.rtp_class.saturating_add(1);
                if let Ok(rtp) = Rtp::parse(inner) {
                    self.rtp(&rtp, from_client, ts, index, relay);
                }
            }
            Demux::Rtcp => {
                self.rtp_class = self.rtp_class.saturating_add(1);
                self.rtcp = self.rtcp.saturating_add(1);
            }
            Demux::Stun => {
                if let Ok(s) = Stun::parse(inner) {
                    self.stun = self.stun.saturating_add(1);
                    self.stun_msg(&s);
                }
            }
            Demux::Dtls => {
                if let Ok(r) = Record::parse(inner) {
                    match r.content_type {
                        22 => self.dtls[0] = self.dtls[0].saturating_add(1),
                        23 => self.dtls[1] = self.dtls[1].saturating_add(1),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }

    /// The start of a datagram a TURN-over-TCP segment cut (ChannelData
    /// whose message the next segment ends): an RTP or RTCP packet is
    /// read as [`Clear::packet`] reads it, anything else is not (its
    /// header runs past the segment). Kept apart from `packet`, each
    /// datagram's path, as its code was before TCP's cut frames.
    fn cut_datagram(&mut self, data: &[u8], from_client: bool, ts: Nanos, index: u32) {
        match classify(data) {
            Demux::Rtp => {
                self.rtp_class = self.rtp_class.saturating_add(1);
                if let Ok(rtp) = Rtp::parse(data) {
                    self.rtp(&rtp, from_client, ts, index, Some(Relay::Channel));
                }
            }
            Demux::Rtcp => {
                self.rtp_class = self.rtp_class.saturating_add(1);
                self.rtcp = self.rtcp.saturating_add(1);
            }
            _ => {}
        }
    }

    fn stun_msg(&mut self, s: &Stun<'_>) {
        if self.app_len == 0 {
            if let Some(sw) = s.software() {
                // Cut on a character boundary.
                let mut n = sw.len().min(APP_MAX);
                while !sw.is_char_boundary(n) {
                    n -= 1;
                }
                self.app[..n].copy_from_slice(&sw.as_bytes()[..n]);
                self.app_len = n as u8;
            }
        }
        if self.call == 0 {
            if let Some((a, b)) = s.username().and_then(|u| u.split_once(':')) {
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let mut h = 0xcbf2_9ce4_8422_2325u64;
                fnv(&mut h, lo.as_bytes());
                fnv(&mut h, b":");
                fnv(&mut h, hi.as_bytes());
                self.call = h.max(1);
            }
        }
    }

    /// Inlined in both callers: called from `packet`, it cost a run of
    /// RTP calls (voip200) 3–4 % more instructions.
    #[inline(always)]
    fn rtp(&mut self, r: &Rtp, from_client: bool, ts: Nanos, index: u32, relay: Option<Relay>) {
        let found = self
            .tracks
            .iter()
            .position(|t| t.used && t.ssrc == r.ssrc && t.from_client == from_client);
        let Some(i) = found else {
            // A new stream: a free slot, else the undecided one with the
            // fewest consistent steps.
            let slot = self.tracks.iter().position(|t| !t.used).or_else(|| {
                self.tracks
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| t.kind.is_none())
                    .min_by_key(|(_, t)| t.steps)
                    .map(|(i, _)| i)
            });
            if let Some(i) = slot {
                self.tracks[i] = Track {
                    ssrc: r.ssrc,
                    from_client,
                    pt: r.pt,
                    used: true,
                    last_seq: r.seq,
                    last_ts: r.ts,
                    last_ns: ts,
                    first_ns: ts,
                    first_len: r.payload_len,
                    relay,
                    ..Track::default()
                };
            }
            return;
        };
        let t = &mut self.tracks[i];
        let seq_step = r.seq.wrapping_sub(t.last_seq);
        let ts_step = r.ts.wrapping_sub(t.last_ts);
        if seq_step == 0 || seq_step > u16::MAX / 2 {
            // A duplicate or a late packet: no step, but quality sees it.
            if let Some(s) = &mut t.stats {
                s.packet(ts, r.seq, r.ts, r.payload_len);
            }
            return;
        }
        let consistent = seq_step <= SEQ_GAP && ts_step <= TS_STEP_MAX && r.pt == t.pt;
        let mut refine_now = false;
        if consistent {
            if t.stats.is_none() {
                let mut s = Box::new(StreamStats::new(t.clock));
                s.packet(t.first_ns, t.last_seq, t.last_ts, t.first_len);
                t.stats = Some(s);
            }
            self.consistent = self.consistent.saturating_add(1);
            // The run, the steps and the spans decide a stream's kind and
            // infer its clock (again, with `refine`): a stream that has a
            // kind and no clock to infer again reads them no more.
            if t.kind.is_none() || t.refine {
                t.run += 1;
                t.steps = t.steps.saturating_add(1);
                if ts_step == 0 {
                    t.same_ts += 1;
                } else if ts_step < VIDEO_STEP_MIN * u32::from(seq_step) {
                    t.small += 1;
                }
                t.seg_ts += u64::from(ts_step);
                t.seg_ns += ts.saturating_sub(t.last_ns);
                if t.seg_ns >= SEGMENT_NS {
                    let paced = t.seg_ts as f64 * 1e9 <= t.seg_ns as f64 * RATE_MAX;
                    // The segment after a flushed one before any was
                    // counted (the backlog a sender flushes as the stream
                    // starts) holds the flush's tail with the first paced
                    // packets: left out too. Later, counted spans dilute it.
                    if paced && !(t.flushed && t.ns_span == 0) {
                        t.ts_span += t.seg_ts;
                        t.ns_span += t.seg_ns;
                    }
                    t.flushed = !paced;
                    t.seg_ts = 0;
                    t.seg_ns = 0;
                    refine_now = t.refine && t.ns_span >= REFINE_NS;
                }
            }
        } else {
            t.run = 0;
        }
        if let Some(s) = &mut t.stats {
            s.packet(ts, r.seq, r.ts, r.payload_len);
        }
        t.last_seq = r.seq;
        t.last_ts = r.ts;
        t.last_ns = ts;
        if t.kind.is_none() && t.run >= RUN_MIN && t.ns_span >= SPAN_MIN_NS {
            let inferred = nearest_clock(t.ts_span as f64 * 1e9 / t.ns_span as f64);
            let pt = t.pt;
            let known = self
                .tracks
                .iter()
                .find(|o| o.pt == pt && o.used && o.kind.is_some())
                .map(|o| (o.clock, o.kind));
            let t = &mut self.tracks[i];
            if inferred.is_some_and(|(_, video)| video)
                && known.is_none()
                && static_pt(t.pt).is_none()
                && t.restarts < RESTARTS_MAX
                && t.same_ts * 5 < t.steps
                && t.small * 2 > t.steps - t.same_ts
            {
                // 90 kHz from steps no video frame takes: a backlog drained
                // at about twice real time. Read the clock from the
                // segments after it.
                t.restarts += 1;
                t.ts_span = 0;
                t.ns_span = 0;
                return;
            }
            let (clock, mut kind) = match (known, static_pt(t.pt), inferred) {
                (Some(ck), _, _) => ck,
                (None, Some((c, k)), _) => (c, Some(k)),
                (None, None, Some((c, video))) => {
                    t.refine = true;
                    (c, Some(if video { Kind::Video } else { Kind::Audio }))
                }
                // No standard clock, but a long run of one SSRC's
                // sequence numbers: media at a clock of its own (LINE's
                // RTP counts milliseconds), audio unless its frames span
                // several packets.
                (None, None, None) if t.run >= CLOCKLESS_RUN => (0, Some(Kind::Audio)),
                (None, None, None) => (0, None),
            };
            // Frames of several packets: video.
            if known.is_none() && kind.is_some() && t.same_ts * 5 >= t.steps {
                kind = Some(Kind::Video);
            }
            if let Some(k) = kind {
                t.kind = Some(k);
                t.clock = clock;
                if let Some(s) = &mut t.stats {
                    s.set_clock(clock);
                }
                // The first stream decides; a video stream later in a flow
                // decided audio (audio and video bundled) makes it video.
                let upgrade = k == Kind::Video && self.verdict.is_some_and(|v| v.0 == Kind::Audio);
                if self.verdict.is_none() || upgrade {
                    let conf = f64::from(self.consistent) / f64::from(self.rtp_class.max(1));
                    self.verdict = Some((k, conf.min(1.0) as f32, index, i as u8));
                }
            }
        }
        if refine_now {
            self.refine(i);
        }
    }

    /// Infers track `i`'s clock again from its spans so far (once): a
    /// standard rate of the same kind as its clock replaces that clock in
    /// it and in the streams that took it from it (the same payload type
    /// and clock).
    fn refine(&mut self, i: usize) {
        let t = &mut self.tracks[i];
        t.refine = false;
        let old = t.clock;
        let pt = t.pt;
        let Some((new, video)) = nearest_clock(t.ts_span as f64 * 1e9 / t.ns_span as f64) else {
            return;
        };
        if new == old || video != (old == 90_000) {
            return;
        }
        for o in self.tracks.iter_mut() {
            if o.used && o.pt == pt && o.clock == old && o.kind.is_some() {
                o.clock = new;
                if let Some(s) = &mut o.stats {
                    s.set_clock(new);
                }
            }
        }
    }

    /// Whether a stream is on its way to a verdict (two consistent steps
    /// in a row, no kind yet) while none has decided.
    pub fn promising(&self) -> bool {
        self.verdict.is_none()
            && self
                .tracks
                .iter()
                .any(|t| t.used && t.kind.is_none() && t.run >= 2)
    }

    /// Whether RTP is ruled out of the flow by what the layer read: at
    /// least `rtp` datagrams (after TURN) that demultiplexed as RTP (not
    /// RTCP), none of them a consistent step of a stream, and no STUN
    /// message, TURN framing or DTLS handshake record (a WebRTC flow
    /// starts with ICE's STUN; an RTP stream's second packet is its first
    /// step). With RTP-class packets seen, the DTLS tunnel test cannot
    /// pass any more either.
    pub fn rtp_ruled_out(&self, rtp: u32) -> bool {
        self.consistent == 0
            && self.rtp_class.saturating_sub(self.rtcp) >= rtp
            && self.verdict.is_none()
            && self.stun == 0
            && self.relayed == 0
            && self.dtls[0] == 0
    }

    /// A DTLS tunnel or a WebRTC data channel: no RTP or RTCP at all, and
    /// DTLS application data in more than half of the flow's `packets` or,
    /// after a DTLS handshake, in at least 3 of them.
    pub fn dtls_tunnel(&self, packets: u32) -> bool {
        self.rtp_class == 0
            && (u64::from(self.dtls[1]) * 2 > u64::from(packets)
                || (self.dtls[0] > 0 && self.dtls[1] >= 3))
    }

    /// Whether track `t` (of the verdict) came through TURN.
    pub fn relayed_track(&self, t: u8) -> bool {
        self.tracks
            .get(usize::from(t))
            .is_some_and(|t| t.relay.is_some())
    }

    /// The quality of the flow's stream with the most packets among those
    /// with a kind.
    pub fn quality(&self) -> Option<Quality> {
        let streams = self.tracks.iter().filter(|t| t.kind.is_some()).count() as u32;
        let t = self
            .tracks
            .iter()
            .filter(|t| t.kind.is_some())
            .max_by_key(|t| t.stats.as_ref().map_or(0, |s| s.packets))?;
        let s = t.stats.as_ref()?;
        Some(Quality {
            ssrc: t.ssrc,
            clock: t.clock,
            packets: s.packets,
            lost: s.lost(),
            reordered: s.reordered,
            jitter_ms: s.mean_jitter_ms(),
            jitter_max_ms: s.max_jitter_ms(),
            streams,
            relay: match t.relay {
                None => 0,
                Some(Relay::Channel) => 1,
                Some(Relay::Indication) => 2,
            },
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An RTP packet: PT, seq, ts, SSRC and `len` payload bytes.
    pub(crate) fn rtp(pt: u8, seq: u16, ts: u32, ssrc: u32, len: usize) -> Vec<u8> {
        let mut b = vec![0x80, pt];
        b.extend_from_slice(&seq.to_be_bytes());
        b.extend_from_slice(&ts.to_be_bytes());
        b.extend_from_slice(&ssrc.to_be_bytes());
        b.extend(std::iter::repeat_n(0x5a, len));
        b
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn tcp_framing_tells_turn_from_ice_tcp_and_unframe_takes_the_length_off() {
        let mut bind = vec![0x00, 0x01, 0x00, 0x08];
        bind.extend_from_slice(&super::super::stun::MAGIC.to_be_bytes());
        bind.extend_from_slice(&[7; 12]);
        bind.extend_from_slice(&[0x80, 0x22, 0x00, 0x04, b'l', b'a', b'b', b'!']);
        assert_eq!(tcp_framing(&bind), Some(TcpFraming::Turn));
        let mut framed = (bind.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&bind);
        assert_eq!(tcp_framing(&framed), Some(TcpFraming::Rfc4571));
        // A length that is not the message's, a cut message, no cookie,
        // an HTTP request, too short: neither.
        let mut wrong = framed.clone();
        wrong[1] += 4;
        wrong.extend_from_slice(&[0; 4]);
        assert_eq!(tcp_framing(&wrong), None);
        assert_eq!(tcp_framing(&framed[..framed.len() - 1]), None);
        let mut nocookie = framed.clone();
        nocookie[6] ^= 1;
        assert_eq!(tcp_framing(&nocookie), None);
        assert_eq!(tcp_framing(b"GET / HTTP/1.1\r\n\r\n"), None);
        assert_eq!(tcp_framing(&[0x00]), None);
        assert_eq!(tcp_framing(&[]), None);
        // ChannelData at the start: TURN.
        assert_eq!(
            tcp_framing(&[0x40, 0x00, 0x00, 0x04, 1, 2, 3, 4]),
            Some(TcpFraming::Turn)
        );
        let f = TcpFraming::Rfc4571;
        assert_eq!(f.frame(&framed), Some((&bind[..], framed.len())));
        assert_eq!(f.frame(&[0x00, 0x00, 0x80]), None);
        assert_eq!(f.frame(&[0x00, 0x05]), None);
        assert_eq!(f.frame(&[0x00, 0x05, 0x44]), None);
        assert_eq!(f.frame(&[0x00, 0x05, 0x80]), Some((&[0x80][..], 7)));
        let t = TcpFraming::Turn;
        assert_eq!(
            t.frame(&[0x40, 0x00, 0x00, 0x05, 1]),
            Some((&[0x40, 0, 0, 5, 1][..], 12))
        );
        assert_eq!(t.frame(&[0x17, 0xfe, 0xfd, 0x00]), None);
    }

    #[test]
    fn segments_are_read_frame_by_frame_across_their_bounds() {
        // RTP at 20 ms, each packet after its RFC 4571 length or in a
        // ChannelData message (padded to 4 bytes over TCP), in segments
        // as a sender's writes make them: one frame, two frames, a frame
        // cut across two segments.
        for framing in [TcpFraming::Rfc4571, TcpFraming::Turn] {
            let mut stream = Vec::new();
            let mut cuts = vec![0];
            for i in 0..60u16 {
                let rtp = rtp(
                    111,
                    500 + i,
                    960 * u32::from(i),
                    0x77,
                    60 + usize::from(i % 7),
                );
                let len = (rtp.len() as u16).to_be_bytes();
                match framing {
                    TcpFraming::Rfc4571 => stream.extend_from_slice(&len),
                    TcpFraming::Turn => stream.extend_from_slice(&[0x40, 0x01, len[0], len[1]]),
                }
                stream.extend_from_slice(&rtp);
                if framing == TcpFraming::Turn {
                    stream.resize(stream.len().next_multiple_of(4), 0);
                }
                match i % 5 {
                    1 => {}
                    3 => cuts.push(stream.len() - 25),
                    _ => cuts.push(stream.len()),
                }
            }
            cuts.push(stream.len());
            let segs: Vec<&[u8]> = cuts
                .windows(2)
                .map(|w| &stream[w[0]..w[1]])
                .filter(|s| !s.is_empty())
                .collect();
            let read = |skip: Option<usize>| {
                let mut c = Clear::FRESH;
                for (k, seg) in segs.iter().enumerate().filter(|(k, _)| Some(*k) != skip) {
                    let k = k as u64;
                    c.segment(framing, seg, true, k * 20_000_000, k as u32 + 1);
                }
                c
            };
            let c = read(None);
            let q = c.quality().unwrap();
            assert_eq!((q.packets, q.lost), (60, 0), "{framing:?} {q:?}");
            assert_eq!(c.verdict.map(|v| v.0), Some(Kind::Audio));
            // A segment lost before the capture (the one after a cut
            // frame): reading goes on from the next segment that starts a
            // frame.
            let c = read(Some(17));
            let q = c.quality().unwrap();
            assert!(
                q.packets >= 55 && (1..=4).contains(&q.lost),
                "{framing:?} {q:?}"
            );
        }
    }

    #[test]
    fn the_fresh_state_is_the_default() {
        assert_eq!(
            format!("{:?}", Clear::FRESH),
            format!("{:?}", Clear::default())
        );
    }

    #[test]
    fn an_inert_payload_changes_nothing_and_is_not_worth_the_state() {
        // A flow part way through a stream, then every first byte under
        // payloads of several lengths and contents.
        let mut c = Clear::default();
        for s in 0..4u16 {
            c.packet(
                &rtp(111, s, u32::from(s) * 960, 7, 40),
                true,
                u64::from(s) * 20 * MS,
                u32::from(s) + 1,
            );
        }
        let mut inert_bytes = 0;
        for first in 0..=255u8 {
            for (len, seed) in [(1usize, 0u8), (4, 1), (12, 2), (20, 3), (48, 4), (300, 5)] {
                let mut b: Vec<u8> = (0..len)
                    .map(|i| {
                        (i as u8)
                            .wrapping_mul(31)
                            .wrapping_add(seed.wrapping_mul(97))
                    })
                    .collect();
                b[0] = first;
                // A length field that fits, as ChannelData's or STUN's
                // would: still only what the first byte says counts.
                if len >= 4 {
                    b[2..4].copy_from_slice(&((len - 4) as u16).to_be_bytes());
                }
                if !inert(&b) {
                    continue;
                }
                inert_bytes += 1;
                assert!(!worth(&b), "{first}");
                let before = format!("{c:?}");
                c.packet(&b, first % 2 == 0, 100 * MS, 9);
                assert_eq!(format!("{c:?}"), before, "first byte {first}, {len} bytes");
            }
        }
        // 4..=19, 80..=127 and 192..=255, six payloads each.
        assert_eq!(inert_bytes, (16 + 48 + 64) * 6);
        assert!(inert(&[]));
        for first in [0u8, 3, 20, 63, 64, 79, 128, 191] {
            assert!(!inert(&[first, 0, 0, 0]), "{first}");
        }
    }

    #[test]
    fn opus_at_48k_is_audio_with_its_clock_and_quality() {
        let mut c = Clear::default();
        // Dynamic PT 111, 20 ms frames (960 ticks), packet 7 lost,
        // packets 12 and 13 swapped, arrivals ±2 ms.
        let mut order: Vec<u16> = (0..40).filter(|&s| s != 7).collect();
        order.swap(11, 12);
        for (i, &s) in order.iter().enumerate() {
            let ts = u64::from(s) * 20 * MS + (i as u64 % 3) * 2 * MS;
            c.packet(
                &rtp(111, 1000 + s, 5000 + u32::from(s) * 960, 0xabc, 80),
                true,
                ts,
                i as u32 + 1,
            );
        }
        let (k, conf, at, _) = c.verdict.unwrap();
        assert_eq!(k, Kind::Audio);
        assert!(conf > 0.8, "{conf}");
        assert_eq!(at, 6);
        let q = c.quality().unwrap();
        assert_eq!(
            (q.ssrc, q.clock, q.packets, q.lost, q.reordered),
            (0xabc, 48_000, 39, 1, 1)
        );
        assert!(q.jitter_ms.is_some_and(|j| j > 0.0 && j < 5.0), "{q:?}");
        assert_eq!(q.relay, 0);
    }

    #[test]
    fn a_clock_read_as_44k1_early_is_48k_over_a_second() {
        let mut c = Clear::default();
        // Opus (960 ticks a frame) whose first 8 frames arrive 21.8 ms
        // apart (a sender settling: 44 kHz over them), then every 20 ms;
        // the other direction's stream of the same payload type takes the
        // clock from the first.
        let mut at = 0;
        let mut i = 0;
        for s in 0u16..70 {
            at += if s <= 8 { 21_800_000 } else { 20 * MS };
            i += 1;
            c.packet(&rtp(111, s, u32::from(s) * 960, 0xa, 80), true, at, i);
            if s == 20 {
                assert_eq!(c.quality().unwrap().clock, 44_100, "inferred early");
            }
            if s >= 10 {
                i += 1;
                let b = rtp(111, s, 7 + u32::from(s) * 960, 0xb, 80);
                c.packet(&b, false, at + MS, i);
            }
        }
        assert_eq!(c.verdict.unwrap().0, Kind::Audio);
        assert!(c
            .tracks
            .iter()
            .filter(|t| t.used)
            .all(|t| t.clock == 48_000));
        let q = c.quality().unwrap();
        assert_eq!((q.ssrc, q.clock), (0xa, 48_000));
        // The jitter is at 48 kHz from the refinement on: the arrivals are
        // then exactly 20 ms a frame, so it is 0.
        assert_eq!((q.jitter_ms, q.jitter_max_ms), (Some(0.0), Some(0.0)));
        // A static payload type's clock is never inferred again.
        let mut g = Clear::default();
        for s in 0u16..80 {
            let b = rtp(0, s, u32::from(s) * 160, 0xc, 160);
            g.packet(&b, true, u64::from(s) * 21 * MS, u32::from(s) + 1);
        }
        assert_eq!(g.quality().unwrap().clock, 8_000);
    }

    #[test]
    fn video_at_90k_with_frames_of_several_packets_and_g711_by_static_type() {
        let mut c = Clear::default();
        let mut seq = 0u16;
        let mut index = 0;
        // 25 frames/s (3600 ticks), 3 packets a frame.
        for f in 0..20u32 {
            for p in 0..3u64 {
                index += 1;
                c.packet(
                    &rtp(96, seq, f * 3600, 7, 900),
                    false,
                    u64::from(f) * 40 * MS + p * MS,
                    index,
                );
                seq += 1;
            }
        }
        assert_eq!(c.verdict.map(|v| v.0), Some(Kind::Video));
        assert_eq!(c.quality().unwrap().clock, 90_000);
        // PCMU (PT 0): 8 kHz from the type.
        let mut c = Clear::default();
        for s in 0..20u16 {
            c.packet(
                &rtp(0, s, u32::from(s) * 160, 9, 160),
                true,
                u64::from(s) * 20 * MS,
                u32::from(s) + 1,
            );
        }
        assert_eq!(c.verdict.map(|v| v.0), Some(Kind::Audio));
        assert_eq!(c.quality().unwrap().clock, 8_000);
    }

    #[test]
    fn rtp_inside_turn_channels_and_indications_next_to_stun_and_dtls() {
        let mut c = Clear::default();
        // ICE binding request with USERNAME "abcd:wxyz" and SOFTWARE.
        let mut bind = vec![0x00, 0x01, 0x00, 0x18];
        bind.extend_from_slice(&super::super::stun::MAGIC.to_be_bytes());
        bind.extend_from_slice(&[3; 12]);
        bind.extend_from_slice(&[0x00, 0x06, 0x00, 0x09]);
        bind.extend_from_slice(b"abcd:wxyz\0\0\0");
        bind.extend_from_slice(&[0x80, 0x22, 0x00, 0x04]);
        bind.extend_from_slice(b"app1");
        c.packet(&bind, true, 0, 1);
        assert_eq!(c.app(), Some("app1"));
        let call = c.call;
        assert_ne!(call, 0);
        // The other side's request names the ufrags the other way round.
        let mut other = Clear::default();
        let back: Vec<u8> = bind
            .iter()
            .copied()
            .enumerate()
            .map(|(i, b)| {
                if (24..33).contains(&i) {
                    b"wxyz:abcd"[i - 24]
                } else {
                    b
                }
            })
            .collect();
        other.packet(&back, false, 0, 1);
        assert_eq!(other.call, call);
        c.packet(
            &[22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1],
            true,
            MS,
            2,
        );
        assert_eq!(c.dtls, [1, 0]);
        for s in 0..30u16 {
            let r = rtp(111, s, u32::from(s) * 960, 42, 60);
            let mut ch = vec![0x40, 0x01];
            ch.extend_from_slice(&(r.len() as u16).to_be_bytes());
            ch.extend_from_slice(&r);
            c.packet(
                &ch,
                true,
                10 * MS + u64::from(s) * 20 * MS,
                u32::from(s) + 3,
            );
        }
        assert_eq!(c.verdict.map(|v| v.0), Some(Kind::Audio));
        assert_eq!(c.relayed, 30);
        assert_eq!(c.quality().unwrap().relay, 1);
    }

    #[test]
    fn a_flushed_burst_keeps_the_audio_clock_and_bundled_video_wins() {
        // 35 queued Opus packets flushed 0.4 ms apart, then every 20 ms:
        // 48 kHz (with the burst counted the spans say about 90 kHz).
        let mut c = Clear::default();
        let mut ns = 0;
        for s in 0..80u16 {
            ns += if s < 35 { 400_000 } else { 20 * MS };
            c.packet(
                &rtp(111, s, u32::from(s) * 960, 1, 80),
                true,
                ns,
                u32::from(s) + 1,
            );
        }
        assert_eq!(c.verdict.map(|v| v.0), Some(Kind::Audio));
        assert_eq!(c.quality().unwrap().clock, 48_000);
        // Audio decides first; the video stream of the same 5-tuple later
        // makes the flow video, at its packet.
        let mut c = Clear::default();
        let mut index = 0;
        for f in 0..40u32 {
            index += 1;
            c.packet(
                &rtp(111, f as u16, f * 960, 1, 80),
                true,
                u64::from(f) * 20 * MS,
                index,
            );
            if f >= 10 && f % 2 == 0 {
                for p in 0..2u32 {
                    index += 1;
                    let seq = ((f - 10) + p) as u16;
                    c.packet(
                        &rtp(96, seq, f / 2 * 3600, 2, 900),
                        true,
                        u64::from(f) * 20 * MS + 1,
                        index,
                    );
                }
            }
        }
        let (k, _, at, _) = c.verdict.unwrap();
        assert_eq!(k, Kind::Video);
        assert!(at > 20, "{at}");
    }

    #[test]
    fn a_backlog_flushed_over_milliseconds_and_jittered_pairs_stay_audio() {
        // As GStreamer's webrtcbin sends Opus once ICE and DTLS complete:
        // 110 queued packets (2.2 s of audio) over about 100 ms, some 3 to
        // 5.5 ms apart (each step alone "says" 175 to 320 kHz), then paced
        // at 20 ms, with jitter bunching pairs (a 39.6 ms gap, then 0.4 ms).
        let mut c = Clear::default();
        let mut ns = 0;
        for s in 0..200u16 {
            ns += match s {
                0..110 if s % 7 == 3 => 5_500_000,
                0..110 if s % 5 == 1 => 3_000_000,
                0..110 => 400_000,
                _ if s % 2 == 0 => 39_600_000,
                _ => 400_000,
            };
            c.packet(
                &rtp(111, s, u32::from(s) * 960, 1, 80),
                true,
                ns,
                u32::from(s) + 1,
            );
        }
        assert_eq!(c.verdict.map(|v| v.0), Some(Kind::Audio));
        assert_eq!(c.quality().unwrap().clock, 48_000);
    }

    #[test]
    fn a_backlog_drained_at_twice_real_time_is_not_a_video_clock() {
        // GStreamer's Opus over TURN/TCP on a loaded machine: 1.4 s of
        // queued audio sent at 10 ms a packet (960 ticks in 10 ms: 96 kHz,
        // under RATE_MAX, so no segment reads as a flush), then paced at
        // 20 ms. Read from the drain alone it was 90 kHz, video.
        let mut c = Clear::default();
        let mut ns = 0;
        for s in 0..160u16 {
            ns += if s < 70 { 10 * MS } else { 20 * MS };
            c.packet(
                &rtp(111, s, u32::from(s) * 960, 1, 80),
                true,
                ns,
                u32::from(s) + 1,
            );
        }
        assert_eq!(c.verdict.map(|v| v.0), Some(Kind::Audio));
        assert_eq!(c.quality().unwrap().clock, 48_000);
        // Decided after the drain, on the paced packets.
        assert!(c.verdict.unwrap().2 > 70, "{:?}", c.verdict);
    }

    #[test]
    fn a_90k_stream_of_small_single_packet_frames_is_video_after_the_restarts() {
        // 120 frames a second at 90 kHz (750 ticks), one packet a frame:
        // read again RESTARTS_MAX times, then taken as it reads.
        let mut c = Clear::default();
        let mut ns = 0;
        for s in 0..600u16 {
            ns += 8_333_333;
            c.packet(
                &rtp(96, s, u32::from(s) * 750, 1, 900),
                true,
                ns,
                u32::from(s) + 1,
            );
        }
        assert_eq!(c.verdict.map(|v| v.0), Some(Kind::Video));
        assert_eq!(c.quality().unwrap().clock, 90_000);
        assert_eq!(c.tracks[0].restarts, RESTARTS_MAX);
        // A 90 kHz stream of larger steps is read at once, as before.
        let mut c = Clear::default();
        for s in 0..40u16 {
            c.packet(
                &rtp(96, s, u32::from(s) * 3000, 1, 900),
                true,
                u64::from(s) * 33_333_333,
                u32::from(s) + 1,
            );
        }
        assert_eq!(c.verdict.map(|v| v.0), Some(Kind::Video));
        assert_eq!(c.tracks[0].restarts, 0);
    }

    #[test]
    fn the_segment_after_a_flushed_one_is_left_out() {
        // 61 queued Opus packets 0.5 ms apart (a 30 ms segment at 1.9 MHz,
        // left out), 3 more 2 ms apart, then paced at 20 ms: the next
        // segment holds the flush's tail and two paced steps, 4800 ticks in
        // 46 ms (104 kHz, under the fastest clock): counted, it made the
        // stream 90 kHz, video (as GStreamer's audio in lab run 5).
        let mut c = Clear::default();
        let mut ns = 0;
        for s in 0..90u16 {
            ns += match s {
                0..61 => 500_000,
                61..64 => 2 * MS,
                _ => 20 * MS,
            };
            c.packet(
                &rtp(111, s, u32::from(s) * 960, 1, 80),
                true,
                ns,
                u32::from(s) + 1,
            );
        }
        assert_eq!(c.verdict.map(|v| v.0), Some(Kind::Audio));
        assert_eq!(c.quality().unwrap().clock, 48_000);
    }

    #[test]
    fn a_stream_of_a_payload_type_with_a_kind_takes_that_kind() {
        // Opus one way at 48 kHz; the other way the same PT 111 whose
        // timestamps run 1.6 times ahead of capture time (a sender whose
        // pipeline drifts): alone it would be a 75 kHz clock, nearest
        // 90 kHz, video; on this 5-tuple PT 111 is the audio codec.
        let mut c = Clear::default();
        let mut index = 0;
        for s in 0..60u16 {
            let ns = u64::from(s) * 20 * MS;
            index += 1;
            c.packet(&rtp(111, s, u32::from(s) * 960, 1, 80), true, ns, index);
            if s >= 10 {
                index += 1;
                let ts = u32::from(s) * 1536;
                c.packet(&rtp(111, s, ts, 2, 80), false, ns + MS, index);
            }
        }
        assert_eq!(c.verdict.map(|v| v.0), Some(Kind::Audio));
        assert_eq!(
            c.tracks
                .iter()
                .filter(|t| t.kind == Some(Kind::Audio))
                .count(),
            2
        );
        // A different PT on the same 5-tuple keeps its own inference.
        let mut c = Clear::default();
        for s in 0..60u16 {
            let ns = u64::from(s) * 20 * MS;
            c.packet(
                &rtp(111, s, u32::from(s) * 960, 1, 80),
                true,
                ns,
                u32::from(s) + 1,
            );
            c.packet(
                &rtp(96, s, u32::from(s) * 1800, 2, 80),
                false,
                ns + MS,
                u32::from(s) + 100,
            );
        }
        assert_eq!(c.verdict.map(|v| v.0), Some(Kind::Video));
    }

    #[test]
    fn random_and_inconsistent_headers_decide_nothing() {
        let mut c = Clear::default();
        let mut x = 0x1234_5678u32;
        for i in 0..500u32 {
            let mut b = [0u8; 60];
            for v in b.iter_mut() {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *v = x as u8;
            }
            b[0] = 0x80 | (b[0] & 0x3f);
            c.packet(&b, i % 2 == 0, u64::from(i) * 20 * MS, i + 1);
        }
        assert!(c.verdict.is_none());
        // One SSRC, but sequence numbers jumping: no run.
        let mut c = Clear::default();
        for i in 0..60u16 {
            c.packet(
                &rtp(100, i.wrapping_mul(977), u32::from(i) * 960, 5, 50),
                true,
                u64::from(i) * 20 * MS,
                u32::from(i) + 1,
            );
        }
        assert!(c.verdict.is_none());
        // Consistent steps at a 5 kHz clock: no kind for 9 steps in a row;
        // at the 10th, audio at a clock of its own (no jitter figures).
        let mut c = Clear::default();
        for i in 0..10u16 {
            c.packet(
                &rtp(100, i, u32::from(i) * 100, 5, 50),
                true,
                u64::from(i) * 20 * MS,
                u32::from(i) + 1,
            );
        }
        assert!(c.verdict.is_none());
        c.packet(&rtp(100, 10, 1000, 5, 50), true, 200 * MS, 11);
        assert_eq!(c.verdict.map(|v| (v.0, v.2)), Some((Kind::Audio, 11)));
        let q = c.quality().unwrap();
        assert_eq!((q.clock, q.packets, q.jitter_ms), (0, 11, None));
        // LINE's RTP (the corpus's line.pcap): a millisecond clock, 10 to
        // 100 ms between packets; interleaved with its own framing.
        let mut c = Clear::default();
        let gaps = [5u32, 20, 11, 19, 10, 21, 9, 100, 11, 99, 10, 20];
        let (mut ms, mut index) = (0u32, 0);
        for (i, g) in gaps.iter().enumerate() {
            ms += g;
            index += 2;
            c.packet(
                &[0xd3, 7, 7, 7, 7, 7, 7, 7, 7],
                true,
                u64::from(ms) * MS,
                index - 1,
            );
            c.packet(
                &rtp(101, i as u16, 15_000 + ms, 0x9bd_a678, 20),
                true,
                u64::from(ms) * MS,
                index,
            );
        }
        assert_eq!(c.verdict.map(|v| v.0), Some(Kind::Audio));
        assert_eq!(nearest_clock(47_000.0), Some((48_000, false)));
        assert_eq!(nearest_clock(90_500.0), Some((90_000, true)));
        assert_eq!(nearest_clock(5_000.0), None);
        assert_eq!(nearest_clock(f64::NAN), None);
    }
}
