//! W-TinyLFU (Einziger, Friedman & Manes, "TinyLFU: A Highly Efficient Cache Admission
//! Policy", ACM TOS 13(4), 2017, §3–4), over byte sizes, with the same decisions as
//! libCacheSim's `WTinyLFU.c` (the version bundled in the `libcachesim` 0.3.5 Python package)
//! and its defaults (`main-cache=SLRU`, `window-size=0.01`).
//!
//! A small LRU window takes every new object; the main cache (any policy of ours that can
//! serve inside another, [`EvictionPolicy::serves_inside`]) holds the rest. When the cache is
//! full, the window's LRU object competes with the main cache's next victim: the one a
//! frequency sketch estimates as more popular stays.
//!
//! What libCacheSim does, and so do we, where it departs from the paper or the paper leaves it
//! open:
//! - Sizes: the window gets `⌊capacity × window-size⌋` bytes and the main cache the rest. The
//!   window's size only bounds what is admitted: an object larger than the window (or than
//!   what the main cache admits, e.g. SLRU's probationary segment) is never inserted. The
//!   window itself grows into whatever the main cache leaves free.
//! - `main-cache=SLRU` is an SLRU with `seg-size=1:4` (20 % probationary, 80 % protected, as
//!   the paper's §4). Other main caches get their defaults.
//! - Eviction, run while the object would not fit the whole cache: the window's LRU object
//!   moves to the main cache for free while the main cache has room for it (and the round goes
//!   on with the next window object); otherwise it competes with the main cache's next victim
//!   and wins only with a strictly higher estimate (ties keep the main cache's object, as the
//!   paper). A winner evicts that victim and moves into the main cache (the main cache's own
//!   insertion may evict more), a loser leaves the cache; either ends the round. With an empty
//!   window the main cache evicts its victim.
//! - The sketch counts an object when it enters the window, on every hit in the main cache
//!   (hits in the window are not counted), and each time it leaves the window (moved or
//!   evicted). There is no doorkeeper Bloom filter.
//! - The sketch is libCacheSim's "minimal increment" counting Bloom filter, which in fact
//!   increments all its counters (no conservative update): 10 hash functions
//!   `h_i = (a + i·b) mod width` over 32-bit counters, with `a` and `b` the low 32 bits of two
//!   seeded XXH64 hashes of the key, and `width = ⌈14.38 × main capacity⌉` counters (sized
//!   for a 0.1 % error at one entry per byte of the main cache, capped at `i32::MAX`). The
//!   paper's sketch has 4-bit counters and a width in proportion to the number of cached
//!   objects.
//! - Aging (the paper's reset): every `32 × main capacity` hits in the main cache (not every
//!   `W` requests) all counters are halved. Both sizes are in bytes, so with real object sizes
//!   the sketch is very wide and rarely ages.
//! - The main cache's own `insert` places an object without making room: an LRU or FIFO main
//!   cache that takes a winner after evicting a smaller victim runs over its own capacity until
//!   later rounds (the whole cache stays within its capacity).
//! - A hit in an SLRU main cache can evict (its cooling); [`EvictionPolicy::lookup`] has no
//!   output for evictions, so they are reported by the next [`EvictionPolicy::admit`].
//!
//! Where we differ from libCacheSim:
//! - The main cache is any policy of ours that can serve inside another: `slru`, `lru` and
//!   `fifo` (libCacheSim also takes LFU, CLOCK, ARC, LeCaR, Cacheus, Hyperbolic, LHD and SIEVE,
//!   which ours cannot yet); others are refused when the cache is built.
//! - A window hit does not also look the key up in the main cache (libCacheSim's `find` asks
//!   both; a key is never in both, and our main caches change nothing on a miss).
//! - Counters saturate instead of wrapping at 2³², which no trace reaches.
//! - `seed` picks the sketch's hash seeds: 0 hashes exactly as libCacheSim (so results match it
//!   exactly), others differently. Widths too large to allocate densely (over 2²⁴ counters, as
//!   with byte sizes) are held sparsely, only the counters touched, which changes nothing but
//!   memory.

use std::cell::Cell;

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::util::key_table::KeyTable;
use crate::util::keyed_queue::KeyedQueue;
use crate::util::prefetch::prefetch_read;

/// The sketch's target error rate, which sets its width and depth (libCacheSim's `0.001`).
const SKETCH_ERROR: f64 = 0.001;
/// Main-cache hits between agings, per byte of the main cache (libCacheSim's "sample size").
const AGING_HITS_PER_BYTE: u64 = 32;
/// libCacheSim's `HASH_SEED0` and `HASH_SEED1`, the sketch's hash seeds with `seed=0`.
const LIBCACHESIM_SEEDS: (u64, u64) = (0x1234_5678, 0x1234_4321);
/// Widths up to this many counters are held densely (64 MiB); wider sketches hold only the
/// counters touched.
const DENSE_WIDTH_LIMIT: u32 = 1 << 24;

/// W-TinyLFU over a byte capacity.
pub struct WTinyLfu {
    capacity: u64,
    window_capacity: u64,
    /// The window LRU, front most recently used.
    window: KeyedQueue,
    main: Box<dyn EvictionPolicy>,
    sketch: Sketch,
    /// Main-cache hits since the sketch last aged.
    hits_since_aging: u64,
    aging_period_hits: u64,
    /// The window's and the main cache's victims whose counters were last prefetched.
    prefetched_victims: Cell<(Option<u64>, Option<u64>)>,
}

impl WTinyLfu {
    /// An empty W-TinyLFU cache of `capacity` bytes whose window takes `window_size` of it,
    /// around `main`, a policy of the remaining `capacity − ⌊capacity × window_size⌋` bytes that
    /// [`serves_inside`](EvictionPolicy::serves_inside) (see [`WTinyLfu::main_capacity`]).
    /// `seed` 0 hashes the sketch as libCacheSim does.
    pub fn new(
        capacity: u64,
        window_size: f64,
        main: Box<dyn EvictionPolicy>,
        seed: u64,
    ) -> WTinyLfu {
        let window_capacity = WTinyLfu::window_capacity(capacity, window_size);
        debug_assert!(main.serves_inside());
        let main_capacity = main.capacity_bytes();
        WTinyLfu {
            capacity,
            window_capacity,
            window: KeyedQueue::default(),
            main,
            sketch: Sketch::new(main_capacity, seed),
            hits_since_aging: 0,
            aging_period_hits: AGING_HITS_PER_BYTE.saturating_mul(main_capacity),
            prefetched_victims: Cell::new((None, None)),
        }
    }

    /// The window's bytes in a cache of `capacity` (the product truncates, as libCacheSim's).
    pub fn window_capacity(capacity: u64, window_size: f64) -> u64 {
        (capacity as f64 * window_size) as u64
    }

    /// The main cache's bytes in a cache of `capacity`.
    pub fn main_capacity(capacity: u64, window_size: f64) -> u64 {
        capacity - WTinyLfu::window_capacity(capacity, window_size)
    }

    /// One eviction round (libCacheSim's `WTinyLFU_evict`); false when nothing could leave.
    fn evict_round(&mut self, evicted: &mut Vec<Evicted>) -> bool {
        loop {
            let Some(candidate) = self.window.oldest() else {
                return self.main.evict_one(evicted);
            };
            let moving = Request::new(candidate.key, candidate.size);
            let mut done = true;
            if self.main.space().fits(u64::from(candidate.size)) {
                self.window.evict(self.window.tail());
                self.main.insert(&moving, evicted);
                done = false;
            } else {
                let wins = self.main.next_victim().is_some_and(|victim| {
                    self.sketch.estimate(candidate.key) > self.sketch.estimate(victim.key)
                });
                if wins {
                    self.main.evict_one(evicted);
                    self.window.evict(self.window.tail());
                    self.main.insert(&moving, evicted);
                } else {
                    evicted.push(self.window.evict(self.window.tail()));
                }
            }
            self.sketch.add(candidate.key);
            if done {
                return true;
            }
        }
    }
}

impl EvictionPolicy for WTinyLfu {
    fn space(&self) -> Space {
        let main = self.main.space();
        Space {
            capacity_bytes: self.capacity,
            used_bytes: self.window.bytes() + main.used_bytes,
            objects: self.window.len() + main.objects,
        }
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        if let Some(index) = self.window.find(request.key) {
            self.window.move_to_front(index);
            return true;
        }
        if !self.main.lookup(request) {
            return false;
        }
        self.sketch.add(request.key);
        self.hits_since_aging += 1;
        if self.hits_since_aging >= self.aging_period_hits {
            self.hits_since_aging = 0;
            self.sketch.age();
        }
        true
    }

    /// Also reports the objects that main-cache hits evicted since the last call.
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        self.main.drain_hit_evictions(evicted);
        if !self.can_insert(request) || self.window.find(request.key).is_some() {
            return;
        }
        let size = u64::from(request.size);
        while self.window.bytes() + self.main.used_bytes() + size > self.capacity {
            if !self.evict_round(evicted) {
                return;
            }
        }
        self.window.insert_front(request.key, request.size);
        self.sketch.add(request.key);
    }

    fn remove(&mut self, key: u64) -> bool {
        self.window.remove(key).is_some() || self.main.remove(key)
    }

    /// Main-cache hits may evict (SLRU), reported only by the next `admit`.
    fn contains(&self, key: u64) -> Option<bool> {
        if self.window.find(key).is_some() {
            return Some(true);
        }
        self.main.contains(key)
    }

    fn drain_hit_evictions(&mut self, evicted: &mut Vec<Evicted>) {
        self.main.drain_hit_evictions(evicted);
    }

    /// No larger than the whole cache, the window, or what the main cache admits.
    fn can_insert(&self, request: &Request) -> bool {
        let size = u64::from(request.size);
        size <= self.capacity && size <= self.window_capacity && self.main.can_insert(request)
    }

    /// Also the key's counters, which a main-cache hit or an admission adds to.
    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.window.prefetch_slot(key);
        self.main.prefetch_slot(key);
        self.sketch.prefetch(key);
    }

    #[inline]
    fn prefetch_node(&self, key: u64) {
        self.main.prefetch_node(key);
    }

    /// The window's LRU object and the main cache's victim are compared on the next eviction:
    /// load their counters.
    /// Only when they changed: they stay the same from one miss to the next.
    #[inline]
    fn prefetch_victims(&self) {
        let candidate = self.window.oldest().map(|candidate| candidate.key);
        let victim = self.main.next_victim().map(|victim| victim.key);
        if (candidate, victim) != self.prefetched_victims.get() {
            self.prefetched_victims.set((candidate, victim));
            for key in [candidate, victim].into_iter().flatten() {
                self.sketch.prefetch(key);
            }
        }
        self.main.prefetch_victims();
    }
}

/// libCacheSim's counting Bloom filter: `depth` counters per key, all incremented on an add,
/// the smallest read as the estimate.
struct Sketch {
    counters: Counters,
    width: u32,
    /// `⌊(2^64 − 1) / width⌋ + 1`, for [`Sketch::index`].
    width_inverse: u64,
    depth: u32,
    seeds: (u64, u64),
}

/// The counters, dense or (for widths too large to allocate) only those touched.
enum Counters {
    Dense(Vec<u32>),
    Sparse {
        table: KeyTable<u32>,
        /// Every index in `table`, for aging.
        touched: Vec<u64>,
    },
}

impl Sketch {
    /// A sketch sized as libCacheSim sizes it for `entries` (the main cache's bytes).
    fn new(entries: u64, seed: u64) -> Sketch {
        let counters_per_entry =
            -SKETCH_ERROR.ln() / (std::f64::consts::LN_2 * std::f64::consts::LN_2);
        let depth = (std::f64::consts::LN_2 * counters_per_entry).ceil() as u32;
        // libCacheSim passes the capacity as a C `int`, which wraps above `i32::MAX`.
        let entries = entries as i32;
        let wanted = (counters_per_entry * f64::from(entries))
            .ceil()
            .min(f64::from(i32::MAX)) as i64;
        let width = if wanted < i64::from(depth) {
            depth * 2
        } else {
            wanted as u32
        };
        let counters = if width <= DENSE_WIDTH_LIMIT {
            Counters::Dense(vec![0; width as usize])
        } else {
            Counters::Sparse {
                table: KeyTable::default(),
                touched: Vec::new(),
            }
        };
        Sketch {
            counters,
            width,
            width_inverse: (u64::MAX / u64::from(width)).wrapping_add(1),
            depth,
            seeds: sketch_seeds(seed),
        }
    }

    /// The two 32-bit hashes whose combinations `(a + i·b) mod width` index `key`'s counters.
    #[inline]
    fn hashes(&self, key: u64) -> (u32, u32) {
        (
            xxh64_of_u64(key, self.seeds.0) as u32,
            xxh64_of_u64(key, self.seeds.1) as u32,
        )
    }

    /// `(a + i·b) mod width`, the remainder by Lemire's multiply-shift (exact for 32-bit
    /// operands), as a division costs more than the memory access it addresses.
    #[inline]
    fn index(&self, (a, b): (u32, u32), i: u32) -> u32 {
        let hash = a.wrapping_add(i.wrapping_mul(b));
        let fraction = self.width_inverse.wrapping_mul(u64::from(hash));
        ((u128::from(fraction) * u128::from(self.width)) >> 64) as u32
    }

    /// Counts `key` once: every one of its counters goes up (twice where two of its hashes
    /// meet, as in libCacheSim).
    fn add(&mut self, key: u64) {
        let hashes = self.hashes(key);
        for i in 0..self.depth {
            let index = self.index(hashes, i);
            match &mut self.counters {
                Counters::Dense(counters) => {
                    let counter = &mut counters[index as usize];
                    *counter = counter.saturating_add(1);
                }
                Counters::Sparse { table, touched } => match table.get_mut(u64::from(index)) {
                    // u32::MAX marks an empty slot of the table.
                    Some(count) => *count = (*count + 1).min(u32::MAX - 1),
                    None => {
                        table.insert(u64::from(index), 1);
                        touched.push(u64::from(index));
                    }
                },
            }
        }
    }

    /// The smallest of `key`'s counters.
    fn estimate(&self, key: u64) -> u32 {
        let hashes = self.hashes(key);
        (0..self.depth)
            .map(|i| self.index(hashes, i))
            .map(|index| match &self.counters {
                Counters::Dense(counters) => counters[index as usize],
                Counters::Sparse { table, .. } => table.get(u64::from(index)).unwrap_or(0),
            })
            .min()
            .unwrap_or(0)
    }

    /// Starts loading `key`'s counters; a hint with no effect on results.
    #[inline]
    fn prefetch(&self, key: u64) {
        let hashes = self.hashes(key);
        for i in 0..self.depth {
            let index = self.index(hashes, i);
            match &self.counters {
                Counters::Dense(counters) => prefetch_read(&counters[index as usize]),
                Counters::Sparse { table, .. } => table.prefetch(u64::from(index)),
            }
        }
    }

    /// Halves every counter.
    fn age(&mut self) {
        match &mut self.counters {
            Counters::Dense(counters) => counters.iter_mut().for_each(|count| *count >>= 1),
            Counters::Sparse { table, touched } => {
                let mut position = 0;
                while position < touched.len() {
                    let index = touched[position];
                    let count = table.get_mut(index).expect("touched counters are held");
                    *count >>= 1;
                    if *count == 0 {
                        table.remove(index);
                        touched.swap_remove(position);
                    } else {
                        position += 1;
                    }
                }
            }
        }
    }
}

/// The sketch's two hash seeds: libCacheSim's for `seed` 0, others derived from `seed`.
fn sketch_seeds(seed: u64) -> (u64, u64) {
    if seed == 0 {
        return LIBCACHESIM_SEEDS;
    }
    let spread = xxh64_of_u64(seed, 0);
    (
        LIBCACHESIM_SEEDS.0 ^ spread,
        LIBCACHESIM_SEEDS.1 ^ spread.rotate_left(32),
    )
}

/// XXH64 of the 8 little-endian bytes of `value`, which is how libCacheSim hashes an object id.
#[inline]
fn xxh64_of_u64(value: u64, seed: u64) -> u64 {
    xxhash_rust::xxh64::xxh64(&value.to_le_bytes(), seed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eviction::fifo::Fifo;
    use crate::eviction::lru::Lru;
    use crate::eviction::slru::Slru;
    use crate::util::model_check::{check_against_model, steps};
    use proptest::prelude::*;

    fn with_slru(capacity: u64, window_size: f64) -> WTinyLfu {
        let main_capacity = WTinyLfu::main_capacity(capacity, window_size);
        let main = Slru::with_weights(main_capacity, &[1, 4]).unwrap();
        WTinyLfu::new(capacity, window_size, Box::new(main), 0)
    }

    fn with_lru(capacity: u64, window_size: f64) -> WTinyLfu {
        let main = Lru::new(WTinyLfu::main_capacity(capacity, window_size));
        WTinyLfu::new(capacity, window_size, Box::new(main), 0)
    }

    #[test]
    fn xxh64_matches_the_specification() {
        // Reference values of XXH64 over the 8 little-endian bytes of the value (from the
        // `xxhash` Python package), with seed 0 and libCacheSim's two seeds.
        assert_eq!(xxh64_of_u64(0, 0), 0x34C9_6ACD_CADB_1BBB);
        assert_eq!(
            xxh64_of_u64(0x0123_4567_89AB_CDEF, 0),
            0xEA3C_5208_1E98_43EC
        );
        assert_eq!(xxh64_of_u64(42, 0x1234_5678), 0xF78B_4AD5_3460_7625);
        assert_eq!(xxh64_of_u64(42, 0x1234_4321), 0xCA6B_8301_1840_5888);
    }

    #[test]
    fn multiply_shift_remainders_equal_division() {
        for width in [1u32, 2, 3, 20, 14_378, 1 << 24, 2_147_483_647, u32::MAX] {
            let mut sketch = Sketch::new(1000, 0);
            sketch.width = width;
            sketch.width_inverse = (u64::MAX / u64::from(width)).wrapping_add(1);
            for a in [
                0u32,
                1,
                7,
                width - 1,
                width.wrapping_add(5),
                u32::MAX - 1,
                u32::MAX,
            ] {
                for i in 0..10u32 {
                    let b = a.rotate_left(13) ^ 0x9E37_79B9;
                    let expected = a.wrapping_add(i.wrapping_mul(b)) % width;
                    assert_eq!(sketch.index((a, b), i), expected, "width {width}, a {a}");
                }
            }
        }
    }

    #[test]
    fn sketch_is_sized_as_libcachesim_sizes_it() {
        let sketch = Sketch::new(1000, 0);
        assert_eq!((sketch.width, sketch.depth), (14378, 10));
        assert_eq!(
            Sketch::new(0, 0).width,
            20,
            "too few counters: twice the depth"
        );
        assert_eq!(Sketch::new(1 << 31, 0).width, 20, "a C int wraps negative");
        assert_eq!(Sketch::new(1 << 30, 0).width, i32::MAX as u32);
        assert!(matches!(
            Sketch::new(1 << 30, 0).counters,
            Counters::Sparse { .. }
        ));
    }

    #[test]
    fn sketch_counts_ages_and_dense_equals_sparse() {
        let mut dense = Sketch::new(100_000, 3);
        let mut sparse = Sketch::new(100_000, 3);
        sparse.counters = Counters::Sparse {
            table: KeyTable::default(),
            touched: Vec::new(),
        };
        for round in 0..5u64 {
            for key in 0..200u64 {
                for _ in 0..(key % 7) {
                    dense.add(key * 31 + round);
                    sparse.add(key * 31 + round);
                }
            }
            dense.age();
            sparse.age();
            for key in 0..400u64 {
                assert_eq!(
                    dense.estimate(key * 31 + round),
                    sparse.estimate(key * 31 + round)
                );
            }
        }
        let mut sketch = Sketch::new(100_000, 0);
        for _ in 0..5 {
            sketch.add(42);
        }
        assert_eq!(sketch.estimate(42), 5);
        sketch.age();
        assert_eq!(sketch.estimate(42), 2);
        assert_eq!(sketch.estimate(43), 0);
    }

    #[test]
    fn sizes_and_admission_limits() {
        let cache = with_slru(1000, 0.01);
        assert_eq!(cache.window_capacity, 10);
        assert_eq!(cache.main.capacity_bytes(), 990);
        assert!(cache.can_insert(&Request::new(1, 10)));
        assert!(
            !cache.can_insert(&Request::new(1, 11)),
            "larger than the window"
        );
        // SLRU's probationary segment is a fifth of 990 bytes.
        let cache = with_slru(1000, 0.5);
        assert!(cache.can_insert(&Request::new(1, 100)));
        assert!(!cache.can_insert(&Request::new(1, 101)));
    }

    #[test]
    fn window_fills_the_cache_then_moves_to_main_until_an_object_leaves() {
        // Window 2 bytes, main LRU 8.
        let mut cache = with_lru(10, 0.2);
        let mut evicted = Vec::new();
        for key in 1..=10 {
            assert!(!cache.get(&Request::new(key, 1), &mut evicted));
        }
        // Nothing had to leave: all ten sit in the window.
        assert_eq!(cache.window.len(), 10);
        assert_eq!(cache.main.len(), 0);
        // The 11th moves the window's oldest eight into main (room for free), then 9 competes
        // with main's victim 1.
        assert!(!cache.get(&Request::new(11, 1), &mut evicted));
        assert_eq!(cache.main.len(), 8);
        assert_eq!(cache.len(), 10);
        assert_eq!(evicted.len(), 1);
        // 1..=8 were counted twice (entering and leaving the window), 9 only once when it
        // competed: 9 leaves.
        assert_eq!(evicted, [Evicted { key: 9, size: 1 }]);
        assert!(cache.get(&Request::new(10, 1), &mut evicted), "window hit");
        assert!(cache.get(&Request::new(1, 1), &mut evicted), "main hit");
    }

    #[test]
    fn a_frequent_window_victim_displaces_the_main_victim() {
        let mut cache = with_lru(10, 0.2);
        let mut evicted = Vec::new();
        for key in 1..=11 {
            cache.get(&Request::new(key, 1), &mut evicted);
        }
        evicted.clear();
        // Main holds 1..=8 (victim 1, counted twice); the window holds 10 and 11. Window hits
        // are not counted, so make 10 hot in the sketch directly.
        for _ in 0..3 {
            cache.sketch.add(10);
        }
        assert!(!cache.get(&Request::new(12, 1), &mut evicted));
        assert_eq!(evicted, [Evicted { key: 1, size: 1 }]);
        assert_eq!(cache.main.len(), 8);
        assert!(
            cache.get(&Request::new(10, 1), &mut evicted),
            "10 moved to main"
        );
        assert_eq!(cache.len(), 10);
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(
            capacity in 1u64..64,
            window_size in 0.0f64..0.9,
            steps in steps(8),
        ) {
            check_against_model(&mut with_slru(capacity, window_size), &steps)?;
            check_against_model(&mut with_lru(capacity, window_size), &steps)?;
            let main = Fifo::new(WTinyLfu::main_capacity(capacity, window_size));
            let mut with_fifo = WTinyLfu::new(capacity, window_size, Box::new(main), 7);
            check_against_model(&mut with_fifo, &steps)?;
        }
    }
}
