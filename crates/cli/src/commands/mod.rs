//! One module per subcommand.

pub mod demo;
pub mod device;
pub mod experiment;
pub mod loadgen;
pub mod model;
pub mod mrc;
pub mod policies;
pub mod replay;
pub mod serve;
pub mod sim;
pub mod simulate;
pub mod simulate_pm;
pub mod sizing;
pub mod sweep;
pub mod trace;
pub mod volume;

/// Threads for a command that spreads jobs over the machine: `--threads` when given, else
/// one per core the process may use.
pub fn threads_or_cores(threads: Option<usize>) -> usize {
    threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |cores| cores.get()))
}
