//! The `tls` analyzer: the names and fingerprints of a flow's TLS or QUIC
//! handshake — SNI, offered ALPN, chosen version, JA4, JA3, Encrypted
//! Client Hello offered.
//!
//! Contract:
//! - TCP: a flow is read when its first payload (from either side: a
//!   capture may miss the flow's first packets; that side is the TLS
//!   client) is a TLS handshake record holding a ClientHello (`16 03 ..
//!   01`); each direction's first bytes are
//!   reassembled in sequence order ([`super::handshake`]; sequence numbers
//!   from the TCP header, so the analyzer reads the IP packet) up to
//!   [`CLIENT_CAP`] and [`SERVER_CAP`] bytes, until its hello is read. A
//!   stream starts after its side's last SYN before its first payload
//!   (the flow table keeps those without payload,
//!   [`PacketView::tcp_starts`]: the analyzer is shown no packet without
//!   payload), else at its first payload.
//! - UDP: a flow is read when its first datagram is at least
//!   1,200 bytes on the wire (RFC 9000 section 14.1) and starts with a
//!   QUIC long header, or Google QUIC's public header with version flag.
//!   Initial packets of QUIC v1, v2, drafts 22 to 32 and the vendor
//!   versions built on them ([`quic::initial_keys`]) are opened
//!   ([`super::quic`]) with the keys of the client's first Destination
//!   Connection ID (or of a later one, after a Retry), both directions;
//!   the client is the side whose Initial opens with its own Destination
//!   Connection ID's keys (a capture may miss the flow's first packets);
//!   their CRYPTO frames are reassembled by offset (out of order, across
//!   packets, coalesced packets) and the hellos read from them. Google QUIC
//!   up to Q049: the CHLO's SNI tag from the clear bytes; Q050: from its
//!   opened Initial packet. Other versions
//!   are named in `quic_version` and counted in `tls_status`, not guessed.
//! - Fields come from the ClientHello (`sni`, `alpn`, `ja4`, `ja3`, `ech`)
//!   and the ServerHello (`tls_version`); `tls_status` says `ok` when the
//!   ClientHello was read, or why it was not (see [`Tls::FIELDS`]). A flow
//!   that is neither TLS nor QUIC has every field empty.
//! - Memory: a flow holds nothing but a few bytes until its first payload
//!   looks like a handshake; then at most twice the caps per direction
//!   until its hellos are read (then the bytes are freed and only the
//!   results kept). All flows of a table together hold about [`BUDGET`]
//!   bytes of handshake at most (checked before each piece is kept; a
//!   vector's spare capacity is counted, the per-flow record of a few
//!   hundred bytes is not): a handshake that would pass it stops with
//!   `tls_status` `cut-memory`. Never panics on input.

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::handshake::{tcp_seq, Reassembly, TcpStream};
use super::{quic, tls_hello, Action, Analyzer, PacketView};
use crate::schema::{Cells, Field, FieldType};

/// Bytes of the client's stream kept to read its ClientHello.
pub const CLIENT_CAP: usize = 16 * 1024;
/// Bytes of the server's stream kept to read its ServerHello.
pub const SERVER_CAP: usize = 4 * 1024;
/// Handshake bytes all flows of one flow table may hold together.
pub const BUDGET: usize = 64 << 20;

const TCP: u8 = 6;
const UDP: u8 = 17;
const SYN: u8 = 0x02;

/// The analyzer: the flow table's handshake memory account.
#[derive(Debug, Default)]
pub struct Tls {
    held: Arc<AtomicUsize>,
}

/// What the analyzer found of a flow's handshake.
#[derive(Debug, Default)]
struct Found {
    sni: Option<String>,
    alpn: Option<String>,
    version: Option<u16>,
    ja4: Option<String>,
    ja3: Option<String>,
    ech: Option<bool>,
    quic_version: Option<u32>,
    /// Most often `ok`: borrowed, not allocated.
    status: Option<Cow<'static, str>>,
}

/// Per-flow state.
#[derive(Debug, Default)]
pub struct State {
    /// Decided: not a handshake this analyzer reads, or finished.
    done: bool,
    hs: Option<Box<Handshake>>,
}

/// A handshake being read.
#[derive(Debug)]
struct Handshake {
    quic: bool,
    /// The flow direction (0: the flow's client) of the TLS or QUIC
    /// client; `None` until known (QUIC: its first Initial that opens).
    /// The arrays below are by role: 0 the TLS client, 1 the server.
    client: Option<usize>,
    /// TCP: the client's first payload came past the stream's start, so
    /// whether it is TLS waits for the start.
    provisional: bool,
    /// The start came and it is not TLS.
    not_tls: bool,
    tcp: [TcpStream; 2],
    streams: [Reassembly; 2],
    /// The hello of this direction was read (or cannot be).
    read: [bool; 2],
    /// QUIC: the client's first Destination Connection ID.
    dcid: Vec<u8>,
    /// QUIC: which of its version's salts opened the client's Initial.
    salt: usize,
    /// QUIC: the keys of each role's Initial packets (from `dcid` and
    /// `salt`), with the version they were made for, once made: a key
    /// derivation is about a dozen SHA-256 blocks.
    keys: [Option<(u32, quic::InitialKeys)>; 2],
    found: Found,
    /// Bytes counted in the table's account.
    held: usize,
    account: Arc<AtomicUsize>,
}

impl Drop for Handshake {
    fn drop(&mut self) {
        self.account.fetch_sub(self.held, Ordering::Relaxed);
    }
}

impl Handshake {
    fn new(quic: bool, client: Option<usize>, account: &Arc<AtomicUsize>) -> Box<Handshake> {
        Box::new(Handshake {
            quic,
            client,
            provisional: false,
            not_tls: false,
            tcp: [TcpStream::default(); 2],
            streams: [Reassembly::default(), Reassembly::default()],
            read: [false; 2],
            dcid: Vec::new(),
            salt: 0,
            keys: [None; 2],
            found: Found::default(),
            held: 0,
            account: Arc::clone(account),
        })
    }

    /// Brings the account up to date with the bytes held now.
    fn account(&mut self) {
        let now: usize = self.streams.iter().map(|s| s.held()).sum();
        if now >= self.held {
            self.account.fetch_add(now - self.held, Ordering::Relaxed);
        } else {
            self.account.fetch_sub(self.held - now, Ordering::Relaxed);
        }
        self.held = now;
    }

    fn over_budget(&self, more: usize) -> bool {
        self.account.load(Ordering::Relaxed) + more > BUDGET
    }

    fn done(&self) -> bool {
        self.read[0] && self.read[1]
    }

    fn finish_direction(&mut self, d: usize) {
        self.read[d] = true;
        self.streams[d].release();
    }

    fn fail(&mut self, d: usize, why: impl Into<Cow<'static, str>>) {
        if d == 0 && self.found.status.is_none() {
            self.found.status = Some(why.into());
        }
        self.finish_direction(d);
    }

    /// Reads a hello from `bytes` (the start of direction `d`'s stream);
    /// true when it was read or cannot be.
    fn hello(&mut self, d: usize, bytes: &[u8]) -> bool {
        if self.provisional && d == 0 {
            if bytes.len() < 6 {
                return false;
            }
            if bytes[..2] != [0x16, 0x03] || bytes[5] != tls_hello::CLIENT_HELLO {
                self.not_tls = true;
                self.finish_direction(0);
                self.finish_direction(1);
                return true;
            }
            self.provisional = false;
        }
        let msg = if self.quic {
            tls_hello::crypto_message(bytes)
                .map(|m| m.map(|(t, b)| (t, std::borrow::Cow::Borrowed(b))))
        } else {
            tls_hello::record_message(bytes)
        };
        let (ty, body) = match msg {
            Ok(Some(m)) => m,
            Ok(None) => return false,
            Err(e) => {
                self.fail(d, format!("error: {e}"));
                return true;
            }
        };
        match (d, ty) {
            (0, tls_hello::CLIENT_HELLO) => match tls_hello::client_hello(&body) {
                Ok(mut ch) => {
                    let f = &mut self.found;
                    f.sni = ch.sni.take();
                    if !ch.alpn.is_empty() {
                        let mut names = String::new();
                        for (i, a) in ch.alpn.iter().enumerate() {
                            if i > 0 {
                                names.push(',');
                            }
                            names.push_str(&String::from_utf8_lossy(a));
                        }
                        f.alpn = Some(names);
                    }
                    f.ja4 = Some(tls_hello::ja4(&ch, self.quic));
                    f.ja3 = Some(tls_hello::ja3(&ch));
                    f.ech = Some(ch.ech);
                    f.status = Some("ok".into());
                }
                Err(e) => self.fail(0, format!("error: ClientHello {e}")),
            },
            (1, tls_hello::SERVER_HELLO) => {
                if let Ok(sh) = tls_hello::server_hello(&body) {
                    self.found.version = Some(sh.chosen());
                }
            }
            (0, _) => self.fail(
                0,
                "error: the client's first handshake message is not a ClientHello",
            ),
            _ => {}
        }
        self.finish_direction(d);
        true
    }

    /// A piece of direction `d`'s stream at `offset`, `wire` bytes on the
    /// wire; reads the hello when the stream has it.
    fn piece(&mut self, d: usize, offset: u64, data: &[u8], wire: usize) {
        if self.read[d] {
            return;
        }
        let cap = if d == 0 { CLIENT_CAP } else { SERVER_CAP };
        if let Some(view) = self.streams[d].contiguous_view(offset, data, cap) {
            // The common case: the hello in the stream's first piece.
            if self.hello(d, view) {
                return;
            }
        }
        if self.over_budget(data.len()) {
            self.fail(d, "cut-memory");
            return;
        }
        let grew = self.streams[d].insert(offset, data, wire, cap);
        self.account();
        if grew {
            let bytes = std::mem::take(&mut self.streams[d]);
            let got = self.hello(d, bytes.bytes());
            if !got {
                self.streams[d] = bytes;
            }
        }
        if !self.read[d] {
            if let Some(cut) = self.streams[d].cut() {
                self.fail(d, format!("cut-{}", cut.name()));
            }
        }
        self.account();
    }

    /// One QUIC datagram of flow direction `dir`.
    fn datagram(&mut self, dir: usize, mut dg: &[u8], wire: usize) {
        let snapped = dg.len() < wire;
        while !dg.is_empty() {
            let h = match quic::long_header(dg) {
                Ok(h) => h,
                Err(_) => return, // short-header packets, padding
            };
            let next = dg.get(h.len..).unwrap_or(&[]);
            if self.client.is_none() {
                // The client is the side whose Initial opens with the keys
                // of its own Destination Connection ID.
                if h.version != 0 && self.found.quic_version.is_none() {
                    self.found.quic_version = Some(h.version);
                }
                if !quic::supported(h.version) {
                    if h.version != 0 && self.found.status.is_none() {
                        self.found.status = Some(
                            format!("unsupported QUIC version {}", quic::version_name(h.version))
                                .into(),
                        );
                    }
                    dg = next;
                    continue;
                }
                if !h.initial {
                    dg = next;
                    continue;
                }
                let opened = (0..quic::salt_count(h.version)).find_map(|salt| {
                    let keys = quic::initial_keys_with(salt, h.version, h.dcid, false)?;
                    Some((salt, keys, quic::open_initial(dg, &h, &keys)))
                        .filter(|(_, _, r)| r.is_ok() || snapped)
                });
                let Some((salt, keys, opened)) = opened else {
                    dg = next;
                    continue;
                };
                self.salt = salt;
                self.keys = [Some((h.version, keys)), None];
                match opened {
                    Ok(plain) if h.version == quic::Q050 => {
                        self.client = Some(dir);
                        self.found.quic_version = Some(h.version);
                        self.found.status = Some(match quic::gquic_sni(&plain) {
                            Ok(Some(sni)) => {
                                self.found.sni = Some(sni);
                                "ok".into()
                            }
                            Ok(None) => "no client hello in the Google QUIC Q050 Initial".into(),
                            Err(e) => format!("error: Google QUIC {e}").into(),
                        });
                        self.read = [true; 2];
                        return;
                    }
                    Ok(plain) => {
                        self.client = Some(dir);
                        self.dcid = h.dcid.to_vec();
                        self.found.quic_version = Some(h.version);
                        self.found.status = None;
                        self.frames(0, h.version, &plain);
                    }
                    Err(_) => {
                        // Snapped: a cut Initial cannot be opened.
                        self.found.quic_version = Some(h.version);
                        self.fail(0, "cut-snap");
                        self.read[1] = true;
                        return;
                    }
                }
                dg = next;
                continue;
            }
            let r = usize::from(self.client != Some(dir));
            if self.read[r] {
                return;
            }
            if h.initial && quic::supported(h.version) {
                match self.open(r, dg, &h) {
                    Ok(plain) => self.frames(r, h.version, &plain),
                    Err(e) if snapped && e.what.contains("snap length") => {
                        self.fail(r, "cut-snap");
                        return;
                    }
                    Err(e) => {
                        self.fail(r, format!("error: QUIC {e}"));
                        return;
                    }
                }
            }
            dg = next;
        }
    }

    /// The CRYPTO frames of an opened Initial packet of role `r`.
    fn frames(&mut self, r: usize, version: u32, plain: &[u8]) {
        let mut pieces = Vec::new();
        if let Err(e) = quic::crypto_frames_of(version, plain, |off, data| {
            pieces.push((off, data.to_vec()))
        }) {
            self.fail(r, format!("error: QUIC frames {e}"));
            return;
        }
        for (off, data) in pieces {
            self.piece(r, off, &data, data.len());
        }
    }

    /// Opens an Initial packet of role `d`; after a Retry the client uses
    /// keys of its new Destination Connection ID.
    fn open(
        &mut self,
        d: usize,
        dg: &[u8],
        h: &quic::LongHeader<'_>,
    ) -> Result<Vec<u8>, quic::QuicError> {
        let keys = match self.keys[d] {
            Some((version, keys)) if version == h.version => keys,
            _ => {
                let keys = quic::initial_keys_with(self.salt, h.version, &self.dcid, d == 1);
                let Some(keys) = keys else {
                    return Err(quic::QuicError {
                        offset: 1,
                        what: "unsupported version",
                    });
                };
                self.keys[d] = Some((h.version, keys));
                keys
            }
        };
        match quic::open_initial(dg, h, &keys) {
            Err(e) if d == 0 && h.dcid != self.dcid.as_slice() => {
                let Some(k) = quic::initial_keys_with(self.salt, h.version, h.dcid, false) else {
                    return Err(e);
                };
                let plain = quic::open_initial(dg, h, &k)?;
                self.dcid = h.dcid.to_vec();
                // The server's keys come from the new Destination
                // Connection ID too.
                self.keys = [Some((h.version, k)), None];
                Ok(plain)
            }
            r => r,
        }
    }
}

/// True when `b` starts as a TLS handshake record holding a ClientHello
/// (`16 03 .. .. .. 01`).
#[inline]
fn client_hello_start(b: &[u8]) -> bool {
    // A pattern, not a slice comparison: that is a call to `memcmp`.
    matches!(b, [0x16, 0x03, _, _, _, tls_hello::CLIENT_HELLO, ..])
}

/// The last SYN of a TCP payload's side (`side_syn`, or the packet's own
/// when it is one) and the sequence number its payload starts at, from
/// its header's sequence number and flags ([`tcp_seq`]): data on a SYN
/// (TCP Fast Open) starts after the SYN's own number.
fn placed(side_syn: Option<u32>, (seq, flags): (u32, u8)) -> (Option<u32>, u32) {
    if flags & SYN != 0 {
        (Some(seq), seq.wrapping_add(1))
    } else {
        (side_syn, seq)
    }
}

/// True when a payload starting at `seq` lies past the start of its
/// stream, whose side's last SYN is `syn`.
fn past_start(syn: Option<u32>, seq: u32) -> bool {
    syn.is_some_and(|s| s.wrapping_add(1) != seq)
}

/// True when `ip` is an IPv4 packet whose TCP header [`tcp_seq`] reads
/// (its `Some` for IPv4, without the reading).
#[inline]
fn v4_tcp_header(ip: &[u8]) -> bool {
    match ip.first() {
        Some(&v) if v >> 4 == 4 => {
            ip.get(9) == Some(&TCP) && ip.len() >= usize::from(v & 0x0f) * 4 + 14
        }
        _ => false,
    }
}

/// Google QUIC: the version of a client datagram's public header (Q043
/// style: flags with the version bit, an 8-byte connection id, the
/// version), or of an IETF-style long header.
fn gquic_version(p: &[u8]) -> Option<u32> {
    let v = |at: usize| {
        p.get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let first = *p.first()?;
    [v(1), if first & 0x09 == 0x09 { v(9) } else { None }]
        .into_iter()
        .flatten()
        .find(|x| quic::is_gquic(*x))
}

impl Tls {
    /// The flow's first payload decides: a TLS handshake record with a
    /// ClientHello (from either side: a capture may miss the flow's first
    /// packets) or nothing; when it lies past the start of a stream whose
    /// SYN was seen, the start decides when it comes.
    /// `syn`: the last SYN of the payload's side, this packet's if it is
    /// one (the other side's is in `p.tcp_starts`).
    fn start_tcp(
        &self,
        st: &mut State,
        dir: usize,
        seq: u32,
        syn: Option<u32>,
        p: &PacketView<'_>,
    ) {
        let b = p.payload;
        let past_start = past_start(syn, seq);
        if !past_start && !client_hello_start(b) {
            st.done = true;
            return;
        }
        let mut hs = Handshake::new(false, Some(dir), &self.held);
        hs.provisional = past_start;
        for (r, s) in [(0, syn), (1, p.tcp_starts.syn(1 - dir))] {
            if let Some(s) = s {
                hs.tcp[r].syn(s);
            }
        }
        st.hs = Some(hs);
    }

    /// The flow's first datagram decides: at least 1,200 bytes with a
    /// Google QUIC or QUIC long header, or nothing.
    fn start_udp(&self, st: &mut State, p: &PacketView<'_>) {
        st.done = true;
        if usize::from(p.payload_len) < 1200 || p.payload.is_empty() {
            return;
        }
        if let Some(v) = gquic_version(p.payload).filter(|v| *v != quic::Q050) {
            let mut hs = Handshake::new(true, None, &self.held);
            hs.found.quic_version = Some(v);
            match quic::gquic_sni(p.payload) {
                Ok(Some(sni)) => {
                    hs.found.sni = Some(sni);
                    hs.found.status = Some("ok".into());
                }
                Ok(None) => {
                    hs.found.status = Some(
                        format!(
                            "no clear client hello in Google QUIC {}",
                            quic::version_name(v)
                        )
                        .into(),
                    )
                }
                Err(e) => hs.found.status = Some(format!("error: Google QUIC {e}").into()),
            }
            hs.read = [true; 2];
            st.hs = Some(hs);
            return;
        }
        if p.payload[0] & 0xc0 != 0xc0 || quic::long_header(p.payload).is_err() {
            return;
        }
        st.done = false;
        st.hs = Some(Handshake::new(true, None, &self.held));
    }
}

impl Analyzer for Tls {
    type State = State;
    const NAME: &'static str = "tls";
    const ABOUT: &'static str =
        "TLS and QUIC handshake names and fingerprints: SNI, ALPN, version, JA4, JA3, ECH";
    const PAYLOAD: bool = true;
    const ENDS_EARLY: bool = true;
    const IP: bool = true;
    // A packet without payload changes nothing here (TCP: a SYN's sequence
    // number is read from `tcp_starts` at the next payload; UDP: nothing;
    // another protocol: only `done`, which the next packet with payload
    // sets too, and no field).
    const EMPTY: bool = false;
    const STARTS: bool = true;
    const LAZY: bool = true;
    const SPARSE: bool = true;

    /// What `packet` decides from a flow's first packet: TCP, a first
    /// payload that is not a ClientHello's start, at the start of its
    /// side's stream or with no SYN of its side before it (in a header
    /// `tcp_seq` reads); UDP, a first datagram shorter than 1,200 bytes
    /// (or none of it captured); another protocol. Then nothing is
    /// recorded.
    #[inline(always)]
    fn declines(&self, p: &PacketView<'_>) -> Option<[bool; 2]> {
        let off = match p.proto {
            TCP => {
                if p.payload_len == 0 || client_hello_start(p.payload) {
                    return None;
                }
                match p.tcp_starts.syn(usize::from(!p.from_client)) {
                    // `packet`'s first test, without the header read.
                    None if v4_tcp_header(p.ip) => true,
                    side_syn => {
                        let (syn, seq) = placed(side_syn, tcp_seq(p.ip)?);
                        !past_start(syn, seq)
                    }
                }
            }
            UDP => {
                p.payload_len != 0 && (usize::from(p.payload_len) < 1200 || p.payload.is_empty())
            }
            _ => true,
        };
        off.then_some([true; 2])
    }
    const FIELDS: &'static [Field] = &[
        Field::new(
            "sni",
            FieldType::Str,
            "",
            "Server name (SNI) of the client's TLS or QUIC ClientHello, or of a Google QUIC CHLO; with ech=1 the public name only; empty when none was read",
        ),
        Field::new(
            "alpn",
            FieldType::Str,
            "",
            "ALPN protocols the ClientHello offered, comma-separated, in its order; empty when none",
        ),
        Field::new(
            "tls_version",
            FieldType::Str,
            "",
            "TLS version the ServerHello chose (supported_versions, else its version): 1.3, 1.2, 1.1, 1.0, ssl3 or 0x hex; empty without a ServerHello read",
        ),
        Field::new(
            "ja4",
            FieldType::Str,
            "",
            "JA4 client fingerprint (FoxIO, a_b_c; t over TCP, q over QUIC) of the ClientHello",
        ),
        Field::new(
            "ja3",
            FieldType::Str,
            "",
            "JA3 fingerprint (MD5, lower-case hex) of the ClientHello",
        ),
        Field::new(
            "ech",
            FieldType::U8,
            "",
            "1 when the ClientHello offered an Encrypted Client Hello (extension 0xfe0d), 0 when not; empty without a ClientHello read",
        ),
        Field::new(
            "quic_version",
            FieldType::Str,
            "",
            "QUIC version of the client's first long-header packet: 1, 2, draft-NN, Q0NN (Google QUIC) or 0x hex; empty for TLS over TCP",
        ),
        Field::new(
            "tls_status",
            FieldType::Str,
            "",
            "ok (the ClientHello was read) or why not: cut-snap (the capture's snap length cut it), cut-cap, cut-gap (a hole in the stream), cut-memory, incomplete (the flow ended first), unsupported QUIC version V, no QUIC Initial opened, no clear client hello in Google QUIC V, error: WHAT at offset N; empty when the flow is neither TLS nor QUIC",
        ),
    ];

    fn done(&self, st: &State) -> bool {
        st.done
    }

    fn packet(&self, st: &mut State, p: &PacketView<'_>) -> Action {
        if st.done {
            return Action::Continue;
        }
        let d = usize::from(!p.from_client);
        match p.proto {
            TCP => {
                // The last SYN of this side (but this packet: it has
                // payload, so it is no SYN the table kept).
                let side_syn = p.tcp_starts.syn(d);
                if st.hs.is_none()
                    && side_syn.is_none()
                    && p.payload_len != 0
                    && !client_hello_start(p.payload)
                    && v4_tcp_header(p.ip)
                {
                    // The flow's first payload, and no SYN of its side
                    // before it, in a packet whose TCP header `tcp_seq`
                    // reads: what `start_tcp` decides from the bytes alone
                    // (the sequence number would not matter), without
                    // reading the header.
                    st.done = true;
                    return Action::Continue;
                }
                let Some(header) = tcp_seq(p.ip) else {
                    return Action::Continue;
                };
                let (syn, seq) = placed(side_syn, header);
                if p.payload_len == 0 {
                    return Action::Continue;
                }
                if st.hs.is_none() {
                    self.start_tcp(st, d, seq, syn, p);
                }
                let Some(hs) = &mut st.hs else {
                    return Action::Continue;
                };
                let r = usize::from(hs.client != Some(d));
                if let Some(s) = syn {
                    // A SYN of this side that came after the handshake
                    // began, before its first payload (else it changes
                    // nothing: the stream's start is kept).
                    hs.tcp[r].syn(s);
                }
                if let Some((off, data, wire)) =
                    hs.tcp[r].place(seq, p.payload, usize::from(p.payload_len))
                {
                    hs.piece(r, off, data, wire);
                }
                if hs.not_tls {
                    st.hs = None;
                    st.done = true;
                    return Action::Continue;
                }
                if hs.done() {
                    st.done = true;
                }
            }
            UDP => {
                if p.payload_len == 0 {
                    return Action::Continue;
                }
                if st.hs.is_none() {
                    self.start_udp(st, p);
                }
                let Some(hs) = &mut st.hs else {
                    return Action::Continue;
                };
                hs.datagram(d, p.payload, usize::from(p.payload_len));
                if hs.done() {
                    st.done = true;
                }
            }
            _ => st.done = true,
        }
        Action::Continue
    }

    fn finish(&self, st: &mut State) {
        if st.hs.as_ref().is_some_and(|hs| hs.provisional) {
            // The stream's start never came: not known to be TLS.
            st.hs = None;
        }
        if let Some(hs) = &mut st.hs {
            if !hs.read[0] {
                let why = match hs.streams[0].cut() {
                    _ if hs.quic && hs.client.is_none() => "no QUIC Initial opened".into(),
                    Some(c) => format!("cut-{}", c.name()),
                    None if hs.streams[0].has_hole() => "cut-gap".into(),
                    None => "incomplete".into(),
                };
                hs.fail(0, why);
            }
            hs.streams = [Reassembly::default(), Reassembly::default()];
            hs.account();
        }
    }

    fn record(&self, st: &State, out: &mut Cells<'_>) {
        let Some(hs) = &st.hs else {
            // Every field null: left unwritten.
            return;
        };
        let f = &hs.found;
        fn text(out: &mut Cells<'_>, v: Option<&str>) {
            match v {
                Some(s) => out.text(s),
                None => out.null(),
            }
        }
        text(out, f.sni.as_deref());
        text(out, f.alpn.as_deref());
        text(out, f.version.map(tls_hello::version_name).as_deref());
        text(out, f.ja4.as_deref());
        text(out, f.ja3.as_deref());
        match f.ech {
            Some(e) => out.u64(u64::from(e)),
            None => out.null(),
        }
        text(out, f.quic_version.map(quic::version_name).as_deref());
        text(out, f.status.as_deref());
    }
}

#[cfg(test)]
mod tests;
