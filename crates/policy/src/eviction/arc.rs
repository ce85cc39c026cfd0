//! ARC, the adaptive replacement cache (Megiddo & Modha, "ARC: A Self-Tuning, Low Overhead
//! Replacement Cache", FAST'03, Fig. 4), over byte sizes, with the same decisions as
//! libCacheSim's `ARC.c` (the version bundled in the `libcachesim` 0.3.5 Python package).
//!
//! Four LRU lists: T1 (seen once recently), T2 (seen at least twice), and their ghosts B1, B2
//! (keys only). The target size `p` of T1 moves towards whichever ghost list gets hits.
//!
//! Where libCacheSim departs from the paper, and so do we:
//! - Sizes are bytes: every list length in the paper is a byte count here, and `p` is a
//!   floating-point byte count; the adaptation step is `max(|B2| / |B1|, 1)` in bytes.
//! - Case IV (a miss on all four lists) tests `|T1| + |B1| + size > c` instead of `|T1| + |B1|
//!   = c`. When it holds and B1 holds bytes, the LRU of B1 is dropped and REPLACE runs;
//!   otherwise the LRU of T1 is dropped without leaving a ghost. When it does not hold, the LRU
//!   of B2 is dropped first if the four lists reach `2c` bytes (and B2 is not empty).
//! - REPLACE also evicts from T1 when T2 is empty.
//! - Eviction repeats until the new object fits; on a ghost hit each round is a plain REPLACE
//!   (no ghost is trimmed).
//! - A request that hits a ghost and is then not admitted leaves its "was in B2" flag set until
//!   the next request that finds its key in any list; REPLACE's tie rule (`|T1| == p`) reads it.
//! - A hit keeps the size the object was admitted with.

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::util::key_table::KeyTable;
use crate::util::prefetch::prefetch_read;
use crate::util::{List, Slab, NIL};

/// Which of the four lists a node is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    T1,
    T2,
    B1,
    B2,
}

/// ARC over a byte capacity.
pub struct Arc {
    capacity: u64,
    map: KeyTable,
    slab: Slab<Place>,
    /// Resident, seen once since entering the cache; front is most recent.
    t1: List,
    /// Resident, seen at least twice; front is most recent.
    t2: List,
    /// Ghosts of objects evicted from T1.
    b1: List,
    /// Ghosts of objects evicted from T2.
    b2: List,
    /// Target bytes for T1.
    p: f64,
    /// The last request whose key was on any list found it in B1 (libCacheSim's
    /// `curr_obj_in_L1_ghost`; cleared by the admission that follows a ghost hit).
    hit_b1: bool,
    /// Likewise for B2 (`curr_obj_in_L2_ghost`).
    hit_b2: bool,
    /// The current request hit a ghost, so its admission goes to T2.
    ghost_hit_now: bool,
}

impl Arc {
    /// An empty ARC cache of `capacity` bytes.
    pub fn new(capacity: u64) -> Arc {
        Arc {
            capacity,
            map: KeyTable::default(),
            slab: Slab::with_capacity(0),
            t1: List::default(),
            t2: List::default(),
            b1: List::default(),
            b2: List::default(),
            p: 0.0,
            hit_b1: false,
            hit_b2: false,
            ghost_hit_now: false,
        }
    }

    /// The current target size of T1, in bytes.
    pub fn target_t1_bytes(&self) -> f64 {
        self.p
    }

    fn list_and_slab(&mut self, place: Place) -> (&mut List, &mut Slab<Place>) {
        let list = match place {
            Place::T1 => &mut self.t1,
            Place::T2 => &mut self.t2,
            Place::B1 => &mut self.b1,
            Place::B2 => &mut self.b2,
        };
        (list, &mut self.slab)
    }

    /// Drops the LRU ghost of `place` (B1 or B2) entirely.
    fn drop_ghost_tail(&mut self, place: Place) {
        let (list, slab) = self.list_and_slab(place);
        if let Some(index) = list.pop_back(slab) {
            self.map.remove(self.slab.get(index).key);
            self.slab.release(index);
        }
    }

    /// Moves the LRU object of T1 or T2 to the front of its ghost list.
    fn demote_tail(&mut self, from: Place, evicted: &mut Vec<Evicted>) {
        let (data, ghost, ghost_place) = match from {
            Place::T1 => (&mut self.t1, &mut self.b1, Place::B1),
            _ => (&mut self.t2, &mut self.b2, Place::B2),
        };
        if let Some(index) = data.pop_back(&mut self.slab) {
            let node = self.slab.get_mut(index);
            node.data = ghost_place;
            evicted.push(node.evicted());
            ghost.push_front(&mut self.slab, index);
        }
    }

    /// The paper's REPLACE: demote from T1 when it is over its target (or exactly at it and
    /// the request hit B2), or when T2 is empty; otherwise demote from T2.
    fn replace(&mut self, evicted: &mut Vec<Evicted>) {
        let t1_bytes = self.t1.bytes as f64;
        let over_target = t1_bytes > self.p || (t1_bytes == self.p && self.hit_b2);
        if (self.t1.bytes > 0 && over_target) || self.t2.bytes == 0 {
            self.demote_tail(Place::T1, evicted);
        } else {
            self.demote_tail(Place::T2, evicted);
        }
    }

    /// One eviction round for an object of `size` bytes that missed on all four lists (case IV).
    fn evict_for_new(&mut self, size: u64, evicted: &mut Vec<Evicted>) {
        if self.t1.bytes + self.b1.bytes + size > self.capacity {
            if self.b1.bytes > 0 {
                self.drop_ghost_tail(Place::B1);
                self.replace(evicted);
            } else if let Some(index) = self.t1.pop_back(&mut self.slab) {
                let node = self.slab.get(index);
                evicted.push(node.evicted());
                self.map.remove(node.key);
                self.slab.release(index);
            }
        } else {
            let total = self.t1.bytes + self.t2.bytes + self.b1.bytes + self.b2.bytes;
            if total >= self.capacity.saturating_mul(2) && self.b2.bytes > 0 {
                self.drop_ghost_tail(Place::B2);
            }
            self.replace(evicted);
        }
    }
}

impl EvictionPolicy for Arc {
    fn space(&self) -> Space {
        Space::of_lists(self.capacity, &[&self.t1, &self.t2])
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.space().check()?;
        [&self.t1, &self.t2]
            .iter()
            .try_for_each(|list| list.check(&self.slab))
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        self.ghost_hit_now = false;
        let Some(index) = self.map.get(request.key) else {
            return false;
        };
        self.hit_b1 = false;
        self.hit_b2 = false;
        match self.slab.get(index).data {
            Place::T1 => {
                self.t1.unlink(&mut self.slab, index);
                self.slab.get_mut(index).data = Place::T2;
                self.t2.push_front(&mut self.slab, index);
                true
            }
            Place::T2 => {
                self.t2.move_to_front(&mut self.slab, index);
                true
            }
            ghost => {
                // Case II / III: adapt p towards the list whose ghost was hit; the ratio is
                // computed in floating point as libCacheSim does, so ties resolve identically.
                let (b1_bytes, b2_bytes) = (self.b1.bytes as f64, self.b2.bytes as f64);
                if ghost == Place::B1 {
                    self.hit_b1 = true;
                    let ratio = b2_bytes / b1_bytes;
                    let delta = if ratio > 1.0 { ratio } else { 1.0 };
                    let raised = self.p + delta;
                    let capacity = self.capacity as f64;
                    self.p = if raised < capacity { raised } else { capacity };
                    self.b1.unlink(&mut self.slab, index);
                } else {
                    self.hit_b2 = true;
                    let ratio = b1_bytes / b2_bytes;
                    let delta = if ratio > 1.0 { ratio } else { 1.0 };
                    let lowered = self.p - delta;
                    self.p = if lowered > 0.0 { lowered } else { 0.0 };
                    self.b2.unlink(&mut self.slab, index);
                }
                self.ghost_hit_now = true;
                self.map.remove(request.key);
                self.slab.release(index);
                false
            }
        }
    }

    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        let size = u64::from(request.size);
        if size > self.capacity {
            return;
        }
        while self.t1.bytes + self.t2.bytes + size > self.capacity {
            if self.ghost_hit_now {
                self.replace(evicted);
            } else {
                self.evict_for_new(size, evicted);
            }
        }
        let to_t2 = self.ghost_hit_now && (self.hit_b1 || self.hit_b2);
        let place = if to_t2 { Place::T2 } else { Place::T1 };
        let index = self.slab.alloc(request.key, request.size, place);
        if to_t2 {
            self.t2.push_front(&mut self.slab, index);
            self.hit_b1 = false;
            self.hit_b2 = false;
            self.ghost_hit_now = false;
        } else {
            self.t1.push_front(&mut self.slab, index);
        }
        self.map.insert(request.key, index);
    }

    /// A resident object: in T1 or T2, not a ghost.
    fn contains(&self, key: u64) -> Option<bool> {
        let resident = self
            .map
            .get(key)
            .is_some_and(|index| matches!(self.slab.get(index).data, Place::T1 | Place::T2));
        Some(resident)
    }

    /// Drops `key`; a ghost of it is forgotten too (as libCacheSim's `ARC_remove` does), but
    /// only a resident object makes this return true.
    fn remove(&mut self, key: u64) -> bool {
        let Some(index) = self.map.remove(key) else {
            return false;
        };
        let place = self.slab.get(index).data;
        let (list, slab) = self.list_and_slab(place);
        list.unlink(slab, index);
        self.slab.release(index);
        matches!(place, Place::T1 | Place::T2)
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

    /// The tails of the four lists are the next victims: load them, their neighbours, and the
    /// table slots of the ghosts that will be dropped.
    #[inline]
    fn prefetch_victims(&self) {
        for list in [&self.t1, &self.t2, &self.b1, &self.b2] {
            if list.tail != NIL {
                let tail = self.slab.get(list.tail);
                let before = self.slab.prev(list.tail);
                if before != NIL {
                    prefetch_read(self.slab.get(before));
                }
                if matches!(tail.data, Place::B1 | Place::B2) {
                    self.map.prefetch(tail.key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::model_check::{check_against_model, steps};
    use proptest::prelude::*;

    fn keys(list: &List, slab: &Slab<Place>) -> Vec<u64> {
        let mut out = Vec::new();
        let mut index = list.head;
        while index != NIL {
            out.push(slab.get(index).key);
            index = slab.next(index);
        }
        out
    }

    fn get(arc: &mut Arc, key: u64) -> bool {
        let mut evicted = Vec::new();
        arc.get(&Request::new(key, 1), &mut evicted)
    }

    #[test]
    fn second_hit_promotes_to_t2_and_eviction_leaves_ghosts() {
        let mut arc = Arc::new(3);
        for key in [1, 2, 3] {
            assert!(!get(&mut arc, key));
        }
        assert!(get(&mut arc, 1), "1 is resident");
        assert_eq!(keys(&arc.t1, &arc.slab), vec![3, 2]);
        assert_eq!(keys(&arc.t2, &arc.slab), vec![1]);
        // Case IV: |T1| + |B1| + 1 = 3 is not over c and the lists hold 3 < 2c, so REPLACE:
        // |T1| = 2 > p = 0 demotes T1's LRU (2) to B1.
        let mut evicted = Vec::new();
        assert!(!arc.get(&Request::new(4, 1), &mut evicted));
        assert_eq!(evicted, vec![Evicted { key: 2, size: 1 }]);
        assert_eq!(keys(&arc.b1, &arc.slab), vec![2]);
        assert_eq!(keys(&arc.t1, &arc.slab), vec![4, 3]);
    }

    #[test]
    fn ghost_hits_adapt_target_and_admit_to_t2() {
        let mut arc = Arc::new(3);
        for key in [1, 2, 3, 1, 4] {
            get(&mut arc, key);
        }
        // T1 = [4, 3], T2 = [1], B1 = [2], p = 0.
        let mut evicted = Vec::new();
        assert!(
            !arc.get(&Request::new(2, 1), &mut evicted),
            "a ghost hit is a miss"
        );
        // Case II: p += max(|B2| / |B1|, 1) = 1; REPLACE: |T1| = 2 > 1 demotes 3.
        assert_eq!(arc.target_t1_bytes(), 1.0);
        assert_eq!(evicted, vec![Evicted { key: 3, size: 1 }]);
        assert_eq!(keys(&arc.t2, &arc.slab), vec![2, 1]);
        assert_eq!(keys(&arc.t1, &arc.slab), vec![4]);
        assert_eq!(keys(&arc.b1, &arc.slab), vec![3]);
        // Case IV: |T1| + |B1| + 1 = 3 is not over c; REPLACE: |T1| = 1 = p without a B2 hit
        // and T2 is not empty, so T2's LRU (1) goes to B2.
        evicted.clear();
        assert!(!arc.get(&Request::new(5, 1), &mut evicted));
        assert_eq!(evicted, vec![Evicted { key: 1, size: 1 }]);
        assert_eq!(keys(&arc.b2, &arc.slab), vec![1]);
        assert_eq!(keys(&arc.b1, &arc.slab), vec![3]);
        // Case III: p -= max(|B1| / |B2|, 1) = 1 gives 0; REPLACE: |T1| = 2 > 0 demotes 4.
        evicted.clear();
        assert!(!arc.get(&Request::new(1, 1), &mut evicted));
        assert_eq!(arc.target_t1_bytes(), 0.0);
        assert_eq!(evicted, vec![Evicted { key: 4, size: 1 }]);
        assert_eq!(keys(&arc.t2, &arc.slab), vec![1, 2]);
        assert_eq!(keys(&arc.b1, &arc.slab), vec![4, 3]);
        assert!(keys(&arc.b2, &arc.slab).is_empty());
    }

    #[test]
    fn objects_larger_than_cache_are_not_admitted_and_remove_works() {
        let mut arc = Arc::new(10);
        let mut evicted = Vec::new();
        assert!(!arc.get(&Request::new(1, 11), &mut evicted));
        assert!(arc.is_empty());
        arc.get(&Request::new(2, 4), &mut evicted);
        arc.get(&Request::new(3, 4), &mut evicted);
        arc.get(&Request::new(4, 4), &mut evicted);
        assert_eq!(arc.used_bytes(), 8);
        assert!(arc.remove(3));
        assert!(!arc.remove(3));
        assert_eq!((arc.len(), arc.used_bytes()), (1, 4));
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(capacity in 1u64..64, steps in steps(20)) {
            check_against_model(&mut Arc::new(capacity), &steps)?;
        }
    }
}
