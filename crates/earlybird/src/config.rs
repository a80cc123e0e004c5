//! Run configuration.
//!
//! Contract: plain values with documented defaults; [`FlowConfig::validate`]
//! rejects impossible combinations with [`crate::Error::Config`].

use crate::features::early::MAX_EARLY;
use crate::time::{Nanos, SECOND};
use crate::{Error, Result};

/// How flows are formed and when they end.
#[derive(Debug, Clone)]
pub struct FlowConfig {
    /// Sessions (both directions in one flow) when true, the default.
    pub bidirectional: bool,
    /// A flow with no packet for this long ends (reason `idle`). Default 15 s.
    pub idle_timeout: Nanos,
    /// A flow older than this ends and a new one continues it (reason
    /// `active`). Default 1800 s.
    pub active_timeout: Nanos,
    /// After FIN in both directions or a RST, late packets (final ACKs,
    /// retransmitted RSTs) still join the flow for this long. Default 2 s.
    pub tcp_close_timeout: Nanos,
    /// N: early packets kept per flow (1..=32). Default 4.
    pub early_packets: usize,
    /// Flow table capacity per shard (pre-allocated). Default 1,000,000.
    pub max_flows: usize,
    /// Slots examined by the incremental expiry per batch of input. Default
    /// 64. With N shards each shard examines ⌈that / N⌉ slots of its own table per
    /// batch (it holds about 1/N of the flows).
    pub sweep_per_batch: usize,
    /// Keep size/inter-arrival moments and TCP flag counts per flow (128
    /// bytes per flow). Default true; false (`--stats basic`) leaves those
    /// record fields `None` (not measured: empty in CSV, `null` in JSON).
    pub full_stats: bool,
    /// Flow hash of the table index and tag. Default [`FlowHash::Fold`].
    pub hash: FlowHash,
    /// Per-flow analyzers turned on, by name ([`crate::analyze::AVAILABLE`];
    /// `--analyzer`). Default none.
    pub analyzers: Vec<String>,
    /// Intervals and thresholds of the `media` analyzer. Default: thesis
    /// Table 6.2 ([`crate::analyze::media::MediaConfig`]).
    pub media: crate::analyze::media::MediaConfig,
    /// Packet sampling before the flow table (`--sample`; each shard
    /// samples the packets it reads). Default none: every packet.
    pub sample: Option<crate::sample::Sampling>,
}

/// Which hash indexes the flow table (shards are picked by
/// the symmetric flow hash whatever this is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlowHash {
    /// The symmetric multiply–fold hash that also picks the shard
    /// (`Key::shard_hash` of the flow table): one hash per packet.
    #[default]
    Fold,
    /// RSS Toeplitz with the symmetric 0x6d5a key
    /// (`flow::key::toeplitz::hash`), as a NIC would compute it.
    Toeplitz,
}

impl Default for FlowConfig {
    fn default() -> Self {
        FlowConfig {
            bidirectional: true,
            idle_timeout: 15 * SECOND,
            active_timeout: 1800 * SECOND,
            tcp_close_timeout: 2 * SECOND,
            early_packets: 4,
            max_flows: 1_000_000,
            sweep_per_batch: 64,
            full_stats: true,
            hash: FlowHash::Fold,
            analyzers: Vec::new(),
            media: Default::default(),
            sample: None,
        }
    }
}

impl FlowConfig {
    /// Largest supported table capacity per shard (slot ids are 24-bit).
    pub const MAX_FLOWS: usize = (1 << 24) - 2;

    /// Checks the configuration.
    pub fn validate(&self) -> Result<()> {
        if self.early_packets == 0 || self.early_packets > MAX_EARLY {
            return Err(Error::Config(format!(
                "early packets must be 1..={MAX_EARLY}, got {}",
                self.early_packets
            )));
        }
        if self.max_flows == 0 || self.max_flows > Self::MAX_FLOWS {
            return Err(Error::Config(format!(
                "max flows per shard must be 1..={}, got {}",
                Self::MAX_FLOWS,
                self.max_flows
            )));
        }
        if self.idle_timeout == 0 || self.active_timeout == 0 {
            return Err(Error::Config("timeouts must be positive".into()));
        }
        crate::analyze::check_names(&self.analyzers).map_err(|e| Error::Config(e.to_string()))?;
        self.media
            .check()
            .map_err(|e| Error::Config(e.to_string()))?;
        Ok(())
    }
}
