//! File runs: how each shard thread walks the capture files.
//!
//! Contract: [`shard_loop`] (one shard) reads every batch of every capture
//! and runs it; [`shard_loop_shared`] (one of several shards) reads its
//! turns, splits them among the shards and runs every turn's shard batch made
//! for it (see [`crate::exchange`]). Both take the captures from [`Files`]
//! in order; before a capture that does not continue the one before (the
//! next chunk of a stream does) they start a new time domain when it
//! begins earlier than the latest time seen ([`Shard::new_time_domain`]).
//! Both stop reading when [`RunControl::stop`] or [`RunControl::halt`] is
//! raised, hand finished records to the [`Sink`] as they fill a batch, and
//! return the input warnings (shard 0 only, so each is reported once),
//! their offsets in the input (the stream, for a chunk). With `-w` and
//! several shards, shard 0 reads every turn (its own and the others',
//! instead of stepping over them) and writes its packets to the pcap, so
//! the copy is in input order; when stopping it also writes the turns other
//! shards had already read. (A stop at a capture boundary may leave out the
//! turns another shard read of the next capture.)

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::sink::Sink;
use super::{RunControl, RECORDS_PER_BATCH};
use crate::shard::Shard;
use crate::source::feed::{Feed, FeedItem};
use crate::source::{CaptureFile, CaptureReader, PacketRef, Warning};

/// The captures a file run reads: the caller's files, or a [`Feed`].
#[derive(Clone)]
pub(super) enum Files<'a> {
    Slice(&'a [CaptureFile]),
    Feed(Arc<Feed>),
}

/// One capture of [`Files`].
pub(super) enum FileRef<'a> {
    Slice(&'a CaptureFile),
    Feed(Arc<FeedItem>),
}

impl<'a> Files<'a> {
    /// Capture number `k` (each shard asks for 0, 1, 2, … once each).
    fn get(&self, k: usize) -> Option<FileRef<'a>> {
        match self {
            Files::Slice(s) => s.get(k).map(FileRef::Slice),
            Files::Feed(f) => f.get(k).map(FileRef::Feed),
        }
    }
}

impl FileRef<'_> {
    fn file(&self) -> &CaptureFile {
        match self {
            FileRef::Slice(f) => f,
            FileRef::Feed(i) => &i.file,
        }
    }

    fn continues(&self) -> bool {
        match self {
            FileRef::Slice(_) => false,
            FileRef::Feed(i) => i.continues,
        }
    }

    fn input_offset(&self, offset: u64) -> u64 {
        match self {
            FileRef::Slice(_) => offset,
            FileRef::Feed(i) => i.input_offset(offset),
        }
    }
}

/// Reads every file in order and feeds the shard; returns input warnings
/// (shard 0 only, so each is reported once).
pub(super) fn shard_loop(
    shard: &mut Shard,
    sink: &mut Sink,
    files: &Files<'_>,
    batch: usize,
    ctl: &RunControl,
    spare: bool,
    timestamps: crate::source::retime::Timestamps,
) -> Vec<Warning> {
    let mut warnings = Vec::new();
    let mut refs: Vec<PacketRef> = Vec::with_capacity(batch);
    let mut retime = crate::source::retime::Retimer::new(timestamps);
    let mut done_bytes = 0u64;
    let mut cuts = Cuts::new(batch);
    let mut k = 0;
    'files: while let Some(input) = files.get(k) {
        k += 1;
        let f = input.file();
        time_domain(shard, sink, &input, &mut warnings);
        let mut reader = f.reader();
        let data = reader.data();
        if let Some(t) = shard.taps.dump.as_mut().filter(|t| t.wants_input()) {
            // A file (not a chunk of a stream) whose records the dumper
            // may take by place.
            let records = match &input {
                FileRef::Feed(i) if i.is_chunk() => None,
                _ => f.records_file(),
            };
            // Corrected stamps are no longer the headers'.
            let records = records.map(|r| crate::source::file::RecordsFile {
                plain: r.plain && !retime.on(),
                ..r
            });
            t.set_input(data, records);
        }
        let mut stride = f.stride(shard.id(), shard.shards(), !spare);
        retime.start_file();
        if retime.on() {
            retime.sniff(f.reader());
        }
        loop {
            if ctl.stopping() {
                break 'files;
            }
            stride.reached(reader.position());
            let turn = cuts.turn();
            let n = reader.next_batch(&mut refs, cuts.room());
            cuts.read(n);
            let end = n == 0;
            if retime.on() {
                correct(&mut retime, &reader, &mut refs, true);
            }
            if !refs.is_empty() {
                shard.names_turn(turn);
                shard.batch(data, &refs);
                after_batch(shard, sink, ctl, done_bytes + reader.position());
            }
            if end {
                break;
            }
        }
        retimed(shard, &input, &retime, &mut warnings);
        file_done(shard, &input, &reader, &mut warnings);
        done_bytes += f.bytes().len() as u64;
    }
    warnings
}

/// [`shard_loop`] for one of several shards: reads its turns of batches up
/// to [`crate::exchange::LOOKAHEAD`] turns ahead, splitting them among the
/// shards, steps over the other turns, and runs every turn's shard batch for
/// this shard in order (see [`crate::exchange`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn shard_loop_shared(
    shard: &mut Shard,
    sink: &mut Sink,
    files: &Files<'_>,
    batch: usize,
    ctl: &RunControl,
    mut ends: crate::exchange::Ends,
    spare: bool,
    timestamps: crate::source::retime::Timestamps,
) -> Vec<Warning> {
    let mut retime = crate::source::retime::Retimer::new(timestamps);
    let shards = shard.shards();
    let id = shard.id();
    // `-w` (shard 0 holds the writer): this shard reads every turn, its
    // own and the others', in input order, and writes its packets.
    let copying = shard.taps.marker.is_some();
    let mut warnings = Vec::new();
    let mut refs: Vec<PacketRef> = Vec::with_capacity(batch);
    let mut done_bytes = 0u64;
    // Turns are numbered across files. Shard batches hold decoded packets, not
    // pointers into the file, but every turn of a file is run before the
    // next file is read: the reader, its warning and its counts belong to
    // one file at a time.
    let (mut read, mut run) = (0usize, 0usize);
    // The cut each turn read and not yet run ends before (all shards step
    // through every turn, so they agree on the cuts).
    let mut cuts = Cuts::new(batch);
    let mut turns: VecDeque<u64> = VecDeque::new();
    // Once stopping, nothing more is read; what was read is still run.
    let mut stopping = false;
    let mut k = 0;
    'files: while let Some(input) = files.get(k) {
        let fi = k;
        k += 1;
        let f = input.file();
        if stopping {
            break;
        }
        time_domain(shard, sink, &input, &mut warnings);
        let mut reader = f.reader();
        let data = reader.data();
        let mut stride = f.stride(id, shards, !spare);
        // Runs of equal stamps go on across turns: every shard follows
        // them through the turns it steps over (`source/retime.rs`).
        retime.start_file();
        if retime.on() && id == 0 {
            retime.sniff(f.reader());
        }
        let mut end_of_file = false;
        // Every shard has agreed where the file ends (it can differ from
        // where this shard's reader ended when the file shrank meanwhile).
        let mut file_over = false;
        loop {
            if !stopping && ctl.stopping() {
                stopping = true;
                ends.stop_sending();
            }
            while !stopping && !end_of_file && read < run + crate::exchange::LOOKAHEAD {
                stride.reached(reader.position());
                let room = cuts.room();
                let n = if read % shards == id {
                    let n = reader.next_batch(&mut refs, room);
                    if retime.on() {
                        correct(&mut retime, &reader, &mut refs, true);
                    }
                    if n == room && reader.warning().is_none() {
                        if retime.on() {
                            ends.publish_state(read, retime.state());
                        }
                        ends.publish_end(read, reader.position());
                    }
                    if n > 0 {
                        shard.split(data, &refs, ends.shard_batches());
                        shard.copy(data, &refs);
                        if !ends.send() {
                            // Another shard left: stop reading, run what
                            // was read.
                            stopping = true;
                            ends.stop_sending();
                        }
                    }
                    n
                } else if copying {
                    let n = reader.next_batch(&mut refs, room);
                    if retime.on() {
                        correct(&mut retime, &reader, &mut refs, false);
                    }
                    shard.copy(data, &refs);
                    n
                } else {
                    // Jump over a turn its reader has already read (with
                    // the timestamp correction, once its state is out too);
                    // otherwise walk its record headers, or its packets to
                    // follow their stamps.
                    let end = ends.end_of_turn(read);
                    let state = end
                        .filter(|_| retime.on())
                        .and_then(|_| ends.state_of_turn(read));
                    match end {
                        Some(end)
                            if (!retime.on() || state.is_some()) && reader.jump_to(end, room) =>
                        {
                            if let Some(st) = state {
                                retime.set_state(st);
                            }
                            room
                        }
                        _ if retime.on() => {
                            let n = reader.next_batch(&mut refs, room);
                            correct(&mut retime, &reader, &mut refs, false);
                            n
                        }
                        _ => reader.skip_batch(room),
                    }
                };
                if n == 0 {
                    end_of_file = true;
                } else {
                    cuts.queue(n, &mut turns);
                    read += 1;
                }
                ends.progress(fi, read, end_of_file);
            }
            // Past the end this reader found: the turns another shard's
            // reader found (the file shrank between them), empty for ours.
            while !stopping && end_of_file && !file_over && read < run + crate::exchange::LOOKAHEAD
            {
                match ends.turn_after_end(fi, read) {
                    crate::exchange::Agreement::Exists => {
                        if read % shards == id {
                            ends.shard_batches();
                            if !ends.send() {
                                stopping = true;
                                ends.stop_sending();
                            }
                        }
                        cuts.queue(0, &mut turns);
                        read += 1;
                        ends.progress(fi, read, true);
                    }
                    crate::exchange::Agreement::End => file_over = true,
                    crate::exchange::Agreement::Undecided => break,
                }
            }
            if run >= read && (!stopping || ends.peers_gone()) {
                if stopping {
                    break 'files;
                }
                if file_over {
                    break;
                }
                // Another shard is still reading this file.
                std::thread::yield_now();
                continue;
            }
            let shard_batch = ends.take(run % shards);
            if copying && run == read && !end_of_file {
                // Stopping: another shard read this turn before it heard
                // of the stop; its packets are counted, so they are
                // written too (a turn nobody read is stepped over).
                let room = cuts.room();
                let n = match shard_batch {
                    Some(_) => {
                        let n = reader.next_batch(&mut refs, room);
                        if retime.on() {
                            correct(&mut retime, &reader, &mut refs, false);
                        }
                        shard.copy(data, &refs);
                        n
                    }
                    None => reader.skip_batch(room),
                };
                if n == 0 {
                    end_of_file = true;
                } else {
                    cuts.queue(n, &mut turns);
                    read += 1;
                }
            }
            let turn = turns.pop_front().unwrap_or(cuts.turn());
            match shard_batch {
                Some(shard_batch) => {
                    shard.names_turn(turn);
                    shard.run_shard_batch(&shard_batch, data);
                    ends.give_back(run % shards, shard_batch);
                }
                None if !stopping => {
                    // Another shard left without its turn: run what was
                    // read, read no more.
                    stopping = true;
                    ends.stop_sending();
                }
                None => {}
            }
            run += 1;
            after_batch(shard, sink, ctl, done_bytes + reader.position());
        }
        ends.file_over(fi, read);
        retimed(shard, &input, &retime, &mut warnings);
        file_done(shard, &input, &reader, &mut warnings);
        done_bytes += f.bytes().len() as u64;
    }
    warnings
}

/// Corrects the stamps of `refs`, the batch `reader` has just read, reading
/// ahead with a copy of it when a run goes on after the batch. `counted`:
/// the batch is this shard's (its packets given a new time are counted);
/// otherwise it is followed for its stamps only (a turn stepped over, or
/// copied to the `-w` pcap).
fn correct(
    rt: &mut crate::source::retime::Retimer,
    reader: &crate::source::CaptureReader<'_>,
    refs: &mut [PacketRef],
    counted: bool,
) {
    let before = rt.retimed;
    let mut look: Option<crate::source::CaptureReader<'_>> = None;
    rt.batch(refs, &mut |v: &mut Vec<PacketRef>, max: usize| {
        look.get_or_insert_with(|| reader.lookahead())
            .next_batch(v, max)
    });
    if !counted {
        rt.retimed = before;
    }
}

/// After a file: counts the packets the retimer gave a new time and warns
/// about a batch-stamped file (shard 0 examines each file's first packets;
/// nothing is examined with the correction off).
fn retimed(
    shard: &mut Shard,
    input: &FileRef<'_>,
    rt: &crate::source::retime::Retimer,
    warnings: &mut Vec<Warning>,
) {
    shard.counters.ts_retimed = rt.retimed;
    let (yes, share) = rt.batch_stamped();
    if !yes || input.continues() || !rt.on() {
        return;
    }
    shard.counters.ts_batch_stamped += 1;
    let what = format!(
        "its runs of equal stamps were spread with {}",
        rt.mode().name()
    );
    warnings.push(Warning {
        file: input.file().name().to_string(),
        offset: Warning::NO_OFFSET,
        message: format!(
            "{}: {:.0} % of its first {} packets have the timestamp of the packet before: \
             it looks batch-stamped; {what}",
            input.file().name(),
            share * 100.0,
            rt.looked()
        ),
    });
}

/// Time domains named in a warning (the rest are counted in the summary).
const NAMED_DOMAINS: u64 = 3;

/// Before a capture: a new time domain when it starts before the latest
/// time seen (see [`Shard::new_time_domain`]); shard 0 warns about the
/// first few.
fn time_domain(
    shard: &mut Shard,
    sink: &mut Sink,
    input: &FileRef<'_>,
    warnings: &mut Vec<Warning>,
) {
    if input.continues() {
        return;
    }
    let first = input.file().first_ts();
    let latest = shard.table.now();
    if shard.new_time_domain(first, RECORDS_PER_BATCH, |out| sink.send(out, false))
        && shard.id() == 0
        && shard.counters.time_domains <= NAMED_DOMAINS
    {
        let back = latest - first.unwrap_or(latest);
        warnings.push(Warning {
            file: input.file().name().to_string(),
            offset: Warning::NO_OFFSET,
            message: format!(
                "{}: starts {} before the latest packet read so far; read as a separate time \
                 domain (open flows were ended first)",
                input.file().name(),
                crate::time::span(back)
            ),
        });
    }
}

/// After each batch run: hands a full batch of records (or of early-verdict
/// events) and the seconds closed to the exporter (the records before the
/// seconds, full or not, when the drift is counted per second: see
/// [`Sink::records_before_seconds`]), and shard 0 reports how far the
/// input is read.
#[inline(always)]
fn after_batch(shard: &mut Shard, sink: &mut Sink, ctl: &RunControl, position: u64) {
    let closing = sink.records_before_seconds && !shard.closed.is_empty();
    if shard.table.out.len() >= RECORDS_PER_BATCH || (closing && !shard.table.out.is_empty()) {
        sink.send(&mut shard.table.out, false);
    }
    if let Some(ev) = shard.events().filter(|e| e.len() >= RECORDS_PER_BATCH) {
        sink.send_rows(ev, false);
    }
    if !shard.closed.is_empty() {
        sink.send_seconds(&mut shard.closed, false);
    }
    sink.serve_forensics(shard);
    if let Some(f) = shard.taps.calls.as_mut() {
        f.tap().turn_done();
    }
    if shard.id() == 0 {
        ctl.progress.store(position, Ordering::Relaxed);
    }
    if sink.swap.is_some() {
        swap_between(shard, sink, ctl);
    }
}

/// Between two batches of a run whose models are swapped
/// (`classify/swap.rs`): at a point of a file run, ends every flow that
/// has timed out by the shard's clock, hands the finished records over
/// and waits for the point's release; installs the model published since
/// the last batch, if any.
#[cold]
#[inline(never)]
pub(super) fn swap_between(shard: &mut Shard, sink: &mut Sink, ctl: &RunControl) {
    let Some(mut link) = sink.swap.take() else {
        return;
    };
    let now = shard.table.now();
    let model = link.between_batches(
        now,
        || {
            // Every flow that has ended by the shard's clock is handed
            // over, whichever slots the per-batch sweep has reached: the
            // records before a point are the same at any shard count.
            let all = shard.table.slots_in_use();
            shard.sweep(all);
            sink.send(&mut shard.table.out, false);
            sink.sent
        },
        || ctl.stopping(),
    );
    sink.swap = Some(link);
    if let Some((id, model)) = model {
        shard.table.swap_model(model, id);
    }
}

/// At the end of a file, shard 0 (whose reader walks every record) counts
/// its packets on unsupported links and keeps its warnings (undecoded link
/// types, damage) — and, when its reader found no damage but part of the
/// file vanished while it was read, the file's warning about that. Offsets
/// are the input's (the stream's, for a chunk).
fn file_done(
    shard: &mut Shard,
    input: &FileRef<'_>,
    reader: &CaptureReader<'_>,
    warnings: &mut Vec<Warning>,
) {
    if shard.id() == 0 {
        shard.counters.unsupported_link += reader.skipped_unsupported_link();
        let vanished = match reader.warning() {
            None => input.file().vanished(),
            Some(_) => None,
        };
        let found = reader.warnings().cloned().chain(vanished);
        warnings.extend(found.map(|w| Warning {
            offset: match w.offset {
                Warning::NO_OFFSET => w.offset,
                o => input.input_offset(o),
            },
            ..w
        }));
    }
}

/// Where a file run's batches are cut: at every `batch` packet records of
/// the whole input, across its files and a stream's chunks. A batch never
/// crosses a cut (it ends short of one where a file or chunk ends), and
/// the DNS cache's turn of a batch is the number of cuts before it
/// (`analyze/dns_cache.rs`): so the names flows see do not depend on how
/// the input was cut into files, nor on how a stream's data arrived.
#[derive(Debug, Clone, Copy)]
struct Cuts {
    batch: u64,
    /// Records read so far.
    records: u64,
}

impl Cuts {
    fn new(batch: usize) -> Cuts {
        Cuts {
            batch: batch.max(1) as u64,
            records: 0,
        }
    }

    /// The most records the next batch may take.
    fn room(&self) -> usize {
        (self.batch - self.records % self.batch) as usize
    }

    /// The turn of the next batch.
    fn turn(&self) -> u64 {
        self.records / self.batch
    }

    /// A batch of `n` records was read (or stepped over).
    fn read(&mut self, n: usize) {
        self.records += n as u64;
    }

    /// A turn of `n` records was read, stepped over, or found past this
    /// reader's end by another shard's (`n` = 0): its turn goes to the
    /// back of `turns`, the turns read and not yet run.
    fn queue(&mut self, n: usize, turns: &mut VecDeque<u64>) {
        turns.push_back(self.turn());
        self.read(n);
    }
}
