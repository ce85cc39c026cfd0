//! Size-aware Belady: Belady's MIN (Belady, "A study of replacement algorithms for a
//! virtual-storage computer", IBM Systems Journal 1966) ranks objects by how far in the future
//! they are next requested; with objects of different sizes, evicting one large object frees
//! as much as many small ones, so this variant evicts the object with the largest
//! next-access distance × size. An offline oracle: it reads each request's
//! [`Request::next_access`] (see [`EvictionPolicy::needs_next_access`] and
//! [`super::belady`]).
//!
//! Same decisions as libCacheSim's `BeladySize.c` (the `libcachesim` 0.3.5 package's
//! `BeladySize(n_samples=128)`, C parameter `n-sample`), which is a sampled heuristic rather
//! than an exact oracle:
//! - Each eviction draws `n-sample` resident objects at random (with replacement) and evicts
//!   the one whose distance × size is largest, the first drawn among equals. Randomized: a
//!   `seed` parameter fixes the draws.
//! - A draw is not uniform: libCacheSim picks random buckets of its chained hash table until
//!   one is non-empty, then a random object in that bucket, so objects sharing a bucket are
//!   drawn less often (and stay longer). The table starts with 2^24 buckets (the Python
//!   package's `hashpower`), halves at every failed pick after 32 in a row, and doubles before
//!   an insertion that finds more than two objects per bucket. `sampling=hash-table` (the
//!   default) keeps such a table of the residents, with the same rules, and draws from it
//!   with the same distribution (without picking empty buckets); its hash function is not
//!   libCacheSim's XXH3, so other objects share buckets. `sampling=uniform` draws uniformly,
//!   which evicts better: on a Zipf trace with log-normal sizes at 1% of the bytes, miss ratio
//!   0.3452 against libCacheSim's 0.3462 (mean of 8 runs), where the hash table gives 0.3463
//!   (mean of 8 seeds). libCacheSim's draws are a little more uneven still: its byte miss
//!   ratio there is 0.4968 (±0.0005 over runs) and ours 0.4947 with either sampling, a gap
//!   that widens with fewer samples.
//! - libCacheSim compares `log(size) + log(distance)` in `f64`; this compares the exact
//!   integer product, which orders objects the same way except among products within rounding
//!   of each other.
//! - The distance is counted from the current request: the next access's index minus the
//!   number of requests looked up so far, less one (libCacheSim's `next_access_vtime - n_req`).
//!   [`Request`] carries no index of its own, so the policy counts the requests it is asked
//!   about; a cache that only sees some of a trace's requests ranks by a shifted clock, as
//!   libCacheSim's would.
//! - An object never requested again is never inserted (its miss still evicts to make room
//!   first, as libCacheSim evicts before its `insert` declines), and a hit whose next access is
//!   "never" drops the object at once. [`EvictionPolicy::lookup`] has no output for that drop,
//!   so it is reported by the next [`EvictionPolicy::admit`], and [`EvictionPolicy::contains`]
//!   offers no answer. A request whose next access is unknown counts as never requested again.

use heterarchy_trace::generate::{mix64, unit_from_bits};
use heterarchy_trace::request::{NEXT_ACCESS_NEVER, NEXT_ACCESS_UNKNOWN};
use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::util::key_table::KeyTable;
use crate::util::prefetch::prefetch_read;
use crate::util::release_bytes;
use crate::util::resident_draw::bucket_hash;
use crate::util::NIL;

/// libCacheSim's default number of objects drawn per eviction.
pub const DEFAULT_SAMPLES: u32 = 128;

/// log2 of the buckets libCacheSim's hash table starts with (the `libcachesim` package's
/// default `hashpower`).
const START_TABLE_POWER: u32 = 24;
/// Failed bucket picks in a row after which libCacheSim halves its table.
const SHRINK_AFTER_FAILED_PICKS: u32 = 32;
/// Objects per bucket above which libCacheSim doubles its table.
const EXPAND_LOAD: u64 = 2;

/// How an eviction draws residents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sampling {
    /// As libCacheSim does: a random non-empty bucket of a chained hash table, then a random
    /// object in it.
    HashTable,
    /// Uniformly among residents.
    Uniform,
}

/// SplitMix64: the state steps by the golden ratio and each step's output is its mix.
#[derive(Clone, Copy, Debug)]
struct Random(u64);

impl Random {
    #[inline]
    fn next_u64(&mut self) -> u64 {
        let out = mix64(self.0);
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        out
    }

    /// Uniform in [0, 1), in steps of 2^-53.
    #[inline]
    fn unit(&mut self) -> f64 {
        unit_from_bits(self.next_u64())
    }

    /// Uniform in `0..len` (Lemire's multiply-shift), `len` > 0.
    #[inline]
    fn below(&mut self, len: usize) -> usize {
        ((u128::from(self.next_u64()) * len as u128) >> 64) as usize
    }
}

/// Tables up to this many buckets find a bucket's chain through an array; larger ones (only
/// the 2^24 of the start, before the first eviction shrinks it) through a hash map of the
/// non-empty buckets.
const MAX_ARRAY_BUCKETS: u64 = 1 << 20;

/// Bucket → index of its chain, for non-empty buckets.
enum ChainIndex {
    Array(Vec<u32>),
    Map(KeyTable),
}

impl ChainIndex {
    fn for_buckets(buckets: u64, residents: usize) -> ChainIndex {
        if buckets <= MAX_ARRAY_BUCKETS {
            ChainIndex::Array(vec![NIL; buckets as usize])
        } else {
            ChainIndex::Map(KeyTable::with_capacity(residents))
        }
    }

    #[inline]
    fn get(&self, bucket: u64) -> Option<u32> {
        match self {
            ChainIndex::Array(chains) => Some(chains[bucket as usize]).filter(|&c| c != NIL),
            ChainIndex::Map(chains) => chains.get(bucket),
        }
    }

    /// Sets the chain of `bucket`; [`NIL`] empties it.
    #[inline]
    fn set(&mut self, bucket: u64, chain: u32) {
        match self {
            ChainIndex::Array(chains) => chains[bucket as usize] = chain,
            ChainIndex::Map(chains) if chain == NIL => {
                chains.remove(bucket);
            }
            ChainIndex::Map(chains) => chains.insert(bucket, chain),
        }
    }
}

/// The residents of one non-empty bucket, linked through [`Resident::chain_next`].
#[derive(Clone, Copy, Debug)]
struct Chain {
    bucket: u64,
    head: u32,
    len: u32,
}

/// libCacheSim's chained hash table of the residents, kept only to draw from it as
/// `chained_hashtable_rand_obj_v2` does: random buckets until a non-empty one, halving the
/// table at every failed pick after [`SHRINK_AFTER_FAILED_PICKS`] in a row, then a random
/// resident in that bucket.
///
/// The draw is reproduced in distribution without picking empty buckets: the non-empty
/// buckets are listed densely, so a uniform entry of the list is the bucket the picks end on,
/// and a run of more than [`SHRINK_AFTER_FAILED_PICKS`] failed picks, which has probability
/// `(1 - non-empty / buckets)^33`, is drawn as one event before the picks that follow it.
struct BucketTable {
    power: u32,
    chain_of: ChainIndex,
    chains: Vec<Chain>,
}

impl BucketTable {
    fn new() -> BucketTable {
        BucketTable {
            power: START_TABLE_POWER,
            chain_of: ChainIndex::for_buckets(1 << START_TABLE_POWER, 0),
            chains: Vec::new(),
        }
    }

    #[inline]
    fn bucket(&self, key: u64) -> u64 {
        bucket_hash(key) & ((1u64 << self.power) - 1)
    }

    /// Chains every resident anew after the table changed size.
    fn rebuild(&mut self, residents: &mut [Resident]) {
        self.chain_of = ChainIndex::for_buckets(1 << self.power, residents.len());
        self.chains.clear();
        for position in 0..residents.len() as u32 {
            self.link(residents, position);
        }
    }

    /// Puts the resident at `position` first in its bucket.
    #[inline]
    fn link(&mut self, residents: &mut [Resident], position: u32) {
        let bucket = self.bucket(residents[position as usize].key);
        match self.chain_of.get(bucket) {
            Some(chain) => {
                let chain = &mut self.chains[chain as usize];
                residents[position as usize].chain_next = chain.head;
                chain.head = position;
                chain.len += 1;
            }
            None => {
                residents[position as usize].chain_next = NIL;
                self.chain_of.set(bucket, self.chains.len() as u32);
                self.chains.push(Chain {
                    bucket,
                    head: position,
                    len: 1,
                });
            }
        }
    }

    /// Adds the resident just pushed at `position` (the last), doubling the table first if the
    /// others already fill it beyond [`EXPAND_LOAD`] per bucket.
    fn insert(&mut self, residents: &mut [Resident], position: u32) {
        if u64::from(position) > EXPAND_LOAD << self.power {
            self.power += 1;
            self.rebuild(&mut residents[..position as usize]);
        }
        self.link(residents, position);
    }

    /// Makes whatever points at `from` in the chain of `key` point at `to` instead (`to` may
    /// be [`NIL`] only when `from` ends its chain or is unlinked by the caller).
    #[inline]
    fn repoint(&mut self, residents: &mut [Resident], key: u64, from: u32, to: u32) -> u32 {
        let chain = self
            .chain_of
            .get(self.bucket(key))
            .expect("residents are chained");
        let entry = &mut self.chains[chain as usize];
        if entry.head == from {
            entry.head = to;
            return chain;
        }
        let mut at = entry.head;
        while residents[at as usize].chain_next != from {
            at = residents[at as usize].chain_next;
        }
        residents[at as usize].chain_next = to;
        chain
    }

    /// Unchains the resident at `position` before the last resident (`last`) moves into it.
    fn remove(&mut self, residents: &mut [Resident], position: u32, last: u32) {
        let gone = residents[position as usize];
        let chain = self.repoint(residents, gone.key, position, gone.chain_next);
        let entry = &mut self.chains[chain as usize];
        entry.len -= 1;
        if entry.len == 0 {
            self.chain_of.set(entry.bucket, NIL);
            self.chains.swap_remove(chain as usize);
            if let Some(moved) = self.chains.get(chain as usize) {
                self.chain_of.set(moved.bucket, chain);
            }
        }
        if last != position {
            let moved = residents[last as usize].key;
            self.repoint(residents, moved, last, position);
        }
    }

    /// The probability that a draw fails more than [`SHRINK_AFTER_FAILED_PICKS`] picks in a
    /// row (0 when no `f64` in [0, 1) drawn at 2^-53 steps can fall below it).
    fn shrink_chance(&self) -> f64 {
        let empty = 1.0 - self.chains.len() as f64 / (1u64 << self.power) as f64;
        let chance = empty.powi(SHRINK_AFTER_FAILED_PICKS as i32 + 1);
        if chance < f64::EPSILON / 2.0 {
            0.0
        } else {
            chance
        }
    }

    /// The rest of a draw whose picks failed too often: the table halves, and halves again at
    /// every further failed pick; returns the chain the first successful pick finds.
    fn shrink_until_a_pick_succeeds(
        &mut self,
        residents: &mut [Resident],
        random: &mut Random,
    ) -> usize {
        loop {
            if self.power > 0 {
                self.power -= 1;
                self.rebuild(residents);
            }
            let buckets = 1u64 << self.power;
            let pick = random.next_u64() & (buckets - 1);
            // Non-empty buckets are as likely as any: a pick below their count stands for one.
            if pick < self.chains.len() as u64 {
                return random.below(self.chains.len());
            }
        }
    }

    /// Draws `count` residents into `drawn`, each as libCacheSim draws one. The draws are
    /// independent, so they go in two passes (chains first, then walks along them), which lets
    /// the loads of different draws overlap.
    fn draw_into(
        &mut self,
        residents: &mut [Resident],
        random: &mut Random,
        count: u32,
        drawn: &mut Vec<u64>,
    ) {
        let mut shrink_chance = self.shrink_chance();
        let first = drawn.len();
        for _ in 0..count {
            let chain = if shrink_chance > 0.0 && random.unit() < shrink_chance {
                // The table changes: settle the draws so far before their chains do.
                walk(residents, &mut drawn[first..]);
                let chain = self.shrink_until_a_pick_succeeds(residents, random);
                shrink_chance = self.shrink_chance();
                chain
            } else {
                random.below(self.chains.len())
            };
            let Chain { head, len, .. } = self.chains[chain];
            prefetch_read(&residents[head as usize]);
            let steps = random.below(len as usize) as u64;
            drawn.push(u64::from(head) | steps << 32);
        }
        walk(residents, &mut drawn[first..]);
    }
}

/// Resolves draws packed as (chain head, steps along the chain << 32) into resident
/// positions, in place; resolved draws (no steps) stay as they are.
#[inline]
fn walk(residents: &[Resident], drawn: &mut [u64]) {
    for slot in drawn.iter_mut() {
        let mut at = *slot as u32;
        for _ in 0..*slot >> 32 {
            at = residents[at as usize].chain_next;
        }
        *slot = u64::from(at);
    }
}

/// A resident object, stored densely so that a uniform draw is one index.
#[derive(Clone, Copy, Debug)]
struct Resident {
    key: u64,
    /// Index of the object's next request.
    next_access: i64,
    size: u32,
    /// The next resident in the same [`BucketTable`] bucket, or [`NIL`].
    chain_next: u32,
}

/// Sampled size-aware Belady over a byte capacity.
pub struct BeladySize {
    capacity: u64,
    used_bytes: u64,
    /// Key → position in `residents`.
    map: KeyTable,
    residents: Vec<Resident>,
    samples: u32,
    random: Random,
    /// The hash table draws come from, with [`Sampling::HashTable`].
    table: Option<BucketTable>,
    /// Requests looked up so far (libCacheSim's `n_req`): the clock distances count from.
    requests: u64,
    /// The positions an eviction drew (kept to reuse its allocation).
    drawn: Vec<u64>,
    /// Objects hits dropped since the last `admit`, for it to report.
    dropped_on_hits: Vec<Evicted>,
}

/// Whether a request says its object is never requested again.
#[inline]
fn never_again(request: &Request) -> bool {
    request.next_access == NEXT_ACCESS_NEVER || request.next_access == NEXT_ACCESS_UNKNOWN
}

impl BeladySize {
    /// An empty cache of `capacity` bytes drawing libCacheSim's 128 objects per eviction the
    /// way libCacheSim does.
    pub fn new(capacity: u64) -> BeladySize {
        BeladySize::with_params(capacity, DEFAULT_SAMPLES, Sampling::HashTable, 0)
    }

    /// An empty cache of `capacity` bytes drawing `samples` objects (at least 1) per eviction
    /// as `sampling` says, with draws fixed by `seed`.
    pub fn with_params(capacity: u64, samples: u32, sampling: Sampling, seed: u64) -> BeladySize {
        BeladySize {
            capacity,
            used_bytes: 0,
            map: KeyTable::default(),
            residents: Vec::new(),
            samples: samples.max(1),
            random: Random(seed),
            table: (sampling == Sampling::HashTable).then(BucketTable::new),
            requests: 0,
            drawn: Vec::new(),
            dropped_on_hits: Vec::new(),
        }
    }

    /// Next-access distance × size of the resident at `position`.
    #[inline]
    fn score(&self, position: usize) -> u128 {
        let resident = &self.residents[position];
        // The current request's index is `requests - 1`.
        let now = self.requests as i64 - 1;
        let distance = resident.next_access.saturating_sub(now).max(0) as u64;
        u128::from(resident.size) * u128::from(distance)
    }

    /// Draws `samples` residents (there is at least one) and returns the position of the first
    /// one of largest score.
    fn choose_victim(&mut self) -> usize {
        let mut drawn = std::mem::take(&mut self.drawn);
        drawn.clear();
        match &mut self.table {
            Some(table) => table.draw_into(
                &mut self.residents,
                &mut self.random,
                self.samples,
                &mut drawn,
            ),
            None => {
                for _ in 0..self.samples {
                    let position = self.random.below(self.residents.len());
                    prefetch_read(&self.residents[position]);
                    drawn.push(position as u64);
                }
            }
        }
        let mut best = drawn[0] as usize;
        let mut best_score = self.score(best);
        for &position in &drawn[1..] {
            let score = self.score(position as usize);
            if score > best_score {
                best = position as usize;
                best_score = score;
            }
        }
        self.drawn = drawn;
        best
    }

    /// Removes the resident at `position`, moving the last one into its place.
    fn take(&mut self, position: usize) -> Resident {
        if let Some(table) = &mut self.table {
            let last = self.residents.len() as u32 - 1;
            table.remove(&mut self.residents, position as u32, last);
        }
        let gone = self.residents.swap_remove(position);
        if let Some(moved) = self.residents.get(position) {
            *self
                .map
                .get_mut(moved.key)
                .expect("residents are in the map") = position as u32;
        }
        self.map.remove(gone.key);
        release_bytes(&mut self.used_bytes, u64::from(gone.size));
        gone
    }
}

impl EvictionPolicy for BeladySize {
    fn space(&self) -> Space {
        Space {
            capacity_bytes: self.capacity,
            used_bytes: self.used_bytes,
            objects: self.residents.len(),
        }
    }

    fn needs_next_access(&self) -> bool {
        true
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        self.requests += 1;
        let Some(position) = self.map.get(request.key) else {
            return false;
        };
        if never_again(request) {
            let gone = self.take(position as usize);
            self.dropped_on_hits.push(Evicted {
                key: gone.key,
                size: gone.size,
            });
        } else {
            self.residents[position as usize].next_access = request.next_access;
        }
        true
    }

    /// Also reports the objects that hits since the last `admit` dropped.
    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        evicted.append(&mut self.dropped_on_hits);
        let size = u64::from(request.size);
        if size > self.capacity || self.map.get(request.key).is_some() {
            return;
        }
        while self.used_bytes + size > self.capacity && !self.residents.is_empty() {
            let victim = self.choose_victim();
            let gone = self.take(victim);
            evicted.push(Evicted {
                key: gone.key,
                size: gone.size,
            });
        }
        if never_again(request) {
            return;
        }
        let position = self.residents.len() as u32;
        self.map.insert(request.key, position);
        self.residents.push(Resident {
            key: request.key,
            next_access: request.next_access,
            size: request.size,
            chain_next: NIL,
        });
        if let Some(table) = &mut self.table {
            table.insert(&mut self.residents, position);
        }
        self.used_bytes += size;
    }

    /// A hit may drop its object, reported only by the next `admit`: no residency to offer.
    fn contains(&self, _key: u64) -> Option<bool> {
        None
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.map.get(key) {
            Some(position) => {
                self.take(position as usize);
                true
            }
            None => false,
        }
    }

    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.map.prefetch(key);
    }

    /// A hit rewrites the object's next access: load its entry.
    #[inline]
    fn prefetch_node(&self, key: u64) {
        if let Some(position) = self.map.get(key) {
            prefetch_read(&self.residents[position as usize]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::model_check::{drain_keys, steps, with_next_access, Step};
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn request(key: u64, size: u32, next_access: i64) -> Request {
        let mut request = Request::new(key, size);
        request.next_access = next_access;
        request
    }

    #[test]
    fn evicts_the_largest_distance_times_size() {
        // Enough draws that every one of three residents is drawn.
        let mut cache = BeladySize::with_params(9, 64, Sampling::Uniform, 1);
        let mut evicted = Vec::new();
        // Request indices 0, 1, 2: distances at request 3 are 7, 17 and 97 (next - 3).
        cache.get(&request(1, 5, 10), &mut evicted);
        cache.get(&request(2, 3, 20), &mut evicted);
        cache.get(&request(3, 1, 100), &mut evicted);
        // Scores 35, 51, 97: 3 goes even though it is the smallest.
        assert!(!cache.get(&request(4, 1, 50), &mut evicted));
        assert_eq!(drain_keys(&mut evicted), vec![3]);
        // At request 4: 1 scores 6 × 5 = 30, 2 scores 16 × 3 = 48, 4 scores 46 × 1 = 46.
        assert!(!cache.get(&request(5, 2, 60), &mut evicted));
        assert_eq!(drain_keys(&mut evicted), vec![2]);
        assert_eq!((cache.len(), cache.used_bytes()), (3, 8));
    }

    #[test]
    fn never_requested_again_is_not_kept() {
        let mut cache = BeladySize::with_params(4, 64, Sampling::Uniform, 0);
        let mut evicted = Vec::new();
        cache.get(&request(1, 2, 5), &mut evicted);
        cache.get(&request(2, 2, 6), &mut evicted);
        // A miss that is never requested again still makes room first, then is not inserted.
        assert!(!cache.get(&request(3, 1, NEXT_ACCESS_NEVER), &mut evicted));
        assert_eq!(drain_keys(&mut evicted), vec![2]);
        assert_eq!((cache.len(), cache.used_bytes()), (1, 2));
        // A last hit drops the object; the next admission reports it.
        assert!(cache.get(&request(1, 2, NEXT_ACCESS_NEVER), &mut evicted));
        assert!(evicted.is_empty());
        assert!(cache.is_empty());
        assert!(!cache.get(&request(4, 1, 9), &mut evicted));
        assert_eq!(drain_keys(&mut evicted), vec![1]);
        assert!(
            !cache.get(&request(5, 9, 9), &mut evicted),
            "larger than the cache"
        );
        assert!(cache.remove(4));
        assert!(!cache.remove(4));
        assert!(cache.is_empty() && cache.needs_next_access());
    }

    #[test]
    fn the_seed_fixes_the_draws() {
        let play = |seed| {
            let mut cache = BeladySize::with_params(8, 2, Sampling::HashTable, seed);
            let mut evicted = Vec::new();
            let steps: Vec<Step> = (0..200u64)
                .map(|i| Step {
                    key: i * 7 % 23,
                    size: 1 + (i % 3) as u32,
                    action: 2,
                })
                .collect();
            let hits: Vec<bool> = with_next_access(&steps)
                .iter()
                .map(|request| cache.get(request, &mut evicted))
                .collect();
            hits
        };
        // Pinned: seed 3 samples the same candidates in every run, so the same requests hit.
        let hit_at: Vec<usize> = play(3)
            .iter()
            .enumerate()
            .filter_map(|(index, &hit)| hit.then_some(index))
            .collect();
        assert_eq!(
            hit_at,
            [23, 42, 68, 74, 91, 95, 110, 133, 155, 176, 178, 194, 196, 199]
        );
        assert_ne!(play(3), play(4));
    }

    /// Checks that every resident is chained exactly once, in the bucket its key hashes to,
    /// and that the chain list matches; returns how many are chained.
    fn chained_positions(table: &BucketTable, residents: &[Resident]) -> usize {
        let mut seen = vec![false; residents.len()];
        let mut chained = 0;
        for (index, chain) in table.chains.iter().enumerate() {
            assert_eq!(table.chain_of.get(chain.bucket), Some(index as u32));
            let mut length = 0;
            let mut at = chain.head;
            while at != NIL {
                let resident = &residents[at as usize];
                assert_eq!(table.bucket(resident.key), chain.bucket);
                assert!(!seen[at as usize], "{at} chained twice");
                seen[at as usize] = true;
                length += 1;
                at = resident.chain_next;
            }
            assert_eq!(length, chain.len);
            chained += length as usize;
        }
        assert!(seen.iter().all(|&s| s), "a resident is not chained");
        chained
    }

    #[test]
    fn the_first_draw_shrinks_the_sparse_start_table() {
        let mut cache = BeladySize::with_params(1000, 128, Sampling::HashTable, 3);
        let mut evicted = Vec::new();
        for key in 0..1000u64 {
            cache.get(&request(key, 1, 5000 + key as i64), &mut evicted);
        }
        assert_eq!(cache.table.as_ref().unwrap().power, START_TABLE_POWER);
        cache.get(&request(5000, 1, 9000), &mut evicted);
        assert_eq!(evicted.len(), 1);
        let table = cache.table.as_ref().unwrap();
        // 2^24 buckets for 1000 residents: almost every pick fails, so the table halves until
        // picks succeed, near 1000 buckets.
        assert!((7..=12).contains(&table.power), "power {}", table.power);
        assert_eq!(chained_positions(table, &cache.residents), 1000);
    }

    #[test]
    fn hash_table_draws_favour_objects_alone_in_their_bucket() {
        // Three residents in a table forced down to two buckets: a resident alone in its
        // bucket is drawn twice as often as each of a pair sharing the other.
        let mut cache = BeladySize::with_params(100, 1, Sampling::HashTable, 7);
        let mut evicted = Vec::new();
        for key in 0..3 {
            cache.get(&request(key, 1, 1000 + key as i64), &mut evicted);
        }
        let table = cache.table.as_mut().unwrap();
        table.power = 1;
        table.rebuild(&mut cache.residents);
        let buckets: Vec<u64> = (0..3).map(|key| table.bucket(key)).collect();
        let mut counts = [0u32; 3];
        let mut drawn = Vec::new();
        table.draw_into(&mut cache.residents, &mut cache.random, 30_000, &mut drawn);
        for position in drawn {
            counts[position as usize] += 1;
        }
        if buckets[0] == buckets[1] && buckets[1] == buckets[2] {
            // One bucket of three: uniform.
            assert!(
                counts.iter().all(|&c| (9_000..11_000).contains(&c)),
                "{counts:?}"
            );
        } else {
            // One lone object (half the draws) and a pair (a quarter each).
            let lone = (0..3)
                .find(|&i| buckets.iter().filter(|&&b| b == buckets[i]).count() == 1)
                .unwrap();
            for (i, &count) in counts.iter().enumerate() {
                let expected = if i == lone { 15_000 } else { 7_500 };
                assert!(count.abs_diff(expected) < 1_000, "{counts:?} lone {lone}");
            }
        }
    }

    proptest! {
        /// Capacity and counts against a model that knows the never-again rules: a last hit
        /// drops the object, a last miss is not inserted, and dropped objects are reported by
        /// the next admission.
        #[test]
        fn capacity_holds_and_counts_match_a_model(
            capacity in 1u64..64,
            steps in steps(20),
            seed: u64,
            uniform: bool,
        ) {
            let sampling = if uniform { Sampling::Uniform } else { Sampling::HashTable };
            let mut cache = BeladySize::with_params(capacity, 4, sampling, seed);
            let mut model: HashMap<u64, u32> = HashMap::new();
            let mut dropped: HashMap<u64, u32> = HashMap::new();
            let mut evicted = Vec::new();
            for (step, request) in steps.iter().zip(with_next_access(&steps)) {
                if step.action == 0 {
                    prop_assert_eq!(cache.remove(step.key), model.remove(&step.key).is_some());
                } else {
                    let hit = cache.lookup(&request);
                    prop_assert_eq!(hit, model.contains_key(&step.key));
                    if hit && never_again(&request) {
                        dropped.insert(step.key, model.remove(&step.key).unwrap());
                    }
                    if !hit {
                        cache.admit(&request, &mut evicted);
                        for gone in evicted.drain(..) {
                            let size = dropped
                                .remove(&gone.key)
                                .or_else(|| model.remove(&gone.key));
                            prop_assert_eq!(size, Some(gone.size));
                        }
                        prop_assert!(dropped.is_empty());
                        if u64::from(step.size) <= capacity && !never_again(&request) {
                            model.insert(step.key, step.size);
                        }
                    }
                }
                prop_assert!(cache.used_bytes() <= cache.capacity_bytes());
                prop_assert_eq!(cache.len(), model.len());
                if let Some(table) = &cache.table {
                    let chained = chained_positions(table, &cache.residents);
                    prop_assert_eq!(chained, cache.residents.len());
                }
                prop_assert_eq!(
                    cache.used_bytes(),
                    model.values().map(|&size| u64::from(size)).sum::<u64>()
                );
            }
        }
    }
}
