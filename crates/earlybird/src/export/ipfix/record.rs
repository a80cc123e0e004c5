//! One flow record as one IPFIX data record of its template.
//!
//! Contract: [`encode_into`] writes the fields of a [`Template`], in
//! order, for one record and its early packets, as `docs/IPFIX.md`
//! describes them (network byte order; variable-length fields with the
//! RFC 7011 §7 length prefix; early packets as ordered basicLists, RFC
//! 6313), at the start of a buffer of at least [`max_len`] + [`SLACK`]
//! bytes, and returns how many it wrote; the bytes past that may have been
//! written too. [`encode`] and [`encode_with`] append the same bytes to a
//! vector. It never fails and never allocates.
//!
//! How: every fixed-length value a template may hold is laid out once per
//! record, in network byte order, in a small array ([`Values`]) whose
//! order is the templates' field order, so the fixed fields between two
//! variable-length ones are one run of it. A template's [`Plan`] (built
//! with the template) holds those runs, each copied in 16-byte moves, and
//! stops only at the variable-length fields. The IPv4 biflow template
//! without ICMP or media elements (most records) has a straight-line
//! encoder instead ([`encode_v4_biflow`]: each field at its fixed offset,
//! no steps); a test holds it to the plan's bytes. A walk that chose each
//! field's code by its source cost an indirect jump per field, most of
//! them mispredicted (perf, 2026-11-26). The caller's buffer is written in
//! place: appending by zero-filling the record's room first cost a
//! `memset` of the whole bound per record.

use super::elements::{Source, Template, LABEL_FIELDS, LIST_MEMBERS, ORDERED};
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
/// `TCP_FLAG_NAMES` counted at least once), one comparison per flag
/// without a loop.
#[inline]
fn flags(r: &FlowRecord, d: usize) -> u16 {
    let Some(c) = &r.tcp_flags else {
        return 0;
    };
    let c = &c[d];
    let seen = |i: usize| u16::from(c[i] != 0) << i;
    seen(0) | seen(1) | seen(2) | seen(3) | seen(4) | seen(5) | seen(6) | seen(7)
}

/// Where each fixed-length value sits in [`Values`] (offset, length):
/// in the templates' field order (`elements.rs`), so that consecutive
/// fields of a template are consecutive here (IPv4 and IPv6 addresses, the
/// ICMP type and the reverse elements are skipped by the templates
/// without them).
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
        Source::Octets(0) => (79, 8),
        Source::Packets(0) => (87, 8),
        Source::Octets(_) => (95, 8),
        Source::Packets(_) => (103, 8),
        Source::TcpFlags(0) => (113, 2),
        Source::TcpFlags(_) => (111, 2),
        Source::Vlan => (115, 2),
        Source::EndReason => (117, 1),
        Source::SrcMac => (118, 6),
        Source::DstMac => (124, 6),
        Source::Confidence => (130, 4),
        Source::AtPacket => (134, 1),
        Source::App
        | Source::CommunityId
        | Source::Early(_)
        | Source::Cell(_)
        | Source::Label(_)
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
/// network byte order, at their [`media_place`]: kind code (0 undecided,
/// 1 audio, 2 video, 3 file, 4 none: ruled out), share (float32), packet
/// (unsigned32).
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
            "none" => 4,
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

/// The label values of one record, by [`LABEL_FIELDS`] index: the
/// strings (cut by the caller to `LABEL_MAX` bytes each and `LABEL_BUDGET`
/// together, `elements.rs`) and the fixed-length values in network byte
/// order (`ech` one byte, `stat_confidence` a float32, `model_id` an
/// unsigned16).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Labels<'a> {
    pub text: [&'a [u8]; LABEL_FIELDS.len()],
    pub fixed: [[u8; 4]; LABEL_FIELDS.len()],
}

impl Labels<'static> {
    /// No label: every string empty, every number 0.
    pub(crate) const NONE: Labels<'static> = Labels {
        text: [&[]; LABEL_FIELDS.len()],
        fixed: [[0; 4]; LABEL_FIELDS.len()],
    };
}

/// Length of the fixed-length label field `k` (`None`: a string).
pub(crate) const fn label_len(k: usize) -> Option<usize> {
    match k {
        5 => Some(1),
        15 => Some(4),
        16 => Some(2),
        _ => None,
    }
}

/// Bytes of [`Values`]: the last value ends at 135; a run is copied in
/// 16-byte moves, which read up to 15 bytes past its end.
const VALUES: usize = 135 + 16;

/// Bytes [`encode_into`] may write past the record: a run's last 16-byte
/// move.
pub(crate) const SLACK: usize = 16;

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
        v.set(79, r.bytes[0].to_be_bytes());
        v.set(87, r.packets[0].to_be_bytes());
        v.set(95, r.bytes[1].to_be_bytes());
        v.set(103, r.packets[1].to_be_bytes());
        v.set(111, flags(r, 1).to_be_bytes());
        v.set(113, flags(r, 0).to_be_bytes());
        v.set(115, k.vlan.to_be_bytes());
        v.set(117, [end_reason(r.end)]);
        v.set(118, r.src_mac);
        v.set(124, r.dst_mac);
        v.set(130, r.verdict.confidence.to_be_bytes());
        v.set(134, [r.verdict.at_packet]);
        v
    }
}

/// One step of a [`Plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// `len` bytes from [`Values`] at `from`: one or more consecutive
    /// fixed-length fields.
    Fixed { from: u8, len: u8 },
    /// The application name.
    App,
    /// The Community ID.
    Cid,
    /// The basicList of [`LIST_MEMBERS`]`[i]`.
    Early(u8),
    /// `len` bytes from [`Media`] at `from` (one or more consecutive media
    /// elements).
    Media { from: u8, len: u8 },
    /// The label field [`LABEL_FIELDS`]`[k]`.
    Label(u8),
}

/// How [`encode`] writes the records of a template: its fields as steps,
/// and whether they are those of [`V4_BIFLOW`], which has a straight-line
/// encoder of its own ([`encode_v4_biflow`]): `Some(true)` with its
/// Community ID, `Some(false)` without (`--no-community-id`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    steps: Vec<Step>,
    v4_biflow: Option<bool>,
}

/// The steps of the IPv4 biflow template without ICMP type or media
/// elements: the records of most runs (the worst case's every one).
const V4_BIFLOW: [Step; 9] = [
    Step::Fixed { from: 0, len: 40 },
    Step::Fixed { from: 72, len: 5 },
    Step::Fixed { from: 79, len: 51 },
    Step::App,
    Step::Fixed { from: 130, len: 5 },
    Step::Cid,
    Step::Early(0),
    Step::Early(1),
    Step::Early(2),
];

impl Plan {
    /// The plan of the fields `sources` (in template order). Event fields
    /// (`Source::Cell`) have no step: their records are encoded by
    /// `events.rs`.
    pub(crate) fn of(sources: impl Iterator<Item = Source>) -> Plan {
        let mut steps: Vec<Step> = Vec::new();
        for src in sources {
            let step = match src {
                Source::App => Step::App,
                Source::CommunityId => Step::Cid,
                Source::Early(i) => Step::Early(i as u8),
                Source::Cell(_) => continue,
                Source::Label(k) => Step::Label(k as u8),
                _ => match media_place(src) {
                    Some((from, len)) => Step::Media { from, len },
                    None => {
                        let (from, len) = place(src);
                        Step::Fixed { from, len }
                    }
                },
            };
            // A field right behind the previous one in the same array
            // joins its run.
            match (steps.last_mut(), step) {
                (Some(Step::Fixed { from, len }), Step::Fixed { from: f, len: l })
                    if *from + *len == f =>
                {
                    *len += l
                }
                (Some(Step::Media { from, len }), Step::Media { from: f, len: l })
                    if *from + *len == f =>
                {
                    *len += l
                }
                _ => steps.push(step),
            }
        }
        let v4_biflow = if steps == V4_BIFLOW {
            Some(true)
        } else {
            let no_cid = V4_BIFLOW.iter().filter(|s| **s != Step::Cid);
            steps.iter().eq(no_cid).then_some(false)
        };
        Plan { steps, v4_biflow }
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
    let cid = crate::export::community_id::of_record(0, &r.key, r.icmp);
    let cid = cid.as_ref().map_or(&[][..], |c| &c.as_bytes()[..]);
    encode_with(
        out,
        t,
        r,
        app,
        cid,
        early,
        &Media::default(),
        &Labels::default(),
    );
}

/// [`encode`], with the Community ID `cid` (seed 0 in [`encode`]), the
/// media verdict `media` and the label values `labels` for the templates
/// that carry their elements (runs with `--analyzer media`, with a payload
/// labeller).
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) fn encode_with(
    out: &mut Vec<u8>,
    t: &Template,
    r: &FlowRecord,
    app: &[u8],
    cid: &[u8],
    early: &[EarlyPkt],
    media: &Media,
    labels: &Labels<'_>,
) {
    let start = out.len();
    out.resize(start + max_len(t, app.len(), early.len()) + SLACK, 0);
    let n = encode_into(&mut out[start..], t, r, app, cid, early, media, labels);
    out.truncate(start + n);
}

/// Writes the data record of `r` for template `t` at the start of `buf`
/// (at least [`max_len`] + [`SLACK`] bytes) and returns its length; `app`
/// is the verdict's class name (at most 65535 bytes), `cid` the record's
/// Community ID (at most [`crate::export::community_id::LEN`] bytes, empty
/// when it has none), `early` the record's early packets, `media` the
/// media verdict and `labels` the label values for the templates that
/// carry their elements.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) fn encode_into(
    buf: &mut [u8],
    t: &Template,
    r: &FlowRecord,
    app: &[u8],
    cid: &[u8],
    early: &[EarlyPkt],
    media: &Media,
    labels: &Labels<'_>,
) -> usize {
    if let Some(with_cid) = t.plan.v4_biflow {
        return encode_v4_biflow(buf, r, app, with_cid.then_some(cid), early);
    }
    // Any other template: by its plan.
    let v = Values::of(r);
    let mut at = 0;
    for step in &t.plan.steps {
        match *step {
            Step::Fixed { from, len } => {
                let (from, len) = (usize::from(from), usize::from(len));
                let mut k = 0;
                while k < len {
                    buf[at + k..at + k + 16].copy_from_slice(&v.0[from + k..from + k + 16]);
                    k += 16;
                }
                at += len;
            }
            Step::Media { from, len } => {
                let (from, len) = (usize::from(from), usize::from(len));
                buf[at..at + len].copy_from_slice(&media.0[from..from + len]);
                at += len;
            }
            Step::App => at += string(&mut buf[at..], app),
            Step::Cid => at += string(&mut buf[at..], cid),
            Step::Label(k) => {
                let k = usize::from(k);
                match label_len(k) {
                    Some(n) => {
                        buf[at..at + n].copy_from_slice(&labels.fixed[k][..n]);
                        at += n;
                    }
                    None => at += string(&mut buf[at..], labels.text[k]),
                }
            }
            Step::Early(i) => at += early_list(&mut buf[at..], usize::from(i), early),
        }
    }
    at
}

/// Bytes of the fixed fields of [`V4_BIFLOW`] before the application
/// name.
const V4_HEAD: usize = 96;

/// [`encode_into`] for the template of [`V4_BIFLOW`] (without its
/// Community ID when `cid` is `None`), field by field at fixed offsets:
/// the same bytes as the plan's walk in [`encode_into`] without building
/// [`Values`] or walking steps.
#[inline]
fn encode_v4_biflow(
    buf: &mut [u8],
    r: &FlowRecord,
    app: &[u8],
    cid: Option<&[u8]>,
    early: &[EarlyPkt],
) -> usize {
    let (h, rest) = buf
        .split_first_chunk_mut::<V4_HEAD>()
        .expect("room for a record");
    let k = &r.key;
    put(h, 0, ntp(r.first_ts).to_be_bytes());
    put(h, 8, ntp(r.last_ts).to_be_bytes());
    put(h, 16, (r.first_ts / 1_000_000).to_be_bytes());
    put(h, 24, (r.last_ts / 1_000_000).to_be_bytes());
    put(h, 32, [k.src[12], k.src[13], k.src[14], k.src[15]]);
    put(h, 36, [k.dst[12], k.dst[13], k.dst[14], k.dst[15]]);
    put(h, 40, k.sport.to_be_bytes());
    put(h, 42, k.dport.to_be_bytes());
    h[44] = k.proto;
    put(h, 45, r.bytes[0].to_be_bytes());
    put(h, 53, r.packets[0].to_be_bytes());
    put(h, 61, r.bytes[1].to_be_bytes());
    put(h, 69, r.packets[1].to_be_bytes());
    put(h, 77, flags(r, 1).to_be_bytes());
    put(h, 79, flags(r, 0).to_be_bytes());
    put(h, 81, k.vlan.to_be_bytes());
    h[83] = end_reason(r.end);
    put(h, 84, r.src_mac);
    put(h, 90, r.dst_mac);
    let mut at = string(rest, app);
    let c = r.verdict.confidence.to_be_bytes();
    rest[at..at + 5].copy_from_slice(&[c[0], c[1], c[2], c[3], r.verdict.at_packet]);
    at += 5;
    if let Some(cid) = cid {
        at += string(&mut rest[at..], cid);
    }
    for i in 0..LIST_MEMBERS.len() {
        at += early_list(&mut rest[at..], i, early);
    }
    V4_HEAD + at
}

/// `b` into `h` at `at`.
#[inline(always)]
fn put<const N: usize>(h: &mut [u8; V4_HEAD], at: usize, b: [u8; N]) {
    h[at..at + N].copy_from_slice(&b);
}

/// A variable-length string field (`s`, at most 65535 bytes) at the start
/// of `buf`; returns the bytes written.
#[inline(always)]
fn string(buf: &mut [u8], s: &[u8]) -> usize {
    let at = varlen(buf, 0, s.len());
    buf[at..at + s.len()].copy_from_slice(s);
    at + s.len()
}

/// The basicList of [`LIST_MEMBERS`]`[i]` over `early` (with its length
/// prefix) at the start of `buf`; returns the bytes written.
#[inline(always)]
fn early_list(buf: &mut [u8], i: usize, early: &[EarlyPkt]) -> usize {
    let m = &LIST_MEMBERS[i];
    let mut at = varlen(buf, 0, list_len(i, early.len()));
    let (id, len, pen) = (
        (m.id | 0x8000).to_be_bytes(),
        m.len.to_be_bytes(),
        m.pen.to_be_bytes(),
    );
    buf[at..at + 9].copy_from_slice(&[
        ORDERED, id[0], id[1], len[0], len[1], pen[0], pen[1], pen[2], pen[3],
    ]);
    at += 9;
    let n = early.len() * usize::from(m.len);
    let out = &mut buf[at..at + n];
    match i {
        0 => {
            for (o, p) in out.chunks_exact_mut(2).zip(early) {
                o.copy_from_slice(&p.size.to_be_bytes());
            }
        }
        1 => {
            for (o, p) in out.iter_mut().zip(early) {
                *o = if p.dir == Dir::Fwd { 1 } else { 0xFF };
            }
        }
        _ => {
            for (o, p) in out.chunks_exact_mut(4).zip(early) {
                o.copy_from_slice(&p.iat_us.to_be_bytes());
            }
        }
    }
    at + n
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
        // The name (1 + 3), an empty Community ID (the key is neither
        // IPv4 nor IPv6: 1), three lists of three packets.
        assert_eq!(out.len(), t.fixed_len + 4 + 1 + 3 * 10 + 2 * 3 + 3 + 3 * 4);
        assert_eq!(flags(&r, 0), 0x13);
        assert_eq!(flags(&r, 1), 0x06);
        let mut long = Vec::new();
        encode(&mut long, t, &r, &[b'x'; 300], &[]);
        assert_eq!(long.len(), t.fixed_len + 3 + 300 + 1 + 3 * 10);
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
            if matches!(
                el.src,
                Source::App
                    | Source::CommunityId
                    | Source::Early(_)
                    | Source::Cell(_)
                    | Source::Label(_)
            ) {
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
    fn plans_join_consecutive_fixed_fields_into_runs() {
        let t = &templates(true)[0];
        assert_eq!(t.plan.steps, V4_BIFLOW);
        // Four runs hold the template's 101 bytes of fixed fields.
        let runs: Vec<u8> = V4_BIFLOW
            .iter()
            .filter_map(|s| match s {
                Step::Fixed { len, .. } => Some(*len),
                _ => None,
            })
            .collect();
        assert_eq!(runs, [40, 5, 51, 5]);
        assert_eq!(t.plan.v4_biflow, Some(true));
        assert!(templates(true)[1..]
            .iter()
            .all(|t| t.plan.v4_biflow.is_none()));
        assert!(templates(false).iter().all(|t| t.plan.v4_biflow.is_none()));
        let runs: usize = t
            .plan
            .steps
            .iter()
            .map(|s| match s {
                Step::Fixed { len, .. } => usize::from(*len),
                _ => 0,
            })
            .sum();
        assert_eq!(runs, t.fixed_len);
    }

    #[test]
    fn the_straight_line_encoder_writes_what_the_plan_writes() {
        use super::super::elements::templates_with;
        for with_cid in [true, false] {
            let t = &templates_with(true, false, with_cid, &[false; LABEL_FIELDS.len()])[0];
            assert_eq!(t.plan.v4_biflow, Some(with_cid));
            // The same template, walked by its plan.
            let mut planned = t.clone();
            planned.plan.v4_biflow = None;
            straight_line_as_planned(t, &planned, with_cid);
        }
    }

    fn straight_line_as_planned(t: &Template, planned: &Template, with_cid: bool) {
        let early: Vec<EarlyPkt> = (0..6u16)
            .map(|i| EarlyPkt {
                size: 40 + 300 * i,
                dir: if i % 2 == 0 { Dir::Fwd } else { Dir::Bwd },
                iat_us: 70_000 * u32::from(i) + 3,
                ..EarlyPkt::default()
            })
            .collect();
        let mut r = FlowRecord::default();
        r.key.ip_version = 4;
        r.key.src[12..].copy_from_slice(&[10, 0, 0, 1]);
        r.key.dst[12..].copy_from_slice(&[192, 168, 7, 254]);
        r.key.sport = 51_234;
        r.key.dport = 443;
        r.key.proto = 6;
        r.key.vlan = 12;
        r.first_ts = 1_700_000_000_123_456_789;
        r.last_ts = 1_700_000_009_999_999_999;
        r.bytes = [123_456_789_012, 77];
        r.packets = [1 << 40, 3];
        r.src_mac = [1, 2, 3, 4, 5, 6];
        r.dst_mac = [0xa, 0xb, 0xc, 0xd, 0xe, 0xf];
        r.verdict.confidence = 0.8125;
        r.verdict.at_packet = 4;
        r.end = EndReason::Rst;
        let long = [b'y'; 300];
        for (flags, app, n) in [
            (None, &b"unknown"[..], 0),
            (Some([[1, 0, 2, 0, 0, 9, 0, 1], [0; 8]]), &b"TLS"[..], 4),
            (Some([[0; 8], [5, 5, 5, 5, 5, 5, 5, 5]]), &long[..], 6),
        ] {
            r.tcp_flags = flags;
            let room = max_len(t, app.len(), n) + SLACK;
            let (mut a, mut b) = (vec![0xEE; room], vec![0x11; room]);
            let cid = crate::export::community_id::of_record(0, &r.key, None).unwrap();
            let cid = cid.as_bytes();
            let la = encode_v4_biflow(&mut a, &r, app, with_cid.then_some(cid), &early[..n]);
            let lb = encode_into(
                &mut b,
                planned,
                &r,
                app,
                cid,
                &early[..n],
                &Media::default(),
                &Labels::default(),
            );
            assert_eq!(
                a[..la],
                b[..lb],
                "{} early, app of {}, Community ID {with_cid}",
                n,
                app.len()
            );
        }
    }

    #[test]
    fn label_strings_within_the_budget_take_the_bytes_max_len_allows() {
        use super::super::elements::{templates_with, LABEL_BUDGET, LABEL_MAX};
        let all = templates_with(true, false, true, &[true; LABEL_FIELDS.len()]);
        let long = [b'z'; LABEL_MAX];
        let mut labels = Labels::default();
        // The budget spent by the first strings, the rest empty.
        let mut left = LABEL_BUDGET;
        for k in 0..LABEL_FIELDS.len() {
            if label_len(k).is_none() {
                let n = left.min(LABEL_MAX);
                labels.text[k] = &long[..n];
                left -= n;
            }
        }
        labels.fixed[15] = 0.5f32.to_be_bytes();
        labels.fixed[5] = [1, 0, 0, 0];
        for t in &all {
            assert!(t.plan.v4_biflow.is_none());
            let early = [EarlyPkt::default(); 32];
            let mut out = Vec::new();
            let mut r = FlowRecord::default();
            r.key.ip_version = if t.id % 2 == 1 { 6 } else { 4 };
            encode_with(
                &mut out,
                t,
                &r,
                b"TLS",
                &[],
                &early,
                &Media::default(),
                &labels,
            );
            assert!(out.len() <= max_len(t, 3, 32), "template {}", t.id);
            // Every string's bytes are there, after a one-byte length.
            let total: usize = labels.text.iter().map(|s| s.len() + 1).sum();
            let mut plain = Vec::new();
            let none = templates(true);
            encode_with(
                &mut plain,
                &none[usize::from(t.id - 256)],
                &r,
                b"TLS",
                &[],
                &early,
                &Media::default(),
                &Labels::default(),
            );
            // applicationName (1 + 3 bytes, the `4` below), the three fixed
            // values: stat_confidence (4), ech (1), model_id (2).
            let fixed_labels = 4 + 1 + 2;
            let strings = labels
                .text
                .iter()
                .enumerate()
                .filter(|(k, _)| label_len(*k).is_none())
                .count();
            assert_eq!(
                out.len(),
                plain.len() + 4 + fixed_labels + total - (LABEL_FIELDS.len() - strings)
            );
        }
    }

    #[test]
    fn end_reasons_map_to_rfc_5102_codes() {
        let codes: Vec<u8> = EndReason::ALL.iter().map(|&e| end_reason(e)).collect();
        assert_eq!(codes, [1, 2, 3, 3, 4, 5]);
    }
}
