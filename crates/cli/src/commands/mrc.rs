//! `heterarchy mrc`: the LRU miss-ratio curve of a trace at all sizes in one pass, exact or
//! sampled with SHARDS, and its reuse-distance histogram.

use anyhow::Result;
use clap::{Args, ValueEnum};
use heterarchy_sim::cache_sim::TraceSource;
use heterarchy_sim::mrc::{exact_mrc, shards_mrc, Mrc, MrcResult, ReuseHistogram, ShardsConfig};
use serde::Serialize;

use crate::output::{render, Format, Table};
use crate::progress::requests_bar;
use crate::size::{parse_sizes, SizeSpec};
use crate::trace_args::TraceArgs;

/// How the curve is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Every request's stack distance (Mattson's algorithm with a Fenwick tree).
    Exact,
    /// A spatial sample of the keys (SHARDS, Waldspurger et al., FAST'15).
    Shards,
}

/// Arguments of `heterarchy mrc`.
#[derive(Args, Debug)]
pub struct MrcArgs {
    #[command(flatten)]
    pub trace: TraceArgs,
    #[arg(long, value_enum, default_value = "exact")]
    pub method: Method,
    /// SHARDS: fixed sampling rate in (0, 1] (default 0.01 unless --max-keys is given).
    #[arg(long, conflicts_with = "max_keys")]
    pub rate: Option<f64>,
    /// SHARDS: fixed-size sampling that tracks at most this many keys.
    #[arg(long)]
    pub max_keys: Option<usize>,
    /// Count objects, not bytes.
    #[arg(long)]
    pub ignore_obj_size: bool,
    /// Most points on the curve (log-spaced when there are more distinct distances).
    #[arg(long, default_value_t = heterarchy_sim::mrc::DEFAULT_CURVE_POINTS)]
    pub points: usize,
    /// Absolute cache sizes to include on the curve, comma-separated (e.g. 64mb,1gb).
    #[arg(long)]
    pub size: Option<String>,
    /// How to print the results: a table for people, CSV or JSON for programs.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// The `mrc --format json` document.
#[derive(Serialize)]
struct MrcOutput {
    method: Method,
    #[serde(flatten)]
    curve: Mrc,
    requests: u64,
    sampling_rate: f64,
    reuse_histogram: ReuseHistogram,
}

/// Computes the curve and prints it.
pub fn run(args: &MrcArgs) -> Result<()> {
    let source = args.trace.source()?;
    let result = compute(
        &source,
        args.method,
        args.rate,
        args.max_keys,
        args.ignore_obj_size,
    )?;
    let extra_sizes = match &args.size {
        None => Vec::new(),
        Some(list) => parse_sizes(list)
            .map_err(anyhow::Error::msg)?
            .into_iter()
            .map(|size| match size {
                SizeSpec::Absolute(bytes) => Ok(bytes),
                SizeSpec::Fraction(_) => Err(anyhow::anyhow!(
                    "mrc --size takes absolute sizes (the curve covers every fraction)"
                )),
            })
            .collect::<Result<_>>()?,
    };
    let curve = result.curve(args.points.max(2), &extra_sizes);
    let mut table = Table::new(&["cache_size", "miss_ratio", "byte_miss_ratio"]);
    for point in &curve.points {
        table.row(vec![
            point.cache_size.to_string(),
            format!("{:.6}", point.miss_ratio),
            point
                .byte_miss_ratio
                .map_or_else(|| "-".to_string(), |r| format!("{r:.6}")),
        ]);
    }
    let histogram = result.reuse_histogram();
    let mut text = render(
        args.format,
        &table,
        &MrcOutput {
            method: args.method,
            curve,
            requests: result.requests,
            sampling_rate: result.sampling_rate,
            reuse_histogram: histogram.clone(),
        },
    );
    if args.format == Format::Table {
        let mut reuse = Table::new(&["reuse_distance", "requests"]);
        reuse.row(vec!["cold".into(), format!("{:.0}", histogram.cold_misses)]);
        for bucket in &histogram.buckets {
            reuse.row(vec![
                format!("{}..={}", bucket.min_distance, bucket.max_distance),
                format!("{:.0}", bucket.requests),
            ]);
        }
        text.push('\n');
        text.push_str(&reuse.to_text());
    }
    print!("{text}");
    Ok(())
}

/// One pass over `source`, exact or sampled; shows a progress bar on a terminal.
pub fn compute(
    source: &dyn TraceSource,
    method: Method,
    rate: Option<f64>,
    max_keys: Option<usize>,
    ignore_obj_size: bool,
) -> Result<MrcResult> {
    let mut reader = source.open()?;
    let bar = requests_bar(None, "stack distances");
    let progress = |n| bar.inc(n);
    let result = match method {
        Method::Exact => exact_mrc(reader.as_mut(), ignore_obj_size, &progress)?,
        Method::Shards => {
            let config = ShardsConfig {
                rate: if max_keys.is_some() {
                    rate
                } else {
                    rate.or(Some(0.01))
                },
                max_keys,
                ignore_obj_size,
                salt: 0,
            };
            shards_mrc(reader.as_mut(), &config, &progress)?
        }
    };
    bar.finish_and_clear();
    Ok(result)
}
