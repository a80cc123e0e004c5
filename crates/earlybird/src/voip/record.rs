//! Call and RTP stream records: what the call tracker emits when a call or
//! a stream ends, and the record kinds ([`CALLS`], [`STREAMS`]) that carry
//! them to every row format (CSV, JSON lines, Parquet).
//!
//! Contract: a [`CallRecord`] holds one call with its media streams; a
//! stream without a call is a [`StreamRecord`] on its own. Times are
//! packet capture times in Unix nanoseconds; durations are derived from
//! them (never the wall clock). A value that was not observed is `None`
//! and written as null. [`push_call`] and [`push_stream`] write one row in
//! the field order of the kinds.

use crate::schema::{Field, FieldType, Kind, RowBatch};

use FieldType::{Str, F64, I64, U16, U32, U64};

/// Why a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndCause {
    /// The caller sent BYE.
    ByeCaller,
    /// The callee sent BYE.
    ByeCallee,
    /// The caller cancelled before an answer.
    Cancel,
    /// A final error response (≥ 300) ended the call before an answer.
    Error,
    /// No SIP or media for the call timeout.
    Timeout,
    /// Still open when the input ended (or the run was stopped).
    Open,
}

impl EndCause {
    /// Every cause.
    pub const ALL: [EndCause; 6] = [
        EndCause::ByeCaller,
        EndCause::ByeCallee,
        EndCause::Cancel,
        EndCause::Error,
        EndCause::Timeout,
        EndCause::Open,
    ];

    /// The cause of a name [`EndCause::name`] gives.
    pub fn from_name(s: &str) -> Option<EndCause> {
        EndCause::ALL.into_iter().find(|c| c.name() == s)
    }

    /// The name records use.
    pub fn name(self) -> &'static str {
        match self {
            EndCause::ByeCaller => "bye-caller",
            EndCause::ByeCallee => "bye-callee",
            EndCause::Cancel => "cancel",
            EndCause::Error => "error",
            EndCause::Timeout => "timeout",
            EndCause::Open => "open",
        }
    }
}

/// One RTP stream (one SSRC in one direction).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamRecord {
    /// The call it belongs to (by its SDP), if any.
    pub call_id: Option<String>,
    /// `caller` or `callee` (who sends it) when it belongs to a call.
    pub sender: Option<&'static str>,
    /// Source address and port.
    pub src: String,
    /// Source port.
    pub sport: u16,
    /// Destination address.
    pub dst: String,
    /// Destination port.
    pub dport: u16,
    /// RTP SSRC.
    pub ssrc: u32,
    /// Payload type of its first packet.
    pub pt: u8,
    /// Codec name from the SDP or the static payload types ("" if unknown).
    pub codec: String,
    /// RTP clock rate used for the jitter (0: unknown).
    pub clock: u32,
    /// First and last packet, Unix ns.
    pub first_ns: u64,
    /// Last packet, Unix ns.
    pub last_ns: u64,
    /// Packets received (duplicates included).
    pub packets: u64,
    /// RTP payload bytes.
    pub bytes: u64,
    /// Packets expected from the sequence numbers.
    pub expected: u64,
    /// Expected minus received.
    pub lost: i64,
    /// Duplicated packets.
    pub duplicates: u64,
    /// Packets that arrived after a higher sequence number.
    pub reordered: u64,
    /// Mean RFC 3550 jitter, ms (None at an unknown clock rate).
    pub jitter_mean_ms: Option<f64>,
    /// Largest jitter, ms.
    pub jitter_max_ms: Option<f64>,
    /// Largest gap between consecutive packets, ms.
    pub max_delta_ms: f64,
    /// The receiver's last RTCP report of this stream: cumulative lost.
    pub rtcp_lost: Option<i64>,
    /// Its fraction lost, 0..1.
    pub rtcp_fraction_lost: Option<f64>,
    /// Its interarrival jitter, ms.
    pub rtcp_jitter_ms: Option<f64>,
    /// Estimated MOS (`voip::mos`), None at an unknown clock rate.
    pub mos: Option<f64>,
}

/// One DTMF key press (RFC 4733).
#[derive(Debug, Clone, PartialEq)]
pub struct Dtmf {
    /// When its first packet arrived, Unix ns.
    pub ts: u64,
    /// The key: 0-9, *, #, A-D.
    pub key: char,
    /// Its duration, ms (from the end packet).
    pub duration_ms: f64,
    /// `caller` or `callee`.
    pub sender: &'static str,
}

/// One call (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    /// SIP Call-ID.
    pub call_id: String,
    /// User part of the From URI of the INVITE (empty when it has none).
    pub caller: String,
    /// From display name.
    pub caller_name: String,
    /// From URI.
    pub caller_uri: String,
    /// User part of the To URI.
    pub callee: String,
    /// To display name.
    pub callee_name: String,
    /// To URI.
    pub callee_uri: String,
    /// User-Agent of the INVITE.
    pub caller_ua: String,
    /// User-Agent or Server of the callee's responses.
    pub callee_ua: String,
    /// Source of the INVITE.
    pub caller_ip: String,
    /// Destination of the INVITE.
    pub callee_ip: String,
    /// UDP, TCP or SCTP.
    pub transport: &'static str,
    /// INVITE time, Unix ns.
    pub invite_ns: u64,
    /// First 180/183.
    pub ringing_ns: Option<u64>,
    /// 2xx to the INVITE.
    pub answer_ns: Option<u64>,
    /// End: the BYE, CANCEL, final error, last activity (timeout) or last
    /// packet seen (open).
    pub end_ns: u64,
    /// Final status of the INVITE (first 2xx, else the last final).
    pub status: Option<u16>,
    /// Its reason phrase.
    pub reason: String,
    /// Why the call ended.
    pub end_cause: EndCause,
    /// Codecs the SDP offered and answered, in order of first mention.
    pub codecs: Vec<String>,
    /// DTMF key presses.
    pub dtmf: Vec<Dtmf>,
    /// Media streams.
    pub streams: Vec<StreamRecord>,
}

impl CallRecord {
    /// Talk time: answer to end, ms (None when not answered).
    pub fn duration_ms(&self) -> Option<f64> {
        self.answer_ns
            .map(|a| self.end_ns.saturating_sub(a) as f64 / 1e6)
    }

    /// INVITE to the first ringing or answer, ms.
    pub fn setup_delay_ms(&self) -> Option<f64> {
        let first = match (self.ringing_ns, self.answer_ns) {
            (Some(r), Some(a)) => Some(r.min(a)),
            (r, a) => r.or(a),
        };
        first.map(|t| t.saturating_sub(self.invite_ns) as f64 / 1e6)
    }

    /// The lowest MOS of its streams.
    pub fn mos(&self) -> Option<f64> {
        self.streams
            .iter()
            .filter_map(|s| s.mos)
            .min_by(|a, b| a.total_cmp(b))
    }

    /// The DTMF keys in order, as one string.
    pub fn dtmf_keys(&self) -> String {
        self.dtmf.iter().map(|d| d.key).collect()
    }
}

/// Call records (`earlybird voip -o FILE`).
pub const CALLS: Kind = Kind::new(
    "calls",
    &[
        Field::new("call_id", Str, "", "SIP Call-ID"),
        Field::new("caller", Str, "", "User part of the INVITE's From URI"),
        Field::new("caller_name", Str, "", "From display name"),
        Field::new("caller_uri", Str, "", "From URI"),
        Field::new("callee", Str, "", "User part of the INVITE's To URI"),
        Field::new("callee_name", Str, "", "To display name"),
        Field::new("callee_uri", Str, "", "To URI"),
        Field::new("caller_ua", Str, "", "User-Agent of the INVITE"),
        Field::new("callee_ua", Str, "", "User-Agent/Server of the responses"),
        Field::new("caller_ip", Str, "", "Source address of the INVITE"),
        Field::new("callee_ip", Str, "", "Destination address of the INVITE"),
        Field::new("transport", Str, "", "UDP, TCP or SCTP"),
        Field::new("start_ns", U64, "ns", "INVITE time (Unix)"),
        Field::new("ringing_ns", U64, "ns", "First 180/183 (Unix)"),
        Field::new("answer_ns", U64, "ns", "2xx to the INVITE (Unix)"),
        Field::new("end_ns", U64, "ns", "End of the call (Unix)"),
        Field::new("setup_ms", F64, "ms", "INVITE to first ringing or answer"),
        Field::new("duration_ms", F64, "ms", "Answer to end"),
        Field::new("status", U16, "", "Final status of the INVITE"),
        Field::new("reason", Str, "", "Reason phrase of that status"),
        Field::new(
            "end_cause",
            Str,
            "",
            "bye-caller, bye-callee, cancel, error, timeout or open",
        ),
        Field::new("codecs", Str, "", "Codecs of the SDP, comma-separated"),
        Field::new("streams", U32, "", "RTP streams of the call"),
        Field::new("mos", F64, "", "Lowest estimated MOS of its streams"),
        Field::new("dtmf", Str, "", "DTMF keys (RFC 4733), in order"),
    ],
);

/// RTP stream records, with or without a call.
pub const STREAMS: Kind = Kind::new(
    "rtp_streams",
    &[
        Field::new("call_id", Str, "", "The call (empty: no SIP seen)"),
        Field::new("sender", Str, "", "caller or callee"),
        Field::new("src", Str, "", "Source address"),
        Field::new("sport", U16, "", "Source port"),
        Field::new("dst", Str, "", "Destination address"),
        Field::new("dport", U16, "", "Destination port"),
        Field::new(
            "community_id",
            Str,
            "",
            "Community ID v1 of the stream's UDP 5-tuple (seed --community-id-seed): the community_id of its flow record",
        ),
        Field::new("ssrc", U32, "", "RTP SSRC"),
        Field::new("pt", U16, "", "Payload type"),
        Field::new("codec", Str, "", "Codec name"),
        Field::new("first_ns", U64, "ns", "First packet (Unix)"),
        Field::new("last_ns", U64, "ns", "Last packet (Unix)"),
        Field::new("packets", U64, "", "Packets received"),
        Field::new("bytes", U64, "B", "RTP payload bytes"),
        Field::new(
            "expected",
            U64,
            "",
            "Packets expected from sequence numbers",
        ),
        Field::new("lost", I64, "", "Expected minus received"),
        Field::new("duplicates", U64, "", "Duplicated packets"),
        Field::new("reordered", U64, "", "Packets arriving after a later one"),
        Field::new("jitter_mean_ms", F64, "ms", "Mean RFC 3550 jitter"),
        Field::new("jitter_max_ms", F64, "ms", "Largest RFC 3550 jitter"),
        Field::new("max_delta_ms", F64, "ms", "Largest gap between packets"),
        Field::new(
            "rtcp_lost",
            I64,
            "",
            "Cumulative lost in the receiver's RTCP",
        ),
        Field::new("rtcp_fraction_lost", F64, "", "Fraction lost in its RTCP"),
        Field::new("rtcp_jitter_ms", F64, "ms", "Jitter in its RTCP"),
        Field::new("mos", F64, "", "Estimated MOS (E-model, docs/VOIP.md)"),
    ],
);

fn opt_u64(c: &mut crate::schema::Cells<'_>, v: Option<u64>) {
    match v {
        Some(v) => c.u64(v),
        None => c.null(),
    }
}

fn opt_f64(c: &mut crate::schema::Cells<'_>, v: Option<f64>) {
    match v {
        Some(v) => c.f64(v),
        None => c.null(),
    }
}

/// Writes `r` as one row of [`CALLS`].
pub fn push_call(b: &mut RowBatch, r: &CallRecord) {
    b.push(|c| {
        c.text(&r.call_id);
        c.text(&r.caller);
        c.text(&r.caller_name);
        c.text(&r.caller_uri);
        c.text(&r.callee);
        c.text(&r.callee_name);
        c.text(&r.callee_uri);
        c.text(&r.caller_ua);
        c.text(&r.callee_ua);
        c.text(&r.caller_ip);
        c.text(&r.callee_ip);
        c.text(r.transport);
        c.u64(r.invite_ns);
        opt_u64(c, r.ringing_ns);
        opt_u64(c, r.answer_ns);
        c.u64(r.end_ns);
        opt_f64(c, r.setup_delay_ms());
        opt_f64(c, r.duration_ms());
        opt_u64(c, r.status.map(u64::from));
        c.text(&r.reason);
        c.text(r.end_cause.name());
        c.text(&r.codecs.join(","));
        c.u64(r.streams.len() as u64);
        opt_f64(c, r.mos());
        c.text(&r.dtmf_keys());
    });
}

/// The Community ID of a stream's UDP 5-tuple; `None` when its addresses
/// are not two of one family.
fn stream_community_id(
    s: &StreamRecord,
    seed: u16,
) -> Option<crate::export::community_id::CommunityId> {
    use std::net::IpAddr;
    let bytes = |a: IpAddr| match a {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    let (src, dst) = (s.src.parse::<IpAddr>().ok()?, s.dst.parse::<IpAddr>().ok()?);
    if src.is_ipv4() != dst.is_ipv4() {
        return None;
    }
    Some(crate::export::community_id::v1(
        seed,
        &bytes(src),
        &bytes(dst),
        17,
        (s.sport, s.dport),
        false,
    ))
}

/// Writes `s` as one row of [`STREAMS`], its Community ID with `seed`
/// (`None`: null).
pub fn push_stream(b: &mut RowBatch, s: &StreamRecord, seed: Option<u16>) {
    b.push(|c| {
        c.text(s.call_id.as_deref().unwrap_or(""));
        c.text(s.sender.unwrap_or(""));
        c.text(&s.src);
        c.u64(u64::from(s.sport));
        c.text(&s.dst);
        c.u64(u64::from(s.dport));
        match seed.and_then(|seed| stream_community_id(s, seed)) {
            Some(id) => c.text(id.as_str()),
            None => c.null(),
        }
        c.u64(u64::from(s.ssrc));
        c.u64(u64::from(s.pt));
        c.text(&s.codec);
        c.u64(s.first_ns);
        c.u64(s.last_ns);
        c.u64(s.packets);
        c.u64(s.bytes);
        c.u64(s.expected);
        c.i64(s.lost);
        c.u64(s.duplicates);
        c.u64(s.reordered);
        opt_f64(c, s.jitter_mean_ms);
        opt_f64(c, s.jitter_max_ms);
        c.f64(s.max_delta_ms);
        match s.rtcp_lost {
            Some(v) => c.i64(v),
            None => c.null(),
        }
        opt_f64(c, s.rtcp_fraction_lost);
        opt_f64(c, s.rtcp_jitter_ms);
        opt_f64(c, s.mos);
    });
}
