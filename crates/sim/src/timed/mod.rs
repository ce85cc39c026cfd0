//! The timed discrete-event simulator (docs/simulation.md, "The timed simulator"): multi-tier
//! hierarchies on device models, on a virtual clock, deterministic.

pub mod config;
pub(crate) mod events;
pub mod hfio;
pub mod run;
pub mod series;
pub mod split_search;

pub use config::{ConfigError, Hierarchy, Scheme};
pub use run::{
    run_timed, run_timed_phases, run_timed_with_progress, Arrivals, ClientStep, DeviceResult, Load,
    Phase, TimedResult,
};
pub use series::{DeviceSeries, TimeSeries};
pub use split_search::{run_splits, search_split, SplitPoint, SplitSearch};
