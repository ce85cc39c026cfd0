//! Block traces replayed on the simulated stacks on PM (`StagedConfig::trace`): each traced
//! request taken once, in order, its blocks one after the other on one job; its flushes
//! writing the staging cache back; the replay ending at the trace's end. Deterministic: the
//! counts below follow from the trace alone, and the times from the device model.

use std::sync::Arc;

use heterarchy_sim::staging::{run_staged, Stack, StagedConfig, StagedResult, TracedRequest};
use heterarchy_trace::generate::mix64;
use heterarchy_trace::read::BlockRecord;
use heterarchy_trace::Op;

fn replay(
    stack: &str,
    trace: Vec<TracedRequest>,
    change: impl Fn(&mut StagedConfig),
) -> StagedResult {
    let mut config = StagedConfig::seed001(stack.parse::<Stack>().unwrap());
    config.trace = Some(Arc::from(trace));
    config.cache_bytes = 1 << 20;
    config.device_bytes = 0;
    config.iodepth = 1;
    config.cores = 2;
    config.evictors = 1;
    config.duration_ns = u64::MAX;
    config.flush_interval_ns = None;
    change(&mut config);
    run_staged(&config)
}

fn write(lba: u64, blocks: u32) -> TracedRequest {
    TracedRequest::Write { lba, blocks }
}

fn read(lba: u64, blocks: u32) -> TracedRequest {
    TracedRequest::Read { lba, blocks }
}

/// A SplitMix64 stream of block numbers below `blocks`.
fn random_blocks(seed: u64, blocks: u64) -> impl Iterator<Item = u64> {
    (0u64..).map(move |i| mix64(seed.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15))) % blocks)
}

#[test]
fn records_become_the_blocks_they_touch_or_a_flush() {
    let record = |op, offset, length| BlockRecord::in_bytes(0, 0, offset, length, op);
    assert_eq!(
        TracedRequest::from_record(&record(Op::Write, 8192, 4096)),
        Some(write(2, 1))
    );
    // 4000..4200 straddles blocks 0 and 1.
    assert_eq!(
        TracedRequest::from_record(&record(Op::Read, 4000, 200)),
        Some(read(0, 2))
    );
    assert_eq!(
        TracedRequest::from_record(&record(Op::Flush, 0, 0)),
        Some(TracedRequest::Flush)
    );
    for ignored in [
        record(Op::Trim, 0, 4096),
        record(Op::Read, 4096, 0),
        record(Op::Unknown, 0, 4096),
    ] {
        assert_eq!(TracedRequest::from_record(&ignored), None, "{ignored:?}");
    }
    assert_eq!(
        TracedRequest::from_record(&record(Op::Write, 0, u64::from(u32::MAX) * 4096 + 4096)),
        None,
        "more blocks than a request holds"
    );
}

#[test]
fn a_request_of_many_blocks_is_one_request_and_a_flush_writes_every_block_back() {
    let trace = vec![write(0, 16), write(100, 1), TracedRequest::Flush];
    let result = replay("caiti", trace, |_| {});
    assert_eq!(result.requests, 3);
    assert_eq!(result.staging.write_fills, 17);
    assert_eq!(result.staging.flushes, 1);
    assert_eq!(result.flushes, 1);
    let written_back = result.staging.flush_evictions + result.staging.background_evictions;
    assert_eq!(written_back, 17, "{:?}", result.staging);
    assert_eq!(result.staging.sync_evictions, 0);
}

#[test]
fn blocks_of_one_request_go_on_one_core_one_after_the_other() {
    // One job: 64 one-block writes take what one 64-block write takes, plus the 63 extra
    // trips from the application to the driver.
    let singles = replay("btt", (0..64).map(|lba| write(lba, 1)).collect(), |_| {});
    let one = replay("btt", vec![write(0, 64)], |_| {});
    assert_eq!((singles.requests, one.requests), (64, 1));
    let submit_ns = StagedConfig::seed001(Stack::RawPm).costs.submit_ns as u64;
    assert_eq!(singles.elapsed_ns - one.elapsed_ns, 63 * submit_ns);
}

#[test]
fn the_replay_takes_each_request_once_and_ends_with_the_trace() {
    let trace: Vec<TracedRequest> = random_blocks(7, 1 << 16)
        .take(3_000)
        .enumerate()
        .map(|(i, lba)| match i % 50 {
            49 => TracedRequest::Flush,
            n if n % 3 == 0 => read(lba, 1),
            _ => write(lba, 1 + (lba % 4) as u32),
        })
        .collect();
    let flushes = trace.iter().filter(|r| **r == TracedRequest::Flush).count() as u64;
    let written: u64 = trace
        .iter()
        .map(|r| match r {
            TracedRequest::Write { blocks, .. } => u64::from(*blocks),
            _ => 0,
        })
        .sum();
    for stack in ["btt", "caiti", "pmbd", "lru", "coactive", "raw-pm"] {
        for jobs in [1, 4] {
            let result = replay(stack, trace.clone(), |config| config.jobs = jobs);
            assert_eq!(result.requests, 3_000, "{stack} with {jobs} jobs");
            assert_eq!(result.flushes, flushes, "{stack} with {jobs} jobs");
            if stack != "btt" && stack != "raw-pm" {
                let staging = &result.staging;
                let writes = staging.write_hits + staging.write_fills + staging.bypasses;
                assert_eq!(writes, written, "{stack} with {jobs} jobs: {staging:?}");
            }
        }
    }
}

#[test]
fn reads_of_blocks_written_are_served_by_the_cache() {
    // 64 blocks written, then read: with no evictor to write them back, LRU's slots hold all
    // 64; after a flush, the reads are still looked up in the cache, one each.
    let mut trace: Vec<TracedRequest> = (0..64).map(|lba| write(lba, 1)).collect();
    trace.extend((0..64).map(|lba| read(lba, 1)));
    let cached = replay("lru", trace.clone(), |config| config.evictors = 0);
    assert_eq!(cached.staging.read_hits, 64, "{:?}", cached.staging);
    trace.push(TracedRequest::Flush);
    trace.extend((0..64).map(|lba| read(lba, 1)));
    let flushed = replay("caiti", trace, |_| {});
    let staging = &flushed.staging;
    assert_eq!(staging.read_hits + staging.read_misses, 128, "{staging:?}");
    assert_eq!(staging.flushes, 1);
}

#[test]
fn a_write_burst_between_flushes_ranks_the_stacks_as_seed_001_fillrandom() {
    // Seed 001 §4.4's fillrandom in miniature: one job's 4 KiB writes, an fsync after each
    // 128, on 2 cores with one evictor, into a cache that holds a burst. The paper: Caiti
    // first; PMBD and LRU slower than the BTT alone (§3: a staging cache that evicts on the
    // write's path only adds a copy).
    let mut trace = Vec::new();
    for (i, lba) in random_blocks(11, 1 << 18).take(4_096).enumerate() {
        trace.push(write(lba, 1));
        if i % 128 == 127 {
            trace.push(TracedRequest::Flush);
        }
    }
    let time = |stack: &str| replay(stack, trace.clone(), |_| {}).elapsed_ns;
    let (raw, btt, caiti, pmbd, lru) = (
        time("raw-pm"),
        time("btt"),
        time("caiti"),
        time("pmbd"),
        time("lru"),
    );
    println!("raw {raw} btt {btt} caiti {caiti} pmbd {pmbd} lru {lru} ns");
    assert!(raw < btt, "raw-pm {raw} ns, btt {btt} ns");
    assert!(
        caiti < btt && btt < pmbd && btt < lru,
        "caiti {caiti}, btt {btt}, pmbd {pmbd}, lru {lru} ns"
    );
}
