//! The policy layer: eviction algorithms, one file each behind the one small trait
//! [`EvictionPolicy`] (docs/architecture.md, "Layers"), and the registry that builds them by name.

pub mod eviction;
pub mod registry;
pub mod util;

pub use eviction::{Evicted, EvictionPolicy, SimCounters};
pub use registry::{create, PolicyError, POLICY_NAMES};
