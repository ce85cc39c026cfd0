//! Device timing models (docs/architecture.md, "Device models"; seed 000 chapters 2–4).
//!
//! A [`DeviceModel`] says when each operation completes, given when it was issued: the
//! discrete-event simulator runs it on a virtual clock, and the live throttle ([`backend::Throttle`]) runs it on
//! the real one. Devices are described by [`DeviceSpec`]s, loaded from TOML; the presets of
//! the seed papers' devices are embedded ([`presets`]).

pub mod backend;
pub mod codec;
mod error;
pub mod export;
pub mod memory;
pub mod model;
pub mod presets;
pub mod probe;
pub mod secure_file;
pub mod spec;

pub use error::{DecompressError, SpecError, ThrottleError};
pub use export::BlockDevice;
pub use memory::{MemoryAccess, MemoryOp};
pub use model::{DeviceModel, IoKind};
pub use probe::{run_probe, BackgroundLoad, Probe, ProbeResult};
pub use spec::{
    DeviceError, DeviceKind, DeviceSpec, DirectionSpec, GcSpec, MechanicalSpec, MemoryPathSpec,
};
