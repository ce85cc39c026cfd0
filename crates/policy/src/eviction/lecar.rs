//! LeCaR, learning cache replacement (Vietri et al., "Driving Cache Replacement with ML-based
//! LeCaR", HotStorage'18, §3): two experts, LRU and LFU, each propose a victim; one is drawn
//! at random by the experts' weights. Each expert keeps a history of the objects it evicted,
//! and a miss on a key in an expert's history (a regretted eviction) shrinks that expert's
//! weight by `e^(−λ·d^t)`, `t` requests after the eviction, `λ = 0.45`, `d = 0.005^(1/N)`.
//!
//! Decisions follow libCacheSim's `LeCaR.c` (the version the `libcachesim` 0.3.5 Python
//! package bundles), with its parameters `update-weight` (default true) and `lru-weight`
//! (default 0.5). Its decisions, which we follow where they depart from the paper or where the
//! paper leaves them open:
//! - Sizes are bytes: each history holds at most ⌊capacity/2⌋ bytes of evicted objects (oldest
//!   eviction dropped first), and the discount rate is `0.005^(1/capacity)` with the capacity in
//!   bytes, so with real object sizes the reward `d^t` barely decays (the paper's `N` is the
//!   cache size in pages).
//! - The update multiplies the regretted expert's weight by `e^(−λ·d^t)` and renormalises,
//!   adding 1e-10 to each weight (2e-10 to their sum) to keep them off zero; the paper
//!   multiplies the other expert's weight by `e^(λ·d^t)`, which is the same after
//!   normalisation but for those 1e-10 terms.
//! - When both experts propose the same object, it is evicted without a draw and goes into no
//!   history (libCacheSim keeps it as a ghost of neither expert, which no later request can
//!   learn from).
//! - The draw is `(next_rand() % 100) / 100`, a multiple of 0.01, and LRU wins when it is below
//!   the LRU weight; so the LRU weight acts as the next multiple of 0.01 at or above it.
//! - The LFU expert evicts, among the least frequent objects, the one that reached that
//!   frequency first. An object enters with frequency 1 and a hit adds 1; frequency is
//!   forgotten on eviction, also for objects that come back from a history.
//! - `lru-weight` sets only the LRU weight; the LFU weight starts at 0.5 whatever it is, so the
//!   two add up to 1 only after the first update. With `update-weight=false` the weights never
//!   change (a fixed random mix of LRU and LFU).
//!
//! Draws come from [`Lehmer64`], libCacheSim's generator: with `seed=0` (the default) they are
//! exactly libCacheSim's in a fresh process, so the miss ratios are equal; other seeds give
//! other runs of the same algorithm.
//!
//! O(1) per request: one table finds residents and history entries alike; residents are on a
//! recency list and in [`FrequencyBuckets`].

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::util::frequency::FrequencyBuckets;
use crate::util::key_table::KeyTable;
use crate::util::prefetch::prefetch_read;
use crate::util::rng::Lehmer64;
use crate::util::{List, Slab, NIL};

/// libCacheSim's learning rate λ.
const LEARNING_RATE: f64 = 0.45;

/// Where a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Resident,
    /// Evicted by the LRU expert, remembered in its history.
    LruHistory,
    /// Evicted by the LFU expert, remembered in its history.
    LfuHistory,
}

/// Which expert chose a victim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expert {
    Lru,
    Lfu,
}

/// Per-node state.
#[derive(Clone, Copy, Debug)]
struct Entry {
    place: Place,
    /// Request count when the object was evicted (history entries).
    evicted_at: u64,
}

/// LeCaR over a byte capacity.
pub struct LeCaR {
    capacity: u64,
    /// Each history's byte limit: ⌊capacity/2⌋.
    history_limit_bytes: u64,
    /// Residents and history entries.
    map: KeyTable,
    slab: Slab<Entry>,
    /// Residents, front: most recently used.
    recency: List,
    frequency: FrequencyBuckets,
    /// Front: most recently evicted.
    lru_history: List,
    lfu_history: List,
    weight_lru: f64,
    weight_lfu: f64,
    /// `d = 0.005^(1/capacity)`.
    discount_rate: f64,
    update_weights: bool,
    /// Requests seen, this one included (libCacheSim's `n_req`).
    requests: u64,
    rng: Lehmer64,
}

impl LeCaR {
    /// An empty LeCaR cache of `capacity` bytes with libCacheSim's defaults and seed 0.
    pub fn new(capacity: u64) -> LeCaR {
        LeCaR::with_params(capacity, true, 0.5, 0)
    }

    /// An empty LeCaR cache: `update_weights` false keeps the weights where they start,
    /// `lru_weight` is the LRU expert's first weight, `seed` picks the random draws (0:
    /// libCacheSim's).
    pub fn with_params(capacity: u64, update_weights: bool, lru_weight: f64, seed: u64) -> LeCaR {
        LeCaR {
            capacity,
            history_limit_bytes: capacity / 2,
            map: KeyTable::default(),
            slab: Slab::with_capacity(0),
            recency: List::default(),
            frequency: FrequencyBuckets::default(),
            lru_history: List::default(),
            lfu_history: List::default(),
            weight_lru: lru_weight,
            weight_lfu: 0.5,
            discount_rate: 0.005f64.powf(1.0 / capacity as f64),
            update_weights,
            requests: 0,
            rng: Lehmer64::new(seed),
        }
    }

    /// The experts' weights (LRU, LFU).
    pub fn weights(&self) -> (f64, f64) {
        (self.weight_lru, self.weight_lfu)
    }

    /// Learns from a miss on a key that `expert` evicted `age` requests ago.
    fn regret(&mut self, expert: Expert, age: u64) {
        if !self.update_weights {
            return;
        }
        let (regretted, other) = match expert {
            Expert::Lru => (&mut self.weight_lru, &mut self.weight_lfu),
            Expert::Lfu => (&mut self.weight_lfu, &mut self.weight_lru),
        };
        let reward = self.discount_rate.powf(age as f64);
        *regretted = *regretted * (-LEARNING_RATE * reward).exp() + 1e-10;
        let sum = *regretted + *other + 2e-10;
        *regretted /= sum;
        *other = (*other + 1e-10) / sum;
    }

    fn history(&mut self, place: Place) -> &mut List {
        match place {
            Place::LruHistory => &mut self.lru_history,
            Place::LfuHistory => &mut self.lfu_history,
            Place::Resident => unreachable!("a resident is in no history"),
        }
    }

    /// Forgets the history entry in `slot`.
    fn forget(&mut self, slot: u32) {
        let place = self.slab.get(slot).data.place;
        let mut history = *self.history(place);
        history.unlink(&mut self.slab, slot);
        *self.history(place) = history;
        self.map.remove(self.slab.get(slot).key);
        self.slab.release(slot);
    }

    /// Evicts one resident, chosen by the experts, and remembers it in the chooser's history.
    fn evict_one(&mut self, evicted: &mut Vec<Evicted>) {
        let lru_choice = self.recency.tail;
        let lfu_choice = self
            .frequency
            .least_frequent_earliest()
            .unwrap_or(lru_choice);
        let (victim, expert) = if lru_choice == lfu_choice {
            (lru_choice, None)
        } else if self.rng.percent() < self.weight_lru {
            (lru_choice, Some(Expert::Lru))
        } else {
            (lfu_choice, Some(Expert::Lfu))
        };
        self.recency.unlink(&mut self.slab, victim);
        let node = self.slab.get(victim);
        let (key, size) = (node.key, node.size);
        self.frequency.remove(victim);
        evicted.push(Evicted { key, size });
        let place = match expert {
            None => {
                self.map.remove(key);
                self.slab.release(victim);
                return;
            }
            Some(Expert::Lru) => Place::LruHistory,
            Some(Expert::Lfu) => Place::LfuHistory,
        };
        self.slab.get_mut(victim).data = Entry {
            place,
            evicted_at: self.requests,
        };
        let mut history = *self.history(place);
        history.push_front(&mut self.slab, victim);
        while history.bytes > self.history_limit_bytes {
            let oldest = history.pop_back(&mut self.slab).expect("over its limit");
            self.map.remove(self.slab.get(oldest).key);
            self.slab.release(oldest);
        }
        *self.history(place) = history;
    }
}

impl EvictionPolicy for LeCaR {
    fn space(&self) -> Space {
        Space::of_lists(self.capacity, &[&self.recency])
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.space().check()?;
        self.recency.check(&self.slab)
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        self.requests += 1;
        let Some(slot) = self.map.get(request.key) else {
            return false;
        };
        let entry = self.slab.get(slot).data;
        match entry.place {
            Place::Resident => {
                self.recency.move_to_front(&mut self.slab, slot);
                self.frequency.increment(slot);
                true
            }
            Place::LruHistory | Place::LfuHistory => {
                let expert = if entry.place == Place::LruHistory {
                    Expert::Lru
                } else {
                    Expert::Lfu
                };
                self.regret(expert, self.requests - entry.evicted_at);
                self.forget(slot);
                false
            }
        }
    }

    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        let size_bytes = u64::from(request.size);
        if size_bytes > self.capacity {
            return;
        }
        if let Some(slot) = self.map.get(request.key) {
            if self.slab.get(slot).data.place == Place::Resident {
                return;
            }
            // Admitted without a lookup: the history entry teaches nothing.
            self.forget(slot);
        }
        while self.recency.bytes + size_bytes > self.capacity {
            self.evict_one(evicted);
        }
        let slot = self.slab.alloc(
            request.key,
            request.size,
            Entry {
                place: Place::Resident,
                evicted_at: 0,
            },
        );
        self.frequency.insert(slot, request.key, request.size, 1);
        self.recency.push_front(&mut self.slab, slot);
        self.map.insert(request.key, slot);
    }

    fn remove(&mut self, key: u64) -> bool {
        let Some(slot) = self.map.get(key) else {
            return false;
        };
        let entry = self.slab.get(slot).data;
        if entry.place != Place::Resident {
            return false;
        }
        self.recency.unlink(&mut self.slab, slot);
        self.frequency.remove(slot);
        self.map.remove(key);
        self.slab.release(slot);
        true
    }

    fn contains(&self, key: u64) -> Option<bool> {
        Some(
            self.map
                .get(key)
                .is_some_and(|slot| self.slab.get(slot).data.place == Place::Resident),
        )
    }

    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.map.prefetch(key);
    }

    /// A resident's node and its frequency member share its slot: load both at once.
    #[inline]
    fn prefetch_node(&self, key: u64) {
        if let Some(slot) = self.map.get(key) {
            prefetch_read(self.slab.get(slot));
            self.frequency.prefetch(slot);
        }
    }

    /// The next eviction touches both experts' candidates and the oldest entry of each
    /// history (dropped from the table once the history is over its limit): load them, their
    /// neighbours, and the history tails' table slots.
    #[inline]
    fn prefetch_victims(&self) {
        if let Some(victim) = self.frequency.prefetch_least_frequent_earliest() {
            prefetch_read(self.slab.get(victim));
        }
        for list in [&self.recency, &self.lru_history, &self.lfu_history] {
            if list.tail != NIL {
                let before = self.slab.prev(list.tail);
                if before != NIL {
                    prefetch_read(self.slab.get(before));
                }
            }
        }
        for history in [&self.lru_history, &self.lfu_history] {
            if history.tail != NIL {
                self.map.prefetch(self.slab.get(history.tail).key);
            }
        }
    }

    #[inline]
    fn prefetch_neighbours(&self, key: u64) {
        if let Some(slot) = self.map.get(key) {
            // A resident relinks in the recency list and its bucket, a history entry leaves
            // its history: either way its list neighbours.
            if self.slab.get(slot).data.place == Place::Resident {
                self.frequency.prefetch_neighbours(slot);
            }
            self.slab.prefetch_neighbours(slot);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::util::model_check::{check_against_model, steps};
    use proptest::prelude::*;

    /// Test support shared with Cacheus: a skewed request sequence over keys 1 to 10 (a 64-bit
    /// LCG, so that the libcachesim script that made the expected results can make it too).
    pub(crate) fn small_trace() -> Vec<u64> {
        let mut state: u64 = 7;
        (0..80)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let draw = (state >> 33) % 100;
                1 + draw * draw / 1000
            })
            .collect()
    }

    /// Plays `keys` (size 1, or `1 + key % 3` when `sized`) and spells hits `h`, misses `m`.
    pub(crate) fn play(cache: &mut dyn EvictionPolicy, keys: &[u64], sized: bool) -> String {
        let mut evicted = Vec::new();
        keys.iter()
            .map(|&key| {
                let size = if sized { (key % 3) as u32 + 1 } else { 1 };
                if cache.get(&Request::new(key, size), &mut evicted) {
                    'h'
                } else {
                    'm'
                }
            })
            .collect()
    }

    fn get(cache: &mut LeCaR, key: u64, evicted: &mut Vec<Evicted>) -> bool {
        cache.get(&Request::new(key, 1), evicted)
    }

    /// Keys 1, 2, 3 in a 3-object cache, 1 hit once before the others arrive: LRU proposes 1
    /// (least recent), LFU proposes 2 (the first to reach frequency 1).
    fn experts_disagree(cache: &mut LeCaR) {
        let mut evicted = Vec::new();
        for key in [1, 1, 2, 3] {
            get(cache, key, &mut evicted);
        }
        assert!(evicted.is_empty());
    }

    #[test]
    fn a_weight_of_one_always_draws_lru_and_zero_always_lfu() {
        let mut evicted = Vec::new();
        let mut lru_only = LeCaR::with_params(3, false, 1.0, 7);
        experts_disagree(&mut lru_only);
        get(&mut lru_only, 4, &mut evicted);
        assert_eq!(evicted, vec![Evicted { key: 1, size: 1 }]);
        evicted.clear();
        let mut lfu_only = LeCaR::with_params(3, false, 0.0, 7);
        experts_disagree(&mut lfu_only);
        get(&mut lfu_only, 4, &mut evicted);
        assert_eq!(evicted, vec![Evicted { key: 2, size: 1 }]);
    }

    #[test]
    fn a_miss_on_an_lru_victim_shrinks_the_lru_weight_by_the_discounted_reward() {
        let mut evicted = Vec::new();
        let mut cache = LeCaR::with_params(3, true, 1.0, 7);
        experts_disagree(&mut cache);
        // Request 5 evicts 1 into the LRU history; request 6 misses on it, t = 1.
        get(&mut cache, 4, &mut evicted);
        assert!(!get(&mut cache, 1, &mut evicted));
        let reward = 0.005f64.powf(1.0 / 3.0);
        let regretted = (-0.45 * reward).exp() + 1e-10;
        let sum = regretted + 0.5 + 2e-10;
        assert_eq!(cache.weights(), (regretted / sum, (0.5 + 1e-10) / sum));
        // The history entry is gone; 1 is resident again, at frequency 1.
        assert!(cache.lru_history.is_empty());
        assert!(cache.contains(1).unwrap());
    }

    #[test]
    fn a_miss_on_an_lfu_victim_shrinks_the_lfu_weight() {
        let mut evicted = Vec::new();
        let mut cache = LeCaR::with_params(3, true, 0.0, 7);
        experts_disagree(&mut cache);
        get(&mut cache, 4, &mut evicted);
        assert!(!get(&mut cache, 2, &mut evicted));
        // The LRU weight starts at 0 and the LFU weight at 0.5 (not 1 − 0): renormalising
        // after the shrink brings the LFU weight back near 1.
        let reward = 0.005f64.powf(1.0 / 3.0);
        let regretted = 0.5 * (-0.45 * reward).exp() + 1e-10;
        let sum = regretted + 0.0 + 2e-10;
        assert_eq!(cache.weights(), (1e-10 / sum, regretted / sum));
    }

    #[test]
    fn agreeing_experts_leave_no_history_and_fixed_weights_stay() {
        let mut evicted = Vec::new();
        let mut cache = LeCaR::with_params(2, true, 0.5, 7);
        // 1 and 2 never hit: LRU's and LFU's victim is 1 either way.
        for key in [1, 2, 3] {
            get(&mut cache, key, &mut evicted);
        }
        assert_eq!(evicted, vec![Evicted { key: 1, size: 1 }]);
        assert!(cache.lru_history.is_empty() && cache.lfu_history.is_empty());
        get(&mut cache, 1, &mut evicted);
        assert_eq!(cache.weights(), (0.5, 0.5));
    }

    #[test]
    fn each_history_keeps_half_the_capacity_in_bytes() {
        let mut evicted = Vec::new();
        let mut cache = LeCaR::with_params(10, false, 0.0, 7);
        // 1 is hit and then left alone: LRU proposes it, LFU the oldest object of frequency
        // 1, on every eviction; LFU (always drawn) evicts 2, 3, … into its history.
        for key in [1, 1].into_iter().chain(2..=12) {
            cache.get(&Request::new(key, 2), &mut evicted);
        }
        assert_eq!(evicted.len(), 7);
        assert_eq!((cache.lfu_history.len, cache.lfu_history.bytes), (2, 4));
        assert!(cache.lru_history.is_empty());
    }

    #[test]
    fn seed_zero_makes_libcachesims_decisions() {
        // libcachesim 0.3.5, a fresh interpreter: LeCaR(cache_size=5) then (cache_size=9)
        // with sizes 1 + key % 3, on the same 80 requests.
        let keys = small_trace();
        let cases: [(u64, bool, &str, &[u64]); 2] = [
            (
                5,
                false,
                "mmmmhhmhmmmmmmmmmmhhmmhhhhhhhhhhhmhhhhhhhhmhmhhhhmmhmmhhmhhhhmhhhmhmhmhmhhhmhmhm",
                &[1, 2, 3, 5, 7],
            ),
            (
                9,
                true,
                "mmmmhhmhmmmmmmmmmmhhmmhhhhhhhhhhhmhhhhhhhhmmmhhhmmmhmmmhhmhhhmhhhmhmmmhmhhhmhmmm",
                &[1, 2, 3, 7],
            ),
        ];
        for (capacity, sized, hits, resident) in cases {
            let mut cache = LeCaR::new(capacity);
            assert_eq!(play(&mut cache, &keys, sized), hits);
            let now: Vec<u64> = (1..=10)
                .filter(|&key| cache.contains(key).unwrap())
                .collect();
            assert_eq!(now, resident);
        }
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(capacity in 1u64..64, seed in 0u64..4, steps in steps(20)) {
            check_against_model(&mut LeCaR::with_params(capacity, true, 0.5, seed), &steps)?;
        }
    }
}
