//! SIEVE (Zhang et al., "SIEVE is Simpler than LRU", NSDI'24, §3): a FIFO queue with one
//! "visited" bit per object and a hand that moves from the tail (oldest) towards the head,
//! clearing visited bits and evicting the first unvisited object; objects are never moved.
//! Same decisions as libCacheSim's `Sieve.c`: new objects enter at the head unvisited, the hand
//! resumes at the victim's newer neighbour and wraps from the head back to the tail, and
//! removing the object under the hand moves the hand to its newer neighbour.

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::util::keyed_queue::KeyedQueue;
use crate::util::prefetch::prefetch_read;
use crate::util::{store_at, NIL};

/// SIEVE over a byte capacity.
pub struct Sieve {
    capacity: u64,
    /// Front: most recently inserted.
    queue: KeyedQueue,
    /// Per queue slot: visited since the hand last passed. Kept apart from the nodes so that a
    /// hit writes to this small dense array instead of pulling its node into cache.
    visited: Vec<bool>,
    /// Next object the hand examines, or [`NIL`] to start again from the tail.
    hand: u32,
}

impl Sieve {
    /// An empty SIEVE cache of `capacity` bytes.
    pub fn new(capacity: u64) -> Sieve {
        Sieve {
            capacity,
            queue: KeyedQueue::default(),
            visited: Vec::new(),
            hand: NIL,
        }
    }

    /// Where the hand starts its next sweep.
    #[inline]
    fn hand_or_tail(&self) -> u32 {
        if self.hand == NIL {
            self.queue.tail()
        } else {
            self.hand
        }
    }
}

impl EvictionPolicy for Sieve {
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
                self.visited[index as usize] = true;
                true
            }
            None => false,
        }
    }

    /// Evicts until the object fits: the hand clears visited bits on its way from the tail
    /// towards the head (wrapping) and evicts the first unvisited object.
    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        let size = u64::from(request.size);
        if size > self.capacity || self.queue.find(request.key).is_some() {
            return;
        }
        while self.queue.bytes() + size > self.capacity {
            let mut victim = self.hand_or_tail();
            while self.visited[victim as usize] {
                self.visited[victim as usize] = false;
                victim = match self.queue.newer(victim) {
                    NIL => self.queue.tail(),
                    newer => newer,
                };
            }
            self.hand = self.queue.newer(victim);
            evicted.push(self.queue.evict(victim));
        }
        let index = self.queue.insert_front(request.key, request.size);
        store_at(&mut self.visited, index, false);
    }

    #[inline]
    fn contains(&self, key: u64) -> Option<bool> {
        Some(self.queue.find(key).is_some())
    }

    fn remove(&mut self, key: u64) -> bool {
        let Some(index) = self.queue.find(key) else {
            return false;
        };
        if self.hand == index {
            self.hand = self.queue.newer(index);
        }
        self.queue.evict(index);
        true
    }

    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.queue.prefetch_slot(key);
    }

    /// A hit touches only the visited bit.
    #[inline]
    fn prefetch_node(&self, key: u64) {
        if let Some(index) = self.queue.find(key) {
            prefetch_read(&self.visited[index as usize]);
        }
    }

    /// The next victim is usually the object under the hand.
    #[inline]
    fn prefetch_victims(&self) {
        self.queue.prefetch_eviction(self.hand_or_tail());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::model_check::{check_against_model, steps};
    use proptest::prelude::*;

    fn get_all(sieve: &mut Sieve, keys: &[u64]) -> Vec<u64> {
        let mut evicted = Vec::new();
        for &key in keys {
            sieve.get(&Request::new(key, 1), &mut evicted);
        }
        evicted.iter().map(|e| e.key).collect()
    }

    #[test]
    fn hand_skips_visited_objects_and_keeps_its_place() {
        let mut sieve = Sieve::new(4);
        assert!(get_all(&mut sieve, &[1, 2, 3, 4, 1, 2]).is_empty());
        // Queue tail→head: 1* 2* 3 4. The hand clears 1 and 2 and evicts 3; it then rests on 4.
        assert_eq!(get_all(&mut sieve, &[5]), vec![3]);
        // Queue tail→head: 1 2 4 5, hand at 4: 4 goes next although 1 and 2 are older.
        assert_eq!(get_all(&mut sieve, &[6]), vec![4]);
        // Unvisited newcomers just behind the hand go first.
        assert_eq!(get_all(&mut sieve, &[7, 8]), vec![5, 6]);
        // Hand at 7: 7 and 8 are hits, so it clears both, wraps past the head to the tail and
        // evicts 1.
        assert_eq!(get_all(&mut sieve, &[7, 8, 9]), vec![1]);
    }

    #[test]
    fn all_visited_wraps_around_and_evicts_the_oldest() {
        let mut sieve = Sieve::new(3);
        get_all(&mut sieve, &[1, 2, 3, 1, 2, 3]);
        // Every object visited: the hand clears all three, wraps to the tail, evicts 1.
        assert_eq!(get_all(&mut sieve, &[4]), vec![1]);
        // Hand rests on 2 (cleared), so 2 then 3 go before the new 4.
        assert_eq!(get_all(&mut sieve, &[5, 6]), vec![2, 3]);
    }

    #[test]
    fn removing_the_object_under_the_hand_moves_the_hand_to_its_newer_neighbour() {
        let mut sieve = Sieve::new(4);
        get_all(&mut sieve, &[1, 2, 3, 4, 1, 3]);
        // Hand clears 1, evicts 2, rests on 3 (visited).
        assert_eq!(get_all(&mut sieve, &[5]), vec![2]);
        assert!(sieve.remove(3));
        assert!(!sieve.remove(3));
        assert_eq!((sieve.len(), sieve.used_bytes()), (3, 3));
        // Room for one without eviction; then the hand starts at 4.
        assert!(get_all(&mut sieve, &[6]).is_empty());
        assert_eq!(get_all(&mut sieve, &[7]), vec![4]);
    }

    #[test]
    fn oversized_objects_are_not_admitted() {
        let mut sieve = Sieve::new(4);
        let mut evicted = Vec::new();
        sieve.get(&Request::new(1, 4), &mut evicted);
        assert!(!sieve.get(&Request::new(2, 5), &mut evicted));
        assert!(evicted.is_empty());
        assert!(!sieve.get(&Request::new(2, 5), &mut evicted));
        assert_eq!(sieve.len(), 1);
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(capacity in 1u64..64, steps in steps(20)) {
            check_against_model(&mut Sieve::new(capacity), &steps)?;
        }
    }
}
