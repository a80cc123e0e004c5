//! The SIP and SDP parsers against another implementation: every call that
//! tshark 4.0 found over UDP in `../shared/corpus/voip/` (its
//! `voip_reference.json`) is found in the UDP payloads the decoder gives,
//! with the same Call-ID, callee, caller, first final response to the
//! INVITE and SDP codecs.
//! Calls over TCP need stream reassembly (a later stage) and are not
//! checked here; of the one INVITE sent in IPv6 fragments only the first
//! fragment's codecs are expected. Skips without the corpus.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use earlybird::testing::{decode, Decoded};
use earlybird::voip::sdp::{static_codec, Sdp};
use earlybird::voip::sip::{self, Framing};
use earlybird::CaptureFile;

/// Captures whose INVITE comes in IP fragments: the datagram parser sees
/// the first fragment (headers and the start of the SDP).
const FRAGMENTED: [&str; 1] = ["sngrep__ipv6frag.pcap"];

fn corpus() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("SKIPPED: corpus not found at {}", p.display());
        None
    }
}

/// What the SIP messages of one Call-ID say.
#[derive(Default, Debug)]
struct Seen {
    invite: bool,
    caller: String,
    callee: String,
    final_code: Option<u16>,
    codecs: BTreeSet<String>,
}

/// tshark's reference for the voip corpus.
fn reference(corpus: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(corpus.join("voip/voip_reference.json")).unwrap())
        .unwrap()
}

/// A capture the reference names (relative to the corpus when it has a
/// folder, else in voip/).
fn capture(corpus: &std::path::Path, file: &str) -> PathBuf {
    if file.contains('/') {
        corpus.join(file)
    } else {
        corpus.join("voip").join(file)
    }
}

/// Checks what the messages said of reference call `call` (Call-ID `id`)
/// against it, and returns what was seen and the reference's codecs.
fn check_call<'a>(
    file: &str,
    id: &str,
    call: &serde_json::Value,
    seen: &'a BTreeMap<String, Seen>,
) -> (&'a Seen, BTreeSet<String>) {
    let s = seen
        .get(id)
        .unwrap_or_else(|| panic!("{file}: call {id} not found"));
    assert!(s.invite, "{file} {id}: no INVITE");
    assert_eq!(s.callee, call["callee"].as_str().unwrap(), "{file} {id}");
    assert_eq!(s.caller, call["caller"].as_str().unwrap(), "{file} {id}");
    let want = call["final_response"].as_str().unwrap();
    let got = s.final_code.map(|c| c.to_string()).unwrap_or_default();
    assert_eq!(got, want, "{file} {id}: final response");
    let codecs = call["codecs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    (s, codecs)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Adds what message `m` says to its call.
fn note(calls: &mut BTreeMap<String, Seen>, m: &sip::Message<'_>) {
    let Some(id) = m.call_id() else { return };
    let seen = calls.entry(text(id)).or_default();
    if m.method() == Some(&b"INVITE"[..]) {
        if m.status().is_none() && !seen.invite {
            seen.invite = true;
            seen.caller = m.from().map(|a| text(a.user())).unwrap_or_default();
            seen.callee = m.to().map(|a| text(a.user())).unwrap_or_default();
        }
        // The reference's definition: the first final response.
        if let Some(code) = m.status().filter(|&c| c >= 200) {
            seen.final_code.get_or_insert(code);
        }
    }
    if m.has_sdp() && seen.invite {
        for c in Sdp::parse(m.body).codec_names() {
            seen.codecs.insert(c.to_string());
        }
    }
}

/// Every UDP datagram of a capture that parses as SIP, by Call-ID.
fn sip_calls(path: &std::path::Path) -> (BTreeMap<String, Seen>, usize) {
    let f = CaptureFile::open(path).unwrap();
    let mut r = f.reader();
    let data = r.data();
    let mut refs = Vec::new();
    let mut calls: BTreeMap<String, Seen> = BTreeMap::new();
    let mut parsed = 0;
    let mut d = Decoded::default();
    while r.next_batch(&mut refs, 256) > 0 {
        for p in &refs {
            let frame = &data[p.offset..p.offset + p.caplen as usize];
            if decode(p.link, frame, &mut d).is_err() || d.proto != 17 {
                continue;
            }
            let start = d.payload_offset as usize;
            let end = (start + d.payload_len as usize).min(frame.len());
            let Some(payload) = frame.get(start..end) else {
                continue;
            };
            if !sip::looks_like_sip(payload) {
                continue;
            }
            let Ok(m) = sip::parse(payload, Framing::Datagram) else {
                continue;
            };
            parsed += 1;
            note(&mut calls, &m);
        }
    }
    (calls, parsed)
}

#[test]
fn udp_calls_match_tshark() {
    let Some(c) = corpus() else { return };
    let reference = reference(&c);
    let mut checked = 0;
    for (file, v) in reference.as_object().unwrap() {
        let calls: Vec<&serde_json::Value> = v["calls"]
            .as_array()
            .map(|a| a.iter().filter(|c| c["transport"] == "UDP").collect())
            .unwrap_or_default();
        if calls.is_empty() {
            continue;
        }
        let path = capture(&c, file);
        let (seen, parsed) = sip_calls(&path);
        assert!(parsed > 0, "{file}: no SIP message parsed");
        for call in calls {
            let id = call["call_id"].as_str().unwrap();
            let (s, codecs) = check_call(file, id, call, &seen);
            if FRAGMENTED.contains(&file.as_str()) {
                // Only the first fragment's part of the SDP is seen until
                // the reassembly stage exists.
                assert!(
                    !s.codecs.is_empty() && s.codecs.is_subset(&codecs),
                    "{file} {id}"
                );
                checked += 1;
                continue;
            }
            // tshark lists the rtpmap names; the parser also names static
            // payload types that have no rtpmap line (RFC 3551).
            assert!(
                codecs.is_subset(&s.codecs),
                "{file} {id}: {codecs:?} not in {:?}",
                s.codecs
            );
            for extra in s.codecs.difference(&codecs) {
                assert!(
                    (0..35).any(|pt| static_codec(pt).is_some_and(|(n, _)| n == extra)),
                    "{file} {id}: codec {extra} is not in the reference"
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 31, "calls over UDP in the reference");
}

/// A UDP packet of a capture: arrival (ns), endpoints, payload.
struct Datagram {
    ts: u64,
    src: String,
    sport: u16,
    dst: String,
    dport: u16,
    payload: Vec<u8>,
}

fn datagrams(path: &std::path::Path) -> Vec<Datagram> {
    let f = CaptureFile::open(path).unwrap();
    let mut r = f.reader();
    let data = r.data();
    let mut refs = Vec::new();
    let mut d = Decoded::default();
    let mut out = Vec::new();
    while r.next_batch(&mut refs, 256) > 0 {
        for p in &refs {
            let frame = &data[p.offset..p.offset + p.caplen as usize];
            if decode(p.link, frame, &mut d).is_err() || d.proto != 17 {
                continue;
            }
            let start = d.payload_offset as usize;
            let end = (start + d.payload_len as usize).min(frame.len());
            let Some(payload) = frame.get(start..end) else {
                continue;
            };
            out.push(Datagram {
                ts: p.ts,
                src: earlybird::testing::fmt_addr(&d.src),
                sport: d.sport,
                dst: earlybird::testing::fmt_addr(&d.dst),
                dport: d.dport,
                payload: payload.to_vec(),
            });
        }
    }
    out
}

#[test]
fn rtp_streams_match_tshark() {
    use earlybird::analyze::rtp::Rtp;
    use earlybird::analyze::rtp_stats::StreamStats;
    let Some(c) = corpus() else { return };
    let reference = reference(&c);
    let mut checked = 0;
    let mut report = String::new();
    for (file, v) in reference.as_object().unwrap() {
        let Some(streams) = v["rtp_streams_heuristic"].as_array() else {
            continue;
        };
        if streams.is_empty() {
            continue;
        }
        let path = capture(&c, file);
        let all = datagrams(&path);
        for s in streams {
            let ssrc =
                u32::from_str_radix(s["ssrc"].as_str().unwrap().trim_start_matches("0x"), 16)
                    .unwrap();
            let mut stats: Option<StreamStats> = None;
            for d in all.iter().filter(|d| {
                d.src == s["src"].as_str().unwrap()
                    && d.dst == s["dst"].as_str().unwrap()
                    && d.sport as u64 == s["sport"].as_u64().unwrap()
                    && d.dport as u64 == s["dport"].as_u64().unwrap()
            }) {
                let Ok(r) = Rtp::parse(&d.payload) else {
                    continue;
                };
                if r.ssrc != ssrc {
                    continue;
                }
                // The static payload types' rates; a dynamic type has no
                // SDP here (tshark's heuristic streams): rate unknown.
                let st = stats.get_or_insert_with(|| {
                    StreamStats::new(static_codec(r.pt).map_or(0, |(_, clock)| clock))
                });
                st.packet(d.ts, r.seq, r.ts, r.payload_len);
            }
            let st = stats.unwrap_or_else(|| panic!("{file}: stream {s} not found"));
            let want = |k: &str| s[k].as_f64().unwrap();
            report.push_str(&format!(
                "{file} {:#x}: packets {} / {}, lost {} / {}, mean jitter {:.3} / {:.3}, max {:.3} / {:.3}\n",
                ssrc,
                st.packets,
                want("packets"),
                st.lost(),
                want("lost"),
                st.mean_jitter_ms().unwrap_or(f64::NAN),
                want("mean_jitter_ms"),
                st.max_jitter_ms().unwrap_or(f64::NAN),
                want("max_jitter_ms")
            ));
            assert_eq!(st.packets as f64, want("packets"), "{file} {s}");
            assert_eq!(st.lost() as f64, want("lost"), "{file} {s}");
            match (st.mean_jitter_ms(), st.max_jitter_ms()) {
                (Some(mean), Some(max)) => {
                    assert!((mean - want("mean_jitter_ms")).abs() <= 0.1, "{report}");
                    assert!((max - want("max_jitter_ms")).abs() <= 0.1, "{report}");
                }
                // Without the rate tshark reports 0 and we report none.
                _ => assert_eq!(
                    (want("mean_jitter_ms"), want("max_jitter_ms")),
                    (0.0, 0.0),
                    "{report}"
                ),
            }
            checked += 1;
        }
    }
    eprintln!("{report}");
    assert_eq!(checked, 27, "streams in the reference");
}

/// The TCP segments of a capture, by direction (src, sport, dst, dport):
/// (sequence number, SYN, payload) in capture order. The TCP header is
/// found after the innermost IP header the decoder reports.
/// A direction (src, sport, dst, dport) and its segments (sequence
/// number, SYN, payload).
type Segments = BTreeMap<(String, u16, String, u16), Vec<(u32, bool, Vec<u8>)>>;

fn tcp_segments(path: &std::path::Path) -> Segments {
    let f = CaptureFile::open(path).unwrap();
    let mut r = f.reader();
    let data = r.data();
    let mut refs = Vec::new();
    let mut d = Decoded::default();
    let mut out: BTreeMap<_, Vec<_>> = BTreeMap::new();
    while r.next_batch(&mut refs, 256) > 0 {
        for p in &refs {
            let frame = &data[p.offset..p.offset + p.caplen as usize];
            if decode(p.link, frame, &mut d).is_err() || d.proto != 6 {
                continue;
            }
            let ip = d.ip_offset as usize;
            let tcp = match d.ip_version {
                4 => ip + 4 * (frame[ip] & 0x0f) as usize,
                _ => ip + 40,
            };
            let Some(h) = frame.get(tcp..tcp + 14) else {
                continue;
            };
            if u16::from_be_bytes([h[0], h[1]]) != d.sport {
                continue;
            }
            let seq = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
            let start = d.payload_offset as usize;
            let end = (start + d.payload_len as usize).min(frame.len());
            let payload = frame.get(start..end).unwrap_or(&[]).to_vec();
            let key = (
                earlybird::testing::fmt_addr(&d.src),
                d.sport,
                earlybird::testing::fmt_addr(&d.dst),
                d.dport,
            );
            out.entry(key)
                .or_default()
                .push((seq, d.tcp_flags & 0x02 != 0, payload));
        }
    }
    out
}

#[test]
fn tcp_calls_match_tshark_after_reassembly() {
    use earlybird::voip::stream::Reassembly;
    let Some(c) = corpus() else { return };
    let reference = reference(&c);
    let mut checked = 0;
    for (file, v) in reference.as_object().unwrap() {
        let calls: Vec<&serde_json::Value> = v["calls"]
            .as_array()
            .map(|a| a.iter().filter(|c| c["transport"] == "TCP").collect())
            .unwrap_or_default();
        if calls.is_empty() {
            continue;
        }
        let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
        for (_, segments) in tcp_segments(&capture(&c, file)) {
            let mut r = Reassembly::new(1 << 20);
            for (seq, syn, payload) in segments {
                r.segment(seq, syn, &payload);
                // Read every whole message the stream holds.
                while let Ok(m) = sip::parse(r.data(), Framing::Stream) {
                    note(&mut seen, &m);
                    r.consume(m.len);
                }
            }
        }
        for call in calls {
            let id = call["call_id"].as_str().unwrap();
            let (s, codecs) = check_call(file, id, call, &seen);
            assert!(
                codecs.is_subset(&s.codecs),
                "{file} {id}: {codecs:?} not in {:?}",
                s.codecs
            );
            checked += 1;
        }
    }
    eprintln!("{checked} calls over TCP checked");
    assert_eq!(checked, 39, "calls over TCP in the reference");
}
