//! Greedy-Dual-Size-Frequency (Cherkasova, "Improving WWW Proxies Performance with
//! Greedy-Dual-Size-Frequency Caching Policy", HP Labs HPL-98-69, 1998): each object has the
//! priority `Pr = L + Fr × Cost / Size`, where `Fr` counts its requests and the inflation value
//! `L` (the paper's `Clock`) is raised to the priority of every object evicted; the object of
//! lowest priority is evicted. Small, frequently requested objects stay; objects that stop being
//! requested fall behind as `L` climbs past them.
//!
//! Same decisions as libCacheSim's `cpp/GDSF.cpp` (the `libcachesim` 0.3.5 package's `GDSF`),
//! which departs from the paper in these places:
//! - `Cost` is 10^6 for every object: `Pr = L + Fr × 10^6 / Size`, computed in that order of
//!   operations (`L + ((Fr × 10^6) / Size)`, in `f64`) so that priorities are bit-identical.
//! - A missed object is inserted first, with a priority from the current `L`, and objects are
//!   evicted afterwards while the cache is over capacity (the paper evicts first and prices the
//!   new object with the raised `L`). The new object can therefore be the one evicted; it is
//!   then not reported in the `evicted` list (it was never resident for the caller), but `L`
//!   rises to its priority as libCacheSim's does.
//! - Equal priorities leave in FIFO order of the request that last set them (libCacheSim keeps a
//!   `std::set` ordered by priority, then by the request counter `n_req` at the last insert or
//!   hit); a min-heap of that pair pops the same (see [`IndexedHeap`]).
//! - An object's size is the one it was inserted with; a hit with another size changes neither
//!   its priority's size nor the bytes counted.
//! - libCacheSim's `GDSF_get` does not go through `cache_get_base`, so an admissioner's `update`
//!   hook is never called for GDSF; our [`crate::admission::Admitted`] always calls `observe`,
//!   which only matters for filters that learn from it.
//!
//! `evict-first=true` prices a new object the paper's way: objects are evicted until it fits,
//! then it is inserted with the raised `L` (and so is never its own victim).
//!
//! `Fr` is 1 on insertion, counts hits while the object stays and is forgotten on eviction.
//! The paper's `Cost` can be 1 or a retrieval cost; with the same cost for all objects the
//! ranking is the same as libCacheSim's up to rounding, so no parameter selects it.

use std::cmp::Reverse;

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::util::heap::IndexedHeap;
use crate::util::key_table::KeyTable;
use crate::util::prefetch::prefetch_read;
use crate::util::{release_bytes, Slab, NIL};

/// libCacheSim's per-object cost.
const COST: f64 = 1.0e6;

/// A resident object's rank: priority, then the request count when the priority was set; the
/// heap holds its reverse, so that the lowest rank comes out first.
type Rank = Reverse<(f64, u64)>;

/// GDSF over a byte capacity.
pub struct Gdsf {
    capacity: u64,
    used_bytes: u64,
    map: KeyTable,
    /// Each object's data is its request count since insertion (libCacheSim's `int32` freq).
    slab: Slab<u32>,
    /// Resident slab indices, lowest rank first.
    queue: IndexedHeap<Rank>,
    /// `L`: the priority of the last evicted object.
    inflation: f64,
    /// Requests looked up so far (libCacheSim's `n_req`), which orders equal priorities.
    requests: u64,
    /// The paper's order on a miss: evict until the object fits, then insert it.
    evict_first: bool,
}

impl Gdsf {
    /// An empty GDSF cache of `capacity` bytes with libCacheSim's decisions.
    pub fn new(capacity: u64) -> Gdsf {
        Gdsf::with_evict_first(capacity, false)
    }

    /// An empty GDSF cache of `capacity` bytes that, when `evict_first`, makes room for a new
    /// object before pricing and inserting it (the paper's order) instead of after.
    pub fn with_evict_first(capacity: u64, evict_first: bool) -> Gdsf {
        Gdsf {
            capacity,
            used_bytes: 0,
            map: KeyTable::default(),
            slab: Slab::default(),
            queue: IndexedHeap::default(),
            inflation: 0.0,
            requests: 0,
            evict_first,
        }
    }

    /// The inflation value `L`.
    pub fn inflation(&self) -> f64 {
        self.inflation
    }

    /// The priority of `key` if it is resident.
    pub fn priority(&self, key: u64) -> Option<f64> {
        self.map
            .get(key)
            .map(|index| self.queue.priority(index).0 .0)
    }

    /// `L + Fr × Cost / Size` in libCacheSim's order of operations.
    #[inline]
    fn priority_of(&self, frequency: u32, size: u32) -> f64 {
        self.inflation + f64::from(frequency) * COST / f64::from(size)
    }

    /// Evicts the object of lowest rank, raising `L` to its priority; reports it unless it is
    /// `newcomer` (the object being admitted).
    #[inline]
    fn evict_lowest(&mut self, newcomer: u32, evicted: &mut Vec<Evicted>) -> bool {
        let Some((Reverse((priority, _)), victim)) = self.queue.peek() else {
            return false;
        };
        self.queue.pop();
        self.inflation = priority;
        let node = self.slab.get(victim);
        if victim != newcomer {
            evicted.push(node.evicted());
        }
        release_bytes(&mut self.used_bytes, u64::from(node.size));
        self.map.remove(node.key);
        self.slab.release(victim);
        true
    }
}

impl EvictionPolicy for Gdsf {
    fn space(&self) -> Space {
        Space {
            capacity_bytes: self.capacity,
            used_bytes: self.used_bytes,
            objects: self.queue.len(),
        }
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        self.requests += 1;
        let Some(index) = self.map.get(request.key) else {
            return false;
        };
        let node = self.slab.get_mut(index);
        node.data += 1;
        let (frequency, size) = (node.data, node.size);
        let priority = self.priority_of(frequency, size);
        self.queue
            .change_priority(index, Reverse((priority, self.requests)));
        true
    }

    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        if u64::from(request.size) > self.capacity || self.map.get(request.key).is_some() {
            return;
        }
        let size = u64::from(request.size);
        if self.evict_first {
            while self.used_bytes + size > self.capacity && self.evict_lowest(NIL, evicted) {}
        }
        let index = self.slab.alloc(request.key, request.size, 1);
        let priority = self.priority_of(1, request.size);
        self.queue.push(index, Reverse((priority, self.requests)));
        self.map.insert(request.key, index);
        self.used_bytes += size;
        while self.used_bytes > self.capacity && self.evict_lowest(index, evicted) {}
    }

    fn contains(&self, key: u64) -> Option<bool> {
        Some(self.map.get(key).is_some())
    }

    /// Drops `key` without touching `L` (libCacheSim's `remove`).
    fn remove(&mut self, key: u64) -> bool {
        let Some(index) = self.map.remove(key) else {
            return false;
        };
        self.queue.remove(index);
        release_bytes(&mut self.used_bytes, u64::from(self.slab.get(index).size));
        self.slab.release(index);
        true
    }

    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.map.prefetch(key);
    }

    /// A hit bumps the node's count and re-ranks its heap entry: load both.
    #[inline]
    fn prefetch_node(&self, key: u64) {
        if let Some(index) = self.map.get(key) {
            prefetch_read(self.slab.get(index));
            self.queue.prefetch(index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::model_check::{check_against_model, drain_keys, get, steps};
    use proptest::prelude::*;

    #[test]
    fn evicts_lowest_frequency_over_size_and_inflates_by_the_victim() {
        let mut gdsf = Gdsf::new(10);
        let mut evicted = Vec::new();
        // Priorities 1e6/4 = 250000, 1e6/2 = 500000, 1e6/4 = 250000.
        get(&mut gdsf, 1, 4, &mut evicted);
        get(&mut gdsf, 2, 2, &mut evicted);
        get(&mut gdsf, 3, 4, &mut evicted);
        // A hit doubles 1's priority: 2e6/4 = 500000.
        assert!(get(&mut gdsf, 1, 4, &mut evicted));
        assert_eq!(gdsf.priority(1), Some(500_000.0));
        // 4 (1e6/2 = 500000) overflows the cache: 3 has the lowest priority.
        assert!(!get(&mut gdsf, 4, 2, &mut evicted));
        assert_eq!(drain_keys(&mut evicted), vec![3]);
        assert_eq!(gdsf.inflation(), 250_000.0);
        // 1, 2 and 4 all have 500000 now; equal priorities leave in FIFO order of the request
        // that set them: 2 (request 2), then 1 (request 4), then 4 (request 5).
        assert!(!get(&mut gdsf, 5, 3, &mut evicted));
        assert_eq!(drain_keys(&mut evicted), vec![2]);
        assert_eq!(gdsf.inflation(), 500_000.0);
        // 5 entered at L + 1e6/3 with L = 250000: priced before the eviction raised L.
        assert_eq!(gdsf.priority(5), Some(250_000.0 + 1.0e6 / 3.0));
        assert!(!get(&mut gdsf, 6, 3, &mut evicted));
        assert_eq!(drain_keys(&mut evicted), vec![1]);
        assert_eq!(gdsf.priority(6), Some(500_000.0 + 1.0e6 / 3.0));
        assert_eq!((gdsf.len(), gdsf.used_bytes()), (3, 8));
    }

    #[test]
    fn a_new_object_of_lowest_priority_is_evicted_at_once_and_not_reported() {
        let mut gdsf = Gdsf::new(10);
        let mut evicted = Vec::new();
        get(&mut gdsf, 1, 5, &mut evicted);
        get(&mut gdsf, 2, 5, &mut evicted);
        // 3 (1e6/10 = 100000) ranks below 1 and 2 (200000): it goes in and straight out.
        assert!(!get(&mut gdsf, 3, 10, &mut evicted));
        assert!(evicted.is_empty());
        assert_eq!(gdsf.contains(3), Some(false));
        assert_eq!(gdsf.inflation(), 100_000.0);
        assert_eq!((gdsf.len(), gdsf.used_bytes()), (2, 10));
        // Larger than the cache: not even inserted.
        assert!(!get(&mut gdsf, 4, 11, &mut evicted));
        assert_eq!(gdsf.inflation(), 100_000.0);
        assert!(gdsf.remove(1));
        assert!(!gdsf.remove(1));
        assert_eq!((gdsf.len(), gdsf.used_bytes()), (1, 5));
    }

    #[test]
    fn priorities_follow_libcachesim_rounding() {
        let mut gdsf = Gdsf::new(100);
        let mut evicted = Vec::new();
        get(&mut gdsf, 1, 7, &mut evicted);
        get(&mut gdsf, 1, 7, &mut evicted);
        get(&mut gdsf, 1, 7, &mut evicted);
        let expected: f64 = 0.0 + 3.0 * 1.0e6 / 7.0;
        assert_eq!(gdsf.priority(1).map(f64::to_bits), Some(expected.to_bits()));
    }

    #[test]
    fn evicting_first_prices_the_new_object_with_the_raised_inflation() {
        let mut gdsf = Gdsf::with_evict_first(10, true);
        let mut evicted = Vec::new();
        get(&mut gdsf, 1, 5, &mut evicted);
        get(&mut gdsf, 2, 5, &mut evicted);
        // Where libCacheSim's order drops 3 at once (see above), the paper's evicts 1 and 2
        // (200000 each) and prices 3 at 200000 + 100000.
        assert!(!get(&mut gdsf, 3, 10, &mut evicted));
        assert_eq!(drain_keys(&mut evicted), vec![1, 2]);
        assert_eq!(gdsf.inflation(), 200_000.0);
        assert_eq!(gdsf.priority(3), Some(300_000.0));
        assert_eq!((gdsf.len(), gdsf.used_bytes()), (1, 10));
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(capacity in 1u64..64, steps in steps(20)) {
            check_against_model(&mut Gdsf::new(capacity), &steps)?;
        }

        #[test]
        fn evicting_first_holds_capacity_and_counts(capacity in 1u64..64, steps in steps(20)) {
            check_against_model(&mut Gdsf::with_evict_first(capacity, true), &steps)?;
        }
    }
}
