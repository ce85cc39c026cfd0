//! PolyEMT live (seed 004; docs/pm-block-device.md, "PolyEMT: one memory tier, three roles";
//! docs/architecture.md, "PolyEMT"): a persistent memory tier in front of a backing store whose
//! pages change role between write cache, read cache and compressed store, placed by
//! `engine::poly` (the code the timed simulator runs).

mod config;
mod device;
mod region;

pub use config::{PolyConfig, PolyExport};
pub use device::{PolyDevice, PolyKnobs, PolyOptions, PolyStats};
