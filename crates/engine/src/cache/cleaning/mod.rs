//! Background cleaning: which dirty lines to write back when (Open CAS's cleaning policies;
//! "Cleaner", open-cas.github.io/ocf/design/cleaner; OCF `src/cleaning/`).
//!
//! A cleaner only chooses lines and the time of its next wake-up; the controller writes the
//! chosen lines back and marks them clean at decision time.

mod acp;
mod alru;

use heterarchy_policy::util::key_table::KeyTable;

use super::config::{CacheConfig, CleaningPolicy};
use super::line::Line;

pub(crate) use acp::Acp;
pub(crate) use alru::Alru;

/// Shortest wait after a wake-up that cleaned nothing. Open CAS allows a wake-up time of 0 (a
/// busy cleaner); on a virtual clock that would never let time advance.
pub(crate) const MIN_IDLE_WAIT_NS: u64 = 1_000_000;

/// The selected cleaning policy and its state.
pub(crate) enum Cleaner {
    /// No background cleaning: only evictions write back.
    Nop,
    Alru(Alru),
    Acp(Acp),
}

impl Cleaner {
    pub fn new(config: &CacheConfig) -> Cleaner {
        match config.cleaning {
            CleaningPolicy::Nop => Cleaner::Nop,
            CleaningPolicy::Alru => Cleaner::Alru(Alru::new(&config.alru)),
            CleaningPolicy::Acp => Cleaner::Acp(Acp::new(&config.acp)),
        }
    }

    /// A line went from clean to holding a dirty copy.
    #[inline]
    pub fn line_dirtied(&mut self, key: u64, size: u32) {
        if let Cleaner::Acp(acp) = self {
            acp.line_dirtied(key, size);
        }
    }

    /// A line lost its last dirty copy.
    #[inline]
    pub fn line_cleaned(&mut self, key: u64, size: u32) {
        if let Cleaner::Acp(acp) = self {
            acp.line_cleaned(key, size);
        }
    }

    /// A copy of `key` was written (dirtied) at `now_ns`; `generation` tells this write from
    /// the line's earlier ones.
    #[inline]
    pub fn line_written(&mut self, key: u64, generation: u16, now_ns: u64) {
        if let Cleaner::Alru(alru) = self {
            alru.line_written(key, generation, now_ns);
        }
    }

    /// Pushes onto `out` the lines to write back at `now_ns` and returns when to wake next
    /// (`None` for no background cleaning). `last_request_ns` is the latest client request.
    pub fn due(
        &mut self,
        now_ns: u64,
        last_request_ns: u64,
        lines: &KeyTable<Line>,
        out: &mut Vec<u64>,
    ) -> Option<u64> {
        match self {
            Cleaner::Nop => None,
            Cleaner::Alru(alru) => Some(alru.due(now_ns, last_request_ns, lines, out)),
            Cleaner::Acp(acp) => Some(acp.due(now_ns, lines, out)),
        }
    }

    /// Drops stale bookkeeping once it outgrows the `dirty_copies` it indexes.
    #[inline]
    pub fn compact(&mut self, lines: &KeyTable<Line>, dirty_copies: u64) {
        if let Cleaner::Alru(alru) = self {
            alru.compact(lines, dirty_copies);
        }
    }
}
