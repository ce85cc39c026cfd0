//! One queue of resident objects with the key table that finds them: the whole state of the
//! single-queue policies (LRU, FIFO, CLOCK, SIEVE), which differ only in how a hit reorders
//! the queue and which object the eviction scan picks.

use super::key_table::KeyTable;
use super::prefetch::prefetch_read;
use super::{List, Slab, NIL};
use crate::eviction::{Evicted, Space};

/// Resident objects in one list (front: most recently inserted), found by key.
#[derive(Clone, Debug, Default)]
pub struct KeyedQueue {
    map: KeyTable,
    slab: Slab<()>,
    list: List,
}

impl KeyedQueue {
    /// The slot of `key`, if resident.
    #[inline]
    pub fn find(&self, key: u64) -> Option<u32> {
        self.map.get(key)
    }

    /// Bytes of the resident objects.
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.list.bytes
    }

    /// Number of resident objects.
    #[inline]
    pub fn len(&self) -> usize {
        self.list.len
    }

    /// The queue as a cache of `capacity_bytes`.
    #[inline]
    pub fn space(&self, capacity_bytes: u64) -> Space {
        Space::of_lists(capacity_bytes, &[&self.list])
    }

    /// True when nothing is resident.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Checks that the list is whole and that the key table finds exactly its objects.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.list.check(&self.slab)?;
        if self.map.len() != self.list.len {
            return Err(format!(
                "{} keys in the table for {} queued objects",
                self.map.len(),
                self.list.len
            ));
        }
        Ok(())
    }

    /// The oldest end of the queue, or [`NIL`].
    #[inline]
    pub fn tail(&self) -> u32 {
        self.list.tail
    }

    /// The oldest object, which [`evict`](Self::evict) of [`tail`](Self::tail) drops, if any.
    #[inline]
    pub fn oldest(&self) -> Option<Evicted> {
        let tail = self.list.tail;
        (tail != NIL).then(|| {
            let node = self.slab.get(tail);
            node.evicted()
        })
    }

    /// The object inserted right after `index` (towards the front), or [`NIL`].
    #[inline]
    pub fn newer(&self, index: u32) -> u32 {
        self.slab.prev(index)
    }

    /// Inserts a new object at the front and returns its slot. Slots are reused, so a policy's
    /// per-slot side array can be written with [`store_at`](super::store_at).
    #[inline]
    pub fn insert_front(&mut self, key: u64, size: u32) -> u32 {
        let index = self.slab.alloc(key, size, ());
        self.list.push_front(&mut self.slab, index);
        self.map.insert(key, index);
        index
    }

    /// Admits a missed object at the front, first evicting from the tail until it fits in
    /// `capacity` bytes (LRU's and FIFO's admission); an object larger than the capacity, or
    /// one already resident, is left alone.
    #[inline]
    pub fn admit_evicting_tail(
        &mut self,
        key: u64,
        size: u32,
        capacity: u64,
        evicted: &mut Vec<Evicted>,
    ) {
        if u64::from(size) > capacity || self.find(key).is_some() {
            return;
        }
        while self.bytes() + u64::from(size) > capacity {
            evicted.push(self.evict(self.tail()));
        }
        self.insert_front(key, size);
    }

    /// Moves a resident object to the front.
    #[inline]
    pub fn move_to_front(&mut self, index: u32) {
        self.list.move_to_front(&mut self.slab, index);
    }

    /// Drops the resident object at `index` and says what left.
    #[inline]
    pub fn evict(&mut self, index: u32) -> Evicted {
        self.list.unlink(&mut self.slab, index);
        let node = self.slab.get(index);
        let gone = node.evicted();
        self.map.remove(gone.key);
        self.slab.release(index);
        gone
    }

    /// Drops `key` if resident and returns the slot it had.
    pub fn remove(&mut self, key: u64) -> Option<u32> {
        let index = self.map.get(key)?;
        self.evict(index);
        Some(index)
    }

    /// Starts loading the table slot of `key`.
    #[inline]
    pub fn prefetch_slot(&self, key: u64) {
        self.map.prefetch(key);
    }

    /// Starts loading the node of `key`, if resident.
    #[inline]
    pub fn prefetch_node(&self, key: u64) {
        if let Some(index) = self.map.get(key) {
            prefetch_read(self.slab.get(index));
        }
    }

    /// Starts loading the neighbours of `key`'s node, which moving it to the front relinks.
    #[inline]
    pub fn prefetch_neighbours(&self, key: u64) {
        if let Some(index) = self.map.get(key) {
            self.slab.prefetch_neighbours(index);
        }
    }

    /// Starts loading what the next evictions from `index` on touch: the table slots of the
    /// `VICTIMS_AHEAD` objects from `index` towards the front, and the node after them. An
    /// eviction removes its victim's slot; a slot loaded only one request ahead would still be
    /// on its way. The nodes walked were loaded by earlier calls, as the node after them is by
    /// this one.
    #[inline]
    pub fn prefetch_eviction(&self, mut index: u32) {
        for _ in 0..VICTIMS_AHEAD {
            if index == NIL {
                return;
            }
            let node = self.slab.get(index);
            self.map.prefetch(node.key);
            index = self.slab.prev(index);
        }
        if index != NIL {
            prefetch_read(self.slab.get(index));
        }
    }
}

/// Victims whose table slots [`KeyedQueue::prefetch_eviction`] loads ahead: with one request
/// in three a miss, the last of them is evicted about ten requests later.
const VICTIMS_AHEAD: usize = 4;
