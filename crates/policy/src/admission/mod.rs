//! Admission filters: which missed objects a cache inserts at all, composable with every policy
//! that takes one ([`crate::registry::PolicyEntry::takes_admission`]), one file each, as
//! libCacheSim's admissioners (`admissionAlgo.h`) sit in front of its caches.

pub mod size;

use heterarchy_trace::Request;

use crate::eviction::{Evicted, EvictionPolicy, Space};
use crate::params::{NamedSpec, ParamSpec, Params, PolicyError};

/// Decides whether a missed object enters the cache.
pub trait AdmissionFilter: Send {
    /// Whether the object of `request`, which just missed, may be inserted.
    fn admit(&mut self, request: &Request) -> bool;

    /// Sees every request before it is served, with the cache as it stands (libCacheSim's
    /// `admissioner->update`, which AdaptSize learns from).
    fn observe(&mut self, _request: &Request, _cache: &Space) {}
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

impl std::fmt::Debug for FilterEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Every filter.
pub const FILTERS: &[FilterEntry] = &[size::ENTRY];

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
        let entry = FILTERS
            .iter()
            .find(|entry| {
                entry.name.eq_ignore_ascii_case(&named.name)
                    || entry
                        .aliases
                        .iter()
                        .any(|a| a.eq_ignore_ascii_case(&named.name))
            })
            .ok_or_else(|| {
                let names: Vec<&str> = FILTERS.iter().map(|entry| entry.name).collect();
                PolicyError(format!(
                    "unknown admission filter \"{}\"; expected one of: {}",
                    named.name,
                    names.join(", ")
                ))
            })?;
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
/// `cache_can_insert_default` consulting the admissioner before `insert`).
pub struct Admitted {
    policy: Box<dyn EvictionPolicy>,
    filter: Box<dyn AdmissionFilter>,
}

impl Admitted {
    /// `policy` with `filter` in front.
    pub fn new(policy: Box<dyn EvictionPolicy>, filter: Box<dyn AdmissionFilter>) -> Admitted {
        Admitted { policy, filter }
    }
}

impl EvictionPolicy for Admitted {
    fn space(&self) -> Space {
        self.policy.space()
    }

    fn needs_next_access(&self) -> bool {
        self.policy.needs_next_access()
    }

    fn lookup(&mut self, request: &Request) -> bool {
        self.filter.observe(request, &self.policy.space());
        self.policy.lookup(request)
    }

    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        if self.filter.admit(request) {
            self.policy.admit(request, evicted);
        }
    }

    fn remove(&mut self, key: u64) -> bool {
        self.policy.remove(key)
    }

    fn contains(&self, key: u64) -> Option<bool> {
        self.policy.contains(key)
    }
}
