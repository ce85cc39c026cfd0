//! Hyperbolic caching (Blankstein, Sen & Freedman, "Hyperbolic Caching: Flexible Caching for
//! Web Applications", USENIX ATC'17, §3): an object's priority is `n / t`, the accesses `n`
//! it has had since it entered the cache over the time `t` it has spent there; eviction
//! samples residents at random and evicts the one of lowest priority. The decisions are those
//! of libCacheSim's `Hyperbolic.c` (the version the `libcachesim` 0.3.5 Python package
//! bundles), which fixes what the paper leaves open, or changes it, as follows; we do the
//! same:
//! - Time is virtual: `t` counts requests (hits, misses, and misses the cache declined alike)
//!   since the one that admitted the object, where the paper speaks of time in the cache.
//! - `n` starts at 1 on admission (the admitting miss counts) and adds 1 per hit.
//! - The basic priority only: not divided by size or weighted by cost (the paper's
//!   extensions, §4, are not in libCacheSim), and nothing is kept of an object once it
//!   leaves.
//! - 64 samples (`n-sample`), drawn with replacement; among equal priorities the first drawn
//!   is evicted.
//!
//! Where this differs from libCacheSim:
//! - libCacheSim draws its samples through its chained hash table (a random non-empty
//!   bucket, then a random object of its chain), which favours objects alone in their bucket.
//!   Samples here are uniform over the residents by default (`uniform=true`, the paper's
//!   random sampling), from a dense array in O(1) each: the bucket weights barely move the
//!   minimum of 64 samples (miss ratios within 0.0006 of libCacheSim either way on every case
//!   compared) but cost about four times the simulation time. `uniform=false` reproduces them
//!   with [`ResidentDraw`] (see [`crate::util::resident_draw`]; which objects share a bucket
//!   then follows our hash of the key, not libCacheSim's).
//! - libCacheSim's draws are not seeded per cache (results change from run to run); here
//!   they follow `seed`.
//! - Priorities are compared exactly (cross multiplication in integers) where libCacheSim
//!   compares `1e8 · n / t` in floating point.

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::error::PolicyError;
use crate::util::dense_residents::DenseResidents;
use crate::util::resident_draw::ResidentDraw;
use crate::util::rng::Lehmer64;

/// What Hyperbolic knows of a resident.
#[derive(Clone, Copy, Debug)]
struct Usage {
    /// The request count when the object was admitted.
    admitted_at: u64,
    /// The admitting request and every hit since (saturating; far beyond any trace).
    accesses: u32,
}

/// Hyperbolic caching over a byte capacity.
pub struct Hyperbolic {
    capacity: u64,
    residents: DenseResidents<Usage>,
    draw: ResidentDraw,
    /// Residents drawn per eviction.
    samples: u32,
    /// Requests seen so far, the current one included (libCacheSim's `n_req`).
    requests: u64,
    rng: Lehmer64,
}

impl Hyperbolic {
    /// An empty cache of `capacity` bytes sampling `samples` residents per eviction
    /// (libCacheSim's `n-sample`, at least 1), uniformly or (`uniform` false) with the
    /// weights of libCacheSim's hash table, drawing from `seed`.
    pub fn new(
        capacity: u64,
        samples: u32,
        uniform: bool,
        seed: u64,
    ) -> Result<Hyperbolic, PolicyError> {
        if samples == 0 {
            return Err(PolicyError::refused(
                "hyperbolic",
                "n-sample must be at least 1",
            ));
        }
        Ok(Hyperbolic {
            capacity,
            residents: DenseResidents::default(),
            draw: ResidentDraw::new(uniform),
            samples,
            requests: 0,
            rng: Lehmer64::new(seed),
        })
    }

    /// The position of the sampled resident of lowest priority.
    fn choose_victim(&mut self) -> u32 {
        let mut victim = self.draw.draw(&self.residents, &mut self.rng);
        let usage = self.residents.get(victim).data;
        // Priority accesses / age, kept as the fraction's two terms.
        let (mut lowest_accesses, mut lowest_age) = (usage.accesses, self.age(usage));
        for _ in 1..self.samples {
            let candidate = self.draw.draw(&self.residents, &mut self.rng);
            let usage = self.residents.get(candidate).data;
            let age = self.age(usage);
            // accesses / age < lowest_accesses / lowest_age, both ages positive.
            if u128::from(usage.accesses) * u128::from(lowest_age)
                < u128::from(lowest_accesses) * u128::from(age)
            {
                victim = candidate;
                (lowest_accesses, lowest_age) = (usage.accesses, age);
            }
        }
        victim
    }

    /// Requests since admission; at least 1 for any object admitted by an earlier request.
    #[inline]
    fn age(&self, usage: Usage) -> u64 {
        // An object admitted by the current request is never sampled (admission comes after
        // eviction), but `max` keeps the fraction defined for callers outside `get`.
        (self.requests - usage.admitted_at).max(1)
    }
}

impl EvictionPolicy for Hyperbolic {
    fn space(&self) -> Space {
        self.residents.space(self.capacity)
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.space().check()?;
        self.residents.check_invariants()
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        self.requests += 1;
        match self.residents.find(request.key) {
            Some(position) => {
                let usage = &mut self.residents.get_mut(position).data;
                usage.accesses = usage.accesses.saturating_add(1);
                true
            }
            None => false,
        }
    }

    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        if u64::from(request.size) > self.capacity || self.residents.find(request.key).is_some() {
            return;
        }
        while self.residents.bytes() + u64::from(request.size) > self.capacity {
            let victim = self.choose_victim();
            let gone = self.residents.remove_at(victim);
            self.draw.remove(gone.key);
            evicted.push(gone.evicted());
        }
        let usage = Usage {
            admitted_at: self.requests,
            accesses: 1,
        };
        self.draw.add(request.key, &self.residents);
        self.residents.insert(request.key, request.size, usage);
    }

    fn remove(&mut self, key: u64) -> bool {
        let gone = self.residents.remove(key).is_some();
        if gone {
            self.draw.remove(key);
        }
        gone
    }

    #[inline]
    fn contains(&self, key: u64) -> Option<bool> {
        Some(self.residents.find(key).is_some())
    }

    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.residents.prefetch_slot(key);
    }

    #[inline]
    fn prefetch_node(&self, key: u64) {
        self.residents.prefetch_resident(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::model_check::{check_against_model, steps};
    use proptest::prelude::*;

    #[test]
    fn evicts_the_lowest_accesses_per_request_in_cache() {
        // With many samples over three residents every one is seen: the choice is exact.
        let mut cache = Hyperbolic::new(3, 256, false, 0).unwrap();
        let mut evicted = Vec::new();
        // Request 1 admits A, 2 admits B, 3 admits C, 4–5 hit A, 6 hits C.
        for key in [1, 2, 3, 1, 1, 3] {
            cache.get(&Request::new(key, 1), &mut evicted);
        }
        // At request 7: A 3/6, B 1/5, C 2/4. B goes.
        cache.get(&Request::new(4, 1), &mut evicted);
        assert_eq!(evicted, vec![Evicted { key: 2, size: 1 }]);
        evicted.clear();
        // At request 8: A 3/7 ≈ 0.43, C 2/5 = 0.4, D 1/1. C goes.
        cache.get(&Request::new(5, 1), &mut evicted);
        assert_eq!(evicted, vec![Evicted { key: 3, size: 1 }]);
    }

    #[test]
    fn declined_requests_still_age_residents() {
        let mut cache = Hyperbolic::new(2, 256, false, 0).unwrap();
        let mut evicted = Vec::new();
        // A enters at request 1 and is hit twice; B enters at request 4.
        for key in [1, 1, 1, 2] {
            cache.get(&Request::new(key, 1), &mut evicted);
        }
        // Request 5 is larger than the cache: declined, but it counts.
        cache.get(&Request::new(9, 3), &mut evicted);
        // At request 6: A 3/5, B 1/2, so B goes (at request 5 it would have been A: 3/4
        // against 1/1).
        cache.get(&Request::new(3, 1), &mut evicted);
        assert_eq!(evicted, vec![Evicted { key: 2, size: 1 }]);
    }

    #[test]
    fn refuses_zero_samples() {
        assert!(Hyperbolic::new(10, 0, false, 0).is_err());
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(capacity in 1u64..64, uniform: bool, seed in 0u64..4, steps in steps(20)) {
            check_against_model(&mut Hyperbolic::new(capacity, 4, uniform, seed).unwrap(), &steps)?;
        }
    }
}
