//! An addressable binary max-heap of `u32` items (slab indices) by priority.
//!
//! Equal priorities are common in caching (every object never requested again has the same
//! next access), and which of them comes out first changes byte miss ratios. So the sift
//! rules are exactly those of the binary heap libCacheSim's Belady and related policies use
//! (`dataStructure/pqueue.c`, after Volkan Yazıcı's libpqueue): moving up while the parent is
//! strictly smaller; moving down while a child is strictly larger, preferring the right child
//! only when it is strictly larger than the left; a changed priority moves up if it grew and
//! down otherwise; a removed item is replaced by the last one, which moves up if it is strictly
//! larger than the removed item's priority and down otherwise. (libpqueue's array is 1-based;
//! this one is 0-based, the same tree laid out one slot earlier, so every step is the same.)
//!
//! With priorities that never tie, any correct heap pops the same order, which is how the
//! policies libCacheSim ranks in a C++ `std::set` by (priority, time of last request), GDSF
//! for one, use this heap too: a priority that is such a pair, in [`std::cmp::Reverse`] for
//! the smallest first.

use super::prefetch::prefetch_read;

/// Marks an item that is not in the heap.
const ABSENT: u32 = u32::MAX;

/// Max-heap of items with priorities (never NaN), each item's position tracked so that any item
/// can be re-prioritised or removed in O(log n).
#[derive(Clone, Debug)]
pub struct IndexedHeap<P = f64> {
    entries: Vec<(P, u32)>,
    /// Position of each item in `entries`, indexed by item.
    position: Vec<u32>,
}

impl<P> Default for IndexedHeap<P> {
    fn default() -> Self {
        IndexedHeap {
            entries: Vec::new(),
            position: Vec::new(),
        }
    }
}

impl<P: PartialOrd + Copy> IndexedHeap<P> {
    /// Number of items.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the heap holds no item.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// True when `item` is in the heap.
    pub fn contains(&self, item: u32) -> bool {
        self.position
            .get(item as usize)
            .is_some_and(|&position| position != ABSENT)
    }

    /// The item of highest priority, with its priority.
    pub fn peek(&self) -> Option<(P, u32)> {
        self.entries.first().copied()
    }

    /// The priority of `item`, which must be in the heap.
    pub fn priority(&self, item: u32) -> P {
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

    /// Adds `item`, which must not be in the heap, with `priority`.
    pub fn push(&mut self, item: u32, priority: P) {
        let slot = item as usize;
        if slot >= self.position.len() {
            self.position.resize(slot + 1, ABSENT);
        }
        self.entries.push((priority, item));
        self.sift_up(self.entries.len() - 1);
    }

    /// Removes and returns the item of highest priority.
    pub fn pop(&mut self) -> Option<u32> {
        let last = self.entries.pop()?;
        let Some(&(_, top)) = self.entries.first() else {
            self.position[last.1 as usize] = ABSENT;
            return Some(last.1);
        };
        self.position[top as usize] = ABSENT;
        self.entries[0] = last;
        self.sift_down(0);
        Some(top)
    }

    /// Gives `item`, which must be in the heap, a new priority.
    pub fn change_priority(&mut self, item: u32, priority: P) {
        let position = self.position[item as usize] as usize;
        let old = std::mem::replace(&mut self.entries[position].0, priority);
        if old < priority {
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
        let removed_priority = self.entries[position].0;
        let last = self.entries.pop().expect("non-empty");
        if position < self.entries.len() {
            self.entries[position] = last;
            if removed_priority < last.0 {
                self.sift_up(position);
            } else {
                self.sift_down(position);
            }
        }
        true
    }

    fn sift_up(&mut self, mut position: usize) {
        let moving = self.entries[position];
        while position > 0 && self.entries[(position - 1) / 2].0 < moving.0 {
            let parent = self.entries[(position - 1) / 2];
            self.place(position, parent);
            position = (position - 1) / 2;
        }
        self.place(position, moving);
    }

    fn sift_down(&mut self, mut position: usize) {
        let moving = self.entries[position];
        loop {
            let mut child = 2 * position + 1;
            if child >= self.entries.len() {
                break;
            }
            if child + 1 < self.entries.len() && self.entries[child].0 < self.entries[child + 1].0 {
                child += 1;
            }
            if self.entries[child].0 <= moving.0 {
                break;
            }
            let larger = self.entries[child];
            self.place(position, larger);
            position = child;
        }
        self.place(position, moving);
    }

    #[inline]
    fn place(&mut self, position: usize, entry: (P, u32)) {
        self.entries[position] = entry;
        self.position[entry.1 as usize] = position as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn pops_in_priority_order_and_tracks_changes() {
        let mut heap = IndexedHeap::default();
        for (item, priority) in [(0, 5.0), (1, 9.0), (2, 1.0), (3, 7.0)] {
            heap.push(item, priority);
        }
        heap.change_priority(2, 8.0);
        heap.change_priority(1, 0.0);
        assert!(heap.remove(3));
        assert!(!heap.remove(3));
        assert_eq!(
            (heap.pop(), heap.pop(), heap.pop(), heap.pop()),
            (Some(2), Some(0), Some(1), None)
        );
    }

    #[test]
    fn ties_follow_libpqueue_sift_rules() {
        // Equal priorities: a new item never passes an equal parent, and popping moves the
        // last item to the root, where it stays unless a child is strictly larger. So with
        // all-equal priorities the pop order is 0, then the last pushed, and so on.
        let mut heap = IndexedHeap::default();
        for item in 0..5 {
            heap.push(item, 1.0);
        }
        let order: Vec<u32> = std::iter::from_fn(|| heap.pop()).collect();
        assert_eq!(order, vec![0, 4, 3, 2, 1]);
        // A right child is preferred only when strictly larger than the left.
        let mut heap = IndexedHeap::default();
        for (item, priority) in [(0, 9.0), (1, 5.0), (2, 5.0), (3, 1.0)] {
            heap.push(item, priority);
        }
        assert_eq!(heap.pop(), Some(0));
        assert_eq!(heap.pop(), Some(1), "left child wins the tie");
    }

    proptest! {
        #[test]
        fn matches_a_sorted_model(ops in proptest::collection::vec((0u32..30, 0u8..4, 0u8..20), 1..300)) {
            let mut heap = IndexedHeap::default();
            let mut model: std::collections::HashMap<u32, f64> = Default::default();
            for (item, action, priority) in ops {
                let priority = f64::from(priority);
                match action {
                    0 => prop_assert_eq!(heap.remove(item), model.remove(&item).is_some()),
                    1 => {
                        if let Some(top) = heap.pop() {
                            let best = model.values().cloned().fold(f64::MIN, f64::max);
                            prop_assert_eq!(model.remove(&top), Some(best));
                        } else {
                            prop_assert!(model.is_empty());
                        }
                    }
                    _ => {
                        if model.insert(item, priority).is_some() {
                            heap.change_priority(item, priority);
                        } else {
                            heap.push(item, priority);
                        }
                    }
                }
                prop_assert_eq!(heap.len(), model.len());
                for item in 0..30 {
                    prop_assert_eq!(heap.contains(item), model.contains_key(&item));
                }
            }
        }
    }
}
