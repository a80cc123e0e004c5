//! The call tracker against another implementation: every call tshark 4.0
//! found in `../shared/corpus/voip/` (its `voip_reference.json`) is a call
//! record with the same Call-ID, caller, callee, status and codecs, and
//! INVITE, answer and BYE times equal to the microsecond; every RTP stream
//! tshark ties to a call's SDP is one of the call's streams with the same
//! packets and loss and jitter within 0.1 ms. Skips without the corpus.

use std::path::{Path, PathBuf};

use earlybird::testing::Decoded;
use earlybird::voip::record::{CallRecord, EndCause, StreamRecord};
use earlybird::voip::tap::{extract, SipConnections};
use earlybird::voip::tracker::{Tracker, TrackerConfig};
use earlybird::CaptureFile;

fn corpus() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("SKIPPED: corpus not found at {}", p.display());
        None
    }
}

/// Every call and stream the tracker reports for one capture.
fn track(path: &Path) -> (Vec<CallRecord>, Vec<StreamRecord>) {
    let f = CaptureFile::open(path).unwrap();
    let mut r = f.reader();
    let data = r.data();
    let mut refs = Vec::new();
    let mut d = Decoded::default();
    let mut t = Tracker::new(TrackerConfig::default());
    let mut conns = SipConnections::new(1024);
    while r.next_batch(&mut refs, 256) > 0 {
        for p in &refs {
            let frame = &data[p.offset..p.offset + p.caplen as usize];
            let Some(v) = extract(p.ts, p.link, frame, &mut d) else {
                continue;
            };
            if v.tcp.is_some() && !conns.wants(&v) {
                continue;
            }
            t.packet(&v);
        }
    }
    t.finish();
    (
        std::mem::take(&mut t.calls_out),
        std::mem::take(&mut t.streams_out),
    )
}

fn ns(v: &serde_json::Value) -> Option<u64> {
    v.as_f64().map(|s| (s * 1e6).round() as u64 * 1000)
}

fn us(t: u64) -> u64 {
    (t + 500) / 1000 * 1000
}

#[test]
fn calls_match_tshark() {
    let Some(c) = corpus() else { return };
    let reference: serde_json::Value =
        serde_json::from_slice(&std::fs::read(c.join("voip/voip_reference.json")).unwrap())
            .unwrap();
    let (mut checked, mut streams_checked, mut auth_retries) = (0, 0, 0);
    let mut without_call = Vec::new();
    for (file, v) in reference.as_object().unwrap() {
        let calls = v["calls"].as_array().unwrap();
        let sdp_streams = v["rtp_streams_sdp"].as_array().unwrap();
        if calls.is_empty() && sdp_streams.is_empty() {
            continue;
        }
        let path = if file.contains('/') {
            c.join(file)
        } else {
            c.join("voip").join(file)
        };
        let (got, alone) = track(&path);
        for call in calls {
            let id = call["call_id"].as_str().unwrap();
            let g = got
                .iter()
                .find(|g| g.call_id == id)
                .unwrap_or_else(|| panic!("{file}: call {id} not found"));
            assert_eq!(g.caller, call["caller"].as_str().unwrap(), "{file} {id}");
            assert_eq!(g.callee, call["callee"].as_str().unwrap(), "{file} {id}");
            let status = g.status.map(|s| s.to_string()).unwrap_or_default();
            let want = call["final_response"].as_str().unwrap();
            // The reference takes the first final response; a challenge
            // (401/407) answered by an INVITE with credentials in the same
            // Call-ID does not end the call here: its status is the
            // retry's, and the answer is the retry's answer.
            let retried = (want == "401" || want == "407") && status != want;
            if retried {
                assert!(g.status.is_some(), "{file} {id}: no final status");
                auth_retries += 1;
            } else {
                assert_eq!(status, want, "{file} {id}");
            }
            assert_eq!(
                g.transport,
                call["transport"].as_str().unwrap(),
                "{file} {id}"
            );
            for codec in call["codecs"].as_array().unwrap() {
                // tshark names every rtpmap line; the tracker the payload
                // types the m= line offers. This INVITE (in IPv6
                // fragments) maps AMR to 110 and 111 but offers neither.
                if file == "sngrep__ipv6frag.pcap" && codec == "AMR" {
                    continue;
                }
                assert!(
                    g.codecs.iter().any(|x| x == codec.as_str().unwrap()),
                    "{file} {id}: {codec} not in {:?}",
                    g.codecs
                );
            }
            assert_eq!(
                Some(us(g.invite_ns)),
                ns(&call["invite_time"]),
                "{file} {id} invite"
            );
            if !retried {
                assert_eq!(
                    g.answer_ns.map(us),
                    ns(&call["answered_time"]),
                    "{file} {id} answer"
                );
            }
            let bye = matches!(g.end_cause, EndCause::ByeCaller | EndCause::ByeCallee);
            assert_eq!(
                bye.then(|| us(g.end_ns)),
                ns(&call["bye_time"]),
                "{file} {id} bye ({:?})",
                g.end_cause
            );
            checked += 1;
        }
        for s in sdp_streams {
            let ssrc =
                u32::from_str_radix(s["ssrc"].as_str().unwrap().trim_start_matches("0x"), 16)
                    .unwrap();
            let is = |x: &&StreamRecord| {
                x.ssrc == ssrc
                    && x.src == s["src"].as_str().unwrap()
                    && u64::from(x.sport) == s["sport"].as_u64().unwrap()
            };
            let st = match got.iter().flat_map(|c| c.streams.iter()).find(is) {
                Some(st) => st,
                None => {
                    // Announced by other signalling (MGCP's SDP): a stream
                    // without a call.
                    without_call.push(format!("{file} {}", s["ssrc"]));
                    alone
                        .iter()
                        .find(is)
                        .unwrap_or_else(|| panic!("{file}: stream {s} not found"))
                }
            };
            assert_eq!(st.packets, s["packets"].as_u64().unwrap(), "{file} {s}");
            assert_eq!(st.lost, s["lost"].as_i64().unwrap(), "{file} {s}");
            let mean = st.jitter_mean_ms.unwrap();
            assert!(
                (mean - s["mean_jitter_ms"].as_f64().unwrap()).abs() <= 0.1,
                "{file} {s}: {mean}"
            );
            streams_checked += 1;
        }
    }
    eprintln!("{checked} calls checked, {auth_retries} decided after a challenge");
    assert_eq!(checked, 70, "calls in the reference");
    assert_eq!(streams_checked, 7, "streams with SDP in the reference");
    // heplify__rtp_rtcp_sip.pcap sets up one stream with MGCP (port 2427),
    // which the tracker does not read.
    assert_eq!(
        without_call,
        ["heplify__rtp_rtcp_sip.pcap \"0x00002E3D\""],
        "streams with SDP found without their call"
    );
}

#[test]
fn a_volte_call_whose_sip_connections_reuse_their_ports_keeps_its_status() {
    // A phone's VoLTE call inside GTP-U (IPv6 in IPv6): REGISTER, INVITE
    // and the second REGISTER each open a TCP connection on the same four
    // ports (5060 ↔ 5060) and close it with a FIN from each end. Every
    // SIP message must reach the tracker, so the call has the INVITE's
    // final status, its ringing and answer times, and its BYE, each as
    // tshark reads them from the same capture.
    let Some(c) = corpus() else { return };
    let Some(tshark) = crate::common::tool("tshark", "tshark") else {
        return;
    };
    let path = c.join("tunnels/arkime__gtp-iphone.pcap");
    let out = std::process::Command::new(tshark)
        .args(["-r", path.to_str().unwrap(), "-Y", "sip", "-T", "fields"])
        .args([
            "-e",
            "frame.time_epoch",
            "-e",
            "sip.Call-ID",
            "-e",
            "sip.Method",
        ])
        .args(["-e", "sip.Status-Code", "-e", "sip.CSeq.method"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), 17, "tshark's SIP messages: {text}");
    let (got, _) = track(&path);
    assert_eq!(got.len(), 1, "{got:?}");
    let call = &got[0];
    let of_invite = |code: &str| {
        rows.iter()
            .find(|r| r[1] == call.call_id && r[3] == code && r[4] == "INVITE")
            .and_then(|r| ns(&serde_json::json!(r[0].parse::<f64>().unwrap())))
    };
    let invite = rows
        .iter()
        .find(|r| r[1] == call.call_id && r[2] == "INVITE")
        .unwrap();
    assert_eq!(
        Some(us(call.invite_ns)),
        ns(&serde_json::json!(invite[0].parse::<f64>().unwrap()))
    );
    assert_eq!(call.status, Some(200));
    assert_eq!(call.ringing_ns.map(us), of_invite("180"));
    assert_eq!(call.answer_ns.map(us), of_invite("200"));
    assert_eq!(call.end_cause, EndCause::ByeCallee);
}

#[test]
fn a_syn_on_a_four_tuple_in_use_starts_the_direction_afresh() {
    // A connection's close was not captured and it left half a message;
    // a new connection on the same four-tuple (its SYN seen) must be read
    // from its own sequence numbers, not wait behind the old one's.
    use earlybird::voip::tracker::{Tcp, VoipPacket};
    let (a, b) = ([0xfd; 16], [0xfe; 16]);
    let seg = |from_a: bool, seq: u32, flags: u8, ts: u64, payload: &'static [u8]| VoipPacket {
        ts,
        src: if from_a { a } else { b },
        dst: if from_a { b } else { a },
        sport: 5060,
        dport: 5060,
        tcp: Some(Tcp { seq, flags }),
        frag: None,
        sctp: false,
        payload,
    };
    const INVITE: &[u8] = b"INVITE sip:bob@x SIP/2.0\r\nVia: SIP/2.0/TCP a;branch=z9hG4bK1\r\n\
From: <sip:alice@x>;tag=1\r\nTo: <sip:bob@x>\r\nCall-ID: reuse-1\r\nCSeq: 1 INVITE\r\n\
Content-Length: 0\r\n\r\n";
    const OK: &[u8] = b"SIP/2.0 200 OK\r\nVia: SIP/2.0/TCP a;branch=z9hG4bK1\r\n\
From: <sip:alice@x>;tag=1\r\nTo: <sip:bob@x>;tag=2\r\nCall-ID: reuse-1\r\nCSeq: 1 INVITE\r\n\
Content-Length: 0\r\n\r\n";
    let mut t = Tracker::new(TrackerConfig::default());
    let s = 1_000_000_000;
    t.packet(&seg(
        true,
        1000,
        0x18,
        s,
        b"REGISTER sip:x SIP/2.0\r\nVia: SIP/2.0/TCP a\r\n",
    ));
    t.packet(&seg(false, 7000, 0x18, s + 1, b"SIP/2.0 100 Trying\r\n"));
    t.packet(&seg(true, 90_000, 0x02, s + 2, b""));
    t.packet(&seg(false, 123_456, 0x12, s + 3, b""));
    t.packet(&seg(true, 90_001, 0x18, s + 4, INVITE));
    t.packet(&seg(false, 123_457, 0x18, s + 5, OK));
    t.finish();
    let call = t.calls_out.iter().find(|c| c.call_id == "reuse-1");
    assert_eq!(call.and_then(|c| c.status), Some(200), "{:?}", t.calls_out);
}

/// An SCTP DATA chunk (RFC 9260 §3.3.1) of number `tsn` holding the whole
/// message `data` (B and E flags), padded to four bytes; its stream
/// sequence number is `tsn` mod 1000.
fn sctp_data(tsn: u32, data: &[u8]) -> Vec<u8> {
    let mut c = vec![0, 0x03];
    c.extend_from_slice(&((16 + data.len()) as u16).to_be_bytes());
    c.extend_from_slice(&tsn.to_be_bytes());
    // Stream 0, its sequence number (one a message), no protocol id.
    c.extend_from_slice(&[0, 0]);
    c.extend_from_slice(&(tsn as u16 % 1000).to_be_bytes());
    c.extend_from_slice(&[0, 0, 0, 0]);
    c.extend_from_slice(data);
    c.resize(c.len().div_ceil(4) * 4, 0);
    c
}

/// An Ethernet/IPv4/SCTP frame from `from` to the other of 10.0.0.1 and
/// 10.0.0.2 (both on port 5060) carrying `chunks`.
fn sctp_frame(from: u8, chunks: &[u8]) -> Vec<u8> {
    let to = 3 - from;
    let mut f = vec![0, 0, 0, 0, 0, to, 0, 0, 0, 0, 0, from, 0x08, 0x00];
    let total = (20 + 12 + chunks.len()) as u16;
    f.extend_from_slice(&[0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 132, 0, 0]);
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[10, 0, 0, from, 10, 0, 0, to]);
    // Ports 5060, the peer's verification tag (one per direction), no
    // checksum (tshark does not check it unless asked).
    f.extend_from_slice(&[0x13, 0xc4, 0x13, 0xc4, 0, 0, 0, 6 + to, 0, 0, 0, 0]);
    f.extend_from_slice(chunks);
    f
}

#[test]
fn a_call_over_sctp_is_tracked_as_tshark_reads_it() {
    // SIP over SCTP (RFC 4168), as telephony cores carry it: a call whose
    // messages come in DATA chunks, one bundled after a SACK and two
    // (180 and 200) in one packet. The capture is made here; tshark reads
    // the same file.
    let Some(tshark) = crate::common::tool("tshark", "tshark") else {
        return;
    };
    let msg = |start: &str, cseq: &str, to_tag: bool| {
        format!(
            "{start}\r\nVia: SIP/2.0/SCTP 10.0.0.1:5060;branch=z9hG4bK{cseq}\r\n\
             From: <sip:alice@10.0.0.1>;tag=a\r\nTo: <sip:bob@10.0.0.2>{}\r\n\
             Call-ID: sctp-call-1\r\nCSeq: {cseq}\r\nContent-Length: 0\r\n\r\n",
            if to_tag { ";tag=b" } else { "" }
        )
        .into_bytes()
    };
    let sack = [
        3u8, 0, 0, 16, 0, 0, 0x03, 0xe8, 0, 0, 0xff, 0xff, 0, 0, 0, 0,
    ];
    let frames = [
        sctp_frame(
            1,
            &sctp_data(
                1000,
                &msg("INVITE sip:bob@10.0.0.2 SIP/2.0", "1 INVITE", false),
            ),
        ),
        sctp_frame(
            2,
            &[
                &sack[..],
                &sctp_data(2000, &msg("SIP/2.0 100 Trying", "1 INVITE", false)),
            ]
            .concat(),
        ),
        sctp_frame(
            2,
            &[
                sctp_data(2001, &msg("SIP/2.0 180 Ringing", "1 INVITE", true)),
                sctp_data(2002, &msg("SIP/2.0 200 OK", "1 INVITE", true)),
            ]
            .concat(),
        ),
        sctp_frame(
            1,
            &sctp_data(1001, &msg("ACK sip:bob@10.0.0.2 SIP/2.0", "1 ACK", true)),
        ),
        sctp_frame(
            1,
            &sctp_data(1002, &msg("BYE sip:bob@10.0.0.2 SIP/2.0", "2 BYE", true)),
        ),
        sctp_frame(2, &sctp_data(2003, &msg("SIP/2.0 200 OK", "2 BYE", true))),
    ];
    let mut pcap = Vec::new();
    for w in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        pcap.extend_from_slice(&w.to_le_bytes());
    }
    for (i, f) in frames.iter().enumerate() {
        for w in [
            1_700_000_000u32 + i as u32,
            0,
            f.len() as u32,
            f.len() as u32,
        ] {
            pcap.extend_from_slice(&w.to_le_bytes());
        }
        pcap.extend_from_slice(f);
    }
    let dir = std::env::temp_dir().join(format!("eb-sip-sctp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sip_sctp.pcap");
    std::fs::write(&path, &pcap).unwrap();
    let out = std::process::Command::new(tshark)
        .args(["-r", path.to_str().unwrap(), "-Y", "sip", "-T", "fields"])
        .args([
            "-e",
            "frame.time_epoch",
            "-e",
            "sip.Method",
            "-e",
            "sip.Status-Code",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    // tshark's line per frame: the bundled 180 and 200 share one.
    assert_eq!(text.lines().count(), 6, "{text}");
    let (got, _) = track(&path);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(got.len(), 1, "{got:?}");
    let c = &got[0];
    let at = |frame: usize| {
        let t: f64 = text
            .lines()
            .nth(frame)
            .unwrap()
            .split('\t')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        ns(&serde_json::json!(t))
    };
    assert_eq!((c.call_id.as_str(), c.transport), ("sctp-call-1", "SCTP"));
    assert_eq!(c.status, Some(200));
    assert_eq!(Some(us(c.invite_ns)), at(0));
    assert_eq!(c.ringing_ns.map(us), at(2));
    assert_eq!(c.answer_ns.map(us), at(2));
    assert_eq!(c.end_cause, EndCause::ByeCaller);
}
