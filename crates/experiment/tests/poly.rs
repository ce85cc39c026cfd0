//! Shape tests of the PolyEMT experiments (seed 004 §5) on a small machine with the paper's
//! compression costs (deterministic). Tolerances are stated where a figure is asserted.

use heterarchy_engine::poly::SearchConfig;
use heterarchy_experiment::poly::{
    find, run_designs, run_phase_change, tco_rows, Design, Need, Setup, SEARCH_WINDOWS,
};
use heterarchy_experiment::{find as find_experiment, Options};
use heterarchy_trace::generate::YcsbWorkload;

const SCALE: f64 = 0.03;

fn options() -> Options {
    Options::scaled(SCALE)
}

#[test]
fn the_write_cache_beats_memory_on_writes_and_the_split_beats_both() {
    let rows = run_designs(
        &options(),
        &[Design::WriteCache, Design::Functional, Design::Polymorphic],
    )
    .unwrap();
    let at = |w, d| find(&rows, w, d).expect("a row");
    use YcsbWorkload::*;
    // Writes: every msync of DRAM-Ext waits for the SSD.
    for w in [A, F] {
        assert!(at(w, Design::WriteCache).vs_dram_ext > 2.0, "{w:?}");
    }
    for w in [A, B, D, E, F] {
        assert!(
            at(w, Design::WriteCache).write_latency_us_p90
                < at(w, Design::DramExt).write_latency_us_p90,
            "{w:?}"
        );
    }
    // Reads only: the tier as memory is better than as a write cache.
    assert!(at(C, Design::WriteCache).vs_dram_ext < 0.9);
    // The paper's 2.5x on average; ours within [1.5, 3.5].
    let mean = YcsbWorkload::ALL
        .into_iter()
        .map(|w| at(w, Design::WriteCache).vs_dram_ext)
        .sum::<f64>()
        / 6.0;
    assert!((1.5..3.5).contains(&mean), "{mean}");
    // The search never loses more than a window's noise (3%) to the write cache, and gains
    // where reads miss: YCSB-C ends mostly read cache (the paper: 80%).
    for w in YcsbWorkload::ALL {
        let write_cache = at(w, Design::WriteCache).throughput;
        assert!(
            at(w, Design::Functional).throughput > 0.97 * write_cache,
            "{w:?}"
        );
        assert!(
            at(w, Design::Polymorphic).throughput > 0.97 * write_cache,
            "{w:?}"
        );
    }
    assert!(at(C, Design::Functional).read_share >= 0.8);
    assert!(at(C, Design::Functional).throughput > 1.3 * at(C, Design::WriteCache).throughput);
    // Compression is only tried after the functional search.
    for w in YcsbWorkload::ALL {
        assert_eq!(at(w, Design::Functional).compressed_share, 0.0);
    }
    // Where writes miss, the compressed store holds more of the write cache's tail: A and F
    // keep at least a fifth of the tier compressed (the paper: about 20%).
    for w in [A, F] {
        let compressed_share = at(w, Design::Polymorphic).compressed_share;
        assert!(compressed_share >= 0.2 - 1e-9, "{w:?}: {compressed_share}");
    }
}

#[test]
fn the_phase_change_restarts_the_search() {
    let setup = Setup::new(&options());
    let result = run_phase_change(&setup, SEARCH_WINDOWS).unwrap();
    assert!(result.trajectory.iter().any(|(_, s)| s.restarted));
    assert!(result.converged_s().is_some());
    // After the change to YCSB-A, half updates, the search keeps most of the write cache.
    assert!(result.read_share <= 0.5, "{}", result.read_share);
}

#[test]
fn the_online_search_lands_within_5_percent_of_the_offline_optimum() {
    let output = (find_experiment("poly-offline").unwrap().run)(&options()).unwrap();
    assert_eq!(output.rows.len(), 6);
    for row in &output.rows {
        assert_eq!(row["points"], 36, "a 6 × 6 grid at step 0.2");
        // YCSB-D inserts 5% of its operations: its data set grows by more than half during
        // the search, whose windows then compare a moving target (the experiment's note says
        // so); every other workload's data set stays put.
        if row["workload"] == "ycsb-d" {
            continue;
        }
        let gap = row["gap"].as_f64().unwrap();
        assert!(gap <= 0.05, "{row}");
    }
}

#[test]
fn dynamic_provisioning_costs_less_than_oblivious_static_provisioning() {
    // Needs shaped like the paper's: a read-heavy application that wants all of BB-DRAM as
    // memory, a write-heavy one that wants it all as write cache.
    let needs = [
        Need {
            memory_gb: 32.0,
            write_cache_gb: 0.0,
        },
        Need {
            memory_gb: 26.0,
            write_cache_gb: 6.0,
        },
    ];
    let rows = tco_rows(&needs);
    assert_eq!(rows.len(), 9);
    let tco = |strategy: &str, ratio: f64| {
        rows.iter()
            .find(|r| r.strategy == strategy && r.bb_dram_cost_ratio == ratio)
            .unwrap()
            .tco_increase
    };
    assert_eq!(tco("app-specific-static", 1.2), 0.0);
    for ratio in [1.2, 1.5, 2.0] {
        let specific = tco("app-specific-static", ratio);
        let dynamic = tco("app-oblivious-dynamic", ratio);
        let oblivious = tco("app-oblivious-static", ratio);
        assert!(specific <= dynamic && dynamic < oblivious, "{ratio}");
    }
    // Memory is a small part of a datacenter's cost: every increase is a few percent, as in
    // Table 3 (at most 4.15%).
    assert!(rows.iter().all(|r| r.tco_increase < 0.06));
}

#[test]
fn every_poly_experiment_runs_and_compares_with_the_paper() {
    let options = Options::scaled(0.01);
    for name in [
        "poly-roles",
        "poly-compression",
        "poly-convergence",
        "poly-tco",
    ] {
        let output = (find_experiment(name).unwrap().run)(&options).unwrap();
        assert!(!output.rows.is_empty(), "{name}");
        assert!(!output.comparisons.is_empty(), "{name}");
        assert!(output.notes.iter().any(|n| n.contains("Fig 4c")), "{name}");
    }
    let err = SearchConfig {
        step: 0.3,
        ..SearchConfig::default()
    }
    .validate()
    .unwrap_err()
    .to_string();
    assert!(err.contains("step"));
}
