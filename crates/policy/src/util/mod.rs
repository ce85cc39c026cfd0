//! Building blocks shared by the eviction algorithms.

pub mod dense_residents;
pub mod frequency;
pub mod heap;
pub mod key_table;
pub mod keyed_queue;
pub mod list;
#[cfg(test)]
pub(crate) mod model_check;
pub mod prefetch;
pub mod resident_draw;
pub mod rng;

pub use list::{List, Slab, NIL};

/// Writes `value` as the per-slot datum of slab slot `index`. Slabs hand out fresh slots in
/// order, so a slot is either already covered or exactly the next one.
#[inline]
pub fn store_at<T>(values: &mut Vec<T>, index: u32, value: T) {
    match values.get_mut(index as usize) {
        Some(slot) => *slot = value,
        None => {
            debug_assert_eq!(values.len(), index as usize);
            values.push(value);
        }
    }
}

/// Takes `bytes` off `count`, a byte count that included them. An underflow is a bug in the
/// policy's accounting: caught in debug builds, and never wrapped in release builds into a
/// count that makes the cache look full for ever.
#[inline]
pub fn release_bytes(count: &mut u64, bytes: u64) {
    debug_assert!(bytes <= *count, "{bytes} bytes leave a count of {count}");
    *count = count.saturating_sub(bytes);
}
