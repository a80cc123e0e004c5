//! Flow records: what leaves a shard when a flow ends.
//!
//! Contract: a [`FlowRecord`] is a plain value (no heap data) describing one
//! finished flow. Early features live beside it in a [`RecordBatch`] (a flat
//! array with a fixed stride of N per record) so records stay small and a
//! batch is two allocations that are reused. Every field is documented once,
//! here; `docs/RECORD_FIELDS.md` is checked against
//! [`crate::export::fields::FIELDS`] by a test.

use super::entry::{Entry, EntryTail, FullStats, IcmpHead, V6Addrs, SPILLED};
use super::packet::is_icmp;
use super::snapshot::{build_with, RawFlow};
use crate::classify::Verdict;
use crate::decode::icmp::Icmp;
use crate::decode::TunnelKind;
use crate::features::early::EarlyPkt;
use crate::features::stats::Stat;
use crate::features::tcp::FlagCounts;
use crate::schema::Rows;
use crate::time::Nanos;

/// Why a flow ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum EndReason {
    /// No packet for longer than the idle timeout.
    #[default]
    Idle = 0,
    /// Flow lasted longer than the active timeout; a new flow continues it.
    Active = 1,
    /// TCP FIN seen in both directions (and the final ACK or timeout).
    Fin = 2,
    /// TCP RST seen.
    Rst = 3,
    /// Still open when the input ended (or on SIGINT/SIGTERM).
    EndOfInput = 4,
    /// Removed to make room when the flow table was full.
    Evicted = 5,
}

impl EndReason {
    /// Number of reasons.
    pub const COUNT: usize = 6;
    /// All reasons in counter order.
    pub const ALL: [EndReason; EndReason::COUNT] = [
        EndReason::Idle,
        EndReason::Active,
        EndReason::Fin,
        EndReason::Rst,
        EndReason::EndOfInput,
        EndReason::Evicted,
    ];
    /// Name used in records and summaries.
    pub fn name(self) -> &'static str {
        match self {
            EndReason::Idle => "idle",
            EndReason::Active => "active",
            EndReason::Fin => "fin",
            EndReason::Rst => "rst",
            EndReason::EndOfInput => "end_of_input",
            EndReason::Evicted => "evicted",
        }
    }
}

/// The key of a flow as reported (client first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RecordKey {
    /// Client address (IPv4 stored IPv4-mapped: `::ffff:a.b.c.d`).
    pub src: [u8; 16],
    /// Server address.
    pub dst: [u8; 16],
    /// Client port (0 for ICMP/ICMPv6 and protocols without ports).
    pub sport: u16,
    /// Server port.
    pub dport: u16,
    /// IP protocol number.
    pub proto: u8,
    /// 4 or 6.
    pub ip_version: u8,
    /// 802.1Q VLAN id, 0 when untagged.
    pub vlan: u16,
    /// Tunnel that carried the flow.
    pub tunnel: TunnelKind,
    /// The tunnel id of the flow key: GRE key, VXLAN or Geneve VNI, CAPWAP
    /// radio id; 0 for GTP-U and PPTP, whose id differs by direction.
    pub tunnel_id: u32,
}

/// One finished flow.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FlowRecord {
    /// 5-tuple and context, client first.
    pub key: RecordKey,
    /// MAC addresses of the first packet (source = client's side).
    pub src_mac: [u8; 6],
    /// Destination MAC of the first packet.
    pub dst_mac: [u8; 6],
    /// Timestamp of the first packet (ns since epoch).
    pub first_ts: Nanos,
    /// Timestamp of the last packet (ns since epoch).
    pub last_ts: Nanos,
    /// Packets per direction: `[client→server, server→client]`.
    pub packets: [u64; 2],
    /// Bytes per direction (sum of IP lengths).
    pub bytes: [u64; 2],
    /// IP packet size statistics per direction, bytes; `None` where not
    /// measured: with `--stats basic`, or in a direction without packets.
    pub size: [Option<Stat>; 2],
    /// Inter-arrival time statistics per direction, nanoseconds (between
    /// consecutive packets of the same direction; extremes exact up to
    /// 2^48 − 1 ns, about 3.26 days); `None` where not measured:
    /// with `--stats basic`, or in a direction of fewer than two packets.
    pub iat: [Option<Stat>; 2],
    /// TCP flag counts per direction, in the order of [`TCP_FLAG_NAMES`]
    /// (zero for protocols other than TCP); `None` with `--stats basic`.
    pub tcp_flags: Option<[[u32; 8]; 2]>,
    /// ICMP / ICMPv6 type and code of the flow's first packet (flows are
    /// keyed on the host pair, so later packets may have other types);
    /// `None` for other protocols and when that packet was too short.
    pub icmp: Option<Icmp>,
    /// Why the flow ended.
    pub end: EndReason,
    /// Number of early packets kept (≤ N).
    pub early_len: u8,
    /// Application verdict.
    pub verdict: Verdict,
    /// The number of the model that decided the flow: 0 the run's own,
    /// then the models a `--learn` run swapped in (`classify/swap.rs`);
    /// `None` when no model decided it.
    pub model_id: Option<u16>,
}

/// Names of the TCP flags counted per direction, in bit order (FIN = bit 0).
pub const TCP_FLAG_NAMES: [&str; 8] = ["fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr"];

/// A batch of finished records with their early features.
///
/// A flow table appends raw snapshots ([`Self::push_raw`]); they become
/// [`FlowRecord`]s when [`Self::materialize`] runs (the pipeline calls it on
/// the exporter thread, or on the shard when the exporter lags). Readers of
/// [`Self::records`], [`Self::iter`] and [`Self::early_of`] see only
/// materialized records: call `materialize` first on a batch that came
/// straight from a table.
#[derive(Debug, Clone, Default)]
pub struct RecordBatch {
    /// Finished records.
    pub records: Vec<FlowRecord>,
    /// Early packets, `stride` entries per record (only `early_len` used);
    /// the snapshots' follow the records'.
    pub early: Vec<EarlyPkt>,
    /// N: early packets reserved per record.
    pub stride: usize,
    /// Snapshots not yet turned into records (they come after `records`).
    raw: Vec<RawFlow>,
    /// `--stats full`: one per snapshot.
    raw_extra: Vec<FullStats>,
    /// The addresses of the IPv6 snapshots, in order.
    raw_wide: Vec<V6Addrs>,
    /// The spilled flag counts of the snapshots that have them, in order.
    raw_flags_hi: Vec<FlagCounts>,
    /// The ICMP type and code of the ICMP snapshots, in order.
    raw_icmp: Vec<IcmpHead>,
    /// The fields the per-flow analyzers turned on added: one row per
    /// record, in record order (no row when none is on).
    pub analyzed: Rows,
    /// Text of every record already formatted for exporter number `.0`
    /// ([`crate::export::Renderer`]; the pipeline fills it on the shard
    /// when the exporter thread lags).
    pub rendered: Vec<(usize, Vec<u8>)>,
    /// Buffers of earlier `rendered` texts, emptied by
    /// [`RecordBatch::clear`], for the next texts to be written into
    /// without growing a new buffer (the batch travels back to the shard
    /// through a pool).
    pub spare_text: Vec<Vec<u8>>,
    /// Build the records without their packet size and inter-arrival
    /// statistics (no output of the run reads them; see
    /// [`crate::export::Exporter::reads_moments`]).
    pub skip_moments: bool,
    /// The seconds of packet time the records were made in, in record
    /// order (empty when the run keeps no per-second statistics): see
    /// `MadeIn`.
    pub made_in: Vec<MadeIn>,
}

/// Records of a [`RecordBatch`] from index `from` on (up to the next
/// entry's) were made in second `second` of time domain `domain` by their
/// shard's running clock (`telemetry/second.rs`); labelling them counts
/// among them the flows whose model verdict and payload label were
/// compared and agreed (`classify/drift.rs`), which the per-second
/// statistics write in that second's row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MadeIn {
    /// Index of the first record made in the second.
    pub from: usize,
    /// The time domain.
    pub domain: u64,
    /// The second (Unix seconds of packet time).
    pub second: u64,
    /// Records with a payload label and a model verdict.
    pub labelled: u64,
    /// Of them, records whose model verdict was the label's class.
    pub agreeing: u64,
}

impl RecordBatch {
    /// An empty batch for N early packets per record.
    pub fn with_capacity(records: usize, stride: usize) -> Self {
        RecordBatch {
            records: Vec::with_capacity(records),
            // The table appends snapshots (`push_raw`): grown from empty,
            // a batch copied them at each doubling.
            raw: Vec::with_capacity(records),
            early: Vec::with_capacity(records * stride),
            // The analyzers' cells: room made at the first row (the batch
            // does not know their width), not grown from nothing.
            analyzed: Rows::expecting(records),
            stride,
            ..RecordBatch::default()
        }
    }
    /// A batch of materialized records without early packets (stride 0).
    pub fn from_records(records: Vec<FlowRecord>) -> Self {
        RecordBatch {
            records,
            ..RecordBatch::default()
        }
    }
    /// Number of records (materialized or not).
    pub fn len(&self) -> usize {
        self.records.len() + self.raw.len()
    }
    /// True when the batch holds no record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty() && self.raw.is_empty()
    }
    /// Appends a record and its early packets (at most `stride` are kept).
    #[inline]
    pub fn push(&mut self, rec: FlowRecord, early: &[EarlyPkt]) {
        self.materialize();
        let n = early.len().min(self.stride);
        let mut rec = rec;
        rec.early_len = n as u8;
        self.records.push(rec);
        if self.analyzed.width() > 0 {
            self.analyzed.push_null(self.analyzed.width());
        }
        self.early.extend_from_slice(&early[..n]);
        self.early
            .resize(self.records.len() * self.stride, EarlyPkt::default());
    }
    /// Appends the snapshot of a finished flow: its slot's `entry` and
    /// `tail`, why it `end`ed, what travels `beside` it, and its slot's
    /// whole stride of early packets (the first `entry.n_early` are its
    /// own), and the number of the model that decided it.
    #[inline]
    pub fn push_raw(
        &mut self,
        entry: &Entry,
        tail: &EntryTail,
        end: EndReason,
        beside: Beside<'_>,
        slot: &[EarlyPkt],
        model: u16,
    ) {
        let Beside {
            extra,
            wide,
            flags_hi,
            icmp,
        } = beside;
        debug_assert_eq!(slot.len(), self.stride);
        debug_assert!(entry.n_early as usize <= self.stride);
        self.raw.reserve(1);
        let len = self.raw.len();
        // SAFETY: `reserve` made room for one more element at `len`; each
        // field is written in place (measured: building the value first
        // copied it twice), so the element is whole before `set_len`.
        unsafe {
            let p = self.raw.as_mut_ptr().add(len);
            std::ptr::addr_of_mut!((*p).entry).write(*entry);
            std::ptr::addr_of_mut!((*p).tail).write(*tail);
            std::ptr::addr_of_mut!((*p).end).write(end);
            std::ptr::addr_of_mut!((*p).model).write(model);
            self.raw.set_len(len + 1);
        }
        if let Some(x) = extra {
            push_copy(&mut self.raw_extra, x);
        }
        if let Some(w) = wide {
            push_copy(&mut self.raw_wide, w);
        }
        if let Some(f) = flags_hi {
            self.raw_flags_hi.push(*f);
        }
        if let Some(m) = icmp {
            self.raw_icmp.push(*m);
        }
        // The default N = 4 as a fixed-size copy (no memcpy call).
        match <&[EarlyPkt; 4]>::try_from(slot) {
            Ok(four) => self.early.extend_from_slice(four),
            Err(_) => self.early.extend_from_slice(slot),
        }
    }
    /// Packet sampling 1 in `n`: the early inter-arrivals of the snapshot
    /// just pushed are divided by `n` (the gap between two sampled packets
    /// spans about `n` gaps of the unsampled flow; thesis Ch. 6.5).
    pub(crate) fn correct_last_early(&mut self, n: u32) {
        let from = self.early.len().saturating_sub(self.stride);
        for e in &mut self.early[from..] {
            e.iat_us /= n;
        }
    }
    /// Turns every pending snapshot into its record (in order).
    pub fn materialize(&mut self) {
        if self.raw.is_empty() {
            return;
        }
        let full = !self.raw_extra.is_empty();
        debug_assert!(!full || self.raw_extra.len() == self.raw.len());
        self.records.reserve(self.raw.len());
        let mut wide = self.raw_wide.iter();
        let mut hi = self.raw_flags_hi.iter();
        let mut icmp = self.raw_icmp.iter();
        for (i, r) in self.raw.iter().enumerate() {
            let extra = if full { self.raw_extra.get(i) } else { None };
            let w = if r.entry.key.is_v6() {
                wide.next()
            } else {
                None
            };
            let h = if r.entry.state & SPILLED != 0 {
                hi.next()
            } else {
                None
            };
            let m = if is_icmp(r.entry.key.proto) {
                icmp.next()
            } else {
                None
            };
            self.records
                .push(build_with(r, extra, w, h, m, !self.skip_moments));
        }
        self.raw.clear();
        self.raw_extra.clear();
        self.raw_wide.clear();
        self.raw_flags_hi.clear();
        self.raw_icmp.clear();
    }
    /// The early packets of record `i` (materialized records only).
    pub fn early_of(&self, i: usize) -> &[EarlyPkt] {
        let r = &self.records[i];
        let s = i * self.stride;
        &self.early[s..s + r.early_len as usize]
    }
    /// Iterates over `(record, early packets)` of the materialized records.
    pub fn iter(&self) -> impl Iterator<Item = (&FlowRecord, &[EarlyPkt])> {
        debug_assert!(self.raw.is_empty(), "materialize the batch first");
        (0..self.records.len()).map(move |i| (&self.records[i], self.early_of(i)))
    }
    /// Empties the batch, keeping its allocations.
    pub fn clear(&mut self) {
        self.records.clear();
        self.early.clear();
        self.raw.clear();
        self.raw_extra.clear();
        self.raw_wide.clear();
        self.raw_flags_hi.clear();
        self.raw_icmp.clear();
        self.analyzed.clear();
        self.made_in.clear();
        for (_, mut text) in self.rendered.drain(..) {
            text.clear();
            self.spare_text.push(text);
        }
    }
}

/// What travels beside a snapshot ([`RecordBatch::push_raw`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Beside<'a> {
    /// Full statistics (every snapshot of a batch has them, or none does).
    pub extra: Option<&'a FullStats>,
    /// The addresses of an IPv6 flow.
    pub wide: Option<&'a V6Addrs>,
    /// The flag counts of a flow that has [`SPILLED`] them.
    pub flags_hi: Option<&'a FlagCounts>,
    /// The ICMP type and code of an ICMP / ICMPv6 flow.
    pub icmp: Option<&'a IcmpHead>,
}

/// `v.push(*x)` as one fixed-size copy into the vector's memory (a plain
/// push of a 160-byte value went through the stack and a `memcpy` call).
#[inline(always)]
fn push_copy<T: Copy>(v: &mut Vec<T>, x: &T) {
    v.reserve(1);
    let len = v.len();
    // SAFETY: `reserve` made room at `len`; `x` is a valid `T` that cannot
    // overlap the vector's spare capacity; the element is whole before
    // `set_len`.
    unsafe {
        std::ptr::copy_nonoverlapping(x, v.as_mut_ptr().add(len), 1);
        v.set_len(len + 1);
    }
}
