//! Flow table entries: one cache line per flow holding everything a packet
//! updates, the rest in small parallel arrays.
//!
//! Contract: [`Entry`] is exactly 64 bytes and 64-byte aligned; lookup,
//! per-packet update and expiry read and write only it (plus the early
//! packet array while a flow has fewer than N packets, and [`FullStats`] with
//! `--stats full`). [`EntryTail`] holds what is written once when a flow starts
//! (its MACs) and the rarely changing high bits of the byte counters;
//! [`V6Addrs`] the 16-byte addresses of IPv6 flows, [`IcmpHead`] the ICMP type
//! and code of ICMP flows. Nothing here allocates.
//!
//! Measured reason for this layout (BENCHMARKS.md "Memory"): with the key
//! compacted to 20 bytes, the hot line absorbs the counters that used to sit
//! in a second 48-byte line, so a packet of a known flow touches one line
//! instead of two, and a flow costs 120 bytes instead of 157 (basic stats).

use super::arena::ZeroValid;
use super::key::TableKey;
use crate::features::early::EarlyPkt;
use crate::features::stats::Moments;
use crate::features::tcp::{FlagCounts, FlagLanes, TcpState};

/// A flow's hot state: what lookup, update and expiry use.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
pub struct Entry {
    /// The flow key (compact form; IPv6 addresses are in [`V6Addrs`]).
    pub key: TableKey,
    /// `IN_USE | CLIENT_IS_A | DECIDED | SPILLED | CLOSED | PENDING | HELD |
    /// UNFOLLOWED`.
    pub state: u8,
    /// Early packets recorded so far.
    pub n_early: u8,
    /// Verdict class ([`crate::classify::Verdict::UNKNOWN`] until decided).
    pub app: u16,
    /// Low 32 bits of the key hash (home bucket for deletion).
    pub hash: u32,
    /// Packets per direction (a flow ends with reason `active` before one
    /// overflows).
    pub packets: [u32; 2],
    /// Low 32 bits of the bytes (sum of IP lengths) per direction; the
    /// carries go to [`EntryTail::bytes_hi`].
    pub bytes_lo: [u32; 2],
    /// Verdict confidence × 65535.
    pub conf: u16,
    /// Packet index at which the verdict was taken.
    pub at: u8,
    /// TCP close state (bits 0–2 of its byte) and, in bits 4–7, which of
    /// the flow's packets a consumer reads ([`FOLLOW_SHIFT`]).
    pub tcp: TcpState,
    /// Timestamp of the first packet.
    pub first_ts: u64,
    /// Timestamp of the last packet.
    pub last_ts: u64,
}

impl Entry {
    /// Bytes sent in direction `d`, with the high bits from `tail`.
    #[inline]
    pub fn bytes(&self, tail: &EntryTail, d: usize) -> u64 {
        (tail.bytes_hi[d] as u64) << 32 | self.bytes_lo[d] as u64
    }

    /// Client port and server port.
    #[inline]
    pub fn client_server_ports(&self) -> (u16, u16) {
        if self.state & CLIENT_IS_A != 0 {
            (self.key.pa, self.key.pb)
        } else {
            (self.key.pb, self.key.pa)
        }
    }
}

/// Slot holds a live flow.
pub const IN_USE: u8 = 1;
/// The client (first sender) is endpoint `a` of the key.
pub const CLIENT_IS_A: u8 = 2;
/// The classifier has given its verdict.
pub const DECIDED: u8 = 4;
/// The TCP connection has closed (FIN both ways or RST).
pub const CLOSED: u8 = 16;
/// A classification job for this flow is on the classifier pool.
pub const PENDING: u8 = 32;
/// The packet dumper holds copies of this flow's packets from before its
/// verdict (`--dump-app`; `flow/held.rs`).
pub const HELD: u8 = 64;
/// The shard's frame tap (the call stage's) said it wants none of this
/// flow's next packets (`dump::FrameTap::flow_frame`).
pub const UNFOLLOWED: u8 = 128;

/// Where in [`Entry::tcp`]'s byte the flow table keeps which packets of
/// the flow its consumers read (bits 4–7: the consumers'
/// `crate::flow::consumer::Follows` mask, its client and server pairs
/// turned into endpoint `a`'s and `b`'s), so that a packet no consumer
/// reads costs one test of the line the update already holds.
pub const FOLLOW_SHIFT: u32 = 4;

/// What a flow writes once, and the carries of its byte counters. 16 bytes.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub struct EntryTail {
    /// MAC addresses of the first packet (source, destination).
    pub macs: [[u8; 6]; 2],
    /// Bits 32..48 of the byte counters per direction. A flow ends with
    /// reason `active` before its packet counter overflows, and an IP packet
    /// is under 2^16 bytes, so 48 bits never overflow.
    pub bytes_hi: [u16; 2],
}

/// The 16-byte addresses of an IPv6 flow (endpoints `a`, `b`).
pub type V6Addrs = [[u8; 16]; 2];

/// Type and code of an ICMP / ICMPv6 flow's first packet, in a side array
/// touched only by ICMP flows: `[1, type, code]`, or all zero when that
/// packet was too short to carry them.
pub type IcmpHead = [u8; 3];

/// One direction's `--stats full` state in one cache line: its moments
/// and TCP flag counts (a packet updates only its direction's line).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
pub struct DirStats {
    /// Size and inter-arrival moments.
    pub moments: Moments,
    /// TCP flag counts since the last spill into [`FlagCounts`] (see
    /// [`crate::features::tcp::SPILL_EVERY`]).
    pub flags: FlagLanes,
}

/// What `--stats full` (the default) adds per flow: one [`DirStats`] line
/// per direction, indexed by [`crate::features::Dir`]. 128 bytes. A
/// flow that has spilled flag counts ([`SPILLED`]) keeps them in a side
/// array committed only where used.
#[derive(Debug, Clone, Copy, Default)]
pub struct FullStats {
    /// Per-direction statistics.
    pub dir: [DirStats; 2],
}

/// The flow has spilled flag counts in the table's side array.
pub const SPILLED: u8 = 8;

// The slot types are integers, floats, arrays of them, and fieldless enums
// whose zero discriminant exists; for each, all-zero bytes are a value.
// SAFETY: integers, arrays of integers, a `TableKey` (integers) and a
// `TcpState` (one u8).
unsafe impl ZeroValid for Entry {}
// SAFETY: arrays of integers.
unsafe impl ZeroValid for EntryTail {}
// SAFETY: `Moments` (integers and floats) and `FlagLanes` (integers), per
// direction.
unsafe impl ZeroValid for FullStats {}
// SAFETY: integers and a `Dir`, whose zero discriminant is `Dir::Fwd`.
unsafe impl ZeroValid for EarlyPkt {}
// SAFETY: an array of bytes.
unsafe impl ZeroValid for V6Addrs {}
// SAFETY: an array of bytes.
unsafe impl ZeroValid for IcmpHead {}
// SAFETY: an array of integers.
unsafe impl ZeroValid for FlagCounts {}
// SAFETY: arrays of integers and of `bool`s (zero: false).
unsafe impl ZeroValid for crate::analyze::TcpStarts {}

const _: () = assert!(std::mem::size_of::<Entry>() == 64);
const _: () = assert!(std::mem::size_of::<EntryTail>() == 16);
const _: () = assert!(std::mem::size_of::<DirStats>() == 64);
const _: () = assert!(std::mem::size_of::<FullStats>() == 128);
