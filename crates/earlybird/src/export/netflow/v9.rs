//! NetFlow v9 (RFC 3954) packets of flow records.
//!
//! Contract: [`V9Exporter`] writes each flow record as one or two one-way
//! data records (see `super`) of template 256 (IPv4) or 257 (IPv6), whose
//! fields are [`V4_FIELDS`] and [`V6_FIELDS`], all fixed-length as v9
//! requires: the verdict as `APPLICATION_NAME` (type 96, 32 bytes, UTF-8
//! padded with NULs, cut at a character boundary), its confidence and
//! packet, the Community ID and the number of the model that decided it
//! as vendor types (32768 + earlybird's IPFIX element id: 32770, 32771,
//! 32779, 32794; v9 has no enterprise numbers). Packets are at most the MTU; the
//! templates (and, when the run samples packets, the options template 258
//! with the sampling interval and algorithm, and its options record) open
//! the first packet and again the first packet after the refresh interval
//! or after the refresh count of packets. Never fails on a record; the
//! packet buffer is allocated once.

use std::time::Instant;

use super::{export_ms, times, Clock, NetflowOptions, Packets};
use crate::classify::Verdict;
use crate::error::Result;
use crate::export::{community_id, fields, ExportOptions, Exporter};
use crate::flow::record::{FlowRecord, RecordBatch};
use crate::sample::Policy;
use crate::schema::Kind;

/// Bytes of the application name field.
pub const APP_LEN: usize = 32;

/// Template ids.
pub const TEMPLATE_V4: u16 = 256;
/// IPv6 template.
pub const TEMPLATE_V6: u16 = 257;
/// The sampling options template.
pub const TEMPLATE_SAMPLING: u16 = 258;

/// Vendor field types: 32768 + the id of earlybird's IPFIX element of
/// the same meaning (`docs/IPFIX.md`).
pub const CONFIDENCE: u16 = 0x8000 | 2;
/// The packet the verdict was taken at.
pub const DECIDED_AT: u16 = 0x8000 | 3;
/// The Community ID.
pub const COMMUNITY_ID: u16 = 0x8000 | 11;
/// The number of the model that decided the flow (`model_id`; 65535
/// when no model decided it).
pub const MODEL_ID: u16 = 0x8000 | 26;

/// The fields of template 256 (IPv4): (type, length), in record order.
pub const V4_FIELDS: &[(u16, u16)] = &[
    (8, 4),               // IPV4_SRC_ADDR
    (12, 4),              // IPV4_DST_ADDR
    (7, 2),               // L4_SRC_PORT
    (11, 2),              // L4_DST_PORT
    (4, 1),               // PROTOCOL
    (6, 1),               // TCP_FLAGS
    (1, 8),               // IN_BYTES
    (2, 8),               // IN_PKTS
    (22, 4),              // FIRST_SWITCHED
    (21, 4),              // LAST_SWITCHED
    (58, 2),              // SRC_VLAN
    (32, 2),              // ICMP_TYPE (type × 256 + code)
    (56, 6),              // IN_SRC_MAC
    (80, 6),              // IN_DST_MAC
    (239, 1),             // biflowDirection: 1 client → server, 2 server → client
    (96, APP_LEN as u16), // APPLICATION_NAME
    (CONFIDENCE, 4),
    (DECIDED_AT, 1),
    (COMMUNITY_ID, community_id::LEN as u16),
    (MODEL_ID, 2),
];

/// The fields of template 257 (IPv6).
pub const V6_FIELDS: &[(u16, u16)] = &[
    (27, 16), // IPV6_SRC_ADDR
    (28, 16), // IPV6_DST_ADDR
    (7, 2),
    (11, 2),
    (4, 1),
    (6, 1),
    (1, 8),
    (2, 8),
    (22, 4),
    (21, 4),
    (58, 2),
    (139, 2), // icmpTypeCodeIPv6
    (56, 6),
    (80, 6),
    (239, 1),
    (96, APP_LEN as u16),
    (CONFIDENCE, 4),
    (DECIDED_AT, 1),
    (COMMUNITY_ID, community_id::LEN as u16),
    (MODEL_ID, 2),
];

/// Bytes of a data record of a template.
const fn record_len(fields: &[(u16, u16)]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < fields.len() {
        n += fields[i].1 as usize;
        i += 1;
    }
    n
}

/// Bytes of an IPv4 record.
pub const V4_LEN: usize = record_len(V4_FIELDS);
/// Bytes of an IPv6 record.
pub const V6_LEN: usize = record_len(V6_FIELDS);

/// Bytes of the packet header.
const HEADER: usize = 20;

/// The union of the TCP flags seen in direction `d`.
pub(crate) fn flags(r: &FlowRecord, d: usize) -> u8 {
    r.tcp_flags.map_or(0, |c| {
        (0..8).filter(|&b| c[d][b] != 0).map(|b| 1u8 << b).sum()
    })
}

/// Writes records as NetFlow v9 packets.
pub struct V9Exporter {
    out: Packets,
    /// Class names, NUL-padded to [`APP_LEN`]; then "unknown".
    names: Vec<[u8; APP_LEN]>,
    unknown: [u8; APP_LEN],
    /// Seed of the Community ID; `None`: the field is zeros.
    seed: Option<u16>,
    source_id: u32,
    mtu: usize,
    /// The packet being filled (header included).
    buf: Vec<u8>,
    /// Records of the packet (templates and data), data records.
    count: u16,
    data: u32,
    /// The open data set: its start and template.
    set: Option<(usize, u16)>,
    clock: Clock,
    /// Latest flow end (ms) of the packet.
    last_ms: u64,
    seq: u32,
    /// Templates sent: when, and packets since.
    sent: Option<Instant>,
    since: u32,
    refresh: std::time::Duration,
    refresh_packets: u32,
    /// Sampling interval and algorithm (1 deterministic, 2 random).
    sampling: Option<(u32, u8)>,
}

/// A class name NUL-padded (cut at a character boundary) to [`APP_LEN`].
fn padded(s: &str) -> [u8; APP_LEN] {
    let mut end = s.len().min(APP_LEN);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut a = [0u8; APP_LEN];
    a[..end].copy_from_slice(&s.as_bytes()[..end]);
    a
}

impl V9Exporter {
    pub(crate) fn new(out: Packets, opts: &ExportOptions, nf: &NetflowOptions) -> Self {
        // The smallest MTU that holds a header, the templates and a
        // record.
        let mtu = nf.ipfix.mtu.clamp(512, 65_507);
        V9Exporter {
            out,
            names: opts.class_names.iter().map(|s| padded(s)).collect(),
            unknown: padded("unknown"),
            seed: opts.community_id(),
            source_id: nf.ipfix.domain,
            mtu,
            buf: Vec::with_capacity(mtu),
            count: 0,
            data: 0,
            set: None,
            clock: Clock::default(),
            last_ms: 0,
            seq: 0,
            sent: None,
            since: 0,
            refresh: nf.ipfix.template_refresh,
            refresh_packets: nf.ipfix.template_refresh_messages.max(1),
            sampling: nf.sampling.map(|s| {
                let algo = match s.policy {
                    Policy::Systematic => 1,
                    Policy::Stratified | Policy::Random => 2,
                };
                (s.rate, algo)
            }),
        }
    }

    /// Starts a packet: the header's room, and the templates when due.
    fn start(&mut self) {
        self.buf.clear();
        self.buf.resize(HEADER, 0);
        self.count = 0;
        self.data = 0;
        self.set = None;
        self.last_ms = 0;
        let due = match self.sent {
            None => true,
            Some(t) => self.since >= self.refresh_packets || t.elapsed() >= self.refresh,
        };
        if !due {
            return;
        }
        self.sent = Some(Instant::now());
        self.since = 0;
        // Template flowset (id 0): both templates.
        let at = self.buf.len();
        self.buf.extend_from_slice(&[0, 0, 0, 0]);
        for (id, fields) in [(TEMPLATE_V4, V4_FIELDS), (TEMPLATE_V6, V6_FIELDS)] {
            self.buf.extend_from_slice(&id.to_be_bytes());
            self.buf
                .extend_from_slice(&(fields.len() as u16).to_be_bytes());
            for (ty, len) in fields {
                self.buf.extend_from_slice(&ty.to_be_bytes());
                self.buf.extend_from_slice(&len.to_be_bytes());
            }
            self.count += 1;
        }
        self.close_set_at(at, 0);
        if let Some((interval, algo)) = self.sampling {
            // Options template flowset (id 1): scope System (1, 4 bytes),
            // SAMPLING_INTERVAL (34, 4), SAMPLING_ALGORITHM (35, 1).
            let at = self.buf.len();
            self.buf.extend_from_slice(&[0, 1, 0, 0]);
            self.buf.extend_from_slice(&TEMPLATE_SAMPLING.to_be_bytes());
            self.buf.extend_from_slice(&4u16.to_be_bytes());
            self.buf.extend_from_slice(&8u16.to_be_bytes());
            for (ty, len) in [(1u16, 4u16), (34, 4), (35, 1)] {
                self.buf.extend_from_slice(&ty.to_be_bytes());
                self.buf.extend_from_slice(&len.to_be_bytes());
            }
            self.close_set_at(at, 1);
            // Its record.
            let at = self.buf.len();
            self.buf.extend_from_slice(&TEMPLATE_SAMPLING.to_be_bytes());
            self.buf.extend_from_slice(&[0, 0]);
            self.buf.extend_from_slice(&self.source_id.to_be_bytes());
            self.buf.extend_from_slice(&interval.to_be_bytes());
            self.buf.push(algo);
            self.close_set_at(at, TEMPLATE_SAMPLING);
            self.count += 2;
        }
    }

    /// Pads the set starting at `at` to 4 bytes and writes its id and
    /// length.
    fn close_set_at(&mut self, at: usize, id: u16) {
        while !(self.buf.len() - at).is_multiple_of(4) {
            self.buf.push(0);
        }
        let len = (self.buf.len() - at) as u16;
        self.buf[at..at + 2].copy_from_slice(&id.to_be_bytes());
        self.buf[at + 2..at + 4].copy_from_slice(&len.to_be_bytes());
    }

    /// Sends the packet if it holds data records.
    fn send(&mut self) -> Result<()> {
        if self.data == 0 {
            return Ok(());
        }
        if let Some((at, id)) = self.set.take() {
            self.close_set_at(at, id);
        }
        let export = export_ms(self.last_ms);
        let h = &mut self.buf[..HEADER];
        h[0..2].copy_from_slice(&9u16.to_be_bytes());
        h[2..4].copy_from_slice(&self.count.to_be_bytes());
        h[4..8].copy_from_slice(&self.clock.uptime(export).to_be_bytes());
        h[8..12].copy_from_slice(&((export / 1000) as u32).to_be_bytes());
        h[12..16].copy_from_slice(&self.seq.to_be_bytes());
        h[16..20].copy_from_slice(&self.source_id.to_be_bytes());
        self.seq = self.seq.wrapping_add(1);
        self.since += 1;
        let data = self.data;
        let res = self.out.send(&self.buf, data);
        self.buf.clear();
        self.data = 0;
        res
    }

    /// Appends record `r` (both directions).
    fn push(&mut self, r: &FlowRecord) -> Result<()> {
        let (first, last) = times(r);
        if !self.clock.fits(first, last) {
            self.send()?;
            self.clock.rebase(first, last);
        }
        let v6 = r.key.ip_version != 4;
        let (tid, len) = match v6 {
            false => (TEMPLATE_V4, V4_LEN),
            true => (TEMPLATE_V6, V6_LEN),
        };
        let app = match r.verdict.class {
            Verdict::UNKNOWN => self.unknown,
            c => *self.names.get(usize::from(c)).unwrap_or(&self.unknown),
        };
        let cid = self
            .seed
            .and_then(|s| community_id::of_record(s, &r.key, r.icmp));
        let cid = cid.map_or([0u8; community_id::LEN], |c| *c.as_bytes());
        let dirs = if r.packets[1] > 0 { 2 } else { 1 };
        for d in 0..dirs {
            if self.buf.is_empty() {
                self.start();
            }
            let open = matches!(self.set, Some((_, t)) if t == tid);
            let need = len + if open { 0 } else { 4 } + 3;
            if self.buf.len() + need > self.mtu {
                self.send()?;
                self.start();
            }
            if !matches!(self.set, Some((_, t)) if t == tid) {
                if let Some((at, id)) = self.set.take() {
                    self.close_set_at(at, id);
                }
                self.set = Some((self.buf.len(), tid));
                self.buf.extend_from_slice(&[0, 0, 0, 0]);
            }
            self.encode(r, d, v6, &app, &cid);
            self.count += 1;
            self.data += 1;
            self.last_ms = self.last_ms.max(last);
        }
        Ok(())
    }

    /// Appends the data record of direction `d` of `r`.
    fn encode(&mut self, r: &FlowRecord, d: usize, v6: bool, app: &[u8; APP_LEN], cid: &[u8]) {
        let k = &r.key;
        let (src, dst, sp, dp, smac, dmac) = match d {
            0 => (&k.src, &k.dst, k.sport, k.dport, &r.src_mac, &r.dst_mac),
            _ => (&k.dst, &k.src, k.dport, k.sport, &r.dst_mac, &r.src_mac),
        };
        let b = &mut self.buf;
        if v6 {
            b.extend_from_slice(src);
            b.extend_from_slice(dst);
        } else {
            b.extend_from_slice(&src[12..]);
            b.extend_from_slice(&dst[12..]);
        }
        b.extend_from_slice(&sp.to_be_bytes());
        b.extend_from_slice(&dp.to_be_bytes());
        b.push(k.proto);
        b.push(flags(r, d));
        b.extend_from_slice(&r.bytes[d].to_be_bytes());
        b.extend_from_slice(&r.packets[d].to_be_bytes());
        let (first, last) = times(r);
        b.extend_from_slice(&self.clock.uptime(first).to_be_bytes());
        b.extend_from_slice(&self.clock.uptime(last).to_be_bytes());
        b.extend_from_slice(&k.vlan.to_be_bytes());
        let icmp = r
            .icmp
            .map_or(0u16, |m| u16::from(m.ty) << 8 | u16::from(m.code));
        b.extend_from_slice(&icmp.to_be_bytes());
        b.extend_from_slice(smac);
        b.extend_from_slice(dmac);
        b.push(if d == 0 { 1 } else { 2 });
        b.extend_from_slice(app);
        b.extend_from_slice(&r.verdict.confidence.to_be_bytes());
        b.push(r.verdict.at_packet);
        b.extend_from_slice(cid);
        b.extend_from_slice(&r.model_id.unwrap_or(u16::MAX).to_be_bytes());
    }
}

impl Exporter for V9Exporter {
    fn kind(&self) -> &'static Kind {
        &fields::FLOWS
    }

    fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        for r in &batch.records {
            self.push(r)?;
        }
        Ok(())
    }

    fn reads_moments(&self) -> bool {
        false
    }

    fn reads_label_cells(&self) -> bool {
        false
    }

    fn flush(&mut self) -> Result<()> {
        self.send()?;
        self.out.flush()
    }

    fn finish(&mut self) -> Result<()> {
        self.send()?;
        self.out.flush()?;
        self.out.result()
    }

    fn name(&self) -> &str {
        self.out.name()
    }
}
