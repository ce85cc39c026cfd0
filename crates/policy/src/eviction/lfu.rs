//! Least frequently used: evict an object with the fewest hits since it was admitted, with the
//! same decisions as libCacheSim's `LFU.c` (`LFU_init`, which the `libcachesim` 0.3.5 Python
//! package's `LFU` builds; not `LFUCpp`, whose ties break differently).
//!
//! - An object enters with frequency 1; each hit adds 1. Frequency is forgotten on eviction.
//! - Ties among the least frequent objects go to the one that reached that frequency first
//!   (FIFO within a frequency: a hit appends the object to the back of its new frequency).
//!
//! O(1) per request: the objects are in [`FrequencyBuckets`] (shared with LeCaR's and Cacheus'
//! LFU experts), whose buckets form a list sorted by frequency, so the least frequent bucket is
//! always the first. libCacheSim finds the next minimum by scanning frequencies upwards; the
//! sorted bucket list gives the same minimum without the scan.

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::util::frequency::FrequencyBuckets;
use crate::util::key_table::KeyTable;

/// LFU over a byte capacity.
pub struct Lfu {
    /// Each resident's slot in `objects`.
    map: KeyTable,
    objects: FrequencyBuckets,
    space: Space,
}

impl Lfu {
    /// An empty LFU cache of `capacity` bytes.
    pub fn new(capacity: u64) -> Lfu {
        Lfu {
            map: KeyTable::default(),
            objects: FrequencyBuckets::default(),
            space: Space::new(capacity),
        }
    }

    /// The frequency of `key` if it is resident.
    pub fn frequency(&self, key: u64) -> Option<u64> {
        Some(self.objects.frequency(self.map.get(key)?))
    }
}

impl EvictionPolicy for Lfu {
    fn space(&self) -> Space {
        self.space
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        let Some(slot) = self.map.get(request.key) else {
            return false;
        };
        self.objects.increment(slot);
        true
    }

    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        let size = u64::from(request.size);
        if size > self.space.capacity_bytes {
            return;
        }
        while !self.space.fits(size) {
            // Bytes are only held by objects, so an over-full cache has a least frequent one.
            let Some(victim) = self.objects.least_frequent_earliest() else {
                break;
            };
            let (key, size) = self.objects.object(victim);
            self.objects.remove_new(victim);
            evicted.push(Evicted { key, size });
            self.space.release(size);
            self.map.remove(key);
        }
        let slot = self.objects.insert_new(request.key, request.size, 1);
        self.map.insert(request.key, slot);
        self.space.charge(request.size);
    }

    fn contains(&self, key: u64) -> Option<bool> {
        Some(self.map.get(key).is_some())
    }

    fn remove(&mut self, key: u64) -> bool {
        let Some(slot) = self.map.remove(key) else {
            return false;
        };
        self.space.release(self.objects.object(slot).1);
        self.objects.remove_new(slot);
        true
    }

    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.map.prefetch(key);
    }

    #[inline]
    fn prefetch_node(&self, key: u64) {
        if let Some(slot) = self.map.get(key) {
            self.objects.prefetch(slot);
        }
    }

    /// The oldest object of the lowest bucket goes next: load it, its neighbour and its table
    /// slot.
    #[inline]
    fn prefetch_victims(&self) {
        if let Some(victim) = self.objects.prefetch_least_frequent_earliest() {
            self.map.prefetch(self.objects.object(victim).0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::model_check::{check_against_model, get, steps};
    use proptest::prelude::*;

    #[test]
    fn evicts_least_frequent_and_breaks_ties_by_arrival_at_that_frequency() {
        let mut lfu = Lfu::new(3);
        let mut evicted = Vec::new();
        for key in [1, 2, 3] {
            assert!(!get(&mut lfu, key, 1, &mut evicted));
        }
        // 2 reaches frequency 2 before 1 does; 3 stays at 1.
        assert!(get(&mut lfu, 2, 1, &mut evicted));
        assert!(get(&mut lfu, 1, 1, &mut evicted));
        assert_eq!(lfu.frequency(1), Some(2));
        assert!(!get(&mut lfu, 4, 1, &mut evicted));
        assert_eq!(
            evicted,
            vec![Evicted { key: 3, size: 1 }],
            "3 is the only one at 1"
        );
        evicted.clear();
        // 4 (frequency 1) is the least frequent now.
        assert!(!get(&mut lfu, 5, 1, &mut evicted));
        assert_eq!(evicted, vec![Evicted { key: 4, size: 1 }]);
        evicted.clear();
        // 5 was just admitted at 1: it goes next, then among the frequency-2 pair the one that
        // got there first (2), then 1.
        assert!(!get(&mut lfu, 6, 3, &mut evicted));
        assert_eq!(
            evicted,
            vec![
                Evicted { key: 5, size: 1 },
                Evicted { key: 2, size: 1 },
                Evicted { key: 1, size: 1 }
            ]
        );
        assert_eq!((lfu.len(), lfu.used_bytes()), (1, 3));
    }

    #[test]
    fn frequency_is_forgotten_on_eviction_and_remove_works() {
        let mut lfu = Lfu::new(2);
        let mut evicted = Vec::new();
        for key in [1, 1, 1, 2, 3] {
            get(&mut lfu, key, 1, &mut evicted);
        }
        assert_eq!(evicted, vec![Evicted { key: 2, size: 1 }]);
        assert_eq!(lfu.frequency(1), Some(3));
        assert!(lfu.remove(1));
        assert!(!lfu.remove(1));
        assert_eq!(lfu.frequency(1), None);
        assert!(!get(&mut lfu, 1, 1, &mut evicted));
        assert_eq!(lfu.frequency(1), Some(1), "re-admitted at frequency 1");
        assert!(!get(&mut lfu, 9, 5, &mut evicted), "larger than the cache");
        assert_eq!((lfu.len(), lfu.used_bytes()), (2, 2));
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(capacity in 1u64..64, steps in steps(20)) {
            check_against_model(&mut Lfu::new(capacity), &steps)?;
        }
    }
}
