//! The exact miss-ratio curve against LRU simulation, on real traces and random ones.

use std::path::{Path, PathBuf};

use heterarchy_sim::cache_sim::{run_job, SimJob, SimSettings, TraceFile};
use heterarchy_sim::mrc::{exact_mrc, DistanceUnit, MrcResult};
use heterarchy_trace::{ReaderOptions, Request, TraceError, TraceReader};
use proptest::prelude::*;

/// The shared real traces, or `None` (with a message) when the folder is absent.
fn trace_file(name: &str) -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/traces"
    ));
    let path = dir.join(name);
    if path.exists() {
        Some(path)
    } else {
        println!("skipped: {} is absent", path.display());
        None
    }
}

/// Replays requests from memory.
struct SliceReader<'a>(std::slice::Iter<'a, Request>);

impl TraceReader for SliceReader<'_> {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        Ok(self.0.next().copied())
    }
}

fn read_all(path: &Path) -> Vec<Request> {
    let mut reader = heterarchy_trace::open(path, &ReaderOptions::default()).unwrap();
    let mut trace = Vec::new();
    while let Some(request) = reader.next_request().unwrap() {
        trace.push(request);
    }
    trace
}

fn exact_of(trace: &[Request], ignore_obj_size: bool) -> MrcResult {
    exact_mrc(&mut SliceReader(trace.iter()), ignore_obj_size, &|_| {}).unwrap()
}

/// Requests and misses of byte-capacity LRU of `capacity` over `trace`.
fn lru_misses(trace: &[Request], capacity: u64) -> (u64, u64) {
    let mut lru = heterarchy_policy::create("lru", capacity).unwrap();
    let mut evicted = Vec::new();
    let mut misses = 0;
    let mut miss_bytes = 0;
    for request in trace {
        if !lru.get(request, &mut evicted) {
            misses += 1;
            miss_bytes += u64::from(request.size);
        }
        evicted.clear();
    }
    (misses, miss_bytes)
}

fn log_sizes(low: u64, high: u64, count: u32) -> Vec<u64> {
    (0..count)
        .map(|i| {
            let fraction = f64::from(i) / f64::from(count - 1);
            (low as f64 * (high as f64 / low as f64).powf(fraction)).round() as u64
        })
        .collect()
}

#[test]
fn object_curve_equals_lru_simulation_on_cloudphysics() {
    let Some(path) = trace_file("cloudPhysicsIO.oracleGeneral.bin") else {
        return;
    };
    let mut reader = heterarchy_trace::open(&path, &ReaderOptions::default()).unwrap();
    let curve = exact_mrc(reader.as_mut(), true, &|_| {}).unwrap();
    assert_eq!(curve.unit, DistanceUnit::Objects);
    assert_eq!(curve.requests, 113_872);
    let unique = curve.cold_misses as u64;
    let source = TraceFile {
        input: path.into(),
        options: ReaderOptions::default(),
    };
    let settings = SimSettings {
        ignore_obj_size: true,
        ..SimSettings::default()
    };
    let mut sizes = log_sizes(1, unique, 20);
    sizes.push(unique + 1);
    for cache_size in sizes {
        let job = SimJob::new("lru", cache_size).unwrap();
        let simulated = run_job(&source, &settings, &job, &|_| {}).unwrap();
        assert_eq!(
            curve.miss_ratio_at(cache_size),
            simulated.miss_ratio,
            "cache of {cache_size} objects"
        );
    }
    // Beyond the largest distance only the cold misses remain.
    assert_eq!(curve.miss_ratio_at(unique), unique as f64 / 113_872.0);
}

#[test]
fn byte_curve_equals_lru_simulation_on_uniform_sizes() {
    let Some(path) = trace_file("cloudPhysicsIO.oracleGeneral.bin") else {
        return;
    };
    let mut trace = read_all(&path);
    trace.iter_mut().for_each(|request| request.size = 4096);
    let curve = exact_of(&trace, false);
    assert_eq!(curve.unit, DistanceUnit::Bytes);
    assert_eq!(curve.rounded_to_bits, None);
    let working_set = curve.cold_miss_bytes as u64;
    let objects = exact_of(&trace, true);
    // Sizes between multiples of the object size too: they hold as many objects as the
    // multiple below.
    for cache_size in log_sizes(4096, working_set, 20)
        .into_iter()
        .flat_map(|size| [size, size / 4096 * 4096])
    {
        let (misses, miss_bytes) = lru_misses(&trace, cache_size);
        let requests = trace.len() as f64;
        assert_eq!(
            curve.miss_ratio_at(cache_size),
            misses as f64 / requests,
            "cache of {cache_size} bytes"
        );
        assert_eq!(
            curve.byte_miss_ratio_at(cache_size),
            Some(miss_bytes as f64 / (requests * 4096.0))
        );
        assert_eq!(
            curve.miss_ratio_at(cache_size),
            objects.miss_ratio_at(cache_size / 4096)
        );
    }
}

#[test]
fn byte_curve_equals_lru_simulation_from_the_largest_object_up() {
    // cloudPhysics has sizes from 512 B to over 1 MB, each key always with the same size: the
    // documented conditions for equality at every size that holds the largest object.
    let Some(path) = trace_file("cloudPhysicsIO.oracleGeneral.bin") else {
        return;
    };
    let mut reader = heterarchy_trace::open(&path, &ReaderOptions::default()).unwrap();
    let curve = exact_mrc(reader.as_mut(), false, &|_| {}).unwrap();
    let largest = read_all(&path)
        .iter()
        .map(|r| u64::from(r.size))
        .max()
        .unwrap();
    let source = TraceFile {
        input: path.into(),
        options: ReaderOptions::default(),
    };
    for cache_size in log_sizes(largest, curve.cold_miss_bytes as u64, 20) {
        let job = SimJob::new("lru", cache_size).unwrap();
        let simulated = run_job(&source, &SimSettings::default(), &job, &|_| {}).unwrap();
        assert_eq!(curve.miss_ratio_at(cache_size), simulated.miss_ratio);
        assert_eq!(
            curve.byte_miss_ratio_at(cache_size),
            Some(simulated.byte_miss_ratio),
            "cache of {cache_size} bytes"
        );
    }
}

#[test]
fn progress_counts_every_request() {
    let trace: Vec<Request> = (0..10_000u64).map(|i| Request::new(i % 77, 8)).collect();
    let seen = std::cell::Cell::new(0u64);
    let curve = exact_mrc(&mut SliceReader(trace.iter()), false, &|n| {
        seen.set(seen.get() + n)
    })
    .unwrap();
    assert_eq!(seen.get(), 10_000);
    assert_eq!(curve.requests, 10_000);
    assert_eq!(curve.bytes, 80_000);
}

/// Small traces with many repeats: keys from a narrow range, sizes fixed per key.
fn small_trace() -> impl Strategy<Value = Vec<Request>> {
    (1u64..40, 1usize..300).prop_flat_map(|(keys, len)| {
        prop::collection::vec(0..keys, len).prop_map(|keys| {
            keys.into_iter()
                .map(|key| Request::new(key, (key * 37 % 11 + 1) as u32))
                .collect()
        })
    })
}

proptest! {
    #[test]
    fn object_curve_equals_lru_at_every_size(trace in small_trace()) {
        let curve = exact_of(&trace, true);
        let unique = curve.cold_misses as u64;
        let unit_trace: Vec<Request> =
            trace.iter().map(|r| Request::new(r.key, 1)).collect();
        for cache_size in 1..=unique {
            let (misses, _) = lru_misses(&unit_trace, cache_size);
            prop_assert_eq!(
                curve.miss_ratio_at(cache_size),
                misses as f64 / trace.len() as f64,
                "cache of {} objects", cache_size
            );
        }
    }

    #[test]
    fn byte_curve_equals_lru_at_every_size_holding_the_largest_object(
        trace in small_trace()
    ) {
        let curve = exact_of(&trace, false);
        let largest = trace.iter().map(|r| u64::from(r.size)).max().unwrap();
        for cache_size in largest..=curve.cold_miss_bytes as u64 {
            let (misses, _) = lru_misses(&trace, cache_size);
            prop_assert_eq!(
                curve.miss_ratio_at(cache_size),
                misses as f64 / trace.len() as f64,
                "cache of {} bytes", cache_size
            );
        }
    }
}
