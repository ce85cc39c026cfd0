//! The best static split (seed 000 §4.2, Figures 4.3–4.5): throughput of the splitting baseline
//! over split rates, searched coarse then fine.

use heterarchy_trace::TraceError;
use serde::Serialize;

use super::config::Hierarchy;
use super::run::{run_timed, TimedResult};
use crate::cache_sim::TraceSource;
use crate::parallel::map_parallel;

/// Spacing of the first pass over [0, 1].
const COARSE_STEP: f64 = 0.1;
/// Spacing of the second pass, within one coarse step of the best rate.
const FINE_STEP: f64 = 0.02;

/// One split rate and what it gave.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SplitPoint {
    /// Fraction of keys served by the top device.
    pub rate: f64,
    pub result: TimedResult,
}

/// Every rate tried, in increasing order, and the best by throughput.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SplitSearch {
    pub points: Vec<SplitPoint>,
    /// Index into `points` of the highest throughput (the lower rate on ties).
    pub best: usize,
}

impl SplitSearch {
    /// The best point.
    pub fn best(&self) -> &SplitPoint {
        &self.points[self.best]
    }
}

/// Runs the splitting baseline of `hierarchy` at the given rates, in parallel on `threads`.
pub fn run_splits(
    hierarchy: &Hierarchy,
    source: &dyn TraceSource,
    rates: &[f64],
    threads: usize,
) -> Result<Vec<SplitPoint>, TraceError> {
    let outcomes = map_parallel(rates, threads, |&rate| {
        let mut reader = source.open()?;
        let mut controller = hierarchy.split_controller(rate);
        run_timed(
            &mut controller,
            &hierarchy.devices,
            &mut *reader,
            &hierarchy.load,
        )
    });
    rates
        .iter()
        .zip(outcomes)
        .map(|(&rate, outcome)| {
            Ok(SplitPoint {
                rate,
                result: outcome?,
            })
        })
        .collect()
}

/// Finds the split rate of highest throughput: every 0.1, then every 0.02 around the best.
pub fn search_split(
    hierarchy: &Hierarchy,
    source: &dyn TraceSource,
    threads: usize,
) -> Result<SplitSearch, TraceError> {
    let coarse: Vec<f64> = (0..=10).map(|i| i as f64 * COARSE_STEP).collect();
    let mut points = run_splits(hierarchy, source, &coarse, threads)?;
    let center = points[best_index(&points)].rate;
    let fine: Vec<f64> = (-4..=4)
        .map(|i| round_rate(center + f64::from(i) * FINE_STEP))
        .filter(|rate| (0.0..=1.0).contains(rate))
        .filter(|rate| !coarse.iter().any(|c| (c - rate).abs() < 1e-9))
        .collect();
    points.extend(run_splits(hierarchy, source, &fine, threads)?);
    points.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    let best = best_index(&points);
    Ok(SplitSearch { points, best })
}

fn best_index(points: &[SplitPoint]) -> usize {
    let mut best = 0;
    for (index, point) in points.iter().enumerate() {
        if point.result.throughput_ops > points[best].result.throughput_ops {
            best = index;
        }
    }
    best
}

/// Rates on the 0.02 grid, without float dust (0.30000000000000004).
fn round_rate(rate: f64) -> f64 {
    (rate * 100.0).round() / 100.0
}
