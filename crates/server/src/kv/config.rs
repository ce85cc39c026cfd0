//! A key-value tenant's `[[tenant]]` table (docs/kv-cache.md): its own port (and Unix socket),
//! its capacity quota, where its values live, and its limits.
//!
//! ```toml
//! [[tenant]]
//! name = "alpha"
//! listen = "127.0.0.1:11211"
//! unix = "/run/heterarchy/alpha.sock"   # optional
//! memory = "64m"                        # the quota: values (with keys) in DRAM
//! # pmem = "/mnt/pm/alpha:1g"           # or values on persistent memory, this much;
//! #                                     # then `memory` (if given) caps the DRAM index
//! # throttle = "optane-pm"              # pace the value tier like a preset or a [[device]]
//! max_connections = 1024
//! # faults = "write-error=1%"           # inject faults into the value store (tests)
//! item_max = "1m"
//! segment = "1m"
//! # auth_file = "/etc/heterarchy/alpha.auth"  # `user:password` lines, as memcached's -Y
//! # What one client may hold (docs/reliability.md, "Limits on what a client can make a server
//! # hold"); the defaults:
//! idle_timeout = 0                      # seconds without a byte received; 0: never closed
//! auth_timeout = 10                     # seconds to authenticate, with an auth file
//! request_timeout = 30                  # seconds for a request (or a TLS handshake) to arrive
//! max_connections_per_peer = 256        # from one IP address (a Unix socket's: one uid)
//! client_buffers = "64m"                # what all its clients' buffers may hold beyond 128k each
//! max_auth_failures = 5                 # wrong passwords on one connection before it is closed
//! # TLS on its TCP port, as memcached's -Z (docs/reliability.md, "Key-value over TLS"):
//! # tls_certificates = "/etc/heterarchy/tls"  # server-cert.pem, server-key.pem (, ca-cert.pem)
//! # tls_verify_peer = false             # clients must show a certificate ca-cert.pem signed
//! ```
//!
//! Tenants whose values share one persistent memory name its `[[pm]]` table: each has its share
//! there, and every access of every tenant is paced by the one model.
//!
//! ```toml
//! [[pm]]
//! name = "pm0"
//! path = "/mnt/pm0"          # a directory on the PM's file system: a file per tenant
//! size = "8g"                # what the tenants' shares may add up to
//! throttle = "optane-pm-x2"  # what it is paced like: a preset or a device file
//!
//! [[tenant]]
//! name = "alpha"
//! listen = "127.0.0.1:11211"
//! pm = "pm0"
//! pm_size = "2g"             # alpha's share: its quota
//! ```

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use heterarchy_device::backend::{BackendSpec, FaultSpec};
use heterarchy_engine::nyx::policy::{TenantClass, TenantTerms};
use heterarchy_engine::nyx::PolicyName;
use heterarchy_kvstore::{StoreConfig, DEFAULT_ITEM_MAX_BYTES, DEFAULT_SEGMENT_BYTES};
use heterarchy_trace::units::parse_bytes;

use crate::error::ConfigError;
use crate::listen::ListenAddr;

/// Connections one tenant serves at once unless told otherwise (memcached's `-c`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Connections one tenant serves at once from one peer unless told otherwise: a quarter of
/// [`DEFAULT_MAX_CONNECTIONS`], so that one client cannot take all of a tenant's places.
pub const DEFAULT_MAX_CONNECTIONS_PER_PEER: usize = 256;
/// Seconds a client of a tenant with an auth file has to authenticate unless told otherwise.
pub const DEFAULT_AUTH_TIMEOUT_SECS: f64 = 10.0;
/// Seconds a request may take to arrive whole, from its first byte, unless told otherwise.
pub const DEFAULT_REQUEST_TIMEOUT_SECS: f64 = 30.0;
/// What the buffers of a tenant's clients may hold beyond their first 128 KiB each, together.
pub const DEFAULT_CLIENT_BUFFERS: &str = "64m";
/// Wrong passwords one connection may send before it is closed unless told otherwise.
pub const DEFAULT_MAX_AUTH_FAILURES: u32 = 5;

/// One tenant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    pub name: String,
    /// Its TCP address.
    pub listen: ListenAddr,
    /// Its Unix socket too, if any.
    #[serde(default)]
    pub unix: Option<PathBuf>,
    /// Its quota with values in DRAM, as memcached's `-m` (e.g. "64m"; 64m if not given).
    /// With `pmem`, the DRAM its index (keys and metadata) may take instead, unbounded if not
    /// given.
    #[serde(default)]
    pub memory: Option<String>,
    /// Values on persistent memory instead: `PATH:SIZE`; the size is the quota.
    #[serde(default)]
    pub pmem: Option<String>,
    /// Values on a shared persistent memory instead: the name of its `[[pm]]` table.
    #[serde(default)]
    pub pm: Option<String>,
    /// With `pm`: the tenant's share of it, its quota.
    #[serde(default)]
    pub pm_size: Option<String>,
    /// With `pm`: the file its values live in (`{path}/{name}.values` by default).
    #[serde(default)]
    pub pm_file: Option<PathBuf>,
    /// Under the server's sharing policy, its limit on its `[[pm]]`: a share of the device
    /// ("30%") for `limit`, bytes a second ("500mb/s") for `bandwidth-limit`.
    #[serde(default)]
    pub limit: Option<String>,
    /// Under `qos`: "lc" (latency-critical, with `p99_target_us`) or "be" (best-effort, the
    /// default).
    #[serde(default)]
    pub class: Option<String>,
    /// Under `qos`, an LC tenant's p99 target in µs.
    #[serde(default)]
    pub p99_target_us: Option<f64>,
    /// Under the proportional policies, its weight (1 by default).
    #[serde(default)]
    pub weight: Option<f64>,
    /// Under `fair`, a slowdown it must never pass (e.g. 1.5).
    #[serde(default)]
    pub slowdown_limit: Option<f64>,
    /// Paces the value tier like this device preset or declared `[[device]]` (an emulated PM
    /// tier); a tenant on a `[[pm]]` is paced by that.
    #[serde(default)]
    pub throttle: Option<String>,
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Faults to inject into the value store (for tests; docs/reliability.md, "Injecting
    /// faults"): a `heterarchy_device::backend::FaultSpec` such as `"write-error=1%"`.
    #[serde(
        default,
        deserialize_with = "heterarchy_device::backend::fault_spec::deserialize_optional",
        skip_serializing_if = "Option::is_none"
    )]
    pub faults: Option<FaultSpec>,
    /// Largest item (key, value and a 40-byte header), as memcached's `-I`.
    #[serde(default = "default_item_max")]
    pub item_max: String,
    /// Bytes of each value segment.
    #[serde(default = "default_segment")]
    pub segment: String,
    /// Clients must authenticate first, as with memcached's `-Y`: a file of `user:password`
    /// lines (see `crate::kv::auth`). Without one the tenant is open to every client.
    #[serde(default)]
    pub auth_file: Option<PathBuf>,
    /// Seconds a connection may go without sending a byte before it is closed, as memcached's
    /// `-o idle_timeout`; 0 (the default, as memcached's) never closes one.
    #[serde(default, deserialize_with = "seconds")]
    pub idle_timeout: f64,
    /// With `auth_file`: seconds a client has to authenticate before it is closed; 0: no limit.
    #[serde(default = "default_auth_timeout", deserialize_with = "seconds")]
    pub auth_timeout: f64,
    /// Seconds a request may take to arrive whole once its first byte has (and a TLS handshake
    /// from the connection's start) before the connection is closed; 0: no limit.
    #[serde(default = "default_request_timeout", deserialize_with = "seconds")]
    pub request_timeout: f64,
    /// Connections served at once from one IP address (Unix-socket clients: from one uid);
    /// more are refused as those over `max_connections` are.
    #[serde(default = "default_max_connections_per_peer")]
    pub max_connections_per_peer: usize,
    /// What the buffers of all its connections may hold beyond their first 128 KiB each
    /// (e.g. "64m"), half for requests arriving and half for answers waiting: past its half of
    /// answers each connection is served one answer at a time, past its half of requests none
    /// reads a longer request until some is freed.
    #[serde(default = "default_client_buffers")]
    pub client_buffers: String,
    /// With `auth_file`: wrong passwords one connection may send; the last is answered, then
    /// the connection closed. Each is answered after a pause ([`super::auth`]).
    #[serde(default = "default_max_auth_failures")]
    pub max_auth_failures: u32,
    /// TLS on its TCP port, as memcached's `-Z` with `ssl_chain_cert` and `ssl_key`: the
    /// directory of `server-cert.pem`, `server-key.pem` and, with `tls_verify_peer`,
    /// `ca-cert.pem` (the NBD server's layout, `crate::tls`). Its Unix socket stays plain.
    #[serde(default)]
    pub tls_certificates: Option<PathBuf>,
    /// With `tls_certificates`: clients must present a certificate that `ca-cert.pem` signed.
    #[serde(default)]
    pub tls_verify_peer: bool,
}

impl Default for TenantConfig {
    /// A tenant named "default" on memcached's port with every default.
    fn default() -> Self {
        TenantConfig {
            name: "default".to_string(),
            listen: ListenAddr::Tcp("127.0.0.1:11211".to_string()),
            unix: None,
            memory: None,
            pmem: None,
            pm: None,
            pm_size: None,
            pm_file: None,
            limit: None,
            class: None,
            p99_target_us: None,
            weight: None,
            slowdown_limit: None,
            throttle: None,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            faults: None,
            item_max: default_item_max(),
            segment: default_segment(),
            auth_file: None,
            idle_timeout: 0.0,
            auth_timeout: DEFAULT_AUTH_TIMEOUT_SECS,
            request_timeout: DEFAULT_REQUEST_TIMEOUT_SECS,
            max_connections_per_peer: DEFAULT_MAX_CONNECTIONS_PER_PEER,
            client_buffers: DEFAULT_CLIENT_BUFFERS.to_string(),
            max_auth_failures: DEFAULT_MAX_AUTH_FAILURES,
            tls_certificates: None,
            tls_verify_peer: false,
        }
    }
}

/// Seconds, written as a whole number or not (`10`, `0.5`).
fn seconds<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Number {
        Whole(i64),
        Fraction(f64),
    }
    Ok(match Number::deserialize(deserializer)? {
        Number::Whole(whole) => whole as f64,
        Number::Fraction(fraction) => fraction,
    })
}

fn default_auth_timeout() -> f64 {
    DEFAULT_AUTH_TIMEOUT_SECS
}

fn default_request_timeout() -> f64 {
    DEFAULT_REQUEST_TIMEOUT_SECS
}

fn default_max_connections_per_peer() -> usize {
    DEFAULT_MAX_CONNECTIONS_PER_PEER
}

fn default_client_buffers() -> String {
    DEFAULT_CLIENT_BUFFERS.to_string()
}

fn default_max_auth_failures() -> u32 {
    DEFAULT_MAX_AUTH_FAILURES
}

/// The DRAM quota of a tenant whose values are in DRAM and that names none, as memcached's.
const DEFAULT_MEMORY: &str = "64m";

fn default_max_connections() -> usize {
    DEFAULT_MAX_CONNECTIONS
}

fn default_item_max() -> String {
    format!("{}k", DEFAULT_ITEM_MAX_BYTES >> 10)
}

fn default_segment() -> String {
    format!("{}k", DEFAULT_SEGMENT_BYTES >> 10)
}

/// One `[[pm]]` table: a persistent memory its tenants share (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PmConfig {
    pub name: String,
    /// A directory on the memory's file system (DAX, or /dev/shm to emulate one).
    pub path: PathBuf,
    /// What the tenants' shares may add up to.
    pub size: String,
    /// What the memory is paced like: a preset or a device file.
    pub throttle: String,
    /// Where its MaxIOPS profile is kept (NyxCache's M2, seed 000 §5.2.3; `nyx-profile.toml`
    /// in `path` by default); a missing or stale one is measured again.
    #[serde(default)]
    pub profile: Option<PathBuf>,
}

impl PmConfig {
    pub fn size_bytes(&self) -> Result<u64, ConfigError> {
        parse_bytes(&self.size).map_err(|e| ConfigError::invalid("size", e))
    }

    /// Where its MaxIOPS profile is kept.
    pub fn profile_path(&self) -> PathBuf {
        self.profile
            .clone()
            .unwrap_or_else(|| self.path.join("nyx-profile.toml"))
    }

    /// Where `tenant`'s values live on it.
    pub fn tenant_file(&self, tenant: &str) -> PathBuf {
        self.path.join(format!("{tenant}.values"))
    }

    /// Checks every key; the error starts with the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.name.is_empty() || self.name.contains(|c: char| c.is_whitespace() || c == '"') {
            return Err(ConfigError::invalid(
                "name",
                format!(
                    "\"{}\"; expected a name without spaces or quotes",
                    self.name
                ),
            ));
        }
        if self.size_bytes()? == 0 {
            return Err(ConfigError::invalid(
                "size",
                format!("\"{}\"; expected more than 0", self.size),
            ));
        }
        heterarchy_device::presets::resolve_device(&self.throttle, None)
            .map(drop)
            .map_err(|e| ConfigError::invalid("throttle", e))
    }
}

/// What [`parse_rate`] reads, for the messages of the keys that hold a rate.
pub const RATE_EXPECTED: &str = "bytes a second above 0, e.g. \"500mb/s\"";

/// Bytes a second written as "500mb/s"; `None` for anything else ([`RATE_EXPECTED`]).
pub fn parse_rate(text: &str) -> Option<f64> {
    let bytes = text.trim().strip_suffix("/s")?;
    parse_bytes(bytes)
        .ok()
        .filter(|&bytes| bytes > 0)
        .map(|bytes| bytes as f64)
}

impl TenantConfig {
    /// Its `limit` in `policy`'s units per second: a share of the device, or bytes; none
    /// without a limit. The error starts with the key.
    pub fn limit_under(&self, policy: PolicyName) -> Result<Option<f64>, ConfigError> {
        let Some(text) = &self.limit else {
            return Ok(None);
        };
        let bad = |expected: &str| {
            Err(ConfigError::invalid(
                "limit",
                format!("\"{text}\"; expected {expected}"),
            ))
        };
        match policy {
            PolicyName::Limit | PolicyName::BandwidthLimit => {}
            other => {
                return Err(ConfigError::invalid(
                    "limit",
                    format!(
                "\"{text}\" under policy \"{other}\"; set server.policy to limit or bandwidth-limit"
            ),
                ))
            }
        }
        match policy {
            PolicyName::Limit => {
                let Some(percent) = text.trim().strip_suffix('%') else {
                    return bad("a share of the device, e.g. \"30%\"");
                };
                match percent.trim().parse::<f64>() {
                    Ok(share) if share > 0.0 && share <= 100.0 => Ok(Some(share / 100.0)),
                    _ => bad("a share of the device above 0% and at most 100%"),
                }
            }
            _ => match parse_rate(text) {
                Some(bytes) => Ok(Some(bytes)),
                None => bad(RATE_EXPECTED),
            },
        }
    }

    /// What the server's sharing policy knows of it. The error starts with the key.
    pub fn terms(&self, policy: PolicyName) -> Result<TenantTerms, ConfigError> {
        let class = match &self.class {
            Some(class) => class
                .parse()
                .map_err(|e| ConfigError::invalid("class", e))?,
            None => TenantClass::BestEffort,
        };
        let p99_target_ns = match (self.p99_target_us, class) {
            (None, _) => None,
            (Some(_), TenantClass::BestEffort) => {
                return Err(ConfigError::invalid(
                    "p99_target_us",
                    "for a best-effort tenant; set class = \"lc\"",
                ))
            }
            (Some(us), _) if us.is_finite() && us > 0.0 => Some((us * 1000.0) as u64),
            (Some(us), _) => {
                return Err(ConfigError::invalid(
                    "p99_target_us",
                    format!("{us}; expected above 0"),
                ))
            }
        };
        if class == TenantClass::LatencyCritical && p99_target_ns.is_none() {
            return Err(ConfigError::invalid(
                "class",
                "\"lc\" without p99_target_us; give its target",
            ));
        }
        let weight = self.weight.unwrap_or(1.0);
        if !(weight.is_finite() && weight > 0.0) {
            return Err(ConfigError::invalid(
                "weight",
                format!("{weight}; expected above 0"),
            ));
        }
        let slowdown_limit = match self.slowdown_limit {
            Some(limit) if !(limit.is_finite() && limit >= 1.0) => {
                return Err(ConfigError::invalid(
                    "slowdown_limit",
                    format!("{limit}; expected at least 1 (the slowdown of running alone)"),
                ))
            }
            limit => limit,
        };
        Ok(TenantTerms {
            class,
            limit: self.limit_under(policy)?,
            p99_target_ns,
            weight,
            slowdown_limit,
        })
    }

    /// Where its values live; `pm` is the `[[pm]]` table it names, if it names one.
    pub fn value_store(&self, pm: Option<&PmConfig>) -> Result<BackendSpec, ConfigError> {
        if let Some(name) = &self.pm {
            let pm = pm.ok_or_else(|| {
                ConfigError::invalid("pm", format!("no [[pm]] table named \"{name}\""))
            })?;
            let share = self.pm_size.as_deref().ok_or_else(|| {
                ConfigError::invalid(
                    "pm_size",
                    format!("missing; expected the tenant's share of {name}, e.g. \"1g\""),
                )
            })?;
            let size_bytes = parse_bytes(share).map_err(|e| ConfigError::invalid("pm_size", e))?;
            return Ok(BackendSpec::Pmem {
                path: self
                    .pm_file
                    .clone()
                    .unwrap_or_else(|| pm.tenant_file(&self.name)),
                size_bytes,
            });
        }
        if self.pm_size.is_some() {
            return Err(ConfigError::invalid(
                "pm_size",
                "without pm; expected pm = the [[pm]] table's name",
            ));
        }
        match &self.pmem {
            Some(pmem) => format!("pmem:{pmem}")
                .parse()
                .map_err(|e| ConfigError::invalid("pmem", format!("{e}; expected PATH:SIZE"))),
            None => {
                let memory = self.memory.as_deref().unwrap_or(DEFAULT_MEMORY);
                let size_bytes =
                    parse_bytes(memory).map_err(|e| ConfigError::invalid("memory", e))?;
                Ok(BackendSpec::Ram { size_bytes })
            }
        }
    }

    /// The store's geometry and limits.
    pub fn store_config(&self) -> Result<StoreConfig, ConfigError> {
        let size = |key: &str, text: &str| -> Result<u32, ConfigError> {
            let bytes = parse_bytes(text).map_err(|e| ConfigError::invalid(key, e))?;
            u32::try_from(bytes)
                .map_err(|_| ConfigError::invalid(key, format!("{text} is over 4 GiB")))
        };
        let item_max_bytes = size("item_max", &self.item_max)?;
        // A segment holds at least one item of the largest size.
        let segment_bytes =
            size("segment", &self.segment)?.max(item_max_bytes.next_multiple_of(4096));
        let on_pm = self.pmem.is_some() || self.pm.is_some();
        let index_max_bytes = match (on_pm, &self.memory) {
            (true, Some(memory)) => {
                let bytes = parse_bytes(memory).map_err(|e| ConfigError::invalid("memory", e))?;
                if bytes < 1 << 20 {
                    return Err(ConfigError::invalid(
                        "memory",
                        format!(
                            "\"{memory}\" for the index of values on pmem; expected at least 1m"
                        ),
                    ));
                }
                Some(bytes)
            }
            _ => None,
        };
        let config = StoreConfig {
            segment_bytes,
            item_max_bytes,
            index_max_bytes,
        };
        if config.segment_bytes < 4096 || config.segment_bytes & 7 != 0 {
            return Err(ConfigError::invalid(
                "segment",
                format!(
                    "\"{}\"; expected at least 4k, a multiple of 8 bytes",
                    self.segment
                ),
            ));
        }
        if config.item_max_bytes < 1024 {
            return Err(ConfigError::invalid(
                "item_max",
                format!("\"{}\"; expected at least 1k", self.item_max),
            ));
        }
        Ok(config)
    }

    /// Its `client_buffers` in bytes; the error starts with the key.
    pub fn client_buffers_bytes(&self) -> Result<usize, ConfigError> {
        parse_bytes(&self.client_buffers)
            .map(|bytes| bytes as usize)
            .map_err(|e| ConfigError::invalid("client_buffers", e))
    }

    /// Checks every key but `throttle` (which may name a declared device: the serve config
    /// checks it); `pm` is the `[[pm]]` table it names, if any. The error starts with the key.
    pub fn validate(&self, pm: Option<&PmConfig>) -> Result<(), ConfigError> {
        if self.name.is_empty() || self.name.contains(|c: char| c.is_whitespace() || c == '"') {
            return Err(ConfigError::invalid(
                "name",
                format!(
                    "\"{}\"; expected a name without spaces or quotes",
                    self.name
                ),
            ));
        }
        if let Some(name) = &self.pm {
            if self.pmem.is_some() {
                return Err(ConfigError::invalid(
                    "pmem",
                    format!("with pm = \"{name}\"; give one of the two"),
                ));
            }
            if self.throttle.is_some() {
                return Err(ConfigError::invalid(
                    "throttle",
                    format!("with pm = \"{name}\", which paces it; drop the throttle"),
                ));
            }
        }
        if !matches!(self.listen, ListenAddr::Tcp(_)) {
            return Err(ConfigError::invalid(
                "listen",
                format!(
                    "\"{}\"; expected HOST:PORT (the Unix socket goes in `unix`)",
                    self.listen
                ),
            ));
        }
        let store = self.value_store(pm)?;
        self.store_config()?;
        if self.max_connections == 0 {
            return Err(ConfigError::invalid(
                "max_connections",
                "expected at least 1",
            ));
        }
        if self.max_connections_per_peer == 0 {
            return Err(ConfigError::invalid(
                "max_connections_per_peer",
                "expected at least 1",
            ));
        }
        for (key, secs) in [
            ("idle_timeout", self.idle_timeout),
            ("auth_timeout", self.auth_timeout),
            ("request_timeout", self.request_timeout),
        ] {
            if !(secs.is_finite() && (0.0..=1e9).contains(&secs)) {
                return Err(ConfigError::invalid(
                    key,
                    format!("{secs}; expected seconds, 0 or more (0: no limit)"),
                ));
            }
        }
        self.client_buffers_bytes()?;
        if self.tls_verify_peer && self.tls_certificates.is_none() {
            return Err(ConfigError::invalid(
                "tls_verify_peer",
                "without tls_certificates; expected the directory of the server's certificate, key and ca-cert.pem",
            ));
        }
        let (BackendSpec::Ram { size_bytes } | BackendSpec::Pmem { size_bytes, .. }) = store else {
            return Err(ConfigError::invalid("pmem", "expected PATH:SIZE"));
        };
        let segment = u64::from(self.store_config()?.segment_bytes);
        if size_bytes < 4096 + 2 * segment {
            let key = match (&self.pm, &self.pmem) {
                (Some(_), _) => "pm_size",
                (None, Some(_)) => "pmem",
                (None, None) => "memory",
            };
            return Err(ConfigError::invalid(
                key,
                format!(
                    "{size_bytes} bytes hold fewer than two {} segments",
                    self.segment
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(keys: &str) -> Result<TenantConfig, String> {
        let text = format!("name = \"t\"\nlisten = \"127.0.0.1:11211\"\n{keys}");
        let config: TenantConfig = toml::from_str(&text).map_err(|e| e.to_string())?;
        config.validate(None).map_err(|e| e.to_string())?;
        Ok(config)
    }

    #[test]
    fn the_client_limits_default_as_documented_and_take_whole_or_fractional_seconds() {
        let config = parsed("").unwrap();
        assert_eq!(
            config,
            TenantConfig {
                name: "t".to_string(),
                ..TenantConfig::default()
            }
        );
        assert_eq!(config.idle_timeout, 0.0);
        assert_eq!(config.auth_timeout, 10.0);
        assert_eq!(config.request_timeout, 30.0);
        assert_eq!(config.max_connections_per_peer, 256);
        assert_eq!(config.client_buffers_bytes().unwrap(), 64 << 20);
        let config = parsed("idle_timeout = 600\nrequest_timeout = 0.5\n").unwrap();
        assert_eq!((config.idle_timeout, config.request_timeout), (600.0, 0.5));
    }

    #[test]
    fn limits_that_cannot_work_are_refused_by_key() {
        for (keys, key) in [
            ("idle_timeout = -1\n", "idle_timeout:"),
            ("request_timeout = nan\n", "request_timeout:"),
            (
                "max_connections_per_peer = 0\n",
                "max_connections_per_peer:",
            ),
            ("client_buffers = \"lots\"\n", "client_buffers:"),
            ("tls_verify_peer = true\n", "tls_verify_peer:"),
        ] {
            let error = parsed(keys).unwrap_err();
            assert!(error.starts_with(key), "{keys}: {error}");
        }
        assert!(parsed("tls_certificates = \"/etc/tls\"\ntls_verify_peer = true\n").is_ok());
    }
}
