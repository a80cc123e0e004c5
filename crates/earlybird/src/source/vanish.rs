//! Capture files that shrink while they are read: the `SIGBUS` a read of a
//! vanished page of a file map raises is caught, and the readers see where
//! the file now ends.
//!
//! Contract:
//! - [`Guard::register`] enters a read-only file map in a process-wide
//!   registry (a fixed array of [`SLOTS`] slots of atomics, lock-free to
//!   read from a signal handler) and installs, once per process, a
//!   `SIGBUS` handler (`SA_SIGINFO | SA_ONSTACK`). `None` (the map is then
//!   unguarded, as before this module) when the registry is full, the
//!   handler cannot be installed, or off Linux. Dropping the guard leaves
//!   the registry; it must be dropped before the map is unmapped, and no
//!   read of the map may be under way then.
//! - The handler, for a fault address inside a registered map, records the
//!   lowest faulting offset of that map (one `fetch_min`), maps anonymous
//!   zero pages (`MAP_FIXED | MAP_ANONYMOUS | MAP_PRIVATE`, read-only) from
//!   the faulting page to the end of the map, and returns: the read that
//!   faulted, and every later read of those pages, sees zeros. A `SIGBUS`
//!   anywhere else goes to the handler that was installed before (Rust's
//!   own stack-guard handler, say), or, when that was the default, kills
//!   the process with `SIGBUS` as it would have without this module.
//! - [`Guard::check`], called by the readers once per batch (never per
//!   packet), reads one byte of the page after the reading position
//!   (faulting it if it vanished) — or, when that page is past the map,
//!   asks the file system for the file's size — and returns where the
//!   file is taken to end once any page of it vanished: the file's size
//!   now (stat of its path, when the path still names the same file and the
//!   size is below the first vanished page), else the start of the page
//!   before the first vanished one. This end is decided once per map (a
//!   later, lower fault lowers it) and is the same for every reader of it.
//! - Why a read of the next page and a stat: the kernel zeroes the tail of
//!   the page the file now ends in instead of unmapping it, so a reader can
//!   read zeros past the new end without a fault; after the truncation
//!   every page past that one faults, so a read of the page after the
//!   batch's end tells whether the batch read any such zeros.
//!
//! What `mmap` in a signal handler relies on: POSIX does not list it as
//! async-signal-safe, but on Linux it is one system call (glibc's wrapper
//! adds nothing that takes a lock), and the faulting thread holds no
//! address-space lock when the signal is delivered. The handler allocates
//! nothing, takes no lock and keeps `errno`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// "Nothing vanished" in the fault and end words.
pub(crate) const NONE: u64 = u64::MAX;

/// Registry size: maps guarded at once (the kernel's default limit on the
/// mappings of a process, `vm.max_map_count`, is 65530; a run opens every
/// capture file before it starts).
pub const SLOTS: usize = 1 << 14;

/// A registered map: the readers' side of the registry (see module docs).
#[derive(Debug)]
pub(crate) struct Guard {
    slot: usize,
    base: usize,
    /// Bytes of the file when it was mapped (the map's length).
    len: usize,
    page: usize,
    path: PathBuf,
    /// Device and inode of the file mapped, to tell whether `path` still
    /// names it.
    ident: (u64, u64),
    /// Where the file is taken to end, once decided ([`NONE`] before).
    end: AtomicU64,
}

impl Guard {
    /// Registers `map` (of the file at `path`, opened with `meta`).
    pub(crate) fn register(
        map: &memmap2::Mmap,
        path: &Path,
        meta: &std::fs::Metadata,
    ) -> Option<Guard> {
        imp::register(map.as_ptr() as usize, map.len()).map(|(slot, page)| {
            use std::os::unix::fs::MetadataExt;
            Guard {
                slot,
                base: map.as_ptr() as usize,
                len: map.len(),
                page,
                path: path.to_path_buf(),
                ident: (meta.dev(), meta.ino()),
                end: AtomicU64::new(NONE),
            }
        })
    }

    /// The per-batch check of a reader at byte `pos` (see the module
    /// docs): `None` while nothing of the file vanished, else where the
    /// file ends.
    #[inline]
    pub(crate) fn check(&self, pos: u64) -> Option<u64> {
        let next = (pos as usize | (self.page - 1)).wrapping_add(1);
        if next < self.len {
            // SAFETY: `next` is inside the map, which outlives the guard
            // (`CaptureFile` drops the guard first). A vanished page
            // faults here; the handler maps a zero page over it and the
            // read completes.
            unsafe { std::ptr::read_volatile((self.base + next) as *const u8) };
        } else {
            self.check_size();
        }
        let fault = imp::fault(self.slot);
        if fault == NONE {
            return None;
        }
        Some(self.decide(fault))
    }

    /// Lowest offset known to have vanished ([`NONE`] if none), whether or
    /// not a reader has decided the end yet.
    pub(crate) fn vanished(&self) -> Option<u64> {
        let end = self.end.load(Ordering::Acquire);
        let fault = imp::fault(self.slot);
        match (end, fault) {
            (NONE, NONE) => None,
            (NONE, f) => Some(f),
            (e, _) => Some(e),
        }
    }

    /// The last page is read: no page after it can fault, so the file's
    /// size tells whether its tail was cut (recorded as a fault there).
    #[cold]
    fn check_size(&self) {
        if let Some(size) = self.size_now() {
            if size < self.len as u64 {
                imp::record(self.slot, size);
            }
        }
    }

    /// The file's size now, when `path` still names the file mapped.
    fn size_now(&self) -> Option<u64> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(&self.path).ok()?;
        ((m.dev(), m.ino()) == self.ident).then_some(m.len())
    }

    /// Decides (once; lower later) where the file ends after a fault at
    /// `fault`.
    #[cold]
    fn decide(&self, fault: u64) -> u64 {
        let decided = self.end.load(Ordering::Acquire);
        if decided <= fault {
            return decided;
        }
        let page = self.page as u64;
        let end = match self.size_now() {
            Some(size) if size <= fault => size,
            // Grown again or replaced: the page before the fault may hold
            // zeros or new bytes; drop it too.
            _ => (fault / page).saturating_sub(1) * page,
        };
        self.end.fetch_min(end, Ordering::AcqRel);
        self.end.load(Ordering::Acquire)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        imp::unregister(self.slot);
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    use std::sync::{Once, OnceLock};

    use super::{NONE, SLOTS};

    /// One registry entry. `seq` is odd while the entry changes (a
    /// sequence lock: the handler reads `start`/`end` only between two
    /// equal even values).
    struct Slot {
        claimed: AtomicBool,
        seq: AtomicU64,
        start: AtomicUsize,
        /// End of the map rounded up to a page.
        end: AtomicUsize,
        /// Lowest offset that vanished ([`NONE`]: none).
        fault: AtomicU64,
    }

    impl Slot {
        const fn new() -> Slot {
            Slot {
                claimed: AtomicBool::new(false),
                seq: AtomicU64::new(0),
                start: AtomicUsize::new(0),
                end: AtomicUsize::new(0),
                fault: AtomicU64::new(NONE),
            }
        }
    }

    static REGISTRY: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];
    /// Entries at or above this index were never claimed (the handler
    /// scans below it only).
    static HIGH: AtomicUsize = AtomicUsize::new(0);
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    static INSTALL: Once = Once::new();
    static INSTALLED: AtomicBool = AtomicBool::new(false);
    /// The `SIGBUS` action before ours, for faults outside every map.
    static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

    pub(super) fn register(start: usize, len: usize) -> Option<(usize, usize)> {
        INSTALL.call_once(install);
        if !INSTALLED.load(Ordering::Acquire) || start == 0 || len == 0 {
            return None;
        }
        let page = PAGE.load(Ordering::Relaxed);
        let i = REGISTRY.iter().position(|s| {
            s.claimed
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })?;
        HIGH.fetch_max(i + 1, Ordering::AcqRel);
        let s = &REGISTRY[i];
        s.seq.fetch_add(1, Ordering::AcqRel);
        s.fault.store(NONE, Ordering::Release);
        s.start.store(start, Ordering::Release);
        s.end
            .store(start + len.div_ceil(page) * page, Ordering::Release);
        s.seq.fetch_add(1, Ordering::AcqRel);
        Some((i, page))
    }

    pub(super) fn unregister(i: usize) {
        let s = &REGISTRY[i];
        s.seq.fetch_add(1, Ordering::AcqRel);
        s.start.store(0, Ordering::Release);
        s.end.store(0, Ordering::Release);
        s.fault.store(NONE, Ordering::Release);
        s.seq.fetch_add(1, Ordering::AcqRel);
        s.claimed.store(false, Ordering::Release);
    }

    #[inline]
    pub(super) fn fault(i: usize) -> u64 {
        REGISTRY[i].fault.load(Ordering::Acquire)
    }

    pub(super) fn record(i: usize, offset: u64) {
        REGISTRY[i].fault.fetch_min(offset, Ordering::AcqRel);
    }

    fn install() {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if page <= 0 || (page as usize).count_ones() != 1 {
            return;
        }
        PAGE.store(page as usize, Ordering::Relaxed);
        // SAFETY: an all-zero sigaction is a valid value (no handler, no
        // flags, empty mask); sigaction only reads `new` and writes `old`,
        // both live locals. The previous action is stored before ours is
        // installed, so the handler always finds it.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) != 0 {
                return;
            }
            let _ = PREVIOUS.set(old);
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_sigbus as *const () as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut new.sa_mask);
            if libc::sigaction(libc::SIGBUS, &new, std::ptr::null_mut()) != 0 {
                return;
            }
        }
        INSTALLED.store(true, Ordering::Release);
    }

    /// The `SIGBUS` handler (see the module docs).
    extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // SAFETY: __errno_location returns this thread's errno, always
        // valid to read and write.
        let errno = unsafe { *libc::__errno_location() };
        let addr = if info.is_null() {
            0
        } else {
            // SAFETY: `info` is the kernel's siginfo for this signal (not
            // null), whose `si_addr` is the fault address for SIGBUS.
            unsafe { (*info).si_addr() as usize }
        };
        let handled = addr != 0 && zero_fill(addr);
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = errno };
        if !handled {
            chain(sig, info, ctx);
        }
    }

    /// When `addr` is inside a registered map: records the fault and maps
    /// zeros from its page to the end of the map; true if that worked.
    fn zero_fill(addr: usize) -> bool {
        let page = PAGE.load(Ordering::Relaxed);
        let high = HIGH.load(Ordering::Acquire).min(SLOTS);
        for s in &REGISTRY[..high] {
            let (start, end) = loop {
                let before = s.seq.load(Ordering::Acquire);
                if before & 1 == 1 {
                    // Being registered or unregistered: no reader can be
                    // in this map.
                    break (0, 0);
                }
                let start = s.start.load(Ordering::Acquire);
                let end = s.end.load(Ordering::Acquire);
                if s.seq.load(Ordering::Acquire) == before {
                    break (start, end);
                }
            };
            if start == 0 || addr < start || addr >= end {
                continue;
            }
            let at = addr & !(page - 1);
            s.fault.fetch_min((at - start) as u64, Ordering::SeqCst);
            // SAFETY: [at, end) lies inside this registered map (page
            // aligned: the map starts on a page, `end` is rounded up), which
            // is alive — its guard unregisters before it is unmapped, and
            // no read of it is under way then. Replacing its pages by
            // read-only anonymous zero pages changes nothing else in the
            // address space; munmap of the map later removes them too.
            let r = unsafe {
                libc::mmap(
                    at as *mut libc::c_void,
                    end - at,
                    libc::PROT_READ,
                    libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            return r != libc::MAP_FAILED;
        }
        false
    }

    /// Hands a `SIGBUS` that is not ours to the action before ours.
    fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        let (handler, flags) = match PREVIOUS.get() {
            Some(p) => (p.sa_sigaction, p.sa_flags),
            None => (libc::SIG_DFL, 0),
        };
        // SAFETY: si_code is valid in any siginfo the kernel delivers.
        let sent = !info.is_null() && unsafe { (*info).si_code } <= 0;
        if handler == libc::SIG_IGN && sent {
            return;
        }
        if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
            // SAFETY: sigaction and raise are async-signal-safe; an
            // all-zero sigaction is SIG_DFL with no flags. SIGBUS is
            // blocked while this handler runs, so the raised one is
            // delivered, with the default action (terminate, core), as
            // soon as the handler returns.
            unsafe {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
                libc::raise(sig);
            }
            return;
        }
        // SAFETY: `handler` is the address of the function installed by
        // whoever set the previous action, with the signature its flags
        // declare.
        unsafe {
            if flags & libc::SA_SIGINFO != 0 {
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    std::mem::transmute(handler);
                f(sig, info, ctx);
            } else {
                let f: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
                f(sig);
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::NONE;

    pub(super) fn register(_start: usize, _len: usize) -> Option<(usize, usize)> {
        None
    }
    pub(super) fn unregister(_i: usize) {}
    pub(super) fn fault(_i: usize) -> u64 {
        NONE
    }
    pub(super) fn record(_i: usize, _offset: u64) {}
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Write;

    /// A guarded map survives its file shrinking: the reads past the new
    /// end see zeros, the check reports the new size, and a read beyond
    /// any guarded map still reaches the previous handler (not tested
    /// here: it kills the process).
    #[test]
    fn truncated_map_reads_zeros_and_reports_the_new_end() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let mut f = std::fs::File::create(&p).unwrap();
        let bytes: Vec<u8> = (0..5 * 4096 + 100).map(|i| (i % 250 + 1) as u8).collect();
        f.write_all(&bytes).unwrap();
        let f = std::fs::File::open(&p).unwrap();
        let meta = f.metadata().unwrap();
        // SAFETY: the test's own file; it only shrinks, under the guard.
        let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
        let g = Guard::register(&map, &p, &meta).expect("registry");
        assert_eq!(g.check(0), None);
        assert_eq!(map[3 * 4096 + 5], bytes[3 * 4096 + 5]);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(2 * 4096 + 10)
            .unwrap();
        // Below the new end: the same bytes; the rest of its page: zeros,
        // without a fault; past it: zeros, after a fault.
        assert_eq!(map[2 * 4096 + 9], bytes[2 * 4096 + 9]);
        assert_eq!(map[2 * 4096 + 10], 0);
        assert_eq!(g.vanished(), None);
        assert_eq!(map[4 * 4096 + 7], 0);
        assert_eq!(g.vanished(), Some(4 * 4096));
        assert_eq!(map[3 * 4096], 0);
        assert_eq!(g.vanished(), Some(3 * 4096));
        assert_eq!(g.check(0), Some(2 * 4096 + 10));
        assert_eq!(g.vanished(), Some(2 * 4096 + 10));
        drop(g);
        drop(map);
    }

    /// Populating pages that vanished is refused, not signalled: a
    /// `MAP_POPULATE` map longer than its file is made (the rest is left
    /// unmapped), and `MADV_POPULATE_READ` (the populate helper's and the
    /// shards' call) over a truncated map fails with EFAULT. No guard is
    /// registered here, so a SIGBUS would kill the test.
    #[test]
    fn populating_vanished_pages_fails_without_a_signal() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![1u8; 8 * 4096]).unwrap();
        let f = std::fs::File::open(&p).unwrap();
        // SAFETY: the test's own file; no page past its new end is read.
        let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(4096 + 10)
            .unwrap();
        // SAFETY: as above; the map is never read past its first page.
        let populated = unsafe { memmap2::MmapOptions::new().len(8 * 4096).populate().map(&f) };
        assert!(populated.is_ok(), "{populated:?}");
        // SAFETY: the range is the live map; populating reads nothing.
        let r = unsafe {
            libc::madvise(
                map.as_ptr() as *mut libc::c_void,
                map.len(),
                libc::MADV_POPULATE_READ,
            )
        };
        let e = std::io::Error::last_os_error();
        assert_eq!((r, e.raw_os_error()), (-1, Some(libc::EFAULT)));
        assert_eq!(map[4096 + 9], 1);
    }

    /// Cutting only inside the last page raises no fault; the check at the
    /// last page finds it from the file's size.
    #[test]
    fn a_cut_inside_the_last_page_is_found_by_size() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![7u8; 4096 + 300]).unwrap();
        let f = std::fs::File::open(&p).unwrap();
        let meta = f.metadata().unwrap();
        // SAFETY: the test's own file; it only shrinks, under the guard.
        let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
        let g = Guard::register(&map, &p, &meta).unwrap();
        assert_eq!(g.check(100), None);
        assert_eq!(g.check(4096 + 10), None);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(4096 + 200)
            .unwrap();
        assert_eq!(g.check(100), None, "page 1 is still there");
        assert_eq!(g.check(4096 + 10), Some(4096 + 200));
    }
}
