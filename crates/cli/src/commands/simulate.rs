//! `heterarchy simulate` (being built for issue 3).

use anyhow::{bail, Result};
use clap::Args;

/// Arguments of `heterarchy simulate`.
#[derive(Args, Debug)]
pub struct SimulateArgs {}

/// Runs the subcommand.
pub fn run(_args: &SimulateArgs) -> Result<()> {
    bail!("not built yet")
}
