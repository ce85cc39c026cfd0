//! LRU stack distances in O(log n) per access: Mattson's stack algorithm (Mattson et al.,
//! "Evaluation techniques for storage hierarchies", IBM Systems Journal 1970) with the stack
//! kept implicitly as weights over access positions summed by a Fenwick tree (the
//! Bennett–Kruskal / Olken idea of counting distinct keys since the last access with a tree over
//! time).

use rustc_hash::FxHashMap;

use super::positions::{BytePositions, ObjectPositions, Positions};

/// Fewest positions the stack is ever built with, so small traces do not compact constantly.
const MIN_POSITIONS: usize = 4096;

/// After a compaction the stack gets this many positions per live key: the next compaction then
/// comes after at least `(GROWTH - 1) * live` accesses, so its O(live) cost is amortised to O(1)
/// per access while the positions stay O(unique keys).
const GROWTH: usize = 8;

/// Where a key was last accessed and how big it was then.
#[derive(Clone, Copy)]
struct Slot {
    position: u32,
    size: u32,
}

/// More live keys than 32-bit positions can number.
#[derive(Debug)]
pub(crate) struct TooManyKeys;

/// An LRU stack that measures stack distances.
pub(crate) trait Stack {
    /// An empty stack.
    fn new() -> Self;

    /// What one request for an object of `size` bytes weighs in this stack's distances.
    fn weight_of(size: u32) -> u64;

    /// Number of keys on the stack.
    fn len(&self) -> usize;

    /// Looks the keys up without changing anything, so that their cache misses overlap (the
    /// lookups are independent) and the [`access`](Self::access) calls that follow, which depend
    /// on each other, find them in cache.
    fn warm(&self, keys: impl Iterator<Item = u64>);

    /// Makes room for an access to an object of `size` bytes; call before every
    /// [`access`](Self::access).
    fn reserve(&mut self, size: u32) -> Result<(), TooManyKeys>;

    /// Records an access to `key` of `size` bytes. Returns its stack distance, the weight of the
    /// distinct keys accessed since its previous access including itself (at its previous
    /// size), or `None` on a first access.
    fn access(&mut self, key: u64, size: u32) -> Option<u64>;

    /// Drops `key` from the stack (a key leaving a SHARDS sample); returns whether it was there.
    fn remove(&mut self, key: u64) -> bool;
}

/// The LRU stack of every key seen so far. Each access takes the next position; a key's
/// latest position holds its weight and its older ones are emptied, so the weight from a
/// key's position up is its depth in the LRU stack.
pub(crate) struct StackDistances<P> {
    last_access: FxHashMap<u64, Slot>,
    positions: P,
    next_position: usize,
}

/// The stack of object curves.
pub(crate) type ObjectStack = StackDistances<ObjectPositions>;

impl<P: Positions> Stack for StackDistances<P> {
    fn new() -> StackDistances<P> {
        StackDistances {
            last_access: FxHashMap::default(),
            positions: P::new(MIN_POSITIONS),
            next_position: 0,
        }
    }

    #[inline]
    fn weight_of(size: u32) -> u64 {
        P::weight_of(size)
    }

    fn len(&self) -> usize {
        self.last_access.len()
    }

    fn warm(&self, keys: impl Iterator<Item = u64>) {
        for key in keys {
            std::hint::black_box(self.last_access.get(&key));
        }
    }

    #[inline]
    fn reserve(&mut self, _size: u32) -> Result<(), TooManyKeys> {
        if self.next_position == self.positions.len() {
            self.positions = self.renumber()?;
        }
        Ok(())
    }

    #[inline]
    fn access(&mut self, key: u64, size: u32) -> Option<u64> {
        let position = self.next_position;
        self.next_position += 1;
        // Positions fit in u32: renumber() never makes more than u32::MAX.
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

    fn remove(&mut self, key: u64) -> bool {
        match self.last_access.remove(&key) {
            Some(slot) => {
                self.positions.remove(slot.position as usize, slot.size);
                true
            }
            None => false,
        }
    }
}

impl<P: Positions> StackDistances<P> {
    /// Renumbers the live positions `0..live` in their order and returns them rebuilt as `Q`
    /// with room to spare, so that the number of positions follows the number of keys, not of
    /// requests.
    fn renumber<Q: Positions>(&mut self) -> Result<Q, TooManyKeys> {
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
        let mut rebuilt = Q::new(positions);
        for slot in self.last_access.values_mut() {
            let position = slot.position as usize;
            let below_in_word = occupied[position / 64] & ((1u64 << (position % 64)) - 1);
            slot.position = rank_before[position / 64] + below_in_word.count_ones();
            rebuilt.insert(slot.position as usize, slot.size);
        }
        self.next_position = live;
        Ok(rebuilt)
    }
}

/// The stack of byte curves. While every object has the same size, byte distances are object
/// distances times that size, and the object stack's one bit per position stays in cache where
/// a size per position would not: block traces split into cache lines run at object-curve
/// speed. The first other size switches to sizes per position for good.
pub(crate) enum ByteStack {
    /// Every size so far was `size`.
    Uniform { stack: ObjectStack, size: u32 },
    /// Sizes differ.
    Mixed(StackDistances<BytePositions>),
}

impl Stack for ByteStack {
    fn new() -> ByteStack {
        ByteStack::Uniform {
            stack: ObjectStack::new(),
            size: 0,
        }
    }

    #[inline]
    fn weight_of(size: u32) -> u64 {
        u64::from(size)
    }

    fn len(&self) -> usize {
        match self {
            ByteStack::Uniform { stack, .. } => stack.len(),
            ByteStack::Mixed(stack) => stack.len(),
        }
    }

    fn warm(&self, keys: impl Iterator<Item = u64>) {
        match self {
            ByteStack::Uniform { stack, .. } => stack.warm(keys),
            ByteStack::Mixed(stack) => stack.warm(keys),
        }
    }

    #[inline]
    fn reserve(&mut self, size: u32) -> Result<(), TooManyKeys> {
        match self {
            ByteStack::Uniform {
                stack,
                size: uniform,
            } if stack.len() == 0 => {
                *uniform = size;
                stack.reserve(size)
            }
            ByteStack::Uniform {
                stack,
                size: uniform,
            } if size == *uniform => stack.reserve(size),
            ByteStack::Uniform { stack, .. } => {
                let positions = stack.renumber::<BytePositions>()?;
                *self = ByteStack::Mixed(StackDistances {
                    last_access: std::mem::take(&mut stack.last_access),
                    positions,
                    next_position: stack.next_position,
                });
                Ok(())
            }
            ByteStack::Mixed(stack) => stack.reserve(size),
        }
    }

    #[inline]
    fn access(&mut self, key: u64, size: u32) -> Option<u64> {
        match self {
            ByteStack::Uniform { stack, size } => {
                let size = *size;
                stack
                    .access(key, size)
                    .map(|objects| objects * u64::from(size))
            }
            ByteStack::Mixed(stack) => stack.access(key, size),
        }
    }

    fn remove(&mut self, key: u64) -> bool {
        match self {
            ByteStack::Uniform { stack, .. } => stack.remove(key),
            ByteStack::Mixed(stack) => stack.remove(key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn distances<S: Stack>(trace: &[(u64, u32)]) -> Vec<Option<u64>> {
        let mut stack = S::new();
        trace
            .iter()
            .map(|&(key, size)| {
                stack.reserve(size).unwrap();
                stack.access(key, size)
            })
            .collect()
    }

    #[test]
    fn distances_match_the_naive_stack_across_compactions() {
        // 3 * MIN_POSITIONS requests over few keys forces several compactions.
        let trace = pseudo_random_trace(3 * MIN_POSITIONS + 17, 300);
        assert_eq!(
            distances::<ObjectStack>(&trace),
            naive_distances(&trace, false)
        );
        let bytes = naive_distances(&trace, true);
        assert_eq!(distances::<StackDistances<BytePositions>>(&trace), bytes);
        assert_eq!(distances::<ByteStack>(&trace), bytes);
        // Uniform sizes first, then mixed ones: the byte stack switches representation.
        let mut switching = trace.clone();
        switching[..MIN_POSITIONS + 5]
            .iter_mut()
            .for_each(|(_, size)| *size = 300);
        assert_eq!(
            distances::<ByteStack>(&switching),
            naive_distances(&switching, true)
        );
        let mut stack = ObjectStack::new();
        for &(key, size) in &trace {
            stack.reserve(size).unwrap();
            stack.access(key, size);
        }
        assert_eq!(stack.len(), 300);
        assert!(stack.positions.len() <= GROWTH * 300 + MIN_POSITIONS);
    }

    #[test]
    fn removed_keys_leave_the_stack() {
        let mut stack = ObjectStack::new();
        for key in [1, 2, 3] {
            stack.reserve(1).unwrap();
            assert_eq!(stack.access(key, 1), None);
        }
        assert!(stack.remove(2));
        assert!(!stack.remove(2));
        stack.reserve(1).unwrap();
        assert_eq!(
            stack.access(1, 1),
            Some(2),
            "3 and 1 remain above 1's old position"
        );
    }
}
