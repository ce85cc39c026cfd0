//! `heterarchy serve --config FILE`: the server's addresses and its exports.
//!
//! ```toml
//! [server]
//! listen = "127.0.0.1:10809"   # or "unix:/run/heterarchy.sock"
//! metrics = "127.0.0.1:9109"   # HTTP: /metrics, /stats, POST /flush?export=NAME (optional)
//! admin_token_file = "/etc/heterarchy/admin.token"  # POST needs it as a Bearer token
//! admin_allowed_hosts = ["metrics.example"]  # Host names answered besides IPs and localhost
//! max_connections = 4096       # NBD clients at once; more are closed when accepted
//! max_connections_per_peer = 1024  # of those, from one client address
//! connection_buffer = "64m"    # bytes of READs, WRITEs and answers one NBD client holds
//! server_buffer = "1g"         # the same for all NBD clients together
//! handshake_timeout_s = 10     # an NBD client that has not chosen an export is closed
//! idle_timeout_s = 0           # an NBD client quiet this long is closed (0: never)
//! tls = "require"              # NBD over TLS: off (default), on or require, as nbdkit's --tls
//! tls_certificates = "/etc/pki/heterarchy"  # ca-cert.pem, server-cert.pem, server-key.pem
//! tls_verify_peer = false      # true: clients need a certificate ca-cert.pem signed
//!
//! [[export]]                   # as many as wanted; see heterarchy_volume::config
//! name = "vol0"
//! backing = "file:/srv/vol0.img:8g"
//! cache = "pmem:/mnt/pm/vol0:1g"
//! [export.caching]
//! mode = "wb"
//!
//! [[export]]                   # a PM block device; see heterarchy_blockdev::StagedConfig
//! name = "pm0"
//! backing = "btt:/dev/shm/pm0:8g"
//! staging = "caiti"
//!
//! [[export]]                   # PolyEMT; see heterarchy_blockdev::poly::PolyConfig
//! name = "poly0"
//! backing = "file:/srv/ssd.img:8g"
//! cache = "pmem:/dev/shm/poly0:256m"
//! [export.caching]
//! scheme = "poly"
//!
//! [[tenant]]                   # key-value tenants; see crate::kv::config
//! name = "alpha"
//! listen = "127.0.0.1:11211"
//! memory = "64m"
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use heterarchy_blockdev::poly::PolyConfig;
use heterarchy_blockdev::StagedConfig;
use heterarchy_device::backend::{BackendSpec, Throttles};
use heterarchy_device::secure_file;
use heterarchy_engine::nyx::policy::{PolicyParams, TenantTerms};
use heterarchy_engine::nyx::PolicyName;
use heterarchy_volume::VolumeConfig;

use crate::error::ConfigError;
use crate::kv::{PmConfig, TenantConfig};
use crate::listen::ListenAddr;
use crate::tls::TlsSettings;

/// The `[server]` table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSection {
    /// Where NBD clients connect (NBD's registered port on loopback by default).
    pub listen: ListenAddr,
    /// Where the HTTP admin and metrics endpoint listens, if anywhere.
    pub metrics: Option<String>,
    /// A file holding the token that a POST to the admin endpoint must send as
    /// `Authorization: Bearer TOKEN` (docs/block-volumes.md, "The admin endpoint"); without
    /// one, every POST is refused.
    pub admin_token_file: Option<PathBuf>,
    /// Host names the admin endpoint answers for besides IP literals and `localhost`: its
    /// Host header is checked so that a web page cannot reach it by rebinding a name of its
    /// own to the server's address.
    pub admin_allowed_hosts: Vec<String>,
    /// Event loops serving the key-value tenants (memcached's `-t`), and the NBD clients.
    pub threads: usize,
    /// Threads carrying out the NBD requests that wait for a device, so that the loops never
    /// do: they bound how many such requests are in flight at once.
    pub io_workers: usize,
    /// How the tenants of each `[[pm]]` share it (NyxCache, seed 000 §5.2.4; the names in
    /// `heterarchy_engine::nyx::PolicyName`): none, limit (each tenant's `limit` a share of the
    /// device, "30%"), bandwidth-limit (bytes a second, "500mb/s"), qos and caladan-qos (`class`,
    /// `p99_target_us`), fair (`slowdown_limit`), proportional, donate-all, no-realloc and
    /// bandwidth-proportional (`weight`).
    pub policy: String,
    /// The sharing controller's tick (seed 000 §5.2.6: 10 ms).
    pub tick_ms: u64,
    /// Ticks per resource-limit epoch (100).
    pub epoch_ticks: u32,
    /// QoS's ExperimentStep: the throughput a throttle step costs a tenant ("500mb/s").
    pub experiment_step: String,
    /// Proportional sharing's DonateStep ("10%").
    pub donate_step: String,
    /// How often slowdown estimation (fair, proportional) measures each tenant alone (1000).
    pub alone_period_ms: u64,
    /// How long it pauses the others to do so (seed 000 §5.2.6: 1 ms, for in-process
    /// clients; over TCP a pause must span several round trips).
    pub alone_pause_ms: u64,
    /// NBD clients served at once; one more is closed as soon as it is accepted.
    pub max_connections: usize,
    /// NBD over TLS (proto.md "TLS support"), as nbdkit's `--tls`: "off", "on" (offered) or
    /// "require" (every option refused until the client starts TLS).
    pub tls: String,
    /// The directory of `ca-cert.pem`, `server-cert.pem` and `server-key.pem`, as nbdkit's
    /// `--tls-certificates`.
    pub tls_certificates: Option<PathBuf>,
    /// A `username:hexkey` file, as nbdkit's `--tls-psk`: TLS with pre-shared keys instead of
    /// certificates (`crate::tls::psk`).
    pub tls_psk: Option<PathBuf>,
    /// Clients must present a certificate signed by `ca-cert.pem` (nbdkit's
    /// `--tls-verify-peer`).
    pub tls_verify_peer: bool,
    /// NBD connections one client (an address, or a user on a Unix socket) holds at once, at most.
    pub max_connections_per_peer: usize,
    /// Bytes of READ lengths, WRITE payloads and unsent answers one NBD connection holds
    /// ("64m"); one request of any size goes ahead on a connection that holds nothing.
    pub connection_buffer: String,
    /// The same for every NBD connection together ("1g").
    pub server_buffer: String,
    /// Seconds an NBD client has to finish its handshake (TLS included), at least 1.
    pub handshake_timeout_s: u64,
    /// Seconds an NBD client past its handshake may stay quiet before it is closed; 0: never.
    pub idle_timeout_s: u64,
}

/// I/O workers when neither the file nor the command line says.
pub const DEFAULT_IO_WORKERS: usize = 64;

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            listen: ListenAddr::Tcp("127.0.0.1:10809".to_string()),
            metrics: None,
            admin_token_file: None,
            admin_allowed_hosts: Vec::new(),
            threads: std::thread::available_parallelism().map_or(4, |n| n.get()),
            io_workers: DEFAULT_IO_WORKERS,
            policy: PolicyName::None.name().to_string(),
            tick_ms: PolicyParams::default().tick_ns / 1_000_000,
            epoch_ticks: PolicyParams::default().epoch_ticks,
            experiment_step: "500mb/s".to_string(),
            donate_step: "10%".to_string(),
            alone_period_ms: PolicyParams::default().alone_period_ns / 1_000_000,
            alone_pause_ms: PolicyParams::default().alone_pause_ns / 1_000_000,
            max_connections: crate::nbd::DEFAULT_MAX_CONNECTIONS,
            tls: heterarchy_nbd::TlsMode::Off.name().to_string(),
            tls_certificates: None,
            tls_psk: None,
            tls_verify_peer: false,
            max_connections_per_peer: crate::nbd::ClientLimits::default().max_connections_per_peer,
            connection_buffer: "64m".to_string(),
            server_buffer: "1g".to_string(),
            handshake_timeout_s: crate::nbd::ClientLimits::default()
                .handshake_timeout
                .as_secs(),
            idle_timeout_s: 0,
        }
    }
}

impl ServerSection {
    /// The NBD clients' limits; the error starts with `server.` and the key.
    pub fn client_limits(&self) -> Result<crate::nbd::ClientLimits, ConfigError> {
        let bytes = |key: &str, text: &str| -> Result<usize, ConfigError> {
            let value = heterarchy_trace::units::parse_bytes(text)
                .map_err(|e| ConfigError::invalid(format!("server.{key}"), e))?;
            if value < 1 << 20 {
                return Err(ConfigError::invalid(
                    format!("server.{key}"),
                    format!("\"{text}\" is below the least, 1m"),
                ));
            }
            usize::try_from(value).map_err(|e| ConfigError::invalid(format!("server.{key}"), e))
        };
        if self.max_connections_per_peer == 0 {
            return Err(ConfigError::invalid(
                "server.max_connections_per_peer",
                "expected at least 1",
            ));
        }
        if self.handshake_timeout_s == 0 {
            return Err(ConfigError::invalid(
                "server.handshake_timeout_s",
                "expected at least 1",
            ));
        }
        Ok(crate::nbd::ClientLimits {
            connection_buffer_bytes: bytes("connection_buffer", &self.connection_buffer)?,
            server_buffer_bytes: bytes("server_buffer", &self.server_buffer)?,
            handshake_timeout: std::time::Duration::from_secs(self.handshake_timeout_s),
            idle_timeout: (self.idle_timeout_s > 0)
                .then(|| std::time::Duration::from_secs(self.idle_timeout_s)),
            max_connections_per_peer: self.max_connections_per_peer,
        })
    }

    /// The TLS keys read together; the error starts with `server.` and the key.
    pub fn tls_settings(&self) -> Result<TlsSettings<'_>, ConfigError> {
        let settings = TlsSettings {
            mode: self
                .tls
                .parse()
                .map_err(|e| ConfigError::invalid("server.tls", e))?,
            certificates: self.tls_certificates.as_deref(),
            psk: self.tls_psk.as_deref(),
            verify_peer: self.tls_verify_peer,
        };
        settings
            .check()
            .map_err(|e| ConfigError::within("server.", e))?;
        Ok(settings)
    }
}

/// One `[[device]]` table: a physical device by name, which tiers, volumes and tenants name as
/// their throttle to share its one model (docs/architecture.md, "The device layer").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceEntry {
    pub name: String,
    /// What it is paced like: a preset or a device file.
    pub like: String,
}

/// Which line of `text` (from 0) holds the key or value that `message` quotes first (`key`
/// or "value": what it is about; later quotes list what was expected), if any does.
fn line_naming(text: &str, message: &str) -> Option<usize> {
    let word = message
        .split(['`', '"'])
        .nth(1)
        .filter(|word| !word.is_empty())?;
    text.lines().position(|row| {
        let (key, value) = row.split_once('=').unwrap_or((row, ""));
        key.trim() == word || value.contains(word)
    })
}

/// One `[[export]]` table: a cached volume, or, when it has the key `staging`, a block
/// device on persistent memory under a staging cache (the words `cache` and `mode` already
/// mean the cached volume's tiers and Open CAS mode).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ExportConfig {
    /// Boxed: a volume's settings are several times a staged device's.
    Cached(Box<VolumeConfig>),
    Staged(StagedConfig),
    /// PolyEMT (seed 004): `scheme = "poly"` in its caching table.
    Poly(Box<PolyConfig>),
}

impl<'de> Deserialize<'de> for ExportConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Told apart by a key, so each kind's own errors reach the user (an untagged enum
        // would say only that neither matched).
        let table = toml::Table::deserialize(deserializer)?;
        let staged = table.contains_key("staging");
        let poly = table
            .get("caching")
            .and_then(|caching| caching.get("scheme"))
            .and_then(|scheme| scheme.as_str())
            == Some("poly");
        let value = toml::Value::Table(table);
        if staged {
            value.try_into().map(ExportConfig::Staged)
        } else if poly {
            value
                .try_into()
                .map(|poly| ExportConfig::Poly(Box::new(poly)))
        } else {
            value
                .try_into()
                .map(|volume| ExportConfig::Cached(Box::new(volume)))
        }
        .map_err(|e: toml::de::Error| serde::de::Error::custom(e.message()))
    }
}

impl ExportConfig {
    pub fn name(&self) -> &str {
        match self {
            ExportConfig::Cached(volume) => &volume.name,
            ExportConfig::Staged(staged) => &staged.name,
            ExportConfig::Poly(poly) => &poly.name,
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        match self {
            ExportConfig::Cached(volume) => volume.validate().map_err(ConfigError::other),
            ExportConfig::Staged(staged) => staged.validate().map_err(ConfigError::other),
            ExportConfig::Poly(poly) => poly.validate().map_err(ConfigError::other),
        }
    }
}

/// A whole serve config.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    #[serde(default)]
    pub server: ServerSection,
    #[serde(default)]
    pub device: Vec<DeviceEntry>,
    #[serde(default)]
    pub export: Vec<ExportConfig>,
    #[serde(default)]
    pub tenant: Vec<TenantConfig>,
    #[serde(default)]
    pub pm: Vec<PmConfig>,
}

impl ServeConfig {
    /// The declared devices' throttles, each shared by whoever names it; a `[[pm]]` is one
    /// such device, shared by its tenants.
    pub fn throttles(&self) -> Result<Throttles, ConfigError> {
        Throttles::new(
            self.device
                .iter()
                .map(|device| (device.name.as_str(), device.like.as_str()))
                .chain(
                    self.pm
                        .iter()
                        .map(|pm| (pm.name.as_str(), pm.throttle.as_str())),
                ),
        )
        .map_err(ConfigError::other)
    }

    /// How the tenants of each `[[pm]]` share it; the error starts with the key.
    pub fn policy(&self) -> Result<PolicyName, ConfigError> {
        self.server
            .policy
            .parse()
            .map_err(|e| ConfigError::invalid("server.policy", e))
    }

    /// The sharing controller's parameters. The error starts with the key.
    pub fn policy_params(&self) -> Result<PolicyParams, ConfigError> {
        let server = &self.server;
        if server.tick_ms == 0 || server.epoch_ticks == 0 {
            return Err(ConfigError::invalid(
                "server.tick_ms, server.epoch_ticks",
                "expected at least 1",
            ));
        }
        if server.alone_pause_ms == 0 || server.alone_period_ms <= server.alone_pause_ms {
            return Err(ConfigError::invalid(
                "server.alone_period_ms, server.alone_pause_ms",
                "expected a pause of at least 1 ms, shorter than the period",
            ));
        }
        let experiment_step =
            crate::kv::config::parse_rate(&server.experiment_step).ok_or_else(|| {
                ConfigError::invalid(
                    "server.experiment_step",
                    format!(
                        "\"{}\"; expected {}",
                        server.experiment_step,
                        crate::kv::config::RATE_EXPECTED
                    ),
                )
            })?;
        let donate_step = server
            .donate_step
            .trim()
            .strip_suffix('%')
            .and_then(|percent| percent.trim().parse::<f64>().ok())
            .filter(|percent| *percent > 0.0 && *percent < 100.0)
            .ok_or_else(|| {
                ConfigError::invalid(
                    "server.donate_step",
                    format!(
                        "\"{}\"; expected a share above 0% and below 100%, e.g. \"10%\"",
                        server.donate_step
                    ),
                )
            })?;
        Ok(PolicyParams {
            tick_ns: server.tick_ms * 1_000_000,
            epoch_ticks: server.epoch_ticks,
            experiment_step_bytes_per_second: experiment_step,
            donate_step: donate_step / 100.0,
            alone_period_ns: server.alone_period_ms * 1_000_000,
            alone_pause_ns: server.alone_pause_ms * 1_000_000,
            ..PolicyParams::default()
        })
    }

    /// The `[[pm]]` table `tenant` names, if it names one that exists.
    pub fn pm_of(&self, tenant: &TenantConfig) -> Option<&PmConfig> {
        let name = tenant.pm.as_deref()?;
        self.pm.iter().find(|pm| pm.name == name)
    }

    /// Reads and checks a config file; the error names the file, and the line or key.
    pub fn from_file(path: &Path) -> Result<ServeConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        ServeConfig::from_toml(&text, &path.display().to_string())
    }

    /// Parses and checks config text; the error names `source`, and the line or key.
    pub fn from_toml(text: &str, source: &str) -> Result<ServeConfig, ConfigError> {
        let config: ServeConfig = toml::from_str(text).map_err(|e| {
            // toml's messages may run over lines; ours are one line.
            let message = e.message().replace('\n', " ");
            match e.span() {
                Some(span) => {
                    // An error inside an [[export]] table spans the table: the line is the
                    // one naming what the message names.
                    let within = text.get(span.clone()).unwrap_or("");
                    let line = text[..span.start].matches('\n').count()
                        + 1
                        + line_naming(within, &message).unwrap_or(0);
                    let key = text
                        .lines()
                        .nth(line - 1)
                        .and_then(|row| row.split_once('='))
                        .map(|(key, _)| key.trim())
                        .filter(|key| !key.is_empty() && !message.contains(key));
                    let at = match key {
                        Some(key) => format!("{source}:{line}: {key}"),
                        None => format!("{source}:{line}"),
                    };
                    ConfigError::Syntax { at, message }
                }
                None => ConfigError::Syntax {
                    at: source.to_string(),
                    message,
                },
            }
        })?;
        config
            .validate()
            .map_err(|e| ConfigError::within(format!("{source}: "), e))?;
        Ok(config)
    }

    /// Checks every export and tenant, and that their names and ports differ.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.export.is_empty() && self.tenant.is_empty() {
            return Err(ConfigError::Empty);
        }
        for (index, pm) in self.pm.iter().enumerate() {
            pm.validate()
                .map_err(|e| ConfigError::within(format!("pm[{index}] ({}).", pm.name), e))?;
        }
        let throttles = self.throttles()?;
        if self.server.io_workers == 0 {
            return Err(ConfigError::invalid(
                "server.io_workers",
                "expected at least 1",
            ));
        }
        if self.server.threads == 0 {
            return Err(ConfigError::invalid(
                "server.threads",
                "expected at least 1",
            ));
        }
        if self.server.max_connections == 0 {
            return Err(ConfigError::invalid(
                "server.max_connections",
                "expected at least 1",
            ));
        }
        self.server.tls_settings()?;
        self.server.client_limits()?;
        let policy = self.policy()?;
        self.policy_params()?;
        for (index, tenant) in self.tenant.iter().enumerate() {
            let named = |e: ConfigError| {
                ConfigError::within(format!("tenant[{index}] ({}).", tenant.name), e)
            };
            tenant.validate(self.pm_of(tenant)).map_err(named)?;
            let terms = tenant.terms(policy).map_err(named)?;
            if tenant.pm.is_none() && terms != TenantTerms::default() {
                let key = if tenant.limit.is_some() {
                    "limit"
                } else {
                    "class, p99_target_us, weight, slowdown_limit"
                };
                return Err(named(ConfigError::invalid(
                    key,
                    "only a tenant on a [[pm]] shares a device to be regulated on",
                )));
            }
            if let Some(throttle) = &tenant.throttle {
                throttles
                    .get(throttle)
                    .map_err(|e| named(ConfigError::invalid("throttle", e)))?;
            }
            let earlier = &self.tenant[..index];
            if earlier.iter().any(|other| other.name == tenant.name) {
                return Err(ConfigError::invalid(
                    format!("tenant[{index}].name"),
                    format!("\"{}\" is a tenant twice", tenant.name),
                ));
            }
            if earlier.iter().any(|other| other.listen == tenant.listen)
                || self.server.listen == tenant.listen && !self.export.is_empty()
            {
                return Err(named(ConfigError::invalid(
                    "listen",
                    format!("\"{}\" is already taken", tenant.listen),
                )));
            }
        }
        for pm in &self.pm {
            let capacity = pm.size_bytes()?;
            let mut claimed = 0u64;
            for (index, tenant) in self.tenant.iter().enumerate() {
                if tenant.pm.as_deref() != Some(pm.name.as_str()) {
                    continue;
                }
                let BackendSpec::Pmem { size_bytes, .. } = tenant.value_store(Some(pm))? else {
                    unreachable!("a tenant on a [[pm]] has its values there");
                };
                claimed += size_bytes;
                if claimed > capacity {
                    return Err(ConfigError::invalid(
                        format!("tenant[{index}] ({}).pm_size", tenant.name),
                        format!(
                            "the tenants on {} claim {claimed} bytes of its {capacity}",
                            pm.name
                        ),
                    ));
                }
            }
        }
        for (index, export) in self.export.iter().enumerate() {
            export.validate().map_err(|e| {
                ConfigError::within(format!("export[{index}] ({}).", export.name()), e)
            })?;
            if self.export[..index]
                .iter()
                .any(|other| other.name() == export.name())
            {
                return Err(ConfigError::invalid(
                    format!("export[{index}].name"),
                    format!("\"{}\" is exported twice", export.name()),
                ));
            }
        }
        self.check_isolation()?;
        if let Some(metrics) = &self.server.metrics {
            match metrics.parse::<ListenAddr>() {
                Ok(ListenAddr::Tcp(_)) => {}
                _ => {
                    return Err(ConfigError::invalid(
                        "server.metrics",
                        format!("\"{metrics}\"; expected HOST:PORT (127.0.0.1:9109)"),
                    ))
                }
            }
        }
        for host in &self.server.admin_allowed_hosts {
            let name_ok = !host.is_empty()
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b".-_".contains(&b));
            if !name_ok {
                return Err(ConfigError::invalid(
                    "server.admin_allowed_hosts",
                    format!("\"{host}\"; expected a host name without a port (metrics.example)"),
                ));
            }
        }
        Ok(())
    }
}

impl ServeConfig {
    /// Keeps tenants and exports out of each other's files (docs/reliability.md, "Files on
    /// disk"): a tenant's name, which names its values file, holds no `/`, `..` or control
    /// character; and no two of the files that exports and tenants keep data in (backing,
    /// cache, BTT and values files) are one, told by [`secure_file::identity`] (links and `..`
    /// resolved where the path exists). The error names both.
    fn check_isolation(&self) -> Result<(), ConfigError> {
        for (index, tenant) in self.tenant.iter().enumerate() {
            let name = &tenant.name;
            if name.is_empty()
                || name.contains('/')
                || name.contains("..")
                || name.contains(char::is_control)
            {
                return Err(ConfigError::invalid(
                    format!("tenant[{index}].name"),
                    format!(
                        "{name:?}: a tenant's name names its files; expected one without '/', \
                         '..' or control characters"
                    ),
                ));
            }
        }
        let path_of = |spec: &BackendSpec| match spec {
            BackendSpec::File { path, .. }
            | BackendSpec::Pmem { path, .. }
            | BackendSpec::Btt { path, .. } => Some(path.clone()),
            BackendSpec::Ram { .. } => None,
        };
        let mut named: Vec<(String, PathBuf)> = Vec::new();
        for (index, export) in self.export.iter().enumerate() {
            let at = format!("export[{index}] ({})", export.name());
            let specs: Vec<(String, &BackendSpec)> = match export {
                ExportConfig::Cached(volume) => {
                    std::iter::once(("backing".to_string(), &volume.backing))
                        .chain(
                            volume
                                .cache
                                .iter()
                                .enumerate()
                                .map(|(tier, spec)| (format!("cache[{tier}]"), spec)),
                        )
                        .collect()
                }
                ExportConfig::Staged(staged) => vec![("backing".to_string(), &staged.backing)],
                ExportConfig::Poly(poly) => vec![
                    ("backing".to_string(), &poly.backing),
                    ("cache".to_string(), &poly.cache),
                ],
            };
            for (key, spec) in specs {
                if let Some(path) = path_of(spec) {
                    named.push((format!("{at}.{key}"), path));
                }
            }
        }
        for (index, tenant) in self.tenant.iter().enumerate() {
            if let Some(path) = path_of(&tenant.value_store(self.pm_of(tenant))?) {
                named.push((format!("tenant[{index}] ({}).values", tenant.name), path));
            }
        }
        let identities: Vec<PathBuf> = named
            .iter()
            .map(|(_, path)| secure_file::identity(path))
            .collect();
        for (index, (key, path)) in named.iter().enumerate() {
            let same = identities[..index]
                .iter()
                .position(|seen| *seen == identities[index]);
            if let Some(earlier) = same {
                let (other, other_path) = &named[earlier];
                return Err(ConfigError::invalid(
                    key.clone(),
                    format!(
                        "{} is {other}'s file too ({}); each needs storage of its own",
                        path.display(),
                        other_path.display()
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn write(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("volumes.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    /// A config whose every error is one line; the error, or `None` when it is accepted.
    fn refusal(text: &str) -> Option<String> {
        let error = ServeConfig::from_toml(text, "c.toml").err()?.to_string();
        assert!(!error.contains('\n'), "{error}");
        Some(error)
    }

    #[test]
    fn a_tenant_name_that_would_leave_its_directory_is_refused() {
        for name in [
            r#""../x""#,
            r#""a/b""#,
            r#"".."""#,
            r#""x\u0001y""#,
            r#""""#,
        ] {
            let text = format!("[[tenant]]\nname = {name}\nlisten = \"127.0.0.1:11311\"\n");
            let error = refusal(&text).unwrap_or_else(|| panic!("{name} accepted"));
            assert!(error.contains("name"), "{error}");
        }
        let error = refusal("[[tenant]]\nname = \"a/b\"\nlisten = \"127.0.0.1:11311\"\n").unwrap();
        assert!(
            error.starts_with("c.toml: tenant[0].name: \"a/b\""),
            "{error}"
        );
        assert!(
            refusal("[[tenant]]\nname = \"a.b-c_1\"\nlisten = \"127.0.0.1:11311\"\n").is_none()
        );
    }

    #[test]
    fn two_users_of_one_file_are_refused_naming_both() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        std::fs::create_dir(dir.path().join("real")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("alias")).unwrap();
        let tenant = |index: usize, store: &str| {
            format!(
                "[[tenant]]\nname = \"t{index}\"\nlisten = \"127.0.0.1:{}\"\n{store}\n",
                11311 + index
            )
        };
        let cached = |name: &str, cache: &str| {
            format!("[[export]]\nname = \"{name}\"\nbacking = \"ram:4m\"\ncache = \"{cache}\"\n")
        };
        let staged = |name: &str, backing: &str| {
            format!(
                "[[export]]\nname = \"{name}\"\nbacking = \"{backing}\"\nstaging = \"pmbd70\"\n\
                 staging_size = \"1m\"\n"
            )
        };
        // Two tenants' values files.
        let text = tenant(0, &format!("pmem = \"{d}/real/v:4m\""))
            + &tenant(1, &format!("pmem = \"{d}/alias/v:4m\""));
        let error = refusal(&text).unwrap();
        assert!(
            error.contains("tenant[1] (t1).values")
                && error.contains("tenant[0] (t0).values's file too"),
            "{error}"
        );
        // A tenant's values and an export's cache, one through `..`.
        let text = cached("vol", &format!("pmem:{d}/real/x/../v:4m"))
            + &tenant(0, &format!("pmem = \"{d}/real/v:4m\""));
        let error = refusal(&text).unwrap();
        assert!(
            error.contains("tenant[0] (t0).values") && error.contains("export[0] (vol).cache[0]"),
            "{error}"
        );
        // A tenant on a [[pm]], whose file is named after it, and another's pmem file.
        let text = format!(
            "[[pm]]\nname = \"pm0\"\npath = \"{d}/real\"\nsize = \"8m\"\nthrottle = \"optane-pm\"\n"
        ) + &tenant(0, "pm = \"pm0\"\npm_size = \"4m\"")
            + &tenant(1, &format!("pmem = \"{d}/alias/t0.values:4m\""));
        let error = refusal(&text).unwrap();
        assert!(
            error.contains("tenant[1] (t1).values") && error.contains("tenant[0] (t0)"),
            "{error}"
        );
        // Two exports' BTTs, once the file exists (seen through the link).
        std::fs::write(dir.path().join("real/b"), b"").unwrap();
        let text = staged("a", &format!("btt:{d}/real/b:8m"))
            + &staged("b", &format!("btt:{d}/alias/b:8m"));
        let error = refusal(&text).unwrap();
        assert!(
            error.contains("export[1] (b).backing") && error.contains("export[0] (a).backing"),
            "{error}"
        );
        // Files of their own: accepted.
        let text = staged("a", &format!("btt:{d}/real/b:8m"))
            + &cached("vol", &format!("pmem:{d}/real/c:4m"))
            + &tenant(0, &format!("pmem = \"{d}/real/v0:4m\""))
            + &tenant(1, &format!("pmem = \"{d}/real/v1:4m\""));
        assert_eq!(refusal(&text), None);
    }

    #[test]
    fn reads_two_exports() {
        let (_dir, path) = write(
            "[server]\nlisten = \"unix:/tmp/h.sock\"\nmetrics = \"127.0.0.1:0\"\n\
             [[export]]\nname = \"a\"\nbacking = \"ram:1m\"\ncache = \"ram:256k\"\n\
             [export.caching]\nmode = \"wb\"\n\
             [[export]]\nname = \"b\"\nbacking = \"ram:2m\"\ncache = \"ram:256k\"\n",
        );
        let config = ServeConfig::from_file(&path).unwrap();
        assert_eq!(config.export.len(), 2);
        assert_eq!(config.server.listen, ListenAddr::Unix("/tmp/h.sock".into()));
        let ExportConfig::Cached(volume) = &config.export[0] else {
            panic!("a cached volume");
        };
        assert_eq!(volume.caching.mode, heterarchy_engine::WriteMode::Wb);
    }

    #[test]
    fn a_declared_device_paces_every_tier_that_names_it() {
        let (_dir, path) = write(
            "[[device]]\nname = \"pm0\"\nlike = \"optane-pm\"\n\
             [[export]]\nname = \"a\"\nbacking = \"ram:4m\"\ncache = \"ram:1m\"\n\
             cache_throttle = \"pm0\"\n\
             [[export]]\nname = \"b\"\nbacking = \"ram:4m\"\ncache = \"ram:1m\"\n\
             cache_throttle = \"pm0\"\n",
        );
        let config = ServeConfig::from_file(&path).unwrap();
        let throttles = config.throttles().unwrap();
        assert!(std::sync::Arc::ptr_eq(
            &throttles.get("pm0").unwrap(),
            &throttles.get("pm0").unwrap()
        ));
        for export in &config.export {
            let ExportConfig::Cached(volume) = export else {
                panic!("a cached volume");
            };
            heterarchy_volume::Volume::open_with(volume, &throttles).unwrap();
        }
        let (_dir, path) = write(
            "[[device]]\nname = \"pm0\"\nlike = \"floppy\"\n\
             [[export]]\nname = \"a\"\nbacking = \"ram:4m\"\ncache = \"ram:1m\"\n",
        );
        let error = ServeConfig::from_file(&path).unwrap_err().to_string();
        assert!(
            error.contains("device pm0") && error.contains("floppy"),
            "{error}"
        );
    }

    #[test]
    fn a_table_with_staging_is_a_pm_block_device() {
        let (_dir, path) = write(
            "[[export]]\nname = \"pm0\"\nbacking = \"ram:8m\"\nstaging = \"pmbd70\"\n\
             staging_size = \"1m\"\n\
             [[export]]\nname = \"vol\"\nbacking = \"ram:1m\"\ncache = \"ram:256k\"\n",
        );
        let config = ServeConfig::from_file(&path).unwrap();
        let ExportConfig::Staged(staged) = &config.export[0] else {
            panic!("a staged export");
        };
        assert_eq!(
            staged.staging,
            heterarchy_engine::staging::StagingScheme::Pmbd70
        );
        assert_eq!(staged.staging_size, 1 << 20);
        assert!(matches!(config.export[1], ExportConfig::Cached(_)));
        let (_dir, path) = write(
            "[[export]]\nname = \"pm0\"\nbacking = \"ram:8m\"\n\
             staging = \"writeback\"\n",
        );
        let error = ServeConfig::from_file(&path).unwrap_err().to_string();
        assert!(error.contains(":4:") && error.contains("caiti"), "{error}");
        let (_dir, path) = write(
            "[[export]]\nname = \"pm0\"\nbacking = \"ram:8m\"\nstaging = \"lru\"\n\
             cache = \"ram:1m\"\n",
        );
        let error = ServeConfig::from_file(&path).unwrap_err().to_string();
        assert!(error.contains(":5:") && error.contains("cache"), "{error}");
    }

    #[test]
    fn tls_and_connection_limits_are_read_and_refused_by_key_when_wrong() {
        let export = "[[export]]\nname = \"a\"\nbacking = \"ram:1m\"\ncache = \"ram:256k\"\n";
        let (_dir, path) = write(&format!(
            "[server]\ntls = \"require\"\ntls_certificates = \"/etc/pki/h\"\n\
             tls_verify_peer = true\nmax_connections = 8\n{export}"
        ));
        let config = ServeConfig::from_file(&path).unwrap();
        let tls = config.server.tls_settings().unwrap();
        assert_eq!(tls.mode, heterarchy_nbd::TlsMode::Require);
        assert_eq!(tls.certificates, Some(Path::new("/etc/pki/h")));
        assert!(tls.verify_peer);
        assert_eq!(config.server.max_connections, 8);
        let defaults = ServerSection::default();
        assert_eq!(defaults.tls_settings().unwrap(), TlsSettings::default());
        assert_eq!(defaults.listen, ListenAddr::Tcp("127.0.0.1:10809".into()));
        for (server, key) in [
            ("tls = \"on\"\n", "server.tls:"),
            ("tls = \"always\"\n", "server.tls:"),
            ("tls_certificates = \"/x\"\n", "server.tls_certificates:"),
            (
                "tls = \"on\"\ntls_certificates = \"/x\"\ntls_psk = \"/k\"\n",
                "server.tls_psk:",
            ),
            ("max_connections = 0\n", "server.max_connections:"),
        ] {
            let (_dir, path) = write(&format!("[server]\n{server}{export}"));
            let error = ServeConfig::from_file(&path).unwrap_err().to_string();
            assert!(error.contains(key), "{server}: {error}");
        }
    }

    #[test]
    fn client_limits_are_read_and_bad_ones_refused_by_key() {
        let export = "[[export]]\nname = \"a\"\nbacking = \"ram:1m\"\ncache = \"ram:256k\"\n";
        let (_dir, path) = write(&format!(
            "[server]\nconnection_buffer = \"8m\"\nserver_buffer = \"256m\"\n\
             max_connections_per_peer = 3\nhandshake_timeout_s = 4\nidle_timeout_s = 60\n{export}"
        ));
        let limits = ServeConfig::from_file(&path)
            .unwrap()
            .server
            .client_limits()
            .unwrap();
        assert_eq!(
            limits,
            crate::nbd::ClientLimits {
                connection_buffer_bytes: 8 << 20,
                server_buffer_bytes: 256 << 20,
                handshake_timeout: std::time::Duration::from_secs(4),
                idle_timeout: Some(std::time::Duration::from_secs(60)),
                max_connections_per_peer: 3,
            }
        );
        let defaults = ServerSection::default().client_limits().unwrap();
        assert_eq!(defaults, crate::nbd::ClientLimits::default());
        for (server, key) in [
            ("connection_buffer = \"64k\"\n", "server.connection_buffer:"),
            ("server_buffer = \"much\"\n", "server.server_buffer:"),
            (
                "max_connections_per_peer = 0\n",
                "server.max_connections_per_peer:",
            ),
            ("handshake_timeout_s = 0\n", "server.handshake_timeout_s:"),
        ] {
            let (_dir, path) = write(&format!("[server]\n{server}{export}"));
            let error = ServeConfig::from_file(&path).unwrap_err().to_string();
            assert!(error.contains(key), "{server}: {error}");
        }
    }

    #[test]
    fn admin_token_file_and_allowed_hosts_are_read_and_a_bad_host_refused_by_key() {
        let export = "[[export]]\nname = \"a\"\nbacking = \"ram:1m\"\ncache = \"ram:256k\"\n";
        let (_dir, path) = write(&format!(
            "[server]\nmetrics = \"127.0.0.1:0\"\nadmin_token_file = \"/etc/h/admin.token\"\n\
             admin_allowed_hosts = [\"metrics.example\"]\n{export}"
        ));
        let config = ServeConfig::from_file(&path).unwrap();
        assert_eq!(
            config.server.admin_token_file.as_deref(),
            Some(Path::new("/etc/h/admin.token"))
        );
        assert_eq!(config.server.admin_allowed_hosts, ["metrics.example"]);
        assert_eq!(ServerSection::default().admin_token_file, None);
        for host in ["", "metrics.example:9109", "a b", "http://x"] {
            let (_dir, path) = write(&format!(
                "[server]\nadmin_allowed_hosts = [\"{host}\"]\n{export}"
            ));
            let error = ServeConfig::from_file(&path).unwrap_err().to_string();
            assert!(
                error.contains("server.admin_allowed_hosts:"),
                "{host}: {error}"
            );
        }
    }

    #[test]
    fn errors_name_the_line_or_the_key() {
        let (_dir, path) = write("[server]\nlisten = \"nowhere\"\n");
        let error = ServeConfig::from_file(&path).unwrap_err().to_string();
        assert!(
            error.contains("volumes.toml:2:") && error.contains("HOST:PORT"),
            "{error}"
        );
        let (_dir, path) = write(
            "[[export]]\nname = \"a\"\nbacking = \"ram:1m\"\ncache = \"ram:256k\"\ncache_line = \"3k\"\n",
        );
        let error = ServeConfig::from_file(&path).unwrap_err().to_string();
        assert!(error.contains("export[0] (a).cache_line"), "{error}");
        let (_dir, path) = write(
            "[[export]]\nname = \"a\"\nbacking = \"ram:1m\"\ncache = \"ram:256k\"\n\
             [[export]]\nname = \"a\"\nbacking = \"ram:1m\"\ncache = \"ram:256k\"\n",
        );
        assert!(ServeConfig::from_file(&path)
            .unwrap_err()
            .to_string()
            .contains("exported twice"));
        let (_dir, path) = write("[[export]]\nname = \"a\"\nbackng = \"ram:1m\"\n");
        let error = ServeConfig::from_file(&path).unwrap_err().to_string();
        assert!(error.contains(":3:") && error.contains("backng"), "{error}");
        let (_dir, path) =
            write("[[export]]\nname = \"a\"\nbacking = \"ram:1m\"\ncache = \"ram:12q\"\n");
        let error = ServeConfig::from_file(&path).unwrap_err().to_string();
        assert!(
            error.contains(":4: cache: ") && error.contains("12q"),
            "{error}"
        );
        let (_dir, path) = write("");
        assert!(ServeConfig::from_file(&path)
            .unwrap_err()
            .to_string()
            .contains("no [[export]]"));
    }

    /// A `[[pm]]` table and two tenants on it, with `alpha` and `beta` lines added to each
    /// tenant's table.
    fn pm_config(alpha: &str, beta: &str) -> String {
        format!(
            "[[pm]]\nname = \"pm0\"\npath = \"/dev/shm/h-pm0\"\nsize = \"64m\"\n\
             throttle = \"optane-pm-x2\"\n\
             [[tenant]]\nname = \"alpha\"\nlisten = \"127.0.0.1:21001\"\npm = \"pm0\"\n{alpha}\
             [[tenant]]\nname = \"beta\"\nlisten = \"127.0.0.1:21002\"\npm = \"pm0\"\n{beta}"
        )
    }

    #[test]
    fn tenants_on_one_pm_share_its_model_and_their_shares_must_fit() {
        let (_dir, path) = write(&pm_config("pm_size = \"16m\"\n", "pm_size = \"48m\"\n"));
        let config = ServeConfig::from_file(&path).unwrap();
        let throttles = config.throttles().unwrap();
        assert!(Arc::ptr_eq(
            &throttles.get("pm0").unwrap(),
            &throttles.get("pm0").unwrap()
        ));
        let alpha = &config.tenant[0];
        let pm = config.pm_of(alpha).expect("alpha names pm0");
        assert_eq!(
            alpha.value_store(Some(pm)).unwrap(),
            BackendSpec::Pmem {
                path: "/dev/shm/h-pm0/alpha.values".into(),
                size_bytes: 16 << 20
            }
        );
        let (_dir, path) = write(&pm_config("pm_size = \"16m\"\n", "pm_size = \"49m\"\n"));
        let error = ServeConfig::from_file(&path).unwrap_err().to_string();
        assert!(
            error.contains("tenant[1] (beta).pm_size") && error.contains("pm0"),
            "{error}"
        );
    }

    #[test]
    fn a_tenant_on_a_pm_is_refused_with_its_own_throttle_or_pmem_or_no_share() {
        for (alpha, key) in [
            ("pm_size = \"8m\"\nthrottle = \"optane-pm\"\n", "throttle"),
            ("pm_size = \"8m\"\npmem = \"/dev/shm/x:8m\"\n", "pmem"),
            ("", "pm_size"),
        ] {
            let (_dir, path) = write(&pm_config(alpha, "pm_size = \"8m\"\n"));
            let error = ServeConfig::from_file(&path).unwrap_err().to_string();
            assert!(
                error.contains(&format!("tenant[0] (alpha).{key}")),
                "{error}"
            );
        }
        let text = pm_config("pm_size = \"8m\"\n", "pm_size = \"8m\"\n").replace(
            "pm = \"pm0\"\npm_size = \"8m\"\n[[tenant]]",
            "pm = \"pm1\"\npm_size = \"8m\"\n[[tenant]]",
        );
        let (_dir, path) = write(&text);
        let error = ServeConfig::from_file(&path).unwrap_err().to_string();
        assert!(error.contains("tenant[0] (alpha).pm: no [[pm]]"), "{error}");
    }

    #[test]
    fn a_tenant_throttle_may_name_a_declared_device() {
        let tenant = "[[tenant]]\nname = \"a\"\nlisten = \"127.0.0.1:21003\"\n";
        let (_dir, path) = write(&format!(
            "[[device]]\nname = \"shared\"\nlike = \"optane-pm\"\n{tenant}throttle = \"shared\"\n"
        ));
        ServeConfig::from_file(&path).unwrap();
        let (_dir, path) = write(&format!("{tenant}throttle = \"nothing-like-it\"\n"));
        let error = ServeConfig::from_file(&path).unwrap_err().to_string();
        assert!(error.contains("tenant[0] (a).throttle"), "{error}");
    }

    /// alpha and beta on one `[[pm]]`, with `server` keys and `alpha`'s.
    fn with(server: &str, alpha: &str) -> Result<ServeConfig, ConfigError> {
        let text = format!(
            "[server]\n{server}{}",
            pm_config(&format!("pm_size = \"8m\"\n{alpha}"), "pm_size = \"8m\"\n")
        );
        let (_dir, path) = write(&text);
        ServeConfig::from_file(&path)
    }

    #[test]
    fn sharing_policies_and_limits_are_refused_by_name_when_wrong() {
        let config = with("policy = \"limit\"\n", "limit = \"30%\"\n").unwrap();
        assert_eq!(
            config.tenant[0]
                .limit_under(config.policy().unwrap())
                .unwrap(),
            Some(0.3)
        );
        let config = with("policy = \"bandwidth-limit\"\n", "limit = \"500mb/s\"\n").unwrap();
        assert_eq!(
            config.tenant[0]
                .limit_under(config.policy().unwrap())
                .unwrap(),
            Some((500u64 << 20) as f64)
        );
        for (server, alpha, key) in [
            ("policy = \"fairness\"\n", "", "server.policy"),
            (
                "policy = \"limit\"\n",
                "limit = \"30\"\n",
                "tenant[0] (alpha).limit",
            ),
            (
                "policy = \"limit\"\n",
                "limit = \"130%\"\n",
                "tenant[0] (alpha).limit",
            ),
            ("", "limit = \"30%\"\n", "tenant[0] (alpha).limit"),
            (
                "policy = \"bandwidth-limit\"\n",
                "limit = \"30%\"\n",
                "tenant[0] (alpha).limit",
            ),
        ] {
            let error = with(server, alpha).unwrap_err().to_string();
            assert!(error.contains(key), "{server}{alpha}: {error}");
        }
    }

    #[test]
    fn qos_fair_and_proportional_terms_are_read_and_refused_by_name_when_wrong() {
        let config = with(
            "policy = \"qos\"\nexperiment_step = \"250mb/s\"\n",
            "class = \"lc\"\np99_target_us = 1.5\n",
        )
        .unwrap();
        let terms = config.tenant[0].terms(PolicyName::Qos).unwrap();
        assert_eq!(
            terms.class,
            heterarchy_engine::nyx::policy::TenantClass::LatencyCritical
        );
        assert_eq!(terms.p99_target_ns, Some(1500));
        let params = config.policy_params().unwrap();
        assert_eq!(
            params.experiment_step_bytes_per_second,
            (250u64 << 20) as f64
        );
        let config = with(
            "policy = \"proportional\"\ndonate_step = \"20%\"\n",
            "weight = 2.0\n",
        )
        .unwrap();
        assert_eq!(
            config.tenant[0]
                .terms(PolicyName::Proportional)
                .unwrap()
                .weight,
            2.0
        );
        assert_eq!(config.policy_params().unwrap().donate_step, 0.2);
        let config = with("policy = \"fair\"\n", "slowdown_limit = 1.5\n").unwrap();
        assert_eq!(
            config.tenant[0]
                .terms(PolicyName::Fair)
                .unwrap()
                .slowdown_limit,
            Some(1.5)
        );
        for name in PolicyName::ALL {
            assert_eq!(name.name().parse::<PolicyName>(), Ok(*name));
        }
        for (server, alpha, key) in [
            (
                "policy = \"qos\"\n",
                "class = \"gold\"\n",
                "tenant[0] (alpha).class",
            ),
            (
                "policy = \"qos\"\n",
                "p99_target_us = 2.0\n",
                "tenant[0] (alpha).p99_target_us",
            ),
            (
                "policy = \"qos\"\n",
                "class = \"lc\"\n",
                "tenant[0] (alpha).class",
            ),
            (
                "policy = \"proportional\"\n",
                "weight = 0.0\n",
                "tenant[0] (alpha).weight",
            ),
            (
                "policy = \"fair\"\n",
                "slowdown_limit = 0.5\n",
                "tenant[0] (alpha).slowdown_limit",
            ),
            (
                "policy = \"qos\"\nexperiment_step = \"500\"\n",
                "",
                "server.experiment_step",
            ),
            (
                "policy = \"proportional\"\ndonate_step = \"0%\"\n",
                "",
                "server.donate_step",
            ),
        ] {
            let error = with(server, alpha).unwrap_err().to_string();
            assert!(error.contains(key), "{server}{alpha}: {error}");
        }
    }
}
