//! Which slot of a cache tier each line will use, decided when its request is planned, in the
//! order requests are planned (docs/architecture.md, "A request through a live volume").
//!
//! The controller decides at once which lines enter and leave a tier; the data moves later and
//! concurrently. Choosing the slot at the same moment, under the same lock, means a request
//! never waits for a slot to come free: the slot a departing line leaves is the next one handed
//! out, and the request that takes it is ordered after the one that empties it through the
//! previous occupant's line ([`Placement::assign`] names it).

use rustc_hash::FxHashMap;

/// One cache tier's slot assignment, ahead of the data.
pub struct Placement {
    by_key: FxHashMap<u64, u32>,
    free: Vec<u32>,
    /// The line that last held each slot, until the slot is handed out again.
    previous: Vec<Option<u64>>,
}

impl Placement {
    /// `slot_count` slots, those of `held` (line, slot) taken.
    pub fn new(slot_count: u64, held: impl IntoIterator<Item = (u64, u32)>) -> Placement {
        let mut taken = vec![false; slot_count as usize];
        let mut by_key = FxHashMap::default();
        for (key, slot) in held {
            taken[slot as usize] = true;
            by_key.insert(key, slot);
        }
        Placement {
            by_key,
            // Lowest slots first, so a fresh tier fills from the front.
            free: (0..slot_count as u32)
                .rev()
                .filter(|&slot| !taken[slot as usize])
                .collect(),
            previous: vec![None; slot_count as usize],
        }
    }

    /// The slot `key` has, if any.
    #[inline]
    pub fn get(&self, key: u64) -> Option<u32> {
        self.by_key.get(&key).copied()
    }

    /// Slots free.
    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Lets `key`'s slot go; returns it.
    pub fn release(&mut self, key: u64) -> Option<u32> {
        let slot = self.by_key.remove(&key)?;
        self.previous[slot as usize] = Some(key);
        self.free.push(slot);
        Some(slot)
    }

    /// Every line that has a slot.
    pub fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.by_key.keys().copied()
    }

    /// Keeps `slot` from every line until [`give_back`](Self::give_back): its data belongs to
    /// a line that could not be rescued (`crate::failure`). A line it was handed to loses it
    /// and gets another when next planned.
    pub fn withhold(&mut self, slot: u32) {
        self.free.retain(|&free| free != slot);
        self.by_key.retain(|_, &mut taken| taken != slot);
        self.previous[slot as usize] = None;
    }

    /// Returns a withheld slot to the free ones.
    pub fn give_back(&mut self, slot: u32) {
        if !self.free.contains(&slot) && !self.by_key.values().any(|&taken| taken == slot) {
            self.free.push(slot);
        }
    }

    /// A slot for `key` (its own if it has one), and the line that held the slot last if it was
    /// handed back since: the request that fills the slot must come after that line's. `None`
    /// when every slot is taken, which the controller's capacity rules out.
    pub fn assign(&mut self, key: u64) -> Option<(u32, Option<u64>)> {
        if let Some(slot) = self.get(key) {
            return Some((slot, None));
        }
        let slot = self.free.pop()?;
        self.by_key.insert(key, slot);
        Some((slot, self.previous[slot as usize].take()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_released_slot_goes_next_and_names_its_last_line() {
        let mut placement = Placement::new(3, [(7, 1)]);
        assert_eq!(placement.free_count(), 2);
        assert_eq!(placement.assign(7), Some((1, None)));
        assert_eq!(placement.assign(8), Some((0, None)));
        assert_eq!(placement.assign(9), Some((2, None)));
        assert_eq!(placement.assign(10), None);
        assert_eq!(placement.release(8), Some(0));
        assert_eq!(placement.release(8), None);
        assert_eq!(placement.assign(10), Some((0, Some(8))));
        assert_eq!(placement.get(10), Some(0));
    }

    #[test]
    fn a_withheld_slot_is_handed_to_no_line_until_given_back() {
        let mut placement = Placement::new(2, [(7, 1)]);
        placement.withhold(1);
        placement.withhold(0);
        assert_eq!(placement.get(7), None);
        assert_eq!(placement.assign(8), None);
        placement.give_back(1);
        placement.give_back(1);
        assert_eq!(placement.assign(8), Some((1, None)));
        assert_eq!(placement.assign(9), None);
    }
}
