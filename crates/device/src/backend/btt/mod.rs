//! The Block Translation Table (seed 001 §II, §III.2.2): sector writes made atomic on
//! persistent memory by writing each one out of place and switching one map entry. Issue 17
//! builds it as storage, usable wherever a file is; this module holds what is written so far:
//! the on-media format ([`layout`]), one arena at work ([`arena`]: lanes, the read-tracking
//! table, map locks, recovery), and the device over all arenas ([`BttBackend`]).

pub mod arena;
mod device;
pub mod layout;

pub use device::{BttBackend, BttOptions};
