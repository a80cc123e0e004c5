//! The end-of-run summary: what a user reads after `earlybird flows`.
//!
//! Contract: [`Summary::add`] folds a batch of finished records into
//! per-(protocol, server port) and per-application totals, on the exporter
//! thread, never on a shard. Per record it costs a few additions into
//! directly indexed tables: one table of 65,536 ports per protocol with
//! ports (TCP, UDP, SCTP), allocated (1.5 MiB) the first time the protocol
//! is seen, one entry per other protocol, and per application class a slot
//! of a small array folded into [`Summary::by_app`] once per batch. No
//! hashing or allocation per record; top entries are sorted only when
//! asked for ([`Summary::top_ports`]). [`Report`] prints the counters and
//! the top entries. Nothing here can fail.
//!
//! The port a flow is counted under is its service's ([`service_port`]): in
//! bidirectional mode the server port of the record (the receiver of the
//! flow's first packet); in unidirectional mode each direction is a flow
//! of its own and the reply direction's destination is the client's
//! ephemeral port, so the side is taken from the TCP handshake when the
//! flow's first packet is part of it (SYN: towards the service; SYN+ACK:
//! from it) and is otherwise the lower of the two ports (services listen
//! on well-known and registered ports, clients send from ephemeral ones:
//! IANA 49152–65535, Linux 32768–60999).

use std::fmt;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use super::Counters;
use crate::classify::Verdict;
use crate::decode::Skip;
use crate::features::early::EarlyPkt;
use crate::features::tcp::{ACK, SYN};
use crate::flow::record::{EndReason, FlowRecord, RecordBatch};
use crate::source::Warning;

/// Totals of one group of flows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Flows.
    pub flows: u64,
    /// Packets (both directions).
    pub packets: u64,
    /// IP bytes (both directions).
    pub bytes: u64,
}

/// Number of ports of a protocol with ports.
const PORTS: usize = 1 << 16;

/// IP protocols whose flows are grouped by server port.
const WITH_PORTS: [u8; 3] = [6, 17, 132];

/// Totals per (protocol, server port), directly indexed.
#[derive(Debug, Clone)]
struct PortTotals {
    /// Per protocol of [`WITH_PORTS`], per port; `None` until seen.
    ports: [Option<Box<[Totals; PORTS]>>; WITH_PORTS.len()],
    /// Per other protocol (port 0).
    other: Box<[Totals; 256]>,
}

impl Default for PortTotals {
    fn default() -> Self {
        PortTotals {
            ports: [None, None, None],
            other: Box::new([Totals::default(); 256]),
        }
    }
}

/// A zeroed table of every port, built on the heap.
fn port_table() -> Box<[Totals; PORTS]> {
    match vec![Totals::default(); PORTS].into_boxed_slice().try_into() {
        Ok(t) => t,
        Err(_) => unreachable!("a vector of PORTS entries"),
    }
}

impl PortTotals {
    /// The totals of `(proto, port)`; `port` is ignored for protocols
    /// without ports.
    #[inline(always)]
    fn slot(&mut self, proto: u8, port: u16) -> &mut Totals {
        let k = match proto {
            6 => 0,
            17 => 1,
            132 => 2,
            _ => return &mut self.other[usize::from(proto)],
        };
        &mut self.ports[k].get_or_insert_with(port_table)[usize::from(port)]
    }

    /// Every group with at least one flow.
    fn iter(&self) -> impl Iterator<Item = ((u8, u16), Totals)> + '_ {
        let with_ports = WITH_PORTS
            .iter()
            .zip(&self.ports)
            .filter_map(|(p, t)| t.as_ref().map(|t| (*p, t)))
            .flat_map(|(p, t)| {
                t.iter()
                    .enumerate()
                    .map(move |(port, v)| ((p, port as u16), *v))
            });
        let other = self
            .other
            .iter()
            .enumerate()
            .map(|(p, v)| ((p as u8, 0u16), *v));
        with_ports.chain(other).filter(|(_, v)| v.flows > 0)
    }
}

/// Per-class totals of the batch being folded: slot 0 is
/// [`Verdict::UNKNOWN`], slot `c + 1` class `c`.
#[derive(Debug, Default, Clone)]
struct AppScratch {
    slots: Vec<Totals>,
    /// Classes whose slot is in use, in order of first use.
    touched: Vec<u16>,
}

/// Slot of a class in [`AppScratch`].
#[inline(always)]
fn app_slot(class: u16) -> usize {
    if class == Verdict::UNKNOWN {
        0
    } else {
        usize::from(class) + 1
    }
}

/// The service port of flow `r` (whose first early packet is `first`, if
/// kept), `unidirectional` when each direction is a flow of its own (see
/// the module docs). Only meaningful for protocols with ports.
#[inline]
pub fn service_port(r: &FlowRecord, first: Option<&EarlyPkt>, unidirectional: bool) -> u16 {
    let (sport, dport) = (r.key.sport, r.key.dport);
    if !unidirectional {
        return dport;
    }
    if r.key.proto == 6 {
        match first.map(|p| p.flags & (SYN | ACK)) {
            Some(SYN) => return dport,
            Some(f) if f == SYN | ACK => return sport,
            _ => {}
        }
    }
    sport.min(dport)
}

/// Aggregates over finished records.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    /// Totals per (IP protocol, server port).
    ports: PortTotals,
    /// Totals per application class (index into class names).
    pub by_app: HashMap<u16, Totals>,
    /// Records seen.
    pub records: u64,
    /// Empty between calls of [`Summary::add`].
    apps: AppScratch,
    /// The records are of one direction each (`--unidirectional`):
    /// `service_port` finds the service side.
    pub unidirectional: bool,
}

impl Summary {
    /// Folds a batch in.
    pub fn add(&mut self, batch: &RecordBatch) {
        let apps = &mut self.apps;
        for (i, r) in batch.records.iter().enumerate() {
            // Records arrive from another core: ask for the next ones (all
            // their lines, for the exporters that read them next).
            crate::export::prefetch_ahead(batch, i);
            let t = Totals {
                flows: 1,
                packets: r.packets[0] + r.packets[1],
                bytes: r.bytes[0] + r.bytes[1],
            };
            let port = match r.key.proto {
                6 | 17 | 132 => {
                    let first = (r.early_len > 0 && batch.stride > 0)
                        .then(|| batch.early.get(i * batch.stride))
                        .flatten();
                    service_port(r, first, self.unidirectional)
                }
                _ => 0,
            };
            add(self.ports.slot(r.key.proto, port), t);
            let i = app_slot(r.verdict.class);
            if i >= apps.slots.len() {
                apps.slots.resize(i + 1, Totals::default());
            }
            let a = &mut apps.slots[i];
            if a.flows == 0 {
                apps.touched.push(r.verdict.class);
            }
            add(a, t);
        }
        self.records += batch.records.len() as u64;
        for c in apps.touched.drain(..) {
            let a = std::mem::take(&mut apps.slots[app_slot(c)]);
            add(self.by_app.entry(c).or_default(), a);
        }
    }

    /// Merges another summary.
    pub(crate) fn merge(&mut self, o: &Summary) {
        for ((p, port), v) in o.ports.iter() {
            add(self.ports.slot(p, port), v);
        }
        for (k, v) in &o.by_app {
            add(self.by_app.entry(*k).or_default(), *v);
        }
        self.records += o.records;
    }

    /// Totals of every (protocol, server port) group with a flow, in
    /// protocol and port order (TCP, UDP and SCTP first).
    pub fn by_port(&self) -> impl Iterator<Item = ((u8, u16), Totals)> + '_ {
        self.ports.iter()
    }

    /// The `n` largest (protocol, port) groups by bytes.
    pub fn top_ports(&self, n: usize) -> Vec<((u8, u16), Totals)> {
        let mut v: Vec<_> = self.ports.iter().collect();
        v.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then(a.0.cmp(&b.0)));
        v.truncate(n);
        v
    }
}

fn add(t: &mut Totals, o: Totals) {
    t.flows += o.flows;
    t.packets += o.packets;
    t.bytes += o.bytes;
}

/// Everything a run reports at its end.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Counters of all shards.
    pub counters: Counters,
    /// Record aggregates.
    pub summary: Summary,
    /// Problems with input files (file cut short, …).
    pub warnings: Vec<Warning>,
    /// Outputs that failed (their error message); the others kept going.
    pub output_errors: Vec<String>,
    /// Outputs whose reader went away (a closed pipe): they ended there,
    /// which is not an error.
    pub outputs_closed: Vec<String>,
    /// Class names of the model used (empty when none).
    pub classes: Arc<[String]>,
    /// Processing time in seconds (wall clock, for the summary only).
    pub seconds: f64,
    /// Whether the run was interrupted by a signal.
    pub interrupted: bool,
    /// Counters of the packets written to the `-w` pcap, when it was
    /// written and succeeded.
    pub marked: Option<crate::mark::MarkCounters>,
    /// Whether those packets were DSCP-marked (`--mark`).
    pub marking: bool,
    /// Anonymous resident memory of the process when the input ended,
    /// before the final flush (Linux `RssAnon`), in bytes.
    pub rss_anon_end_of_input: Option<u64>,
    /// Packets accounted to flows by each shard, in shard order (how the
    /// work was spread).
    pub flowed_per_shard: Vec<u64>,
    /// Inputs read (files, or streams) when the run was planned from
    /// paths ([`crate::pipeline::run_inputs`]); 0 otherwise.
    pub inputs_read: u64,
    /// Inputs skipped, by reason.
    pub inputs_skipped: Vec<(crate::source::inputs::SkipReason, u64)>,
    /// What the packet dumper did (`--dump-dir`), all shards.
    pub dump: Option<crate::dump::DumpCounters>,
    /// The dumper's first failure on each shard that had one (its packets
    /// not written are in `dump`; the run went on).
    pub dump_errors: Vec<String>,
    /// Live capture: what the interfaces offer for packet stamps
    /// (`source/hwstamp.rs`); `None` for files.
    pub live_stamps: Option<String>,
    /// What the call stage did (`RunOptions::calls`), when it ran.
    pub calls: Option<crate::voip::run::VoipSummary>,
    /// The capture filter's expression (`--filter`), when one ran; the
    /// packets it left out are in [`Counters::filtered`].
    pub filter: Option<String>,
    /// TLS and QUIC handshakes the capture's snap length cut short
    /// (records whose `tls_status` is `cut-snap`), when the `tls`
    /// analyzer ran: (TLS, QUIC).
    pub handshakes_cut_by_snap: Option<(u64, u64)>,
    /// TLS and QUIC handshakes stopped because their flow table held its
    /// bound of handshake bytes (records whose `tls_status` is
    /// `cut-memory`), when the `tls` analyzer ran.
    pub handshakes_cut_by_memory: Option<u64>,
    /// The `dns` analyzer's name-by-address cache, when it ran: the most
    /// addresses it held, and the addresses evicted because it was full
    /// (per board: shards that share their turns count once).
    pub dns_cache: Option<(u64, u64)>,
    /// Lines the outputs add to the summary (a ClickHouse output's hold).
    pub output_notes: Vec<String>,
    /// Drift (`classify/drift.rs`), when the payload labellers ran: the
    /// level, then each class with a labelled flow.
    pub agreement: Option<(String, Vec<Agreement>)>,
}

/// One class's agreement of the model with the payload labels: the
/// class, the flows with both a payload label and a model verdict, and of
/// them those whose verdict was the class.
pub type Agreement = (String, u64, u64);

/// The process's anonymous resident memory (Linux), in bytes.
pub fn rss_anon() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("RssAnon:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Name of an IP protocol number for summaries.
pub fn proto_name(p: u8) -> String {
    match p {
        1 => "icmp".into(),
        6 => "tcp".into(),
        17 => "udp".into(),
        58 => "icmpv6".into(),
        132 => "sctp".into(),
        47 => "gre".into(),
        50 => "esp".into(),
        2 => "igmp".into(),
        _ => format!("ip{p}"),
    }
}

fn human(n: u64) -> String {
    let (v, u) = match n {
        n if n >= 1 << 30 => (n as f64 / (1u64 << 30) as f64, "GiB"),
        n if n >= 1 << 20 => (n as f64 / (1u64 << 20) as f64, "MiB"),
        n if n >= 1 << 10 => (n as f64 / 1024.0, "KiB"),
        n => return format!("{n} B"),
    };
    format!("{v:.1} {u}")
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.counters;
        let rate = if self.seconds > 0.0 {
            format!(
                " in {:.3} s ({:.2} Mpps)",
                self.seconds,
                c.packets_read as f64 / self.seconds / 1e6
            )
        } else {
            String::new()
        };
        writeln!(
            f,
            "packets: {} read ({}){rate}, {} in flows, {} skipped",
            c.packets_read,
            human(c.bytes_read),
            c.packets_flowed,
            c.skipped_total()
        )?;
        if let Some(expr) = &self.filter {
            writeln!(
                f,
                "filter: {} packets left out by {expr:?} (filtered)",
                c.filtered
            )?;
        }
        if c.sampled_out > 0 {
            let kept = c.packets_read.saturating_sub(c.sampled_out);
            writeln!(
                f,
                "sampling: {} packets ({}) not kept by --sample, {kept} kept",
                c.sampled_out,
                human(c.sampled_out_bytes),
            )?;
        }
        if c.live_offered > 0 {
            writeln!(
                f,
                "interface: {} packets offered by the kernel, {} dropped (ring full){}{}",
                c.live_offered,
                c.live_dropped,
                if c.live_bad_frames > 0 {
                    format!(", {} bad ring frames", c.live_bad_frames)
                } else {
                    String::new()
                },
                if c.live_link_downs > 0 {
                    format!(
                        ", link down {} time{} (capture resumed when up)",
                        c.live_link_downs,
                        if c.live_link_downs == 1 { "" } else { "s" }
                    )
                } else {
                    String::new()
                },
            )?;
        }
        if c.live_xdp.iter().any(|&n| n > 0) {
            let [dropped, full, fill, invalid, handed, lost, run] = c.live_xdp;
            writeln!(
                f,
                "AF_XDP sockets: rx_dropped {dropped}, rx_ring_full {full}, \
                 fill_ring_empty_descs {fill} (in copy mode also in rx_dropped: \
                 not more drops), rx_invalid_descs {invalid}; \
                 {handed} packets handed to another shard, {lost} dropped (exchange full), \
                 {} still in the exchange when the run stopped (not run)",
                handed.saturating_sub(run)
            )?;
        }
        if let Some(note) = &self.live_stamps {
            let by = [
                ("hardware", c.live_ts_hardware),
                ("software", c.live_ts_software),
                ("none", c.live_ts_none),
            ];
            let parts: Vec<String> = by
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(s, n)| format!("{s} {n}"))
                .collect();
            let what = if parts.is_empty() {
                "no packets".to_string()
            } else {
                format!("{} packets", parts.join(", "))
            };
            writeln!(f, "timestamps: {what} ({note})")?;
        }
        if c.skipped_total() > 0 {
            let mut parts: Vec<String> = Skip::ALL
                .iter()
                .filter(|s| c.skipped[**s as usize] > 0)
                .map(|s| format!("{} {}", s.name(), c.skipped[*s as usize]))
                .collect();
            if c.unsupported_link > 0 {
                parts.push(format!("unsupported_link {}", c.unsupported_link));
            }
            writeln!(f, "skipped by reason: {}", parts.join(", "))?;
        }
        if let Some((tls, quic)) = self.handshakes_cut_by_snap.filter(|(t, q)| t + q > 0) {
            writeln!(
                f,
                "handshakes cut by the snap length: {} (TLS {tls}, QUIC {quic}; tls_status cut-snap: \
                 their names are not read)",
                tls + quic
            )?;
        }
        if let Some((level, classes)) = self.agreement.as_ref().filter(|(_, c)| !c.is_empty()) {
            let (l, a) = classes.iter().fold((0, 0), |(l, a), c| (l + c.1, a + c.2));
            let per: Vec<String> = classes
                .iter()
                .map(|(c, l, a)| format!("{c} {a}/{l}"))
                .collect();
            writeln!(
                f,
                "model against payload labels ({level}): {a} of {l} flows agree ({})",
                per.join(", ")
            )?;
        }
        if let Some(n) = self.handshakes_cut_by_memory.filter(|n| *n > 0) {
            writeln!(
                f,
                "handshakes stopped by the reassembly bound: {n} (tls_status cut-memory: {} MiB of \
                 handshake bytes per shard at most)",
                crate::analyze::tls::BUDGET >> 20
            )?;
        }
        if let Some((held, evicted)) = self.dns_cache.filter(|(h, _)| *h > 0) {
            writeln!(
                f,
                "DNS name cache: {held} addresses held at most, {evicted} evicted because it was full \
                 ({} per shard)",
                crate::analyze::dns::CACHE
            )?;
        }
        let inputs_skipped: u64 = self.inputs_skipped.iter().map(|(_, n)| n).sum();
        if self.inputs_read > 1 || inputs_skipped > 0 {
            let why: Vec<String> = self
                .inputs_skipped
                .iter()
                .map(|(r, n)| format!("{} {n}", r.name()))
                .collect();
            writeln!(
                f,
                "inputs: {} read, {inputs_skipped} skipped{}{}",
                self.inputs_read,
                if why.is_empty() { "" } else { " by reason: " },
                why.join(", ")
            )?;
        }
        if c.time_domains > 0 {
            writeln!(
                f,
                "time: {} input{} started before the latest packet read so far: read as separate \
                 time domains (open flows ended first)",
                c.time_domains,
                if c.time_domains == 1 { "" } else { "s" },
            )?;
        }
        if c.ts_retimed > 0 {
            writeln!(
                f,
                "time: {} packets given a new time by --timestamps (runs of equal stamps spread)",
                c.ts_retimed
            )?;
        }
        if c.ts_batch_stamped > 0 {
            writeln!(
                f,
                "time: {} input{} look{} batch-stamped (most packets have the timestamp of the \
                 packet before)",
                c.ts_batch_stamped,
                if c.ts_batch_stamped == 1 { "" } else { "s" },
                if c.ts_batch_stamped == 1 { "s" } else { "" },
            )?;
        }
        if c.ts_backwards > 0 {
            writeln!(
                f,
                "time: {} packets stamped before the latest packet read (largest step back {}): \
                 their flows were timed from the latest",
                c.ts_backwards,
                crate::time::span(c.ts_max_back)
            )?;
        }
        let ends: Vec<String> = EndReason::ALL
            .iter()
            .filter(|r| c.flows.ended[**r as usize] > 0)
            .map(|r| format!("{} {}", r.name(), c.flows.ended[*r as usize]))
            .collect();
        if self.flowed_per_shard.len() > 1 {
            let shares: Vec<String> = self
                .flowed_per_shard
                .iter()
                .map(|n| {
                    let pct = 100.0 * *n as f64 / c.packets_flowed.max(1) as f64;
                    format!("{n} ({pct:.0} %)")
                })
                .collect();
            writeln!(f, "packets in flows per shard: {}", shares.join(", "))?;
        }
        writeln!(
            f,
            "flows: {} ({})",
            c.flows_ended(),
            if ends.is_empty() {
                "none".into()
            } else {
                ends.join(", ")
            }
        )?;
        if c.table_bytes > 0 {
            writeln!(
                f,
                "flow table: peak {} flows, {} touched, {}",
                c.flows.peak_flows,
                human(c.table_bytes),
                if c.table_pool_bytes > 0 {
                    "reserved huge pages"
                } else {
                    "transparent huge pages (reserve a pool with sysctl vm.nr_hugepages for steadier speed)"
                }
            )?;
        }
        if c.export_dropped > 0 {
            writeln!(
                f,
                "records dropped (exporter too slow): {}",
                c.export_dropped
            )?;
        }
        let top = self.summary.top_ports(10);
        if !top.is_empty() {
            writeln!(f, "top protocols/ports by bytes:")?;
            for ((p, port), t) in top {
                let name = if port == 0 {
                    proto_name(p)
                } else {
                    format!("{}/{}", proto_name(p), port)
                };
                writeln!(
                    f,
                    "  {name:<12} {:>10}  {:>9} flows  {:>10} packets",
                    human(t.bytes),
                    t.flows,
                    t.packets
                )?;
            }
        }
        if !self.classes.is_empty() {
            let mut apps: Vec<_> = self.summary.by_app.iter().collect();
            apps.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then(a.0.cmp(b.0)));
            writeln!(f, "top applications by bytes:")?;
            for (class, t) in apps.into_iter().take(10) {
                let name = if *class == Verdict::UNKNOWN {
                    "unknown"
                } else {
                    self.classes
                        .get(*class as usize)
                        .map(String::as_str)
                        .unwrap_or("?")
                };
                writeln!(
                    f,
                    "  {name:<20} {:>10}  {:>9} flows",
                    human(t.bytes),
                    t.flows
                )?;
            }
        }
        for w in &self.warnings {
            writeln!(f, "warning: {w}")?;
        }
        for n in &self.output_notes {
            writeln!(f, "{n}")?;
        }
        for e in &self.output_errors {
            writeln!(f, "output error: {e}")?;
        }
        for name in &self.outputs_closed {
            writeln!(
                f,
                "output {name}: closed by its reader, nothing more written to it"
            )?;
        }
        if let Some(m) = self.marked.filter(|_| !self.marking) {
            writeln!(
                f,
                "pcap written: {} packets, {} skipped (another link type or too long)",
                m.written(),
                m.skipped_link + m.skipped_oversize
            )?;
        } else if let Some(m) = &self.marked {
            writeln!(
                f,
                "marking: {} packets written, {} marked, {} unchanged, {} could not be marked, {} skipped",
                m.written(),
                m.marked,
                m.unchanged,
                m.unmarkable,
                m.skipped_link + m.skipped_oversize
            )?;
        }
        if let Some(d) = &self.dump {
            writeln!(
                f,
                "packets dumped: {} in {} file{} ({}), {} not written (write failures: {}), {} too long",
                d.written,
                d.files,
                if d.files == 1 { "" } else { "s" },
                human(d.bytes),
                d.lost,
                d.failures,
                d.oversize
            )?;
            let h = d.held;
            if h != crate::dump::HeldCounters::default() {
                writeln!(
                    f,
                    "packets held until their flow's verdict: {} dumped, {} dropped (verdict \
                     not dumped), {} not held (store full)",
                    h.held_written, h.held_discarded, h.not_held
                )?;
            }
        }
        for e in &self.dump_errors {
            writeln!(f, "dump error: {e}")?;
        }
        if self.interrupted {
            writeln!(f, "interrupted: every open flow was flushed")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap as StdMap;

    fn record(proto: u8, dport: u16, class: u16, packets: u64, bytes: u64) -> FlowRecord {
        let mut r = FlowRecord::default();
        r.key.proto = proto;
        r.key.dport = dport;
        r.key.sport = 40000;
        r.verdict.class = class;
        r.packets = [packets, 1];
        r.bytes = [bytes, 40];
        r
    }

    /// Pseudo-random records over few and many ports, protocols with and
    /// without ports, known and unknown classes (xorshift).
    fn records(n: usize, seed: u64) -> Vec<FlowRecord> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let proto = [6, 17, 132, 1, 58, 47, 0, 255][(x % 8) as usize];
                let dport = match x % 3 {
                    0 => (x >> 8) as u16,
                    _ => 443,
                };
                let class = match (x >> 40) % 4 {
                    0 => Verdict::UNKNOWN,
                    1 => (x >> 24) as u16 % 300,
                    _ => (x >> 24) as u16 % 4,
                };
                record(proto, dport, class, (x >> 50) % 100, (x >> 30) % 100_000)
            })
            .collect()
    }

    /// The same aggregates computed the obvious way.
    fn naive(recs: &[FlowRecord]) -> (StdMap<(u8, u16), Totals>, StdMap<u16, Totals>) {
        let (mut ports, mut apps) = (StdMap::new(), StdMap::new());
        for r in recs {
            let t = Totals {
                flows: 1,
                packets: r.packets[0] + r.packets[1],
                bytes: r.bytes[0] + r.bytes[1],
            };
            let port = if matches!(r.key.proto, 6 | 17 | 132) {
                r.key.dport
            } else {
                0
            };
            add(ports.entry((r.key.proto, port)).or_default(), t);
            add(apps.entry(r.verdict.class).or_default(), t);
        }
        (ports, apps)
    }

    fn fold(recs: &[FlowRecord]) -> Summary {
        let mut s = Summary::default();
        for chunk in recs.chunks(512) {
            let b = RecordBatch::from_records(chunk.to_vec());
            s.add(&b);
        }
        s
    }

    #[test]
    fn add_matches_naive_totals() {
        let recs = records(20_000, 0x1234_5678_9abc_def1);
        let s = fold(&recs);
        let (ports, apps) = naive(&recs);
        assert_eq!(s.records, 20_000);
        let got: StdMap<(u8, u16), Totals> = s.by_port().collect();
        assert_eq!(got, ports);
        let got_apps: StdMap<u16, Totals> = s.by_app.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(got_apps, apps);
        assert!(s.apps.touched.is_empty());
        assert!(s.apps.slots.iter().all(|t| *t == Totals::default()));
    }

    #[test]
    fn top_ports_by_bytes_then_key() {
        let recs = vec![
            record(17, 53, 0, 1, 100),
            record(6, 443, 0, 1, 500),
            record(6, 80, 0, 1, 100),
            record(1, 0, 0, 1, 100),
            record(6, 443, Verdict::UNKNOWN, 1, 500),
        ];
        let s = fold(&recs);
        let top = s.top_ports(3);
        let keys: Vec<(u8, u16)> = top.iter().map(|(k, _)| *k).collect();
        // 1 + 1 IP bytes (40 added per record): ties broken by (proto, port).
        assert_eq!(keys, vec![(6, 443), (1, 0), (6, 80)]);
        assert_eq!(
            top[0].1,
            Totals {
                flows: 2,
                packets: 4,
                bytes: 1080
            }
        );
        assert_eq!(s.by_app[&0].flows, 4);
        assert_eq!(s.by_app[&Verdict::UNKNOWN].flows, 1);
    }

    #[test]
    fn service_port_follows_the_handshake_then_the_lower_port() {
        let mut r = record(6, 51234, 0, 1, 1);
        r.key.sport = 443;
        let syn_ack = EarlyPkt {
            flags: SYN | ACK,
            ..EarlyPkt::default()
        };
        let syn = EarlyPkt {
            flags: SYN,
            ..EarlyPkt::default()
        };
        let ack = EarlyPkt {
            flags: ACK,
            ..EarlyPkt::default()
        };
        // Bidirectional: the receiver of the first packet, whatever it is.
        assert_eq!(service_port(&r, Some(&syn_ack), false), 51234);
        // Unidirectional reply direction: 443.
        assert_eq!(service_port(&r, Some(&syn_ack), true), 443);
        assert_eq!(service_port(&r, Some(&ack), true), 443);
        assert_eq!(service_port(&r, None, true), 443);
        // A SYN goes to the service, even on a higher port.
        r.key.sport = 40000;
        r.key.dport = 60001;
        assert_eq!(service_port(&r, Some(&syn), true), 60001);
        assert_eq!(service_port(&r, Some(&ack), true), 40000);
        // UDP: the lower port (DHCP server → client).
        let mut u = record(17, 68, 0, 1, 1);
        u.key.sport = 67;
        assert_eq!(service_port(&u, Some(&syn_ack), true), 67);
    }

    #[test]
    fn merge_equals_one_summary() {
        let a = records(3_000, 7);
        let b = records(5_000, 99);
        let mut merged = fold(&a);
        merged.merge(&fold(&b));
        let all: Vec<FlowRecord> = a.iter().chain(&b).copied().collect();
        let one = fold(&all);
        assert_eq!(merged.records, one.records);
        let m: Vec<_> = merged.by_port().collect();
        let o: Vec<_> = one.by_port().collect();
        assert_eq!(m, o);
        let mut ma: Vec<_> = merged.by_app.iter().collect();
        let mut oa: Vec<_> = one.by_app.iter().collect();
        ma.sort_by_key(|(k, _)| **k);
        oa.sort_by_key(|(k, _)| **k);
        assert_eq!(ma, oa);
    }
}
