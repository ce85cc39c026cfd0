//! Seed 000 chapter 5's NyxCache experiments (§5.3; docs/simulation.md, "Experiments") on the
//! simulated shared PM: tenants on the `optane-pm-x2` model (the thesis' two interleaved
//! DIMMs), each request one PM access through its gate, the policies of `engine::nyx` stepping
//! on virtual time — the same code the live key-value server runs. `scale` shortens the runs
//! and every time constant of the policies alike (tick, epoch, windows, T_alone's period and
//! pause), so that a shape test runs the thesis' timeline in a tenth of its virtual time.

use heterarchy_device::memory::MemoryOp;
use heterarchy_device::model::{DeviceModel, IoKind};
use heterarchy_device::presets::preset;
use heterarchy_device::spec::DeviceSpec;
use heterarchy_engine::nyx::cost::{PROFILE_SIZES, PROFILE_STEP_BYTES};
use heterarchy_engine::nyx::policy::{PolicyParams, TenantTerms};
use heterarchy_engine::nyx::{MaxIopsProfile, PolicyName, ProfileLoad};
use heterarchy_sim::nyx::{
    run_shared_pm, SharedPmConfig, SharedPmResult, SimTenant, TenantInterval, TenantLoad,
};
use serde::Serialize;

use crate::{Comparison, ExperimentError, Options, Output};

/// The thesis' device: two interleaved Optane DC PM DIMMs.
pub const DEVICE: &str = "optane-pm-x2";
/// CPU time of a request besides its PM access (hashing, the DRAM index), ns.
pub const CPU_NS: u64 = 200;

/// The device and its profile (M2), measured once per experiment.
pub struct Bench {
    pub device: DeviceSpec,
    pub profile: MaxIopsProfile,
    /// Multiplies run lengths and the policies' time constants.
    pub scale: f64,
}

impl Bench {
    /// `optane-pm-x2` and its profile, runs and time constants `scale` times the thesis'.
    pub fn new(scale: f64) -> Result<Bench, ExperimentError> {
        let device = preset(DEVICE).ok_or_else(|| ExperimentError::NoPreset(DEVICE.to_string()))?;
        let profile = MaxIopsProfile::measure(
            &mut DeviceModel::new(&device),
            DEVICE,
            &ProfileLoad::default(),
        );
        Ok(Bench {
            device,
            profile,
            scale: scale.clamp(0.01, 10.0),
        })
    }

    /// `seconds` of the thesis' timeline, scaled, in ns.
    pub fn ns(&self, seconds: f64) -> u64 {
        (seconds * self.scale * 1e9) as u64
    }

    /// The thesis' parameters (seed 000 §5.2.6), their times scaled.
    pub fn params(&self) -> PolicyParams {
        let defaults = PolicyParams::default();
        let scaled = |ns: u64| ((ns as f64 * self.scale) as u64).max(1);
        PolicyParams {
            tick_ns: scaled(defaults.tick_ns),
            tail_window_ns: scaled(defaults.tail_window_ns),
            alone_period_ns: scaled(defaults.alone_period_ns),
            alone_pause_ns: scaled(defaults.alone_pause_ns).max(100_000),
            fair_interval_ns: scaled(defaults.fair_interval_ns),
            device_bytes_per_second: self.profile.max_iops(IoKind::Read, 4096) * 4096.0,
            ..defaults
        }
    }

    /// A run of `tenants` under `policy` for `seconds` of the timeline, sampled every tenth of
    /// a second.
    pub fn run(&self, tenants: Vec<SimTenant>, policy: PolicyName, seconds: f64) -> SharedPmResult {
        self.run_with(tenants, policy, seconds, self.params())
    }

    /// The same with `params`.
    pub fn run_with(
        &self,
        tenants: Vec<SimTenant>,
        policy: PolicyName,
        seconds: f64,
        params: PolicyParams,
    ) -> SharedPmResult {
        run_shared_pm(&SharedPmConfig {
            device: self.device.clone(),
            profile: self.profile.clone(),
            tenants,
            policy,
            params,
            duration_ns: self.ns(seconds),
            interval_ns: self.ns(0.1),
            cpu_ns: CPU_NS,
            span_bytes: 1 << 30,
            seed: 1,
        })
    }

    /// Timeline seconds of a result's interval start.
    pub fn seconds(&self, start_s: f64) -> f64 {
        start_s / self.scale
    }

    /// The mean of `field` over `result`'s tenant `index` between timeline seconds `from` and
    /// `to`.
    pub fn mean(
        &self,
        result: &SharedPmResult,
        index: usize,
        from: f64,
        to: f64,
        field: impl Fn(&TenantInterval) -> f64,
    ) -> f64 {
        result.tenants[index].mean(from * self.scale, to * self.scale, field)
    }
}

/// A tenant with one load and `terms`.
fn tenant(name: &str, load: TenantLoad, terms: TenantTerms) -> SimTenant {
    SimTenant {
        terms,
        ..SimTenant::steady(name, load)
    }
}

/// One row per run and interval of the timeline, made by `row` from the policy, the interval's
/// timeline second and every tenant's interval.
fn timeline_rows<R>(
    bench: &Bench,
    results: Vec<(PolicyName, SharedPmResult)>,
    row: impl Fn(PolicyName, f64, &[TenantInterval]) -> R,
) -> Vec<R> {
    let mut rows = Vec::new();
    for (policy, result) in results {
        for index in 0..result.tenants[0].intervals.len() {
            let at: Vec<TenantInterval> =
                result.tenants.iter().map(|t| t.intervals[index]).collect();
            rows.push(row(policy, bench.seconds(at[0].start_s), &at));
        }
    }
    rows
}

/// The mean of `values` (0 for none).
fn mean_of(values: impl IntoIterator<Item = f64>) -> f64 {
    let (sum, count) = values
        .into_iter()
        .fold((0.0, 0usize), |(sum, count), value| {
            (sum + value, count + 1)
        });
    sum / count.max(1) as f64
}

/// The standard deviation of `values`.
fn deviation_of(values: &[f64]) -> f64 {
    let mean = mean_of(values.iter().copied());
    mean_of(values.iter().map(|v| (v - mean).powi(2))).sqrt()
}

fn ratio_text(value: f64) -> String {
    format!("{value:.2}x")
}

/// E0, Fig 5.3: the MaxIOPS profile by size.
#[derive(Clone, Debug, Serialize)]
pub struct ProfileRow {
    pub bytes: u32,
    pub read_iops: f64,
    pub write_iops: f64,
}

/// Each profiled size's MaxIOPS.
pub fn profile_rows(bench: &Bench) -> Vec<ProfileRow> {
    (1..=PROFILE_SIZES as u32)
        .map(|step| {
            let bytes = step * PROFILE_STEP_BYTES;
            ProfileRow {
                bytes,
                read_iops: bench.profile.max_iops(IoKind::Read, bytes),
                write_iops: bench.profile.max_iops(IoKind::Write, bytes),
            }
        })
        .collect()
}

/// E0 as `heterarchy experiment nyx-profile` prints it.
pub fn run_profile(options: &Options) -> Result<Output, ExperimentError> {
    let bench = Bench::new(options.scale)?;
    let rows = profile_rows(&bench);
    let mut output = Output::new(
        "MaxIOPS of random reads and writes by size (seed 000 Fig 5.3)",
        &rows,
    );
    let at = |bytes: u32| &rows[(bytes / PROFILE_STEP_BYTES - 1) as usize];
    output.comparisons.push(Comparison {
        what: "4 KiB random reads a second".into(),
        thesis: "3 M (§5.3.2)".into(),
        ours: format!("{:.2} M", at(4096).read_iops / 1e6),
    });
    output.comparisons.push(Comparison {
        what: "64 B writes' MaxIOPS over 256 B writes'".into(),
        thesis: "similar".into(),
        ours: ratio_text(at(64).write_iops / at(256).write_iops),
    });
    output.comparisons.push(Comparison {
        what: "320 B reads' MaxIOPS over 256 B and 512 B reads'".into(),
        thesis: "off-unit sizes dip".into(),
        ours: format!(
            "{} / {}",
            ratio_text(at(320).read_iops / at(256).read_iops),
            ratio_text(at(320).read_iops / at(512).read_iops)
        ),
    });
    Ok(output)
}

/// E1, Fig 5.1: a single-thread reader of 256 B values beside reads or writes.
#[derive(Clone, Debug, Serialize)]
pub struct InterferenceRow {
    pub beside: String,
    pub beside_gb_s: f64,
    pub victim_requests_per_second: f64,
    pub victim_p99_latency_us: f64,
}

/// The victim alone, beside ~8 GB/s of 4 KiB reads, and beside ~1 GB/s of stores of 64 to
/// 512 B (open-ish loads: threads with think time).
pub fn interference_rows(bench: &Bench) -> Vec<InterferenceRow> {
    let victim = || SimTenant::steady("victim", TenantLoad::new(1, 1.0, 256));
    let mut loads: Vec<(String, Option<TenantLoad>)> = vec![("alone".into(), None)];
    loads.push((
        "reads 4 KiB".into(),
        Some(TenantLoad {
            period_ns: 4000,
            ..TenantLoad::new(8, 1.0, 4096)
        }),
    ));
    for bytes in [64u32, 128, 192, 256, 320, 384, 448, 512] {
        // About 1 GB/s: threads enough that each makes a store a microsecond.
        let threads = (1e9 / f64::from(bytes) * 1.0e-6).ceil() as u32;
        loads.push((
            format!("writes {bytes} B"),
            Some(TenantLoad {
                period_ns: 1000,
                ..TenantLoad::new(threads, 0.0, bytes)
            }),
        ));
    }
    loads
        .into_iter()
        .map(|(beside, load)| {
            let mut tenants = vec![victim()];
            tenants.extend(load.map(|load| SimTenant::steady("beside", load)));
            let result = bench.run(tenants, PolicyName::None, 1.0);
            let beside_gb_s = if result.tenants.len() > 1 {
                bench.mean(&result, 1, 0.1, 1.0, |i| i.bytes_per_second) / 1e9
            } else {
                0.0
            };
            InterferenceRow {
                beside,
                beside_gb_s,
                victim_requests_per_second: bench
                    .mean(&result, 0, 0.1, 1.0, |i| i.requests_per_second),
                victim_p99_latency_us: bench.mean(&result, 0, 0.1, 1.0, |i| i.p99_latency_us),
            }
        })
        .collect()
}

/// E1 as `heterarchy experiment nyx-interference` prints it.
pub fn run_interference(options: &Options) -> Result<Output, ExperimentError> {
    let bench = Bench::new(options.scale)?;
    let rows = interference_rows(&bench);
    let mut output = Output::new(
        "A single-thread 256 B reader beside reads and stores (seed 000 Fig 5.1)",
        &rows,
    );
    let find = |name: &str| rows.iter().find(|r| r.beside == name);
    if let (Some(alone), Some(reads), Some(w256), Some(w64)) = (
        find("alone"),
        find("reads 4 KiB"),
        find("writes 256 B"),
        find("writes 64 B"),
    ) {
        output.comparisons.push(Comparison {
            what: format!(
                "victim p99 beside {:.1} GB/s of stores / beside {:.1} GB/s of reads",
                w256.beside_gb_s, reads.beside_gb_s
            ),
            thesis: "1 GB/s of stores ≈ 8 GB/s of reads".into(),
            ours: ratio_text(w256.victim_p99_latency_us / reads.victim_p99_latency_us),
        });
        let loss = |row: &InterferenceRow| {
            1.0 - row.victim_requests_per_second / alone.victim_requests_per_second
        };
        output.comparisons.push(Comparison {
            what: "victim throughput lost beside 64 B stores / beside 256 B stores".into(),
            thesis: "about 2x".into(),
            ours: ratio_text(loss(w64) / loss(w256)),
        });
        output.comparisons.push(Comparison {
            what: "victim throughput lost beside the stores / beside the reads".into(),
            thesis: "≈ 1x".into(),
            ours: ratio_text(loss(w256) / loss(reads)),
        });
    }
    output.notes.push(
        "The model's stores take from readers what writing takes (Fig 5.6 holds), and drain in \
         bursts that a one-at-a-time reader feels whole: its p99 matches the thesis, its \
         throughput loses less than beside 8 GB/s of reads."
            .into(),
    );
    Ok(output)
}

/// E4–E5, Figs 5.6a–b: a limited tenant L and an unlimited get-heavy U.
#[derive(Clone, Debug, Serialize)]
pub struct LimitRow {
    pub policy: String,
    pub l_pattern: String,
    pub l_requests_per_second: f64,
    /// 42% of the pattern's MaxIOPS.
    pub ideal_requests_per_second: f64,
    pub l_over_ideal: f64,
    pub u_gb_s: f64,
}

/// L's patterns: get-only or write-only, 64 B to 4 KiB.
pub const LIMIT_PATTERNS: [(f64, u32); 8] = [
    (1.0, 64),
    (1.0, 256),
    (1.0, 1024),
    (1.0, 4096),
    (0.0, 64),
    (0.0, 256),
    (0.0, 1024),
    (0.0, 4096),
];

/// The thesis' limit: 1.25 M 4 KiB random loads a second, 42% of the device.
pub const LIMIT_SHARE: f64 = 0.42;

/// L under each pattern and each policy beside U.
pub fn limit_rows(bench: &Bench, options: &Options) -> Vec<LimitRow> {
    let mut jobs = Vec::new();
    for policy in [PolicyName::Limit, PolicyName::BandwidthLimit] {
        for pattern in LIMIT_PATTERNS {
            jobs.push((policy, pattern));
        }
    }
    let bandwidth = LIMIT_SHARE * bench.profile.max_iops(IoKind::Read, 4096) * 4096.0;
    options.run_all(&jobs, |&(policy, (get_fraction, bytes))| {
        // U reads 4 KiB values as fast as it can; L wants more than its share.
        let u = SimTenant::steady("U", TenantLoad::new(8, 1.0, 1024));
        let limit = match policy {
            PolicyName::Limit => LIMIT_SHARE,
            _ => bandwidth,
        };
        let l = tenant(
            "L",
            TenantLoad::new(32, get_fraction, bytes),
            TenantTerms {
                limit: Some(limit),
                ..TenantTerms::default()
            },
        );
        let result = bench.run(vec![u, l], policy, 3.0);
        let kind = if get_fraction > 0.5 {
            IoKind::Read
        } else {
            IoKind::Write
        };
        let ideal = LIMIT_SHARE * bench.profile.max_iops(kind, bytes);
        let l_rate = bench.mean(&result, 1, 1.0, 3.0, |i| i.requests_per_second);
        LimitRow {
            policy: policy.name().into(),
            l_pattern: format!(
                "{} {bytes} B",
                if get_fraction > 0.5 { "get" } else { "set" }
            ),
            l_requests_per_second: l_rate,
            ideal_requests_per_second: ideal,
            l_over_ideal: l_rate / ideal,
            u_gb_s: bench.mean(&result, 0, 1.0, 3.0, |i| i.bytes_per_second) / 1e9,
        }
    })
}

/// Standard deviation of U's throughput across L's patterns under `policy`, GB/s.
pub fn u_deviation(rows: &[LimitRow], policy: PolicyName) -> f64 {
    let values: Vec<f64> = rows
        .iter()
        .filter(|r| r.policy == policy.name())
        .map(|r| r.u_gb_s)
        .collect();
    deviation_of(&values)
}

/// E4–E5 as `heterarchy experiment nyx-limit` prints them.
pub fn run_limit(options: &Options) -> Result<Output, ExperimentError> {
    let bench = Bench::new(options.scale)?;
    let rows = limit_rows(&bench, options);
    let mut output = Output::new(
        "Resource limit: L held to 42% of the device beside U (seed 000 Figs 5.6a-b)",
        &rows,
    );
    let worst = rows
        .iter()
        .filter(|r| r.policy == PolicyName::Limit.name())
        .map(|r| (r.l_over_ideal - 1.0).abs())
        .fold(0.0, f64::max);
    output.comparisons.push(Comparison {
        what: "L's worst distance from 42% of its pattern's MaxIOPS under Nyx".into(),
        thesis: "on the line for every pattern".into(),
        ours: format!("{:.1}%", worst * 100.0),
    });
    let (nyx, bandwidth) = (
        u_deviation(&rows, PolicyName::Limit),
        u_deviation(&rows, PolicyName::BandwidthLimit),
    );
    output.comparisons.push(Comparison {
        what: "σ of U's throughput across L's patterns, bandwidth limit / Nyx".into(),
        thesis: "678 / 130 MB/s = 5.2x".into(),
        ours: format!(
            "{:.0} / {:.0} MB/s = {}",
            bandwidth * 1e3,
            nyx * 1e3,
            ratio_text(bandwidth / nyx)
        ),
    });
    Ok(output)
}

/// E7, Fig 5.8: an LC tenant with a p99 target beside a get-heavy BE1 and a write-heavy BE2
/// whose writes burst at 12 s.
#[derive(Clone, Debug, Serialize)]
pub struct QosRow {
    pub policy: String,
    pub time_s: f64,
    pub lc_p99_latency_us: f64,
    pub be1_gb_s: f64,
    pub be2_gb_s: f64,
}

/// The LC tenant's p99 target: seed 000 §5.3.3's is 1.5 µs, which its LC met beside BE1; on
/// the model the LC's p99 beside BE1 is 1.2 to 1.5 µs, so ours is 2 µs.
pub const QOS_TARGET_US: f64 = 2.0;
/// When BE2's writes burst, and how long the timeline runs.
pub const QOS_BURST_S: f64 = 12.0;
pub const QOS_END_S: f64 = 40.0;

fn qos_tenants() -> Vec<SimTenant> {
    let lc = tenant(
        "LC",
        TenantLoad::new(1, 1.0, 256),
        TenantTerms {
            class: heterarchy_engine::nyx::policy::TenantClass::LatencyCritical,
            p99_target_ns: Some((QOS_TARGET_US * 1000.0) as u64),
            ..TenantTerms::default()
        },
    );
    // About 2.4 GB/s of 1 KiB gets.
    let be1 = SimTenant::steady(
        "BE1",
        TenantLoad {
            period_ns: 1700,
            ..TenantLoad::new(4, 0.95, 1024)
        },
    );
    // A trickle of 256 B writes, then a burst of about 1.5 GB/s: less than BE1 moves, so a
    // bandwidth rule throttles BE1 first.
    let be2 = SimTenant {
        name: "BE2".into(),
        phases: vec![
            (
                0,
                TenantLoad {
                    think_ns: 50_000,
                    ..TenantLoad::new(1, 0.1, 256)
                },
            ),
            (
                0, // set by the caller to the burst
                TenantLoad {
                    period_ns: 1365,
                    ..TenantLoad::new(8, 0.1, 256)
                },
            ),
        ],
        terms: TenantTerms::default(),
    };
    vec![lc, be1, be2]
}

/// E7's rows, every run of its settings.
pub fn qos_rows(bench: &Bench, options: &Options) -> Vec<QosRow> {
    let policies = [PolicyName::Qos, PolicyName::CaladanQos];
    let results = options.run_all(&policies, |&policy| {
        let mut tenants = qos_tenants();
        tenants[2].phases[1].0 = bench.ns(QOS_BURST_S);
        (policy, bench.run(tenants, policy, QOS_END_S))
    });
    timeline_rows(bench, results, |policy, time_s, at| QosRow {
        policy: policy.name().into(),
        time_s,
        lc_p99_latency_us: at[0].p99_latency_us,
        be1_gb_s: at[1].bytes_per_second / 1e9,
        be2_gb_s: at[2].bytes_per_second / 1e9,
    })
}

/// Mean of `field` over `policy`'s rows from `from_s` to `to_s`.
pub fn qos_mean(
    rows: &[QosRow],
    policy: PolicyName,
    from_s: f64,
    to_s: f64,
    field: fn(&QosRow) -> f64,
) -> f64 {
    mean_of(
        rows.iter()
            .filter(|r| r.policy == policy.name() && r.time_s >= from_s && r.time_s < to_s)
            .map(field),
    )
}

/// E7 as `heterarchy experiment nyx-qos` prints it.
pub fn run_qos(options: &Options) -> Result<Output, ExperimentError> {
    let bench = Bench::new(options.scale)?;
    let rows = qos_rows(&bench, options);
    let mut output = Output::new(
        "QoS: an LC tenant's p99 target against a write burst at 12 s (seed 000 Fig 5.8)",
        &rows,
    );
    let tail = (QOS_END_S - 8.0, QOS_END_S);
    let be1 = |policy| qos_mean(&rows, policy, tail.0, tail.1, |r| r.be1_gb_s);
    output.comparisons.push(Comparison {
        what: "BE1's final throughput, Nyx / Nyx-Caladan".into(),
        thesis: "6x".into(),
        ours: format!(
            "{:.2} / {:.2} GB/s = {}",
            be1(PolicyName::Qos),
            be1(PolicyName::CaladanQos),
            ratio_text(be1(PolicyName::Qos) / be1(PolicyName::CaladanQos))
        ),
    });
    for policy in [PolicyName::Qos, PolicyName::CaladanQos] {
        output.comparisons.push(Comparison {
            what: format!("{policy}: LC p99 before the burst, during it, at the end (µs)"),
            thesis: "< 1.5, > 3, < 1.5 (target 1.5; ours 2)".into(),
            ours: format!(
                "{:.2}, {:.2}, {:.2}",
                qos_mean(&rows, policy, 2.0, QOS_BURST_S, |r| r.lc_p99_latency_us),
                qos_mean(&rows, policy, QOS_BURST_S, QOS_BURST_S + 1.0, |r| r
                    .lc_p99_latency_us),
                qos_mean(&rows, policy, tail.0, tail.1, |r| r.lc_p99_latency_us)
            ),
        });
    }
    Ok(output)
}

/// E9, Fig 5.9b: a light get-heavy L beside a B of each mix and thread count.
#[derive(Clone, Debug, Serialize)]
pub struct FairRow {
    pub policy: String,
    pub b_mix: String,
    pub b_threads: u32,
    pub l_slowdown: f64,
    pub b_slowdown: f64,
    pub unfairness: f64,
}

/// B's mixes: get-heavy, 50% mixed, write-heavy (share of gets).
pub const FAIR_MIXES: [(&str, f64); 3] =
    [("get-heavy", 0.95), ("mixed", 0.5), ("write-heavy", 0.05)];
pub const FAIR_THREADS: [u32; 4] = [1, 2, 4, 8];

/// E9's rows, every run of its settings.
pub fn fair_rows(bench: &Bench, options: &Options) -> Vec<FairRow> {
    let light = || TenantLoad::new(1, 0.95, 256);
    let heavy = |mix: f64, threads: u32| TenantLoad::new(threads, mix, 1024);
    let seconds = 6.0;
    // Each tenant alone, for its stand-alone throughput.
    let alone = |load: TenantLoad| {
        let result = bench.run(
            vec![SimTenant::steady("alone", load)],
            PolicyName::None,
            2.0,
        );
        bench.mean(&result, 0, 0.5, 2.0, |i| i.requests_per_second)
    };
    let mut jobs = Vec::new();
    for policy in [PolicyName::None, PolicyName::Fair] {
        for (name, mix) in FAIR_MIXES {
            for threads in FAIR_THREADS {
                jobs.push((policy, name, mix, threads));
            }
        }
    }
    let l_alone = alone(light());
    options.run_all(&jobs, |&(policy, name, mix, threads)| {
        let b_alone = alone(heavy(mix, threads));
        let result = bench.run(
            vec![
                SimTenant::steady("L", light()),
                SimTenant::steady("B", heavy(mix, threads)),
            ],
            policy,
            seconds,
        );
        let l = l_alone
            / bench.mean(&result, 0, seconds - 2.0, seconds, |i| {
                i.requests_per_second
            });
        let b = b_alone
            / bench.mean(&result, 1, seconds - 2.0, seconds, |i| {
                i.requests_per_second
            });
        FairRow {
            policy: policy.name().into(),
            b_mix: name.into(),
            b_threads: threads,
            l_slowdown: l,
            b_slowdown: b,
            unfairness: l.max(b) / l.min(b),
        }
    })
}

/// E9 as `heterarchy experiment nyx-fair` prints it.
pub fn run_fair(options: &Options) -> Result<Output, ExperimentError> {
    let bench = Bench::new(options.scale)?;
    let rows = fair_rows(&bench, options);
    let mut output = Output::new(
        "Fair slowdown: a light cache beside caches of each mix and size (seed 000 Fig 5.9b)",
        &rows,
    );
    let worst = |policy: PolicyName| {
        rows.iter()
            .filter(|r| r.policy == policy.name())
            .map(|r| r.unfairness)
            .fold(1.0, f64::max)
    };
    output.comparisons.push(Comparison {
        what: "worst unfairness of the 12 cases, no regulation / Nyx".into(),
        thesis: "≈ 2.4 / < 1.05".into(),
        ours: format!(
            "{:.2} / {:.2}",
            worst(PolicyName::None),
            worst(PolicyName::Fair)
        ),
    });
    Ok(output)
}

/// E10–E11, Figs 5.10–5.12: proportional shares, and a light donor's idle share.
#[derive(Clone, Debug, Serialize)]
pub struct ProportionalRow {
    pub policy: String,
    pub case: String,
    pub weight_a: f64,
    pub weight_b: f64,
    /// Each tenant's throughput over its stand-alone throughput.
    pub a_of_alone: f64,
    pub b_of_alone: f64,
    /// Their weighted shares of the stand-alone throughput.
    pub a_ideal: f64,
    pub b_ideal: f64,
}

pub const PROPORTIONAL_WEIGHTS: [(f64, f64); 3] = [(1.0, 2.0), (1.0, 1.0), (2.0, 1.0)];

/// E10–E11's rows, every run of its settings.
pub fn proportional_rows(bench: &Bench, options: &Options) -> Vec<ProportionalRow> {
    let seconds = 6.0;
    let get_heavy = || TenantLoad::new(8, 0.95, 1024);
    let write_heavy = || TenantLoad::new(8, 0.05, 1024);
    // A light get-heavy donor using about a quarter of a two-thirds share.
    let light = || TenantLoad {
        think_ns: 1000,
        ..TenantLoad::new(4, 0.95, 1024)
    };
    let alone = |load: TenantLoad| {
        let result = bench.run(
            vec![SimTenant::steady("alone", load)],
            PolicyName::None,
            2.0,
        );
        bench.mean(&result, 0, 0.5, 2.0, |i| i.requests_per_second)
    };
    let mut jobs = Vec::new();
    for policy in [PolicyName::Proportional, PolicyName::BandwidthProportional] {
        for weights in PROPORTIONAL_WEIGHTS {
            jobs.push((
                policy,
                "A get-heavy, B write-heavy",
                weights,
                get_heavy(),
                write_heavy(),
            ));
        }
    }
    for policy in [
        PolicyName::NoRealloc,
        PolicyName::DonateAll,
        PolicyName::Proportional,
    ] {
        jobs.push((
            policy,
            "A light, B write-heavy",
            (2.0, 1.0),
            light(),
            write_heavy(),
        ));
        jobs.push((
            policy,
            "A light, B get-heavy",
            (2.0, 1.0),
            light(),
            get_heavy(),
        ));
    }
    options.run_all(&jobs, |(policy, case, (weight_a, weight_b), a, b)| {
        let weighted = |weight: f64| TenantTerms {
            weight,
            ..TenantTerms::default()
        };
        let result = bench.run(
            vec![
                tenant("A", a.clone(), weighted(*weight_a)),
                tenant("B", b.clone(), weighted(*weight_b)),
            ],
            *policy,
            seconds,
        );
        let share = |tenant: usize| {
            bench.mean(&result, tenant, seconds - 3.0, seconds, |i| {
                i.requests_per_second
            })
        };
        let total = weight_a + weight_b;
        ProportionalRow {
            policy: policy.name().into(),
            case: case.to_string(),
            weight_a: *weight_a,
            weight_b: *weight_b,
            a_of_alone: share(0) / alone(a.clone()),
            b_of_alone: share(1) / alone(b.clone()),
            // Time sharing's bound: a weighted share of running alone.
            a_ideal: weight_a / total,
            b_ideal: weight_b / total,
        }
    })
}

/// E10–E11 as `heterarchy experiment nyx-proportional` prints it.
pub fn run_proportional(options: &Options) -> Result<Output, ExperimentError> {
    let bench = Bench::new(options.scale)?;
    let rows = proportional_rows(&bench, options);
    let mut output = Output::new(
        "Proportional sharing and interference-aware donation (seed 000 Figs 5.10-5.12)",
        &rows,
    );
    let worst_b = |policy: PolicyName| {
        rows.iter()
            .filter(|r| r.policy == policy.name() && r.case.starts_with("A get-heavy"))
            .map(|r| r.b_of_alone / r.b_ideal)
            .fold(0.0, f64::max)
    };
    output.comparisons.push(Comparison {
        what: "write-heavy B's throughput over its share, worst weights: bandwidth / Nyx".into(),
        thesis: "up to 3x / 1x".into(),
        ours: format!(
            "{} / {}",
            ratio_text(worst_b(PolicyName::BandwidthProportional)),
            ratio_text(worst_b(PolicyName::Proportional))
        ),
    });
    for policy in [
        PolicyName::NoRealloc,
        PolicyName::DonateAll,
        PolicyName::Proportional,
    ] {
        if let Some(row) = rows
            .iter()
            .find(|r| r.policy == policy.name() && r.case == "A light, B write-heavy")
        {
            output.comparisons.push(Comparison {
                what: format!("{policy}: light A's share of its stand-alone throughput, B's"),
                thesis: "A ≥ 2/3 (Nyx, no-realloc); donate-all breaks it".into(),
                ours: format!("{:.2}, {:.2}", row.a_of_alone, row.b_of_alone),
            });
        }
    }
    Ok(output)
}

/// E3, Fig 5.5b: what measuring T_alone costs: identical single-thread tenants under `fair`
/// against no policy.
#[derive(Clone, Debug, Serialize)]
pub struct EstimateRow {
    pub tenants: usize,
    pub period_s: f64,
    /// Throughput lost to the pauses, as a share of the unregulated run's.
    pub overhead: f64,
}

pub const ESTIMATE_TENANTS: [usize; 3] = [2, 6, 12];
pub const ESTIMATE_PERIODS_S: [f64; 3] = [0.5, 1.0, 10.0];

/// E3's rows, every run of its settings.
pub fn estimate_rows(bench: &Bench, options: &Options) -> Vec<EstimateRow> {
    let seconds = 10.0;
    let total = |result: &SharedPmResult| -> f64 {
        (0..result.tenants.len())
            .map(|t| bench.mean(result, t, 1.0, seconds, |i| i.requests_per_second))
            .sum()
    };
    let tenants = |count: usize| -> Vec<SimTenant> {
        (0..count)
            .map(|t| SimTenant::steady(&format!("t{t}"), TenantLoad::new(1, 1.0, 256)))
            .collect()
    };
    let mut jobs = Vec::new();
    for count in ESTIMATE_TENANTS {
        jobs.push((count, None));
        for period in ESTIMATE_PERIODS_S {
            jobs.push((count, Some(period)));
        }
    }
    let results = options.run_all(&jobs, |&(count, period)| match period {
        None => total(&bench.run(tenants(count), PolicyName::None, seconds)),
        Some(period) => {
            let params = PolicyParams {
                alone_period_ns: bench.ns(period),
                alone_pause_ns: bench.ns(0.001),
                ..bench.params()
            };
            total(&bench.run_with(tenants(count), PolicyName::Fair, seconds, params))
        }
    });
    let mut rows = Vec::new();
    for (index, &(count, period)) in jobs.iter().enumerate() {
        let Some(period) = period else { continue };
        let base = jobs
            .iter()
            .position(|&(c, p)| c == count && p.is_none())
            .map_or(f64::NAN, |i| results[i]);
        rows.push(EstimateRow {
            tenants: count,
            period_s: period,
            overhead: 1.0 - results[index] / base,
        });
    }
    rows
}

/// E3 as `heterarchy experiment nyx-estimate` prints it.
pub fn run_estimate(options: &Options) -> Result<Output, ExperimentError> {
    let bench = Bench::new(options.scale)?;
    let rows = estimate_rows(&bench, options);
    let mut output = Output::new(
        "What measuring T_alone costs: 1 ms pauses, 2 to 12 tenants (seed 000 Fig 5.5b)",
        &rows,
    );
    if let Some(row) = rows.iter().find(|r| r.tenants == 12 && r.period_s == 0.5) {
        output.comparisons.push(Comparison {
            what: "12 tenants, T_alone every 0.5 s".into(),
            thesis: "< 2.5%".into(),
            ours: format!("{:.2}%", row.overhead * 100.0),
        });
    }
    if let Some(row) = rows.iter().find(|r| r.tenants == 12 && r.period_s == 1.0) {
        output.comparisons.push(Comparison {
            what: "12 tenants, T_alone every 1 s".into(),
            thesis: "within 2%".into(),
            ours: format!("{:.2}%", row.overhead * 100.0),
        });
    }
    output.notes.push(
        "Each tenant waits out (N - 1) pauses of 1 ms per period: 11 ms in 500 ms is 2.2%.".into(),
    );
    Ok(output)
}

/// Table 5.3's traces as loads: (name, gets, mean value bytes).
pub const TWITTER_TRACES: [(&str, f64, u32); 3] =
    [("S1", 0.86, 799), ("C1", 0.93, 2439), ("C2", 0.52, 67485)];

fn trace_load(index: usize, threads: u32, think_ns: u64) -> TenantLoad {
    let (_, gets, bytes) = TWITTER_TRACES[index];
    TenantLoad {
        think_ns,
        ..TenantLoad::new(threads, gets, bytes)
    }
}

/// E13, Fig 5.13: S1 and C1 beside C2, whose writes spike for 1 s every 5 s; C2 limited to
/// 1 M 4 KiB-read equivalents a second, in device cost or as 4 GB/s.
#[derive(Clone, Debug, Serialize)]
pub struct SpikeRow {
    pub policy: String,
    pub time_s: f64,
    pub s1_requests_per_second: f64,
    pub c1_requests_per_second: f64,
    pub c2_gb_s: f64,
}

pub const SPIKE_END_S: f64 = 20.0;

/// Whether timeline second `time_s` is in one of C2's spikes.
pub fn in_spike(time_s: f64) -> bool {
    time_s >= 4.0 && time_s % 5.0 >= 4.0
}

/// E13's rows, every run of its settings.
pub fn spike_rows(bench: &Bench, options: &Options) -> Vec<SpikeRow> {
    let c2_limit_share = 1e6 / bench.profile.max_iops(IoKind::Read, 4096);
    let policies = [PolicyName::Limit, PolicyName::BandwidthLimit];
    let results = options.run_all(&policies, |&policy| {
        let mut c2_phases = Vec::new();
        let mut start = 0.0;
        while start < SPIKE_END_S {
            c2_phases.push((bench.ns(start), trace_load(2, 1, 200_000)));
            c2_phases.push((bench.ns(start + 4.0), {
                // The spike: model parameters rewritten.
                TenantLoad::new(8, 0.0, TWITTER_TRACES[2].2)
            }));
            start += 5.0;
        }
        let limit = match policy {
            PolicyName::Limit => c2_limit_share,
            _ => 4.096e9,
        };
        let tenants = vec![
            SimTenant::steady("S1", trace_load(0, 4, 6000)),
            SimTenant::steady("C1", trace_load(1, 4, 6000)),
            SimTenant {
                name: "C2".into(),
                phases: c2_phases,
                terms: TenantTerms {
                    limit: Some(limit),
                    ..TenantTerms::default()
                },
            },
        ];
        (policy, bench.run(tenants, policy, SPIKE_END_S))
    });
    timeline_rows(bench, results, |policy, time_s, at| SpikeRow {
        policy: policy.name().into(),
        time_s,
        s1_requests_per_second: at[0].requests_per_second,
        c1_requests_per_second: at[1].requests_per_second,
        c2_gb_s: at[2].bytes_per_second / 1e9,
    })
}

/// `tenant`'s mean throughput in C2's spikes over its mean outside them, under `policy`.
pub fn spike_dip(rows: &[SpikeRow], policy: PolicyName, field: fn(&SpikeRow) -> f64) -> f64 {
    let mean = |spiking: bool| {
        mean_of(
            rows.iter()
                .filter(|r| r.policy == policy.name() && r.time_s >= 1.0)
                .filter(|r| in_spike(r.time_s) == spiking)
                .map(field),
        )
    };
    mean(true) / mean(false)
}

/// E13 as `heterarchy experiment nyx-spike` prints it.
pub fn run_spike(options: &Options) -> Result<Output, ExperimentError> {
    let bench = Bench::new(options.scale)?;
    let rows = spike_rows(&bench, options);
    let mut output = Output::new(
        "Write spikes in C2 beside S1 and C1 (seed 000 Fig 5.13)",
        &rows,
    );
    for policy in [PolicyName::Limit, PolicyName::BandwidthLimit] {
        output.comparisons.push(Comparison {
            what: format!("{policy}: S1's and C1's throughput in C2's spikes over outside them"),
            thesis: match policy {
                PolicyName::Limit => "steady",
                _ => "dips",
            }
            .into(),
            ours: format!(
                "{:.2}, {:.2}",
                spike_dip(&rows, policy, |r| r.s1_requests_per_second),
                spike_dip(&rows, policy, |r| r.c1_requests_per_second)
            ),
        });
    }
    Ok(output)
}

/// E14, Fig 5.14: S1, critical with a hard slowdown limit of 1.5, beside C1 and C2 that are
/// light at night and intensive by day.
#[derive(Clone, Debug, Serialize)]
pub struct CriticalRow {
    pub policy: String,
    pub time_s: f64,
    pub s1_slowdown: f64,
    pub c1_requests_per_second: f64,
    pub c2_requests_per_second: f64,
}

pub const CRITICAL_END_S: f64 = 40.0;
/// A compressed day: 10 s of night, 10 s of day whose load ramps up over its first 4 s.
pub const CRITICAL_DAY_S: f64 = 20.0;
pub const CRITICAL_LIMIT: f64 = 1.5;

pub fn is_day(time_s: f64) -> bool {
    time_s % CRITICAL_DAY_S >= CRITICAL_DAY_S / 2.0
}

/// E14's rows, every run of its settings.
pub fn critical_rows(bench: &Bench, options: &Options) -> Vec<CriticalRow> {
    let s1 = || trace_load(0, 2, 0);
    let s1_alone = {
        let result = bench.run(vec![SimTenant::steady("S1", s1())], PolicyName::None, 2.0);
        bench.mean(&result, 0, 0.5, 2.0, |i| i.requests_per_second)
    };
    let diurnal = |index: usize| {
        let mut phases = Vec::new();
        let mut start = 0.0;
        while start < CRITICAL_END_S {
            phases.push((bench.ns(start), trace_load(index, 1, 100_000)));
            // Morning: a thread more every half second, to eight.
            for threads in 1..=8u32 {
                let at = start + CRITICAL_DAY_S / 2.0 + f64::from(threads - 1) * 0.5;
                phases.push((bench.ns(at), trace_load(index, threads, 0)));
            }
            start += CRITICAL_DAY_S;
        }
        phases
    };
    let policies = [PolicyName::None, PolicyName::Fair];
    let results = options.run_all(&policies, |&policy| {
        let tenants = vec![
            SimTenant {
                terms: TenantTerms {
                    slowdown_limit: Some(CRITICAL_LIMIT),
                    ..TenantTerms::default()
                },
                ..SimTenant::steady("S1", s1())
            },
            SimTenant {
                name: "C1".into(),
                phases: diurnal(1),
                terms: TenantTerms::default(),
            },
            SimTenant {
                name: "C2".into(),
                phases: diurnal(2),
                terms: TenantTerms::default(),
            },
        ];
        (policy, bench.run(tenants, policy, CRITICAL_END_S))
    });
    timeline_rows(bench, results, |policy, time_s, at| CriticalRow {
        policy: policy.name().into(),
        time_s,
        s1_slowdown: s1_alone / at[0].requests_per_second.max(1.0),
        c1_requests_per_second: at[1].requests_per_second,
        c2_requests_per_second: at[2].requests_per_second,
    })
}

/// S1's slowdowns by day under `policy`.
pub fn critical_day_slowdowns(rows: &[CriticalRow], policy: PolicyName) -> Vec<f64> {
    rows.iter()
        .filter(|r| r.policy == policy.name() && is_day(r.time_s))
        .map(|r| r.s1_slowdown)
        .collect()
}

/// The share of `values` at most `bound`.
pub fn share_within(values: &[f64], bound: f64) -> f64 {
    values.iter().filter(|v| **v <= bound).count() as f64 / values.len().max(1) as f64
}

/// E14 as `heterarchy experiment nyx-critical` prints it.
pub fn run_critical(options: &Options) -> Result<Output, ExperimentError> {
    let bench = Bench::new(options.scale)?;
    let rows = critical_rows(&bench, options);
    let mut output = Output::new(
        "A critical cache's hard slowdown limit through diurnal co-runners (seed 000 Fig 5.14)",
        &rows,
    );
    let (none, nyx) = (
        critical_day_slowdowns(&rows, PolicyName::None),
        critical_day_slowdowns(&rows, PolicyName::Fair),
    );
    output.comparisons.push(Comparison {
        what: "S1's mean slowdown by day, no control / Nyx (limit 1.5)".into(),
        thesis: "above its target / < 1.5".into(),
        ours: format!(
            "{:.2} / {:.2}",
            mean_of(none.iter().copied()),
            mean_of(nyx.iter().copied())
        ),
    });
    output.comparisons.push(Comparison {
        what: "share of the day's intervals S1 spends within 1.5 (+5%), no control / Nyx".into(),
        thesis: "- / always".into(),
        ours: format!(
            "{:.0}% / {:.0}%",
            share_within(&none, 1.575) * 100.0,
            share_within(&nyx, 1.575) * 100.0
        ),
    });
    Ok(output)
}

/// E6, Fig 5.7: a limited 1 KiB get-only tenant at falling hit ratios (no insert on a miss).
#[derive(Clone, Debug, Serialize)]
pub struct HitRatioRow {
    pub hit_ratio: f64,
    pub hits_per_second: f64,
    pub requests_per_second: f64,
}

pub const HIT_RATIOS: [f64; 5] = [1.0, 0.9, 0.7, 0.5, 0.3];

/// E6's rows, every run of its settings.
pub fn hit_ratio_rows(bench: &Bench, options: &Options) -> Vec<HitRatioRow> {
    // The thesis' limit: 5 GB/s of 4 KiB reads, as a share of the device.
    let share = 5e9 / (bench.profile.max_iops(IoKind::Read, 4096) * 4096.0);
    options.run_all(&HIT_RATIOS, |&hit_ratio| {
        let load = TenantLoad {
            hit_ratio,
            ..TenantLoad::new(16, 1.0, 1024)
        };
        let terms = TenantTerms {
            limit: Some(share),
            ..TenantTerms::default()
        };
        let result = bench.run(vec![tenant("L", load, terms)], PolicyName::Limit, 3.0);
        HitRatioRow {
            hit_ratio,
            hits_per_second: bench.mean(&result, 0, 1.0, 3.0, |i| i.accesses_per_second),
            requests_per_second: bench.mean(&result, 0, 1.0, 3.0, |i| i.requests_per_second),
        }
    })
}

/// E6 as `heterarchy experiment nyx-hit-ratio` prints it.
pub fn run_hit_ratio(options: &Options) -> Result<Output, ExperimentError> {
    let bench = Bench::new(options.scale)?;
    let rows = hit_ratio_rows(&bench, options);
    let mut output = Output::new(
        "A limited 1 KiB get-only cache at falling hit ratios (seed 000 Fig 5.7)",
        &rows,
    );
    if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
        output.comparisons.push(Comparison {
            what: format!(
                "hits a second at {:.0}% hits over at 100%; requests likewise",
                last.hit_ratio * 100.0
            ),
            thesis: "hits capped, requests grow (misses use no PM)".into(),
            ours: format!(
                "{}, {}",
                ratio_text(last.hits_per_second / first.hits_per_second),
                ratio_text(last.requests_per_second / first.requests_per_second)
            ),
        });
    }
    Ok(output)
}

/// E8, Fig 5.15: QoS under ExperimentSteps below and above the default 500 MB/s.
#[derive(Clone, Debug, Serialize)]
pub struct StepRow {
    pub experiment_step_mb_s: f64,
    /// Timeline seconds from the burst until the LC tenant's p99 stays under its target (over
    /// 2 s, on average; the whole rest of the run if never).
    pub seconds_to_target: f64,
    pub be1_final_gb_s: f64,
    pub be2_final_gb_s: f64,
}

pub const EXPERIMENT_STEPS_MB_S: [f64; 4] = [125.0, 250.0, 500.0, 1000.0];

/// E8's rows, every run of its settings.
pub fn experiment_step_rows(bench: &Bench, options: &Options) -> Vec<StepRow> {
    options.run_all(&EXPERIMENT_STEPS_MB_S, |&step| {
        let mut tenants = qos_tenants();
        tenants[2].phases[1].0 = bench.ns(QOS_BURST_S);
        let params = PolicyParams {
            experiment_step_bytes_per_second: step * 1e6,
            ..bench.params()
        };
        let result = bench.run_with(tenants, PolicyName::Qos, QOS_END_S, params);
        let rows = timeline_rows(bench, vec![(PolicyName::Qos, result)], |_, time_s, at| {
            (
                time_s,
                at[0].p99_latency_us,
                at[1].bytes_per_second,
                at[2].bytes_per_second,
            )
        });
        // The first interval after the burst from which the LC tenant's p99, over the next
        // 2 s, stays under its target on average.
        let after: Vec<_> = rows.iter().filter(|r| r.0 >= QOS_BURST_S + 0.5).collect();
        let settled = after
            .windows(20)
            .find(|next| mean_of(next.iter().map(|r| r.1)) <= QOS_TARGET_US)
            .map_or(QOS_END_S, |next| next[0].0);
        let tail: Vec<_> = rows.iter().filter(|r| r.0 >= QOS_END_S - 8.0).collect();
        let mean = |field: fn(&(f64, f64, f64, f64)) -> f64| mean_of(tail.iter().map(|r| field(r)));
        StepRow {
            experiment_step_mb_s: step,
            seconds_to_target: settled - QOS_BURST_S,
            be1_final_gb_s: mean(|r| r.2) / 1e9,
            be2_final_gb_s: mean(|r| r.3) / 1e9,
        }
    })
}

/// E8 as `heterarchy experiment nyx-experiment-step` prints it.
pub fn run_experiment_step(options: &Options) -> Result<Output, ExperimentError> {
    let bench = Bench::new(options.scale)?;
    let rows = experiment_step_rows(&bench, options);
    let mut output = Output::new(
        "QoS's ExperimentStep: convergence and what is left to BE1 (seed 000 Fig 5.15)",
        &rows,
    );
    output.comparisons.push(Comparison {
        what: "BE2's final throughput at every step, GB/s".into(),
        thesis: "near zero in all cases".into(),
        ours: rows
            .iter()
            .map(|r| format!("{:.2}", r.be2_final_gb_s))
            .collect::<Vec<_>>()
            .join(", "),
    });
    output.comparisons.push(Comparison {
        what: "seconds from the burst until the LC p99 holds, by step".into(),
        thesis: "larger steps converge faster".into(),
        ours: rows
            .iter()
            .map(|r| {
                format!(
                    "{:.0} MB/s: {:.1}",
                    r.experiment_step_mb_s, r.seconds_to_target
                )
            })
            .collect::<Vec<_>>()
            .join(", "),
    });
    Ok(output)
}

/// E12, Fig 5.16: the light donor's throughput over time under DonateSteps of 10% to 60%,
/// beside a write-heavy recipient.
#[derive(Clone, Debug, Serialize)]
pub struct DonateStepRow {
    pub donate_step: f64,
    /// The donor's throughput over its stand-alone throughput: mean, and spread (σ) over the
    /// epochs.
    pub a_of_alone_mean: f64,
    pub a_of_alone_deviation: f64,
    /// Share of epochs in which the donor fell below its bound (2/3 of alone).
    pub below_bound: f64,
}

pub const DONATE_STEPS: [f64; 3] = [0.1, 0.3, 0.6];

/// E12's rows, every run of its settings.
pub fn donate_step_rows(bench: &Bench, options: &Options) -> Vec<DonateStepRow> {
    let light = || TenantLoad {
        think_ns: 1000,
        ..TenantLoad::new(4, 0.95, 1024)
    };
    let alone = {
        let result = bench.run(vec![SimTenant::steady("A", light())], PolicyName::None, 2.0);
        bench.mean(&result, 0, 0.5, 2.0, |i| i.requests_per_second)
    };
    let seconds = 20.0;
    options.run_all(&DONATE_STEPS, |&donate_step| {
        let weighted = |weight| TenantTerms {
            weight,
            ..TenantTerms::default()
        };
        let params = PolicyParams {
            donate_step,
            ..bench.params()
        };
        let result = bench.run_with(
            vec![
                tenant("A", light(), weighted(2.0)),
                tenant("B", TenantLoad::new(8, 0.05, 1024), weighted(1.0)),
            ],
            PolicyName::Proportional,
            seconds,
            params,
        );
        // Per epoch (ten intervals): within one, Algorithm 2's stalls swing any tenant.
        let intervals: Vec<f64> = result.tenants[0]
            .intervals
            .iter()
            .filter(|i| bench.seconds(i.start_s) >= 4.0)
            .map(|i| i.requests_per_second / alone)
            .collect();
        let shares: Vec<f64> = intervals
            .chunks(10)
            .map(|epoch| mean_of(epoch.iter().copied()))
            .collect();
        DonateStepRow {
            donate_step,
            a_of_alone_mean: mean_of(shares.iter().copied()),
            a_of_alone_deviation: deviation_of(&shares),
            below_bound: shares.iter().filter(|s| **s < 2.0 / 3.0).count() as f64
                / shares.len().max(1) as f64,
        }
    })
}

/// E12 as `heterarchy experiment nyx-donate-step` prints it.
pub fn run_donate_step(options: &Options) -> Result<Output, ExperimentError> {
    let bench = Bench::new(options.scale)?;
    let rows = donate_step_rows(&bench, options);
    let mut output = Output::new(
        "DonateStep: the donor's throughput under steps of 10% to 60% (seed 000 Fig 5.16)",
        &rows,
    );
    output.comparisons.push(Comparison {
        what: "donor's σ over alone and time below its bound, by step".into(),
        thesis: "60% fluctuates and breaks the bound; 10% steady".into(),
        ours: rows
            .iter()
            .map(|r| {
                format!(
                    "{:.0}%: {:.3}, {:.0}%",
                    r.donate_step * 100.0,
                    r.a_of_alone_deviation,
                    r.below_bound * 100.0
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    });
    Ok(output)
}

/// E15, Fig 5.4: Nyx-Pelikan's two changes to Pelikan on PM, each alone: keys and metadata
/// moved to DRAM (a get reads only its value from the PM) and values stored with
/// non-temporal stores (a set skips the read for ownership and the line-by-line write-backs).
#[derive(Clone, Debug, Serialize)]
pub struct PelikanRow {
    pub value_bytes: u32,
    /// One thread's gets a second, keys on the PM (Pelikan) and in DRAM (Nyx-Pelikan).
    pub pelikan_gets_per_second: f64,
    pub nyx_gets_per_second: f64,
    pub get_gain: f64,
    /// Eight threads' in-place sets a second, cached stores and non-temporal stores.
    pub pelikan_sets_per_second: f64,
    pub nyx_sets_per_second: f64,
    pub set_gain: f64,
}

/// The value sizes of Fig 5.4.
pub const PELIKAN_VALUE_BYTES: [u32; 4] = [64, 256, 1024, 4096];

/// E15's rows: for each value size, the get and set runs of both layouts.
pub fn pelikan_rows(bench: &Bench, options: &Options) -> Vec<PelikanRow> {
    let seconds = 1.0;
    let rate = |load: TenantLoad| {
        let result = bench.run(
            vec![SimTenant::steady("cache", load)],
            PolicyName::None,
            seconds,
        );
        bench.mean(&result, 0, 0.2, seconds, |i| i.requests_per_second)
    };
    options.run_all(&PELIKAN_VALUE_BYTES, |&value_bytes| {
        // Pelikan compares the key of the item its hash points at, on the PM, before reading
        // the value (seed 000 §5.2.5); SegCache's tags make a second candidate rare.
        let pelikan_gets = rate(TenantLoad {
            key_reads: 1,
            ..TenantLoad::new(1, 1.0, value_bytes)
        });
        let nyx_gets = rate(TenantLoad::new(1, 1.0, value_bytes));
        let pelikan_sets = rate(TenantLoad {
            value_store: MemoryOp::Store,
            ..TenantLoad::new(8, 0.0, value_bytes)
        });
        let nyx_sets = rate(TenantLoad::new(8, 0.0, value_bytes));
        PelikanRow {
            value_bytes,
            pelikan_gets_per_second: pelikan_gets,
            nyx_gets_per_second: nyx_gets,
            get_gain: nyx_gets / pelikan_gets,
            pelikan_sets_per_second: pelikan_sets,
            nyx_sets_per_second: nyx_sets,
            set_gain: nyx_sets / pelikan_sets,
        }
    })
}

/// E15 as `heterarchy experiment nyx-pelikan` prints it.
pub fn run_pelikan(options: &Options) -> Result<Output, ExperimentError> {
    let bench = Bench::new(options.scale)?;
    let rows = pelikan_rows(&bench, options);
    let mut output = Output::new(
        "Nyx-Pelikan against Pelikan on PM: keys in DRAM, values by NT stores (seed 000 Fig 5.4)",
        &rows,
    );
    let most = |gain: fn(&PelikanRow) -> f64| rows.iter().map(gain).fold(0.0, f64::max);
    output.comparisons.push(Comparison {
        what: "get throughput, one thread, keys in DRAM over keys on the PM (best size)".into(),
        thesis: "up to 1.55x".into(),
        ours: ratio_text(most(|r| r.get_gain)),
    });
    output.comparisons.push(Comparison {
        what: "set throughput, eight threads, NT stores over cached stores (best size)".into(),
        thesis: "up to 3x".into(),
        ours: ratio_text(most(|r| r.set_gain)),
    });
    output.notes.push(
        "Cached stores read each line for ownership and write it back alone at eviction, a \
         whole 256 B media write per 64 B line (the device model's memory path, calibrated \
         to Table 5.2). Both gains exceed the thesis': the model's DIMMs keep no buffer that \
         would serve a value from the unit its key was just read from, nor merge neighbouring \
         lines' write-backs."
            .into(),
    );
    Ok(output)
}
