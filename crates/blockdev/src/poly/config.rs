//! A PolyEMT export's settings, from `serve nbd --poly` or one `[[export]]` table of a serve
//! config whose caching scheme is `poly`:
//!
//! ```toml
//! [[export]]
//! name = "poly0"
//! backing = "file:/srv/ssd.img:8g"       # the SSD
//! cache = "pmem:/dev/shm/poly0:256m"     # the memory tier (BB-DRAM): persistent
//! backing_throttle = "nvme-flash"        # pace the backing store like a preset (optional)
//! [export.caching]
//! scheme = "poly"
//! [export.caching.poly]
//! step = 0.1                 # share of the tier a search step moves (divides 1)
//! interval = 30.0            # seconds a measurement window lasts
//! restart_threshold = 0.2    # relative change at the held point that restarts the search
//! patience = 2               # steps in a row measuring below the one before: the knob goes back
//! compress = true            # search the compressed share too
//! codec = "lz4"              # lz4 or zstd
//! read_share = 0.5           # fixed knobs instead of the search (both or neither)
//! compressed_share = 0.2
//! ```

use std::io;
use std::time::Duration;

use heterarchy_device::backend::{open_backend_paced, BackendSpec, Throttles};
use heterarchy_device::codec::Codec;
use heterarchy_engine::poly::{Knobs, SearchConfig};
use heterarchy_engine::ParamError;
use serde::{Deserialize, Serialize};

use super::device::{PolyDevice, PolyKnobs, PolyOptions, PolyStats};
use crate::config::throttle_named;
use crate::error::ExportError;
use heterarchy_device::BlockDevice;

/// The `[export.caching.poly]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolySettings {
    pub step: f64,
    /// Seconds per measurement window.
    pub interval: f64,
    pub restart_threshold: f64,
    pub patience: u32,
    pub compress: bool,
    pub codec: String,
    pub read_share: Option<f64>,
    pub compressed_share: Option<f64>,
}

impl Default for PolySettings {
    fn default() -> Self {
        let search = SearchConfig::default();
        PolySettings {
            step: search.step,
            interval: 30.0,
            restart_threshold: search.restart_threshold,
            patience: search.patience,
            compress: search.compress,
            codec: Codec::Lz4.name().into(),
            read_share: None,
            compressed_share: None,
        }
    }
}

impl PolySettings {
    /// The device options these settings stand for; the error names the key.
    pub fn options(&self) -> Result<PolyOptions, ExportError> {
        let codec = Codec::parse(&self.codec).map_err(ExportError::Codec)?;
        let knobs = match (self.read_share, self.compressed_share) {
            (Some(read_share), Some(compressed_share)) => {
                let knobs = Knobs {
                    read_share,
                    compressed_share,
                };
                knobs.validate()?;
                PolyKnobs::Fixed(knobs)
            }
            (None, None) => {
                let config = SearchConfig {
                    step: self.step,
                    restart_threshold: self.restart_threshold,
                    patience: self.patience,
                    compress: self.compress,
                };
                config.validate()?;
                if !(self.interval.is_finite() && self.interval > 0.0) {
                    return Err(ExportError::Param(ParamError {
                        name: "interval",
                        value: self.interval.to_string(),
                        expected: "seconds above 0",
                    }));
                }
                PolyKnobs::Search {
                    config,
                    interval: Duration::from_secs_f64(self.interval),
                }
            }
            _ => {
                return Err(ExportError::invalid(
                    "read_share and compressed_share",
                    "expected both (fixed knobs) or neither (the search)",
                ))
            }
        };
        Ok(PolyOptions { codec, knobs })
    }
}

/// The `[export.caching]` table of a PolyEMT export.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolyCaching {
    /// Always `poly`: how the serve config tells this export from a cached volume.
    pub scheme: String,
    #[serde(default)]
    pub poly: PolySettings,
}

/// Everything a PolyEMT export needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolyConfig {
    pub name: String,
    pub backing: BackendSpec,
    /// The memory tier.
    pub cache: BackendSpec,
    #[serde(default)]
    pub backing_throttle: Option<String>,
    pub caching: PolyCaching,
}

impl PolyConfig {
    /// `name` over `backing` with `cache` as its tier, searching with the defaults.
    pub fn new(name: &str, backing: BackendSpec, cache: BackendSpec) -> PolyConfig {
        PolyConfig {
            name: name.to_string(),
            backing,
            cache,
            backing_throttle: None,
            caching: PolyCaching {
                scheme: "poly".into(),
                poly: PolySettings::default(),
            },
        }
    }

    /// Checks what can be checked before opening; the error names the key.
    pub fn validate(&self) -> Result<(), ExportError> {
        if self.name.is_empty() {
            return Err(ExportError::invalid(
                "name",
                "expected a non-empty export name",
            ));
        }
        if self.caching.scheme != "poly" {
            return Err(ExportError::Param(ParamError {
                name: "caching.scheme",
                value: format!("\"{}\"", self.caching.scheme),
                expected: "poly",
            }));
        }
        if matches!(self.cache, BackendSpec::Ram { .. }) {
            return Err(ExportError::invalid(
                "cache",
                "the tier's write cache must survive a crash: expected pmem:PATH:SIZE or \
                 file:PATH:SIZE, not ram",
            ));
        }
        self.caching
            .poly
            .options()
            .map(|_| ())
            .map_err(|error| ExportError::Within {
                prefix: "caching.poly.",
                error: Box::new(error),
            })
    }
}

/// A PolyEMT device under its export name.
pub struct PolyExport {
    name: String,
    device: PolyDevice,
}

impl PolyExport {
    /// Opens `config`'s backing store (paced by its throttle from `throttles`) and tier.
    pub fn open(config: &PolyConfig, throttles: &Throttles) -> io::Result<PolyExport> {
        let invalid = |error: ExportError| io::Error::new(io::ErrorKind::InvalidInput, error);
        config.validate().map_err(invalid)?;
        let pace = throttle_named(
            throttles,
            config.backing_throttle.as_deref(),
            "backing_throttle",
        )?;
        let backing = open_backend_paced(&config.backing, pace)?;
        let memory = open_backend_paced(&config.cache, None)?;
        let options = config.caching.poly.options().map_err(invalid)?;
        Ok(PolyExport {
            name: config.name.clone(),
            device: PolyDevice::open(backing, memory, options)?,
        })
    }

    /// The device under the name.
    pub fn device(&self) -> &PolyDevice {
        &self.device
    }

    pub fn stats(&self) -> PolyStats {
        self.device.stats()
    }
}

impl BlockDevice for PolyExport {
    fn name(&self) -> &str {
        &self.name
    }
    fn size_bytes(&self) -> u64 {
        self.device.size_bytes()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.device.read(offset, buf)
    }
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        self.device.write(offset, data, fua)
    }
    /// Advisory (NBD: the contents are undefined afterwards): kept, so that a dirty page
    /// written back later cannot resurrect older data over a trim of the backing store; a
    /// range past the end is refused all the same.
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        heterarchy_device::backend::check_range(self.size_bytes(), offset, len)
    }
    fn flush(&self) -> io::Result<()> {
        self.device.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toml_table_reads_and_bad_keys_are_named() {
        let config: PolyConfig = toml::from_str(
            "name = \"p\"\nbacking = \"ram:16m\"\ncache = \"ram:1m\"\n[caching]\nscheme = \
             \"poly\"\n[caching.poly]\nstep = 0.25\ninterval = 5.0\n",
        )
        .unwrap();
        assert_eq!(config.caching.poly.step, 0.25);
        let error = config.validate().unwrap_err().to_string();
        assert!(error.starts_with("cache:"), "{error}");
        for (key, value, named) in [
            ("step", "0.3", "step"),
            ("codec", "\"brotli\"", "codec"),
            ("read_share", "1.5", "read_share"),
            ("interval", "0.0", "interval"),
        ] {
            let text = format!(
                "name = \"p\"\nbacking = \"ram:16m\"\ncache = \"file:/tmp/x:1m\"\n[caching]\n\
                 scheme = \"poly\"\n[caching.poly]\n{key} = {value}\n"
            );
            let config: PolyConfig = toml::from_str(&text).unwrap();
            let error = config.validate().unwrap_err().to_string();
            assert!(error.contains(named), "{key}: {error}");
        }
        let error = toml::from_str::<PolyConfig>(
            "name = \"p\"\nbacking = \"ram:16m\"\ncache = \"ram:1m\"\n[caching]\nscheme = \
             \"poly\"\nmode = \"wb\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("mode"), "{error}");
    }
}
