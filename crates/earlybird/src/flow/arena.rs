//! Pre-reserved, zero-filled slot arrays backed by anonymous memory with
//! transparent huge pages.
//!
//! Contract: [`Arena::new`] reserves `capacity` elements of address space
//! (nothing is committed until touched) and asks the kernel for 2 MiB pages
//! (`MADV_HUGEPAGE`), so a flow table of millions of slots costs a few page
//! faults instead of one per 4 KiB, and random probes miss the TLB far less.
//! Elements are zero until written; `T` must be valid when all-zero
//! ([`ZeroValid`]). Indexing is bounds-checked against the capacity.
//!
//! Measured reason for existing: on the worst-case capture (200,000 new flows
//! per million packets) 4 KiB page faults and page clearing were ~18% of the
//! run (perf), see BENCHMARKS.md.

use std::ops::{Index, IndexMut};

/// Types for which the all-zero bit pattern is a valid value.
///
/// # Safety
/// Implement only for types made of integers, floats, arrays and structs of
/// such, and fieldless enums whose zero discriminant exists.
pub unsafe trait ZeroValid: Copy {}

/// A fixed-capacity array of zero-initialised `T` (see the module docs).
pub struct Arena<T: ZeroValid> {
    map: Option<memmap2::MmapMut>,
    capacity: usize,
    _t: std::marker::PhantomData<T>,
}

impl<T: ZeroValid> Arena<T> {
    /// Reserves `capacity` zeroed elements. Falls back to no backing (and a
    /// capacity of 0) only if `capacity` is 0.
    pub fn new(capacity: usize) -> std::io::Result<Arena<T>> {
        let bytes = capacity.saturating_mul(std::mem::size_of::<T>());
        if bytes == 0 {
            return Ok(Arena {
                map: None,
                capacity: 0,
                _t: std::marker::PhantomData,
            });
        }
        let map = memmap2::MmapOptions::new().len(bytes).map_anon()?;
        #[cfg(target_os = "linux")]
        {
            // A hint: without THP the kernel simply keeps 4 KiB pages.
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        debug_assert_eq!(map.as_ptr() as usize % std::mem::align_of::<T>(), 0);
        Ok(Arena {
            map: Some(map),
            capacity,
            _t: std::marker::PhantomData,
        })
    }

    /// Number of elements.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The elements as a slice.
    #[inline(always)]
    pub fn as_slice(&self) -> &[T] {
        match &self.map {
            // SAFETY: the mapping is page-aligned (≥ align_of::<T>() for our
            // types, checked above), `capacity * size_of::<T>()` bytes long,
            // zero-filled by the kernel, and T is valid when zero (ZeroValid).
            Some(m) => unsafe { std::slice::from_raw_parts(m.as_ptr() as *const T, self.capacity) },
            None => &[],
        }
    }

    /// The elements as a mutable slice.
    #[inline(always)]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        match &mut self.map {
            // SAFETY: as in `as_slice`; `&mut self` gives exclusive access.
            Some(m) => unsafe {
                std::slice::from_raw_parts_mut(m.as_mut_ptr() as *mut T, self.capacity)
            },
            None => &mut [],
        }
    }

    /// Raw pointer to element `i` (for prefetching; `i` may be out of range).
    #[inline(always)]
    pub fn ptr(&self, i: usize) -> *const T {
        match &self.map {
            Some(m) => (m.as_ptr() as *const T).wrapping_add(i),
            None => std::ptr::null(),
        }
    }
}

impl<T: ZeroValid> Index<usize> for Arena<T> {
    type Output = T;
    #[inline(always)]
    fn index(&self, i: usize) -> &T {
        &self.as_slice()[i]
    }
}

impl<T: ZeroValid> IndexMut<usize> for Arena<T> {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.as_mut_slice()[i]
    }
}

// SAFETY: plain integers.
unsafe impl ZeroValid for u32 {}

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
    #[should_panic]
    fn out_of_range_panics_not_ub() {
        let a: Arena<u32> = Arena::new(4).unwrap();
        let _ = a[4];
    }
}
