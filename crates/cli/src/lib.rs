//! The `heterarchy` command as a library: its arguments, one module per subcommand, and
//! [`run`], which the binary calls to print and the Python API calls to keep each result as the
//! JSON that `--format json` prints (docs/architecture.md, "Python API").

pub mod commands;
pub mod output;
mod progress;
mod report_charts;
mod size;
pub mod trace_args;
pub mod watch;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::output::Sink;

/// Caching for modern storage hierarchies.
#[derive(Parser, Debug)]
#[command(name = "heterarchy", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Simulate eviction policies at several cache sizes over a trace.
    Sim(commands::sim::SimArgs),
    /// Every eviction policy and admission filter, with its parameters and source.
    Policies(commands::policies::PoliciesArgs),
    /// Miss-ratio curves: LRU's at all sizes in one pass (exact or SHARDS), or any policy's
    /// simulated at log-spaced sizes.
    Mrc(commands::mrc::MrcArgs),
    /// Trace statistics, conversion and generation.
    #[command(subcommand)]
    Trace(commands::trace::TraceCommand),
    /// One built-in block workload through four views (policies, the timed hierarchy, sizing,
    /// live), a summary and report.html.
    Demo(commands::demo::DemoArgs),
    /// Device models: list the presets, probe what a device does at each queue depth.
    #[command(subcommand)]
    Device(commands::device::DeviceCommand),
    /// The analytic caching-vs-splitting model of seed 000 §4.2.1 (Eqs 4.1–4.9).
    Model(commands::model::ModelArgs),
    /// Timed simulation of a multi-tier hierarchy on device models.
    Simulate(commands::simulate::SimulateArgs),
    /// Timed simulation of a block trace on the block stacks on persistent memory: raw PM,
    /// the BTT, the BTT under each staging cache (seed 001).
    SimulatePm(commands::simulate_pm::SimulatePmArgs),
    /// Which tier sizes a budget should buy for a block trace (seed 002: HMR, Cydonia).
    Sizing(commands::sizing::SizingArgs),
    /// Replay a block trace against a live cached volume (over NBD or in this process).
    Replay(commands::replay::ReplayArgs),
    /// The seed papers' figures reproduced on device models (`experiment list` names them).
    Experiment(commands::experiment::ExperimentArgs),
    /// Serve cached block volumes over NBD (`serve nbd ...` for one, `--config` for several).
    Serve(commands::serve::ServeArgs),
    /// Cached volumes: create one, ask a server for stats, flush dirty data.
    #[command(subcommand)]
    Volume(commands::volume::VolumeCommand),
    /// Every (trace, config) pair of a sweep spec on a Dask cluster, into Parquet (runs the
    /// Python package's sweep: `pip install ./python`).
    Sweep(commands::sweep::SweepArgs),
    /// Load a server, measure throughput and latency (`loadgen kv`: memcached's protocol).
    #[command(subcommand)]
    Loadgen(commands::loadgen::LoadgenCommand),
}

/// Runs one subcommand, sending its results to `sink`.
pub fn run(command: &Command, sink: &mut Sink) -> Result<()> {
    match command {
        Command::Sim(args) => commands::sim::run(args, sink),
        Command::Mrc(args) => commands::mrc::run(args, sink),
        Command::Policies(args) => commands::policies::run(args, sink),
        Command::Demo(args) => commands::demo::run(args, sink),
        Command::Trace(command) => commands::trace::run(command, sink),
        Command::Device(command) => commands::device::run(command, sink),
        Command::Model(args) => commands::model::run(args, sink),
        Command::Simulate(args) => commands::simulate::run(args, sink),
        Command::SimulatePm(args) => commands::simulate_pm::run(args, sink),
        Command::Sizing(args) => commands::sizing::run(args, sink),
        Command::Replay(args) => commands::replay::run(args, sink),
        Command::Experiment(args) => commands::experiment::run(args, sink),
        Command::Serve(args) => commands::serve::run(args),
        Command::Volume(command) => commands::volume::run(command, sink),
        Command::Loadgen(command) => commands::loadgen::run(command, sink),
        Command::Sweep(args) => commands::sweep::run(args),
    }
}

/// Parses `args` (without the program's name) as the command line would and runs the command,
/// keeping the JSON results it would print; setting `stop` stops a trace-driven command within a
/// batch of requests, with an error. A usage error is the first line of clap's message.
pub fn run_keeping(args: &[String], stop: Arc<AtomicBool>) -> Result<Vec<serde_json::Value>> {
    let argv = std::iter::once("heterarchy").chain(args.iter().map(String::as_str));
    let cli = Cli::try_parse_from(argv).map_err(|error| {
        let text = error.to_string();
        let first = text.lines().next().unwrap_or("bad arguments");
        anyhow::anyhow!("{}", first.trim_start_matches("error: "))
    })?;
    let mut sink = Sink::Keep {
        values: Vec::new(),
        stop,
    };
    run(&cli.command, &mut sink)?;
    Ok(sink.into_kept())
}
