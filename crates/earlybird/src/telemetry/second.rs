//! One shard's side of the per-second statistics: what it counted during
//! each second of packet time.
//!
//! Contract: a [`Seconds`] follows one of a shard's two clocks: the
//! reading of its batches ([`Part::Read`]: packets and bytes read,
//! packets skipped) and the running of its flows ([`Part::Run`]: packets
//! and bytes accounted to flows, flows started, ended and classified, the
//! table's tally). With several shards a shard reads batches ahead of the
//! ones it runs, so each clock is followed on its own. The shard calls
//! [`Seconds::tick`] with the time of the packets it is about to count
//! (its batches are cut where a second of packet time ends, so a second's
//! figures hold exactly its packets); when that time is in a later second
//! than the current one, the figures of the current second — the
//! difference of the shard's counters since the second began and the flow
//! table's [`Tally`] — are closed into a
//! [`ShardSecond`] and the new second begins. Time that goes back stays
//! in the current second. When an input starts a new time domain (its
//! first packet is earlier than the latest one read, see
//! `pipeline/files.rs`), every shard closes its current seconds there
//! ([`Seconds::new_domain`], after the open flows were ended) and counts
//! the new domain's packets in seconds of their own, numbered with the
//! domain: the time domains are series of their own, whatever the shard
//! count. [`Seconds::close`] closes the last second at the end of the run
//! (`next = u64::MAX`: this shard will send nothing more). Seconds are
//! Unix seconds of packet time, never the wall clock.

use super::counters::Counters;
use crate::flow::tally::Tally;
use crate::time::SECOND;

/// Which of a shard's clocks a [`Seconds`] follows (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Part {
    /// Reading batches.
    #[default]
    Read = 0,
    /// Running flows.
    Run = 1,
}

/// What one shard counted during one second of packet time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardSecond {
    /// The shard.
    pub shard: usize,
    /// Which of its clocks.
    pub part: Part,
    /// The second (Unix seconds of packet time) these figures belong to;
    /// `None` when the shard counted nothing before its end.
    pub second: Option<u64>,
    /// The time domain of `second` (0: the first input's).
    pub domain: u64,
    /// The second the shard's clock is in now: it sends nothing more for
    /// any earlier second of `next_domain` or of an earlier domain
    /// (`u64::MAX`: nothing more at all).
    pub next: u64,
    /// The time domain the shard's clock is in now (`u64::MAX` with
    /// `next`: nothing more at all).
    pub next_domain: u64,
    /// The counters' increase during the second (shard 0 alone counts
    /// the packets read and skipped, see [`Counters`]).
    pub counters: Counters,
    /// Verdicts and ended flows per application, transport and port class.
    pub tally: Tally,
}

/// A shard's current second (see the module docs).
#[derive(Debug, Clone)]
pub struct Seconds {
    shard: usize,
    part: Part,
    /// The current second, once a packet was seen.
    current: Option<u64>,
    /// The current time domain.
    domain: u64,
    /// The shard's counters when the current second began.
    base: Counters,
}

impl Seconds {
    /// The tracker of clock `part` of shard `shard`.
    pub fn new(shard: usize, part: Part) -> Seconds {
        Seconds {
            shard,
            part,
            current: None,
            domain: 0,
            base: Counters::default(),
        }
    }

    /// The current time domain and second (`None` before the domain's
    /// first packet and after the end).
    #[inline]
    pub fn at(&self) -> Option<(u64, u64)> {
        self.current.map(|s| (self.domain, s))
    }

    /// Where the current second ends (ns): a batch's packets from there on
    /// belong to a later second. `u64::MAX` before the first packet.
    #[inline]
    pub fn end(&self) -> u64 {
        self.current
            .map_or(u64::MAX, |s| (s + 1).saturating_mul(SECOND))
    }

    /// The shard is about to count packets of time `ts`; `now` gives its
    /// counters (flow counters included), its table's tally and its open
    /// flows, read only when a second closes. Returns the closed second.
    #[inline]
    pub fn tick(
        &mut self,
        ts: u64,
        now: impl FnOnce() -> (Counters, Tally),
    ) -> Option<ShardSecond> {
        let second = ts / SECOND;
        match self.current {
            Some(c) if second <= c => None,
            None => {
                self.current = Some(second);
                self.base = now().0;
                None
            }
            Some(_) => Some(self.roll(second, now)),
        }
    }

    /// The last second, closed at the end of the run.
    pub fn close(&mut self, now: impl FnOnce() -> (Counters, Tally)) -> ShardSecond {
        self.roll(u64::MAX, now)
    }

    /// The last second of the current time domain, closed where the next
    /// domain begins (the open flows ended before, so their ends count in
    /// it); the next packet starts the new domain's first second.
    pub fn new_domain(&mut self, now: impl FnOnce() -> (Counters, Tally)) -> ShardSecond {
        let mut closed = self.roll(0, now);
        self.current = None;
        self.domain += 1;
        closed.next_domain = self.domain;
        closed
    }

    #[cold]
    fn roll(&mut self, next: u64, now: impl FnOnce() -> (Counters, Tally)) -> ShardSecond {
        let (counters, tally) = now();
        let next_domain = if next == u64::MAX {
            u64::MAX
        } else {
            self.domain
        };
        let grown = counters.since(&self.base);
        let closed = match self.part {
            Part::Read => ShardSecond {
                shard: self.shard,
                part: Part::Read,
                second: self.current,
                domain: self.domain,
                next,
                next_domain,
                counters: Counters {
                    packets_read: grown.packets_read,
                    bytes_read: grown.bytes_read,
                    skipped: grown.skipped,
                    unsupported_link: grown.unsupported_link,
                    ..Counters::default()
                },
                tally: Tally::default(),
            },
            Part::Run => ShardSecond {
                shard: self.shard,
                part: Part::Run,
                second: self.current,
                domain: self.domain,
                next,
                next_domain,
                counters: Counters {
                    packets_read: 0,
                    bytes_read: 0,
                    skipped: Default::default(),
                    unsupported_link: 0,
                    ..grown
                },
                tally,
            },
        };
        self.current = (next != u64::MAX).then_some(next);
        self.base = counters;
        closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now(packets: u64) -> impl FnOnce() -> (Counters, Tally) {
        move || {
            let c = Counters {
                packets_read: packets,
                ..Counters::default()
            };
            (c, Tally::new(0))
        }
    }

    #[test]
    fn a_second_closes_when_time_reaches_the_next() {
        let mut s = Seconds::new(3, Part::Read);
        assert_eq!(s.end(), u64::MAX);
        assert!(s.tick(10 * SECOND + 5, now(0)).is_none());
        assert_eq!(s.end(), 11 * SECOND);
        assert!(s.tick(10 * SECOND + 900, now(4)).is_none());
        // Time going back stays in the current second.
        assert!(s.tick(9 * SECOND, now(5)).is_none());
        let c = s.tick(13 * SECOND, now(6)).unwrap();
        assert_eq!((c.shard, c.second, c.next), (3, Some(10), 13));
        assert_eq!(c.counters.packets_read, 6);
        let last = s.close(now(9));
        assert_eq!((last.second, last.next), (Some(13), u64::MAX));
        assert_eq!(last.counters.packets_read, 3);
    }

    #[test]
    fn a_shard_that_saw_nothing_closes_empty() {
        let mut s = Seconds::new(0, Part::Run);
        let last = s.close(now(4));
        assert_eq!((last.second, last.next), (None, u64::MAX));
        // A running clock says nothing of the packets read.
        assert_eq!(last.counters.packets_read, 0);
    }
}
