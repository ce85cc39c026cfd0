//! Trace statistics on a hand-made sequence with answers worked out by hand, on a generated
//! workload, and on a real trace against numbers computed independently with numpy.

use std::path::Path;

use heterarchy_trace::generate::{generator, WorkloadSpec};
use heterarchy_trace::read::OracleGeneralReader;
use heterarchy_trace::stats::{trace_stats, HistogramBucket, OpCount};
use heterarchy_trace::{Op, Request, TraceError, TraceReader};

const TRACES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/traces");

/// Serves requests from memory.
struct Replay(std::vec::IntoIter<Request>);

impl TraceReader for Replay {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        Ok(self.0.next())
    }
}

fn request(time_ns: u64, key: u64, size: u32, op: Op, tenant: u32) -> Request {
    Request {
        time_ns,
        key,
        size,
        tenant,
        op,
        ..Request::default()
    }
}

fn bucket(min: u64, max: u64, count: u64) -> HistogramBucket {
    HistogramBucket { min, max, count }
}

#[test]
fn a_hand_made_sequence_gives_the_hand_computed_answers() {
    let requests = vec![
        request(1000, 1, 100, Op::Get, 0),
        request(2000, 2, 200, Op::Set, 1),
        request(1500, 1, 150, Op::Get, 0), // key 1 grows to 150 bytes
        request(5000, 3, 50, Op::Delete, 2),
        request(3000, 1, 150, Op::Get, 0),
        request(4000, 4, 1000, Op::Unknown, 0),
    ];
    let stats = trace_stats(&mut Replay(requests.into_iter())).unwrap();
    assert_eq!(stats.requests, 6);
    assert_eq!(stats.unique_keys, 4);
    // Last sizes: key 1 150, key 2 200, key 3 50, key 4 1000.
    assert_eq!(stats.working_set_bytes, 1400);
    assert_eq!(stats.requested_bytes, 1650);
    assert_eq!(
        stats.op_counts,
        vec![
            OpCount {
                op: Op::Unknown,
                count: 1
            },
            OpCount {
                op: Op::Get,
                count: 3
            },
            OpCount {
                op: Op::Set,
                count: 1
            },
            OpCount {
                op: Op::Delete,
                count: 1
            },
        ]
    );
    assert_eq!((stats.reads, stats.writes), (3, 2));
    assert_eq!(stats.read_write_ratio, Some(1.5));
    let sizes = &stats.object_sizes;
    assert_eq!((sizes.min_bytes, sizes.max_bytes), (50, 1000));
    assert_eq!(sizes.mean_bytes, 350.0);
    // Sorted 50, 150, 200, 1000: ranks ceil(0.5·4) = 2, ceil(0.9·4) = 4, ceil(0.99·4) = 4.
    assert_eq!(
        (sizes.p50_bytes, sizes.p90_bytes, sizes.p99_bytes),
        (150, 1000, 1000)
    );
    assert_eq!(
        sizes.histogram.buckets,
        vec![bucket(32, 63, 1), bucket(128, 255, 2), bucket(512, 1023, 1)]
    );
    // Key 1 at indices 0, 2 and 4: two reuses of 2 requests.
    assert_eq!(stats.reuse_time_requests.buckets, vec![bucket(2, 3, 2)]);
    assert_eq!(stats.one_hit_wonders, 3);
    assert_eq!(stats.one_hit_wonder_fraction, 0.75);
    assert_eq!(stats.tenants, 3);
    assert_eq!((stats.start_time_ns, stats.end_time_ns), (1000, 5000));
    assert_eq!(stats.duration_ns, 4000);

    let table = stats.to_table();
    for line in [
        "unique keys            4",
        "working set            1400 B (1.37 KiB)",
        "get 3 (50.0%)",
        "3 / 2 (read/write ratio 1.500)",
        "min 50, mean 350.0, p50 150, p90 1000, p99 1000, max 1000",
        "3 (75.0% of keys)",
        "  2..=3                         2  100.0%",
        "  128..=255                     2   50.0%",
    ] {
        assert!(table.contains(line), "missing {line:?} in\n{table}");
    }
}

#[test]
fn an_empty_trace_has_zero_everything() {
    let stats = trace_stats(&mut Replay(Vec::new().into_iter())).unwrap();
    assert_eq!(
        (stats.requests, stats.unique_keys, stats.tenants),
        (0, 0, 0)
    );
    assert_eq!((stats.start_time_ns, stats.duration_ns), (0, 0));
    assert_eq!(stats.read_write_ratio, None);
    assert_eq!(stats.object_sizes.max_bytes, 0);
    assert!(stats.reuse_time_requests.buckets.is_empty());
    assert!(stats.to_table().contains("requests               0"));
}

#[test]
fn a_generated_uniform_workload_touches_every_key() {
    let spec =
        WorkloadSpec::parse("uniform:keys=1000,requests=100000,write=0.5,rate=1000").unwrap();
    let stats = trace_stats(generator(&spec).unwrap().as_mut()).unwrap();
    assert_eq!(stats.requests, 100_000);
    // Each key is missed with probability (1 - 1/1000)^100000 ≈ e^-100.
    assert_eq!(stats.unique_keys, 1000);
    assert_eq!(stats.working_set_bytes, 1000 * 4096);
    assert_eq!(stats.requested_bytes, 100_000 * 4096);
    assert_eq!(stats.reads + stats.writes, 100_000);
    assert_eq!(stats.one_hit_wonders, 0);
    assert_eq!(stats.duration_ns, 99_999 * 1_000_000);
    assert_eq!(stats.reuse_time_requests.total(), 99_000);
}

/// Expected values computed once with numpy 2 from the raw records (`np.fromfile` with dtype
/// `{u4 time, u8 id, u4 size, i8 next}`): `np.unique` for keys and one-hit wonders, each key's
/// size at its last index for the working set, `np.percentile(..., method="inverted_cdf")` for
/// the nearest-rank percentiles, and `floor(log2(gap)) + 1` of the index gaps between
/// consecutive requests to a key for the reuse buckets.
#[test]
fn cloud_physics_matches_numpy() {
    let path = Path::new(TRACES).join("cloudPhysicsIO.oracleGeneral.bin");
    if !path.exists() {
        println!("skipped: {} is absent", path.display());
        return;
    }
    let stats = trace_stats(&mut OracleGeneralReader::open(&path).unwrap()).unwrap();
    assert_eq!(stats.requests, 113_872);
    assert_eq!(stats.unique_keys, 48_974);
    assert_eq!(stats.working_set_bytes, 2_029_769_728);
    assert_eq!(stats.requested_bytes, 4_368_040_448);
    assert_eq!(stats.one_hit_wonders, 21_049);
    assert_eq!(
        stats.op_counts,
        vec![OpCount {
            op: Op::Unknown,
            count: 113_872
        }]
    );
    assert_eq!(stats.tenants, 1);
    let sizes = &stats.object_sizes;
    assert_eq!((sizes.min_bytes, sizes.max_bytes), (512, 69_632));
    assert_eq!(
        (sizes.p50_bytes, sizes.p90_bytes, sizes.p99_bytes),
        (65_536, 69_632, 69_632)
    );
    assert!((sizes.mean_bytes - 41_445.863_682_770_45).abs() < 1e-6);
    let size_buckets: Vec<(u64, u64)> = sizes
        .histogram
        .buckets
        .iter()
        .map(|b| (b.min, b.count))
        .collect();
    assert_eq!(
        size_buckets,
        vec![
            (512, 3949),
            (1024, 774),
            (2048, 954),
            (4096, 4757),
            (8192, 8083),
            (16_384, 870),
            (32_768, 4589),
            (65_536, 24_998),
        ]
    );
    let reuse: Vec<u64> = stats
        .reuse_time_requests
        .buckets
        .iter()
        .map(|b| b.count)
        .collect();
    assert_eq!(stats.reuse_time_requests.buckets[0].min, 1);
    assert_eq!(
        reuse,
        vec![
            2685, 1189, 1281, 1764, 1687, 1956, 2554, 2445, 2422, 885, 685, 1324, 4473, 13_047,
            3717, 22_755, 29
        ]
    );
    assert_eq!(stats.start_time_ns, 5_633_898 * 1_000_000_000);
    assert_eq!(stats.end_time_ns, 5_641_098 * 1_000_000_000);
}
