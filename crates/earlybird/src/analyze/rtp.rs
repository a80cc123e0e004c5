//! RTP and RTCP headers (RFC 3550) and telephone events (RFC 4733).
//!
//! Contract: [`Rtp::parse`] reads an RTP version 2 header at the start of
//! a UDP payload: the fixed 12 bytes, the CSRC list, the header extension
//! and the padding, and returns the payload's place in the datagram.
//! [`rtcp_reports`] walks a compound RTCP packet and yields the report
//! blocks of its sender and receiver reports. [`DtmfEvent::parse`] reads
//! an RFC 4733 event payload. Every length is checked against the
//! captured bytes; a failure names the offset that does not fit
//! ([`RtpError`]). [`looks_like_rtp`] is the content test for media
//! without signalling: version 2, a payload type outside the RTCP range,
//! and a consistent header. Pure, no allocation, never panics.

/// Why bytes are not an RTP or RTCP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtpError {
    /// Fewer bytes than the header needs; `needed` in all.
    Truncated {
        /// Bytes the header needs.
        needed: usize,
    },
    /// Version is not 2.
    Version,
    /// A length field (CSRC count, extension, padding, RTCP length)
    /// points past the end; `offset` is the field's offset.
    BadLength {
        /// Offset of the field.
        offset: usize,
    },
}

impl std::fmt::Display for RtpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RtpError::Truncated { needed } => {
                write!(f, "RTP/RTCP header truncated ({needed} bytes needed)")
            }
            RtpError::Version => write!(f, "not RTP version 2"),
            RtpError::BadLength { offset } => {
                write!(f, "bad RTP/RTCP length field at byte {offset}")
            }
        }
    }
}

/// An RTP header and where its payload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rtp {
    /// Marker bit.
    pub marker: bool,
    /// Payload type (0..=127).
    pub pt: u8,
    /// Sequence number.
    pub seq: u16,
    /// RTP timestamp.
    pub ts: u32,
    /// Synchronisation source.
    pub ssrc: u32,
    /// Contributing sources in the CSRC list.
    pub csrc_count: u8,
    /// Offset of the payload in the datagram.
    pub payload_offset: usize,
    /// Payload length (padding excluded).
    pub payload_len: usize,
}

impl Rtp {
    /// Parses the header at the start of `b` (see the module docs).
    pub fn parse(b: &[u8]) -> Result<Rtp, RtpError> {
        let h: &[u8; 12] = b.first_chunk().ok_or(RtpError::Truncated { needed: 12 })?;
        if h[0] >> 6 != 2 {
            return Err(RtpError::Version);
        }
        let padding = h[0] & 0x20 != 0;
        let extension = h[0] & 0x10 != 0;
        let cc = h[0] & 0x0f;
        let mut off = 12 + 4 * cc as usize;
        if off > b.len() {
            return Err(RtpError::BadLength { offset: 0 });
        }
        if extension {
            let e: &[u8; 4] = b[off..]
                .first_chunk()
                .ok_or(RtpError::BadLength { offset: off })?;
            let words = u16::from_be_bytes([e[2], e[3]]) as usize;
            let end = off + 4 + 4 * words;
            if end > b.len() {
                return Err(RtpError::BadLength { offset: off + 2 });
            }
            off = end;
        }
        let mut len = b.len() - off;
        if padding {
            let pad = *b.last().unwrap_or(&0) as usize;
            if pad == 0 || pad > len {
                return Err(RtpError::BadLength {
                    offset: b.len().saturating_sub(1),
                });
            }
            len -= pad;
        }
        Ok(Rtp {
            marker: h[1] & 0x80 != 0,
            pt: h[1] & 0x7f,
            seq: u16::from_be_bytes([h[2], h[3]]),
            ts: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
            ssrc: u32::from_be_bytes([h[8], h[9], h[10], h[11]]),
            csrc_count: cc,
            payload_offset: off,
            payload_len: len,
        })
    }
}

/// Whether RTCP packet type `pt` (the second byte) is one of RFC 3550's
/// (SR 200, RR 201, SDES 202, BYE 203, APP 204) or of the feedback and
/// extended-report types (205–207).
pub fn is_rtcp_type(pt: u8) -> bool {
    (200..=207).contains(&pt)
}

/// Whether a UDP payload looks like RTP (see the module docs): version 2,
/// the second byte not an RTCP packet type (with or without the marker
/// bit), and a header that parses with a payload.
pub fn looks_like_rtp(b: &[u8]) -> bool {
    b.len() > 12
        && b[0] >> 6 == 2
        && !is_rtcp_type(b[1])
        && !(72..=76).contains(&(b[1] & 0x7f))
        && Rtp::parse(b).is_ok_and(|r| r.payload_len > 0)
}

/// One report block of an RTCP sender or receiver report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportBlock {
    /// The sender of the report (SSRC of the SR/RR packet).
    pub reporter: u32,
    /// The source the block is about.
    pub source: u32,
    /// Fraction lost since the last report, in 1/256.
    pub fraction_lost: u8,
    /// Cumulative packets lost (signed 24 bits).
    pub cumulative_lost: i32,
    /// Extended highest sequence number received.
    pub highest_seq: u32,
    /// Interarrival jitter, in RTP timestamp units.
    pub jitter: u32,
}

/// The report blocks of every SR and RR packet of a compound RTCP packet,
/// in order; stops at the first malformed packet and then yields its
/// error last.
pub fn rtcp_reports(b: &[u8]) -> impl Iterator<Item = Result<ReportBlock, RtpError>> + '_ {
    RtcpBlocks {
        b,
        at: 0,
        block: None,
        failed: false,
    }
}

struct RtcpBlocks<'a> {
    b: &'a [u8],
    at: usize,
    /// The packet being read: (reporter, next block offset, blocks left).
    block: Option<(u32, usize, u8)>,
    failed: bool,
}

impl Iterator for RtcpBlocks<'_> {
    type Item = Result<ReportBlock, RtpError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.failed {
                return None;
            }
            if let Some((reporter, off, left)) = self.block {
                if left > 0 {
                    let r: &[u8; 24] = self.b.get(off..)?.first_chunk()?;
                    self.block = Some((reporter, off + 24, left - 1));
                    let lost = i32::from_be_bytes([r[5], r[6], r[7], 0]) >> 8;
                    return Some(Ok(ReportBlock {
                        reporter,
                        source: u32::from_be_bytes([r[0], r[1], r[2], r[3]]),
                        fraction_lost: r[4],
                        cumulative_lost: lost,
                        highest_seq: u32::from_be_bytes([r[8], r[9], r[10], r[11]]),
                        jitter: u32::from_be_bytes([r[12], r[13], r[14], r[15]]),
                    }));
                }
                self.block = None;
            }
            if self.at >= self.b.len() {
                return None;
            }
            let at = self.at;
            let fail = |e| Some(Err(e));
            let Some(h) = self.b[at..].first_chunk::<4>() else {
                self.failed = true;
                return fail(RtpError::Truncated { needed: at + 4 });
            };
            if h[0] >> 6 != 2 {
                self.failed = true;
                return fail(RtpError::Version);
            }
            let len = 4 * (u16::from_be_bytes([h[2], h[3]]) as usize + 1);
            if at + len > self.b.len() {
                self.failed = true;
                return fail(RtpError::BadLength { offset: at + 2 });
            }
            self.at = at + len;
            let count = h[0] & 0x1f;
            let first = match h[1] {
                200 => 28,
                201 => 8,
                _ => continue,
            };
            if first + 24 * count as usize > len {
                self.failed = true;
                return fail(RtpError::BadLength { offset: at });
            }
            let reporter = u32::from_be_bytes([
                self.b[at + 4],
                self.b[at + 5],
                self.b[at + 6],
                self.b[at + 7],
            ]);
            self.block = Some((reporter, at + first, count));
        }
    }
}

/// An RFC 4733 named telephone event (DTMF digit or tone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DtmfEvent {
    /// Event code: 0–9 digits, 10 `*`, 11 `#`, 12–15 A–D, others tones.
    pub event: u8,
    /// End of the event.
    pub end: bool,
    /// Volume in −dBm0 (0..=63).
    pub volume: u8,
    /// Duration so far, in RTP timestamp units.
    pub duration: u16,
}

impl DtmfEvent {
    /// Reads the 4-byte event payload.
    pub fn parse(p: &[u8]) -> Result<DtmfEvent, RtpError> {
        let e: &[u8; 4] = p.first_chunk().ok_or(RtpError::Truncated { needed: 4 })?;
        Ok(DtmfEvent {
            event: e[0],
            end: e[1] & 0x80 != 0,
            volume: e[1] & 0x3f,
            duration: u16::from_be_bytes([e[2], e[3]]),
        })
    }

    /// The key of a DTMF event (`0`–`9`, `*`, `#`, `A`–`D`), if it is one.
    pub fn key(&self) -> Option<char> {
        b"0123456789*#ABCD"
            .get(self.event as usize)
            .map(|&c| c as char)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtp(first: u8, pt: u8, extra: &[u8], payload: &[u8]) -> Vec<u8> {
        let mut v = vec![
            first, pt, 0x12, 0x34, 0, 0, 0x03, 0xe8, 0xde, 0xad, 0xbe, 0xef,
        ];
        v.extend_from_slice(extra);
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn headers_csrc_extension_padding() {
        let p = rtp(0x80, 0x80 | 8, &[], &[0xd5; 160]);
        let r = Rtp::parse(&p).unwrap();
        assert_eq!(
            (r.marker, r.pt, r.seq, r.ts, r.ssrc),
            (true, 8, 0x1234, 1000, 0xdeadbeef)
        );
        assert_eq!((r.payload_offset, r.payload_len), (12, 160));
        assert!(looks_like_rtp(&p));
        // One CSRC, a one-word extension, three bytes of padding.
        let mut p = rtp(
            0x80 | 0x20 | 0x10 | 1,
            0,
            &[0, 0, 0, 1, 0xbe, 0xde, 0, 1, 1, 2, 3, 4],
            &[7; 20],
        );
        p.extend_from_slice(&[0, 0, 3]);
        let r = Rtp::parse(&p).unwrap();
        assert_eq!((r.csrc_count, r.payload_offset, r.payload_len), (1, 24, 20));
        // Lengths past the end are errors naming the field.
        assert_eq!(
            Rtp::parse(&p[..11]).unwrap_err(),
            RtpError::Truncated { needed: 12 }
        );
        assert_eq!(
            Rtp::parse(&rtp(0x80 | 0x10, 0, &[0xbe, 0xde, 0, 9], &[])).unwrap_err(),
            RtpError::BadLength { offset: 14 }
        );
        assert!(matches!(
            Rtp::parse(&rtp(0xa0, 0, &[], &[1, 2, 200])),
            Err(RtpError::BadLength { .. })
        ));
        assert_eq!(Rtp::parse(&[0x40; 20]).unwrap_err(), RtpError::Version);
        // RTCP is not RTP.
        assert!(!looks_like_rtp(&rtp(0x81, 200, &[], &[0; 20])));
    }

    #[test]
    fn rtcp_compound_reports() {
        // SR with one block, then an SDES, then an RR with one block.
        let mut b = vec![0x81, 200, 0, 12, 0, 0, 0, 1];
        b.extend_from_slice(&[0; 20]); // NTP, RTP ts, counts
        b.extend_from_slice(&[0, 0, 0, 2, 64, 0xff, 0xff, 0xfe, 0, 1, 0, 5, 0, 0, 0, 80]);
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&[0x81, 202, 0, 1, 0, 0, 0, 1]);
        b.extend_from_slice(&[0x81, 201, 0, 7, 0, 0, 0, 2]);
        b.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 9, 0, 0, 0, 7]);
        b.extend_from_slice(&[0; 8]);
        let r: Vec<ReportBlock> = rtcp_reports(&b).map(Result::unwrap).collect();
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].reporter, r[0].source, r[0].fraction_lost), (1, 2, 64));
        assert_eq!(
            (r[0].cumulative_lost, r[0].highest_seq, r[0].jitter),
            (-2, 65541, 80)
        );
        assert_eq!(
            (r[1].reporter, r[1].cumulative_lost, r[1].jitter),
            (2, 3, 7)
        );
        // A length past the end stops the walk with an error.
        let cut = &b[..b.len() - 4];
        let last = rtcp_reports(cut).last().unwrap();
        // The RR starts at 52 + 8 = 60; its length field is at 62.
        assert_eq!(last, Err(RtpError::BadLength { offset: 62 }));
        assert_eq!(rtcp_reports(&[]).count(), 0);
    }

    #[test]
    fn dtmf_events() {
        let e = DtmfEvent::parse(&[11, 0x80 | 10, 0x03, 0x20]).unwrap();
        assert_eq!(
            (e.key(), e.end, e.volume, e.duration),
            (Some('#'), true, 10, 800)
        );
        assert_eq!(
            DtmfEvent::parse(&[5, 0, 0]).unwrap_err(),
            RtpError::Truncated { needed: 4 }
        );
        assert_eq!(DtmfEvent::parse(&[40, 0, 0, 0]).unwrap().key(), None);
    }
}
