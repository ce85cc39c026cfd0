//! `heterarchy device` (being built for issue 3).

use anyhow::{bail, Result};
use clap::Subcommand;

/// Subcommands of `heterarchy device`.
#[derive(Subcommand, Debug)]
pub enum DeviceCommand {
    /// List the device presets.
    List,
}

/// Runs the subcommand.
pub fn run(_command: &DeviceCommand) -> Result<()> {
    bail!("not built yet")
}
