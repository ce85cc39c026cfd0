//! Seed 000 Figure 4.8, Table 4.2 and Figure 4.15 as shape tests. Runs are deterministic, so
//! the bounds guard the model and the tuners, not noise; the thesis prints no values for the
//! figures, only the orderings asserted here.

use heterarchy_experiment::{nhc_prior_work, nhc_targets, nhc_write_modes, Options};

#[test]
fn write_modes_nhc_never_loses_and_gains_most_with_few_writes_and_clean_reads() {
    let rows = nhc_write_modes::rows(&Options::scaled(0.5), &nhc_write_modes::HIERARCHIES).unwrap();
    assert_eq!(rows.len(), 3 * 3 * 3 * 3);
    // "NHC improves reads irrespective of write ratios": at least 1 everywhere, within half a
    // percent (the cost of Algorithm 1's probes where staying at 1.0 is best) ...
    for row in &rows {
        let write_saturated = row.hierarchy == "optane-pm+optane-ssd" && row.write_ratio == 0.5;
        assert!(row.speedup >= 0.995 || write_saturated, "{row:?}");
        // ... except a known deviation (nhc_orthus_cas::WRITE_SATURATED_DEVIATION): where the
        // Optane SSD's write bandwidth caps both schemes, one interval's throughput varies by
        // about 5% and Algorithm 1's probes wander below load_admit 1.0, losing up to 4.1%
        // (0.959, write-around with 60% of the keys written). The thesis prints no values;
        // this bound is ours.
        assert!(row.speedup >= 0.95, "{row:?}");
        if write_saturated {
            // Every write reaches the Optane SSD (2.3 GB/s of writes): at 50% writes both
            // schemes run within 10% of that cap.
            assert!(row.classic_gb_s > 0.9 * 2.3 / 0.5, "{row:?}");
        }
    }
    let mean = |filter: &dyn Fn(&nhc_write_modes::Row) -> bool| {
        let chosen: Vec<f64> = rows
            .iter()
            .filter(|r| filter(r))
            .map(|r| r.speedup)
            .collect();
        chosen.iter().sum::<f64>() / chosen.len() as f64
    };
    // "NHC offers more benefits when there are fewer writes."
    assert!(mean(&|r| r.write_ratio == 0.1) > mean(&|r| r.write_ratio == 0.5) + 0.1);
    // "With write-back, NHC cannot offload reads of dirty items ... and thus performs much
    // better with fewer dirty reads. Write-around and write-through ... independent of the
    // dirty-read ratio."
    let by_dirt =
        |mode: &'static str, dirty: f64| mean(&|r| r.mode == mode && r.dirty_read_ratio == dirty);
    assert!(by_dirt("wb", 0.2) > by_dirt("wb", 1.0) + 0.1);
    for mode in ["wt", "wa"] {
        let (clean, dirty) = (by_dirt(mode, 0.2), by_dirt(mode, 1.0));
        assert!(
            (clean - dirty).abs() < 0.1,
            "{mode}: {clean} against {dirty}"
        );
    }
}

#[test]
fn each_target_metric_wins_on_its_own_metric() {
    let rows = nhc_targets::rows(&Options::scaled(1.0)).unwrap();
    for hierarchy in ["optane-pm+optane-ssd", "optane-ssd+nvme-flash"] {
        let of = |target: &str| {
            rows.iter()
                .find(|r| r.hierarchy == hierarchy && r.target == target)
                .unwrap()
        };
        let classic = of("open-cas");
        let throughput = of("throughput");
        let p99 = of("p99-latency");
        // Table 4.2: the throughput target beats Open CAS's throughput and mean latency ...
        assert!(
            // Table 4.2: +19% and +70%; the model gains +12% and +61%.
            throughput.throughput_gb_s > 1.1 * classic.throughput_gb_s,
            "{hierarchy}"
        );
        assert!(
            throughput.mean_latency_us < classic.mean_latency_us,
            "{hierarchy}"
        );
        // ... the mean-latency target does about the same (Little's law, closed loop) ...
        let mean = of("mean-latency");
        assert!((mean.throughput_gb_s / throughput.throughput_gb_s - 1.0).abs() < 0.05);
        // ... and the P99 target's tail is no worse than Open CAS's (Table 4.2: 106 and 245
        // against 115 and 269 us), NHC moving away from classic caching only where the tail
        // measurably gains.
        assert!(p99.p99_latency_us <= classic.p99_latency_us, "{hierarchy}");
        assert!(p99.load_admit >= throughput.load_admit, "{hierarchy}");
    }
    // On PM + Optane SSD the throughput target costs tail latency (Table 4.2: 147 against 115
    // us) and the P99 target keeps it at classic's; the model's flash has no slow tail of its
    // own, so on Optane SSD + flash offloading shortens the tail too (the experiment's notes).
    let of = |target: &str| {
        rows.iter()
            .find(|r| r.hierarchy == "optane-pm+optane-ssd" && r.target == target)
            .unwrap()
    };
    assert!(of("throughput").p99_latency_us > of("open-cas").p99_latency_us);
    assert!(of("p99-latency").p99_latency_us <= of("throughput").p99_latency_us);
}

#[test]
fn prior_work_nhc_wins_and_sib_fails_on_short_periods() {
    let rows = nhc_prior_work::rows(&Options::scaled(0.2), &[None, Some(10.0), Some(0.5)]).unwrap();
    let speedup = |period: f64, scheme: &str| {
        rows.iter()
            .find(|r| r.period_s == period && r.scheme == scheme)
            .unwrap()
            .speedup
    };
    // Static: NHC > SIB++ > SIB+, and LBICA is poor (it never redirects a hit).
    assert!(speedup(0.0, "nhc") > speedup(0.0, "sib++"));
    assert!(speedup(0.0, "sib++") > speedup(0.0, "sib+"));
    assert!(speedup(0.0, "lbica") < 1.1);
    // Dynamic at 0.5 s periods: NHC beats all three (Figure 4.15b).
    for scheme in ["sib++", "sib+", "lbica"] {
        assert!(speedup(0.5, "nhc") > speedup(0.5, scheme) + 0.2, "{scheme}");
    }
    // SIB falls as the period shrinks; NHC does not.
    assert!(speedup(10.0, "sib++") > speedup(0.5, "sib++") + 0.2);
    assert!(speedup(0.5, "nhc") >= 0.95 * speedup(10.0, "nhc"));
}
