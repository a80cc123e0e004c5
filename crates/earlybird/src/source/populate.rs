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
//! spare and the shard threads have started. The environment
//! variable [`crate::flow::prefault::NO_PREFAULT_ENV`] turns it off (the
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

/// Address and length of the map, for the helper.
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
        let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
        let p = MapPopulator::start(&map).expect("kernel with MADV_POPULATE_READ");
        assert_eq!(&map[..], &bytes[..]);
        drop(p);
        assert_eq!(map[len - 1], ((len - 1) % 251) as u8);
    }
}
