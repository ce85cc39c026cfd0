//! Cost-optimal multi-tier sizing (seed 002 ch. 3; docs/simulation.md, "Sizing a hierarchy";
//! docs/architecture.md, "Where each seed system lives"): what a block trace's reads and writes
//! would hit in an exclusive two-tier LRU cache of any tier sizes, from one pass over the trace
//! ([`reuse`]), checked against a direct simulation of the two tiers ([`exclusive`]); the
//! thesis' cost and latency model of a configuration ([`model`]); and the searches for the
//! sizes a budget should buy ([`search`]: exhaustive, and Cydonia).

pub mod exclusive;
pub mod model;
pub mod reuse;
pub mod search;

pub use exclusive::ExclusiveLru;
pub use model::{
    hit_miss_ratio, seed002_configs, seed002_device, sizing_device, SizingDevice, TierConfig,
    WritePolicy, TABLE_3_1,
};
pub use reuse::{PageOp, ReuseByOp, TierHits, PAGE_BYTES, UNIT_PAGES};
pub use search::{Evaluator, Exhaustive, SearchResult, Sizing, CYDONIA_EVALMAX, CYDONIA_STEP};
