//! Models swapped into the shards of a running capture (`flows --learn`).
//!
//! Contract: a [`Swap`] is shared by the shards of a run and the thread
//! that trains models. The trainer [`Swap::publish`]es a model with its
//! number; each shard installs the latest published model between two
//! batches ([`ShardLink::between_batches`]: one atomic load per batch when
//! nothing is new). Flows already decided keep their verdict; a flow is
//! decided by the model in use at the packet that decides it, and its
//! record names that model (`model_id`).
//!
//! Live runs (`every_turns` 0) install a model at the first batch after it
//! is published, or at the shard's next tick when no packet comes
//! (`pipeline/live.rs`). File runs install models at fixed points of the input:
//! after every `every_turns`-th batch turn (turns are counted across the
//! files of the run and have the same boundaries whatever the number of
//! shards, see `crate::exchange`) each shard hands over its finished
//! records, says how many flow records it has sent in all, and waits
//! ([`ShardLink::between_batches`]) until the trainer has seen that many
//! records ([`Swap::seen`]), has taken the point ([`Swap::next_point`])
//! and has released it ([`Swap::release`]), with a new model or without.
//! The trainer publishes at a point only the model it trained from the
//! records before the point before (`learn/online.rs`), so the shards run
//! while it trains. So which model decides which flow does not depend on
//! the number of shards nor on how fast the trainer is. A shard that leaves its input
//! (its end, or a stop) leaves the points ([`ShardLink::leave`]) so no
//! other shard waits for it; [`Swap::close`] (the trainer is done) lets
//! every waiting shard go on.
//!
//! Classes: a swapped model's classes are mapped by name onto the run's
//! class names ([`Swap::classes`], fixed when the run starts), so records
//! index one list of names whichever model decided them; a class the run
//! does not name is `unknown`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::{Classifier, FlowFeatures, Model, Verdict};

/// A model as the run's shards run it: its classes mapped onto the run's.
pub struct Mapped {
    model: Arc<Model>,
    map: Vec<u16>,
    names: Arc<[String]>,
}

impl Mapped {
    /// `model` with its classes looked up in `names`.
    pub fn new(model: Arc<Model>, names: Arc<[String]>) -> Mapped {
        let map = model
            .info
            .classes
            .iter()
            .map(|c| {
                names
                    .iter()
                    .position(|n| n == c)
                    .map_or(Verdict::UNKNOWN, |i| i as u16)
            })
            .collect();
        Mapped { model, map, names }
    }
}

impl Classifier for Mapped {
    fn packets_needed(&self) -> usize {
        self.model.packets_needed()
    }

    fn classify(&self, f: &FlowFeatures<'_>) -> Verdict {
        let mut v = self.model.classify(f);
        if v.class != Verdict::UNKNOWN {
            v.class = self
                .map
                .get(usize::from(v.class))
                .copied()
                .unwrap_or(Verdict::UNKNOWN);
        }
        v
    }

    fn classes(&self) -> &[String] {
        &self.names
    }

    fn costly(&self) -> bool {
        self.model.costly()
    }
}

/// The model a swap installs: its number in the run and the classifier.
pub type Numbered = (u16, Arc<dyn Classifier>);

/// When a shard took a model in: the model's number, the batch turn after
/// which it was installed (file runs; 0 live) and the packet time of the
/// shard's clock then (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Installed {
    /// The model's number.
    pub id: u16,
    /// Batch turns run before it (file runs; 0 in live runs).
    pub turn: u64,
    /// The shard's clock (packet time, ns).
    pub packet_time: u64,
}

#[derive(Default)]
struct State {
    model: Option<Numbered>,
    /// Per shard: the last point it reached, the flow records it had sent
    /// then, and whether it has left.
    reached: Vec<u64>,
    sent: Vec<u64>,
    left: Vec<bool>,
    /// Points taken by the trainer, and released.
    taken: u64,
    released: u64,
    /// Flow records the trainer has seen.
    seen: u64,
    closed: bool,
    /// The first installation of a model other than the run's own.
    first: Option<Installed>,
    /// Installations, all shards.
    installs: u64,
    /// The model a shard took in last (`None`: the run's own).
    latest: Option<u16>,
}

/// What [`Swap::wait_point`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// Every shard reached (or left) point `n`, its records all seen.
    Reached(u64),
    /// The trainer is done ([`Swap::close`]).
    Closed,
    /// The deadline came first.
    NotYet,
}

/// The hub between the trainer and the shards (see the module docs).
pub struct Swap {
    classes: Arc<[String]>,
    every_turns: u64,
    generation: AtomicU64,
    state: Mutex<State>,
    cond: Condvar,
}

impl std::fmt::Debug for Swap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Swap")
            .field("classes", &self.classes.len())
            .field("every_turns", &self.every_turns)
            .finish()
    }
}

impl Swap {
    /// A hub for `shards` shards whose records name `classes`; file runs
    /// stop at a point every `every_turns` batch turns (0: never, models
    /// are installed as soon as published).
    pub fn new(classes: Arc<[String]>, shards: usize, every_turns: u64) -> Swap {
        Swap {
            classes,
            every_turns,
            generation: AtomicU64::new(0),
            state: Mutex::new(State {
                reached: vec![0; shards],
                sent: vec![0; shards],
                left: vec![false; shards],
                ..State::default()
            }),
            cond: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run's class names, which every model's verdicts index.
    pub fn classes(&self) -> Arc<[String]> {
        self.classes.clone()
    }

    /// True when file runs stop at fixed points.
    pub fn at_points(&self) -> bool {
        self.every_turns > 0
    }

    /// Makes model number `id` the one every shard installs next.
    pub fn publish(&self, id: u16, model: Arc<Model>) {
        let mapped: Arc<dyn Classifier> = Arc::new(Mapped::new(model, self.classes.clone()));
        self.lock().model = Some((id, mapped));
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The trainer has seen `n` more flow records.
    pub fn seen(&self, n: u64) {
        let mut s = self.lock();
        s.seen += n;
        self.cond.notify_all();
    }

    /// Waits for the next point every shard has reached (or left) whose
    /// records the trainer has all seen, and returns its number (1, 2, …);
    /// `None` once [`Swap::close`]d or when no shard is left to reach one.
    pub fn next_point(&self) -> Option<u64> {
        match self.wait_point(None) {
            Point::Reached(b) => Some(b),
            Point::Closed | Point::NotYet => None,
        }
    }

    /// As [`Swap::next_point`], but waits at most until `deadline`
    /// (`None`: as long as it takes): [`Point::NotYet`] then.
    pub fn wait_point(&self, deadline: Option<Instant>) -> Point {
        let mut s = self.lock();
        loop {
            if s.closed {
                return Point::Closed;
            }
            let b = s.taken + 1;
            let running = s.left.iter().filter(|l| !**l).count();
            let all = (0..s.reached.len()).all(|i| s.left[i] || s.reached[i] >= b);
            let sent: u64 = s.sent.iter().sum();
            if running > 0 && all && s.seen >= sent {
                s.taken = b;
                return Point::Reached(b);
            }
            let mut wait = Duration::from_millis(200);
            if let Some(d) = deadline {
                match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => wait = wait.min(left),
                    _ => return Point::NotYet,
                }
            }
            s = self
                .cond
                .wait_timeout(s, wait)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Lets the shards waiting at point `b` go on (after a
    /// [`Swap::publish`] if the point brought a model).
    pub fn release(&self, b: u64) {
        let mut s = self.lock();
        s.released = s.released.max(b);
        self.cond.notify_all();
    }

    /// The trainer is done: no shard waits any more.
    pub fn close(&self) {
        let mut s = self.lock();
        s.closed = true;
        self.cond.notify_all();
    }

    /// The first installation of a learnt model (`None` while the run's
    /// own model is in use), and the installations made in all shards.
    pub fn installed(&self) -> (Option<Installed>, u64) {
        let s = self.lock();
        (s.first, s.installs)
    }

    /// The number of the model a shard took in last (0: none yet, the
    /// run's own model decides).
    pub fn in_use(&self) -> u16 {
        self.lock().latest.unwrap_or(0)
    }

    /// Shard `shard`'s end of the hub.
    pub fn link(self: &Arc<Self>, shard: usize) -> ShardLink {
        ShardLink {
            swap: self.clone(),
            shard,
            generation: 0,
            turns: 0,
            point: 0,
            left: false,
        }
    }
}

/// A shard's end of a [`Swap`].
pub struct ShardLink {
    swap: Arc<Swap>,
    shard: usize,
    generation: u64,
    turns: u64,
    point: u64,
    left: bool,
}

impl ShardLink {
    /// After each batch turn the shard has run: at a point (file runs),
    /// `flush` hands its finished records over and returns how many flow
    /// records it has sent in all, and the shard waits for the point's
    /// release (or for `stopping`); then, when a model newer than the one
    /// in use was published, returns it to install. `now` is the shard's
    /// clock, kept with the first installation.
    pub fn between_batches(
        &mut self,
        now: u64,
        flush: impl FnOnce() -> u64,
        stopping: impl Fn() -> bool,
    ) -> Option<Numbered> {
        self.turns += 1;
        if self.swap.every_turns > 0
            && self.turns.is_multiple_of(self.swap.every_turns)
            && !self.left
        {
            self.point += 1;
            let sent = flush();
            let sw = &self.swap;
            let mut s = sw.lock();
            s.reached[self.shard] = self.point;
            s.sent[self.shard] = sent;
            sw.cond.notify_all();
            while s.released < self.point && !s.closed && !stopping() {
                s = sw
                    .cond
                    .wait_timeout(s, Duration::from_millis(100))
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        let g = self.swap.generation.load(Ordering::Acquire);
        if g == self.generation {
            return None;
        }
        self.generation = g;
        let mut s = self.swap.lock();
        let m = s.model.clone()?;
        s.installs += 1;
        s.latest = Some(m.0);
        if s.first.is_none() {
            s.first = Some(Installed {
                id: m.0,
                turn: if self.swap.every_turns > 0 {
                    self.turns
                } else {
                    0
                },
                packet_time: now,
            });
        }
        Some(m)
    }

    /// The shard has left its input, having sent `sent` flow records in
    /// all: no point waits for it.
    pub fn leave(&mut self, sent: u64) {
        self.left = true;
        let mut s = self.swap.lock();
        s.left[self.shard] = true;
        s.sent[self.shard] = sent;
        self.swap.cond.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_waits_for_every_shard_and_every_record() {
        let sw = Arc::new(Swap::new(Arc::from(vec!["a".to_string()]), 2, 1));
        let mut l0 = sw.link(0);
        let mut l1 = sw.link(1);
        let t = {
            let sw = sw.clone();
            std::thread::spawn(move || {
                let b = sw.next_point();
                sw.release(b.unwrap_or(0));
                b
            })
        };
        let h0 = std::thread::spawn(move || l0.between_batches(0, || 3, || false).is_none());
        sw.seen(3);
        let h1 = std::thread::spawn(move || l1.between_batches(0, || 4, || false).is_none());
        sw.seen(4);
        assert_eq!(t.join().ok().flatten(), Some(1));
        assert!(h0.join().unwrap_or(false));
        assert!(h1.join().unwrap_or(false));
    }

    #[test]
    fn a_left_shard_is_not_waited_for_and_close_frees_the_others() {
        let sw = Arc::new(Swap::new(Arc::from(vec![]), 2, 1));
        let mut l0 = sw.link(0);
        let mut l1 = sw.link(1);
        l1.leave(0);
        let h0 = std::thread::spawn(move || l0.between_batches(0, || 0, || false));
        assert_eq!(sw.next_point(), Some(1));
        sw.close();
        assert!(h0.join().map(|m| m.is_none()).unwrap_or(false));
        assert_eq!(sw.next_point(), None);
    }
}
