//! The `ssh` analyzer: the identification strings (software banners) both
//! sides of an SSH connection send first (RFC 4253 section 4.2).
//!
//! Contract: per direction of a TCP flow, the payload is read as lines
//! (ended by a line feed, a carriage return before it dropped). The
//! client's first line must start with `SSH-`; the server may send other
//! lines before its own (RFC 4253 allows it), at most [`MAX_SKIP`] bytes
//! of them, each a line of text: free of NUL bytes (as OpenSSH wants) and
//! of the other control characters but TAB, CR and ESC (`not_text`).
//! A server that sends anything else before its banner is not SSH: the
//! client's banner is not read either. The first line starting with `SSH-`
//! is the banner, written whole (`SSH-2.0-OpenSSH_9.6 comment`) without
//! its line end; it is at most 255 bytes with its line end (the RFC's
//! bound), and a longer one, or bytes that are not a banner where it must
//! be, end the direction with no banner. A direction whose packet was cut
//! by the snap length stops there (the line under way is not read).
//! Bytes that are not UTF-8 become U+FFFD. At most 255 bytes are held per
//! direction, and nothing once its banner is read; a server's lines that
//! cannot be its banner (their start is not `SSH-`) are only counted and
//! checked for a NUL, and hold nothing (no allocation) until a line that
//! may be the banner comes or the client sends its own. Never fails, never
//! panics.

use super::{Action, Analyzer, PacketView};
use crate::schema::{Cells, Field, FieldType};

/// Longest identification string, its CR LF included (RFC 4253, 4.2).
pub const MAX_LINE: usize = 255;

/// Most bytes of other lines a server may send before its banner.
pub const MAX_SKIP: usize = 1024;

/// A byte that no line of text carries, in a server's lines before its
/// banner (RFC 4253 wants them UTF-8): NUL and the C0 control characters
/// but TAB, LF (the line's end), CR and ESC, and DEL. Binary data (a
/// server-first protocol, a download seen without its request) carries
/// one of them within a few bytes.
#[inline(always)]
fn not_text(c: u8) -> bool {
    const TEXT_CONTROLS: u32 = 1 << b'\t' | 1 << b'\n' | 1 << b'\r' | 1 << 0x1B;
    c < 0x20 && TEXT_CONTROLS >> c & 1 == 0 || c == 0x7F
}

/// IP protocol number of TCP.
const TCP: u8 = 6;

/// The analyzer (it has no configuration).
#[derive(Debug, Default)]
pub struct Ssh;

/// Reads one direction's banner from its bytes, fed in order.
#[derive(Debug, Default, Clone)]
pub struct Banner {
    /// The line under way (at most [`MAX_LINE`] bytes are kept).
    line: Vec<u8>,
    /// The line under way is longer than [`MAX_LINE`].
    long: bool,
    /// Bytes of the line under way, those not kept too.
    seen: usize,
    /// Bytes of other lines seen before the banner, their line ends too.
    skipped: usize,
    /// Lines before the banner are allowed (the server's side).
    may_skip: bool,
    /// The line under way is known not to be the banner (the server's
    /// side): its bytes are counted in `seen`, not kept in `line`.
    plain: bool,
    /// `Some` once over: the banner, or `None` when there is none.
    done: Option<Option<Box<str>>>,
}

impl Banner {
    /// A reader for the client's side (`may_skip` false) or the server's.
    pub fn new(may_skip: bool) -> Banner {
        Banner {
            may_skip,
            ..Banner::default()
        }
    }

    /// The server's reader where [`skim`] left it (a line start, or a
    /// line known not to be the banner), or given up (`gone`).
    fn resumed(skim: Skim, gone: bool) -> Banner {
        Banner {
            may_skip: true,
            plain: skim.plain,
            seen: skim.seen,
            skipped: skim.skipped,
            done: gone.then_some(None),
            ..Banner::default()
        }
    }

    /// True while no byte was fed.
    fn untouched(&self) -> bool {
        self.done.is_none() && self.seen == 0 && self.skipped == 0
    }

    /// True once the banner is read or known absent.
    pub fn is_done(&self) -> bool {
        self.done.is_some()
    }

    /// The banner, once read.
    pub fn banner(&self) -> Option<&str> {
        self.done.as_ref().and_then(|b| b.as_deref())
    }

    /// Gives up: no banner.
    pub fn stop(&mut self) {
        if self.done.is_none() {
            self.done = Some(None);
            self.line = Vec::new();
        }
    }

    /// Feeds the direction's next bytes.
    pub fn feed(&mut self, mut b: &[u8]) {
        while !b.is_empty() && self.done.is_none() {
            if self.may_skip && self.line.is_empty() {
                // The server's lines that cannot be its banner are only
                // counted ([`skim`]: what the lines below do to them).
                let mut k = Skim {
                    skipped: self.skipped,
                    seen: self.seen,
                    plain: self.plain,
                };
                let r = skim(&mut k, b);
                (self.skipped, self.seen, self.plain) = (k.skipped, k.seen, k.plain);
                match r {
                    Skimmed::Stop => {
                        self.stop();
                        return;
                    }
                    Skimmed::All => return,
                    Skimmed::At(i) => b = &b[i..],
                }
            }
            let (part, rest, ended) = match memchr::memchr(b'\n', b) {
                Some(i) => (&b[..i], &b[i + 1..], true),
                None => (b, &b[b.len()..], false),
            };
            b = rest;
            let room = MAX_LINE - self.line.len();
            self.line.extend_from_slice(&part[..part.len().min(room)]);
            self.long |= part.len() > room;
            self.seen += part.len();
            // As soon as the line's start says what it is.
            let n = self.line.len().min(4);
            let banner = self.line.starts_with(b"SSH-");
            if !banner && self.line[..n] != b"SSH-"[..n] && !self.may_skip {
                self.stop();
                return;
            }
            let text = !self.line.iter().any(|&c| not_text(c));
            if !banner && (!text || self.skipped + self.seen > MAX_SKIP) {
                self.stop();
                return;
            }
            if !ended {
                if banner && self.long {
                    self.stop();
                }
                continue;
            }
            let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
            if banner {
                // The bound counts CR LF.
                if self.long || line.len() + 2 > MAX_LINE {
                    self.stop();
                    return;
                }
                let text: Box<str> = String::from_utf8_lossy(line).into();
                self.done = Some(Some(text));
                self.line = Vec::new();
                return;
            }
            // A whole line that only began like a banner ("S\n"): the
            // client may send no other line (fuzz input labels
            // crash-95cc11bd: cut after "S", it used to be skipped).
            if !self.may_skip {
                self.stop();
                return;
            }
            self.skipped += self.seen + 1;
            self.seen = 0;
            self.line.clear();
            self.long = false;
        }
    }
}

/// Where a server's reader is in lines that cannot be its banner (as
/// [`Banner`]'s fields of the same names).
#[derive(Debug, Clone, Copy, Default)]
struct Skim {
    skipped: usize,
    seen: usize,
    plain: bool,
}

/// What [`skim`] did with a server's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skimmed {
    /// They give the side up: not SSH (a byte [`not_text`], or more than
    /// [`MAX_SKIP`] bytes).
    Stop,
    /// All were lines (or a line under way) that cannot be the banner.
    All,
    /// A line that may be the banner starts at this offset (`seen` 0,
    /// `plain` false): [`Banner::feed`]'s lines read it.
    At(usize),
}

/// Reads a server's bytes `b` from a line start or from within a line
/// known not to be the banner (`k.plain`), as [`Banner::feed`] would,
/// without keeping them: a line whose start is not `SSH-` (nor, cut
/// short, the start of it) is only checked for bytes [`not_text`] in the
/// bytes `feed` would keep of it and counted toward [`MAX_SKIP`].
fn skim(k: &mut Skim, mut b: &[u8]) -> Skimmed {
    let all = b.len();
    while !b.is_empty() {
        // The bytes of the line that `feed` would keep are searched once,
        // for the line's end and for a byte that is not text (which gives
        // the side up); past them only the line's end is looked for, and
        // not past the bytes the side may still skip (it is given up
        // there whether the line ends or not).
        let kept = &b[..b.len().min(MAX_LINE.saturating_sub(k.seen))];
        let stop = kept.iter().position(|&c| c == b'\n' || not_text(c));
        let (end, binary) = match stop {
            Some(i) if b[i] != b'\n' => (None, true),
            Some(i) => (Some(i), false),
            None if kept.len() < b.len() => {
                let limit = (MAX_SKIP + 1).saturating_sub(k.skipped + k.seen);
                let past = &b[kept.len()..b.len().min(limit.max(kept.len()))];
                (memchr::memchr(b'\n', past).map(|i| kept.len() + i), false)
            }
            None => (None, false),
        };
        let (part, rest, ended) = match end {
            Some(i) => (&b[..i], &b[i + 1..], true),
            None => (b, &b[b.len()..], false),
        };
        if !k.plain {
            let maybe = if part.len() >= 4 {
                part[..4] == *b"SSH-"
            } else {
                !ended && part == &b"SSH-"[..part.len()]
            };
            if maybe {
                return Skimmed::At(all - b.len());
            }
            k.plain = true;
        }
        if binary {
            return Skimmed::Stop;
        }
        k.seen += part.len();
        if k.skipped + k.seen > MAX_SKIP {
            return Skimmed::Stop;
        }
        if ended {
            k.skipped += k.seen + 1;
            k.seen = 0;
            k.plain = false;
        }
        b = rest;
    }
    Skimmed::All
}

/// Whether a server's first payload `b` is not SSH ([`skim`] from a
/// fresh state stops at it). Out of line, so as not to weigh on the
/// labellers' loop.
#[inline(never)]
fn server_refused(b: &[u8]) -> bool {
    skim(&mut Skim::default(), b) == Skimmed::Stop
}

/// Per-flow state: the client's side, then the server's.
#[derive(Debug, Default)]
pub struct State {
    sides: Option<Box<[Banner; 2]>>,
    /// Not SSH: the client spoke first, and not SSH, or the server sent
    /// what no SSH server sends before its banner ([`Skimmed::Stop`]).
    off: bool,
    /// Before `sides`: the server has sent only lines that cannot be its
    /// banner ([`skim`]; nothing is held for them), `pre` their
    /// `skipped` and `seen` (at most [`MAX_SKIP`] each while the side
    /// lives), `pre_plain` theirs.
    pre: [u16; 2],
    pre_plain: bool,
    /// Before `sides`: the server's side was given up, its packet cut by
    /// the snap length within a line that cannot be its banner (the
    /// client's banner is still read).
    pre_gone: bool,
}

/// True when `b`'s first bytes (at most four) are those of `SSH-`: a
/// client's first payload that may start its banner.
#[inline(always)]
fn may_be_banner(b: &[u8]) -> bool {
    // A pattern, not a slice comparison: that is a call to `memcmp`.
    matches!(
        b,
        [] | [b'S'] | [b'S', b'S'] | [b'S', b'S', b'H'] | [b'S', b'S', b'H', b'-', ..]
    )
}

impl State {
    /// The server's reader as [`skim`] left it before `sides`.
    fn pre_skim(&self) -> Skim {
        Skim {
            skipped: usize::from(self.pre[0]),
            seen: usize::from(self.pre[1]),
            plain: self.pre_plain,
        }
    }

    /// The (client, server) banners read.
    pub fn banners(&self) -> (Option<&str>, Option<&str>) {
        match &self.sides {
            Some(s) => (s[0].banner(), s[1].banner()),
            None => (None, None),
        }
    }
}

impl Analyzer for Ssh {
    type State = State;
    const NAME: &'static str = "ssh";
    const ABOUT: &'static str = "the software banners (identification strings) of both SSH sides";
    const PAYLOAD: bool = true;
    const ENDS_EARLY: bool = true;
    const FIELDS: &'static [Field] = &[
        Field::new(
            "ssh_client",
            FieldType::Str,
            "",
            "The client's SSH identification string (e.g. SSH-2.0-OpenSSH_9.6), without its line end; empty when none was read",
        ),
        Field::new(
            "ssh_server",
            FieldType::Str,
            "",
            "The server's SSH identification string, without its line end; empty when none was read",
        ),
    ];

    const EMPTY: bool = false;
    const LAZY: bool = true;
    const SPARSE: bool = true;

    /// What `packet` decides from a flow's first payload: not TCP, the
    /// client's and not the start of `SSH-`, or the server's and not
    /// text (`Skimmed::Stop`). Then nothing is recorded.
    #[inline(always)]
    fn declines(&self, p: &PacketView<'_>) -> Option<[bool; 2]> {
        if p.payload_len == 0 {
            return None;
        }
        let off = p.proto != TCP
            || if p.from_client {
                !may_be_banner(p.payload)
            } else {
                server_refused(p.payload)
            };
        off.then_some([true; 2])
    }

    fn done_with(&self, st: &State, from_client: bool) -> bool {
        st.off
            || match &st.sides {
                Some(s) => s[usize::from(!from_client)].is_done(),
                None => !from_client && st.pre_gone,
            }
    }

    fn done(&self, st: &State) -> bool {
        st.off
            || st
                .sides
                .as_ref()
                .is_some_and(|s| s[0].is_done() && s[1].is_done())
    }

    fn packet(&self, st: &mut State, p: &PacketView<'_>) -> Action {
        if p.payload_len == 0 || st.off {
            return Action::Continue;
        }
        if p.proto != TCP {
            // Not SSH: nothing to read.
            st.off = true;
            return Action::Continue;
        }
        let mut bytes = p.payload;
        if st.sides.is_none() {
            if p.from_client {
                // The client speaks first and not SSH: nothing is held.
                if !may_be_banner(p.payload) {
                    st.off = true;
                    return Action::Continue;
                }
            } else {
                // The server's lines that cannot be its banner hold
                // nothing either (what `Banner::feed` does with them).
                if st.pre_gone {
                    return Action::Continue;
                }
                let mut k = st.pre_skim();
                let r = skim(&mut k, p.payload);
                // Below MAX_SKIP unless given up (then unused).
                st.pre = [k.skipped, k.seen].map(|v| v.min(MAX_SKIP + 1) as u16);
                st.pre_plain = k.plain;
                match r {
                    Skimmed::Stop => {
                        // What no SSH server sends before its banner.
                        st.off = true;
                        return Action::Continue;
                    }
                    Skimmed::All => {
                        if p.payload.len() < usize::from(p.payload_len) {
                            st.pre_gone = true;
                        }
                        return Action::Continue;
                    }
                    Skimmed::At(i) => bytes = &p.payload[i..],
                }
            }
        }
        let sides = st.sides.get_or_insert_with(|| {
            let server = Banner::resumed(
                Skim {
                    skipped: usize::from(st.pre[0]),
                    seen: usize::from(st.pre[1]),
                    plain: st.pre_plain,
                },
                st.pre_gone,
            );
            Box::new([Banner::new(false), server])
        });
        let d = usize::from(!p.from_client);
        if sides[d].is_done() {
            return Action::Continue;
        }
        sides[d].feed(bytes);
        let refused = sides[d].is_done() && sides[d].banner().is_none();
        let before = if p.from_client {
            sides[1].banner().is_none()
        } else {
            sides[0].untouched()
        };
        if refused && before {
            // The client spoke something else, or the server did before
            // the client spoke: not SSH; nothing held.
            st.sides = None;
            st.off = true;
            return Action::Continue;
        }
        if p.payload.len() < usize::from(p.payload_len) {
            sides[d].stop();
        }
        Action::Continue
    }

    fn finish(&self, st: &mut State) {
        if let Some(s) = &mut st.sides {
            for side in s.iter_mut() {
                side.stop();
            }
        }
    }

    fn record(&self, st: &State, out: &mut Cells<'_>) {
        let (c, s) = st.banners();
        if c.is_none() && s.is_none() {
            // Every field null: left unwritten.
            return;
        }
        for v in [c, s] {
            match v {
                Some(t) => out.text(t),
                None => out.null(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_banner_may_start_where_the_first_bytes_are_those_of_ssh() {
        // As the slice comparison it stands for, on every input of up to
        // five bytes over an alphabet around `SSH-`.
        let alphabet = [b'S', b'H', b'-', b's', 0, b'2'];
        let mut inputs = vec![Vec::new()];
        for len in 1..=5 {
            let mut next = Vec::new();
            for v in inputs.iter().filter(|v| v.len() == len - 1) {
                for &c in &alphabet {
                    let mut w = v.clone();
                    w.push(c);
                    next.push(w);
                }
            }
            inputs.extend(next);
        }
        assert_eq!(inputs.len(), 1 + 6 + 36 + 216 + 1296 + 7776);
        for b in &inputs {
            let n = b.len().min(4);
            assert_eq!(may_be_banner(b), b[..n] == b"SSH-"[..n], "{b:?}");
        }
    }

    #[test]
    fn a_client_line_that_only_begins_like_a_banner_ends_the_side() {
        // Cut after "S", as the fuzz input was: the same as whole.
        let data = b"S\nSSH-2.0-x\r\n";
        let mut whole = Banner::new(false);
        whole.feed(data);
        let mut split = Banner::new(false);
        split.feed(&data[..1]);
        split.feed(&data[1..]);
        assert!(whole.is_done() && split.is_done());
        assert_eq!(whole.banner(), None);
        assert_eq!(split.banner(), None);
        let a = Ssh;
        let mut st = State::default();
        a.packet(&mut st, &view(&data[..1], true));
        a.packet(&mut st, &view(&data[1..], true));
        a.packet(&mut st, &view(b"SSH-2.0-y\r\n", false));
        a.finish(&mut st);
        assert_eq!(st.banners(), (None, None));
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

    const C: &[u8] = b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n\x00\x00\x05\xdc\x07\x14kex";
    const S: &[u8] = b"SSH-2.0-dropbear_2022.83\r\n";

    fn run(packets: &[(&[u8], bool)]) -> State {
        let a = Ssh;
        let mut st = State::default();
        for (b, c) in packets {
            a.packet(&mut st, &view(b, *c));
        }
        a.finish(&mut st);
        st
    }

    #[test]
    fn both_banners() {
        let st = run(&[(S, false), (C, true)]);
        assert_eq!(
            st.banners(),
            (
                Some("SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13"),
                Some("SSH-2.0-dropbear_2022.83")
            )
        );
    }

    #[test]
    fn split_at_every_byte_gives_the_same() {
        for cut in 1..C.len() {
            let st = run(&[(&C[..cut], true), (&C[cut..], true), (S, false)]);
            assert_eq!(
                st.banners().0,
                Some("SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13"),
                "cut {cut}"
            );
        }
    }

    /// A server's lines before its banner count toward [`MAX_SKIP`] with
    /// all their bytes, not only the 255 kept of a long one.
    #[test]
    fn long_server_lines_count_whole_toward_the_skip_bound() {
        let mut b = Banner::new(true);
        for _ in 0..11 {
            b.feed(&[b'a'; 100]);
        }
        assert!(b.is_done() && b.banner().is_none());
        let mut b = Banner::new(true);
        for _ in 0..4 {
            b.feed(&[b'a'; 300]);
            b.feed(b"\n");
        }
        b.feed(b"SSH-2.0-x\r\n");
        assert!(b.is_done() && b.banner().is_none());
        let mut b = Banner::new(true);
        for _ in 0..3 {
            b.feed(&[b'a'; 300]);
            b.feed(b"\n");
        }
        b.feed(b"SSH-2.0-x\r\n");
        assert_eq!(b.banner(), Some("SSH-2.0-x"));
    }

    #[test]
    fn server_lines_before_its_banner() {
        let st = run(&[
            (b"Welcome\r\nto the host\n", false),
            (b"SSH-1.99-Cisco-1.25\n", false),
        ]);
        assert_eq!(st.banners().1, Some("SSH-1.99-Cisco-1.25"));
        // Not from the client.
        let st = run(&[(b"hello\r\nSSH-2.0-x\r\n", true)]);
        assert_eq!(st.banners(), (None, None));
        assert!(st.off && st.sides.is_none());
        // A server's text when the client then speaks something else.
        let st = run(&[(b"220 mail ESMTP\r\n", false), (b"EHLO x\r\n", true)]);
        assert_eq!(st.banners(), (None, None));
        assert!(st.off && st.sides.is_none());
        // The same when the client's first segment looked like a start.
        let st = run(&[(b"SS", true), (b"X\r\n", true), (S, false)]);
        assert_eq!(st.banners(), (None, None));
    }

    #[test]
    fn not_ssh() {
        let st = run(&[
            (b"GET / HTTP/1.1\r\n\r\n", true),
            (b"HTTP/1.1 200 OK\r\n", false),
        ]);
        assert_eq!(st.banners(), (None, None));
        // A binary server side is given up at its first NUL.
        let mut b = Banner::new(true);
        b.feed(b"\x16\x03\x01\x00");
        assert!(b.is_done() && b.banner().is_none());
        // Lines forever: given up at the bound.
        let mut b = Banner::new(true);
        for _ in 0..200 {
            b.feed(b"more text\r\n");
        }
        assert!(b.is_done() && b.banner().is_none());
    }

    #[test]
    fn bounds_of_the_banner() {
        let mut ok = b"SSH-2.0-".to_vec();
        ok.resize(MAX_LINE - 2, b'a');
        ok.extend_from_slice(b"\r\n");
        let mut b = Banner::new(false);
        b.feed(&ok);
        assert_eq!(b.banner().map(str::len), Some(MAX_LINE - 2));
        let mut long = b"SSH-2.0-".to_vec();
        long.resize(MAX_LINE - 1, b'a');
        long.extend_from_slice(b"\r\n");
        let mut b = Banner::new(false);
        b.feed(&long);
        assert!(b.is_done() && b.banner().is_none());
        // Endless banner bytes: given up, never more than the bound held.
        let mut b = Banner::new(false);
        b.feed(b"SSH-2.0-");
        for _ in 0..100 {
            b.feed(&[b'x'; 100]);
            assert!(b.line.len() <= MAX_LINE);
        }
        assert!(b.is_done() && b.banner().is_none());
    }

    #[test]
    fn a_cut_packet_stops_its_direction() {
        let a = Ssh;
        let mut st = State::default();
        let mut p = view(b"SSH-2.0-Open", true);
        p.payload_len = 40;
        a.packet(&mut st, &p);
        a.packet(&mut st, &view(b"SSH_9\r\n", true));
        a.packet(&mut st, &view(S, false));
        a.finish(&mut st);
        assert_eq!(st.banners(), (None, Some("SSH-2.0-dropbear_2022.83")));
    }

    /// The server's line reader as it was before [`skim`] (every line's
    /// first bytes kept): what the state reads must not differ from it.
    #[derive(Default)]
    struct Reference {
        line: Vec<u8>,
        long: bool,
        seen: usize,
        skipped: usize,
        done: Option<Option<String>>,
        /// Given up by the bytes it was sent (not SSH), not by a cut.
        refused: bool,
    }

    impl Reference {
        fn stop(&mut self) {
            if self.done.is_none() {
                self.done = Some(None);
            }
        }

        fn feed(&mut self, mut b: &[u8]) {
            while !b.is_empty() && self.done.is_none() {
                let (part, rest, ended) = match memchr::memchr(b'\n', b) {
                    Some(i) => (&b[..i], &b[i + 1..], true),
                    None => (b, &b[b.len()..], false),
                };
                b = rest;
                let room = MAX_LINE - self.line.len();
                self.line.extend_from_slice(&part[..part.len().min(room)]);
                self.long |= part.len() > room;
                self.seen += part.len();
                let banner = self.line.starts_with(b"SSH-");
                let text = self
                    .line
                    .iter()
                    .all(|&c| c >= 0x20 && c != 0x7F || b"\t\r\x1b".contains(&c));
                if !banner && (!text || self.skipped + self.seen > MAX_SKIP) {
                    self.refused = true;
                    self.stop();
                    return;
                }
                if !ended {
                    if banner && self.long {
                        self.stop();
                    }
                    continue;
                }
                let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
                if banner {
                    if self.long || line.len() + 2 > MAX_LINE {
                        self.stop();
                        return;
                    }
                    self.done = Some(Some(String::from_utf8_lossy(line).into()));
                    return;
                }
                self.skipped += self.seen + 1;
                self.seen = 0;
                self.line.clear();
                self.long = false;
            }
        }
    }

    /// Servers' bytes of lines, NULs, long lines and banners, in random
    /// packets (some cut by the snap length), the client's banner at a
    /// random place among them: the banners read are the reference's.
    #[test]
    fn server_lines_read_as_the_reference_reads_them() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let pieces: [&[u8]; 12] = [
            b"a",
            b"hello there ",
            b"\n",
            b"\r\n",
            b"\0",
            b"\x07",
            b"\t\x1b[1m",
            b"\xc3\xa9",
            b"S",
            b"SSH",
            b"SSH-2.0-srv\r\n",
            &[b'z'; 200],
        ];
        let (mut banners, mut refusals) = (0, 0);
        for _ in 0..3000 {
            let mut bytes = Vec::new();
            for _ in 0..next(16) {
                bytes.extend_from_slice(pieces[next(pieces.len() as u64) as usize]);
            }
            // Packets: (bytes, cut by the snap length).
            let mut packets = Vec::new();
            let mut at = 0;
            while at < bytes.len() {
                let n = (1 + next(40) as usize).min(bytes.len() - at);
                packets.push((&bytes[at..at + n], next(10) == 0));
                at += n;
            }
            let client_at = next(packets.len() as u64 + 2) as usize;
            let mut reference = Reference::default();
            // The server was found not SSH before the client's banner
            // came: that is not read either.
            let mut refused_at = None;
            for (i, &(b, cut)) in packets.iter().enumerate() {
                if reference.done.is_some() {
                    break;
                }
                reference.feed(b);
                if reference.refused {
                    refused_at = Some(i);
                }
                if cut {
                    reference.stop();
                }
            }
            let refused_first = refused_at.is_some_and(|i| i < client_at);
            let a = Ssh;
            let mut st = State::default();
            let client = view(b"SSH-2.0-cli\r\n", true);
            for (i, &(b, cut)) in packets.iter().enumerate() {
                if i == client_at {
                    a.packet(&mut st, &client);
                }
                if a.done_with(&st, false) {
                    // Not shown (`Active`).
                    continue;
                }
                let mut p = view(b, false);
                if cut {
                    p.payload_len += 1;
                }
                a.packet(&mut st, &p);
            }
            if client_at >= packets.len() {
                a.packet(&mut st, &client);
            }
            a.finish(&mut st);
            let want = reference.done.flatten();
            banners += usize::from(want.is_some());
            refusals += usize::from(refused_first);
            let client = (!refused_first).then_some("SSH-2.0-cli");
            assert_eq!(
                st.banners(),
                (client, want.as_deref()),
                "{:?}",
                String::from_utf8_lossy(&bytes)
            );
        }
        assert!(banners > 100, "{banners}");
        assert!(refusals > 100, "{refusals}");
    }

    /// A server's first bytes that are not text are not SSH: neither
    /// banner is read. Text cut by the snap length before the banner only
    /// ends the server's side.
    #[test]
    fn a_server_that_sends_binary_first_is_not_ssh() {
        for first in [
            &b"\x00\x00\x00\x4a\x0a\x38\x2e"[..],
            b"220 ok\x07\r\n",
            b"abc\x7f\r\n",
            b"\x16\x03\x03",
        ] {
            let st = run(&[(first, false), (C, true), (S, false)]);
            assert!(st.off, "{first:?}");
            assert_eq!(st.banners(), (None, None), "{first:?}");
            assert!(Ssh.done(&st));
        }
        // TAB, ESC (colours) and UTF-8 are text.
        let st = run(&[
            (b"\x1b[1mWelcome\t\xc3\xa9t\xc3\xa9\r\n", false),
            (S, false),
            (C, true),
        ]);
        assert_eq!(st.banners().1, Some("SSH-2.0-dropbear_2022.83"));
        // Cut within a line of text: the client's banner is still read.
        let a = Ssh;
        let mut st = State::default();
        let mut p = view(b"Welcome to", false);
        p.payload_len = 200;
        a.packet(&mut st, &p);
        assert!(!st.off && st.pre_gone && a.done_with(&st, false));
        assert!(!a.done_with(&st, true));
        a.packet(&mut st, &view(C, true));
        a.finish(&mut st);
        assert_eq!(
            st.banners(),
            (Some("SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13"), None)
        );
    }

    #[test]
    fn a_server_line_is_read_whole_when_the_client_comes_within_it() {
        // The client's banner arrives while the server is within a line
        // that is not its banner: the line goes on being skipped.
        let st = run(&[
            (b"220 welcome", false),
            (C, true),
            (b" more\r\nSSH-2.0-srv\r\n", false),
        ]);
        assert_eq!(st.banners().1, Some("SSH-2.0-srv"));
        // A NUL past the 255 bytes kept of a line is not looked at.
        let mut long = vec![b'a'; 300];
        long.push(0);
        long.push(b'\n');
        let st = run(&[(&long, false), (C, true), (S, false)]);
        assert_eq!(st.banners().1, Some("SSH-2.0-dropbear_2022.83"));
        // Within the 255 bytes it is not SSH, nothing held.
        let st = run(&[(b"ab\0\n", false)]);
        assert!(st.off && st.sides.is_none());
    }

    #[test]
    fn a_flow_ending_mid_banner_has_none() {
        let st = run(&[(b"SSH-2.0-OpenSSH", true)]);
        assert_eq!(st.banners(), (None, None));
    }
}
