//! Seed 000 Figure 4.7 (§4.5.1.1) as shape tests: NHC never loses to classic caching, it
//! behaves as classic caching at Load-0.5 (within 2.5%, every hierarchy, both hit ratios), and
//! at Load-2.0 with 95% hits it gains within 10 points of the thesis on PM + Optane SSD (+32%)
//! and Optane SSD + flash (+54%). DRAM + PM gains more than the thesis' +21% in the model (the
//! experiment's notes say why) but no more than the PM's bandwidth can add to the DRAM's. Runs
//! are deterministic (seeded, virtual time), so these bounds guard the model and the scheduler,
//! not noise.

use std::sync::OnceLock;

use heterarchy_experiment::nhc_orthus_cas::{rows, Row, HIERARCHIES};
use heterarchy_experiment::Options;

fn figure() -> &'static [Row] {
    static ROWS: OnceLock<Vec<Row>> = OnceLock::new();
    ROWS.get_or_init(|| rows(&Options::default(), &HIERARCHIES).unwrap())
}

fn row(hierarchy: &str, hit_ratio: f64, load: f64) -> &'static Row {
    figure()
        .iter()
        .find(|r| r.hierarchy == hierarchy && r.hit_ratio == hit_ratio && r.load == load)
        .unwrap()
}

#[test]
fn every_setting_has_its_row() {
    assert_eq!(figure().len(), 5 * 2 * 4);
    // Load-1.0 with Open CAS's software cost: several requests keep a memory cache busy.
    assert_eq!(row("optane-ssd+nvme-flash", 0.95, 1.0).outstanding, 4);
    assert_eq!(row("optane-ssd+nvme-flash", 0.95, 2.0).outstanding, 8);
    assert_eq!(row("optane-pm+optane-ssd", 0.95, 1.0).outstanding, 7);
    assert_eq!(row("dram+optane-pm", 0.95, 1.0).outstanding, 13);
}

#[test]
fn nhc_is_never_worse_than_classic_caching() {
    // Within 1%: FlashSim 50 over 10 at 80% hits and Load-2.0 loses 0.85%, a known deviation
    // (nhc_orthus_cas::FLASHSIM_DEVIATION); the thesis never loses.
    for r in figure() {
        assert!(r.gain >= -0.01, "{r:?}");
    }
}

#[test]
fn at_light_load_nhc_keeps_caching_classically() {
    for r in figure().iter().filter(|r| r.load == 0.5) {
        // "NHC does not bypass any load and behaves the same as classic caching." Within 2.5%
        // (nhc_orthus_cas::LOAD_HALF_DEVIATION): the installs Algorithm 1 skips while it probes
        // (data_admit off 30% of the time on Optane SSD + flash at 80% hits) spare a
        // shared-queue cache device some queueing, +2.4%. The thesis prints bars, no values;
        // the bound is ours.
        assert!(r.nhc_load_admit >= 0.99, "{r:?}");
        assert!(r.gain.abs() <= 0.025, "{r:?}");
    }
}

#[test]
fn at_load_2_gains_match_the_thesis_where_the_model_has_what_limits_them() {
    let gain = |hierarchy| row(hierarchy, 0.95, 2.0).gain * 100.0;
    for (hierarchy, thesis) in [
        ("optane-pm+optane-ssd", 32.0),
        ("optane-ssd+nvme-flash", 54.0),
    ] {
        let ours = gain(hierarchy);
        assert!(
            (ours - thesis).abs() <= 10.0,
            "{hierarchy}: {ours:.1}% against the thesis' {thesis}%"
        );
    }
    // DRAM + PM: above the thesis' 21%, within what 6.8 GB/s of PM adds to 15 GB/s of DRAM.
    let dram_pm = gain("dram+optane-pm");
    assert!((21.0..=6.8 / 15.0 * 100.0).contains(&dram_pm), "{dram_pm}");
    assert!(gain("optane-ssd+nvme-flash") > dram_pm.max(gain("optane-pm+optane-ssd")));
    // Above Load-1.0 NHC stops admitting read misses and offloads hits.
    let r = row("optane-ssd+nvme-flash", 0.95, 2.0);
    assert!(r.nhc_data_admit < 0.1 && r.nhc_load_admit < 0.8, "{r:?}");
    // A throughput above the cache device's peak: the capacity device serves too.
    assert!(
        r.nhc_throughput > 1.2 && r.classic_throughput <= 1.0,
        "{r:?}"
    );
}

#[test]
fn at_80_percent_hits_classic_caching_stays_below_the_cache_device_peak() {
    // "With an 80% hit ratio, classic caching does not achieve 1.0 normalized throughput on any
    // real hierarchy because cache misses introduce additional writes to the cache device."
    for hierarchy in ["optane-pm+optane-ssd", "optane-ssd+nvme-flash"] {
        let r = row(hierarchy, 0.8, 2.0);
        assert!(r.classic_throughput < 0.99, "{r:?}");
    }
}
