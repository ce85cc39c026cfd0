//! Seed 000 Figure 4.12: Orthus-KV under a ZippyDB-like diurnal load (§4.5.3): 85% gets, 14%
//! puts, 1% scans over hot key ranges (6 ranges), 16 KiB values on average ("from bytes to
//! MBs"), two days of diurnal load compressed 1000 times, the number of threads following the
//! load up to 32. "Orthus-KV outperforms Wiskey during the day by up to 100%, but performs
//! similarly when the load is lower at night."
//!
//! Ours: keys split into 6 ranges, Zipf(0.9) over the ranges and inside each (the thesis gives
//! no skew); log-normal values of median 9.9 KiB and σ 1 (mean 16 KiB, 98% of them between
//! 1 and 100 KiB, the largest about 1 MB); threads 2 + 30 · (1 − cos(2π t / day)) / 2,
//! midnight at 0, noon at half a day, in steps of half a second. The spread of the values
//! matters: with σ 1.5 (median 5.3 KiB, many values of a few hundred bytes, whose reads are
//! bound by flash latency rather than bandwidth) the daytime gain is 1.78x instead of 1.9x.

use heterarchy_trace::generate::WorkloadSpec;
use serde::Serialize;

use crate::kv::Kv;
use crate::timeline;
use crate::{Comparison, ExperimentError, Options, Output};

/// Seconds of one compressed day at scale 1 (86,400 s / 1000).
pub const DAY_S: f64 = 86.4;
const KEYS: u64 = 100_000;
const STEP_S: f64 = 0.5;
const NIGHT_THREADS: f64 = 2.0;
const PEAK_THREADS: f64 = 32.0;

/// Threads at `time_s` of a day of `day_s` seconds.
pub fn threads_at(time_s: f64, day_s: f64) -> u32 {
    let phase = (std::f64::consts::TAU * time_s / day_s).cos();
    (NIGHT_THREADS + (PEAK_THREADS - NIGHT_THREADS) * (1.0 - phase) / 2.0).round() as u32
}

/// The workload spec.
pub fn workload() -> WorkloadSpec {
    WorkloadSpec::parse(&format!(
        "ranges:keys={KEYS},ranges=6,theta=0.9,requests=1099511627776,write=0.14,scan=0.01,\
         scan_len=8,size=lognormal:9900:1,kind=kv,seed=1"
    ))
    .expect("a valid spec")
}

/// Daytime and night-time summary of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// NHC's throughput over classic caching's while 28 threads or more run.
    pub day_gain: f64,
    /// The same while 6 threads or fewer run.
    pub night_gain: f64,
    /// Fraction of daytime tuning intervals with `data_admit` off.
    pub day_data_admit_off: f64,
}

/// The timeline rows and the summary, over two days of `day_s` seconds each.
pub fn rows(
    options: &Options,
    day_s: f64,
) -> Result<(Vec<timeline::Row>, Summary), ExperimentError> {
    let steps: Vec<(f64, u32)> = (0..(2.0 * day_s / STEP_S) as u64)
        .map(|k| {
            let time_s = k as f64 * STEP_S;
            (time_s, threads_at(time_s, day_s))
        })
        .collect();
    let kv = Kv::timeline(workload(), steps[0].1)?
        .with_clients(&steps)
        .until(2.0 * day_s);
    let contenders = timeline::classic_and_nhc(&kv);
    let results = timeline::run_all(options, &kv, &contenders)?;
    let rows = timeline::rows(&contenders, &results);
    let day = |row: &timeline::Row| threads_at(row.time_s, day_s) >= 28;
    let night = |row: &timeline::Row| threads_at(row.time_s, day_s) <= 6;
    let kops = |r: &timeline::Row| r.kops;
    let summary = Summary {
        day_gain: timeline::mean_of(&rows, "nhc", day, kops)
            / timeline::mean_of(&rows, "classic", day, kops),
        night_gain: timeline::mean_of(&rows, "nhc", night, kops)
            / timeline::mean_of(&rows, "classic", night, kops),
        day_data_admit_off: 1.0 - timeline::mean_of(&rows, "nhc", day, |r| r.data_admit),
    };
    Ok((rows, summary))
}

/// The experiment.
pub fn run(options: &Options) -> Result<Output, ExperimentError> {
    let day_s = DAY_S * options.scale;
    let (rows, summary) = rows(options, day_s)?;
    let mut output = Output::new(
        "Figure 4.12: ZippyDB-like diurnal load on Optane SSD + flash, NHC against classic caching",
        &rows,
    );
    output.charts = timeline::charts("ZippyDB, two days", &rows);
    output.comparisons.push(Comparison {
        what: "daytime throughput, NHC over classic".into(),
        thesis: "up to 2x".into(),
        ours: format!("{:.2}x", summary.day_gain),
    });
    output.comparisons.push(Comparison {
        what: "night-time throughput, NHC over classic".into(),
        thesis: "similar".into(),
        ours: format!("{:.2}x", summary.night_gain),
    });
    output.comparisons.push(Comparison {
        what: "daytime data_admit".into(),
        thesis: "kept at 0".into(),
        ours: format!("off {:.0}% of the time", summary.day_data_admit_off * 100.0),
    });
    output.notes.push(format!(
        "One day lasts {day_s:.1} s of virtual time; threads go from 2 at midnight to 32 at \
         noon."
    ));
    Ok(output)
}
