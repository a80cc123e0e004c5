//! NetFlow v5 packets of flow records: the fixed 48-byte IPv4 record.
//!
//! Contract: [`V5Exporter`] writes each IPv4 flow record as one or two
//! one-way v5 records (see `super`), at most 30 to a packet. v5 has no
//! room for the rest: IPv6 flows are left out and counted (the count is
//! printed when the output ends, [`V5Exporter::left_out`]); counters above
//! 2^32 − 1 are written as 2^32 − 1; an ICMP flow's destination port is
//! its first packet's type × 256 + code (the usual v5 convention); the
//! verdict, VLAN, MACs and Community ID are not carried (next hop,
//! interfaces, ToS, AS numbers and masks are 0). The header's engine id
//! is the low 8 bits of the `[ipfix] domain`; its sampling interval, when
//! the run samples packets, is N (mode 1, packet interval; N above 16383,
//! the field's largest, is written as 16383). Never fails on a record.

use super::{export_ms, times, Clock, NetflowOptions, Packets};
use crate::error::Result;
use crate::export::{fields, ExportOptions, Exporter};
use crate::flow::record::{FlowRecord, RecordBatch};
use crate::schema::Kind;

/// Bytes of the header and of a record.
const HEADER: usize = 24;
/// Bytes of a v5 record.
pub const RECORD: usize = 48;
/// Records a packet holds at most.
pub const MAX_RECORDS: usize = 30;

/// Writes records as NetFlow v5 packets.
pub struct V5Exporter {
    out: Packets,
    engine_id: u8,
    /// Header sampling field (mode in the top 2 bits), 0 when not sampling.
    sampling: u16,
    buf: Vec<u8>,
    records: usize,
    clock: Clock,
    last_ms: u64,
    /// Flows (v5 records) sent before the packet being filled.
    flow_seq: u32,
    left_out: u64,
}

impl V5Exporter {
    pub(crate) fn new(out: Packets, _opts: &ExportOptions, nf: &NetflowOptions) -> Self {
        V5Exporter {
            out,
            engine_id: nf.ipfix.domain as u8,
            sampling: nf
                .sampling
                .map_or(0, |s| (1 << 14) | s.rate.min(0x3FFF) as u16),
            buf: Vec::with_capacity(HEADER + MAX_RECORDS * RECORD),
            records: 0,
            clock: Clock::default(),
            last_ms: 0,
            flow_seq: 0,
            left_out: 0,
        }
    }

    /// Flow records left out so far: IPv6 (and any other non-IPv4) flows.
    pub fn left_out(&self) -> u64 {
        self.left_out
    }

    fn send(&mut self) -> Result<()> {
        if self.records == 0 {
            return Ok(());
        }
        let export = export_ms(self.last_ms);
        let h = &mut self.buf[..HEADER];
        h[0..2].copy_from_slice(&5u16.to_be_bytes());
        h[2..4].copy_from_slice(&(self.records as u16).to_be_bytes());
        h[4..8].copy_from_slice(&self.clock.uptime(export).to_be_bytes());
        h[8..12].copy_from_slice(&((export / 1000) as u32).to_be_bytes());
        h[12..16].copy_from_slice(&0u32.to_be_bytes());
        h[16..20].copy_from_slice(&self.flow_seq.to_be_bytes());
        h[20] = 0;
        h[21] = self.engine_id;
        h[22..24].copy_from_slice(&self.sampling.to_be_bytes());
        let n = self.records as u32;
        self.flow_seq = self.flow_seq.wrapping_add(n);
        let res = self.out.send(&self.buf, n);
        self.buf.clear();
        self.records = 0;
        self.last_ms = 0;
        res
    }

    fn push(&mut self, r: &FlowRecord) -> Result<()> {
        if r.key.ip_version != 4 {
            self.left_out += 1;
            return Ok(());
        }
        let (first, last) = times(r);
        if !self.clock.fits(first, last) {
            self.send()?;
            self.clock.rebase(first, last);
        }
        let dirs = if r.packets[1] > 0 { 2 } else { 1 };
        for d in 0..dirs {
            if self.records == MAX_RECORDS {
                self.send()?;
            }
            if self.buf.is_empty() {
                self.buf.resize(HEADER, 0);
            }
            self.encode(r, d, first, last);
            self.records += 1;
            self.last_ms = self.last_ms.max(last);
        }
        Ok(())
    }

    fn encode(&mut self, r: &FlowRecord, d: usize, first: u64, last: u64) {
        let k = &r.key;
        let (src, dst, sp, mut dp) = match d {
            0 => (&k.src, &k.dst, k.sport, k.dport),
            _ => (&k.dst, &k.src, k.dport, k.sport),
        };
        if let Some(m) = r.icmp.filter(|_| k.proto == 1) {
            dp = u16::from(m.ty) << 8 | u16::from(m.code);
        }
        let sat = |v: u64| v.min(u64::from(u32::MAX)) as u32;
        let b = &mut self.buf;
        b.extend_from_slice(&src[12..]);
        b.extend_from_slice(&dst[12..]);
        b.extend_from_slice(&[0; 4]); // next hop
        b.extend_from_slice(&[0; 4]); // input, output interfaces
        b.extend_from_slice(&sat(r.packets[d]).to_be_bytes());
        b.extend_from_slice(&sat(r.bytes[d]).to_be_bytes());
        b.extend_from_slice(&self.clock.uptime(first).to_be_bytes());
        b.extend_from_slice(&self.clock.uptime(last).to_be_bytes());
        b.extend_from_slice(&sp.to_be_bytes());
        b.extend_from_slice(&dp.to_be_bytes());
        b.push(0); // pad
        b.push(super::v9::flags(r, d));
        b.push(k.proto);
        b.push(0); // ToS
        b.extend_from_slice(&[0; 4]); // source and destination AS
        b.extend_from_slice(&[0; 2]); // masks
        b.extend_from_slice(&[0; 2]); // pad
    }
}

impl Exporter for V5Exporter {
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
        if self.left_out > 0 {
            // v5 has no IPv6 record; the run's summary goes to standard
            // error, and so does this count.
            eprintln!(
                "warning: {}: {} flow record{} left out: not IPv4 (NetFlow v5 carries IPv4 only)",
                self.out.name(),
                self.left_out,
                if self.left_out == 1 { "" } else { "s" }
            );
        }
        self.out.result()
    }

    fn name(&self) -> &str {
        self.out.name()
    }
}
