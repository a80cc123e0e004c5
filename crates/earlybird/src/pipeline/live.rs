//! Live runs: how each shard thread reads its AF_PACKET socket.
//!
//! Contract: [`shard_loop`] takes the blocks the kernel hands over on the
//! shard's own socket (the kernel's fanout hash already chose the shard of
//! every packet, so nothing is exchanged between shards), runs them in
//! batches through the shard, and stops when [`RunControl::stop`] (or
//! [`RunControl::halt`]) is raised, the deadline passes or the socket fails (returned as a
//! warning; the caller still flushes every flow). Flow times are the
//! kernel's packet timestamps. While the interface is idle the table clock
//! follows an [`IdleClock`]: the latest packet time carried on by the
//! monotonic clock (the system clock only where no packet came yet, so a
//! step of the wall clock reaches the table through the packets' stamps
//! alone, never through an idle check), held back by [`IDLE_LAG`] so a packet still in the kernel's open block is
//! never older than it, and so idle flows still expire. Every [`TICK`] a
//! sixteenth of the table's slots (at least [`MIN_SWEEP`]) is swept and the records (and early-verdict events) waiting on the
//! shard are handed to the exporter, so at low rates records still leave
//! within a second or two; a learnt model published since the last batch
//! (`flows --learn`) is taken in then too, so an idle shard does not keep
//! the one before until its next packet. Nothing is allocated per packet. At each tick
//! (and at the end) the socket's kernel counters and the records the sink
//! dropped are added to the run's metrics, when it has some ([`Drops`]), so
//! drops are seen while the run goes, and [`RunControl::ticks`] counts
//! the tick (a watchdog's sign of life).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::sink::Sink;
use super::{RunControl, RECORDS_PER_BATCH};
use crate::shard::Shard;
use crate::source::af_packet::Ring;
use crate::source::{PacketRef, Warning};
use crate::telemetry::Counters;
use crate::time::IdleClock;

/// How long a shard waits in `poll` for a block before it checks the stop
/// flag and the deadline again.
const POLL_MS: i32 = 50;
/// Period of the sweep and the hand-over of waiting records.
const TICK: Duration = Duration::from_millis(100);
/// Slots swept per tick at least (small tables are swept whole).
const MIN_SWEEP: usize = 4096;
/// How far behind the system clock an idle shard's table clock stays.
pub const IDLE_LAG: u64 = 1_000_000_000;

/// Reads `ring` into `shard` until stopped (see the module docs).
pub(super) fn shard_loop(
    shard: &mut Shard,
    sink: &mut Sink,
    ring: &mut Ring,
    batch: usize,
    ctl: &RunControl,
    deadline: Option<Instant>,
    drops: &mut Drops,
) -> Vec<Warning> {
    let warnings = read(shard, sink, ring, batch, ctl, deadline, drops);
    drops.publish(ring, sink);
    warnings
}

/// The loop of [`shard_loop`].
fn read(
    shard: &mut Shard,
    sink: &mut Sink,
    ring: &mut Ring,
    batch: usize,
    ctl: &RunControl,
    deadline: Option<Instant>,
    drops: &mut Drops,
) -> Vec<Warning> {
    let mut refs: Vec<PacketRef> = Vec::with_capacity(batch);
    let mut last_tick = Instant::now();
    let mut clock = IdleClock::start();
    // Batches read: the turns of this shard's own DNS cache.
    let mut turn = 0u64;
    loop {
        if ctl.stopping() || deadline.is_some_and(|d| Instant::now() >= d) {
            return Vec::new();
        }
        match ring.next_block(POLL_MS) {
            Err(e) => return vec![Warning::live(&e)],
            Ok(Some(mut block)) => {
                while block.next_batch(&mut refs, batch) > 0 {
                    shard.names_turn(turn);
                    turn += 1;
                    shard.batch(block.data(), &refs);
                    if let Some(f) = shard.taps.calls.as_mut() {
                        f.tap().turn_done();
                    }
                    if shard.table.out.len() >= RECORDS_PER_BATCH {
                        sink.send(&mut shard.table.out, false);
                    }
                    if sink.swap.is_some() {
                        super::files::swap_between(shard, sink, ctl);
                    }
                }
                clock.saw(shard.table.now());
                // One shared add per block, not per packet.
                ctl.progress
                    .fetch_add(u64::from(block.frames()), Ordering::Relaxed);
            }
            Ok(None) => shard.idle(clock.now().saturating_sub(IDLE_LAG)),
        }
        if last_tick.elapsed() >= TICK {
            last_tick = Instant::now();
            let slots = (shard.table.slots_in_use() / 16).max(MIN_SWEEP);
            shard.sweep(slots);
            if !shard.table.out.is_empty() {
                sink.send(&mut shard.table.out, false);
            }
            if let Some(ev) = shard.events().filter(|e| !e.is_empty()) {
                sink.send_rows(ev, false);
            }
            if !shard.closed.is_empty() {
                sink.send_seconds(&mut shard.closed, false);
            }
            sink.serve_forensics(shard);
            // A model published while no packet came is taken in here,
            // not left until the next packet.
            if sink.swap.is_some() {
                super::files::swap_between(shard, sink, ctl);
            }
            drops.publish(ring, sink);
            ctl.ticks.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What a live shard has added to the run's drop metrics so far.
#[derive(Debug, Default)]
pub(super) struct Drops {
    /// The metrics, and the kernel's offered and dropped packets and the
    /// sink's dropped records added to them so far.
    #[cfg(feature = "metrics")]
    metrics: Option<(std::sync::Arc<crate::telemetry::metrics::Metrics>, [u64; 3])>,
}

impl Drops {
    /// For a run with these options (nothing is published without metrics).
    pub(super) fn new(opts: &super::RunOptions) -> Drops {
        #[cfg(not(feature = "metrics"))]
        let _ = opts;
        Drops {
            #[cfg(feature = "metrics")]
            metrics: opts.metrics.clone().map(|m| (m, [0; 3])),
        }
    }

    /// Adds what the socket and the sink counted since the last call to
    /// the metrics. ([`Ring::stats`] reads the kernel's counters, which
    /// reset on each read, and keeps their sum.)
    fn publish(&mut self, ring: &mut Ring, sink: &Sink) {
        #[cfg(feature = "metrics")]
        if let Some((m, seen)) = &mut self.metrics {
            let k = ring.stats();
            let now = [k.packets, k.drops, sink.dropped];
            m.live_drops(
                now[0].saturating_sub(seen[0]),
                now[1].saturating_sub(seen[1]),
                now[2].saturating_sub(seen[2]),
            );
            *seen = now;
            m.live_xdp(ring.xdp_counts_since());
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (ring, sink);
    }
}
/// Adds the socket's counters (the kernel's and the ring walk's) to the
/// shard's.
pub(super) fn count(c: &mut Counters, ring: &mut Ring) {
    let k = ring.stats();
    c.live_offered += k.packets;
    c.live_dropped += k.drops;
    c.live_bad_frames += ring.bad_frames();
    c.live_link_downs += ring.link_downs();
    ring.add_xdp_counts(&mut c.live_xdp);
    c.unsupported_link += ring.unsupported();
    let s = ring.stamped();
    c.live_ts_hardware += s.hardware;
    c.live_ts_software += s.software;
    c.live_ts_none += s.none;
}
