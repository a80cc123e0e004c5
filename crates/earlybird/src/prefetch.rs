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

/// Hints the CPU to fetch the cache line of `p` for writing (PREFETCHW:
/// ownership is taken ahead, so a store to a line another core last read
/// does not wait for it).
#[inline(always)]
pub(crate) fn write<T>(p: *const T) {
    // PREFETCHW (0F 0D /1) directly: the intrinsic falls back to a read
    // prefetch unless the target enables `prfchw`. CPUs without it run the
    // opcode as a no-op.
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults, whatever the address,
    // and touches no register or flag.
    unsafe {
        std::arch::asm!("prefetchw [{0}]", in(reg) p, options(nostack, preserves_flags));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
