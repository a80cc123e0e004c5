//! The `http` analyzer: the Host and User-Agent headers of the first
//! HTTP/1.x request of a TCP flow.
//!
//! Contract: the requester is the side whose first payload starts with an
//! HTTP method token and a space (`GET `, `POST ` …): the client, or the
//! other side of a flow seen from its middle that starts with a reply.
//! When neither side's first payload does, the flow is not HTTP and the
//! analyzer stops looking at it; so it does after the client's first
//! payload when the roles are known (a SYN from each side came before,
//! or the payload rides on the client's SYN): a server does not send the
//! first request. From there the requester's payload bytes
//! are kept, in arrival order, in a buffer of at most
//! [`MAX_HEAD`] bytes until the blank line that ends the request's header
//! block; then the header block is read and the buffer freed. The request
//! line must end with `HTTP/1.0` or `HTTP/1.1`, else nothing is read.
//! Header names match whatever their case; the first `Host` and the first
//! `User-Agent` count; values are trimmed of blanks and cut at 256 bytes;
//! bytes that are not UTF-8 become U+FFFD.
//!
//! When the header block is cut — it is longer than [`MAX_HEAD`], a packet
//! was cut by the snap length (the bytes after the cut are missing, so
//! nothing after it is appended), or the flow ended first — only the
//! header lines that were whole (ended by a line feed) in the bytes kept
//! are read. TCP sequence numbers are not looked at: a retransmitted or
//! reordered segment inside the header block is appended as it comes (the
//! first copy of a header wins). Never fails, never panics.

use super::{Action, Analyzer, PacketView};
use crate::schema::{Cells, Field, FieldType};

/// Most header bytes of the first request kept while waiting for its end.
pub const MAX_HEAD: usize = 4096;

/// IP protocol number of TCP.
const TCP: u8 = 6;
/// TCP flags: SYN and ACK.
const SYN: u8 = 0x02;
const ACK: u8 = 0x10;

/// The request methods a first request may start with (RFC 9110 section 9
/// and RFC 5789's PATCH).
const METHODS: &[&[u8]] = &[
    b"GET", b"POST", b"HEAD", b"PUT", b"DELETE", b"OPTIONS", b"CONNECT", b"TRACE", b"PATCH",
];

/// The analyzer (it has no configuration).
#[derive(Debug, Default)]
pub struct Http;

/// What was read of the first request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Head {
    /// The first `Host` header's value.
    pub host: Option<String>,
    /// The first `User-Agent` header's value.
    pub user_agent: Option<String>,
}

/// Where a flow is.
#[derive(Debug)]
enum Phase {
    /// No request yet; the bit of a direction (1 client, 2 server) is set
    /// once its first payload was not one.
    Waiting(u8),
    /// Inside the first request's header block: the requester (true: the
    /// client) and the block's bytes so far.
    Reading(bool, Vec<u8>),
    /// Done (read, or not HTTP): the result, when there is one.
    Done(Option<Box<Head>>),
}

impl Default for Phase {
    fn default() -> Phase {
        Phase::Waiting(0)
    }
}

/// Per-flow state.
#[derive(Debug, Default)]
pub struct State {
    phase: Phase,
}

/// Whether a byte is the first of a method (one look for a payload's
/// first byte).
const METHOD_FIRST: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < METHODS.len() {
        t[METHODS[i][0] as usize] = true;
        i += 1;
    }
    t
};

/// True when `b` starts with a request method and a space.
pub fn starts_request(b: &[u8]) -> bool {
    METHODS
        .iter()
        .any(|m| b.len() > m.len() && b.starts_with(m) && b[m.len()] == b' ')
}

/// True when `b` may still become the start of a request: it starts one,
/// or it is a short start of a method and its space (a first segment of a
/// few bytes).
#[inline(always)]
fn may_start_request(b: &[u8]) -> bool {
    // The common case first, where it is called: a first byte no method
    // starts with.
    if b.first().is_some_and(|&c| !METHOD_FIRST[usize::from(c)]) {
        return false;
    }
    may_start_request_whole(b)
}

/// [`may_start_request`] past its first byte's test.
#[inline(never)]
fn may_start_request_whole(b: &[u8]) -> bool {
    starts_request(b)
        || METHODS
            .iter()
            .any(|m| b.len() <= m.len() && m.starts_with(b))
}

/// Index just past the blank line that ends a header block (`\r\n\r\n` or
/// `\n\n`), if `b` holds it.
pub fn head_end(b: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(off) = b[i..].iter().position(|&c| c == b'\n') {
        let nl = i + off;
        let rest = &b[nl + 1..];
        if rest.starts_with(b"\n") {
            return Some(nl + 2);
        }
        if rest.starts_with(b"\r\n") {
            return Some(nl + 3);
        }
        i = nl + 1;
    }
    None
}

/// Reads the whole lines of a request's header block (`b` may be cut:
/// a last line without its line feed is ignored). `None` when the request
/// line is not a whole HTTP/1.0 or HTTP/1.1 request line.
pub fn parse_head(b: &[u8]) -> Option<Head> {
    let mut lines = b.split_inclusive(|&c| c == b'\n');
    let first = lines.next()?;
    let first = whole(first)?;
    if !starts_request(first) || !(first.ends_with(b" HTTP/1.1") || first.ends_with(b" HTTP/1.0")) {
        return None;
    }
    let mut head = Head::default();
    for line in lines {
        let Some(line) = whole(line) else { break };
        if line.is_empty() {
            break;
        }
        let Some(colon) = line.iter().position(|&c| c == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        let slot = if name.eq_ignore_ascii_case(b"host") {
            &mut head.host
        } else if name.eq_ignore_ascii_case(b"user-agent") {
            &mut head.user_agent
        } else {
            continue;
        };
        if slot.is_none() {
            *slot = Some(text(value));
        }
    }
    Some(head)
}

/// A line without its line feed and carriage return; `None` when it has
/// no line feed (cut).
fn whole(line: &[u8]) -> Option<&[u8]> {
    let line = line.strip_suffix(b"\n")?;
    Some(line.strip_suffix(b"\r").unwrap_or(line))
}

/// A header value as text: blanks trimmed, at most 256 bytes kept.
fn text(v: &[u8]) -> String {
    let v = v.trim_ascii();
    let v = &v[..v.len().min(crate::schema::MAX_TEXT)];
    String::from_utf8_lossy(v).into_owned()
}

impl State {
    /// Reads what the buffer holds and frees it.
    fn conclude(&mut self) {
        if let Phase::Reading(_, buf) = &self.phase {
            let head = parse_head(buf).map(Box::new);
            self.phase = Phase::Done(head);
        }
    }

    /// The result so far (`None` until read).
    pub fn head(&self) -> Option<&Head> {
        match &self.phase {
            Phase::Done(h) => h.as_deref(),
            _ => None,
        }
    }
}

impl Analyzer for Http {
    type State = State;
    const NAME: &'static str = "http";
    const ABOUT: &'static str = "Host and User-Agent of the first HTTP/1.x request";
    const PAYLOAD: bool = true;
    const ENDS_EARLY: bool = true;
    const FIELDS: &'static [Field] = &[
        Field::new(
            "http_host",
            FieldType::Str,
            "",
            "Host header of the flow's first HTTP/1.x request (as sent, port included); empty when none was read",
        ),
        Field::new(
            "http_user_agent",
            FieldType::Str,
            "",
            "User-Agent header of the flow's first HTTP/1.x request; empty when none was read",
        ),
    ];

    const EMPTY: bool = false;
    const STARTS: bool = true;
    const LAZY: bool = true;
    const SPARSE: bool = true;

    /// What `packet` decides from a side's first payload while no request
    /// is read: not TCP (the flow), or not the start of a request (that
    /// side; the other's first payload is read as by a fresh state, the
    /// `Waiting` bit of the declined side aside, which only the done bits
    /// read). Then nothing is recorded. The whole flow when the
    /// connection was seen opened, so the roles are known: both sides'
    /// SYNs came before ([`PacketView::tcp_starts`]), or the payload
    /// rides on the client's SYN itself (TCP Fast Open), which only the
    /// side that opens the connection sends. An HTTP/1.x client speaks
    /// first: when it did not send a request, or its server spoke before
    /// it (a server's greeting, a download without a request), no
    /// request is to come. Seen from its middle, a connection's first
    /// payload may be a reply and the next a request of the other side.
    #[inline(always)]
    fn declines(&self, p: &PacketView<'_>) -> Option<[bool; 2]> {
        if p.payload_len == 0 {
            return None;
        }
        if p.proto != TCP {
            return Some([true; 2]);
        }
        if may_start_request(p.payload) {
            return None;
        }
        let opened = p.tcp_flags & (SYN | ACK) == SYN
            || p.tcp_starts.syn(0).is_some() && p.tcp_starts.syn(1).is_some();
        Some(if opened {
            [true; 2]
        } else {
            [p.from_client, !p.from_client]
        })
    }

    fn done(&self, st: &State) -> bool {
        matches!(st.phase, Phase::Done(_))
    }

    fn done_with(&self, st: &State, from_client: bool) -> bool {
        match &st.phase {
            // That side's first payload was not a request.
            Phase::Waiting(seen) => seen & if from_client { 1 } else { 2 } != 0,
            // The other side's request is read.
            Phase::Reading(requester, _) => *requester != from_client,
            Phase::Done(_) => true,
        }
    }

    fn packet(&self, st: &mut State, p: &PacketView<'_>) -> Action {
        if p.payload_len == 0 {
            return Action::Continue;
        }
        if p.proto != TCP {
            // Not HTTP/1.x: nothing to read.
            if let Phase::Waiting(_) = st.phase {
                st.phase = Phase::Done(None);
            }
            return Action::Continue;
        }
        match &mut st.phase {
            Phase::Done(_) => return Action::Continue,
            Phase::Waiting(seen) => {
                let bit = if p.from_client { 1 } else { 2 };
                if *seen & bit != 0 {
                    return Action::Continue;
                }
                if !may_start_request(p.payload) {
                    *seen |= bit;
                    if *seen == 3 {
                        st.phase = Phase::Done(None);
                    }
                    return Action::Continue;
                }
                st.phase = Phase::Reading(p.from_client, Vec::new());
            }
            Phase::Reading(..) => {}
        }
        let Phase::Reading(requester, buf) = &mut st.phase else {
            return Action::Continue;
        };
        if *requester != p.from_client {
            return Action::Continue;
        }
        // Look for the end from a little before the new bytes: the blank
        // line may straddle two segments.
        let from = buf.len().saturating_sub(3);
        let room = MAX_HEAD - buf.len();
        let take = p.payload.len().min(room);
        buf.extend_from_slice(&p.payload[..take]);
        let cut = p.payload.len() < usize::from(p.payload_len) || take < p.payload.len();
        if !may_start_request(buf) {
            st.phase = Phase::Done(None);
            return Action::Continue;
        }
        if let Some(end) = head_end(&buf[from..]) {
            buf.truncate(from + end);
            st.conclude();
        } else if cut || buf.len() >= MAX_HEAD {
            st.conclude();
        }
        Action::Continue
    }

    fn finish(&self, st: &mut State) {
        st.conclude();
    }

    fn record(&self, st: &State, out: &mut Cells<'_>) {
        let Some(head) = st.head() else {
            // Every field null: left unwritten.
            return;
        };
        let head = Some(head);
        for v in [
            head.and_then(|h| h.host.as_deref()),
            head.and_then(|h| h.user_agent.as_deref()),
        ] {
            match v {
                Some(s) => out.text(s),
                None => out.null(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_bytes_table_holds_the_methods_first_bytes() {
        for c in 0..=255u8 {
            let starts = METHODS.iter().any(|m| m[0] == c);
            assert_eq!(METHOD_FIRST[usize::from(c)], starts, "byte {c:#04x}");
            // A payload of that one byte may start a request exactly then.
            assert_eq!(may_start_request(&[c]), starts, "byte {c:#04x}");
        }
    }

    fn view(payload: &[u8], from_client: bool) -> PacketView<'_> {
        PacketView {
            ts: 0,
            from_client,
            index: 1,
            size: 40 + payload.len() as u16,
            tcp_flags: 0x18,
            proto: TCP,
            payload_len: payload.len() as u16,
            payload,
            ip: &[],
            tcp_starts: &crate::analyze::TcpStarts::NONE,
        }
    }

    fn run(segments: &[&[u8]]) -> State {
        let a = Http;
        let mut st = State::default();
        for s in segments {
            a.packet(&mut st, &view(s, true));
        }
        a.finish(&mut st);
        st
    }

    #[test]
    fn a_first_payload_that_is_no_request_ends_the_flow_when_the_roles_are_known() {
        let a = Http;
        let mut both = crate::analyze::TcpStarts::NONE;
        both.set(0, 1000);
        both.set(1, 5000);
        let mut client_only = crate::analyze::TcpStarts::NONE;
        client_only.set(0, 1000);
        let with = |starts, payload, from_client| PacketView {
            tcp_starts: starts,
            ..view(payload, from_client)
        };
        let tls = &[0x16, 0x03, 0x01, 0x02, 0x00, 0x01];
        // Both SYNs seen: either side's first payload decides for the
        // flow (the client speaks first).
        assert_eq!(a.declines(&with(&both, tls, true)), Some([true; 2]));
        assert_eq!(a.declines(&with(&both, tls, false)), Some([true; 2]));
        // The handshake not seen whole: that side only (the flow may be
        // seen from its middle, roles unknown).
        assert_eq!(
            a.declines(&with(&client_only, tls, false)),
            Some([false, true])
        );
        assert_eq!(
            a.declines(&with(&client_only, tls, true)),
            Some([true, false])
        );
        assert_eq!(
            a.declines(&with(&crate::analyze::TcpStarts::NONE, tls, true)),
            Some([true, false])
        );
        // Data on the client's own SYN (TCP Fast Open): the client opened
        // the connection. Not on a SYN-ACK, the server's.
        let on_syn = |flags| PacketView {
            tcp_flags: flags,
            ..view(tls, true)
        };
        assert_eq!(a.declines(&on_syn(0x02)), Some([true; 2]));
        assert_eq!(a.declines(&on_syn(0x12)), Some([true, false]));
        // A request is read whatever was seen.
        assert_eq!(a.declines(&with(&both, REQ, true)), None);
        assert_eq!(a.declines(&with(&both, REQ, false)), None);
    }

    const REQ: &[u8] = b"GET /index.html HTTP/1.1\r\nhost: www.example.org\r\nAccept: */*\r\nUser-Agent:  curl/8.5.0 \r\nHost: other\r\n\r\nbody";

    #[test]
    fn whole_request_in_one_segment() {
        let st = run(&[REQ]);
        let h = st.head().unwrap();
        assert_eq!(h.host.as_deref(), Some("www.example.org"));
        assert_eq!(h.user_agent.as_deref(), Some("curl/8.5.0"));
    }

    #[test]
    fn split_at_every_byte_gives_the_same() {
        for cut in 1..REQ.len() {
            let st = run(&[&REQ[..cut], &REQ[cut..]]);
            let h = st.head().unwrap();
            assert_eq!(h.host.as_deref(), Some("www.example.org"), "cut {cut}");
            assert_eq!(h.user_agent.as_deref(), Some("curl/8.5.0"), "cut {cut}");
        }
    }

    #[test]
    fn ends_reading_at_the_blank_line() {
        let a = Http;
        let mut st = State::default();
        a.packet(&mut st, &view(REQ, true));
        assert!(matches!(st.phase, Phase::Done(Some(_))));
        // A second request on the same connection changes nothing.
        a.packet(
            &mut st,
            &view(b"GET / HTTP/1.1\r\nHost: later\r\n\r\n", true),
        );
        assert_eq!(st.head().unwrap().host.as_deref(), Some("www.example.org"));
    }

    #[test]
    fn a_flow_seen_from_a_reply_on() {
        let a = Http;
        let mut st = State::default();
        a.packet(&mut st, &view(b"HTTP/1.1 200 OK\r\nHost: x\r\n\r\n", true));
        assert!(matches!(st.phase, Phase::Waiting(1)));
        a.packet(&mut st, &view(&REQ[..30], false));
        // The reply side's later bytes are not the request's.
        a.packet(&mut st, &view(b"more reply\r\n", true));
        a.packet(&mut st, &view(&REQ[30..], false));
        assert_eq!(st.head().unwrap().host.as_deref(), Some("www.example.org"));
    }

    #[test]
    fn other_protocols_are_ignored() {
        let a = Http;
        let mut st = State::default();
        a.packet(&mut st, &view(b"220 smtp ready\r\n", false));
        a.packet(&mut st, &view(b"EHLO x\r\n", true));
        assert!(matches!(st.phase, Phase::Done(None)));
        let st = run(&[b"\x16\x03\x01\x02\x00GET / HTTP/1.1\r\nHost: x\r\n\r\n"]);
        assert_eq!(st.head(), None);
        let st = run(&[b"GETX / HTTP/1.1\r\nHost: x\r\n\r\n"]);
        assert_eq!(st.head(), None);
        // HTTP/2's preface is not an HTTP/1.x request line.
        let st = run(&[b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"]);
        assert_eq!(st.head(), None);
        let st = run(&[b"GET / HTTP/2.0\r\nHost: x\r\n\r\n"]);
        assert_eq!(st.head(), None);
    }

    #[test]
    fn a_cut_header_block_keeps_its_whole_lines() {
        // The flow ends inside the User-Agent line: the Host line was whole.
        let st = run(&[b"GET / HTTP/1.0\nHost: a.example\nUser-Agent: trunc"]);
        let h = st.head().unwrap();
        assert_eq!(h.host.as_deref(), Some("a.example"));
        assert_eq!(h.user_agent, None);
    }

    #[test]
    fn a_snaplen_cut_stops_the_buffer() {
        let a = Http;
        let mut st = State::default();
        let bytes = b"POST /x HTTP/1.1\r\nHost: h.example\r\nUser-Ag";
        let mut p = view(bytes, true);
        p.payload_len = 1400;
        a.packet(&mut st, &p);
        // Read at once: the bytes after the cut are missing.
        let h = st.head().unwrap();
        assert_eq!(h.host.as_deref(), Some("h.example"));
        assert_eq!(h.user_agent, None);
        a.packet(&mut st, &view(b"ent: late\r\n\r\n", true));
        assert_eq!(st.head().unwrap().user_agent, None);
    }

    #[test]
    fn the_buffer_is_bounded() {
        let mut big = b"GET / HTTP/1.1\r\nHost: first.example\r\n".to_vec();
        let filler = b"X-Filler: 0123456789012345678901234567890123456789\r\n";
        let a = Http;
        let mut st = State::default();
        a.packet(&mut st, &view(&big, true));
        for _ in 0..200 {
            if let Phase::Reading(_, buf) = &st.phase {
                assert!(buf.len() <= MAX_HEAD);
            }
            a.packet(&mut st, &view(filler, true));
        }
        big.clear();
        // Concluded at the bound; the host line was whole.
        assert!(matches!(st.phase, Phase::Done(_)));
        assert_eq!(st.head().unwrap().host.as_deref(), Some("first.example"));
    }

    #[test]
    fn values_are_trimmed_cut_and_made_text() {
        let mut req = b"GET / HTTP/1.1\r\nUser-Agent: \xff\xfeok\r\nHost: ".to_vec();
        req.extend(std::iter::repeat_n(b'h', 400));
        req.extend_from_slice(b"\r\n\r\n");
        let st = run(&[&req]);
        let h = st.head().unwrap();
        assert_eq!(h.user_agent.as_deref(), Some("\u{fffd}\u{fffd}ok"));
        assert_eq!(h.host.as_ref().unwrap().len(), 256);
    }

    #[test]
    fn head_end_finds_both_blank_lines() {
        assert_eq!(head_end(b"a\r\n\r\nb"), Some(5));
        assert_eq!(head_end(b"a\n\nb"), Some(3));
        assert_eq!(head_end(b"a\r\nb\r\n"), None);
        assert_eq!(head_end(b""), None);
    }
}
