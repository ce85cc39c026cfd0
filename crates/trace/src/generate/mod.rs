//! Seeded, deterministic workload generators: uniform, Zipf, hot-spot and YCSB A–F key streams
//! with sequential scans mixed in, object-size distributions, read/write mixes and a
//! constant-rate clock, and block I/O workloads with offsets (`block_io.rs`) (docs/architecture.md, "Requests and traces").
//!
//! Determinism: a spec gives the same requests bit for bit on every run. Randomness comes from
//! xoshiro256++ with our own integer and real conversions, so it does not change with `rand`
//! versions; Zipf ranks and Pareto/log-normal sizes also go through `f64::ln`/`exp`, which the
//! platform's math library computes, so another platform may in rare cases round one draw
//! differently.

mod block_io;
mod keys;
mod random;
mod size;
mod spec;
mod workload;
mod zipf;

pub use block_io::{BlockGenerator, BlockWorkloadSpec, BLOCK_IO_PATTERN, EXTENT_PAGES};
pub use random::{mix64, unit_from_bits, Random};
pub use size::SizeDistribution;
pub use spec::{
    Pattern, RequestKind, SpecError, WorkloadSpec, YcsbWorkload, MAX_KEYS, YCSB_ITEM_COUNT,
    YCSB_MAX_SCAN_LENGTH, YCSB_THETA,
};
pub use workload::Generator;
pub use zipf::ZipfSampler;

use crate::TraceReader;

/// A reader of the requests `spec` describes, or why the spec cannot be used.
pub fn generator(spec: &WorkloadSpec) -> Result<Box<dyn TraceReader>, SpecError> {
    Ok(Box::new(Generator::new(spec)?))
}
