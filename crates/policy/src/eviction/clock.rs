//! CLOCK (second chance, FIFO-reinsertion): a FIFO whose objects carry a small access counter;
//! an object about to be evicted with a non-zero counter is decremented and given another round
//! instead. Same decisions as libCacheSim's `Clock.c` with its defaults `init-freq=0,
//! n-bit-counter=1`: new objects enter with counter `init_freq`, a hit raises the counter up to
//! `2^n_bit_counter - 1`, and the "hand" is the queue's tail, re-inserted objects moving to the
//! head.

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy};
use crate::registry::PolicyError;
use crate::util::key_table::KeyTable;
use crate::util::prefetch::prefetch_read;
use crate::util::{List, Slab, NIL};

/// CLOCK over a byte capacity.
pub struct Clock {
    capacity: u64,
    init_freq: u8,
    max_freq: u8,
    map: KeyTable,
    slab: Slab<()>,
    /// Per slab slot: the object's access counter. Kept apart from the nodes so that a hit
    /// writes to this small dense array instead of pulling its node into cache.
    counters: Vec<u8>,
    /// Front: most recently inserted or re-inserted; the hand sits at the back.
    queue: List,
}

impl Clock {
    /// An empty CLOCK cache of `capacity` bytes with libCacheSim's defaults (one reference bit,
    /// new objects unreferenced).
    pub fn new(capacity: u64) -> Clock {
        Clock {
            capacity,
            init_freq: 0,
            max_freq: 1,
            map: KeyTable::default(),
            slab: Slab::default(),
            counters: Vec::new(),
            queue: List::default(),
        }
    }

    /// An empty CLOCK cache with an `n_bit_counter`-bit counter (1 to 8) per object that new
    /// objects start at `init_freq` (libCacheSim's `init-freq` and `n-bit-counter`).
    pub fn with_params(
        capacity: u64,
        init_freq: u8,
        n_bit_counter: u32,
    ) -> Result<Clock, PolicyError> {
        if !(1..=8).contains(&n_bit_counter) {
            return Err(PolicyError(format!(
                "clock: n-bit-counter must be 1 to 8, got {n_bit_counter}"
            )));
        }
        Ok(Clock {
            init_freq,
            max_freq: ((1u16 << n_bit_counter) - 1) as u8,
            ..Clock::new(capacity)
        })
    }

    /// Evicts until `size` more bytes fit, giving referenced objects another round.
    #[inline]
    fn make_room(&mut self, size: u64, evicted: &mut Vec<Evicted>) {
        while self.queue.bytes + size > self.capacity {
            let Some(victim) = self.queue.pop_back(&mut self.slab) else {
                break;
            };
            let counter = &mut self.counters[victim as usize];
            if *counter > 0 {
                *counter -= 1;
                self.queue.push_front(&mut self.slab, victim);
                continue;
            }
            let node = self.slab.get(victim);
            evicted.push(Evicted {
                key: node.key,
                size: node.size,
            });
            self.map.remove(node.key);
            self.slab.release(victim);
        }
    }

    /// Admits the object of a request that missed, unless it is larger than the cache.
    #[inline]
    fn insert(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        let size = u64::from(request.size);
        if size > self.capacity {
            return;
        }
        self.make_room(size, evicted);
        let index = self.slab.alloc(request.key, request.size, ());
        // Slots are handed out in order, so a new slot is always the next counter.
        match self.counters.get_mut(index as usize) {
            Some(counter) => *counter = self.init_freq,
            None => self.counters.push(self.init_freq),
        }
        self.queue.push_front(&mut self.slab, index);
        self.map.insert(request.key, index);
    }

    #[inline]
    fn touch(&mut self, index: u32) {
        let counter = &mut self.counters[index as usize];
        if *counter < self.max_freq {
            *counter += 1;
        }
    }
}

impl EvictionPolicy for Clock {
    fn name(&self) -> &'static str {
        "clock"
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
                self.touch(index);
                true
            }
            None => false,
        }
    }

    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        if self.map.get(request.key).is_none() {
            self.insert(request, evicted);
        }
    }

    #[inline]
    fn get(&mut self, request: &Request, evicted: &mut Vec<Evicted>) -> bool {
        if self.lookup(request) {
            return true;
        }
        self.insert(request, evicted);
        false
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

    /// A hit touches only the counter.
    #[inline]
    fn prefetch_node(&self, key: u64) {
        if let Some(index) = self.map.get(key) {
            prefetch_read(&self.counters[index as usize]);
        }
    }

    /// The hand's next stop is the tail: load its newer neighbour (the stop after) and the
    /// tail's table slot in case it is evicted.
    #[inline]
    fn prefetch_victims(&self) {
        let tail = self.queue.tail;
        if tail != NIL {
            self.map.prefetch(self.slab.get(tail).key);
            let newer = self.slab.prev(tail);
            if newer != NIL {
                prefetch_read(self.slab.get(newer));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::model_check::{check_against_model, steps};
    use proptest::prelude::*;

    fn keys(evicted: &[Evicted]) -> Vec<u64> {
        evicted.iter().map(|e| e.key).collect()
    }

    #[test]
    fn a_referenced_object_gets_a_second_chance() {
        let mut clock = Clock::new(3);
        let mut evicted = Vec::new();
        for key in [1, 2, 3] {
            assert!(!clock.get(&Request::new(key, 1), &mut evicted));
        }
        assert!(clock.get(&Request::new(1, 1), &mut evicted));
        // The hand finds 1 referenced: clears it, moves it to the head, evicts 2.
        assert!(!clock.get(&Request::new(4, 1), &mut evicted));
        assert_eq!(keys(&evicted), vec![2]);
        evicted.clear();
        // Queue from the hand: 3, 1 (cleared), 4. Next victim is 3, then 1 (no second chance
        // left), then 4.
        clock.get(&Request::new(5, 1), &mut evicted);
        clock.get(&Request::new(6, 1), &mut evicted);
        clock.get(&Request::new(7, 1), &mut evicted);
        assert_eq!(keys(&evicted), vec![3, 1, 4]);
    }

    #[test]
    fn one_bit_counter_saturates_so_many_hits_buy_one_round() {
        let mut clock = Clock::new(2);
        let mut evicted = Vec::new();
        clock.get(&Request::new(1, 1), &mut evicted);
        clock.get(&Request::new(2, 1), &mut evicted);
        for _ in 0..5 {
            assert!(clock.get(&Request::new(1, 1), &mut evicted));
        }
        clock.get(&Request::new(3, 1), &mut evicted);
        assert_eq!(keys(&evicted), vec![2]);
        evicted.clear();
        clock.get(&Request::new(4, 1), &mut evicted);
        assert_eq!(
            keys(&evicted),
            vec![1],
            "1's single bit was spent in the first round"
        );
    }

    #[test]
    fn two_bit_counter_buys_up_to_three_rounds() {
        let mut clock = Clock::with_params(2, 0, 2).unwrap();
        let mut evicted = Vec::new();
        clock.get(&Request::new(1, 1), &mut evicted);
        clock.get(&Request::new(2, 1), &mut evicted);
        for _ in 0..5 {
            clock.get(&Request::new(1, 1), &mut evicted);
        }
        // 1 holds 3 (saturated). Each miss: 1 is decremented and passed over while the other
        // slot turns over.
        for key in 10..14 {
            clock.get(&Request::new(key, 1), &mut evicted);
        }
        assert_eq!(keys(&evicted), vec![2, 10, 11, 1]);
        assert!(Clock::with_params(2, 0, 9).is_err());
    }

    #[test]
    fn init_freq_gives_new_objects_a_round() {
        let mut clock = Clock::with_params(2, 1, 1).unwrap();
        let mut evicted = Vec::new();
        clock.get(&Request::new(1, 1), &mut evicted);
        clock.get(&Request::new(2, 1), &mut evicted);
        // Both start referenced: the hand clears 1 and 2, then evicts 1.
        clock.get(&Request::new(3, 1), &mut evicted);
        assert_eq!(keys(&evicted), vec![1]);
    }

    #[test]
    fn remove_and_oversized() {
        let mut clock = Clock::new(4);
        let mut evicted = Vec::new();
        clock.get(&Request::new(1, 2), &mut evicted);
        clock.get(&Request::new(2, 2), &mut evicted);
        assert!(!clock.get(&Request::new(3, 5), &mut evicted));
        assert!(evicted.is_empty());
        assert!(clock.remove(2));
        assert!(!clock.remove(2));
        assert_eq!((clock.len(), clock.used_bytes()), (1, 2));
        clock.get(&Request::new(4, 2), &mut evicted);
        assert!(evicted.is_empty());
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(capacity in 1u64..64, steps in steps(20)) {
            check_against_model(&mut Clock::new(capacity), &steps)?;
            check_against_model(&mut Clock::with_params(capacity, 1, 2).unwrap(), &steps)?;
        }
    }
}
