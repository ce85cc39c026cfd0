//! MQ, multi-queue (Zhou, Philbin & Li, "The Multi-Queue Replacement Algorithm for Second Level
//! Buffer Caches", USENIX ATC'01, §4), over byte sizes, with the same decisions as libCacheSim's
//! `MQ.c` and its defaults (`n-queue=8`, `lifetime=10000`, `Qout-size-ratio=4`).
//!
//! - `n-queue` LRU queues Q0 … Qm−1. An object referenced `f` times lives in queue
//!   `min(⌊log₂ f⌋, m − 1)`; a hit adds one to `f` and moves the object to the MRU end of its
//!   (possibly higher) queue.
//! - Every object carries an expiry time, `vtime + lifetime` when it was last placed. After
//!   each hit and each insertion, `vtime` advances by one and, for each queue above Q0, an
//!   expired object at its LRU end is demoted to the MRU end of the queue below, with a fresh
//!   expiry (the paper's `Adjust`). Demotion leaves the frequency alone.
//! - The victim is the LRU end of the lowest non-empty queue. Its key and frequency go to Qout,
//!   a FIFO history; a miss on a key in Qout takes it out and the object re-enters with the
//!   remembered frequency plus one.
//!
//! Where libCacheSim departs from the paper, and so do we:
//! - `lifetime` is a fixed parameter; the paper sets it to the peak temporal distance and tunes
//!   it from running statistics of temporal distances.
//! - Qout holds `⌊Qout-size-ratio × capacity⌋` bytes of evicted objects (each counted at its own
//!   size, oldest out first; an object larger than that is not remembered), not a number of
//!   block identifiers.
//! - Time advances on hits and insertions only: a miss that is not admitted (an object larger
//!   than the cache, or one an admission filter refuses) neither ticks `vtime` nor demotes. The
//!   paper's `Adjust` runs on every access.
//! - A missed key is looked up in (and taken out of) Qout before the evictions that make room for
//!   it, so those evictions cannot push its remembered frequency out of Qout; the paper evicts
//!   first, then consults Qout. The key leaves Qout even when the object is then not admitted.
//! - The cache evicts until the new object fits its bytes, where the paper evicts one block.
//! - Frequencies saturate at 2³¹ − 1 (libCacheSim's `int32_t`).
//!
//! Per request: O(1) table and list work plus O(`n-queue`) for `Adjust` and for finding the
//! lowest non-empty queue (a bit mask of the non-empty queues makes both a walk over set bits).

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::error::PolicyError;
use crate::util::key_table::KeyTable;
use crate::util::prefetch::prefetch_read;
use crate::util::{List, Slab, NIL};

/// libCacheSim's default number of queues.
pub const QUEUES: usize = 8;
/// libCacheSim's default lifetime, in ticks of `vtime` (hits and insertions).
pub const LIFETIME: u64 = 10_000;
/// libCacheSim's default size of Qout, over the capacity.
pub const QOUT_SIZE_RATIO: f64 = 4.0;
/// libCacheSim's bound on `n-queue` (`MQ_MAX_N_QUEUE`), which also fits the non-empty mask.
pub const MAX_QUEUES: usize = 64;

/// The `queue` of a node that is a Qout entry rather than a resident object.
const IN_QOUT: u8 = u8::MAX;
/// libCacheSim keeps frequencies in an `int32_t` and stops counting at its maximum.
const MAX_FREQUENCY: u32 = i32::MAX as u32;

/// What MQ knows of an object, resident or remembered in Qout.
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// The `vtime` after which the object is demoted from the LRU end of its queue.
    expires_at: u64,
    frequency: u32,
    /// The queue holding the object, or [`IN_QOUT`].
    queue: u8,
}

/// A miss on a key remembered in Qout, waiting for the insertion of that key.
#[derive(Clone, Copy, Debug)]
struct QoutHit {
    key: u64,
    frequency: u32,
}

/// MQ over a byte capacity.
pub struct Mq {
    lifetime: u64,
    qout_capacity: u64,
    /// Resident objects and Qout entries alike (a key is never both).
    map: KeyTable,
    slab: Slab<Entry>,
    /// Q0 … Qm−1; each list's front is its MRU end.
    queues: Vec<List>,
    /// Bit `q` is set while queue `q` is non-empty.
    non_empty: u64,
    /// Front: the most recently evicted.
    qout: List,
    vtime: u64,
    qout_hit: Option<QoutHit>,
    space: Space,
}

impl Mq {
    /// An empty MQ cache of `capacity` bytes with libCacheSim's defaults.
    pub fn new(capacity: u64) -> Mq {
        Mq::build(capacity, QUEUES, LIFETIME, QOUT_SIZE_RATIO)
    }

    /// An empty MQ cache of `capacity` bytes with `queues` queues (1 to 64), objects demoted
    /// after `lifetime` ticks (at least 1) without a hit, and a Qout of `qout_size_ratio` times
    /// the capacity (more than 0, at most 64), the bounds libCacheSim enforces.
    pub fn with_params(
        capacity: u64,
        queues: usize,
        lifetime: u64,
        qout_size_ratio: f64,
    ) -> Result<Mq, PolicyError> {
        if !(1..=MAX_QUEUES).contains(&queues) {
            return Err(PolicyError::refused(
                "mq",
                format!("n-queue must be between 1 and {MAX_QUEUES}, got {queues}"),
            ));
        }
        if lifetime < 1 {
            return Err(PolicyError::refused("mq", "lifetime must be positive"));
        }
        if !(qout_size_ratio > 0.0 && qout_size_ratio <= 64.0) {
            return Err(PolicyError::refused(
                "mq",
                format!("Qout-size-ratio must be in (0, 64], got {qout_size_ratio}"),
            ));
        }
        Ok(Mq::build(capacity, queues, lifetime, qout_size_ratio))
    }

    fn build(capacity: u64, queues: usize, lifetime: u64, qout_size_ratio: f64) -> Mq {
        Mq {
            lifetime,
            // Truncated, as libCacheSim sizes Qout's FIFO cache.
            qout_capacity: (capacity as f64 * qout_size_ratio) as u64,
            map: KeyTable::default(),
            slab: Slab::with_capacity(0),
            queues: vec![List::default(); queues],
            non_empty: 0,
            qout: List::default(),
            vtime: 0,
            qout_hit: None,
            space: Space::new(capacity),
        }
    }

    /// The queue of an object referenced `frequency` (≥ 1) times: `min(⌊log₂ f⌋, m − 1)`.
    #[inline]
    fn queue_for(&self, frequency: u32) -> usize {
        (frequency.max(1).ilog2() as usize).min(self.queues.len() - 1)
    }

    /// Links resident node `index` at the MRU end of `queue`.
    #[inline]
    fn link(&mut self, index: u32, queue: usize) {
        self.slab.get_mut(index).data.queue = queue as u8;
        self.queues[queue].push_front(&mut self.slab, index);
        self.non_empty |= 1 << queue;
    }

    /// Unlinks resident node `index` from its queue.
    #[inline]
    fn unlink(&mut self, index: u32) {
        let queue = usize::from(self.slab.get(index).data.queue);
        let list = &mut self.queues[queue];
        list.unlink(&mut self.slab, index);
        if list.is_empty() {
            self.non_empty &= !(1 << queue);
        }
    }

    /// The paper's `Adjust`: one tick, then each queue above Q0 demotes its LRU end one queue
    /// down if that object has expired. Queues are visited upwards, so an object demoted into
    /// a queue already visited is not demoted twice.
    #[inline]
    fn adjust(&mut self) {
        self.vtime += 1;
        let mut upper = self.non_empty & !1;
        while upper != 0 {
            let queue = upper.trailing_zeros() as usize;
            upper &= upper - 1;
            let tail = self.queues[queue].tail;
            if self.slab.get(tail).data.expires_at < self.vtime {
                self.unlink(tail);
                self.link(tail, queue - 1);
                self.slab.get_mut(tail).data.expires_at = self.vtime + self.lifetime;
            }
        }
    }

    /// Evicts the LRU end of the lowest non-empty queue, remembering it in Qout.
    fn evict(&mut self, evicted: &mut Vec<Evicted>) {
        let queue = self.non_empty.trailing_zeros() as usize;
        let victim = self.queues[queue].tail;
        self.unlink(victim);
        let node = self.slab.get(victim);
        let (key, size) = (node.key, node.size);
        self.space.release(size);
        evicted.push(Evicted { key, size });
        if u64::from(size) > self.qout_capacity {
            self.forget(victim);
            return;
        }
        while self.qout.bytes + u64::from(size) > self.qout_capacity {
            let oldest = self.qout.tail;
            self.qout.unlink(&mut self.slab, oldest);
            self.forget(oldest);
        }
        self.slab.get_mut(victim).data.queue = IN_QOUT;
        self.qout.push_front(&mut self.slab, victim);
    }

    /// Drops the unlinked node `index` and its key.
    #[inline]
    fn forget(&mut self, index: u32) {
        self.map.remove(self.slab.get(index).key);
        self.slab.release(index);
    }

    /// Takes `key`'s entry out of Qout, returning the frequency it remembered.
    #[inline]
    fn take_from_qout(&mut self, index: u32) -> u32 {
        let frequency = self.slab.get(index).data.frequency;
        self.qout.unlink(&mut self.slab, index);
        self.forget(index);
        frequency
    }
}

impl EvictionPolicy for Mq {
    fn space(&self) -> Space {
        self.space
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        self.qout_hit = None;
        let Some(index) = self.map.get(request.key) else {
            return false;
        };
        let entry = self.slab.get(index).data;
        if entry.queue == IN_QOUT {
            let frequency = self.take_from_qout(index);
            self.qout_hit = Some(QoutHit {
                key: request.key,
                frequency,
            });
            return false;
        }
        self.unlink(index);
        let frequency = (entry.frequency + 1).min(MAX_FREQUENCY);
        let data = &mut self.slab.get_mut(index).data;
        data.frequency = frequency;
        data.expires_at = self.vtime + self.lifetime;
        self.link(index, self.queue_for(frequency));
        self.adjust();
        true
    }

    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        let (key, size) = (request.key, request.size);
        let mut remembered = self.qout_hit.take().filter(|hit| hit.key == key);
        if let Some(index) = self.map.get(key) {
            if self.slab.get(index).data.queue != IN_QOUT {
                return;
            }
            // Admitted without a lookup: consult Qout as the lookup would have.
            let frequency = self.take_from_qout(index);
            remembered = Some(QoutHit { key, frequency });
        }
        if u64::from(size) > self.space.capacity_bytes {
            return;
        }
        while !self.space.fits(u64::from(size)) {
            self.evict(evicted);
        }
        let frequency = remembered.map_or(1, |hit| (hit.frequency + 1).min(MAX_FREQUENCY));
        let entry = Entry {
            expires_at: self.vtime + self.lifetime,
            frequency,
            queue: 0,
        };
        let index = self.slab.alloc(key, size, entry);
        self.map.insert(key, index);
        self.link(index, self.queue_for(frequency));
        self.space.charge(size);
        self.adjust();
    }

    /// Drops `key` from the cache and from Qout, as libCacheSim's `MQ_remove` does.
    fn remove(&mut self, key: u64) -> bool {
        let Some(index) = self.map.get(key) else {
            return false;
        };
        if self.slab.get(index).data.queue == IN_QOUT {
            self.take_from_qout(index);
            return false;
        }
        self.unlink(index);
        self.space.release(self.slab.get(index).size);
        self.forget(index);
        true
    }

    #[inline]
    fn contains(&self, key: u64) -> Option<bool> {
        Some(
            self.map
                .get(key)
                .is_some_and(|index| self.slab.get(index).data.queue != IN_QOUT),
        )
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

    #[inline]
    fn prefetch_neighbours(&self, key: u64) {
        if let Some(index) = self.map.get(key) {
            self.slab.prefetch_neighbours(index);
        }
    }

    /// The next victim is the LRU end of the lowest queue, and the next Qout entry to go is
    /// Qout's oldest: load them and their table slots.
    #[inline]
    fn prefetch_victims(&self) {
        if self.non_empty != 0 {
            let tail = self.queues[self.non_empty.trailing_zeros() as usize].tail;
            let before = self.slab.prev(tail);
            if before != NIL {
                prefetch_read(self.slab.get(before));
            }
            self.map.prefetch(self.slab.get(tail).key);
        }
        if self.qout.tail != NIL {
            self.map.prefetch(self.slab.get(self.qout.tail).key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::model_check::{check_against_model, steps};
    use proptest::prelude::*;

    fn get(mq: &mut Mq, key: u64, evicted: &mut Vec<Evicted>) -> bool {
        mq.get(&Request::new(key, 1), evicted)
    }

    /// Keys of queue `queue` from the MRU end.
    fn queue(mq: &Mq, queue: usize) -> Vec<u64> {
        keys(mq, &mq.queues[queue])
    }

    fn keys(mq: &Mq, list: &List) -> Vec<u64> {
        let mut out = Vec::new();
        let mut index = list.head;
        while index != NIL {
            out.push(mq.slab.get(index).key);
            index = mq.slab.next(index);
        }
        out
    }

    #[test]
    fn queue_is_log2_of_frequency_capped_at_the_top_queue() {
        let mq = Mq::with_params(10, 4, 100, 1.0).unwrap();
        let queues: Vec<usize> = [1, 2, 3, 4, 7, 8, 1000].map(|f| mq.queue_for(f)).to_vec();
        assert_eq!(queues, vec![0, 1, 1, 2, 2, 3, 3]);
    }

    #[test]
    fn hits_promote_and_the_lowest_queue_is_evicted_into_qout() {
        let mut mq = Mq::new(3);
        let mut evicted = Vec::new();
        for key in [1, 2, 3] {
            assert!(!get(&mut mq, key, &mut evicted));
        }
        assert!(get(&mut mq, 1, &mut evicted), "frequency 2: queue 1");
        assert_eq!((queue(&mq, 0), queue(&mq, 1)), (vec![3, 2], vec![1]));
        // 4 evicts Q0's LRU end (2), though 1 is older.
        assert!(!get(&mut mq, 4, &mut evicted));
        assert_eq!(evicted, vec![Evicted { key: 2, size: 1 }]);
        assert_eq!(keys(&mq, &mq.qout), vec![2]);
        // 2 comes back with its remembered frequency plus one: queue 1.
        evicted.clear();
        assert!(!get(&mut mq, 2, &mut evicted));
        assert_eq!(evicted, vec![Evicted { key: 3, size: 1 }]);
        assert_eq!((queue(&mq, 0), queue(&mq, 1)), (vec![4], vec![2, 1]));
        assert_eq!(keys(&mq, &mq.qout), vec![3], "2 left Qout");
        assert_eq!(mq.slab.get(mq.map.get(2).unwrap()).data.frequency, 2);
    }

    #[test]
    fn expired_objects_drop_one_queue_per_tick_from_the_lru_end() {
        // Lifetime 2: an object placed at vtime t expires once vtime exceeds t + 2.
        let mut mq = Mq::with_params(10, 3, 2, 1.0).unwrap();
        let mut evicted = Vec::new();
        get(&mut mq, 1, &mut evicted); // vtime 0 -> 1
        get(&mut mq, 1, &mut evicted); // frequency 2, queue 1, expires at 1 + 2 = 3; vtime 2
        assert_eq!(queue(&mq, 1), vec![1]);
        get(&mut mq, 2, &mut evicted); // vtime 3: 3 < 3 is false, stays
        assert_eq!(queue(&mq, 1), vec![1]);
        get(&mut mq, 3, &mut evicted); // vtime 4: expired, demoted with expiry 4 + 2
        assert_eq!((queue(&mq, 0), queue(&mq, 1)), (vec![1, 3, 2], vec![]));
        assert_eq!(mq.slab.get(mq.map.get(1).unwrap()).data.expires_at, 6);
        // Its frequency stays: the next hit puts it back in queue 1 (frequency 3).
        get(&mut mq, 1, &mut evicted);
        assert_eq!(queue(&mq, 1), vec![1]);
    }

    #[test]
    fn misses_not_admitted_do_not_tick_but_still_consume_qout() {
        let mut mq = Mq::with_params(2, 2, 100, 1.0).unwrap();
        let mut evicted = Vec::new();
        for key in [1, 2, 3] {
            get(&mut mq, key, &mut evicted);
        }
        assert_eq!(keys(&mq, &mq.qout), vec![1]);
        let vtime = mq.vtime;
        // Key 1 again but too large for the cache: not admitted, no tick, and out of Qout.
        assert!(!mq.get(&Request::new(1, 3), &mut evicted));
        assert_eq!(mq.vtime, vtime);
        assert!(mq.qout.is_empty());
    }

    #[test]
    fn qout_is_a_fifo_of_bytes_and_remove_clears_both() {
        // Capacity 4, Qout 0.5 × 4 = 2 bytes.
        let mut mq = Mq::with_params(4, 8, 100, 0.5).unwrap();
        let mut evicted = Vec::new();
        mq.get(&Request::new(1, 1), &mut evicted);
        mq.get(&Request::new(2, 3), &mut evicted);
        mq.get(&Request::new(3, 1), &mut evicted); // evicts 1 into Qout
        mq.get(&Request::new(4, 3), &mut evicted); // evicts 2 (3 bytes: too big for Qout)
        assert_eq!(keys(&mq, &mq.qout), vec![1]);
        mq.get(&Request::new(5, 1), &mut evicted); // evicts 3
        assert_eq!(keys(&mq, &mq.qout), vec![3, 1]);
        mq.get(&Request::new(6, 2), &mut evicted); // evicts 4 (3 bytes): not remembered
        assert_eq!(keys(&mq, &mq.qout), vec![3, 1]);
        mq.get(&Request::new(7, 2), &mut evicted); // evicts 5: Qout's oldest (1) goes
        assert_eq!(keys(&mq, &mq.qout), vec![5, 3]);
        assert!(!mq.remove(3), "only in Qout");
        assert_eq!(keys(&mq, &mq.qout), vec![5]);
        assert!(mq.remove(7));
        assert_eq!((mq.len(), mq.used_bytes()), (1, 2));
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(
            capacity in 1u64..64,
            queues in 1usize..5,
            lifetime in 1u64..20,
            steps in steps(20),
        ) {
            let mut mq = Mq::with_params(capacity, queues, lifetime, 2.0).unwrap();
            check_against_model(&mut mq, &steps)?;
            let resident: usize = mq.queues.iter().map(|list| list.len).sum();
            prop_assert_eq!(resident, mq.len());
            prop_assert!(mq.qout.bytes <= mq.qout_capacity);
            prop_assert_eq!(mq.map.len(), mq.len() + mq.qout.len);
        }
    }
}
