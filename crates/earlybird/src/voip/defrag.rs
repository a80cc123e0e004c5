//! IPv4 and IPv6 fragment reassembly for the call tracker, bounded.
//!
//! Contract: [`Defrag::fragment`] takes one fragment (the IP payload it
//! carries, its byte offset, the more-fragments flag, and the datagram it
//! belongs to: addresses, identification, protocol, IP version) and
//! returns the whole IP payload (transport header first) once every byte
//! from 0 to the last fragment's end has arrived. At most `max_datagrams`
//! datagrams are pending, each at most 65,535 bytes; a datagram not
//! complete `timeout_ns` of packet time after its first fragment is
//! dropped. Overlapping fragments keep the bytes that came first (RFC 5722
//! forbids overlaps in IPv6; counting them is enough here). Every drop is
//! counted in [`DefragCounters`]. Never panics.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::tracker::Addr;

/// Largest IP payload reassembled.
const MAX_DATAGRAM: usize = 65_535;

/// What reassembly counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DefragCounters {
    /// Fragments taken.
    pub fragments: u64,
    /// Datagrams put back together.
    pub reassembled: u64,
    /// Datagrams dropped incomplete at the timeout (or at the end).
    pub timed_out: u64,
    /// Fragments dropped: table full, past 65,535 bytes, or inconsistent.
    pub dropped: u64,
    /// Fragments that overlapped bytes already held.
    pub overlaps: u64,
}

/// The datagram a fragment belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DatagramKey {
    /// Source address.
    pub src: Addr,
    /// Destination address.
    pub dst: Addr,
    /// IP identification.
    pub ident: u32,
    /// Transport protocol.
    pub proto: u8,
    /// IP version.
    pub version: u8,
}

struct Pending {
    started: u64,
    pieces: BTreeMap<usize, Vec<u8>>,
    bytes: usize,
    total: Option<usize>,
}

/// The reassembler (see the module docs).
pub struct Defrag {
    max_datagrams: usize,
    timeout_ns: u64,
    pending: HashMap<DatagramKey, Pending>,
    order: VecDeque<(u64, DatagramKey)>,
    /// What was counted.
    pub counters: DefragCounters,
}

impl Defrag {
    /// A reassembler holding at most `max_datagrams` for `timeout_ns` each.
    pub fn new(max_datagrams: usize, timeout_ns: u64) -> Defrag {
        Defrag {
            max_datagrams,
            timeout_ns,
            pending: HashMap::new(),
            order: VecDeque::new(),
            counters: DefragCounters::default(),
        }
    }

    /// Datagrams pending now.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Drops the datagrams older than the timeout at `now`.
    pub fn expire(&mut self, now: u64) {
        while let Some(&(t, key)) = self.order.front() {
            if t.saturating_add(self.timeout_ns) > now {
                break;
            }
            self.order.pop_front();
            if self.pending.get(&key).is_some_and(|p| p.started == t) {
                self.pending.remove(&key);
                self.counters.timed_out += 1;
            }
        }
    }

    /// Counts what is still pending as timed out and forgets it.
    pub fn finish(&mut self) {
        self.counters.timed_out += self.pending.len() as u64;
        self.pending.clear();
        self.order.clear();
    }

    /// Takes one fragment (see the module docs).
    pub fn fragment(
        &mut self,
        now: u64,
        key: DatagramKey,
        offset: usize,
        more: bool,
        data: &[u8],
    ) -> Option<Vec<u8>> {
        self.counters.fragments += 1;
        self.expire(now);
        let end = offset + data.len();
        if end > MAX_DATAGRAM || (more && data.is_empty()) {
            self.counters.dropped += 1;
            return None;
        }
        if !self.pending.contains_key(&key) {
            if self.pending.len() >= self.max_datagrams {
                self.counters.dropped += 1;
                return None;
            }
            self.pending.insert(
                key,
                Pending {
                    started: now,
                    pieces: BTreeMap::new(),
                    bytes: 0,
                    total: None,
                },
            );
            self.order.push_back((now, key));
        }
        let p = self.pending.get_mut(&key)?;
        if !more {
            if p.total.is_some_and(|t| t != end)
                || p.pieces.keys().next_back().is_some_and(|&o| o >= end)
            {
                self.counters.dropped += 1;
                return None;
            }
            p.total = Some(end);
        } else if p.total.is_some_and(|t| end > t) {
            self.counters.dropped += 1;
            return None;
        }
        let overlaps = p
            .pieces
            .range(..end)
            .next_back()
            .is_some_and(|(&o, d)| o + d.len() > offset);
        if overlaps {
            self.counters.overlaps += 1;
        }
        if !p.pieces.contains_key(&offset) {
            p.bytes += data.len();
            p.pieces.insert(offset, data.to_vec());
        }
        let total = p.total?;
        // Complete when the pieces cover 0..total without a hole.
        let mut reach = 0;
        for (&o, d) in &p.pieces {
            if o > reach {
                return None;
            }
            reach = reach.max(o + d.len());
        }
        if reach < total {
            return None;
        }
        let p = self.pending.remove(&key)?;
        let mut out = vec![0u8; total];
        let mut filled = 0;
        for (o, d) in p.pieces {
            // Bytes that came first win: copy only past what is filled.
            let from = filled.max(o);
            let to = (o + d.len()).min(total);
            if from < to {
                out[from..to].copy_from_slice(&d[from - o..to - o]);
                filled = to;
            }
        }
        self.counters.reassembled += 1;
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ident: u32) -> DatagramKey {
        DatagramKey {
            src: [1; 16],
            dst: [2; 16],
            ident,
            proto: 17,
            version: 4,
        }
    }

    #[test]
    fn pieces_in_any_order_make_the_datagram() {
        let mut d = Defrag::new(4, 1_000);
        let whole: Vec<u8> = (0..=255).collect();
        assert_eq!(d.fragment(0, key(1), 128, false, &whole[128..]), None);
        assert_eq!(d.fragment(1, key(1), 64, true, &whole[64..128]), None);
        assert_eq!(d.fragment(2, key(1), 0, true, &whole[..64]), Some(whole));
        assert_eq!(d.counters.reassembled, 1);
        assert_eq!(d.pending(), 0);
    }

    #[test]
    fn floods_without_a_first_piece_stay_bounded_and_time_out() {
        let mut d = Defrag::new(8, 1_000);
        for i in 0..1000 {
            d.fragment(i, key(i as u32), 8, true, &[0; 8]);
            assert!(d.pending() <= 8);
        }
        assert!(d.counters.dropped > 900);
        d.expire(10_000);
        assert_eq!(d.pending(), 0);
        assert_eq!(d.counters.timed_out + d.counters.dropped, 1000);
        // Too long, and an empty middle piece.
        assert_eq!(d.fragment(20_000, key(7), 65_530, false, &[0; 16]), None);
        assert_eq!(d.fragment(20_000, key(8), 0, true, &[]), None);
    }

    #[test]
    fn overlaps_keep_the_first_bytes() {
        let mut d = Defrag::new(4, 1_000);
        d.fragment(0, key(3), 0, true, &[1; 16]);
        let out = d.fragment(0, key(3), 8, false, &[2; 16]).unwrap();
        assert_eq!(out.len(), 24);
        assert_eq!(&out[..16], &[1; 16]);
        assert_eq!(&out[16..], &[2; 8]);
        assert_eq!(d.counters.overlaps, 1);
    }
}
