//! What one cached read costs the CPU on this machine, as the live volume serves it: the cache
//! controller's bookkeeping (`CacheController::plan`) and the copy of the line between the
//! cache and the client's buffer (the volume copies with `copy_from_slice`, a memcpy): the
//! measured side of the per-request software cost (`engine::timing`; docs/benchmarks.md,
//! "bench-request-cost: a cached read's CPU cost"). `scripts/bench-request-cost` runs it under
//! the benchmark lock and names the machine.
//!
//! Prints, per line size, ns per request for the bookkeeping alone, the copy alone, and both.

use std::hint::black_box;
use std::time::Instant;

use heterarchy_engine::{CacheConfig, CacheController, Controller, Plan};
use heterarchy_trace::generate::Random;
use heterarchy_trace::Request;

/// Requests timed per measurement, after as many unmeasured ones.
const REQUESTS: u64 = 400_000;
/// Cache lines: a 1 GiB cache of 64 KiB lines has 16384 (seed 000 §4.5.1).
const LINES: u64 = 16_384;
/// Keys drawn uniformly: 95% hits once the cache is full.
const KEYS: u64 = LINES * 100 / 95;

fn bookkeeping_ns(line_bytes: u32) -> f64 {
    let config = CacheConfig::default();
    let mut controller =
        CacheController::new(&config, &[LINES * u64::from(line_bytes)], 1).expect("valid config");
    let mut plan = Plan::new();
    let mut random = Random::new(7);
    let mut run = |requests: u64| {
        for step in 0..requests {
            plan.clear();
            let key = random.below(KEYS);
            black_box(controller.plan(&Request::new(key, line_bytes), step, &mut plan));
        }
    };
    run(REQUESTS * 4);
    let start = Instant::now();
    run(REQUESTS);
    start.elapsed().as_nanos() as f64 / REQUESTS as f64
}

/// Copies `line_bytes` from random lines of a cache-sized buffer (touched first, so no page
/// faults are timed) into one client buffer, as a hit does.
fn copy_ns(line_bytes: u32) -> f64 {
    let line = line_bytes as usize;
    let lines = (256 << 20) / line;
    let cache = vec![1u8; lines * line];
    let mut client = vec![0u8; line];
    let mut random = Random::new(9);
    let mut run = |requests: u64| {
        for _ in 0..requests {
            let slot = random.below(lines as u64) as usize;
            client.copy_from_slice(&cache[slot * line..(slot + 1) * line]);
            black_box(&mut client);
        }
    };
    run(REQUESTS / 4);
    let start = Instant::now();
    run(REQUESTS);
    start.elapsed().as_nanos() as f64 / REQUESTS as f64
}

fn main() {
    println!(
        "{:>10} {:>16} {:>12} {:>12}",
        "line", "bookkeeping ns", "copy ns", "total ns"
    );
    for line_bytes in [4096u32, 65536] {
        let bookkeeping = bookkeeping_ns(line_bytes);
        let copy = copy_ns(line_bytes);
        println!(
            "{:>10} {:>16.0} {:>12.0} {:>12.0}",
            line_bytes,
            bookkeeping,
            copy,
            bookkeeping + copy
        );
    }
}
