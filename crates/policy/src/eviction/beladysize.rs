//! Size-aware Belady: Belady's MIN (Belady, "A study of replacement algorithms for a
//! virtual-storage computer", IBM Systems Journal 1966) ranks objects by how far in the future
//! they are next requested; with objects of different sizes, evicting one large object frees
//! as much as many small ones, so this variant evicts the object with the largest
//! next-access distance × size. An offline oracle: it reads each request's
//! [`Request::next_access`] (see [`EvictionPolicy::needs_next_access`] and
//! [`super::belady`]).
//!
//! Same decisions as libCacheSim's `BeladySize.c` (the `libcachesim` 0.3.5 package's
//! `BeladySize(n_samples=128)`, C parameter `n-sample`), which is a sampled heuristic rather
//! than an exact oracle:
//! - Each eviction draws `n-sample` resident objects at random (with replacement) and evicts
//!   the one whose distance × size is largest, the first drawn among equals. Randomized: a
//!   `seed` parameter fixes the draws. libCacheSim draws from its hash table (a random
//!   non-empty bucket, then a random object in it, so objects sharing a bucket are drawn less
//!   often); this draws uniformly among resident objects.
//! - libCacheSim compares `log(size) + log(distance)` in `f64`; this compares the exact
//!   integer product, which orders objects the same way except among products within rounding
//!   of each other.
//! - The distance is counted from the current request: the next access's index minus the
//!   number of requests looked up so far, less one (libCacheSim's `next_access_vtime - n_req`).
//!   [`Request`] carries no index of its own, so the policy counts the requests it is asked
//!   about; a cache that only sees some of a trace's requests ranks by a shifted clock, as
//!   libCacheSim's would.
//! - An object never requested again is never inserted (its miss still evicts to make room
//!   first, as libCacheSim evicts before its `insert` declines), and a hit whose next access is
//!   "never" drops the object at once. [`EvictionPolicy::lookup`] has no output for that drop,
//!   so it is reported by the next [`EvictionPolicy::admit`], and [`EvictionPolicy::contains`]
//!   offers no answer. A request whose next access is unknown counts as never requested again.

use heterarchy_trace::request::{NEXT_ACCESS_NEVER, NEXT_ACCESS_UNKNOWN};
use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::util::key_table::KeyTable;
use crate::util::prefetch::prefetch_read;

/// libCacheSim's default number of objects drawn per eviction.
pub const DEFAULT_SAMPLES: u32 = 128;

/// A resident object, stored densely so that a draw is one index.
#[derive(Clone, Copy, Debug)]
struct Resident {
    key: u64,
    /// Index of the object's next request.
    next_access: i64,
    size: u32,
}

/// Sampled size-aware Belady over a byte capacity.
pub struct BeladySize {
    capacity: u64,
    used_bytes: u64,
    /// Key → position in `residents`.
    map: KeyTable,
    residents: Vec<Resident>,
    samples: u32,
    /// SplitMix64 state.
    random_state: u64,
    /// Requests looked up so far (libCacheSim's `n_req`): the clock distances count from.
    requests: u64,
    /// Objects hits dropped since the last `admit`, for it to report.
    dropped_on_hits: Vec<Evicted>,
}

/// Whether a request says its object is never requested again.
#[inline]
fn never_again(request: &Request) -> bool {
    request.next_access == NEXT_ACCESS_NEVER || request.next_access == NEXT_ACCESS_UNKNOWN
}

impl BeladySize {
    /// An empty cache of `capacity` bytes drawing libCacheSim's 128 objects per eviction.
    pub fn new(capacity: u64) -> BeladySize {
        BeladySize::with_params(capacity, DEFAULT_SAMPLES, 0)
    }

    /// An empty cache of `capacity` bytes drawing `samples` objects (at least 1) per eviction,
    /// with draws fixed by `seed`.
    pub fn with_params(capacity: u64, samples: u32, seed: u64) -> BeladySize {
        BeladySize {
            capacity,
            used_bytes: 0,
            map: KeyTable::default(),
            residents: Vec::new(),
            samples: samples.max(1),
            random_state: seed,
            requests: 0,
            dropped_on_hits: Vec::new(),
        }
    }

    /// A uniform position among `len` (> 0) residents.
    #[inline]
    fn draw(&mut self, len: usize) -> usize {
        // SplitMix64, then Lemire's multiply-shift onto 0..len.
        self.random_state = self.random_state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.random_state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((u128::from(z) * len as u128) >> 64) as usize
    }

    /// Next-access distance × size of the resident at `position`.
    #[inline]
    fn score(&self, position: usize) -> u128 {
        let resident = &self.residents[position];
        // The current request's index is `requests - 1`.
        let now = self.requests as i64 - 1;
        let distance = resident.next_access.saturating_sub(now).max(0) as u64;
        u128::from(resident.size) * u128::from(distance)
    }

    /// Draws `samples` residents and returns the position of the first one of largest score.
    fn choose_victim(&mut self) -> usize {
        let len = self.residents.len();
        let mut best = self.draw(len);
        let mut best_score = self.score(best);
        for _ in 1..self.samples {
            let position = self.draw(len);
            let score = self.score(position);
            if score > best_score {
                best = position;
                best_score = score;
            }
        }
        best
    }

    /// Removes the resident at `position`, moving the last one into its place.
    fn take(&mut self, position: usize) -> Resident {
        let gone = self.residents.swap_remove(position);
        if let Some(moved) = self.residents.get(position) {
            *self
                .map
                .get_mut(moved.key)
                .expect("residents are in the map") = position as u32;
        }
        self.map.remove(gone.key);
        self.used_bytes -= u64::from(gone.size);
        gone
    }
}

impl EvictionPolicy for BeladySize {
    fn space(&self) -> Space {
        Space {
            capacity_bytes: self.capacity,
            used_bytes: self.used_bytes,
            objects: self.residents.len(),
        }
    }

    fn needs_next_access(&self) -> bool {
        true
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        self.requests += 1;
        let Some(position) = self.map.get(request.key) else {
            return false;
        };
        if never_again(request) {
            let gone = self.take(position as usize);
            self.dropped_on_hits.push(Evicted {
                key: gone.key,
                size: gone.size,
            });
        } else {
            self.residents[position as usize].next_access = request.next_access;
        }
        true
    }

    /// Also reports the objects that hits since the last `admit` dropped.
    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        evicted.append(&mut self.dropped_on_hits);
        let size = u64::from(request.size);
        if size > self.capacity || self.map.get(request.key).is_some() {
            return;
        }
        while self.used_bytes + size > self.capacity && !self.residents.is_empty() {
            let victim = self.choose_victim();
            let gone = self.take(victim);
            evicted.push(Evicted {
                key: gone.key,
                size: gone.size,
            });
        }
        if never_again(request) {
            return;
        }
        self.map.insert(request.key, self.residents.len() as u32);
        self.residents.push(Resident {
            key: request.key,
            next_access: request.next_access,
            size: request.size,
        });
        self.used_bytes += size;
    }

    /// A hit may drop its object, reported only by the next `admit`: no residency to offer.
    fn contains(&self, _key: u64) -> Option<bool> {
        None
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.map.get(key) {
            Some(position) => {
                self.take(position as usize);
                true
            }
            None => false,
        }
    }

    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.map.prefetch(key);
    }

    /// A hit rewrites the object's next access: load its entry.
    #[inline]
    fn prefetch_node(&self, key: u64) {
        if let Some(position) = self.map.get(key) {
            prefetch_read(&self.residents[position as usize]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::model_check::{steps, with_next_access, Step};
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn request(key: u64, size: u32, next_access: i64) -> Request {
        let mut request = Request::new(key, size);
        request.next_access = next_access;
        request
    }

    fn keys(evicted: &mut Vec<Evicted>) -> Vec<u64> {
        evicted.drain(..).map(|e| e.key).collect()
    }

    #[test]
    fn evicts_the_largest_distance_times_size() {
        // Enough draws that every one of three residents is drawn.
        let mut cache = BeladySize::with_params(9, 64, 1);
        let mut evicted = Vec::new();
        // Request indices 0, 1, 2: distances at request 3 are 7, 17 and 97 (next - 3).
        cache.get(&request(1, 5, 10), &mut evicted);
        cache.get(&request(2, 3, 20), &mut evicted);
        cache.get(&request(3, 1, 100), &mut evicted);
        // Scores 35, 51, 97: 3 goes even though it is the smallest.
        assert!(!cache.get(&request(4, 1, 50), &mut evicted));
        assert_eq!(keys(&mut evicted), vec![3]);
        // At request 4: 1 scores 6 × 5 = 30, 2 scores 16 × 3 = 48, 4 scores 46 × 1 = 46.
        assert!(!cache.get(&request(5, 2, 60), &mut evicted));
        assert_eq!(keys(&mut evicted), vec![2]);
        assert_eq!((cache.len(), cache.used_bytes()), (3, 8));
    }

    #[test]
    fn never_requested_again_is_not_kept() {
        let mut cache = BeladySize::with_params(4, 64, 0);
        let mut evicted = Vec::new();
        cache.get(&request(1, 2, 5), &mut evicted);
        cache.get(&request(2, 2, 6), &mut evicted);
        // A miss that is never requested again still makes room first, then is not inserted.
        assert!(!cache.get(&request(3, 1, NEXT_ACCESS_NEVER), &mut evicted));
        assert_eq!(keys(&mut evicted), vec![2]);
        assert_eq!((cache.len(), cache.used_bytes()), (1, 2));
        // A last hit drops the object; the next admission reports it.
        assert!(cache.get(&request(1, 2, NEXT_ACCESS_NEVER), &mut evicted));
        assert!(evicted.is_empty());
        assert!(cache.is_empty());
        assert!(!cache.get(&request(4, 1, 9), &mut evicted));
        assert_eq!(keys(&mut evicted), vec![1]);
        assert!(
            !cache.get(&request(5, 9, 9), &mut evicted),
            "larger than the cache"
        );
        assert!(cache.remove(4));
        assert!(!cache.remove(4));
        assert!(cache.is_empty() && cache.needs_next_access());
    }

    #[test]
    fn the_seed_fixes_the_draws() {
        let play = |seed| {
            let mut cache = BeladySize::with_params(8, 2, seed);
            let mut evicted = Vec::new();
            let steps: Vec<Step> = (0..200u64)
                .map(|i| Step {
                    key: i * 7 % 23,
                    size: 1 + (i % 3) as u32,
                    action: 2,
                })
                .collect();
            let hits: Vec<bool> = with_next_access(&steps)
                .iter()
                .map(|request| cache.get(request, &mut evicted))
                .collect();
            hits
        };
        assert_eq!(play(3), play(3));
        assert_ne!(play(3), play(4));
    }

    proptest! {
        /// Capacity and counts against a model that knows the never-again rules: a last hit
        /// drops the object, a last miss is not inserted, and dropped objects are reported by
        /// the next admission.
        #[test]
        fn capacity_holds_and_counts_match_a_model(capacity in 1u64..64, steps in steps(20), seed: u64) {
            let mut cache = BeladySize::with_params(capacity, 4, seed);
            let mut model: HashMap<u64, u32> = HashMap::new();
            let mut dropped: HashMap<u64, u32> = HashMap::new();
            let mut evicted = Vec::new();
            for (step, request) in steps.iter().zip(with_next_access(&steps)) {
                if step.action == 0 {
                    prop_assert_eq!(cache.remove(step.key), model.remove(&step.key).is_some());
                } else {
                    let hit = cache.lookup(&request);
                    prop_assert_eq!(hit, model.contains_key(&step.key));
                    if hit && never_again(&request) {
                        dropped.insert(step.key, model.remove(&step.key).unwrap());
                    }
                    if !hit {
                        cache.admit(&request, &mut evicted);
                        for gone in evicted.drain(..) {
                            let size = dropped.remove(&gone.key).or_else(|| model.remove(&gone.key));
                            prop_assert_eq!(size, Some(gone.size));
                        }
                        prop_assert!(dropped.is_empty());
                        if u64::from(step.size) <= capacity && !never_again(&request) {
                            model.insert(step.key, step.size);
                        }
                    }
                }
                prop_assert!(cache.used_bytes() <= cache.capacity_bytes());
                prop_assert_eq!(cache.len(), model.len());
                prop_assert_eq!(
                    cache.used_bytes(),
                    model.values().map(|&size| u64::from(size)).sum::<u64>()
                );
            }
        }
    }
}
