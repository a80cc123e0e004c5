//! Counters of one shard, merged into a run total at the end.
//!
//! Contract: plain `u64` fields owned by one thread (no atomics, no locks on
//! the packet path); [`Counters::merge`] adds another shard's counters.
//! Packets that belong to no flow are counted by shard 0 only, so the sums
//! do not depend on the number of shards.

use crate::decode::Skip;
use crate::flow::record::EndReason;
use crate::flow::table::FlowCounters;

/// Counters of a shard or of a whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets read from the inputs (counted by shard 0).
    pub packets_read: u64,
    /// Original (on-the-wire) bytes of the packets read (shard 0).
    pub bytes_read: u64,
    /// Packets accounted to a flow.
    pub packets_flowed: u64,
    /// IP bytes accounted to flows.
    pub ip_bytes_flowed: u64,
    /// Packets skipped, by [`Skip`] reason.
    pub skipped: [u64; Skip::COUNT],
    /// Packets on pcapng interfaces with an unsupported link type.
    pub unsupported_link: u64,
    /// Flow table counters.
    pub flows: FlowCounters,
    /// Records (of every kind) dropped because the exporter queue was full
    /// (drop policy).
    pub export_dropped: u64,
    /// Live capture: packets the kernel offered the sockets (dropped ones
    /// included).
    pub live_offered: u64,
    /// Live capture: packets the kernel dropped because a ring was full.
    pub live_dropped: u64,
    /// Live capture: ring frame headers that pointed outside their block.
    pub live_bad_frames: u64,
    /// Live capture: times the interface's link went down and the capture
    /// waited for it (every shard's socket sees each; merged as the most).
    pub live_link_downs: u64,
    /// AF_XDP: the sockets' statistics (`XDP_STATISTICS`): frames dropped
    /// for other reasons than a full ring, dropped with the receive ring
    /// full, times the fill ring had no chunk, invalid descriptors; then
    /// frames handed to another shard, frames the exchange between
    /// shards had no room for, and frames handed over that the receiving
    /// shard ran (`source/xdp_mesh.rs`).
    pub live_xdp: [u64; 7],
    /// Live capture: packets stamped by the NIC (`source/hwstamp.rs`).
    pub live_ts_hardware: u64,
    /// Live capture: packets stamped by the kernel on arrival (software).
    pub live_ts_software: u64,
    /// Live capture: packets without a stamp (timed when the kernel filled
    /// the ring).
    pub live_ts_none: u64,
    /// Flow-table memory in use at the end of input (bytes, see
    /// `FlowTable::memory_bytes`).
    pub table_bytes: u64,
    /// Bytes of flow-table memory mapped from the reserved huge-page pool
    /// (0 = transparent huge pages; see `flow/arena.rs`).
    pub table_pool_bytes: u64,
    /// Packets stamped earlier than the latest time seen before their
    /// batch (timestamps went backwards inside an input); their flows were
    /// timed from that latest time.
    pub ts_backwards: u64,
    /// The largest such step back, in ns (merged as the maximum).
    pub ts_max_back: u64,
    /// Inputs that started before the latest time seen and so began a new
    /// time domain (open flows ended first); counted by shard 0.
    pub time_domains: u64,
    /// Inputs whose first packets look batch-stamped (most have the
    /// timestamp of the packet before: `source/retime.rs`; examined by shard 0).
    pub ts_batch_stamped: u64,
    /// Packets given a new time by `--timestamps udts|wdts`.
    pub ts_retimed: u64,
    /// Packets read and skipped by `--sample` (counted by the shard that
    /// read them; also in `packets_read`).
    pub sampled_out: u64,
    /// Wire bytes of those packets (also in `bytes_read`).
    pub sampled_out_bytes: u64,
    /// Packets the capture filter (`--filter`) left out: never read by the
    /// shards (not in `packets_read`).
    pub filtered: u64,
}

impl Counters {
    /// Adds `o` into `self`.
    pub(crate) fn merge(&mut self, o: &Counters) {
        self.packets_read += o.packets_read;
        self.bytes_read += o.bytes_read;
        self.packets_flowed += o.packets_flowed;
        self.ip_bytes_flowed += o.ip_bytes_flowed;
        for i in 0..Skip::COUNT {
            self.skipped[i] += o.skipped[i];
        }
        self.unsupported_link += o.unsupported_link;
        self.flows.created += o.flows.created;
        for i in 0..EndReason::COUNT {
            self.flows.ended[i] += o.flows.ended[i];
        }
        self.flows.classified += o.flows.classified;
        self.flows.peak_flows += o.flows.peak_flows;
        self.flows.classify_queue_full += o.flows.classify_queue_full;
        self.flows.verdicts_late += o.flows.verdicts_late;
        self.export_dropped += o.export_dropped;
        self.live_offered += o.live_offered;
        self.live_dropped += o.live_dropped;
        self.live_bad_frames += o.live_bad_frames;
        self.live_link_downs = self.live_link_downs.max(o.live_link_downs);
        for (a, b) in self.live_xdp.iter_mut().zip(o.live_xdp) {
            *a += b;
        }
        self.live_ts_hardware += o.live_ts_hardware;
        self.live_ts_software += o.live_ts_software;
        self.live_ts_none += o.live_ts_none;
        self.table_bytes += o.table_bytes;
        self.table_pool_bytes += o.table_pool_bytes;
        self.ts_backwards += o.ts_backwards;
        self.ts_max_back = self.ts_max_back.max(o.ts_max_back);
        self.time_domains += o.time_domains;
        self.ts_batch_stamped += o.ts_batch_stamped;
        self.ts_retimed += o.ts_retimed;
        self.sampled_out += o.sampled_out;
        self.sampled_out_bytes += o.sampled_out_bytes;
        self.filtered += o.filtered;
    }

    /// What grew since `base` (an earlier copy of the same counters): the
    /// packet, byte, skip and flow counts; the figures that are not sums
    /// over time (peaks, memory, the largest step back) are left 0.
    pub(crate) fn since(&self, base: &Counters) -> Counters {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let mut c = Counters {
            packets_read: d(self.packets_read, base.packets_read),
            bytes_read: d(self.bytes_read, base.bytes_read),
            packets_flowed: d(self.packets_flowed, base.packets_flowed),
            ip_bytes_flowed: d(self.ip_bytes_flowed, base.ip_bytes_flowed),
            unsupported_link: d(self.unsupported_link, base.unsupported_link),
            export_dropped: d(self.export_dropped, base.export_dropped),
            ts_backwards: d(self.ts_backwards, base.ts_backwards),
            sampled_out: d(self.sampled_out, base.sampled_out),
            sampled_out_bytes: d(self.sampled_out_bytes, base.sampled_out_bytes),
            ..Counters::default()
        };
        for i in 0..Skip::COUNT {
            c.skipped[i] = d(self.skipped[i], base.skipped[i]);
        }
        c.flows.created = d(self.flows.created, base.flows.created);
        for i in 0..EndReason::COUNT {
            c.flows.ended[i] = d(self.flows.ended[i], base.flows.ended[i]);
        }
        c.flows.classified = d(self.flows.classified, base.flows.classified);
        c
    }

    /// Total packets skipped for any reason.
    pub fn skipped_total(&self) -> u64 {
        self.skipped.iter().sum::<u64>() + self.unsupported_link
    }

    /// Flows ended for any reason.
    pub fn flows_ended(&self) -> u64 {
        self.flows.ended.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_every_field() {
        let mut a = Counters {
            packets_read: 1,
            skipped: [1, 0, 2, 0, 0, 0],
            ..Default::default()
        };
        let mut b = a;
        b.flows.ended[EndReason::Fin as usize] = 3;
        b.export_dropped = 4;
        b.live_offered = 9;
        b.live_dropped = 5;
        b.live_bad_frames = 1;
        a.merge(&b);
        assert_eq!(
            (a.live_offered, a.live_dropped, a.live_bad_frames),
            (9, 5, 1)
        );
        assert_eq!(a.packets_read, 2);
        assert_eq!(a.skipped_total(), 6);
        assert_eq!(a.flows_ended(), 3);
        assert_eq!(a.export_dropped, 4);
    }
}
