//! Least recently used: evict the object whose last access is oldest.
//! Same decisions as libCacheSim's `LRU.c`.

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy};
use crate::util::key_table::KeyTable;
use crate::util::prefetch::prefetch_read;
use crate::util::{List, Slab, NIL};

/// LRU over a byte capacity.
pub struct Lru {
    capacity: u64,
    map: KeyTable,
    slab: Slab<()>,
    /// Front: most recently used.
    queue: List,
}

impl Lru {
    /// An empty LRU cache of `capacity` bytes.
    pub fn new(capacity: u64) -> Lru {
        Lru {
            capacity,
            map: KeyTable::default(),
            slab: Slab::default(),
            queue: List::default(),
        }
    }
}

impl EvictionPolicy for Lru {
    fn name(&self) -> &'static str {
        "lru"
    }

    fn capacity_bytes(&self) -> u64 {
        self.capacity
    }

    fn used_bytes(&self) -> u64 {
        self.queue.bytes
    }

    fn len(&self) -> usize {
        self.queue.len
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        match self.map.get(request.key) {
            Some(index) => {
                self.queue.move_to_front(&mut self.slab, index);
                true
            }
            None => false,
        }
    }

    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        let size = u64::from(request.size);
        if size > self.capacity {
            return;
        }
        while self.queue.bytes + size > self.capacity {
            let victim = self
                .queue
                .pop_back(&mut self.slab)
                .expect("non-empty while over capacity");
            let node = self.slab.get(victim);
            evicted.push(Evicted {
                key: node.key,
                size: node.size,
            });
            self.map.remove(node.key);
            self.slab.release(victim);
        }
        let index = self.slab.alloc(request.key, request.size, ());
        self.queue.push_front(&mut self.slab, index);
        self.map.insert(request.key, index);
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.map.remove(key) {
            Some(index) => {
                self.queue.unlink(&mut self.slab, index);
                self.slab.release(index);
                true
            }
            None => false,
        }
    }

    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.map.prefetch(key);
    }

    #[inline]
    fn prefetch_node(&self, key: u64) {
        if let Some(index) = self.map.get(key) {
            prefetch_read(self.slab.get(index));
        }
    }

    /// The tail is the next victim; its neighbour becomes the tail, and the victim's table
    /// slot is cleared.
    #[inline]
    fn prefetch_victims(&self) {
        let tail = self.queue.tail;
        if tail != NIL {
            let node = self.slab.get(tail);
            self.map.prefetch(node.key);
            let before = self.slab.prev(tail);
            if before != NIL {
                prefetch_read(self.slab.get(before));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_bytes_first() {
        let mut lru = Lru::new(3);
        let mut evicted = Vec::new();
        for key in [1, 2, 3] {
            assert!(!lru.get(&Request::new(key, 1), &mut evicted));
        }
        assert!(lru.get(&Request::new(1, 1), &mut evicted));
        assert!(!lru.get(&Request::new(4, 1), &mut evicted));
        assert_eq!(evicted, vec![Evicted { key: 2, size: 1 }]);
        assert!(
            !lru.get(&Request::new(5, 4), &mut evicted),
            "larger than cache"
        );
        assert_eq!(lru.len(), 3);
        assert!(lru.remove(1));
        assert_eq!(lru.used_bytes(), 2);
    }
}
