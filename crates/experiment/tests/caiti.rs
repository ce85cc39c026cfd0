//! The `caiti-*` experiments run end to end at a small scale and say what the paper says
//! beside what we got (the shapes themselves are asserted in `sim`'s staging tests).

use heterarchy_experiment::{caiti, find, Options};

#[test]
fn every_caiti_experiment_runs_and_compares() {
    let options = Options::scaled(0.02);
    for name in [
        "caiti-iodepth",
        "caiti-jobs",
        "caiti-breakdown",
        "caiti-fsync",
        "caiti-fsync-every",
        "caiti-cache-size",
    ] {
        let experiment = find(name).expect("registered");
        let output = (experiment.run)(&options).unwrap();
        assert!(!output.rows.is_empty(), "{name}: no rows");
        let columns = output.columns();
        assert!(columns.iter().any(|c| c == "stack"), "{name}: {columns:?}");
        if name != "caiti-breakdown" {
            for key in [
                "iodepth",
                "jobs",
                "iops",
                "mean_latency_us",
                "p9999_latency_us",
                "bypasses",
            ] {
                assert!(columns.iter().any(|c| c == key), "{name}: no {key}");
            }
        }
        if name != "caiti-jobs" {
            assert!(!output.comparisons.is_empty(), "{name}: nothing compared");
        }
    }
}

#[test]
fn the_breakdown_puts_the_baselines_time_into_stalled_writes_and_caitis_not() {
    let output = caiti::run_breakdown(&Options::scaled(0.3)).unwrap();
    let share = |stack: &str, category: &str| {
        output
            .rows
            .iter()
            .find(|row| row["stack"] == stack && row["category"] == category)
            .map_or(0.0, |row| row["share_percent"].as_f64().unwrap())
    };
    // Seed 001 Fig 6a: the baselines spend 25-40% of their time writing back on the critical
    // path; Caiti almost none.
    for stack in ["pmbd", "lru"] {
        let stalled = share(stack, "cache eviction and write");
        assert!(stalled > 20.0, "{stack}: {stalled:.1}%");
    }
    assert!(share("caiti", "cache eviction and write") < 1.0);
}
