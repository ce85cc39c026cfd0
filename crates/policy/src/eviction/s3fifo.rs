//! S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction", SOSP'23, §4): a
//! small FIFO queue that filters one-hit wonders, a main FIFO queue run as CLOCK with a 2-bit
//! counter, and a ghost FIFO queue of keys recently evicted from the small queue.
//!
//! Decisions follow libCacheSim's `S3FIFO.c` (the version the `libcachesim` 0.3.5 package
//! bundles) with its defaults `small-size-ratio=0.1, ghost-size-ratio=0.9,
//! move-to-main-threshold=2`, where it differs from the paper's pseudocode:
//! - queue sizes are in bytes: small = ⌊0.1·capacity⌋, main = capacity − small, and the ghost
//!   queue remembers up to ⌊0.9·capacity⌋ bytes of evicted objects (the paper sizes the ghost
//!   like the main queue, in entries);
//! - a miss whose key is in the ghost queue goes straight to the main queue; any other miss
//!   goes to the small queue, except that until the first eviction, once the small queue is
//!   full, new objects fill the main queue instead;
//! - objects larger than the small queue are not admitted; an object of exactly the small
//!   queue's size makes room first and is then dropped, unless it was a ghost hit;
//! - eviction evicts from the main queue when it is over its size or the small queue is
//!   empty, otherwise from the small queue; moving an object from the small queue into the
//!   main queue never evicts from the main queue by itself (the next eviction does);
//! - an object moved from the small to the main queue starts over with counter 0; the small
//!   queue's counter is not capped, the main queue re-inserts with `min(counter, 3) − 1`.
//!
//! One deliberate difference: the `libcachesim` package refuses a cache whose small queue
//! would be 0 bytes (capacity below 10 bytes with the defaults) and stops the process; here
//! such a cache simply admits nothing.

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::error::PolicyError;
use crate::util::key_table::KeyTable;
use crate::util::prefetch::prefetch_read;
use crate::util::{store_at, List, Slab, NIL};

/// Which queue a node is linked into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Queue {
    Small,
    Main,
    /// A key (and the size it had) recently evicted from the small queue; not resident.
    Ghost,
}

/// Per-node state: the queue and the access counter.
#[derive(Clone, Copy, Debug)]
pub(super) struct Meta {
    pub(super) queue: Queue,
    /// Hits since insertion (small; outside the correlation window, if any) or since the last
    /// pass of the main queue's hand; saturates at 255, far above any threshold that changes
    /// a decision.
    pub(super) freq: u8,
}

/// Clock2Q+'s correlation window over the small queue (`super::clock2q_plus`): a hit on an
/// object admitted to the small queue less than `span` ago does not count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CorrelationWindow {
    /// How far back the window reaches: admissions to the small queue, or bytes admitted.
    pub span: f64,
    pub in_bytes: bool,
}

/// S3-FIFO over a byte capacity. Fields are visible to the sibling Clock2Q+ module, which is
/// this policy with a correlation window and a one-bit main CLOCK, and whose tests read them.
pub struct S3Fifo {
    capacity: u64,
    pub(super) small_capacity: u64,
    pub(super) main_capacity: u64,
    /// Zero: no ghost queue.
    pub(super) ghost_capacity: u64,
    move_to_main_threshold: u8,
    /// The main queue re-inserts an object with `min(counter, this) − 1` (S3-FIFO's 2-bit
    /// counter: 3; a one-bit CLOCK: 1).
    main_counter_max: u8,
    pub(super) window: Option<CorrelationWindow>,
    /// Admissions (or bytes admitted) to the small queue so far, with a window: the clock ages
    /// are read on.
    small_clock: u64,
    /// Per slab slot, with a window: the small clock when the object was admitted.
    admitted_at: Vec<u64>,
    /// Resident objects and ghost keys alike, so one probe tells a hit from a ghost hit.
    pub(super) map: KeyTable,
    pub(super) slab: Slab<()>,
    /// Per slab slot: queue and counter. Kept apart from the nodes so that a hit reads and
    /// writes this small dense array instead of pulling its node into cache.
    pub(super) meta: Vec<Meta>,
    /// Front: most recently inserted, in all three queues.
    pub(super) small: List,
    pub(super) main: List,
    pub(super) ghost: List,
    /// The last `lookup` missed on a ghost key: its `admit` goes to the main queue.
    ghost_hit: bool,
    /// An eviction has happened (libCacheSim's `has_evicted`).
    has_evicted: bool,
}

impl S3Fifo {
    /// An empty S3-FIFO cache of `capacity` bytes with libCacheSim's default parameters.
    pub fn new(capacity: u64) -> S3Fifo {
        S3Fifo::build(capacity, 0.1, 0.9, 2)
    }

    /// An empty S3-FIFO cache with the small queue at `small_size_ratio` of the capacity, a
    /// ghost queue of `ghost_size_ratio` of the capacity (0 for none), and objects leaving the
    /// small queue for the main queue when hit at least `move_to_main_threshold` times.
    pub fn with_params(
        capacity: u64,
        small_size_ratio: f64,
        ghost_size_ratio: f64,
        move_to_main_threshold: u8,
    ) -> Result<S3Fifo, PolicyError> {
        if !(0.0..=1.0).contains(&small_size_ratio) {
            return Err(PolicyError::refused(
                "s3fifo",
                format!("small-size-ratio must be between 0 and 1, got {small_size_ratio}"),
            ));
        }
        if !(ghost_size_ratio >= 0.0 && ghost_size_ratio.is_finite()) {
            return Err(PolicyError::refused(
                "s3fifo",
                format!("ghost-size-ratio must be a non-negative number, got {ghost_size_ratio}"),
            ));
        }
        Ok(S3Fifo::build(
            capacity,
            small_size_ratio,
            ghost_size_ratio,
            move_to_main_threshold,
        ))
    }

    fn build(capacity: u64, small_ratio: f64, ghost_ratio: f64, threshold: u8) -> S3Fifo {
        // Truncating float products, as libCacheSim sizes its queues.
        let small_capacity = ((capacity as f64 * small_ratio) as u64).min(capacity);
        S3Fifo {
            capacity,
            small_capacity,
            main_capacity: capacity - small_capacity,
            ghost_capacity: (capacity as f64 * ghost_ratio) as u64,
            move_to_main_threshold: threshold,
            main_counter_max: 3,
            window: None,
            small_clock: 0,
            admitted_at: Vec::new(),
            map: KeyTable::default(),
            slab: Slab::default(),
            meta: Vec::new(),
            small: List::default(),
            main: List::default(),
            ghost: List::default(),
            ghost_hit: false,
            has_evicted: false,
        }
    }

    /// The main queue as a CLOCK whose counters go up to `max` (1: one reference bit).
    pub fn with_main_counter_max(mut self, max: u8) -> S3Fifo {
        self.main_counter_max = max.max(1);
        self
    }

    /// Hits in the small queue count only outside a correlation window of `ratio` × the small
    /// queue's size, in admissions to it (or in bytes admitted, `in_bytes`).
    pub fn with_correlation_window(mut self, ratio: f64, in_bytes: bool) -> S3Fifo {
        self.window = Some(CorrelationWindow {
            span: self.small_capacity as f64 * ratio,
            in_bytes,
        });
        self
    }

    /// Frees a node that is in no list any more.
    #[inline]
    fn forget(&mut self, index: u32) {
        self.map.remove(self.slab.get(index).key);
        self.slab.release(index);
    }

    /// Evicts until `size` more bytes fit.
    #[inline]
    fn make_room(&mut self, size: u64, evicted: &mut Vec<Evicted>) {
        while self.small.bytes + self.main.bytes + size > self.capacity {
            if self.small.is_empty() && self.main.is_empty() {
                break;
            }
            self.has_evicted = true;
            if self.main.bytes > self.main_capacity || self.small.bytes == 0 {
                self.evict_main(evicted);
            } else {
                self.evict_small(evicted);
            }
        }
    }

    /// Moves hit objects from the small queue's tail to the main queue until one unhit object
    /// is evicted (its key entering the ghost queue) or the small queue is empty.
    fn evict_small(&mut self, evicted: &mut Vec<Evicted>) {
        while self.small.bytes > 0 {
            let tail = self.small.tail;
            self.small.unlink(&mut self.slab, tail);
            let meta = &mut self.meta[tail as usize];
            if meta.freq >= self.move_to_main_threshold {
                *meta = Meta {
                    queue: Queue::Main,
                    freq: 0,
                };
                self.main.push_front(&mut self.slab, tail);
                continue;
            }
            let node = self.slab.get(tail);
            let (key, size) = (node.key, node.size);
            evicted.push(Evicted { key, size });
            if self.ghost_capacity > 0 && u64::from(size) <= self.ghost_capacity {
                while self.ghost.bytes + u64::from(size) > self.ghost_capacity {
                    let Some(oldest) = self.ghost.pop_back(&mut self.slab) else {
                        break;
                    };
                    self.forget(oldest);
                }
                self.meta[tail as usize].queue = Queue::Ghost;
                self.ghost.push_front(&mut self.slab, tail);
            } else {
                self.forget(tail);
            }
            return;
        }
    }

    /// CLOCK over the main queue: re-inserts objects with a non-zero counter (capped at
    /// `main_counter_max`, then decremented) until one with counter 0 is evicted.
    fn evict_main(&mut self, evicted: &mut Vec<Evicted>) {
        while self.main.bytes > 0 {
            let tail = self.main.tail;
            self.main.unlink(&mut self.slab, tail);
            let meta = &mut self.meta[tail as usize];
            if meta.freq >= 1 {
                meta.freq = meta.freq.min(self.main_counter_max) - 1;
                self.main.push_front(&mut self.slab, tail);
                continue;
            }
            let node = self.slab.get(tail);
            evicted.push(node.evicted());
            self.forget(tail);
            return;
        }
    }

    /// Admits the object of a request that missed (`from_ghost`: its key was just found in
    /// the ghost queue), or declines it as the module documentation says.
    #[inline]
    fn insert(&mut self, request: &Request, from_ghost: bool, evicted: &mut Vec<Evicted>) {
        let size = u64::from(request.size);
        if size > self.small_capacity {
            return;
        }
        self.make_room(size, evicted);
        let queue = if from_ghost {
            Queue::Main
        } else if size >= self.small_capacity {
            return;
        } else if !self.has_evicted && self.small.bytes >= self.small_capacity {
            Queue::Main
        } else {
            Queue::Small
        };
        let index = self.slab.alloc(request.key, request.size, ());
        let meta = Meta { queue, freq: 0 };
        store_at(&mut self.meta, index, meta);
        if let Some(window) = self.window {
            let admitted_at = if queue == Queue::Small {
                self.small_clock += if window.in_bytes { size } else { 1 };
                self.small_clock
            } else {
                0
            };
            store_at(&mut self.admitted_at, index, admitted_at);
        }
        let list = match queue {
            Queue::Main => &mut self.main,
            _ => &mut self.small,
        };
        list.push_front(&mut self.slab, index);
        self.map.insert(request.key, index);
    }

    /// Drops the ghost entry of `key`, whose node is `index`.
    #[inline]
    fn drop_ghost(&mut self, key: u64, index: u32) {
        self.map.remove(key);
        self.ghost.unlink(&mut self.slab, index);
        self.slab.release(index);
    }
}

impl EvictionPolicy for S3Fifo {
    fn space(&self) -> Space {
        Space::of_lists(self.capacity, &[&self.small, &self.main])
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.space().check()?;
        [&self.small, &self.main]
            .iter()
            .try_for_each(|list| list.check(&self.slab))
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        self.ghost_hit = false;
        let Some(index) = self.map.get(request.key) else {
            return false;
        };
        let meta = &mut self.meta[index as usize];
        if meta.queue != Queue::Ghost {
            let counts = match self.window {
                // libCacheSim compares the integer age with the window as a double.
                Some(window) if meta.queue == Queue::Small => {
                    (self.small_clock - self.admitted_at[index as usize]) as f64 >= window.span
                }
                _ => true,
            };
            if counts {
                meta.freq = meta.freq.saturating_add(1);
            }
            return true;
        }
        self.drop_ghost(request.key, index);
        self.ghost_hit = true;
        false
    }

    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        let mut from_ghost = std::mem::take(&mut self.ghost_hit);
        if let Some(index) = self.map.get(request.key) {
            if self.meta[index as usize].queue != Queue::Ghost {
                return;
            }
            // Admitted without a lookup first: the ghost entry still counts.
            self.drop_ghost(request.key, index);
            from_ghost = true;
        }
        self.insert(request, from_ghost, evicted);
    }

    #[inline]
    fn get(&mut self, request: &Request, evicted: &mut Vec<Evicted>) -> bool {
        if self.lookup(request) {
            return true;
        }
        let from_ghost = std::mem::take(&mut self.ghost_hit);
        self.insert(request, from_ghost, evicted);
        false
    }

    /// libCacheSim's `S3FIFO_can_insert` refuses an object larger than the small queue before
    /// it asks an admission filter, ghost hit or not.
    #[inline]
    fn admission_precheck(&self, request: &Request) -> bool {
        u64::from(request.size) <= self.small_capacity
    }

    /// A resident object: in the small or main queue, not a ghost.
    fn contains(&self, key: u64) -> Option<bool> {
        let resident = self
            .map
            .get(key)
            .is_some_and(|index| self.meta[index as usize].queue != Queue::Ghost);
        Some(resident)
    }

    /// Drops a resident object; a ghost entry for `key` is forgotten too (the object's history
    /// goes with it) but does not count as resident.
    fn remove(&mut self, key: u64) -> bool {
        let Some(index) = self.map.remove(key) else {
            return false;
        };
        let queue = self.meta[index as usize].queue;
        let (slab, list) = (
            &mut self.slab,
            match queue {
                Queue::Small => &mut self.small,
                Queue::Main => &mut self.main,
                Queue::Ghost => &mut self.ghost,
            },
        );
        list.unlink(slab, index);
        self.slab.release(index);
        queue != Queue::Ghost
    }

    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.map.prefetch(key);
    }

    /// A hit touches only the queue tag and counter.
    #[inline]
    fn prefetch_node(&self, key: u64) {
        if let Some(index) = self.map.get(key) {
            prefetch_read(&self.meta[index as usize]);
        }
    }

    /// Loads what the next eviction touches: the tail of the queue it will take from (and
    /// the tail's newer neighbour and table slot), plus the ghost queue's tail slot when an
    /// object is about to become a ghost.
    #[inline]
    fn prefetch_victims(&self) {
        let from_main = self.main.bytes > self.main_capacity || self.small.bytes == 0;
        let tail = if from_main {
            self.main.tail
        } else {
            if self.ghost.tail != NIL {
                self.map.prefetch(self.slab.get(self.ghost.tail).key);
            }
            self.small.tail
        };
        if tail != NIL {
            self.map.prefetch(self.slab.get(tail).key);
            prefetch_read(&self.meta[tail as usize]);
            let newer = self.slab.prev(tail);
            if newer != NIL {
                prefetch_read(self.slab.get(newer));
            }
        }
    }
}

/// Also the test helpers of Clock2Q+, which is an S3-FIFO.
#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::util::model_check::{check_against_model, steps};
    use proptest::prelude::*;

    pub(in crate::eviction) fn play(
        cache: &mut S3Fifo,
        keys: &[u64],
        size: u32,
    ) -> (Vec<bool>, Vec<u64>) {
        let mut evicted = Vec::new();
        let hits = keys
            .iter()
            .map(|&key| cache.get(&Request::new(key, size), &mut evicted))
            .collect();
        (hits, evicted.iter().map(|e| e.key).collect())
    }

    pub(in crate::eviction) fn queue_keys(cache: &S3Fifo, queue: Queue) -> Vec<u64> {
        let list = match queue {
            Queue::Small => &cache.small,
            Queue::Main => &cache.main,
            Queue::Ghost => &cache.ghost,
        };
        let mut keys = Vec::new();
        let mut index = list.head;
        while index != crate::util::NIL {
            keys.push(cache.slab.get(index).key);
            index = cache.slab.next(index);
        }
        keys
    }

    #[test]
    fn queue_sizes_truncate_like_libcachesim() {
        let cache = S3Fifo::new(1005);
        assert_eq!(
            (
                cache.small_capacity,
                cache.main_capacity,
                cache.ghost_capacity
            ),
            (100, 905, 904)
        );
        assert!(S3Fifo::with_params(10, 1.5, 0.9, 2).is_err());
        assert!(S3Fifo::with_params(10, 0.1, f64::NAN, 2).is_err());
    }

    #[test]
    fn one_hit_wonders_leave_through_the_ghost_and_come_back_to_main() {
        // 100 bytes: small 10 (objects of 5 bytes: two fit), main 90, ghost 90.
        let mut cache = S3Fifo::new(100);
        // Fill: after two objects the small queue is full, and before any eviction the rest
        // go to the main queue, until the cache holds 20 objects.
        let keys: Vec<u64> = (1..=20).collect();
        play(&mut cache, &keys, 5);
        assert_eq!(queue_keys(&cache, Queue::Small), vec![2, 1]);
        assert_eq!(cache.main.len, 18);
        // Key 21: main is at its size, small is not empty → evict from small: 1 (never hit)
        // goes to the ghost queue.
        let (_, evicted) = play(&mut cache, &[21], 5);
        assert_eq!(evicted, vec![1]);
        assert_eq!(queue_keys(&cache, Queue::Small), vec![21, 2]);
        assert_eq!(queue_keys(&cache, Queue::Ghost), vec![1]);
        // Key 1 again: a ghost hit (a miss) that goes to the main queue; main is not over its
        // size, so the small queue's tail, 2, makes room.
        let (hits, evicted) = play(&mut cache, &[1], 5);
        assert_eq!((hits, evicted), (vec![false], vec![2]));
        assert_eq!(queue_keys(&cache, Queue::Main)[0], 1);
        assert_eq!(queue_keys(&cache, Queue::Ghost), vec![2]);
        assert_eq!(queue_keys(&cache, Queue::Small), vec![21]);
    }

    #[test]
    fn small_queue_promotes_objects_hit_twice() {
        let mut cache = S3Fifo::new(100);
        let keys: Vec<u64> = (1..=20).collect();
        play(&mut cache, &keys, 5);
        // Hit 1 twice (threshold 2) and 2 once.
        let (hits, _) = play(&mut cache, &[1, 1, 2], 5);
        assert_eq!(hits, vec![true, true, true]);
        // Evicting from small: 1 moves to main (no eviction), then 2 (hit once) is evicted.
        let (_, evicted) = play(&mut cache, &[30], 5);
        assert_eq!(evicted, vec![2]);
        assert_eq!(queue_keys(&cache, Queue::Main)[0], 1);
        // Main now holds 95 bytes > 90: the next eviction takes main's oldest unhit object, 3.
        let (_, evicted) = play(&mut cache, &[31], 5);
        assert_eq!(evicted, vec![3]);
    }

    #[test]
    fn main_queue_is_a_clock_with_counters_capped_at_three() {
        // 10 bytes: small 2, main 8, no ghost queue, promotion after one hit; 1-byte objects.
        let mut cache = S3Fifo::with_params(10, 0.2, 0.0, 1).unwrap();
        let keys: Vec<u64> = (1..=10).collect();
        play(&mut cache, &keys, 1);
        assert_eq!(queue_keys(&cache, Queue::Small), vec![2, 1]);
        assert_eq!(
            queue_keys(&cache, Queue::Main),
            vec![10, 9, 8, 7, 6, 5, 4, 3]
        );
        play(&mut cache, &[3, 3, 3, 3, 3, 4], 1);
        // The small queue's unhit tail leaves, and no ghost remembers it.
        assert_eq!(play(&mut cache, &[11], 1).1, vec![1]);
        assert!(cache.ghost.is_empty());
        // 2, hit once, moves to the main queue (now over its size) and 11 is evicted.
        play(&mut cache, &[2], 1);
        assert_eq!(play(&mut cache, &[12], 1).1, vec![11]);
        assert_eq!(
            queue_keys(&cache, Queue::Main),
            vec![2, 10, 9, 8, 7, 6, 5, 4, 3]
        );
        // Main over its size: 3 (5 hits → min(5, 3) − 1 = 2) and 4 (1 hit → 0) go round again,
        // 5 is evicted.
        assert_eq!(play(&mut cache, &[13], 1).1, vec![5]);
        assert_eq!(
            queue_keys(&cache, Queue::Main),
            vec![4, 3, 2, 10, 9, 8, 7, 6]
        );
        let freq = |key: u64| cache.meta[cache.map.get(key).unwrap() as usize].freq;
        assert_eq!((freq(3), freq(4)), (2, 0));
    }

    #[test]
    fn objects_not_smaller_than_the_small_queue_are_not_admitted() {
        let mut cache = S3Fifo::new(100);
        let mut evicted = Vec::new();
        for key in 1..=10 {
            cache.get(&Request::new(key, 10), &mut evicted);
        }
        // 10 objects of 10 bytes would not fit the rule: size 10 ≥ small 10, none admitted.
        assert_eq!(cache.len(), 0);
        for key in 1..=11 {
            cache.get(&Request::new(key, 9), &mut evicted);
        }
        assert_eq!(cache.len(), 11);
        // Exactly the small queue's size: room is made (one eviction) but nothing is added.
        assert!(!cache.get(&Request::new(50, 10), &mut evicted));
        assert_eq!(evicted.len(), 1);
        assert_eq!(cache.len(), 10);
        assert!(!cache.lookup(&Request::new(50, 10)));
        // Larger: nothing happens at all.
        evicted.clear();
        assert!(!cache.get(&Request::new(51, 11), &mut evicted));
        assert!(evicted.is_empty());
        assert_eq!(cache.len(), 10);
    }

    #[test]
    fn remove_drops_residents_and_forgets_ghosts() {
        let mut cache = S3Fifo::new(100);
        let keys: Vec<u64> = (1..=21).collect();
        play(&mut cache, &keys, 5);
        assert_eq!(queue_keys(&cache, Queue::Ghost), vec![1]);
        assert!(!cache.remove(1), "a ghost is not resident");
        assert!(cache.ghost.is_empty());
        // 1 is no longer a ghost: it comes back to the small queue.
        play(&mut cache, &[1], 5);
        assert_eq!(queue_keys(&cache, Queue::Small)[0], 1);
        assert!(cache.remove(1));
        assert!(cache.remove(5));
        assert!(!cache.remove(5));
        assert_eq!((cache.len(), cache.used_bytes()), (18, 90));
    }

    #[test]
    fn admit_without_lookup_still_honours_the_ghost() {
        let mut cache = S3Fifo::new(100);
        let keys: Vec<u64> = (1..=21).collect();
        play(&mut cache, &keys, 5);
        assert_eq!(queue_keys(&cache, Queue::Ghost), vec![1]);
        let mut evicted = Vec::new();
        cache.admit(&Request::new(1, 5), &mut evicted);
        assert_eq!(queue_keys(&cache, Queue::Main)[0], 1);
        // 1 left the ghost queue; 2, evicted from the small queue to make room, entered it.
        assert_eq!(queue_keys(&cache, Queue::Ghost), vec![2]);
        // Admitting a resident key changes nothing.
        cache.admit(&Request::new(1, 5), &mut evicted);
        assert_eq!((cache.len(), evicted.len()), (20, 1));
    }

    #[test]
    fn split_lookup_and_admit_decide_like_get() {
        let mut split = S3Fifo::new(200);
        let mut fused = S3Fifo::new(200);
        let mut evicted = Vec::new();
        let mut state = 7u64;
        for _ in 0..5000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = (state >> 33) % 60;
            let size = 1 + ((state >> 20) % 25) as u32;
            let request = Request::new(key, size);
            let hit = split.lookup(&request);
            if !hit {
                split.admit(&request, &mut evicted);
            }
            assert_eq!(hit, fused.get(&request, &mut evicted));
            assert_eq!(
                queue_keys(&split, Queue::Small),
                queue_keys(&fused, Queue::Small)
            );
            assert_eq!(
                queue_keys(&split, Queue::Main),
                queue_keys(&fused, Queue::Main)
            );
            assert_eq!(
                queue_keys(&split, Queue::Ghost),
                queue_keys(&fused, Queue::Ghost)
            );
        }
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(capacity in 1u64..200, steps in steps(20)) {
            check_against_model(&mut S3Fifo::new(capacity), &steps)?;
            check_against_model(&mut S3Fifo::with_params(capacity, 0.3, 0.0, 1).unwrap(), &steps)?;
        }
    }
}
