//! A key-value tenant's `[[tenant]]` table (issue 6, item 3): its own port (and Unix socket),
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
//! # throttle = "optane-pm"              # pace the value tier like a device preset
//! max_connections = 1024
//! item_max = "1m"
//! segment = "1m"
//! ```

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use heterarchy_device::backend::BackendSpec;
use heterarchy_kvstore::{StoreConfig, DEFAULT_ITEM_MAX_BYTES, DEFAULT_SEGMENT_BYTES};
use heterarchy_trace::units::parse_bytes;

use crate::listen::ListenAddr;

/// Connections one tenant serves at once unless told otherwise (memcached's `-c`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// One tenant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Paces the value tier like this device preset (an emulated PM tier).
    #[serde(default)]
    pub throttle: Option<String>,
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Largest item (key, value and a 40-byte header), as memcached's `-I`.
    #[serde(default = "default_item_max")]
    pub item_max: String,
    /// Bytes of each value segment.
    #[serde(default = "default_segment")]
    pub segment: String,
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

impl TenantConfig {
    /// Where its values live.
    pub fn value_store(&self) -> Result<BackendSpec, String> {
        match &self.pmem {
            Some(pmem) => format!("pmem:{pmem}")
                .parse()
                .map_err(|e| format!("pmem: {e}; expected PATH:SIZE")),
            None => {
                let memory = self.memory.as_deref().unwrap_or(DEFAULT_MEMORY);
                let size_bytes = parse_bytes(memory).map_err(|e| format!("memory: {e}"))?;
                Ok(BackendSpec::Ram { size_bytes })
            }
        }
    }

    /// The store's geometry and limits.
    pub fn store_config(&self) -> Result<StoreConfig, String> {
        let size = |key: &str, text: &str| -> Result<u32, String> {
            let bytes = parse_bytes(text).map_err(|e| format!("{key}: {e}"))?;
            u32::try_from(bytes).map_err(|_| format!("{key}: {text} is over 4 GiB"))
        };
        let item_max_bytes = size("item_max", &self.item_max)?;
        // A segment holds at least one item of the largest size.
        let segment_bytes =
            size("segment", &self.segment)?.max(item_max_bytes.next_multiple_of(4096));
        let index_max_bytes = match (&self.pmem, &self.memory) {
            (Some(_), Some(memory)) => {
                let bytes = parse_bytes(memory).map_err(|e| format!("memory: {e}"))?;
                if bytes < 1 << 20 {
                    return Err(format!(
                        "memory: \"{memory}\" for the index of values on pmem; expected at least 1m"
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
            return Err(format!(
                "segment: \"{}\"; expected at least 4k, a multiple of 8 bytes",
                self.segment
            ));
        }
        if config.item_max_bytes < 1024 {
            return Err(format!(
                "item_max: \"{}\"; expected at least 1k",
                self.item_max
            ));
        }
        Ok(config)
    }

    /// Checks every key; the error starts with the key.
    pub fn validate(&self) -> Result<(), String> {
        if self.name.is_empty() || self.name.contains(|c: char| c.is_whitespace() || c == '"') {
            return Err(format!(
                "name: \"{}\"; expected a name without spaces or quotes",
                self.name
            ));
        }
        if !matches!(self.listen, ListenAddr::Tcp(_)) {
            return Err(format!(
                "listen: \"{}\"; expected HOST:PORT (the Unix socket goes in `unix`)",
                self.listen
            ));
        }
        let store = self.value_store()?;
        self.store_config()?;
        if let Some(preset) = &self.throttle {
            if heterarchy_device::presets::preset(preset).is_none() {
                let names: Vec<&str> = heterarchy_device::presets::preset_names().collect();
                return Err(format!(
                    "throttle: no device preset \"{preset}\"; expected one of {}",
                    names.join(", ")
                ));
            }
        }
        if self.max_connections == 0 {
            return Err("max_connections: expected at least 1".to_string());
        }
        let (BackendSpec::Ram { size_bytes } | BackendSpec::Pmem { size_bytes, .. }) = store else {
            return Err("pmem: expected PATH:SIZE".to_string());
        };
        let segment = u64::from(self.store_config()?.segment_bytes);
        if size_bytes < 4096 + 2 * segment {
            let key = if self.pmem.is_some() {
                "pmem"
            } else {
                "memory"
            };
            return Err(format!(
                "{key}: {size_bytes} bytes hold fewer than two {} segments",
                self.segment
            ));
        }
        Ok(())
    }
}
