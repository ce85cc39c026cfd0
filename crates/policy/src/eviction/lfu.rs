//! Least frequently used: evict an object with the fewest hits since it was admitted, with the
//! same decisions as libCacheSim's `LFU.c` (`LFU_init`, which the `libcachesim` 0.3.5 Python
//! package's `LFU` builds; not `LFUCpp`, whose ties break differently).
//!
//! - An object enters with frequency 1; each hit adds 1. Frequency is forgotten on eviction.
//! - Ties among the least frequent objects go to the one that reached that frequency first
//!   (FIFO within a frequency: a hit appends the object to the back of its new frequency).
//!
//! O(1) per request: objects of equal frequency share a bucket (a FIFO list), and the non-empty
//! buckets form a list sorted by frequency, so the least frequent bucket is always the first.
//! libCacheSim finds the next minimum by scanning frequencies upwards; the sorted bucket list
//! gives the same minimum without the scan.

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::util::key_table::KeyTable;
use crate::util::prefetch::prefetch_read;
use crate::util::{List, Slab, NIL};

/// A set of objects with the same frequency, linked in ascending frequency order.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    frequency: u64,
    /// Front: the object that reached this frequency last.
    objects: List,
    lower: u32,
    higher: u32,
}

/// LFU over a byte capacity.
pub struct Lfu {
    map: KeyTable,
    /// Each object's data is the index of its bucket.
    slab: Slab<u32>,
    buckets: Vec<Bucket>,
    free_buckets: Vec<u32>,
    /// The least frequent non-empty bucket, or [`NIL`].
    lowest: u32,
    space: Space,
}

impl Lfu {
    /// An empty LFU cache of `capacity` bytes.
    pub fn new(capacity: u64) -> Lfu {
        Lfu {
            map: KeyTable::default(),
            slab: Slab::with_capacity(0),
            buckets: Vec::new(),
            free_buckets: Vec::new(),
            lowest: NIL,
            space: Space::new(capacity),
        }
    }

    /// The frequency of `key` if it is resident.
    pub fn frequency(&self, key: u64) -> Option<u64> {
        let index = self.map.get(key)?;
        Some(self.buckets[self.slab.get(index).data as usize].frequency)
    }

    /// A new empty bucket for `frequency`, linked between `lower` and `higher`.
    fn new_bucket(&mut self, frequency: u64, lower: u32, higher: u32) -> u32 {
        let bucket = Bucket {
            frequency,
            objects: List::default(),
            lower,
            higher,
        };
        let index = match self.free_buckets.pop() {
            Some(index) => {
                self.buckets[index as usize] = bucket;
                index
            }
            None => {
                self.buckets.push(bucket);
                (self.buckets.len() - 1) as u32
            }
        };
        if lower == NIL {
            self.lowest = index;
        } else {
            self.buckets[lower as usize].higher = index;
        }
        if higher != NIL {
            self.buckets[higher as usize].lower = index;
        }
        index
    }

    /// Unlinks `bucket` from the bucket list if it holds no object.
    fn drop_bucket_if_empty(&mut self, bucket: u32) {
        let Bucket {
            objects,
            lower,
            higher,
            ..
        } = self.buckets[bucket as usize];
        if !objects.is_empty() {
            return;
        }
        if lower == NIL {
            self.lowest = higher;
        } else {
            self.buckets[lower as usize].higher = higher;
        }
        if higher != NIL {
            self.buckets[higher as usize].lower = lower;
        }
        self.free_buckets.push(bucket);
    }

    /// Unlinks object `index` from its bucket, dropping the bucket if it empties.
    fn detach(&mut self, index: u32) {
        let bucket = self.slab.get(index).data;
        self.buckets[bucket as usize]
            .objects
            .unlink(&mut self.slab, index);
        self.drop_bucket_if_empty(bucket);
    }
}

impl EvictionPolicy for Lfu {
    fn space(&self) -> Space {
        self.space
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        let Some(index) = self.map.get(request.key) else {
            return false;
        };
        let bucket = self.slab.get(index).data;
        let Bucket {
            frequency, higher, ..
        } = self.buckets[bucket as usize];
        let target = if higher != NIL && self.buckets[higher as usize].frequency == frequency + 1 {
            higher
        } else {
            self.new_bucket(frequency + 1, bucket, higher)
        };
        self.buckets[bucket as usize]
            .objects
            .unlink(&mut self.slab, index);
        self.slab.get_mut(index).data = target;
        self.buckets[target as usize]
            .objects
            .push_front(&mut self.slab, index);
        self.drop_bucket_if_empty(bucket);
        true
    }

    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        let size = u64::from(request.size);
        if size > self.space.capacity_bytes {
            return;
        }
        while !self.space.fits(size) {
            let lowest = self.lowest;
            // Bytes are only held by objects, so an over-full cache has a lowest bucket.
            let Some(victim) = self
                .buckets
                .get_mut(lowest as usize)
                .and_then(|bucket| bucket.objects.pop_back(&mut self.slab))
            else {
                break;
            };
            self.drop_bucket_if_empty(lowest);
            let node = self.slab.get(victim);
            evicted.push(Evicted {
                key: node.key,
                size: node.size,
            });
            self.space.release(node.size);
            self.map.remove(node.key);
            self.slab.release(victim);
        }
        let lowest = self.lowest;
        let bucket = if lowest != NIL && self.buckets[lowest as usize].frequency == 1 {
            lowest
        } else {
            self.new_bucket(1, NIL, lowest)
        };
        let index = self.slab.alloc(request.key, request.size, bucket);
        self.buckets[bucket as usize]
            .objects
            .push_front(&mut self.slab, index);
        self.map.insert(request.key, index);
        self.space.charge(request.size);
    }

    fn contains(&self, key: u64) -> Option<bool> {
        Some(self.map.get(key).is_some())
    }

    fn remove(&mut self, key: u64) -> bool {
        let Some(index) = self.map.remove(key) else {
            return false;
        };
        self.detach(index);
        self.space.release(self.slab.get(index).size);
        self.slab.release(index);
        true
    }

    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.map.prefetch(key);
    }

    #[inline]
    fn prefetch_node(&self, key: u64) {
        if let Some(index) = self.map.get(key) {
            prefetch_read(self.slab.get(index));
        }
    }

    /// The oldest object of the lowest bucket goes next: load its neighbour and table slot.
    #[inline]
    fn prefetch_victims(&self) {
        let Some(bucket) = self.buckets.get(self.lowest as usize) else {
            return;
        };
        let oldest = bucket.objects.tail;
        if oldest != NIL {
            let before = self.slab.prev(oldest);
            if before != NIL {
                prefetch_read(self.slab.get(before));
            }
            self.map.prefetch(self.slab.get(oldest).key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::model_check::{check_against_model, steps};
    use proptest::prelude::*;

    fn get(lfu: &mut Lfu, key: u64, size: u32, evicted: &mut Vec<Evicted>) -> bool {
        lfu.get(&Request::new(key, size), evicted)
    }

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
