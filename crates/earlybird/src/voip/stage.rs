//! The call stage of a flows run: shard-side taps → one tracker thread →
//! the call writer.
//!
//! Contract: each shard of `earlybird flows … --voip-db/--calls-out/
//! --streams-out` holds a [`ShardTap`]; it is shown, in the order the
//! shard runs them, every packet of no flow ([`ShardTap::frame`]) and the
//! packets of each flow until it says the flow cannot carry what the
//! tracker wants ([`ShardTap::flow_frame`], the candidate mark of
//! `voip/tap.rs`: the shard then marks the flow in its table and shows
//! the tap none of its next packets, counting them as seen). It keeps
//! what [`extract`] says the tracker may want (UDP that looks like SIP,
//! RTP or RTCP, UDP fragments, and the TCP segments of connections its
//! [`SipConnections`] has seen SIP on) as owned copies in a bounded
//! batch, and sends full batches, and at the end of each turn
//! ([`ShardTap::turn_done`]) the batch it holds, over a bounded channel of
//! its own to the stage thread ([`run_stage`]). Each packet carries an
//! order key: in a file run (turn, byte offset in its capture): every
//! shard counts the same turns, so the keys of all shards sort in input
//! order; in a live run, its timestamp.
//!
//! [`run_stage`] merges the shards' streams (each in key order) and hands
//! the packets to one [`Tracker`](super::tracker::Tracker) in key order. Files ([`Order::Turns`]):
//! a packet is tracked once every other shard has either a queued packet
//! with a later key or has published (its watermark, one atomic store per
//! turn after the turn's batch was sent) that it has sent every packet of
//! that turn: the tracker sees exactly the input order, as in `earlybird
//! voip`, whatever the number of shards. Live ([`Order::Time`]): a packet
//! is tracked once it is [`LIVE_WINDOW`] older than the newest packet
//! queued, or when no batch came for [`LIVE_IDLE`] (then everything
//! queued is tracked and the tracker's clock moves to an
//! `IdleClock` less a second: the latest packet
//! time carried on by the monotonic clock, so a step of the wall clock
//! ends no call); the stage's own timers (`last_batch`, `last_sent`) are
//! monotonic too. Shards' packets that come later than the
//! window are tracked late, out of order.
//!
//! In a file run the stage polls its channels ([`TURNS_POLL`]) instead of
//! blocking on them, so that a shard's send never has to wake it.
//!
//! Back-pressure: [`TapPolicy::Block`] (files) makes a shard wait on a
//! full channel, so nothing is lost; [`TapPolicy::Drop`] (live) never
//! waits: a batch the channel cannot take is dropped and its packets
//! counted ([`StageCounters::dropped`]). At the end of input or on a stop
//! each tap sends what it holds when it is dropped (or
//! [`ShardTap::finish`]ed); once every tap is gone the stage tracks what
//! is queued, ends the calls still open (`open`) and hands every record
//! to the writer thread, as `earlybird voip` does ([`super::run`]). While
//! the run goes, the records of ended calls go to the writer thread in
//! batches: when one is full, and at least every [`RECORDS_EVERY`].

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Select, Sender, TryRecvError};

use super::record::{CallRecord, StreamRecord};
use super::run::{advance_idle, new_tracker, send_records, writer_loop, Records, VoipSummary};
use super::tap::{extract, flow_packet, Follow, SipConnections};
use super::tracker::{Fragment, Tcp, TrackerConfig, VoipPacket};
use crate::decode::Decoded;
use crate::error::{Error, Result};
use crate::flow::packet::{Pkt, V6Icmp};
use crate::source::PacketRef;

/// Packets a tap's batch holds at most.
pub const TAP_PACKETS: usize = 2048;
/// Payload bytes a tap's batch holds at most (a batch is sent when the
/// next payload would not fit).
pub const TAP_BYTES: usize = 1 << 20;
/// Batches in flight from one shard to the stage.
pub const TAP_CHANNEL: usize = 32;
/// Live: how much older than the newest queued packet a packet must be
/// before it is tracked.
pub const LIVE_WINDOW: u64 = 200_000_000;
/// Live: with no batch for this long everything queued is tracked.
pub const LIVE_IDLE: Duration = Duration::from_millis(100);
/// Files: how long the stage sleeps when it can track nothing more.
pub const TURNS_POLL: Duration = Duration::from_micros(100);
/// The stage hands the records of ended calls to the writer at least
/// this often (and whenever a batch is full).
pub const RECORDS_EVERY: Duration = Duration::from_secs(1);
/// TCP connections each tap follows at most.
pub const TAP_CONNECTIONS: usize = 65_536;

/// How the stage orders the shards' packets (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Files: by (turn, offset), waiting for every shard's watermark.
    Turns,
    /// Live: by timestamp within [`LIVE_WINDOW`].
    Time,
}

/// What a tap does with a batch its channel cannot take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TapPolicy {
    /// Wait (files: lossless).
    Block,
    /// Drop the batch and count its packets (live).
    Drop,
}

/// One packet of a batch, its payload in the batch's bytes.
#[derive(Debug, Clone, Copy)]
struct Held {
    key: (u64, u64),
    ts: u64,
    src: [u8; 16],
    dst: [u8; 16],
    sport: u16,
    dport: u16,
    tcp: Option<Tcp>,
    frag: Option<Fragment>,
    sctp: bool,
    start: u32,
    end: u32,
}

/// Packets copied by a tap, in key order.
#[derive(Debug, Default)]
pub struct TapBatch {
    pkts: Vec<Held>,
    bytes: Vec<u8>,
}

impl TapBatch {
    fn clear(&mut self) {
        self.pkts.clear();
        self.bytes.clear();
    }

    fn packet(&self, i: usize) -> VoipPacket<'_> {
        let h = &self.pkts[i];
        VoipPacket {
            ts: h.ts,
            src: h.src,
            dst: h.dst,
            sport: h.sport,
            dport: h.dport,
            tcp: h.tcp,
            frag: h.frag,
            sctp: h.sctp,
            payload: &self.bytes[h.start as usize..h.end as usize],
        }
    }
}

/// What the taps counted, shared with the stage (each tap adds its
/// counts when it finishes).
#[derive(Debug, Default)]
pub struct StageCounters {
    /// Packets dropped because the stage's channel was full (live).
    pub dropped: AtomicU64,
    /// TCP connections not followed (a tap's set was full).
    pub tcp_not_followed: AtomicU64,
    /// Packets the taps were shown.
    pub seen: AtomicU64,
}

/// A shard's tap (see the module docs).
pub struct ShardTap {
    d: Decoded,
    conns: SipConnections,
    order: Order,
    policy: TapPolicy,
    turn: u64,
    batch: TapBatch,
    tx: Option<Sender<TapBatch>>,
    back: Receiver<TapBatch>,
    watermark: Arc<AtomicU64>,
    counters: Arc<StageCounters>,
    seen: u64,
    dropped: u64,
}

impl ShardTap {
    /// Shows the tap one packet (bytes in `data`) that belongs to no flow.
    #[inline]
    pub fn frame(&mut self, data: &[u8], r: &PacketRef) {
        self.seen += 1;
        let Some(frame) = data.get(r.offset..r.offset + r.caplen as usize) else {
            return;
        };
        let Some(v) = extract(r.ts, r.link, frame, &mut self.d) else {
            return;
        };
        if v.tcp.is_some() && !self.conns.wants(&v) {
            return;
        }
        self.keep(r, &v);
    }

    /// Shows the tap one packet of a flow as the shard decoded it (`p`,
    /// its side `side`; `first`: the flow's first); returns whether the
    /// flow's next packets may carry what the tracker wants (see
    /// [`Follow`]): the shard shows it no more of them when not. The
    /// frame is not decoded again ([`flow_packet`]).
    #[inline]
    pub fn flow_frame(
        &mut self,
        data: &[u8],
        r: &PacketRef,
        (p, side): (&Pkt, &V6Icmp),
        first: bool,
    ) -> bool {
        self.seen += 1;
        let Some(frame) = data.get(r.offset..r.offset + r.caplen as usize) else {
            return true;
        };
        let (v, follow) = flow_packet(
            r.ts,
            r.link,
            frame,
            (p, side),
            first,
            &mut self.conns,
            &mut self.d,
        );
        if let Some(v) = v {
            self.keep(r, &v);
        }
        follow == Follow::Yes
    }

    /// `n` packets of flows the tap follows no more went by unshown:
    /// counted as seen, as every packet the shard runs is.
    #[inline]
    pub fn not_shown(&mut self, n: u64) {
        self.seen += n;
    }

    /// Copies packet `v` of frame `r` into the batch (sent first when it
    /// is full).
    #[inline]
    fn keep(&mut self, r: &PacketRef, v: &VoipPacket<'_>) {
        if self.batch.pkts.len() >= TAP_PACKETS
            || self.batch.bytes.len() + v.payload.len() > TAP_BYTES
        {
            self.send();
        }
        let start = self.batch.bytes.len() as u32;
        self.batch.bytes.extend_from_slice(v.payload);
        let key = match self.order {
            Order::Turns => (self.turn, r.offset as u64),
            Order::Time => (r.ts, 0),
        };
        self.batch.pkts.push(Held {
            key,
            ts: v.ts,
            src: v.src,
            dst: v.dst,
            sport: v.sport,
            dport: v.dport,
            tcp: v.tcp,
            frag: v.frag,
            sctp: v.sctp,
            start,
            end: self.batch.bytes.len() as u32,
        });
    }

    /// The shard has run a turn: sends what the tap holds and publishes
    /// that every packet of the turn is sent.
    pub fn turn_done(&mut self) {
        if !self.batch.pkts.is_empty() {
            self.send();
        }
        self.watermark.store(self.turn, Ordering::Release);
        self.turn += 1;
    }

    fn send(&mut self) {
        let Some(tx) = &self.tx else {
            self.dropped += self.batch.pkts.len() as u64;
            self.batch.clear();
            return;
        };
        let mut next = self.back.try_recv().unwrap_or_default();
        next.clear();
        let full = std::mem::replace(&mut self.batch, next);
        let n = full.pkts.len() as u64;
        let failed = match self.policy {
            TapPolicy::Block => tx.send(full).is_err(),
            TapPolicy::Drop => match tx.try_send(full) {
                Ok(()) => false,
                Err(crossbeam_channel::TrySendError::Full(_)) => {
                    self.dropped += n;
                    false
                }
                Err(crossbeam_channel::TrySendError::Disconnected(_)) => true,
            },
        };
        if failed {
            // The stage is gone (its writer failed): nothing more is sent.
            self.dropped += n;
            self.tx = None;
        }
    }

    /// Sends what the tap holds, adds its counts to the stage's and
    /// closes its channel (also done when the tap is dropped).
    pub fn finish(&mut self) {
        if !self.batch.pkts.is_empty() {
            self.send();
        }
        self.watermark.store(u64::MAX, Ordering::Release);
        self.tx = None;
        let c = &self.counters;
        c.dropped.fetch_add(self.dropped, Ordering::Relaxed);
        c.tcp_not_followed
            .fetch_add(self.conns.dropped, Ordering::Relaxed);
        c.seen.fetch_add(self.seen, Ordering::Relaxed);
        (self.dropped, self.conns.dropped, self.seen) = (0, 0, 0);
    }
}

impl Drop for ShardTap {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The stage's ends of one shard's channel.
pub struct StageEnd {
    rx: Receiver<TapBatch>,
    back: Sender<TapBatch>,
    watermark: Arc<AtomicU64>,
}

/// The taps of `shards` shards and the stage's ends of their channels.
pub fn channels(
    shards: usize,
    order: Order,
    policy: TapPolicy,
) -> (Vec<ShardTap>, Vec<StageEnd>, Arc<StageCounters>) {
    let counters = Arc::new(StageCounters::default());
    let mut taps = Vec::new();
    let mut ends = Vec::new();
    for _ in 0..shards.max(1) {
        let (tx, rx) = crossbeam_channel::bounded(TAP_CHANNEL);
        let (back_tx, back_rx) = crossbeam_channel::bounded(TAP_CHANNEL);
        // No turn is done yet: 0 would claim turn 0 is.
        let watermark = Arc::new(AtomicU64::new(u64::MAX - 1));
        taps.push(ShardTap {
            d: Decoded::default(),
            conns: SipConnections::new(TAP_CONNECTIONS),
            order,
            policy,
            turn: 0,
            batch: TapBatch::default(),
            tx: Some(tx),
            back: back_rx,
            watermark: watermark.clone(),
            counters: counters.clone(),
            seen: 0,
            dropped: 0,
        });
        ends.push(StageEnd {
            rx,
            back: back_tx,
            watermark,
        });
    }
    (taps, ends, counters)
}

/// What the stage keeps of one shard's stream.
struct Lane {
    end: StageEnd,
    queue: VecDeque<TapBatch>,
    /// Next packet of the front batch.
    at: usize,
    /// Turns known sent (`None`: none yet; `Some(u64::MAX)`: all).
    done: Option<u64>,
    closed: bool,
}

impl Lane {
    /// Takes what has arrived; the watermark is read first, so every batch
    /// of the turns it names is taken too.
    fn refresh(&mut self) {
        let w = self.end.watermark.load(Ordering::Acquire);
        loop {
            match self.end.rx.try_recv() {
                Ok(b) if b.pkts.is_empty() => {
                    let _ = self.end.back.try_send(b);
                }
                Ok(b) => self.queue.push_back(b),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    self.closed = true;
                    break;
                }
            }
        }
        self.done = match w {
            u64::MAX => Some(u64::MAX),
            x if x == u64::MAX - 1 => None,
            x => Some(x),
        };
        if self.closed {
            self.done = Some(u64::MAX);
        }
    }

    fn head(&self) -> Option<(u64, u64)> {
        self.queue.front().map(|b| b.pkts[self.at].key)
    }

    fn pop(&mut self) {
        self.at += 1;
        if self.queue.front().is_some_and(|b| self.at >= b.pkts.len()) {
            self.at = 0;
            if let Some(b) = self.queue.pop_front() {
                let _ = self.end.back.try_send(b);
            }
        }
    }

    /// Whether this lane may hold (or still send) a packet before `key`.
    fn may_precede(&self, key: (u64, u64), order: Order) -> bool {
        if self.queue.is_empty() {
            match order {
                Order::Turns => self.done.is_none_or(|d| d < key.0),
                Order::Time => false,
            }
        } else {
            false
        }
    }
}

/// Runs the call stage (see the module docs): merges the shards' packets
/// from `ends`, tracks them with one tracker made from `cfg`, hands the
/// records of ended calls and streams to `write` on a writer thread, and
/// returns when every tap has finished. The summary's `packets` are the
/// packets the taps were shown (every packet the shards ran).
pub fn run_stage(
    ends: Vec<StageEnd>,
    order: Order,
    cfg: TrackerConfig,
    counters: Arc<StageCounters>,
    mut write: impl FnMut(&[CallRecord], &[StreamRecord]) -> Result<()> + Send,
) -> Result<VoipSummary> {
    let mut t = new_tracker(cfg)?;
    let mut sum = VoipSummary::default();
    let mut lanes: Vec<Lane> = ends
        .into_iter()
        .map(|end| Lane {
            end,
            queue: VecDeque::new(),
            at: 0,
            done: None,
            closed: false,
        })
        .collect();
    let (tx, rx) = crossbeam_channel::bounded::<Records>(16);
    std::thread::scope(|s| {
        let writer = std::thread::Builder::new()
            .name("eb-callwrite".into())
            .spawn_scoped(s, move || writer_loop(rx, &mut write))
            .map_err(Error::spawn("call writer"))?;
        let mut open = true;
        let mut last_batch = Instant::now();
        let mut last_sent = Instant::now();
        let mut clock = crate::time::IdleClock::start();
        loop {
            lanes.iter_mut().for_each(Lane::refresh);
            let idle_live = order == Order::Time && last_batch.elapsed() >= LIVE_IDLE;
            let newest = lanes
                .iter()
                .filter_map(|l| l.queue.back().and_then(|b| b.pkts.last()))
                .map(|h| h.key.0)
                .max()
                .unwrap_or(0);
            // Track every packet no other lane may precede.
            while let Some((i, key)) = lanes
                .iter()
                .enumerate()
                .filter_map(|(i, l)| l.head().map(|k| (i, k)))
                .min_by_key(|&(i, k)| (k, i))
            {
                let ready = match order {
                    Order::Turns => lanes
                        .iter()
                        .enumerate()
                        .all(|(j, l)| j == i || !l.may_precede(key, order)),
                    Order::Time => {
                        idle_live
                            || key.0.saturating_add(LIVE_WINDOW) <= newest
                            || lanes.iter().all(|l| l.closed || !l.queue.is_empty())
                    }
                };
                if !ready {
                    break;
                }
                let lane = &mut lanes[i];
                if let Some(b) = lane.queue.front() {
                    if order == Order::Time {
                        clock.saw(key.0);
                    }
                    t.packet(&b.packet(lane.at));
                    sum.voip_packets += 1;
                }
                lane.pop();
                if sum.voip_packets % 256 == 0 {
                    sum.peak_calls = sum.peak_calls.max(t.open_calls());
                    if open {
                        open = send_records(&mut t, &tx, false);
                    }
                }
            }
            if idle_live {
                advance_idle(&mut t, &clock);
                last_batch = Instant::now();
            }
            if open {
                open = send_records(&mut t, &tx, false);
            }
            // Records leave at least once a second, not only in full
            // batches: a call reaches the database soon after it ends.
            if open && last_sent.elapsed() >= RECORDS_EVERY {
                open = send_records(&mut t, &tx, true);
                last_sent = Instant::now();
            }
            if lanes.iter().all(|l| l.closed && l.queue.is_empty()) {
                break;
            }
            match order {
                // Files: poll. A stage blocked in a channel would make each
                // shard's send a wake-up (a futex call per turn).
                Order::Turns => std::thread::sleep(TURNS_POLL),
                // Live: wait for a batch on a lane that has none queued.
                Order::Time => {
                    let mut sel = Select::new();
                    let mut any = false;
                    for l in lanes.iter().filter(|l| !l.closed && l.queue.is_empty()) {
                        sel.recv(&l.end.rx);
                        any = true;
                    }
                    if !any {
                        std::thread::sleep(TURNS_POLL);
                    } else if sel.ready_timeout(LIVE_IDLE).is_ok() {
                        last_batch = Instant::now();
                    }
                }
            }
        }
        sum.peak_calls = sum.peak_calls.max(t.open_calls());
        t.finish();
        if open {
            send_records(&mut t, &tx, true);
        }
        drop(tx);
        sum.counters = t.counters;
        sum.audio = t.archive_counters();
        sum.packets = counters.seen.load(Ordering::Relaxed);
        sum.tcp_not_followed = counters.tcp_not_followed.load(Ordering::Relaxed);
        sum.stage_dropped = counters.dropped.load(Ordering::Relaxed);
        let (calls, streams) = writer
            .join()
            .unwrap_or_else(|_| Err(Error::thread("call writer")))?;
        sum.calls = calls;
        sum.streams = streams;
        Ok(sum)
    })
}
