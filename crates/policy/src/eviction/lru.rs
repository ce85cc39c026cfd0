//! Least recently used: evict the object whose last access is oldest.
//! Same decisions as libCacheSim's `LRU.c`. The same queue with a promotion draw on hits is
//! LRU-Prob ([`super::lru_prob`]).

use heterarchy_trace::Request;

use super::lru_prob::Promotion;
use super::{Evicted, EvictionPolicy, Space};
use crate::util::keyed_queue::KeyedQueue;

/// LRU over a byte capacity.
pub struct Lru {
    capacity: u64,
    /// Front: most recently used (or promoted).
    queue: KeyedQueue,
    /// LRU-Prob's draw: a hit moves to the front only when it says so; plain LRU has none.
    promotion: Option<Promotion>,
}

impl Lru {
    /// An empty LRU cache of `capacity` bytes.
    pub fn new(capacity: u64) -> Lru {
        Lru::with_promotion(capacity, None)
    }

    /// An empty cache of `capacity` bytes whose hits move to the front when `promotion` draws
    /// so (always without one).
    pub fn with_promotion(capacity: u64, promotion: Option<Promotion>) -> Lru {
        Lru {
            capacity,
            queue: KeyedQueue::default(),
            promotion,
        }
    }
}

impl EvictionPolicy for Lru {
    fn space(&self) -> Space {
        self.queue.space(self.capacity)
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.space().check()?;
        self.queue.check_invariants()
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        match self.queue.find(request.key) {
            Some(index) => {
                if self.promotion.as_mut().is_none_or(Promotion::draw) {
                    self.queue.move_to_front(index);
                }
                true
            }
            None => false,
        }
    }

    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        self.queue
            .admit_evicting_tail(request.key, request.size, self.capacity, evicted);
    }

    fn remove(&mut self, key: u64) -> bool {
        self.queue.remove(key).is_some()
    }

    /// LRU's queue serves as W-TinyLFU's main cache (libCacheSim's `LRU.c` as main).
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

    /// Inserts at the front without evicting, as libCacheSim's `LRU_insert`.
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

    #[inline]
    fn prefetch_node(&self, key: u64) {
        self.queue.prefetch_node(key);
    }

    #[inline]
    fn prefetch_neighbours(&self, key: u64) {
        self.queue.prefetch_neighbours(key);
    }

    /// The tail is the next victim.
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

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(capacity in 1u64..64, steps in steps(20)) {
            check_against_model(&mut Lru::new(capacity), &steps)?;
        }
    }
}
