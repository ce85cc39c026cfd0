//! A block device on persistent memory, live (seed 001; docs/pm-block-device.md, "The BTT and
//! Caiti's transit cache"; docs/architecture.md, "Staging caches"): a BTT (or raw PM, or any
//! storage) under a DRAM staging cache — Caiti's transit cache or one of its baselines — with
//! the engine's staging decisions (`engine::staging`, the code the timed simulator runs)
//! carried out by the client's threads and a pool of background threads; each an
//! `heterarchy_device::BlockDevice`, what a server exports.

mod config;
mod device;
mod error;
pub mod poly;
mod slots;

pub use config::{StagedConfig, StagedExport};
pub use device::{StagedDevice, StagedOptions, BLOCK_BYTES};
pub use error::ExportError;
