//! What a run reads: the inputs a user names (files, directories, `-` for
//! standard input, FIFOs, compressed captures), put in order and fed to the
//! shards one capture at a time.
//!
//! Contract:
//! - [`Inputs::plan`] expands directories (recursively, entries in natural
//!   name order: `cap-2` before `cap-10`; symbolic links followed, each
//!   directory visited once), tells streams (`-`, FIFOs, character
//!   devices: read as they arrive) from files, recognises gzip, zstd and xz
//!   compression by the first bytes (decompressed as a stream; without the
//!   `compress` feature such an input is an error, skipped among several
//!   as an unsupported compression) and checks every file's header before
//!   anything runs.
//! - Order ([`InputOrder::Time`], the default): files are read in the
//!   order of their first packet's timestamp (ties in natural name order),
//!   so the rotated pieces of one capture give the records of the whole in
//!   whatever order they were named. When a stream is among the inputs
//!   (its first packet cannot be known beforehand) the order given is
//!   kept. A warning says when the order read differs from the order given.
//! - An input that cannot be used (not a capture, unreadable, a format
//!   that is not supported) is an error when it is the only one; among
//!   several it is skipped with a warning naming it and counted by reason
//!   in [`Inputs::skipped`] (inputs found inside a directory that are not
//!   captures are counted, and only the first few named). No usable input
//!   at all is an error.
//! - [`Inputs::start`] hands the plan to a producer thread that opens each
//!   file (memory-mapped, see [`CaptureFile::open`]) or cuts each stream
//!   into chunks ([`super::stream`]) just ahead of the shards, at most
//!   [`AHEAD`] captures at a time, so a directory of thousands of files or
//!   an endless pipe uses bounded memory and address space. Every shard
//!   takes the same captures in the same order ([`Feed::get`]); a capture
//!   is dropped once every shard has taken it and let it go.
//! - How time is read across inputs (new time domains) is the shards'
//!   business: every capture carries whether it continues the one before
//!   (the next chunk of a stream) or starts on its own.

use std::collections::HashSet;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::feed::Feed;
use super::stream::ChunkError;
#[cfg(feature = "compress")]
use super::stream::Chunker;
use super::{CaptureFile, Warning};
use crate::error::{Error, Result};

/// Captures opened ahead of the slowest shard.
pub const AHEAD: usize = 4;

/// Inputs skipped inside a directory that are named in a warning (the rest
/// are only counted).
const NAMED_SKIPS: usize = 3;

/// In which order several inputs are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InputOrder {
    /// By the timestamp of each file's first packet (see the module docs).
    #[default]
    Time,
    /// As given on the command line (directories expanded in place).
    Given,
}

impl InputOrder {
    /// Parses `time` or `given`.
    pub fn parse(s: &str) -> Option<InputOrder> {
        match s {
            "time" => Some(InputOrder::Time),
            "given" => Some(InputOrder::Given),
            _ => None,
        }
    }
}

/// Why an input was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SkipReason {
    /// Its first bytes are not a pcap or pcapng header.
    NotCapture,
    /// It could not be opened or read.
    Unreadable,
    /// Compressed in a format earlybird does not read (e.g. bzip2).
    Compression,
}

impl SkipReason {
    /// The name used in summaries.
    pub fn name(self) -> &'static str {
        match self {
            SkipReason::NotCapture => "not_capture",
            SkipReason::Unreadable => "unreadable",
            SkipReason::Compression => "unsupported_compression",
        }
    }
}

/// How the bytes of a stream are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Compression {
    None,
    Gzip,
    Zstd,
    Xz,
}

/// Why a compressed input is not read by a build without the `compress`
/// feature ("xz-compressed capture: …").
#[cfg(not(feature = "compress"))]
fn without_compress(c: Compression) -> String {
    let name = format!("{c:?}").to_lowercase();
    format!("{name}-compressed capture: built without the `compress` feature")
}

/// Where a stream's bytes come from.
#[derive(Debug)]
pub(super) enum Origin {
    Stdin,
    Path(PathBuf),
}

/// One input of the plan.
#[derive(Debug)]
pub(super) enum Planned {
    /// A capture file, memory-mapped when its turn comes — or already,
    /// when the plan is small enough to keep the maps it checked.
    File {
        path: PathBuf,
        bytes: u64,
        opened: Option<CaptureFile>,
    },
    /// A stream cut into chunks as it is read.
    Stream {
        name: String,
        origin: Origin,
        eager: bool,
    },
}

impl Planned {
    fn name(&self) -> String {
        match self {
            Planned::File { path, .. } => path.display().to_string(),
            Planned::Stream { name, .. } => name.clone(),
        }
    }
}

/// The checked, ordered inputs of a run (see the module docs).
#[derive(Debug, Default)]
pub struct Inputs {
    items: Vec<Planned>,
    /// Warnings about inputs found while planning (skipped inputs, order).
    pub warnings: Vec<Warning>,
    /// Inputs skipped, by reason.
    pub skipped: Vec<(SkipReason, u64)>,
    /// The capture filter (`--filter`) the input thread runs over every
    /// capture before the shards see it.
    pub filter: Option<Arc<super::capfilter::CaptureFilter>>,
}

/// A candidate input before it is checked.
struct Found {
    path: PathBuf,
    /// Named by the user (not found inside a directory).
    named: bool,
}

impl Inputs {
    /// Expands, checks and orders `paths` (see the module docs).
    pub fn plan(paths: &[PathBuf], order: InputOrder) -> Result<Inputs> {
        let mut found = Vec::new();
        let mut seen_dirs = HashSet::new();
        for p in paths {
            if p.as_os_str() == "-" {
                found.push(Found {
                    path: p.clone(),
                    named: true,
                });
                continue;
            }
            let meta = std::fs::metadata(p).map_err(|e| Error::io(p, e))?;
            if meta.is_dir() {
                walk_dir(p, &mut found, &mut seen_dirs)?;
            } else {
                found.push(Found {
                    path: p.clone(),
                    named: true,
                });
            }
        }
        let single = found.len() == 1;
        // A few inputs keep the map their check made (no second open, and
        // the file read is the one checked); many are mapped in turn.
        let keep = found.len() <= AHEAD;
        let mut plan = Inputs::default();
        let mut dir_skips = 0usize;
        // (first timestamp, planned, named by the user) for every usable
        // input.
        let mut usable: Vec<(Option<u64>, Planned, bool)> = Vec::new();
        let mut first_error = None;
        for f in found {
            match check(&f.path, keep) {
                Ok((ts, p)) => usable.push((ts, p, f.named)),
                Err((reason, e)) if !single => {
                    plan.count_skip(reason);
                    if f.named || dir_skips < NAMED_SKIPS {
                        plan.warnings.push(Warning {
                            file: f.path.display().to_string(),
                            offset: Warning::NO_OFFSET,
                            message: format!("skipped: {e}"),
                        });
                    }
                    if !f.named {
                        dir_skips += 1;
                    }
                    first_error.get_or_insert(e);
                }
                Err((_, e)) => return Err(e),
            }
        }
        if dir_skips > NAMED_SKIPS {
            plan.warnings.push(Warning {
                file: String::new(),
                offset: Warning::NO_OFFSET,
                message: format!(
                    "{} more inputs in directories skipped (counted in the summary)",
                    dir_skips - NAMED_SKIPS
                ),
            });
        }
        if usable.is_empty() {
            return Err(first_error.unwrap_or_else(|| {
                Error::Config("no capture to read (the directories given are empty)".into())
            }));
        }
        let streams = usable
            .iter()
            .any(|(_, p, _)| matches!(p, Planned::Stream { eager: true, .. }));
        if order == InputOrder::Time && !streams {
            // Files the user named, in the order named.
            let named: Vec<String> = usable
                .iter()
                .filter(|(_, _, n)| *n)
                .map(|(_, p, _)| p.name())
                .collect();
            usable.sort_by(|(ta, a, _), (tb, b, _)| {
                ta.unwrap_or(0)
                    .cmp(&tb.unwrap_or(0))
                    .then_with(|| natural_cmp(&a.name(), &b.name()))
            });
            let read: Vec<String> = usable
                .iter()
                .filter(|(_, _, n)| *n)
                .map(|(_, p, _)| p.name())
                .collect();
            if read != named {
                let moved = read.iter().zip(&named).filter(|(r, n)| r != n).count();
                plan.warnings.push(Warning {
                    file: String::new(),
                    offset: Warning::NO_OFFSET,
                    message: format!(
                        "{moved} of the {} files named were not given in time order; they are \
                         read in the order of their first packet (--input-order given keeps \
                         yours)",
                        named.len()
                    ),
                });
            }
        }
        plan.items = usable.into_iter().map(|(_, p, _)| p).collect();
        Ok(plan)
    }

    fn count_skip(&mut self, reason: SkipReason) {
        match self.skipped.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => {
                self.skipped.push((reason, 1));
                self.skipped.sort();
            }
        }
    }

    /// The paths of the planned inputs that are files (directories
    /// expanded; standard input left out).
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.items.iter().filter_map(|p| match p {
            Planned::File { path, .. } => Some(path.as_path()),
            Planned::Stream {
                origin: Origin::Path(path),
                ..
            } => Some(path.as_path()),
            Planned::Stream { .. } => None,
        })
    }

    /// Number of inputs that will be read.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when no input is planned.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Total bytes of the inputs when every one is an uncompressed file
    /// (what a progress bar counts), else `None`.
    pub fn total_bytes(&self) -> Option<u64> {
        self.items
            .iter()
            .map(|p| match p {
                Planned::File { bytes, .. } => Some(*bytes),
                Planned::Stream { .. } => None,
            })
            .sum()
    }

    /// Starts the producer thread (see the module docs)
    /// for `shards` readers, which stop waiting for a capture once any of
    /// the `stop` flags is raised.
    pub(crate) fn start(self, shards: usize, stop: Vec<Arc<AtomicBool>>) -> Arc<Feed> {
        Feed::start(self.items, shards, stop, self.filter)
    }
}

/// Adds every entry under `dir` (recursively, natural name order).
fn walk_dir(dir: &Path, out: &mut Vec<Found>, seen: &mut HashSet<(u64, u64)>) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir).map_err(|e| Error::io(dir, e))?;
    if !seen.insert((meta.dev(), meta.ino())) {
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort_by(|a, b| natural_cmp(&a.to_string_lossy(), &b.to_string_lossy()));
    for p in entries {
        match std::fs::metadata(&p) {
            Ok(m) if m.is_dir() => walk_dir(&p, out, seen)?,
            _ => out.push(Found {
                path: p,
                named: false,
            }),
        }
    }
    Ok(())
}

/// Compares names with runs of digits compared as numbers (`a2` < `a10`).
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return a.cmp(b),
            (None, _) => return std::cmp::Ordering::Less,
            (_, None) => return std::cmp::Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let n = x.iter().take_while(|c| c.is_ascii_digit()).count();
                let m = y.iter().take_while(|c| c.is_ascii_digit()).count();
                let (dx, dy) = (&x[..n], &y[..m]);
                let tx = dx.iter().skip_while(|&&c| c == b'0').count();
                let ty = dy.iter().skip_while(|&&c| c == b'0').count();
                let ord = tx.cmp(&ty).then_with(|| dx[n - tx..].cmp(&dy[m - ty..]));
                if ord != std::cmp::Ordering::Equal {
                    return ord;
                }
                x = &x[n..];
                y = &y[m..];
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(d);
                }
                x = &x[1..];
                y = &y[1..];
            }
        }
    }
}

type Checked = std::result::Result<(Option<u64>, Planned), (SkipReason, Error)>;

/// Finds what kind of input `path` is and checks its header; returns its
/// first packet's timestamp (files) and its plan entry.
fn check(path: &Path, keep: bool) -> Checked {
    if path.as_os_str() == "-" {
        return Ok((
            None,
            Planned::Stream {
                name: "<stdin>".into(),
                origin: Origin::Stdin,
                eager: true,
            },
        ));
    }
    let unreadable = |e: io::Error| (SkipReason::Unreadable, Error::io(path, e));
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    let name = path.display().to_string();
    if !meta.is_file() {
        // FIFOs, character devices, sockets: read as they come.
        use std::os::unix::fs::FileTypeExt;
        let ft = meta.file_type();
        if ft.is_fifo() || ft.is_char_device() || ft.is_socket() {
            return Ok((
                None,
                Planned::Stream {
                    name,
                    origin: Origin::Path(path.to_path_buf()),
                    eager: true,
                },
            ));
        }
    }
    let mut magic = [0u8; 6];
    let got = {
        let mut f = std::fs::File::open(path).map_err(unreadable)?;
        read_up_to(&mut f, &mut magic).map_err(unreadable)?
    };
    match compression_of(&magic[..got]) {
        Err(what) => Err((
            SkipReason::Compression,
            Error::NotCapture {
                path: path.to_path_buf(),
                reason: format!("{what}-compressed; earlybird reads gzip, zstd and xz"),
            },
        )),
        Ok(Compression::None) => {
            // A file kept for reading is mapped whole now; the others are
            // only looked at here (mapped again, populated, in their turn).
            let opened = match keep {
                true => CaptureFile::open(path),
                false => CaptureFile::probe(path),
            };
            let file = opened.map_err(|e| (skip_reason(&e), e))?;
            Ok((
                file.first_ts(),
                Planned::File {
                    path: path.to_path_buf(),
                    bytes: meta.len(),
                    opened: keep.then_some(file),
                },
            ))
        }
        #[cfg(not(feature = "compress"))]
        Ok(c) => Err((
            SkipReason::Compression,
            Error::NotCapture {
                path: path.to_path_buf(),
                reason: without_compress(c),
            },
        )),
        #[cfg(feature = "compress")]
        Ok(_) => {
            // The first chunk of the decompressed stream gives the header
            // check and the first timestamp.
            let src = open_sniffed(&Origin::Path(path.to_path_buf())).map_err(unreadable)?;
            let first = Chunker::new(src, 64 * 1024, false)
                .next_chunk()
                .map_err(|e| chunk_error(path, e))?;
            let ts = match first {
                Some(ch) => CaptureFile::from_bytes(&name, ch.bytes)
                    .map_err(|e| (skip_reason(&e), e))?
                    .first_ts(),
                None => None,
            };
            Ok((
                ts,
                Planned::Stream {
                    name,
                    origin: Origin::Path(path.to_path_buf()),
                    eager: false,
                },
            ))
        }
    }
}

pub(super) fn skip_reason(e: &Error) -> SkipReason {
    match e {
        Error::Io { .. } => SkipReason::Unreadable,
        _ => SkipReason::NotCapture,
    }
}

fn chunk_error(path: &Path, e: ChunkError) -> (SkipReason, Error) {
    match e {
        ChunkError::NotCapture(reason) => (
            SkipReason::NotCapture,
            Error::NotCapture {
                path: path.to_path_buf(),
                reason,
            },
        ),
        ChunkError::Read(_, e) => (SkipReason::Unreadable, Error::io(path, e)),
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The compression the first bytes announce; `Err(name)` for a known
/// format that is not read.
fn compression_of(magic: &[u8]) -> std::result::Result<Compression, &'static str> {
    Ok(match magic {
        [0x1f, 0x8b, ..] => Compression::Gzip,
        [0x28, 0xb5, 0x2f, 0xfd, ..] => Compression::Zstd,
        [0xfd, b'7', b'z', b'X', b'Z', 0x00, ..] => Compression::Xz,
        [b'B', b'Z', b'h', ..] => return Err("bzip2"),
        _ => Compression::None,
    })
}

/// Opens a stream, finding its compression from its first bytes (which
/// are kept for the decoder).
pub(super) fn open_sniffed(origin: &Origin) -> io::Result<Box<dyn Read + Send>> {
    let raw: Box<dyn Read + Send> = match origin {
        Origin::Stdin => Box::new(io::stdin()),
        Origin::Path(p) => Box::new(std::fs::File::open(p)?),
    };
    let mut head = [0u8; 6];
    let mut raw = raw;
    let n = read_up_to(&mut raw, &mut head)?;
    let joined: Box<dyn Read + Send> = Box::new(io::Cursor::new(head[..n].to_vec()).chain(raw));
    let buffered = io::BufReader::with_capacity(256 * 1024, joined);
    Ok(match compression_of(&head[..n]) {
        Ok(Compression::None) => Box::new(buffered),
        #[cfg(feature = "compress")]
        Ok(Compression::Gzip) => Box::new(flate2::bufread::MultiGzDecoder::new(buffered)),
        #[cfg(feature = "compress")]
        Ok(Compression::Zstd) => Box::new(zstd::stream::read::Decoder::with_buffer(buffered)?),
        #[cfg(feature = "compress")]
        Ok(Compression::Xz) => Box::new(liblzma::bufread::XzDecoder::new_multi_decoder(buffered)),
        #[cfg(not(feature = "compress"))]
        Ok(c) => {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                without_compress(c),
            ))
        }
        Err(what) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{what}-compressed; earlybird reads gzip, zstd and xz"),
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order() {
        let mut v = vec![
            "cap-10", "cap-2", "cap-1", "cap-11", "cap-02", "b", "a10b", "a9c",
        ];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            v,
            ["a9c", "a10b", "b", "cap-1", "cap-02", "cap-2", "cap-10", "cap-11"]
        );
    }

    #[test]
    fn compression_magics() {
        assert_eq!(compression_of(&[0x1f, 0x8b, 8]), Ok(Compression::Gzip));
        assert_eq!(
            compression_of(&[0x28, 0xb5, 0x2f, 0xfd]),
            Ok(Compression::Zstd)
        );
        assert_eq!(compression_of(b"\xfd7zXZ\x00"), Ok(Compression::Xz));
        assert_eq!(compression_of(b"BZh9"), Err("bzip2"));
        assert_eq!(
            compression_of(&[0xd4, 0xc3, 0xb2, 0xa1]),
            Ok(Compression::None)
        );
    }
}
