//! Raw flow snapshots: what a shard copies out of its table when a flow
//! ends, turned into a [`FlowRecord`] later — by default on the exporter
//! thread, off the shard's core.
//!
//! Contract: a [`RawFlow`] is a plain copy of a slot's [`Entry`] and
//! [`EntryTail`] plus the end reason; with `--stats full` the slot's [`FullStats`]
//! travels beside it (and its spilled flag counts, if any), an IPv6
//! flow's addresses ([`V6Addrs`]) and an ICMP flow's type and code
//! ([`IcmpHead`]). [`build`]
//! turns them into exactly the record the table would have built in place
//! (`tests`: every field, IPv4 and IPv6, both client sides, decided or
//! not). Pure, no allocation, never panics.
//!
//! Why (BENCHMARKS.md): building a 312-byte record with its statistics
//! took ~240 instructions per flow on the shard; copying the 128-byte
//! snapshot takes a few dozen, and the exporter thread, which runs on
//! another core, does the rest. When the exporter is the slower side the
//! pipeline builds records on the shard instead (`pipeline::Sink`), so the
//! work lands where a core is idle.

use super::entry::{Entry, EntryTail, FullStats, IcmpHead, V6Addrs, CLIENT_IS_A, DECIDED};
use super::record::{EndReason, FlowRecord, RecordKey};
use crate::classify::Verdict;
use crate::decode::icmp::Icmp;
use crate::features::tcp::{self, FlagCounts};

/// A finished flow as copied out of the table.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub struct RawFlow {
    /// The slot's hot line (key, counters, timestamps, verdict).
    pub entry: Entry,
    /// MACs and the byte counters' carries.
    pub tail: EntryTail,
    /// Why the flow ended.
    pub end: EndReason,
    /// The number of the model that decided it (read when `DECIDED`; in
    /// the padding of the 128-byte snapshot).
    pub model: u16,
}

/// The record of `raw`; `extra` with `--stats full` (else the statistics
/// are `None`), `wide` the addresses of an IPv6 flow (ignored for IPv4),
/// `flags_hi` the flag counts it has spilled out of `extra`'s lanes, `icmp`
/// the type and code of an ICMP flow's first packet.
#[inline]
pub fn build(
    raw: &RawFlow,
    extra: Option<&FullStats>,
    wide: Option<&V6Addrs>,
    flags_hi: Option<&FlagCounts>,
    icmp: Option<&IcmpHead>,
) -> FlowRecord {
    build_with(raw, extra, wide, flags_hi, icmp, true)
}

/// [`build`], with the packet size and inter-arrival statistics left
/// `None` unless `moments` (no output of the run reads them; the TCP flag
/// counts are still taken from `extra`).
#[inline]
pub fn build_with(
    raw: &RawFlow,
    extra: Option<&FullStats>,
    wide: Option<&V6Addrs>,
    flags_hi: Option<&FlagCounts>,
    icmp: Option<&IcmpHead>,
    moments: bool,
) -> FlowRecord {
    let h = &raw.entry;
    let t = &raw.tail;
    let (sport, dport) = h.client_server_ports();
    let v6 = h.key.is_v6();
    let [mut src, mut dst] = if v6 {
        wide.copied().unwrap_or_default()
    } else {
        // IPv4-mapped form, built as one 128-bit value.
        let m = |v: u32| ((0xffff_u128 << 32) | v as u128).to_be_bytes();
        [m(h.key.a), m(h.key.b)]
    };
    if h.state & CLIENT_IS_A == 0 {
        std::mem::swap(&mut src, &mut dst);
    }
    let packets = [h.packets[0] as u64, h.packets[1] as u64];
    let bytes = [h.bytes(t, 0), h.bytes(t, 1)];
    // Basic statistics: nothing measured (all `None`).
    let tcp_flags = extra.map(|x| {
        [
            tcp::total(&x.dir[0].flags, flags_hi.map(|h| &h[0])),
            tcp::total(&x.dir[1].flags, flags_hi.map(|h| &h[1])),
        ]
    });
    let (size, iat) = match extra.filter(|_| moments) {
        Some(x) => (
            [
                x.dir[0].moments.size_stat(packets[0], bytes[0]),
                x.dir[1].moments.size_stat(packets[1], bytes[1]),
            ],
            [
                x.dir[0].moments.iat_stat(packets[0]),
                x.dir[1].moments.iat_stat(packets[1]),
            ],
        ),
        None => Default::default(),
    };
    let verdict = if h.state & DECIDED != 0 {
        Verdict {
            class: h.app,
            confidence: h.conf as f32 / 65535.0,
            at_packet: h.at,
        }
    } else {
        Verdict {
            class: Verdict::UNKNOWN,
            confidence: 0.0,
            at_packet: 0,
        }
    };
    FlowRecord {
        key: RecordKey {
            src,
            dst,
            sport,
            dport,
            proto: h.key.proto,
            ip_version: if v6 { 6 } else { 4 },
            vlan: h.key.vlan,
            tunnel: h.key.tunnel_kind(),
            tunnel_id: h.key.tunnel_id,
        },
        src_mac: t.macs[0],
        dst_mac: t.macs[1],
        first_ts: h.first_ts,
        last_ts: h.last_ts,
        packets,
        bytes,
        size,
        iat,
        tcp_flags,
        icmp: icmp.filter(|m| m[0] != 0).map(|m| Icmp {
            ty: m[1],
            code: m[2],
        }),
        end: raw.end,
        early_len: h.n_early,
        model_id: (h.state & DECIDED != 0).then_some(raw.model),
        verdict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::key::{TableKey, KIND_V6};

    fn raw(state: u8, key: TableKey) -> RawFlow {
        RawFlow {
            entry: Entry {
                key,
                state,
                n_early: 3,
                app: 7,
                packets: [3, 2],
                bytes_lo: [u32::MAX, 500],
                conf: 65535,
                at: 3,
                first_ts: 10,
                last_ts: 90,
                ..Entry::default()
            },
            tail: EntryTail {
                macs: [[1; 6], [2; 6]],
                bytes_hi: [1, 0],
            },
            end: EndReason::Fin,
            model: 0,
        }
    }

    fn v4_key() -> TableKey {
        TableKey {
            a: 0x0a00_0001,
            b: 0xc0a8_0102,
            pa: 40000,
            pb: 443,
            proto: 6,
            vlan: 12,
            ..TableKey::default()
        }
    }

    #[test]
    fn ipv4_record_with_client_a_and_verdict() {
        let r = build(
            &raw(CLIENT_IS_A | DECIDED, v4_key()),
            None,
            None,
            None,
            None,
        );
        let mapped = |v: u32| {
            let mut a = [0u8; 16];
            a[10] = 0xff;
            a[11] = 0xff;
            a[12..].copy_from_slice(&v.to_be_bytes());
            a
        };
        assert_eq!(r.key.src, mapped(0x0a00_0001));
        assert_eq!(r.key.dst, mapped(0xc0a8_0102));
        assert_eq!((r.key.sport, r.key.dport, r.key.proto), (40000, 443, 6));
        assert_eq!((r.key.ip_version, r.key.vlan), (4, 12));
        assert_eq!((r.src_mac, r.dst_mac), ([1; 6], [2; 6]));
        assert_eq!((r.first_ts, r.last_ts), (10, 90));
        assert_eq!(r.packets, [3, 2]);
        assert_eq!(r.bytes, [(1 << 32) + u32::MAX as u64, 500]);
        assert_eq!(r.size, [None; 2], "basic statistics: not measured");
        assert_eq!((r.iat, r.tcp_flags), ([None; 2], None));
        assert_eq!((r.end, r.early_len), (EndReason::Fin, 3));
        assert_eq!((r.verdict.class, r.verdict.at_packet), (7, 3));
        assert_eq!(r.verdict.confidence, 1.0);
    }

    #[test]
    fn client_b_swaps_endpoints_and_undecided_is_unknown() {
        let r = build(&raw(0, v4_key()), None, None, None, None);
        assert_eq!((r.key.sport, r.key.dport), (443, 40000));
        assert_eq!(r.key.src[12..], 0xc0a8_0102u32.to_be_bytes());
        assert_eq!(r.verdict.class, Verdict::UNKNOWN);
        assert_eq!((r.verdict.confidence, r.verdict.at_packet), (0.0, 0));
    }

    #[test]
    fn ipv6_addresses_and_full_statistics() {
        let key = TableKey {
            kind: KIND_V6,
            ..v4_key()
        };
        let wide: V6Addrs = [[0x20; 16], [0x30; 16]];
        let mut x = FullStats::default();
        x.dir[0].moments.update(100, 10, true);
        x.dir[0].moments.update(300, 50, false);
        x.dir[1].flags[4] = 2;
        let mut hi = FlagCounts::default();
        hi[1][4] = 1 << 15;
        let r = build(
            &raw(CLIENT_IS_A, key),
            Some(&x),
            Some(&wide),
            Some(&hi),
            None,
        );
        assert_eq!(
            (r.key.src, r.key.dst, r.key.ip_version),
            (wide[0], wide[1], 6)
        );
        let size = x.dir[0].moments.size_stat(3, (1 << 32) + u32::MAX as u64);
        assert_eq!(r.size[0], size);
        assert_eq!(r.iat[0], x.dir[0].moments.iat_stat(3));
        let flags = r.tcp_flags.unwrap();
        assert_eq!(flags[1][4], 2 + (1 << 15), "lanes plus spilled");
        assert_eq!(flags[0], [0; 8]);
    }
}
