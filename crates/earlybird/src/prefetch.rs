//! Software prefetch hints.
//!
//! Contract: [`read`] asks the CPU to bring the cache line holding `p` into
//! the cache. It is a hint: it never faults and never changes memory,
//! whatever the address (dangling, out of range or null), so callers may
//! compute addresses past the end of a buffer. A no-op off x86_64.

/// Hints the CPU to load the cache line of `p` into all cache levels.
#[inline(always)]
pub(crate) fn read<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
