//! Lines entering and leaving cache tiers: admission through a tier's eviction policy, what
//! happens to its victims (write-back, demotion, back-invalidation), moves up to the top tier,
//! and writing a dirty line back.
//!
//! Admission works on the line table, not on a caller's copy, because a policy's victims may
//! include lines touched earlier in the same plan, even the line just admitted.

use heterarchy_trace::Request;

use super::config::TierLayout;
use super::dirty::Line;
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
            self.lines.insert(key, line);
            return true;
        }
        let mut evicted = std::mem::take(&mut self.evicted[tier]);
        let before = policy.len();
        policy.admit(request, &mut evicted);
        let admitted = policy.len() + evicted.len() == before + 1;
        // The victims' table slots are cold: start loading them while the new line is noted.
        for victim in &evicted {
            self.lines.prefetch(victim.key);
        }
        if admitted {
            let mut line = self.line_or_absent(key, request.size);
            line.set_resident(tier);
            self.lines.insert(key, line);
            self.stats.installs_per_tier[tier] += 1;
        }
        let mut kept = admitted;
        for victim in evicted.drain(..) {
            self.stats.evictions_per_tier[tier] += 1;
            self.note_departure(tier, victim.key);
            kept &= victim.key != key;
            if self.defer_victims && victim.key != key {
                self.deferred_victims.push(victim.key);
                continue;
            }
            match tier {
                0 => self.leave_top(victim.key, now_ns),
                _ => self.leave_lower(victim.key),
            }
        }
        self.evicted[tier] = evicted;
        kept
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

    /// A tier-0 victim: written back if dirty, and with two exclusive tiers demoted into
    /// tier 1.
    fn leave_top(&mut self, key: u64, now_ns: u64) {
        let Some(mut line) = self.take_victim(key, 0) else {
            return;
        };
        let was_dirty = line.is_dirty(0);
        self.dirty.mark_clean(key, &mut line, 0);
        line.clear_resident(0);
        let bytes = line.size;
        if self.tiers.len() == 1 {
            if was_dirty {
                self.moves.push(Move {
                    key,
                    bytes,
                    from: 0,
                    to: self.backing_bit(),
                    dirty: true,
                    writeback: true,
                });
            }
            self.put_back(key, line);
            return;
        }
        match self.layout {
            TierLayout::Inclusive => {
                debug_assert!(line.holds(1), "inclusion: tier 1 holds tier 0's key {key}");
                if was_dirty && !line.holds(1) {
                    self.moves.push(Move {
                        key,
                        bytes,
                        from: 0,
                        to: self.backing_bit(),
                        dirty: true,
                        writeback: true,
                    });
                } else if was_dirty {
                    // Tier 1's copy is older (or was never written): the newest data goes down.
                    self.moves.push(Move {
                        key,
                        bytes,
                        from: 0,
                        to: 1 << 1,
                        dirty: true,
                        writeback: true,
                    });
                    self.dirty.mark_dirty(key, &mut line, 1, now_ns);
                }
                self.put_back(key, line);
            }
            TierLayout::Exclusive => {
                self.put_back(key, line);
                // Pending first, so a cascade that evicts this very line from tier 1 finds it.
                self.moves.push(Move {
                    key,
                    bytes,
                    from: 0,
                    to: 1 << 1,
                    dirty: was_dirty,
                    writeback: false,
                });
                let demoted = self.admit(1, &Request::new(key, bytes), now_ns);
                match (demoted, was_dirty) {
                    (true, true) => {
                        let mut line = self.line_or_absent(key, bytes);
                        self.dirty.mark_dirty(key, &mut line, 1, now_ns);
                        self.lines.insert(key, line);
                    }
                    (true, false) => {}
                    (false, _) => {
                        self.divert_pending(key);
                    }
                }
            }
        }
    }

    /// A line whose move into tier 1 (in this plan) will not land there: dirty data goes to
    /// the backing store instead, clean data nowhere. Returns whether there was such a move.
    fn divert_pending(&mut self, key: u64) -> bool {
        let Some(index) = self
            .moves
            .iter()
            .position(|m| m.key == key && m.to == 1 << 1)
        else {
            return false;
        };
        if self.moves[index].dirty {
            self.moves[index].to = self.backing_bit();
            self.moves[index].writeback = true;
        } else {
            self.moves.swap_remove(index);
        }
        true
    }

    /// A tier-1 victim. Inclusive: the line leaves tier 0 too, its newest dirty copy written
    /// back first. Exclusive: written back if dirty.
    fn leave_lower(&mut self, key: u64) {
        let Some(mut line) = self.take_victim(key, 1) else {
            return;
        };
        if self.divert_pending(key) {
            // Its data was still on its way from tier 0 and has been sent elsewhere.
            self.dirty.mark_clean(key, &mut line, 1);
            line.clear_resident(1);
            self.put_back(key, line);
            return;
        }
        debug_assert!(
            self.layout == TierLayout::Inclusive || !line.holds(0),
            "exclusive tiers both hold key {key}"
        );
        let source = match self.layout {
            TierLayout::Inclusive => {
                if line.holds(0) {
                    self.tiers[0].remove(key);
                    self.note_departure(0, key);
                    self.stats.evictions_per_tier[0] += 1;
                }
                line.top_dirty_tier()
            }
            TierLayout::Exclusive => line.is_dirty(1).then_some(1),
        };
        if let Some(from) = source {
            self.moves.push(Move {
                key,
                bytes: line.size,
                from: from as u8,
                to: self.backing_bit(),
                dirty: true,
                writeback: true,
            });
        }
        self.dirty.mark_all_clean(key, &mut line);
    }

    /// Installs a missing line into the tiers of `allowed` (bits) that may take it: both tiers
    /// of an inclusive pair (tier 1 first, so tier 0 only ever holds what tier 1 holds), else
    /// tier 0. Returns the tiers now holding it, as bits.
    pub(super) fn install(&mut self, request: &Request, now_ns: u64, allowed: u8) -> u8 {
        if self.tiers.len() > 1 && self.layout == TierLayout::Inclusive {
            if allowed & 0b10 != 0 && self.admit(1, request, now_ns) && allowed & 0b01 != 0 {
                self.admit(0, request, now_ns);
            }
        } else if allowed & 0b01 != 0 {
            self.admit(0, request, now_ns);
        }
        let held = self.lines.get(request.key).map_or(0, |line| line.resident);
        if held != 0 {
            self.promoter.purge(request.key);
        }
        held
    }

    /// Brings a line only tier 1 holds up into tier 0: inclusive, a copy (tier 1 keeps it);
    /// exclusive, a move (tier 1 lets it go, and its dirtiness goes with it). Returns whether
    /// tier 0 now holds it.
    pub(super) fn promote_to_top(&mut self, request: &Request, now_ns: u64) -> bool {
        let key = request.key;
        match self.layout {
            TierLayout::Inclusive => {
                self.tiers[1].lookup(request);
                self.admit(0, request, now_ns)
            }
            TierLayout::Exclusive => {
                if u64::from(request.size) > self.tiers[0].capacity_bytes() {
                    self.tiers[1].lookup(request);
                    return false;
                }
                let mut line = self.line_or_absent(key, request.size);
                let bytes = line.size;
                let was_dirty = line.is_dirty(1);
                self.tiers[1].remove(key);
                self.note_departure(1, key);
                self.dirty.mark_clean(key, &mut line, 1);
                line.clear_resident(1);
                self.store(key, line);
                let promoted = self.admit(0, request, now_ns);
                if !was_dirty {
                    return promoted;
                }
                if promoted {
                    let mut line = self.line_or_absent(key, bytes);
                    self.dirty.mark_dirty(key, &mut line, 0, now_ns);
                    self.store(key, line);
                } else {
                    // Refused by tier 0 and already out of tier 1: keep the data below.
                    self.moves.push(Move {
                        key,
                        bytes,
                        from: 1,
                        to: self.backing_bit(),
                        dirty: true,
                        writeback: true,
                    });
                }
                promoted
            }
        }
    }

    /// Writes a dirty line back: its newest copy (the highest dirty tier) goes to every lower
    /// tier holding it and to the backing store, and every copy is clean afterwards.
    pub(super) fn clean_line(&mut self, key: u64) {
        let Some(mut line) = self.lines.get(key) else {
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
