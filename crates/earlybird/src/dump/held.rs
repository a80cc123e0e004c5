//! Packets of undecided flows, held for a dumper filtered by application
//! (`--dump-app`) until their flow's verdict says whether they belong in
//! the dump.
//!
//! Contract:
//! - [`Held::keep`] copies a packet of a flow that has no verdict yet,
//!   under the flow's identity ([`FlowIdent`]), while the store's bytes
//!   (packet bytes plus a fixed overhead per packet and per flow) stay
//!   within its budget; a packet that does not fit is counted
//!   (`not_held`) and not kept.
//! - When the flow's verdict is known (at a later packet of the flow, or
//!   at its end, `crate::flow::held`), [`Held::release`] writes its held
//!   packets to the dumper in arrival order, or [`Held::discard`] drops
//!   them; either frees their bytes. Held packets are written when the
//!   verdict is known, so they follow packets of other flows written in
//!   the meantime: a dump file is in order of writing, not of time stamps.
//! - Nothing is lost silently: packets kept and later written
//!   (`held_written`), kept and dropped because the verdict did not match
//!   (`held_discarded`) and not kept (`not_held`) are counted; at the end
//!   of a run the flush of the flow table ends every flow, so the store
//!   ends empty.

use std::collections::HashMap;

use super::Dumper;
use crate::decode::LinkType;
use crate::flow::held::FlowIdent;
use crate::time::Nanos;

/// Bytes a held packet costs beside its own bytes.
const PER_PACKET: usize = std::mem::size_of::<Kept>();
/// Bytes a flow with held packets costs beside its packets.
const PER_FLOW: usize = 96;

/// What the store did (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeldCounters {
    /// Packets held, then written when their flow's verdict matched.
    pub held_written: u64,
    /// Packets held, then dropped: their flow's verdict did not match.
    pub held_discarded: u64,
    /// Packets of undecided flows not held: the store was full.
    pub not_held: u64,
}

impl HeldCounters {
    /// Adds `o` into `self`.
    pub fn merge(&mut self, o: &HeldCounters) {
        self.held_written += o.held_written;
        self.held_discarded += o.held_discarded;
        self.not_held += o.not_held;
    }
}

/// One held packet: its record fields and where its bytes are.
#[derive(Debug, Clone, Copy)]
struct Kept {
    ts: Nanos,
    orig_len: u32,
    len: u32,
    link: LinkType,
}

/// The held packets of one flow.
#[derive(Debug, Default)]
struct Flow {
    packets: Vec<Kept>,
    bytes: Vec<u8>,
}

/// A shard's store of held packets (see the module docs).
#[derive(Debug)]
pub struct Held {
    flows: HashMap<FlowIdent, Flow>,
    budget: usize,
    used: usize,
    /// What was held, written, dropped.
    pub counters: HeldCounters,
}

impl Held {
    /// A store that holds at most `budget` bytes.
    pub fn new(budget: usize) -> Held {
        Held {
            flows: HashMap::new(),
            budget,
            used: 0,
            counters: HeldCounters::default(),
        }
    }

    /// Bytes the store holds now (by its own accounting).
    pub fn used(&self) -> usize {
        self.used
    }

    /// Flows with held packets.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// Holds a copy of a packet of the undecided flow `ident`; false (and
    /// counted) when it does not fit.
    pub fn keep(
        &mut self,
        ident: FlowIdent,
        ts: Nanos,
        orig_len: u32,
        link: LinkType,
        bytes: &[u8],
    ) -> bool {
        let new_flow = !self.flows.contains_key(&ident);
        let cost = bytes.len() + PER_PACKET + if new_flow { PER_FLOW } else { 0 };
        if self.used + cost > self.budget {
            self.counters.not_held += 1;
            return false;
        }
        self.used += cost;
        let f = self.flows.entry(ident).or_default();
        f.packets.push(Kept {
            ts,
            orig_len,
            len: bytes.len() as u32,
            link,
        });
        f.bytes.extend_from_slice(bytes);
        true
    }

    /// Writes the held packets of `ident` to `dumper`, in arrival order.
    pub fn release(&mut self, ident: FlowIdent, dumper: &mut Dumper) {
        let Some(f) = self.take(ident) else {
            return;
        };
        let mut at = 0;
        for k in &f.packets {
            let end = at + k.len as usize;
            dumper.write(k.ts, k.orig_len, k.link, &f.bytes[at..end]);
            at = end;
        }
        self.counters.held_written += f.packets.len() as u64;
    }

    /// Drops the held packets of `ident`.
    pub fn discard(&mut self, ident: FlowIdent) {
        if let Some(f) = self.take(ident) {
            self.counters.held_discarded += f.packets.len() as u64;
        }
    }

    /// Removes the flow `ident` and returns its bytes to the budget.
    fn take(&mut self, ident: FlowIdent) -> Option<Flow> {
        let f = self.flows.remove(&ident)?;
        self.used -= f.bytes.len() + f.packets.len() * PER_PACKET + PER_FLOW;
        Some(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_bounds_what_is_held_and_every_packet_is_counted() {
        let mut h = Held::new(2 * (100 + PER_PACKET) + PER_FLOW);
        let (a, b) = ((1, 7), (2, 9));
        assert!(h.keep(a, 10, 100, LinkType::Ethernet, &[1; 100]));
        assert!(h.keep(a, 11, 100, LinkType::Ethernet, &[2; 100]));
        // A new flow costs its overhead too: no room left.
        assert!(!h.keep(b, 12, 1, LinkType::Ethernet, &[3; 1]));
        assert!(!h.keep(a, 13, 100, LinkType::Ethernet, &[4; 100]));
        assert_eq!(h.counters.not_held, 2);
        assert_eq!((h.flows(), h.used()), (1, h.budget));
        h.discard(a);
        assert_eq!((h.flows(), h.used()), (0, 0));
        assert_eq!(h.counters.held_discarded, 2);
        assert!(h.keep(b, 12, 1, LinkType::Ethernet, &[3; 1]));
        h.discard((5, 5));
        assert_eq!(
            h.counters.held_discarded, 2,
            "an unknown flow drops nothing"
        );
    }
}
