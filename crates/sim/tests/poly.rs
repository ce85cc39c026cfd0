//! The PolyEMT executor of the timed simulator on a small machine: deterministic, each role
//! reached by its own path, and the search restarting on a workload change.

use heterarchy_device::codec::Codec;
use heterarchy_engine::poly::{Knobs, SearchConfig};
use heterarchy_sim::poly::{run_poly, run_poly_phases, PolyMachine, PolyRun, PolyScheme};
use heterarchy_trace::generate::WorkloadSpec;

fn machine() -> PolyMachine {
    PolyMachine::paper(64)
}

fn workload(letter: char, compress: f64) -> WorkloadSpec {
    WorkloadSpec::parse(&format!(
        "ycsb-{letter}:keys={},compress={compress},scrambled=true,seed=3",
        machine().data_pages * 4
    ))
    .unwrap()
}

fn run() -> PolyRun {
    PolyRun {
        warmup_ops: 30_000,
        ops: 30_000,
        duration_ns: u64::MAX,
        window_ns: 500_000_000,
        codec: Codec::Lz4,
    }
}

fn knobs(read_share: f64, compressed_share: f64) -> PolyScheme {
    PolyScheme::Fixed(Knobs {
        read_share,
        compressed_share,
    })
}

#[test]
fn runs_are_deterministic() {
    let scheme = PolyScheme::Search(SearchConfig::default());
    let first = run_poly(&machine(), &workload('a', 0.5), scheme, &run()).unwrap();
    let second = run_poly(&machine(), &workload('a', 0.5), scheme, &run()).unwrap();
    assert_eq!(first, second);
    assert!(first.throughput > 0.0);
}

#[test]
fn without_a_write_cache_every_update_waits_for_the_ssd() {
    let dram_ext = run_poly(&machine(), &workload('a', 0.0), PolyScheme::DramExt, &run()).unwrap();
    let write_cache = run_poly(
        &machine(),
        &workload('a', 0.0),
        PolyScheme::WriteCache,
        &run(),
    )
    .unwrap();
    // YCSB-A is half updates: each one an msync to the SSD under DRAM-Ext.
    let updates = dram_ext.sync_write_backs as f64 / 30_000.0;
    assert!((updates - 0.5).abs() < 0.02, "{updates}");
    assert!(write_cache.sync_write_backs * 5 < dram_ext.sync_write_backs);
    assert!(write_cache.throughput > 2.0 * dram_ext.throughput);
    assert!(write_cache.write_latency_us_p90 < dram_ext.write_latency_us_p90);
}

#[test]
fn the_read_cache_role_extends_memory() {
    // YCSB-C reads only: the tier as memory serves what the write cache sends to the SSD.
    let dram_ext = run_poly(&machine(), &workload('c', 0.0), PolyScheme::DramExt, &run()).unwrap();
    let write_cache = run_poly(
        &machine(),
        &workload('c', 0.0),
        PolyScheme::WriteCache,
        &run(),
    )
    .unwrap();
    assert!(dram_ext.read_cache_hits > 0);
    assert_eq!(write_cache.read_cache_hits, 0);
    assert!(dram_ext.ssd_reads < write_cache.ssd_reads);
    assert!(dram_ext.throughput > write_cache.throughput);
}

#[test]
fn compressed_pages_take_the_codecs_sectors() {
    let compressible = run_poly(&machine(), &workload('c', 0.5), knobs(0.0, 0.5), &run()).unwrap();
    assert!(compressible.compressed_hits > 0);
    assert!(
        compressible.mean_sectors > 3.0 && compressible.mean_sectors < 6.0,
        "{}",
        compressible.mean_sectors
    );
    let random = run_poly(&machine(), &workload('c', 0.0), knobs(0.0, 0.5), &run()).unwrap();
    assert_eq!(random.mean_sectors, 8.0);
    // Pages that compress to half fit twice as many in the same sectors.
    assert!(compressible.ssd_reads < random.ssd_reads);
}

#[test]
fn a_workload_change_restarts_the_search_from_a_full_write_cache() {
    let phases = [
        (workload('c', 0.5), 30_000 + 150_000),
        (workload('a', 0.5), 150_000),
    ];
    let run = PolyRun {
        ops: 300_000,
        ..run()
    };
    let result = run_poly_phases(
        &machine(),
        &phases,
        PolyScheme::Search(SearchConfig::default()),
        &run,
    )
    .unwrap();
    let (_, first) = result.trajectory[0];
    assert_eq!(first.measured, Knobs::WRITE_CACHE);
    let restart = result
        .trajectory
        .iter()
        .position(|(_, step)| step.restarted)
        .expect("the change to YCSB-A restarts the search");
    // Before the change, YCSB-C had moved the tier to the read cache.
    let (_, before) = result.trajectory[restart - 1];
    assert!(before.measured.read_share >= 0.5, "{before:?}");
    assert_eq!(result.trajectory[restart].1.next, Knobs::WRITE_CACHE);
}

#[test]
fn bad_runs_are_refused() {
    let mut bad = machine();
    bad.tier_pages = 0;
    let err = run_poly(&bad, &workload('c', 0.0), PolyScheme::WriteCache, &run())
        .unwrap_err()
        .to_string();
    assert!(err.contains("tier_pages"), "{err}");
    let scheme = PolyScheme::Search(SearchConfig {
        step: 0.3,
        ..SearchConfig::default()
    });
    let err = run_poly(&machine(), &workload('c', 0.0), scheme, &run())
        .unwrap_err()
        .to_string();
    assert!(err.contains("step"), "{err}");
}
