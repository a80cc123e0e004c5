//! A VoIP run over capture files: packets → [`Tracker`] → the caller's
//! outputs, the outputs on their own thread.
//!
//! Contract: [`track_files`] reads the files in the order given (one
//! packet time line: calls may span files), hands every UDP datagram and
//! every segment of a TCP connection seen carrying SIP to one tracker, and
//! sends the records of ended calls and streams, in batches, over a
//! bounded channel to a writer thread that calls `write` (the database
//! insert, the record files). At the end of the input, and when `stop` is
//! set (SIGINT/SIGTERM), the calls still open are ended (`open`) and
//! written before it returns. A file that cannot be opened is an error
//! naming it; a file cut short or corrupt is read up to that point and
//! its warning (file and byte offset) returned. If `write` fails, reading
//! stops, what was already written stays, and the error names the output.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use super::record::{CallRecord, StreamRecord};
use super::tap::{extract, SipConnections};
use super::tracker::{Tracker, TrackerConfig, TrackerCounters};
use crate::decode::Decoded;
use crate::error::{Error, Result};
use crate::source::file::CaptureFile;

/// Records handed to the writer at once (at most).
const BATCH: usize = 512;

/// What a run saw.
#[derive(Debug, Clone, Default)]
pub struct VoipSummary {
    /// Packets read.
    pub packets: u64,
    /// Packets handed to the tracker.
    pub voip_packets: u64,
    /// Calls written.
    pub calls: u64,
    /// Streams written (with a call or alone).
    pub streams: u64,
    /// What the tracker counted.
    pub counters: TrackerCounters,
    /// TCP connections not followed (the shard-side set was full).
    pub tcp_not_followed: u64,
    /// Files cut short or corrupt, as warnings (file, offset, what).
    pub warnings: Vec<String>,
    /// Most calls held at once.
    pub peak_calls: usize,
}

type Batch = (Vec<CallRecord>, Vec<StreamRecord>);

/// Runs the tracker over `files` (see the module docs).
pub fn track_files(
    files: &[PathBuf],
    cfg: TrackerConfig,
    stop: &AtomicBool,
    mut write: impl FnMut(&[CallRecord], &[StreamRecord]) -> Result<()> + Send,
) -> Result<VoipSummary> {
    let (tx, rx) = crossbeam_channel::bounded::<Batch>(16);
    std::thread::scope(|s| {
        let writer = s.spawn(move || -> Result<(u64, u64)> {
            let (mut calls, mut streams) = (0, 0);
            for (c, st) in rx {
                write(&c, &st)?;
                calls += c.len() as u64;
                streams += (st.len() + c.iter().map(|c| c.streams.len()).sum::<usize>()) as u64;
            }
            Ok((calls, streams))
        });
        let read = read_all(files, cfg, stop, &tx);
        drop(tx);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(Error::Config("the record writer panicked".into())));
        let mut summary = read?;
        let (calls, streams) = written?;
        summary.calls = calls;
        summary.streams = streams;
        Ok(summary)
    })
}

fn send(t: &mut Tracker, tx: &crossbeam_channel::Sender<Batch>, all: bool) -> bool {
    if t.calls_out.len() + t.streams_out.len() < BATCH && !all {
        return true;
    }
    if t.calls_out.is_empty() && t.streams_out.is_empty() {
        return true;
    }
    tx.send((
        std::mem::take(&mut t.calls_out),
        std::mem::take(&mut t.streams_out),
    ))
    .is_ok()
}

fn read_all(
    files: &[PathBuf],
    cfg: TrackerConfig,
    stop: &AtomicBool,
    tx: &crossbeam_channel::Sender<Batch>,
) -> Result<VoipSummary> {
    let mut t = Tracker::new(cfg);
    let mut conns = SipConnections::new(65_536);
    let mut d = Decoded::default();
    let mut refs = Vec::new();
    let mut sum = VoipSummary::default();
    let mut open = true;
    'files: for path in files {
        let f = CaptureFile::open(path)?;
        let mut r = f.reader();
        let data = r.data();
        while r.next_batch(&mut refs, 256) > 0 {
            for p in &refs {
                sum.packets += 1;
                let Some(frame) = data.get(p.offset..p.offset + p.caplen as usize) else {
                    continue;
                };
                let Some(v) = extract(p.ts, p.link, frame, &mut d) else {
                    continue;
                };
                if v.tcp.is_some() && !conns.wants(&v) {
                    continue;
                }
                sum.voip_packets += 1;
                t.packet(&v);
            }
            sum.peak_calls = sum.peak_calls.max(t.open_calls());
            open = send(&mut t, tx, false);
            if !open || stop.load(Ordering::Relaxed) {
                break 'files;
            }
        }
        sum.warnings.extend(r.warnings().map(|w| w.to_string()));
    }
    t.finish();
    if open {
        send(&mut t, tx, true);
    }
    sum.counters = t.counters;
    sum.tcp_not_followed = conns.dropped;
    Ok(sum)
}
