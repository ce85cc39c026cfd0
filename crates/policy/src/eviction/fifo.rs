//! First in, first out: evict the object that entered the cache earliest; hits change nothing.
//! Same decisions as libCacheSim's `FIFO.c` (insert at the head, evict the tail).

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::util::keyed_queue::KeyedQueue;

/// FIFO over a byte capacity.
pub struct Fifo {
    capacity: u64,
    /// Front: most recently inserted.
    queue: KeyedQueue,
}

impl Fifo {
    /// An empty FIFO cache of `capacity` bytes.
    pub fn new(capacity: u64) -> Fifo {
        Fifo {
            capacity,
            queue: KeyedQueue::default(),
        }
    }
}

impl EvictionPolicy for Fifo {
    fn space(&self) -> Space {
        self.queue.space(self.capacity)
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.space().check()?;
        self.queue.check_invariants()
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        self.queue.find(request.key).is_some()
    }

    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        self.queue
            .admit_evicting_tail(request.key, request.size, self.capacity, evicted);
    }

    fn remove(&mut self, key: u64) -> bool {
        self.queue.remove(key).is_some()
    }

    /// FIFO's queue serves as W-TinyLFU's main cache (libCacheSim's `FIFO.c` as main).
    fn serves_inside(&self) -> bool {
        true
    }

    fn next_victim(&self) -> Option<Evicted> {
        self.queue.oldest()
    }

    fn evict_one(&mut self, evicted: &mut Vec<Evicted>) -> bool {
        if self.queue.is_empty() {
            return false;
        }
        evicted.push(self.queue.evict(self.queue.tail()));
        true
    }

    /// Inserts at the front without evicting, as libCacheSim's `FIFO_insert`.
    fn insert(&mut self, request: &Request, _evicted: &mut Vec<Evicted>) {
        if self.queue.find(request.key).is_none() {
            self.queue.insert_front(request.key, request.size);
        }
    }

    #[inline]
    fn contains(&self, key: u64) -> Option<bool> {
        Some(self.queue.find(key).is_some())
    }

    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.queue.prefetch_slot(key);
    }

    /// The tail is the next victim (a hit touches nothing beyond the table slot).
    #[inline]
    fn prefetch_victims(&self) {
        self.queue.prefetch_eviction(self.queue.tail());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::model_check::{check_against_model, steps};
    use proptest::prelude::*;

    fn request(key: u64, size: u32) -> Request {
        Request::new(key, size)
    }

    #[test]
    fn evicts_in_insertion_order_regardless_of_hits() {
        let mut fifo = Fifo::new(3);
        let mut evicted = Vec::new();
        for key in [1, 2, 3] {
            assert!(!fifo.get(&request(key, 1), &mut evicted));
        }
        // A hit on 1 does not save it: FIFO ignores recency.
        assert!(fifo.get(&request(1, 1), &mut evicted));
        assert!(!fifo.get(&request(4, 1), &mut evicted));
        assert_eq!(evicted, vec![Evicted { key: 1, size: 1 }]);
        evicted.clear();
        assert!(!fifo.get(&request(1, 1), &mut evicted));
        assert_eq!(evicted, vec![Evicted { key: 2, size: 1 }]);
    }

    #[test]
    fn a_large_object_evicts_several_and_oversized_objects_are_not_admitted() {
        let mut fifo = Fifo::new(10);
        let mut evicted = Vec::new();
        for key in 1..=5 {
            fifo.get(&request(key, 2), &mut evicted);
        }
        assert!(evicted.is_empty());
        // Needs 5 bytes: the two oldest (4 bytes) are not enough, the third makes room.
        assert!(!fifo.get(&request(9, 5), &mut evicted));
        let keys: Vec<u64> = evicted.iter().map(|e| e.key).collect();
        assert_eq!(keys, vec![1, 2, 3]);
        assert_eq!((fifo.len(), fifo.used_bytes()), (3, 9));
        evicted.clear();
        assert!(!fifo.get(&request(10, 11), &mut evicted));
        assert!(
            evicted.is_empty(),
            "an object larger than the cache evicts nothing"
        );
        assert!(!fifo.lookup(&request(10, 11)));
    }

    #[test]
    fn remove_frees_bytes_and_forgets_the_key() {
        let mut fifo = Fifo::new(10);
        let mut evicted = Vec::new();
        fifo.get(&request(1, 4), &mut evicted);
        fifo.get(&request(2, 4), &mut evicted);
        assert!(fifo.remove(1));
        assert!(!fifo.remove(1));
        assert_eq!((fifo.len(), fifo.used_bytes()), (1, 4));
        assert!(!fifo.lookup(&request(1, 4)));
        // The freed room is used without evicting 2.
        fifo.get(&request(3, 6), &mut evicted);
        assert!(evicted.is_empty());
        assert!(fifo.lookup(&request(2, 4)));
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(capacity in 1u64..64, steps in steps(20)) {
            check_against_model(&mut Fifo::new(capacity), &steps)?;
        }
    }
}
