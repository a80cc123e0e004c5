//! Pre-reserved, zero-filled slot arrays backed by 2 MiB pages: the
//! kernel's reserved huge-page pool when the operator set one up, else
//! transparent huge pages.
//!
//! Contract: [`Arena::new`] reserves `capacity` elements. Arrays of at least
//! 2 MiB are first mapped from the reserved huge-page pool (`MAP_HUGETLB`,
//! what DPDK uses; the pool is sized with `sysctl vm.nr_hugepages=N`): the
//! mapping either gets all its pages reserved up front or fails, and then the
//! arena falls back to anonymous memory with `MADV_HUGEPAGE` (nothing
//! committed until touched). Either way a flow table of millions of slots
//! costs a few page faults instead of one per 4 KiB, and random probes miss
//! the TLB far less. Elements are zero until written; `T` must be valid when
//! all-zero ([`ZeroValid`]). Indexing is bounds-checked against the
//! capacity; the `unsafe` unchecked accessors are for the flow table's
//! per-packet path, whose indices are in range by construction (see
//! `flow/table.rs`, "Unchecked indexing"). [`Arena::reserved_pool`] says
//! which backing was used.
//!
//! Measured reasons for existing (BENCHMARKS.md): on the worst-case capture
//! (200,000 new flows per million packets) 4 KiB page faults and page
//! clearing were ~18% of the run; and on a VM whose host hands back freed
//! guest memory, first-touching fresh memory runs at ~0.25–0.7 GB/s, while
//! pages of the reserved pool stay backed between runs (~5.7 GB/s).

use std::ops::{Index, IndexMut};

/// Types for which the all-zero bit pattern is a valid value.
///
/// # Safety
/// Implement only for types made of integers, floats, arrays and structs of
/// such, and fieldless enums whose zero discriminant exists.
pub unsafe trait ZeroValid: Copy {}

/// A fixed-capacity array of zero-initialised `T` (see the module docs).
pub struct Arena<T: ZeroValid> {
    /// First element (dangling when `capacity` is 0); points into `_map`.
    ptr: std::ptr::NonNull<T>,
    capacity: usize,
    reserved_pool: bool,
    /// Owns the memory `ptr` points into.
    _map: Option<memmap2::MmapMut>,
}

// SAFETY: the arena owns its mapping exclusively (like a Vec<T>); sending it
// to another thread moves that ownership, and shared references only give
// `&T` access.
unsafe impl<T: ZeroValid + Send> Send for Arena<T> {}
// SAFETY: as above; `&Arena` only hands out `&T`.
unsafe impl<T: ZeroValid + Sync> Sync for Arena<T> {}

/// Environment variable that keeps arenas out of the reserved huge-page
/// pool (for measuring the difference).
pub const NO_POOL_ENV: &str = "EARLYBIRD_NO_HUGETLB";

impl<T: ZeroValid> Arena<T> {
    /// Reserves `capacity` zeroed elements. Falls back to no backing (and a
    /// capacity of 0) only if `capacity` is 0.
    pub fn new(capacity: usize) -> std::io::Result<Arena<T>> {
        Self::with_pool(capacity, true)
    }

    /// Reserves `capacity` zeroed elements outside the huge-page pool:
    /// nothing is committed until touched (for arrays most runs never use,
    /// such as the IPv6 addresses of a table).
    pub fn new_lazy(capacity: usize) -> std::io::Result<Arena<T>> {
        Self::with_pool(capacity, false)
    }

    fn with_pool(capacity: usize, pool: bool) -> std::io::Result<Arena<T>> {
        let bytes = capacity.saturating_mul(std::mem::size_of::<T>());
        if bytes == 0 {
            return Ok(Arena {
                ptr: std::ptr::NonNull::dangling(),
                capacity: 0,
                reserved_pool: false,
                _map: None,
            });
        }
        let (mut map, reserved_pool) = match pool.then(|| Self::map_pool(bytes)).flatten() {
            Some(m) => (m, true),
            None => {
                let map = memmap2::MmapOptions::new().len(bytes).map_anon()?;
                #[cfg(target_os = "linux")]
                {
                    // A hint: without THP the kernel simply keeps 4 KiB pages.
                    let _ = map.advise(memmap2::Advice::HugePage);
                }
                (map, false)
            }
        };
        // Mappings are page-aligned, enough for any of our element types.
        assert_eq!(map.as_ptr() as usize % std::mem::align_of::<T>(), 0);
        let ptr = std::ptr::NonNull::new(map.as_mut_ptr() as *mut T)
            .ok_or_else(|| std::io::Error::other("null mapping"))?;
        Ok(Arena {
            ptr,
            capacity,
            reserved_pool,
            _map: Some(map),
        })
    }

    /// Maps `bytes` (rounded up to whole 2 MiB pages) from the reserved
    /// huge-page pool; None when the array is small, the pool is not set up
    /// or has too few free pages (the kernel refuses the whole mapping, so a
    /// later page fault can never fail), or the OS is not Linux.
    fn map_pool(bytes: usize) -> Option<memmap2::MmapMut> {
        const HUGE: usize = 2 << 20;
        if !cfg!(target_os = "linux") || bytes < HUGE || std::env::var_os(NO_POOL_ENV).is_some() {
            return None;
        }
        let len = bytes.div_ceil(HUGE) * HUGE;
        memmap2::MmapOptions::new()
            .len(len)
            .huge(Some(21))
            .map_anon()
            .ok()
    }

    /// True when the array lives in the reserved huge-page pool.
    pub fn reserved_pool(&self) -> bool {
        self.reserved_pool
    }

    /// Number of elements.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The elements as a slice.
    #[inline(always)]
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `ptr` points to `capacity` elements of a live mapping
        // (or dangles with capacity 0), aligned (checked in `new`),
        // zero-filled by the kernel, and T is valid when zero (ZeroValid).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.capacity) }
    }

    /// The elements as a mutable slice.
    #[inline(always)]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in `as_slice`; `&mut self` gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.capacity) }
    }

    /// Element `i` without the bounds check.
    ///
    /// # Safety
    /// `i < self.capacity()`.
    #[inline(always)]
    pub unsafe fn get_unchecked(&self, i: usize) -> &T {
        debug_assert!(i < self.capacity, "arena index {i} out of range");
        // SAFETY: in range (the caller's promise); see `as_slice`.
        unsafe { &*self.ptr.as_ptr().add(i) }
    }

    /// Element `i`, mutably, without the bounds check.
    ///
    /// # Safety
    /// `i < self.capacity()`.
    #[inline(always)]
    pub unsafe fn get_unchecked_mut(&mut self, i: usize) -> &mut T {
        debug_assert!(i < self.capacity, "arena index {i} out of range");
        // SAFETY: in range (the caller's promise); `&mut self` is exclusive.
        unsafe { &mut *self.ptr.as_ptr().add(i) }
    }

    /// `len` elements from `start` without the bounds check.
    ///
    /// # Safety
    /// `start + len <= self.capacity()`.
    #[inline(always)]
    pub unsafe fn slice_unchecked(&self, start: usize, len: usize) -> &[T] {
        debug_assert!(start + len <= self.capacity, "arena range out of range");
        // SAFETY: in range (the caller's promise); see `as_slice`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(start), len) }
    }

    /// `len` elements from `start`, mutably, without the bounds check.
    ///
    /// # Safety
    /// `start + len <= self.capacity()`.
    #[inline(always)]
    pub unsafe fn slice_unchecked_mut(&mut self, start: usize, len: usize) -> &mut [T] {
        debug_assert!(start + len <= self.capacity, "arena range out of range");
        // SAFETY: in range (the caller's promise); `&mut self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(start), len) }
    }

    /// Raw pointer to element `i` (for prefetching; `i` may be out of range).
    #[inline(always)]
    pub fn ptr(&self, i: usize) -> *const T {
        self.ptr.as_ptr().wrapping_add(i)
    }
}

impl<T: ZeroValid> Index<usize> for Arena<T> {
    type Output = T;
    #[inline(always)]
    fn index(&self, i: usize) -> &T {
        assert!(i < self.capacity, "arena index {i} out of range");
        // SAFETY: in range (checked above); see `as_slice`.
        unsafe { &*self.ptr.as_ptr().add(i) }
    }
}

impl<T: ZeroValid> IndexMut<usize> for Arena<T> {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut T {
        assert!(i < self.capacity, "arena index {i} out of range");
        // SAFETY: in range (checked above); `&mut self` is exclusive.
        unsafe { &mut *self.ptr.as_ptr().add(i) }
    }
}

// SAFETY: plain integers.
unsafe impl ZeroValid for u16 {}
// SAFETY: plain integers.
unsafe impl ZeroValid for u32 {}
// SAFETY: plain integers.
unsafe impl ZeroValid for u64 {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_and_writable() {
        let mut a: Arena<u32> = Arena::new(1 << 20).unwrap();
        assert_eq!(a.capacity(), 1 << 20);
        assert!(a.as_slice().iter().take(1000).all(|&x| x == 0));
        a[12345] = 7;
        assert_eq!(a[12345], 7);
        let e: Arena<u32> = Arena::new(0).unwrap();
        assert!(e.as_slice().is_empty());
    }

    #[test]
    fn pool_or_fallback_both_zeroed_and_writable() {
        let total = std::fs::read_to_string("/proc/sys/vm/nr_hugepages")
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .unwrap_or(0);
        let mut a: Arena<u64> = Arena::new(3 << 18).unwrap(); // 6 MiB: 3 pages
        if total == 0 {
            assert!(!a.reserved_pool(), "no pool: transparent huge pages");
        }
        assert_eq!(a.capacity(), 3 << 18);
        assert!(a.as_slice().iter().step_by(4096).all(|&x| x == 0));
        let last = a.capacity() - 1;
        a[last] = 9;
        assert_eq!(a[last], 9);
        // Small arrays never take whole 2 MiB pages from the pool.
        let small: Arena<u64> = Arena::new(1000).unwrap();
        assert!(!small.reserved_pool());
    }

    #[test]
    #[should_panic]
    fn out_of_range_panics_not_ub() {
        let a: Arena<u32> = Arena::new(4).unwrap();
        let _ = a[4];
    }
}
