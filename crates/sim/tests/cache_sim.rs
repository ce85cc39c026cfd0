//! The simulator's own duties: Belady on traces without next accesses, warm-up, object counts,
//! and the working set.

use std::path::PathBuf;

use heterarchy_sim::cache_sim::{
    run_job, run_jobs, working_set, GeneratedTrace, SimJob, SimSettings, TraceFile, CHUNK,
};
use heterarchy_sim::mrc::exact_mrc;
use heterarchy_trace::generate::{generator, WorkloadSpec};
use heterarchy_trace::ReaderOptions;

/// A shared real trace, or `None` (with a message) when the folder is absent.
fn trace_file(name: &str) -> Option<TraceFile> {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/traces"
    ))
    .join(name);
    if path.exists() {
        Some(TraceFile {
            input: path.into(),
            options: ReaderOptions::default(),
        })
    } else {
        println!("skipped: {} is absent", path.display());
        None
    }
}

fn job(policy: &str, cache_size: u64) -> SimJob {
    SimJob::new(policy, cache_size).unwrap()
}

#[test]
fn belady_on_a_trace_without_next_accesses_equals_belady_on_the_oracle_file() {
    // The same ids, once with next accesses in the file and once as plain text the simulator
    // must annotate itself; object counts, since the text trace has no sizes.
    let (Some(oracle), Some(text)) = (
        trace_file("cloudPhysicsIO.oracleGeneral.bin"),
        trace_file("cloudPhysicsIO.txt"),
    ) else {
        return;
    };
    let settings = SimSettings {
        ignore_obj_size: true,
        ..SimSettings::default()
    };
    for cache_size in [10, 500, 5_000, 20_000] {
        let carried = run_job(&oracle, &settings, &job("belady", cache_size), &|_| {}).unwrap();
        let annotated = run_job(&text, &settings, &job("belady", cache_size), &|_| {}).unwrap();
        assert_eq!(
            carried.misses, annotated.misses,
            "cache of {cache_size} objects"
        );
        let lru = run_job(&text, &settings, &job("lru", cache_size), &|_| {}).unwrap();
        assert!(
            annotated.misses < lru.misses,
            "Belady beats LRU at {cache_size}"
        );
    }
}

#[test]
fn warmup_requests_change_the_cache_but_are_not_counted() {
    let Some(trace) = trace_file("cloudPhysicsIO.oracleGeneral.bin") else {
        return;
    };
    let all = run_job(
        &trace,
        &SimSettings::default(),
        &job("lru", 1 << 28),
        &|_| {},
    )
    .unwrap();
    let warm = SimSettings {
        warmup_requests: 10_000,
        ..SimSettings::default()
    };
    let counted = run_job(&trace, &warm, &job("lru", 1 << 28), &|_| {}).unwrap();
    assert_eq!(counted.requests, all.requests - 10_000);
    assert!(
        counted.misses < all.misses,
        "the warm-up's cold misses are not counted"
    );
}

#[test]
fn jobs_return_in_order_and_match_single_runs() {
    let Some(trace) = trace_file("cloudPhysicsIO.oracleGeneral.bin") else {
        return;
    };
    let jobs = vec![
        job("lru", 1 << 24),
        job("fifo", 1 << 26),
        job("sieve", 1 << 28),
    ];
    let settings = SimSettings::default();
    let together = run_jobs(&trace, &settings, &jobs, 2, &|_| {}).unwrap();
    for (job, result) in jobs.iter().zip(&together) {
        let alone = run_job(&trace, &settings, job, &|_| {}).unwrap();
        assert_eq!(&alone, result);
    }
}

#[test]
fn working_set_counts_distinct_objects_and_their_bytes() {
    let Some(trace) = trace_file("cloudPhysicsIO.oracleGeneral.bin") else {
        return;
    };
    let found = working_set(&trace, &|_| {}).unwrap();
    // As libcachesim's reader.get_working_set_size() reports for this file.
    assert_eq!(
        (found.requests, found.objects, found.bytes),
        (113_872, 48_974, 2_029_769_728)
    );
}

#[test]
fn an_unknown_policy_is_an_error_naming_the_choices() {
    let error = SimJob::new("nope", 10).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("unknown policy \"nope\"; expected one of: lru"),
        "{error}"
    );
}

#[test]
fn jobs_fed_across_chunk_boundaries_equal_the_stack_algorithm() {
    // Past two chunk boundaries (CHUNK is 2^19 requests), so the decode-ahead hand-over is
    // played, and decoded inline too; LRU at each size must equal the exact curve of one stack
    // pass.
    let spec = WorkloadSpec::parse("zipf:theta=0.8,keys=50000,requests=1200000,seed=5").unwrap();
    const { assert!(1_200_000 > 2 * CHUNK) };
    let sizes = [100, 2_000, 20_000];
    let jobs: Vec<SimJob> = sizes.iter().map(|&size| job("lru", size)).collect();
    let exact = exact_mrc(generator(&spec).unwrap().as_mut(), true, &|_| {}).unwrap();
    for (inline_decode, threads) in [(false, 2), (true, 1)] {
        let settings = SimSettings {
            ignore_obj_size: true,
            inline_decode,
            ..SimSettings::default()
        };
        let results = run_jobs(
            &GeneratedTrace(spec.clone()),
            &settings,
            &jobs,
            threads,
            &|_| {},
        )
        .unwrap();
        for (size, result) in sizes.iter().zip(&results) {
            assert_eq!(result.requests, 1_200_000);
            assert_eq!(result.miss_ratio, exact.miss_ratio_at(*size), "size {size}");
        }
    }
}
