//! Building blocks shared by the eviction algorithms.

pub mod heap;
pub mod key_table;
pub mod list;
#[cfg(test)]
pub(crate) mod model_check;
pub mod prefetch;

pub use list::{List, Slab, NIL};

/// Key → slab index map with a fast non-cryptographic hash: trace keys are not adversarial.
pub type KeyMap = rustc_hash::FxHashMap<u64, u32>;
