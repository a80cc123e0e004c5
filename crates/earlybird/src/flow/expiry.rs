//! How flows end: expiry by the incremental sweep, eviction when the table
//! is full, the flush at the end of an input, and the record each ended
//! flow leaves in [`FlowTable::out`]. Kept apart from the per-packet update
//! (`table.rs`): the sweep only reclaims slots early, it never changes what
//! a record holds (see the module docs of `table.rs`).
//!
//! Contract: the table clock is the largest timestamp seen or observed
//! ([`FlowTable::now`]); a flow has expired when its idle, active or TCP
//! close time has passed at that clock; every ended flow is appended to
//! `out` once, with its reason, the consumers are told
//! ([`super::consumer::Consumer::end`]), and its slot freed.

use super::consumer::Consumer;
use super::entry::{Entry, CLOSED, DECIDED, IN_USE, PENDING, SPILLED};
use super::record::{Beside, EndReason};
use super::table::{flow_ref, FlowTable, EVICT_CANDIDATES};
use crate::flow::packet::is_icmp;
use crate::time::Nanos;

impl<C: Consumer> FlowTable<C> {
    /// Ends slot `s`: appends its record to [`Self::out`] and frees it.
    pub(super) fn end(&mut self, s: usize, reason: EndReason) {
        self.emit(s, reason);
        self.remove(s);
    }

    /// Appends the record of slot `s` to [`Self::out`] and tells the
    /// consumers (the slot stays).
    pub(super) fn emit(&mut self, s: usize, reason: EndReason) {
        let state = self.entries[s].state;
        if state & PENDING != 0 {
            self.counters.verdicts_late += 1;
        } else if self.inline.has_model()
            && state & DECIDED == 0
            && self.entries[s].n_early > 0
            && !self.inline.pooled()
        {
            // A flow shorter than N packets: cheap models decide with what it
            // had. (With a pooled model it stays unknown: no stall at its end.)
            self.decide::<true>(s);
        }
        // A snapshot, not a record: the record is built later, on the
        // exporter thread unless it lags (flow/snapshot.rs).
        let h = &self.entries[s];
        let beside = Beside {
            extra: self.full_stats.then(|| &self.extra[s]),
            wide: h.key.is_v6().then(|| &self.wide[s]),
            flags_hi: (h.state & SPILLED != 0).then(|| &self.flags_hi[s]),
            icmp: is_icmp(h.key.proto).then(|| &self.icmp[s]),
        };
        let base = s * self.n;
        let early = &self.early.as_slice()[base..base + self.n];
        let model = match self.swappable {
            true => self.model_ids[s],
            false => 0,
        };
        self.out
            .push_raw(h, &self.tails[s], reason, beside, early, model);
        let flow = flow_ref(&self.entries, &self.tails, &self.wide, s);
        self.consumers.end(flow, reason, &mut self.out);
        self.counters.ended[reason as usize] += 1;
    }

    /// Removes slot `s` from the index (backward-shift deletion) and frees it.
    pub(super) fn remove(&mut self, s: usize) {
        let want = s as u32 + 1;
        let mut i = self.entries[s].hash as usize & self.mask;
        while self.index[i] & 0x00FF_FFFF != want {
            i = (i + 1) & self.mask;
        }
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let e = self.index[j];
            if e == 0 {
                break;
            }
            let home = self.entries[(e & 0x00FF_FFFF) as usize - 1].hash as usize & self.mask;
            // Entry at j stays if its home lies cyclically in (i, j].
            let stays = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !stays {
                self.index[i] = e;
                i = j;
            }
        }
        self.index[i] = 0;
        self.entries[s].state = 0;
        self.free.push(s as u32);
        self.used -= 1;
    }

    /// Why slot `s` has expired at time `now`, if it has (reads only its
    /// entry line).
    #[inline]
    pub(super) fn expired(&self, s: usize, now: Nanos) -> Option<EndReason> {
        let e = &self.entries[s];
        if e.state & IN_USE == 0 {
            return None;
        }
        let gap = now.saturating_sub(e.last_ts);
        if e.state & CLOSED != 0 && gap > self.close {
            Some(close_reason(e))
        } else if gap > self.idle {
            Some(EndReason::Idle)
        } else if now.saturating_sub(e.first_ts) > self.active {
            Some(EndReason::Active)
        } else {
            None
        }
    }

    /// Marks the start of a batch of the input: packets of the batch are
    /// timed from no earlier than the table clock now (the largest
    /// timestamp of every batch before, whichever shard its packets went
    /// to, once [`FlowTable::observe_time`] has been called with it).
    #[inline]
    pub fn begin_batch(&mut self) {
        self.floor = self.now;
    }

    /// The floor the current batch's packets are timed from (see
    /// [`Self::begin_batch`]).
    #[inline]
    pub fn floor(&self) -> Nanos {
        self.floor
    }

    /// The table clock: the largest timestamp seen so far (or observed).
    #[inline]
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Starts a new time domain: the clock goes back to zero, so the next
    /// packets are timed from their own stamps. Call on an empty table
    /// (after [`Self::flush`]).
    pub fn restart_clock(&mut self) {
        debug_assert!(self.is_empty());
        self.now = 0;
        self.floor = 0;
    }

    /// Advances the table clock to `ts` without a packet of its own (a
    /// packet of another shard was seen).
    #[inline]
    pub fn observe_time(&mut self, ts: Nanos) {
        if ts > self.now {
            self.now = ts;
        }
    }

    /// Incremental expiry: examines the next `sweep_per_batch` slots and
    /// ends the flows that have timed out. Call once per batch (it also
    /// tells the prefault helper how far the slots in use reach).
    pub fn sweep(&mut self) {
        if let Some(p) = &mut self.prefault {
            p.advance(self.high);
        }
        self.sweep_n(self.sweep_per_batch);
    }

    /// Examines the next `n` slots (at most every slot in use once) and ends
    /// the flows that have timed out; returns how many. For sources whose
    /// batches do not come at a steady pace (live capture).
    pub fn sweep_slots(&mut self, n: usize) -> usize {
        self.sweep_n(n)
    }

    /// Slots up to the highest ever used (what a full sweep examines).
    pub fn slots_in_use(&self) -> usize {
        self.high
    }

    pub(super) fn sweep_n(&mut self, n: usize) -> usize {
        let high = self.high;
        if high == 0 {
            return 0;
        }
        let mut ended = 0;
        for _ in 0..n.min(high) {
            if self.cursor >= high {
                self.cursor = 0;
            }
            let s = self.cursor;
            self.cursor += 1;
            if let Some(r) = self.expired(s, self.now) {
                self.end(s, r);
                ended += 1;
            }
        }
        ended
    }

    /// Frees one slot when the table is full (see the module docs).
    pub(super) fn make_room(&mut self) {
        // The per-batch sweep already frees expired flows, so no long scan
        // here (a 1,024-slot scan per new flow made a full table of live
        // flows 25x slower): the least recently seen of the next few live
        // flows goes — with the reason the sweep would give it if it has
        // expired, else `evicted`.
        let high = self.high;
        let mut best: Option<usize> = None;
        let mut seen = 0;
        let mut s = self.cursor;
        while seen < EVICT_CANDIDATES {
            if s >= high {
                s = 0;
            }
            if self.entries[s].state & IN_USE != 0 {
                seen += 1;
                if best.is_none_or(|b| self.entries[s].last_ts < self.entries[b].last_ts) {
                    best = Some(s);
                }
            }
            s += 1;
        }
        self.cursor = s;
        if let Some(b) = best {
            let reason = self.expired(b, self.now).unwrap_or(EndReason::Evicted);
            self.end(b, reason);
        }
    }

    /// Ends every live flow (end of input, signal). A flow that has already
    /// timed out at the last packet time gets the reason the sweep would have
    /// given it (so the reason never depends on when the sweep ran); a closed
    /// connection ends `fin`/`rst`; any other flow `end_of_input`.
    pub fn flush(&mut self) {
        while !self.flush_some(usize::MAX) {}
    }

    /// [`Self::flush`] in steps: ends live flows until `max` records have
    /// been appended to [`Self::out`] or none is left; returns true once the
    /// table is empty. Lets the caller hand records over between steps, so a
    /// table of millions of flows never builds one giant batch.
    ///
    /// The index is emptied in whichever way costs less: each flow's bucket
    /// removed as the flow ends while the live flows are few beside the
    /// buckets ([`Self::few_live`]), else the whole index cleared in one
    /// pass at the end. Ends of time domains (a directory of short
    /// captures: one per file) flush a table holding a few hundred flows,
    /// whose index still has millions of buckets.
    pub fn flush_some(&mut self, max: usize) -> bool {
        let mut emitted = 0;
        while self.flush_cursor < self.high {
            if emitted >= max {
                return false;
            }
            let s = self.flush_cursor;
            self.flush_cursor += 1;
            if self.entries[s].state & IN_USE != 0 {
                let r = match self.expired(s, self.now) {
                    Some(r) => r,
                    None if self.entries[s].state & CLOSED != 0 => close_reason(&self.entries[s]),
                    None => EndReason::EndOfInput,
                };
                self.emit(s, r);
                // `used` only falls by a removal, so a flush that starts
                // with few live flows removes every one of them, and one
                // that does not removes none.
                if self.few_live() {
                    self.remove(s);
                } else {
                    self.entries[s].state = 0;
                    self.free.push(s as u32);
                }
                emitted += 1;
            }
        }
        if self.used != 0 {
            self.index.as_mut_slice().fill(0);
            self.used = 0;
        }
        self.flush_cursor = 0;
        true
    }

    /// Whether removing each live flow's bucket (a probe from its home
    /// bucket, a cache line or two) costs less than clearing the whole
    /// index: fewer live flows than a 128th of the buckets (a removal
    /// against 512 bytes of the clearing pass).
    #[inline]
    fn few_live(&self) -> bool {
        self.used < (self.mask + 1) / 128
    }
}

pub(super) fn close_reason(e: &Entry) -> EndReason {
    if e.tcp.reset() {
        EndReason::Rst
    } else {
        EndReason::Fin
    }
}
