//! Lines entering and leaving cache tiers: admission through a tier's eviction policy, what
//! happens to its victims (write-back, demotion, back-invalidation), moves up to the top tier,
//! and writing a dirty line back.
//!
//! Admission works on the line table, not on a caller's copy, because a policy's victims may
//! include lines touched earlier in the same plan, even the line just admitted.

use heterarchy_policy::Evicted;
use heterarchy_trace::Request;

use super::config::TierLayout;
use super::line::Line;
use super::{CacheController, Move};

impl CacheController {
    #[inline]
    fn backing_bit(&self) -> u8 {
        1 << self.backing
    }

    /// Admits `request`'s line into tier `tier` (which does not hold it), handling the
    /// victims; returns whether the tier holds it afterwards.
    pub(super) fn admit(&mut self, tier: usize, request: &Request, now_ns: u64) -> bool {
        let key = request.key;
        let policy = &mut self.tiers[tier];
        if u64::from(request.size) > policy.capacity_bytes() {
            return false;
        }
        // The lookup lets policies with ghost lists (ARC, LIRS, 2Q, S3-FIFO) learn from the
        // miss before admitting, as their contract asks.
        if policy.lookup(request) {
            debug_assert!(false, "tier {tier} holds key {key} unknown to the table");
            let mut line = self.line_or_absent(key, request.size);
            line.set_resident(tier);
            self.store(key, line);
            return true;
        }
        let mut evicted = std::mem::take(&mut self.evicted[tier]);
        let before = policy.len();
        policy.admit(request, &mut evicted);
        let admitted = policy.len() + evicted.len() == before + 1;
        if !self.lines_in_policy {
            // The victims' table slots are cold: start loading them while the new line is
            // noted.
            for victim in &evicted {
                self.lines.prefetch(victim.key);
            }
        }
        if admitted {
            let mut line = self.line_or_absent(key, request.size);
            line.set_resident(tier);
            self.store(key, line);
            self.stats.installs_per_tier[tier] += 1;
        }
        let kept = admitted && evicted.iter().all(|victim| victim.key != key);
        self.depart(tier, evicted, now_ns);
        kept
    }

    /// A hit on tier `tier`: the policy notes it, and whatever the hit pushed out of the tier
    /// (SLRU's overfull segments can evict on a hit) leaves as an eviction would.
    pub(super) fn touch(&mut self, tier: usize, request: &Request, now_ns: u64) {
        let policy = &mut self.tiers[tier];
        policy.lookup(request);
        let mut evicted = std::mem::take(&mut self.evicted[tier]);
        policy.drain_hit_evictions(&mut evicted);
        self.depart(tier, evicted, now_ns);
    }

    /// Takes `evicted`'s lines out of tier `tier`, then keeps the emptied vector as the tier's
    /// buffer for its next evictions.
    fn depart(&mut self, tier: usize, mut evicted: Vec<Evicted>, now_ns: u64) {
        for victim in evicted.drain(..) {
            self.stats.evictions_per_tier[tier] += 1;
            self.note_departure(tier, victim.key);
            if self.lines_in_policy {
                // A clean line of the only tier: leaving the policy is all there is to it.
                continue;
            }
            match self.layout {
                TierLayout::Inclusive => self.leave_inclusive(tier, victim.key, now_ns),
                TierLayout::Exclusive => self.leave_exclusive(tier, victim.key, now_ns),
            }
        }
        self.evicted[tier] = evicted;
    }

    /// Returns a victim's line to the table if some tier still holds it.
    #[inline]
    fn put_back(&mut self, key: u64, line: Line) {
        if line.resident != 0 {
            self.lines.insert(key, line);
        }
    }

    /// Takes a victim's line out of the table (the caller puts it back if a tier still holds
    /// it), checking that `tier` held it.
    fn take_victim(&mut self, key: u64, tier: usize) -> Option<Line> {
        let line = self.lines.remove(key)?;
        if line.holds(tier) {
            Some(line)
        } else {
            debug_assert!(false, "tier {tier} evicted key {key} it does not hold");
            self.lines.insert(key, line);
            None
        }
    }

    /// Takes out of this plan's moves the one carrying `key`'s data into tier `tier`: a line
    /// evicted from a tier it is still on its way into (a cascade evicted what it had just
    /// demoted, or installed), whose data must be sent on from where the move reads it.
    fn take_pending(&mut self, key: u64, tier: usize) -> Option<Move> {
        let index = self
            .moves
            .iter()
            .position(|m| m.key == key && m.to == 1 << tier)?;
        Some(self.moves.swap_remove(index))
    }

    /// Sends a victim's data on: to tier `to` (a cache tier) or the backing store. `from` is
    /// where the newest copy sits (or the move it is still on, `pending`); clean data bound for
    /// the backing store needs no move.
    fn send_down(
        &mut self,
        key: u64,
        bytes: u32,
        from: u8,
        dirty: bool,
        to: usize,
        writeback: bool,
    ) {
        if to == self.backing as usize && !dirty {
            return;
        }
        self.moves.push(Move {
            key,
            bytes,
            from,
            to: 1 << to,
            dirty,
            writeback: writeback || to == self.backing as usize,
        });
    }

    /// A victim of tier `tier` with inclusive tiers: the line leaves the tiers above too (they
    /// hold only what the tiers below hold), and its newest dirty copy goes one level down —
    /// to tier `tier + 1`, which holds the line, else the backing store.
    fn leave_inclusive(&mut self, tier: usize, key: u64, now_ns: u64) {
        let Some(mut line) = self.take_victim(key, tier) else {
            return;
        };
        let pending = self.take_pending(key, tier);
        let source = match pending {
            Some(m) if m.dirty => Some(m.from),
            _ => (0..=tier)
                .find(|&level| line.is_dirty(level))
                .map(|level| level as u8),
        };
        for level in 0..=tier {
            self.dirty.mark_clean(key, &mut line, level);
            if level < tier && line.holds(level) {
                self.tiers[level].remove(key);
                self.note_departure(level, key);
                self.stats.evictions_per_tier[level] += 1;
            }
            if line.holds(level) {
                line.clear_resident(level);
            }
        }
        let below = tier + 1;
        if below < self.tiers.len() {
            debug_assert!(line.holds(below), "inclusion: tier {below} holds key {key}");
            if let Some(from) = source {
                self.send_down(key, line.size, from, true, below, true);
                self.dirty.mark_dirty(key, &mut line, below, now_ns);
            }
        } else if let Some(from) = source {
            self.send_down(key, line.size, from, true, self.backing as usize, true);
        }
        self.put_back(key, line);
    }

    /// A victim of tier `tier` with exclusive tiers: demoted into tier `tier + 1`, dirty or
    /// not, or from the last tier written back if dirty.
    fn leave_exclusive(&mut self, tier: usize, key: u64, now_ns: u64) {
        let Some(mut line) = self.take_victim(key, tier) else {
            return;
        };
        debug_assert!(
            (0..self.tiers.len()).all(|other| other == tier || !line.holds(other)),
            "exclusive tiers both hold key {key}"
        );
        let pending = self.take_pending(key, tier);
        let (from, dirty) = match pending {
            Some(m) => (m.from, m.dirty),
            None => (tier as u8, line.is_dirty(tier)),
        };
        self.dirty.mark_clean(key, &mut line, tier);
        line.clear_resident(tier);
        let bytes = line.size;
        self.put_back(key, line);
        let below = tier + 1;
        if below == self.tiers.len() {
            self.send_down(key, bytes, from, dirty, self.backing as usize, true);
            return;
        }
        // Pending first, so a cascade that evicts this very line from the tier below finds it.
        self.send_down(key, bytes, from, dirty, below, false);
        let demoted = self.admit(below, &Request::new(key, bytes), now_ns);
        if demoted {
            if dirty {
                let mut line = self.line_or_absent(key, bytes);
                self.dirty.mark_dirty(key, &mut line, below, now_ns);
                self.store(key, line);
            }
        } else if let Some(m) = self.take_pending(key, below) {
            // Refused below (too large): dirty data goes to the backing store, clean nowhere.
            self.send_down(key, bytes, m.from, m.dirty, self.backing as usize, true);
        }
    }

    /// Installs a missing line into the tiers of `allowed` (bits) that may take it: with
    /// inclusive tiers, bottom up while each tier admits it (a tier only ever holds what the
    /// tiers below hold); with exclusive ones, tier 0. Returns the tiers now holding it, as
    /// bits.
    pub(super) fn install(&mut self, request: &Request, now_ns: u64, allowed: u8) -> u8 {
        match self.layout {
            TierLayout::Inclusive => {
                for tier in (0..self.tiers.len()).rev() {
                    if allowed & (1 << tier) == 0 || !self.admit(tier, request, now_ns) {
                        break;
                    }
                }
            }
            TierLayout::Exclusive => {
                if allowed & 1 != 0 {
                    self.admit(0, request, now_ns);
                }
            }
        }
        let held = self.line(request.key).map_or(0, |line| line.resident);
        if held != 0 {
            self.promoter.purge(request.key);
        }
        held
    }

    /// Brings a line whose highest copy is in tier `top` > 0 up into the tiers above it that
    /// `allowed` (bits) lets in. Inclusive: copies, bottom up while each tier admits it (the
    /// tiers below keep theirs). Exclusive: a move into tier 0 (tier `top` lets it go, and its
    /// dirtiness goes with it). Returns the tiers that newly hold it, as bits.
    pub(super) fn promote(
        &mut self,
        request: &Request,
        top: usize,
        allowed: u8,
        now_ns: u64,
    ) -> u8 {
        let key = request.key;
        match self.layout {
            TierLayout::Inclusive => {
                self.touch(top, request, now_ns);
                let mut gained = 0;
                for tier in (0..top).rev() {
                    if allowed & (1 << tier) == 0 || !self.admit(tier, request, now_ns) {
                        break;
                    }
                    gained |= 1 << tier;
                }
                // An eviction further down may have taken the line out again.
                gained & self.line(key).map_or(0, |line| line.resident)
            }
            TierLayout::Exclusive => {
                if allowed & 1 == 0 || u64::from(request.size) > self.tiers[0].capacity_bytes() {
                    self.touch(top, request, now_ns);
                    return 0;
                }
                let mut line = self.line_or_absent(key, request.size);
                let bytes = line.size;
                let was_dirty = line.is_dirty(top);
                self.tiers[top].remove(key);
                self.note_departure(top, key);
                self.dirty.mark_clean(key, &mut line, top);
                line.clear_resident(top);
                self.store(key, line);
                let promoted = self.admit(0, request, now_ns);
                if promoted && was_dirty {
                    let mut line = self.line_or_absent(key, bytes);
                    self.dirty.mark_dirty(key, &mut line, 0, now_ns);
                    self.store(key, line);
                } else if !promoted && was_dirty {
                    // Refused by tier 0 and already out of tier `top`: keep the data below.
                    self.send_down(key, bytes, top as u8, true, self.backing as usize, true);
                }
                u8::from(promoted)
            }
        }
    }

    /// Writes a dirty line back: its newest copy (the highest dirty tier) goes to every lower
    /// tier holding it and to the backing store, and every copy is clean afterwards.
    pub(super) fn clean_line(&mut self, key: u64) {
        let Some(mut line) = self.line(key) else {
            return;
        };
        let Some(from) = line.top_dirty_tier() else {
            return;
        };
        let mut to = self.backing_bit();
        for tier in from + 1..self.tiers.len() {
            if line.holds(tier) {
                to |= 1 << tier;
            }
        }
        self.moves.push(Move {
            key,
            bytes: line.size,
            from: from as u8,
            to,
            dirty: true,
            writeback: true,
        });
        self.dirty.mark_all_clean(key, &mut line);
        self.store(key, line);
    }
}
