//! SIP over TCP whose INVITE spans several segments (issue 38, defects
//! seen on captures earlybird had never read): captures made here, read by
//! `earlybird voip` and by the call stage of `earlybird flows`, and by
//! tshark as the independent decoder.
//!
//! - An INVITE with a 16 KB SDP body (many ICE candidates, as WebRTC
//!   gateways send) in twelve segments of 1,400 bytes: one call, answered,
//!   with the codec of the media line at the very end of the body.
//! - An INVITE split at the border of its header and body, and one split
//!   inside the blank line that ends its header (`\r\n` | `\r\n`): one
//!   call each, with its codecs.

use std::path::Path;
use std::process::Command;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_earlybird")
}

/// Client 10.0.0.1:40000, server 10.0.0.2:5060.
const CLIENT: [u8; 4] = [10, 0, 0, 1];
const SERVER: [u8; 4] = [10, 0, 0, 2];

/// An Ethernet/IPv4/TCP frame (no options; checksums left 0, which
/// tshark does not check unless asked).
fn frame(from_client: bool, seq: u32, ack: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let (src, dst, sport, dport) = if from_client {
        (CLIENT, SERVER, 40000u16, 5060u16)
    } else {
        (SERVER, CLIENT, 5060, 40000)
    };
    let mut f = vec![0, 0, 0, 0, 0, dst[3], 0, 0, 0, 0, 0, src[3], 0x08, 0x00];
    let total = (20 + 20 + payload.len()) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x40, 0, 64, 6, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(&ack.to_be_bytes());
    f.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    f.extend_from_slice(payload);
    f
}

/// A SIP message of the call `call_id` with `body` (SDP) and its
/// Content-Length.
fn sip(start: &str, cseq: &str, call_id: &str, to_tag: bool, body: &str) -> Vec<u8> {
    let typ = if body.is_empty() {
        String::new()
    } else {
        "Content-Type: application/sdp\r\n".to_string()
    };
    format!(
        "{start}\r\nVia: SIP/2.0/TCP 10.0.0.1:40000;branch=z9hG4bK-{cseq_n}\r\n\
         From: \"Alice\" <sip:alice@10.0.0.1>;tag=a1\r\nTo: <sip:bob@10.0.0.2>{tag}\r\n\
         Call-ID: {call_id}\r\nCSeq: {cseq}\r\nContact: <sip:alice@10.0.0.1:40000;transport=tcp>\r\n\
         Max-Forwards: 70\r\n{typ}Content-Length: {len}\r\n\r\n{body}",
        cseq_n = cseq.split(' ').next().unwrap(),
        tag = if to_tag { ";tag=b1" } else { "" },
        len = body.len(),
    )
    .into_bytes()
}

/// The offer: PCMA on port 40000, `candidates` ICE candidate lines, then a
/// second audio line (G722 on 40002) at the very end of the body.
fn offer(candidates: usize) -> String {
    let mut b = String::from(
        "v=0\r\no=alice 1 1 IN IP4 10.0.0.1\r\ns=-\r\nc=IN IP4 10.0.0.1\r\nt=0 0\r\n\
         m=audio 40000 RTP/AVP 8\r\na=rtpmap:8 PCMA/8000\r\n",
    );
    for i in 0..candidates {
        b.push_str(&format!(
            "a=candidate:{i} 1 udp {} 10.0.{}.{} {} typ host generation 0 network-id 1\r\n",
            2_130_706_431 - i,
            i / 250,
            i % 250 + 1,
            40_000 + 2 * i
        ));
    }
    b.push_str("m=audio 40002 RTP/AVP 9\r\na=rtpmap:9 G722/8000\r\n");
    b
}

const ANSWER: &str = "v=0\r\no=bob 1 1 IN IP4 10.0.0.2\r\ns=-\r\nc=IN IP4 10.0.0.2\r\n\
t=0 0\r\nm=audio 50000 RTP/AVP 8\r\na=rtpmap:8 PCMA/8000\r\nm=audio 50002 RTP/AVP 9\r\n\
a=rtpmap:9 G722/8000\r\n";

/// A pcap of a whole call over one TCP connection whose INVITE is sent
/// in the pieces `cut` gives (the byte offsets where a segment ends), the
/// server acknowledging each.
fn call_capture(path: &Path, call_id: &str, invite: &[u8], cut: &[usize]) {
    let (c0, s0) = (1_000u32, 500_000u32);
    let (mut cs, mut ss) = (c0 + 1, s0 + 1);
    let mut frames = vec![
        frame(true, c0, 0, 0x02, b""),
        frame(false, s0, cs, 0x12, b""),
        frame(true, cs, ss, 0x10, b""),
    ];
    let mut at = 0;
    for &end in cut.iter().chain(std::iter::once(&invite.len())) {
        let piece = &invite[at..end];
        frames.push(frame(true, cs, ss, 0x18, piece));
        cs += piece.len() as u32;
        frames.push(frame(false, ss, cs, 0x10, b""));
        at = end;
    }
    let server = |m: Vec<u8>, frames: &mut Vec<Vec<u8>>, ss: &mut u32, cs: u32| {
        frames.push(frame(false, *ss, cs, 0x18, &m));
        *ss += m.len() as u32;
    };
    let inv = "1 INVITE";
    server(
        sip("SIP/2.0 100 Trying", inv, call_id, false, ""),
        &mut frames,
        &mut ss,
        cs,
    );
    server(
        sip("SIP/2.0 180 Ringing", inv, call_id, true, ""),
        &mut frames,
        &mut ss,
        cs,
    );
    server(
        sip("SIP/2.0 200 OK", inv, call_id, true, ANSWER),
        &mut frames,
        &mut ss,
        cs,
    );
    for m in [
        sip("ACK sip:bob@10.0.0.2 SIP/2.0", "1 ACK", call_id, true, ""),
        sip("BYE sip:bob@10.0.0.2 SIP/2.0", "2 BYE", call_id, true, ""),
    ] {
        frames.push(frame(true, cs, ss, 0x18, &m));
        cs += m.len() as u32;
    }
    server(
        sip("SIP/2.0 200 OK", "2 BYE", call_id, true, ""),
        &mut frames,
        &mut ss,
        cs,
    );
    frames.push(frame(true, cs, ss, 0x11, b""));
    frames.push(frame(false, ss, cs + 1, 0x11, b""));
    frames.push(frame(true, cs + 1, ss + 1, 0x10, b""));
    let mut pcap = Vec::new();
    for w in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        pcap.extend_from_slice(&w.to_le_bytes());
    }
    for (i, f) in frames.iter().enumerate() {
        // One frame every 10 ms.
        let us = i as u32 * 10_000;
        for w in [
            1_700_000_000 + us / 1_000_000,
            us % 1_000_000,
            f.len() as u32,
            f.len() as u32,
        ] {
            pcap.extend_from_slice(&w.to_le_bytes());
        }
        pcap.extend_from_slice(f);
    }
    std::fs::write(path, pcap).unwrap();
}

/// The call records (JSON lines) of `pcap`: by `earlybird voip`, and by
/// the call stage of `earlybird flows`.
fn calls(pcap: &Path) -> [Vec<serde_json::Value>; 2] {
    let dir = pcap.parent().unwrap();
    let (a, b) = (dir.join("voip.jsonl"), dir.join("flows.jsonl"));
    let voip = Command::new(bin())
        .args(["voip", "-q", "-o"])
        .arg(&a)
        .arg(pcap)
        .output()
        .unwrap();
    assert!(voip.status.success(), "{voip:?}");
    let flows = Command::new(bin())
        .args(["flows", "--no-model", "-q", "-f", "null", "--calls-out"])
        .arg(&b)
        .arg(pcap)
        .output()
        .unwrap();
    assert!(flows.status.success(), "{flows:?}");
    [a, b].map(|p| {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    })
}

/// One call `call_id` in both runs: answered (200), transport TCP, ended
/// by the caller's BYE, with PCMA and G722 among its codecs.
fn one_answered_call(pcap: &Path, call_id: &str) {
    for (run, got) in ["voip", "flows --calls-out"].iter().zip(calls(pcap)) {
        assert_eq!(got.len(), 1, "{run}: {got:?}");
        let c = &got[0];
        assert_eq!(c["call_id"], call_id, "{run}: {c}");
        assert_eq!(c["transport"], "TCP", "{run}: {c}");
        assert_eq!(c["status"], 200, "{run}: {c}");
        assert_eq!(c["end_cause"], "bye-caller", "{run}: {c}");
        let codecs = c["codecs"].to_string();
        assert!(
            codecs.contains("PCMA") && codecs.contains("G722"),
            "{run}: codecs {codecs}"
        );
    }
}

/// What tshark reads of the INVITE: its Call-ID and the media ports of
/// its SDP (as one field each), when it reassembled the message.
fn tshark_invite(pcap: &Path) -> Option<String> {
    let tshark = crate::lib_common::tool("tshark", "tshark")?;
    let out = Command::new(tshark)
        .arg("-r")
        .arg(pcap)
        .args(["-Y", "sip.Method == \"INVITE\"", "-T", "fields"])
        .args(["-e", "sip.Call-ID", "-e", "sdp.media.port"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    Some(String::from_utf8(out.stdout).unwrap())
}

#[test]
fn an_invite_with_a_16_kb_body_in_twelve_segments_gives_its_call() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("big_invite.pcap");
    let body = offer(190);
    assert!(body.len() >= 16_000, "{} bytes of SDP", body.len());
    let invite = sip(
        "INVITE sip:bob@10.0.0.2 SIP/2.0",
        "1 INVITE",
        "big-1",
        false,
        &body,
    );
    // Segments of 1,400 bytes, as over a path of MTU 1,440.
    let cut: Vec<usize> = (1..)
        .map(|i| i * 1400)
        .take_while(|&e| e < invite.len())
        .collect();
    assert!(cut.len() >= 11, "{} segments", cut.len() + 1);
    call_capture(&pcap, "big-1", &invite, &cut);
    if let Some(seen) = tshark_invite(&pcap) {
        // One INVITE, reassembled: both media ports of its SDP.
        assert_eq!(seen.trim_end(), "big-1\t40000,40002", "tshark: {seen}");
    }
    one_answered_call(&pcap, "big-1");
}

#[test]
fn an_invite_split_at_its_header_body_border_gives_its_call() {
    let body = offer(2);
    let invite = sip(
        "INVITE sip:bob@10.0.0.2 SIP/2.0",
        "1 INVITE",
        "border-1",
        false,
        &body,
    );
    let head = invite.len() - body.len();
    assert!(invite[..head].ends_with(b"\r\n\r\n"));
    // At the border, and inside the blank line that ends the header.
    for (name, cut) in [("border", head), ("blank_line", head - 2)] {
        let dir = tempfile::tempdir().unwrap();
        let pcap = dir.path().join(format!("{name}.pcap"));
        call_capture(&pcap, "border-1", &invite, &[cut]);
        if let Some(seen) = tshark_invite(&pcap) {
            assert_eq!(
                seen.trim_end(),
                "border-1\t40000,40002",
                "{name}: tshark: {seen}"
            );
        }
        one_answered_call(&pcap, "border-1");
    }
}
