//! Issue 19, item 2: the exclusive two-tier LRU hit counts that reuse distances split by op
//! predict equal a direct simulation of the two tiers exactly, per op and tier.

use std::path::Path;

use heterarchy_sim::sizing::{ExclusiveLru, PageOp, ReuseByOp, UNIT_PAGES};
use heterarchy_trace::{open, Op, ReaderOptions, Request, TraceError, TraceReader};

/// Replays requests from memory.
struct SliceReader<'a>(std::slice::Iter<'a, Request>);

impl TraceReader for SliceReader<'_> {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        Ok(self.0.next().copied())
    }
}

/// `count` page accesses over `pages` pages, skewed (a quarter of the pages take most
/// accesses), 30% writes and a few discards, from `seed`.
fn page_trace(pages: u64, count: usize, seed: u64) -> Vec<Request> {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..count)
        .map(|i| {
            let hot = next() % 4 != 0;
            let key = if hot {
                next() % (pages / 4)
            } else {
                next() % pages
            };
            let op = match next() % 100 {
                0 => Op::Trim,
                1..=30 => Op::Write,
                _ => Op::Read,
            };
            Request {
                time_ns: i as u64,
                key,
                size: 4096,
                op,
                ..Request::default()
            }
        })
        .collect()
}

fn assert_predicted_equals_simulated(trace: &[Request], reuse: &ReuseByOp, sizes: &[(u64, u64)]) {
    let unit = reuse.unit_pages();
    for &(t1, t2) in sizes {
        let mut tiers = ExclusiveLru::new(t1 * unit, t2 * unit);
        for request in trace {
            tiers.access(request);
        }
        assert_eq!(
            reuse.hits(t1, t2),
            tiers.hits(),
            "tier 1 {t1} units, tier 2 {t2} units"
        );
    }
}

#[test]
fn reuse_by_op_predicts_exclusive_two_tier_lru_exactly() {
    for seed in 1..=4 {
        let trace = page_trace(3000, 40_000, seed);
        let reuse = ReuseByOp::measure_in_units(&mut SliceReader(trace.iter()), 8).unwrap();
        let discards = trace.iter().filter(|r| r.op == Op::Trim).count() as u64;
        assert_eq!(
            reuse.requests(PageOp::Read) + reuse.requests(PageOp::Write),
            trace.len() as u64 - discards
        );
        assert!(reuse.cold_misses(PageOp::Write) > 0 && reuse.max_units() > 0);
        assert_predicted_equals_simulated(
            &trace,
            &reuse,
            &[
                (1, 0),
                (1, 5),
                (4, 4),
                (10, 30),
                (40, 20),
                (100, 300),
                (400, 0),
            ],
        );
    }
}

#[test]
fn on_a_cloudphysics_block_trace_too() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/cloudPhysicsIO.vscsi");
    if !path.is_file() {
        println!(
            "skipped: {} is missing (CI has ../shared/traces)",
            path.display()
        );
        return;
    }
    let options = ReaderOptions::default();
    let trace: Vec<Request> = {
        let mut reader = open(&path, &options).unwrap();
        let mut all = Vec::new();
        while let Some(request) = reader.next_request().unwrap() {
            all.push(request);
        }
        all
    };
    let reuse = ReuseByOp::measure(&mut *open(&path, &options).unwrap()).unwrap();
    assert_eq!(reuse.unit_pages(), UNIT_PAGES);
    println!(
        "cloudPhysicsIO: {} page reads, {} writes, distances up to {} MiB",
        reuse.requests(PageOp::Read),
        reuse.requests(PageOp::Write),
        reuse.max_units()
    );
    let most = reuse.max_units();
    assert_predicted_equals_simulated(
        &trace,
        &reuse,
        &[(1, 1), (4, 16), (most / 4 + 1, most / 4), (most, 0)],
    );
}
