//! Flow table entries: one cache line of per-packet hot fields, cold
//! statistics apart.
//!
//! Contract: [`Hot`] is exactly 64 bytes and 64-byte aligned; lookup and
//! expiry read only it. [`Cold`] holds the counters every record has and
//! [`Extra`] the full statistics (only allocated with `--stats full`); both
//! are touched once per packet on update. Nothing here allocates.

use super::arena::ZeroValid;
use super::key::Key;
use super::record::EarlyPkt;
use crate::features::stats::Moments;
use crate::features::tcp::{FlagCounts, TcpState};

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
    /// Whole seconds of the first packet's timestamp (coarse active-timeout
    /// check without touching the cold part).
    pub first_s: u32,
}

/// Slot holds a live flow.
pub const IN_USE: u8 = 1;
/// The client (first sender) is endpoint `a` of the key.
pub const CLIENT_IS_A: u8 = 2;
/// The classifier has given its verdict.
pub const DECIDED: u8 = 4;
/// The flow is IPv6.
pub const V6: u8 = 8;
/// The TCP connection has closed (FIN both ways or RST).
pub const CLOSED: u8 = 16;
/// A classification job for this flow is on the classifier pool.
pub const PENDING: u8 = 32;

/// Cold part of a flow: counters a record always has. 48 bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cold {
    /// Timestamp of the first packet.
    pub first_ts: u64,
    /// Bytes (sum of IP lengths) per direction.
    pub bytes: [u64; 2],
    /// Packets per direction (a flow ends with reason `active` before one
    /// overflows).
    pub packets: [u32; 2],
    /// MAC addresses of the first packet (source, destination).
    pub macs: [[u8; 6]; 2],
    /// Verdict confidence × 65535.
    pub conf: u16,
    /// Packet index at which the verdict was taken.
    pub at: u8,
    /// TCP close state.
    pub tcp: TcpState,
}

/// What `--stats full` (the default) adds per flow: size and inter-arrival
/// moments and TCP flag counts per direction. 160 bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extra {
    /// Per-direction moments, indexed by [`crate::flow::record::Dir`].
    pub dir: [Moments; 2],
    /// TCP flag counts per direction.
    pub flags: FlagCounts,
}

// SAFETY (all four): integers, floats, arrays of them, and fieldless enums
// whose zero discriminant exists (Dir::Fwd, TcpState's u8); zero is valid.
unsafe impl ZeroValid for Hot {}
unsafe impl ZeroValid for Cold {}
unsafe impl ZeroValid for Extra {}
unsafe impl ZeroValid for EarlyPkt {}

const _: () = assert!(std::mem::size_of::<Hot>() == 64);
const _: () = assert!(std::mem::size_of::<Cold>() == 48);
const _: () = assert!(std::mem::size_of::<Extra>() == 160);
