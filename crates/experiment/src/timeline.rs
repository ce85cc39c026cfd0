//! Runs followed over time (seed 000 Figures 4.12–4.14 plot throughput, `load_admit` and
//! `data_admit` against time): several controllers on the same workload timeline, one row per
//! controller and time bucket.

use heterarchy_engine::{AdmissionScheme, CacheConfig};
use heterarchy_report::{LineChart, Series};
use heterarchy_sim::timed::TimedResult;
use serde::Serialize;

use crate::kv::Kv;
use crate::{ExperimentError, Options};

/// One controller in one time bucket.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// Start of the bucket, seconds from the start of the run.
    pub time_s: f64,
    pub scheme: String,
    pub kops: f64,
    pub hit_ratio: f64,
    /// Mean `load_admit` of the top pair in the bucket (1 for classic caching).
    pub load_admit: f64,
    /// Fraction of the bucket's tuning intervals with `data_admit` on (the thesis plots "a
    /// fractional windowed sum").
    pub data_admit: f64,
    /// Fraction of the bucket's intervals in NHC's State 1 (1 for classic caching).
    pub state_1: f64,
}

/// A named controller configuration.
pub struct Contender {
    pub name: String,
    pub config: CacheConfig,
}

/// Classic caching and NHC, named by their scheme, in `kv`'s cache mode.
pub fn classic_and_nhc(kv: &Kv) -> Vec<Contender> {
    [AdmissionScheme::Classic, AdmissionScheme::Nhc]
        .into_iter()
        .map(|scheme| Contender {
            name: scheme.name().to_string(),
            config: kv.cache_config(scheme),
        })
        .collect()
}

/// Runs every contender on `kv` and returns the runs.
pub fn run_all(
    options: &Options,
    kv: &Kv,
    contenders: &[Contender],
) -> Result<Vec<TimedResult>, ExperimentError> {
    options
        .run_all(contenders, |contender| kv.run(&contender.config))
        .into_iter()
        .collect()
}

/// One row per contender and series bucket of its run.
pub fn rows(contenders: &[Contender], results: &[TimedResult]) -> Vec<Row> {
    let mut rows = Vec::new();
    for (contender, result) in contenders.iter().zip(results) {
        let series = &result.series;
        for (index, &start_s) in series.time_s.iter().enumerate() {
            let end_s = start_s + series.interval_s;
            let points: Vec<_> = result
                .tuning
                .iter()
                .flat_map(|history| &history.points)
                .filter(|p| p.time_s > start_s && p.time_s <= end_s)
                .collect();
            let share = |pick: &dyn Fn(&heterarchy_engine::TuningPoint) -> f64| {
                if points.is_empty() {
                    1.0
                } else {
                    points.iter().map(|p| pick(p)).sum::<f64>() / points.len() as f64
                }
            };
            rows.push(Row {
                time_s: start_s,
                scheme: contender.name.clone(),
                kops: series.throughput_ops[index] / 1e3,
                hit_ratio: series.hit_ratio[index],
                load_admit: share(&|p| p.load_admit[0]),
                data_admit: share(&|p| f64::from(u8::from(p.data_admit[0]))),
                state_1: share(&|p| f64::from(u8::from(p.state != "state 2"))),
            });
        }
    }
    rows
}

/// Mean of `value` over `scheme`'s rows that `keep` keeps (0 for none).
pub fn mean_of(
    rows: &[Row],
    scheme: &str,
    keep: impl Fn(&Row) -> bool,
    value: impl Fn(&Row) -> f64,
) -> f64 {
    let chosen: Vec<f64> = rows
        .iter()
        .filter(|r| r.scheme == scheme && keep(r))
        .map(value)
        .collect();
    chosen.iter().sum::<f64>() / chosen.len().max(1) as f64
}

/// Mean throughput of `scheme`'s buckets starting in [`from_s`, `to_s`), kops.
pub fn mean_kops(rows: &[Row], scheme: &str, from_s: f64, to_s: f64) -> f64 {
    mean_of(
        rows,
        scheme,
        |r| (from_s..to_s).contains(&r.time_s),
        |r| r.kops,
    )
}

/// Charts of throughput, `load_admit` and `data_admit` over time, one series per scheme of
/// `rows` (settings for all but classic caching, which has none).
pub fn charts(title: &str, rows: &[Row]) -> Vec<LineChart> {
    let mut throughput = LineChart::new(&format!("{title}: throughput"), "time (s)", "kops/s");
    let mut admission = LineChart::new(
        &format!("{title}: load_admit and data_admit"),
        "time (s)",
        "fraction",
    );
    admission.y_range = Some((0.0, 1.05));
    let mut schemes: Vec<&str> = Vec::new();
    for row in rows {
        if !schemes.contains(&row.scheme.as_str()) {
            schemes.push(&row.scheme);
        }
    }
    for scheme in schemes {
        let of = |pick: &dyn Fn(&Row) -> f64| -> Vec<(f64, f64)> {
            rows.iter()
                .filter(|r| r.scheme == scheme)
                .map(|r| (r.time_s, pick(r)))
                .collect()
        };
        throughput.series.push(Series {
            name: scheme.to_string(),
            points: of(&|r| r.kops),
        });
        if scheme != AdmissionScheme::Classic.name() {
            admission.series.push(Series {
                name: format!("{scheme} load_admit"),
                points: of(&|r| r.load_admit),
            });
            admission.series.push(Series {
                name: format!("{scheme} data_admit"),
                points: of(&|r| r.data_admit),
            });
        }
    }
    vec![throughput, admission]
}
