//! NyxCache (seed 000 chapter 5, seed 003): sharing one persistent memory among cache tenants.
//! Written once for the live key-value server and the timed simulator (docs/architecture.md,
//! "One policy code, two executors"): the cost model (M2, [`cost`]), each tenant's gate on
//! the device (M1, [`regulator`]) and the sharing policies ([`policy`]).

pub mod cost;
pub mod performance;
pub mod policy;
pub mod regulator;

pub use cost::{MaxIopsProfile, ProfileLoad, TimedDevice};
pub use performance::{Performance, PerformanceSnapshot};
pub use policy::{PolicyName, SharingPolicy};
pub use regulator::{Regulator, Usage};
