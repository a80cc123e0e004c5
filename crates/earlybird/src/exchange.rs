//! How the packets of a file reach shards when there are several: batches
//! are read in turn, and each reader hands every shard its packets.
//!
//! Contract: with N shards, batch number `t` of the input (counted across
//! the files of a run, the same boundaries for every shard) is *read* by
//! shard `t mod N`: it walks the batch's records, decodes every packet once
//! (key and symmetric flow hash), counts them
//! ([`crate::shard::Shard::split`]) and puts each packet, decoded, in input
//! order, into its shard's [`ShardBatch`] — its own included, kept on a local
//! queue.
//! The other shards step over the batch's record headers
//! ([`crate::source::CaptureReader::skip_batch`], which keeps them on the
//! same batch boundaries), or jump to where the batch ends when its reader
//! has already published that ([`Ends::publish_end`], one atomic store per
//! batch, and [`Ends::end_of_turn`]). Every shard then *runs* the turns in order, each
//! from the shard batch its reader made: its packets in input order, its clock
//! advancing batch by batch as if it had read the whole file, so records
//! do not depend on the number of shards.
//!
//! Reading runs up to [`LOOKAHEAD`] turns ahead of running, so a reader
//! never waits for its own table work of the turns before, and the shards
//! overlap instead of taking turns. Shard batches travel over one bounded channel
//! per ordered pair of shards ([`Ends`], [`DEPTH`] deep) and come back
//! emptied for reuse: nothing is allocated per batch once the first
//! shard batches exist. Waiting cannot form a cycle: a shard waits for a shard batch
//! only when the shard that reads that turn has not read it yet, which
//! puts that shard's running more than `LOOKAHEAD` turns behind; and
//! `DEPTH` is at least `LOOKAHEAD`, so a reader never waits on a full
//! channel of a shard that is waiting for it.
//!
//! Every shard ends a file at the same turn. Normally their readers find
//! the same end, but when the file shrinks while it is read (another
//! process truncates it, see [`crate::source::vanish`]) a reader that got
//! there first may have read turns intact that a later one finds gone. So
//! each shard publishes how many turns of the file it has found
//! ([`Ends::progress`], one store per turn), and a shard whose reader has
//! ended goes on with the turns any other shard found
//! ([`Ends::turn_after_end`]: for its own it sends empty shard batches, since
//! their bytes are gone) until every shard's reader has ended: the file
//! ends at the most turns any shard found.
//!
//! Nothing read is lost when a run stops early (a stop request, or a shard
//! that left): a shard that stops reading drops its sending ends, and every
//! shard goes on running, in turn order, each shard batch that was read for it
//! (skipping turns nobody read) until every other shard has stopped and
//! been drained. So every packet counted as read was run through a table
//! or counted as skipped (tests/engine/interrupt.rs).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{bounded, Receiver, Sender};

use crate::shard::ShardBatch;
use crate::source::retime::RunState;

/// Turns a shard reads ahead of the turn it runs.
pub const LOOKAHEAD: usize = 16;

/// Shard batches in flight from one shard to another (at least [`LOOKAHEAD`]).
pub const DEPTH: usize = LOOKAHEAD;

/// Turns whose end position can be published at once (a ring, far more
/// than any shard reads ahead of another).
const SLOTS: usize = 64;
/// Low bits of a published word: the turn number (mod 2^20).
const TURN_BITS: u32 = 20;

/// A shard's progress word while its reader stops sending for good.
const LEFT: u64 = u64::MAX;
/// Bits of a progress word below the file number: turns, then one bit
/// for "its reader has ended".
const READ_BITS: u32 = 47;

/// Where a shard is in the files of the run: its word (file number mod
/// 2^16, reader ended, turns found) and the turns of the last file it
/// finished. One cache line each, written by its shard only.
#[repr(align(128))]
#[derive(Default)]
struct Progress {
    word: AtomicU64,
    last_final: AtomicU64,
}

/// Whether the next turn of a file exists, for a shard whose reader has
/// ended ([`Ends::turn_after_end`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agreement {
    /// Another shard found it: run it (send empty shard batches if it is ours).
    Exists,
    /// Every other shard's reader has ended before it: the file ends.
    End,
    /// Not known yet: some reader has not ended.
    Undecided,
}

/// One shard's ends of the exchange.
pub struct Ends {
    id: usize,
    /// Every shard's [`Progress`].
    progress: Arc<[Progress]>,
    /// Where each recent turn ended in its file, published by its reader
    /// (position << TURN_BITS | turn mod 2^TURN_BITS), shared by every
    /// shard, so the others can jump over the turn instead of walking its
    /// record headers.
    ends_of_turns: Arc<[AtomicU64]>,
    /// The batch-timestamp correction's state at the end of each recent
    /// turn (`--timestamps`), published by its reader before the turn's
    /// end, so the others can jump over the turn and go on from it.
    turn_states: TurnStates,
    /// `to[j]`: shard batches for shard `j` (`None` for this shard).
    to: Vec<Option<Sender<ShardBatch>>>,
    /// `from[j]`: shard batches shard `j` read for this one.
    from: Vec<Option<Receiver<ShardBatch>>>,
    /// `back_to[j]`: emptied shard batches going back to shard `j`.
    back_to: Vec<Option<Sender<ShardBatch>>>,
    /// `back_from[j]`: this shard's shard batches, emptied by shard `j`.
    back_from: Vec<Option<Receiver<ShardBatch>>>,
    /// The shard batches being filled, one per shard.
    filling: Vec<ShardBatch>,
    /// This shard's own shard batches, read and not yet run.
    mine: VecDeque<ShardBatch>,
    /// Emptied shard batches of this shard's own.
    spare: Vec<ShardBatch>,
    /// `gone[j]`: shard `j` has stopped reading and everything it read
    /// for this shard has been taken.
    gone: Vec<bool>,
    capacity: usize,
}

/// Slots of turn number and run state ([`Ends::publish_state`]).
type TurnStates = Arc<[Mutex<(usize, Option<RunState>)>]>;

/// The exchange between `shards` shards whose batches hold up to `batch`
/// packets: one [`Ends`] per shard, in shard order.
pub fn mesh(shards: usize, batch: usize) -> Vec<Ends> {
    let ends_of_turns: Arc<[AtomicU64]> = (0..SLOTS).map(|_| AtomicU64::new(u64::MAX)).collect();
    let progress: Arc<[Progress]> = (0..shards).map(|_| Progress::default()).collect();
    let turn_states: TurnStates = (0..SLOTS).map(|_| Mutex::new((usize::MAX, None))).collect();
    let mut ends: Vec<Ends> = (0..shards)
        .map(|id| Ends {
            id,
            progress: progress.clone(),
            ends_of_turns: ends_of_turns.clone(),
            turn_states: turn_states.clone(),
            to: (0..shards).map(|_| None).collect(),
            from: (0..shards).map(|_| None).collect(),
            back_to: (0..shards).map(|_| None).collect(),
            back_from: (0..shards).map(|_| None).collect(),
            filling: (0..shards).map(|_| ShardBatch::none()).collect(),
            mine: VecDeque::new(),
            spare: Vec::new(),
            gone: vec![false; shards],
            capacity: batch,
        })
        .collect();
    for a in 0..shards {
        for b in 0..shards {
            if a == b {
                continue;
            }
            let (tx, rx) = bounded(DEPTH);
            ends[a].to[b] = Some(tx);
            ends[b].from[a] = Some(rx);
            // Room for every shard batch that can exist between the two, so
            // giving one back never waits.
            let (tx, rx) = bounded(DEPTH + 2);
            ends[b].back_to[a] = Some(tx);
            ends[a].back_from[b] = Some(rx);
        }
    }
    ends
}

impl Ends {
    /// The reader of `turn` read a whole batch and it ends at byte
    /// `position` of its file: the other shards may jump there
    /// ([`Ends::end_of_turn`]). One store per batch.
    pub fn publish_end(&self, turn: usize, position: u64) {
        if position < 1 << (64 - TURN_BITS) {
            let word = position << TURN_BITS | (turn as u64 & ((1 << TURN_BITS) - 1));
            self.ends_of_turns[turn % SLOTS].store(word, Ordering::Release);
        }
    }

    /// Publishes the timestamp correction's state at the end of `turn`
    /// (before its end: whoever finds the end finds the state).
    pub(crate) fn publish_state(&self, turn: usize, st: RunState) {
        if let Ok(mut slot) = self.turn_states[turn % SLOTS].lock() {
            *slot = (turn, Some(st));
        }
    }

    /// The timestamp correction's state at the end of `turn`, if its
    /// reader has published it.
    pub(crate) fn state_of_turn(&self, turn: usize) -> Option<RunState> {
        let slot = self.turn_states[turn % SLOTS].lock().ok()?;
        (slot.0 == turn).then_some(slot.1).flatten()
    }

    /// Where `turn` ends, if its reader has published it yet.
    pub fn end_of_turn(&self, turn: usize) -> Option<u64> {
        let word = self.ends_of_turns[turn % SLOTS].load(Ordering::Acquire);
        (word & ((1 << TURN_BITS) - 1) == turn as u64 & ((1 << TURN_BITS) - 1) && word != u64::MAX)
            .then_some(word >> TURN_BITS)
    }

    /// Empty shard batches for the next batch this shard reads, one per shard
    /// (reused ones where they came back).
    pub fn shard_batches(&mut self) -> &mut [ShardBatch] {
        for (j, p) in self.filling.iter_mut().enumerate() {
            if !p.is_none() {
                continue;
            }
            let reused = if j == self.id {
                self.spare.pop()
            } else {
                self.back_from[j].as_ref().and_then(|r| r.try_recv().ok())
            };
            *p = reused.unwrap_or_else(|| ShardBatch::with_capacity(self.capacity));
            p.clear();
        }
        &mut self.filling
    }

    /// Sends the filled shard batches (this shard's own goes on its local queue).
    /// False when another shard has left.
    pub fn send(&mut self) -> bool {
        let mut all = true;
        for (j, p) in self.filling.iter_mut().enumerate() {
            let p = std::mem::replace(p, ShardBatch::none());
            if j == self.id {
                self.mine.push_back(p);
            } else if let Some(tx) = &self.to[j] {
                all &= tx.send(p).is_ok();
            }
        }
        all
    }

    /// This shard reads no more: the other shards take what it sent and
    /// then see it gone.
    pub fn stop_sending(&mut self) {
        for tx in &mut self.to {
            *tx = None;
        }
        self.progress[self.id].word.store(LEFT, Ordering::Release);
    }

    /// This shard has found `read` turns (counted across files) up to and
    /// in file number `file`; `ended`: its reader found the file's end.
    #[inline]
    pub fn progress(&self, file: usize, read: usize, ended: bool) {
        let me = &self.progress[self.id].word;
        if me.load(Ordering::Relaxed) != LEFT {
            me.store(pack(file, read, ended), Ordering::Release);
        }
    }

    /// This shard is done with file number `file`, which ended after
    /// turn `read` (counted across files).
    pub fn file_over(&self, file: usize, read: usize) {
        let me = &self.progress[self.id];
        me.last_final.store(read as u64, Ordering::Release);
        self.progress(file + 1, read, false);
    }

    /// For a shard whose reader has ended file number `file`: does its
    /// turn `turn` exist, as another shard's reader found it?
    pub fn turn_after_end(&self, file: usize, turn: usize) -> Agreement {
        let file = file as u64 & 0xffff;
        let mut undecided = false;
        for (j, p) in self.progress.iter().enumerate() {
            if j == self.id {
                continue;
            }
            let w = p.word.load(Ordering::Acquire);
            if w == LEFT {
                continue;
            }
            let (f, ended, read) = (w >> 48, w >> READ_BITS & 1 == 1, w & ((1 << READ_BITS) - 1));
            if f == file {
                if read > turn as u64 {
                    return Agreement::Exists;
                }
                undecided |= !ended;
            } else if f == (file + 1) & 0xffff {
                if p.last_final.load(Ordering::Acquire) > turn as u64 {
                    return Agreement::Exists;
                }
            } else {
                // Still in an earlier file.
                undecided = true;
            }
        }
        if undecided {
            Agreement::Undecided
        } else {
            Agreement::End
        }
    }

    /// The shard batch of the next turn `reader` read, waiting for it if that
    /// is another shard. `None` when that turn was never read: this
    /// shard's own turn past where it stopped reading, or another shard's
    /// once that shard has stopped reading and everything it sent has been
    /// taken (it is then [`Ends::peers_gone`]).
    pub fn take(&mut self, reader: usize) -> Option<ShardBatch> {
        if reader == self.id {
            return self.mine.pop_front();
        }
        if self.gone[reader] {
            return None;
        }
        let got = self.from[reader].as_ref().and_then(|rx| rx.recv().ok());
        self.gone[reader] = got.is_none();
        got
    }

    /// True once every other shard has stopped reading and all it read for
    /// this shard has been taken.
    pub fn peers_gone(&self) -> bool {
        (0..self.gone.len()).all(|j| j == self.id || self.gone[j])
    }

    /// Returns a run shard batch to the shard that read it.
    pub fn give_back(&mut self, reader: usize, mut p: ShardBatch) {
        p.clear();
        match &self.back_to[reader] {
            None => self.spare.push(p),
            Some(tx) => {
                let _ = tx.try_send(p);
            }
        }
    }
}

/// A progress word (see [`Progress`]).
fn pack(file: usize, read: usize, ended: bool) -> u64 {
    (file as u64 & 0xffff) << 48
        | u64::from(ended) << READ_BITS
        | (read as u64 & ((1 << READ_BITS) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shard whose reader ended follows the turns another found, waits
    /// while one is still reading, and ends with the last; a shard that
    /// moved on to the next file still answers for the one before.
    #[test]
    fn readers_agree_where_a_file_ends() {
        let mut ends = mesh(3, 4);
        ends[0].progress(0, 5, true);
        ends[1].progress(0, 7, false);
        ends[2].progress(0, 5, true);
        assert_eq!(ends[0].turn_after_end(0, 5), Agreement::Exists);
        assert_eq!(ends[0].turn_after_end(0, 7), Agreement::Undecided);
        ends[1].progress(0, 8, true);
        assert_eq!(ends[0].turn_after_end(0, 7), Agreement::Exists);
        // Every reader has ended; 0, at 5, will follow to 8.
        assert_eq!(ends[2].turn_after_end(0, 8), Agreement::End);
        assert_eq!(ends[0].turn_after_end(0, 6), Agreement::Exists);
        ends[0].progress(0, 8, true);
        ends[1].file_over(0, 8);
        ends[1].progress(1, 9, false);
        assert_eq!(ends[2].turn_after_end(0, 7), Agreement::Exists);
        assert_eq!(ends[2].turn_after_end(0, 8), Agreement::End);
        // A shard still in file 0 leaves a shard in file 1 undecided; one
        // that left counts no more.
        assert_eq!(ends[1].turn_after_end(1, 9), Agreement::Undecided);
        ends[0].stop_sending();
        ends[2].stop_sending();
        assert_eq!(ends[1].turn_after_end(1, 9), Agreement::End);
        ends[0].progress(1, 20, false);
        assert_eq!(
            ends[1].turn_after_end(1, 9),
            Agreement::End,
            "left for good"
        );
    }

    #[test]
    fn a_published_end_is_seen_for_its_turn_only() {
        let ends = mesh(2, 4);
        assert_eq!(ends[1].end_of_turn(0), None);
        ends[0].publish_end(0, 1234);
        assert_eq!(ends[1].end_of_turn(0), Some(1234));
        // The slot of turn 0 is the slot of turn SLOTS: not its end.
        assert_eq!(ends[1].end_of_turn(SLOTS), None);
        ends[1].publish_end(SLOTS, 99);
        assert_eq!(ends[0].end_of_turn(SLOTS), Some(99));
        assert_eq!(ends[0].end_of_turn(0), None);
        // A position too large to pack is not published.
        ends[0].publish_end(3, 1 << 50);
        assert_eq!(ends[1].end_of_turn(3), None);
    }
}
