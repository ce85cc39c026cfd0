//! Live cached block volumes (issue 5): a cache device in front of a backing store, served by
//! the engine's cache controller, with Open CAS's modes and settings, crash-safe write-back and
//! NHC's admission tuning on the live request stream (seed 000 §4.4, Orthus-CAS).

pub mod config;
mod cutoff;
pub mod layout;
mod slots;
mod stats;
mod volume;

pub use config::{CutoffPolicy, SeqCutoffConfig, VolumeConfig};
pub use stats::{AdmissionStats, DeviceStats, VolumeStats};
pub use volume::Volume;
