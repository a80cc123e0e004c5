//! Fuzz target for the payload labellers' readers (`earlybird::analyze`):
//! the bytes as a DNS message (`dns_wire::parse`), and as the payload of
//! the `http`, `ssh` and `dns` analyzers (over UDP and, length-prefixed
//! reading, TCP), once whole and once cut into two segments at a point the
//! first byte picks. No reader may panic; a DNS error's offset lies inside
//! the message; what the analyzers read does not depend on where the bytes
//! were cut into segments; the buffers stay within their bounds.
#![no_main]

use earlybird::analyze::dns::Dns;
use earlybird::analyze::dns_wire::{self, MAX_ANSWERS, MAX_QUESTIONS};
use earlybird::analyze::http::{self, Http};
use earlybird::analyze::ssh::{Banner, Ssh};
use earlybird::analyze::{Analyzer, PacketView, TcpStarts};
use libfuzzer_sys::fuzz_target;

fn view(payload: &[u8], from_client: bool, proto: u8) -> PacketView<'_> {
    PacketView {
        ts: 0,
        from_client,
        index: 1,
        size: 40,
        tcp_flags: 0x18,
        proto,
        payload_len: payload.len() as u16,
        payload,
        ip: &[],
        tcp_starts: &TcpStarts::NONE,
    }
}

/// Runs analyzer `a` over `segments` of one direction (then the other
/// direction's `reply`) and gives its final state.
fn run<A: Analyzer>(a: &A, segments: &[&[u8]], proto: u8, reply: &[u8]) -> A::State {
    let mut st = A::State::default();
    for s in segments.iter().filter(|s| !s.is_empty()) {
        a.packet(&mut st, &view(s, true, proto));
    }
    if !reply.is_empty() {
        a.packet(&mut st, &view(reply, false, proto));
    }
    a.finish(&mut st);
    st
}

fuzz_target!(|data: &[u8]| {
    if data.len() > 65_000 {
        return;
    }
    match dns_wire::parse(data) {
        Ok(m) => {
            assert!(m.questions.len() <= MAX_QUESTIONS);
            assert!(m.answers.len() <= MAX_ANSWERS);
        }
        Err(e) => assert!(e.offset <= data.len(), "{e}"),
    }
    let cut = usize::from(data.first().copied().unwrap_or(0)) % (data.len() + 1);
    let (a, b) = data.split_at(cut);

    // HTTP: the same header block whole or in two segments.
    let whole = run(&Http, &[data], 6, b"");
    let split = run(&Http, &[a, b], 6, b"");
    assert_eq!(whole.head(), split.head());
    let _ = http::parse_head(data);
    let _ = http::head_end(data);

    // SSH: both sides, whole or split.
    let whole = run(&Ssh, &[data], 6, data);
    let split = run(&Ssh, &[a, b], 6, data);
    assert_eq!(whole.banners(), split.banners());
    let mut banner = Banner::new(true);
    for chunk in data.chunks(7) {
        banner.feed(chunk);
    }
    let mut once = Banner::new(true);
    once.feed(data);
    assert_eq!(banner.banner(), once.banner());

    // DNS: over UDP, and over TCP with its length prefix, whole or split.
    let _ = run(&Dns::default(), &[data], 17, data);
    let mut framed = (data.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(data);
    let (fa, fb) = framed.split_at(cut.min(framed.len()));
    let whole = run(&Dns::default(), &[&framed], 6, &framed);
    let split = run(&Dns::default(), &[fa, fb], 6, &framed);
    assert_eq!(whole.seen(), split.seen());
});
