//! The `heterarchy` command: one binary, one subcommand per job.

mod commands;
mod output;
mod progress;
mod size;
mod trace_args;

use clap::{Parser, Subcommand};

/// Caching for modern storage hierarchies.
#[derive(Parser, Debug)]
#[command(name = "heterarchy", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
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
    /// Simulate a built-in workload, print a comparison and write report.html.
    Demo(commands::demo::DemoArgs),
    /// Device models: list the presets, probe what a device does at each queue depth.
    #[command(subcommand)]
    Device(commands::device::DeviceCommand),
    /// The analytic caching-vs-splitting model of seed 000 §4.2.1 (Eqs 4.1–4.9).
    Model(commands::model::ModelArgs),
    /// Timed simulation of a multi-tier hierarchy on device models.
    Simulate(commands::simulate::SimulateArgs),
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
    /// Load a server, measure throughput and latency (`loadgen kv`: memcached's protocol).
    #[command(subcommand)]
    Loadgen(commands::loadgen::LoadgenCommand),
}

fn main() {
    let cli = Cli::parse();
    let outcome = match &cli.command {
        Command::Sim(args) => commands::sim::run(args),
        Command::Mrc(args) => commands::mrc::run(args),
        Command::Policies(args) => commands::policies::run(args),
        Command::Demo(args) => commands::demo::run(args),
        Command::Trace(command) => commands::trace::run(command),
        Command::Device(command) => commands::device::run(command),
        Command::Model(args) => commands::model::run(args),
        Command::Simulate(args) => commands::simulate::run(args),
        Command::Sizing(args) => commands::sizing::run(args),
        Command::Replay(args) => commands::replay::run(args),
        Command::Experiment(args) => commands::experiment::run(args),
        Command::Serve(args) => commands::serve::run(args),
        Command::Volume(command) => commands::volume::run(command),
        Command::Loadgen(command) => commands::loadgen::run(command),
    };
    if let Err(error) = outcome {
        // One line: the whole cause chain, joined.
        eprintln!("error: {}", format!("{error:#}").replace('\n', " "));
        std::process::exit(1);
    }
}
