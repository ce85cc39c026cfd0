//! Admission on second sight: a miss is admitted only if the filter was asked about the same
//! object before, so one-hit wonders never enter. libCacheSim's `bloomfilter` admissioner
//! (`admission/bloomfilter.c`, `lcs.BloomFilterAdmissioner()`).
//!
//! Despite its name libCacheSim's filter is no Bloom filter: it is an exact table of every
//! object id it was asked about (a GLib hash table of counts) that is never reset or aged. So
//! is this one (a set of ids), and it makes exactly libCacheSim's decisions: no false positives,
//! memory growing with the distinct objects that missed. Only the misses it is asked about
//! count (not hits, and not misses a policy refuses before asking it; see
//! [`crate::eviction::EvictionPolicy::admission_precheck`]).

use heterarchy_trace::Request;

use super::{AdmissionFilter, FilterEntry};
use crate::util::key_table::KeyTable;

/// The registry entry.
pub const ENTRY: FilterEntry = FilterEntry {
    name: "bloom",
    aliases: &["bloomfilter", "bloom-filter"],
    params: &[],
    source: "admit on the second miss (exact, never reset); libCacheSim admission/bloomfilter.c",
    build: |_| Ok(Box::new(SecondSight::default())),
};

/// Admits an object on every miss after its first.
#[derive(Default)]
pub struct SecondSight {
    /// Objects the filter was asked about (the value is unused: the table is a set).
    seen: KeyTable,
}

impl AdmissionFilter for SecondSight {
    #[inline]
    fn admit(&mut self, request: &Request) -> bool {
        if self.seen.get(request.key).is_some() {
            true
        } else {
            self.seen.insert(request.key, 0);
            false
        }
    }

    // The table outgrows the CPU's caches with the distinct objects: its slot is a memory miss.
    #[inline]
    fn prefetch(&self, key: u64) {
        self.seen.prefetch(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::PolicySpec;

    #[test]
    fn second_miss_is_admitted_and_hits_do_not_count() {
        let mut filter = SecondSight::default();
        assert!(!filter.admit(&Request::new(1, 10)));
        assert!(!filter.admit(&Request::new(2, 10)));
        assert!(filter.admit(&Request::new(1, 10)));
        assert!(filter.admit(&Request::new(1, 10)));

        let mut cache = PolicySpec::parse("lru", Some("bloomfilter"))
            .unwrap()
            .build(2)
            .unwrap();
        let mut evicted = Vec::new();
        let mut get = |key| cache.get(&Request::new(key, 1), &mut evicted);
        // 1 is refused, then admitted; its hit is not a sighting; 2 and 3 push it out.
        assert!(!get(1));
        assert!(!get(1));
        assert!(get(1));
        for key in [2, 3, 2, 3] {
            assert!(!get(key));
        }
        // 1 was seen before, so it comes straight back.
        assert!(!get(1));
        assert!(get(1));
    }

    #[test]
    fn oversized_misses_count_for_lru_but_not_behind_s3fifo() {
        // LRU asks the filter before it checks the size (libCacheSim's
        // cache_can_insert_default): a first miss of 1 too large for the cache is a sighting.
        let mut evicted = Vec::new();
        let mut lru = PolicySpec::parse("lru", Some("bloom"))
            .unwrap()
            .build(100)
            .unwrap();
        assert!(!lru.get(&Request::new(1, 200), &mut evicted));
        assert!(!lru.get(&Request::new(1, 50), &mut evicted));
        assert!(lru.get(&Request::new(1, 50), &mut evicted));
        // S3-FIFO refuses objects larger than its small queue (10 of 100) before asking.
        let mut s3fifo = PolicySpec::parse("s3fifo", Some("bloom"))
            .unwrap()
            .build(100)
            .unwrap();
        assert!(!s3fifo.get(&Request::new(1, 20), &mut evicted));
        assert!(!s3fifo.get(&Request::new(1, 5), &mut evicted));
        assert!(!s3fifo.get(&Request::new(1, 5), &mut evicted));
        assert!(s3fifo.get(&Request::new(1, 5), &mut evicted));
    }
}
