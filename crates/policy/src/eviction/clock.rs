//! CLOCK (second chance, FIFO-reinsertion): a FIFO whose objects carry a small access counter;
//! an object about to be evicted with a non-zero counter is decremented and given another round
//! instead. Same decisions as libCacheSim's `Clock.c` with its defaults `init-freq=0,
//! n-bit-counter=1`: new objects enter with counter `init_freq`, a hit raises the counter up to
//! `2^n_bit_counter - 1`, and the "hand" is the queue's tail, re-inserted objects moving to the
//! head.

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::error::PolicyError;
use crate::util::keyed_queue::KeyedQueue;
use crate::util::prefetch::prefetch_read;
use crate::util::store_at;

/// CLOCK over a byte capacity.
pub struct Clock {
    capacity: u64,
    init_freq: u8,
    max_freq: u8,
    /// Front: most recently inserted or re-inserted; the hand sits at the back.
    queue: KeyedQueue,
    /// Per queue slot: the object's access counter. Kept apart from the nodes so that a hit
    /// writes to this small dense array instead of pulling its node into cache.
    counters: Vec<u8>,
}

impl Clock {
    /// An empty CLOCK cache of `capacity` bytes with libCacheSim's defaults (one reference bit,
    /// new objects unreferenced).
    pub fn new(capacity: u64) -> Clock {
        Clock {
            capacity,
            init_freq: 0,
            max_freq: 1,
            queue: KeyedQueue::default(),
            counters: Vec::new(),
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
            return Err(PolicyError::refused(
                "clock",
                format!("n-bit-counter must be 1 to 8, got {n_bit_counter}"),
            ));
        }
        Ok(Clock {
            init_freq,
            max_freq: ((1u16 << n_bit_counter) - 1) as u8,
            ..Clock::new(capacity)
        })
    }
}

impl EvictionPolicy for Clock {
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
                let counter = &mut self.counters[index as usize];
                if *counter < self.max_freq {
                    *counter += 1;
                }
                true
            }
            None => false,
        }
    }

    /// Evicts until the object fits, giving referenced objects another round at the front.
    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        let size = u64::from(request.size);
        if size > self.capacity || self.queue.find(request.key).is_some() {
            return;
        }
        while self.queue.bytes() + size > self.capacity {
            let victim = self.queue.tail();
            let counter = &mut self.counters[victim as usize];
            if *counter > 0 {
                *counter -= 1;
                self.queue.move_to_front(victim);
            } else {
                evicted.push(self.queue.evict(victim));
            }
        }
        let index = self.queue.insert_front(request.key, request.size);
        store_at(&mut self.counters, index, self.init_freq);
    }

    fn remove(&mut self, key: u64) -> bool {
        self.queue.remove(key).is_some()
    }

    #[inline]
    fn contains(&self, key: u64) -> Option<bool> {
        Some(self.queue.find(key).is_some())
    }

    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.queue.prefetch_slot(key);
    }

    /// A hit touches only the counter.
    #[inline]
    fn prefetch_node(&self, key: u64) {
        if let Some(index) = self.queue.find(key) {
            prefetch_read(&self.counters[index as usize]);
        }
    }

    /// The hand's next stop is the tail.
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
