//! Cost-optimal multi-tier sizing (seed 002 ch. 3; issue 19; docs/architecture.md, "Where
//! each seed system lives"): what a block trace's reads and writes would hit in an exclusive
//! two-tier LRU cache of any tier sizes, from one pass over the trace ([`reuse`]), checked
//! against a direct simulation of the two tiers ([`exclusive`]).

pub mod exclusive;
pub mod reuse;

pub use exclusive::ExclusiveLru;
pub use reuse::{PageOp, ReuseByOp, TierHits, PAGE_BYTES, UNIT_PAGES};
