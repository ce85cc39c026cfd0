//! LRU-K (O'Neil, O'Neil & Weikum, "The LRU-K Page Replacement Algorithm for Database Disk
//! Buffering", SIGMOD'93, §2), over byte sizes, with the same decisions as libCacheSim's
//! `LRU_K.cpp` and its default `k=2`.
//!
//! Each resident object keeps the times of its last K references, time being the number of
//! requests served so far. The victim is the object of largest backward K-distance: first any
//! object with fewer than K references (infinite distance), else the one whose K-th most recent
//! reference is oldest. With K = 1 this is LRU.
//!
//! Where libCacheSim departs from the paper, and so do we by default:
//! - Among objects with fewer than K references, the oldest admitted goes first (FIFO): hits
//!   that leave an object short of K references do not reorder it. The paper leaves this choice
//!   to a subsidiary policy and names classical LRU as an example (§2);
//!   `subsidiary=lru` evicts the least recently referenced of them instead (the two agree for
//!   K ≤ 2, where any hit completes an object's K references).
//! - History lives only as long as the object is resident: an evicted object's references are
//!   forgotten, and it re-enters with one. The paper keeps a page's history for a Retained
//!   Information Period after its last reference, resident or not (§2.1.2), so that a page
//!   referenced again soon is judged by all its references at once. `retained-period=N` keeps
//!   an evicted object's history while its last reference is at most N requests old, and an
//!   object admitted again resumes it (only an admitted reference is recorded).
//! - Every request is a reference: there is no Correlated Reference Period (§2.1.1) that would
//!   fold a burst of references into one and keep a page just referenced from being evicted.
//! - The clock counts every request, hit or miss, admitted or not (libCacheSim's `n_req`).
//! - The cache evicts until the new object fits its bytes, where the paper replaces one page.
//!
//! Reference times are distinct (one per request), so no two objects tie on their K-th most
//! recent reference and the eviction order is fully determined. Per request: O(1) for the list
//! of objects short of K references and for retained histories, O(log n) for the heap of the
//! others.

use std::cmp::Reverse;

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::error::PolicyError;
use crate::util::heap::IndexedHeap;
use crate::util::key_table::KeyTable;
use crate::util::prefetch::prefetch_read;
use crate::util::{List, Slab, NIL};

/// libCacheSim's default K.
pub const K: usize = 2;
/// Our bound on K (libCacheSim has none): each object keeps K times.
pub const MAX_K: usize = 64;

/// How objects short of K references (infinite backward K-distance) are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subsidiary {
    /// By admission, as libCacheSim.
    Fifo,
    /// By last reference, the paper's example.
    Lru,
}

/// Where an object's last K reference times are in [`LruK::times`], and whether it is resident.
#[derive(Clone, Copy, Debug)]
struct History {
    /// References recorded, at most K.
    references: u32,
    /// Once K are recorded, the ring position of the oldest (the K-th most recent).
    oldest: u32,
    /// Evicted, the history kept for the retained period.
    retained: bool,
}

const NEW_HISTORY: History = History {
    references: 0,
    oldest: 0,
    retained: false,
};

/// LRU-K over a byte capacity.
pub struct LruK {
    k: usize,
    subsidiary: Subsidiary,
    /// Requests an evicted object's history outlives its last reference; 0: none.
    retained_period: u64,
    /// Resident objects and retained histories (a key is never both).
    map: KeyTable,
    slab: Slab<History>,
    /// Objects with fewer than K references; the back is evicted first.
    short: List,
    /// Histories of evicted objects; front is the most recently evicted.
    retained: List,
    /// Objects with K references, by their K-th most recent reference time, oldest on top
    /// (reversed times: no two are equal, so the order is exact).
    by_kth_reference: IndexedHeap<Reverse<u64>>,
    /// K reference times per slab slot, a ring each.
    times: Vec<u64>,
    /// Requests seen so far, the time of the current one.
    clock: u64,
    space: Space,
}

impl LruK {
    /// An empty LRU-2 cache of `capacity` bytes, as libCacheSim's.
    pub fn new(capacity: u64) -> LruK {
        LruK::build(capacity, K, Subsidiary::Fifo, 0)
    }

    /// An empty LRU-K cache of `capacity` bytes as libCacheSim's, K from 1 to [`MAX_K`].
    pub fn with_k(capacity: u64, k: usize) -> Result<LruK, PolicyError> {
        LruK::with_params(capacity, k, Subsidiary::Fifo, 0)
    }

    /// An empty LRU-K cache of `capacity` bytes, K from 1 to [`MAX_K`], ordering objects short
    /// of K references by `subsidiary`, and keeping evicted objects' histories for
    /// `retained_period` requests after their last reference.
    pub fn with_params(
        capacity: u64,
        k: usize,
        subsidiary: Subsidiary,
        retained_period: u64,
    ) -> Result<LruK, PolicyError> {
        if !(1..=MAX_K).contains(&k) {
            return Err(PolicyError::refused(
                "lru-k",
                format!("k must be between 1 and {MAX_K}, got {k}"),
            ));
        }
        Ok(LruK::build(capacity, k, subsidiary, retained_period))
    }

    fn build(capacity: u64, k: usize, subsidiary: Subsidiary, retained_period: u64) -> LruK {
        LruK {
            k,
            subsidiary,
            retained_period,
            map: KeyTable::default(),
            slab: Slab::with_capacity(0),
            short: List::default(),
            retained: List::default(),
            by_kth_reference: IndexedHeap::default(),
            times: Vec::new(),
            clock: 0,
            space: Space::new(capacity),
        }
    }

    /// Records a reference at the current time to `index`; returns the K-th most recent
    /// reference time once there are K.
    #[inline]
    fn record(&mut self, index: u32) -> Option<u64> {
        let base = index as usize * self.k;
        let history = &mut self.slab.get_mut(index).data;
        if (history.references as usize) < self.k {
            self.times[base + history.references as usize] = self.clock;
            history.references += 1;
            return (history.references as usize == self.k).then(|| self.times[base]);
        }
        // Full ring: the newest overwrites the oldest, and the next one is now the oldest.
        self.times[base + history.oldest as usize] = self.clock;
        history.oldest = (history.oldest + 1) % self.k as u32;
        Some(self.times[base + history.oldest as usize])
    }

    /// The time of the most recent reference recorded for `index`.
    #[inline]
    fn last_reference(&self, index: u32) -> u64 {
        let history = self.slab.get(index).data;
        let newest = if (history.references as usize) < self.k {
            history.references as usize - 1
        } else {
            (history.oldest as usize + self.k - 1) % self.k
        };
        self.times[index as usize * self.k + newest]
    }

    /// Whether a history whose last reference was at `time` has outlived the retained period.
    #[inline]
    fn expired(&self, time: u64) -> bool {
        self.clock - time > self.retained_period
    }

    /// The heap's priority for a K-th most recent reference at `time`: older is higher.
    #[inline]
    fn priority(time: u64) -> Reverse<u64> {
        Reverse(time)
    }

    /// Evicts the object of largest backward K-distance: the back of the objects short of K
    /// references, else the one whose K-th most recent reference is oldest. Its history is
    /// retained or dropped.
    fn evict(&mut self) -> Evicted {
        let victim = match self.short.tail {
            NIL => self
                .by_kth_reference
                .pop()
                .expect("eviction from an empty cache"),
            tail => {
                self.short.unlink(&mut self.slab, tail);
                tail
            }
        };
        let node = self.slab.get(victim);
        let gone = node.evicted();
        self.space.release(gone.size);
        if self.retained_period > 0 {
            self.slab.get_mut(victim).data.retained = true;
            self.retained.push_front(&mut self.slab, victim);
        } else {
            self.forget(victim);
        }
        gone
    }

    /// Drops the unlinked node `index` and its key.
    #[inline]
    fn forget(&mut self, index: u32) {
        self.map.remove(self.slab.get(index).key);
        self.slab.release(index);
    }

    /// Drops retained histories from the oldest evicted while their last reference is older
    /// than the retained period. One evicted after a last reference inside the period stops the
    /// walk, but then so was every one behind it (eviction follows the last reference), so the
    /// list holds only histories evicted within the period; expired ones among them are caught
    /// when their key comes back.
    fn expire_retained(&mut self) {
        while self.retained.tail != NIL && self.expired(self.last_reference(self.retained.tail)) {
            let oldest = self.retained.tail;
            self.retained.unlink(&mut self.slab, oldest);
            self.forget(oldest);
        }
    }

    /// Takes the retained history `index` out of the list; returns it if it is still within the
    /// retained period, else drops it.
    fn take_retained(&mut self, index: u32) -> Option<u32> {
        self.retained.unlink(&mut self.slab, index);
        if self.expired(self.last_reference(index)) {
            self.forget(index);
            None
        } else {
            Some(index)
        }
    }
}

impl EvictionPolicy for LruK {
    fn space(&self) -> Space {
        self.space
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        self.clock += 1;
        let Some(index) = self.map.get(request.key) else {
            return false;
        };
        if self.slab.get(index).data.retained {
            return false;
        }
        let was_short = !self.by_kth_reference.contains(index);
        match self.record(index) {
            Some(kth) if was_short => {
                self.short.unlink(&mut self.slab, index);
                self.by_kth_reference.push(index, Self::priority(kth));
            }
            Some(kth) => self
                .by_kth_reference
                .change_priority(index, Self::priority(kth)),
            None if self.subsidiary == Subsidiary::Lru => {
                self.short.move_to_front(&mut self.slab, index);
            }
            None => {}
        }
        true
    }

    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        let (key, size) = (request.key, request.size);
        if u64::from(size) > self.space.capacity_bytes {
            return;
        }
        let resumed = match self.map.get(key) {
            Some(index) if self.slab.get(index).data.retained => self.take_retained(index),
            Some(_) => return,
            None => None,
        };
        while !self.space.fits(u64::from(size)) {
            evicted.push(self.evict());
        }
        self.expire_retained();
        let index = match resumed {
            Some(index) => {
                let node = self.slab.get_mut(index);
                node.size = size;
                node.data.retained = false;
                index
            }
            None => {
                let index = self.slab.alloc(key, size, NEW_HISTORY);
                let end = (index as usize + 1) * self.k;
                if self.times.len() < end {
                    self.times.resize(end, 0);
                }
                self.map.insert(key, index);
                index
            }
        };
        self.space.charge(size);
        match self.record(index) {
            Some(kth) => self.by_kth_reference.push(index, Self::priority(kth)),
            None => self.short.push_front(&mut self.slab, index),
        }
    }

    /// Drops `key`, resident or retained; returns whether it was resident.
    fn remove(&mut self, key: u64) -> bool {
        let Some(index) = self.map.get(key) else {
            return false;
        };
        if self.slab.get(index).data.retained {
            self.retained.unlink(&mut self.slab, index);
            self.forget(index);
            return false;
        }
        if !self.by_kth_reference.remove(index) {
            self.short.unlink(&mut self.slab, index);
        }
        self.space.release(self.slab.get(index).size);
        self.forget(index);
        true
    }

    #[inline]
    fn contains(&self, key: u64) -> Option<bool> {
        Some(
            self.map
                .get(key)
                .is_some_and(|index| !self.slab.get(index).data.retained),
        )
    }

    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.map.prefetch(key);
    }

    /// A hit touches the node, its reference times and its heap entry.
    #[inline]
    fn prefetch_node(&self, key: u64) {
        if let Some(index) = self.map.get(key) {
            prefetch_read(self.slab.get(index));
            prefetch_read(&self.times[index as usize * self.k]);
            self.by_kth_reference.prefetch(index);
        }
    }

    #[inline]
    fn prefetch_victims(&self) {
        if self.short.tail != NIL {
            let before = self.slab.prev(self.short.tail);
            if before != NIL {
                prefetch_read(self.slab.get(before));
            }
            self.map.prefetch(self.slab.get(self.short.tail).key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::model_check::{check_against_model, steps};
    use proptest::prelude::*;

    fn get(cache: &mut LruK, key: u64, evicted: &mut Vec<Evicted>) -> bool {
        cache.get(&Request::new(key, 1), evicted)
    }

    fn evictions(cache: &mut LruK, keys: &[u64]) -> Vec<u64> {
        let mut evicted = Vec::new();
        for &key in keys {
            get(cache, key, &mut evicted);
        }
        evicted.iter().map(|gone| gone.key).collect()
    }

    #[test]
    fn objects_short_of_k_references_go_first_in_admission_order() {
        let mut cache = LruK::new(3);
        // 1 reaches two references; 2 and 3 have one, and 2 was admitted first.
        assert_eq!(evictions(&mut cache, &[1, 2, 3, 1, 4]), vec![2]);
        assert_eq!(evictions(&mut cache, &[5, 6]), vec![3, 4]);
        assert!(cache.contains(1).unwrap());
    }

    #[test]
    fn a_hit_short_of_k_does_not_reorder() {
        let mut cache = LruK::with_k(3, 3).unwrap();
        // 1 is hit once (two references, K = 3): still first out, as admitted first.
        assert_eq!(evictions(&mut cache, &[1, 2, 3, 1, 4]), vec![1]);
    }

    #[test]
    fn among_full_histories_the_oldest_kth_reference_goes() {
        let mut cache = LruK::new(2);
        // References of 1 at times 1, 2, 5 (K-th most recent: 2), of 2 at 3, 4 (3). LRU would
        // evict 2, referenced less recently; LRU-2 evicts 1.
        assert!(evictions(&mut cache, &[1, 1, 2, 2, 1]).is_empty());
        assert_eq!(evictions(&mut cache, &[3]), vec![1]);
    }

    #[test]
    fn evicted_objects_forget_their_history() {
        let mut cache = LruK::new(2);
        // K-th most recent references: 2 → 2, 1 → 1; 3 evicts 1.
        assert_eq!(evictions(&mut cache, &[1, 2, 2, 1, 3]), vec![1]);
        // 1 comes back at time 6 (evicting 3, short) with one reference, not with references
        // 4 and 6, so 4 evicts it rather than 2, whose K-th most recent reference (2) is older.
        assert_eq!(evictions(&mut cache, &[1, 4]), vec![3, 1]);
        assert!(cache.contains(2).unwrap());
    }

    #[test]
    fn a_retained_history_resumes_within_its_period() {
        // As above, but 1's references at 1 and 4 outlive its eviction: back at 6, its K-th
        // most recent reference is 4, younger than 2's, so 4 evicts 2.
        let mut cache = LruK::with_params(2, 2, Subsidiary::Fifo, 100).unwrap();
        assert_eq!(evictions(&mut cache, &[1, 2, 2, 1, 3]), vec![1]);
        assert!(!cache.contains(1).unwrap());
        assert_eq!(evictions(&mut cache, &[1, 4]), vec![3, 2]);
        // With a period of 1 request, 1's history (last reference at 4) expired by time 6.
        let mut cache = LruK::with_params(2, 2, Subsidiary::Fifo, 1).unwrap();
        assert_eq!(evictions(&mut cache, &[1, 2, 2, 1, 3, 1, 4]), vec![1, 3, 1]);
    }

    #[test]
    fn retained_histories_expire_and_remove_drops_them() {
        let mut cache = LruK::with_params(1, 2, Subsidiary::Fifo, 3).unwrap();
        evictions(&mut cache, &[1, 2, 3]);
        assert_eq!(
            cache.retained.len, 2,
            "1 and 2, last referenced 2 and 1 requests ago"
        );
        evictions(&mut cache, &[4, 5]);
        // At time 5, 1 (referenced at 1) has expired; 2, 3 and 4 are retained.
        assert_eq!(cache.retained.len, 3);
        assert!(!cache.remove(3));
        assert_eq!(cache.retained.len, 2);
        assert_eq!((cache.len(), cache.map.len()), (1, 3));
    }

    #[test]
    fn lru_subsidiary_reorders_objects_short_of_k() {
        let mut cache = LruK::with_params(3, 3, Subsidiary::Lru, 0).unwrap();
        assert_eq!(evictions(&mut cache, &[1, 2, 3, 1, 4]), vec![2]);
    }

    #[test]
    fn k_of_one_is_lru() {
        let mut cache = LruK::with_k(3, 1).unwrap();
        assert_eq!(evictions(&mut cache, &[1, 2, 3, 1, 4, 5]), vec![2, 3]);
        assert!(LruK::with_k(3, 0).is_err());
    }

    #[test]
    fn the_clock_counts_misses_that_are_not_admitted() {
        let mut cache = LruK::new(2);
        let mut evicted = Vec::new();
        get(&mut cache, 1, &mut evicted);
        assert!(!cache.get(&Request::new(9, 5), &mut evicted), "too large");
        get(&mut cache, 1, &mut evicted);
        assert_eq!(cache.clock, 3);
        let index = cache.map.get(1).unwrap();
        assert_eq!(&cache.times[index as usize * 2..][..2], &[1, 3]);
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(
            capacity in 1u64..64,
            k in 1usize..4,
            lru in any::<bool>(),
            retained_period in prop_oneof![Just(0u64), 1u64..50],
            steps in steps(20),
        ) {
            let subsidiary = if lru { Subsidiary::Lru } else { Subsidiary::Fifo };
            let mut cache = LruK::with_params(capacity, k, subsidiary, retained_period).unwrap();
            check_against_model(&mut cache, &steps)?;
            prop_assert_eq!(cache.short.len + cache.by_kth_reference.len(), cache.len());
            prop_assert_eq!(cache.map.len(), cache.len() + cache.retained.len);
        }
    }
}
