//! What the flow table takes per packet: the [`Pkt`] a shard's first pass
//! builds (key, hash, timestamp, sizes, flags), what a packet of the
//! general decoding path carries beside it ([`V6Icmp`]: IPv6 addresses, ICMP
//! type) and its transport payload for the analyzers ([`Payload`]).
//!
//! Contract: plain `Copy` values, no allocation; a `Pkt` is 56 bytes so a
//! batch of them stays small in the shard batches shards exchange.

use super::entry::V6Addrs;
use super::key::{Key, TableKey};
use crate::decode::icmp::Icmp;
use crate::decode::ipproto;
use crate::time::Nanos;

/// One packet as the flow table needs it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pkt {
    /// Flow key (canonical in bidirectional mode).
    pub key: TableKey,
    /// Table hash of the flow (the same for every packet of a flow).
    pub hash: u64,
    /// Timestamp.
    pub ts: Nanos,
    /// IP length.
    pub size: u16,
    /// TCP flags (0 when not TCP).
    pub flags: u8,
    /// Sent by endpoint `a` of the key.
    pub from_a: bool,
    /// Source and destination MAC.
    pub macs: [[u8; 6]; 2],
    /// Index of the packet in its batch.
    pub idx: u16,
    /// Offset of the innermost IP header in the packet.
    pub ip_offset: u16,
}

/// A packet's transport payload, for the analyzers that read it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Payload<'a> {
    /// The payload as captured (cut by the snaplen).
    pub bytes: &'a [u8],
    /// Its length according to the headers.
    pub len: u16,
    /// The (innermost) IP packet it ends, from the IP header, as captured
    /// (empty unless an analyzer on reads it).
    pub ip: &'a [u8],
}

impl Payload<'_> {
    /// No payload (no analyzer reads it).
    pub const NONE: Payload<'static> = Payload {
        bytes: &[],
        len: 0,
        ip: &[],
    };
}

/// What a packet of the general decoding path carries beside its [`Pkt`]
/// (read only by IPv6 and ICMP flows; the fast path's IPv4 TCP/UDP packets
/// need none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct V6Icmp {
    /// The 16-byte addresses of endpoints `a`, `b` of an IPv6 packet.
    pub wide: V6Addrs,
    /// Type and code of an ICMP / ICMPv6 packet that has them.
    pub icmp: Option<Icmp>,
}

impl V6Icmp {
    /// The side of an IPv6 packet of no ICMP type.
    pub fn of_v6(wide: V6Addrs) -> V6Icmp {
        V6Icmp { wide, icmp: None }
    }
}

/// True for the protocols whose flows record an ICMP type and code.
#[inline(always)]
pub fn is_icmp(proto: u8) -> bool {
    proto == ipproto::ICMP || proto == ipproto::ICMPV6
}

impl Pkt {
    /// The packet of a full key (`v6`: IPv6 addresses, which then go to
    /// [`FlowTable::packet_wide`] beside it), hashed with the default table
    /// hash; the other fields are zero.
    pub fn from_key(key: &Key, v6: bool, from_a: bool) -> Pkt {
        let tk = TableKey::from_key(key, v6);
        Pkt {
            key: tk,
            hash: key.shard_hash(),
            from_a,
            ..Pkt::default()
        }
    }
}
