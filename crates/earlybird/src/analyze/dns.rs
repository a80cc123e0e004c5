//! The `dns` analyzer: the name and type of a flow's first DNS query, and
//! the response code and A, AAAA and CNAME answers of its first response
//! (messages read by `dns_wire`).
//!
//! Contract: over UDP each packet's payload is one message; over TCP each
//! direction's first message is read after its two-byte length (RFC 1035,
//! 4.2.2), from at most [`MAX_TCP`] bytes held per direction until it is
//! whole (a length past [`MAX_TCP`], or a header whose OPCODE is not 0,
//! gives the direction up at once). The flow's first message with payload
//! must read whole as a standard query or response (OPCODE 0, at least one
//! question), else the flow is not DNS and the analyzer stops looking at
//! it; port numbers are not looked at, so DNS on any port (mDNS, LLMNR)
//! counts. The first message's first question gives `dns_query` and `dns_qtype` (a flow seen
//! from its response on takes the response's question); the first
//! response (with the query's ID when the query was seen) gives
//! `dns_rcode` and `dns_answers`. Later messages, and messages that do not
//! read whole (a packet cut by the snap length included), are not read.
//! Nothing is held once the query and the response are read. Never fails,
//! never panics.
//!
//! `dns_name`: the A and AAAA answers of each flow's first response go to
//! the run's name-by-address cache (`dns_cache`, [`CACHE`] addresses per
//! shard, named by the response's question); every flow takes, at its first
//! packet, the name cached for its server address (the destination of its
//! first packet) and the answer's age then (`dns_name_age_ns`). The
//! shard loop hands the turns over ([`Dns::turn`]); an answer is seen by
//! the flows that start [`super::dns_cache::LAG`] turns (batches of the input)
//! or more after it, whatever the shard count.

use super::dns_cache::{Board, Replica, Update};
use super::dns_wire::{self, Data};
use super::{Action, Analyzer, PacketView};
use crate::schema::{Cells, Field, FieldType};
use crate::time::Nanos;
use std::cell::{Cell, RefCell};
use std::fmt::Write;
use std::net::IpAddr;
use std::sync::Arc;

/// Most bytes held per TCP direction while its first message is not whole.
pub const MAX_TCP: usize = 4096;

/// IP protocol numbers.
const TCP: u8 = 6;
const UDP: u8 = 17;

/// Addresses the name-by-address cache holds per shard.
pub const CACHE: usize = 65_536;

/// The analyzer, with its shard's name-by-address cache (none: no
/// `dns_name`, as in the unit tests).
#[derive(Debug, Default)]
pub struct Dns {
    names: Option<RefCell<Names>>,
    /// The cache holds an address (as of the last [`Dns::turn`], the only
    /// place it changes): a flow's start looks no further while it holds
    /// none.
    holds: Cell<bool>,
}

/// A shard's side of the name-by-address cache.
#[derive(Debug)]
struct Names {
    board: Arc<Board>,
    shard: usize,
    replica: Replica,
    /// Answers seen in the turn being run.
    pending: Vec<Update>,
    /// The turn being run (turns before it are published).
    turn: u64,
}

impl Names {
    fn new(board: Arc<Board>, shard: usize) -> Names {
        Names {
            board,
            shard,
            replica: Replica::new(shard, CACHE),
            pending: Vec::new(),
            turn: 0,
        }
    }
}

impl Drop for Names {
    fn drop(&mut self) {
        // No more turns from this shard: nobody waits for it.
        self.board.leave(self.shard);
    }
}

impl Dns {
    /// The analyzer of shard `shard`, sharing the cache's turns through
    /// `board` (one board for every shard of a run that runs the input
    /// in turns; its own board for a shard that does not).
    pub fn with_board(board: Arc<Board>, shard: usize) -> Dns {
        Dns {
            names: Some(RefCell::new(Names::new(board, shard))),
            holds: Cell::new(false),
        }
    }

    /// The shard is about to run turn `turn` (turns come in order; a
    /// turn skipped counts as run with no answer): publishes the answers
    /// of the turns before and brings the cache to what `turn` sees.
    pub fn turn(&self, turn: u64) {
        let Some(n) = &self.names else {
            return;
        };
        let mut n = n.borrow_mut();
        let n = &mut *n;
        if turn > n.turn {
            n.board
                .publish(n.shard, turn - 1, std::mem::take(&mut n.pending));
            n.turn = turn;
        }
        n.replica.advance(&n.board, turn);
        self.holds.set(!n.replica.is_empty());
    }

    /// A flow to `server()` starts at `ts`: its state takes the name
    /// cached for that address (`server` is not called while the cache
    /// holds no address).
    #[inline]
    pub fn flow_start(&self, st: &mut State, server: impl FnOnce() -> IpAddr, ts: Nanos) {
        if self.names.is_some() {
            st.cached = self.cached(server, ts);
        }
    }

    /// The name the cache holds for `server()` at `ts`, and its age
    /// ([`Self::flow_start`]'s, without a state: `server()` is computed
    /// only while the cache holds an address).
    pub(crate) fn cached(
        &self,
        server: impl FnOnce() -> IpAddr,
        ts: Nanos,
    ) -> Option<Box<(Box<str>, Nanos)>> {
        if !self.holds.get() {
            return None;
        }
        let n = self.names.as_ref()?.borrow();
        n.replica
            .lookup(server(), ts)
            .map(|(name, age)| Box::new((name.into(), age)))
    }

    /// The answers of a response just read, to the cache.
    fn answered(&self, s: &Seen, ts: Nanos) {
        let (Some(n), Some((name, _))) = (&self.names, &s.query) else {
            return;
        };
        let mut n = n.borrow_mut();
        for a in &s.answers {
            let addr = match a {
                Data::A(x) => IpAddr::V4(*x),
                Data::Aaaa(x) => IpAddr::V6(*x),
                _ => continue,
            };
            n.pending.push(Update {
                ts,
                addr,
                name: name.as_str().into(),
            });
        }
    }
}

/// The fields `dns_name` and `dns_name_age_ns`.
const NAME_FIELDS: usize = 2;

/// What was read of a flow's DNS.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The first question's name and type.
    pub query: Option<(String, u16)>,
    /// The query's transaction ID (when a query was seen).
    pub id: Option<u16>,
    /// The first response's RCODE.
    pub rcode: Option<u8>,
    /// The first response's answers (see [`Seen::answers_text`]).
    pub answers: Vec<Data>,
}

impl Seen {
    /// The answers as text: addresses and canonical names, in order,
    /// separated by commas.
    pub fn answers_text(&self) -> String {
        let mut s = String::new();
        for a in &self.answers {
            if !s.is_empty() {
                s.push(',');
            }
            let _ = match a {
                Data::A(x) => write!(s, "{x}"),
                Data::Aaaa(x) => write!(s, "{x}"),
                Data::Cname(n) => write!(s, "{n}"),
                Data::Other => Ok(()),
            };
        }
        s
    }

    /// Takes one whole message; false when it is not a standard DNS
    /// message.
    fn message(&mut self, b: &[u8]) -> bool {
        let Ok(m) = dns_wire::parse(b) else {
            return false;
        };
        if m.header.opcode != 0 {
            return false;
        }
        if m.questions.is_empty() {
            // DNS, but nothing asked (an mDNS announcement): read on.
            return m.header.response;
        }
        if self.query.is_none() {
            let q = &m.questions[0];
            self.query = Some((q.name.clone(), q.qtype));
            if !m.header.response {
                self.id = Some(m.header.id);
            }
        }
        if m.header.response && self.rcode.is_none() && self.id.is_none_or(|id| id == m.header.id) {
            self.rcode = Some(m.header.rcode);
            self.answers = m
                .answers
                .into_iter()
                .filter(|a| a.data != Data::Other)
                .map(|a| a.data)
                .collect();
        }
        true
    }
}

/// Per-flow state.
#[derive(Debug, Default)]
pub struct State {
    seen: Option<Box<Seen>>,
    /// TCP: each direction's bytes until its first message is whole;
    /// `None` once read (or given up).
    tcp: Option<Box<[Option<Vec<u8>>; 2]>>,
    /// Not DNS, or done: later packets are not looked at.
    off: bool,
    /// The name cached for the server address when the flow started, and
    /// its age then.
    cached: Option<Box<(Box<str>, Nanos)>>,
}

impl State {
    /// Keeps the name [`Dns::cached`] found for the flow's server.
    pub(crate) fn keep_cached(&mut self, name: Box<(Box<str>, Nanos)>) {
        self.cached = Some(name);
    }

    /// What was read (`None`: no DNS message).
    pub fn seen(&self) -> Option<&Seen> {
        self.seen.as_deref()
    }

    /// Takes a whole message; the first of the flow decides whether it is
    /// DNS.
    fn message(&mut self, b: &[u8]) {
        let first = self.seen.is_none();
        let seen = self.seen.get_or_insert_with(Box::default);
        if !seen.message(b) && first {
            self.seen = None;
            self.off = true;
            self.tcp = None;
        }
        if self.seen.as_ref().is_some_and(|s| s.rcode.is_some()) {
            self.off = true;
            self.tcp = None;
        }
    }
}

/// A DNS-over-TCP message of `need` bytes with its length, whose first
/// bytes are `b`, will not be read: it is longer than [`MAX_TCP`] (it never
/// reads whole), or its header's OPCODE is not 0 (it would not read as a
/// standard message). Decided from the first bytes rather than after
/// [`MAX_TCP`] of them: the same outcome.
fn hopeless(need: usize, b: &[u8]) -> bool {
    need > MAX_TCP || b.get(4).is_some_and(|f| (f >> 3) & 0x0f != 0)
}

/// A datagram `b` (whole) whose header [`State::message`] would turn
/// away before its questions, as a flow's first: shorter than a header,
/// OPCODE not 0, or more questions or records than
/// [`dns_wire::parse`] reads.
#[inline(always)]
fn not_a_message(b: &[u8]) -> bool {
    let Some(h) = b.get(..12) else {
        return true;
    };
    let n = |at: usize| usize::from(u16::from_be_bytes([h[at], h[at + 1]]));
    (h[2] >> 3) & 0x0f != 0
        || n(4) > dns_wire::MAX_QUESTIONS
        || n(6) + n(8) + n(10) > dns_wire::MAX_RECORDS
}

impl Analyzer for Dns {
    type State = State;
    const NAME: &'static str = "dns";
    const ABOUT: &'static str =
        "name and type of the first DNS query, response code and A/AAAA/CNAME answers";
    const PAYLOAD: bool = true;
    const ENDS_EARLY: bool = true;
    const FIELDS: &'static [Field] = &[
        Field::new(
            "dns_query",
            FieldType::Str,
            "",
            "Name of the first question of the flow's first DNS message (no final dot; the root is `.`); empty when the flow is not DNS",
        ),
        Field::new(
            "dns_qtype",
            FieldType::U16,
            "",
            "Type of that question (1 A, 28 AAAA, 5 CNAME, 65 HTTPS …)",
        ),
        Field::new(
            "dns_rcode",
            FieldType::U8,
            "",
            "Response code of the flow's first response (0 no error, 3 no such name …); empty when no response was read",
        ),
        Field::new(
            "dns_answers",
            FieldType::Str,
            "",
            "A and AAAA addresses and CNAME names of the first response's answers, in order, comma-separated (at most 16)",
        ),
        Field::new(
            "dns_name",
            FieldType::Str,
            "",
            "Name a DNS answer gave the flow's server address (the destination of its first packet) before the flow started, from the run's name-by-address cache (seen by the flows that start two 256-packet turns of the input or more after the answer); empty when none",
        ),
        Field::new(
            "dns_name_age_ns",
            FieldType::U64,
            "ns",
            "Time from that answer to the flow's first packet; empty without `dns_name`",
        ),
    ];

    fn configure(_opts: &super::Options<'_>) -> Self {
        Dns::with_board(Arc::new(Board::new(1)), 0)
    }

    const EMPTY: bool = false;
    const LAZY: bool = true;
    const SPARSE: bool = true;

    /// What `packet` decides from a flow's first payload, before a name
    /// is cached for it (its state is then made at the flow's start): TCP
    /// whose first message will not be read (`hopeless`), a whole UDP
    /// datagram whose header already says it is no message read
    /// (`not_a_message`), or neither TCP nor UDP. Then nothing is
    /// recorded.
    #[inline(always)]
    fn declines(&self, p: &PacketView<'_>) -> Option<[bool; 2]> {
        if p.payload_len == 0 {
            return None;
        }
        let off = match p.proto {
            TCP => {
                p.payload.len() >= 2
                    && hopeless(
                        2 + usize::from(u16::from_be_bytes([p.payload[0], p.payload[1]])),
                        p.payload,
                    )
            }
            UDP => p.payload.len() >= usize::from(p.payload_len) && not_a_message(p.payload),
            _ => true,
        };
        off.then_some([true; 2])
    }

    fn done(&self, st: &State) -> bool {
        st.off
    }

    fn packet(&self, st: &mut State, p: &PacketView<'_>) -> Action {
        if p.payload_len == 0 || st.off {
            return Action::Continue;
        }
        let answered = st.seen.as_ref().is_some_and(|s| s.rcode.is_some());
        let act = self.read(st, p);
        if !answered {
            if let Some(s) = st.seen.as_deref().filter(|s| s.rcode.is_some()) {
                self.answered(s, p.ts);
            }
        }
        act
    }

    fn finish(&self, st: &mut State) {
        st.tcp = None;
    }

    fn record(&self, st: &State, out: &mut Cells<'_>) {
        if st.cached.is_none() && st.seen().is_none() {
            // Every field null: left unwritten.
            return;
        }
        self.record_message(st, out);
        match st.cached.as_deref() {
            Some((name, age)) => {
                out.text(name);
                out.u64(*age);
            }
            None => {
                for _ in 0..NAME_FIELDS {
                    out.null();
                }
            }
        }
    }
}

impl Dns {
    /// [`Analyzer::packet`] without the cache.
    fn read(&self, st: &mut State, p: &PacketView<'_>) -> Action {
        let cut = p.payload.len() < usize::from(p.payload_len);
        match p.proto {
            UDP => {
                if cut {
                    // A cut message is not read (a cut first one does not
                    // decide whether the flow is DNS).
                    return Action::Continue;
                }
                st.message(p.payload);
            }
            TCP => {
                let d = usize::from(!p.from_client);
                if st.seen.is_none() && st.tcp.is_none() && p.payload.len() >= 2 {
                    // The flow's first bytes: a first message that will
                    // not be read (see below) ends the flow's reading
                    // before anything is held.
                    let need = 2 + usize::from(u16::from_be_bytes([p.payload[0], p.payload[1]]));
                    if hopeless(need, p.payload) {
                        st.off = true;
                        return Action::Continue;
                    }
                }
                let bufs = st
                    .tcp
                    .get_or_insert_with(|| Box::new([Some(Vec::new()), Some(Vec::new())]));
                let Some(buf) = &mut bufs[d] else {
                    return Action::Continue;
                };
                let room = MAX_TCP - buf.len();
                buf.extend_from_slice(&p.payload[..p.payload.len().min(room)]);
                if buf.len() < 2 {
                    return Action::Continue;
                }
                let need = 2 + usize::from(u16::from_be_bytes([buf[0], buf[1]]));
                let hopeless = hopeless(need, buf);
                if buf.len() >= need {
                    let msg = std::mem::take(buf);
                    bufs[d] = None;
                    st.message(&msg[2..need]);
                } else if hopeless || cut || buf.len() >= MAX_TCP {
                    bufs[d] = None;
                    if st.seen.is_none() {
                        st.off = true;
                        st.tcp = None;
                    }
                }
            }
            _ => st.off = true,
        }
        Action::Continue
    }

    /// The fields of the flow's messages (all but the cache's).
    fn record_message(&self, st: &State, out: &mut Cells<'_>) {
        let Some(s) = st.seen() else {
            for _ in 0..4 {
                out.null();
            }
            return;
        };
        match &s.query {
            Some((name, qtype)) => {
                out.text(name);
                out.u64(u64::from(*qtype));
            }
            None => {
                out.null();
                out.null();
            }
        }
        match s.rcode {
            Some(r) => {
                out.u64(u64::from(r));
                out.text(&s.answers_text());
            }
            None => {
                out.null();
                out.null();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(payload: &[u8], from_client: bool, proto: u8) -> PacketView<'_> {
        PacketView {
            ts: 0,
            from_client,
            index: 1,
            size: 28 + payload.len() as u16,
            tcp_flags: 0,
            proto,
            payload_len: payload.len() as u16,
            payload,
            ip: &[],
            tcp_starts: &crate::analyze::TcpStarts::NONE,
        }
    }

    /// A query for `name` (type A, ID 0xbeef).
    fn query(name: &str) -> Vec<u8> {
        let mut m = vec![0xbe, 0xef, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for l in name.split('.') {
            m.push(l.len() as u8);
            m.extend_from_slice(l.as_bytes());
        }
        m.extend_from_slice(&[0, 0, 1, 0, 1]);
        m
    }

    /// The response to [`query`] with `id`: one A record 192.0.2.1.
    fn response(name: &str, id: u16) -> Vec<u8> {
        let mut m = query(name);
        m[0..2].copy_from_slice(&id.to_be_bytes());
        m[2] = 0x81;
        m[3] = 0x80;
        m[7] = 1;
        m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, 192, 0, 2, 1]);
        m
    }

    fn run(packets: &[(&[u8], bool, u8)]) -> State {
        let mut st = State::default();
        for (b, c, proto) in packets {
            Dns::default().packet(&mut st, &view(b, *c, *proto));
        }
        Dns::default().finish(&mut st);
        st
    }

    #[test]
    fn a_datagram_declined_is_one_a_fresh_state_gives_up_at() {
        let q = query("www.example.org");
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut declined, mut read) = (0, 0);
        for i in 0..20_000 {
            // Random bytes, or a query with a few random bytes.
            let mut b: Vec<u8> = if i % 2 == 0 {
                (0..next() % 40).map(|_| next() as u8).collect()
            } else {
                q.clone()
            };
            for _ in 0..next() % 3 {
                if let Some(n) = std::num::NonZeroUsize::new(b.len().min(12)) {
                    let at = next() as usize % n;
                    b[at] = next() as u8;
                }
            }
            let cut = i % 7 == 0 && !b.is_empty();
            let mut v = view(&b, true, UDP);
            if cut {
                v.payload_len += 1;
            }
            let mut st = State::default();
            Dns::default().packet(&mut st, &v);
            let gave_up = st.off && st.seen.is_none() && st.tcp.is_none();
            match Dns::default().declines(&v) {
                Some(sides) => {
                    assert_eq!(sides, [true; 2]);
                    assert!(gave_up, "declined but read: {b:02x?}");
                    assert!(!cut);
                    declined += 1;
                }
                None => read += 1,
            }
        }
        assert!(declined > 5_000 && read > 5_000, "{declined} {read}");
    }

    #[test]
    fn query_and_response_over_udp() {
        let q = query("www.example.org");
        let r = response("www.example.org", 0xbeef);
        let st = run(&[(&q, true, UDP), (&r, false, UDP)]);
        let s = st.seen().unwrap();
        assert_eq!(s.query, Some(("www.example.org".into(), 1)));
        assert_eq!(s.rcode, Some(0));
        assert_eq!(s.answers_text(), "192.0.2.1");
        assert!(st.off, "done: nothing more is read");
    }

    #[test]
    fn a_response_with_another_id_is_not_the_answer() {
        let q = query("a.example");
        let r = response("a.example", 1);
        let st = run(&[(&q, true, UDP), (&r, false, UDP)]);
        assert_eq!(st.seen().unwrap().rcode, None);
    }

    #[test]
    fn a_flow_seen_from_its_response() {
        let r = response("b.example", 7);
        let st = run(&[(&r, false, UDP)]);
        let s = st.seen().unwrap();
        assert_eq!(s.query, Some(("b.example".into(), 1)));
        assert_eq!(s.answers_text(), "192.0.2.1");
    }

    #[test]
    fn an_announcement_before_the_query() {
        // A response with no question and no record, then a query.
        let ann = [0, 0, 0x84, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let q = query("_airport._tcp.local");
        let st = run(&[(&ann, true, UDP), (&q, true, UDP)]);
        let s = st.seen().unwrap();
        assert_eq!(s.query, Some(("_airport._tcp.local".into(), 1)));
        assert_eq!(s.rcode, None);
    }

    #[test]
    fn not_dns() {
        let st = run(&[(b"\x17\x03\x03\x00\x10hello there, not dns", true, UDP)]);
        assert!(st.seen().is_none() && st.off);
        // A later DNS-looking packet does not make it DNS.
        let q = query("c.example");
        let st = run(&[(b"junk", true, UDP), (&q, true, UDP)]);
        assert!(st.seen().is_none());
    }

    #[test]
    fn tcp_messages_split_anywhere() {
        let q = query("tcp.example");
        let mut qf = (q.len() as u16).to_be_bytes().to_vec();
        qf.extend_from_slice(&q);
        let r = response("tcp.example", 0xbeef);
        let mut rf = (r.len() as u16).to_be_bytes().to_vec();
        rf.extend_from_slice(&r);
        for cut in 1..qf.len() {
            let st = run(&[
                (&qf[..cut], true, TCP),
                (&qf[cut..], true, TCP),
                (&rf[..3], false, TCP),
                (&rf[3..], false, TCP),
            ]);
            let s = st.seen().unwrap();
            assert_eq!(s.query, Some(("tcp.example".into(), 1)), "cut {cut}");
            assert_eq!(s.answers_text(), "192.0.2.1", "cut {cut}");
            assert!(st.tcp.is_none());
        }
    }

    #[test]
    fn tcp_buffer_is_bounded() {
        let mut st = State::default();
        Dns::default().packet(&mut st, &view(&[0xff, 0xff], true, TCP));
        for _ in 0..100 {
            Dns::default().packet(&mut st, &view(&[0; 100], true, TCP));
            if let Some(b) = &st.tcp {
                assert!(b[0].as_ref().is_none_or(|v| v.len() <= MAX_TCP));
            }
        }
        assert!(st.off && st.tcp.is_none());
    }

    #[test]
    fn answers_name_the_flows_that_start_lag_turns_later() {
        let d = Dns::with_board(Arc::new(Board::new(1)), 0);
        let server: IpAddr = [192, 0, 2, 1].into();
        d.turn(0);
        let mut dns_flow = State::default();
        d.packet(
            &mut dns_flow,
            &view(&response("named.example", 7), false, UDP),
        );
        let start = |ts| {
            let mut st = State::default();
            d.flow_start(&mut st, || server, ts);
            st.cached.map(|c| *c)
        };
        // The answer's own turn and the next do not see it.
        assert_eq!(start(1_000), None);
        d.turn(1);
        assert_eq!(start(1_000), None);
        d.turn(2);
        assert_eq!(start(5_000), Some(("named.example".into(), 5_000)));
        // Another address is not named; a flow's record has both fields.
        let mut other = State::default();
        d.flow_start(&mut other, || [192, 0, 2, 2].into(), 5_000);
        assert!(other.cached.is_none());
        let mut named = State::default();
        d.flow_start(&mut named, || server, 9_000);
        let mut rows = crate::schema::Rows::default();
        rows.push_row(Dns::FIELDS.len(), |c| d.record(&named, c));
        assert_eq!(rows.get(0, 4), crate::schema::Value::Text("named.example"));
        assert_eq!(rows.get(0, 5), crate::schema::Value::U64(9_000));
    }

    #[test]
    fn a_cut_udp_packet_is_not_read() {
        let q = query("cut.example");
        let mut st = State::default();
        let mut p = view(&q[..20], true, UDP);
        p.payload_len = q.len() as u16;
        Dns::default().packet(&mut st, &p);
        assert!(st.seen().is_none() && !st.off);
        Dns::default().packet(&mut st, &view(&q, true, UDP));
        assert_eq!(st.seen().unwrap().query.as_ref().unwrap().0, "cut.example");
    }
}
