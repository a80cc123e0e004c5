//! The name-by-address cache behind `dns_name`: the name a DNS answer gave
//! an address, for the later flows to that address, the same whatever the
//! shard count.
//!
//! Contract: an [`Update`] is one answered address (from a DNS response's
//! A or AAAA record, named by the response's question) with its packet's
//! timestamp. Shards run the input in turns (every shard runs every turn,
//! in order: with files, turn `t` is the input's packet records `256·t`
//! to `256·t + 255`, whatever files or stream chunks hold them,
//! `pipeline/files.rs`); each shard
//! hands the updates it saw in turn `t` to the shared [`Board`] once it
//! has run that turn ([`Board::publish`], the empty list too, every turn
//! in order). Each shard keeps its own [`Replica`] of the cache and,
//! before running turn `t`, brings it to the end of turn `t - LAG`
//! ([`Replica::advance`]): it applies, turn after turn, every shard's
//! updates of that turn in one order that does not depend on which shard
//! saw them (by timestamp, then address, then name), waiting for a shard
//! that has not published that turn yet. So every replica goes through
//! the same states at the same turns, whatever the number of shards and
//! whichever shard saw an answer, and a lookup ([`Replica::lookup`]) made
//! while running turn `t` sees exactly the answers of turns up to
//! `t - LAG`: the records do not depend on the shard count. An answer
//! is visible to flows that start [`LAG`] turns or more after it.
//!
//! A shard that stops running turns (it ended early, or failed) leaves
//! the board ([`Board::leave`]): the turns it did not publish are then
//! complete without it, so no other shard waits for it.
//!
//! Bounds: a replica holds at most its capacity of addresses; a new
//! address when it is full evicts the address updated longest ago,
//! counted in [`Replica::evicted`]. Names are cut at 255 bytes. The board
//! holds the updates of the turns not yet applied by every shard still
//! on it, and forgets a turn once they all have applied it; a shard is
//! at most [`LAG`] turns ahead of the slowest one's published turns.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

use crate::time::Nanos;

/// Turns between an answer and the first flows that see it.
pub const LAG: u64 = 2;

/// Longest name kept, bytes.
pub const MAX_NAME: usize = 255;

/// One answered address.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Update {
    /// The answer packet's timestamp.
    pub ts: Nanos,
    /// The address answered.
    pub addr: IpAddr,
    /// The name asked for.
    pub name: Box<str>,
}

/// The updates of every shard, turn by turn, until every shard applied
/// them.
#[derive(Debug)]
pub struct Board {
    shards: usize,
    state: Mutex<Turns>,
    published: Condvar,
    /// The most addresses a replica held, and evicted (replicas of one
    /// board go through the same states).
    held: AtomicU64,
    evicted: AtomicU64,
}

#[derive(Debug, Default)]
struct Turns {
    /// Per shard: the turns it has published (turns `0..n`).
    published: Vec<u64>,
    /// Per shard: it left the board.
    left: Vec<bool>,
    /// Per shard: the turns it has applied (turns `0..n`).
    applied: Vec<u64>,
    /// Turn → its updates (turns with none are not held).
    turns: BTreeMap<u64, Vec<Update>>,
}

impl Turns {
    /// Every shard still on has published `turn`.
    fn complete(&self, turn: u64) -> bool {
        self.published
            .iter()
            .zip(&self.left)
            .all(|(&n, &left)| left || n > turn)
    }

    /// Drops the turns every shard still on has applied.
    fn forget(&mut self) {
        let done = self
            .applied
            .iter()
            .zip(&self.left)
            .filter(|(_, &left)| !left)
            .map(|(&a, _)| a)
            .min()
            .unwrap_or(u64::MAX);
        while let Some(e) = self.turns.first_entry() {
            if *e.key() >= done {
                break;
            }
            e.remove();
        }
    }
}

impl Board {
    /// A board for `shards` shards (at least 1), numbered from 0.
    pub fn new(shards: usize) -> Board {
        let shards = shards.max(1);
        Board {
            shards,
            state: Mutex::new(Turns {
                published: vec![0; shards],
                left: vec![false; shards],
                applied: vec![0; shards],
                turns: BTreeMap::new(),
            }),
            published: Condvar::new(),
            held: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
        }
    }

    /// The most addresses a replica of this board has held, and the
    /// addresses evicted because it was full (the same in every replica
    /// that ran the same turns).
    pub fn counts(&self) -> (u64, u64) {
        (
            self.held.load(Ordering::Relaxed),
            self.evicted.load(Ordering::Relaxed),
        )
    }

    /// Shards the board is for.
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// Shard `shard`'s updates of `turn`. Each shard publishes every turn
    /// once, in order, the empty list too; a turn published out of order
    /// also publishes the turns before it (empty), a turn published twice
    /// adds its updates.
    pub fn publish(&self, shard: usize, turn: u64, updates: Vec<Update>) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if shard >= self.shards {
            return;
        }
        if !updates.is_empty() {
            st.turns.entry(turn).or_default().extend(updates);
        }
        let p = &mut st.published[shard];
        *p = (*p).max(turn + 1);
        drop(st);
        self.published.notify_all();
    }

    /// Shard `shard` runs no more turns: no shard waits for it.
    pub fn leave(&self, shard: usize) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = st.left.get_mut(shard) {
            *l = true;
        }
        st.forget();
        drop(st);
        self.published.notify_all();
    }

    /// Every shard's updates of `turn`, sorted, for shard `shard`, once
    /// every shard still on has published it (waits until then). Each
    /// shard takes the turns in order, each once.
    fn take(&self, shard: usize, turn: u64) -> Vec<Update> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while !st.complete(turn) {
            st = self.published.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        let out = match st.turns.get_mut(&turn) {
            Some(t) => {
                t.sort_unstable();
                t.clone()
            }
            None => Vec::new(),
        };
        if let Some(a) = st.applied.get_mut(shard) {
            *a = (*a).max(turn + 1);
        }
        st.forget();
        out
    }
}
#[derive(Debug, Clone)]
struct Slot {
    name: Box<str>,
    ts: Nanos,
    seq: u64,
}

/// One shard's copy of the cache (see the module docs).
#[derive(Debug)]
pub struct Replica {
    /// The shard it belongs to (its number on the board).
    shard: usize,
    by_addr: HashMap<IpAddr, Slot>,
    /// Order of each address's last update → the address.
    by_seq: BTreeMap<u64, IpAddr>,
    capacity: usize,
    /// The next turn to apply.
    next: u64,
    /// Updates applied so far (the order of the next).
    seq: u64,
    evicted: u64,
}

impl Replica {
    /// Shard `shard`'s empty cache of at most `capacity` addresses (at
    /// least 1).
    pub fn new(shard: usize, capacity: usize) -> Replica {
        Replica {
            shard,
            by_addr: HashMap::new(),
            by_seq: BTreeMap::new(),
            capacity: capacity.max(1),
            next: 0,
            seq: 0,
            evicted: 0,
        }
    }

    /// Applies the turns up to `turn - LAG` not applied yet, from `board`
    /// (see the module docs); call before running `turn`.
    pub fn advance(&mut self, board: &Board, turn: u64) {
        while self.next + LAG <= turn {
            for u in board.take(self.shard, self.next) {
                self.apply(u);
            }
            self.next += 1;
            board.held.fetch_max(self.len() as u64, Ordering::Relaxed);
            board.evicted.fetch_max(self.evicted, Ordering::Relaxed);
        }
    }

    fn apply(&mut self, u: Update) {
        let mut name = u.name;
        if name.len() > MAX_NAME {
            let mut n = MAX_NAME;
            while !name.is_char_boundary(n) {
                n -= 1;
            }
            name = name[..n].into();
        }
        if let Some(old) = self.by_addr.get(&u.addr) {
            self.by_seq.remove(&old.seq);
        } else if self.by_addr.len() >= self.capacity {
            if let Some((_, oldest)) = self.by_seq.pop_first() {
                self.by_addr.remove(&oldest);
                self.evicted += 1;
            }
        }
        let seq = self.seq;
        self.seq += 1;
        self.by_seq.insert(seq, u.addr);
        self.by_addr.insert(
            u.addr,
            Slot {
                name,
                ts: u.ts,
                seq,
            },
        );
    }

    /// The cached name of `addr` and its age at `ts` (nanoseconds since
    /// the answer; 0 when the flow's clock is behind the answer's).
    pub fn lookup(&self, addr: IpAddr, ts: Nanos) -> Option<(&str, Nanos)> {
        self.by_addr
            .get(&addr)
            .map(|s| (&*s.name, ts.saturating_sub(s.ts)))
    }

    /// Addresses held.
    pub fn len(&self) -> usize {
        self.by_addr.len()
    }

    /// True when no address is held.
    pub fn is_empty(&self) -> bool {
        self.by_addr.is_empty()
    }

    /// Addresses evicted to make room since the start.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const TURN: u64 = 256;

    /// A synthetic input: `turns` turns of TURN packets; some packets are
    /// answers (an address out of a small pool, so names change), some are
    /// lookups. Returns per packet: Some(update) or a lookup address.
    fn input(turns: u64, seed: u64) -> Vec<Result<Update, IpAddr>> {
        let mut x = seed;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        (0..turns * TURN)
            .map(|pos| {
                let r = next();
                let addr = IpAddr::from([10, 0, (r >> 8) as u8 % 4, (r >> 16) as u8 % 50]);
                if r % 3 == 0 {
                    Ok(Update {
                        ts: pos * 1000,
                        addr,
                        name: format!("n{}.example", r % 1000).into(),
                    })
                } else {
                    Err(addr)
                }
            })
            .collect()
    }

    /// Runs the input on `shards` threads, packet `pos` on shard
    /// `hash(pos) % shards`; gives every lookup's answer by position.
    fn run(shards: usize, capacity: usize) -> BTreeMap<u64, Option<(String, Nanos)>> {
        let inp = Arc::new(input(24, 0x9e37_79b9_7f4a_7c15));
        let board = Arc::new(Board::new(shards));
        let handles: Vec<_> = (0..shards)
            .map(|s| {
                let (inp, board) = (inp.clone(), board.clone());
                std::thread::spawn(move || {
                    let mut rep = Replica::new(s, capacity);
                    let mut out = BTreeMap::new();
                    for turn in 0..inp.len() as u64 / TURN {
                        rep.advance(&board, turn);
                        let mut mine = Vec::new();
                        for pos in turn * TURN..(turn + 1) * TURN {
                            if (pos.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 7) as usize % shards != s
                            {
                                continue;
                            }
                            match &inp[pos as usize] {
                                Ok(u) => mine.push(u.clone()),
                                Err(a) => {
                                    let v = rep
                                        .lookup(*a, pos * 1000)
                                        .map(|(n, age)| (n.to_string(), age));
                                    out.insert(pos, v);
                                }
                            }
                        }
                        // Uneven speeds between shards.
                        if turn % 3 == s as u64 % 3 {
                            std::thread::yield_now();
                        }
                        board.publish(s, turn, mine);
                    }
                    assert!(rep.len() <= capacity);
                    out
                })
            })
            .collect();
        let mut all = BTreeMap::new();
        for h in handles {
            all.extend(h.join().unwrap());
        }
        all
    }

    #[test]
    fn lookups_do_not_depend_on_the_shard_count() {
        for capacity in [1000, 40] {
            let one = run(1, capacity);
            assert!(one.values().filter(|v| v.is_some()).count() > 100);
            for shards in [2, 3, 4] {
                assert!(
                    run(shards, capacity) == one,
                    "{shards} shards, capacity {capacity}"
                );
            }
        }
    }

    #[test]
    fn an_answer_is_seen_lag_turns_later() {
        let board = Board::new(1);
        let mut rep = Replica::new(0, 10);
        let a: IpAddr = [192, 0, 2, 1].into();
        rep.advance(&board, 0);
        board.publish(
            0,
            0,
            vec![Update {
                ts: 1_000,
                addr: a,
                name: "www.example.org".into(),
            }],
        );
        rep.advance(&board, 1);
        assert_eq!(rep.lookup(a, 2_000), None);
        board.publish(0, 1, vec![]);
        rep.advance(&board, 2);
        assert_eq!(rep.lookup(a, 3_500), Some(("www.example.org", 2_500)));
        assert_eq!(rep.lookup(a, 500), Some(("www.example.org", 0)));
    }

    #[test]
    fn full_cache_evicts_the_oldest_and_counts() {
        let board = Board::new(1);
        let updates: Vec<Update> = (0..10u8)
            .map(|i| Update {
                ts: u64::from(i),
                addr: [192, 0, 2, i].into(),
                name: "x".repeat(300).into(),
            })
            .collect();
        board.publish(0, 0, updates);
        let mut rep = Replica::new(0, 4);
        rep.advance(&board, LAG);
        assert_eq!((rep.len(), rep.evicted()), (4, 6));
        assert_eq!(board.counts(), (4, 6));
        assert!(rep.lookup([192, 0, 2, 5].into(), 0).is_none());
        assert_eq!(
            rep.lookup([192, 0, 2, 9].into(), 0).unwrap().0.len(),
            MAX_NAME
        );
        // The board forgot the turn every shard applied.
        assert!(board.state.lock().unwrap().turns.is_empty());
    }
}

#[cfg(test)]
mod leave_tests {
    use super::*;

    #[test]
    fn a_shard_that_left_is_not_waited_for() {
        let board = Board::new(2);
        let a: IpAddr = [192, 0, 2, 7].into();
        let up = |ts| Update {
            ts,
            addr: a,
            name: "gone.example".into(),
        };
        board.publish(1, 0, vec![up(1)]);
        board.leave(1);
        board.publish(0, 0, vec![]);
        board.publish(0, 1, vec![]);
        let mut rep = Replica::new(0, 8);
        // Turn 1 was never published by shard 1: it left.
        rep.advance(&board, 3);
        assert_eq!(rep.lookup(a, 5), Some(("gone.example", 4)));
        assert!(board.state.lock().unwrap().turns.is_empty());
    }

    #[test]
    fn a_turn_is_kept_until_every_shard_applied_it() {
        let board = Board::new(3);
        let a: IpAddr = [192, 0, 2, 8].into();
        for s in 0..3 {
            let u = (s == 2).then(|| Update {
                ts: 9,
                addr: a,
                name: "kept.example".into(),
            });
            board.publish(s, 0, u.into_iter().collect());
        }
        let mut r0 = Replica::new(0, 8);
        r0.advance(&board, LAG);
        // Shard 0 left after applying: shards 1 and 2 still get the turn.
        board.leave(0);
        let mut r1 = Replica::new(1, 8);
        r1.advance(&board, LAG);
        let mut r2 = Replica::new(2, 8);
        r2.advance(&board, LAG);
        for r in [&r0, &r1, &r2] {
            assert_eq!(r.lookup(a, 9), Some(("kept.example", 0)));
        }
        assert!(board.state.lock().unwrap().turns.is_empty());
    }
}
