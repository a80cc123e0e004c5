//! Flow table entries: one cache line of per-packet hot fields, cold
//! statistics apart.
//!
//! Contract: [`Hot`] is exactly 64 bytes and 64-byte aligned; the lookup path
//! reads only it. [`Cold`] holds the statistics a record needs and is touched
//! once per packet on update. Neither allocates.

use super::key::Key;
use crate::features::stats::DirStats;
use crate::features::tcp::TcpState;

/// Hot part of a flow: what lookup and expiry read.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
pub struct Hot {
    /// The flow key.
    pub key: Key,
    /// `IN_USE | CLIENT_IS_A | DECIDED | V6`.
    pub state: u8,
    /// Early packets recorded so far.
    pub n_early: u8,
    /// Verdict class ([`crate::flow::record::Verdict::UNKNOWN`] until decided).
    pub app: u16,
    /// Timestamp of the last packet.
    pub last_ts: u64,
    /// Low 32 bits of the key hash (home bucket for deletion).
    pub hash: u32,
    /// Verdict confidence × 65535.
    pub conf: u16,
    /// Packet index at which the verdict was taken.
    pub at: u8,
    /// Kept zero.
    pub _pad: u8,
}

/// Slot holds a live flow.
pub const IN_USE: u8 = 1;
/// The client (first sender) is endpoint `a` of the key.
pub const CLIENT_IS_A: u8 = 2;
/// The classifier has given its verdict.
pub const DECIDED: u8 = 4;
/// The flow is IPv6.
pub const V6: u8 = 8;

/// Cold part of a flow: statistics read when the flow ends.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cold {
    /// Timestamp of the first packet.
    pub first_ts: u64,
    /// Per-direction statistics, indexed by [`crate::flow::record::Dir`].
    pub dir: [DirStats; 2],
    /// TCP flag counts and close state.
    pub tcp: TcpState,
    /// MAC addresses of the first packet (source, destination).
    pub macs: [[u8; 6]; 2],
}

const _: () = assert!(std::mem::size_of::<Hot>() == 64);
