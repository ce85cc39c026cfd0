//! The timed discrete-event simulator (issue 3): multi-tier hierarchies on device models, on a
//! virtual clock, deterministic.

pub mod run;
pub mod series;

pub use run::{run_timed, Arrivals, DeviceResult, Load, TimedResult};
pub use series::{DeviceSeries, TimeSeries};
