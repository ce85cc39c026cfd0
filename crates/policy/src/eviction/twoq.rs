//! 2Q (Johnson & Shasha, "2Q: A Low Overhead High Performance Buffer Management Replacement
//! Algorithm", VLDB'94, the full version of §3), over byte sizes, with the same decisions as
//! libCacheSim's `TwoQ.c` and its defaults (`Ain-size-ratio=0.25`, `Aout-size-ratio=0.5`).
//!
//! - A first-time object enters A1in, a FIFO; hits there change nothing.
//! - Objects pushed out of A1in leave their key in A1out, a FIFO of ghosts.
//! - A miss whose key is in A1out goes to Am, an LRU, and leaves A1out.
//!
//! Sizes as libCacheSim sets them (bytes; the products truncate): A1in's target is
//! `0.25 × capacity`, A1out holds up to `0.5 × capacity` bytes of ghosts, and Am holds up to
//! `capacity − A1in target` bytes. The cache evicts from A1in's head while A1in is over its
//! target, otherwise from Am's LRU end, until the new object fits the whole capacity; Am also
//! keeps itself within its own bytes when it admits. Objects larger than A1in's target are never
//! admitted (libCacheSim's `TwoQ_can_insert`); a ghost hit on such an object still consumes the
//! ghost. A ghost larger than A1out is not kept.

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::util::key_table::KeyTable;
use crate::util::prefetch::prefetch_read;
use crate::util::{List, Slab, NIL};

/// Which queue a node is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Queue {
    In,
    Out,
    Main,
}

/// libCacheSim's default share of the capacity for A1in.
pub const IN_SIZE_RATIO: f64 = 0.25;
/// libCacheSim's default share of the capacity for A1out's ghosts.
pub const OUT_SIZE_RATIO: f64 = 0.5;

/// 2Q over a byte capacity.
pub struct TwoQ {
    capacity: u64,
    in_capacity: u64,
    out_capacity: u64,
    main_capacity: u64,
    map: KeyTable,
    slab: Slab<Queue>,
    /// A1in, front is newest.
    recent: List,
    /// A1out ghosts, front is newest.
    ghosts: List,
    /// Am, front is most recently used.
    main: List,
    /// The current request's key was in A1out.
    ghost_hit: bool,
}

impl TwoQ {
    /// An empty 2Q cache of `capacity` bytes with libCacheSim's default queue sizes.
    pub fn new(capacity: u64) -> TwoQ {
        TwoQ::with_ratios(capacity, IN_SIZE_RATIO, OUT_SIZE_RATIO)
    }

    /// An empty 2Q cache of `capacity` bytes whose A1in target and A1out size are the given
    /// fractions of the capacity.
    pub fn with_ratios(capacity: u64, in_ratio: f64, out_ratio: f64) -> TwoQ {
        let in_capacity = (capacity as f64 * in_ratio) as u64;
        TwoQ {
            capacity,
            in_capacity,
            out_capacity: (capacity as f64 * out_ratio) as u64,
            main_capacity: capacity.saturating_sub(in_capacity),
            map: KeyTable::default(),
            slab: Slab::with_capacity(0),
            recent: List::default(),
            ghosts: List::default(),
            main: List::default(),
            ghost_hit: false,
        }
    }

    /// Moves A1in's oldest object to A1out (or drops it when larger than A1out).
    fn demote_oldest_recent(&mut self, evicted: &mut Vec<Evicted>) {
        let Some(index) = self.recent.pop_back(&mut self.slab) else {
            return;
        };
        let node = self.slab.get_mut(index);
        evicted.push(node.evicted());
        let size = u64::from(node.size);
        if size > self.out_capacity {
            self.map.remove(node.key);
            self.slab.release(index);
            return;
        }
        node.data = Queue::Out;
        while self.ghosts.bytes + size > self.out_capacity {
            self.drop_oldest(Queue::Out);
        }
        self.ghosts.push_front(&mut self.slab, index);
    }

    /// Drops the back of A1out or Am entirely; returns the dropped node's key and size.
    fn drop_oldest(&mut self, queue: Queue) -> Option<Evicted> {
        let list = if queue == Queue::Out {
            &mut self.ghosts
        } else {
            &mut self.main
        };
        let index = list.pop_back(&mut self.slab)?;
        let node = self.slab.get(index);
        let gone = node.evicted();
        self.map.remove(gone.key);
        self.slab.release(index);
        Some(gone)
    }
}

impl EvictionPolicy for TwoQ {
    fn space(&self) -> Space {
        Space::of_lists(self.capacity, &[&self.recent, &self.main])
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.space().check()?;
        [&self.recent, &self.main]
            .iter()
            .try_for_each(|list| list.check(&self.slab))
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        self.ghost_hit = false;
        let Some(index) = self.map.get(request.key) else {
            return false;
        };
        match self.slab.get(index).data {
            Queue::In => true,
            Queue::Main => {
                self.main.move_to_front(&mut self.slab, index);
                true
            }
            Queue::Out => {
                self.ghost_hit = true;
                self.ghosts.unlink(&mut self.slab, index);
                self.map.remove(request.key);
                self.slab.release(index);
                false
            }
        }
    }

    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        let size = u64::from(request.size);
        if size > self.in_capacity || size > self.capacity {
            return;
        }
        while self.recent.bytes + self.main.bytes + size > self.capacity {
            if self.recent.bytes > self.in_capacity || self.main.is_empty() {
                self.demote_oldest_recent(evicted);
            } else if let Some(gone) = self.drop_oldest(Queue::Main) {
                evicted.push(gone);
            }
        }
        let queue = if self.ghost_hit {
            self.ghost_hit = false;
            // libCacheSim admits through Am's own `get`, which refuses objects larger than Am
            // and evicts Am's LRU objects until Am alone fits the object.
            if size > self.main_capacity {
                return;
            }
            while self.main.bytes + size > self.main_capacity {
                match self.drop_oldest(Queue::Main) {
                    Some(gone) => evicted.push(gone),
                    None => break,
                }
            }
            Queue::Main
        } else {
            Queue::In
        };
        let index = self.slab.alloc(request.key, request.size, queue);
        if queue == Queue::Main {
            self.main.push_front(&mut self.slab, index);
        } else {
            self.recent.push_front(&mut self.slab, index);
        }
        self.map.insert(request.key, index);
    }

    /// A resident object: in A1in or Am, not a ghost in A1out.
    fn contains(&self, key: u64) -> Option<bool> {
        let resident = self
            .map
            .get(key)
            .is_some_and(|index| self.slab.get(index).data != Queue::Out);
        Some(resident)
    }

    /// Drops `key`; a ghost of it is forgotten too, but only a resident object makes this
    /// return true.
    fn remove(&mut self, key: u64) -> bool {
        let Some(index) = self.map.remove(key) else {
            return false;
        };
        let queue = self.slab.get(index).data;
        let list = match queue {
            Queue::In => &mut self.recent,
            Queue::Out => &mut self.ghosts,
            Queue::Main => &mut self.main,
        };
        list.unlink(&mut self.slab, index);
        self.slab.release(index);
        queue != Queue::Out
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

    /// The oldest objects of the three queues leave next: load their neighbours and the
    /// table slots of the ones that will be dropped.
    #[inline]
    fn prefetch_victims(&self) {
        for list in [&self.recent, &self.ghosts, &self.main] {
            if list.tail != NIL {
                let before = self.slab.prev(list.tail);
                if before != NIL {
                    prefetch_read(self.slab.get(before));
                }
                let tail = self.slab.get(list.tail);
                if tail.data != Queue::In {
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

    fn keys(list: &List, slab: &Slab<Queue>) -> Vec<u64> {
        let mut out = Vec::new();
        let mut index = list.head;
        while index != NIL {
            out.push(slab.get(index).key);
            index = slab.next(index);
        }
        out
    }

    #[test]
    fn queue_sizes_follow_libcachesim_defaults() {
        let twoq = TwoQ::new(1001);
        assert_eq!(
            (twoq.in_capacity, twoq.out_capacity, twoq.main_capacity),
            (250, 500, 751)
        );
    }

    #[test]
    fn first_timers_pass_through_a1in_and_ghost_hits_enter_am() {
        // Capacity 8: A1in target 2, A1out 4, Am 6.
        let mut twoq = TwoQ::new(8);
        let mut evicted = Vec::new();
        for key in 1..=8 {
            assert!(!twoq.get(&Request::new(key, 1), &mut evicted));
        }
        assert!(twoq.get(&Request::new(1, 1), &mut evicted), "A1in hit");
        assert_eq!(keys(&twoq.recent, &twoq.slab), vec![8, 7, 6, 5, 4, 3, 2, 1]);
        // Full: A1in (8 bytes) is over its target, so its oldest (1) goes to A1out even though
        // it was just hit.
        assert!(!twoq.get(&Request::new(9, 1), &mut evicted));
        assert_eq!(evicted, vec![Evicted { key: 1, size: 1 }]);
        assert_eq!(keys(&twoq.ghosts, &twoq.slab), vec![1]);
        evicted.clear();
        // A ghost hit is a miss; 2 leaves A1in for A1out to make room, and 1 enters Am.
        assert!(!twoq.get(&Request::new(1, 1), &mut evicted));
        assert_eq!(evicted, vec![Evicted { key: 2, size: 1 }]);
        assert_eq!(keys(&twoq.main, &twoq.slab), vec![1]);
        assert_eq!(keys(&twoq.ghosts, &twoq.slab), vec![2]);
        for key in 10..=13 {
            twoq.get(&Request::new(key, 1), &mut evicted);
        }
        // A1out keeps at most 4 bytes of ghosts, oldest first out.
        assert_eq!(keys(&twoq.ghosts, &twoq.slab), vec![6, 5, 4, 3]);
        assert!(twoq.get(&Request::new(1, 1), &mut evicted), "Am hit");
        assert_eq!((twoq.len(), twoq.used_bytes()), (8, 8));
    }

    #[test]
    fn am_is_evicted_once_a1in_is_within_its_target() {
        let mut twoq = TwoQ::new(8);
        let mut evicted = Vec::new();
        for key in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] {
            twoq.get(&Request::new(key, 1), &mut evicted);
        }
        // A1out = [4, 3, 2, 1]; bring 1..=4 back into Am, which pushes 5..=8 out of A1in.
        for key in [1, 2, 3, 4] {
            assert!(!twoq.get(&Request::new(key, 1), &mut evicted));
        }
        assert_eq!(keys(&twoq.main, &twoq.slab), vec![4, 3, 2, 1]);
        assert_eq!(keys(&twoq.recent, &twoq.slab), vec![12, 11, 10, 9]);
        // A1in (4 bytes) is over its target of 2: still A1in gives way first.
        evicted.clear();
        twoq.get(&Request::new(20, 1), &mut evicted);
        twoq.get(&Request::new(21, 1), &mut evicted);
        assert_eq!(
            evicted,
            vec![Evicted { key: 9, size: 1 }, Evicted { key: 10, size: 1 }]
        );
        // A1in holds 4 bytes again, still over target: 11 and 12 go next.
        evicted.clear();
        twoq.get(&Request::new(22, 1), &mut evicted);
        twoq.get(&Request::new(23, 1), &mut evicted);
        assert_eq!(
            evicted,
            vec![Evicted { key: 11, size: 1 }, Evicted { key: 12, size: 1 }]
        );
        // A 3-byte object is larger than A1in's target: refused before any eviction.
        evicted.clear();
        assert!(!twoq.get(&Request::new(30, 3), &mut evicted));
        assert!(
            evicted.is_empty(),
            "objects over A1in's target are refused outright"
        );
        assert!(twoq.remove(4));
        assert!(!twoq.remove(4));
        assert!(!twoq.remove(12), "a ghost is not resident");
        assert_eq!((twoq.len(), twoq.used_bytes()), (7, 7));
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(capacity in 1u64..64, steps in steps(20)) {
            check_against_model(&mut TwoQ::new(capacity), &steps)?;
        }
    }
}
