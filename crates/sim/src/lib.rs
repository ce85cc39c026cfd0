//! The simulation layer: the fast hit-ratio simulator and miss-ratio curves.

pub mod analytic;
pub mod cache_sim;
pub mod mrc;
pub mod nyx;
pub mod parallel;
pub mod sizing;
pub mod staging;
pub mod timed;
