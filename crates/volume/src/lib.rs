//! Live cached block volumes (docs/block-volumes.md): cache tiers in front of a backing store,
//! served by the engine's cache controller with many requests in flight, with Open CAS's modes
//! and settings, crash-safe write-back and NHC's admission tuning on the live request stream
//! (seed 000 §4.4, Orthus-CAS). docs/architecture.md, "A request through a live volume", shows
//! how the modules fit.

pub mod config;
mod cutoff;
mod device;
mod error;
mod execute;
mod failure;
mod format;
mod job;
pub mod layout;
mod order;
mod placement;
mod planning;
mod sectors;
mod slots;
mod stats;
mod submission;
mod timing;
mod volume;

pub use config::{CutoffPolicy, SeqCutoffConfig, VolumeConfig};
pub use error::{GeometryError, VolumeError};
pub use stats::{AdmissionStats, DeviceStats, PairSettings, TierStats, VolumeStats};
pub use submission::{Attempt, Buffer, Command, Progress, Submission};
pub use volume::Volume;
