//! One shard: a thread's share of the flows, run to completion per batch.
//!
//! Contract: a shard decodes packets, keeps them in its own [`FlowTable`]
//! and runs each batch in two passes (decode + hash for the whole batch,
//! then update with index and entry prefetches running a few packets
//! ahead), followed by one bounded step of incremental expiry. Nothing is
//! shared with other shards and nothing is allocated per packet.
//!
//! - [`Shard::batch`]: the only shard of a run decodes and runs a batch.
//! - [`Shard::split`]: with several shards, the shard whose turn it is
//!   reads a batch for all of them: it counts every packet, decodes and
//!   hashes each once, and puts it into the [`ShardBatch`] of the shard its
//!   symmetric flow hash selects ([`crate::flow::key::shard_of`]).
//! - [`Shard::run_shard_batch`]: every shard runs, turn by turn, the shard batches
//!   made for it (see [`crate::exchange`] for the turns and channels).
//!
//! Packets that belong to no flow are counted by the shard that read them.
//!
//! With packet sampling (`FlowConfig::sample`, `crate::sample`) the shard
//! that reads a batch first keeps 1 in N of its packets, by count, with
//! its own sampler (stream = shard id); the skipped packets are counted
//! (read, and sampled out) and go no further: no decode, no flow. The
//! clock still advances to the whole batch's largest timestamp. Without
//! sampling the batch goes on as it came; sampling and per-second
//! statistics share one test per batch (`by_part`).
//!
//! With per-second statistics, the records the table ends go into `out`
//! marked with the second of the running clock they were made in
//! ([`MadeIn`], one entry per second), so what labelling counts among
//! them lands in that second's row whichever thread labels them.

mod analyzers;
pub mod consumers;
pub mod taps;

use std::sync::Arc;

use crate::classify::Classifier;
use crate::config::{FlowConfig, FlowHash};
use crate::decode::LinkType;
use crate::decode::{decode, fast, ipproto, Decoded, Skip};
use crate::dump::Taps;
use crate::flow::consumer::Consumer;
use crate::flow::key::{shard_hash_v4, shard_of, toeplitz, Key, TableKey};
use crate::flow::packet::{is_icmp, Payload, PayloadSource, Pkt, V6Icmp};
use crate::flow::record::{MadeIn, RecordBatch};
use crate::flow::table::FlowTable;
use crate::flow::tally::Tally;
use crate::sample::Sampler;
use crate::source::PacketRef;
use crate::telemetry::second::{Part, Seconds, ShardSecond};
use crate::telemetry::Counters;
use consumers::Consumers;
use taps::{PacketTaps, TapPacket};

/// [`Shard::decode`]'s `SPLIT` flag: a reader of several shards puts
/// each packet into its shard's [`ShardBatch`]; the only shard keeps every
/// packet.
const SPLIT_ALL: bool = true;
const KEEP_ALL: bool = false;

/// The packets of one batch that belong to one shard, decoded and hashed
/// by the shard that read the batch ([`Shard::split`]), in input order, with
/// the batch's largest timestamp (the receiver's clock advances to it as
/// the reader's does).
#[derive(Debug)]
pub struct ShardBatch {
    /// The packets, ready for the flow table.
    pub pkts: Vec<Pkt>,
    /// What IPv6 and ICMP packets carry beside them: entry 0 is unused
    /// (other packets point at it), such a packet's `idx` is the place of
    /// its side.
    pub wide: Vec<V6Icmp>,
    /// Where each packet's frame is, in input order with `pkts` (filled
    /// only when an analyzer reads packets: its payload is found there
    /// again for the packets an analyzer follows).
    pub spans: Vec<Span>,
    /// Largest timestamp of the whole batch, every shard's packets.
    pub max_ts: u64,
    /// Smallest timestamp of the whole batch.
    pub min_ts: u64,
    /// Where each packet is in the batch, in input order with `pkts`
    /// (filled only when the shards have packet taps: `crate::dump`).
    pub frames: Vec<PacketRef>,
    /// With taps, in the reader's own shard batch: the packets of the batch that
    /// belong to no flow, each after the number of `pkts` that came before
    /// it (so the reader's taps get them in input order).
    pub no_flow: Vec<(u32, PacketRef)>,
}

impl ShardBatch {
    /// An empty shard batch with room for `n` packets.
    pub fn with_capacity(n: usize) -> ShardBatch {
        ShardBatch {
            pkts: Vec::with_capacity(n),
            wide: vec![V6Icmp::default()],
            spans: Vec::new(),
            max_ts: 0,
            min_ts: 0,
            frames: Vec::new(),
            no_flow: Vec::new(),
        }
    }

    /// A shard batch with no buffers (what is left where one was taken away);
    /// allocates nothing.
    pub fn none() -> ShardBatch {
        ShardBatch {
            pkts: Vec::new(),
            wide: Vec::new(),
            spans: Vec::new(),
            max_ts: 0,
            min_ts: 0,
            frames: Vec::new(),
            no_flow: Vec::new(),
        }
    }

    /// True for [`ShardBatch::none`].
    pub fn is_none(&self) -> bool {
        self.wide.is_empty()
    }

    /// Empties the shard batch, keeping its buffers.
    pub fn clear(&mut self) {
        self.pkts.clear();
        self.wide.truncate(1);
        self.spans.clear();
        self.frames.clear();
        self.no_flow.clear();
        self.max_ts = 0;
        self.min_ts = 0;
    }
}

/// Where a packet's frame is in the bytes of its batch (a shard batch's
/// packet has no [`PacketRef`] beside it).
#[derive(Debug, Clone, Copy, Default)]
pub struct Span {
    /// Offset of the frame's first byte in the batch's data.
    pub frame: usize,
    /// Bytes of the frame captured.
    pub caplen: u32,
}

/// Where the packets of a pass have their frames: in `refs` at each
/// packet's `idx` (one shard) or in `spans` in order (a shard batch).
struct Frames<'a> {
    data: &'a [u8],
    refs: &'a [PacketRef],
    spans: &'a [Span],
    /// An analyzer on reads the IP packet (the payload then carries it).
    ip: bool,
}

/// Where the flow table finds the payload of packet `i` of a pass, when a
/// consumer follows it ([`PayloadSource`]): its frame in `frames`, its
/// place in the frame in the packet ([`Pkt::payload_at`]) or, for a
/// fast-path packet, read from the frame's headers ([`InFrame::place`]).
/// Only then is it looked up: a packet no analyzer reads costs nothing
/// more.
#[derive(Clone, Copy)]
struct InFrame<'f, 'a> {
    frames: &'f Frames<'a>,
    i: usize,
}

impl InFrame<'_, '_> {
    /// Where packet `p`'s payload starts in its frame `f` and its length
    /// per the headers: the general decoder keeps them in the `Pkt`; a
    /// fast-path packet's are read from the frame here
    /// ([`Pkt::place_in_frame`]), only for a packet a consumer follows.
    /// (0, 0) when the frame is not in the bytes.
    #[inline(always)]
    fn place(&self, p: &Pkt, f: Span) -> (u16, u16) {
        if !p.place_in_frame() {
            return (p.payload_at, p.payload_len);
        }
        let tcp_offset = if p.key.proto == ipproto::TCP {
            match self.frames.data.get(f.frame + fast::TCP_OFFSET_AT) {
                Some(&b) if fast::TCP_OFFSET_AT < f.caplen as usize => b,
                _ => return (0, 0),
            }
        } else {
            0
        };
        fast::payload_place(p.key.proto, p.size, tcp_offset)
    }

    /// Where packet `p`'s frame lies.
    #[inline(always)]
    fn frame(&self, p: &Pkt) -> Option<Span> {
        let fs = self.frames;
        if fs.refs.is_empty() {
            fs.spans.get(self.i).copied()
        } else {
            (fs.refs.get(p.idx as usize)).map(|r| Span {
                frame: r.offset,
                caplen: r.caplen,
            })
        }
    }
}

impl<'a> PayloadSource<'a> for InFrame<'_, 'a> {
    #[inline(always)]
    fn empty(&self, p: &Pkt) -> bool {
        if !p.place_in_frame() {
            return p.payload_len == 0;
        }
        // UDP's needs no byte of the frame.
        if p.key.proto != ipproto::TCP {
            return fast::payload_place(p.key.proto, p.size, 0).1 == 0;
        }
        match self.frame(p) {
            Some(f) => self.place(p, f).1 == 0,
            None => true,
        }
    }

    /// The payload as captured (cut by the snaplen, never past its length
    /// per the headers), with the IP packet it ends when `ip` and its
    /// headers were all captured.
    #[inline(always)]
    fn payload(self, p: &Pkt) -> Payload<'a> {
        let fs = self.frames;
        let Some(f) = self.frame(p) else {
            return Payload::NONE;
        };
        let (payload_at, len) = self.place(p, f);
        let at = payload_at as usize;
        let room = (f.caplen as usize).saturating_sub(at);
        let head = if fs.ip && at <= f.caplen as usize {
            payload_at.saturating_sub(p.ip_offset)
        } else {
            0
        };
        let captured = room.min(len as usize) as u16;
        Payload::at(fs.data, f.frame + at, captured, len, head)
    }

    /// The IP packet up to the payload's end, as captured, when its
    /// headers were all captured (as [`Payload::ip`] with `ip` on).
    fn ip(self, p: &Pkt) -> &'a [u8] {
        let Some(f) = self.frame(p) else {
            return &[];
        };
        let (payload_at, len) = self.place(p, f);
        let at = payload_at as usize;
        if at > f.caplen as usize {
            return &[];
        }
        let end = (at + len as usize).min(f.caplen as usize);
        self.frames
            .data
            .get(f.frame + p.ip_offset as usize..f.frame + end)
            .unwrap_or(&[])
    }
}

/// A shard's packet sampling: the sampler and the packets of a batch it
/// kept (a buffer reused batch after batch).
struct Sampling {
    sampler: Sampler,
    kept: Vec<PacketRef>,
}

/// A shard's state.
pub struct Shard {
    id: usize,
    shards: usize,
    bidirectional: bool,
    hash: FlowHash,
    /// The shard's flow table (its `out` batch holds finished records) and
    /// its flow consumers (`shard/consumers.rs`).
    pub table: FlowTable<Consumers>,
    /// The shard's counters.
    pub counters: Counters,
    pkts: Vec<Pkt>,
    /// What the batch's IPv6 and ICMP packets carry beside them, by index
    /// in the batch.
    wide: Vec<V6Icmp>,
    /// A flow consumer reads packets (an analyzer is on): the first pass
    /// keeps each packet's payload place and length in its `Pkt` (but a
    /// fast-path packet's, read again from its frame when a consumer reads
    /// it; a shard batch keeps each frame's place) and the second shows the packets to
    /// the consumers (each pass is compiled twice, with and without, and
    /// picked once per batch: `PACKETS`).
    per_packet: bool,
    /// The packet taps (the dumper and the packet ring, the call stage's
    /// frame tap, the `-w` writer and its DSCP marks; `shard/taps.rs`).
    pub taps: PacketTaps,
    /// Per-second statistics (`None` unless the run keeps them): batches
    /// are cut where a second of packet time ends.
    seconds: Option<[Seconds; 2]>,
    /// Seconds closed and not yet handed to the exporter thread.
    pub closed: Vec<ShardSecond>,
    /// The packets of no flow of one part of a shard batch (kept for reuse).
    no_flow_buf: Vec<(u32, PacketRef)>,
    /// The part being run is not its batch's first: its packets are timed
    /// from the floor the first part set (the table clock at the batch's
    /// start), so cutting a batch at second boundaries changes no flow.
    mid_batch: bool,
    /// Packet sampling (`None`: every packet is run).
    sampling: Option<Sampling>,
    /// Per-second statistics or sampling are on: a batch leaves the plain
    /// path (one test per batch, whichever is on).
    by_part: bool,
}

impl Shard {
    /// Shard `id` of `shards`; fails when its flow table cannot be reserved.
    pub fn new(
        id: usize,
        shards: usize,
        cfg: &FlowConfig,
        model: Option<Arc<dyn Classifier>>,
    ) -> crate::Result<Shard> {
        // Every shard sweeps once per batch of the input, but holds only its
        // share of the flows: the slots examined per batch are shared out,
        // so each table is swept at the one-shard rate per packet it runs.
        let shards = shards.max(1);
        let cfg = FlowConfig {
            sweep_per_batch: cfg.sweep_per_batch.div_ceil(shards),
            ..cfg.clone()
        };
        let table = Consumers::table(&cfg, model)?;
        Ok(Shard {
            id,
            shards,
            bidirectional: cfg.bidirectional,
            hash: cfg.hash,
            per_packet: table.consumers.reads_packets(),
            table,
            counters: Counters::default(),
            taps: PacketTaps::default(),
            seconds: None,
            closed: Vec::new(),
            no_flow_buf: Vec::new(),
            mid_batch: false,
            sampling: cfg.sample.as_ref().map(|s| Sampling {
                sampler: Sampler::new(s, id as u64),
                kept: Vec::new(),
            }),
            by_part: cfg.sample.is_some(),
            pkts: Vec::with_capacity(crate::source::BATCH),
            wide: Vec::new(),
        })
    }

    /// Gives the shard its dumper and ring taps (`None`: none); the ends
    /// of flows with held packets are noted only when the taps hold
    /// packets (`--dump-app`, `crate::dump::held`).
    pub fn set_taps(&mut self, taps: Option<Box<Taps>>) {
        let holds = taps.as_deref().is_some_and(|t| t.held.is_some());
        self.table.consumers.held = holds.then(crate::flow::held::HeldEnds::default);
        self.taps.dump = taps;
    }

    /// Turns early-verdict events on: from now on each verdict adds a row
    /// to [`Shard::events`] (`flow/events.rs`).
    pub fn emit_verdict_events(&mut self) {
        let events = &mut self.table.consumers.events;
        if events.is_none() {
            *events = Some(crate::flow::events::Events::default());
        }
    }

    /// The early-verdict events not yet handed over (`None`: not asked
    /// for).
    pub fn events(&mut self) -> Option<&mut crate::schema::RowBatch> {
        self.table.consumers.events.as_mut().map(|e| &mut e.rows)
    }

    /// The `dns` analyzer's name-by-address cache takes its turns from
    /// `board`, shared by every shard of a run that runs the input in
    /// turns (`analyze/dns_cache.rs`); nothing when it is off.
    pub fn set_names_board(&mut self, board: Arc<crate::analyze::dns_cache::Board>) {
        // A board of one (live runs: each shard caches what it sees) has
        // one place, whichever shard this is.
        let place = if board.shards() == 1 { 0 } else { self.id };
        if let Some(a) = &mut self.table.consumers.analyzers {
            a.dns_board(board, place);
        }
    }

    /// The shard is about to run a batch of turn `turn` (with files, of
    /// the input's records `256·turn` on, `pipeline/files.rs`):
    /// the `dns` analyzer's cache hands over the answers of the turns
    /// before and takes what `turn` sees (`analyze/dns.rs`).
    pub fn names_turn(&self, turn: u64) {
        if let Some(a) = &self.table.consumers.analyzers {
            a.dns_turn(turn);
        }
    }

    /// This shard's number.
    pub fn id(&self) -> usize {
        self.id
    }

    /// How many shards the run has.
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// Processes one batch of packets whose bytes are in `data`, all of them
    /// this shard's (a single-shard run).
    pub fn batch(&mut self, data: &[u8], refs: &[PacketRef]) {
        if self.by_part {
            self.batch_in_parts(data, refs);
        } else {
            self.batch_whole(data, refs);
        }
    }

    /// Keeps per-second statistics from now on (a model of `classes`
    /// classes; 0 without one): see `telemetry/second.rs`.
    pub fn keep_seconds(&mut self, classes: usize) {
        self.seconds = Some([
            Seconds::new(self.id, Part::Read),
            Seconds::new(self.id, Part::Run),
        ]);
        self.table.consumers.tally = Some(Tally::new(classes));
        if let Some(a) = &mut self.table.consumers.analyzers {
            a.count_media();
        }
        self.by_part = true;
    }

    /// Clock `part` of the shard is about to count packets of time `ts`:
    /// closes its current second into [`Shard::closed`] when `ts` is past
    /// it.
    #[inline]
    fn tick(&mut self, part: Part, ts: u64) {
        if let Some(s) = self.seconds.as_mut() {
            let (counters, table) = (&self.counters, &mut self.table);
            let clock = &mut s[part as usize];
            if let Some(c) = clock.tick(ts, || second_figures(counters, table, part)) {
                self.closed.push(c);
            }
            if part == Part::Run {
                mark_second(&mut table.out, clock.at());
            }
        }
    }

    /// Where the current second of clock `part` ends (`u64::MAX` without
    /// statistics or before the first packet).
    #[inline]
    fn second_end(&self, part: Part) -> u64 {
        self.seconds
            .as_ref()
            .map_or(u64::MAX, |s| s[part as usize].end())
    }

    /// [`Shard::batch`] with per-second statistics or sampling: the batch
    /// is run in parts that each lie within one second of packet time
    /// (with per-second statistics), each part sampled (with sampling)
    /// and its kept packets run; the clock then moves to the part's
    /// largest timestamp, skipped packets included.
    #[inline(never)]
    fn batch_in_parts(&mut self, data: &[u8], refs: &[PacketRef]) {
        let mut rest = refs;
        while let Some(first) = rest.first() {
            let n = if self.seconds.is_some() {
                self.tick(Part::Read, first.ts);
                self.tick(Part::Run, first.ts);
                let end = self.second_end(Part::Run);
                in_second(rest.iter().map(|r| r.ts), end)
            } else {
                rest.len()
            };
            let (part, tail) = rest.split_at(n);
            if self.sampling.is_some() {
                self.batch_sampled(data, part);
            } else {
                self.batch_whole(data, part);
            }
            self.mid_batch = true;
            rest = tail;
        }
        self.mid_batch = false;
    }

    /// Samples `part` and runs the packets kept; the clock then moves to
    /// the part's largest timestamp, skipped packets included (a call of
    /// its own, so the batch run is inlined once into the loop above).
    #[inline(never)]
    fn batch_sampled(&mut self, data: &[u8], part: &[PacketRef]) {
        let mut kept = self.sampling.as_mut().map(|s| std::mem::take(&mut s.kept));
        let buf = kept.get_or_insert_with(Vec::new);
        let skipped = self.sample(part, buf);
        self.batch_whole(data, buf);
        if let (Some(smp), Some(kept)) = (self.sampling.as_mut(), kept) {
            smp.kept = kept;
        }
        self.table.observe_time(skipped.max_ts);
    }

    /// Samples `refs` into `kept` and counts the skipped packets as read
    /// and sampled out (no packet is skipped without sampling).
    #[inline]
    fn sample(&mut self, refs: &[PacketRef], kept: &mut Vec<PacketRef>) -> crate::sample::Skipped {
        let Some(smp) = self.sampling.as_mut() else {
            kept.clear();
            kept.extend_from_slice(refs);
            return crate::sample::Skipped {
                packets: 0,
                bytes: 0,
                min_ts: refs.iter().map(|r| r.ts).min().unwrap_or(u64::MAX),
                max_ts: refs.iter().map(|r| r.ts).max().unwrap_or(0),
            };
        };
        let skipped = smp.sampler.sample(refs, kept, |r| (r.ts, r.orig_len));
        let c = &mut self.counters;
        c.packets_read += skipped.packets;
        c.bytes_read += skipped.bytes;
        c.sampled_out += skipped.packets;
        c.sampled_out_bytes += skipped.bytes;
        skipped
    }

    /// [`Shard::batch`] in one part. Not inlined: one copy of the batch
    /// loop serves runs with and without per-second parts (inlined into
    /// [`Shard::batch_in_parts`] as well, the loop compiled there took
    /// about 12 instructions a packet more on the realistic mix).
    #[inline(never)]
    fn batch_whole(&mut self, data: &[u8], refs: &[PacketRef]) {
        match self.per_packet {
            false => self.batch_as::<false>(data, refs),
            true => self.batch_as::<true>(data, refs),
        }
    }

    /// [`Self::batch`] with the flow consumers' per-packet call (`PACKETS`)
    /// or without. Not inlined: each variant's loop is compiled on its own,
    /// so that the consumers' path does not move the registers of the loop
    /// without it (BENCHMARKS.md, "What the analyzers cost in time").
    #[inline(never)]
    fn batch_as<const PACKETS: bool>(&mut self, data: &[u8], refs: &[PacketRef]) {
        self.begin(refs.len());
        let (min_ts, max_ts) = self.decode::<KEEP_ALL, PACKETS>(data, refs, &mut []);
        let pkts = std::mem::take(&mut self.pkts);
        let wide = std::mem::take(&mut self.wide);
        self.account::<PACKETS>(&pkts, &wide, &[], data, refs, (&[], &[]), (min_ts, max_ts));
        self.pkts = pkts;
        self.wide = wide;
    }

    /// Reads a batch for every shard of a run without running any of it:
    /// counts all of its packets (as [`Shard::batch`] does), decodes and
    /// hashes each packet that belongs to a flow into `shard batches[owner]`,
    /// this shard's own included, and sets every shard batch's `max_ts` to the
    /// batch's (so every shard's clock moves as if it had seen the whole
    /// batch). Packets that belong to no flow are counted here and go
    /// nowhere.
    pub fn split(&mut self, data: &[u8], refs: &[PacketRef], shard_batches: &mut [ShardBatch]) {
        let (min_ts, max_ts) = if self.by_part {
            self.split_in_parts(data, refs, shard_batches)
        } else {
            self.split_whole(data, refs, shard_batches)
        };
        for p in shard_batches.iter_mut() {
            p.max_ts = max_ts;
            p.min_ts = min_ts;
        }
    }

    /// [`Shard::split`] with per-second statistics or sampling: what this
    /// reader counts is cut where a second of its reading clock ends (as
    /// in [`Shard::batch_in_parts`]), and each part is sampled (with
    /// sampling) and its kept packets split; returns the smallest and
    /// largest timestamp of the whole batch, skipped packets included.
    #[inline(never)]
    fn split_in_parts(
        &mut self,
        data: &[u8],
        refs: &[PacketRef],
        shard_batches: &mut [ShardBatch],
    ) -> (u64, u64) {
        let (mut min_ts, mut max_ts) = (u64::MAX, 0);
        let mut rest = refs;
        while let Some(first) = rest.first() {
            let n = if self.seconds.is_some() {
                self.tick(Part::Read, first.ts);
                let end = self.second_end(Part::Read);
                in_second(rest.iter().map(|r| r.ts), end)
            } else {
                rest.len()
            };
            let (part, tail) = rest.split_at(n);
            let (lo, hi) = if self.sampling.is_some() {
                self.split_sampled(data, part, shard_batches)
            } else {
                self.split_whole(data, part, shard_batches)
            };
            (min_ts, max_ts) = (min_ts.min(lo), max_ts.max(hi));
            rest = tail;
        }
        (min_ts, max_ts)
    }

    /// Samples `part` and splits the packets kept; returns the smallest
    /// and largest timestamp of the part, skipped packets included (a
    /// call of its own, as [`Shard::batch_sampled`]).
    #[inline(never)]
    fn split_sampled(
        &mut self,
        data: &[u8],
        part: &[PacketRef],
        shard_batches: &mut [ShardBatch],
    ) -> (u64, u64) {
        let mut kept = self.sampling.as_mut().map(|s| std::mem::take(&mut s.kept));
        let buf = kept.get_or_insert_with(Vec::new);
        let skipped = self.sample(part, buf);
        self.split_whole(data, buf, shard_batches);
        if let (Some(smp), Some(kept)) = (self.sampling.as_mut(), kept) {
            smp.kept = kept;
        }
        (skipped.min_ts, skipped.max_ts)
    }

    /// Runs the packets a [`Shard::split`] (this shard's or another's) put
    /// into a shard batch for this shard; they were counted there. `data` is the
    /// capture the shard batch's batch was read from (its frames' places point
    /// into it).
    pub fn run_shard_batch(&mut self, shard_batch: &ShardBatch, data: &[u8]) {
        self.table.drain_verdicts(false);
        if self.seconds.is_some() {
            self.run_shard_batch_by_second(shard_batch, data);
            return;
        }
        let times = (shard_batch.min_ts, shard_batch.max_ts);
        let frames = (&shard_batch.frames[..], &shard_batch.no_flow[..]);
        self.run_part(
            &shard_batch.pkts,
            shard_batch,
            &shard_batch.spans,
            frames,
            data,
            times,
        );
    }

    /// [`Shard::split`] of `refs` in one part; returns its smallest and
    /// largest timestamp.
    #[inline(always)]
    fn split_whole(
        &mut self,
        data: &[u8],
        refs: &[PacketRef],
        shard_batches: &mut [ShardBatch],
    ) -> (u64, u64) {
        match self.per_packet {
            false => self.decode::<SPLIT_ALL, false>(data, refs, shard_batches),
            true => self.decode::<SPLIT_ALL, true>(data, refs, shard_batches),
        }
    }

    /// [`Shard::run_shard_batch`] keeping per-second statistics: the shard batch is
    /// run in parts that each lie within one second of packet time (the
    /// packets of no flow go with the part they came in).
    #[inline(never)]
    fn run_shard_batch_by_second(&mut self, shard_batch: &ShardBatch, data: &[u8]) {
        let pkts = &shard_batch.pkts;
        self.tick(Part::Run, shard_batch.min_ts);
        if pkts.is_empty() {
            let frames = (&[][..], &shard_batch.no_flow[..]);
            let times = (shard_batch.min_ts, shard_batch.max_ts);
            self.run_part(pkts, shard_batch, &[], frames, data, times);
            return;
        }
        let mut no_flow = std::mem::take(&mut self.no_flow_buf);
        let mut i = 0;
        while i < pkts.len() {
            self.tick(Part::Run, pkts[i].ts);
            let end = self.second_end(Part::Run);
            let j = i + in_second(pkts[i..].iter().map(|p| p.ts), end);
            let last = j == pkts.len();
            let max_ts = if last {
                shard_batch.max_ts
            } else {
                pkts[i..j].iter().map(|p| p.ts).max().unwrap_or(0)
            };
            let spans = shard_batch.spans.get(i..j).unwrap_or(&[]);
            // The packets of no flow before packet j (after the last one
            // too, in the last part), placed from packet i.
            no_flow.clear();
            no_flow.extend(
                (shard_batch.no_flow.iter())
                    .filter(|(at, _)| (*at as usize) >= i && ((*at as usize) < j || last))
                    .map(|&(at, r)| (at - i as u32, r)),
            );
            let frames = (shard_batch.frames.get(i..j).unwrap_or(&[]), &no_flow[..]);
            let times = (shard_batch.min_ts, max_ts);
            self.run_part(&pkts[i..j], shard_batch, spans, frames, data, times);
            self.mid_batch = true;
            i = j;
        }
        self.mid_batch = false;
        self.no_flow_buf = no_flow;
    }

    /// Runs `pkts` of `shard batch` (their frames' places `spans`, their frames
    /// and the packets of no flow among them `frames`) through the table.
    #[inline(always)]
    fn run_part(
        &mut self,
        pkts: &[Pkt],
        shard_batch: &ShardBatch,
        spans: &[Span],
        frames: (&[PacketRef], &[(u32, PacketRef)]),
        data: &[u8],
        times: (u64, u64),
    ) {
        let wide = &shard_batch.wide;
        match self.per_packet {
            false => self.account::<false>(pkts, wide, spans, data, &[], frames, times),
            true => self.account::<true>(pkts, wide, spans, data, &[], frames, times),
        }
    }

    #[inline(always)]
    fn begin(&mut self, n: usize) {
        self.table.drain_verdicts(false);
        if self.wide.len() < n {
            self.wide.resize(n, V6Icmp::default());
        }
    }

    /// First pass: decodes, counts and hashes the batch, into `self.pkts`
    /// (`KEEP_ALL`) or into the shard batch of each packet's shard (`SPLIT_ALL`, from
    /// the symmetric shard hash of the raw header fields, taken before the
    /// key is built). Returns the smallest and the largest timestamp. With
    /// a packet tap that reads shard batches (`SPLIT_ALL` only,
    /// [`PacketTaps::on_shard_batches`]) each packet's place in the batch
    /// goes into its shard batch beside it, and a packet that belongs to no
    /// flow into this shard's own shard batch's `no_flow` (for
    /// [`PacketTaps::no_flow`]).
    #[inline(always)]
    fn decode<const SPLIT: bool, const PACKETS: bool>(
        &mut self,
        data: &[u8],
        refs: &[PacketRef],
        fwd: &mut [ShardBatch],
    ) -> (u64, u64) {
        let frames = SPLIT && self.taps.on_shard_batches();
        let mut d = Decoded::default();
        let (mut min_ts, mut max_ts) = (u64::MAX, 0);
        self.pkts.clear();
        for (idx, r) in refs.iter().enumerate() {
            max_ts = max_ts.max(r.ts);
            min_ts = min_ts.min(r.ts);
            self.counters.packets_read += 1;
            self.counters.bytes_read += r.orig_len as u64;
            let Some(bytes) = data.get(r.offset..r.offset + r.caplen as usize) else {
                self.counters.skipped[Skip::Truncated as usize] += 1;
                continue;
            };
            // The common case first (same result as the general decoder,
            // see decode/fast.rs), then the general decoder.
            let fast = match r.link {
                LinkType::Ethernet => fast::ethernet_ipv4(bytes),
                _ => None,
            };
            if let Some(f) = fast {
                let (src, sport, dst, dport) = (f.src(), f.sport(), f.dst(), f.dport());
                // One symmetric hash picks the shard and indexes the table.
                let flow_hash = shard_hash_v4(src, sport, dst, dport, f.proto);
                let owner = if SPLIT {
                    shard_of(flow_hash, self.shards)
                } else {
                    0
                };
                let (key, from_a) =
                    TableKey::v4(src, sport, dst, dport, f.proto, self.bidirectional);
                let hash = match self.hash {
                    FlowHash::Fold => flow_hash,
                    FlowHash::Toeplitz => toeplitz::hash(
                        &Key::from_v4(src, sport, dst, dport, f.proto, self.bidirectional).0,
                    ),
                };
                let pkt = Pkt {
                    key,
                    hash,
                    ts: r.ts,
                    size: f.ip_len,
                    flags: f.tcp_flags,
                    from_a,
                    macs: [f.src_mac(), f.dst_mac()],
                    idx: idx as u16,
                    ip_offset: fast::IP_OFFSET,
                    // Read again from the frame for a packet a consumer
                    // reads (`InFrame::place`): the loop carries two
                    // values less a packet.
                    payload_at: 0,
                    payload_len: if PACKETS { Pkt::FAST_PLACE } else { 0 },
                };
                if PACKETS && SPLIT {
                    push_frame(fwd, owner, r);
                }
                if frames {
                    fwd[owner].frames.push(*r);
                }
                self.push::<SPLIT>(fwd, owner, pkt, None);
                continue;
            }
            if let Err(skip) = decode(r.link, bytes, &mut d) {
                self.counters.skipped[skip as usize] += 1;
                if frames {
                    let own = &mut fwd[self.id];
                    own.no_flow.push((own.pkts.len() as u32, *r));
                }
                continue;
            }
            let (key, from_a) = Key::from_decoded(&d, self.bidirectional);
            let flow_hash = key.shard_hash();
            let owner = if SPLIT {
                shard_of(flow_hash, self.shards)
            } else {
                0
            };
            let v6 = d.ip_version == 6;
            let pkt = Pkt {
                key: TableKey::from_key(&key, v6),
                hash: match self.hash {
                    FlowHash::Fold => flow_hash,
                    FlowHash::Toeplitz => toeplitz::hash(&key),
                },
                ts: r.ts,
                size: d.ip_len,
                flags: d.tcp_flags,
                from_a,
                macs: [d.src_mac, d.dst_mac],
                idx: idx as u16,
                ip_offset: d.ip_offset,
                payload_at: if PACKETS { d.payload_offset } else { 0 },
                payload_len: if PACKETS { d.payload_len } else { 0 },
            };
            let side = (v6 || is_icmp(d.proto)).then_some(V6Icmp {
                wide: [key.a, key.b],
                icmp: d.icmp,
            });
            if PACKETS && SPLIT {
                push_frame(fwd, owner, r);
            }
            if frames {
                fwd[owner].frames.push(*r);
            }
            self.push::<SPLIT>(fwd, owner, pkt, side);
        }
        (min_ts, max_ts)
    }

    /// Appends a decoded, hashed packet to `self.pkts` (`KEEP_ALL`, its side
    /// (IPv6 addresses, ICMP type) beside it at its place in the batch,
    /// `pkt.idx`) or to its shard's shard batch (`SPLIT_ALL`, its side appended to
    /// the shard batch's and `idx` pointing at it).
    #[inline(always)]
    fn push<const SPLIT: bool>(
        &mut self,
        fwd: &mut [ShardBatch],
        owner: usize,
        mut pkt: Pkt,
        wide: Option<V6Icmp>,
    ) {
        if !SPLIT {
            if let Some(w) = wide {
                self.wide[pkt.idx as usize] = w;
            }
            self.pkts.push(pkt);
        } else {
            let shard_batch = &mut fwd[owner];
            // The shard batch's buffer was last read by the shard it goes to.
            crate::prefetch::write(
                shard_batch
                    .pkts
                    .as_ptr()
                    .wrapping_add(shard_batch.pkts.len() + 8),
            );
            pkt.idx = 0;
            if let Some(w) = wide {
                pkt.idx = shard_batch.wide.len() as u16;
                shard_batch.wide.push(w);
            }
            shard_batch.pkts.push(pkt);
        }
    }

    /// Second pass: runs `pkts` (sides in `wide` at each packet's `idx`)
    /// through the flow table, then advances the clock to `max_ts` and
    /// sweeps. The packet taps (`shard/taps.rs`) that want flow packets one
    /// by one get each after its flow is updated: one shard finds it in
    /// `refs` (the whole batch) at its `idx`, a shard batch's packets are
    /// in `frames.0` (the packets of no flow in `frames.1`, each at its
    /// place); every tap on ends the batch before the sweep.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn account<const PACKETS: bool>(
        &mut self,
        pkts: &[Pkt],
        wide: &[V6Icmp],
        spans: &[Span],
        data: &[u8],
        refs: &[PacketRef],
        (frames, no_flow): (&[PacketRef], &[(u32, PacketRef)]),
        (min_ts, max_ts): (u64, u64),
    ) {
        let mut next_no_flow = 0;
        let solo = !refs.is_empty();
        // One test per batch: with no tap wanting flow packets, the loop
        // below has a flag test and no tap code.
        // One shard: packets of no flow lie between the flow packets.
        let gaps = solo && pkts.len() != refs.len();
        let each = self.taps.begin_batch(solo, gaps);
        // Only the packets of followed flows are to be shown (taps.rs).
        let followed_only = self.taps.followed_only;
        if !self.mid_batch {
            self.table.begin_batch();
        }
        let floor = self.table.floor();
        // An analyzer on reads the IP packet (the span then cuts it too).
        let ip_view = PACKETS && self.table.consumers.reads_ip();
        let in_frames = Frames {
            data,
            refs,
            spans,
            ip: ip_view,
        };
        // Second pass, software-pipelined: while packet i updates its flow,
        // the index bucket of packet i + 2·AHEAD and the entry lines of
        // packet i + AHEAD (whose bucket is arriving) are being fetched. A
        // bounded number of prefetches in flight: issuing one per packet of
        // the whole batch up front overran the CPU's fill buffers.
        const AHEAD: usize = 8;
        for q in pkts.iter().take(2 * AHEAD) {
            self.table.prefetch(q.hash);
        }
        // The slot each entry prefetch found, for the update AHEAD packets
        // later (a ring: only AHEAD hints are pending at a time).
        let mut hints = [0u32; AHEAD];
        for i in 0..pkts.len() {
            if let Some(q) = pkts.get(i + 2 * AHEAD) {
                self.table.prefetch(q.hash);
            }
            let hint = std::mem::take(&mut hints[i % AHEAD]);
            if let Some(q) = pkts.get(i + AHEAD) {
                hints[i % AHEAD] = self.table.prefetch_entry(q.hash);
            }
            if no_flow
                .get(next_no_flow)
                .is_some_and(|&(at, _)| at as usize <= i)
            {
                next_no_flow = self.no_flow_before(i, no_flow, next_no_flow, data);
            }
            let p = &pkts[i];
            let pl = InFrame {
                frames: &in_frames,
                i,
            };
            let side = &wide[p.idx as usize];
            let slot = self.table.packet_at::<PACKETS, _>(p, side, hint, pl);
            self.counters.ip_bytes_flowed += p.size as u64;
            if each && followed_only && !self.table.followed(slot) {
                self.taps.skipped += 1;
            } else if each {
                let r = if solo {
                    refs.get(p.idx as usize)
                } else {
                    frames.get(i)
                };
                if let Some(r) = r {
                    let at = TapPacket {
                        data,
                        r,
                        p,
                        side,
                        slot,
                        refs,
                    };
                    self.taps.flow_packet(&at, &mut self.table);
                }
            }
        }
        if next_no_flow < no_flow.len() {
            self.no_flow_before(usize::MAX, no_flow, next_no_flow, data);
        }
        self.taps.batch_done(data, refs);
        self.counters.packets_flowed += pkts.len() as u64;
        if min_ts < floor {
            self.count_backwards(pkts, floor);
        }
        self.table.observe_time(max_ts);
        self.table.sweep();
        self.resolve_held();
    }

    /// Hands the taps the flows with held packets that have ended
    /// (`crate::dump::held`).
    #[inline]
    fn resolve_held(&mut self) {
        let Some(held) = self.table.consumers.held.as_mut() else {
            return;
        };
        if !held.ended.is_empty() {
            self.taps.flows_ended(&mut held.ended);
        }
    }

    /// Hands the taps the packets of no flow from `no_flow[k..]` that came
    /// before the shard batch's packet `i`; returns where the next one is.
    #[cold]
    #[inline(never)]
    fn no_flow_before(
        &mut self,
        i: usize,
        no_flow: &[(u32, PacketRef)],
        mut k: usize,
        data: &[u8],
    ) -> usize {
        while let Some((_, r)) = no_flow.get(k).filter(|(at, _)| (*at as usize) <= i) {
            self.taps.no_flow(data, r);
            k += 1;
        }
        k
    }

    /// Counts the packets of a batch stamped before the clock at its start
    /// (time went backwards), and the largest step back, for the report.
    #[cold]
    #[inline(never)]
    fn count_backwards(&mut self, pkts: &[Pkt], floor: u64) {
        for p in pkts.iter().filter(|p| p.ts < floor) {
            self.counters.ts_backwards += 1;
            self.counters.ts_max_back = self.counters.ts_max_back.max(floor - p.ts);
        }
    }

    /// Writes the packets of a batch this shard read for others (several
    /// shards, `-w` without marking: shard 0 reads every batch, in input
    /// order, and writes it here; its own turns' packets are written by
    /// this call too, not by [`Shard::run_shard_batch`]).
    pub fn copy(&mut self, data: &[u8], refs: &[PacketRef]) {
        if let Some(m) = &mut self.taps.marker {
            m.write_batch(data, refs);
        }
    }

    /// A live source saw no packet for a while: advances the clock to `now`
    /// (never back), so the next sweep ends the flows idle since.
    pub fn idle(&mut self, now: crate::time::Nanos) {
        self.tick(Part::Read, now);
        self.tick(Part::Run, now);
        self.table.observe_time(now);
    }

    /// Examines `slots` more slots for expired flows, outside the sweep
    /// step of each batch (a live source sweeps on a timer too).
    pub fn sweep(&mut self, slots: usize) {
        self.table.drain_verdicts(false);
        self.table.sweep_slots(slots);
        self.resolve_held();
    }

    /// Ends every open flow as at the end of an input and restarts the
    /// table clock, when capture `first_ts` (the first packet of the next
    /// input) is earlier than the latest time seen: that input is read as
    /// a time domain of its own (see `docs/ARCHITECTURE.md`, "Several
    /// inputs"). Returns whether it did. Every shard decides the same way,
    /// since their clocks agree at input boundaries.
    pub fn new_time_domain(
        &mut self,
        first_ts: Option<crate::time::Nanos>,
        step: usize,
        mut hand_over: impl FnMut(&mut RecordBatch),
    ) -> bool {
        match first_ts {
            Some(t) if t < self.table.now() => {}
            _ => return false,
        }
        self.table.drain_verdicts(true);
        while !self.table.flush_some(step) {
            hand_over(&mut self.table.out);
        }
        self.resolve_held();
        if let Some(s) = self.seconds.as_mut() {
            // The domain's last seconds, the flows just ended in them.
            let (counters, table) = (&self.counters, &mut self.table);
            for (clock, part) in s.iter_mut().zip([Part::Read, Part::Run]) {
                self.closed
                    .push(clock.new_domain(|| second_figures(counters, table, part)));
            }
        }
        self.table.restart_clock();
        if self.id == 0 {
            self.counters.time_domains += 1;
        }
        true
    }

    /// Ends every open flow and folds the table counters in, handing the
    /// finished records over every `step` records (`hand_over` takes them
    /// out of [`FlowTable::out`]; what the last step leaves stays there), so
    /// ending millions of flows never builds one giant batch.
    pub fn finish(&mut self, step: usize, mut hand_over: impl FnMut(&mut RecordBatch)) {
        self.table.drain_verdicts(true);
        self.table.detach_pool();
        while !self.table.flush_some(step) {
            hand_over(&mut self.table.out);
        }
        self.resolve_held();
        self.counters.flows = self.table.counters;
        if let Some(s) = self.seconds.as_mut() {
            let (counters, table) = (&self.counters, &mut self.table);
            for (clock, part) in s.iter_mut().zip([Part::Read, Part::Run]) {
                self.closed
                    .push(clock.close(|| second_figures(counters, table, part)));
            }
        }
    }
}

/// The records `out` gets from now on are made in second `at` of the
/// running clock: a new [`MadeIn`] entry when the second is not the last
/// entry's (one per second of packet time, not per packet).
#[inline]
fn mark_second(out: &mut RecordBatch, at: Option<(u64, u64)>) {
    let Some((domain, second)) = at else {
        return;
    };
    let from = out.len();
    match out.made_in.last_mut() {
        Some(m) if (m.domain, m.second) == (domain, second) => return,
        // No record was made in the last entry's second: it is replaced
        // (seconds without ended flows leave no entries behind).
        Some(m) if m.from == from => {
            (m.domain, m.second) = (domain, second);
            return;
        }
        _ => {}
    }
    out.made_in.push(MadeIn {
        from,
        domain,
        second,
        ..MadeIn::default()
    });
}

/// A reader of several shards keeps the frame of a packet beside it in
/// its shard's batch (an analyzer reads packets: the payload is found
/// there again for the packets an analyzer follows).
#[inline(always)]
fn push_frame(fwd: &mut [ShardBatch], owner: usize, r: &PacketRef) {
    fwd[owner].spans.push(Span {
        frame: r.offset,
        caplen: r.caplen,
    });
}

/// What a second of a shard's clock `part` closes with: its counters (the
/// table's flow counters in them) and (running clock) its table's tally,
/// taken.
fn second_figures(
    counters: &Counters,
    table: &mut FlowTable<Consumers>,
    part: Part,
) -> (Counters, Tally) {
    let mut c = *counters;
    c.flows = table.counters;
    let consumers = &mut table.consumers;
    let mut tally = match part {
        Part::Run => consumers
            .tally
            .as_mut()
            .map(Tally::take)
            .unwrap_or_default(),
        Part::Read => Tally::default(),
    };
    if part == Part::Run {
        if let Some(a) = &consumers.analyzers {
            a.media_into(&mut tally);
        }
    }
    (c, tally)
}

/// How many of the timestamps `ts` (one at least, if there are any) come
/// before the first at or past `end`: the part of a batch that lies in the
/// current second (the first is in it: the clock just moved to it).
#[inline]
fn in_second(mut ts: impl ExactSizeIterator<Item = u64>, end: u64) -> usize {
    let n = ts.len();
    ts.position(|t| t >= end).unwrap_or(n).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::testutil::{eth, ipv4, ipv4_frag, udp};
    use crate::dump::FrameTap;
    use std::sync::{Arc, Mutex};

    /// What a frame tap was shown: ("flow" or "no flow", offset, first).
    type Shown = Vec<(&'static str, usize, bool)>;
    type Log = Arc<Mutex<Shown>>;

    /// A frame tap that follows no flow from port 53 and logs the rest.
    struct Recorder(Log, Arc<Mutex<u64>>);

    impl FrameTap for Recorder {
        fn frame(&mut self, _: &[u8], r: &PacketRef) {
            self.0.lock().unwrap().push(("no flow", r.offset, false));
        }
        fn flow_frame(
            &mut self,
            data: &[u8],
            r: &PacketRef,
            _: (&Pkt, &V6Icmp),
            first: bool,
        ) -> bool {
            self.0.lock().unwrap().push(("flow", r.offset, first));
            // The UDP source port (Ethernet 14 + IPv4 20).
            data[r.offset + 34..r.offset + 36] != [0, 53]
        }
        fn not_shown(&mut self, n: u64) {
            *self.1.lock().unwrap() += n;
        }
    }

    /// A shard with the recorder as its frame tap, and a batch of `frames`
    /// one after the other in one buffer.
    fn run(frames: &[Vec<u8>]) -> (Shown, u64, Vec<usize>) {
        let log = Log::default();
        let unshown = Arc::new(Mutex::new(0));
        let mut shard = Shard::new(0, 1, &FlowConfig::default(), None).unwrap();
        shard.taps.calls = Some(taps::Frames::new(Box::new(Recorder(
            log.clone(),
            unshown.clone(),
        ))));

        let (mut data, mut refs) = (Vec::new(), Vec::new());
        for (i, f) in frames.iter().enumerate() {
            refs.push(PacketRef {
                offset: data.len(),
                caplen: f.len() as u32,
                orig_len: f.len() as u32,
                ts: 1_000_000_000 + i as u64 * 1000,
                link: LinkType::Ethernet,
                number: i as u64 + 1,
            });
            data.extend_from_slice(f);
        }
        shard.batch(&data, &refs);
        let offsets = refs.iter().map(|r| r.offset).collect();
        let log = log.lock().unwrap().clone();
        let n = *unshown.lock().unwrap();
        (log, n, offsets)
    }

    /// The call tap's reading of the shard's decoded packets
    /// (`voip::tap::flow_packet`) keeps the packets and gives the
    /// candidate mark that decoding each frame again (`extract_flow`, then
    /// `SipConnections::wants` for TCP) gives, for every flow packet of
    /// the corpus's VoIP and tunnel captures (classic pcap), as a first
    /// packet and as a later one; the one difference on purpose (a TCP
    /// segment whose payload starts past the captured bytes stays
    /// followed) is counted apart, and so are the packets it decodes
    /// again.
    #[test]
    fn the_call_tap_reads_the_shard_decode_as_a_second_decode_would() {
        use crate::decode::testutil::{corpus, corpus_pcaps};
        use crate::voip::tap::{extract_flow, flow_packet, follow_tcp, Follow, SipConnections};
        let Some(root) = corpus() else { return };
        let (mut flow_pkts, mut udp, mut tcp, mut v6) = (0, 0, 0, 0);
        let (mut kept, mut cut, mut again) = (0, 0, 0);
        for (path, link, frames) in corpus_pcaps(&root, &["voip", "tunnels"]) {
            let mut shard = Shard::new(0, 1, &FlowConfig::default(), None).unwrap();
            let (mut d_old, mut d_new) = (Decoded::default(), Decoded::default());
            let mut conns = [SipConnections::new(64), SipConnections::new(64)];
            for chunk in frames.chunks(crate::source::BATCH) {
                let (mut data, mut refs) = (Vec::new(), Vec::new());
                for (i, f) in chunk.iter().enumerate() {
                    refs.push(PacketRef {
                        offset: data.len(),
                        caplen: f.len() as u32,
                        orig_len: f.len() as u32,
                        ts: 1_000 + i as u64,
                        link,
                        number: i as u64 + 1,
                    });
                    data.extend_from_slice(f);
                }
                shard.begin(refs.len());
                shard.decode::<KEEP_ALL, false>(&data, &refs, &mut []);
                for p in &shard.pkts {
                    let r = &refs[p.idx as usize];
                    let frame = &data[r.offset..r.offset + r.caplen as usize];
                    let side = &shard.wide[p.idx as usize];
                    flow_pkts += 1;
                    udp += usize::from(p.key.proto == 17);
                    tcp += usize::from(p.key.proto == 6);
                    v6 += usize::from(p.key.is_v6());
                    // What the tap reads past (IPv6 extension headers,
                    // an IPv4 length of 0): decoded again.
                    let ip = &frame[p.ip_offset as usize..];
                    again += usize::from(if p.key.is_v6() {
                        ip[6] != p.key.proto
                    } else {
                        ip[2..4] == [0, 0]
                    });
                    for first in [true, false] {
                        let (v, mut follow) = extract_flow(r.ts, link, frame, &mut d_old, first);
                        let old = match v {
                            Some(v) if v.tcp.is_some() => {
                                let wanted = conns[0].wants(&v);
                                follow = follow_tcp(&v, wanted);
                                (wanted.then_some(v), follow)
                            }
                            v => (v, follow),
                        };
                        let new = flow_packet(
                            r.ts,
                            link,
                            frame,
                            (p, side),
                            first,
                            &mut conns[1],
                            &mut d_new,
                        );
                        kept += usize::from(new.0.is_some());
                        if p.key.proto == 6 && old != new && old.0.is_none() {
                            let mut d = Decoded::default();
                            assert!(decode(link, frame, &mut d).is_ok());
                            assert!(usize::from(d.payload_offset) > frame.len());
                            assert_eq!(new, (None, Follow::Yes));
                            cut += 1;
                            continue;
                        }
                        assert_eq!(
                            old,
                            new,
                            "{}: packet {}, first {first}",
                            path.display(),
                            r.number
                        );
                    }
                }
            }
        }
        eprintln!(
            "{flow_pkts} flow packets: {udp} UDP, {tcp} TCP, {v6} IPv6, {kept} kept, \
             {cut} cut TCP judged apart, {again} decoded again"
        );
        assert!(
            flow_pkts > 1000 && udp > 1000 && tcp > 100 && v6 > 0 && kept > 1000,
            "{flow_pkts} {udp} {tcp} {v6} {kept}"
        );
    }

    #[test]
    fn the_frame_tap_gets_followed_flows_and_packets_of_no_flow_in_input_order() {
        let dns = eth(0x0800, &ipv4(17, &udp(53, 40000, &[0; 12])));
        let rtp = eth(0x0800, &ipv4(17, &udp(4000, 4002, &[0x80; 20])));
        // A later fragment of a datagram: a packet of no flow.
        let frag = eth(0x0800, &ipv4_frag(17, 0x0010, &[0; 16]));
        let frames = [
            dns.clone(),
            rtp.clone(),
            frag.clone(),
            dns.clone(),
            rtp.clone(),
            frag,
            dns,
        ];
        let (log, unshown, at) = run(&frames);
        assert_eq!(
            log,
            vec![
                ("flow", at[0], true),
                ("flow", at[1], true),
                ("no flow", at[2], false),
                // The port-53 flow was let go at its first packet.
                ("flow", at[4], false),
                ("no flow", at[5], false),
            ]
        );
        assert_eq!(unshown, 2, "the two later packets of the port-53 flow");
    }

    /// Without packets of no flow among the flow packets, the shard counts
    /// the packets of a flow the tap let go itself (`followed_only`): the
    /// tap sees the same packets and the same count.
    #[test]
    fn without_gaps_the_packets_of_flows_let_go_are_counted_by_the_shard() {
        let dns = eth(0x0800, &ipv4(17, &udp(53, 40000, &[0; 12])));
        let rtp = eth(0x0800, &ipv4(17, &udp(4000, 4002, &[0x80; 20])));
        let frames = [dns.clone(), rtp.clone(), dns.clone(), rtp, dns];
        let (log, unshown, at) = run(&frames);
        assert_eq!(
            log,
            vec![
                ("flow", at[0], true),
                ("flow", at[1], true),
                ("flow", at[3], false),
            ]
        );
        assert_eq!(unshown, 2, "the two later packets of the port-53 flow");
    }
}
