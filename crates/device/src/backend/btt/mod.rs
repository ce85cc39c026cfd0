//! The Block Translation Table (seed 001 §2.2, Figure 1): sector writes made atomic on
//! persistent memory by writing each one out of place and switching one map entry, built as
//! storage usable wherever a file is (docs/pm-block-device.md): the on-media format
//! ([`layout`]), one arena at work ([`arena`]: lanes, the read-tracking table, map locks,
//! recovery), and the device over all arenas ([`BttBackend`]).

pub mod arena;
mod device;
pub mod layout;

pub use device::{BttBackend, BttOptions};
