//! The flow table's side of the inline classifier: deciding a flow when
//! it has its first packets, sending it to the worker pool instead, and
//! applying the verdicts that come back.
//!
//! Contract: the model and the pool link live in
//! [`crate::classify::inline::Inline`]; here a flow's slot is read (its
//! early packets, protocol and ports) and its entry written (class,
//! confidence, packet count, `DECIDED`/`PENDING`), and the consumers told
//! ([`super::consumer::Consumer::verdict`]). A verdict that comes
//! back for a slot whose flow has ended or been replaced since (another
//! first timestamp or hash) is dropped.

use super::consumer::Consumer;
use super::entry::{DECIDED, IN_USE, PENDING};
use super::table::{flow_ref, FlowTable};
use crate::classify::conf_u16;
use crate::classify::pool::PoolLink;

impl<C: Consumer> FlowTable<C> {
    /// Runs the classifier on slot `s` with the early packets it has
    /// (`END`: the flow is ending, a cascade's verdict is final). Never
    /// inlined: it runs once a flow, and the table's per-packet update it
    /// is called from is inlined into the shard's loop.
    #[inline(never)]
    pub(super) fn decide<const END: bool>(&mut self, s: usize) {
        // SAFETY: every caller passes a slot below `high <= capacity` (from
        // the index, `insert_at`, the sweep, eviction or flush cursors); the
        // slot's early packets are its first `n_early <= n` entries of the
        // early array.
        let h = unsafe { self.entries.get_unchecked_mut(s) };
        let (sport, dport) = h.client_server_ports();
        // SAFETY: as above, the slot's first `n_early` early entries.
        let early = unsafe { self.early.slice_unchecked(s * self.n, h.n_early as usize) };
        if let Some(v) = self.inline.decide::<END>(early, h.key.proto, sport, dport) {
            h.app = v.app;
            h.state |= DECIDED;
            h.conf = v.conf;
            h.at = v.at;
            if self.swappable {
                self.model_ids[s] = self.inline.model_id();
            }
            self.counters.classified += 1;
            self.verdict_taken(s);
        }
    }

    /// Tells the consumers that slot `s` has just got its verdict.
    #[inline]
    fn verdict_taken(&mut self, s: usize) {
        let flow = flow_ref(&self.entries, &self.tails, &self.wide, s);
        self.consumers.verdict(flow, &self.inline);
    }

    /// Sends the classification of slot `s` to the pool; when the queue is
    /// full the flow retries at its next packet.
    pub(super) fn submit(&mut self, s: usize) {
        let h = &self.entries[s];
        let (sport, dport) = h.client_server_ports();
        let base = s * self.n;
        let early = &self.early.as_slice()[base..base + h.n_early as usize];
        let ident = (h.first_ts, h.hash);
        if self
            .inline
            .submit(s as u32, ident, early, h.key.proto, sport, dport)
        {
            self.entries[s].state |= PENDING;
        } else {
            self.counters.classify_queue_full += 1;
        }
    }

    /// Connects the table to a classifier pool (costly models).
    pub fn attach_pool(&mut self, link: PoolLink) {
        self.inline.attach_pool(link);
    }

    /// Disconnects the pool (after the final drain), so its workers can stop.
    pub fn detach_pool(&mut self) {
        self.inline.detach_pool();
    }

    /// Applies the verdicts the pool has returned; with `wait`, until no job
    /// of this table is outstanding (before the final flush).
    pub fn drain_verdicts(&mut self, wait: bool) {
        while let Some(done) = self.inline.next_done(wait) {
            let s = done.slot as usize;
            if s >= self.high {
                continue;
            }
            let h = &mut self.entries[s];
            let same = h.state & (IN_USE | PENDING) == IN_USE | PENDING
                && (h.first_ts, h.hash) == done.ident;
            if same {
                h.state = (h.state & !PENDING) | DECIDED;
                h.app = done.verdict.class;
                h.conf = conf_u16(done.verdict.confidence);
                h.at = done.verdict.at_packet;
                if self.swappable {
                    self.model_ids[s] = self.inline.model_id();
                }
                self.counters.classified += 1;
                self.verdict_taken(s);
            }
        }
    }
}
