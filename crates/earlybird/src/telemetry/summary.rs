//! The end-of-run summary: what a user reads after `earlybird flows`.
//!
//! Contract: [`Summary::add`] folds a batch of finished records into
//! per-(protocol, server port) and per-application totals (a few hash-map
//! updates per record, on the exporter thread, never on a shard);
//! [`Report`] prints the counters and the top entries.

use std::fmt;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use super::Counters;
use crate::decode::Skip;
use crate::flow::record::{EndReason, RecordBatch, Verdict};
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

/// Aggregates over finished records.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    /// Totals per (IP protocol, server port).
    pub by_port: HashMap<(u8, u16), Totals>,
    /// Totals per application class (index into class names).
    pub by_app: HashMap<u16, Totals>,
    /// Records seen.
    pub records: u64,
}

impl Summary {
    /// Folds a batch in.
    pub fn add(&mut self, batch: &RecordBatch) {
        for r in &batch.records {
            let t = Totals {
                flows: 1,
                packets: r.packets[0] + r.packets[1],
                bytes: r.bytes[0] + r.bytes[1],
            };
            let port = match r.key.proto {
                6 | 17 | 132 => r.key.dport,
                _ => 0,
            };
            add(self.by_port.entry((r.key.proto, port)).or_default(), t);
            add(self.by_app.entry(r.verdict.class).or_default(), t);
            self.records += 1;
        }
    }

    /// Merges another summary.
    pub fn merge(&mut self, o: &Summary) {
        for (k, v) in &o.by_port {
            add(self.by_port.entry(*k).or_default(), *v);
        }
        for (k, v) in &o.by_app {
            add(self.by_app.entry(*k).or_default(), *v);
        }
        self.records += o.records;
    }

    /// The `n` largest (protocol, port) groups by bytes.
    pub fn top_ports(&self, n: usize) -> Vec<((u8, u16), Totals)> {
        let mut v: Vec<_> = self.by_port.iter().map(|(k, t)| (*k, *t)).collect();
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
    /// Class names of the model used (empty when none).
    pub classes: Arc<[String]>,
    /// Processing time in seconds (wall clock, for the summary only).
    pub seconds: f64,
    /// Whether the run was interrupted by a signal.
    pub interrupted: bool,
    /// DSCP marking counters, when marking was on and succeeded.
    pub marked: Option<crate::mark::MarkCounters>,
    /// Anonymous resident memory of the process when the input ended,
    /// before the final flush (Linux `RssAnon`), in bytes.
    pub rss_anon_end_of_input: Option<u64>,
}

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
        let ends: Vec<String> = EndReason::ALL
            .iter()
            .filter(|r| c.flows.ended[**r as usize] > 0)
            .map(|r| format!("{} {}", r.name(), c.flows.ended[*r as usize]))
            .collect();
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
        for e in &self.output_errors {
            writeln!(f, "output error: {e}")?;
        }
        if let Some(m) = &self.marked {
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
        if self.interrupted {
            writeln!(f, "interrupted: every open flow was flushed")?;
        }
        Ok(())
    }
}
