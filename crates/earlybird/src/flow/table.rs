//! The per-shard flow table.
//!
//! Contract: one table per shard, owned by one thread (no locks). Capacity
//! is fixed at creation; memory for slots is reserved up front and committed
//! as slots are first used. Per packet, [`FlowTable::packet`] finds or creates
//! the flow (O(1) expected, no allocation), updates its statistics, early
//! features and TCP state, and fires the inline classifier once the flow has
//! its first N packets (a C4.5 model through its
//! [`FastTree`]: no dynamic call,
//! the verdicts of `classify`). Finished flows are appended to
//! [`FlowTable::out`].
//!
//! Layout: an open-addressing index of `u32` entries (8-bit hash tag + 24-bit
//! slot number, linear probing, backward-shift deletion, load ≤ 1/2) points
//! into parallel slot arrays: [`Entry`] (one cache line: compact key,
//! counters, timestamps, verdict), [`EntryTail`] (MACs, byte-counter carries),
//! [`FullStats`] full statistics (empty with `--stats basic`), the early-packet
//! array (N entries per slot) and, touched by IPv6 flows only, their
//! 16-byte addresses ([`V6Addrs`]), by ICMP / ICMPv6 flows only, the type and
//! code of their first packet ([`IcmpHead`]). Both come with a packet of
//! the general decoding path beside its [`Pkt`] ([`V6Icmp`]), so the fast
//! path's packets carry nothing more.
//! When a consumer reads where TCP streams start
//! ([`Consumer::reads_tcp_starts`]), a last side array holds, per flow,
//! the sequence number of the last SYN without payload of each side the
//! consumers follow ([`TcpStarts`], 12 bytes; cleared when a flow starts,
//! written only by such SYNs): the consumers need not be shown them to
//! know where the streams start.
//!
//! Flow boundaries are decided from packet timestamps only and at lookup
//! time: a packet that arrives after the idle timeout, after the active
//! timeout, or after a closed TCP connection's grace period (or a bare SYN on
//! a closed connection) ends the old flow and starts a new one. The
//! incremental sweep ([`FlowTable::sweep`]) only reclaims slots early; it
//! never changes what a record contains, so records do not depend on batch
//! sizes or the number of shards (unless the table fills up).
//!
//! When the table is full, the least recently seen of the next
//! [`EVICT_CANDIDATES`] live flows from the sweep cursor is ended: with the
//! reason the sweep would give it if it has already expired, else `evicted`
//! (counted).
//!
//! Unchecked indexing: the per-packet path reads the arrays without bounds
//! checks (measured: ~12 instructions per packet). It is sound because its
//! indices are in range by construction: a bucket is `hash & mask` with
//! `mask + 1` buckets, and a slot number is either read from the index
//! (which only ever holds slots handed out by `insert_at`) or handed out by
//! `insert_at` itself, which takes a freed slot or `high < capacity` (it
//! frees one first when the table is full). A lookup hint
//! ([`FlowTable::packet_hinted`]) is a slot number read from the index a few
//! packets earlier: it may name a flow that has ended since, but never a
//! slot out of range. Debug builds check every access.
//!
//! Lookup hints: the shard prefetches each packet's entry a few packets
//! ahead by probing the index ([`FlowTable::prefetch_entry`]), and hands the
//! slot it found to the update, which takes it when the slot is live and
//! holds the packet's key (keys of live flows are unique) instead of
//! probing again; the update then waits on one load less (measured: worst
//! case, basic statistics, 18.4 -> 19.9 Mpps best of 8).

use std::sync::Arc;

use super::arena::{Arena, ZeroValid};
use super::consumer::{Consumer, FlowRef, Follows};
use super::prefault::{Prefaulter, Region};

use super::entry::{
    Entry, EntryTail, FullStats, IcmpHead, V6Addrs, CLIENT_IS_A, CLOSED, DECIDED, FOLLOW_SHIFT,
    IN_USE, PENDING, SPILLED, UNFOLLOWED,
};
use super::expiry::close_reason;
use super::packet::{is_icmp, Payload, PayloadSource, Pkt, V6Icmp};
use super::record::{EndReason, RecordBatch};
use crate::analyze::TcpStarts;
use crate::classify::inline::Inline;
use crate::classify::Classifier;
use crate::classify::Verdict;
use crate::config::FlowConfig;
use crate::features::early::EarlyPkt;
use crate::features::tcp::{FlagCounts, SPILL_EVERY};
use crate::features::{early, tcp, Dir};
use crate::time::Nanos;

/// Live flows compared when one must be evicted.
pub const EVICT_CANDIDATES: usize = 8;

/// Counters of one table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowCounters {
    /// Flows created.
    pub created: u64,
    /// Flows ended, by [`EndReason`].
    pub ended: [u64; EndReason::COUNT],
    /// Verdicts given by the classifier.
    pub classified: u64,
    /// Largest number of flows alive at once.
    pub peak_flows: u64,
    /// Jobs the classifier pool could not take (retried at the flow's next
    /// packet).
    pub classify_queue_full: u64,
    /// Flows that ended while their job was still on the pool (reported
    /// "unknown").
    pub verdicts_late: u64,
}

/// A flow table (see the module docs), calling `C` at its flows' events.
pub struct FlowTable<C: Consumer = ()> {
    /// Populates slot pages ahead of use. Declared first: dropped (and its
    /// thread joined) before the arenas it populates are unmapped.
    pub(super) prefault: Option<Prefaulter>,
    pub(super) bidirectional: bool,
    pub(super) idle: Nanos,
    pub(super) active: Nanos,
    pub(super) close: Nanos,
    pub(super) n: usize,
    pub(super) sweep_per_batch: usize,
    pub(super) index: Arena<u32>,
    pub(super) mask: usize,
    pub(super) entries: Arena<Entry>,
    pub(super) tails: Arena<EntryTail>,
    pub(super) wide: Arena<V6Addrs>,
    /// An IPv6 flow has used the `wide` array.
    pub(super) wide_used: bool,
    /// The first packet's ICMP type and code of ICMP / ICMPv6 flows
    /// (committed where touched).
    pub(super) icmp: Arena<IcmpHead>,
    /// An ICMP flow has used the `icmp` array.
    pub(super) icmp_used: bool,
    /// Where the TCP streams of each flow start, kept when a consumer
    /// reads them ([`Consumer::reads_tcp_starts`]; committed where
    /// touched, cleared when a flow starts).
    pub(super) tcp_starts: Arena<TcpStarts>,
    /// The `tcp_starts` array is used.
    pub(super) tcp_starts_used: bool,
    pub(super) extra: Arena<FullStats>,
    /// Flag counts spilled out of [`FullStats`]'s 16-bit lanes (flows with
    /// [`SPILLED`] only; committed where touched).
    pub(super) flags_hi: Arena<FlagCounts>,
    pub(super) full_stats: bool,
    /// With full statistics: keep the size and inter-arrival moments
    /// ([`FlowTable::keep_moments`]).
    pub(super) moments: bool,
    pub(super) early: Arena<EarlyPkt>,
    /// Slots ever used (slots at or past it are still zero).
    pub(super) high: usize,
    pub(super) free: Vec<u32>,
    pub(super) capacity: usize,
    pub(super) used: usize,
    pub(super) cursor: usize,
    pub(super) flush_cursor: usize,
    pub(super) now: Nanos,
    /// The clock at the start of the current batch ([`Self::begin_batch`]).
    pub(super) floor: Nanos,
    /// The classifier run when a flow has its first packets.
    pub(super) inline: Inline,
    /// Models may be swapped in while the table runs
    /// ([`FlowTable::swap_model`]): each decided flow keeps the number of
    /// the model that decided it in `model_ids` (committed where touched).
    pub(super) swappable: bool,
    pub(super) model_ids: Arena<u16>,
    /// Finished records waiting to be handed to the exporters.
    pub out: RecordBatch,
    /// The parts that follow the flows (`flow/consumer.rs`; `()`: none).
    pub consumers: C,
    /// Counters.
    pub counters: FlowCounters,
}

impl FlowTable {
    /// Creates a table for `cfg` (validated by the caller) with no
    /// consumer. Fails only when the address space for the table cannot be
    /// reserved.
    pub fn new(cfg: &FlowConfig, model: Option<Arc<dyn Classifier>>) -> crate::Result<FlowTable> {
        FlowTable::with_consumers(cfg, model, ())
    }
}

impl<C: Consumer> FlowTable<C> {
    /// Creates a table for `cfg` (validated by the caller) that calls
    /// `consumers` at its flows' events. Fails only when the address space
    /// for the table cannot be reserved.
    pub fn with_consumers(
        cfg: &FlowConfig,
        model: Option<Arc<dyn Classifier>>,
        consumers: C,
    ) -> crate::Result<FlowTable<C>> {
        let capacity = cfg.max_flows.clamp(1, FlowConfig::MAX_FLOWS);
        let buckets = (capacity * 2).next_power_of_two().max(16);
        let n = cfg
            .early_packets
            .clamp(1, crate::features::early::MAX_EARLY);
        let reserve = |what: &str, e: std::io::Error| {
            crate::Error::Config(format!(
                "cannot reserve memory for {capacity} flows ({what}): {e}; lower --max-flows"
            ))
        };
        Ok(FlowTable {
            prefault: None,
            bidirectional: cfg.bidirectional,
            idle: cfg.idle_timeout,
            active: cfg.active_timeout,
            close: cfg.tcp_close_timeout,
            n,
            sweep_per_batch: cfg.sweep_per_batch,
            index: Arena::new(buckets).map_err(|e| reserve("index", e))?,
            mask: buckets - 1,
            entries: Arena::new(capacity).map_err(|e| reserve("entries", e))?,
            tails: Arena::new(capacity).map_err(|e| reserve("entry tails", e))?,
            wide: Arena::new_lazy(capacity).map_err(|e| reserve("IPv6 addresses", e))?,
            wide_used: false,
            icmp: Arena::new_lazy(capacity).map_err(|e| reserve("ICMP types", e))?,
            icmp_used: false,
            tcp_starts: Arena::new_lazy(capacity).map_err(|e| reserve("TCP starts", e))?,
            tcp_starts_used: false,
            extra: Arena::new(if cfg.full_stats { capacity } else { 0 })
                .map_err(|e| reserve("statistics", e))?,
            flags_hi: Arena::new_lazy(if cfg.full_stats { capacity } else { 0 })
                .map_err(|e| reserve("flag counts", e))?,
            full_stats: cfg.full_stats,
            moments: true,
            early: Arena::new(capacity * n).map_err(|e| reserve("early packets", e))?,
            high: 0,
            free: Vec::new(),
            capacity,
            used: 0,
            cursor: 0,
            flush_cursor: 0,
            now: 0,
            floor: 0,
            inline: Inline::new(model, n).sampled(cfg.sample.map_or(1, |s| s.rate)),
            swappable: false,
            model_ids: Arena::new_lazy(capacity).map_err(|e| reserve("model numbers", e))?,
            out: RecordBatch::with_capacity(1024, n),
            consumers,
            counters: FlowCounters::default(),
        })
    }

    /// Lets models be swapped in ([`Self::swap_model`]); records then name
    /// the model that decided them. Call before the first packet.
    pub fn keep_model_ids(&mut self) {
        self.swappable = true;
    }

    /// Makes `model`, number `id`, decide the flows not decided yet (flows
    /// decided keep their verdict and its model's number). A table whose
    /// model runs on the classifier pool keeps it (false).
    pub fn swap_model(&mut self, model: Arc<dyn Classifier>, id: u16) -> bool {
        if self.inline.pooled() || model.costly() {
            return false;
        }
        self.swappable = true;
        self.inline.swap(model, id, self.n);
        true
    }

    /// With full statistics, whether each packet updates its flow's size
    /// and inter-arrival moments (on unless set; the pipeline turns it
    /// off when no output reads them,
    /// [`crate::export::Exporter::reads_moments`]: the records' `size`
    /// and `iat` are then `None` and the moments are never read). The
    /// TCP flag counts are kept either way.
    pub fn keep_moments(&mut self, on: bool) {
        self.moments = on;
    }

    /// Starts the helper thread that clears the pages of the slots just
    /// ahead of use (see [`super::prefault`]). Worth it only on a core the
    /// shards leave idle: the pipeline calls it when one is spare. Calling
    /// it again does nothing.
    pub fn start_prefault(&mut self) {
        if self.prefault.is_some() {
            return;
        }
        self.prefault = Prefaulter::start(self.slot_regions(), self.capacity);
    }

    /// Populates now the whole index (its buckets are touched at random)
    /// and the pages of the first [`super::prefault::START`] slots of every
    /// slot array ([`super::prefault::populate_now`]): for a live capture,
    /// before its first packet. The contents do not change.
    pub fn populate_start(&mut self) {
        let slots = super::prefault::START.min(self.capacity);
        let _ = super::prefault::populate_now(&[region(&self.index, 1)], self.mask + 1)
            && super::prefault::populate_now(&self.slot_regions(), slots);
    }

    /// The slot arrays filled in slot order (not the randomly probed
    /// index, nor the IPv6 addresses committed only where used), the
    /// consumers' among them ([`Consumer::slot_arrays`]).
    fn slot_regions(&mut self) -> Vec<Region> {
        let mut regions = vec![
            region(&self.entries, 1),
            region(&self.tails, 1),
            region(&self.early, self.n),
        ];
        if self.full_stats {
            regions.push(region(&self.extra, 1));
        }
        if self.consumers.reads_tcp_starts() {
            regions.push(region(&self.tcp_starts, 1));
        }
        regions.extend(self.consumers.slot_arrays(self.capacity));
        regions
    }

    /// Whether the table pairs both directions into one flow.
    pub fn bidirectional(&self) -> bool {
        self.bidirectional
    }

    /// Flows currently alive.
    pub fn len(&self) -> usize {
        self.used
    }

    /// True when no flow is alive.
    pub fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// Bytes of memory per IPv4 flow slot: entry + tail + extra (full
    /// stats) + early packets + this slot's share of the index. (A slot that
    /// has held an IPv6 flow also has its 32 address bytes in a side array.)
    pub fn bytes_per_slot(&self) -> usize {
        self.slot_bytes() + self.index.capacity() * 4 / self.capacity
    }

    /// Bytes of one slot across the parallel arrays (index and IPv6 side
    /// array not included).
    fn slot_bytes(&self) -> usize {
        std::mem::size_of::<Entry>()
            + std::mem::size_of::<EntryTail>()
            + if self.full_stats {
                std::mem::size_of::<FullStats>()
            } else {
                0
            }
            + self.n * std::mem::size_of::<EarlyPkt>()
    }

    /// Bytes of table memory in use: slots ever used × slot size + index
    /// (+ the IPv6 and ICMP side arrays up to the highest slot once such
    /// flows came, and that of where TCP streams start once kept).
    pub fn memory_bytes(&self) -> usize {
        let side = |used: bool, size: usize| if used { self.high * size } else { 0 };
        self.high * self.slot_bytes()
            + self.index.capacity() * 4
            + side(self.wide_used, std::mem::size_of::<V6Addrs>())
            + side(self.icmp_used, std::mem::size_of::<IcmpHead>())
            + side(self.tcp_starts_used, std::mem::size_of::<TcpStarts>())
            + side(self.swappable, 2)
    }

    /// Bytes of the table's arrays mapped from the reserved huge-page pool.
    pub fn pool_bytes(&self) -> usize {
        fn b<T: super::arena::ZeroValid>(a: &Arena<T>) -> usize {
            if a.reserved_pool() {
                a.capacity() * std::mem::size_of::<T>()
            } else {
                0
            }
        }
        b(&self.index) + b(&self.entries) + b(&self.tails) + b(&self.extra) + b(&self.early)
    }

    /// Hints the CPU to load the index bucket of `hash`.
    #[inline(always)]
    pub fn prefetch(&self, hash: u64) {
        let i = hash as usize & self.mask;
        crate::prefetch::read(self.index.ptr(i));
    }

    /// Hints the CPU to load the entry lines of the flow `hash` most likely
    /// belongs to (the first tag match in its bucket run; not verified, so
    /// it costs no entry access). Call a few packets ahead of
    /// [`Self::packet_hinted`], and give it the returned hint: the slot
    /// found + 1, or 0.
    #[inline(always)]
    pub fn prefetch_entry(&self, hash: u64) -> u32 {
        let tag = tag_of(hash);
        let mut i = hash as usize & self.mask;
        for _ in 0..4 {
            let e = self.index[i];
            if e == 0 {
                return 0;
            }
            if (e >> 24) as u8 == tag {
                let s = (e & 0x00FF_FFFF) as usize - 1;
                crate::prefetch::read(self.entries.ptr(s));
                if self.full_stats {
                    let x = self.extra.ptr(s) as *const u8;
                    crate::prefetch::read(x);
                    crate::prefetch::read(x.wrapping_add(64));
                }
                crate::prefetch::read(self.early.ptr(s * self.n));
                return e & 0x00FF_FFFF;
            }
            i = (i + 1) & self.mask;
        }
        0
    }

    /// The class whose DSCP a packet of slot `s` should carry: the flow's
    /// verdict once the packet count has passed the packet at which it was
    /// taken (HPTRAC marks the packets after the decision).
    #[inline]
    pub fn mark_class(&self, s: usize) -> Option<u16> {
        let e = &self.entries[s];
        (e.state & DECIDED != 0 && e.packets[0] + e.packets[1] > e.at as u32).then_some(e.app)
    }

    /// Whether the shard's frame tap still follows the flow in slot `s`, a
    /// slot a packet was just run in (see [`UNFOLLOWED`]).
    #[inline(always)]
    pub(crate) fn followed(&self, s: usize) -> bool {
        debug_assert!(s < self.high);
        // SAFETY: `s` is the slot `packet_at` returned, below `high`
        // (module docs).
        unsafe { self.entries.get_unchecked(s) }.state & UNFOLLOWED == 0
    }

    /// Whether the flow in slot `s` has had one packet (the one just run).
    #[inline]
    pub(crate) fn first_packet(&self, s: usize) -> bool {
        let e = &self.entries[s];
        e.packets[0] + e.packets[1] == 1
    }

    /// The shard's frame tap follows the live flow in slot `s` no more.
    #[inline]
    pub(crate) fn unfollow(&mut self, s: usize) {
        let e = &mut self.entries[s];
        if e.state & IN_USE != 0 {
            e.state |= UNFOLLOWED;
        }
    }

    /// Accounts one IPv4 packet; returns the slot of its flow.
    #[inline]
    pub fn packet(&mut self, p: &Pkt) -> usize {
        debug_assert!(!p.key.is_v6(), "IPv6 packets go through packet_wide");
        self.packet_wide(p, &V6Icmp::default())
    }

    /// Accounts one packet with what it carries beside it (`side`: IPv6
    /// addresses of endpoints `a`, `b`, unused for IPv4; ICMP type and
    /// code, read when an ICMP flow starts); returns the slot of its flow.
    #[inline]
    pub fn packet_wide(&mut self, p: &Pkt, side: &V6Icmp) -> usize {
        self.packet_hinted(p, side, 0)
    }

    /// [`Self::packet_wide`] with the hint [`Self::prefetch_entry`] gave for
    /// the packet's hash a few packets earlier (0: none). A slot that is
    /// live and holds the packet's key is its flow (keys of live flows are
    /// unique), so the index is not probed again; any other hint (the slot
    /// has ended or been reused since, or shared only the tag) falls back
    /// to the probe. (Always inlined: the shard's second pass has two
    /// callers, and a call per packet cost 3.5 % more instructions.)
    #[inline(always)]
    pub fn packet_hinted(&mut self, p: &Pkt, side: &V6Icmp, hint: u32) -> usize {
        self.packet_full(p, side, hint, Payload::NONE)
    }

    /// [`Self::packet_hinted`] with the packet's transport payload, for the
    /// consumers that read packets.
    #[inline]
    pub fn packet_full(&mut self, p: &Pkt, side: &V6Icmp, hint: u32, pl: Payload<'_>) -> usize {
        if self.consumers.reads_packets() {
            self.packet_at::<true, _>(p, side, hint, pl)
        } else {
            self.packet_at::<false, _>(p, side, hint, pl)
        }
    }

    /// [`Self::packet_full`] for a caller that knows whether a consumer
    /// reads packets (`PACKETS` must equal [`Consumer::reads_packets`]):
    /// with `false` the per-packet path has no consumer code at all (the
    /// shard picks the variant once per batch).
    #[inline(always)]
    pub(crate) fn packet_at<'a, const PACKETS: bool, L: PayloadSource<'a>>(
        &mut self,
        p: &Pkt,
        side: &V6Icmp,
        hint: u32,
        pl: L,
    ) -> usize {
        debug_assert_eq!(PACKETS, self.consumers.reads_packets());
        if p.ts > self.now {
            self.now = p.ts;
        }
        if hint != 0 {
            let s = hint as usize - 1;
            // SAFETY: a hint is a slot number read from the index, and slot
            // numbers stay below `high` (module docs).
            if unsafe { self.entries.get_unchecked(s) }.state & IN_USE != 0
                && self.holds(s, p, &side.wide)
            {
                return self.known::<PACKETS, L>(s, p, side, pl);
            }
        }
        let tag = tag_of(p.hash);
        let mut i = p.hash as usize & self.mask;
        let slot = loop {
            // SAFETY: `i` is masked, `s` comes from the index (module docs).
            let e = unsafe { *self.index.get_unchecked(i) };
            if e == 0 {
                break None;
            }
            if (e >> 24) as u8 == tag {
                let s = (e & 0x00FF_FFFF) as usize - 1;
                if self.holds(s, p, &side.wide) {
                    break Some(s);
                }
            }
            i = (i + 1) & self.mask;
        };
        match slot {
            Some(s) => self.known::<PACKETS, L>(s, p, side, pl),
            None => {
                let s = self.insert_at(p, side, i);
                if PACKETS {
                    self.follow_new(s);
                }
                // Tested before the update (which leaves the follow bits
                // as they were), so that only its answer is kept across.
                let shown = PACKETS && self.shown(s, p, &pl);
                self.update(s, p);
                if shown {
                    self.consume_first(s, p, pl);
                }
                s
            }
        }
    }

    /// Does slot `s` (in range) hold the key of packet `p` (whose IPv6
    /// addresses are `wide`)?
    #[inline(always)]
    fn holds(&self, s: usize, p: &Pkt, wide: &V6Addrs) -> bool {
        // SAFETY: callers pass slot numbers read from the index (module docs).
        let e = unsafe { self.entries.get_unchecked(s) };
        e.key == p.key && (!p.key.is_v6() || self.wide[s] == *wide)
    }

    /// Accounts packet `p` of the live flow in slot `s` (which it may end,
    /// starting a new one); returns the slot of its flow.
    #[inline(always)]
    fn known<'a, const PACKETS: bool, L: PayloadSource<'a>>(
        &mut self,
        s: usize,
        p: &Pkt,
        side: &V6Icmp,
        pl: L,
    ) -> usize {
        let s = if let Some(reason) = self.ends_before(s, p) {
            self.end(s, reason);
            let s = self.insert(p, side);
            if PACKETS {
                self.follow_new(s);
            }
            s
        } else {
            s
        };
        // The update is compiled twice: a packet of a flow no consumer
        // follows any more (most packets, once the consumers have read a
        // flow's first payloads) runs it as without consumers, with
        // nothing kept across it. With one copy, the answer of `shown`
        // and the payload's source were kept across it at every packet
        // (15 instructions a packet of a known flow on the realistic mix;
        // BENCHMARKS.md, S34). Called out of line, the followed copy
        // cost a VoIP capture 2 %: there most packets are followed.
        if PACKETS && self.follows(s) != 0 {
            self.update_followed(s, p, pl);
        } else {
            self.update(s, p);
        }
        s
    }

    /// [`Self::update`] of a packet of a flow a consumer still follows,
    /// and the consumers' call when they read it (always inlined: see
    /// [`Self::known`]).
    #[inline(always)]
    fn update_followed<'a, L: PayloadSource<'a>>(&mut self, s: usize, p: &Pkt, pl: L) {
        // Tested before the update (which leaves the follow bits as they
        // were), so that only its answer is kept across.
        let shown = self.shown(s, p, &pl);
        self.update(s, p);
        if shown {
            self.consume(s, p, pl);
        }
    }

    /// The bits of slot `s`'s entry that say which of its packets the
    /// consumers read ([`Self::follow`]); 0 when they read none.
    #[inline(always)]
    fn follows(&self, s: usize) -> u8 {
        // SAFETY: `s` is a slot in use (callers).
        unsafe { self.entries.get_unchecked(s) }.tcp.close >> FOLLOW_SHIFT
    }

    /// Does packet `p` start a new flow instead of joining slot `s`?
    #[inline]
    fn ends_before(&self, s: usize, p: &Pkt) -> Option<EndReason> {
        // SAFETY: `s` comes from the index (module docs).
        let e = unsafe { self.entries.get_unchecked(s) };
        // Not earlier than the clock at the start of the batch: where
        // timestamps go backwards (captures of different times in one run,
        // a clock step) a flow that a sweep at the end of an earlier batch
        // could have ended must end here too, or whether it goes on would
        // depend on where the sweep happened to be — and so on the number
        // of shards. Sweeps run only between batches, with a clock no later
        // than this floor, and every shard has the same floor. For ordered
        // input this is `p.ts`.
        let now = p.ts.max(self.floor);
        let gap = now.saturating_sub(e.last_ts);
        if e.state & CLOSED != 0 {
            let bare_syn = p.flags & (tcp::SYN | tcp::ACK) == tcp::SYN;
            if gap > self.close || bare_syn {
                return Some(close_reason(e));
            }
        }
        if gap > self.idle {
            Some(EndReason::Idle)
        } else if now.saturating_sub(e.first_ts) > self.active
            || e.packets[0].max(e.packets[1]) == u32::MAX
        {
            Some(EndReason::Active)
        } else {
            None
        }
    }

    /// Creates a flow for `p`, probing for its empty bucket.
    fn insert(&mut self, p: &Pkt, side: &V6Icmp) -> usize {
        let mut i = p.hash as usize & self.mask;
        while self.index[i] != 0 {
            i = (i + 1) & self.mask;
        }
        self.insert_at(p, side, i)
    }

    /// Creates a flow for `p` in empty bucket `i`.
    fn insert_at(&mut self, p: &Pkt, side: &V6Icmp, mut i: usize) -> usize {
        if self.used >= self.capacity {
            self.make_room();
            // The index changed: find the empty bucket again.
            i = p.hash as usize & self.mask;
            while self.index[i] != 0 {
                i = (i + 1) & self.mask;
            }
        }
        let s = match self.free.pop() {
            Some(s) => {
                // A reused slot still holds its last flow's statistics.
                if self.full_stats {
                    self.extra[s as usize] = FullStats::default();
                }
                s as usize
            }
            // Slots at or past the high-water mark are still all zero.
            None => {
                self.high += 1;
                self.high - 1
            }
        };
        self.index[i] = ((tag_of(p.hash) as u32) << 24) | (s as u32 + 1);
        let mut state = IN_USE;
        if p.from_a {
            state |= CLIENT_IS_A;
        }
        self.entries[s] = Entry {
            key: p.key,
            state,
            app: Verdict::UNKNOWN,
            hash: p.hash as u32,
            first_ts: p.ts,
            last_ts: p.ts,
            ..Entry::default()
        };
        self.tails[s] = EntryTail {
            macs: p.macs,
            bytes_hi: [0; 2],
        };
        if p.key.is_v6() {
            self.wide[s] = side.wide;
            self.wide_used = true;
        }
        if is_icmp(p.key.proto) {
            self.icmp[s] = side.icmp.map_or([0; 3], |m| [1, m.ty, m.code]);
            self.icmp_used = true;
        }
        self.consumers.start(s);
        self.consumers
            .opened(flow_ref(&self.entries, &self.tails, &self.wide, s));
        self.used += 1;
        self.counters.created += 1;
        if self.used as u64 > self.counters.peak_flows {
            self.counters.peak_flows = self.used as u64;
        }
        s
    }

    /// Updates slot `s` with packet `p` (the same code whether a consumer
    /// reads packets or not: the caller asks [`Self::shown`] before it,
    /// and of a known flow runs one of two copies, [`Self::known`]).
    /// Always inlined into the shard's loop: called, it saved and restored
    /// registers at every packet (measured: 19 instructions a packet on
    /// the realistic mix without consumers; BENCHMARKS.md, issue 34).
    #[inline(always)]
    fn update(&mut self, s: usize, p: &Pkt) {
        // Every unchecked access here: `s` comes from the index or from
        // `insert_at` (module docs); the early array holds `n` entries per
        // slot.
        // SAFETY: `s` is a slot in use (above).
        let h = unsafe { self.entries.get_unchecked_mut(s) };
        let dir = if p.from_a == (h.state & CLIENT_IS_A != 0) {
            Dir::Fwd
        } else {
            Dir::Bwd
        };
        let prev = h.last_ts;
        let base = s * self.n;
        early::push(
            // SAFETY: slot `s`'s `n` early entries start at `s * n` (above).
            unsafe { self.early.slice_unchecked_mut(base, self.n) },
            &mut h.n_early,
            p.size,
            dir,
            p.flags,
            p.ts,
            prev,
        );
        if p.ts > h.last_ts {
            h.last_ts = p.ts;
        }
        let d = dir as usize;
        let first = h.packets[d] == 0;
        h.packets[d] += 1;
        let (lo, carry) = h.bytes_lo[d].overflowing_add(p.size as u32);
        h.bytes_lo[d] = lo;
        if carry {
            // SAFETY: `s` is a slot in use (above).
            unsafe { self.tails.get_unchecked_mut(s) }.bytes_hi[d] += 1;
        }
        if p.flags != 0 {
            h.tcp.update(d, p.flags);
            if h.tcp.closed() {
                h.state |= CLOSED;
            }
        }
        if self.full_stats {
            // SAFETY: `s` is a slot in use (above).
            let x = unsafe { &mut self.extra.get_unchecked_mut(s).dir[d] };
            if self.moments {
                x.moments.update(p.size, p.ts, first);
            }
            if h.packets[d] % SPILL_EVERY == 0 {
                spill_flags(&mut self.flags_hi, h, &mut x.flags, s, d);
            }
            if p.flags != 0 {
                tcp::count_flags(&mut x.flags, p.flags);
            }
        }
        let decide_at = self.inline.decide_at();
        if decide_at != 0 && h.state & (DECIDED | PENDING) == 0 && h.n_early as usize >= decide_at {
            if self.inline.on_pool() {
                self.submit(s);
            } else {
                self.decide::<false>(s);
            }
        }
    }

    /// The consumers' [`Follows`] of the flow that just started in slot
    /// `s`, and where its TCP streams start cleared when a consumer reads
    /// them ([`Consumer::reads_tcp_starts`]).
    #[inline(always)]
    fn follow_new(&mut self, s: usize) {
        let f = self
            .consumers
            .follows_new(flow_ref(&self.entries, &self.tails, &self.wide, s));
        self.follow(s, f);
        if self.consumers.reads_tcp_starts() {
            self.tcp_starts[s] = TcpStarts::NONE;
            self.tcp_starts_used = true;
        }
    }

    /// Whether a consumer reads packet `p` of the flow in slot `s`: a test
    /// of the bits [`Self::follow`] keeps in its entry, indexed by the
    /// packet's endpoint (`p.from_a`), so that the flow's client is not
    /// looked up, and by whether it carries payload (`pl`). A flow no
    /// consumer follows any more costs one test of all four bits, and an
    /// endpoint whose two bits are alike one more, without the payload
    /// (the labellers leave most flows at their first payloads, so that
    /// on the realistic mix nearly every packet leaves at the first
    /// test: BENCHMARKS.md, S31). A SYN without payload of an
    /// endpoint the consumers follow is where its stream starts
    /// ([`Self::syn_seen`]).
    #[inline(always)]
    fn shown<'a, L: PayloadSource<'a>>(&mut self, s: usize, p: &Pkt, pl: &L) -> bool {
        // SAFETY: `s` is the slot `update` just ran (a slot in use).
        let e = unsafe { self.entries.get_unchecked(s) };
        let follows = e.tcp.close >> FOLLOW_SHIFT;
        if follows == 0 {
            return false;
        }
        // The endpoint's pair: bit 0 its packets with payload, bit 1 those
        // without.
        let pair = follows >> (2 * u32::from(!p.from_a)) & 3;
        if pair != 1 && pair != 2 {
            if pair == 3 && p.flags & tcp::SYN != 0 && pl.empty(p) {
                self.syn_seen(s, e.state, p, *pl);
            }
            return pair == 3;
        }
        let empty = pl.empty(p);
        if empty && p.flags & tcp::SYN != 0 {
            self.syn_seen(s, e.state, p, *pl);
        }
        pair >> u32::from(empty) & 1 != 0
    }

    /// A SYN `p` without payload of the flow in slot `s` (whose entry's
    /// state is `state`), an endpoint the consumers follow: when a
    /// consumer reads where TCP streams start
    /// ([`Consumer::reads_tcp_starts`]), its sequence number is where the
    /// endpoint's stream starts (if its TCP header was captured). A SYN
    /// with payload is shown to the consumers that read payload, which
    /// read its header themselves.
    #[cold]
    #[inline(never)]
    fn syn_seen<'a, L: PayloadSource<'a>>(&mut self, s: usize, state: u8, p: &Pkt, pl: L) {
        if !self.consumers.reads_tcp_starts() {
            return;
        }
        let Some((seq, _)) = crate::analyze::handshake::tcp_seq(pl.ip(p)) else {
            return;
        };
        let side = usize::from(p.from_a != (state & CLIENT_IS_A != 0));
        // SAFETY: `s` is the slot `update` just ran (a slot in use);
        // `tcp_starts` has one element per slot.
        unsafe { self.tcp_starts.get_unchecked_mut(s) }.set(side, seq);
    }

    /// Shows packet `p` of the flow in slot `s` (just accounted) to the
    /// consumers, with its payload found now; ends the flow when one asks
    /// to.
    #[inline(never)]
    fn consume<'a, L: PayloadSource<'a>>(&mut self, s: usize, p: &Pkt, pl: L) {
        let flow = FlowRef {
            // SAFETY: `s` is a slot in use; `tcp_starts` has one element
            // per slot.
            tcp_starts: unsafe { self.tcp_starts.get_unchecked(s) },
            ..flow_ref(&self.entries, &self.tails, &self.wide, s)
        };
        match self.consumers.packet(flow, p, pl.payload(p)) {
            None => self.end(s, EndReason::Active),
            Some(f) => self.follow(s, f),
        }
    }

    /// [`Self::consume`] of the first packet of the flow that just
    /// started in slot `s`: a packet with payload every consumer declines
    /// ([`Consumer::declines_first`]) leaves the flow followed by none,
    /// without the consumers' call (whose frame and view a flow no
    /// consumer wants would otherwise pay: BENCHMARKS.md, S39).
    #[inline(never)]
    fn consume_first<'a, L: PayloadSource<'a>>(&mut self, s: usize, p: &Pkt, pl: L) {
        let payload = pl.payload(p);
        if payload.len != 0 {
            let flow = FlowRef {
                // SAFETY: `s` is a slot in use; `tcp_starts` has one
                // element per slot.
                tcp_starts: unsafe { self.tcp_starts.get_unchecked(s) },
                ..flow_ref(&self.entries, &self.tails, &self.wide, s)
            };
            if self.consumers.declines_first(flow, p, payload) {
                self.follow(s, 0);
                return;
            }
        }
        // `pl`, not the payload found: a second copy of `consume` (for
        // `Payload`) had the compiler call the analyzers' loop out of
        // line in both (voip200's media run +5 %, BENCHMARKS.md, S39).
        self.consume(s, p, pl);
    }

    /// Keeps in slot `s`'s entry which of its packets the consumers read
    /// (`f`, in the bits at [`FOLLOW_SHIFT`]), as the packets of endpoint
    /// `a` and of endpoint `b` ([`Self::shown`]).
    #[inline]
    fn follow(&mut self, s: usize, f: Follows) {
        let e = &mut self.entries[s];
        let by_end = if e.state & CLIENT_IS_A != 0 {
            f
        } else {
            f >> 2 | (f & 3) << 2
        };
        e.tcp.close = e.tcp.close & !(0xF << FOLLOW_SHIFT) | by_end << FOLLOW_SHIFT;
    }
}

/// The lines of slot `s` (a live flow) as consumers see them, but where
/// its TCP streams start (read only by the per-packet call). Unchecked
/// reads, so that what no consumer on reads is never loaded: the cost of
/// the call is then that of the consumers on.
#[inline(always)]
pub(super) fn flow_ref<'a>(
    entries: &'a Arena<Entry>,
    tails: &'a Arena<EntryTail>,
    wide: &'a Arena<V6Addrs>,
    s: usize,
) -> FlowRef<'a> {
    debug_assert!(s < entries.capacity());
    // SAFETY: every caller passes the slot of a live flow (the packet's,
    // the one ending, the one just decided), below `high <= capacity`
    // (module docs); `wide` and `tails` have one element per slot too.
    let entry = unsafe { entries.get_unchecked(s) };
    // SAFETY: as above.
    let tail = unsafe { tails.get_unchecked(s) };
    FlowRef {
        slot: s,
        entry,
        tail,
        // SAFETY: as above.
        wide: entry.key.is_v6().then(|| unsafe { wide.get_unchecked(s) }),
        // Where the streams start only for the per-packet call (`consume`).
        tcp_starts: &TcpStarts::NONE,
    }
}

/// Moves slot `s`'s flag lanes of direction `d` into its 32-bit counters
/// (every [`SPILL_EVERY`] packets of a direction: rare).
#[cold]
fn spill_flags(
    hi: &mut Arena<FlagCounts>,
    h: &mut Entry,
    lanes: &mut tcp::FlagLanes,
    s: usize,
    d: usize,
) {
    if h.state & SPILLED == 0 {
        hi[s] = FlagCounts::default();
        h.state |= SPILLED;
    }
    tcp::spill(lanes, &mut hi[s][d]);
}

/// The prefault region of a slot array holding `per_slot` elements a slot.
fn region<T: ZeroValid>(a: &Arena<T>, per_slot: usize) -> Region {
    Region {
        base: a.ptr(0).cast(),
        per_slot: per_slot * std::mem::size_of::<T>(),
    }
}

#[inline(always)]
fn tag_of(hash: u64) -> u8 {
    (hash >> 40) as u8
}
