//! `heterarchy mrc`: the LRU miss-ratio curve of a trace at all sizes in one pass, exact or
//! sampled with SHARDS, and its reuse-distance histogram; or any other policy's curve,
//! simulated at log-spaced sizes over one decode of the trace.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use heterarchy_policy::PolicySpec;
use heterarchy_report::{LineChart, Report, Series};
use heterarchy_sim::cache_sim::{SimSettings, TraceSource};
use heterarchy_sim::mrc::{
    exact_mrc, shards_mrc, simulated_mrc, DistanceUnit, Mrc, MrcResult, ReuseHistogram,
    ShardsConfig, DEFAULT_CURVE_POINTS,
};
use serde::Serialize;

use crate::output::{file_name, table_text, write_report, Format, Sink, Table};
use crate::progress::requests_bar;
use crate::report_charts::{power_of_two_histogram, Unit};
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
    /// A policy other than LRU, with its parameters (`s3fifo:small-size-ratio=0.2`): its curve
    /// is simulated, one simulation per point (`--points`, default 30).
    #[arg(long)]
    pub policy: Option<String>,
    /// An admission filter in front of `--policy` (`bloom`, `size:size=65536`).
    #[arg(long, requires = "policy")]
    pub admission: Option<String>,
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
    /// Most points on the curve (log-spaced when there are more distinct distances; default
    /// 200 for LRU, 30 for a simulated `--policy`).
    #[arg(long)]
    pub points: Option<usize>,
    /// Absolute cache sizes to include on the curve, comma-separated (e.g. 64mb,1gb).
    #[arg(long)]
    pub size: Option<String>,
    /// How to print the results: a table for people, CSV or JSON for programs.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also write an HTML report: the curve (request and byte miss ratio, log scale), LRU's
    /// reuse-distance histogram, and the table of points.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// The `mrc --format json` document.
#[derive(Serialize)]
struct MrcOutput {
    method: Method,
    /// The policy whose curve this is.
    policy: String,
    #[serde(flatten)]
    curve: Mrc,
    requests: u64,
    sampling_rate: f64,
    /// LRU's stack distances; absent from a simulated policy's curve.
    #[serde(skip_serializing_if = "Option::is_none")]
    reuse_histogram: Option<ReuseHistogram>,
}

/// Points of a simulated policy's curve unless `--points` says otherwise: each is a simulation.
const SIMULATED_CURVE_POINTS: usize = 30;

/// Computes the curve and prints it.
pub fn run(args: &MrcArgs, sink: &mut Sink) -> Result<()> {
    let source = sink.watch(args.trace.source()?);
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
    let policy = match &args.policy {
        Some(list) => {
            let mut specs = PolicySpec::parse_list(list, args.admission.as_deref())?;
            if specs.len() != 1 {
                anyhow::bail!("mrc --policy takes one policy, got {}: {list}", specs.len());
            }
            specs.pop()
        }
        None => None,
    };
    let output = match policy.filter(|policy| policy.label() != "lru") {
        Some(policy) => simulated(args, &source, &policy, &extra_sizes)?,
        None => stack(args, &source, &extra_sizes)?,
    };
    let mut table = Table::new(&["cache_size", "miss_ratio", "byte_miss_ratio"]);
    for point in &output.curve.points {
        table.row(vec![
            point.cache_size.to_string(),
            format!("{:.6}", point.miss_ratio),
            point
                .byte_miss_ratio
                .map_or_else(|| "-".to_string(), |r| format!("{r:.6}")),
        ]);
    }
    sink.emit(args.format, &output, || {
        let mut text = table_text(args.format, &table);
        if let (Format::Table, Some(histogram)) = (args.format, &output.reuse_histogram) {
            text.push('\n');
            text.push_str(&reuse_table(histogram).to_text());
        }
        text
    })?;
    write_report(args.report.as_deref(), || report(args, &output, &table))
}

/// The reuse-distance histogram, first accesses ("cold") first.
fn reuse_table(histogram: &ReuseHistogram) -> Table {
    let mut reuse = Table::new(&["reuse_distance", "requests"]);
    reuse.row(vec!["cold".into(), format!("{:.0}", histogram.cold_misses)]);
    for bucket in &histogram.buckets {
        reuse.row(vec![
            format!("{}..={}", bucket.min_distance, bucket.max_distance),
            format!("{:.0}", bucket.requests),
        ]);
    }
    reuse
}

/// The `--report` page: the curve, the reuse histogram when there is one, the points.
fn report(args: &MrcArgs, output: &MrcOutput, table: &Table) -> Report {
    let mut report = Report::new(&format!("heterarchy mrc: {}", file_name(&args.trace.path)));
    let how = match (output.policy.as_str(), output.method) {
        ("lru", Method::Exact) => "LRU, exact stack distances".to_string(),
        ("lru", Method::Shards) => format!("LRU, SHARDS at sampling rate {}", output.sampling_rate),
        (policy, _) => format!("{policy}, simulated at each size"),
    };
    report.paragraph(&format!(
        "{} requests of {}; {how}.",
        output.requests,
        args.trace.path.display()
    ));
    let unit = if args.ignore_obj_size {
        "objects"
    } else {
        "bytes"
    };
    let mut curve = LineChart::new(
        &format!("Miss-ratio curve: {how}"),
        &format!("cache size ({unit}, log scale)"),
        "miss ratio (fraction)",
    );
    curve.x_log = true;
    curve.y_range = Some((0.0, 1.0));
    let points = &output.curve.points;
    curve.series.push(Series::new(
        "request miss ratio",
        points
            .iter()
            .map(|p| (p.cache_size as f64, p.miss_ratio))
            .collect(),
    ));
    let bytes: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| p.byte_miss_ratio.map(|ratio| (p.cache_size as f64, ratio)))
        .collect();
    if !bytes.is_empty() {
        curve.series.push(Series::new("byte miss ratio", bytes));
    }
    report.chart(&curve);
    if let Some(histogram) = &output.reuse_histogram {
        let (unit, unit_name) = match histogram.unit {
            DistanceUnit::Bytes => (Unit::Bytes, "bytes"),
            DistanceUnit::Objects => (Unit::Count, "objects"),
        };
        let mut chart = power_of_two_histogram(
            "Reuse (stack) distances",
            &format!(
                "stack distance ({unit_name}; each bar from its label to just under twice it; \
                 cold: first accesses)"
            ),
            "requests",
            unit,
            &[(
                "requests",
                histogram
                    .buckets
                    .iter()
                    .map(|b| (b.min_distance, b.requests))
                    .collect(),
            )],
        );
        // First accesses have no distance: a bar of their own, left of the rest.
        chart.categories.insert(0, "cold".to_string());
        chart.series[0].values.insert(0, histogram.cold_misses);
        report.heading("Reuse distances").chart(&chart);
        let reuse = reuse_table(histogram);
        report.table(&reuse.headers(), reuse.rows());
    }
    report
        .heading("Points")
        .table(&table.headers(), table.rows());
    report
}

/// LRU's curve from stack distances, exact or sampled.
fn stack(args: &MrcArgs, source: &dyn TraceSource, extra_sizes: &[u64]) -> Result<MrcOutput> {
    let result = compute(
        source,
        args.method,
        args.rate,
        args.max_keys,
        args.ignore_obj_size,
    )?;
    let points = args.points.unwrap_or(DEFAULT_CURVE_POINTS).max(2);
    Ok(MrcOutput {
        method: args.method,
        policy: "lru".to_string(),
        curve: result.curve(points, extra_sizes),
        requests: result.requests,
        sampling_rate: result.sampling_rate,
        reuse_histogram: Some(result.reuse_histogram()),
    })
}

/// Any other policy's curve, one simulation per point over one decode of the trace.
fn simulated(
    args: &MrcArgs,
    source: &dyn TraceSource,
    policy: &PolicySpec,
    extra_sizes: &[u64],
) -> Result<MrcOutput> {
    if args.method != Method::Exact || args.rate.is_some() || args.max_keys.is_some() {
        anyhow::bail!(
            "mrc --method shards samples LRU's stack distances; --policy {} is simulated at each \
             size instead",
            policy.label()
        );
    }
    let settings = SimSettings {
        ignore_obj_size: args.ignore_obj_size,
        ..SimSettings::default()
    };
    let points = args.points.unwrap_or(SIMULATED_CURVE_POINTS).max(2);
    let threads = super::threads_or_cores(None);
    let bar = requests_bar(None, "simulating");
    let (curve, whole) = simulated_mrc(
        source,
        &settings,
        policy,
        points,
        extra_sizes,
        threads,
        &|n| bar.inc(n),
    )?;
    bar.finish_and_clear();
    Ok(MrcOutput {
        method: args.method,
        policy: policy.label().to_string(),
        curve,
        requests: whole.requests,
        sampling_rate: 1.0,
        reuse_histogram: None,
    })
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
