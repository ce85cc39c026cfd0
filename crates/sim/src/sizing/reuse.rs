//! Reuse distances split by op (seed 002 §3.2.3): every page access of a block trace's cache
//! trace (4 KiB pages) gets its LRU stack distance in pages, and the distances are counted per
//! op — reads and writes apart, as the thesis' latency model prices them apart — in allocation
//! units of 1 MiB (256 pages), the granularity tiers are sized in.
//!
//! An exclusive two-tier LRU cache of `t1` and `t2` units holds, in T1, the `t1 × 256` most
//! recently used pages and, in T2, the next `t2 × 256` (a page leaving T1 is demoted to T2's
//! most recent end; a T2 hit promotes it back): an access hits T1 exactly when its distance is
//! at most `t1` units, T2 when it is above that and at most `t1 + t2`, and misses otherwise
//! or on first access. So one histogram answers every pair of sizes.

use heterarchy_trace::{Op, Request, TraceReader};
use serde::Serialize;

use crate::cache_sim::BATCH;
use crate::mrc::stack::{ObjectStack, Stack};
use crate::mrc::MrcError;

/// The cache line of a block cache trace (seed 002 §2.1.3: "a fixed size").
pub const PAGE_BYTES: u64 = 4096;
/// Pages in one allocation unit, 1 MiB (seed 002 §3.2.1).
pub const UNIT_PAGES: u64 = 256;

/// The two ops the latency model prices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PageOp {
    Read = 0,
    Write = 1,
}

impl PageOp {
    /// The op a trace request counts as: discards and deletes are not cache accesses (`None`);
    /// the other ops that change data write; everything else reads.
    pub fn of(op: Op) -> Option<PageOp> {
        match op {
            Op::Trim | Op::Delete => None,
            op if op.is_write() => Some(PageOp::Write),
            _ => Some(PageOp::Read),
        }
    }
}

/// What each op's accesses would hit in an exclusive two-tier LRU cache, by tier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TierHits {
    /// Hits in tier 1, reads then writes.
    pub t1: [u64; 2],
    /// Hits in tier 2.
    pub t2: [u64; 2],
    /// Misses in both, first accesses included.
    pub misses: [u64; 2],
}

/// The stack distances of a cache trace's reads and writes, in allocation units.
#[derive(Clone, Debug, PartialEq)]
pub struct ReuseByOp {
    unit_pages: u64,
    /// `histograms[op][u]`: re-accesses of `op` at a distance of `u` units (above `u - 1` units
    /// of pages and at most `u`); index 0 unused.
    histograms: [Vec<u64>; 2],
    /// First accesses of each op.
    cold: [u64; 2],
    /// Accesses of each op.
    requests: [u64; 2],
    /// `cumulative[op][u]`: re-accesses of `op` at distances of at most `u` units.
    cumulative: [Vec<u64>; 2],
}

impl ReuseByOp {
    /// Nothing measured yet, distances counted in units of `unit_pages` pages.
    fn new(unit_pages: u64) -> ReuseByOp {
        ReuseByOp {
            unit_pages: unit_pages.max(1),
            histograms: [Vec::new(), Vec::new()],
            cold: [0; 2],
            requests: [0; 2],
            cumulative: [vec![0], vec![0]],
        }
    }

    /// Measures every page access of `reader` (a block trace split into 4 KiB pages; each
    /// request is one page), in 1 MiB units.
    pub fn measure(reader: &mut dyn TraceReader) -> Result<ReuseByOp, MrcError> {
        ReuseByOp::measure_in_units(reader, UNIT_PAGES)
    }

    /// The same in units of `unit_pages` pages.
    pub fn measure_in_units(
        reader: &mut dyn TraceReader,
        unit_pages: u64,
    ) -> Result<ReuseByOp, MrcError> {
        let mut reuse = ReuseByOp::new(unit_pages);
        let mut stack = ObjectStack::new();
        let mut batch: Vec<Request> = Vec::with_capacity(BATCH);
        loop {
            reader.read_batch(&mut batch, BATCH)?;
            if batch.is_empty() {
                return Ok(reuse.finish());
            }
            for request in &batch {
                let Some(op) = PageOp::of(request.op) else {
                    continue;
                };
                stack.reserve(1)?;
                reuse.record(op, stack.access(request.key, 1));
            }
        }
    }

    /// Counts one access of `op` at `distance` pages (`None`: a first access).
    fn record(&mut self, op: PageOp, distance: Option<u64>) {
        let op = op as usize;
        self.requests[op] += 1;
        let Some(distance) = distance else {
            self.cold[op] += 1;
            return;
        };
        let unit = distance.div_ceil(self.unit_pages) as usize;
        let histogram = &mut self.histograms[op];
        if histogram.len() <= unit {
            histogram.resize(unit + 1, 0);
        }
        histogram[unit] += 1;
    }

    /// Pages in one unit of this measurement.
    pub fn unit_pages(&self) -> u64 {
        self.unit_pages
    }

    /// Accesses of `op`.
    pub fn requests(&self, op: PageOp) -> u64 {
        self.requests[op as usize]
    }

    /// First accesses of `op`: misses at every size.
    pub fn cold_misses(&self, op: PageOp) -> u64 {
        self.cold[op as usize]
    }

    /// The largest distance seen, in units: a cache this large misses only first accesses.
    pub fn max_units(&self) -> u64 {
        self.histograms
            .iter()
            .map(|histogram| histogram.len().saturating_sub(1) as u64)
            .max()
            .unwrap_or(0)
    }

    /// Re-accesses of `op` at distances of at most `units` units.
    fn within(&self, op: usize, units: u64) -> u64 {
        let cumulative = &self.cumulative[op];
        cumulative[(units as usize).min(cumulative.len() - 1)]
    }

    /// Re-accesses of `op` at distances above `from` units and at most `to`.
    fn between(&self, op: usize, from: u64, to: u64) -> u64 {
        self.within(op, to) - self.within(op, from.min(to))
    }

    /// Sums the histograms up once measured: every query is then two lookups (the sizing
    /// searches ask for thousands of tier sizes).
    fn finish(mut self) -> ReuseByOp {
        for op in 0..2 {
            let mut running = 0;
            self.cumulative[op] = std::iter::once(0)
                .chain(self.histograms[op].iter().skip(1).map(|&count| {
                    running += count;
                    running
                }))
                .collect();
        }
        self
    }

    /// What an exclusive two-tier LRU cache of `t1_units` and `t2_units` would hit, per op.
    pub fn hits(&self, t1_units: u64, t2_units: u64) -> TierHits {
        let mut hits = TierHits::default();
        for op in 0..2 {
            hits.t1[op] = self.within(op, t1_units);
            hits.t2[op] = self.between(op, t1_units, t1_units + t2_units);
            hits.misses[op] = self.requests[op] - hits.t1[op] - hits.t2[op];
        }
        hits
    }
}
