//! Per-line metadata (which tiers hold a line, which of their copies are dirty) and the dirty
//! bookkeeping every transition goes through, so counts, the dirty-line set and the cleaner's
//! indexes never disagree.
//!
//! A copy is *dirty* when it is newer than the copy one level down: the next cache tier that
//! holds the line, or else the backing store. In an inclusive pair a dirty tier-0 copy is newer
//! than tier 1's (which may never have been written); in an exclusive pair, or with one cache
//! tier, the level below is always the backing store.

use rustc_hash::FxHashSet;

use super::cleaning::Cleaner;
use super::line::Line;

/// Counts dirty copies, keeps the set of lines holding any, and tells the cleaner of every
/// change, all in O(1) per transition.
pub(crate) struct DirtyTracker {
    copies: u64,
    /// Lines with at least one dirty copy: what a full flush must write back.
    lines: FxHashSet<u64>,
    /// Generation of the latest dirtying write.
    generation: u16,
    pub cleaner: Cleaner,
}

impl DirtyTracker {
    pub fn new(cleaner: Cleaner) -> DirtyTracker {
        DirtyTracker {
            copies: 0,
            lines: FxHashSet::default(),
            generation: 0,
            cleaner,
        }
    }

    /// Dirty copies over all tiers.
    pub fn copies(&self) -> u64 {
        self.copies
    }

    /// Checks that the count of dirty copies agrees with the dirty lines: every dirty line has
    /// at least one copy and at most one per tier, so a count that drifted (a copy cleaned
    /// twice, or never) shows before a flush trusts it.
    pub fn check_invariants(&self, tiers: usize) -> Result<(), String> {
        let lines = self.lines.len() as u64;
        if self.copies < lines || self.copies > lines * tiers as u64 {
            return Err(format!(
                "{} dirty copies counted for {lines} dirty lines over {tiers} tiers",
                self.copies
            ));
        }
        Ok(())
    }

    /// Lines holding at least one dirty copy, in no particular order.
    pub fn dirty_lines(&self) -> impl Iterator<Item = u64> + '_ {
        self.lines.iter().copied()
    }

    /// Records that tier `tier`'s copy of `key` was written at `now_ns` and is now newer than
    /// the level below; the line is re-dated (Open CAS moves a re-written line to the head of
    /// the ALRU list with a fresh timestamp).
    pub fn mark_dirty(&mut self, key: u64, line: &mut Line, tier: usize, now_ns: u64) {
        debug_assert!(line.holds(tier));
        if !line.any_dirty() {
            self.lines.insert(key);
            self.cleaner.line_dirtied(key, line.size);
        }
        if !line.is_dirty(tier) {
            self.copies += 1;
            line.dirty |= 1 << tier;
        }
        // One count over all lines, so a line dirtied again after leaving the cache does not
        // revive the queue entry of its earlier life.
        self.generation = self.generation.wrapping_add(1);
        line.dirty_generation = self.generation;
        self.cleaner.line_written(key, self.generation, now_ns);
    }

    /// Records that tier `tier`'s copy of `key` is no longer dirty (written back, overwritten
    /// below, or dropped).
    pub fn mark_clean(&mut self, key: u64, line: &mut Line, tier: usize) {
        if !line.is_dirty(tier) {
            return;
        }
        line.dirty &= !(1 << tier);
        self.copies -= 1;
        if !line.any_dirty() {
            self.lines.remove(&key);
            self.cleaner.line_cleaned(key, line.size);
        }
    }

    /// Marks every copy of `key` clean.
    pub fn mark_all_clean(&mut self, key: u64, line: &mut Line) {
        while let Some(tier) = line.top_dirty_tier() {
            self.mark_clean(key, line, tier);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_copies_and_lines() {
        let mut tracker = DirtyTracker::new(Cleaner::Nop);
        let mut line = Line::absent(4096);
        line.set_resident(0);
        line.set_resident(1);
        tracker.mark_dirty(7, &mut line, 0, 10);
        tracker.mark_dirty(7, &mut line, 0, 20);
        assert_eq!(tracker.copies(), 1);
        tracker.mark_dirty(7, &mut line, 1, 30);
        assert_eq!(tracker.copies(), 2);
        assert_eq!(tracker.dirty_lines().collect::<Vec<_>>(), vec![7]);
        assert_eq!(line.top_dirty_tier(), Some(0));
        tracker.mark_clean(7, &mut line, 0);
        assert_eq!(line.top_dirty_tier(), Some(1));
        assert_eq!(tracker.copies(), 1);
        tracker.mark_all_clean(7, &mut line);
        assert_eq!(tracker.copies(), 0);
        assert_eq!(tracker.dirty_lines().count(), 0);
        assert!(!line.any_dirty());
        assert_eq!(line.top_tier(), Some(0));
    }

    #[test]
    fn redirtying_moves_the_generation_on() {
        let mut tracker = DirtyTracker::new(Cleaner::Nop);
        let mut line = Line::absent(1);
        line.set_resident(0);
        line.set_resident(1);
        tracker.mark_dirty(1, &mut line, 0, 0);
        let first = line.dirty_generation;
        tracker.mark_dirty(1, &mut line, 1, 5);
        assert_ne!(line.dirty_generation, first);
    }

    #[test]
    fn a_table_slot_is_a_quarter_cache_line() {
        assert_eq!(std::mem::size_of::<Line>(), 8);
    }
}
