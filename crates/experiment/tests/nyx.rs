//! Seed 000 chapter 5's NyxCache results (§5.3) as shape tests on the simulated shared PM, at a
//! tenth of the thesis' timeline (every time constant of the policies scaled alike). Runs are
//! deterministic; each bound cites the thesis result it checks, and says why where it is
//! looser.

use heterarchy_device::model::IoKind;
use heterarchy_engine::nyx::PolicyName;
use heterarchy_experiment::nyx::{self, Bench};
use heterarchy_experiment::Options;

const SCALE: f64 = 0.1;

fn options() -> Options {
    Options::scaled(SCALE)
}

#[test]
fn the_profile_has_fig_5_3s_shape() {
    let bench = Bench::new(SCALE).unwrap();
    let rows = nyx::profile_rows(&bench);
    let at = |bytes: u32| &rows[(bytes / 64 - 1) as usize];
    // §5.3.2: 3 M 4 KiB random reads a second on two DIMMs (the model's peak is Table 4.1's).
    let reads_4k = at(4096).read_iops;
    assert!((reads_4k / 3e6 - 1.0).abs() <= 0.15, "{reads_4k}");
    assert!(rows.iter().all(|r| r.write_iops < r.read_iops));
    // "a 64B random store has a similar maximum IOPS as 256B"
    assert!((at(64).write_iops / at(256).write_iops - 1.0).abs() <= 0.05);
    // "accesses that are not aligned to 256B have lower MaxIOPS"
    assert!(at(320).read_iops < 0.8 * at(256).read_iops);
    assert_eq!(
        bench.profile.max_iops(IoKind::Read, 4096),
        at(4096).read_iops
    );
}

#[test]
fn stores_hurt_a_single_thread_reader_like_eight_times_the_reads() {
    let rows = nyx::interference_rows(&Bench::new(SCALE).unwrap());
    let find = |name: &str| rows.iter().find(|r| r.beside == name).unwrap();
    let (alone, reads, w256, w64) = (
        find("alone"),
        find("reads 4 KiB"),
        find("writes 256 B"),
        find("writes 64 B"),
    );
    assert!((0.9..1.1).contains(&w256.beside_gb_s), "{w256:?}");
    assert!(reads.beside_gb_s >= 8.0, "{reads:?}");
    let loss = |row: &nyx::InterferenceRow| {
        1.0 - row.victim_requests_per_second / alone.victim_requests_per_second
    };
    // Fig 5.1: 1 GB/s of stores ≈ 8 GB/s of reads for the victim, throughput and p99; ours
    // within 25% on throughput and 2x on p99 (a drain is felt whole).
    let throughput = loss(w256) / loss(reads);
    assert!((0.75..1.25).contains(&throughput), "{throughput}");
    let p99 = w256.victim_p99_latency_us / reads.victim_p99_latency_us;
    assert!((0.5..2.0).contains(&p99), "{p99}");
    // Small stores hurt more than whole units (the slides: about 2x).
    assert!(
        loss(w64) >= 1.5 * loss(w256),
        "{} {}",
        loss(w64),
        loss(w256)
    );
}

#[test]
fn a_limit_in_device_cost_holds_every_pattern_and_keeps_the_co_runner_steady() {
    let bench = Bench::new(SCALE).unwrap();
    let rows = nyx::limit_rows(&bench, &options());
    for row in rows.iter().filter(|r| r.policy == "limit") {
        // Fig 5.6a: L held to its ideal limit whatever its access pattern; within 5% here.
        assert!((row.l_over_ideal - 1.0).abs() <= 0.05, "{row:?}");
    }
    // A byte limit lets writes far past the share.
    let overshoot = rows
        .iter()
        .filter(|r| r.policy == "bandwidth-limit")
        .map(|r| r.l_over_ideal)
        .fold(0.0, f64::max);
    assert!(overshoot >= 2.0, "{overshoot}");
    // §5.3.2: U's σ at least 4x smaller than under the bandwidth cap (thesis 130 MB/s against
    // 678 MB/s, 5.2x).
    let (nyx, bandwidth) = (
        nyx::u_deviation(&rows, PolicyName::Limit),
        nyx::u_deviation(&rows, PolicyName::BandwidthLimit),
    );
    assert!(bandwidth >= 4.0 * nyx, "{bandwidth} vs {nyx}");
}

#[test]
fn qos_throttles_the_writer_where_caladan_throttles_the_busiest_reader() {
    let bench = Bench::new(SCALE).unwrap();
    let rows = nyx::qos_rows(&bench, &options());
    let mean = |policy, from, to, field| nyx::qos_mean(&rows, policy, from, to, field);
    let end = (nyx::QOS_END_S - 8.0, nyx::QOS_END_S);
    for policy in [PolicyName::Qos, PolicyName::CaladanQos] {
        // The target holds before the burst, breaks in it, and is restored.
        let before = mean(policy, 2.0, nyx::QOS_BURST_S, |r| r.lc_p99_latency_us);
        let burst = mean(policy, nyx::QOS_BURST_S, nyx::QOS_BURST_S + 1.0, |r| {
            r.lc_p99_latency_us
        });
        let after = mean(policy, end.0, end.1, |r| r.lc_p99_latency_us);
        assert!(before < nyx::QOS_TARGET_US, "{policy}: {before}");
        assert!(burst > nyx::QOS_TARGET_US, "{policy}: {burst}");
        assert!(after < nyx::QOS_TARGET_US, "{policy}: {after}");
    }
    // Fig 5.8: best-effort throughput at least 4x Caladan-style's (thesis: BE1 6x).
    let best_effort = |policy| {
        mean(policy, end.0, end.1, |r| r.be1_gb_s) + mean(policy, end.0, end.1, |r| r.be2_gb_s)
    };
    let (nyx, caladan) = (
        best_effort(PolicyName::Qos),
        best_effort(PolicyName::CaladanQos),
    );
    assert!(nyx >= 4.0 * caladan, "{nyx} vs {caladan}");
    // Nyx throttled the writer: BE2 ends far below its burst.
    let be2_burst = mean(
        PolicyName::Qos,
        nyx::QOS_BURST_S,
        nyx::QOS_BURST_S + 1.0,
        |r| r.be2_gb_s,
    );
    assert!(mean(PolicyName::Qos, end.0, end.1, |r| r.be2_gb_s) < 0.2 * be2_burst);
}

#[test]
fn fair_slowdown_evens_all_twelve_cases() {
    // At a third of the thesis' time: at a tenth, M4's 0.1 ms turns alone measure with a few
    // percent of noise, which is what the 1.05 bound leaves.
    let scale = 0.3;
    let rows = nyx::fair_rows(&Bench::new(scale).unwrap(), &Options::scaled(scale));
    assert_eq!(rows.len(), 24);
    let worst = |policy: &str| {
        rows.iter()
            .filter(|r| r.policy == policy)
            .map(|r| r.unfairness)
            .fold(1.0, f64::max)
    };
    // Thesis: < 1.05 in all 12 cases where no regulation reaches about 2.4. The policy acts
    // above 1.05 by its own estimates; the experiment measures against separate stand-alone
    // runs, a percent apart from M4's turns alone.
    assert!(worst("fair") <= 1.06, "{rows:#?}");
    assert!(worst("none") >= 2.0, "{rows:#?}");
}

#[test]
fn shares_follow_weights_in_cost_and_a_donor_keeps_its_time_sharing_bound() {
    let rows = nyx::proportional_rows(&Bench::new(SCALE).unwrap(), &options());
    let weighted: Vec<_> = rows
        .iter()
        .filter(|r| r.case.starts_with("A get-heavy"))
        .collect();
    for row in weighted.iter().filter(|r| r.policy == "proportional") {
        // Nyx: near the ideal line (the writer alone does not fill the device quite as its
        // cost says, hence up to 30% over; the reader as far under).
        assert!(
            (0.8..1.3).contains(&(row.b_of_alone / row.b_ideal)),
            "{row:?}"
        );
        assert!(
            (0.7..1.2).contains(&(row.a_of_alone / row.a_ideal)),
            "{row:?}"
        );
    }
    // Fig 5.10: bandwidth shares give the writer up to 3x its share, and the reader suffers.
    let bandwidth: Vec<_> = weighted
        .iter()
        .filter(|r| r.policy == "bandwidth-proportional")
        .collect();
    let most = bandwidth
        .iter()
        .map(|r| r.b_of_alone / r.b_ideal)
        .fold(0.0, f64::max);
    assert!(most >= 2.0, "{bandwidth:#?}");
    assert!(
        bandwidth.iter().all(|r| r.a_of_alone < 0.6 * r.a_ideal),
        "{bandwidth:#?}"
    );
    let light = |policy: &str, case: &str| {
        rows.iter()
            .find(|r| r.policy == policy && r.case == case)
            .unwrap()
    };
    let case = "A light, B write-heavy";
    let bound = 2.0 / 3.0;
    // Figs 5.11-5.12: Nyx keeps the donor at 2/3 of alone, donating all breaks it, and the
    // recipient still gains over no donation.
    assert!(light("proportional", case).a_of_alone >= bound, "{rows:#?}");
    assert!(light("donate-all", case).a_of_alone < bound, "{rows:#?}");
    assert!(light("no-realloc", case).a_of_alone >= bound, "{rows:#?}");
    assert!(
        light("proportional", case).b_of_alone > light("no-realloc", case).b_of_alone,
        "{rows:#?}"
    );
}

#[test]
fn measuring_each_tenant_alone_costs_what_its_pauses_take() {
    let rows = nyx::estimate_rows(&Bench::new(SCALE).unwrap(), &options());
    for row in &rows {
        // Each tenant waits out (N - 1) pauses of 1 ms per period.
        let expected = (row.tenants - 1) as f64 * 0.001 / row.period_s;
        assert!((row.overhead - expected).abs() <= 0.005, "{row:?}");
    }
    let at = |tenants, period_s| {
        rows.iter()
            .find(|r| r.tenants == tenants && r.period_s == period_s)
            .unwrap()
            .overhead
    };
    // Seed 000 §5.3.1, §5.2.6: under 2.5% with 12 tenants every 0.5 s, within 2% every 1 s.
    assert!(at(12, 0.5) < 0.025 && at(12, 1.0) <= 0.02);
}

#[test]
fn a_cost_limit_shields_co_runners_from_write_spikes_better_than_bytes() {
    let rows = nyx::spike_rows(&Bench::new(SCALE).unwrap(), &options());
    for field in [
        (|r: &nyx::SpikeRow| r.s1_requests_per_second) as fn(&nyx::SpikeRow) -> f64,
        |r| r.c1_requests_per_second,
    ] {
        let (nyx, bandwidth) = (
            nyx::spike_dip(&rows, PolicyName::Limit, field),
            nyx::spike_dip(&rows, PolicyName::BandwidthLimit, field),
        );
        // Fig 5.13: flat under Nyx, dipping under a byte limit. Ours keeps 70% (C2's third
        // of the device is gone from the others while it spikes, and its drains lengthen
        // their reads) against under half.
        assert!(nyx >= 0.7 && bandwidth <= 0.5, "{nyx} vs {bandwidth}");
    }
}

#[test]
fn a_critical_cache_stays_within_its_hard_slowdown_limit_by_day() {
    let rows = nyx::critical_rows(&Bench::new(SCALE).unwrap(), &options());
    let (none, nyx) = (
        nyx::critical_day_slowdowns(&rows, PolicyName::None),
        nyx::critical_day_slowdowns(&rows, PolicyName::Fair),
    );
    let mean = |values: &[f64]| values.iter().sum::<f64>() / values.len() as f64;
    assert!(mean(&none) > 3.0, "{}", mean(&none));
    // Fig 5.14: S1 under 1.5 throughout; ours on average, and within 5% of it in at least 85%
    // of the day's 0.1 s intervals (a ramping load outruns the controller now and then).
    assert!(mean(&nyx) <= nyx::CRITICAL_LIMIT, "{}", mean(&nyx));
    assert!(nyx::share_within(&nyx, nyx::CRITICAL_LIMIT * 1.05) >= 0.85);
}

#[test]
fn a_limit_caps_hits_and_lets_misses_through() {
    let rows = nyx::hit_ratio_rows(&Bench::new(SCALE).unwrap(), &options());
    let (full, lowest) = (&rows[0], rows.last().unwrap());
    // Fig 5.7: hits stay at the limit (within 5%) while requests grow as the hit ratio falls.
    for row in &rows {
        assert!(
            (row.hits_per_second / full.hits_per_second - 1.0).abs() <= 0.05,
            "{row:?}"
        );
    }
    assert!(
        lowest.requests_per_second >= 2.5 * full.requests_per_second,
        "{rows:#?}"
    );
}

#[test]
fn larger_experiment_steps_converge_faster() {
    let rows = nyx::experiment_step_rows(&Bench::new(SCALE).unwrap(), &options());
    // Fig 5.15: the larger the step, the sooner the LC target holds (from 500 MB/s on, within
    // the first window after the analysis) ...
    for pair in rows.windows(2) {
        assert!(
            pair[1].seconds_to_target <= pair[0].seconds_to_target,
            "{rows:#?}"
        );
    }
    assert!(
        rows.last().unwrap().seconds_to_target < 0.5 * rows[0].seconds_to_target,
        "{rows:#?}"
    );
    // ... and from 250 MB/s on the writer ends near zero (at 125 MB/s it is still being
    // throttled when the timeline ends).
    for row in rows.iter().filter(|r| r.experiment_step_mb_s >= 250.0) {
        assert!(row.be2_final_gb_s <= 0.2, "{row:?}");
    }
}

#[test]
fn a_donor_stays_near_its_bound_at_every_donate_step() {
    let rows = nyx::donate_step_rows(&Bench::new(SCALE).unwrap(), &options());
    // Our donor holds within a step of its bound, so every step keeps it near 2/3 of alone
    // (the thesis' 60% fluctuations do not appear: the hold band grows with the step).
    for row in &rows {
        assert!(row.a_of_alone_mean >= 0.65, "{row:?}");
        assert!(row.a_of_alone_deviation <= 0.05, "{row:?}");
    }
}

#[test]
fn nyx_pelikan_gets_and_sets_beat_pelikan_on_pm() {
    let rows = nyx::pelikan_rows(&Bench::new(SCALE).unwrap(), &options());
    for row in &rows {
        // Fig 5.4: both changes gain at every size; the key read matters most for small
        // values, NT stores most where a value spans lines that cached stores write back one
        // by one (a 64 B value is one line either way: only the read for ownership is saved).
        assert!(row.get_gain > 1.05, "{row:?}");
        assert!(row.set_gain > 1.1, "{row:?}");
    }
    let most = |gain: fn(&nyx::PelikanRow) -> f64| rows.iter().map(gain).fold(0.0, f64::max);
    // Thesis: gets up to 1.55x, sets up to 3x; ours more (the model's DIMMs keep no buffer
    // that would serve a value from the unit its key was just read from, nor merge the
    // write-backs of neighbouring lines).
    assert!((1.3..2.0).contains(&most(|r| r.get_gain)), "{rows:#?}");
    assert!((2.0..5.0).contains(&most(|r| r.set_gain)), "{rows:#?}");
    assert!(
        rows[0].get_gain > rows.last().unwrap().get_gain,
        "{rows:#?}"
    );
}
