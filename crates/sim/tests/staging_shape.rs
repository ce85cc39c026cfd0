//! The shape of seed 001's results in the timed simulator, at a scale a test affords: a 64 MiB
//! cache rather than 512 MiB (seed 001 Table 1: the size hardly matters), one virtual second
//! with the journal flush scaled with it (at 5/6 of the run, as 5 s is of 6 s). Deterministic:
//! each figure below is the same on every run.

use heterarchy_engine::staging::StagingScheme;
use heterarchy_sim::staging::{run_staged, Stack, StagedConfig, StagedResult};

fn config(stack: Stack) -> StagedConfig {
    let mut config = StagedConfig::seed001(stack);
    config.cache_bytes = 64 << 20;
    config.duration_ns = 1_000_000_000;
    config.flush_interval_ns = Some(config.duration_ns * 5 / 6);
    config
}

fn run(stack: &str, change: impl Fn(&mut StagedConfig)) -> StagedResult {
    let mut config = config(stack.parse().unwrap());
    change(&mut config);
    run_staged(&config)
}

/// How many times faster `a` is than `b` (time per request, inverse throughput).
fn speedup(a: &StagedResult, b: &StagedResult) -> f64 {
    a.iops / b.iops
}

#[test]
fn the_stacks_rank_as_seed_001_fig_5a_at_iodepth_128() {
    let results: Vec<StagedResult> = Stack::all()
        .into_iter()
        .map(|stack| run_staged(&config(stack)))
        .collect();
    let by = |name: &str| results.iter().find(|r| r.stack == name).unwrap();
    for result in &results {
        println!(
            "{:12} {:>9.0} IOPS  mean {:>8.1} us  p99.99 {:>9.1} us  hits {} fills {} bypasses {} stalled {}",
            result.stack,
            result.iops,
            result.mean_latency_us,
            result.p9999_latency_us,
            result.staging.write_hits,
            result.staging.write_fills,
            result.staging.bypasses,
            result.staging.stalled_writes
        );
    }
    let (raw, btt, caiti) = (by("raw-pm"), by("btt"), by("caiti"));
    // Seed 001 §2: the BTT takes 37.4% more time than raw PM.
    let btt_over_raw = speedup(raw, btt);
    assert!(
        (1.2..=1.6).contains(&btt_over_raw),
        "BTT/raw {btt_over_raw:.3}"
    );
    // §3: staging caches are no faster than the BTT alone.
    for name in ["pmbd", "pmbd70", "lru"] {
        let ratio = speedup(by(name), btt);
        assert!(ratio <= 1.05, "{name} is {ratio:.3}x the BTT");
    }
    // §4.2: Caiti 3.6x the BTT (paper), 3.6/3.6/3.5/2.9x PMBD, PMBD-70, LRU, Co-Active; and
    // faster than raw PM (which takes 2.2x Caiti's time).
    let over_btt = speedup(caiti, btt);
    assert!(over_btt >= 3.0, "Caiti/BTT {over_btt:.3}");
    for name in ["pmbd", "pmbd70", "lru"] {
        let ratio = speedup(caiti, by(name));
        assert!(ratio >= 2.5, "Caiti/{name} {ratio:.3}");
    }
    // Co-Active 1.24x the BTT in the paper (3.6 / 2.9) and 1.27x here: with Caiti 3.13x the
    // BTT rather than 3.6x, that puts it at 2.45x Caiti's time, not 2.9x (docs/pm-block-device.md).
    let over_coactive = speedup(caiti, by("coactive"));
    assert!(over_coactive >= 2.4, "Caiti/Co-Active {over_coactive:.3}");
    let coactive_over_btt = speedup(by("coactive"), btt);
    assert!(
        (1.1..=1.4).contains(&coactive_over_btt),
        "Co-Active/BTT {coactive_over_btt:.3}"
    );
    let over_raw = speedup(caiti, raw);
    assert!(over_raw > 1.5, "Caiti/raw PM {over_raw:.3}");
    // Caiti's writes land in slots: almost none stall or go around the cache.
    assert_eq!(caiti.staging.stalled_writes, 0);
    assert!(
        caiti.staging.bypasses * 100 < caiti.requests,
        "{} bypasses",
        caiti.staging.bypasses
    );
    // The ablations (Fig 6a): without eager eviction the cache fills and most writes go
    // around it; without bypass, on this load, Caiti is unchanged.
    let no_ee = by("caiti-no-ee");
    assert!(
        no_ee.staging.bypasses * 2 > no_ee.requests,
        "{} bypasses",
        no_ee.staging.bypasses
    );
    assert!(speedup(caiti, no_ee) >= 2.0);
    let no_bp = by("caiti-no-bp");
    assert_eq!(no_bp.staging.bypasses, 0);
    assert!(speedup(caiti, no_bp) < 1.05);
    // The DRAM metadata per slot of seed 001 §4.1.
    assert_eq!(caiti.metadata_bytes_per_slot, 102);
    assert_eq!(by("pmbd").metadata_bytes_per_slot, 84);
}

#[test]
fn pmbd_tail_at_iodepth_1024_is_far_above_caitis() {
    let pmbd = run("pmbd", |c| c.iodepth = 1024);
    let caiti = run("caiti", |c| c.iodepth = 1024);
    println!(
        "p99.99 at iodepth 1024: PMBD {:.1} us, Caiti {:.1} us",
        pmbd.p9999_latency_us, caiti.p9999_latency_us
    );
    // Seed 001 Fig 5d: 14x.
    assert!(pmbd.p9999_latency_us > 5.0 * caiti.p9999_latency_us);
}

#[test]
fn coactive_gains_over_lru_with_one_job_only() {
    // Seed 001 §4.2 (Fig 5e): Co-Active "shows a clear distinction between a single job and
    // multiple jobs": it writes back while the device idles, which between one job's requests
    // it does and under several jobs' it hardly ever does.
    let gain = |jobs: u32| {
        let at = |stack: &str| {
            run(stack, |c| {
                c.iodepth = 32;
                c.jobs = jobs;
                c.evictors = 36 - jobs;
                c.duration_ns = 300_000_000;
            })
        };
        let (coactive, lru) = (at("coactive"), at("lru"));
        println!(
            "{jobs} jobs: Co-Active {:.0} IOPS, {} background write-backs; LRU {:.0} IOPS",
            coactive.iops, coactive.staging.background_evictions, lru.iops
        );
        speedup(&coactive, &lru)
    };
    let (one, eight) = (gain(1), gain(8));
    assert!(one > 1.3, "Co-Active/LRU with one job {one:.3}");
    assert!(eight < 1.05, "Co-Active/LRU with eight jobs {eight:.3}");
}

#[test]
fn caitis_latency_hardly_depends_on_cache_size() {
    let means: Vec<f64> = [64u64 << 20, 256 << 20, 1 << 30, 2 << 30]
        .into_iter()
        .map(|bytes| {
            run("caiti", |c| {
                c.iodepth = 32;
                c.cache_bytes = bytes;
            })
            .mean_latency_us
        })
        .collect();
    println!("Caiti mean latency (us) at 64 MiB .. 2 GiB: {means:?}");
    // Seed 001 Table 1: 4.29 to 4.44 us from 64 MiB to 2 GiB.
    let (low, high) = (
        means.iter().cloned().fold(f64::MAX, f64::min),
        means.iter().cloned().fold(0.0, f64::max),
    );
    assert!(high <= low * 1.15, "{means:?}");
}

#[test]
fn flush_latency_stays_flat_for_caiti_and_rises_for_pmbd_and_lru() {
    // Seed 001 Fig 2b: a flush after 512 KiB .. 128 MiB of random writes (here .. 32 MiB,
    // half the cache, so that PMBD flushes before it fills).
    let flush_us = |stack: &str, writes: u32| {
        run(stack, |c| {
            c.iodepth = 1;
            c.flush_interval_ns = None;
            c.fsync_every = Some(writes);
            c.duration_ns = 300_000_000;
        })
        .mean_flush_latency_us
    };
    for stack in ["caiti", "pmbd", "lru"] {
        let small = flush_us(stack, 128);
        let large = flush_us(stack, 8192);
        println!("{stack}: flush after 512 KiB {small:.1} us, after 32 MiB {large:.1} us");
        if stack == "caiti" {
            assert!(large < 4.0 * small.max(1.0), "{small} {large}");
        } else {
            assert!(large > 20.0 * small, "{small} {large}");
        }
    }
}

#[test]
fn runs_are_deterministic_and_names_parse() {
    let a = run("caiti", |c| c.duration_ns = 50_000_000);
    let b = run("caiti", |c| c.duration_ns = 50_000_000);
    assert_eq!((a.requests, a.elapsed_ns), (b.requests, b.elapsed_ns));
    assert_eq!(
        "caiti-no-ee".parse::<Stack>().unwrap(),
        Stack::Btt(StagingScheme::Caiti {
            eager_eviction: false,
            conditional_bypass: true
        })
    );
    let error = "bcache".parse::<Stack>().unwrap_err().to_string();
    assert!(
        error.contains("raw-pm") && error.contains("caiti"),
        "{error}"
    );
}
