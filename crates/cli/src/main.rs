//! The `heterarchy` command: one binary, one subcommand per job (the commands live in the
//! library, src/lib.rs, which the Python API shares).

use clap::Parser;
use heterarchy::output::Sink;
use heterarchy::Cli;

fn main() {
    let cli = Cli::parse();
    if let Err(error) = heterarchy::run(&cli.command, &mut Sink::Print) {
        // One line: the whole cause chain, joined.
        eprintln!("error: {}", format!("{error:#}").replace('\n', " "));
        std::process::exit(1);
    }
}
