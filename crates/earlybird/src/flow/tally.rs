//! What a flow table adds up between two ticks of the per-second
//! statistics: flows classified per application, and flows ended per
//! application and per transport, with their packets and bytes.
//!
//! Contract: off (`FlowTable::tally` is `None`) unless the run keeps
//! per-second statistics; then the table counts each verdict
//! ([`Tally::classified`]) and each flow it ends ([`Tally::ended`]), and
//! the shard takes the sums once per second of packet time
//! ([`Tally::take`]). Application index = the model's class index, the
//! last index = "unknown" (undecided or below the threshold). Flows are
//! counted when they end, with all their packets and bytes: an
//! application's or a transport's traffic is reported in the second its
//! flows end, not spread over the seconds they ran. Nothing here
//! allocates after [`Tally::new`].

use crate::classify::Verdict;

/// Transport classes of the per-transport figures, by index.
pub const TRANSPORTS: [&str; 4] = ["tcp", "udp", "icmp", "other"];

/// The transport class index of IP protocol `proto`.
#[inline]
pub fn transport_of(proto: u8) -> usize {
    match proto {
        6 => 0,
        17 => 1,
        1 | 58 => 2,
        _ => 3,
    }
}

/// Flows, packets and bytes of one application or transport.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sums {
    /// Flows that got their verdict (applications only).
    pub classified: u64,
    /// Flows that ended.
    pub ended: u64,
    /// Packets of the flows that ended (both directions).
    pub packets: u64,
    /// IP bytes of the flows that ended (both directions).
    pub bytes: u64,
}

impl Sums {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &Sums) {
        self.classified += o.classified;
        self.ended += o.ended;
        self.packets += o.packets;
        self.bytes += o.bytes;
    }

    /// True when nothing was counted.
    pub fn is_zero(&self) -> bool {
        *self == Sums::default()
    }
}

/// The sums of one second of one table (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Per application: the model's classes, then "unknown".
    pub apps: Vec<Sums>,
    /// Per transport class ([`TRANSPORTS`]).
    pub transports: [Sums; 4],
}

impl Tally {
    /// A tally for a model of `classes` classes (0 without a model).
    pub fn new(classes: usize) -> Tally {
        Tally {
            apps: vec![Sums::default(); classes + 1],
            transports: Default::default(),
        }
    }

    /// Index of class `c` (the unknown slot for [`Verdict::UNKNOWN`] or a
    /// class the model does not have).
    #[inline]
    fn app(&self, c: u16) -> usize {
        let unknown = self.apps.len() - 1;
        if c == Verdict::UNKNOWN {
            unknown
        } else {
            (c as usize).min(unknown)
        }
    }

    /// A flow got verdict class `c`.
    #[inline]
    pub fn classified(&mut self, c: u16) {
        let i = self.app(c);
        self.apps[i].classified += 1;
    }

    /// A flow of protocol `proto` with verdict class `c` ended after
    /// `packets` packets and `bytes` IP bytes.
    #[inline]
    pub fn ended(&mut self, c: u16, proto: u8, packets: u64, bytes: u64) {
        let i = self.app(c);
        for s in [&mut self.apps[i], &mut self.transports[transport_of(proto)]] {
            s.ended += 1;
            s.packets += packets;
            s.bytes += bytes;
        }
    }

    /// The sums so far; counting starts again from zero.
    pub fn take(&mut self) -> Tally {
        let zero = Tally::new(self.apps.len() - 1);
        std::mem::replace(self, zero)
    }

    /// Adds `o` (a tally of as many classes) into `self`.
    pub fn add(&mut self, o: &Tally) {
        for (a, b) in self.apps.iter_mut().zip(&o.apps) {
            a.add(b);
        }
        for (a, b) in self.transports.iter_mut().zip(&o.transports) {
            a.add(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_are_counted_per_application_and_transport() {
        let mut t = Tally::new(2);
        t.classified(1);
        t.ended(1, 6, 10, 1000);
        t.ended(Verdict::UNKNOWN, 17, 2, 100);
        t.ended(9, 58, 1, 64);
        assert_eq!(t.apps[1].classified, 1);
        assert_eq!((t.apps[1].ended, t.apps[1].bytes), (1, 1000));
        // Unknown, and a class the model does not have, count as unknown.
        assert_eq!((t.apps[2].ended, t.apps[2].packets), (2, 3));
        assert_eq!(t.transports[0].bytes, 1000);
        assert_eq!(t.transports[1].bytes, 100);
        assert_eq!(t.transports[2].bytes, 64);
        let taken = t.take();
        assert!(t.apps.iter().all(Sums::is_zero) && t.apps.len() == 3);
        let mut sum = Tally::new(2);
        sum.add(&taken);
        sum.add(&taken);
        assert_eq!(sum.apps[1].bytes, 2000);
    }
}
