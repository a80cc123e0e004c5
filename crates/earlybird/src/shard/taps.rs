//! The registry of a shard's packet taps: the parts shown the packets
//! themselves (their bytes, in input order), beside the flow consumers
//! that are shown flows (`shard/consumers.rs`).
//!
//! Contract: a packet tap implements [`PacketTap`]; [`PacketTaps`] holds
//! one `Option` per registered tap (`None`: off) and calls each one on,
//! in registry order, with static dispatch. The shard's second pass has
//! one path: per batch it asks [`PacketTaps::begin_batch`] once which
//! taps want the flow packets one by one, and only then does each packet
//! go to them (`PacketTaps::flow_packet`, inlined into the loop: a
//! registry call cost about 50 instructions a packet); with no tap on, a
//! packet costs one test of a local flag. When every tap that wants them
//! needs only the packets of the flows it follows
//! ([`PacketTap::followed_only`]: the call tap in a batch without packets
//! of no flow among its flow packets), a packet of a flow the table marks
//! as not followed is not shown but counted, and the count handed over
//! ([`PacketTap::skipped`]) before the batch ends. After the
//! batch's flow packets every tap on gets [`PacketTap::batch_done`]
//! (one shard: the whole batch, packets of no flow included), and after
//! the sweep the ended flows with held packets ([`PacketTap::flows_ended`]).
//! With several shards the reader puts each packet's place beside it in
//! the shard batch only when [`PacketTaps::on_shard_batches`], and the
//! packets of no flow go to [`PacketTap::no_flow`] at their place.
//! Adding a tap: its own file implementing `PacketTap`, one line in
//! `registry!` below, and where the run turns it on.

use crate::dump::{FrameTap, Taps};
use crate::flow::held::HeldEnd;
use crate::flow::packet::{Pkt, V6Icmp};
use crate::flow::table::FlowTable;
use crate::mark::Marker;
use crate::source::PacketRef;

use super::consumers::Consumers;

/// One packet of a flow, after its flow was updated, as a tap sees it.
#[derive(Clone, Copy)]
pub struct TapPacket<'a> {
    /// The bytes of the batch.
    pub data: &'a [u8],
    /// Where the packet is in `data`.
    pub r: &'a PacketRef,
    /// The packet as the shard decoded it.
    pub p: &'a Pkt,
    /// What an IPv6 or ICMP packet carries beside it.
    pub side: &'a V6Icmp,
    /// The slot of its flow in the table.
    pub slot: usize,
    /// One shard: the whole batch (`p.idx` is the packet's place in it);
    /// empty for a shard batch of a run of several shards.
    pub refs: &'a [PacketRef],
}

impl TapPacket<'_> {
    /// The shard read the whole batch itself (one shard).
    #[inline]
    pub fn solo(&self) -> bool {
        !self.refs.is_empty()
    }
}

/// A part shown the packets a shard runs (see the module docs). Every
/// method but [`Self::each_packet`] has a default that does nothing.
pub trait PacketTap {
    /// Whether [`Self::flow_packet`] is to be called for each flow packet
    /// of a batch read by this shard alone (`solo`) or of a shard batch.
    fn each_packet(&self, solo: bool) -> bool;

    /// A batch is about to run; `gaps`: it was read by this shard alone
    /// and has packets of no flow among its flow packets.
    fn batch_start(&mut self, gaps: bool) {
        let _ = gaps;
    }
    /// Whether, in the batch begun, this tap does nothing with a packet
    /// of a flow the table does not follow ([`FlowTable::followed`]) but
    /// count it: the shard may then count such packets for it
    /// ([`Self::skipped`]) instead of showing them.
    fn followed_only(&self) -> bool {
        false
    }

    /// `n` packets of flows not followed were not shown this batch
    /// ([`Self::followed_only`]); called before [`Self::batch_done`].
    fn skipped(&mut self, n: u64) {
        let _ = n;
    }

    /// A packet of a flow, in input order, after its flow was updated.
    fn flow_packet(&mut self, at: &TapPacket<'_>, table: &mut FlowTable<Consumers>) {
        let _ = (at, table);
    }

    /// Several shards: a packet of no flow the shard read, at its place
    /// among its own shard batch's packets.
    fn no_flow(&mut self, data: &[u8], r: &PacketRef) {
        let _ = (data, r);
    }

    /// The batch's (or the shard batch part's) flow packets have been run;
    /// `refs` is the whole batch with one shard, else empty.
    fn batch_done(&mut self, data: &[u8], refs: &[PacketRef]) {
        let _ = (data, refs);
    }

    /// Flows with held packets ended (`ended`, drained by a tap that holds
    /// packets).
    fn flows_ended(&mut self, ended: &mut Vec<HeldEnd>) {
        let _ = ended;
    }
}

/// Declares the taps a shard can have: `name: Type` per line, called in
/// this order.
macro_rules! registry {
    ($($(#[$doc:meta])* $name:ident: $ty:ty),* $(,)?) => {
        /// The packet taps of one shard (`None`: off).
        #[derive(Default)]
        pub struct PacketTaps {
            $($(#[$doc])* pub $name: Option<$ty>,)*
            /// The taps that want the current batch's flow packets one by
            /// one, a bit each in registry order ([`Self::begin_batch`]).
            pub(crate) wanted: u32,
            /// Every tap in `wanted` is [`PacketTap::followed_only`] this
            /// batch.
            pub(crate) followed_only: bool,
            /// Packets of flows not followed that the shard did not show
            /// this batch.
            pub(crate) skipped: u64,
        }

        impl PacketTaps {
            /// Whether some tap on wants the flow packets one by one in a
            /// batch read by this shard alone (`solo`) or of a shard
            /// batch.
            #[inline]
            pub fn each_packet(&self, solo: bool) -> bool {
                false $(|| self.$name.as_ref().is_some_and(|t| t.each_packet(solo)))*
            }

            /// Whether the shard batches carry each packet's place and the
            /// packets of no flow (some tap reads them from shard batches).
            #[inline]
            pub fn on_shard_batches(&self) -> bool {
                self.each_packet(false)
            }

            /// Starts a batch for each tap on ([`PacketTap::batch_start`])
            /// and notes which taps want its flow packets (read by this
            /// shard alone: `solo`) one by one; returns whether any does
            /// ([`Self::each_packet`]).
            #[inline]
            pub fn begin_batch(&mut self, solo: bool, gaps: bool) -> bool {
                let (mut wanted, mut bit, mut only) = (0, 1, true);
                $(if let Some(t) = self.$name.as_mut() {
                    t.batch_start(gaps);
                    if t.each_packet(solo) {
                        wanted |= bit;
                        only &= t.followed_only();
                    }
                }
                bit <<= 1;)*
                let _ = bit;
                self.wanted = wanted;
                self.followed_only = wanted != 0 && only;
                self.skipped = 0;
                wanted != 0
            }
            /// Shows packet `at` to each tap that wants the batch's flow
            /// packets ([`Self::begin_batch`]). Inlined into the shard's
            /// loop, which calls it only when some tap does.
            #[inline(always)]
            pub fn flow_packet(&mut self, at: &TapPacket<'_>, table: &mut FlowTable<Consumers>) {
                let mut bit = 1;
                $(if self.wanted & bit != 0 {
                    if let Some(t) = self.$name.as_mut() {
                        t.flow_packet(at, table);
                    }
                }
                bit <<= 1;)*
                let _ = bit;
            }

            /// Shows a packet of no flow to each tap on.
            #[cold]
            #[inline(never)]
            pub fn no_flow(&mut self, data: &[u8], r: &PacketRef) {
                $(if let Some(t) = &mut self.$name {
                    t.no_flow(data, r);
                })*
            }

            /// Ends a batch for each tap on, after handing the taps that
            /// wanted its flow packets the count of those not shown.
            #[inline]
            pub fn batch_done(&mut self, data: &[u8], refs: &[PacketRef]) {
                let (skipped, mut bit) = (std::mem::take(&mut self.skipped), 1);
                $(if let Some(t) = &mut self.$name {
                    if skipped != 0 && self.wanted & bit != 0 {
                        t.skipped(skipped);
                    }
                    t.batch_done(data, refs);
                }
                bit <<= 1;)*
                let _ = bit;
            }

            /// Hands ended flows with held packets to each tap on (they are
            /// dropped when none takes them).
            #[cold]
            pub fn flows_ended(&mut self, ended: &mut Vec<HeldEnd>) {
                $(if let Some(t) = &mut self.$name {
                    t.flows_ended(ended);
                })*
                ended.clear();
            }
        }
    };
}

registry! {
    /// The rotating dumper (its held packets too) and the ring of recent
    /// packets for forensic captures (`dump/mod.rs`; on with `--dump-dir`
    /// or alarms' captures).
    dump: Box<Taps>,
    /// Another part's frame tap, the call stage's (`Frames` below; on
    /// with `--calls-out`).
    calls: Frames,
    /// The `-w` writer and its DSCP marks (`mark/marker.rs`; on with `-w`,
    /// marking with `--mark`).
    marker: Marker,
}

/// A [`FrameTap`] as a packet tap: shown every packet of the flows it
/// follows (the shard marks the others in its table) and every packet of
/// no flow, in input order.
pub struct Frames {
    tap: Box<dyn FrameTap>,
    /// One shard: the first packet of the batch not shown yet.
    next: usize,
    /// One shard, and the batch has packets of no flow among its flow
    /// packets (else there is no gap to look for).
    gaps: bool,
    /// Packets of flows the tap follows no more, this batch.
    not_shown: u64,
}

impl Frames {
    /// The packet tap of `tap`.
    pub fn new(tap: Box<dyn FrameTap>) -> Frames {
        Frames {
            tap,
            next: 0,
            gaps: false,
            not_shown: 0,
        }
    }

    /// The frame tap itself.
    pub fn tap(&mut self) -> &mut dyn FrameTap {
        &mut *self.tap
    }

    /// One shard: shows the tap the packets of no flow `refs[self.next..to]`.
    #[inline]
    fn gap(&mut self, data: &[u8], refs: &[PacketRef], to: usize) {
        if self.next < to {
            self.frames_of_no_flow(data, refs.get(self.next..to).unwrap_or(&[]));
        }
    }

    #[cold]
    #[inline(never)]
    fn frames_of_no_flow(&mut self, data: &[u8], refs: &[PacketRef]) {
        refs.iter().for_each(|r| self.tap.frame(data, r));
    }
}

impl PacketTap for Frames {
    fn batch_start(&mut self, gaps: bool) {
        self.gaps = gaps;
    }
    fn each_packet(&self, _solo: bool) -> bool {
        true
    }

    /// Without gaps to look for, a packet of a flow not followed is only
    /// counted.
    fn followed_only(&self) -> bool {
        !self.gaps
    }

    fn skipped(&mut self, n: u64) {
        self.not_shown += n;
    }

    #[inline]
    fn flow_packet(&mut self, at: &TapPacket<'_>, table: &mut FlowTable<Consumers>) {
        if self.gaps {
            let idx = at.p.idx as usize;
            self.gap(at.data, at.refs, idx);
            self.next = idx + 1;
        }
        if !table.followed(at.slot) {
            self.not_shown += 1;
            return;
        }
        let first = table.first_packet(at.slot);
        if !self.tap.flow_frame(at.data, at.r, (at.p, at.side), first) {
            table.unfollow(at.slot);
        }
    }

    fn no_flow(&mut self, data: &[u8], r: &PacketRef) {
        self.tap.frame(data, r);
    }

    fn batch_done(&mut self, data: &[u8], refs: &[PacketRef]) {
        if self.gaps {
            self.gap(data, refs, refs.len());
        }
        self.next = 0;
        self.tap.not_shown(std::mem::take(&mut self.not_shown));
    }
}

/// The dumper and the ring as one of the shard's packet taps
/// (`shard/taps.rs`): with one shard the whole batch goes to them after
/// its flow packets, and only a filtered dumper takes flow packets one by
/// one; a shard batch's packets go to them one by one.
impl PacketTap for Box<Taps> {
    #[inline]
    fn each_packet(&self, solo: bool) -> bool {
        !solo || self.filtering()
    }

    #[inline]
    fn flow_packet(&mut self, at: &TapPacket<'_>, table: &mut FlowTable<Consumers>) {
        let (all, key) = (!at.solo(), &at.p.key);
        if self.held.is_some() {
            self.flow_packet_held(at.data, at.r, key, (table, at.slot), all);
        } else {
            let slot = at.slot;
            Taps::flow_packet(self, at.data, at.r, key, || table.mark_class(slot), all);
        }
    }

    fn no_flow(&mut self, data: &[u8], r: &PacketRef) {
        self.no_flow_packet(data, r);
    }

    fn batch_done(&mut self, data: &[u8], refs: &[PacketRef]) {
        if !refs.is_empty() {
            self.whole_batch(data, refs);
        }
    }

    fn flows_ended(&mut self, ended: &mut Vec<HeldEnd>) {
        self.resolve_held(ended);
    }
}

/// The `-w` writer as a packet tap: marks are noted only for a batch the
/// shard read alone (`--mark` runs have one shard); the writing is per
/// batch (several shards: shard 0 writes what it reads, `Shard::copy`).
impl PacketTap for Marker {
    #[inline]
    fn each_packet(&self, solo: bool) -> bool {
        solo && self.marking()
    }

    #[inline]
    fn flow_packet(&mut self, at: &TapPacket<'_>, table: &mut FlowTable<Consumers>) {
        if let Some(class) = table.mark_class(at.slot) {
            let p = at.p;
            self.note(p.idx, at.refs.len(), class, p.ip_offset, p.key.is_v6());
        }
    }

    fn batch_done(&mut self, data: &[u8], refs: &[PacketRef]) {
        self.write_batch(data, refs);
    }
}
