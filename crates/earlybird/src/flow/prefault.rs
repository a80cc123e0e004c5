//! Background population of flow-table pages just ahead of their first use.
//!
//! Contract: a [`Prefaulter`] owns one helper thread per flow table
//! (started by [`super::table::FlowTable::start_prefault`], which the
//! pipeline calls only when the shards leave a core idle). The
//! table tells it, once per batch, how many slots it has ever used
//! ([`Prefaulter::advance`]: no atomic read-modify-write; a store and a
//! wake-up only every [`WINDOW`]` / 2` new slots); once it has used
//! [`START`] slots, the helper asks the kernel to populate the pages of the
//! next [`WINDOW`] slots of every slot array with
//! `madvise(MADV_POPULATE_WRITE)` (Linux ≥ 5.14); the consumers' arrays
//! indexed by slot (`Consumer::slot_arrays`: the analyzers') are among
//! them. Populating never changes
//! the contents of a page that is already there, and fresh pages are zero
//! either way, so the table sees the same memory it would see without the
//! helper; only who pays the page clearing changes.
//! [`populate_now`] does the same on the caller's thread for the first
//! slots, for a live capture before its first packet (see its docs).
//! Dropping the prefaulter stops and joins the thread, so it must be dropped
//! before the memory it populates is unmapped (the table declares it
//! first). When the kernel refuses (older kernel, no memory) the helper
//! stops and the table faults its pages itself, as before.
//!
//! Measured reason for existing (BENCHMARKS.md): the worst-case capture
//! opens a flow every 5 packets, and clearing the fresh pages of its slots
//! (`clear_page_erms`) was ~10 % of the shard thread's time. Slots are used
//! in order (`high` grows by one), so the next pages are known in advance
//! and another core can clear them. Set [`NO_PREFAULT_ENV`] to measure
//! without it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Slots populated ahead of the high-water mark: 4 MiB of the smallest slot
/// array (16-byte tails), so the helper works at least one 2 MiB page ahead
/// of the table in every array (with a smaller window the table kept
/// waiting on the page the helper was clearing).
pub const WINDOW: usize = 256 * 1024;

/// Slots a table uses before the helper starts: small captures commit no
/// memory ahead of use.
pub const START: usize = 32 * 1024;

/// Environment variable that turns the helper off.
pub const NO_PREFAULT_ENV: &str = "EARLYBIRD_NO_PREFAULT";

/// A slot array: its first byte and the bytes each slot takes.
#[derive(Debug, Clone, Copy)]
pub struct Region {
    /// Address of slot 0.
    pub base: *const u8,
    /// Bytes per slot.
    pub per_slot: usize,
}

// SAFETY: only the address travels to the helper thread, which hands it to
// madvise and never dereferences it.
unsafe impl Send for Region {}

struct Shared {
    /// Populate slots below this.
    target: AtomicUsize,
    stop: AtomicBool,
}

/// The helper of one table (see the module docs).
pub struct Prefaulter {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// Last target handed to the helper (table-thread local).
    asked: usize,
    capacity: usize,
}

impl Prefaulter {
    /// Starts a helper for `capacity` slots of `regions`; None when it is
    /// turned off, the table is small (at most [`START`] slots, where there
    /// is nothing to gain), or the thread cannot start.
    pub fn start(regions: Vec<Region>, capacity: usize) -> Option<Prefaulter> {
        if !cfg!(target_os = "linux")
            || capacity <= START
            || std::env::var_os(NO_PREFAULT_ENV).is_some()
        {
            return None;
        }
        let shared = Arc::new(Shared {
            target: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("eb-prefault".into())
            .spawn(move || helper(&s, &regions, capacity))
            .ok()?;
        Some(Prefaulter {
            shared,
            thread: Some(thread),
            asked: 0,
            capacity,
        })
    }

    /// The table has used slots below `high`: keeps the helper
    /// [`WINDOW`] slots ahead.
    #[inline]
    pub fn advance(&mut self, high: usize) {
        if high >= START && high + WINDOW / 2 > self.asked && self.asked < self.capacity {
            self.asked = (high + WINDOW).min(self.capacity);
            self.shared.target.store(self.asked, Ordering::Release);
            if let Some(t) = &self.thread {
                t.thread().unpark();
            }
        }
    }
}

impl Drop for Prefaulter {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// Populates the pages of slots `[0, slots)` of every region now, on the
/// caller's thread; false when the kernel refuses (the pages are then
/// faulted in at first use, as without it).
///
/// For a live capture, called before the first packet: a packet that
/// arrives while the shard clears its table's first pages waits in the
/// socket's ring, and in a virtual machine the first touch of guest memory
/// costs the host's work too (BENCHMARKS.md, "Live rate": tens of ms of
/// stalls in the first 0.3 s of traffic, enough to empty an AF_XDP fill
/// ring).
pub fn populate_now(regions: &[Region], slots: usize) -> bool {
    if !cfg!(target_os = "linux") || std::env::var_os(NO_PREFAULT_ENV).is_some() {
        return false;
    }
    regions.iter().all(|r| populate(r, 0, slots))
}

/// `MADV_POPULATE_WRITE` over the pages of slots `[from, to)` of `r`.
fn populate(r: &Region, from: usize, to: usize) -> bool {
    const PAGE: usize = 4096;
    let base = r.base as usize;
    let start = (base + from * r.per_slot) & !(PAGE - 1);
    let end = (base + to * r.per_slot).next_multiple_of(PAGE);
    if end <= start {
        return true;
    }
    // SAFETY: [start, end) lies within the region's mapping (mappings are
    // whole pages, and callers keep it mapped for the call: the table's
    // own thread, or the helper joined before the table unmaps it or
    // drops its consumers); POPULATE_WRITE only faults pages in, it never
    // changes what a present page holds, so even a range freed and mapped
    // again meanwhile (a consumer replaced while the helper runs) keeps
    // its contents, and one no longer mapped makes the call fail.
    let rc = unsafe {
        libc::madvise(
            start as *mut libc::c_void,
            end - start,
            libc::MADV_POPULATE_WRITE,
        )
    };
    rc == 0
}

/// The helper thread: populates up to the target, then sleeps until woken.
fn helper(shared: &Shared, regions: &[Region], capacity: usize) {
    let mut done = 0;
    while !shared.stop.load(Ordering::Acquire) && done < capacity {
        let target = shared.target.load(Ordering::Acquire).min(capacity);
        if target > done {
            for r in regions {
                if !populate(r, done, target) {
                    return;
                }
            }
            done = target;
            continue;
        }
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::arena::Arena;

    /// Pages of `[ptr, ptr + len)` resident in memory.
    fn resident(ptr: *const u8, len: usize) -> usize {
        let mut vec = vec![0u8; len.div_ceil(4096)];
        // SAFETY: ptr is page-aligned and the range lies in a live mapping;
        // `vec` has one byte per page.
        let rc = unsafe { libc::mincore(ptr as *mut libc::c_void, len, vec.as_mut_ptr()) };
        assert_eq!(rc, 0);
        vec.iter().filter(|&&b| b & 1 != 0).count()
    }

    #[test]
    fn small_tables_get_no_helper() {
        assert!(Prefaulter::start(Vec::new(), START).is_none());
    }

    #[test]
    fn populates_the_first_slots_now_and_keeps_contents() {
        if std::env::var_os(NO_PREFAULT_ENV).is_some() {
            return;
        }
        // 4 * START slots of 64 bytes; the first START populated.
        let slots = 4 * START;
        let a: Arena<u64> = Arena::new_lazy(slots * 8).unwrap();
        let region = Region {
            base: a.ptr(0).cast(),
            per_slot: 64,
        };
        let first = START * 64;
        assert_eq!(resident(region.base, first), 0, "nothing touched yet");
        assert!(populate_now(&[region], START));
        assert_eq!(resident(region.base, first), first / 4096);
        assert_eq!((a[0], a[START * 8 - 1]), (0, 0));
    }

    #[test]
    fn populates_ahead_and_keeps_contents() {
        // 2 * WINDOW slots of 64 bytes = 32 MiB.
        let slots = 2 * WINDOW;
        let mut a: Arena<u64> = Arena::new(slots * 8).unwrap();
        a[0] = 7;
        a[WINDOW * 8] = 9;
        let region = Region {
            base: a.ptr(0).cast(),
            per_slot: 64,
        };
        let mut p = Prefaulter::start(vec![region], slots).expect("helper starts");
        // Below START slots nothing is asked for.
        p.advance(START - 1);
        assert_eq!(p.asked, 0);
        // Slot 3/4 WINDOW in use: the helper goes on to 1 3/4 WINDOW.
        p.advance(WINDOW * 3 / 4);
        assert_eq!(p.asked, WINDOW * 7 / 4);
        let first = WINDOW * 64 * 7 / 4;
        let pages = first / 4096;
        let mut waited = 0;
        while resident(region.base, first) < pages && waited < 500 {
            std::thread::sleep(std::time::Duration::from_millis(10));
            waited += 1;
        }
        assert_eq!(resident(region.base, first), pages, "window populated");
        drop(p);
        assert_eq!((a[0], a[WINDOW * 8], a[WINDOW * 8 + 1]), (7, 9, 0));
    }
}
