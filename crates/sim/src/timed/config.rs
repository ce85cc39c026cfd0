//! The hierarchy file of `heterarchy simulate`: tiers built from device presets or files, the
//! cache controller's settings, the load, and optionally the splitting baseline.
//!
//! ```toml
//! seed = 1
//! line_size = "32KiB"
//! [cache]                 # the engine's cache settings: mode, policy, layout, cleaning, ...
//! mode = "wt"
//! policy = "lru"
//! [[tier]]
//! device = "optane-pm"    # a preset name, or a device .toml file relative to this file
//! size = "1GiB"
//! [[tier]]
//! device = "optane-ssd"   # the last tier is the backing store and needs no size
//! [load]
//! outstanding = 16        # closed loop; or `speedup = 10.0` to replay trace timestamps
//! requests = 1000000      # measured, after the warm-up
//! warmup = 100000
//! [software]              # CPU time per request besides device time (engine::timing)
//! per_request_ns = 0.0
//! per_kib_ns = 0.0
//! ```

use std::path::Path;

use heterarchy_device::presets::resolve_device;
use heterarchy_device::DeviceSpec;
use heterarchy_engine::{
    CacheConfig, CacheController, Controller, SoftwareCost, SplitController, MAX_CACHE_TIERS,
};
use heterarchy_trace::units::{parse_bytes, SizeError};
use serde::Deserialize;

use super::run::{Arrivals, Load};
use crate::error::ControllerError;

/// Closed-loop clients when the file names neither `outstanding` nor `speedup`.
pub const DEFAULT_OUTSTANDING: u32 = 16;

/// A size written as bytes (`4096`) or with a unit (`"32KiB"`, `"1gb"`).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
enum Bytes {
    Count(u64),
    Text(String),
}

impl Bytes {
    fn resolve(&self) -> Result<u64, SizeError> {
        match self {
            Bytes::Count(bytes) => Ok(*bytes),
            Bytes::Text(text) => parse_bytes(text),
        }
    }
}

/// A split rate, or `"search"` for the best one.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
enum SplitRateFile {
    Rate(f64),
    Word(String),
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TierFile {
    device: String,
    #[serde(default)]
    size: Option<Bytes>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadFile {
    outstanding: Option<u32>,
    speedup: Option<f64>,
    /// Requests measured, after the warm-up.
    requests: Option<u64>,
    warmup: Option<u64>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SplitFile {
    rate: SplitRateFile,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HierarchyFile {
    #[serde(default = "default_seed")]
    seed: u64,
    #[serde(default)]
    line_size: Option<Bytes>,
    #[serde(default)]
    cache: CacheConfig,
    #[serde(default)]
    tier: Vec<TierFile>,
    #[serde(default)]
    load: LoadFile,
    #[serde(default)]
    split: Option<SplitFile>,
    #[serde(default)]
    software: SoftwareCost,
}

fn default_seed() -> u64 {
    1
}

/// Which controller runs the hierarchy.
#[derive(Clone, Debug, PartialEq)]
pub enum Scheme {
    /// The cache controller with the file's `[cache]` settings.
    Caching,
    /// The static splitting baseline (seed 000 §4.2, Eqs 4.8–4.9) with this split rate.
    Split(f64),
    /// Splitting at the best rate, found by searching.
    SplitSearch,
}

/// A validated hierarchy, ready to build controllers and run.
#[derive(Clone, Debug)]
pub struct Hierarchy {
    /// Devices from the top tier down; the last is the backing store.
    pub devices: Vec<DeviceSpec>,
    /// Capacity of each cache tier in bytes (one fewer than devices).
    pub tier_bytes: Vec<u64>,
    pub cache: CacheConfig,
    /// Cache-line size block traces are split into, when the file sets it.
    pub line_bytes: Option<u32>,
    pub seed: u64,
    pub load: Load,
    pub scheme: Scheme,
}

/// A hierarchy file that cannot be used: where, which key, and why (the same shape as a bad
/// device file's error).
pub use heterarchy_device::DeviceError as ConfigError;

impl Hierarchy {
    /// Reads and validates a hierarchy file; device files it names resolve against its folder.
    pub fn from_file(path: &Path) -> Result<Hierarchy, ConfigError> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError {
            source: source.clone(),
            key: String::new(),
            message: format!("cannot read: {error}"),
        })?;
        Hierarchy::from_toml(&text, &source, path.parent())
    }

    /// Parses and validates hierarchy TOML; `source` names it in errors.
    pub fn from_toml(
        text: &str,
        source: &str,
        base_dir: Option<&Path>,
    ) -> Result<Hierarchy, ConfigError> {
        let fail = |key: &str, message: String| ConfigError {
            source: source.to_string(),
            key: key.to_string(),
            message,
        };
        let file: HierarchyFile = toml::from_str(text).map_err(|error| {
            let line = error
                .span()
                .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
            let position = line
                .map(|line| format!("line {line}: "))
                .unwrap_or_default();
            fail("", format!("{position}{}", error.message().trim()))
        })?;
        if !(2..=MAX_CACHE_TIERS + 1).contains(&file.tier.len()) {
            return Err(fail(
                "tier",
                format!(
                    "{} tiers given; a hierarchy has 2 to {}: 1 to {MAX_CACHE_TIERS} cache tiers, \
                     then the backing store",
                    file.tier.len(),
                    MAX_CACHE_TIERS + 1
                ),
            ));
        }
        let line_bytes = match &file.line_size {
            None => None,
            Some(size) => {
                let bytes = size
                    .resolve()
                    .map_err(|m| fail("line_size", m.to_string()))?;
                match u32::try_from(bytes) {
                    Ok(bytes) if bytes > 0 => Some(bytes),
                    _ => return Err(fail("line_size", format!("{bytes} is not in 1..4GiB"))),
                }
            }
        };
        let mut devices = Vec::new();
        let mut tier_bytes = Vec::new();
        let last = file.tier.len() - 1;
        for (index, tier) in file.tier.iter().enumerate() {
            let key = |field: &str| format!("tier[{index}].{field}");
            let device = resolve_device(&tier.device, base_dir)
                .map_err(|error| fail(&key("device"), error.to_string()))?;
            if index < last {
                let size = tier
                    .size
                    .as_ref()
                    .ok_or_else(|| fail(&key("size"), "a cache tier needs a size".into()))?
                    .resolve()
                    .map_err(|m| fail(&key("size"), m.to_string()))?;
                if size == 0 || size < u64::from(line_bytes.unwrap_or(1)) {
                    return Err(fail(
                        &key("size"),
                        format!("{size} bytes holds no cache line"),
                    ));
                }
                if let Some(capacity) = device.capacity_bytes() {
                    if size > capacity {
                        return Err(fail(
                            &key("size"),
                            format!(
                                "{size} bytes do not fit on {} ({capacity} bytes)",
                                device.name
                            ),
                        ));
                    }
                }
                tier_bytes.push(size);
            }
            devices.push(device);
        }
        let mut load = load_of(&file.load).map_err(|(key, m)| fail(key, m))?;
        for (key, value) in [
            ("software.per_request_ns", file.software.per_request_ns),
            ("software.per_kib_ns", file.software.per_kib_ns),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(fail(key, format!("{value} must be a finite number ≥ 0")));
            }
        }
        load.software = file.software;
        let scheme = match &file.split {
            None => Scheme::Caching,
            Some(split) => match split.rate.clone() {
                SplitRateFile::Rate(rate) if (0.0..=1.0).contains(&rate) => Scheme::Split(rate),
                SplitRateFile::Word(word) if word == "search" => Scheme::SplitSearch,
                SplitRateFile::Rate(rate) => {
                    return Err(fail("split.rate", format!("{rate} is not in [0, 1]")))
                }
                SplitRateFile::Word(word) => {
                    return Err(fail(
                        "split.rate",
                        format!("\"{word}\": expected a rate in [0, 1] or \"search\""),
                    ))
                }
            },
        };
        if scheme != Scheme::Caching && devices.len() != 2 {
            return Err(fail("split", "splitting needs exactly two tiers".into()));
        }
        let hierarchy = Hierarchy {
            devices,
            tier_bytes,
            cache: file.cache,
            line_bytes,
            seed: file.seed,
            load,
            scheme,
        };
        // Building a controller validates the cache settings against the tiers.
        if hierarchy.scheme == Scheme::Caching {
            hierarchy
                .cache_controller()
                .map_err(|error| fail("cache", error.to_string()))?;
        }
        Ok(hierarchy)
    }

    /// The cache controller these settings describe.
    pub fn cache_controller(&self) -> Result<CacheController, heterarchy_engine::ConfigError> {
        CacheController::new(&self.cache, &self.tier_bytes, self.seed)
    }

    /// The splitting baseline at `rate` (fraction of keys on the top device).
    pub fn split_controller(&self, rate: f64) -> SplitController {
        SplitController::new(rate, self.seed)
    }

    /// The controller of a fixed scheme (caching, or splitting at a given rate).
    pub fn controller(&self) -> Result<Box<dyn Controller>, ControllerError> {
        match self.scheme {
            Scheme::Caching => Ok(Box::new(self.cache_controller()?)),
            Scheme::Split(rate) => Ok(Box::new(self.split_controller(rate))),
            Scheme::SplitSearch => Err(ControllerError::SplitSearch),
        }
    }
}

fn load_of(file: &LoadFile) -> Result<Load, (&'static str, String)> {
    let arrivals = match (file.outstanding, file.speedup) {
        (Some(_), Some(_)) => {
            return Err((
                "load",
                "give `outstanding` (closed loop) or `speedup` (open loop), not both".into(),
            ))
        }
        (_, Some(speedup)) if !(speedup.is_finite() && speedup > 0.0) => {
            return Err(("load.speedup", format!("{speedup} must be > 0")))
        }
        (_, Some(speedup)) => Arrivals::Open { speedup },
        (Some(0), None) => return Err(("load.outstanding", "must be at least 1".into())),
        (outstanding, None) => Arrivals::Closed {
            outstanding: outstanding.unwrap_or(DEFAULT_OUTSTANDING),
        },
    };
    let warmup_requests = file.warmup.unwrap_or(0);
    Ok(Load {
        arrivals,
        max_requests: file.requests.map_or(u64::MAX, |requests| {
            requests.saturating_add(warmup_requests)
        }),
        warmup_requests,
        warmup_ns: 0,
        settle_ns: 0,
        measure_ns: None,
        max_time_ns: None,
        software: SoftwareCost::NONE,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_TIERS: &str = r#"
[cache]
mode = "wb"
policy = "lru"
[[tier]]
device = "optane-pm"
size = "64MiB"
[[tier]]
device = "optane-ssd"
"#;

    fn error_of(text: &str) -> ConfigError {
        Hierarchy::from_toml(text, "h.toml", None).unwrap_err()
    }

    #[test]
    fn a_valid_file_builds_its_hierarchy() {
        let hierarchy = Hierarchy::from_toml(TWO_TIERS, "h.toml", None).unwrap();
        assert_eq!(hierarchy.devices.len(), 2);
        assert_eq!(hierarchy.devices[1].name, "optane-ssd");
        assert_eq!(hierarchy.tier_bytes, vec![64 << 20]);
        assert_eq!(hierarchy.scheme, Scheme::Caching);
        assert_eq!(
            hierarchy.load.arrivals,
            Arrivals::Closed {
                outstanding: DEFAULT_OUTSTANDING
            }
        );
        assert_eq!(hierarchy.load.max_requests, u64::MAX);
        assert!(hierarchy.controller().is_ok());
    }

    #[test]
    fn unknown_device_is_named_with_its_key() {
        let error = error_of(&TWO_TIERS.replace("\"optane-ssd\"", "\"floppy\""));
        assert_eq!(error.key, "tier[1].device");
        assert!(error
            .to_string()
            .starts_with("h.toml: key `tier[1].device`: floppy: unknown device"));
    }

    #[test]
    fn a_tier_larger_than_its_device_cannot_fit() {
        let error = error_of(&TWO_TIERS.replace("64MiB", "2TB"));
        assert_eq!(error.key, "tier[0].size");
        assert!(error.message.contains("do not fit on optane-pm"), "{error}");
    }

    #[test]
    fn missing_size_wrong_tier_count_and_unknown_keys_are_rejected() {
        assert_eq!(
            error_of(&TWO_TIERS.replace("size = \"64MiB\"\n", "")).key,
            "tier[0].size"
        );
        let one_tier = "[[tier]]\ndevice = \"dram\"\n";
        assert_eq!(error_of(one_tier).key, "tier");
        let typo = TWO_TIERS.replace("[cache]", "[cache]\nmodee = \"wt\"");
        let error = error_of(&typo);
        assert!(
            error.to_string().contains("line 3") && error.message.contains("modee"),
            "{error}"
        );
        assert!(!error.to_string().contains('\n'));
        let bad_mode = error_of(&TWO_TIERS.replace("\"wb\"", "\"wx\""));
        assert!(bad_mode.message.contains("wx"), "{bad_mode}");
    }

    #[test]
    fn load_and_split_are_checked() {
        let both = format!("{TWO_TIERS}[load]\noutstanding = 4\nspeedup = 2.0\n");
        assert_eq!(error_of(&both).key, "load");
        let negative = format!("{TWO_TIERS}[load]\nspeedup = -1.0\n");
        assert_eq!(error_of(&negative).key, "load.speedup");
        let split = format!("{TWO_TIERS}[split]\nrate = 1.5\n");
        assert_eq!(error_of(&split).key, "split.rate");
        let search = format!("{TWO_TIERS}[split]\nrate = \"search\"\n");
        let hierarchy = Hierarchy::from_toml(&search, "h.toml", None).unwrap();
        assert_eq!(hierarchy.scheme, Scheme::SplitSearch);
        let open = format!("{TWO_TIERS}[load]\nspeedup = 10.0\nrequests = 5\nwarmup = 1\n");
        let hierarchy = Hierarchy::from_toml(&open, "h.toml", None).unwrap();
        assert_eq!(hierarchy.load.arrivals, Arrivals::Open { speedup: 10.0 });
        // `requests` counts the measured requests, as docs/simulation.md's example means it.
        assert_eq!(
            (hierarchy.load.max_requests, hierarchy.load.warmup_requests),
            (6, 1)
        );
    }

    #[test]
    fn device_files_resolve_next_to_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let device = heterarchy_device::presets::preset_toml("nvme-flash")
            .unwrap()
            .replace("\"nvme-flash\"", "\"my-flash\"");
        std::fs::write(dir.path().join("my-flash.toml"), device).unwrap();
        let config = TWO_TIERS.replace("\"optane-ssd\"", "\"my-flash.toml\"");
        let path = dir.path().join("h.toml");
        std::fs::write(&path, config).unwrap();
        let hierarchy = Hierarchy::from_file(&path).unwrap();
        assert_eq!(hierarchy.devices[1].name, "my-flash");
    }
}
