//! File runs: how each shard thread walks the capture files.
//!
//! Contract: [`shard_loop`] (one shard) reads every batch of every file and
//! runs it; [`shard_loop_shared`] (one of several shards) reads its turns,
//! splits them among the shards and runs every turn's parcel made for it
//! (see [`crate::exchange`]). Both stop reading when [`RunControl::stop`]
//! is raised, hand finished records to the [`Sink`] as they fill a batch,
//! and return the input warnings (shard 0 only, so each is reported once).

use std::sync::atomic::Ordering;

use super::sink::Sink;
use super::{RunControl, RECORDS_PER_BATCH};
use crate::shard::Shard;
use crate::source::{CaptureFile, CaptureReader, PacketRef, Warning};

/// Reads every file in order and feeds the shard; returns input warnings
/// (shard 0 only, so each is reported once).
pub(super) fn shard_loop(
    shard: &mut Shard,
    sink: &mut Sink,
    files: &[CaptureFile],
    batch: usize,
    ctl: &RunControl,
    spare: bool,
) -> Vec<Warning> {
    let mut warnings = Vec::new();
    let mut refs: Vec<PacketRef> = Vec::with_capacity(batch);
    let mut done_bytes = 0u64;
    'files: for f in files {
        let mut reader = f.reader();
        let data = reader.data();
        let mut stride = f.stride(shard.id(), shard.shards(), !spare);
        loop {
            if ctl.stop.load(Ordering::Relaxed) {
                break 'files;
            }
            stride.reached(reader.position());
            if reader.next_batch(&mut refs, batch) == 0 {
                break;
            }
            shard.batch(data, &refs);
            after_batch(shard, sink, ctl, done_bytes + reader.position());
        }
        file_done(shard, &reader, &mut warnings);
        done_bytes += f.bytes().len() as u64;
    }
    warnings
}

/// [`shard_loop`] for one of several shards: reads its turns of batches up
/// to [`crate::exchange::LOOKAHEAD`] turns ahead, splitting them among the
/// shards, steps over the other turns, and runs every turn's parcel for
/// this shard in order (see [`crate::exchange`]).
pub(super) fn shard_loop_shared(
    shard: &mut Shard,
    sink: &mut Sink,
    files: &[CaptureFile],
    batch: usize,
    ctl: &RunControl,
    mut ends: crate::exchange::Ends,
    spare: bool,
) -> Vec<Warning> {
    let shards = shard.shards();
    let id = shard.id();
    let mut warnings = Vec::new();
    let mut refs: Vec<PacketRef> = Vec::with_capacity(batch);
    let mut done_bytes = 0u64;
    // Turns are numbered across files. Parcels hold decoded packets, not
    // pointers into the file, but every turn of a file is run before the
    // next file is read: the reader, its warning and its counts belong to
    // one file at a time.
    let (mut read, mut run) = (0usize, 0usize);
    // Once stopping, nothing more is read; what was read is still run.
    let mut stopping = false;
    'files: for f in files {
        let mut reader = f.reader();
        let data = reader.data();
        let mut stride = f.stride(id, shards, !spare);
        let mut end_of_file = false;
        loop {
            if !stopping && ctl.stop.load(Ordering::Relaxed) {
                stopping = true;
                ends.stop_sending();
            }
            while !stopping && !end_of_file && read < run + crate::exchange::LOOKAHEAD {
                stride.reached(reader.position());
                let n = if read % shards == id {
                    let n = reader.next_batch(&mut refs, batch);
                    if n == batch && reader.warning().is_none() {
                        ends.publish_end(read, reader.position());
                    }
                    if n > 0 {
                        shard.split(data, &refs, ends.parcels());
                        if !ends.send() {
                            // Another shard left: stop reading, run what
                            // was read.
                            stopping = true;
                            ends.stop_sending();
                        }
                    }
                    n
                } else {
                    // Jump over a turn its reader has already read;
                    // otherwise walk its record headers.
                    match ends.end_of_turn(read) {
                        Some(end) if reader.jump_to(end, batch) => batch,
                        _ => reader.skip_batch(batch),
                    }
                };
                if n == 0 {
                    end_of_file = true;
                } else {
                    read += 1;
                }
            }
            if run >= read && (!stopping || ends.peers_gone()) {
                if stopping {
                    break 'files;
                }
                break;
            }
            match ends.take(run % shards) {
                Some(parcel) => {
                    shard.run_parcel(&parcel);
                    ends.give_back(run % shards, parcel);
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
        file_done(shard, &reader, &mut warnings);
        done_bytes += f.bytes().len() as u64;
    }
    warnings
}

/// After each batch run: hands a full batch of records to the exporter,
/// and shard 0 reports how far the input is read.
#[inline(always)]
fn after_batch(shard: &mut Shard, sink: &mut Sink, ctl: &RunControl, position: u64) {
    if shard.table.out.len() >= RECORDS_PER_BATCH {
        sink.send(&mut shard.table.out, false);
    }
    if shard.id() == 0 {
        ctl.progress.store(position, Ordering::Relaxed);
    }
}

/// At the end of a file, shard 0 (whose reader walks every record) counts
/// its packets on unsupported links and keeps its warnings.
fn file_done(shard: &mut Shard, reader: &CaptureReader<'_>, warnings: &mut Vec<Warning>) {
    if shard.id() == 0 {
        shard.counters.unsupported_link += reader.skipped_unsupported_link();
        warnings.extend(reader.warnings().cloned());
    }
}
