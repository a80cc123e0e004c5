//! What a flow table tells the parts that follow its flows: a flow
//! starts, a packet of it was accounted, it got its verdict, it ended.
//!
//! Contract: a [`FlowTable`](super::table::FlowTable) is generic over one
//! [`Consumer`] (`()` for none), called with static dispatch: the table
//! knows no consumer, only this trait. The per-packet call
//! ([`Consumer::packet`]) is compiled in or out by the caller's `PACKETS`
//! flag (picked once per batch from [`Consumer::reads_packets`]) and made
//! only for the packets the consumers say they follow ([`Follows`]: when
//! the flow opens and after each such call; the table keeps it in the
//! flow's entry, so a packet no consumer follows costs one test); the
//! other calls come once per flow. A consumer reads the flow's lines in
//! the table through [`FlowRef`] and keeps its own state (per slot when it
//! has per-flow state: a slot is reused by the next flow after
//! [`Consumer::end`], and [`Consumer::start`] says so). What a consumer
//! gathers (rows, sums, ended flows) the shard takes from it between
//! batches. Several consumers are one: the shard's registry
//! (`shard/consumers.rs`) calls each that is on, in a fixed order.

use super::entry::{Entry, EntryTail, V6Addrs, CLIENT_IS_A};
use super::packet::{Payload, Pkt};
use super::prefault::Region;
use super::record::{EndReason, RecordBatch};
use crate::analyze::TcpStarts;
use crate::classify::inline::Inline;

/// A live flow's lines in the table, lent to a consumer for one call.
#[derive(Clone, Copy)]
pub struct FlowRef<'a> {
    /// The flow's slot (stable while it lives; the key of per-flow state).
    pub slot: usize,
    /// Its entry line: key, state bits, counters, timestamps, verdict.
    pub entry: &'a Entry,
    /// Its tail: MACs, the byte counters' high bits.
    pub tail: &'a EntryTail,
    /// The two addresses of an IPv6 flow (`None` for IPv4).
    pub wide: Option<&'a V6Addrs>,
    /// Where a TCP flow's streams start, so far, in the per-packet call
    /// ([`Consumer::packet`]) when a consumer reads them
    /// ([`Consumer::reads_tcp_starts`]); else, and in the other calls,
    /// [`TcpStarts::NONE`].
    pub tcp_starts: &'a TcpStarts,
}

impl FlowRef<'_> {
    /// Packets of both directions so far.
    #[inline]
    pub fn packets(&self) -> u64 {
        u64::from(self.entry.packets[0]) + u64::from(self.entry.packets[1])
    }

    /// IP bytes of both directions so far.
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.entry.bytes(self.tail, 0) + self.entry.bytes(self.tail, 1)
    }

    /// Whether packet `p` was sent by the flow's client (the sender of its
    /// first packet).
    #[inline]
    pub fn sent_by_client(&self, p: &Pkt) -> bool {
        p.from_a == (self.entry.state & CLIENT_IS_A != 0)
    }
}

/// Which packets of a flow a consumer reads ([`Consumer::follows_new`],
/// [`Consumer::packet`]); defined beside the analyzers, which compute it
/// and sit in a lower layer (docs/ARCHITECTURE.md, "Layers").
pub use crate::analyze::{Follows, FOLLOW_ALL};

/// A part that follows a table's flows (see the module docs). Every
/// method has a default that does nothing.
pub trait Consumer {
    /// Whether [`Self::packet`] does anything (the shard then runs the
    /// table's update with the per-packet call compiled in).
    fn reads_packets(&self) -> bool {
        false
    }

    /// Whether [`Self::packet`] reads the transport payload (the shard then
    /// looks it up for each packet).
    fn reads_payload(&self) -> bool {
        false
    }

    /// Whether [`Self::packet`] reads the IP packet ([`Payload::ip`]).
    fn reads_ip(&self) -> bool {
        false
    }

    /// Whether [`Self::packet`] reads [`FlowRef::tcp_starts`]: the table
    /// then keeps, from the flow's start, the sequence number of each SYN
    /// without payload of a side the consumers follow (any of its
    /// packets, with payload or not), whether or not they are shown it
    /// (its IP packet is then looked up, [`Self::reads_ip`] or not). A
    /// SYN with payload is shown to a consumer that follows its side's
    /// packets with payload, to read itself.
    fn reads_tcp_starts(&self) -> bool {
        false
    }

    /// The table holds at most `capacity` slots: a consumer that keeps
    /// arrays indexed by slot reserves them for that many now, so that
    /// they no longer move, and returns them for the table's helper to
    /// populate ahead of use with its own (`flow/prefault.rs`: the pages
    /// of the next slots are cleared on a spare core, not by the shard at
    /// a flow's start). Called when the table starts the helper or
    /// populates its first slots.
    fn slot_arrays(&mut self, capacity: usize) -> Vec<Region> {
        let _ = capacity;
        Vec::new()
    }

    /// A flow starts in `slot` (before its first packet is accounted).
    #[inline(always)]
    fn start(&mut self, slot: usize) {
        let _ = slot;
    }

    /// Packet `p` of `flow` was accounted (its counters include it);
    /// `pl` is its payload when [`Self::reads_payload`]. Returns which of
    /// the flow's later packets it reads ([`Follows`]), or `None` to end
    /// the flow after the packet (its record says `active`).
    #[inline(always)]
    fn packet(&mut self, flow: FlowRef<'_>, p: &Pkt, pl: Payload<'_>) -> Option<Follows> {
        let _ = (flow, p, pl);
        Some(FOLLOW_ALL)
    }

    /// The flow just started in `flow.slot` (after [`Self::start`]; its
    /// first packet is not accounted yet: its counters are zero, its
    /// timestamps and client are the first packet's).
    #[inline(always)]
    fn opened(&mut self, flow: FlowRef<'_>) {
        let _ = flow;
    }

    /// Which packets of `flow`, which just opened (after [`Self::start`]
    /// and [`Self::opened`]), [`Self::packet`] is to be called for
    /// ([`Follows`]); only asked when [`Self::reads_packets`]. The table
    /// keeps it, and what each packet call returns, in the flow's entry
    /// (`entry::FOLLOW_SHIFT`): a packet outside it costs one test of
    /// that line, no call, and its payload is never sliced.
    #[inline(always)]
    fn follows_new(&self, flow: FlowRef<'_>) -> Follows {
        let _ = flow;
        FOLLOW_ALL
    }

    /// Whether showing packet `p` of `flow` to [`Self::packet`] would
    /// change nothing the consumer keeps or records and leave it following
    /// none of the flow's packets, when `p` is the flow's first packet
    /// (the flow just opened; the packet accounted) and carries payload
    /// `pl` (not empty). The table then makes no [`Self::packet`] call for
    /// it and follows none of the flow's packets. Only asked when
    /// [`Self::reads_packets`]; `false` is always right.
    #[inline(always)]
    fn declines_first(&self, flow: FlowRef<'_>, p: &Pkt, pl: Payload<'_>) -> bool {
        let _ = (flow, p, pl);
        false
    }
    /// `flow` just got its verdict (in its entry); `model` names its class.
    #[inline(always)]
    fn verdict(&mut self, flow: FlowRef<'_>, model: &Inline) {
        let _ = (flow, model);
    }

    /// `flow` ends with `reason`; its snapshot is the last one in `out`
    /// (a consumer that adds record fields appends their row to
    /// `out.analyzed`).
    #[inline(always)]
    fn end(&mut self, flow: FlowRef<'_>, reason: EndReason, out: &mut RecordBatch) {
        let _ = (flow, reason, out);
    }
}

/// No consumer.
impl Consumer for () {}
