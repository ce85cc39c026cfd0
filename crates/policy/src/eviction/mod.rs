//! The eviction trait and one module per algorithm.

pub mod arc;
pub mod belady;
pub mod beladysize;
pub mod cacheus;
pub mod clock;
pub mod clock2q_plus;
pub mod clockpro;
pub mod fifo;
pub mod gdsf;
pub mod hyperbolic;
pub mod lecar;
pub mod lfu;
pub mod lfuda;
pub mod lhd;
pub mod lirs;
pub mod lru;
pub mod lru_k;
pub mod lru_prob;
pub mod mq;
pub mod random;
pub mod s3fifo;
pub mod sieve;
pub mod size;
pub mod slru;
pub mod twoq;
pub mod wtinylfu;

use heterarchy_trace::Request;

use crate::util::List;

/// An object a policy pushed out to make room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evicted {
    pub key: u64,
    pub size: u32,
}

/// Request and byte counts of a simulation, split into hits and misses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimCounters {
    pub requests: u64,
    pub misses: u64,
    pub bytes: u64,
    pub miss_bytes: u64,
}

impl SimCounters {
    /// Fraction of requests that missed (0 for an empty run).
    pub fn miss_ratio(&self) -> f64 {
        ratio(self.misses, self.requests)
    }

    /// Fraction of requested bytes that missed (0 for an empty run).
    pub fn byte_miss_ratio(&self) -> f64 {
        ratio(self.miss_bytes, self.bytes)
    }
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// A cache's capacity and what fills it: the size accounting every policy shares (libCacheSim's
/// `cache_size`, `occupied_byte` and `n_obj` of `cache_t`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Space {
    pub capacity_bytes: u64,
    pub used_bytes: u64,
    pub objects: usize,
}

impl Space {
    /// An empty cache of `capacity_bytes`.
    pub fn new(capacity_bytes: u64) -> Space {
        Space {
            capacity_bytes,
            ..Space::default()
        }
    }

    /// The resident objects are exactly those linked in `lists`.
    #[inline]
    pub fn of_lists(capacity_bytes: u64, lists: &[&List]) -> Space {
        Space {
            capacity_bytes,
            used_bytes: lists.iter().map(|list| list.bytes).sum(),
            objects: lists.iter().map(|list| list.len).sum(),
        }
    }

    /// Whether `size` more bytes fit without evicting.
    #[inline]
    pub fn fits(&self, size: u64) -> bool {
        self.used_bytes + size <= self.capacity_bytes
    }

    /// Counts a newly resident object.
    #[inline]
    pub fn charge(&mut self, size: u32) {
        self.used_bytes += u64::from(size);
        self.objects += 1;
    }

    /// Checks what any cache's accounting keeps between requests: no more bytes than the
    /// capacity, and no bytes without objects.
    pub fn check(&self) -> Result<(), String> {
        if self.used_bytes > self.capacity_bytes {
            return Err(format!(
                "{} bytes used of a capacity of {}",
                self.used_bytes, self.capacity_bytes
            ));
        }
        if self.objects == 0 && self.used_bytes != 0 {
            return Err(format!("{} bytes used by no object", self.used_bytes));
        }
        Ok(())
    }

    /// Uncounts an object that left.
    #[inline]
    pub fn release(&mut self, size: u32) {
        debug_assert!(self.objects > 0 && self.used_bytes >= u64::from(size));
        self.used_bytes = self.used_bytes.saturating_sub(u64::from(size));
        self.objects = self.objects.saturating_sub(1);
    }
}

/// A cache's eviction algorithm over a byte capacity (object-count capacity is byte capacity
/// with every object of size 1).
///
/// The contract is libCacheSim's `get` (its `cache_get_base`): a lookup that hits updates the
/// policy's state; a miss admits the object unless it is larger than the whole cache, evicting
/// until it fits. Splitting [`lookup`](Self::lookup) from [`admit`](Self::admit) lets the engine
/// skip admission (NHC's `data_admit`, seed 000 §4.3.2) without a second code path.
pub trait EvictionPolicy: Send {
    /// The capacity and what fills it.
    fn space(&self) -> Space;

    /// Capacity in bytes.
    #[inline]
    fn capacity_bytes(&self) -> u64 {
        self.space().capacity_bytes
    }

    /// Bytes held by resident objects.
    #[inline]
    fn used_bytes(&self) -> u64 {
        self.space().used_bytes
    }

    /// Number of resident objects.
    #[inline]
    fn len(&self) -> usize {
        self.space().objects
    }

    /// True when nothing is resident.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks what the policy's bookkeeping must keep between calls of
    /// [`lookup`](Self::lookup), [`admit`](Self::admit), [`get`](Self::get) and
    /// [`remove`](Self::remove): never over capacity, and, where the policy overrides this,
    /// its counted bytes and objects equal to what its own structures hold. A policy serving
    /// inside another may be over capacity after [`insert`](Self::insert) until the outer one
    /// evicts, so only the outer policy is checked. For tests: the walk may take time linear
    /// in the residents. The message says what broke.
    fn check_invariants(&self) -> Result<(), String> {
        self.space().check()
    }

    /// True for oracles that read [`Request::next_access`] (Belady): the simulator then
    /// computes next accesses when the trace does not carry them.
    fn needs_next_access(&self) -> bool {
        false
    }

    /// Looks `request.key` up. A hit updates recency or frequency state and returns true. A miss
    /// returns false and may note what the policy learns from it (a ghost hit) for the
    /// [`admit`](Self::admit) of the same request that may follow.
    fn lookup(&mut self, request: &Request) -> bool;

    /// Inserts the object of a request that just missed, pushing the objects evicted to make
    /// room onto `evicted`. Does nothing when the object is larger than the capacity.
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>);

    /// Drops `key` if resident (a delete or trim); returns whether it was.
    fn remove(&mut self, key: u64) -> bool;

    /// Whether `key` is resident, changing nothing: for a caller that keeps no residency table
    /// of its own (the cache controller with one clean tier; docs/architecture.md, "One policy
    /// code, two executors").
    /// `None` from a policy whose residency also changes outside [`admit`](Self::admit) and
    /// [`remove`](Self::remove): LIRS's hits evict, and the next `admit` reports it.
    fn contains(&self, key: u64) -> Option<bool>;

    /// Whether `request`, which just missed, passes the policy's own insertion check that
    /// libCacheSim runs before it asks an admission filter: a policy whose `can_insert` tests
    /// something first and only then calls `cache_can_insert_default` (S3-FIFO: no larger than
    /// its small queue) refuses here, so the filter never sees the object (no random draw, no
    /// count). The common path asks the filter first and checks the size afterwards, in
    /// [`admit`](Self::admit), hence the default.
    #[inline]
    fn admission_precheck(&self, _request: &Request) -> bool {
        true
    }

    /// Moves the objects that hits evicted since the last call onto `evicted` (SLRU's cooling
    /// can evict on a hit; [`admit`](Self::admit) reports them too). A no-op for policies whose
    /// hits never evict.
    fn drain_hit_evictions(&mut self, _evicted: &mut Vec<Evicted>) {}

    /// Whether [`next_victim`](Self::next_victim), [`evict_one`](Self::evict_one),
    /// [`insert`](Self::insert) and [`can_insert`](Self::can_insert) do what libCacheSim's
    /// `to_evict`, `evict`, `insert` and `can_insert` do, so that the policy can serve inside
    /// another one that decides when it evicts (W-TinyLFU's main cache).
    fn serves_inside(&self) -> bool {
        false
    }

    /// The object the next [`evict_one`](Self::evict_one) pushes out, or `None` when empty
    /// (libCacheSim's `to_evict`). Only for policies that [`serves_inside`](Self::serves_inside).
    fn next_victim(&self) -> Option<Evicted> {
        None
    }

    /// Evicts one object onto `evicted` (libCacheSim's `evict`); false when nothing was resident.
    /// Only for policies that [`serves_inside`](Self::serves_inside).
    fn evict_one(&mut self, _evicted: &mut Vec<Evicted>) -> bool {
        false
    }

    /// Inserts the object of a request that missed without first making room (libCacheSim's
    /// `insert`, which its `get` calls after evicting): the composing policy has made room, or
    /// lets this one run over its capacity for a while. Some policies still evict inside
    /// (SLRU when no segment has room). Only for policies that
    /// [`serves_inside`](Self::serves_inside).
    fn insert(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        self.admit(request, evicted);
    }

    /// Whether [`admit`](Self::admit) would insert the object of `request` at all
    /// (libCacheSim's `can_insert`, without an admission filter).
    fn can_insert(&self, request: &Request) -> bool {
        u64::from(request.size) <= self.capacity_bytes()
    }

    /// Serves one request as a cache that admits every miss; returns whether it hit.
    #[inline]
    fn get(&mut self, request: &Request, evicted: &mut Vec<Evicted>) -> bool {
        if self.lookup(request) {
            true
        } else {
            self.admit(request, evicted);
            false
        }
    }

    /// Starts loading the table slot of `key`, for a request a few positions ahead. A hint:
    /// results never depend on it. Policies bound by memory latency implement the three
    /// prefetch methods; the rest keep these no-ops.
    #[inline]
    fn prefetch_slot(&self, _key: u64) {}

    /// Looks `key` up and starts loading what a hit on it will touch (its node).
    #[inline]
    fn prefetch_node(&self, _key: u64) {}

    /// Starts loading what the next eviction will touch (list tails and their neighbours).
    #[inline]
    fn prefetch_victims(&self) {}

    /// Starts loading what a hit on `key` relinks besides its node (its list neighbours), for
    /// a request a few positions ahead whose node should have arrived.
    #[inline]
    fn prefetch_neighbours(&self, _key: u64) {}

    /// Serves a batch of requests, counting hits and misses. Requests before `warmup_left` is
    /// used up change the cache but are not counted. A provided method, so each policy gets its
    /// own monomorphic copy of the simulator's inner loop and only one dynamic call per batch.
    /// A request's chain of dependent cache misses (table slot, node, list neighbours) is
    /// overlapped with the next requests' by prefetching their slots and nodes ahead.
    fn simulate(&mut self, batch: &[Request], warmup_left: &mut u64, counters: &mut SimCounters) {
        let mut evicted = Vec::new();
        for (position, request) in batch.iter().enumerate() {
            if let Some(ahead) = batch.get(position + PREFETCH_SLOT_DISTANCE) {
                self.prefetch_slot(ahead.key);
            }
            if let Some(ahead) = batch.get(position + PREFETCH_NODE_DISTANCE) {
                self.prefetch_node(ahead.key);
            }
            if let Some(ahead) = batch.get(position + PREFETCH_NEIGHBOUR_DISTANCE) {
                self.prefetch_neighbours(ahead.key);
            }
            self.prefetch_victims();
            let hit = self.get(request, &mut evicted);
            evicted.clear();
            if *warmup_left > 0 {
                *warmup_left -= 1;
                continue;
            }
            counters.requests += 1;
            counters.bytes += u64::from(request.size);
            if !hit {
                counters.misses += 1;
                counters.miss_bytes += u64::from(request.size);
            }
        }
    }
}

/// How many requests ahead [`EvictionPolicy::simulate`] prefetches a request's table slot.
pub const PREFETCH_SLOT_DISTANCE: usize = 16;
/// How many requests ahead it prefetches a request's node (its slot should have arrived).
pub const PREFETCH_NODE_DISTANCE: usize = 8;
/// How many requests ahead it prefetches a hit's list neighbours (its node should have
/// arrived).
pub const PREFETCH_NEIGHBOUR_DISTANCE: usize = 4;

#[cfg(test)]
mod tests {
    use crate::registry::{create, policy_names};
    use crate::util::model_check::check_simulate_matches_get;

    #[test]
    fn every_policy_simulates_like_plain_gets() {
        for name in policy_names() {
            check_simulate_matches_get(&|| create(name, 500).unwrap());
        }
    }
}
