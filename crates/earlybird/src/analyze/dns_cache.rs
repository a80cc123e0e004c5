//! The name-by-address cache behind `dns_name`: the name a DNS answer gave
//! an address, for the later flows to that address, the same whatever the
//! shard count.
//!
//! Contract: an [`Update`] is one answered address (from a DNS response's
//! A or AAAA record, named by the response's question) at its packet's
//! input position ([`Update::pos`], the packet's ordinal in the run's
//! input) and timestamp. Shards run the input in turns (every shard runs
//! every turn, in order); each shard hands the updates it saw in turn `t`
//! to the shared [`Board`] at the end of that turn ([`Board::publish`],
//! the empty list too). Each shard keeps its own [`Replica`] of the cache
//! and, before running turn `t`, brings it to the end of turn `t - LAG`
//! ([`Replica::advance`]): it applies, turn after turn, every shard's
//! updates of that turn sorted by input position, waiting for a shard
//! that has not published that turn yet. So every replica goes through
//! the same states at the same turns, whatever the number of shards and
//! whichever shard saw an answer, and a lookup ([`Replica::lookup`]) made
//! while running turn `t` sees exactly the answers of turns before
//! `t - LAG + 1`: the records do not depend on the shard count. An answer
//! is visible to flows that start [`LAG`] turns or more after it.
//!
//! Bounds: a replica holds at most its capacity of addresses; a new
//! address when it is full evicts the address updated longest ago (by
//! input position), counted in [`Replica::evicted`]. Names are cut at 255
//! bytes. The board holds the updates of the turns not yet applied by
//! every shard, and forgets a turn once every shard has applied it.
//!
//! The hook (in the shard loop, which this file does not touch): at run
//! start one [`Board`] for N shards and one [`Replica`] per shard; before
//! each turn `t`, `replica.advance(t)`; while running it, each DNS answer
//! becomes an [`Update`] in the shard's list, and a flow's first packet
//! takes `replica.lookup(server_address, ts)` as its `dns_name` and age;
//! after the turn, `board.publish(t, shard, list)`.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Condvar, Mutex};

use crate::time::Nanos;

/// Turns between an answer and the first flows that see it.
pub const LAG: u64 = 2;

/// Longest name kept, bytes.
pub const MAX_NAME: usize = 255;

/// One answered address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    /// The answer packet's ordinal in the run's input.
    pub pos: u64,
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
}

#[derive(Debug, Default)]
struct Turns {
    /// Turn → (shards that published it, their updates, shards that
    /// applied it).
    turns: BTreeMap<u64, (usize, Vec<Update>, usize)>,
}

impl Board {
    /// A board for `shards` shards (at least 1).
    pub fn new(shards: usize) -> Board {
        Board {
            shards: shards.max(1),
            state: Mutex::new(Turns::default()),
            published: Condvar::new(),
        }
    }

    /// Shard's updates of `turn` (each shard once per turn, the empty
    /// list too).
    pub fn publish(&self, turn: u64, updates: Vec<Update>) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let t = st.turns.entry(turn).or_default();
        t.0 += 1;
        t.1.extend(updates);
        if t.0 == self.shards {
            t.1.sort_by_key(|u| u.pos);
        }
        drop(st);
        self.published.notify_all();
    }

    /// Every shard's updates of `turn`, sorted by input position, once all
    /// published it (waits until then).
    fn take(&self, turn: u64) -> Vec<Update> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(t) = st.turns.get_mut(&turn) {
                if t.0 == self.shards {
                    t.2 += 1;
                    let out = t.1.clone();
                    if t.2 == self.shards {
                        st.turns.remove(&turn);
                    }
                    return out;
                }
            }
            st = self.published.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }
}

#[derive(Debug, Clone)]
struct Slot {
    name: Box<str>,
    ts: Nanos,
    pos: u64,
}

/// One shard's copy of the cache (see the module docs).
#[derive(Debug)]
pub struct Replica {
    by_addr: HashMap<IpAddr, Slot>,
    /// Input position of each address's last update → the address.
    by_pos: BTreeMap<u64, IpAddr>,
    capacity: usize,
    /// The next turn to apply.
    next: u64,
    evicted: u64,
}

impl Replica {
    /// An empty cache of at most `capacity` addresses (at least 1).
    pub fn new(capacity: usize) -> Replica {
        Replica {
            by_addr: HashMap::new(),
            by_pos: BTreeMap::new(),
            capacity: capacity.max(1),
            next: 0,
            evicted: 0,
        }
    }

    /// Applies the turns up to `turn - LAG` not applied yet, from `board`
    /// (see the module docs); call before running `turn`.
    pub fn advance(&mut self, board: &Board, turn: u64) {
        while self.next + LAG <= turn {
            for u in board.take(self.next) {
                self.apply(u);
            }
            self.next += 1;
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
            self.by_pos.remove(&old.pos);
        } else if self.by_addr.len() >= self.capacity {
            if let Some((_, oldest)) = self.by_pos.pop_first() {
                self.by_addr.remove(&oldest);
                self.evicted += 1;
            }
        }
        self.by_pos.insert(u.pos, u.addr);
        self.by_addr.insert(
            u.addr,
            Slot {
                name,
                ts: u.ts,
                pos: u.pos,
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
                        pos,
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
                    let mut rep = Replica::new(capacity);
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
                        board.publish(turn, mine);
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
        let mut rep = Replica::new(10);
        let a: IpAddr = [192, 0, 2, 1].into();
        rep.advance(&board, 0);
        board.publish(
            0,
            vec![Update {
                pos: 5,
                ts: 1_000,
                addr: a,
                name: "www.example.org".into(),
            }],
        );
        rep.advance(&board, 1);
        assert_eq!(rep.lookup(a, 2_000), None);
        board.publish(1, vec![]);
        rep.advance(&board, 2);
        assert_eq!(rep.lookup(a, 3_500), Some(("www.example.org", 2_500)));
        assert_eq!(rep.lookup(a, 500), Some(("www.example.org", 0)));
    }

    #[test]
    fn full_cache_evicts_the_oldest_and_counts() {
        let board = Board::new(1);
        let updates: Vec<Update> = (0..10u8)
            .map(|i| Update {
                pos: u64::from(i),
                ts: 0,
                addr: [192, 0, 2, i].into(),
                name: "x".repeat(300).into(),
            })
            .collect();
        board.publish(0, updates);
        let mut rep = Replica::new(4);
        rep.advance(&board, LAG);
        assert_eq!((rep.len(), rep.evicted()), (4, 6));
        assert!(rep.lookup([192, 0, 2, 5].into(), 0).is_none());
        assert_eq!(
            rep.lookup([192, 0, 2, 9].into(), 0).unwrap().0.len(),
            MAX_NAME
        );
        // The board forgot the turn every shard applied.
        assert!(board.state.lock().unwrap().turns.is_empty());
    }
}
