//! How well a block-trace sample represents its trace (seed 002 §5.3; docs/simulation.md,
//! "Sampling block traces"): each mean feature's error and the LRU hit-rate error at cache
//! sizes scaled by the sampling rate, what `heterarchy trace compare` prints.
//!
//! The sample's inter-arrival times are its own gaps multiplied by the rate (a sample at rate r
//! is r times as sparse), its cache sizes the full trace's times the rate (§5.2.4: "the cache
//! sizes are scaled by the sampling rate").

use std::path::Path;

use serde::Serialize;

use heterarchy_trace::read::{open_block_records, ReaderOptions};
use heterarchy_trace::sample::{feature_errors, mean_error, FeatureError, WorkloadCounters};

use crate::mrc::MrcError;
use crate::sizing::{PageOp, ReuseByOp};

/// Cache sizes of the comparison, as shares of the full trace's working set (the tier sizes
/// of the thesis' sample replays, §5.3.4).
pub const WSS_FRACTIONS: [f64; 4] = [0.25, 0.5, 0.75, 1.0];

/// Hit rates of one LRU cache, by op.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct HitRates {
    pub read: f64,
    pub write: f64,
    pub overall: f64,
}

/// The full trace and the sample at one cache size.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HitRatePoint {
    pub wss_fraction: f64,
    /// 4 KiB pages of the full trace's cache and of the sample's.
    pub full_pages: u64,
    pub sample_pages: u64,
    pub full: HitRates,
    pub sample: HitRates,
    /// `|sample − full|` of the overall hit rate, percentage points.
    pub error: f64,
}

/// Everything `trace compare` reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SampleComparison {
    pub rate: f64,
    pub features: Vec<FeatureError>,
    /// Percent.
    pub mean_feature_error: f64,
    pub hit_rates: Vec<HitRatePoint>,
    /// Mean over the sizes of the overall hit rates' difference, percentage points.
    pub hit_rate_error: f64,
}

/// Compares the sample at `sample` (taken at `rate`) with the full trace at `full`; both are
/// block traces, read with `options` (the format is detected for each unless forced).
pub fn compare_sample(
    full: &Path,
    sample: &Path,
    rate: f64,
    options: &ReaderOptions,
) -> Result<SampleComparison, MrcError> {
    if !(rate > 0.0 && rate <= 1.0) {
        return Err(MrcError::Config(format!(
            "--rate {rate}: expected a sampling rate in (0, 1]"
        )));
    }
    let full_counters =
        WorkloadCounters::of_source(open_block_records(full, options)?.as_mut(), 1.0)?;
    let sample_counters =
        WorkloadCounters::of_source(open_block_records(sample, options)?.as_mut(), rate)?;
    if full_counters.total_requests() == 0 {
        return Err(MrcError::Config(format!(
            "{}: no reads or writes: expected a block trace with data",
            full.display()
        )));
    }
    let features = feature_errors(&full_counters, &sample_counters, rate);
    let full_reuse = page_reuse(full, options)?;
    let sample_reuse = page_reuse(sample, options)?;
    let wss_pages = full_reuse.cold_misses(PageOp::Read) + full_reuse.cold_misses(PageOp::Write);
    let hit_rates: Vec<HitRatePoint> = WSS_FRACTIONS
        .iter()
        .map(|&fraction| {
            let full_pages = (wss_pages as f64 * fraction).ceil() as u64;
            let sample_pages = (full_pages as f64 * rate).ceil() as u64;
            let full = hit_rates(&full_reuse, full_pages);
            let sample = hit_rates(&sample_reuse, sample_pages);
            HitRatePoint {
                wss_fraction: fraction,
                full_pages,
                sample_pages,
                full,
                sample,
                error: 100.0 * (sample.overall - full.overall).abs(),
            }
        })
        .collect();
    let hit_rate_error =
        hit_rates.iter().map(|point| point.error).sum::<f64>() / hit_rates.len() as f64;
    Ok(SampleComparison {
        rate,
        mean_feature_error: mean_error(&features),
        features,
        hit_rates,
        hit_rate_error,
    })
}

/// The stack distances of a block trace split into pages, in pages.
fn page_reuse(path: &Path, options: &ReaderOptions) -> Result<ReuseByOp, MrcError> {
    let options = ReaderOptions {
        split_blocks: true,
        ..options.clone()
    };
    let mut reader = heterarchy_trace::open(path, &options)?;
    ReuseByOp::measure_in_units(reader.as_mut(), 1)
}

/// The hit rates of an LRU cache of `pages`.
fn hit_rates(reuse: &ReuseByOp, pages: u64) -> HitRates {
    let hits = reuse.hits(pages, 0);
    let rate = |hit: u64, requests: u64| {
        if requests == 0 {
            0.0
        } else {
            hit as f64 / requests as f64
        }
    };
    let requests = [PageOp::Read, PageOp::Write].map(|op| reuse.requests(op));
    HitRates {
        read: rate(hits.t1[0], requests[0]),
        write: rate(hits.t1[1], requests[1]),
        overall: rate(hits.t1[0] + hits.t1[1], requests[0] + requests[1]),
    }
}
