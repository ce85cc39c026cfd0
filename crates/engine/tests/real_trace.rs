//! The cache controller on a real block trace (CloudPhysics, `cloudPhysicsIO.vscsi`, split into
//! 4 KiB lines), checked against the plain LRU policy it is built on: write-through and
//! write-back install every miss, so their hits are LRU's; two exclusive LRU tiers with
//! demotion and promotion behave as one LRU of their summed size whose most recent lines sit in
//! tier 0.

use std::path::{Path, PathBuf};

use heterarchy_engine::{
    CacheConfig, CacheController, CleaningPolicy, Controller, Plan, TierLayout, WriteMode,
};
use heterarchy_policy::registry;
use heterarchy_trace::{open, Op, ReaderOptions, Request};

const LINE_BYTES: u64 = 4096;

fn trace_path(name: &str) -> Option<PathBuf> {
    let folder = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/traces"
    ));
    if !folder.is_dir() {
        eprintln!("skipping: the trace folder {} is absent", folder.display());
        return None;
    }
    Some(folder.join(name))
}

fn cloud_physics() -> Option<Vec<Request>> {
    let path = trace_path("cloudPhysicsIO.vscsi")?;
    let mut reader = open(&path, &ReaderOptions::default()).unwrap();
    let mut requests = Vec::new();
    while let Some(request) = reader.next_request().unwrap() {
        requests.push(request);
    }
    assert!(requests.len() > 100_000, "{} lines", requests.len());
    assert!(requests
        .iter()
        .all(|r| matches!(r.op, Op::Read | Op::Write)));
    assert!(requests.iter().any(|r| r.op == Op::Write));
    Some(requests)
}

/// Hits of a plain LRU cache of `lines` lines.
fn lru_hits(requests: &[Request], lines: u64) -> u64 {
    let mut lru = registry::create("lru", lines * LINE_BYTES).unwrap();
    let mut evicted = Vec::new();
    requests
        .iter()
        .filter(|request| {
            evicted.clear();
            lru.get(request, &mut evicted)
        })
        .count() as u64
}

fn run(config: &CacheConfig, tier_lines: &[u64], requests: &[Request]) -> CacheController {
    let capacities: Vec<u64> = tier_lines.iter().map(|lines| lines * LINE_BYTES).collect();
    let mut controller = CacheController::new(config, &capacities, 1).unwrap();
    let mut plan = Plan::new();
    for (index, request) in requests.iter().enumerate() {
        plan.clear();
        let now_ns = index as u64 * 1_000;
        controller.plan(request, now_ns, &mut plan);
        assert!(request.size as u64 == LINE_BYTES);
    }
    controller
}

#[test]
fn write_through_and_write_back_hit_like_lru() {
    let Some(requests) = cloud_physics() else {
        return;
    };
    let lines = 2_000;
    let expected = lru_hits(&requests, lines);
    for mode in [WriteMode::Wt, WriteMode::Wb] {
        let config = CacheConfig {
            mode,
            cleaning: CleaningPolicy::Nop,
            ..CacheConfig::default()
        };
        let mut controller = run(&config, &[lines], &requests);
        let stats = controller.stats().clone();
        assert_eq!(stats.hits, expected, "{mode:?}");
        assert_eq!(stats.requests, requests.len() as u64);
        assert_eq!(stats.installs_per_tier[0], stats.requests - stats.hits);
        if mode == WriteMode::Wb {
            // Every line written is written back exactly once per dirtying episode: by
            // eviction or by the final flush.
            assert!(stats.writebacks > 0);
            let dirty = stats.dirty_lines;
            let mut plan = Plan::new();
            assert_eq!(controller.flush(&mut plan) as u64, dirty);
            assert_eq!(controller.stats().dirty_lines, 0);
            assert!(stats.writebacks + dirty <= stats.writes);
        } else {
            assert_eq!(stats.writebacks, 0);
        }
    }
}

#[test]
fn exclusive_lru_tiers_are_one_lru_of_both_sizes() {
    let Some(requests) = cloud_physics() else {
        return;
    };
    let (top, lower) = (500, 1_500);
    let config = CacheConfig {
        mode: WriteMode::Wt,
        layout: TierLayout::Exclusive,
        ..CacheConfig::default()
    };
    let controller = run(&config, &[top, lower], &requests);
    let stats = controller.stats();
    assert_eq!(stats.hits_per_tier[0], lru_hits(&requests, top));
    assert_eq!(stats.hits, lru_hits(&requests, top + lower));
    assert_eq!(controller.tier_lines(0) as u64, top);
    assert_eq!(controller.tier_lines(1) as u64, lower);
}

/// Hits per tier of two inclusive LRU tiers, by a reference written here with two plain LRU
/// policies and residency sets: a tier-0 hit touches tier 0 only; a tier-1 hit touches tier 1
/// and copies the line into tier 0; a miss enters tier 1, then tier 0; whatever tier 1 evicts
/// leaves tier 0 too.
fn inclusive_lru_hits(requests: &[Request], top: u64, lower: u64) -> [u64; 2] {
    use std::collections::HashSet;
    let mut tiers = [
        registry::create("lru", top * LINE_BYTES).unwrap(),
        registry::create("lru", lower * LINE_BYTES).unwrap(),
    ];
    let mut held: [HashSet<u64>; 2] = Default::default();
    let mut hits = [0u64; 2];
    let mut evicted = Vec::new();
    for request in requests {
        let key = request.key;
        if held[0].contains(&key) {
            assert!(tiers[0].lookup(request));
            hits[0] += 1;
            continue;
        }
        if held[1].contains(&key) {
            assert!(tiers[1].lookup(request));
            hits[1] += 1;
        } else {
            assert!(!tiers[1].lookup(request));
            evicted.clear();
            tiers[1].admit(request, &mut evicted);
            held[1].insert(key);
            for victim in &evicted {
                held[1].remove(&victim.key);
                if held[0].remove(&victim.key) {
                    tiers[0].remove(victim.key);
                }
            }
        }
        assert!(!tiers[0].lookup(request));
        evicted.clear();
        tiers[0].admit(request, &mut evicted);
        held[0].insert(key);
        for victim in &evicted {
            held[0].remove(&victim.key);
        }
    }
    hits
}

#[test]
fn inclusive_lru_tiers_hit_like_the_reference() {
    let Some(requests) = cloud_physics() else {
        return;
    };
    let (top, lower) = (500, 1_500);
    let config = CacheConfig {
        mode: WriteMode::Wt,
        layout: TierLayout::Inclusive,
        ..CacheConfig::default()
    };
    let controller = run(&config, &[top, lower], &requests);
    let expected = inclusive_lru_hits(&requests, top, lower);
    assert_eq!(controller.stats().hits_per_tier, expected.to_vec());
}

/// Runs the trace through a write-back pair calling the cleaner as an executor would, then
/// lets the cache idle; the cleaner must empty it of dirty lines, always asking to wake later
/// than now unless it just cleaned something.
fn cleaner_empties_an_idle_cache(cleaning: CleaningPolicy, layout: TierLayout) {
    let Some(requests) = cloud_physics() else {
        return;
    };
    let config = CacheConfig {
        mode: WriteMode::Wb,
        layout,
        cleaning,
        ..CacheConfig::default()
    };
    let capacities = [500 * LINE_BYTES, 1_500 * LINE_BYTES];
    let mut controller = CacheController::new(&config, &capacities, 1).unwrap();
    let mut plan = Plan::new();
    let mut wake_up_ns = None;
    let mut now_ns = 0;
    for request in &requests {
        now_ns += 100_000;
        while let Some(due) = wake_up_ns.filter(|&due| due <= now_ns) {
            plan.clear();
            wake_up_ns = controller.background(due, &mut plan);
        }
        plan.clear();
        controller.plan(request, now_ns, &mut plan);
        if wake_up_ns.is_none() {
            plan.clear();
            wake_up_ns = controller.background(now_ns, &mut plan);
        }
    }
    assert!(
        controller.stats().dirty_lines > 0,
        "{cleaning:?}: the run leaves dirty lines"
    );
    let mut calls = 0;
    while controller.stats().dirty_lines > 0 {
        let due = wake_up_ns.expect("a write-back cleaner always asks to wake");
        plan.clear();
        wake_up_ns = controller.background(due, &mut plan);
        assert!(plan.is_empty() || plan.stage_count() == 2);
        assert!(wake_up_ns.unwrap() > due || !plan.is_empty());
        calls += 1;
        assert!(calls < 100_000, "{cleaning:?} does not converge");
    }
}

#[test]
fn alru_and_acp_clean_everything_once_idle() {
    for layout in [TierLayout::Inclusive, TierLayout::Exclusive] {
        cleaner_empties_an_idle_cache(CleaningPolicy::Alru, layout);
        cleaner_empties_an_idle_cache(CleaningPolicy::Acp, layout);
    }
}
