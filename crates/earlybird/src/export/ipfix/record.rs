//! One flow record as one IPFIX data record of its template.
//!
//! Contract: [`encode`] appends the fields of a [`Template`], in order, for
//! one record and its early packets, as `docs/IPFIX.md` describes them
//! (network byte order; variable-length fields with the RFC 7011 §7 length
//! prefix; early packets as ordered basicLists, RFC 6313). [`max_len`]
//! bounds what it appends. It never fails and never allocates once `out`
//! has room.
//!
//! How: every fixed-length value a template may hold is laid out once per
//! record, in network byte order, at its own place in a small array
//! ([`Values`]); a template's [`Plan`] (built with the template) copies
//! each field from there with one 16-byte move, whatever its length, and
//! stops only at the variable-length fields. A walk that chose each
//! field's code by its source cost an indirect jump per field, most of
//! them mispredicted (perf, 2026-11-26).

use super::elements::{Source, Template, LIST_MEMBERS, ORDERED};
use crate::features::early::EarlyPkt;
use crate::features::Dir;
use crate::flow::record::{EndReason, FlowRecord};

/// Seconds from 1900 (NTP era 0) to 1970.
const NTP_OFFSET: u64 = 2_208_988_800;
const NS: u64 = 1_000_000_000;

/// The record's template: IPv4 for IPv4 flows, IPv6 for any other (the
/// addresses are kept whole), with or without the ICMP type.
#[inline]
pub(crate) fn template_of(r: &FlowRecord) -> usize {
    super::elements::template_index(r.key.ip_version != 4, r.icmp.is_some())
}

/// RFC 5102 flowEndReason of an end reason.
pub(crate) fn end_reason(e: EndReason) -> u8 {
    match e {
        EndReason::Idle => 1,
        EndReason::Active => 2,
        EndReason::Fin | EndReason::Rst => 3,
        EndReason::EndOfInput => 4,
        EndReason::Evicted => 5,
    }
}

/// Nanoseconds since 1970 as an NTP timestamp (dateTimeNanoseconds): the
/// fraction rounded up, so that a decoder's `fraction × 10⁹ / 2³²`
/// truncated gives the nanoseconds back.
#[inline]
pub(crate) fn ntp(ns: u64) -> u64 {
    let secs = ns / NS + NTP_OFFSET;
    let frac = ((ns % NS) << 32).div_ceil(NS);
    (secs << 32) | frac
}

/// The union of the TCP flags seen in direction `d` (bit i: flag i of
/// `TCP_FLAG_NAMES` counted at least once).
#[inline]
fn flags(r: &FlowRecord, d: usize) -> u16 {
    match &r.tcp_flags {
        Some(c) => c[d]
            .iter()
            .enumerate()
            .fold(0, |acc, (i, &n)| acc | (u16::from(n > 0) << i)),
        None => 0,
    }
}

/// Where each fixed-length value sits in [`Values`] (offset, length).
const fn place(src: Source) -> (u8, u8) {
    match src {
        Source::StartNs => (0, 8),
        Source::EndNs => (8, 8),
        Source::StartMs => (16, 8),
        Source::EndMs => (24, 8),
        Source::SrcV4 => (32, 4),
        Source::DstV4 => (36, 4),
        Source::SrcV6 => (40, 16),
        Source::DstV6 => (56, 16),
        Source::SrcPort => (72, 2),
        Source::DstPort => (74, 2),
        Source::Proto => (76, 1),
        Source::IcmpTypeCode => (77, 2),
        Source::Octets(0) => (80, 8),
        Source::Octets(_) => (88, 8),
        Source::Packets(0) => (96, 8),
        Source::Packets(_) => (104, 8),
        Source::TcpFlags(0) => (112, 2),
        Source::TcpFlags(_) => (114, 2),
        Source::Vlan => (116, 2),
        Source::EndReason => (118, 1),
        Source::SrcMac => (120, 6),
        Source::DstMac => (126, 6),
        Source::Confidence => (132, 4),
        Source::AtPacket => (136, 1),
        Source::App
        | Source::Early(_)
        | Source::Cell(_)
        | Source::MediaKind
        | Source::MediaShare
        | Source::MediaPacket => (0, 0),
    }
}

/// Where each media value sits in [`Media`] (offset, length).
const fn media_place(src: Source) -> Option<(u8, u8)> {
    match src {
        Source::MediaKind => Some((0, 1)),
        Source::MediaShare => Some((1, 4)),
        Source::MediaPacket => Some((5, 4)),
        _ => None,
    }
}

/// The media analyzer's verdict of one record as its three elements, in
/// network byte order, at their [`media_place`]: kind code (0 not media,
/// 1 audio, 2 video, 3 file), share (float32), packet (unsigned32).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Media(pub [u8; 9]);

impl Media {
    /// The elements of the record fields `media`, `media_share`,
    /// `media_packet` (`docs/MEDIA.md`); an unknown kind or null cells
    /// give 0.
    pub(crate) fn of(kind: &str, share: Option<f64>, packet: Option<u64>) -> Media {
        let code: u8 = match kind {
            "audio" => 1,
            "video" => 2,
            "file" => 3,
            _ => 0,
        };
        let mut m = [0u8; 9];
        m[0] = code;
        if code != 0 {
            m[1..5].copy_from_slice(&(share.unwrap_or(0.0) as f32).to_be_bytes());
            let p = packet.unwrap_or(0).min(u64::from(u32::MAX)) as u32;
            m[5..9].copy_from_slice(&p.to_be_bytes());
        }
        Media(m)
    }
}

/// Bytes of [`Values`]: the last value ends at 137; each copy reads 16
/// bytes from a value's start.
const VALUES: usize = 137 + 16;

/// Every fixed-length value of one record, in network byte order, at its
/// [`place`].
struct Values([u8; VALUES]);

impl Values {
    #[inline(always)]
    fn set<const N: usize>(&mut self, at: usize, b: [u8; N]) {
        self.0[at..at + N].copy_from_slice(&b);
    }

    #[inline(always)]
    fn of(r: &FlowRecord) -> Values {
        let mut v = Values([0; VALUES]);
        let k = &r.key;
        v.set(0, ntp(r.first_ts).to_be_bytes());
        v.set(8, ntp(r.last_ts).to_be_bytes());
        v.set(16, (r.first_ts / 1_000_000).to_be_bytes());
        v.set(24, (r.last_ts / 1_000_000).to_be_bytes());
        v.set(32, [k.src[12], k.src[13], k.src[14], k.src[15]]);
        v.set(36, [k.dst[12], k.dst[13], k.dst[14], k.dst[15]]);
        v.set(40, k.src);
        v.set(56, k.dst);
        v.set(72, k.sport.to_be_bytes());
        v.set(74, k.dport.to_be_bytes());
        v.set(76, [k.proto]);
        let (ty, code) = r.icmp.map_or((0, 0), |m| (m.ty, m.code));
        v.set(77, [ty, code]);
        v.set(80, r.bytes[0].to_be_bytes());
        v.set(88, r.bytes[1].to_be_bytes());
        v.set(96, r.packets[0].to_be_bytes());
        v.set(104, r.packets[1].to_be_bytes());
        v.set(112, flags(r, 0).to_be_bytes());
        v.set(114, flags(r, 1).to_be_bytes());
        v.set(116, k.vlan.to_be_bytes());
        v.set(118, [end_reason(r.end)]);
        v.set(120, r.src_mac);
        v.set(126, r.dst_mac);
        v.set(132, r.verdict.confidence.to_be_bytes());
        v.set(136, [r.verdict.at_packet]);
        v
    }
}

/// One step of a [`Plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// `len` bytes from [`Values`] at `from`.
    Fixed { from: u8, len: u8 },
    /// The application name.
    App,
    /// The basicList of [`LIST_MEMBERS`]`[i]`.
    Early(u8),
    /// `len` bytes from [`Media`] at `from`.
    Media { from: u8, len: u8 },
}

/// How [`encode`] writes the records of a template: its fields as steps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Plan(Vec<Step>);

impl Plan {
    /// The plan of the fields `sources` (in template order). Event fields
    /// (`Source::Cell`) have no step: their records are encoded by
    /// `events.rs`.
    pub(crate) fn of(sources: impl Iterator<Item = Source>) -> Plan {
        Plan(
            sources
                .filter_map(|src| match src {
                    Source::App => Some(Step::App),
                    Source::Early(i) => Some(Step::Early(i as u8)),
                    Source::Cell(_) => None,
                    _ if media_place(src).is_some() => {
                        let (from, len) = media_place(src)?;
                        Some(Step::Media { from, len })
                    }
                    _ => {
                        let (from, len) = place(src);
                        Some(Step::Fixed { from, len })
                    }
                })
                .collect(),
        )
    }
}

/// Bytes of a basicList of `n` values of `LIST_MEMBERS[i]`, without its
/// length prefix.
#[inline]
fn list_len(i: usize, n: usize) -> usize {
    1 + 2 + 2 + 4 + n * usize::from(LIST_MEMBERS[i].len)
}

/// The most bytes [`encode`] appends for template `t` with class names of
/// at most `name_len` bytes and at most `early` early packets.
#[inline]
pub(crate) fn max_len(t: &Template, name_len: usize, early: usize) -> usize {
    t.fixed_len + t.var_base + t.apps * name_len + t.early_per_packet * early
}

/// A variable-length prefix for `len` bytes at `buf[at..]`; returns the
/// bytes written.
#[inline(always)]
fn varlen(buf: &mut [u8], at: usize, len: usize) -> usize {
    if len < 255 {
        buf[at] = len as u8;
        1
    } else {
        let l = (len as u16).to_be_bytes();
        buf[at..at + 3].copy_from_slice(&[255, l[0], l[1]]);
        3
    }
}

/// Appends the data record of `r` for template `t`; `app` is the verdict's
/// class name (at most 65535 bytes), `early` the record's early packets.
#[inline]
pub(crate) fn encode(
    out: &mut Vec<u8>,
    t: &Template,
    r: &FlowRecord,
    app: &[u8],
    early: &[EarlyPkt],
) {
    encode_with(out, t, r, app, early, &Media::default());
}

/// [`encode`], with the media verdict `media` for the templates that carry
/// its elements (runs with `--analyzer media`).
#[inline]
pub(crate) fn encode_with(
    out: &mut Vec<u8>,
    t: &Template,
    r: &FlowRecord,
    app: &[u8],
    early: &[EarlyPkt],
    media: &Media,
) {
    let v = Values::of(r);
    let start = out.len();
    // 16 bytes beyond the record: each fixed field is moved as 16 bytes.
    out.resize(start + max_len(t, app.len(), early.len()) + 16, 0);
    let buf = &mut out[start..];
    let mut at = 0;
    for step in &t.plan.0 {
        match *step {
            Step::Fixed { from, len } => {
                let from = usize::from(from);
                buf[at..at + 16].copy_from_slice(&v.0[from..from + 16]);
                at += usize::from(len);
            }
            Step::Media { from, len } => {
                let (from, len) = (usize::from(from), usize::from(len));
                buf[at..at + len].copy_from_slice(&media.0[from..from + len]);
                at += len;
            }
            Step::App => {
                at += varlen(buf, at, app.len());
                buf[at..at + app.len()].copy_from_slice(app);
                at += app.len();
            }
            Step::Early(i) => {
                let i = usize::from(i);
                let m = &LIST_MEMBERS[i];
                at += varlen(buf, at, list_len(i, early.len()));
                let (id, len, pen) = (
                    (m.id | 0x8000).to_be_bytes(),
                    m.len.to_be_bytes(),
                    m.pen.to_be_bytes(),
                );
                buf[at..at + 9].copy_from_slice(&[
                    ORDERED, id[0], id[1], len[0], len[1], pen[0], pen[1], pen[2], pen[3],
                ]);
                at += 9;
                match i {
                    0 => {
                        for p in early {
                            buf[at..at + 2].copy_from_slice(&p.size.to_be_bytes());
                            at += 2;
                        }
                    }
                    1 => {
                        for p in early {
                            buf[at] = if p.dir == Dir::Fwd { 1 } else { 0xFF };
                            at += 1;
                        }
                    }
                    _ => {
                        for p in early {
                            buf[at..at + 4].copy_from_slice(&p.iat_us.to_be_bytes());
                            at += 4;
                        }
                    }
                }
            }
        }
    }
    out.truncate(start + at);
}

#[cfg(test)]
mod tests {
    use super::super::elements::templates;
    use super::*;

    #[test]
    fn ntp_times_round_trip_to_the_nanosecond() {
        for ns in [
            0u64,
            1,
            999_999_999,
            1_700_000_000_123_456_789,
            1_700_000_000_999_999_999,
        ] {
            let v = ntp(ns);
            let secs = (v >> 32) - NTP_OFFSET;
            let back = ((v & 0xFFFF_FFFF) * NS) >> 32;
            assert_eq!(secs * NS + back, ns, "{ns}");
        }
    }

    #[test]
    fn records_take_the_bytes_max_len_allows() {
        let t = &templates(true)[0];
        let r = FlowRecord {
            tcp_flags: Some([[1, 1, 0, 0, 3, 0, 0, 0], [0, 1, 1, 0, 0, 0, 0, 0]]),
            ..FlowRecord::default()
        };
        let early = [EarlyPkt::default(); 3];
        let mut out = Vec::new();
        encode(&mut out, t, &r, b"TLS", &early);
        assert!(out.len() <= max_len(t, 3, 3));
        assert_eq!(out.len(), t.fixed_len + 4 + 3 * 10 + 2 * 3 + 3 + 3 * 4);
        assert_eq!(flags(&r, 0), 0x13);
        assert_eq!(flags(&r, 1), 0x06);
        let mut long = Vec::new();
        encode(&mut long, t, &r, &[b'x'; 300], &[]);
        assert_eq!(long.len(), t.fixed_len + 3 + 300 + 3 * 10);
        assert!(long.len() <= max_len(t, 300, 0));
    }

    #[test]
    fn every_fixed_element_has_a_place_of_its_length_and_places_do_not_overlap() {
        let mut used = [false; VALUES];
        let mut seen = Vec::new();
        for el in super::super::elements::ELEMENTS.iter() {
            if media_place(el.src).is_some() {
                continue;
            }
            if matches!(el.src, Source::App | Source::Early(_) | Source::Cell(_)) {
                continue;
            }
            if seen.contains(&el.src) {
                // One value for both (the ICMP type of IPv4 and of IPv6).
                continue;
            }
            seen.push(el.src);
            let (from, len) = place(el.src);
            assert_eq!(u16::from(len), el.len, "{}", el.name);
            let (from, len) = (usize::from(from), usize::from(len));
            assert!(from + 16 <= VALUES, "{}", el.name);
            for u in &mut used[from..from + len] {
                assert!(!*u, "{} overlaps another value", el.name);
                *u = true;
            }
        }
    }

    #[test]
    fn end_reasons_map_to_rfc_5102_codes() {
        let codes: Vec<u8> = EndReason::ALL.iter().map(|&e| end_reason(e)).collect();
        assert_eq!(codes, [1, 2, 3, 3, 4, 5]);
    }
}
