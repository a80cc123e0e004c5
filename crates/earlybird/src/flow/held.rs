//! The flow table's side of the packets a filtered dumper holds before a
//! flow's verdict (`--dump-app`, `crate::dump::held`).
//!
//! Contract: the dumper marks a flow whose packets it holds with
//! [`HELD`] ([`FlowTable::set_held`]). When such a flow ends (expiry,
//! eviction, a new flow on its key, the flush at the end of an input),
//! the flow consumer [`HeldEnds`] (`flow/consumer.rs`) notes its identity
//! and its final verdict (taken at its end when it was shorter than N
//! packets) in [`HeldEnds::ended`], which the shard hands to the dumper
//! after the batch. Flows without the mark cost one bit test when they
//! end. A flow is named by its first packet
//! time and key hash ([`FlowIdent`]), as classifier verdicts coming back
//! from the pool are, so a slot reused by another flow is never taken
//! for it.

use super::consumer::{Consumer, FlowRef};
use super::entry::{DECIDED, HELD, IN_USE};
use super::record::{EndReason, RecordBatch};
use super::table::FlowTable;

/// A flow's identity while it lives: first packet time, low 32 bits of
/// the key hash.
pub type FlowIdent = (u64, u32);

/// What the dumper reads of a flow at one of its packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowView {
    /// The flow's identity.
    pub ident: FlowIdent,
    /// Its verdict once taken (whatever packet it was taken at; may be
    /// [`crate::classify::Verdict::UNKNOWN`]); `None` while undecided.
    pub class: Option<u16>,
    /// The dumper holds packets of the flow.
    pub held: bool,
}

/// A flow with held packets that has ended, and its final verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldEnd {
    /// The flow's identity.
    pub ident: FlowIdent,
    /// Its verdict at its end; `None`: it never got one.
    pub class: Option<u16>,
}

impl<C: Consumer> FlowTable<C> {
    /// The flow in slot `s` as the dumper sees it.
    #[inline]
    pub fn flow_view(&self, s: usize) -> FlowView {
        let e = &self.entries[s];
        FlowView {
            ident: (e.first_ts, e.hash),
            class: (e.state & DECIDED != 0).then_some(e.app),
            held: e.state & HELD != 0,
        }
    }

    /// Marks (or unmarks) the live flow in slot `s` as having held packets.
    #[inline]
    pub fn set_held(&mut self, s: usize, on: bool) {
        let e = &mut self.entries[s];
        if e.state & IN_USE == 0 {
            return;
        }
        if on {
            e.state |= HELD;
        } else {
            e.state &= !HELD;
        }
    }
}

/// The flows with held packets that ended since the shard last took them
/// (see the module docs).
#[derive(Debug, Default)]
pub struct HeldEnds {
    /// The flows, in the order they ended.
    pub ended: Vec<HeldEnd>,
}

impl Consumer for HeldEnds {
    #[inline(always)]
    fn end(&mut self, flow: FlowRef<'_>, _: EndReason, _: &mut RecordBatch) {
        if flow.entry.state & HELD != 0 {
            self.note(flow);
        }
    }
}

impl HeldEnds {
    /// `flow`, marked [`HELD`], is ending with its final verdict.
    #[cold]
    #[inline(never)]
    fn note(&mut self, flow: FlowRef<'_>) {
        let e = flow.entry;
        self.ended.push(HeldEnd {
            ident: (e.first_ts, e.hash),
            class: (e.state & DECIDED != 0).then_some(e.app),
        });
    }
}
