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
}

fn main() {
    let cli = Cli::parse();
    let outcome = match &cli.command {
        Command::Sim(args) => commands::sim::run(args),
    };
    if let Err(error) = outcome {
        // One line: the whole cause chain, joined.
        eprintln!("error: {}", format!("{error:#}").replace('\n', " "));
        std::process::exit(1);
    }
}
