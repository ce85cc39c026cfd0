//! Cacheus (Rodriguez et al., "Learning Cache Replacement with CACHEUS", FAST'21, §4): LeCaR's
//! scheme of two weighted experts drawn at random, with a scan-resistant LRU (SR-LRU) and a
//! churn-resistant LFU (CR-LFU) as the experts and a learning rate that adapts itself.
//!
//! Decisions follow libCacheSim's `Cacheus.c`, `SR_LRU.c` and `CR_LFU.c` (the versions the
//! `libcachesim` 0.3.5 Python package bundles; Cacheus takes no parameters there).
//!
//! SR-LRU keeps the residents in two LRU lists, R (reused objects) and SR (new objects and
//! objects demoted from R), and a history H of objects that left the cache. A new object enters
//! SR; a hit in SR moves the object to R; a miss on a key in H enters R. When R is over its size
//! its least recent objects are demoted to the front of SR. SR-LRU's victim is SR's least
//! recent object (R's when SR is empty). CR-LFU's victim is, among the least frequent
//! residents, the one that reached that frequency last. Each expert has a history of the
//! objects it evicted; a miss on a key in one shrinks that expert's weight by `e^(−λ)`.
//!
//! libCacheSim's decisions, which we follow where they depart from the paper or where the
//! paper leaves them open (the `libcachesim` 0.3.5 binary was read where its bundled sources
//! differ from the published ones):
//! - Sizes are bytes. R and SR start at ⌊capacity/2⌋ bytes each. When an object that entered
//!   SR new (and was not hit there) comes back from H, SR grows by `max(1, ⌊d/n⌋ + 0.5)`
//!   bytes, truncated, where `d` counts demotions from R less demoted objects that left for H
//!   and `n` counts new objects that ever entered H; SR is capped at the bytes resident less
//!   one (which may shrink it), and R gets the rest of the capacity. The paper also shrinks SR
//!   when a demoted object is hit in SR; libCacheSim reads that mark from the copy it has
//!   just made in R, which never carries it, so SR never shrinks that way (and a demoted
//!   object hit in SR is not subtracted from `d`).
//! - An object larger than R's limit (coming back from H) or SR's (any other) is not
//!   admitted, although the objects evicted to make room for it stay evicted. An object that
//!   comes back from H takes the request's size; a hit keeps the size the object had.
//! - Inserting into SR evicts SR's least recent objects while SR is over its limit (SR can be
//!   over after hits demoted R objects into it). Those leave for H without either expert
//!   choosing them: no draw, no expert history.
//! - H holds less than `capacity` bytes (an insertion drops the oldest entries while H holds
//!   `capacity` bytes or more). CR-LFU gives an object coming back from H the frequency it had
//!   when it left, plus one; any other new object starts at 1, a hit adds 1.
//! - Each expert's history is an LRU list of ⌊capacity/2⌋ bytes. When both experts propose the
//!   same victim it goes into neither. Every miss renormalises the weights (`w_lru /= w_lru +
//!   w_lfu`, `w_lfu = 1 − w_lru`), whether or not it hit a history. A weight shrinks by
//!   `e^(−λ)`, with no discount for the time since the eviction (unlike LeCaR).
//! - Every eviction draws `(next_rand() % 100) / 100`, even when the experts agree; SR-LRU
//!   wins when the draw is below its weight.
//! - The learning rate starts at `0.001 + (next_rand() % 1000) / 1000` and is revised every
//!   `capacity` requests (bytes of capacity, so rarely when objects are large). The window's
//!   hit rate is the integer quotient hits / `capacity`: 0 unless every request of the window
//!   hit (the paper compares real hit rates). If the rate changed since the last revision, it
//!   moves by `±|rate · Δrate|`, up when the hit rate moved the same way as the rate, down
//!   otherwise (to 0.0001 if that would not leave it above 0.001). If it did not change, a
//!   window with no improvement counts one towards unlearning, and a window that improved
//!   after at least 10 such windows draws a new random rate. So the rate mostly decays from its first draw; a first draw near 1 (about
//!   0.97 or more, 3% of draws) falls to 0.002 or less within two revisions, the weights then
//!   barely move, and such runs miss noticeably more than the others (by 0.07 on a 167-object
//!   cache of a Zipf trace).
//! - `remove` sends the object to H, as an eviction would.
//!
//! Draws come from [`Lehmer64`], libCacheSim's generator: with `seed=0` (the default) they are
//! exactly libCacheSim's in a fresh process (its first draw is the starting learning rate),
//! so the miss ratios are equal; other seeds give other runs of the same algorithm.
//!
//! O(1) per request: one table finds residents and H entries (a key is in at most one); the
//! experts' histories are [`KeyedQueue`]s; CR-LFU is [`FrequencyBuckets`].

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::util::frequency::FrequencyBuckets;
use crate::util::key_table::KeyTable;
use crate::util::keyed_queue::KeyedQueue;
use crate::util::prefetch::prefetch_read;
use crate::util::rng::Lehmer64;
use crate::util::{List, Slab};

/// Where a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// SR-LRU's list of reused objects.
    Reused,
    /// SR-LRU's scan-resistant list of new and demoted objects.
    ScanResistant,
    /// SR-LRU's history of objects that left the cache.
    History,
}

/// Per-node state.
#[derive(Clone, Copy, Debug)]
struct Entry {
    place: Place,
    /// In H: the frequency the object had when it left.
    frequency_left_with: u64,
    /// Entered SR as a new object and has not been hit since (kept into H).
    new: bool,
    /// In SR: demoted from R.
    demoted: bool,
}

impl Entry {
    /// A missed object that was not in H: it enters SR, marked new.
    fn arriving() -> Entry {
        Entry {
            place: Place::ScanResistant,
            frequency_left_with: 0,
            new: true,
            demoted: false,
        }
    }
}

/// Cacheus over a byte capacity.
pub struct Cacheus {
    capacity: u64,
    /// ⌊capacity/2⌋: the size of each expert's history.
    expert_history_bytes: u64,
    /// R's and SR's byte limits, which add up to `capacity` once SR has grown (both start at
    /// ⌊capacity/2⌋). Signed, as libCacheSim keeps them.
    reused_limit_bytes: i64,
    scan_resistant_limit_bytes: i64,
    /// New objects that have entered H (never decreases).
    new_in_history: u64,
    /// Demotions from R, less demoted objects that left for H.
    demoted_in_cache: u64,
    /// Residents and H entries.
    map: KeyTable,
    slab: Slab<Entry>,
    /// Front: most recently used (R) or inserted (SR, H).
    reused: List,
    scan_resistant: List,
    history: List,
    frequency: FrequencyBuckets,
    /// Victims of the SR-LRU expert and of the CR-LFU expert.
    lru_evicted: KeyedQueue,
    lfu_evicted: KeyedQueue,
    weight_lru: f64,
    weight_lfu: f64,
    learning_rate: f64,
    previous_learning_rate: f64,
    previous_hit_rate: f64,
    /// Revisions without improvement since the rate last moved.
    unlearn_count: u64,
    /// Hits since the last revision.
    window_hits: u64,
    /// Requests seen, this one included.
    requests: u64,
    /// A revision fell due on a miss: it runs after the miss's admission (libCacheSim revises
    /// after the whole request), or before the next request if there is no admission.
    revision_due: bool,
    rng: Lehmer64,
}

/// libCacheSim's fresh learning rate, at the start and after ten flat windows:
/// `0.001 + (next_rand() % 1000) / 1000`.
fn random_learning_rate(rng: &mut Lehmer64) -> f64 {
    0.001 + (rng.next_u64() % 1000) as f64 / 1000.0
}

impl Cacheus {
    /// An empty Cacheus cache of `capacity` bytes, drawing with `seed` (0: libCacheSim's).
    pub fn new(capacity: u64, seed: u64) -> Cacheus {
        let mut rng = Lehmer64::new(seed);
        let learning_rate = random_learning_rate(&mut rng);
        Cacheus {
            capacity,
            expert_history_bytes: capacity / 2,
            reused_limit_bytes: (capacity / 2) as i64,
            scan_resistant_limit_bytes: (capacity / 2) as i64,
            new_in_history: 0,
            demoted_in_cache: 0,
            map: KeyTable::default(),
            slab: Slab::with_capacity(0),
            reused: List::default(),
            scan_resistant: List::default(),
            history: List::default(),
            frequency: FrequencyBuckets::default(),
            lru_evicted: KeyedQueue::default(),
            lfu_evicted: KeyedQueue::default(),
            weight_lru: 0.5,
            weight_lfu: 0.5,
            learning_rate,
            previous_learning_rate: 0.0,
            previous_hit_rate: 0.0,
            unlearn_count: 0,
            window_hits: 0,
            requests: 0,
            revision_due: false,
            rng,
        }
    }

    /// The experts' weights (SR-LRU, CR-LFU).
    pub fn weights(&self) -> (f64, f64) {
        (self.weight_lru, self.weight_lfu)
    }

    /// The learning rate λ.
    pub fn learning_rate(&self) -> f64 {
        self.learning_rate
    }

    fn list(&mut self, place: Place) -> &mut List {
        match place {
            Place::Reused => &mut self.reused,
            Place::ScanResistant => &mut self.scan_resistant,
            Place::History => &mut self.history,
        }
    }

    /// Unlinks `slot` from its list and links it at the front of `to`'s.
    fn relink(&mut self, slot: u32, to: Place) {
        let from = self.slab.get(slot).data.place;
        let mut list = *self.list(from);
        list.unlink(&mut self.slab, slot);
        *self.list(from) = list;
        self.slab.get_mut(slot).data.place = to;
        let mut list = *self.list(to);
        list.push_front(&mut self.slab, slot);
        *self.list(to) = list;
    }

    /// Demotes R's least recent objects to the front of SR while R holds more than `limit`
    /// bytes.
    fn demote_while_reused_over(&mut self, limit: i64) {
        while self.reused.bytes as i64 > limit {
            let oldest = self.reused.tail;
            self.relink(oldest, Place::ScanResistant);
            let entry = &mut self.slab.get_mut(oldest).data;
            entry.new = false;
            entry.demoted = true;
            self.demoted_in_cache += 1;
        }
    }

    /// Moves the resident in `slot` out of the cache into H, keeping its frequency and its
    /// "new" mark.
    fn retire(&mut self, slot: u32, evicted: &mut Vec<Evicted>) {
        let node = self.slab.get(slot);
        evicted.push(node.evicted());
        let Entry { new, demoted, .. } = node.data;
        let frequency = self.frequency.frequency(slot);
        self.frequency.remove(slot);
        self.relink(slot, Place::History);
        if new {
            self.new_in_history += 1;
        }
        if demoted {
            self.demoted_in_cache -= 1;
        }
        let entry = &mut self.slab.get_mut(slot).data;
        entry.frequency_left_with = frequency;
        entry.demoted = false;
    }

    /// An object marked new came back from H: SR was too small. It grows by
    /// `max(1, ⌊demoted/new⌋ + 0.5)` bytes (truncated), to at most the bytes resident less one,
    /// and R gets the rest of the capacity.
    fn grow_scan_resistant(&mut self) {
        // libCacheSim divides by zero here only if no new object ever left, which cannot be
        // when one comes back.
        let ratio = self
            .demoted_in_cache
            .checked_div(self.new_in_history)
            .unwrap_or(0) as i32;
        let step = f64::max(1.0, f64::from(ratio) + 0.5);
        let resident_less_one = (self.reused.bytes + self.scan_resistant.bytes) as i64 - 1;
        let grown = self.scan_resistant_limit_bytes as f64 + step;
        self.scan_resistant_limit_bytes = if grown > resident_less_one as f64 {
            resident_less_one
        } else {
            grown as i64
        };
        self.reused_limit_bytes = self.capacity as i64 - self.scan_resistant_limit_bytes;
    }

    /// Drops H's oldest entries while H holds `capacity` bytes or more.
    fn trim_history(&mut self) {
        while self.history.bytes >= self.capacity {
            let Some(oldest) = self.history.pop_back(&mut self.slab) else {
                return;
            };
            self.map.remove(self.slab.get(oldest).key);
            self.slab.release(oldest);
        }
    }

    /// A miss: a key in an expert's history shrinks that expert's weight; both histories
    /// forget the key.
    fn learn_from_miss(&mut self, key: u64) {
        let in_lru_history = self.lru_evicted.remove(key).is_some();
        let in_lfu_history = self.lfu_evicted.remove(key).is_some();
        if in_lru_history {
            self.weight_lru *= (-self.learning_rate).exp();
        } else if in_lfu_history {
            self.weight_lfu *= (-self.learning_rate).exp();
        }
        self.weight_lru /= self.weight_lru + self.weight_lfu;
        self.weight_lfu = 1.0 - self.weight_lru;
    }

    /// Revises the learning rate at the end of a window of `capacity` requests.
    fn revise_learning_rate(&mut self) {
        self.revision_due = false;
        // libCacheSim divides integers here.
        let hit_rate = (self.window_hits / self.capacity) as f64;
        let hit_rate_change = hit_rate - self.previous_hit_rate;
        let rate_change = self.learning_rate - self.previous_learning_rate;
        self.previous_learning_rate = self.learning_rate;
        self.previous_hit_rate = hit_rate;
        if rate_change != 0.0 {
            let direction = if hit_rate_change / rate_change > 0.0 {
                1.0
            } else {
                -1.0
            };
            let moved = self.learning_rate + direction * (self.learning_rate * rate_change).abs();
            self.learning_rate = if moved > 0.001 { moved } else { 0.0001 };
            self.unlearn_count = 0;
        } else if hit_rate == 0.0 || hit_rate_change <= 0.0 {
            self.unlearn_count += 1;
        } else if self.unlearn_count >= 10 {
            self.unlearn_count = 0;
            self.learning_rate = random_learning_rate(&mut self.rng);
        }
        self.window_hits = 0;
    }

    /// SR-LRU's and CR-LFU's insertion of a missed object that fits the cache, after the
    /// evictions that made room for it.
    fn insert(&mut self, key: u64, size: u32, was_in_history: bool, evicted: &mut Vec<Evicted>) {
        let size_bytes = size as i64;
        // Evictions may have pushed the key's own H entry out.
        let from_history = if was_in_history {
            self.map.get(key)
        } else {
            None
        };
        let limit = if from_history.is_some() {
            self.reused_limit_bytes
        } else {
            self.scan_resistant_limit_bytes
        };
        if size_bytes > limit {
            return;
        }
        let (slot, frequency) = match from_history {
            Some(slot) => {
                let entry = self.slab.get(slot).data;
                self.history.unlink(&mut self.slab, slot);
                self.demote_while_reused_over(self.reused_limit_bytes - size_bytes);
                // The object comes back with the request's size, not the one H remembers.
                let node = self.slab.get_mut(slot);
                node.size = size;
                node.data.place = Place::Reused;
                node.data.new = false;
                node.data.demoted = false;
                self.reused.push_front(&mut self.slab, slot);
                if entry.new {
                    self.grow_scan_resistant();
                }
                (slot, entry.frequency_left_with + 1)
            }
            None => {
                let slot = self.slab.alloc(key, size, Entry::arriving());
                self.scan_resistant.push_front(&mut self.slab, slot);
                self.map.insert(key, slot);
                (slot, 1)
            }
        };
        self.frequency.insert(slot, key, size, frequency);
        while self.scan_resistant.bytes as i64 > self.scan_resistant_limit_bytes {
            self.retire(self.scan_resistant.tail, evicted);
        }
        self.trim_history();
    }

    /// Evicts one resident: the draw picks an expert, and the victim goes to that expert's
    /// history unless both proposed it.
    fn evict_one(&mut self, evicted: &mut Vec<Evicted>) {
        let lru_choice = if self.scan_resistant.bytes > 0 {
            self.scan_resistant.tail
        } else {
            self.reused.tail
        };
        let lfu_choice = self.frequency.least_frequent_latest().unwrap_or(lru_choice);
        let lru_drawn = self.rng.percent() < self.weight_lru;
        let victim = if lru_drawn { lru_choice } else { lfu_choice };
        self.retire(victim, evicted);
        self.trim_history();
        if lru_choice != lfu_choice {
            let node = self.slab.get(victim);
            let (key, size) = (node.key, node.size);
            let expert_history = if lru_drawn {
                &mut self.lru_evicted
            } else {
                &mut self.lfu_evicted
            };
            remember(expert_history, key, size, self.expert_history_bytes);
        }
    }
}

/// Adds a victim to an expert's history, an LRU list of `limit_bytes` (libCacheSim's `LRU`
/// cache: a victim larger than the list is not kept).
fn remember(history: &mut KeyedQueue, key: u64, size: u32, limit_bytes: u64) {
    let size_bytes = u64::from(size);
    if size_bytes > limit_bytes {
        return;
    }
    while history.bytes() + size_bytes > limit_bytes {
        history.evict(history.tail());
    }
    history.insert_front(key, size);
}

impl EvictionPolicy for Cacheus {
    fn space(&self) -> Space {
        Space::of_lists(self.capacity, &[&self.reused, &self.scan_resistant])
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.space().check()?;
        [&self.reused, &self.scan_resistant]
            .iter()
            .try_for_each(|list| list.check(&self.slab))
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        if self.revision_due {
            self.revise_learning_rate();
        }
        self.requests += 1;
        let entry = self
            .map
            .get(request.key)
            .map(|slot| (slot, self.slab.get(slot).data));
        let hit = match entry {
            Some((slot, entry)) if entry.place != Place::History => {
                if entry.place == Place::Reused {
                    self.reused.move_to_front(&mut self.slab, slot);
                } else {
                    // libCacheSim makes a fresh copy in R: the marks are lost.
                    self.relink(slot, Place::Reused);
                    let entry = &mut self.slab.get_mut(slot).data;
                    entry.new = false;
                    entry.demoted = false;
                    self.demote_while_reused_over(self.reused_limit_bytes);
                }
                self.frequency.increment(slot);
                self.window_hits += 1;
                true
            }
            _ => {
                self.learn_from_miss(request.key);
                false
            }
        };
        if self.capacity > 0 && self.requests.is_multiple_of(self.capacity) {
            if hit {
                self.revise_learning_rate();
            } else {
                self.revision_due = true;
            }
        }
        hit
    }

    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        let (key, size) = (request.key, request.size);
        let size_bytes = u64::from(size);
        let known = self.map.get(key);
        let in_history = match known {
            Some(slot) if self.slab.get(slot).data.place != Place::History => return,
            Some(_) => true,
            None => false,
        };
        if size_bytes <= self.capacity {
            while self.reused.bytes + self.scan_resistant.bytes + size_bytes > self.capacity {
                self.evict_one(evicted);
            }
            self.insert(key, size, in_history, evicted);
        }
        if self.revision_due {
            self.revise_learning_rate();
        }
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.map.get(key) {
            Some(slot) if self.slab.get(slot).data.place != Place::History => {
                // libCacheSim's remove sends the object to H like an eviction.
                let mut ignored = Vec::new();
                self.retire(slot, &mut ignored);
                self.trim_history();
                true
            }
            _ => false,
        }
    }

    fn contains(&self, key: u64) -> Option<bool> {
        Some(
            self.map
                .get(key)
                .is_some_and(|slot| self.slab.get(slot).data.place != Place::History),
        )
    }

    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.map.prefetch(key);
    }

    /// A resident's node and its CR-LFU member share its slot: load both at once.
    #[inline]
    fn prefetch_node(&self, key: u64) {
        if let Some(slot) = self.map.get(key) {
            prefetch_read(self.slab.get(slot));
            self.frequency.prefetch(slot);
        }
    }

    #[inline]
    fn prefetch_neighbours(&self, key: u64) {
        if let Some(slot) = self.map.get(key) {
            let entry = self.slab.get(slot).data;
            if entry.place != Place::History {
                self.frequency.prefetch_neighbours(slot);
                self.slab.prefetch_neighbours(slot);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eviction::lecar::tests::{play, small_trace};
    use crate::util::model_check::{check_against_model, steps};
    use crate::util::NIL;
    use proptest::prelude::*;

    fn keys_in(cache: &Cacheus, place: Place) -> Vec<u64> {
        let list = match place {
            Place::Reused => cache.reused,
            Place::ScanResistant => cache.scan_resistant,
            Place::History => cache.history,
        };
        let mut keys = Vec::new();
        let mut slot = list.head;
        while slot != NIL {
            keys.push(cache.slab.get(slot).key);
            slot = cache.slab.next(slot);
        }
        keys
    }

    #[test]
    fn new_objects_overflow_from_sr_into_the_history_without_a_draw() {
        let mut cache = Cacheus::new(5, 3);
        let mut evicted = Vec::new();
        let rng_before = cache.rng;
        for key in 1..=4 {
            cache.get(&Request::new(key, 1), &mut evicted);
        }
        // SR holds ⌊5/2⌋ = 2: 1 and 2 left for H, oldest last.
        assert_eq!(keys_in(&cache, Place::ScanResistant), vec![4, 3]);
        assert_eq!(keys_in(&cache, Place::History), vec![2, 1]);
        assert_eq!(
            evicted,
            vec![Evicted { key: 1, size: 1 }, Evicted { key: 2, size: 1 }]
        );
        assert_eq!(cache.rng, rng_before, "no expert was asked");
        assert_eq!(cache.new_in_history, 2);
    }

    #[test]
    fn a_new_object_back_from_history_enters_r_and_grows_sr() {
        let mut cache = Cacheus::new(5, 3);
        let mut evicted = Vec::new();
        for key in [1, 2, 3, 4, 1] {
            cache.get(&Request::new(key, 1), &mut evicted);
        }
        assert_eq!(keys_in(&cache, Place::Reused), vec![1]);
        // SR would grow to 3 but is capped at the 3 resident bytes less one; R gets the rest.
        assert_eq!(
            (cache.scan_resistant_limit_bytes, cache.reused_limit_bytes),
            (2, 3)
        );
        // A hit in SR moves the object to R.
        assert!(cache.get(&Request::new(4, 1), &mut evicted));
        assert_eq!(keys_in(&cache, Place::Reused), vec![4, 1]);
        assert_eq!(keys_in(&cache, Place::ScanResistant), vec![3]);
    }

    #[test]
    fn r_demotes_its_least_recent_objects_to_sr() {
        let mut cache = Cacheus::new(4, 3);
        let mut evicted = Vec::new();
        // 1 and 2 reach R through SR hits; 3's hit pushes R over ⌊4/2⌋ = 2.
        for key in [1, 2, 1, 2, 3, 3] {
            cache.get(&Request::new(key, 1), &mut evicted);
        }
        assert_eq!(keys_in(&cache, Place::Reused), vec![3, 2]);
        assert_eq!(keys_in(&cache, Place::ScanResistant), vec![1]);
        assert_eq!(cache.demoted_in_cache, 1);
    }

    #[test]
    fn cr_lfu_restores_the_frequency_an_object_left_with() {
        let mut cache = Cacheus::new(5, 3);
        let mut evicted = Vec::new();
        // 1 is hit twice (frequency 3), then removed: libCacheSim's remove sends it to H.
        for key in [1, 1, 1, 2] {
            cache.get(&Request::new(key, 1), &mut evicted);
        }
        assert!(cache.remove(1));
        assert_eq!(keys_in(&cache, Place::History), vec![1]);
        assert!(!cache.get(&Request::new(1, 1), &mut evicted));
        let slot = cache.map.get(1).unwrap();
        assert_eq!(cache.frequency.frequency(slot), 4);
    }

    #[test]
    fn the_learning_rate_starts_random_and_shrinks_when_hit_rates_stay_flat() {
        // Seed 0 draws libCacheSim's first number: λ = 0.001 + 697/1000.
        let mut cache = Cacheus::new(2, 0);
        assert_eq!(cache.learning_rate(), 0.698);
        let mut evicted = Vec::new();
        cache.get(&Request::new(1, 1), &mut evicted);
        cache.get(&Request::new(2, 1), &mut evicted);
        // After 2 requests (the capacity), the window's integer hit rate is 0, as was the last
        // one, while λ moved by +0.698 from 0: it moves down by λ·0.698.
        assert_eq!(cache.learning_rate(), 0.698 - (0.698f64 * 0.698).abs());
    }

    #[test]
    fn seed_zero_makes_libcachesims_decisions() {
        // libcachesim 0.3.5, a fresh interpreter: Cacheus(cache_size=5) then (cache_size=9)
        // with sizes 1 + key % 3, on LeCaR's test sequence.
        let keys = small_trace();
        let cases: [(u64, bool, &str, &[u64]); 2] = [
            (
                5,
                false,
                "mmmmhmmhmmmmmmhmmmhhmmhhhhhhhhhhhmhhhhhhhhmhmhhhhmhhmmhhmhhhhmhhhmhmhhhmhhhmhmhh",
                &[1, 2, 3, 7, 10],
            ),
            (
                9,
                true,
                "mmmmhhmhmmmmmmmmmmhmhmhhhhhhhhhhhmhhhhhhhhmhmhhhhmmhmmhhmmhhhmmhhmmmmmhmhhhmhmmh",
                &[1, 2, 3, 7],
            ),
        ];
        for (capacity, sized, hits, resident) in cases {
            let mut cache = Cacheus::new(capacity, 0);
            assert_eq!(play(&mut cache, &keys, sized), hits);
            let now: Vec<u64> = (1..=10)
                .filter(|&key| cache.contains(key).unwrap())
                .collect();
            assert_eq!(now, resident);
        }
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(capacity in 1u64..64, seed in 0u64..4, steps in steps(20)) {
            check_against_model(&mut Cacheus::new(capacity, seed), &steps)?;
        }
    }
}
