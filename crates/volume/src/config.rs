//! A cached volume's settings, in Open CAS's vocabulary (casadm: cache line size, cache mode,
//! promotion, sequential cutoff, cleaning), from a command line or one `[[export]]` table of a
//! serve config:
//!
//! ```toml
//! [[export]]
//! name = "vol0"
//! backing = "file:/srv/disk.img:8g"
//! cache = "pmem:/mnt/pm/vol0:1g"
//! cache_line = "64k"              # 4k .. 64k
//! cache_throttle = "optane-pm"    # pace the cache like a preset (optional)
//! backing_throttle = "optane-ssd" # pace the backing store like a preset (optional)
//! [export.caching]                # the engine's cache settings: mode, policy, cleaning,
//! mode = "wb"                     # promotion, admission = "nhc", ...
//! [export.seq_cutoff]
//! policy = "full"                 # always | full | never
//! threshold = "1m"
//! ```

use serde::{Deserialize, Serialize};

use heterarchy_device::backend::BackendSpec;
use heterarchy_engine::CacheConfig;

/// When sequential streams bypass the cache (casadm `--set-param --name seq-cutoff`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CutoffPolicy {
    /// Streams past the threshold always bypass.
    Always,
    /// Only once the cache is full (Open CAS's default).
    #[default]
    Full,
    /// Never.
    Never,
}

/// Sequential cutoff: a stream of adjacent requests longer than `threshold` goes around the
/// cache, so a backup or a scan does not flush the working set out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SeqCutoffConfig {
    pub policy: CutoffPolicy,
    /// Bytes a stream must reach first (Open CAS: 1 MiB by default, 1 KiB..4 GiB).
    #[serde(with = "byte_size")]
    pub threshold: u64,
}

impl Default for SeqCutoffConfig {
    fn default() -> Self {
        SeqCutoffConfig {
            policy: CutoffPolicy::Full,
            threshold: 1 << 20,
        }
    }
}

/// Everything a cached volume needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeConfig {
    /// The export name clients ask for.
    pub name: String,
    /// The capacity device: its size is the volume's.
    pub backing: BackendSpec,
    /// The cache device.
    pub cache: BackendSpec,
    /// Cache line size (Open CAS's default for Orthus-CAS: 64 KiB).
    #[serde(default = "default_line", with = "byte_size")]
    pub cache_line: u64,
    /// A device preset or device file the cache is paced like.
    #[serde(default)]
    pub cache_throttle: Option<String>,
    /// A device preset or device file the backing store is paced like.
    #[serde(default)]
    pub backing_throttle: Option<String>,
    /// The engine's cache settings (mode, eviction policy, cleaning, promotion, admission).
    #[serde(default = "default_caching", deserialize_with = "caching_with_clock")]
    pub caching: CacheConfig,
    #[serde(default)]
    pub seq_cutoff: SeqCutoffConfig,
    /// Reformat a cache that holds another volume's lines (its dirty data is lost).
    #[serde(default)]
    pub force: bool,
}

fn default_line() -> u64 {
    64 * 1024
}

/// The engine's defaults, but approximate LRU (CLOCK) for live eviction (no list to reorder on
/// every hit), and NHC admitting read misses while the cache has room (a scan fills it).
pub fn default_caching() -> CacheConfig {
    let mut caching = CacheConfig {
        policy: "clock".to_string(),
        ..CacheConfig::default()
    };
    caching.nhc.admit_while_filling = true;
    caching
}

impl VolumeConfig {
    /// A volume named `name` with every default: write-through, 64 KiB lines, CLOCK.
    pub fn new(name: &str, backing: BackendSpec, cache: BackendSpec) -> VolumeConfig {
        VolumeConfig {
            name: name.to_string(),
            backing,
            cache,
            cache_line: default_line(),
            cache_throttle: None,
            backing_throttle: None,
            caching: default_caching(),
            seq_cutoff: SeqCutoffConfig::default(),
            force: false,
        }
    }

    /// Checks what can be checked without opening anything; errors name the key.
    pub fn validate(&self) -> Result<(), String> {
        if self.name.is_empty() || self.name.len() > 4096 {
            return Err("name: expected 1 to 4096 bytes".to_string());
        }
        let line = self.cache_line;
        if !line.is_power_of_two() || !(4096..=65_536).contains(&line) {
            return Err(format!(
                "cache_line: {line} bytes; expected 4k, 8k, 16k, 32k or 64k"
            ));
        }
        if !(1024..=4 << 30).contains(&self.seq_cutoff.threshold) {
            return Err(format!(
                "seq_cutoff.threshold: {} bytes is outside Open CAS's range 1 KiB..4 GiB",
                self.seq_cutoff.threshold
            ));
        }
        self.caching
            .validate()
            .map_err(|error| error.to_string().replacen("cache.", "caching.", 1))?;
        if self.caching.layout != heterarchy_engine::TierLayout::default() {
            return Err("caching.layout: a volume has one cache tier".to_string());
        }
        Ok(())
    }
}

/// A `[caching]` table, with [`default_caching`]'s choices unless it makes its own.
fn caching_with_clock<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<CacheConfig, D::Error> {
    let mut table = toml::Table::deserialize(deserializer)?;
    table
        .entry("policy")
        .or_insert_with(|| toml::Value::String(default_caching().policy));
    if let toml::Value::Table(nhc) = table
        .entry("nhc")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()))
    {
        nhc.entry("admit_while_filling")
            .or_insert(toml::Value::Boolean(true));
    }
    toml::Value::Table(table)
        .try_into()
        .map_err(serde::de::Error::custom)
}

/// Byte counts written as numbers or as sizes (`"64k"`).
mod byte_size {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &u64, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(*bytes)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Size {
            Number(u64),
            Text(String),
        }
        match Size::deserialize(deserializer)? {
            Size::Number(bytes) => Ok(bytes),
            Size::Text(text) => {
                heterarchy_trace::units::parse_bytes(&text).map_err(serde::de::Error::custom)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_an_export_table_with_defaults() {
        let config: VolumeConfig = toml::from_str(
            "name = \"v\"\nbacking = \"file:/tmp/b:1g\"\ncache = \"ram:64m\"\n\
             cache_line = \"16k\"\n[caching]\nmode = \"wb\"\n[seq_cutoff]\npolicy = \"never\"\n",
        )
        .unwrap();
        assert_eq!(config.cache_line, 16_384);
        assert_eq!(config.caching.mode, heterarchy_engine::WriteMode::Wb);
        assert_eq!(config.caching.policy, "clock");
        assert!(config.caching.nhc.admit_while_filling);
        assert_eq!(config.seq_cutoff.policy, CutoffPolicy::Never);
        assert_eq!(config.seq_cutoff.threshold, 1 << 20);
        config.validate().unwrap();
        let bare: VolumeConfig =
            toml::from_str("name = \"v\"\nbacking = \"ram:1m\"\ncache = \"ram:1m\"\n").unwrap();
        assert_eq!(bare.caching.policy, "clock");
        assert_eq!(bare.cache_line, 65_536);
    }

    #[test]
    fn bad_values_name_their_key() {
        let mut config =
            VolumeConfig::new("v", "ram:1m".parse().unwrap(), "ram:1m".parse().unwrap());
        config.cache_line = 3000;
        assert!(config.validate().unwrap_err().starts_with("cache_line:"));
        config.cache_line = 4096;
        config.caching.nhit.threshold = 0;
        assert!(config
            .validate()
            .unwrap_err()
            .starts_with("caching.nhit.threshold"));
        let error = toml::from_str::<VolumeConfig>(
            "name = \"v\"\nbacking = \"ram:1m\"\ncache = \"tape:1m\"\n",
        )
        .unwrap_err();
        assert!(error.to_string().contains("expected ram:SIZE"), "{error}");
    }
}
