//! The dumper of every packet, for a run of one shard, on a thread of its
//! own: the shard describes each batch and goes on; the thread writes.
//!
//! Contract:
//! - [`DumpThread::start`] moves a [`Dumper`] (without a filter) to a new
//!   thread. The shard hands it each batch ([`DumpThread::batch`]) as a
//!   job: per packet either its place in the input file — when the input
//!   is a classic little-endian pcap whose record for the packet is the
//!   record a dump file holds, byte for byte (nanosecond stamps) or but
//!   for the stamp's fraction (microsecond stamps), checked per packet
//!   against the 16 bytes before it: seconds, fraction, captured and
//!   original length — or a copy of its bytes (live capture, other
//!   formats, a pcapng dump). Packets by place go as runs of records
//!   back to back in the file (one item per run, not per packet): the
//!   shard thus copies and describes no packet of such a file; when the
//!   batches are the reader's packets as the headers give them
//!   ([`RecordsFile::plain`]: lengths in 2.4 order, stamps not corrected)
//!   a batch is one run, checked by its length alone (the sum of its
//!   records'), and the thread writes a record whose header is not the
//!   dump's (fraction of a second out of range, original length below the
//!   captured one) as the reader made the packet. The thread
//!   hands the dumper every record of a run: by place for a nanosecond
//!   input (copied file to file; the thread reads the run in pieces of
//!   [`SCRATCH`] bytes for the headers), read straight into the dump
//!   file's buffer for a microsecond one (the dumper writes its stamp in
//!   nanoseconds) or for a dumper that does not copy file to file
//!   (`--dump-direct`). Records the file no longer holds as the shard
//!   saw them are counted lost and named. The
//!   thread runs the jobs in order ([`Dumper::write_at`],
//!   [`Dumper::write`], [`Dumper::read_records`]), so the files, their
//!   rotation, names, counters and failures are exactly those of the
//!   dumper in the shard.
//! - A job holds several batches ([`JOB_PACKETS`], [`JOB_COPIES`]); at
//!   most [`DEPTH`] jobs wait; a shard whose dumper is behind (a slow
//!   disk) waits for it, as the dumper in the shard would make it wait.
//!   Jobs come back emptied to be filled again: nothing is allocated per
//!   batch once they exist.
//! - [`DumpThread::finish`] waits for every job and returns the dumper
//!   (its counters and first error). A thread that cannot be started
//!   leaves the dumper in the shard (`None` from `start`).

use std::fs::File;
use std::sync::mpsc::{channel, sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::dumper::read_at;
use super::Dumper;
use crate::decode::LinkType;
use crate::error::Error;
use crate::source::file::RecordsFile;
use crate::source::pcap_writer::MAX_SNAPLEN;
use crate::source::PacketRef;
use crate::time::Nanos;

/// Jobs that may wait for the thread: enough that the shard does not
/// wait out the thread's uneven pace (its kernel writes) while it keeps up
/// on average (4 made the shard wait in the worst case's run, 2026-11-26).
pub(crate) const DEPTH: usize = 16;

/// A job goes to the thread once it holds this many packets or
/// [`JOB_COPIES`] bytes of copies (several batches: one wake-up of the
/// thread per job), and at the end; like the dumper's buffer in the shard,
/// it keeps the last packets from the files until more come.
const JOB_PACKETS: usize = 8192;
const JOB_COPIES: usize = 1 << 20;

/// Bytes of a classic pcap record header.
const REC_HDR: usize = 16;

/// Bytes of the input the thread reads at a time to learn the records of
/// a run (within a core's L2 cache; a record of the dump's snaplen fits).
const SCRATCH: usize = 512 << 10;
const _: () = assert!(SCRATCH >= REC_HDR + MAX_SNAPLEN as usize);

/// Packets of a job, in input order.
#[derive(Clone, Copy)]
enum Item {
    /// `n` records back to back at bytes `start..end` of the job's input
    /// file, each a dump file's record (`same_record`), of link type
    /// `link`.
    Run {
        start: u64,
        end: u64,
        n: u32,
        link: LinkType,
    },
    /// One packet whose bytes start at byte `at` of the job's copies.
    Copied {
        ts: Nanos,
        orig_len: u32,
        caplen: u32,
        link: LinkType,
        at: usize,
    },
}

/// One batch for the thread.
#[derive(Default)]
struct Job {
    items: Vec<Item>,
    /// Packets in `items`.
    packets: usize,
    copies: Vec<u8>,
    /// The input file of the `At` items.
    file: Option<Arc<File>>,
    /// Its stamps are nanoseconds (else microseconds).
    nanos: bool,
}

/// The input file whose records may be dumped by place: its map's address
/// and length (to know its batches) and the file opened again.
struct Input {
    base: usize,
    len: usize,
    file: Arc<File>,
    nanos: bool,
    /// The batches are the reader's packets of the file as its headers
    /// give them ([`RecordsFile::plain`]): each batch is one run.
    plain: bool,
}

/// The shard's end of a dumper thread (see the module docs).
pub struct DumpThread {
    to: Option<SyncSender<Job>>,
    back: Receiver<Job>,
    handle: Option<JoinHandle<Dumper>>,
    job: Job,
    input: Option<Input>,
    /// The files are classic pcap (records may go by place).
    pcap: bool,
}

impl DumpThread {
    /// Starts a thread running `dumper` for shard `shard`; `None` (the
    /// dumper given back) when the thread cannot start.
    pub(crate) fn start(dumper: Dumper, shard: usize) -> Result<DumpThread, Box<Dumper>> {
        let pcap = dumper.format() == super::DumpFormat::Pcap;
        let (to, from) = sync_channel::<Job>(DEPTH);
        let (back_to, back) = channel::<Job>();
        // The dumper goes to the thread through this slot so that it can
        // be given back if the thread does not start.
        let slot = Arc::new(std::sync::Mutex::new(None::<Dumper>));
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(dumper);
        let theirs = Arc::clone(&slot);
        let spawned = std::thread::Builder::new()
            .name(format!("eb-dump{shard}"))
            .spawn(move || {
                let taken = theirs.lock().unwrap_or_else(|e| e.into_inner()).take();
                let mut d = taken.expect("the dumper is handed over before the thread starts");
                let mut scratch = Vec::new();
                for mut job in from {
                    run(&mut d, &job, &mut scratch);
                    job.items.clear();
                    job.packets = 0;
                    job.copies.clear();
                    job.file = None;
                    // The shard may have stopped taking them back.
                    let _ = back_to.send(job);
                }
                d
            });
        match spawned {
            Ok(handle) => Ok(DumpThread {
                to: Some(to),
                back,
                handle: Some(handle),
                job: Job::default(),
                input: None,
                pcap,
            }),
            Err(_) => {
                let dumper = slot
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take()
                    .expect("the thread did not start, so the dumper is still here");
                Err(Box::new(dumper))
            }
        }
    }

    /// The input file whose batches come next, when its records may go by
    /// place (`file`: it opened again, `data` its bytes as the batches
    /// hold them); `None`: copy every packet.
    pub(crate) fn set_input(&mut self, data: &[u8], file: Option<RecordsFile>) {
        // A job's places are in one file.
        self.send();
        self.input = file.map(|f| Input {
            base: data.as_ptr() as usize,
            len: data.len(),
            file: Arc::new(f.file),
            nanos: f.nanos,
            plain: f.plain,
        });
    }

    /// Hands the thread every packet of `refs` (bytes in `data`).
    pub(crate) fn batch(&mut self, data: &[u8], refs: &[PacketRef]) {
        let by_place = self
            .input
            .as_ref()
            .filter(|i| self.pcap && i.base == data.as_ptr() as usize && i.len == data.len());
        let job = &mut self.job;
        if let Some(i) = by_place {
            job.file = Some(Arc::clone(&i.file));
            job.nanos = i.nanos;
            if i.plain {
                if let Some(run) = whole_run(data, refs) {
                    job.packets += refs.len();
                    job.push_run(run);
                    if self.job.packets >= JOB_PACKETS {
                        self.send();
                    }
                    return;
                }
            }
        }
        for r in refs {
            let Some(bytes) = data.get(r.offset..r.offset + r.caplen as usize) else {
                continue;
            };
            job.packets += 1;
            if by_place.is_some_and(|i| same_record(data, r, i.nanos)) {
                // By place: one item per run of back-to-back records (the
                // thread reads each record's header itself).
                let (start, end) = ((r.offset - REC_HDR) as u64, (r.offset + bytes.len()) as u64);
                job.push_run(Item::Run {
                    start,
                    end,
                    n: 1,
                    link: r.link,
                });
                continue;
            }
            let at = job.copies.len();
            job.copies.extend_from_slice(bytes);
            job.items.push(Item::Copied {
                ts: r.ts,
                orig_len: r.orig_len,
                caplen: r.caplen,
                link: r.link,
                at,
            });
        }
        if self.job.packets >= JOB_PACKETS || self.job.copies.len() >= JOB_COPIES {
            self.send();
        }
    }

    /// Sends the job being filled, if it holds anything.
    fn send(&mut self) {
        if self.job.items.is_empty() {
            return;
        }
        let next = self.back.try_recv().unwrap_or_default();
        let job = std::mem::replace(&mut self.job, next);
        if let Some(to) = &self.to {
            // Fails only when the thread is gone (it panicked): `finish`
            // reports it.
            let _ = to.send(job);
        }
    }

    /// Waits for every job and returns the dumper; an [`Error::Thread`]
    /// when the thread did not end normally (or was finished before).
    pub(crate) fn finish(&mut self) -> Result<Dumper, Error> {
        self.send();
        drop(self.to.take());
        match self.handle.take().map(JoinHandle::join) {
            Some(Ok(d)) => Ok(d),
            Some(Err(_)) | None => Err(Error::thread("packet dumper")),
        }
    }
}

impl Job {
    /// Adds the run `run` (an [`Item::Run`]), joined to the run before
    /// when it follows it in the file.
    #[inline]
    fn push_run(&mut self, run: Item) {
        let Item::Run {
            start,
            end,
            n,
            link,
        } = run
        else {
            return;
        };
        if let Some(Item::Run {
            end: e,
            n: m,
            link: l,
            ..
        }) = self.items.last_mut()
        {
            if *e == start && *l == link && m.checked_add(n).is_some() {
                *e = end;
                *m += n;
                return;
            }
        }
        self.items.push(run);
    }
}

/// The batch `refs` of a plain input ([`RecordsFile::plain`]) as one run:
/// its packets are the file's records back to back, from the header
/// before the first to the last packet's end; `None` (each packet is then
/// checked) when the batch is not so: mixed link types, records not back
/// to back, or more packets than a run counts.
#[inline]
fn whole_run(data: &[u8], refs: &[PacketRef]) -> Option<Item> {
    let (first, last) = (refs.first()?, refs.last()?);
    let start = first.offset.checked_sub(REC_HDR)?;
    let end = last.offset + last.caplen as usize;
    let n = u32::try_from(refs.len()).ok()?;
    // The walk puts each record right after the one before: the lengths
    // add up exactly when no packet is elsewhere.
    let (mut total, mut one_link) = (0usize, true);
    for r in refs {
        total += REC_HDR + r.caplen as usize;
        one_link &= r.link == first.link;
    }
    (end <= data.len() && end - start == total && one_link).then_some(Item::Run {
        start: start as u64,
        end: end as u64,
        n,
        link: first.link,
    })
}

/// Whether the 16 bytes before `r`'s packet are the record header a
/// classic pcap with nanosecond (`nanos`) or microsecond stamps holds for
/// it (little-endian seconds, fraction, captured and original length).
#[inline]
fn same_record(data: &[u8], r: &PacketRef, nanos: bool) -> bool {
    let Some(h) = r
        .offset
        .checked_sub(REC_HDR)
        .and_then(|at| data.get(at..r.offset))
    else {
        return false;
    };
    let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    let (frac, unit, limit) = if nanos {
        (word(4), 1, 1_000_000_000)
    } else {
        (word(4), 1_000, 1_000_000)
    };
    frac < limit
        && u64::from(word(0)) * 1_000_000_000 + u64::from(frac) * unit == r.ts
        && word(8) == r.caplen
        && word(12) == r.orig_len
}

/// Runs one job through the dumper, in order.
fn run(d: &mut Dumper, job: &Job, scratch: &mut Vec<u8>) {
    for it in &job.items {
        match *it {
            Item::Run {
                start,
                end,
                n,
                link,
            } => {
                // A run is only made with its file (`batch`).
                if let Some(f) = &job.file {
                    replay(d, f, (start, end), n, link, job.nanos, scratch);
                }
            }
            Item::Copied {
                ts,
                orig_len,
                caplen,
                link,
                at,
            } => {
                let bytes = &job.copies[at..at + caplen as usize];
                d.write(ts, orig_len, link, bytes);
            }
        }
    }
}

/// Hands the dumper the `n` records at bytes `start..end` of `f`: by
/// place ([`Dumper::write_at`], nanosecond stamps), learning each one's
/// stamp and length from its header, read in pieces of [`SCRATCH`] bytes;
/// or read straight into the dumper's buffer ([`Dumper::read_records`]:
/// microsecond stamps, or a dumper that does not copy file to file). A
/// read that fails, or records that are not the `n` the shard saw there
/// (the file changed since), count the records not handed over as lost,
/// with a message.
fn replay(
    d: &mut Dumper,
    f: &Arc<File>,
    (start, end): (u64, u64),
    n: u32,
    link: LinkType,
    nanos: bool,
    scratch: &mut Vec<u8>,
) {
    let done = if nanos && d.takes_places() {
        by_place(d, f, (start, end), n, link, scratch)
    } else {
        d.read_records(f, (start, end), n, !nanos, link, scratch)
    };
    let (at, seen) = match done {
        Ok(done) => done,
        Err((at, seen, e)) => {
            d.input_lost(u64::from(n - seen), format!("input at byte {at}: {e}"));
            return;
        }
    };
    if at != end || seen != n {
        d.input_lost(
            u64::from(n - seen),
            format!("input at byte {at}: the records changed or were cut since they were read"),
        );
    }
}

/// The records of a nanosecond run by place (see [`replay`]): where it
/// stopped and the records handed over.
fn by_place(
    d: &mut Dumper,
    f: &Arc<File>,
    (start, end): (u64, u64),
    n: u32,
    link: LinkType,
    scratch: &mut Vec<u8>,
) -> Result<(u64, u32), (u64, u32, std::io::Error)> {
    let (mut at, mut seen) = (start, 0u32);
    while at < end {
        let want = ((end - at) as usize).min(SCRATCH);
        if scratch.len() < want {
            scratch.resize(want, 0);
        }
        let got = read_at(f, &mut scratch[..want], at).map_err(|e| (at, seen, e))?;
        let buf = &scratch[..got];
        let mut off = 0;
        while let Some(h) = buf.get(off..off + REC_HDR) {
            let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
            let (secs, frac, caplen, orig) = (word(0), word(4), word(8) as usize, word(12));
            if seen == n {
                break;
            }
            let len = REC_HDR + caplen;
            // A piece holds any record the dump takes whole; a longer one
            // is only counted (`oversize`), its bytes never read.
            if caplen <= MAX_SNAPLEN as usize && off + len > buf.len() {
                break;
            }
            // The packet as the reader made it (`RecordsFile::plain`).
            let ts = u64::from(secs) * 1_000_000_000 + u64::from(frac);
            match buf.get(off + REC_HDR..off + len) {
                // Not the record a dump file holds (a fraction of a second
                // past 10⁹, an original length below the captured one):
                // written from the piece as the reader saw it.
                Some(bytes) if frac >= 1_000_000_000 || (orig as usize) < caplen => {
                    d.write(ts, orig.max(caplen as u32), link, bytes)
                }
                _ => d.write_at(ts, link, caplen, f, at + off as u64),
            }
            off += len;
            seen += 1;
        }
        if off == 0 {
            break;
        }
        at += off as u64;
    }
    Ok((at, seen))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dump::{DumpFilter, DumpFormat};
    use crate::source::pcap_writer::PcapOut;
    use crate::source::{CaptureFile, BATCH};
    use std::path::Path;

    /// The iPhone capture rewritten with nanosecond stamps (`nanos`) or
    /// microsecond ones, as a file in `dir`.
    fn input(dir: &Path, nanos: bool) -> std::path::PathBuf {
        let src =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pcap/ndpi__iphone.pcap");
        let file = CaptureFile::open(&src).unwrap();
        let path = dir.join(format!("in-{nanos}.pcap"));
        let mut out = PcapOut::new(File::create(&path).unwrap(), nanos, 262_144).unwrap();
        let mut r = file.reader();
        let mut refs = Vec::new();
        while r.next_batch(&mut refs, BATCH) > 0 {
            for p in &refs {
                out.record(p.ts, p.orig_len, p.bytes(r.data())).unwrap();
            }
        }
        out.finish().unwrap();
        path
    }

    fn dumper(dir: &Path) -> Dumper {
        std::fs::create_dir_all(dir).unwrap();
        // Small files and a short period, so runs are cut by both.
        Dumper::new(
            dir,
            DumpFormat::Pcap,
            0,
            Some(40_000),
            Some(2_000_000_000),
            DumpFilter::default(),
        )
    }

    /// Every file of `dir` by name, with its bytes.
    fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_thread_writes_the_files_the_shard_would_by_place_or_by_copy() {
        let dir = tempfile::tempdir().unwrap();
        // And past the page cache (`/tmp` on a disk's file system).
        let direct = super::super::direct::probe(dir.path()).is_ok();
        for (nanos, direct) in [
            (true, false),
            (false, false),
            (true, direct),
            (false, direct),
        ] {
            let path = input(dir.path(), nanos);
            let file = CaptureFile::open(&path).unwrap();
            let (here, away) = (
                dir.path().join(format!("here{nanos}{direct}")),
                dir.path().join(format!("away{nanos}{direct}")),
            );
            let mut d = dumper(&here);
            let mut t = DumpThread::start(dumper(&away).direct(direct), 0)
                .ok()
                .unwrap();
            let mut r = file.reader();
            t.set_input(r.data(), file.records_file());
            assert!(
                t.input.as_ref().is_some_and(|i| i.nanos == nanos),
                "records go by place (nanos: {nanos})"
            );
            let (mut refs, mut packets) = (Vec::new(), 0);
            while r.next_batch(&mut refs, 50) > 0 {
                for p in &refs {
                    d.write(p.ts, p.orig_len, p.link, p.bytes(r.data()));
                }
                t.batch(r.data(), &refs);
                packets += refs.len() as u64;
            }
            let want = d.finish();
            let mut back = t.finish().unwrap();
            let got = back.finish();
            assert_eq!(got, want, "counters, nanos: {nanos}, direct: {direct}");
            assert_eq!(want.written, packets);
            assert!(want.files > 3, "rotation happened: {}", want.files);
            let (a, b) = (files(&here), files(&away));
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(&b) {
                assert!(x == y, "{} differs (nanos: {nanos})", x.0);
            }
        }
    }

    /// A classic pcap of `nanos` stamps whose records include headers a
    /// dump file does not hold as they are: a fraction of a second past
    /// the unit's range, an original length below the captured one.
    fn odd_input(dir: &Path, nanos: bool) -> std::path::PathBuf {
        let path = dir.join(format!("odd-{nanos}.pcap"));
        let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
        let mut b = Vec::new();
        for v in [magic, 0x0004_0002, 0, 0, 262_144, 1] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let limit = if nanos { 1_000_000_000 } else { 1_000_000 };
        for i in 0..3_000u32 {
            let caplen = 60 + i % 200;
            let (frac, orig) = match i % 7 {
                3 => (limit + i, caplen + 4),
                5 => (i, caplen - 10),
                _ => (i * 13 % limit, caplen + 4),
            };
            for v in [1_700_000_000 + i / 500, frac, caplen, orig] {
                b.extend_from_slice(&v.to_le_bytes());
            }
            b.extend((0..caplen).map(|j| (i + j) as u8));
        }
        std::fs::write(&path, b).unwrap();
        path
    }

    #[test]
    fn odd_headers_are_written_as_the_reader_saw_their_packets() {
        let dir = tempfile::tempdir().unwrap();
        for nanos in [true, false] {
            let path = odd_input(dir.path(), nanos);
            let file = CaptureFile::open(&path).unwrap();
            assert!(file.records_file().is_some_and(|f| f.plain));
            let (here, away) = (
                dir.path().join(format!("oh{nanos}")),
                dir.path().join(format!("oa{nanos}")),
            );
            let mut d = dumper(&here);
            let mut t = DumpThread::start(dumper(&away), 0).ok().unwrap();
            let mut r = file.reader();
            t.set_input(r.data(), file.records_file());
            let mut refs = Vec::new();
            while r.next_batch(&mut refs, 64) > 0 {
                for p in &refs {
                    d.write(p.ts, p.orig_len, p.link, p.bytes(r.data()));
                }
                t.batch(r.data(), &refs);
            }
            assert!(
                matches!(t.job.items.first(), Some(Item::Run { n, .. }) if *n > 64),
                "batches go as runs"
            );
            let want = d.finish();
            let got = t.finish().unwrap().finish();
            assert_eq!(got, want, "nanos: {nanos}");
            assert_eq!(want.written, 3_000);
            let (a, b) = (files(&here), files(&away));
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(&b) {
                assert!(x == y, "{} differs (nanos: {nanos})", x.0);
            }
        }
    }

    #[test]
    fn records_the_input_no_longer_holds_are_counted_lost_and_named() {
        let dir = tempfile::tempdir().unwrap();
        for nanos in [true, false] {
            let path = input(dir.path(), nanos);
            let away = dir.path().join(format!("cut{nanos}"));
            let mut t = DumpThread::start(dumper(&away), 0).ok().unwrap();
            let mut packets = 0u64;
            {
                let file = CaptureFile::open(&path).unwrap();
                let mut r = file.reader();
                t.set_input(r.data(), file.records_file());
                let mut refs = Vec::new();
                while r.next_batch(&mut refs, 50) > 0 {
                    t.batch(r.data(), &refs);
                    packets += refs.len() as u64;
                }
            }
            // The input is cut in two before the thread reads it (its
            // jobs go at `finish`: the capture holds fewer packets than a
            // job).
            assert!(packets < JOB_PACKETS as u64);
            let len = std::fs::metadata(&path).unwrap().len();
            let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            f.set_len(len / 2).unwrap();
            let mut back = t.finish().unwrap();
            let c = back.finish();
            assert!(c.written > 0 && c.lost > 0, "{c:?}");
            assert_eq!(c.written + c.lost, packets, "nanos: {nanos}: {c:?}");
            let e = back.error.clone().unwrap();
            assert!(e.starts_with("input at byte "), "{e}");
        }
    }

    #[test]
    fn a_record_header_that_does_not_match_the_packet_is_copied_instead() {
        let dir = tempfile::tempdir().unwrap();
        for nanos in [true, false] {
            let path = input(dir.path(), nanos);
            let file = CaptureFile::open(&path).unwrap();
            let mut r = file.reader();
            let mut refs = Vec::new();
            r.next_batch(&mut refs, 4);
            assert!(refs.iter().all(|p| same_record(r.data(), p, nanos)));
            assert!(
                refs.iter().all(|p| !same_record(r.data(), p, !nanos)),
                "read in the other unit, the stamps differ (nanos: {nanos})"
            );
            let mut moved = refs[1];
            moved.ts += 1;
            assert!(!same_record(r.data(), &moved, nanos), "another stamp");
            moved = refs[1];
            moved.orig_len += 1;
            assert!(!same_record(r.data(), &moved, nanos), "another length");
            moved.offset = 3;
            assert!(
                !same_record(r.data(), &moved, nanos),
                "no room for a header"
            );
        }
    }
}
