//! Seed 000 Figures 4.9–4.11: Orthus-KV (NHC) against WiscKey's classic block cache on YCSB,
//! Optane SSD over flash (§4.5.2). Figure 4.9 sweeps threads on three YCSB-C workloads (16 B
//! keys; 1 KiB or 16 KiB values; Zipf θ), Figure 4.10 breaks their read bandwidth down by
//! device, Figure 4.11 runs YCSB A, B, E and F (1 KiB values, 32 threads, θ = 0.6).
//!
//! The thesis names θ = 0.8 with 1 KiB and 16 KiB values for YCSB-C; the third workload is
//! not stated — ours is 1 KiB values at θ = 0.6, the θ of Figure 4.11.

use heterarchy_report::{LineChart, Series};
use heterarchy_sim::timed::TimedResult;
use serde::Serialize;

use crate::kv::{ycsb, Kv};
use crate::{Comparison, ExperimentError, Options, Output};

/// The three YCSB-C workloads: value bytes and θ.
pub const YCSB_C: [(u32, f64); 3] = [(1024, 0.8), (16 * 1024, 0.8), (1024, 0.6)];
pub const THREADS: [u32; 6] = [1, 2, 4, 8, 16, 32];
/// Keys per value size: the dataset stays between 200 MB and 1.6 GB.
fn keys_for(value_bytes: u32) -> u64 {
    if value_bytes > 4096 {
        100_000
    } else {
        200_000
    }
}

/// One point of Figure 4.9 (and its bars in Figure 4.10).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// `ycsb-c`, or `ycsb-a` ... for Figure 4.11.
    pub workload: String,
    pub value_bytes: u32,
    pub theta: f64,
    pub threads: u32,
    pub classic_kops: f64,
    pub nhc_kops: f64,
    pub gain: f64,
    pub classic_mean_latency_us: f64,
    pub nhc_mean_latency_us: f64,
    pub hit_ratio: f64,
    /// Figure 4.10: read bandwidth of each device, GB/s.
    pub classic_optane_read_gb_s: f64,
    pub classic_flash_read_gb_s: f64,
    pub nhc_optane_read_gb_s: f64,
    pub nhc_flash_read_gb_s: f64,
}

struct Setting {
    workload: char,
    value_bytes: u32,
    theta: f64,
    threads: u32,
}

fn row(setting: &Setting, classic: &TimedResult, nhc: &TimedResult) -> Row {
    let read = |result: &TimedResult, device: usize| result.devices[device].read_bytes_per_s / 1e9;
    Row {
        workload: format!("ycsb-{}", setting.workload),
        value_bytes: setting.value_bytes,
        theta: setting.theta,
        threads: setting.threads,
        classic_kops: classic.throughput_ops / 1e3,
        nhc_kops: nhc.throughput_ops / 1e3,
        gain: nhc.throughput_ops / classic.throughput_ops - 1.0,
        classic_mean_latency_us: classic.mean_latency_us,
        nhc_mean_latency_us: nhc.mean_latency_us,
        hit_ratio: classic.hit_ratio,
        classic_optane_read_gb_s: read(classic, 0),
        classic_flash_read_gb_s: read(classic, 1),
        nhc_optane_read_gb_s: read(nhc, 0),
        nhc_flash_read_gb_s: read(nhc, 1),
    }
}

fn run_settings(options: &Options, settings: &[Setting]) -> Result<Vec<Row>, ExperimentError> {
    let results = options.run_classic_and_nhc(settings, |s, scheme| {
        let spec = ycsb(
            s.workload,
            keys_for(s.value_bytes),
            s.value_bytes,
            s.theta,
            1,
        );
        Kv::orthus_kv(spec, s.threads, options.scale)?.run_scheme(scheme)
    })?;
    Ok(settings
        .iter()
        .zip(results)
        .map(|(setting, (classic, nhc))| row(setting, &classic, &nhc))
        .collect())
}

/// Figure 4.9's rows: every YCSB-C workload at every thread count in `threads`.
pub fn ycsb_c_rows(options: &Options, threads: &[u32]) -> Result<Vec<Row>, ExperimentError> {
    let settings: Vec<Setting> = YCSB_C
        .iter()
        .flat_map(|&(value_bytes, theta)| {
            threads.iter().map(move |&threads| Setting {
                workload: 'c',
                value_bytes,
                theta,
                threads,
            })
        })
        .collect();
    run_settings(options, &settings)
}

/// Figure 4.11's rows: YCSB A, B, E and F with 1 KiB values, 32 threads, θ = 0.6.
pub fn ycsb_rows(options: &Options) -> Result<Vec<Row>, ExperimentError> {
    let settings: Vec<Setting> = ['a', 'b', 'e', 'f']
        .into_iter()
        .map(|workload| Setting {
            workload,
            value_bytes: 1024,
            theta: 0.6,
            threads: 32,
        })
        .collect();
    run_settings(options, &settings)
}

fn label(row: &Row) -> String {
    format!("{} KiB, θ {}", row.value_bytes / 1024, row.theta)
}

/// Figures 4.9 and 4.10.
pub fn run_ycsb_c(options: &Options) -> Result<Output, ExperimentError> {
    let rows = ycsb_c_rows(options, &THREADS)?;
    let mut output = Output::new(
        "Figures 4.9 and 4.10: YCSB-C on Optane SSD + flash, NHC against classic caching",
        &rows,
    );
    let mut throughput = LineChart::new("YCSB-C throughput over threads", "threads", "kops/s");
    throughput.x_log = true;
    let mut bandwidth = LineChart::new("Read bandwidth by device (Figure 4.10)", "threads", "GB/s");
    bandwidth.x_log = true;
    for &(value_bytes, theta) in &YCSB_C {
        let of = |pick: &dyn Fn(&Row) -> f64| -> Vec<(f64, f64)> {
            rows.iter()
                .filter(|r| r.value_bytes == value_bytes && r.theta == theta)
                .map(|r| (f64::from(r.threads), pick(r)))
                .collect()
        };
        let name = format!("{} KiB, θ {theta}", value_bytes / 1024);
        throughput.series.push(Series {
            name: format!("{name} classic"),
            points: of(&|r| r.classic_kops),
        });
        throughput.series.push(Series {
            name: format!("{name} NHC"),
            points: of(&|r| r.nhc_kops),
        });
        if value_bytes == 1024 && theta == 0.8 {
            for (series, pick) in [
                (
                    "classic Optane",
                    &(|r: &Row| r.classic_optane_read_gb_s) as &dyn Fn(&Row) -> f64,
                ),
                ("classic flash", &|r: &Row| r.classic_flash_read_gb_s),
                ("NHC Optane", &|r: &Row| r.nhc_optane_read_gb_s),
                ("NHC flash", &|r: &Row| r.nhc_flash_read_gb_s),
            ] {
                bandwidth.series.push(Series {
                    name: format!("{name} {series}"),
                    points: of(pick),
                });
            }
        }
    }
    output.charts.push(throughput);
    output.charts.push(bandwidth);
    let at_32: Vec<&Row> = rows.iter().filter(|r| r.threads == 32).collect();
    output.comparisons.push(Comparison {
        what: "32 threads: throughput gain of the three YCSB-C workloads".into(),
        thesis: "+46%, +30%, +71% (workloads not named)".into(),
        ours: at_32
            .iter()
            .map(|r| format!("{} {:+.0}%", label(r), r.gain * 100.0))
            .collect::<Vec<_>>()
            .join(", "),
    });
    for (value_bytes, thesis) in [(1024, 30.0), (16 * 1024, 38.0)] {
        if let Some(r) = at_32
            .iter()
            .find(|r| r.value_bytes == value_bytes && r.theta == 0.8)
        {
            output.comparisons.push(Comparison {
                what: format!(
                    "32 threads, θ 0.8, {} KiB: mean latency",
                    value_bytes / 1024
                ),
                thesis: format!("-{thesis:.0}%"),
                ours: format!(
                    "{:+.0}%",
                    (r.nhc_mean_latency_us / r.classic_mean_latency_us - 1.0) * 100.0
                ),
            });
        }
    }
    if let Some(r) = at_32.first() {
        output.comparisons.push(Comparison {
            what: format!(
                "Figure 4.10, {}: Optane read GB/s, classic against NHC",
                label(r)
            ),
            thesis: "classic below the 2.3 GB/s peak; NHC at it, plus flash".into(),
            ours: format!(
                "{:.2} (+{:.2} flash) against {:.2} (+{:.2} flash)",
                r.classic_optane_read_gb_s,
                r.classic_flash_read_gb_s,
                r.nhc_optane_read_gb_s,
                r.nhc_flash_read_gb_s
            ),
        });
    }
    output.notes.push(
        "Datasets are scaled down (200,000 keys of 1 KiB, 100,000 of 16 KiB), the cache a third \
         of each, as in the thesis (33 of 100 GB)."
            .into(),
    );
    Ok(output)
}

/// Figure 4.11.
pub fn run_ycsb(options: &Options) -> Result<Output, ExperimentError> {
    let rows = ycsb_rows(options)?;
    let mut output = Output::new(
        "Figure 4.11: YCSB A, B, E, F (1 KiB values, 32 threads, θ 0.6) on Optane SSD + flash",
        &rows,
    );
    output.comparisons.push(Comparison {
        what: "throughput gain of A, B, E, F".into(),
        thesis: "never below classic; more gets, more gain".into(),
        ours: rows
            .iter()
            .map(|r| format!("{} {:+.0}%", r.workload, r.gain * 100.0))
            .collect::<Vec<_>>()
            .join(", "),
    });
    let best = rows
        .iter()
        .map(|r| 1.0 - r.nhc_mean_latency_us / r.classic_mean_latency_us)
        .fold(f64::NEG_INFINITY, f64::max);
    output.comparisons.push(Comparison {
        what: "largest mean-latency reduction".into(),
        thesis: "up to 42%".into(),
        ours: format!("{:.0}%", best * 100.0),
    });
    Ok(output)
}
