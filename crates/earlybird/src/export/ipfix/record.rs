//! One flow record as one IPFIX data record of its template.
//!
//! Contract: [`encode`] appends the fields of a [`Template`], in order, for
//! one record and its early packets, as `docs/IPFIX.md` describes them
//! (network byte order; variable-length fields with the RFC 7011 §7 length
//! prefix; early packets as ordered basicLists, RFC 6313). [`max_len`]
//! bounds what it appends. It never fails and never allocates once `out`
//! has room.

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

/// A writer over bytes already sized for the record ([`max_len`]): each
/// field is stored at its place, with no capacity check or growth.
struct Put<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl Put<'_> {
    #[inline(always)]
    fn put<const N: usize>(&mut self, b: [u8; N]) {
        self.buf[self.at..self.at + N].copy_from_slice(&b);
        self.at += N;
    }

    #[inline(always)]
    fn slice(&mut self, b: &[u8]) {
        self.buf[self.at..self.at + b.len()].copy_from_slice(b);
        self.at += b.len();
    }

    /// A variable-length prefix for `len` bytes.
    #[inline(always)]
    fn varlen(&mut self, len: usize) {
        if len < 255 {
            self.put([len as u8]);
        } else {
            let l = (len as u16).to_be_bytes();
            self.put([255, l[0], l[1]]);
        }
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

/// Appends the data record of `r` for template `t`; `app` is the verdict's
/// class name (at most 65535 bytes), `early` the record's early packets.
/// The record's bytes are reserved at once ([`max_len`]) and each field
/// stored at its place.
#[inline]
pub(crate) fn encode(
    out: &mut Vec<u8>,
    t: &Template,
    r: &FlowRecord,
    app: &[u8],
    early: &[EarlyPkt],
) {
    let start = out.len();
    out.resize(start + max_len(t, app.len(), early.len()), 0);
    let mut w = Put {
        buf: &mut out[start..],
        at: 0,
    };
    let k = &r.key;
    for f in &t.fields {
        match f.src {
            Source::StartNs => w.put(ntp(r.first_ts).to_be_bytes()),
            Source::EndNs => w.put(ntp(r.last_ts).to_be_bytes()),
            Source::StartMs => w.put((r.first_ts / 1_000_000).to_be_bytes()),
            Source::EndMs => w.put((r.last_ts / 1_000_000).to_be_bytes()),
            Source::SrcV4 => w.put([k.src[12], k.src[13], k.src[14], k.src[15]]),
            Source::DstV4 => w.put([k.dst[12], k.dst[13], k.dst[14], k.dst[15]]),
            Source::SrcV6 => w.put(k.src),
            Source::DstV6 => w.put(k.dst),
            Source::SrcPort => w.put(k.sport.to_be_bytes()),
            Source::DstPort => w.put(k.dport.to_be_bytes()),
            Source::Proto => w.put([k.proto]),
            Source::IcmpTypeCode => {
                let (ty, code) = r.icmp.map_or((0, 0), |m| (m.ty, m.code));
                w.put([ty, code]);
            }
            Source::Octets(d) => w.put(r.bytes[d].to_be_bytes()),
            Source::Packets(d) => w.put(r.packets[d].to_be_bytes()),
            Source::TcpFlags(d) => w.put(flags(r, d).to_be_bytes()),
            Source::Vlan => w.put(k.vlan.to_be_bytes()),
            Source::EndReason => w.put([end_reason(r.end)]),
            Source::SrcMac => w.put(r.src_mac),
            Source::DstMac => w.put(r.dst_mac),
            Source::App => {
                w.varlen(app.len());
                w.slice(app);
            }
            Source::Confidence => w.put(r.verdict.confidence.to_be_bytes()),
            Source::AtPacket => w.put([r.verdict.at_packet]),
            // Not in the flow templates (`elements::templates`).
            Source::Cell(_) => {}
            Source::Early(i) => {
                let m = &LIST_MEMBERS[i];
                w.varlen(list_len(i, early.len()));
                let (id, len, pen) = (
                    (m.id | 0x8000).to_be_bytes(),
                    m.len.to_be_bytes(),
                    m.pen.to_be_bytes(),
                );
                w.put([
                    ORDERED, id[0], id[1], len[0], len[1], pen[0], pen[1], pen[2], pen[3],
                ]);
                match i {
                    0 => early.iter().for_each(|p| w.put(p.size.to_be_bytes())),
                    1 => early
                        .iter()
                        .for_each(|p| w.put([if p.dir == Dir::Fwd { 1 } else { 0xFF }])),
                    _ => early.iter().for_each(|p| w.put(p.iat_us.to_be_bytes())),
                }
            }
        }
    }
    let end = start + w.at;
    out.truncate(end);
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
    fn end_reasons_map_to_rfc_5102_codes() {
        let codes: Vec<u8> = EndReason::ALL.iter().map(|&e| end_reason(e)).collect();
        assert_eq!(codes, [1, 2, 3, 3, 4, 5]);
    }
}
