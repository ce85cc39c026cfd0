//! The policy layer: eviction algorithms, one file each behind the one small trait
//! [`EvictionPolicy`], admission filters behind [`admission::AdmissionFilter`], and the
//! registries that build them by name with their parameters (docs/architecture.md, "Layers").

pub mod admission;
pub mod error;
pub mod eviction;
pub mod params;
pub mod registry;
pub mod util;

pub use error::PolicyError;
pub use eviction::{Evicted, EvictionPolicy, SimCounters, Space};
pub use registry::{create, PolicySpec};
