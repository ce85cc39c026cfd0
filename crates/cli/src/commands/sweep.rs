//! `heterarchy sweep`: runs a sweep spec on a Dask cluster. Dask is Python, so the sweep lives
//! in the Python package (python/heterarchy/sweep.py); this command hands its arguments to it,
//! so that the command line and `heterarchy.sweep` are one piece of code.

use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Args;

/// Arguments of `heterarchy sweep`, passed on as they are.
#[derive(Args, Debug)]
#[command(disable_help_flag = true)]
pub struct SweepArgs {
    /// `SPEC.toml [--scheduler tcp://HOST:PORT] [-o results.parquet]`; `--help` for more.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// The Python that runs the sweep: `HETERARCHY_PYTHON`, else `python3` on the path.
fn python() -> String {
    std::env::var("HETERARCHY_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// Runs `python -m heterarchy sweep ARGS...` and exits as it does.
pub fn run(args: &SweepArgs) -> Result<()> {
    let python = python();
    let found = Command::new(&python)
        .args(["-c", "import heterarchy.sweep"])
        .output()
        .with_context(|| format!("sweep runs on Python, and {python} cannot be started"))?;
    if !found.status.success() {
        bail!(
            "sweep runs the Python package heterarchy, which {python} cannot import: install it \
             with `pip install ./python`, or name a Python that has it in HETERARCHY_PYTHON"
        );
    }
    let status = Command::new(&python)
        .args(["-m", "heterarchy", "sweep"])
        .args(&args.args)
        .status()
        .with_context(|| format!("cannot start {python}"))?;
    if !status.success() {
        // The sweep printed its own one-line error.
        std::process::exit(status.code().unwrap_or(1));
    }
    Ok(())
}
