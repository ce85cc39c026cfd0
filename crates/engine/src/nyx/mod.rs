//! NyxCache (seed 000 chapter 5, seed 003): sharing one persistent memory among cache tenants.
//! Written once for the live key-value server and the timed simulator (docs/architecture.md,
//! "One policy code, two executors"): the cost model (M2, [`cost`]) and each tenant's gate on
//! the device (M1, [`regulator`]).

pub mod cost;
pub mod regulator;

pub use cost::{MaxIopsProfile, ProfileLoad, TimedDevice};
pub use regulator::{Regulator, Usage};
