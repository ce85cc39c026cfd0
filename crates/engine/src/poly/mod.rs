//! PolyEMT (seed 004 §3–4; docs/architecture.md, "PolyEMT"): one memory tier in front of an SSD
//! whose pages change role between persistent write cache, volatile read cache and compressed
//! store, and the search that sets the two knobs. `tier.rs` holds the pages and decides where
//! each goes; `search.rs` moves the knobs.

mod search;
mod tier;

pub use search::{
    knob_grid, offline_sweep, KnobSearch, SearchConfig, SearchPhase, SearchStep, Window,
};
pub use tier::{Found, Knobs, PolyAction, PolyTier, SECTORS_PER_PAGE, SECTOR_BYTES};

#[cfg(test)]
mod model_tests;
