//! The call stage of a flows run (`RunOptions::calls`): how the pipeline
//! wires [`crate::voip::stage`] in.
//!
//! Contract: with [`CallStage`] set, [`start`] gives each shard a
//! [`crate::voip::stage::ShardTap`] among its packet taps (a
//! [`crate::dump::FrameTap`]: the shard shows it every packet it runs, in
//! order, and ends each turn), and the stage thread merges their packets
//! (files: in input order by turn; live: by time within a window) into
//! one call tracker whose records go to the run's [`CallWriter`] on a
//! writer thread. A file run's taps wait when the stage is behind; a live
//! run's drop and count. Without it no tap exists and the shards run as
//! before.

use std::sync::{Arc, Mutex};

use crate::dump::FrameTap;
use crate::flow::packet::{Pkt, V6Icmp};
use crate::source::PacketRef;
use crate::voip::record::{CallRecord, StreamRecord};
use crate::voip::stage::{self, Order, ShardTap, StageCounters, StageEnd, TapPolicy};
use crate::voip::tracker::TrackerConfig;
use crate::Result;

/// Where a run's call and stream records go (the call database, the
/// record files), called on the call stage's writer thread.
pub type CallWriter = Box<dyn FnMut(&[CallRecord], &[StreamRecord]) -> Result<()> + Send>;

/// The call stage of a run: the tracker's sizes and timeouts and the
/// writer of its records (taken by the run that uses it).
#[derive(Clone)]
pub struct CallStage {
    /// The call tracker's configuration.
    pub tracker: TrackerConfig,
    writer: Arc<Mutex<Option<CallWriter>>>,
}

impl CallStage {
    /// A call stage writing through `writer`.
    pub fn new(tracker: TrackerConfig, writer: CallWriter) -> CallStage {
        CallStage {
            tracker,
            writer: Arc::new(Mutex::new(Some(writer))),
        }
    }

    fn take_writer(&self) -> Option<CallWriter> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl std::fmt::Debug for CallStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallStage")
            .field("tracker", &self.tracker)
            .finish_non_exhaustive()
    }
}

impl FrameTap for ShardTap {
    #[inline]
    fn frame(&mut self, data: &[u8], r: &PacketRef) {
        ShardTap::frame(self, data, r);
    }
    #[inline]
    fn flow_frame(&mut self, data: &[u8], r: &PacketRef, p: (&Pkt, &V6Icmp), first: bool) -> bool {
        ShardTap::flow_frame(self, data, r, p, first)
    }
    #[inline]
    fn not_shown(&mut self, n: u64) {
        ShardTap::not_shown(self, n);
    }
    fn turn_done(&mut self) {
        ShardTap::turn_done(self);
    }
}

/// The stage's half, for its thread.
pub(super) struct Stage {
    ends: Vec<StageEnd>,
    order: Order,
    cfg: TrackerConfig,
    counters: Arc<StageCounters>,
    writer: CallWriter,
}

/// Puts a call tap into each shard's `taps` and returns the stage's half;
/// `None` without a call stage. An error when the stage's writer was
/// already taken (a [`CallStage`] serves one run).
pub(super) fn start(
    calls: Option<&CallStage>,
    live: bool,
    taps: &mut [crate::shard::taps::PacketTaps],
) -> Result<Option<Stage>> {
    let Some(c) = calls else {
        return Ok(None);
    };
    let writer = c.take_writer().ok_or_else(|| {
        crate::Error::Config("the call stage's writer was used by an earlier run".into())
    })?;
    let (order, policy) = match live {
        true => (Order::Time, TapPolicy::Drop),
        false => (Order::Turns, TapPolicy::Block),
    };
    let (shard_taps, ends, counters) = stage::channels(taps.len(), order, policy);
    for (t, tap) in taps.iter_mut().zip(shard_taps) {
        t.calls = Some(crate::shard::taps::Frames::new(Box::new(tap)));
    }
    Ok(Some(Stage {
        ends,
        order,
        cfg: c.tracker.clone(),
        counters,
        writer,
    }))
}

impl Stage {
    /// Runs the stage until every shard's tap is gone.
    pub(super) fn run(self) -> Result<crate::voip::run::VoipSummary> {
        stage::run_stage(self.ends, self.order, self.cfg, self.counters, self.writer)
    }
}
