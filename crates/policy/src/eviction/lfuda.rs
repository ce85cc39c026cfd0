//! LFU with Dynamic Aging (Arlitt, Cherkasova, Dilley, Friedrich and Jin, "Evaluating Content
//! Management Techniques for Web Proxy Caches", ACM SIGMETRICS PER 27(4), 2000, the LFU-DA
//! policy it evaluates): each object has the key `K = C × F + L` (with `C = 1`: `F + L`), where
//! `F` counts its requests and the cache age `L` is set to the key of every object evicted; the
//! object of smallest key is evicted. Aging lets objects that were popular once fall out after
//! they stop being requested, which plain LFU never does.
//!
//! Same decisions as libCacheSim's `LFUDA.c` (the `libcachesim` 0.3.5 package's `LFUDA`),
//! which departs from the paper in these places, all of which change which requests hit:
//! - A hit adds the current age to the key (`K ← K + L`) instead of recomputing it from an
//!   incremented count (`K ← (F + 1) + L`). Before the first eviction `L` is 0, so hits leave
//!   keys unchanged (they only move the object behind its equals).
//! - A new object's key is `L + 1` (the paper's `F = 1`); `L` becomes the key of the bucket an
//!   eviction takes from (1 for the first eviction).
//! - Equal keys leave in FIFO order of reaching that key (a hit that keeps the key moves the
//!   object to the back).
//! - The smallest key is tracked as a pointer that only moves up: when its bucket empties, it
//!   moves to the smallest non-empty key above it. A hit on the last object of the smallest
//!   key moves that object before the pointer moves, so if every other object has a key above
//!   the object's new key, the pointer skips over it: the object cannot be evicted until its
//!   next hit lifts it above the pointer again.
//! - When an eviction finds the pointer's bucket empty (every object emptied out, or only
//!   objects skipped as above remain), libCacheSim would dereference a null object (a crash).
//!   Here the pointer first moves to the smallest non-empty key above it, and failing that the
//!   smallest non-empty key overall is evicted without lowering `L`.
//! - Since a hit adds the whole age and the age follows the keys hits create, keys can grow
//!   geometrically: on a Zipf(1.0) trace with log-normal sizes at 1% of the working set's
//!   bytes, they pass 2^63 (libCacheSim's `int64_t`) between 130,000 and 140,000 requests.
//!   libCacheSim's search for the next non-empty key (below) has by then tested some 10^15
//!   integers (10^10 by 70,000 requests), so that run never finishes. Here keys saturate at
//!   `u64::MAX`; results past that point have no libCacheSim counterpart.
//!
//! `hit-key=count-plus-age` ([`HitKey::CountPlusAge`]) follows the paper instead: a hit sets
//! `K = F + L` from the object's request count, the smallest key is found exactly, and `L`
//! changes only when an object is evicted (to that object's key). Equal keys still leave in
//! FIFO order of reaching them, and a new object's key is still `L + 1`.
//!
//! libCacheSim finds the next non-empty key by testing every integer above the old one; a
//! lazy min-heap of the keys that buckets were created with gives the same key in O(log n).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::util::key_table::KeyTable;
use crate::util::prefetch::prefetch_read;
use crate::util::{List, Slab, NIL};

/// How a hit sets an object's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HitKey {
    /// libCacheSim's `K ← K + L`, with its upward-only pointer to the smallest key serving as
    /// `L` (the default).
    PlusAge,
    /// The paper's `K ← F + L`, with an exact smallest key and `L` set only by evictions.
    CountPlusAge,
}

/// A resident object's place.
#[derive(Clone, Copy, Debug)]
struct Placement {
    bucket: u32,
    /// `F`: requests since insertion (read only by [`HitKey::CountPlusAge`]).
    requests: u32,
}

/// The objects that share one key.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    key: u64,
    /// Back: the object that reached this key first (the next victim among them).
    objects: List,
}

/// LFU-DA over a byte capacity.
pub struct Lfuda {
    space: Space,
    map: KeyTable,
    slab: Slab<Placement>,
    buckets: Vec<Bucket>,
    free_buckets: Vec<u32>,
    /// Key → bucket, for non-empty buckets only.
    bucket_of: KeyTable,
    /// Keys buckets were created with, smallest first; stale entries (the bucket emptied, or
    /// with [`HitKey::PlusAge`] the key fell to or below the age) are dropped when they reach
    /// the top.
    created_keys: BinaryHeap<Reverse<u64>>,
    /// `L`. With [`HitKey::PlusAge`] it is libCacheSim's `min_freq`, the key evictions take
    /// from (0 until the first eviction, when evictions take from key 1).
    age: u64,
    hit_key: HitKey,
}

impl Lfuda {
    /// An empty LFU-DA cache of `capacity` bytes with libCacheSim's decisions.
    pub fn new(capacity: u64) -> Lfuda {
        Lfuda::with_hit_key(capacity, HitKey::PlusAge)
    }

    /// An empty LFU-DA cache of `capacity` bytes whose hits set keys as `hit_key` says.
    pub fn with_hit_key(capacity: u64, hit_key: HitKey) -> Lfuda {
        Lfuda {
            space: Space::new(capacity),
            map: KeyTable::default(),
            slab: Slab::with_capacity(0),
            buckets: Vec::new(),
            free_buckets: Vec::new(),
            bucket_of: KeyTable::default(),
            created_keys: BinaryHeap::new(),
            age: 0,
            hit_key,
        }
    }

    /// The cache age `L`.
    pub fn age(&self) -> u64 {
        self.age
    }

    /// The key of `key` if it is resident.
    pub fn key_of(&self, key: u64) -> Option<u64> {
        let index = self.map.get(key)?;
        Some(self.buckets[self.slab.get(index).data.bucket as usize].key)
    }

    /// The bucket of `key`, created empty if there is none.
    fn bucket(&mut self, key: u64) -> u32 {
        if let Some(bucket) = self.bucket_of.get(key) {
            return bucket;
        }
        let bucket = Bucket {
            key,
            objects: List::default(),
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
        self.bucket_of.insert(key, index);
        self.created_keys.push(Reverse(key));
        index
    }

    /// Appends object `index` to `bucket` (as the last to reach its key).
    #[inline]
    fn append(&mut self, bucket: u32, index: u32) {
        self.slab.get_mut(index).data.bucket = bucket;
        self.buckets[bucket as usize]
            .objects
            .push_front(&mut self.slab, index);
    }

    /// Unlinks object `index` from its bucket, dropping the bucket if it empties; returns the
    /// bucket's key and whether it emptied.
    #[inline]
    fn detach(&mut self, index: u32) -> (u64, bool) {
        let bucket = self.slab.get(index).data.bucket;
        let entry = &mut self.buckets[bucket as usize];
        entry.objects.unlink(&mut self.slab, index);
        let key = entry.key;
        let emptied = entry.objects.is_empty();
        if emptied {
            self.bucket_of.remove(key);
            self.free_buckets.push(bucket);
        }
        (key, emptied)
    }

    /// libCacheSim's `update_min_freq`: the age moves to the smallest non-empty key above it,
    /// or stays if there is none.
    fn raise_age(&mut self) {
        while let Some(&Reverse(key)) = self.created_keys.peek() {
            if key > self.age && self.bucket_of.get(key).is_some() {
                self.age = key;
                return;
            }
            self.created_keys.pop();
        }
    }

    /// The non-empty bucket of smallest key.
    fn smallest_bucket(&mut self) -> Option<u32> {
        while let Some(&Reverse(key)) = self.created_keys.peek() {
            if let Some(bucket) = self.bucket_of.get(key) {
                return Some(bucket);
            }
            self.created_keys.pop();
        }
        None
    }

    /// The bucket the next eviction takes from.
    fn victim_bucket(&mut self) -> Option<u32> {
        if self.hit_key == HitKey::CountPlusAge {
            return self.smallest_bucket();
        }
        if let Some(bucket) = self.bucket_of.get(self.age.max(1)) {
            return Some(bucket);
        }
        // libCacheSim crashes here; see the module doc.
        self.raise_age();
        if let Some(bucket) = self.bucket_of.get(self.age.max(1)) {
            return Some(bucket);
        }
        (0..self.buckets.len() as u32)
            .filter(|&bucket| !self.buckets[bucket as usize].objects.is_empty())
            .min_by_key(|&bucket| self.buckets[bucket as usize].key)
    }

    /// Evicts the object that reached the smallest key first.
    fn evict(&mut self, evicted: &mut Vec<Evicted>) -> bool {
        let Some(bucket) = self.victim_bucket() else {
            return false;
        };
        let victim = self.buckets[bucket as usize].objects.tail;
        let (key, emptied) = self.detach(victim);
        match self.hit_key {
            HitKey::PlusAge => {
                self.age = self.age.max(key);
                if emptied {
                    self.raise_age();
                }
            }
            HitKey::CountPlusAge => self.age = key,
        }
        let node = self.slab.get(victim);
        evicted.push(node.evicted());
        self.space.release(node.size);
        self.map.remove(node.key);
        self.slab.release(victim);
        true
    }
}

impl EvictionPolicy for Lfuda {
    fn space(&self) -> Space {
        self.space
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        let Some(index) = self.map.get(request.key) else {
            return false;
        };
        let Placement { bucket, requests } = self.slab.get(index).data;
        let key = self.buckets[bucket as usize].key;
        if self.hit_key == HitKey::CountPlusAge {
            let requests = requests.saturating_add(1);
            self.slab.get_mut(index).data.requests = requests;
            self.detach(index);
            let target = self.bucket(u64::from(requests).saturating_add(self.age));
            self.append(target, index);
            return true;
        }
        if self.age == 0 {
            // The key stays; the object only moves behind its equals.
            let objects = &mut self.buckets[bucket as usize].objects;
            objects.move_to_front(&mut self.slab, index);
            return true;
        }
        let new_key = key.saturating_add(self.age);
        let (_, emptied) = self.detach(index);
        // Before the object joins its new key, as in libCacheSim (see the module doc).
        if emptied && key == self.age {
            self.raise_age();
        }
        let target = self.bucket(new_key);
        self.append(target, index);
        true
    }

    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        let size = u64::from(request.size);
        if size > self.space.capacity_bytes || self.map.get(request.key).is_some() {
            return;
        }
        while !self.space.fits(size) {
            if !self.evict(evicted) {
                break;
            }
        }
        let placement = Placement {
            bucket: NIL,
            requests: 1,
        };
        let index = self.slab.alloc(request.key, request.size, placement);
        let bucket = self.bucket(self.age.saturating_add(1));
        self.append(bucket, index);
        self.map.insert(request.key, index);
        self.space.charge(request.size);
    }

    fn contains(&self, key: u64) -> Option<bool> {
        Some(self.map.get(key).is_some())
    }

    /// Drops `key`; with [`HitKey::PlusAge`] the age moves on if it emptied the smallest key
    /// (libCacheSim's `LFUDA_remove`).
    fn remove(&mut self, key: u64) -> bool {
        let Some(index) = self.map.remove(key) else {
            return false;
        };
        let (bucket_key, emptied) = self.detach(index);
        if self.hit_key == HitKey::PlusAge && emptied && bucket_key == self.age {
            self.raise_age();
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::model_check::{check_against_model, drain_keys, get, steps};
    use proptest::prelude::*;

    #[test]
    fn before_the_first_eviction_hits_only_reorder() {
        let mut cache = Lfuda::new(3);
        let mut evicted = Vec::new();
        for key in [1, 2, 3, 1, 1, 2] {
            get(&mut cache, key, 1, &mut evicted);
        }
        assert_eq!(cache.key_of(1), Some(1), "L = 0: a hit adds nothing");
        // All at key 1: the first to reach it, counting moves behind on hits, is 3.
        get(&mut cache, 4, 1, &mut evicted);
        assert_eq!(drain_keys(&mut evicted), vec![3]);
        assert_eq!(cache.age(), 1);
        assert_eq!(cache.key_of(4), Some(2), "L + 1");
    }

    #[test]
    fn hits_add_the_age_and_evictions_raise_it() {
        let mut cache = Lfuda::new(3);
        let mut evicted = Vec::new();
        for key in [1, 2, 3, 4] {
            get(&mut cache, key, 1, &mut evicted);
        }
        // 1 was evicted at key 1; L = 1. 2 and 3 are at 1, 4 at 2.
        assert_eq!(drain_keys(&mut evicted), vec![1]);
        assert!(get(&mut cache, 2, 1, &mut evicted));
        assert_eq!(cache.key_of(2), Some(2));
        // 3 is alone at key 1 and goes next; the age moves to 2.
        get(&mut cache, 5, 1, &mut evicted);
        assert_eq!(drain_keys(&mut evicted), vec![3]);
        assert_eq!(cache.age(), 2);
        assert_eq!(cache.key_of(5), Some(3));
        // A hit on 5 gives 3 + 2 = 5; 4 and 2 share key 2 and leave in the order they got there.
        assert!(get(&mut cache, 5, 1, &mut evicted));
        assert_eq!(cache.key_of(5), Some(5));
        get(&mut cache, 6, 2, &mut evicted);
        assert_eq!(drain_keys(&mut evicted), vec![4, 2]);
        assert_eq!(cache.age(), 5, "the next key up after 2 emptied is 5's");
    }

    #[test]
    fn the_last_hit_at_the_smallest_key_can_be_skipped_by_the_age() {
        let mut cache = Lfuda::new(4);
        let mut evicted = Vec::new();
        for key in [1, 2, 3, 4, 5] {
            get(&mut cache, key, 1, &mut evicted);
        }
        // L = 1 after evicting 1: 2, 3 and 4 are at key 1, 5 at 2. Lift 4 and 5 to 3.
        assert_eq!(drain_keys(&mut evicted), vec![1]);
        for key in [4, 4, 5] {
            assert!(get(&mut cache, key, 1, &mut evicted));
        }
        get(&mut cache, 6, 1, &mut evicted);
        assert_eq!(drain_keys(&mut evicted), vec![2]);
        assert!(get(&mut cache, 6, 1, &mut evicted));
        assert_eq!(cache.key_of(6), Some(3));
        // 3 is alone at the smallest key, 1, and every other object is at 3. Its hit gives it
        // 1 + 1 = 2, but the age moves first, to 3: 3 is left below it.
        assert!(get(&mut cache, 3, 1, &mut evicted));
        assert_eq!((cache.age(), cache.key_of(3)), (3, Some(2)));
        get(&mut cache, 7, 1, &mut evicted);
        assert_eq!(
            drain_keys(&mut evicted),
            vec![4],
            "3 has the smallest key, yet 4 goes"
        );
        // Its next hit lifts it above the age again: 2 + 3 = 5.
        assert!(get(&mut cache, 3, 1, &mut evicted));
        assert_eq!(cache.key_of(3), Some(5));
    }

    #[test]
    fn an_emptied_cache_recovers_where_libcachesim_would_crash() {
        let mut cache = Lfuda::new(4);
        let mut evicted = Vec::new();
        for key in [1, 2, 3, 4, 5] {
            get(&mut cache, key, 1, &mut evicted);
        }
        evicted.clear();
        // A 4-byte object empties the cache; the age stays at the last bucket's key.
        get(&mut cache, 6, 4, &mut evicted);
        assert_eq!(drain_keys(&mut evicted), vec![2, 3, 4, 5]);
        let age = cache.age();
        assert_eq!(cache.key_of(6), Some(age + 1));
        // The age's bucket is empty now: the next eviction finds 6 above it.
        get(&mut cache, 7, 1, &mut evicted);
        assert_eq!(drain_keys(&mut evicted), vec![6]);
        assert_eq!(cache.age(), age + 1);
        assert!(cache.remove(7));
        assert!(!cache.remove(7));
        assert!(cache.is_empty());
        assert!(
            !get(&mut cache, 8, 5, &mut evicted),
            "larger than the cache"
        );
        assert!(cache.is_empty());
    }

    #[test]
    fn the_paper_keys_count_requests_and_age_only_on_eviction() {
        let mut cache = Lfuda::with_hit_key(3, HitKey::CountPlusAge);
        let mut evicted = Vec::new();
        for key in [1, 2, 3, 1, 1, 2] {
            get(&mut cache, key, 1, &mut evicted);
        }
        // F + L with L = 0: 1 has 3 requests, 2 has 2, 3 has 1.
        assert_eq!(
            (cache.key_of(1), cache.key_of(2), cache.key_of(3)),
            (Some(3), Some(2), Some(1))
        );
        get(&mut cache, 4, 1, &mut evicted);
        assert_eq!(drain_keys(&mut evicted), vec![3]);
        assert_eq!((cache.age(), cache.key_of(4)), (1, Some(2)));
        // 2 and 4 share key 2; 2 got there first. L = 2 afterwards.
        get(&mut cache, 5, 1, &mut evicted);
        assert_eq!(drain_keys(&mut evicted), vec![2]);
        assert_eq!(cache.age(), 2);
        // A hit on 4 (F = 2) gives 2 + 2 = 4, above 1's 3; emptying key 2 leaves L alone.
        assert!(get(&mut cache, 4, 1, &mut evicted));
        assert_eq!((cache.key_of(4), cache.age()), (Some(4), 2));
        // The smallest key is 5's 3 (L + 1 = 3, reached after 1's 3): 1 goes first.
        get(&mut cache, 6, 1, &mut evicted);
        assert_eq!(drain_keys(&mut evicted), vec![1]);
        assert_eq!(cache.age(), 3);
        assert!(cache.remove(5));
        assert_eq!((cache.len(), cache.used_bytes()), (2, 2));
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(capacity in 1u64..64, steps in steps(20)) {
            check_against_model(&mut Lfuda::new(capacity), &steps)?;
        }

        #[test]
        fn the_paper_keys_hold_capacity_and_counts(capacity in 1u64..64, steps in steps(20)) {
            check_against_model(&mut Lfuda::with_hit_key(capacity, HitKey::CountPlusAge), &steps)?;
        }
    }
}
