//! A classic pcap dump file written past the page cache (`--dump-direct`).
//!
//! Contract:
//! - [`DirectPcap`] writes the same bytes as
//!   [`crate::source::pcap_writer::PcapOut`] with nanosecond stamps (global
//!   header, then a 16-byte header and the captured bytes per record) to a
//!   file opened with `O_DIRECT`: records are assembled in a buffer of
//!   [`BUF`] bytes aligned to [`ALIGN`]; when a record does not fit, the
//!   buffer's whole [`ALIGN`]-byte blocks go to a thread of the file's own
//!   that writes them at their offset, while the part block left over
//!   starts the next buffer ([`POOL`] buffers: the disk writes one while
//!   the dumper fills another). The kernel copies nothing into the page
//!   cache: the device reads the buffer.
//! - Between writes the file ends inside a record (as a file a buffered
//!   writer is filling does); [`DirectPcap::finish`] writes the last block
//!   padded with zeros, waits for every write and cuts the file to the
//!   records' length.
//! - What is on disk: a write that came back done makes whole in the file
//!   every record handed over before the write before it (the buffer holds
//!   far more than a block, so the later write took the part block that
//!   record ended in); [`DirectPcap::confirmed`] gives those records'
//!   length and number, and [`DirectPcap::record`] says when they grew. A
//!   write that fails or comes back short is an `io::Error`, returned by
//!   the next record or by `finish` once every write sent is back; the
//!   writes after a failed one are not made. Dropping the writer waits for
//!   the writes sent, so the file can be cut back at once.
//! - [`probe`] tells, before a run, whether a directory's file system takes
//!   such writes.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::mpsc::{channel, sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::source::pcap_writer::{write_rec_header, MAX_SNAPLEN};

/// Alignment of the buffer, the file offsets and the lengths written: the
/// largest logical block size of common devices (512 or 4096 bytes).
pub(crate) const ALIGN: usize = 4096;

/// Bytes of a buffer: a write of a few milliseconds of disk time.
const BUF: usize = 4 << 20;
const _: () = assert!(BUF >= 2 * (16 + MAX_SNAPLEN as usize) + ALIGN);

/// Buffers of a file: one being filled, the others written.
const POOL: usize = 3;

/// Bytes of the global header and of a record header.
const FILE_HDR: usize = 24;
const REC_HDR: usize = 16;

/// Opens `path` for writing past the page cache (created or truncated).
fn open(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

/// Whether the file system of `dir` takes `O_DIRECT` writes of [`ALIGN`]
/// bytes: writes one block to a file of its own and removes it.
pub(crate) fn probe(dir: &Path) -> io::Result<()> {
    let path = dir.join(format!(".eb-direct-probe-{}", std::process::id()));
    let tried = open(&path).and_then(|f| write_all_at(&f, Block::new().bytes(ALIGN), 0));
    let _ = std::fs::remove_file(&path);
    tried
}

/// One buffer and the write it is for.
struct Block {
    /// `BUF + ALIGN` bytes, of which `mem[at..at + BUF]` is the buffer.
    mem: Vec<u8>,
    at: usize,
    /// Bytes to write (whole blocks) at file offset `offset`.
    len: usize,
    offset: u64,
    /// The whole records' length and number once this write is done.
    confirms: (u64, u64),
    /// How the write went.
    done: io::Result<()>,
}

impl Block {
    fn new() -> Block {
        let mem = vec![0u8; BUF + ALIGN];
        let at = mem.as_ptr().align_offset(ALIGN);
        Block {
            mem,
            at,
            len: 0,
            offset: 0,
            confirms: (0, 0),
            done: Ok(()),
        }
    }

    /// A block holding no buffer (in place of the last one at the end).
    fn empty() -> Block {
        Block {
            mem: Vec::new(),
            at: 0,
            len: 0,
            offset: 0,
            confirms: (0, 0),
            done: Ok(()),
        }
    }

    #[inline]
    fn bytes(&self, len: usize) -> &[u8] {
        &self.mem[self.at..self.at + len]
    }

    #[inline]
    fn buf(&mut self) -> &mut [u8] {
        &mut self.mem[self.at..self.at + BUF]
    }
}

/// One `O_DIRECT` pcap file being written (see the module docs).
pub(crate) struct DirectPcap {
    file: Arc<File>,
    /// The buffer being filled and the bytes it holds.
    cur: Block,
    pos: usize,
    /// File offset of the buffer's first byte (a multiple of [`ALIGN`]).
    base: u64,
    /// Records handed over.
    records: u64,
    /// The record boundary and records handed over at the last write sent.
    last: (u64, u64),
    /// Whole records in the file: their length and number.
    confirmed: (u64, u64),
    /// Buffers allocated, and those back from the writer.
    blocks: usize,
    spare: Vec<Block>,
    /// Writes sent and not back.
    in_flight: usize,
    to: Option<SyncSender<Block>>,
    back: Receiver<Block>,
    writer: Option<JoinHandle<()>>,
    /// The first failed write, until it is returned.
    error: Option<io::Error>,
}

impl DirectPcap {
    /// Starts the file `path` with the global header of a nanosecond pcap
    /// of `linktype` (the header goes to the file with the first write).
    pub(crate) fn create(path: &Path, snaplen: u32, linktype: u32) -> io::Result<DirectPcap> {
        let file = Arc::new(open(path)?);
        let (to, from) = sync_channel::<Block>(POOL);
        let (back_to, back) = channel::<Block>();
        let theirs = Arc::clone(&file);
        let writer = std::thread::Builder::new()
            .name("eb-dumpw".into())
            .spawn(move || {
                let mut failed = false;
                for mut b in from {
                    b.done = if failed {
                        Err(io::Error::other("not written after a failed write"))
                    } else {
                        write_all_at(&theirs, b.bytes(b.len), b.offset)
                    };
                    failed |= b.done.is_err();
                    if back_to.send(b).is_err() {
                        break;
                    }
                }
            })?;
        let mut out = DirectPcap {
            file,
            cur: Block::new(),
            pos: 0,
            base: 0,
            records: 0,
            last: (0, 0),
            confirmed: (0, 0),
            blocks: 1,
            spare: Vec::new(),
            in_flight: 0,
            to: Some(to),
            back,
            writer: Some(writer),
            error: None,
        };
        let hdr = &mut out.cur.buf()[..FILE_HDR];
        hdr[0..4].copy_from_slice(&0xA1B2_3C4Du32.to_le_bytes());
        hdr[4..6].copy_from_slice(&2u16.to_le_bytes());
        hdr[6..8].copy_from_slice(&4u16.to_le_bytes());
        hdr[8..16].fill(0);
        hdr[16..20].copy_from_slice(&snaplen.to_le_bytes());
        hdr[20..24].copy_from_slice(&linktype.to_le_bytes());
        out.pos = FILE_HDR;
        out.last = (FILE_HDR as u64, 0);
        out.confirmed = (FILE_HDR as u64, 0);
        Ok(out)
    }

    /// Appends one record; `true` when the whole records in the file
    /// ([`DirectPcap::confirmed`]) grew before it.
    #[inline]
    pub(crate) fn record(&mut self, ts_ns: u64, orig_len: u32, data: &[u8]) -> io::Result<bool> {
        let need = REC_HDR + data.len();
        if need > BUF - ALIGN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("record of {} bytes exceeds the output buffer", data.len()),
            ));
        }
        let mut grew = false;
        if BUF - self.pos < need {
            let before = self.confirmed;
            self.send_blocks()?;
            grew = self.confirmed != before;
        }
        let pos = self.pos;
        let rec = &mut self.cur.buf()[pos..pos + need];
        let (hdr, body) = rec.split_at_mut(REC_HDR);
        write_rec_header(hdr, ts_ns, data.len() as u32, orig_len, true);
        body.copy_from_slice(data);
        self.pos += need;
        self.records += 1;
        Ok(grew)
    }

    /// Bytes the buffer takes before its blocks must go to the writer.
    #[inline]
    pub(crate) fn room(&self) -> usize {
        BUF - self.pos
    }

    /// The next `len` bytes of the buffer (at most [`DirectPcap::room`]),
    /// for records read straight into it; [`DirectPcap::advance`] takes
    /// them.
    #[inline]
    pub(crate) fn spare(&mut self, len: usize) -> &mut [u8] {
        let pos = self.pos;
        &mut self.cur.buf()[pos..pos + len]
    }

    /// The first `len` bytes of [`DirectPcap::spare`] now hold `n` whole
    /// records (nanosecond stamps).
    #[inline]
    pub(crate) fn advance(&mut self, len: usize, n: u64) {
        self.pos += len;
        self.records += n;
    }

    /// Sends the buffer's whole blocks to the writer (room for the next
    /// records); `true` when the whole records in the file grew.
    pub(crate) fn flush(&mut self) -> io::Result<bool> {
        let before = self.confirmed;
        self.send_blocks()?;
        Ok(self.confirmed != before)
    }

    /// The whole records in the file: their bytes (from the file's start,
    /// header included) and their number.
    #[inline]
    pub(crate) fn confirmed(&self) -> (u64, u64) {
        self.confirmed
    }

    /// Sends the buffer's whole blocks to the writer; the part block left
    /// over starts the next buffer.
    fn send_blocks(&mut self) -> io::Result<()> {
        let whole = self.pos / ALIGN * ALIGN;
        if whole == 0 {
            return Ok(());
        }
        let mut next = self.free_block()?;
        let tail = self.pos - whole;
        let (from, to) = (self.cur.at + whole, next.at);
        next.mem[to..to + tail].copy_from_slice(&self.cur.mem[from..from + tail]);
        let mut full = std::mem::replace(&mut self.cur, next);
        full.len = whole;
        full.offset = self.base;
        full.confirms = self.last;
        self.last = (self.base + self.pos as u64, self.records);
        self.base += whole as u64;
        self.pos = tail;
        self.send(full)?;
        self.collect(false)
    }

    /// Hands `b` to the writer.
    fn send(&mut self, b: Block) -> io::Result<()> {
        let sent = self.to.as_ref().is_some_and(|to| to.send(b).is_ok());
        if !sent {
            return Err(io::Error::other("the direct writer's thread is gone"));
        }
        self.in_flight += 1;
        Ok(())
    }

    /// A buffer to fill: a spare one, a new one while there are fewer
    /// than [`POOL`], or the next one back from the writer.
    fn free_block(&mut self) -> io::Result<Block> {
        if self.spare.is_empty() {
            if self.blocks < POOL {
                self.blocks += 1;
                return Ok(Block::new());
            }
            self.collect(true)?;
        }
        self.spare
            .pop()
            .ok_or_else(|| io::Error::other("the direct writer's thread is gone"))
    }

    /// Takes back the writes done (waiting for one when `wait`): counts
    /// what they made whole; the first failure is returned.
    fn collect(&mut self, wait: bool) -> io::Result<()> {
        let mut wait = wait;
        while self.in_flight > 0 {
            let b = if wait {
                match self.back.recv() {
                    Ok(b) => b,
                    Err(_) => break,
                }
            } else {
                match self.back.try_recv() {
                    Ok(b) => b,
                    Err(_) => break,
                }
            };
            wait = false;
            self.in_flight -= 1;
            let mut b = b;
            match std::mem::replace(&mut b.done, Ok(())) {
                Ok(()) => self.confirmed = self.confirmed.max(b.confirms),
                Err(e) => {
                    self.error.get_or_insert(e);
                }
            }
            self.spare.push(b);
        }
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Writes what the buffer holds (its last block padded with zeros),
    /// waits for every write and cuts the file to the records' length.
    pub(crate) fn finish(mut self) -> io::Result<()> {
        self.complete()
    }

    /// [`DirectPcap::finish`] in place: on a failure
    /// [`DirectPcap::confirmed`] still says which records the writes before
    /// it made whole. Nothing more is written after it.
    pub(crate) fn complete(&mut self) -> io::Result<()> {
        let len = self.base + self.pos as u64;
        let padded = self.pos.div_ceil(ALIGN) * ALIGN;
        if padded > 0 {
            let pos = self.pos;
            let mut last = std::mem::replace(&mut self.cur, Block::empty());
            last.buf()[pos..padded].fill(0);
            last.len = padded;
            last.offset = self.base;
            last.confirms = (len, self.records);
            self.send(last)?;
        }
        while self.in_flight > 0 {
            self.collect(true)?;
        }
        self.file.set_len(len)
    }
}

impl Drop for DirectPcap {
    /// Waits for the writes sent (a file given up is cut back next).
    fn drop(&mut self) {
        drop(self.to.take());
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

/// Writes `buf` (whole blocks) at `at`; a write that stops short of a
/// block is an error, as the next one could not be aligned.
fn write_all_at(f: &File, buf: &[u8], mut at: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match f.write_at(&buf[done..], at) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(k) if k % ALIGN != 0 && done + k < buf.len() => {
                return Err(io::Error::other(format!(
                    "a direct write stopped after {k} bytes, inside a block"
                )))
            }
            Ok(k) => {
                done += k;
                at += k as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::pcap_writer::PcapOut;

    /// A temporary directory on a file system that takes O_DIRECT, or
    /// `None` when its file system answers that it does not (EINVAL: tmpfs
    /// before Linux 6.6); any other failure fails the test.
    fn dir() -> Option<tempfile::TempDir> {
        let d = tempfile::tempdir().unwrap();
        match probe(d.path()) {
            Ok(()) => Some(d),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                eprintln!("{}: no O_DIRECT here: {e}", d.path().display());
                None
            }
            Err(e) => panic!("{}: {e}", d.path().display()),
        }
    }

    #[test]
    fn the_file_is_byte_for_byte_the_buffered_writers() {
        let Some(d) = dir() else {
            return;
        };
        let path = d.path().join("x.pcap");
        let mut out = DirectPcap::create(&path, MAX_SNAPLEN, 1).unwrap();
        let mut want = PcapOut::with_linktype(Vec::new(), true, MAX_SNAPLEN, 1).unwrap();
        let mut grew = 0;
        // Where each record ends: what `confirmed` may name.
        let mut ends = vec![FILE_HDR as u64];
        let mut last = out.confirmed();
        // Sizes that cross blocks and the buffer at every offset, up to
        // the snaplen.
        for i in 0..40_000u64 {
            let len = match i % 97 {
                0 => MAX_SNAPLEN as usize,
                k => (k as usize * 131) % 1600,
            };
            let data: Vec<u8> = (0..len).map(|j| (i as usize + j) as u8).collect();
            let ts = 1_700_000_000_000_000_000 + i * 1_234_567;
            if out.record(ts, len as u32 + 4, &data).unwrap() {
                grew += 1;
                let (bytes, n) = out.confirmed();
                assert!(bytes > last.0 && n > last.1, "{last:?} then {bytes} {n}");
                assert_eq!(ends[n as usize], bytes, "a record boundary");
                // Never the records of the last write: its part block is
                // still in the buffer.
                assert!(n < i, "{n} of {i}");
                last = (bytes, n);
            }
            want.record(ts, len as u32 + 4, &data).unwrap();
            ends.push(ends.last().unwrap() + 16 + len as u64);
        }
        assert!(grew > 10, "the whole records grew {grew} times");
        out.finish().unwrap();
        let want = want.finish().unwrap();
        let got = std::fs::read(&path).unwrap();
        assert_eq!(got.len(), want.len());
        assert!(got == want, "the bytes differ");
    }

    #[test]
    fn a_file_of_its_header_alone_and_an_oversize_record() {
        let Some(d) = dir() else {
            return;
        };
        let path = d.path().join("h.pcap");
        let out = DirectPcap::create(&path, MAX_SNAPLEN, 101).unwrap();
        out.finish().unwrap();
        let got = std::fs::read(&path).unwrap();
        assert_eq!(got.len(), FILE_HDR);
        assert_eq!(&got[20..24], &101u32.to_le_bytes());
        let mut out = DirectPcap::create(&path, MAX_SNAPLEN, 1).unwrap();
        let e = out.record(0, 0, &vec![0; BUF]).unwrap_err();
        assert!(e.to_string().contains("exceeds"), "{e}");
    }
}
