//! An exclusive two-tier LRU cache simulated directly, to validate the prediction from reuse
//! distances (`crates/sim/tests/sizing.rs`): tier 1 and tier 2 each an LRU of the policy crate;
//! a miss in both is admitted to tier 1, a tier-2 hit is promoted to tier 1, and what
//! tier 1 evicts is demoted to tier 2, whose evictions leave the cache. What
//! [`super::ReuseByOp::hits`] predicts from stack distances, this counts.

use heterarchy_policy::{create, Evicted, EvictionPolicy};
use heterarchy_trace::Request;

use super::reuse::{PageOp, TierHits};

/// Two LRU tiers of whole pages, exclusive of each other.
pub struct ExclusiveLru {
    tiers: [Box<dyn EvictionPolicy>; 2],
    hits: TierHits,
    evicted: Vec<Evicted>,
    demoted: Vec<Evicted>,
}

impl ExclusiveLru {
    /// Tiers of `t1_pages` and `t2_pages` pages (tier 1 at least one page).
    pub fn new(t1_pages: u64, t2_pages: u64) -> ExclusiveLru {
        let lru = |pages: u64| create("lru", pages).expect("lru is a policy");
        ExclusiveLru {
            tiers: [lru(t1_pages.max(1)), lru(t2_pages)],
            hits: TierHits::default(),
            evicted: Vec::new(),
            demoted: Vec::new(),
        }
    }

    /// Serves one page access (its size is taken as one page).
    pub fn access(&mut self, request: &Request) {
        let Some(op) = PageOp::of(request.op) else {
            return;
        };
        let op = op as usize;
        let page = Request {
            size: 1,
            ..*request
        };
        let [t1, t2] = &mut self.tiers;
        if t1.lookup(&page) {
            self.hits.t1[op] += 1;
            return;
        }
        if t2.remove(page.key) {
            self.hits.t2[op] += 1;
        } else {
            self.hits.misses[op] += 1;
        }
        self.evicted.clear();
        t1.admit(&page, &mut self.evicted);
        for demoted in &self.evicted {
            let request = Request {
                key: demoted.key,
                size: 1,
                ..page
            };
            t2.admit(&request, &mut self.demoted);
        }
        self.demoted.clear();
    }

    /// What it has counted so far.
    pub fn hits(&self) -> TierHits {
        self.hits
    }
}
