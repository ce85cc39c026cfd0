//! A staged PM device's settings, from a command line or one `[[export]]` table of a serve
//! config (the key `staging` tells it from a cached volume's table):
//!
//! ```toml
//! [[export]]
//! name = "pm0"
//! backing = "btt:/dev/shm/pm0:8g"    # a BTT on persistent memory (or any storage)
//! staging = "caiti"                  # none, caiti, caiti-no-ee, caiti-no-bp, pmbd, pmbd70, lru, coactive
//! staging_size = "512m"              # DRAM for the cache (seed 001 §4.1: 512 MiB)
//! evictors = 2                       # Caiti's evictor threads (default: one per core)
//! throttle = "optane-pm"             # pace the PM like a preset, under the BTT (optional)
//! ```

use std::io;

use std::sync::Arc;

use heterarchy_device::backend::{open_backend_paced, BackendSpec, Throttle, Throttles};
use heterarchy_engine::staging::StagingScheme;
use heterarchy_trace::units::byte_size;
use serde::{Deserialize, Serialize};

use crate::error::ExportError;
use crate::{StagedDevice, StagedOptions};
use heterarchy_device::BlockDevice;

/// Everything a staged export needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StagedConfig {
    pub name: String,
    pub backing: BackendSpec,
    pub staging: StagingScheme,
    #[serde(default = "default_staging_size", with = "byte_size")]
    pub staging_size: u64,
    /// Caiti's evictor threads; one per core when not given.
    #[serde(default)]
    pub evictors: Option<u32>,
    /// A device preset or device file the medium is paced like.
    #[serde(default)]
    pub throttle: Option<String>,
}

fn default_staging_size() -> u64 {
    512 << 20
}

impl StagedConfig {
    /// `name` over `backing` under `staging` with the defaults.
    pub fn new(name: &str, backing: BackendSpec, staging: StagingScheme) -> StagedConfig {
        StagedConfig {
            name: name.to_string(),
            backing,
            staging,
            staging_size: default_staging_size(),
            evictors: None,
            throttle: None,
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
        if self.staging != StagingScheme::None && self.staging_size < crate::BLOCK_BYTES as u64 {
            return Err(ExportError::invalid(
                "staging_size",
                format!(
                    "{} bytes hold no {} B slot",
                    self.staging_size,
                    crate::BLOCK_BYTES
                ),
            ));
        }
        if self.evictors == Some(0) {
            return Err(ExportError::invalid("evictors", "expected at least 1"));
        }
        Ok(())
    }
}

/// The throttle a config's `key` names (`none` or nothing: none), or an error naming the key.
pub(crate) fn throttle_named(
    throttles: &Throttles,
    name: Option<&str>,
    key: &str,
) -> io::Result<Option<Arc<Throttle>>> {
    match name {
        None | Some("none") | Some("") => Ok(None),
        Some(name) => throttles
            .get(name)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{key}: {e}"))),
    }
}

/// A staged device under its export name.
pub struct StagedExport {
    name: String,
    device: StagedDevice,
}

impl StagedExport {
    /// Opens `config`'s storage (paced by its throttle from `throttles`) under its cache.
    pub fn open(config: &StagedConfig, throttles: &Throttles) -> io::Result<StagedExport> {
        let invalid = |error: ExportError| io::Error::new(io::ErrorKind::InvalidInput, error);
        config.validate().map_err(invalid)?;
        let pace = throttle_named(throttles, config.throttle.as_deref(), "throttle")?;
        let media = open_backend_paced(&config.backing, pace)?;
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get() as u32);
        let device = StagedDevice::open(
            media,
            StagedOptions {
                scheme: config.staging,
                cache_bytes: config.staging_size,
                evictors: config.evictors.unwrap_or(cores),
            },
        )?;
        Ok(StagedExport {
            name: config.name.clone(),
            device,
        })
    }

    /// The device under the name.
    pub fn device(&self) -> &StagedDevice {
        &self.device
    }
}

impl BlockDevice for StagedExport {
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
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.device.trim(offset, len)
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
        let config: StagedConfig = toml::from_str(
            "name = \"pm0\"\nbacking = \"ram:64m\"\nstaging = \"caiti\"\nstaging_size = \"8m\"\n",
        )
        .unwrap();
        assert_eq!(config.staging, StagingScheme::CAITI);
        assert_eq!(config.staging_size, 8 << 20);
        config.validate().unwrap();
        let error = toml::from_str::<StagedConfig>(
            "name = \"pm0\"\nbacking = \"ram:64m\"\nstaging = \"writeback\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("writeback") && error.contains("caiti"),
            "{error}"
        );
        let mut config = config;
        config.evictors = Some(0);
        assert!(config
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("evictors"));
        config.evictors = None;
        config.staging_size = 100;
        assert!(config
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("staging_size"));
    }

    #[test]
    fn an_export_serves_what_it_is_given() {
        let config = StagedConfig {
            staging_size: 1 << 20,
            ..StagedConfig::new("pm0", "ram:4m".parse().unwrap(), StagingScheme::CAITI)
        };
        let export = StagedExport::open(&config, &Throttles::default()).unwrap();
        assert_eq!((export.name(), export.size_bytes()), ("pm0", 4 << 20));
        export.write(8192, &[5u8; 4096], true).unwrap();
        export.write_zeroes(8192 + 100, 10, false).unwrap();
        let mut back = [0u8; 4096];
        export.read(8192, &mut back).unwrap();
        assert_eq!(&back[..100], &[5u8; 100][..]);
        assert_eq!(&back[100..110], &[0u8; 10][..]);
        assert_eq!(&back[110..], &[5u8; 4096 - 110][..]);
        export.flush().unwrap();
        let throttled = StagedConfig {
            throttle: Some("floppy".into()),
            ..config
        };
        let error = StagedExport::open(&throttled, &Throttles::default())
            .err()
            .unwrap();
        assert!(error.to_string().contains("throttle"), "{error}");
    }
}
