//! Building blocks shared by the eviction algorithms.

pub mod heap;
pub mod key_table;
pub mod list;
#[cfg(test)]
pub(crate) mod model_check;
pub mod prefetch;

pub use list::{List, Slab, NIL};
