//! `heterarchy model` (being built for issue 3).

use anyhow::{bail, Result};
use clap::Args;

/// Arguments of `heterarchy model`.
#[derive(Args, Debug)]
pub struct ModelArgs {}

/// Runs the subcommand.
pub fn run(_args: &ModelArgs) -> Result<()> {
    bail!("not built yet")
}
