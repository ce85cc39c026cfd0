//! Admission filters: which missed objects a cache inserts at all, composable with every policy
//! that takes one ([`crate::registry::PolicyEntry::takes_admission`]), one file each, as
//! libCacheSim's admissioners (`admissionAlgo.h`) sit in front of its caches.
//!
//! [`Admitted`] asks a filter exactly where libCacheSim's `cache_get_base` does: every request
//! is first looked up, then shown to the filter ([`AdmissionFilter::observe`], libCacheSim's
//! `admissioner->update`, which gets the cache's capacity, hit or miss); a miss is then put to
//! the filter ([`AdmissionFilter::admit`]) before the policy's own check that the object fits
//! in the cache at all (`cache_can_insert_default`), so a filter also sees misses too large to
//! insert. Policies whose libCacheSim `can_insert` refuses some objects before asking the
//! admissioner say so through [`EvictionPolicy::admission_precheck`].

pub mod adaptsize;
pub mod bloom;
pub mod prob;
pub mod size;
pub mod size_prob;

use heterarchy_trace::Request;

use crate::error::PolicyError;
use crate::eviction::{Evicted, EvictionPolicy, Space};
use crate::params::{find_entry, Named, NamedSpec, ParamSpec, Params};

/// Decides whether a missed object enters the cache.
pub trait AdmissionFilter: Send {
    /// Whether the object of `request`, which just missed, may be inserted.
    fn admit(&mut self, request: &Request) -> bool;

    /// Sees every request right after its lookup, hit or miss, with the capacity of the cache
    /// it guards (libCacheSim's `admissioner->update`, which AdaptSize learns from).
    fn observe(&mut self, _request: &Request, _capacity_bytes: u64) {}

    /// Starts loading what [`admit`](Self::admit) on `key` will touch, for a request a few
    /// positions ahead (a hint, as [`EvictionPolicy::prefetch_slot`] is).
    #[inline]
    fn prefetch(&self, _key: u64) {}
}

/// Builds a filter from checked parameters.
pub type BuildFilter = fn(&Params) -> Result<Box<dyn AdmissionFilter>, PolicyError>;

/// One filter `--admission` can name.
pub struct FilterEntry {
    pub name: &'static str,
    /// Other accepted names (libCacheSim's spellings).
    pub aliases: &'static [&'static str],
    pub params: &'static [ParamSpec],
    /// The paper and section, and the libCacheSim file it matches.
    pub source: &'static str,
    pub build: BuildFilter,
}

impl Named for FilterEntry {
    fn name(&self) -> &'static str {
        self.name
    }

    fn aliases(&self) -> &'static [&'static str] {
        self.aliases
    }
}

impl std::fmt::Debug for FilterEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Every filter.
pub const FILTERS: &[FilterEntry] = &[
    size::ENTRY,
    bloom::ENTRY,
    prob::ENTRY,
    size_prob::ENTRY,
    adaptsize::ENTRY,
];

/// A checked filter with its parameters, built afresh for each cache.
#[derive(Clone, Debug)]
pub struct FilterSpec {
    entry: &'static FilterEntry,
    params: Params,
    label: String,
}

impl FilterSpec {
    /// Checks a filter as written (`"size:size=4096"`).
    pub fn parse(text: &str) -> Result<FilterSpec, PolicyError> {
        let named = NamedSpec::parse(text, "admission filter")?;
        let entry = find_entry(FILTERS, &named.name, "admission filter")?;
        let params = Params::parse(entry.name, entry.params, &named.given)?;
        (entry.build)(&params)?;
        let label = named.label();
        Ok(FilterSpec {
            entry,
            params,
            label,
        })
    }

    /// The filter as results name it.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// A fresh filter.
    pub fn build(&self) -> Result<Box<dyn AdmissionFilter>, PolicyError> {
        (self.entry.build)(&self.params)
    }
}

/// A policy behind an admission filter: a miss the filter refuses is not inserted (libCacheSim's
/// `cache_get_base` with an admissioner; see the module doc for the order of the calls).
pub struct Admitted {
    policy: Box<dyn EvictionPolicy>,
    filter: Box<dyn AdmissionFilter>,
    /// The policy's capacity, which never changes: the filter sees it on every request.
    capacity_bytes: u64,
}

impl Admitted {
    /// `policy` with `filter` in front.
    pub fn new(policy: Box<dyn EvictionPolicy>, filter: Box<dyn AdmissionFilter>) -> Admitted {
        let capacity_bytes = policy.capacity_bytes();
        Admitted {
            policy,
            filter,
            capacity_bytes,
        }
    }
}

impl EvictionPolicy for Admitted {
    fn space(&self) -> Space {
        self.policy.space()
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.policy.check_invariants()
    }

    fn needs_next_access(&self) -> bool {
        self.policy.needs_next_access()
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        let hit = self.policy.lookup(request);
        self.filter.observe(request, self.capacity_bytes);
        hit
    }

    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        if self.policy.admission_precheck(request) && self.filter.admit(request) {
            self.policy.admit(request, evicted);
        }
    }

    fn remove(&mut self, key: u64) -> bool {
        self.policy.remove(key)
    }

    fn contains(&self, key: u64) -> Option<bool> {
        self.policy.contains(key)
    }

    fn admission_precheck(&self, request: &Request) -> bool {
        self.policy.admission_precheck(request)
    }

    // A filter in front must not cost the policy its prefetching.
    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.policy.prefetch_slot(key);
        self.filter.prefetch(key);
    }

    #[inline]
    fn prefetch_node(&self, key: u64) {
        self.policy.prefetch_node(key);
    }

    #[inline]
    fn prefetch_victims(&self) {
        self.policy.prefetch_victims();
    }

    /// A hit can evict (SLRU's demotions) whatever the filter says: the policy's own report.
    fn drain_hit_evictions(&mut self, evicted: &mut Vec<Evicted>) {
        self.policy.drain_hit_evictions(evicted);
    }

    #[inline]
    fn prefetch_neighbours(&self, key: u64) {
        self.policy.prefetch_neighbours(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{PolicySpec, POLICIES};
    use crate::util::model_check::{check_against_model, check_simulate_matches_get, steps};
    use proptest::prelude::*;

    /// Every filter as written, reconfiguring AdaptSize often enough to matter in short runs.
    const WRITTEN: &[&str] = &[
        "size:size=8",
        "bloom",
        "prob:prob=0.3,seed=4",
        "size-prob:exponent=0.2,seed=1",
        "adaptsize:reconf-interval=50,seed=2",
    ];

    #[test]
    fn every_filter_builds_with_its_defaults_and_names_are_unique() {
        let mut names: Vec<String> = Vec::new();
        for entry in FILTERS {
            FilterSpec::parse(entry.name).unwrap().build().unwrap();
            for name in std::iter::once(&entry.name).chain(entry.aliases) {
                let name = name.to_ascii_lowercase();
                assert!(!names.contains(&name), "{name} twice");
                FilterSpec::parse(&name).unwrap();
                names.push(name);
            }
        }
        assert_eq!(WRITTEN.len(), FILTERS.len());
    }

    #[test]
    fn every_filter_in_front_of_every_policy_simulates_like_plain_gets() {
        for policy in POLICIES.iter().filter(|entry| entry.takes_admission) {
            for filter in WRITTEN {
                let spec = PolicySpec::parse(policy.name, Some(filter)).unwrap();
                check_simulate_matches_get(&|| spec.build(500).unwrap());
            }
        }
    }

    proptest! {
        #[test]
        fn filtered_caches_keep_their_accounts(capacity in 1u64..200, steps in steps(20)) {
            for policy in ["lru", "s3fifo", "slru"] {
                for filter in WRITTEN {
                    let spec = PolicySpec::parse(policy, Some(filter)).unwrap();
                    check_against_model(spec.build(capacity).unwrap().as_mut(), &steps)?;
                }
            }
        }
    }
}
