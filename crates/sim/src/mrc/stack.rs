//! LRU stack distances in O(log n) per access: Mattson's stack algorithm (Mattson et al.,
//! "Evaluation techniques for storage hierarchies", IBM Systems Journal 1970) with the stack
//! kept implicitly as weights over access positions summed by a Fenwick tree (the
//! Bennett–Kruskal / Olken idea of counting distinct keys since the last access with a tree over
//! time).

use rustc_hash::FxHashMap;

use super::positions::Positions;

/// Fewest positions the stack is ever built with, so small traces do not compact constantly.
const MIN_POSITIONS: usize = 4096;

/// After a compaction the stack gets this many positions per live key: the next compaction then
/// comes after at least `(GROWTH - 1) * live` accesses, so its O(live) cost is amortised to O(1)
/// per access while the positions stay O(unique keys).
const GROWTH: usize = 4;

/// Where a key was last accessed and how big it was then.
#[derive(Clone, Copy)]
struct Slot {
    position: u32,
    size: u32,
}

/// The LRU stack of every key seen so far. Each access takes the next position; a key's
/// latest position holds its weight and its older ones are emptied, so the weight from a
/// key's position up is its depth in the LRU stack.
pub(crate) struct StackDistances<P> {
    last_access: FxHashMap<u64, Slot>,
    positions: P,
    next_position: usize,
}

/// More live keys than 32-bit positions can number.
#[derive(Debug)]
pub(crate) struct TooManyKeys;

impl<P: Positions> StackDistances<P> {
    /// An empty stack.
    pub(crate) fn new() -> StackDistances<P> {
        StackDistances {
            last_access: FxHashMap::default(),
            positions: P::new(MIN_POSITIONS),
            next_position: 0,
        }
    }

    /// Number of keys on the stack.
    pub(crate) fn len(&self) -> usize {
        self.last_access.len()
    }

    /// Looks the keys up without changing anything, so that their cache misses overlap (the
    /// lookups are independent) and the [`access`](Self::access) calls that follow, which depend
    /// on each other, find them in cache.
    pub(crate) fn warm(&self, keys: impl Iterator<Item = u64>) {
        for key in keys {
            std::hint::black_box(self.last_access.get(&key));
        }
    }

    /// Makes room for the next access; call before every [`access`](Self::access).
    #[inline]
    pub(crate) fn reserve(&mut self) -> Result<(), TooManyKeys> {
        if self.next_position == self.positions.len() {
            self.compact()
        } else {
            Ok(())
        }
    }

    /// Records an access to `key` of `size` bytes. Returns its stack distance, the weight of the
    /// distinct keys accessed since its previous access including itself (at its previous
    /// size), or `None` on a first access.
    #[inline]
    pub(crate) fn access(&mut self, key: u64, size: u32) -> Option<u64> {
        let position = self.next_position;
        self.next_position += 1;
        // Positions fit in u32: compact() never makes more than u32::MAX.
        let slot = Slot {
            position: position as u32,
            size,
        };
        let distance = match self.last_access.insert(key, slot) {
            Some(previous) => {
                let previous_position = previous.position as usize;
                let distance =
                    self.positions.total() - self.positions.weight_before(previous_position);
                self.positions.remove(previous_position, previous.size);
                Some(distance)
            }
            None => None,
        };
        self.positions.insert(position, size);
        distance
    }

    /// Drops `key` from the stack (a key leaving a SHARDS sample); returns whether it was there.
    pub(crate) fn remove(&mut self, key: u64) -> bool {
        match self.last_access.remove(&key) {
            Some(slot) => {
                self.positions.remove(slot.position as usize, slot.size);
                true
            }
            None => false,
        }
    }

    /// Renumbers the live positions `0..live` in their order and rebuilds the positions with
    /// room to spare, so their number follows the number of keys, not of requests.
    fn compact(&mut self) -> Result<(), TooManyKeys> {
        let live = self.last_access.len();
        let positions = (live.saturating_mul(GROWTH)).max(MIN_POSITIONS);
        let positions = positions.min(u32::MAX as usize);
        if positions <= live {
            return Err(TooManyKeys);
        }
        let mut occupied = vec![0u64; self.positions.len().div_ceil(64)];
        for slot in self.last_access.values() {
            let position = slot.position as usize;
            occupied[position / 64] |= 1 << (position % 64);
        }
        // rank_before[w]: live positions in the words before word w.
        let mut rank_before = Vec::with_capacity(occupied.len());
        let mut rank = 0u32;
        for word in &occupied {
            rank_before.push(rank);
            rank += word.count_ones();
        }
        let mut rebuilt = P::new(positions);
        for slot in self.last_access.values_mut() {
            let position = slot.position as usize;
            let below_in_word = occupied[position / 64] & ((1u64 << (position % 64)) - 1);
            slot.position = rank_before[position / 64] + below_in_word.count_ones();
            rebuilt.insert(slot.position as usize, slot.size);
        }
        self.positions = rebuilt;
        self.next_position = live;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mrc::positions::{BytePositions, ObjectPositions};

    /// Mattson's algorithm by the book: an explicit list, most recent first.
    fn naive_distances(trace: &[(u64, u32)], bytes: bool) -> Vec<Option<u64>> {
        let mut stack: Vec<(u64, u32)> = Vec::new();
        trace
            .iter()
            .map(|&(key, size)| {
                let found = stack.iter().position(|&(k, _)| k == key);
                let distance = found.map(|depth| {
                    stack[..=depth]
                        .iter()
                        .map(|&(_, s)| if bytes { u64::from(s) } else { 1 })
                        .sum()
                });
                if let Some(depth) = found {
                    stack.remove(depth);
                }
                stack.insert(0, (key, size));
                distance
            })
            .collect()
    }

    fn pseudo_random_trace(len: usize, keys: u64) -> Vec<(u64, u32)> {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        (0..len)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let key = (state >> 33) % keys;
                (key, (key % 7 + 1) as u32 * 100)
            })
            .collect()
    }

    #[test]
    fn distances_match_the_naive_stack_across_compactions() {
        // 3 * MIN_POSITIONS requests over few keys forces several compactions.
        let trace = pseudo_random_trace(3 * MIN_POSITIONS + 17, 300);
        let mut objects = StackDistances::<ObjectPositions>::new();
        let mut bytes = StackDistances::<BytePositions>::new();
        let mut got_objects = Vec::new();
        let mut got_bytes = Vec::new();
        for &(key, size) in &trace {
            objects.reserve().unwrap();
            got_objects.push(objects.access(key, size));
            bytes.reserve().unwrap();
            got_bytes.push(bytes.access(key, size));
        }
        assert_eq!(got_objects, naive_distances(&trace, false));
        assert_eq!(got_bytes, naive_distances(&trace, true));
        assert_eq!(objects.last_access.len(), 300);
        assert!(objects.positions.len() <= GROWTH * 300 + MIN_POSITIONS);
    }

    #[test]
    fn removed_keys_leave_the_stack() {
        let mut stack = StackDistances::<ObjectPositions>::new();
        for key in [1, 2, 3] {
            stack.reserve().unwrap();
            assert_eq!(stack.access(key, 1), None);
        }
        assert!(stack.remove(2));
        assert!(!stack.remove(2));
        stack.reserve().unwrap();
        assert_eq!(
            stack.access(1, 1),
            Some(2),
            "3 and 1 remain above 1's old position"
        );
    }
}
