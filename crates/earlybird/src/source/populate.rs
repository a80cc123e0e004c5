//! Background population of a large capture file's map.
//!
//! Contract: [`MapPopulator::start`] maps the first [`HEAD`] bytes of a
//! read-only file map at once, then a
//! helper thread asks the kernel to map the rest in [`CHUNK`]-byte steps
//! from the start with `madvise(MADV_POPULATE_READ)` (Linux ≥ 5.14).
//! Mapping pages of a read-only file map never changes what a reader sees,
//! only who pays the page-table work: a reader that gets ahead of the
//! helper faults its pages itself, as it would with no helper. When the
//! kernel refuses, the helper stops and readers fault on demand. Dropping
//! the populator stops and joins the thread, so it must be dropped before
//! the map is unmapped (`CaptureFile` declares it first). The pipeline
//! starts it through [`super::CaptureFile::map_ahead`] only when a core is
//! spare and the shard threads have started; otherwise the shards share the
//! populating ([`Stride`]). The environment
//! variable [`crate::flow::prefault::NO_PREFAULT_ENV`] turns both off (the
//! readers then fault the pages in themselves, after `MADV_WILLNEED`).
//!
//! Measured reason for existing (BENCHMARKS.md): populating the 760 MB
//! worst-case capture with `MAP_POPULATE` took the main thread ~4 % of a
//! one-shard run, serially, before any shard started; on a helper it
//! overlaps with the walk (which reads ~1 GB/s, while populating runs at
//! tens of GB/s, so the helper stays ahead after its first chunk).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Files at least this large are populated in the background.
pub const BACKGROUND_FROM: usize = 64 << 20;

/// Bytes populated before the readers start.
pub const HEAD: usize = 8 << 20;

/// Bytes populated per `madvise` call on the helper (it checks for a stop
/// request between calls).
pub const CHUNK: usize = 16 << 20;

/// Bytes a shard populates at a time when the shards share the work
/// ([`Stride`]).
pub const STRIDE: usize = 512 << 10;

/// How far ahead of its reading position a shard populates ([`Stride`]).
pub const STRIDE_AHEAD: usize = 8 * STRIDE;

/// The shards' own way to populate a large map when no core is spare for
/// the helper: the map is cut in [`STRIDE`]-byte chunks, shard `id` of `N`
/// populates chunks `id`, `id + N`, … each when its reading position comes
/// within [`STRIDE_AHEAD`] bytes of it. Every shard walks the whole file,
/// so without this each chunk's pages were faulted in 64 KiB at a time by
/// whichever shard came first, the two often at once on the same page
/// table lock (BENCHMARKS.md, history, 2026-11-24, 4ed4d74).
#[derive(Debug)]
pub struct Stride {
    span: Span,
    id: usize,
    shards: usize,
    /// Next chunk to consider.
    next: usize,
    /// Chunks this shard populated.
    populated: usize,
}

impl Stride {
    /// A stride over `map` (`None`: nothing to populate, it never acts).
    pub fn new(map: Option<&memmap2::Mmap>, id: usize, shards: usize) -> Stride {
        let span = match map {
            Some(m) if std::env::var_os(crate::flow::prefault::NO_PREFAULT_ENV).is_none() => Span {
                base: m.as_ptr() as usize,
                len: m.len(),
            },
            _ => Span { base: 0, len: 0 },
        };
        Stride {
            span,
            id,
            shards: shards.max(1),
            next: 0,
            populated: 0,
        }
    }

    /// The shard reads at byte `pos`: populates its chunks up to
    /// [`STRIDE_AHEAD`] past it. Stops for good when the kernel refuses.
    #[inline]
    pub fn reached(&mut self, pos: u64) {
        let until = (pos as usize)
            .saturating_add(STRIDE_AHEAD)
            .min(self.span.len);
        while self.next * STRIDE < until {
            let at = self.next * STRIDE;
            if self.next % self.shards == self.id
                && !populate(&self.span, at, STRIDE.min(self.span.len - at))
            {
                self.span.len = 0;
                return;
            }
            self.populated += usize::from(self.next % self.shards == self.id);
            self.next += 1;
        }
    }

    /// Chunks populated so far.
    pub fn populated(&self) -> usize {
        self.populated
    }
}

/// Address and length of the map, for the helper.
#[derive(Debug)]
struct Span {
    base: usize,
    len: usize,
}

/// The helper of one file map (see the module docs).
pub struct MapPopulator {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MapPopulator {
    /// Populates the head of `map` and starts the helper for the rest;
    /// `None` (nothing started) when the helper is turned off or cannot be
    /// spawned, or the kernel refuses the first request — the caller then
    /// populates the map itself.
    pub fn start(map: &memmap2::Mmap) -> Option<MapPopulator> {
        if std::env::var_os(crate::flow::prefault::NO_PREFAULT_ENV).is_some() {
            return None;
        }
        let span = Span {
            base: map.as_ptr() as usize,
            len: map.len(),
        };
        if !populate(&span, 0, HEAD.min(span.len)) {
            return None;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("eb-populate".into())
            .spawn(move || {
                let mut at = HEAD.min(span.len);
                while at < span.len && !flag.load(Ordering::Relaxed) {
                    let n = CHUNK.min(span.len - at);
                    if !populate(&span, at, n) {
                        return;
                    }
                    at += n;
                }
            })
            .ok()?;
        Some(MapPopulator {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for MapPopulator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Asks the kernel to map `n` bytes of the span from offset `at`; false when
/// it refuses.
fn populate(span: &Span, at: usize, n: usize) -> bool {
    if n == 0 {
        return true;
    }
    // The map starts page-aligned; `at` is a multiple of the page size
    // (HEAD and CHUNK are), and a length past the last page is rounded up
    // by the kernel within the mapping.
    // SAFETY: the range lies inside a live read-only file map (the owner
    // joins this thread before unmapping); MADV_POPULATE_READ only maps
    // pages and never changes their contents.
    let r = unsafe {
        libc::madvise(
            (span.base + at) as *mut libc::c_void,
            n,
            libc::MADV_POPULATE_READ,
        )
    };
    r == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A file larger than the head is readable in full, with its contents,
    /// while and after the helper maps it; dropping the populator joins it.
    #[test]
    fn populated_map_reads_the_file() {
        let mut f = tempfile::tempfile().unwrap();
        let len = HEAD + CHUNK + 12_345;
        let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        f.write_all(&bytes).unwrap();
        // SAFETY: a private temporary file that nothing else changes.
        let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
        let p = MapPopulator::start(&map).expect("kernel with MADV_POPULATE_READ");
        assert_eq!(&map[..], &bytes[..]);
        drop(p);
        assert_eq!(map[len - 1], ((len - 1) % 251) as u8);
    }

    /// Shards populate alternate chunks, each only as its reading comes
    /// within reach, together every chunk once; the map reads the same.
    #[test]
    fn strides_share_the_chunks() {
        let mut f = tempfile::tempfile().unwrap();
        let len = 11 * STRIDE + 4321;
        let bytes: Vec<u8> = (0..len).map(|i| (i % 241) as u8).collect();
        f.write_all(&bytes).unwrap();
        // SAFETY: a private temporary file that nothing else changes.
        let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
        let mut a = Stride::new(Some(&map), 0, 2);
        let mut b = Stride::new(Some(&map), 1, 2);
        let reach = STRIDE_AHEAD / STRIDE;
        a.reached(0);
        b.reached(0);
        assert_eq!((a.populated(), b.populated()), (reach / 2, reach / 2));
        a.reached(len as u64);
        b.reached(len as u64);
        a.reached(len as u64);
        assert_eq!((a.populated(), b.populated()), (6, 6));
        assert_eq!(&map[..], &bytes[..]);
        let mut none = Stride::new(None, 0, 1);
        none.reached(len as u64);
        assert_eq!(none.populated(), 0);
    }
}
