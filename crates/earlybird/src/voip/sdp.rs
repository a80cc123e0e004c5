//! SDP session descriptions (RFC 4566) as SIP offers and answers carry
//! them: where each medium will arrive and with which codecs.
//!
//! Contract: [`Sdp::parse`] reads the `c=`, `m=`, `a=rtpmap`, `a=rtcp`
//! and direction attributes of a body and ignores every other line. Each
//! medium gets the connection address of its own `c=` line, else the
//! session's; its codecs are its payload types named by `a=rtpmap` or, for
//! the static types of RFC 3551 without one, by their registered names. A
//! line that is not `x=value` stops nothing: it is skipped. At most
//! [`MAX_MEDIA`] media and [`MAX_FORMATS`] formats per medium are kept (the
//! rest are counted in [`Sdp::dropped`]). Addresses are IPv4 or IPv6
//! literals (`IN IP4`/`IN IP6`); a host name gives no address. Never
//! panics; allocates the small result.

use std::net::IpAddr;

/// Most media kept per description.
pub const MAX_MEDIA: usize = 8;
/// Most payload formats kept per medium.
pub const MAX_FORMATS: usize = 32;

/// Which way a medium flows, from the describing side's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// Sends and receives (the default).
    #[default]
    SendRecv,
    /// Only sends.
    SendOnly,
    /// Only receives.
    RecvOnly,
    /// Neither (on hold).
    Inactive,
}

/// One payload format of a medium.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Codec {
    /// RTP payload type (0..=127).
    pub pt: u8,
    /// Encoding name as written (`PCMU`, `opus`, `telephone-event`), or the
    /// registered name of a static type; empty when unknown.
    pub name: String,
    /// Clock rate in Hz (0 when not given and not static).
    pub clock: u32,
}

/// One `m=` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Media {
    /// `audio`, `video`, `image`, `application`, …
    pub kind: String,
    /// Address the describing side receives on (its `c=` or the session's).
    pub addr: Option<IpAddr>,
    /// Port (0 = the medium is refused or removed).
    pub port: u16,
    /// RTCP port from `a=rtcp`, else `port + 1` for RTP profiles.
    pub rtcp_port: Option<u16>,
    /// Transport profile (`RTP/AVP`, `RTP/SAVP`, `UDP/TLS/RTP/SAVPF`, …).
    pub proto: String,
    /// The payload formats, in preference order.
    pub codecs: Vec<Codec>,
    /// Direction attribute (media-level, else session-level).
    pub direction: Direction,
}

/// A parsed description.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sdp {
    /// The media, in order.
    pub media: Vec<Media>,
    /// Media or formats over the limits, not kept.
    pub dropped: usize,
}

/// Registered names and clock rates of the static payload types (RFC 3551
/// table 4 and 5).
pub fn static_codec(pt: u8) -> Option<(&'static str, u32)> {
    Some(match pt {
        0 => ("PCMU", 8000),
        3 => ("GSM", 8000),
        4 => ("G723", 8000),
        5 => ("DVI4", 8000),
        6 => ("DVI4", 16000),
        7 => ("LPC", 8000),
        8 => ("PCMA", 8000),
        9 => ("G722", 8000),
        10 | 11 => ("L16", 44100),
        12 => ("QCELP", 8000),
        13 => ("CN", 8000),
        14 => ("MPA", 90000),
        15 => ("G728", 8000),
        16 => ("DVI4", 11025),
        17 => ("DVI4", 22050),
        18 => ("G729", 8000),
        25 => ("CelB", 90000),
        26 => ("JPEG", 90000),
        28 => ("nv", 90000),
        31 => ("H261", 90000),
        32 => ("MPV", 90000),
        33 => ("MP2T", 90000),
        34 => ("H263", 90000),
        _ => return None,
    })
}

fn direction(attr: &str) -> Option<Direction> {
    Some(match attr {
        "sendrecv" => Direction::SendRecv,
        "sendonly" => Direction::SendOnly,
        "recvonly" => Direction::RecvOnly,
        "inactive" => Direction::Inactive,
        _ => return None,
    })
}

/// `c=IN IP4 192.0.2.1` (a multicast `/ttl` suffix is cut).
fn connection(v: &str) -> Option<IpAddr> {
    let mut it = v.split_ascii_whitespace();
    if it.next()? != "IN" {
        return None;
    }
    let fam = it.next()?;
    let addr = it.next()?.split('/').next()?;
    match fam {
        "IP4" | "IP6" => addr.parse().ok(),
        _ => None,
    }
}

impl Sdp {
    /// Parses a body (see the module docs).
    pub fn parse(body: &[u8]) -> Sdp {
        let text = String::from_utf8_lossy(body);
        let mut sdp = Sdp::default();
        let mut session_addr = None;
        let mut session_dir = Direction::default();
        let mut skipping = false;
        for line in text.lines() {
            let line = line.trim_end_matches('\r');
            let Some((key, v)) = line.split_once('=') else {
                continue;
            };
            let v = v.trim();
            match key.trim() {
                "m" => {
                    let mut it = v.split_ascii_whitespace();
                    let kind = it.next().unwrap_or("");
                    let port = it.next().unwrap_or("");
                    let port = port.split('/').next().unwrap_or("").parse::<u16>();
                    let proto = it.next().unwrap_or("");
                    if sdp.media.len() == MAX_MEDIA || port.is_err() || kind.is_empty() {
                        sdp.dropped += 1;
                        skipping = true;
                        continue;
                    }
                    skipping = false;
                    let port = port.unwrap_or(0);
                    let mut codecs = Vec::new();
                    for f in it {
                        let Ok(pt) = f.parse::<u8>() else { continue };
                        if pt > 127 {
                            continue;
                        }
                        if codecs.len() == MAX_FORMATS {
                            sdp.dropped += 1;
                            continue;
                        }
                        let (name, clock) = static_codec(pt).unwrap_or(("", 0));
                        codecs.push(Codec {
                            pt,
                            name: name.to_string(),
                            clock,
                        });
                    }
                    let rtp = proto.contains("RTP");
                    sdp.media.push(Media {
                        kind: kind.to_string(),
                        addr: session_addr,
                        port,
                        rtcp_port: (rtp && port > 0).then(|| port.wrapping_add(1)),
                        proto: proto.to_string(),
                        codecs,
                        direction: session_dir,
                    });
                }
                _ if skipping => {}
                "c" => {
                    let addr = connection(v);
                    match sdp.media.last_mut() {
                        Some(m) => m.addr = addr,
                        None => session_addr = addr,
                    }
                }
                "a" => {
                    let (name, value) = v.split_once(':').unwrap_or((v, ""));
                    if let Some(d) = direction(name) {
                        match sdp.media.last_mut() {
                            Some(m) => m.direction = d,
                            None => session_dir = d,
                        }
                        continue;
                    }
                    let Some(m) = sdp.media.last_mut() else {
                        continue;
                    };
                    match name {
                        "rtpmap" => {
                            let mut it = value.split_ascii_whitespace();
                            let (Some(pt), Some(enc)) = (it.next(), it.next()) else {
                                continue;
                            };
                            let Ok(pt) = pt.parse::<u8>() else { continue };
                            let mut parts = enc.split('/');
                            let ename = parts.next().unwrap_or("");
                            let clock = parts.next().and_then(|c| c.parse().ok()).unwrap_or(0);
                            if let Some(c) = m.codecs.iter_mut().find(|c| c.pt == pt) {
                                c.name = ename.to_string();
                                c.clock = clock;
                            }
                        }
                        "rtcp" => {
                            if let Some(p) = value
                                .split_ascii_whitespace()
                                .next()
                                .and_then(|p| p.parse().ok())
                            {
                                m.rtcp_port = Some(p);
                            }
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        sdp
    }

    /// Codec names of every medium, in order, without repeats (by name,
    /// case kept as written).
    pub fn codec_names(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for c in self.media.iter().flat_map(|m| &m.codecs) {
            if !c.name.is_empty() && !out.contains(&c.name.as_str()) {
                out.push(&c.name);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFFER: &[u8] = b"v=0\r\n\
o=alice 2890844526 2890844526 IN IP4 host.atlanta.example.com\r\n\
s=-\r\n\
c=IN IP4 192.0.2.101\r\n\
t=0 0\r\n\
m=audio 49172 RTP/AVP 0 8 97 101\r\n\
a=rtpmap:97 iLBC/8000\r\n\
a=rtpmap:101 telephone-event/8000\r\n\
a=sendrecv\r\n\
m=video 51372 RTP/AVP 31 99\r\n\
c=IN IP6 2001:db8::2\r\n\
a=rtpmap:99 H264/90000\r\n\
a=rtcp:53020\r\n\
a=recvonly\r\n";

    #[test]
    fn media_addresses_ports_and_codecs() {
        let s = Sdp::parse(OFFER);
        assert_eq!(s.media.len(), 2);
        let a = &s.media[0];
        assert_eq!(a.kind, "audio");
        assert_eq!(a.addr, Some("192.0.2.101".parse().unwrap()));
        assert_eq!((a.port, a.rtcp_port), (49172, Some(49173)));
        let names: Vec<(&str, u32)> = a
            .codecs
            .iter()
            .map(|c| (c.name.as_str(), c.clock))
            .collect();
        assert_eq!(
            names,
            [
                ("PCMU", 8000),
                ("PCMA", 8000),
                ("iLBC", 8000),
                ("telephone-event", 8000)
            ]
        );
        assert_eq!(a.direction, Direction::SendRecv);
        let v = &s.media[1];
        assert_eq!(v.addr, Some("2001:db8::2".parse().unwrap()));
        assert_eq!((v.port, v.rtcp_port), (51372, Some(53020)));
        assert_eq!(v.codecs[0].name, "H261");
        assert_eq!(v.codecs[1].name, "H264");
        assert_eq!(v.direction, Direction::RecvOnly);
        assert_eq!(
            s.codec_names(),
            ["PCMU", "PCMA", "iLBC", "telephone-event", "H261", "H264"]
        );
    }

    #[test]
    fn hold_refusal_limits_and_junk() {
        let s = Sdp::parse(b"c=IN IP4 10.0.0.1/127\na=inactive\nm=audio 0 RTP/AVP 0\nm=audio x RTP/AVP 0\ngarbage\n\xff\xfe=\n");
        assert_eq!(s.media.len(), 1);
        assert_eq!((s.media[0].port, s.media[0].rtcp_port), (0, None));
        assert_eq!(s.media[0].direction, Direction::Inactive);
        assert_eq!(s.media[0].addr, Some("10.0.0.1".parse().unwrap()));
        assert_eq!(s.dropped, 1);
        let mut many = String::new();
        for p in 0..(MAX_MEDIA + 2) {
            many.push_str(&format!("m=audio {} RTP/AVP 0\n", 1000 + p));
        }
        let s = Sdp::parse(many.as_bytes());
        assert_eq!((s.media.len(), s.dropped), (MAX_MEDIA, 2));
        assert_eq!(Sdp::parse(b"").media.len(), 0);
        assert_eq!(
            Sdp::parse(b"c=IN IP4 host.example\nm=audio 4000 RTP/AVP 0\n").media[0].addr,
            None
        );
    }
}
