//! The registry of a shard's flow consumers: the parts its flow table
//! calls when a flow starts, at each of its packets, at its verdict and
//! at its end (the interface: `flow/consumer.rs`).
//!
//! Contract: [`Consumers`] holds one `Option` per registered consumer
//! (`None`: off) and is itself a [`Consumer`] that calls each one on, in
//! registry order, with static dispatch: a consumer that is off costs one
//! test of its `Option` where the table calls (a call it does not
//! implement costs nothing), and with none reading packets the table's
//! per-packet path has no consumer code at all (`PACKETS`, picked once
//! per batch). Adding a consumer: its own file implementing `Consumer`,
//! one line in `registry!` below, and where the run turns it on.

use std::sync::Arc;

use crate::classify::inline::Inline;
use crate::classify::Classifier;
use crate::config::FlowConfig;
use crate::flow::consumer::{Consumer, FlowRef, Follows};
use crate::flow::events::Events;
use crate::flow::held::HeldEnds;
use crate::flow::packet::{Payload, Pkt};
use crate::flow::prefault::Region;
use crate::flow::record::{EndReason, RecordBatch};
use crate::flow::table::FlowTable;
use crate::flow::tally::Tally;

use super::analyzers::Analyzers;

/// Declares the consumers a shard's table can call: `name: Type` per
/// line, called in this order.
macro_rules! registry {
    ($($(#[$doc:meta])* $name:ident: $ty:ty),* $(,)?) => {
        /// The consumers of one flow table (`None`: off).
        #[derive(Default)]
        pub struct Consumers {
            $($(#[$doc])* pub $name: Option<$ty>,)*
        }

        impl Consumer for Consumers {
            fn reads_packets(&self) -> bool {
                false $(|| self.$name.as_ref().is_some_and(Consumer::reads_packets))*
            }

            fn reads_payload(&self) -> bool {
                false $(|| self.$name.as_ref().is_some_and(Consumer::reads_payload))*
            }

            fn reads_ip(&self) -> bool {
                false $(|| self.$name.as_ref().is_some_and(Consumer::reads_ip))*
            }

            #[inline(always)]
            fn reads_tcp_starts(&self) -> bool {
                false $(|| self.$name.as_ref().is_some_and(Consumer::reads_tcp_starts))*
            }

            fn slot_arrays(&mut self, capacity: usize) -> Vec<Region> {
                let mut arrays = Vec::new();
                $(if let Some(c) = &mut self.$name {
                    arrays.extend(c.slot_arrays(capacity));
                })*
                arrays
            }

            #[inline(always)]
            fn start(&mut self, slot: usize) {
                $(if let Some(c) = &mut self.$name {
                    c.start(slot);
                })*
            }

            #[inline(always)]
            fn opened(&mut self, flow: FlowRef<'_>) {
                $(if let Some(c) = &mut self.$name {
                    c.opened(flow);
                })*
            }

            #[inline(always)]
            fn follows_new(&self, flow: FlowRef<'_>) -> Follows {
                0 $(| match &self.$name {
                    Some(c) if c.reads_packets() => c.follows_new(flow),
                    _ => 0,
                })*
            }

            /// `None` when one asks to end the flow, else the packets
            /// those that read packets follow.
            #[inline(always)]
            fn packet(&mut self, flow: FlowRef<'_>, p: &Pkt, pl: Payload<'_>) -> Option<Follows> {
                let (mut end, mut follows) = (false, 0);
                $(if let Some(c) = &mut self.$name {
                    match c.packet(flow, p, pl) {
                        None => end = true,
                        Some(f) if c.reads_packets() => follows |= f,
                        Some(_) => {}
                    }
                })*
                (!end).then_some(follows)
            }

            /// Every consumer that reads packets declines it.
            #[inline(always)]
            fn declines_first(&self, flow: FlowRef<'_>, p: &Pkt, pl: Payload<'_>) -> bool {
                true $(&& match &self.$name {
                    Some(c) if c.reads_packets() => c.declines_first(flow, p, pl),
                    _ => true,
                })*
            }

            #[inline(always)]
            fn verdict(&mut self, flow: FlowRef<'_>, model: &Inline) {
                $(if let Some(c) = &mut self.$name {
                    c.verdict(flow, model);
                })*
            }

            #[inline(always)]
            fn end(&mut self, flow: FlowRef<'_>, reason: EndReason, out: &mut RecordBatch) {
                $(if let Some(c) = &mut self.$name {
                    c.end(flow, reason, out);
                })*
            }
        }
    };
}

registry! {
    /// Per-second sums of verdicts and ended flows (`flow/tally.rs`; on
    /// with per-second statistics, `Shard::keep_seconds`).
    tally: Tally,
    /// Early-verdict events (`flow/events.rs`; on when an output takes
    /// them, `Shard::emit_verdict_events`).
    events: Events,
    /// The per-flow analyzers and the sampling fields
    /// (`shard/analyzers.rs`; on with `--analyzer` or `--sample`).
    analyzers: Analyzers,
    /// Ended flows whose packets the dumper holds (`flow/held.rs`; on when
    /// the taps hold packets, `Shard::set_taps`).
    held: HeldEnds,
}

impl Consumers {
    /// The consumers `cfg` turns on from the start (the analyzers and the
    /// sampling fields); fails on an unknown analyzer name.
    pub fn new(cfg: &FlowConfig) -> crate::Result<Consumers> {
        Ok(Consumers {
            analyzers: Analyzers::new(cfg)?,
            ..Consumers::default()
        })
    }

    /// A flow table for `cfg` with the consumers [`Consumers::new`] turns
    /// on.
    pub fn table(
        cfg: &FlowConfig,
        model: Option<Arc<dyn Classifier>>,
    ) -> crate::Result<FlowTable<Consumers>> {
        FlowTable::with_consumers(cfg, model, Consumers::new(cfg)?)
    }

    /// The record fields the analyzers (and the sampling) add, in order.
    pub fn analyzer_fields(&self) -> Vec<crate::schema::Field> {
        self.analyzers
            .as_ref()
            .map(Analyzers::fields)
            .unwrap_or_default()
    }
}
