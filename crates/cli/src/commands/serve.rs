//! `heterarchy serve`: block volumes over NBD (issue 5), from a config file or, for one export,
//! from the command line as nbdkit starts.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::{Args, Subcommand};

use heterarchy_engine::{AdmissionScheme, WriteMode};
use heterarchy_server::config::{ServeConfig, ServerSection};
use heterarchy_server::ListenAddr;
use heterarchy_volume::VolumeConfig;

use crate::size::parse_bytes;

/// Arguments of `heterarchy serve`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ServeArgs {
    /// A TOML file of exports and addresses (see the README).
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub kind: Option<ServeKind>,
}

/// What to serve without a config file.
#[derive(Subcommand, Debug)]
pub enum ServeKind {
    /// One cached block volume over NBD.
    Nbd(NbdArgs),
}

/// One export from the command line.
#[derive(Args, Debug)]
pub struct NbdArgs {
    /// HOST:PORT or unix:PATH.
    #[arg(long, default_value = "127.0.0.1:10809")]
    pub listen: ListenAddr,
    /// The export name clients ask for (the empty name also reaches it).
    #[arg(long, default_value = "volume")]
    pub export: String,
    /// The capacity device: file:PATH[:SIZE][:direct], blockdev:PATH or ram:SIZE.
    #[arg(long)]
    pub backing: String,
    /// The cache device: ram:SIZE, pmem:PATH:SIZE or file:PATH:SIZE.
    #[arg(long)]
    pub cache: String,
    /// Open CAS cache mode.
    #[arg(long, default_value = "wt", value_parser = parse_mode)]
    pub mode: WriteMode,
    /// Cache line size: 4k to 64k.
    #[arg(long, default_value = "64k", value_parser = parse_bytes)]
    pub cache_line: u64,
    /// Eviction policy (approximate LRU by default).
    #[arg(long, default_value = "clock")]
    pub policy: String,
    /// Tune admission with non-hierarchical caching (seed 000 §4.3).
    #[arg(long)]
    pub nhc: bool,
    /// Pace the cache like this device preset or device file.
    #[arg(long)]
    pub cache_throttle: Option<String>,
    /// Pace the backing store like this device preset or device file.
    #[arg(long)]
    pub backing_throttle: Option<String>,
    /// HOST:PORT for HTTP metrics, stats and flush.
    #[arg(long)]
    pub metrics: Option<String>,
    /// Reformat a cache that holds another volume's dirty lines.
    #[arg(long)]
    pub force: bool,
}

pub(crate) fn parse_mode(text: &str) -> Result<WriteMode, String> {
    WriteMode::ALL
        .into_iter()
        .find(|mode| mode.name() == text)
        .ok_or_else(|| format!("unknown mode \"{text}\"; expected wt, wb, wa, wo, pt or wi"))
}

impl NbdArgs {
    /// The config these arguments stand for.
    pub fn to_config(&self) -> Result<ServeConfig> {
        let mut volume = VolumeConfig::new(
            &self.export,
            self.backing
                .parse()
                .map_err(|e| anyhow!("--backing: {e}"))?,
            self.cache.parse().map_err(|e| anyhow!("--cache: {e}"))?,
        );
        volume.cache_line = self.cache_line;
        volume.caching.mode = self.mode;
        volume.caching.policy = self.policy.clone();
        if self.nhc {
            volume.caching.admission = AdmissionScheme::Nhc;
        }
        volume.cache_throttle = self.cache_throttle.clone();
        volume.backing_throttle = self.backing_throttle.clone();
        volume.force = self.force;
        let config = ServeConfig {
            server: ServerSection {
                listen: self.listen.clone(),
                metrics: self.metrics.clone(),
            },
            export: vec![volume],
        };
        config.validate().map_err(|e| anyhow!("{e}"))?;
        Ok(config)
    }
}

pub fn run(args: &ServeArgs) -> Result<()> {
    let config = match (&args.config, &args.kind) {
        (Some(path), None) => ServeConfig::from_file(path).map_err(|e| anyhow!("{e}"))?,
        (None, Some(ServeKind::Nbd(nbd))) => nbd.to_config()?,
        _ => {
            return Err(anyhow!(
                "give --config FILE, or `serve nbd` with its options"
            ))
        }
    };
    heterarchy_server::run::run(&config).map_err(|e| anyhow!("{e}"))
}
