//! Handshakes model: short flows, each carrying a real application handshake.
//!
//! Contract: writes exactly `opts.packets` records, Ethernet/IPv4, in
//! increasing time order, whole (caplen = frame length unless `snaplen` is
//! set lower), with valid IPv4, TCP and UDP checksums. Flows are written one
//! after the other (no two at once); packets are 2 to 8 µs apart. The last
//! flow is cut short where the packet count ends. Every flow has its own
//! client address (10.0.0.0/10) and port (32,768–60,999), so its own
//! 5-tuple. The kind of
//! each flow is drawn by the seeded generator:
//! - 45 % TLS 1.3 over TCP 443: handshake, the client's ClientHello in one
//!   handshake record (SNI from [`HOSTS`], ALPN `h2,http/1.1`,
//!   supported_versions 1.3 and 1.2, groups, signature algorithms, point
//!   formats, PSK modes, an X25519 key share; a third of the flows also
//!   offer an X25519MLKEM768 share of 1,216 bytes and pad the record to
//!   1,700–1,900 bytes, sent as two segments of at most 1,460 bytes), the
//!   server's ServerHello (TLS 1.3 through supported_versions, X25519),
//!   ChangeCipherSpec and application-data records (random bytes) both
//!   ways, then FIN|ACK both ways and the last ACK. Sequence and
//!   acknowledgement numbers follow the bytes sent.
//! - 25 % QUIC v1 on UDP 443: the client's Initial, protected as RFC 9001
//!   section 5 says (keys from [`quic::initial_keys`]), holding a CRYPTO
//!   frame with a ClientHello (SNI, ALPN `h3`, supported_versions 1.3,
//!   transport parameters, X25519) and PADDING to a datagram of 1,200 to
//!   1,357 bytes; the server's Initial (ACK, CRYPTO with its ServerHello,
//!   PADDING to 1,200 bytes), a Handshake packet of random bytes, then
//!   short-header datagrams of random bytes both ways.
//! - 20 % DNS over UDP 53: an A (75 %) or AAAA query for a host name of
//!   [`HOSTS`] and its response with one answer. An A answer names the
//!   server of a TLS or QUIC flow that starts at least [`MIN_GAP`]
//!   packets later (the name is that flow's SNI), so the labellers'
//!   name-by-address cache names that flow; near the end of the file,
//!   where no such flow is left, an address of the host's own range.
//! - 7 % HTTP/1.1 over TCP 80: handshake, `GET` with Host and User-Agent,
//!   `200 OK` with a small body, close.
//! - 3 % SSH over TCP 22: handshake, the server's then the client's
//!   banner, a few segments of random bytes each way, close.
//!
//! Servers: host name `HOSTS[h]` lives in 198.18.h.0/24 (TLS, QUIC, HTTP),
//! so an address is only ever named by one host name; SSH servers in
//! 198.19.0.0/16; resolvers 198.51.100.53 and 203.0.113.53. The summary is
//! the other models' (connections, unidirectional flows, IP bytes, TCP
//! packets, duration); [`generate_counted`] also gives the flows of each
//! kind. `gbps` and `load` are not used.
//!
//! Memory: a queue of the flows planned in the next [`LOOKAHEAD`] packets
//! (to name a later flow's server in a DNS answer) and three message
//! buffers reused by every flow; nothing is allocated per packet. Failures:
//! the sink's `io::Error`, or an `io::Error` if a message were built larger
//! than a frame (a bug, not a panic).

use std::collections::VecDeque;
use std::io::{self, Write};

use aes::cipher::{BlockEncrypt, KeyInit};
use aes::Aes128;
use aes_gcm::aead::AeadInPlace;
use aes_gcm::{Aes128Gcm, Nonce};
use rand::{Rng, RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::frame::{self, Ipv4, Tcp, ACK, FIN, IP_LEN, L4_OFF, MIN_FRAME, PSH, SYN};
use super::{mix64, GenOptions, GenSummary, START_NS};
use crate::analyze::quic::{self, InitialKeys};
use crate::source::pcap_writer::PcapOut;

/// Host names of the SNIs, DNS questions and HTTP Host headers
/// (RFC 2606 example domains).
pub(crate) const HOSTS: [&str; 20] = [
    "www.example.com",
    "cdn.example.net",
    "api.example.org",
    "mail.example.com",
    "static.example.net",
    "login.example.org",
    "video.example.com",
    "img.example.net",
    "news.example.org",
    "shop.example.com",
    "docs.example.net",
    "chat.example.org",
    "maps.example.com",
    "git.example.net",
    "cloud.example.org",
    "updates.example.com",
    "media.example.net",
    "auth.example.org",
    "telemetry.example.com",
    "files.example.net",
];

/// User-Agent headers of the HTTP requests.
pub(crate) const USER_AGENTS: [&str; 3] = [
    "curl/8.5.0",
    "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    "Wget/1.21.3",
];

/// Paths of the HTTP requests.
const PATHS: [&str; 6] = [
    "/",
    "/index.html",
    "/api/v1/status",
    "/images/logo.png",
    "/news/today",
    "/static/app.js",
];

/// The SSH banners (without their CR LF).
pub(crate) const SSH_SERVER: &str = "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3";
pub(crate) const SSH_CLIENT: &str = "SSH-2.0-OpenSSH_9.6";

/// DNS resolvers: 198.51.100.53 and 203.0.113.53.
const RESOLVERS: [u32; 2] = [0xC633_6435, 0xCB00_7135];
/// Packets from a DNS answer to the start of the flow it names: more than
/// the two batches of 256 packets after which the labellers' cache shows
/// an answer (`analyze/dns_cache.rs`).
pub(crate) const MIN_GAP: u64 = 1024;
/// Packets of flows planned ahead of the one being written.
const LOOKAHEAD: u64 = 4096;
/// Largest TCP payload of a segment.
const MSS: usize = 1460;
/// Largest frame (IP 1500 + Ethernet header).
const MAX_FRAME: usize = 1514;
/// QUIC packet number length used by both sides' Initial packets.
const PN_LEN: usize = 2;
/// Length of every QUIC connection ID written.
const CID_LEN: usize = 8;

/// Direction of a packet: client→server (0) or server→client (1).
const C2S: usize = 0;
const S2C: usize = 1;

/// The kinds of flows, in the order of [`generate_counted`]'s counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum App {
    Tls,
    Quic,
    Dns,
    Http,
    Ssh,
}

impl App {
    /// Every kind, in count order.
    pub(crate) const ALL: [App; 5] = [App::Tls, App::Quic, App::Dns, App::Http, App::Ssh];

    /// Lower-case name (`tls`, `quic`, `dns`, `http`, `ssh`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            App::Tls => "tls",
            App::Quic => "quic",
            App::Dns => "dns",
            App::Http => "http",
            App::Ssh => "ssh",
        }
    }

    /// The kind of a flow from a uniform `u` in [0, 1): the model's mix.
    fn draw(u: f64) -> App {
        if u < 0.45 {
            App::Tls
        } else if u < 0.70 {
            App::Quic
        } else if u < 0.90 {
            App::Dns
        } else if u < 0.97 {
            App::Http
        } else {
            App::Ssh
        }
    }
}

/// Flows written per kind, indexed as [`App::ALL`].
pub(crate) type Counts = [u64; 5];

/// One flow as planned: everything that decides its packet count and its
/// endpoints; its bytes come from its own generator when it is written.
#[derive(Debug, Clone, Copy)]
struct Flow {
    app: App,
    /// Flow number (0, 1, …), the key of its client endpoint and bytes.
    index: u64,
    /// Packet number of its first packet.
    first_packet: u64,
    /// Packets it has when not cut short.
    packets: u64,
    /// Index into [`HOSTS`].
    host: usize,
    client: u32,
    cport: u16,
    server: u32,
    sport: u16,
    /// TLS: also an X25519MLKEM768 key share. DNS: an AAAA question.
    big: bool,
    /// Data rounds after the handshake (one packet each way per round).
    rounds: u32,
    /// DNS: the A answer. TLS/QUIC: a DNS answer names its server.
    answer: u32,
    named: bool,
}

/// Server address of host `h`: 198.18.h.x, x in 1..=254 chosen by `r`.
fn host_address(h: usize, r: u32) -> u32 {
    0xC612_0000 | ((h as u32 & 0xFF) << 8) | (1 + r % 254)
}

/// Client address and port of flow `f`: the address is an affine
/// bijection (`mul` odd) of f mod 2^22 into 10.0.0.0/10, and flows with the
/// same address (f 2^22 apart) differ in the port, for up to 2^22 · 28,232
/// flows. Ports are Linux's ephemeral ones (32,768 to 60,999), clear of
/// the registered ports other dissectors claim.
fn client_endpoint(f: u64, key: u64, mul: u32, add: u32) -> (u32, u16) {
    let low = f & 0x3F_FFFF;
    let addr = 0x0A00_0000 | ((low as u32).wrapping_mul(mul).wrapping_add(add) & 0x3F_FFFF);
    let port = 32_768 + ((mix64(key ^ low) + (f >> 22)) % 28_232) as u16;
    (addr, port)
}

/// Plans flow `f`, starting at packet `first_packet`.
fn plan(rng: &mut Pcg64Mcg, f: u64, first_packet: u64, key: u64, mul: u32, add: u32) -> Flow {
    let app = App::draw(rng.random::<f64>());
    let host = rng.random_range(0..HOSTS.len());
    let (client, cport) = client_endpoint(f, key, mul, add);
    let r = rng.random::<u32>();
    let (server, sport) = match app {
        App::Tls | App::Quic => (host_address(host, r), 443),
        App::Http => (host_address(host, r), 80),
        App::Ssh => (0xC613_0000 | ((r >> 8) & 0xFF00) | (1 + r % 254), 22),
        App::Dns => (RESOLVERS[(r >> 31) as usize], 53),
    };
    let big = match app {
        App::Tls => rng.random::<f64>() < 1.0 / 3.0,
        App::Dns => rng.random::<f64>() >= 0.75,
        _ => false,
    };
    let rounds = match app {
        App::Tls | App::Quic => rng.random_range(1..=3u32),
        App::Ssh => rng.random_range(2..=3u32),
        _ => 0,
    };
    let rounds64 = u64::from(rounds);
    let packets = match app {
        // SYN, SYN|ACK, ACK; ClientHello; server flight; client flight;
        // rounds; FIN|ACK, FIN|ACK, ACK.
        App::Tls => 9 + u64::from(big) + 2 * rounds64,
        // Client Initial, server Initial, Handshake, client short; rounds.
        App::Quic => 4 + 2 * rounds64,
        App::Dns => 2,
        // Handshake, GET, 200 OK, close.
        App::Http => 8,
        // Handshake, two banners, rounds, close.
        App::Ssh => 8 + 2 * rounds64,
    };
    Flow {
        app,
        index: f,
        first_packet,
        packets,
        host,
        client,
        cport,
        server,
        sport,
        big,
        rounds,
        answer: host_address(host, r.rotate_left(16)),
        named: false,
    }
}

/// The two endpoints of a flow.
#[derive(Debug, Clone, Copy)]
struct Ends {
    client: u32,
    server: u32,
    cport: u16,
    sport: u16,
}

/// The pcap stream with the clock and the summary's counters.
struct Wire<W: Write> {
    out: PcapOut<W>,
    /// Packets to write in all.
    n: u64,
    written: u64,
    snaplen: usize,
    /// Nanoseconds since [`START_NS`] of the last packet.
    clock_ns: u64,
    gaps: Pcg64Mcg,
    bytes_ip: u64,
    tcp_packets: u64,
    /// Directions the flow being written has sent in (bit 0 client).
    dirs: u8,
    frame: [u8; MAX_FRAME],
}

impl<W: Write> Wire<W> {
    fn full(&self) -> bool {
        self.written == self.n
    }

    /// Writes one packet of flow `e` in direction `dir`: TCP with
    /// `Some((seq, ack, flags))`, else UDP. Nothing once the count is
    /// reached.
    fn send(
        &mut self,
        e: &Ends,
        dir: usize,
        tcp: Option<(u32, u32, u8)>,
        payload: &[u8],
    ) -> io::Result<()> {
        if self.full() {
            return Ok(());
        }
        let (src, dst, sp, dp) = if dir == C2S {
            (e.client, e.server, e.cport, e.sport)
        } else {
            (e.server, e.client, e.sport, e.cport)
        };
        let (proto, hdr) = if tcp.is_some() { (6u8, 20) } else { (17u8, 8) };
        let l4_len = hdr + payload.len();
        let ip_end = L4_OFF + l4_len;
        if ip_end > MAX_FRAME {
            return Err(io::Error::other(format!(
                "handshakes: a {}-byte payload does not fit in a frame",
                payload.len()
            )));
        }
        frame::write_eth_ipv4(
            &mut self.frame,
            &Ipv4 {
                src,
                dst,
                id: (self.written as u16).wrapping_mul(31),
                total_len: (IP_LEN + l4_len) as u16,
                proto,
            },
        );
        match tcp {
            Some((seq, ack, flags)) => frame::write_tcp(
                &mut self.frame[L4_OFF..],
                &Tcp {
                    sport: sp,
                    dport: dp,
                    seq,
                    ack,
                    flags,
                    timestamps: None,
                },
            ),
            None => frame::write_udp(&mut self.frame[L4_OFF..], sp, dp, l4_len as u16),
        }
        self.frame[L4_OFF + hdr..ip_end].copy_from_slice(payload);
        let frame_len = ip_end.max(MIN_FRAME);
        self.frame[ip_end..frame_len].fill(0);
        let sum = frame::sum16(
            &self.frame[L4_OFF..ip_end],
            frame::pseudo_header_sum(src, dst, proto, l4_len as u16),
        );
        let ck = match (frame::checksum(sum), proto) {
            (0, 17) => 0xFFFF, // UDP sends a computed zero as all ones
            (ck, _) => ck,
        };
        let ck_at = L4_OFF + if proto == 6 { 16 } else { 6 };
        self.frame[ck_at..ck_at + 2].copy_from_slice(&ck.to_be_bytes());
        if self.written > 0 {
            self.clock_ns += self.gaps.random_range(2_000..=8_000u64);
        }
        let caplen = frame_len.min(self.snaplen);
        self.out.record(
            START_NS + self.clock_ns,
            frame_len as u32,
            &self.frame[..caplen],
        )?;
        self.written += 1;
        self.bytes_ip += (IP_LEN + l4_len) as u64;
        self.tcp_packets += u64::from(proto == 6);
        self.dirs |= 1 << dir;
        Ok(())
    }
}

/// A TCP connection's endpoints and next sequence number per direction.
struct TcpConn {
    e: Ends,
    seq: [u32; 2],
}

impl TcpConn {
    /// One segment; the sequence number advances by its payload (and one
    /// for SYN or FIN); ACK segments acknowledge all the other side sent.
    fn segment<W: Write>(
        &mut self,
        w: &mut Wire<W>,
        dir: usize,
        flags: u8,
        payload: &[u8],
    ) -> io::Result<()> {
        let ack = if flags & ACK != 0 {
            self.seq[1 - dir]
        } else {
            0
        };
        w.send(&self.e, dir, Some((self.seq[dir], ack, flags)), payload)?;
        let used = payload.len() as u32 + u32::from(flags & (SYN | FIN) != 0);
        self.seq[dir] = self.seq[dir].wrapping_add(used);
        Ok(())
    }

    /// `data` in segments of at most [`MSS`] bytes (PSH on the last).
    fn data<W: Write>(&mut self, w: &mut Wire<W>, dir: usize, data: &[u8]) -> io::Result<()> {
        let mut chunks = data.chunks(MSS).peekable();
        while let Some(c) = chunks.next() {
            let flags = if chunks.peek().is_none() {
                PSH | ACK
            } else {
                ACK
            };
            self.segment(w, dir, flags, c)?;
        }
        Ok(())
    }

    /// SYN, SYN|ACK, ACK.
    fn open<W: Write>(&mut self, w: &mut Wire<W>) -> io::Result<()> {
        self.segment(w, C2S, SYN, &[])?;
        self.segment(w, S2C, SYN | ACK, &[])?;
        self.segment(w, C2S, ACK, &[])
    }

    /// FIN|ACK both ways, then the client's last ACK.
    fn close<W: Write>(&mut self, w: &mut Wire<W>) -> io::Result<()> {
        self.segment(w, C2S, FIN | ACK, &[])?;
        self.segment(w, S2C, FIN | ACK, &[])?;
        self.segment(w, C2S, ACK, &[])
    }
}

// ---- byte builders -------------------------------------------------------

/// Appends `n` zero bytes for a length field of `n` bytes; returns where.
fn open_len(b: &mut Vec<u8>, n: usize) -> usize {
    let at = b.len();
    b.resize(at + n, 0);
    at
}

/// Writes the length of what follows the `n`-byte field at `at` into it
/// (big-endian; `n` at most 4).
fn close_len(b: &mut [u8], at: usize, n: usize) {
    let len = (b.len() - at - n) as u32;
    b[at..at + n].copy_from_slice(&len.to_be_bytes()[4 - n..]);
}

fn put16(b: &mut Vec<u8>, v: u16) {
    b.extend_from_slice(&v.to_be_bytes());
}

/// Appends `n` pseudo-random bytes.
fn random_bytes(b: &mut Vec<u8>, rng: &mut Pcg64Mcg, n: usize) {
    let at = b.len();
    b.resize(at + n, 0);
    rng.fill_bytes(&mut b[at..]);
}

/// A QUIC variable-length integer (RFC 9000 section 16), 1 to 4 bytes.
fn varint(b: &mut Vec<u8>, v: u32) {
    if v < 1 << 6 {
        b.push(v as u8);
    } else if v < 1 << 14 {
        put16(b, 0x4000 | v as u16);
    } else {
        b.extend_from_slice(&(0x8000_0000 | (v & 0x3FFF_FFFF)).to_be_bytes());
    }
}

/// A TLS extension: type, 2-byte length, `body`.
fn extension(b: &mut Vec<u8>, ty: u16, body: impl FnOnce(&mut Vec<u8>)) {
    put16(b, ty);
    let at = open_len(b, 2);
    body(b);
    close_len(b, at, 2);
}

/// What a ClientHello offers besides its fixed parts.
struct Hello<'a> {
    sni: &'a str,
    alpn: &'a [&'a [u8]],
    /// Legacy session ID (TCP: 32 random bytes; QUIC: empty, RFC 9001
    /// section 8.4).
    session_id: &'a [u8],
    /// Offer X25519MLKEM768 (group 0x11ec, 1,216-byte share) first.
    mlkem: bool,
    /// QUIC transport parameters (extension 0x39); `None` over TCP.
    quic_params: Option<&'a [u8]>,
    /// TCP: a padding extension (RFC 7685) makes the record this long when
    /// it is shorter (0: none). `record_start` is where the record began.
    pad_to: usize,
    record_start: usize,
}

/// Appends a ClientHello handshake message (type 1, 3-byte length, body;
/// RFC 8446 section 4.1.2): TLS 1.3 and (over TCP) 1.2 cipher suites,
/// then the extensions SNI, extended master secret, renegotiation info,
/// groups, point formats, session ticket, ALPN, status request, signature
/// algorithms, key shares, PSK modes, supported versions, QUIC transport
/// parameters, padding.
fn client_hello(b: &mut Vec<u8>, rng: &mut Pcg64Mcg, h: &Hello<'_>) {
    let tcp = h.quic_params.is_none();
    b.push(1);
    let msg = open_len(b, 3);
    put16(b, 0x0303);
    random_bytes(b, rng, 32);
    b.push(h.session_id.len() as u8);
    b.extend_from_slice(h.session_id);
    let suites: &[u16] = if tcp {
        &[
            0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8,
        ]
    } else {
        &[0x1301, 0x1302, 0x1303]
    };
    put16(b, 2 * suites.len() as u16);
    for &s in suites {
        put16(b, s);
    }
    b.extend_from_slice(&[1, 0]); // compression: null
    let exts = open_len(b, 2);
    extension(b, 0, |b| {
        let list = open_len(b, 2);
        b.push(0); // host_name
        put16(b, h.sni.len() as u16);
        b.extend_from_slice(h.sni.as_bytes());
        close_len(b, list, 2);
    });
    if tcp {
        extension(b, 23, |_| {}); // extended_master_secret
        extension(b, 0xff01, |b| b.push(0)); // renegotiation_info
    }
    extension(b, 10, |b| {
        // supported_groups
        let groups: &[u16] = if h.mlkem {
            &[0x11ec, 0x001d, 0x0017, 0x0018]
        } else {
            &[0x001d, 0x0017, 0x0018]
        };
        put16(b, 2 * groups.len() as u16);
        for &g in groups {
            put16(b, g);
        }
    });
    if tcp {
        extension(b, 11, |b| b.extend_from_slice(&[1, 0])); // uncompressed
        extension(b, 35, |_| {}); // session_ticket
    }
    extension(b, 16, |b| {
        // ALPN
        let list = open_len(b, 2);
        for p in h.alpn {
            b.push(p.len() as u8);
            b.extend_from_slice(p);
        }
        close_len(b, list, 2);
    });
    if tcp {
        extension(b, 5, |b| b.extend_from_slice(&[1, 0, 0, 0, 0])); // OCSP
    }
    extension(b, 13, |b| {
        // signature_algorithms
        let algs = [
            0x0403u16, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601,
        ];
        put16(b, 2 * algs.len() as u16);
        for a in algs {
            put16(b, a);
        }
    });
    extension(b, 51, |b| {
        // key_share
        let shares = open_len(b, 2);
        if h.mlkem {
            put16(b, 0x11ec);
            put16(b, 1216);
            random_bytes(b, rng, 1216);
        }
        put16(b, 0x001d);
        put16(b, 32);
        random_bytes(b, rng, 32);
        close_len(b, shares, 2);
    });
    extension(b, 45, |b| b.extend_from_slice(&[1, 1])); // psk_dhe_ke
    extension(b, 43, |b| {
        // supported_versions
        if tcp {
            b.extend_from_slice(&[4, 0x03, 0x04, 0x03, 0x03]);
        } else {
            b.extend_from_slice(&[2, 0x03, 0x04]);
        }
    });
    if let Some(p) = h.quic_params {
        extension(b, 0x39, |b| b.extend_from_slice(p)); // quic_transport_parameters
    }
    let now = b.len() - h.record_start;
    if h.pad_to >= now + 4 {
        extension(b, 21, |b| b.resize(b.len() + h.pad_to - now - 4, 0)); // padding
    }
    close_len(b, exts, 2);
    close_len(b, msg, 3);
}

/// Appends a ServerHello handshake message choosing TLS 1.3
/// (supported_versions 0x0304), TLS_AES_128_GCM_SHA256 and an X25519
/// key share, echoing the client's legacy session ID.
fn server_hello(b: &mut Vec<u8>, rng: &mut Pcg64Mcg, session_id: &[u8]) {
    b.push(2);
    let msg = open_len(b, 3);
    put16(b, 0x0303);
    random_bytes(b, rng, 32);
    b.push(session_id.len() as u8);
    b.extend_from_slice(session_id);
    put16(b, 0x1301);
    b.push(0);
    let exts = open_len(b, 2);
    extension(b, 43, |b| put16(b, 0x0304)); // supported_versions
    extension(b, 51, |b| {
        // key_share
        put16(b, 0x001d);
        put16(b, 32);
        random_bytes(b, rng, 32);
    });
    close_len(b, exts, 2);
    close_len(b, msg, 3);
}

/// Opens a TLS record of content type `ty` (version 0x0303, or 0x0301 for
/// a ClientHello's); returns where its length goes, for [`close_len`].
fn open_record(b: &mut Vec<u8>, ty: u8) -> usize {
    b.push(ty);
    put16(b, if ty == 0x16 { 0x0301 } else { 0x0303 });
    open_len(b, 2)
}

/// A ChangeCipherSpec record (`14 03 03 00 01 01`).
fn change_cipher_spec(b: &mut Vec<u8>) {
    b.extend_from_slice(&[0x14, 0x03, 0x03, 0x00, 0x01, 0x01]);
}

/// An application-data record of `n` random bytes.
fn app_data(b: &mut Vec<u8>, rng: &mut Pcg64Mcg, n: usize) {
    b.extend_from_slice(&[0x17, 0x03, 0x03]);
    put16(b, n as u16);
    random_bytes(b, rng, n);
}

/// The client's QUIC transport parameters (RFC 9000 section 18.2):
/// max_idle_timeout, initial_max_data, initial_max_stream_data_bidi_local,
/// initial_max_streams_bidi and initial_source_connection_id.
fn transport_params(b: &mut Vec<u8>, scid: &[u8]) {
    for (id, v) in [
        (0x01u32, 30_000u32),
        (0x04, 15_728_640),
        (0x05, 6_291_456),
        (0x08, 100),
    ] {
        varint(b, id);
        let at = open_len(b, 1);
        varint(b, v);
        close_len(b, at, 1);
    }
    varint(b, 0x0f);
    varint(b, scid.len() as u32);
    b.extend_from_slice(scid);
}

/// Appends a QUIC v1 Initial packet (RFC 9000 section 17.2.2) carrying
/// `frames`, PADDING so the packet is `len` bytes (when it is shorter),
/// protected with `keys` as RFC 9001 section 5 says: AES-128-GCM over the
/// payload with the header as associated data, then AES-128 header
/// protection of the first byte's low bits and the packet number.
fn initial_packet(
    b: &mut Vec<u8>,
    keys: &InitialKeys,
    dcid: &[u8],
    scid: &[u8],
    pn: u16,
    frames: &[u8],
    len: usize,
) -> io::Result<()> {
    let start = b.len();
    b.push(0xC0 | (PN_LEN as u8 - 1));
    b.extend_from_slice(&quic::V1.to_be_bytes());
    b.push(dcid.len() as u8);
    b.extend_from_slice(dcid);
    b.push(scid.len() as u8);
    b.extend_from_slice(scid);
    b.push(0); // token length
    let header = b.len() - start + 2 + PN_LEN;
    let payload = frames.len().max(len.saturating_sub(header + 16));
    put16(b, 0x4000 | (PN_LEN + payload + 16) as u16);
    let pn_at = b.len();
    put16(b, pn);
    let body = b.len();
    b.extend_from_slice(frames);
    b.resize(body + payload, 0); // PADDING frames
    let mut nonce = keys.iv;
    for (i, x) in u64::from(pn).to_be_bytes().iter().enumerate() {
        nonce[4 + i] ^= x;
    }
    let (head, rest) = b[start..].split_at_mut(body - start);
    let tag = Aes128Gcm::new(&keys.key.into())
        .encrypt_in_place_detached(Nonce::from_slice(&nonce), head, rest)
        .map_err(|_| io::Error::other("handshakes: QUIC Initial payload too long"))?;
    b.extend_from_slice(&tag);
    let mut mask = aes::Block::clone_from_slice(&b[pn_at + 4..pn_at + 20]);
    Aes128::new(&keys.hp.into()).encrypt_block(&mut mask);
    b[start] ^= mask[0] & 0x0f;
    for i in 0..PN_LEN {
        b[pn_at + i] ^= mask[1 + i];
    }
    Ok(())
}

/// A CRYPTO frame at stream offset 0 holding `data`.
fn crypto_frame(b: &mut Vec<u8>, data: &[u8]) {
    b.push(0x06);
    varint(b, 0);
    varint(b, data.len() as u32);
    b.extend_from_slice(data);
}

/// A DNS message (RFC 1035 section 4.1) with one question for `name`
/// of type `qtype`: the query (`answer` None, RD set) or the response
/// (QR, RD, RA) with one record of that type holding `answer`, TTL `ttl`.
fn dns_message(b: &mut Vec<u8>, id: u16, name: &str, qtype: u16, answer: Option<(&[u8], u32)>) {
    put16(b, id);
    put16(b, if answer.is_some() { 0x8180 } else { 0x0100 });
    for count in [1, u16::from(answer.is_some()), 0, 0] {
        put16(b, count);
    }
    for label in name.split('.') {
        b.push(label.len() as u8);
        b.extend_from_slice(label.as_bytes());
    }
    b.push(0);
    put16(b, qtype);
    put16(b, 1); // IN
    if let Some((rdata, ttl)) = answer {
        put16(b, 0xC00C); // the question's name
        put16(b, qtype);
        put16(b, 1);
        b.extend_from_slice(&ttl.to_be_bytes());
        put16(b, rdata.len() as u16);
        b.extend_from_slice(rdata);
    }
}

// ---- flows ---------------------------------------------------------------

/// Reused message buffers.
struct Bufs {
    msg: Vec<u8>,
    frames: Vec<u8>,
    dgram: Vec<u8>,
}

fn tcp_conn(f: &Flow, rng: &mut Pcg64Mcg) -> TcpConn {
    TcpConn {
        e: f.ends(),
        seq: [rng.random(), rng.random()],
    }
}

impl Flow {
    fn ends(&self) -> Ends {
        Ends {
            client: self.client,
            server: self.server,
            cport: self.cport,
            sport: self.sport,
        }
    }
}

/// TLS 1.3 over TCP (see the module contract).
fn tls_flow<W: Write>(
    w: &mut Wire<W>,
    f: &Flow,
    rng: &mut Pcg64Mcg,
    bufs: &mut Bufs,
) -> io::Result<()> {
    let mut c = tcp_conn(f, rng);
    c.open(w)?;
    let mut sid = [0u8; 32];
    rng.fill_bytes(&mut sid);
    let b = &mut bufs.msg;
    b.clear();
    let rec = open_record(b, 0x16);
    let pad_to = if f.big {
        rng.random_range(1700..=1900)
    } else {
        0
    };
    client_hello(
        b,
        rng,
        &Hello {
            sni: HOSTS[f.host],
            alpn: &[b"h2", b"http/1.1"],
            session_id: &sid,
            mlkem: f.big,
            quic_params: None,
            pad_to,
            record_start: 0,
        },
    );
    close_len(b, rec, 2);
    c.data(w, C2S, b)?;
    // ServerHello, ChangeCipherSpec, the encrypted rest of the flight.
    b.clear();
    let rec = open_record(b, 0x16);
    server_hello(b, rng, &sid);
    close_len(b, rec, 2);
    change_cipher_spec(b);
    let n = rng.random_range(700..=1200);
    app_data(b, rng, n);
    c.data(w, S2C, b)?;
    // The client's ChangeCipherSpec, Finished and first request.
    b.clear();
    change_cipher_spec(b);
    app_data(b, rng, 53);
    let n = rng.random_range(60..=400);
    app_data(b, rng, n);
    c.data(w, C2S, b)?;
    for _ in 0..f.rounds {
        b.clear();
        let n = rng.random_range(100..=1400);
        app_data(b, rng, n);
        c.data(w, S2C, b)?;
        b.clear();
        let n = rng.random_range(30..=300);
        app_data(b, rng, n);
        c.data(w, C2S, b)?;
    }
    c.close(w)
}

/// A short-header QUIC packet (RFC 9000 section 17.3.1) to `dcid` with
/// `n` random bytes after it.
fn short_packet(b: &mut Vec<u8>, rng: &mut Pcg64Mcg, dcid: &[u8], n: usize) {
    b.clear();
    b.push(0x40 | (rng.random::<u8>() & 0x3F));
    b.extend_from_slice(dcid);
    random_bytes(b, rng, n);
}

/// QUIC v1 over UDP (see the module contract).
fn quic_flow<W: Write>(
    w: &mut Wire<W>,
    f: &Flow,
    rng: &mut Pcg64Mcg,
    bufs: &mut Bufs,
) -> io::Result<()> {
    let e = f.ends();
    let mut cids = [0u8; 3 * CID_LEN];
    rng.fill_bytes(&mut cids);
    let (dcid, rest) = cids.split_at(CID_LEN);
    let (scid, server_cid) = rest.split_at(CID_LEN);
    let keys = |server| {
        quic::initial_keys(quic::V1, dcid, server)
            .ok_or_else(|| io::Error::other("handshakes: no QUIC v1 Initial keys"))
    };
    // The client's Initial: CRYPTO (ClientHello) and PADDING.
    let Bufs { msg, frames, dgram } = bufs;
    dgram.clear();
    transport_params(dgram, scid);
    msg.clear();
    client_hello(
        msg,
        rng,
        &Hello {
            sni: HOSTS[f.host],
            alpn: &[b"h3"],
            session_id: &[],
            mlkem: false,
            quic_params: Some(dgram),
            pad_to: 0,
            record_start: 0,
        },
    );
    frames.clear();
    crypto_frame(frames, msg);
    let len = [1200, 1250, 1252, 1357][rng.random_range(0..4usize)];
    dgram.clear();
    initial_packet(dgram, &keys(false)?, dcid, scid, 0, frames, len)?;
    w.send(&e, C2S, None, dgram)?;
    // The server's Initial: ACK of packet 0, CRYPTO (ServerHello), PADDING.
    msg.clear();
    server_hello(msg, rng, &[]);
    frames.clear();
    frames.extend_from_slice(&[0x02, 0, 0, 0, 0]);
    crypto_frame(frames, msg);
    dgram.clear();
    initial_packet(dgram, &keys(true)?, scid, server_cid, 0, frames, 1200)?;
    w.send(&e, S2C, None, dgram)?;
    // A Handshake packet of random bytes (its protection is not undone).
    dgram.clear();
    dgram.push(0xE0 | (rng.random::<u8>() & 0x0F));
    dgram.extend_from_slice(&quic::V1.to_be_bytes());
    for cid in [scid, server_cid] {
        dgram.push(CID_LEN as u8);
        dgram.extend_from_slice(cid);
    }
    let n = rng.random_range(400..=1100);
    varint(dgram, n as u32);
    random_bytes(dgram, rng, n);
    w.send(&e, S2C, None, dgram)?;
    let n = rng.random_range(30..=200);
    short_packet(dgram, rng, server_cid, n);
    w.send(&e, C2S, None, dgram)?;
    for _ in 0..f.rounds {
        let n = rng.random_range(100..=1200);
        short_packet(dgram, rng, scid, n);
        w.send(&e, S2C, None, dgram)?;
        let n = rng.random_range(30..=200);
        short_packet(dgram, rng, server_cid, n);
        w.send(&e, C2S, None, dgram)?;
    }
    Ok(())
}

/// DNS query and response (see the module contract).
fn dns_flow<W: Write>(
    w: &mut Wire<W>,
    f: &Flow,
    rng: &mut Pcg64Mcg,
    bufs: &mut Bufs,
) -> io::Result<()> {
    let e = f.ends();
    let id = rng.random::<u16>();
    let name = HOSTS[f.host];
    let b = &mut bufs.msg;
    let qtype = if f.big { 28 } else { 1 };
    b.clear();
    dns_message(b, id, name, qtype, None);
    w.send(&e, C2S, None, b)?;
    let mut v6 = [0u8; 16];
    v6[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    v6[5] = f.host as u8;
    rng.fill_bytes(&mut v6[8..]);
    let v4 = f.answer.to_be_bytes();
    let rdata: &[u8] = if f.big { &v6 } else { &v4 };
    let ttl = rng.random_range(60..=3600);
    b.clear();
    dns_message(b, id, name, qtype, Some((rdata, ttl)));
    w.send(&e, S2C, None, b)
}

/// HTTP/1.1 request and response over TCP (see the module contract).
fn http_flow<W: Write>(
    w: &mut Wire<W>,
    f: &Flow,
    rng: &mut Pcg64Mcg,
    bufs: &mut Bufs,
) -> io::Result<()> {
    let mut c = tcp_conn(f, rng);
    c.open(w)?;
    let b = &mut bufs.msg;
    b.clear();
    let path = PATHS[rng.random_range(0..PATHS.len())];
    let ua = USER_AGENTS[rng.random_range(0..USER_AGENTS.len())];
    write!(
        b,
        "GET {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: {ua}\r\nAccept: */*\r\n\
         Connection: close\r\n\r\n",
        HOSTS[f.host]
    )?;
    c.data(w, C2S, b)?;
    b.clear();
    let body = rng.random_range(100..=600usize);
    write!(
        b,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {body}\r\n\
         Connection: close\r\n\r\n"
    )?;
    for _ in 0..body {
        b.push(b'a' + rng.random_range(0..26u8));
    }
    c.data(w, S2C, b)?;
    c.close(w)
}

/// SSH banners and random bytes over TCP (see the module contract).
fn ssh_flow<W: Write>(
    w: &mut Wire<W>,
    f: &Flow,
    rng: &mut Pcg64Mcg,
    bufs: &mut Bufs,
) -> io::Result<()> {
    let mut c = tcp_conn(f, rng);
    c.open(w)?;
    let b = &mut bufs.msg;
    for (dir, banner) in [(S2C, SSH_SERVER), (C2S, SSH_CLIENT)] {
        b.clear();
        write!(b, "{banner}\r\n")?;
        c.data(w, dir, b)?;
    }
    for _ in 0..f.rounds {
        for dir in [C2S, S2C] {
            b.clear();
            let n = rng.random_range(48..=1400);
            random_bytes(b, rng, n);
            c.data(w, dir, b)?;
        }
    }
    c.close(w)
}

/// Writes the handshakes trace described in the module contract.
pub(super) fn generate<W: Write>(opts: &GenOptions, out: PcapOut<W>) -> io::Result<GenSummary> {
    generate_counted(opts, out).map(|(s, _)| s)
}

/// As [`generate`], with the flows written per kind ([`App::ALL`] order;
/// a flow cut short by the packet count counts when it wrote a packet).
pub(crate) fn generate_counted<W: Write>(
    opts: &GenOptions,
    out: PcapOut<W>,
) -> io::Result<(GenSummary, Counts)> {
    let n = opts.packets;
    let key = mix64(opts.seed ^ 0x4853_484B); // "HSHK"
    let mut plan_rng = Pcg64Mcg::seed_from_u64(key);
    let mul = plan_rng.random::<u32>() | 1;
    let add = plan_rng.random::<u32>();
    let mut w = Wire {
        out,
        n,
        written: 0,
        snaplen: opts.snaplen as usize,
        clock_ns: 0,
        gaps: Pcg64Mcg::seed_from_u64(mix64(key ^ 0x5449_4D45)), // "TIME"
        bytes_ip: 0,
        tcp_packets: 0,
        dirs: 0,
        frame: [0; MAX_FRAME],
    };
    let mut bufs = Bufs {
        msg: Vec::with_capacity(4096),
        frames: Vec::with_capacity(4096),
        dgram: Vec::with_capacity(4096),
    };
    let mut queue: VecDeque<Flow> = VecDeque::new();
    let (mut next_flow, mut planned_to) = (0u64, 0u64);
    let mut counts: Counts = [0; 5];
    let (mut flows, mut unidirectional) = (0u64, 0u64);
    while !w.full() {
        while planned_to < n && planned_to < w.written + LOOKAHEAD {
            let f = plan(&mut plan_rng, next_flow, planned_to, key, mul, add);
            planned_to += f.packets;
            next_flow += 1;
            queue.push_back(f);
        }
        let Some(mut f) = queue.pop_front() else {
            break; // not reached: the planned flows cover n packets
        };
        if f.app == App::Dns && !f.big {
            let later = queue.iter_mut().find(|g| {
                matches!(g.app, App::Tls | App::Quic)
                    && !g.named
                    && g.first_packet >= f.first_packet + MIN_GAP
            });
            if let Some(g) = later {
                g.named = true;
                f.host = g.host;
                f.answer = g.server;
            }
        }
        let mut rng =
            Pcg64Mcg::seed_from_u64(mix64(key ^ f.index.wrapping_mul(0xD6E8_FEB8_6659_FD93)));
        w.dirs = 0;
        match f.app {
            App::Tls => tls_flow(&mut w, &f, &mut rng, &mut bufs)?,
            App::Quic => quic_flow(&mut w, &f, &mut rng, &mut bufs)?,
            App::Dns => dns_flow(&mut w, &f, &mut rng, &mut bufs)?,
            App::Http => http_flow(&mut w, &f, &mut rng, &mut bufs)?,
            App::Ssh => ssh_flow(&mut w, &f, &mut rng, &mut bufs)?,
        }
        if w.dirs != 0 {
            flows += 1;
            unidirectional += u64::from(w.dirs.count_ones());
            counts[f.app as usize] += 1;
        }
    }
    let Wire {
        out,
        written,
        bytes_ip,
        tcp_packets,
        clock_ns,
        ..
    } = w;
    out.finish()?;
    let summary = GenSummary {
        packets: written,
        flows,
        unidirectional_flows: unidirectional,
        bytes_ip,
        tcp_packets,
        duration_ns: clock_ns,
        mean_ip_size: 0.0,
    };
    Ok((summary, counts))
}

#[cfg(test)]
#[path = "handshakes_tests.rs"]
mod tests;
