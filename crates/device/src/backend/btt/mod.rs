//! The Block Translation Table (seed 001 §II, §III.2.2): sector writes made atomic on
//! persistent memory by writing each one out of place and switching one map entry. Issue 17
//! builds it as storage, usable wherever a file is; this module holds what is written so far:
//! the on-media format ([`layout`]) and one arena at work ([`arena`]: lanes, the read-tracking
//! table, map locks, recovery).

pub mod arena;
pub mod layout;
