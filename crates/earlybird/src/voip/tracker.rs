//! The call tracker: SIP dialogs, the media their SDP announces, and RTP
//! streams with or without SIP, turned into call and stream records.
//!
//! Contract:
//! - [`Tracker::packet`] takes UDP datagrams and TCP segments (a
//!   [`VoipPacket`]: capture time, endpoints, payload) in capture order per
//!   direction; packets of different connections may come slightly out of
//!   time order (from several shards). It never panics on any payload.
//! - SIP is found by content on any port: UDP datagrams that look like
//!   SIP, and TCP connections whose segments are put back in order
//!   (`stream::Reassembly`, bounded per direction) and read message by
//!   message. A call starts at an INVITE (table keyed by Call-ID); its
//!   responses give ringing, answer and the final status; BYE (from the
//!   caller or the callee), CANCEL and a final error end it. A call with
//!   no SIP or media for `call_timeout` ends as a timeout; an ended call
//!   stays `linger` longer so the last media and the BYE's answer are
//!   counted, then is emitted. 401/407 do not end a call (an INVITE with
//!   credentials usually follows in the same Call-ID).
//! - Every SDP (offer, answer, re-INVITE, UPDATE) registers its media
//!   address and port (and the RTCP port) in the media table, pointing at
//!   the call and the party that announced them. An RTP packet joins the
//!   call whose media its destination (or, symmetric RTP, its source) is.
//!   A stream is one SSRC in one direction (`rtp_stats::StreamStats`);
//!   RTCP report blocks are matched to the stream they report on; RFC
//!   4733 events of the call's telephone-event payload type are DTMF.
//! - RTP without SIP is tracked too: a UDP payload that parses as RTP
//!   starts a stream, reported on its own after `stream_timeout` of
//!   silence if it reached `min_packets` (shorter ones are counted, not
//!   reported: one datagram can look like RTP by chance).
//! - Time is packet time: the latest capture time seen drives the
//!   timeouts. Records come out in `Tracker::calls` and
//!   `Tracker::streams` as calls end; [`Tracker::finish`] ends what is
//!   open (end cause `open`).
//! - Memory is bounded: the call, stream, media and TCP tables have
//!   maximum sizes; what does not fit is dropped and counted
//!   ([`TrackerCounters`]), as are bytes the reassembly drops.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use super::audio::{Archive, ArchiveCounters};
use super::defrag::{DatagramKey, Defrag, DefragCounters};
use super::record::{CallRecord, Dtmf, EndCause, StreamRecord};
use super::sdp::{static_codec, Sdp};
use super::sip::{self, Framing, Message};
use super::stream::Reassembly;
use crate::analyze::rtp::{is_rtcp_type, looks_like_rtp, rtcp_reports, DtmfEvent, Rtp};
use crate::analyze::rtp_stats::StreamStats;
use crate::decode::fmt_addr;

/// An address as the decoder gives it (IPv4 mapped into IPv6).
pub type Addr = [u8; 16];

/// The TCP part of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tcp {
    /// Sequence number.
    pub seq: u32,
    /// TCP flags (FIN 0x01, SYN 0x02, RST 0x04).
    pub flags: u8,
}

/// Where a fragment goes in its datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fragment {
    /// IP identification.
    pub ident: u32,
    /// Byte offset in the IP payload.
    pub offset: u32,
    /// More fragments follow.
    pub more: bool,
    /// IP version.
    pub version: u8,
}

/// One UDP datagram or TCP segment for the tracker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VoipPacket<'a> {
    /// Capture time, Unix ns.
    pub ts: u64,
    /// Source address.
    pub src: Addr,
    /// Destination address.
    pub dst: Addr,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// `Some` for a TCP segment.
    pub tcp: Option<Tcp>,
    /// `Some` for an IP fragment of a UDP datagram: then `payload` is the
    /// fragment's part of the IP payload (the first one starts with the
    /// UDP header) and the ports are those of the first fragment (0 in
    /// the others).
    pub frag: Option<Fragment>,
    /// An SCTP packet: `payload` is its chunks (after the common header),
    /// whose whole DATA messages are SIP (`voip/sctp.rs`).
    pub sctp: bool,
    /// The transport payload as captured (a view into the frame).
    pub payload: &'a [u8],
}

/// Sizes and timeouts (see the module docs).
#[derive(Debug, Clone)]
pub struct TrackerConfig {
    /// Calls held at once.
    pub max_calls: usize,
    /// RTP streams held at once.
    pub max_streams: usize,
    /// TCP directions reassembled at once.
    pub max_tcp: usize,
    /// Bytes each TCP direction may hold beyond a gap (and unread).
    pub tcp_window: usize,
    /// A call with no SIP or media for this long ends (ns).
    pub call_timeout_ns: u64,
    /// An ended call is kept this long for its last packets (ns).
    pub linger_ns: u64,
    /// A stream without a call with no packet for this long ends (ns).
    pub stream_timeout_ns: u64,
    /// Packets a stream without a call needs to be reported.
    pub min_packets: u64,
    /// DTMF events kept per call.
    pub max_dtmf: usize,
    /// Datagrams in reassembly at once.
    pub max_fragments: usize,
    /// A datagram not reassembled this long after its first fragment is
    /// dropped (ns).
    pub fragment_timeout_ns: u64,
    /// Keep the RTP of calls in this folder, at most this many bytes per
    /// call (`audio::Archive`); `None`: keep nothing.
    pub audio: Option<(std::path::PathBuf, u64)>,
}

impl Default for TrackerConfig {
    fn default() -> Self {
        TrackerConfig {
            max_calls: 200_000,
            max_streams: 400_000,
            max_tcp: 16_384,
            tcp_window: 64 * 1024,
            call_timeout_ns: 300_000_000_000,
            linger_ns: 5_000_000_000,
            stream_timeout_ns: 30_000_000_000,
            min_packets: 5,
            max_dtmf: 256,
            max_fragments: 4096,
            fragment_timeout_ns: 30_000_000_000,
            audio: None,
        }
    }
}

/// What the tracker counted (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrackerCounters {
    /// SIP messages read.
    pub sip_messages: u64,
    /// IP fragment reassembly.
    pub defrag: DefragCounters,
    /// Payloads that looked like SIP but did not parse (or TCP data
    /// skipped to find the next message).
    pub sip_errors: u64,
    /// In-dialog messages of a Call-ID with no INVITE seen.
    pub sip_unmatched: u64,
    /// Calls started.
    pub calls: u64,
    /// INVITEs dropped because the call table was full.
    pub calls_dropped: u64,
    /// Streams started.
    pub streams: u64,
    /// RTP packets dropped because the stream table was full.
    pub streams_dropped: u64,
    /// Streams without a call too short to report.
    pub streams_short: u64,
    /// RTP packets counted in a stream.
    pub rtp_packets: u64,
    /// RTCP packets matched to a call.
    pub rtcp_packets: u64,
    /// Media announcements dropped because the media table was full.
    pub media_dropped: u64,
    /// TCP directions reassembled.
    pub tcp_streams: u64,
    /// TCP segments dropped because the TCP table was full.
    pub tcp_dropped: u64,
    /// TCP bytes received twice (retransmissions, overlaps).
    pub tcp_duplicate_bytes: u64,
    /// TCP bytes dropped beyond a full window or unread.
    pub tcp_dropped_bytes: u64,
}

/// Who announced a medium or sends a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Party {
    Caller,
    Callee,
}

impl Party {
    fn other(self) -> Party {
        match self {
            Party::Caller => Party::Callee,
            Party::Callee => Party::Caller,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Party::Caller => "caller",
            Party::Callee => "callee",
        }
    }
}

/// A Call-ID, shared by the tables (a clone is a reference count).
type CallId = Arc<[u8]>;
type StreamKey = (Addr, u16, Addr, u16, u32);
type Dir = (Addr, u16, Addr, u16);

/// A call in progress.
struct Call {
    rec: CallRecord,
    from_tag: Vec<u8>,
    last_ns: u64,
    /// When it expires (activity + timeout, or end + linger).
    deadline: u64,
    /// Earliest deadline queued in the timer heap.
    queued: u64,
    ended: bool,
    media: Vec<(Addr, u16)>,
    streams: Vec<StreamKey>,
    /// Payload types of its SDP: (pt, codec, clock).
    pts: Vec<(u8, String, u32)>,
}

/// An RTP stream in progress.
struct Stream {
    stats: StreamStats,
    pt: u8,
    codec: String,
    call: Option<(CallId, Party)>,
    rtcp: Option<(i64, f64, f64)>,
    /// RTP timestamp of the last DTMF event counted.
    last_event: Option<u32>,
    queued: u64,
}

/// A TCP direction carrying SIP.
struct Conn {
    r: Reassembly,
    last_ns: u64,
}

/// The call tracker (see the module docs).
pub struct Tracker {
    cfg: TrackerConfig,
    now: u64,
    calls: HashMap<CallId, Call>,
    call_timers: BinaryHeap<Reverse<(u64, CallId)>>,
    /// Media address → the call that announced it, who did, and whether
    /// another open call announced it too.
    media: HashMap<(Addr, u16), (CallId, Party, bool)>,
    streams: HashMap<StreamKey, Stream>,
    stream_timers: BinaryHeap<Reverse<(u64, StreamKey)>>,
    tcp: HashMap<Dir, Conn>,
    last_tcp_sweep: u64,
    defrag: Defrag,
    archive: Option<Archive>,
    /// What was counted.
    pub counters: TrackerCounters,
    /// Calls ended since the caller last took them.
    pub calls_out: Vec<CallRecord>,
    /// Streams without a call ended since the caller last took them.
    pub streams_out: Vec<StreamRecord>,
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn to_addr(ip: std::net::IpAddr) -> Addr {
    match ip {
        std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        std::net::IpAddr::V6(v6) => v6.octets(),
    }
}

impl Tracker {
    /// An empty tracker.
    pub fn new(cfg: TrackerConfig) -> Tracker {
        Tracker {
            cfg: cfg.clone(),
            now: 0,
            calls: HashMap::default(),
            call_timers: BinaryHeap::new(),
            media: HashMap::default(),
            streams: HashMap::default(),
            stream_timers: BinaryHeap::new(),
            tcp: HashMap::default(),
            last_tcp_sweep: 0,
            defrag: Defrag::new(cfg.max_fragments, cfg.fragment_timeout_ns),
            archive: None,
            counters: TrackerCounters::default(),
            calls_out: Vec::new(),
            streams_out: Vec::new(),
        }
    }

    /// Keeps the RTP of calls in `archive` (`TrackerConfig::audio`).
    pub fn keep_audio(&mut self, archive: Archive) {
        self.archive = Some(archive);
    }

    /// What the RTP archive counted (zeros without one).
    pub fn archive_counters(&self) -> ArchiveCounters {
        self.archive
            .as_ref()
            .map(|a| a.counters)
            .unwrap_or_default()
    }

    /// Calls held now.
    pub fn open_calls(&self) -> usize {
        self.calls.len()
    }

    /// Streams held now.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Moves the tracker's time to `now` (when no packet came for a
    /// while on a live interface) and ends what timed out by then.
    pub fn advance(&mut self, now: u64) {
        if now > self.now {
            self.now = now;
            self.expire();
        }
    }

    /// Takes one packet (see the module docs).
    pub fn packet(&mut self, p: &VoipPacket<'_>) {
        if p.ts > self.now {
            self.now = p.ts;
            self.expire();
        }
        if let Some(f) = p.frag {
            self.fragment(p, f);
            return;
        }
        if p.sctp {
            for m in super::sctp::messages(p.payload) {
                if sip::looks_like_sip(m) {
                    match sip::parse(m, Framing::Datagram) {
                        Ok(m) => self.sip(&m, p, "SCTP"),
                        Err(_) => self.counters.sip_errors += 1,
                    }
                }
            }
            return;
        }
        match p.tcp {
            Some(t) => self.tcp_segment(p, t),
            None => {
                if sip::looks_like_sip(p.payload) {
                    match sip::parse(p.payload, Framing::Datagram) {
                        Ok(m) => self.sip(&m, p, "UDP"),
                        Err(_) => self.counters.sip_errors += 1,
                    }
                } else if p.payload.len() >= 8 && p.payload[0] >> 6 == 2 {
                    self.media_packet(p);
                }
            }
        }
    }

    /// A fragment of a UDP datagram: the datagram once it is whole.
    fn fragment(&mut self, p: &VoipPacket<'_>, f: Fragment) {
        let key = DatagramKey {
            src: p.src,
            dst: p.dst,
            ident: f.ident,
            proto: 17,
            version: f.version,
        };
        let whole = self
            .defrag
            .fragment(p.ts, key, f.offset as usize, f.more, p.payload);
        self.counters.defrag = self.defrag.counters;
        let Some(whole) = whole else { return };
        let Some(h) = whole.get(..8) else { return };
        let len = usize::from(u16::from_be_bytes([h[4], h[5]])).clamp(8, whole.len());
        let inner = VoipPacket {
            ts: p.ts,
            src: p.src,
            dst: p.dst,
            sport: u16::from_be_bytes([h[0], h[1]]),
            dport: u16::from_be_bytes([h[2], h[3]]),
            tcp: None,
            frag: None,
            sctp: false,
            payload: &whole[8..len],
        };
        self.packet(&inner);
    }

    /// Ends every call and stream still open (end of input or stop).
    pub fn finish(&mut self) {
        self.defrag.finish();
        self.counters.defrag = self.defrag.counters;
        let ids: Vec<CallId> = self.calls.keys().cloned().collect();
        for id in ids {
            if let Some(c) = self.calls.get_mut(&id) {
                if !c.ended {
                    c.rec.end_cause = EndCause::Open;
                    c.rec.end_ns = c.last_ns;
                }
            }
            self.emit_call(&id);
        }
        let keys: Vec<StreamKey> = self.streams.keys().copied().collect();
        for k in keys {
            self.emit_stream(&k);
        }
        self.call_timers.clear();
        self.stream_timers.clear();
        if let Some(a) = self.archive.as_mut() {
            a.finish();
        }
        self.drop_tcp_all();
    }

    fn tcp_segment(&mut self, p: &VoipPacket<'_>, t: Tcp) {
        let dir = (p.src, p.sport, p.dst, p.dport);
        let closing = t.flags & 0x05 != 0;
        if !self.tcp.contains_key(&dir) {
            if p.payload.is_empty() {
                return;
            }
            if self.tcp.len() >= self.cfg.max_tcp {
                self.sweep_tcp(true);
                if self.tcp.len() >= self.cfg.max_tcp {
                    self.counters.tcp_dropped += 1;
                    return;
                }
            }
            self.counters.tcp_streams += 1;
            self.tcp.insert(
                dir,
                Conn {
                    r: Reassembly::new(self.cfg.tcp_window),
                    last_ns: p.ts,
                },
            );
        }
        let Some(mut conn) = self.tcp.remove(&dir) else {
            return;
        };
        conn.last_ns = p.ts;
        let syn = t.flags & 0x02 != 0;
        if syn && conn.r.next_seq() != Some(t.seq.wrapping_add(1)) {
            // A new connection on the same four-tuple (the old one's close
            // was not seen): what the old one left is done with.
            self.count_tcp(&conn);
            self.counters.tcp_dropped_bytes += (conn.r.data().len() + conn.r.pending()) as u64;
            conn.r = Reassembly::new(self.cfg.tcp_window);
        }
        conn.r.segment(t.seq, syn, p.payload);
        loop {
            // Keep-alives (RFC 5626: CRLF) between messages.
            let skip = conn
                .r
                .data()
                .iter()
                .take_while(|&&c| c == b'\r' || c == b'\n')
                .count();
            conn.r.consume(skip);
            if conn.r.data().is_empty() {
                break;
            }
            match sip::parse(conn.r.data(), Framing::Stream) {
                Ok(m) => {
                    let n = m.len;
                    self.sip(&m, p, "TCP");
                    conn.r.consume(n.max(1));
                }
                Err(sip::SipError::Incomplete { .. }) => break,
                Err(_) => {
                    // Resynchronise after the next blank line.
                    self.counters.sip_errors += 1;
                    let d = conn.r.data();
                    let n = d
                        .windows(4)
                        .position(|w| w == b"\r\n\r\n")
                        .map_or(d.len(), |i| i + 4);
                    conn.r.consume(n);
                }
            }
        }
        if closing {
            self.count_tcp(&conn);
        } else {
            self.tcp.insert(dir, conn);
        }
        if self.now.saturating_sub(self.last_tcp_sweep) >= 10_000_000_000 {
            self.sweep_tcp(false);
        }
    }

    fn count_tcp(&mut self, c: &Conn) {
        let k = c.r.counters;
        self.counters.tcp_duplicate_bytes += k.duplicate_bytes;
        self.counters.tcp_dropped_bytes += k.window_dropped_bytes + k.unread_dropped_bytes;
    }

    /// Drops TCP directions idle for the call timeout (`full`: also the
    /// oldest half when the table is full).
    fn sweep_tcp(&mut self, full: bool) {
        self.last_tcp_sweep = self.now;
        let cutoff = self.now.saturating_sub(self.cfg.call_timeout_ns);
        let mut idle: Vec<(u64, Dir)> = self
            .tcp
            .iter()
            .filter(|(_, c)| full || c.last_ns < cutoff)
            .map(|(d, c)| (c.last_ns, *d))
            .collect();
        if full {
            idle.sort_unstable();
            let keep_idle_only = idle.iter().take_while(|(t, _)| *t < cutoff).count();
            idle.truncate(keep_idle_only.max(idle.len() / 2));
        }
        for (_, d) in idle {
            if let Some(c) = self.tcp.remove(&d) {
                self.count_tcp(&c);
            }
        }
    }

    fn drop_tcp_all(&mut self) {
        let all: Vec<Dir> = self.tcp.keys().copied().collect();
        for d in all {
            if let Some(c) = self.tcp.remove(&d) {
                self.count_tcp(&c);
            }
        }
    }

    fn schedule_call(&mut self, id: &CallId) {
        let Some(c) = self.calls.get_mut(id) else {
            return;
        };
        if c.deadline < c.queued {
            c.queued = c.deadline;
            self.call_timers.push(Reverse((c.deadline, id.clone())));
        }
    }

    /// Takes one SIP message of a call.
    fn sip(&mut self, m: &Message<'_>, p: &VoipPacket<'_>, transport: &'static str) {
        self.counters.sip_messages += 1;
        let Some(id) = m.call_id() else { return };
        let status = m.status();
        let method = m.method().unwrap_or(b"");
        let is_invite = method.eq_ignore_ascii_case(b"INVITE");
        if is_invite && status.is_none() && self.calls.get(id).is_some_and(|c| c.ended) {
            // A new INVITE after the call ended: a new call with the same
            // Call-ID (or the same call in another capture file).
            let old: CallId = id.into();
            self.emit_call(&old);
        }
        if !self.calls.contains_key(id) {
            if !(is_invite && status.is_none()) {
                self.counters.sip_unmatched += 1;
                return;
            }
            if self.calls.len() >= self.cfg.max_calls {
                self.counters.calls_dropped += 1;
                return;
            }
            self.counters.calls += 1;
            let from = m.from().unwrap_or_default();
            let to = m.to().unwrap_or_default();
            let user = |a: &sip::NameAddr<'_>| text(a.user());
            let rec = CallRecord {
                call_id: text(id),
                caller: user(&from),
                caller_name: text(from.display),
                caller_uri: text(from.uri),
                callee: user(&to),
                callee_name: text(to.display),
                callee_uri: text(to.uri),
                caller_ua: m.user_agent().map(text).unwrap_or_default(),
                callee_ua: String::new(),
                caller_ip: fmt_addr(&p.src),
                callee_ip: fmt_addr(&p.dst),
                transport,
                invite_ns: p.ts,
                ringing_ns: None,
                answer_ns: None,
                end_ns: p.ts,
                status: None,
                reason: String::new(),
                end_cause: EndCause::Open,
                codecs: Vec::new(),
                dtmf: Vec::new(),
                streams: Vec::new(),
            };
            let call = Call {
                rec,
                from_tag: from.tag.unwrap_or_default().to_vec(),
                last_ns: p.ts,
                deadline: p.ts + self.cfg.call_timeout_ns,
                queued: u64::MAX,
                ended: false,
                media: Vec::new(),
                streams: Vec::new(),
                pts: Vec::new(),
            };
            self.calls.insert(id.into(), call);
        }
        // The table's own Arc, shared from here on.
        let Some((key, _)) = self.calls.get_key_value(id) else {
            return;
        };
        let key = key.clone();
        let (linger, timeout) = (self.cfg.linger_ns, self.cfg.call_timeout_ns);
        let Some(c) = self.calls.get_mut(id) else {
            return;
        };
        c.last_ns = c.last_ns.max(p.ts);
        let from_caller_dialog = m
            .from()
            .and_then(|f| f.tag)
            .is_none_or(|t| c.from_tag.is_empty() || t == &c.from_tag[..]);
        // Who sent this message.
        let sender = match (status.is_some(), from_caller_dialog) {
            (false, true) | (true, false) => Party::Caller,
            _ => Party::Callee,
        };
        let mut end: Option<EndCause> = None;
        match status {
            Some(code) => {
                if sender == Party::Callee && c.rec.callee_ua.is_empty() {
                    if let Some(ua) = m.user_agent() {
                        c.rec.callee_ua = text(ua);
                    }
                }
                if is_invite && c.rec.answer_ns.is_none() {
                    if (code == 180 || code == 183) && c.rec.ringing_ns.is_none() {
                        c.rec.ringing_ns = Some(p.ts);
                    }
                    let reason = match m.start {
                        sip::StartLine::Response { reason, .. } => text(reason),
                        _ => String::new(),
                    };
                    if (200..300).contains(&code) {
                        c.rec.answer_ns = Some(p.ts);
                        c.rec.status = Some(code);
                        c.rec.reason = reason;
                    } else if code >= 300 && (!c.ended || c.rec.status.is_none()) {
                        // After a CANCEL, its 487 is the INVITE's status.
                        c.rec.status = Some(code);
                        c.rec.reason = reason;
                        if code != 401 && code != 407 && !c.ended {
                            end = Some(EndCause::Error);
                        }
                    }
                }
            }
            None => {
                if !c.ended {
                    if method.eq_ignore_ascii_case(b"BYE") {
                        end = Some(match sender {
                            Party::Caller => EndCause::ByeCaller,
                            Party::Callee => EndCause::ByeCallee,
                        });
                    } else if method.eq_ignore_ascii_case(b"CANCEL") && c.rec.answer_ns.is_none() {
                        end = Some(EndCause::Cancel);
                    }
                }
            }
        }
        if let Some(cause) = end {
            c.ended = true;
            c.rec.end_cause = cause;
            c.rec.end_ns = p.ts;
            c.deadline = p.ts + linger;
        } else if !c.ended {
            c.deadline = c.last_ns + timeout;
        }
        let sdp = m.has_sdp().then(|| Sdp::parse(m.body));
        if let Some(sdp) = sdp {
            self.announce(&key, &sdp, sender, p.src);
        }
        self.schedule_call(&key);
    }

    /// Registers the media of an SDP for call `id`, announced by `party`
    /// (whose signalling address is `sig`).
    fn announce(&mut self, id: &CallId, sdp: &Sdp, party: Party, sig: Addr) {
        let Some(c) = self.calls.get_mut(id) else {
            return;
        };
        let mut keys = Vec::new();
        for m in &sdp.media {
            for codec in m.codecs.iter().filter(|c| !c.name.is_empty()) {
                if !c.rec.codecs.iter().any(|x| x == &codec.name) {
                    c.rec.codecs.push(codec.name.clone());
                }
                if !c.pts.iter().any(|(pt, _, _)| *pt == codec.pt) {
                    c.pts.push((codec.pt, codec.name.clone(), codec.clock));
                }
            }
            if m.port != 0 {
                let addr = m.addr.map(to_addr).unwrap_or(sig);
                keys.push((addr, m.port));
                keys.push((addr, m.rtcp_port.unwrap_or(m.port.wrapping_add(1))));
            }
        }
        for k in keys {
            if !self.media.contains_key(&k) && self.media.len() >= self.cfg.max_calls * 4 {
                self.counters.media_dropped += 1;
                continue;
            }
            // Another open call announced it too (a server that answers
            // every call on one port): the address is shared.
            let shared = self
                .media
                .get(&k)
                .is_some_and(|m| &m.0 != id && self.calls.contains_key(&m.0));
            self.media.insert(k, (id.clone(), party, shared));
            if let Some(c) = self.calls.get_mut(id) {
                if !c.media.contains(&k) {
                    c.media.push(k);
                }
            }
        }
    }

    /// The call a media packet from `src:sport` to `dst:dport` belongs to,
    /// and who sends it.
    fn media_owner(&self, p: &VoipPacket<'_>) -> Option<(CallId, Party)> {
        let dst = self.media.get(&(p.dst, p.dport));
        let src = self.media.get(&(p.src, p.sport));
        // The destination's announcement first, unless it is shared by
        // several calls and the source's is not.
        match (dst, src) {
            (Some(d), Some(s)) if d.2 && !s.2 => Some((s.0.clone(), s.1)),
            (Some(d), _) => Some((d.0.clone(), d.1.other())),
            (None, Some(s)) => Some((s.0.clone(), s.1)),
            (None, None) => None,
        }
    }

    fn media_packet(&mut self, p: &VoipPacket<'_>) {
        let b = p.payload;
        if is_rtcp_type(b[1]) {
            let Some((id, _)) = self.media_owner(p) else {
                return;
            };
            self.counters.rtcp_packets += 1;
            let Some(c) = self.calls.get_mut(&id) else {
                return;
            };
            c.last_ns = c.last_ns.max(p.ts);
            if !c.ended {
                c.deadline = c.last_ns + self.cfg.call_timeout_ns;
            }
            for block in rtcp_reports(b).flatten() {
                let Some(key) = c.streams.iter().find(|k| k.4 == block.source) else {
                    continue;
                };
                if let Some(s) = self.streams.get_mut(key) {
                    let clock = s.stats.clock;
                    let jitter = if clock > 0 {
                        f64::from(block.jitter) * 1000.0 / f64::from(clock)
                    } else {
                        f64::NAN
                    };
                    s.rtcp = Some((
                        i64::from(block.cumulative_lost),
                        f64::from(block.fraction_lost) / 256.0,
                        jitter,
                    ));
                }
            }
            return;
        }
        let Ok(r) = Rtp::parse(b) else { return };
        let key = (p.src, p.sport, p.dst, p.dport, r.ssrc);
        if !self.streams.contains_key(&key) {
            let owner = self.media_owner(p);
            if owner.is_none() && !looks_like_rtp(b) {
                return;
            }
            if self.streams.len() >= self.cfg.max_streams {
                self.counters.streams_dropped += 1;
                return;
            }
            self.counters.streams += 1;
            let (codec, clock) = self.codec_of(owner.as_ref(), r.pt);
            if let Some((id, _)) = &owner {
                if let Some(c) = self.calls.get_mut(id) {
                    c.streams.push(key);
                }
            }
            let deadline = p.ts + self.cfg.stream_timeout_ns;
            self.streams.insert(
                key,
                Stream {
                    stats: StreamStats::new(clock),
                    pt: r.pt,
                    codec,
                    call: owner,
                    rtcp: None,
                    last_event: None,
                    queued: deadline,
                },
            );
            self.stream_timers.push(Reverse((deadline, key)));
        }
        if self.streams.get(&key).is_some_and(|s| s.call.is_none()) && !self.media.is_empty() {
            self.attach(&key, p);
        }
        let timeout = self.cfg.call_timeout_ns;
        let Some(s) = self.streams.get_mut(&key) else {
            return;
        };
        self.counters.rtp_packets += 1;
        s.stats.packet(p.ts, r.seq, r.ts, r.payload_len);
        let Some((id, party)) = s.call.clone() else {
            return;
        };
        let Some(c) = self.calls.get_mut(&id) else {
            return;
        };
        c.last_ns = c.last_ns.max(p.ts);
        if !c.ended {
            c.deadline = c.last_ns + timeout;
        }
        if let Some(a) = self.archive.as_mut() {
            let end = (r.payload_offset + r.payload_len).min(b.len());
            let payload = b.get(r.payload_offset..end).unwrap_or(&[]);
            a.append(
                c.rec.invite_ns,
                &c.rec.call_id,
                party.name(),
                r.ssrc,
                p.ts,
                r.ts,
                r.seq,
                r.pt,
                payload,
            );
        }
        let is_event = c
            .pts
            .iter()
            .any(|(pt, name, _)| *pt == r.pt && name.eq_ignore_ascii_case("telephone-event"));
        if is_event && c.rec.dtmf.len() < self.cfg.max_dtmf {
            let payload = b.get(r.payload_offset..).unwrap_or(&[]);
            if let Ok(ev) = DtmfEvent::parse(payload) {
                if ev.end && s.last_event != Some(r.ts) {
                    s.last_event = Some(r.ts);
                    let clock = c
                        .pts
                        .iter()
                        .find(|(pt, _, _)| *pt == r.pt)
                        .map_or(8000, |x| x.2.max(1));
                    if let Some(key) = ev.key() {
                        c.rec.dtmf.push(Dtmf {
                            ts: p.ts,
                            key,
                            duration_ms: f64::from(ev.duration) * 1000.0 / f64::from(clock),
                            sender: party.name(),
                        });
                    }
                }
            }
        }
    }

    /// Joins a stream that started before its SDP was seen to the call
    /// that announced its address since.
    fn attach(&mut self, key: &StreamKey, p: &VoipPacket<'_>) {
        let Some(owner) = self.media_owner(p) else {
            return;
        };
        let Some(pt) = self.streams.get(key).map(|s| s.pt) else {
            return;
        };
        let (codec, clock) = self.codec_of(Some(&owner), pt);
        let Some(c) = self.calls.get_mut(&owner.0) else {
            return;
        };
        c.streams.push(*key);
        if let Some(s) = self.streams.get_mut(key) {
            if s.codec.is_empty() {
                s.codec = codec;
            }
            if s.stats.clock == 0 && s.stats.packets == 0 {
                s.stats = StreamStats::new(clock);
            }
            s.call = Some(owner);
        }
    }

    /// Codec name and clock of payload type `pt` in a call's SDP, else
    /// from the static payload types.
    fn codec_of(&self, owner: Option<&(CallId, Party)>, pt: u8) -> (String, u32) {
        if let Some(c) = owner.and_then(|(id, _)| self.calls.get(id)) {
            if let Some((_, name, clock)) = c.pts.iter().find(|(p, _, _)| *p == pt) {
                return (name.clone(), *clock);
            }
        }
        match static_codec(pt) {
            Some((name, clock)) => (name.to_string(), clock),
            None => (String::new(), 0),
        }
    }

    /// Emits what has expired by now.
    fn expire(&mut self) {
        while let Some(Reverse((t, _))) = self.call_timers.peek() {
            if *t > self.now {
                break;
            }
            let Some(Reverse((t, id))) = self.call_timers.pop() else {
                break;
            };
            let Some(c) = self.calls.get_mut(&id) else {
                continue;
            };
            if c.queued == t {
                c.queued = u64::MAX;
            }
            if c.deadline > self.now {
                // Active since: queue again at its deadline.
                if c.deadline < c.queued {
                    c.queued = c.deadline;
                    self.call_timers.push(Reverse((c.deadline, id)));
                }
                continue;
            }
            if !c.ended {
                c.rec.end_cause = if c.rec.status.is_some_and(|s| s >= 300) {
                    EndCause::Error
                } else {
                    EndCause::Timeout
                };
                c.rec.end_ns = c.last_ns;
            }
            self.emit_call(&id);
        }
        while let Some(Reverse((t, _))) = self.stream_timers.peek() {
            if *t > self.now {
                break;
            }
            let Some(Reverse((_, key))) = self.stream_timers.pop() else {
                break;
            };
            let Some(s) = self.streams.get_mut(&key) else {
                continue;
            };
            if s.call.is_some() {
                // Ends with its call.
                continue;
            }
            let due = s.stats.last_ns + self.cfg.stream_timeout_ns;
            if due > self.now {
                s.queued = due;
                self.stream_timers.push(Reverse((due, key)));
                continue;
            }
            self.emit_stream(&key);
        }
    }

    fn stream_record(&self, key: &StreamKey, s: &Stream) -> StreamRecord {
        let st = &s.stats;
        let jitter = st.mean_jitter_ms();
        let expected = st.expected();
        let lost = st.lost();
        let mos = jitter.map(|j| {
            let share = if expected > 0 {
                lost.max(0) as f64 / expected as f64
            } else {
                0.0
            };
            super::mos::estimate(&s.codec, share, j)
        });
        StreamRecord {
            call_id: s.call.as_ref().map(|(id, _)| text(id)),
            sender: s.call.as_ref().map(|(_, p)| p.name()),
            src: fmt_addr(&key.0),
            sport: key.1,
            dst: fmt_addr(&key.2),
            dport: key.3,
            ssrc: key.4,
            pt: s.pt,
            codec: s.codec.clone(),
            clock: st.clock,
            first_ns: st.first_ns,
            last_ns: st.last_ns,
            packets: st.packets,
            bytes: st.bytes,
            expected,
            lost,
            duplicates: st.duplicates,
            reordered: st.reordered,
            jitter_mean_ms: jitter,
            jitter_max_ms: st.max_jitter_ms(),
            max_delta_ms: st.max_delta_ns as f64 / 1e6,
            rtcp_lost: s.rtcp.map(|r| r.0),
            rtcp_fraction_lost: s.rtcp.map(|r| r.1),
            rtcp_jitter_ms: s.rtcp.map(|r| r.2).filter(|j| j.is_finite()),
            mos,
        }
    }

    /// Emits a stream without a call.
    fn emit_stream(&mut self, key: &StreamKey) {
        let Some(s) = self.streams.remove(key) else {
            return;
        };
        if s.call.is_some() {
            // Its call emits it (the call ended while it was queued).
            let rec = self.stream_record(key, &s);
            if let Some((id, _)) = &s.call {
                if let Some(c) = self.calls.get_mut(id) {
                    c.rec.streams.push(rec);
                    return;
                }
            }
            self.streams_out.push(rec);
            return;
        }
        if s.stats.packets < self.cfg.min_packets {
            self.counters.streams_short += 1;
            return;
        }
        let rec = self.stream_record(key, &s);
        self.streams_out.push(rec);
    }

    /// Emits a call with its streams and forgets its media.
    fn emit_call(&mut self, id: &CallId) {
        let Some(mut c) = self.calls.remove(id) else {
            return;
        };
        for k in &c.media {
            if self.media.get(k).is_some_and(|(owner, _, _)| owner == id) {
                self.media.remove(k);
            }
        }
        for key in &c.streams {
            if let Some(s) = self.streams.remove(key) {
                c.rec.streams.push(self.stream_record(key, &s));
            }
        }
        if let Some(a) = self.archive.as_mut() {
            a.close_call(c.rec.invite_ns, &c.rec.call_id);
        }
        self.calls_out.push(c.rec);
    }
}
