//! An addressable binary min-heap of `u32` items (slab indices) by a totally ordered key.
//!
//! libCacheSim's C++ ranking policies (`cpp/abstractRank.hpp`: GDSF) keep their objects in a
//! `std::set` ordered by (priority, virtual time of the object's last request), so that equal
//! priorities leave in FIFO order. No two objects share a virtual time, so no two keys are
//! equal and the smallest key is always one definite item: any correct min-heap pops exactly
//! what the ordered set's `begin()` yields, with O(1) pops of the minimum's position and no
//! per-entry allocation. (Contrast [`super::heap::IndexedHeap`], whose keys do tie and which
//! therefore has to reproduce libCacheSim's C heap step by step.)

use super::prefetch::prefetch_read;

/// Marks an item that is not in the heap.
const ABSENT: u32 = u32::MAX;

/// Min-heap of items by key, each item's position tracked so that any item can be re-keyed or
/// removed in O(log n). Keys must be totally ordered among the items present (no NaN, no two
/// equal), which makes the pop order independent of the heap's shape.
#[derive(Clone, Debug)]
pub struct OrderedHeap<K> {
    entries: Vec<(K, u32)>,
    /// Position of each item in `entries`, indexed by item.
    position: Vec<u32>,
}

impl<K> Default for OrderedHeap<K> {
    fn default() -> Self {
        OrderedHeap {
            entries: Vec::new(),
            position: Vec::new(),
        }
    }
}

impl<K: Copy + PartialOrd> OrderedHeap<K> {
    /// Number of items.
    #[inline]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the heap holds no item.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// True when `item` is in the heap.
    pub fn contains(&self, item: u32) -> bool {
        self.position
            .get(item as usize)
            .is_some_and(|&position| position != ABSENT)
    }

    /// The item of smallest key and its key.
    #[inline]
    pub fn peek(&self) -> Option<(K, u32)> {
        self.entries.first().copied()
    }

    /// The key of `item`, which must be in the heap.
    #[inline]
    pub fn key(&self, item: u32) -> K {
        self.entries[self.position[item as usize] as usize].0
    }

    /// Asks the CPU to start loading `item`'s entry (a hint with no effect on results).
    #[inline]
    pub fn prefetch(&self, item: u32) {
        if let Some(&position) = self.position.get(item as usize) {
            if let Some(entry) = self.entries.get(position as usize) {
                prefetch_read(entry);
            }
        }
    }

    /// Adds `item`, which must not be in the heap, with `key`.
    #[inline]
    pub fn push(&mut self, item: u32, key: K) {
        let slot = item as usize;
        if slot >= self.position.len() {
            self.position.resize(slot + 1, ABSENT);
        }
        debug_assert_eq!(self.position[slot], ABSENT);
        self.entries.push((key, item));
        self.sift_up(self.entries.len() - 1);
    }

    /// Removes and returns the item of smallest key, with its key.
    #[inline]
    pub fn pop(&mut self) -> Option<(K, u32)> {
        let last = self.entries.pop()?;
        self.position[last.1 as usize] = ABSENT;
        let Some(&top) = self.entries.first() else {
            return Some(last);
        };
        self.position[top.1 as usize] = ABSENT;
        self.entries[0] = last;
        self.sift_down(0);
        Some(top)
    }

    /// Gives `item`, which must be in the heap, a new key.
    #[inline]
    pub fn change_key(&mut self, item: u32, key: K) {
        let position = self.position[item as usize] as usize;
        let old = std::mem::replace(&mut self.entries[position].0, key);
        if key < old {
            self.sift_up(position);
        } else {
            self.sift_down(position);
        }
    }

    /// Removes `item` if it is in the heap; returns whether it was.
    pub fn remove(&mut self, item: u32) -> bool {
        if !self.contains(item) {
            return false;
        }
        let position = self.position[item as usize] as usize;
        self.position[item as usize] = ABSENT;
        let removed = self.entries[position].0;
        let last = self.entries.pop().expect("non-empty");
        if position < self.entries.len() {
            self.entries[position] = last;
            if last.0 < removed {
                self.sift_up(position);
            } else {
                self.sift_down(position);
            }
        }
        true
    }

    fn sift_up(&mut self, mut position: usize) {
        let moving = self.entries[position];
        while position > 0 {
            let parent = (position - 1) / 2;
            if moving.0 >= self.entries[parent].0 {
                break;
            }
            self.place(position, self.entries[parent]);
            position = parent;
        }
        self.place(position, moving);
    }

    fn sift_down(&mut self, mut position: usize) {
        let moving = self.entries[position];
        let len = self.entries.len();
        loop {
            let mut child = 2 * position + 1;
            if child >= len {
                break;
            }
            if child + 1 < len && self.entries[child + 1].0 < self.entries[child].0 {
                child += 1;
            }
            if self.entries[child].0 >= moving.0 {
                break;
            }
            self.place(position, self.entries[child]);
            position = child;
        }
        self.place(position, moving);
    }

    #[inline]
    fn place(&mut self, position: usize, entry: (K, u32)) {
        self.entries[position] = entry;
        self.position[entry.1 as usize] = position as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn pops_smallest_key_first_and_tracks_changes() {
        let mut heap: OrderedHeap<(f64, u64)> = OrderedHeap::default();
        for (item, key) in [(0, (5.0, 1)), (1, (1.0, 2)), (2, (5.0, 0)), (3, (7.0, 3))] {
            heap.push(item, key);
        }
        assert_eq!(heap.peek(), Some(((1.0, 2), 1)));
        heap.change_key(1, (9.0, 4));
        assert_eq!(heap.key(1), (9.0, 4));
        assert!(heap.remove(3));
        assert!(!heap.remove(3));
        let order: Vec<u32> = std::iter::from_fn(|| heap.pop().map(|(_, item)| item)).collect();
        // Equal priorities leave by the second component: 2 (time 0) before 0 (time 1).
        assert_eq!(order, vec![2, 0, 1]);
        assert!(heap.is_empty());
    }

    proptest! {
        /// Keys (priority, unique time) as GDSF uses them: the heap pops what an ordered set
        /// of the same keys would yield first.
        #[test]
        fn matches_an_ordered_set(
            ops in proptest::collection::vec((0u32..30, 0u8..4, 0u8..6), 1..400),
        ) {
            let mut heap: OrderedHeap<(f64, u64)> = OrderedHeap::default();
            let mut model: BTreeMap<(u8, u64), u32> = BTreeMap::new();
            let mut keys: std::collections::HashMap<u32, (u8, u64)> = Default::default();
            for (time, (item, action, priority)) in ops.into_iter().enumerate() {
                let key = (priority, time as u64);
                match action {
                    0 => {
                        let present = keys.remove(&item);
                        if let Some(old) = present {
                            model.remove(&old);
                        }
                        prop_assert_eq!(heap.remove(item), present.is_some());
                    }
                    1 => {
                        let expected = model.pop_first();
                        let popped = heap.pop();
                        prop_assert_eq!(
                            popped.map(|(_, item)| item),
                            expected.map(|(_, item)| item)
                        );
                        if let Some((_, item)) = expected {
                            keys.remove(&item);
                        }
                    }
                    _ => {
                        let as_f64 = (f64::from(priority), time as u64);
                        if let Some(old) = keys.insert(item, key) {
                            model.remove(&old);
                            heap.change_key(item, as_f64);
                        } else {
                            heap.push(item, as_f64);
                        }
                        model.insert(key, item);
                    }
                }
                prop_assert_eq!(heap.len(), model.len());
                for item in 0..30 {
                    prop_assert_eq!(heap.contains(item), keys.contains_key(&item));
                }
            }
        }
    }
}
