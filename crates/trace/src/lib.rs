//! The trace layer: the request model every other layer speaks, streaming readers and writers for
//! the research trace formats, seeded workload generators, trace statistics and block-trace sampling (docs/architecture.md,
//! "Requests and traces").

pub mod block_stats;
pub mod error;
pub mod generate;
pub mod read;
pub mod request;
pub mod sample;
pub mod stats;
pub mod units;
pub mod write;

pub use error::{Location, TraceError};
pub use read::{open, ReaderOptions, TraceFormat, TraceReader};
pub use request::{Op, Request};
