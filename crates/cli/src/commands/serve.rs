//! `heterarchy serve`: block volumes and PM block devices over NBD (docs/block-volumes.md,
//! docs/pm-block-device.md) and key-value tenants over the memcached protocols
//! (docs/kv-cache.md), from a config file or, for one export or one tenant, from the command
//! line as nbdkit and memcached start.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};

use heterarchy_blockdev::poly::PolyConfig;
use heterarchy_blockdev::StagedConfig;
use heterarchy_device::backend::{BackendSpec, FaultSpec};
use heterarchy_engine::staging::StagingScheme;
use heterarchy_engine::{AdmissionScheme, TierLayout, WriteMode};
use heterarchy_server::config::{ExportConfig, ServeConfig, ServerSection, DEFAULT_IO_WORKERS};
use heterarchy_server::kv::config::{PmConfig, TenantConfig, DEFAULT_MAX_CONNECTIONS};
use heterarchy_server::ListenAddr;
use heterarchy_volume::config::throttle_name;
use heterarchy_volume::VolumeConfig;

use crate::size::parse_bytes;

/// A `--faults` flag's value, checked as it is given and kept as written (a spec is large
/// beside the other flags).
fn fault_spec(text: &str) -> Result<String, heterarchy_device::SpecError> {
    FaultSpec::parse_optional(text).map(|_| text.to_string())
}

/// A checked `--faults` value, parsed.
fn faults_of(text: &str) -> Option<FaultSpec> {
    FaultSpec::parse_optional(text).unwrap_or(None)
}

/// Arguments of `heterarchy serve`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ServeArgs {
    /// A TOML file of exports and addresses (docs/block-volumes.md, docs/kv-cache.md).
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub kind: Option<ServeKind>,
}

/// What to serve without a config file (boxed: a command line's flags are large beside the
/// other commands').
#[derive(Subcommand, Debug)]
pub enum ServeKind {
    /// One cached block volume over NBD.
    Nbd(Box<NbdArgs>),
    /// One key-value cache over the memcached text and meta protocols.
    Kv(Box<KvArgs>),
}

/// One key-value tenant from the command line, as memcached starts.
#[derive(Args, Debug)]
pub struct KvArgs {
    /// HOST:PORT.
    #[arg(long, default_value = "127.0.0.1:11211")]
    pub listen: ListenAddr,
    /// A Unix socket to listen on too.
    #[arg(long)]
    pub unix: Option<PathBuf>,
    /// The quota, values in DRAM (memcached's -m) [default: 64m]; with --pmem, the DRAM the
    /// index of keys may take [default: no limit].
    #[arg(long)]
    pub memory: Option<String>,
    /// Values on persistent memory instead: PATH:SIZE (the size is the quota).
    #[arg(long)]
    pub pmem: Option<String>,
    /// Pace the value tier like this device preset (e.g. optane-pm).
    #[arg(long)]
    pub throttle: Option<String>,
    /// Event-loop worker threads (memcached's -t).
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Largest item (memcached's -I).
    #[arg(long, default_value = "1m")]
    pub item_max: String,
    /// Connections served at once (memcached's -c).
    #[arg(long, default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Of those, from one client address (a Unix socket's: one uid).
    #[arg(long, default_value_t = heterarchy_server::kv::config::DEFAULT_MAX_CONNECTIONS_PER_PEER)]
    pub max_connections_per_peer: usize,
    /// HOST:PORT for HTTP metrics and stats.
    #[arg(long)]
    pub metrics: Option<String>,
    /// A file holding the token a POST to the --metrics port must send as `Authorization:
    /// Bearer TOKEN` (`heterarchy volume flush --token-file`); without it every POST is refused.
    #[arg(long, requires = "metrics")]
    pub admin_token_file: Option<PathBuf>,
    /// A host name the --metrics port answers for besides IP literals and localhost (its Host
    /// header is checked against DNS rebinding); once per name.
    #[arg(long = "admin-allowed-host", requires = "metrics")]
    pub admin_allowed_hosts: Vec<String>,
    /// Inject faults into the value store, as nbdkit's error filter does (e.g.
    /// `write-error=1%,file=/run/inject`). For testing what survives a failing device.
    #[arg(long, value_parser = fault_spec)]
    pub faults: Option<String>,
    /// With --pmem and --throttle: account every access's device cost (NyxCache, seed 000
    /// §5.2.3), the device's MaxIOPS profile kept in this file (measured again when missing or
    /// stale).
    #[arg(long, requires_all = ["pmem", "throttle"])]
    pub nyx_profile: Option<PathBuf>,
    /// With --nyx-profile: hold the cache to this share of the device, epoch by epoch
    /// (seed 000 Algorithm 2), e.g. 30%.
    #[arg(long, requires = "nyx_profile")]
    pub limit: Option<String>,
    /// Clients must authenticate first (memcached's -Y): a file of user:password lines; a
    /// client sends `set <any key> 0 0 <bytes>` with "user password" as its data.
    #[arg(long)]
    pub auth_file: Option<PathBuf>,
}

impl KvArgs {
    /// The config these arguments stand for: one tenant named "default" (on a `[[pm]]` of
    /// its own when NyxCache accounts for it).
    pub fn to_config(&self) -> Result<ServeConfig> {
        // A [[tenant]] table's defaults ("default", its segment size, deadlines, budgets) but
        // for what the flags set.
        let mut tenant = TenantConfig {
            listen: self.listen.clone(),
            unix: self.unix.clone(),
            memory: self.memory.clone(),
            pmem: self.pmem.clone(),
            throttle: self.throttle.clone(),
            max_connections: self.max_connections,
            max_connections_per_peer: self.max_connections_per_peer,
            faults: self.faults.as_deref().and_then(faults_of),
            item_max: self.item_max.clone(),
            auth_file: self.auth_file.clone(),
            ..TenantConfig::default()
        };
        let mut pm = Vec::new();
        if let (Some(profile), Some(pmem), Some(throttle)) =
            (&self.nyx_profile, &self.pmem, &self.throttle)
        {
            let Ok(BackendSpec::Pmem { path, size_bytes }) = format!("pmem:{pmem}").parse() else {
                return Err(anyhow!("--pmem: \"{pmem}\"; expected PATH:SIZE"));
            };
            let size = size_bytes.to_string();
            pm.push(PmConfig {
                name: "pm".to_string(),
                path: path
                    .parent()
                    .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
                size: size.clone(),
                throttle: throttle.clone(),
                profile: Some(profile.clone()),
            });
            tenant.pm = Some("pm".to_string());
            tenant.pm_size = Some(size);
            tenant.pm_file = Some(path);
            tenant.pmem = None;
            tenant.throttle = None;
            tenant.limit = self.limit.clone();
        }
        let policy = if self.limit.is_some() {
            "limit"
        } else {
            "none"
        };
        let config = ServeConfig {
            server: ServerSection {
                metrics: self.metrics.clone(),
                admin_token_file: self.admin_token_file.clone(),
                admin_allowed_hosts: self.admin_allowed_hosts.clone(),
                threads: self.threads,
                policy: policy.to_string(),
                ..ServerSection::default()
            },
            device: Vec::new(),
            export: Vec::new(),
            tenant: vec![tenant],
            pm,
        };
        config.validate()?;
        Ok(config)
    }
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
    /// The capacity device: file:PATH[:SIZE][:direct], blockdev:PATH, ram:SIZE, or
    /// btt:PATH:SIZE[:512|:4k] (persistent memory with atomic sectors).
    #[arg(long)]
    pub backing: String,
    /// A cache tier: ram:SIZE, pmem:PATH:SIZE or file:PATH:SIZE; give it once per tier,
    /// fastest first.
    #[arg(long, required_unless_present = "staging", conflicts_with = "staging")]
    pub cache: Vec<String>,
    /// Run the one --cache tier as PolyEMT (seed 004): a persistent memory tier whose pages
    /// change role between write cache, read cache and compressed store, split by an online
    /// search. The tier must be persistent (pmem:PATH:SIZE or file:PATH:SIZE).
    #[arg(long, conflicts_with_all = ["staging", "mode", "nhc", "layout", "policy", "cache_line", "cache_throttle"])]
    pub poly: bool,
    /// PolyEMT: share of the tier a search step moves (divides 1).
    #[arg(long, default_value_t = 0.1, requires = "poly")]
    pub poly_step: f64,
    /// PolyEMT: seconds per measurement window of the search.
    #[arg(long, default_value_t = 30.0, requires = "poly")]
    pub poly_interval: f64,
    /// PolyEMT: relative change at the held point that restarts the search.
    #[arg(long, default_value_t = 0.2, requires = "poly")]
    pub poly_restart_threshold: f64,
    /// PolyEMT: page codec, lz4 or zstd.
    #[arg(long, default_value = "lz4", requires = "poly")]
    pub poly_codec: String,
    /// PolyEMT: fixed knobs READ_SHARE,COMPRESSED_SHARE instead of the search (baselines).
    #[arg(long, requires = "poly")]
    pub poly_knobs: Option<String>,
    /// Serve the backing store as a block device under a DRAM staging cache instead of a
    /// cached volume (seed 001): none, caiti, caiti-no-ee, caiti-no-bp, pmbd, pmbd70, lru or
    /// coactive.
    #[arg(long)]
    pub staging: Option<StagingScheme>,
    /// DRAM for the staging cache.
    #[arg(long, default_value = "512m", value_parser = parse_bytes, requires = "staging")]
    pub staging_size: u64,
    /// Caiti's evictor threads (default: one per core).
    #[arg(long, requires = "staging")]
    pub evictors: Option<u32>,
    /// How cache tiers share lines: inclusive (each tier holds what the tiers above hold) or
    /// exclusive (a line is in one tier at most).
    #[arg(long, default_value = "inclusive", value_parser = parse_layout)]
    pub layout: TierLayout,
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
    /// Pace a cache tier like this device preset or device file (`none`: at its own speed);
    /// once per tier, in the order of --cache.
    #[arg(long)]
    pub cache_throttle: Vec<String>,
    /// Pace the backing store like this device preset or device file.
    #[arg(long)]
    pub backing_throttle: Option<String>,
    /// Inject faults into a cache tier, as nbdkit's error filter does (e.g.
    /// `read-error=1%,file=/run/inject`; `none` for a tier left whole); once per tier, in the
    /// order of --cache. For testing what survives a failing device.
    #[arg(long, value_parser = fault_spec)]
    pub cache_faults: Vec<String>,
    /// Inject faults into the backing store.
    #[arg(long, value_parser = fault_spec)]
    pub backing_faults: Option<String>,
    /// Cache-device errors after which the cache is given up for pass-through, once what it
    /// holds is written back (Open CAS's fallback pass-through threshold); 0: only when a
    /// cache device is gone.
    #[arg(long, default_value_t = 16)]
    pub fallback_pt_errors: u64,
    /// Most operations outstanding at once on each file or block device.
    #[arg(long, default_value_t = 64)]
    pub queue_depth: usize,
    /// Event loops serving the clients (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Threads carrying out requests that wait for a device.
    #[arg(long, default_value_t = DEFAULT_IO_WORKERS)]
    pub io_workers: usize,
    /// HOST:PORT for HTTP metrics, stats and flush.
    #[arg(long)]
    pub metrics: Option<String>,
    /// A file holding the token a POST to the --metrics port must send as `Authorization:
    /// Bearer TOKEN` (`heterarchy volume flush --token-file`); without it every POST is refused.
    #[arg(long, requires = "metrics")]
    pub admin_token_file: Option<PathBuf>,
    /// A host name the --metrics port answers for besides IP literals and localhost (its Host
    /// header is checked against DNS rebinding); once per name.
    #[arg(long = "admin-allowed-host", requires = "metrics")]
    pub admin_allowed_hosts: Vec<String>,
    /// Clients served at once; one more is closed as soon as it is accepted.
    #[arg(long, default_value_t = heterarchy_server::nbd::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// TLS, as nbdkit's --tls: off, on (offered) or require (every option refused with
    /// NBD_REP_ERR_TLS_REQD until the client starts TLS).
    #[arg(long, default_value = "off")]
    pub tls: String,
    /// The directory of server-cert.pem, server-key.pem and ca-cert.pem (nbdkit's layout).
    #[arg(long)]
    pub tls_certificates: Option<PathBuf>,
    /// Clients must present a certificate signed by ca-cert.pem.
    #[arg(long)]
    pub tls_verify_peer: bool,
    /// TLS with pre-shared keys instead of certificates: a file of username:hexkey lines, as
    /// nbdkit's --tls-psk (and GnuTLS's psktool) read them; the client names its user.
    #[arg(long)]
    pub tls_psk: Option<PathBuf>,
    /// Connections one client (an address, or a user on a Unix socket) holds at once, at most.
    #[arg(long, default_value_t = heterarchy_server::nbd::ClientLimits::default().max_connections_per_peer)]
    pub max_connections_per_peer: usize,
    /// Bytes of READ lengths, WRITE payloads and unsent answers one client holds, at most.
    #[arg(long, default_value = "64m")]
    pub connection_buffer: String,
    /// The same for all clients together.
    #[arg(long, default_value = "1g")]
    pub server_buffer: String,
    /// Seconds a client has to finish its handshake (TLS included).
    #[arg(long, default_value_t = 10)]
    pub handshake_timeout_s: u64,
    /// Seconds a client past its handshake may stay quiet before it is closed; 0: never.
    #[arg(long, default_value_t = 0)]
    pub idle_timeout_s: u64,
    /// Reformat a cache that holds another volume's dirty lines.
    #[arg(long)]
    pub force: bool,
}

pub(crate) fn parse_layout(text: &str) -> Result<TierLayout, String> {
    match text {
        "inclusive" => Ok(TierLayout::Inclusive),
        "exclusive" => Ok(TierLayout::Exclusive),
        _ => Err(format!(
            "unknown layout \"{text}\"; expected inclusive or exclusive"
        )),
    }
}

/// The cache tiers of `--cache` flags, fastest first.
pub(crate) fn parse_tiers(flags: &[String]) -> Result<Vec<BackendSpec>> {
    flags
        .iter()
        .map(|flag| flag.parse().map_err(|e| anyhow!("--cache: {e}")))
        .collect()
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
        let backing = self
            .backing
            .parse()
            .map_err(|e| anyhow!("--backing: {e}"))?;
        let export = match self.staging {
            _ if self.poly => ExportConfig::Poly(Box::new(self.poly_config(backing)?)),
            Some(staging) => ExportConfig::Staged(StagedConfig {
                staging_size: self.staging_size,
                evictors: self.evictors,
                throttle: self.backing_throttle.clone(),
                ..StagedConfig::new(&self.export, backing, staging)
            }),
            None => ExportConfig::Cached(Box::new(self.volume_config(backing)?)),
        };
        let defaults = ServerSection::default();
        let config = ServeConfig {
            server: ServerSection {
                listen: self.listen.clone(),
                metrics: self.metrics.clone(),
                admin_token_file: self.admin_token_file.clone(),
                admin_allowed_hosts: self.admin_allowed_hosts.clone(),
                threads: self.threads.unwrap_or(defaults.threads),
                io_workers: self.io_workers,
                max_connections: self.max_connections,
                tls: self.tls.clone(),
                tls_certificates: self.tls_certificates.clone(),
                tls_psk: self.tls_psk.clone(),
                tls_verify_peer: self.tls_verify_peer,
                max_connections_per_peer: self.max_connections_per_peer,
                connection_buffer: self.connection_buffer.clone(),
                server_buffer: self.server_buffer.clone(),
                handshake_timeout_s: self.handshake_timeout_s,
                idle_timeout_s: self.idle_timeout_s,
                ..defaults
            },
            device: Vec::new(),
            export: vec![export],
            tenant: Vec::new(),
            pm: Vec::new(),
        };
        config.validate().map_err(|e| {
            // The config's key names its flag.
            let flag = |key: &str| format!("--{}", key.replace('_', "-"));
            let e = e.to_string();
            match e
                .strip_prefix("server.")
                .and_then(|rest| rest.split_once(':'))
            {
                Some((key, rest)) => anyhow!("{}:{rest}", flag(key)),
                None => anyhow!("{e}"),
            }
        })?;
        Ok(config)
    }

    /// The PolyEMT export these arguments stand for; errors name the flag.
    fn poly_config(&self, backing: BackendSpec) -> Result<PolyConfig> {
        let tiers = parse_tiers(&self.cache)?;
        let [cache] = &tiers[..] else {
            bail!(
                "--poly: expected one --cache tier (the memory tier), found {}",
                tiers.len()
            );
        };
        let mut config = PolyConfig::new(&self.export, backing, cache.clone());
        config.backing_throttle = self.backing_throttle.clone();
        let poly = &mut config.caching.poly;
        poly.step = self.poly_step;
        poly.interval = self.poly_interval;
        poly.restart_threshold = self.poly_restart_threshold;
        poly.codec = self.poly_codec.clone();
        if let Some(knobs) = &self.poly_knobs {
            let shares: Vec<f64> = knobs
                .split(',')
                .map(|share| share.trim().parse::<f64>())
                .collect::<Result<_, _>>()
                .map_err(|_| {
                    anyhow!("--poly-knobs {knobs}: expected READ_SHARE,COMPRESSED_SHARE")
                })?;
            let [read, compressed] = shares[..] else {
                bail!("--poly-knobs {knobs}: expected READ_SHARE,COMPRESSED_SHARE");
            };
            poly.read_share = Some(read);
            poly.compressed_share = Some(compressed);
        }
        config.validate().map_err(|e| {
            let e = e.to_string();
            let flag = match e.split([':', ' ']).next().unwrap_or("") {
                "cache" => "--cache".to_string(),
                "caching.poly.codec" => "--poly-codec".into(),
                "caching.poly.step" => "--poly-step".into(),
                "caching.poly.interval" => "--poly-interval".into(),
                "caching.poly.restart_threshold" => "--poly-restart-threshold".into(),
                _ => "--poly-knobs".into(),
            };
            anyhow!("{flag}: {e}")
        })?;
        Ok(config)
    }

    /// The cached volume these arguments stand for.
    fn volume_config(&self, backing: BackendSpec) -> Result<VolumeConfig> {
        let mut volume = VolumeConfig::with_tiers(&self.export, backing, parse_tiers(&self.cache)?);
        volume.cache_line = self.cache_line;
        volume.caching.mode = self.mode;
        volume.caching.layout = self.layout;
        volume.queue_depth = self.queue_depth;
        volume.caching.policy = self.policy.clone();
        if self.nhc {
            volume.caching.admission = AdmissionScheme::Nhc;
        }
        volume.cache_throttle = self
            .cache_throttle
            .iter()
            .cloned()
            .map(throttle_name)
            .collect();
        volume.backing_throttle = self.backing_throttle.clone();
        volume.cache_faults = self
            .cache_faults
            .iter()
            .map(|text| faults_of(text))
            .collect();
        volume.backing_faults = self.backing_faults.as_deref().and_then(faults_of);
        volume.fallback_pt_errors = self.fallback_pt_errors;
        volume.force = self.force;
        Ok(volume)
    }
}

pub fn run(args: &ServeArgs) -> Result<()> {
    let config = match (&args.config, &args.kind) {
        (Some(path), None) => ServeConfig::from_file(path)?,
        (None, Some(ServeKind::Nbd(nbd))) => nbd.to_config()?,
        (None, Some(ServeKind::Kv(kv))) => kv.to_config()?,
        _ => {
            return Err(anyhow!(
                "give --config FILE, or `serve nbd` or `serve kv` with their options"
            ))
        }
    };
    Ok(heterarchy_server::run::run(&config)?)
}
