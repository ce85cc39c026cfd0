//! The memory-prefetch hint behind [`crate::EvictionPolicy`]'s prefetch methods.

/// Asks the CPU to start loading the cache line holding `value`; a hint with no effect on
/// results (and none at all off x86-64).
#[inline(always)]
pub fn prefetch_read<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch hint never faults and does not access memory architecturally; the
    // pointer comes from a reference, so it is valid anyway.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
