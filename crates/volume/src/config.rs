//! A cached volume's settings, in Open CAS's vocabulary (casadm: cache line size, cache mode,
//! promotion, sequential cutoff, cleaning), from a command line or one `[[export]]` table of a
//! serve config:
//!
//! ```toml
//! [[export]]
//! name = "vol0"
//! backing = "file:/srv/disk.img:8g"
//! cache = ["ram:1g", "pmem:/mnt/pm/vol0:8g"]   # cache tiers, fastest first (or one string)
//! cache_line = "64k"              # 4k .. 64k
//! cache_throttle = ["none", "optane-pm"]        # pace a tier like a preset (optional)
//! backing_throttle = "optane-ssd" # pace the backing store like a preset (optional)
//! cache_faults = ["none", "read-error=1%"]      # inject faults into a tier (optional; tests)
//! backing_faults = "write-error-at=0+4k"        # ... or into the backing store
//! queue_depth = 64                # most operations outstanding on a file or block device
//! fallback_pt_errors = 16         # cache-device errors after which the cache is given up
//! [export.caching]                # the engine's cache settings: mode, policy, layout,
//! mode = "wb"                     # cleaning, promotion, admission = "nhc", ...
//! [export.seq_cutoff]
//! policy = "full"                 # always | full | never
//! threshold = "1m"
//! ```

use heterarchy_trace::units::byte_size;
use serde::{Deserialize, Deserializer, Serialize};

use heterarchy_device::backend::{BackendSpec, FaultSpec};
use heterarchy_engine::{CacheConfig, ConfigError, MAX_CACHE_TIERS};

use crate::error::VolumeError;

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
    /// The cache tiers, fastest first (a single string is one tier).
    #[serde(deserialize_with = "one_or_many")]
    pub cache: Vec<BackendSpec>,
    /// Cache line size (Open CAS's default for Orthus-CAS: 64 KiB).
    #[serde(default = "default_line", with = "byte_size")]
    pub cache_line: u64,
    /// Per cache tier, a device preset or device file it is paced like (`none` or an empty
    /// string for a tier left at its own speed); empty for none at all.
    #[serde(default, deserialize_with = "throttles")]
    pub cache_throttle: Vec<Option<String>>,
    /// A device preset or device file the backing store is paced like.
    #[serde(default)]
    pub backing_throttle: Option<String>,
    /// Per cache tier, faults to inject (`none` for a tier left whole); empty for none at all.
    #[serde(
        default,
        deserialize_with = "fault_specs",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub cache_faults: Vec<Option<FaultSpec>>,
    /// Faults to inject into the backing store.
    #[serde(
        default,
        deserialize_with = "heterarchy_device::backend::fault_spec::deserialize_optional",
        skip_serializing_if = "Option::is_none"
    )]
    pub backing_faults: Option<FaultSpec>,
    /// Cache-device errors after which the cache is given up for pass-through, once what it
    /// holds is written back (Open CAS's fallback pass-through threshold); 0: only when a
    /// cache device is gone.
    #[serde(default = "default_fallback_pt_errors")]
    pub fallback_pt_errors: u64,
    /// Most operations outstanding at once on each file or block device (memory takes
    /// whatever comes).
    #[serde(default = "default_queue_depth")]
    pub queue_depth: usize,
    /// The engine's cache settings (mode, eviction policy, cleaning, promotion, admission).
    #[serde(default = "default_caching", deserialize_with = "caching_with_clock")]
    pub caching: CacheConfig,
    #[serde(default)]
    pub seq_cutoff: SeqCutoffConfig,
    /// Reformat a cache that holds another volume's lines (its dirty data is lost).
    #[serde(default)]
    pub force: bool,
}

fn default_fallback_pt_errors() -> u64 {
    16
}

fn default_line() -> u64 {
    64 * 1024
}

/// Deep enough for flash to reach its bandwidth (seed 000 §3.1.1: flash keeps gaining past
/// 32 outstanding) and for fio's deepest usual runs.
fn default_queue_depth() -> usize {
    64
}

/// A list of strings, or one string standing for a list of one; each parsed as `T`, whose
/// error is kept (an untagged enum would drop it).
fn one_or_many<'de, D: Deserializer<'de>, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    struct Items<T>(std::marker::PhantomData<T>);
    impl<'de, T> serde::de::Visitor<'de> for Items<T>
    where
        T: std::str::FromStr,
        T::Err: std::fmt::Display,
    {
        type Value = Vec<T>;

        fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
            formatter.write_str("a string or a list of strings")
        }

        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Vec<T>, E> {
            text.parse().map(|item| vec![item]).map_err(E::custom)
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut items: A) -> Result<Vec<T>, A::Error> {
            let mut parsed = Vec::new();
            while let Some(text) = items.next_element::<String>()? {
                parsed.push(text.parse().map_err(serde::de::Error::custom)?);
            }
            Ok(parsed)
        }
    }
    deserializer.deserialize_any(Items(std::marker::PhantomData))
}

/// Throttle names, one or a list; `none` and the empty string leave a tier unthrottled.
fn throttles<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Option<String>>, D::Error> {
    let names: Vec<String> = one_or_many(deserializer)?;
    Ok(names.into_iter().map(throttle_name).collect())
}

/// Fault specs, one per tier, `none` for a tier left whole.
fn fault_specs<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<Option<FaultSpec>>, D::Error> {
    let specs: Vec<String> = one_or_many(deserializer)?;
    specs
        .iter()
        .map(|text| FaultSpec::parse_optional(text).map_err(serde::de::Error::custom))
        .collect()
}

/// A throttle as written: `none` or nothing means no throttle.
pub fn throttle_name(name: String) -> Option<String> {
    (!name.is_empty() && name != "none").then_some(name)
}

/// The engine's defaults, but approximate LRU (CLOCK) for live eviction (no list to reorder on
/// every hit).
pub fn default_caching() -> CacheConfig {
    CacheConfig {
        policy: "clock".to_string(),
        ..CacheConfig::default()
    }
}

impl VolumeConfig {
    /// A volume named `name` with every default: write-through, 64 KiB lines, CLOCK.
    pub fn new(name: &str, backing: BackendSpec, cache: BackendSpec) -> VolumeConfig {
        VolumeConfig::with_tiers(name, backing, vec![cache])
    }

    /// A volume over cache tiers `cache` (fastest first), with every default.
    pub fn with_tiers(name: &str, backing: BackendSpec, cache: Vec<BackendSpec>) -> VolumeConfig {
        VolumeConfig {
            name: name.to_string(),
            backing,
            cache,
            cache_line: default_line(),
            cache_throttle: Vec::new(),
            backing_throttle: None,
            cache_faults: Vec::new(),
            backing_faults: None,
            fallback_pt_errors: default_fallback_pt_errors(),
            queue_depth: default_queue_depth(),
            caching: default_caching(),
            seq_cutoff: SeqCutoffConfig::default(),
            force: false,
        }
    }

    /// Checks what can be checked without opening anything; errors name the key.
    pub fn validate(&self) -> Result<(), VolumeError> {
        if self.name.is_empty() || self.name.len() > 4096 {
            return Err(VolumeError::config("name", "expected 1 to 4096 bytes"));
        }
        let line = self.cache_line;
        if !line.is_power_of_two() || !(4096..=65_536).contains(&line) {
            return Err(VolumeError::config(
                "cache_line",
                format!("{line} bytes; expected 4k, 8k, 16k, 32k or 64k"),
            ));
        }
        if !(1024..=4 << 30).contains(&self.seq_cutoff.threshold) {
            return Err(VolumeError::config(
                "seq_cutoff.threshold",
                format!(
                    "{} bytes is outside Open CAS's range 1 KiB..4 GiB",
                    self.seq_cutoff.threshold
                ),
            ));
        }
        self.caching.validate().map_err(caching_error)?;
        let tiers = self.cache.len();
        if !(1..=MAX_CACHE_TIERS).contains(&tiers) {
            return Err(VolumeError::config(
                "cache",
                format!("{tiers} tiers given; expected 1 to {MAX_CACHE_TIERS}"),
            ));
        }
        if !self.cache_throttle.is_empty() && self.cache_throttle.len() != tiers {
            return Err(VolumeError::config(
                "cache_throttle",
                format!(
                    "{} given for {tiers} cache tiers; expected one per tier (none for a tier \
                     at its own speed)",
                    self.cache_throttle.len()
                ),
            ));
        }
        if !self.cache_faults.is_empty() && self.cache_faults.len() != tiers {
            return Err(VolumeError::config(
                "cache_faults",
                format!(
                    "{} given for {tiers} cache tiers; expected one per tier (none for a tier \
                     left whole)",
                    self.cache_faults.len()
                ),
            ));
        }
        if self.queue_depth == 0 {
            return Err(VolumeError::config("queue_depth", "expected at least 1"));
        }
        let devices = std::iter::once(("backing".to_string(), &self.backing)).chain(
            self.cache
                .iter()
                .enumerate()
                .map(|(index, spec)| (format!("cache[{index}]"), spec)),
        );
        let mut files: Vec<(String, &std::path::Path)> = Vec::new();
        for (key, spec) in devices {
            let path = match spec {
                BackendSpec::File { path, .. }
                | BackendSpec::Pmem { path, .. }
                | BackendSpec::Btt { path, .. } => path,
                BackendSpec::Ram { .. } => continue,
            };
            if let Some((other, _)) = files.iter().find(|(_, seen)| same_file(seen, path)) {
                let reason = format!(
                    "{} is already {other}; each tier needs storage of its own",
                    path.display()
                );
                return Err(VolumeError::config(key, reason));
            }
            files.push((key, path));
        }
        Ok(())
    }

    /// The throttle of cache tier `tier`, if any.
    pub fn tier_throttle(&self, tier: usize) -> Option<&str> {
        self.cache_throttle.get(tier).and_then(Option::as_deref)
    }
}

/// The engine's error about the `[caching]` table, under the name that table has in a volume's
/// config (the engine calls it `cache`).
pub(crate) fn caching_error(error: ConfigError) -> VolumeError {
    VolumeError::Config {
        key: format!("caching.{}", error.key),
        reason: error.message,
    }
}

/// True when `a` and `b` name one file: the same path, or the same inode once both exist.
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if a == b {
        return true;
    }
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
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
    toml::Value::Table(table)
        .try_into()
        .map_err(serde::de::Error::custom)
}

/// Byte counts written as numbers or as sizes (`"64k"`).
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
        assert_eq!(bare.cache.len(), 1);
        assert!(bare.cache_throttle.is_empty());
        let tiers: VolumeConfig = toml::from_str(
            "name = \"v\"\nbacking = \"ram:8m\"\ncache = [\"ram:1m\", \"ram:2m\"]\n\
             cache_throttle = [\"none\", \"optane-pm\"]\n[caching]\nlayout = \"exclusive\"\n",
        )
        .unwrap();
        tiers.validate().unwrap();
        assert_eq!(tiers.cache.len(), 2);
        assert_eq!(tiers.tier_throttle(0), None);
        assert_eq!(tiers.tier_throttle(1), Some("optane-pm"));
    }

    #[test]
    fn tier_lists_that_make_no_sense_are_refused_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str| -> BackendSpec {
            format!("file:{}:1m", dir.path().join(name).display())
                .parse()
                .unwrap()
        };
        let mut config = VolumeConfig::with_tiers("v", file("b"), vec![file("c"), file("c")]);
        assert!(config
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("cache[1]:"));
        config.cache = vec![file("b")];
        assert!(config
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("cache[0]:"));
        config.cache = Vec::new();
        assert!(config
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("cache: 0 tiers"));
        config.cache = (0..5).map(|i| file(&format!("t{i}"))).collect();
        assert!(config
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("cache: 5 tiers"));
        config.cache = vec![file("c"), file("d")];
        config.cache_throttle = vec![Some("optane-pm".into())];
        assert!(config
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("cache_throttle:"));
    }

    #[test]
    fn bad_values_name_their_key() {
        let mut config =
            VolumeConfig::new("v", "ram:1m".parse().unwrap(), "ram:1m".parse().unwrap());
        config.cache_line = 3000;
        assert!(config
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("cache_line:"));
        config.cache_line = 4096;
        config.caching.nhit.threshold = 0;
        assert!(config
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("caching.nhit.threshold"));
        let error = toml::from_str::<VolumeConfig>(
            "name = \"v\"\nbacking = \"ram:1m\"\ncache = \"tape:1m\"\n",
        )
        .unwrap_err();
        assert!(error.to_string().contains("expected ram:SIZE"), "{error}");
    }
}
