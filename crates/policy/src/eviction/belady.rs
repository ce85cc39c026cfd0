//! Belady's MIN (Belady, "A study of replacement algorithms for a virtual-storage computer",
//! IBM Systems Journal 1966): evict the object whose next access is furthest in the future.
//! An offline oracle: it reads each request's [`Request::next_access`] (the index of the next
//! request for the same key), which oracleGeneral traces carry and which the simulator computes
//! beforehand for traces that do not (see [`EvictionPolicy::needs_next_access`]).
//!
//! Same decisions as libCacheSim's `Belady.c`: objects are ordered by next access in a binary
//! max-heap whose tie rules decide among objects never requested again (see
//! [`IndexedHeap`]), and an object's next access is refreshed on every hit. Like libCacheSim it
//! is not size-aware, so with variable sizes it is not the byte-optimal policy.
//!
//! A request whose next access is [`NEXT_ACCESS_UNKNOWN`] (a live stream nobody annotated) is
//! ranked as never requested again, so unannotated objects are the first to go.

use heterarchy_trace::request::{NEXT_ACCESS_NEVER, NEXT_ACCESS_UNKNOWN};
use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::util::heap::IndexedHeap;
use crate::util::key_table::KeyTable;
use crate::util::{release_bytes, Slab};

/// Belady's MIN over a byte capacity.
pub struct Belady {
    capacity: u64,
    used: u64,
    map: KeyTable,
    slab: Slab<()>,
    /// Resident slab indices by next access, furthest first.
    heap: IndexedHeap,
}

/// The heap priority of a request: its next access as libCacheSim's `double` priority.
#[inline]
fn priority(request: &Request) -> f64 {
    let next = if request.next_access == NEXT_ACCESS_UNKNOWN {
        NEXT_ACCESS_NEVER
    } else {
        request.next_access
    };
    next as f64
}

impl Belady {
    /// An empty Belady cache of `capacity` bytes.
    pub fn new(capacity: u64) -> Belady {
        Belady {
            capacity,
            used: 0,
            map: KeyTable::default(),
            slab: Slab::default(),
            heap: IndexedHeap::default(),
        }
    }

    /// Evicts furthest-reused objects until `size` more bytes fit.
    #[inline]
    fn make_room(&mut self, size: u64, evicted: &mut Vec<Evicted>) {
        while self.used + size > self.capacity {
            let Some(victim) = self.heap.pop() else {
                break;
            };
            let node = self.slab.get(victim);
            evicted.push(node.evicted());
            release_bytes(&mut self.used, u64::from(node.size));
            self.map.remove(node.key);
            self.slab.release(victim);
        }
    }

    /// Admits the object of a request that missed, unless it is larger than the cache.
    #[inline]
    fn insert_missed(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        let size = u64::from(request.size);
        if size > self.capacity {
            return;
        }
        self.make_room(size, evicted);
        let index = self.slab.alloc(request.key, request.size, ());
        self.used += size;
        self.heap.push(index, priority(request));
        self.map.insert(request.key, index);
    }
}

impl EvictionPolicy for Belady {
    fn space(&self) -> Space {
        Space {
            capacity_bytes: self.capacity,
            used_bytes: self.used,
            objects: self.heap.len(),
        }
    }

    fn needs_next_access(&self) -> bool {
        true
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        match self.map.get(request.key) {
            Some(index) => {
                self.heap.change_priority(index, priority(request));
                true
            }
            None => false,
        }
    }

    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        if self.map.get(request.key).is_none() {
            self.insert_missed(request, evicted);
        }
    }

    #[inline]
    fn get(&mut self, request: &Request, evicted: &mut Vec<Evicted>) -> bool {
        if self.lookup(request) {
            return true;
        }
        self.insert_missed(request, evicted);
        false
    }

    fn contains(&self, key: u64) -> Option<bool> {
        Some(self.map.get(key).is_some())
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.map.remove(key) {
            Some(index) => {
                self.heap.remove(index);
                release_bytes(&mut self.used, u64::from(self.slab.get(index).size));
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

    /// A hit re-prioritises the object: load its heap entry.
    #[inline]
    fn prefetch_node(&self, key: u64) {
        if let Some(index) = self.map.get(key) {
            self.heap.prefetch(index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::model_check::{check_against_model, steps, with_next_access, Step};
    use proptest::prelude::*;

    /// Plays `keys` (unit size) with next accesses computed from the sequence itself; returns
    /// hits and evicted keys.
    fn play(capacity: u64, keys: &[u64]) -> (Vec<bool>, Vec<u64>) {
        let steps: Vec<Step> = keys
            .iter()
            .map(|&key| Step {
                key,
                size: 1,
                action: 2,
            })
            .collect();
        let mut belady = Belady::new(capacity);
        let mut evicted = Vec::new();
        let hits = with_next_access(&steps)
            .iter()
            .map(|request| belady.get(request, &mut evicted))
            .collect();
        (hits, evicted.iter().map(|e| e.key).collect())
    }

    #[test]
    fn evicts_the_object_reused_furthest_in_the_future() {
        let (hits, evicted) = play(3, &[1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5]);
        assert_eq!(
            hits,
            vec![false, false, false, false, true, true, false, true, true, false, false, true]
        );
        // The miss on 4 (index 3) evicts 3 (next used at 9, after 1 at 4 and 2 at 5); the miss
        // on 5 (index 6) evicts 4 (next at 10, after 1 at 7 and 2 at 8). Later victims are
        // objects never used again.
        assert_eq!(evicted[..2], [3, 4]);
        assert_eq!(hits.iter().filter(|hit| !**hit).count(), 7);
    }

    #[test]
    fn hits_refresh_the_next_access() {
        let mut belady = Belady::new(2);
        let mut evicted = Vec::new();
        let request = |key: u64, next: i64| {
            let mut request = Request::new(key, 1);
            request.next_access = next;
            request
        };
        belady.get(&request(1, 10), &mut evicted);
        belady.get(&request(2, 20), &mut evicted);
        // A hit on 2 says its next access is now 3, sooner than 1's.
        assert!(belady.get(&request(2, 3), &mut evicted));
        belady.get(&request(3, 30), &mut evicted);
        // 3 (next 30) is furthest when 4 arrives.
        belady.get(&request(4, NEXT_ACCESS_UNKNOWN), &mut evicted);
        let keys: Vec<u64> = evicted.iter().map(|e| e.key).collect();
        assert_eq!(keys, vec![1, 3]);
        evicted.clear();
        // An unknown next access counts as never: 4 goes before 2.
        belady.get(&request(5, 4), &mut evicted);
        assert_eq!(evicted, vec![Evicted { key: 4, size: 1 }]);
    }

    /// Hits of MIN with unit sizes by brute force: on a miss with a full cache, drop a resident
    /// key whose next use is furthest (any of them when tied: with unit sizes ties among keys
    /// never used again do not change the hit count).
    fn brute_force_min_hits(capacity: usize, keys: &[u64]) -> usize {
        let mut resident: Vec<u64> = Vec::new();
        let mut hits = 0;
        for (now, key) in keys.iter().enumerate() {
            if resident.contains(key) {
                hits += 1;
                continue;
            }
            if resident.len() == capacity {
                let next_use = |k: &u64| {
                    keys[now + 1..]
                        .iter()
                        .position(|later| later == k)
                        .unwrap_or(usize::MAX)
                };
                let furthest = (0..resident.len())
                    .max_by_key(|&i| next_use(&resident[i]))
                    .expect("full cache");
                resident.swap_remove(furthest);
            }
            resident.push(*key);
        }
        hits
    }

    #[test]
    fn remove_and_oversized() {
        let mut belady = Belady::new(4);
        let mut evicted = Vec::new();
        assert!(!belady.get(&Request::new(1, 5), &mut evicted));
        assert!(belady.is_empty());
        belady.get(&Request::new(1, 2), &mut evicted);
        belady.get(&Request::new(2, 2), &mut evicted);
        assert!(belady.remove(1));
        assert!(!belady.remove(1));
        assert_eq!((belady.len(), belady.used_bytes()), (1, 2));
        belady.get(&Request::new(3, 2), &mut evicted);
        assert!(evicted.is_empty());
        assert!(belady.needs_next_access());
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(capacity in 1u64..64, steps in steps(20)) {
            check_against_model(&mut Belady::new(capacity), &steps)?;
        }

        #[test]
        fn unit_size_hits_equal_brute_force_min(
            capacity in 1usize..8,
            keys in proptest::collection::vec(0u64..12, 1..200),
        ) {
            let (hits, _) = play(capacity as u64, &keys);
            let hit_count = hits.iter().filter(|hit| **hit).count();
            prop_assert_eq!(hit_count, brute_force_min_hits(capacity, &keys));
        }
    }
}
