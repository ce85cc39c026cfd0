//! Load generators for heterarchy's servers and their peers. `run` drives a memcached
//! text-protocol server (ours or the real memcached) with a closed-loop mix of gets and sets
//! over many connections from a mio event loop, and reports throughput and latency
//! percentiles.
//!
//! Lean by design, since on a small machine the generator shares the cores with the server it
//! measures: one event-loop thread by default, no allocation per request, each connection's
//! requests written with one system call and its replies parsed in place from one read buffer
//! per thread. `block` drives a block device (a staged PM device in process, or any NBD
//! export) as fio does; `replay` replays a block trace against a cached volume.

pub mod block;
mod config;
mod connection;
mod error;
mod interval;
mod keys;
pub mod replay;
mod reply;
mod report;
mod run;
mod schedule;
mod verify;
mod workload;

pub use config::{parse_duration, Config, Distribution, ServerAddr};
pub use error::{ArgError, LoadError};
pub use interval::IntervalReport;
pub use report::Report;
pub use run::{run, run_streaming, run_together, Phase};
pub use schedule::{Diurnal, RateSchedule, RateStep};
