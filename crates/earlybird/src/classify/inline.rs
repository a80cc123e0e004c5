//! The classifier a flow table runs inline: which form of the model
//! decides a flow, and the table's link to the worker pool.
//!
//! Contract: [`Inline`] is built from the run's model (or none) and the
//! number of early packets the table keeps. It says at which early packet a
//! flow is decided ([`Inline::decide_at`], 0 = never) and decides one flow
//! from its early packets ([`Inline::decide`]): a C4.5 model through its
//! compiled [`FastTree`] (no dynamic call), any other model through
//! [`Classifier::classify`]; the verdict comes back as the table stores it
//! ([`EntryVerdict`]: class, confidence × 65535, packet count). With a
//! pool attached ([`Inline::attach_pool`]), flows go to the worker threads
//! instead ([`Inline::submit`]) and their verdicts come back through
//! [`Inline::next_done`]. A cascade (one model per early packet,
//! `cascade.rs`) is asked from its first packet K1 on ([`Inline::decide_at`]
//! is K1) and answers `None` while the flow should wait for its next
//! packet; the end of a flow (`END`) takes its verdict as it is. Models
//! that are not cascades run exactly as before: the cascade is looked at
//! only where they have no model (`model` is `None` for a cascade).
//! The table keeps the flows; this keeps the model. Nothing here allocates.

use std::sync::Arc;

use super::cascade::InlineCascade;
use super::compiled_tree::{EntryVerdict, FastTree};
use super::pool::{Done, Job, PoolLink};
use super::{conf_u16, Classifier, FlowFeatures};
use crate::features::early::{EarlyPkt, MAX_EARLY};

/// A flow table's inline classifier (see the module docs).
pub struct Inline {
    /// The model, unless it is a cascade.
    model: Option<Arc<dyn Classifier>>,
    /// The model when it is a cascade.
    cascade: Option<InlineCascade>,
    /// There is a model (single or cascade).
    has_model: bool,
    /// The model's direct form, when it has one (C4.5): same verdicts as
    /// `classify`, no dynamic call.
    tree: Option<FastTree>,
    decide_at: usize,
    pool: Option<PoolLink>,
    /// The model runs on the pool (stays true after the pool is detached).
    pooled: bool,
    /// Jobs submitted whose verdict has not come back.
    outstanding: usize,
    /// Packet sampling 1 in N (1: none): the model sees each early
    /// inter-arrival divided by N ([`Inline::sampled`]).
    iat_divisor: u32,
    /// The number of the model in the run (0: the run's own; then the
    /// models swapped in, [`Inline::swap`]).
    model_id: u16,
}

impl Inline {
    /// The classifier of a table keeping `n` early packets per flow.
    pub fn new(model: Option<Arc<dyn Classifier>>, n: usize) -> Inline {
        let cascade = model.as_ref().and_then(|m| m.cascade());
        let has_model = model.is_some();
        let model = if cascade.is_some() { None } else { model };
        Inline {
            decide_at: match (&cascade, &model) {
                (Some(c), _) => c.first().clamp(1, n),
                (None, Some(m)) => m.packets_needed().clamp(1, n),
                (None, None) => 0,
            },
            tree: model.as_ref().and_then(|m| m.fast_tree()),
            model,
            cascade,
            has_model,
            pool: None,
            pooled: false,
            outstanding: 0,
            iat_divisor: 1,
            model_id: 0,
        }
    }

    /// Replaces the model by `model`, number `id`, for a table keeping `n`
    /// early packets per flow; the sampling correction and the pool link
    /// stay (the caller swaps only models that do not run on the pool).
    pub fn swap(&mut self, model: Arc<dyn Classifier>, id: u16, n: usize) {
        let mut new = Inline::new(Some(model), n);
        new.iat_divisor = self.iat_divisor;
        new.pool = self.pool.take();
        new.pooled = self.pooled;
        new.outstanding = self.outstanding;
        new.model_id = id;
        *self = new;
    }

    /// The number of the model in use (see [`Inline::swap`]).
    #[inline]
    pub fn model_id(&self) -> u16 {
        self.model_id
    }

    /// The run keeps 1 packet in `n`: the gaps between the early packets a
    /// flow keeps span about `n` gaps of the unsampled flow, so the model
    /// is shown each inter-arrival divided by `n` (thesis Ch. 6.5), the
    /// gaps it was trained on.
    pub fn sampled(mut self, n: u32) -> Inline {
        self.iat_divisor = n.max(1);
        self
    }

    /// `early` corrected for sampling (inter-arrivals divided by N).
    #[cold]
    #[inline(never)]
    fn corrected(&self, early: &[EarlyPkt]) -> ([EarlyPkt; MAX_EARLY], usize) {
        let mut buf = [EarlyPkt::default(); MAX_EARLY];
        let n = early.len().min(MAX_EARLY);
        for (b, e) in buf.iter_mut().zip(&early[..n]) {
            *b = EarlyPkt {
                iat_us: e.iat_us / self.iat_divisor,
                ..*e
            };
        }
        (buf, n)
    }

    /// The early packet at which a flow is decided; 0 without a model.
    #[inline(always)]
    pub fn decide_at(&self) -> usize {
        self.decide_at
    }

    /// True when there is a model.
    #[inline]
    pub fn has_model(&self) -> bool {
        self.has_model
    }

    /// The name of class `c` of the model (`None`: no model, or no such
    /// class).
    pub fn class_name(&self, c: u16) -> Option<&str> {
        let classes = match (&self.model, &self.cascade) {
            (Some(m), _) => m.classes(),
            (None, Some(c)) => c.classes(),
            (None, None) => return None,
        };
        classes.get(c as usize).map(String::as_str)
    }

    /// True when the model runs on the pool.
    #[inline]
    pub fn pooled(&self) -> bool {
        self.pooled
    }

    /// True while a pool is attached: flows are submitted, not decided.
    #[inline(always)]
    pub fn on_pool(&self) -> bool {
        self.pool.is_some()
    }

    /// The verdict on a flow of protocol `proto` between ports `sport`
    /// (client) and `dport` from its early packets; `None` without a model,
    /// and from a cascade while the flow should wait for its next packet
    /// (never at the flow's end, `END`).
    #[inline]
    pub fn decide<const END: bool>(
        &self,
        early: &[EarlyPkt],
        proto: u8,
        sport: u16,
        dport: u16,
    ) -> Option<EntryVerdict> {
        if self.iat_divisor > 1 {
            let (buf, n) = self.corrected(early);
            return self.decide_seen::<END>(&buf[..n], proto, sport, dport);
        }
        self.decide_seen::<END>(early, proto, sport, dport)
    }

    /// [`Inline::decide`] on early packets as the model is to see them.
    #[inline]
    fn decide_seen<const END: bool>(
        &self,
        early: &[EarlyPkt],
        proto: u8,
        sport: u16,
        dport: u16,
    ) -> Option<EntryVerdict> {
        if let Some(tree) = &self.tree {
            return Some(tree.decide(early, proto, dport));
        }
        let Some(model) = self.model.as_ref() else {
            return self.decide_cascade::<END>(early, proto, sport, dport);
        };
        let v = model.classify(&FlowFeatures {
            early,
            proto,
            sport,
            dport,
        });
        Some(EntryVerdict {
            app: v.class,
            conf: conf_u16(v.confidence),
            at: v.at_packet,
        })
    }

    /// The cascade's verdict (see [`Self::decide`]); kept out of line so
    /// that single models run the same instructions as without cascades.
    #[inline(never)]
    #[cold]
    fn decide_cascade<const END: bool>(
        &self,
        early: &[EarlyPkt],
        proto: u8,
        sport: u16,
        dport: u16,
    ) -> Option<EntryVerdict> {
        self.cascade
            .as_ref()?
            .decide(early, proto, sport, dport, END)
    }

    /// Sends a flow to the pool: `slot` and `ident` name it when its verdict
    /// comes back. False when there is no pool or its queue is full.
    pub fn submit(
        &mut self,
        slot: u32,
        ident: (u64, u32),
        early: &[EarlyPkt],
        proto: u8,
        sport: u16,
        dport: u16,
    ) -> bool {
        let Some(pool) = &self.pool else {
            return false;
        };
        let n = early.len().min(MAX_EARLY);
        let mut job = Job {
            shard: pool.shard,
            slot,
            ident,
            early: [EarlyPkt::default(); MAX_EARLY],
            n: n as u8,
            proto,
            sport,
            dport,
        };
        job.early[..n].copy_from_slice(&early[..n]);
        if self.iat_divisor > 1 {
            for e in &mut job.early[..n] {
                e.iat_us /= self.iat_divisor;
            }
        }
        if pool.jobs.try_send(job).is_ok() {
            self.outstanding += 1;
            true
        } else {
            false
        }
    }

    /// The next verdict the pool has returned; with `wait`, waits for one
    /// while jobs are outstanding. `None` when there is none (or no pool).
    pub fn next_done(&mut self, wait: bool) -> Option<Done> {
        let pool = self.pool.as_ref()?;
        let done = if wait && self.outstanding > 0 {
            pool.done.recv().ok()?
        } else {
            pool.done.try_recv().ok()?
        };
        self.outstanding = self.outstanding.saturating_sub(1);
        Some(done)
    }

    /// Connects the pool (costly models).
    pub fn attach_pool(&mut self, link: PoolLink) {
        self.pool = Some(link);
        self.pooled = true;
    }

    /// Disconnects the pool (after the final drain), so its workers can stop.
    pub fn detach_pool(&mut self) {
        self.pool = None;
    }
}
