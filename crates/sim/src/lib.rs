//! The simulation layer: the fast hit-ratio simulator, miss-ratio curves, multi-tier sizing and
//! how well block-trace samples represent their traces.

pub mod analytic;
pub mod cache_sim;
mod error;
pub mod mrc;
pub mod nyx;
pub mod parallel;
pub mod poly;
pub mod sampling;
pub mod sizing;
pub mod staging;
pub mod timed;

pub use error::{ControllerError, PolyError};
