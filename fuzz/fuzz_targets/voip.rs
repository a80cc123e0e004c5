//! Fuzz target for the VoIP wire parsers (`earlybird::voip`): the bytes as
//! a SIP datagram and as a SIP stream (messages read one after another
//! while they parse), as an SDP body, as RTP, as compound RTCP and as an
//! RFC 4733 event; and as TCP segments (3-byte headers: sequence offset
//! and length) put back in order by `voip::stream::Reassembly`. No parser
//! may panic; a parsed SIP message must lie inside the input with its
//! body at its end, an RTP payload inside the datagram, and a stream
//! within its bounds.
#![no_main]

use earlybird::analyze::rtp::{self, DtmfEvent, Rtp};
use earlybird::voip::sdp::Sdp;
use earlybird::voip::sip::{self, Framing};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = sip::looks_like_sip(data);
    if let Ok(m) = sip::parse(data, Framing::Datagram) {
        assert!(m.len <= data.len());
        let _ = (m.call_id(), m.from(), m.to(), m.cseq(), m.user_agent());
        if m.has_sdp() {
            let _ = Sdp::parse(m.body).codec_names();
        }
    }
    let mut rest = data;
    while let Ok(m) = sip::parse(rest, Framing::Stream) {
        assert!(m.len > 0 && m.len <= rest.len());
        assert_eq!(
            m.body.len(),
            m.len - (m.body.as_ptr() as usize - rest.as_ptr() as usize)
        );
        rest = &rest[m.len..];
    }
    let sdp = Sdp::parse(data);
    assert!(sdp.media.len() <= earlybird::voip::sdp::MAX_MEDIA);
    if let Ok(r) = Rtp::parse(data) {
        assert!(r.payload_offset + r.payload_len <= data.len());
    }
    let _ = rtp::looks_like_rtp(data);
    for b in rtp::rtcp_reports(data).take(1000) {
        let _ = b;
    }
    let _ = DtmfEvent::parse(data).map(|e| e.key());
    let mut r = earlybird::voip::stream::Reassembly::new(512);
    let mut rest = data;
    while let Some((h, tail)) = rest.split_first_chunk::<3>() {
        let len = (h[2] as usize).min(tail.len());
        let seq = u32::from(u16::from_be_bytes([h[0], h[1]])).wrapping_sub(1000);
        r.segment(seq, h[2] == 0, &tail[..len]);
        assert!(r.data().len() <= 512 && r.pending() <= 512);
        if h[0] & 1 == 1 {
            r.consume(h[1] as usize);
        }
        rest = &tail[len..];
    }
});
