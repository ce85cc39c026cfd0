//! NHC over three levels (seed 000 §4.3 defines it over two devices, D_hi and D_lo;
//! docs/simulation.md, "Non-hierarchical caching"): one Algorithm 1 per pair of neighbouring
//! levels, taking turns interval by interval. On DRAM over Optane PM over an Optane SSD, both
//! pairs tune, and the cascade beats classic caching.

use heterarchy_device::presets::preset;
use heterarchy_engine::{AdmissionScheme, CacheConfig, CacheController};
use heterarchy_sim::timed::{run_timed, Load};
use heterarchy_trace::generate::{generator, WorkloadSpec};

const LINE: u64 = 64 * 1024;

fn run(scheme: AdmissionScheme) -> heterarchy_sim::timed::TimedResult {
    let devices = [
        preset("dram").unwrap(),
        preset("optane-pm").unwrap(),
        preset("optane-ssd").unwrap(),
    ];
    let tiers = [768 << 20, 1 << 30];
    // 95% of the working set fits in tier 1, three quarters of that in tier 0.
    let keys = ((tiers[1] / LINE) as f64 / 0.95) as u64;
    let spec = WorkloadSpec::parse(&format!(
        "uniform:keys={keys},requests=100000000,size=64k,kind=block,seed=3"
    ))
    .unwrap();
    let config = CacheConfig {
        admission: scheme,
        ..CacheConfig::default()
    };
    let mut controller = CacheController::new(&config, &tiers, 1).unwrap();
    let load = Load {
        settle_ns: 1_000_000_000,
        measure_ns: Some(2_000_000_000),
        ..Load::closed(16, u64::MAX, 4 * keys)
    };
    let mut reader = generator(&spec).unwrap();
    run_timed(&mut controller, &devices, &mut *reader, &load).unwrap()
}

#[test]
fn both_pairs_tune_and_the_cascade_beats_classic_caching() {
    let classic = run(AdmissionScheme::Classic);
    let nhc = run(AdmissionScheme::Nhc);
    let history = nhc.tuning.as_ref().unwrap();
    assert!(history.points.iter().all(|p| p.load_admit.len() == 2));
    for pair in 0..2 {
        assert!(
            history
                .points
                .iter()
                .any(|p| p.load_admit[pair] < 0.95 && !p.data_admit[pair]),
            "pair {pair} never tuned"
        );
    }
    let gain = nhc.throughput_ops / classic.throughput_ops;
    assert!(gain > 1.5, "{gain}");
    // The capacity device serves reads too, not only misses.
    assert!(nhc.devices[2].read_bytes_per_s > classic.devices[2].read_bytes_per_s);
}
