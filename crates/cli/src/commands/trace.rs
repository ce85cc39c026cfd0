//! `heterarchy trace stats|convert|generate|sample|compare`: what a trace holds, turning one
//! format into another, writing a synthetic workload to a file, and sampling a block trace
//! (seed 002 ch. 5) and judging the sample.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use heterarchy_report::{BarChart, Bars, LineChart, Report, Series};
use heterarchy_sim::cache_sim::{GeneratedTrace, TraceSource};
use heterarchy_sim::sampling::{compare_sample, HitRatePoint, SampleComparison};
use heterarchy_trace::block_stats::{block_stats, BlockStats};
use heterarchy_trace::generate::{BlockGenerator, BlockWorkloadSpec, WorkloadSpec};
use heterarchy_trace::read::{
    detect_format, for_each_batch, format_from_name, open_block_records, BlockRecordSource,
};
use heterarchy_trace::sample::{
    feature_errors, mean_error, sample_block_trace, FeatureError, SampleMethod, SampleOptions,
    SampleReport,
};
use heterarchy_trace::stats::{trace_stats_with_progress, Log2Histogram, TraceStats};
use heterarchy_trace::write::{
    create_block_writer, create_writer, BLOCK_WRITABLE_FORMATS, WRITABLE_FORMATS,
};
use heterarchy_trace::{ReaderOptions, TraceFormat};

use crate::output::{file_name, write_report, Format, Sink, Table};
use crate::progress::requests_bar;
use crate::report_charts::{power_of_two_histogram, Unit};
use crate::trace_args::TraceArgs;

/// The `trace` subcommands.
#[derive(Subcommand, Debug)]
pub enum TraceCommand {
    /// Requests, unique keys, working set, op mix, size and reuse distributions.
    Stats(StatsArgs),
    /// Rewrite a trace in another format (native, the fast path, or oracleGeneral).
    Convert(ConvertArgs),
    /// Write a seeded synthetic workload, e.g. `zipf:theta=0.9,keys=1000000,requests=10000000`,
    /// or block I/Os with offsets, `block-io:requests=1000000,write=0.3`.
    Generate(GenerateArgs),
    /// Sample a block trace into a smaller block trace: random spatial sampling or BlkSample.
    Sample(SampleArgs),
    /// How well a sample represents its full trace: feature and hit-rate errors.
    Compare(CompareArgs),
}

/// Arguments of `trace stats`.
#[derive(Args, Debug)]
pub struct StatsArgs {
    #[command(flatten)]
    pub trace: TraceArgs,
    /// `table` or `json` (CSV has no shape for nested distributions; it prints JSON).
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also write an HTML report: the measures, the op mix, the object-size and reuse-time
    /// distributions, and for a block trace its I/Os' sizes and inter-arrival times by op.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// Arguments of `trace convert`.
#[derive(Args, Debug)]
pub struct ConvertArgs {
    #[command(flatten)]
    pub trace: TraceArgs,
    /// Output file (compressed when it ends in .gz, .bz2, .xz or .zst).
    #[arg(short, long)]
    pub output: PathBuf,
    /// native, oracleGeneral, or csv: the (split) cache trace as `time,page,op` lines, time in
    /// µs and op `r` or `w` (seed 002's cache trace).
    #[arg(long, default_value = "native")]
    pub output_format: String,
}

/// Arguments of `trace generate`.
#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// `PATTERN[:FIELD=VALUE,...]`: uniform, zipf, hotspot or ycsb-a … ycsb-f, with fields keys,
    /// requests, theta, hot_data, hot_ops, write, scan, scan_len, size, kind, rate, seed; or
    /// block-io, with fields requests, pages, theta, write, misaligned, rate, seed.
    pub spec: String,
    /// Output file (compressed when it ends in .gz, .bz2, .xz or .zst).
    #[arg(short, long)]
    pub output: PathBuf,
    /// native, oracleGeneral or csv (`time,page,op`); for block-io, msr or native. Default:
    /// oracleGeneral; for block-io, msr when the name ends in .csv, else native.
    #[arg(long)]
    pub output_format: Option<String>,
}

/// Arguments of `trace sample`.
#[derive(Args, Debug)]
pub struct SampleArgs {
    #[command(flatten)]
    pub trace: TraceArgs,
    /// `spatial` (random spatial sampling) or `blksample` (spatial sampling of larger regions,
    /// then post-processing against the full trace's features).
    #[arg(long, default_value = "blksample")]
    pub method: String,
    /// Share of regions kept, in (0, 1].
    #[arg(long)]
    pub rate: f64,
    /// Low-order 4 KiB block address bits ignored (regions of 4 KiB << bits); default 0 for
    /// spatial, 4 for blksample.
    #[arg(long)]
    pub bits: Option<u32>,
    /// Seeds the region hash.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Post-processing iterations at most (blksample).
    #[arg(long, default_value_t = heterarchy_trace::sample::DEFAULT_ITERATIONS)]
    pub iterations: u32,
    /// The sample's file (compressed when it ends in .gz, .bz2, .xz or .zst).
    #[arg(short, long)]
    pub output: PathBuf,
    /// msr or native; default msr when the name ends in .csv, else native.
    #[arg(long)]
    pub output_format: Option<String>,
    /// `table` or `json`.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// Arguments of `trace compare`.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The full block trace.
    pub full: PathBuf,
    /// A sample of it.
    pub sample: PathBuf,
    /// The rate the sample was taken at, in (0, 1].
    #[arg(long)]
    pub rate: f64,
    /// `table` or `json`.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also write an HTML report: each feature's error, and LRU's hit rate on the full trace
    /// and on the sample at each share of the working set.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// Runs a `trace` subcommand.
pub fn run(command: &TraceCommand, sink: &mut Sink) -> Result<()> {
    match command {
        TraceCommand::Stats(args) => stats(args, sink),
        TraceCommand::Convert(args) => {
            copy(&args.trace.source()?, &args.output, &args.output_format)
        }
        TraceCommand::Generate(args) if BlockWorkloadSpec::is_block_io(&args.spec) => {
            let spec = BlockWorkloadSpec::parse(&args.spec)?;
            let format = block_output_format(&args.output, args.output_format.as_deref())?;
            let mut generator = BlockGenerator::new(&spec);
            let mut writer = create_block_writer(&args.output, format)?;
            while let Some(record) = generator.next_record()? {
                writer.write(&record)?;
            }
            writer.finish()?;
            Ok(())
        }
        TraceCommand::Generate(args) => {
            let spec = WorkloadSpec::parse(&args.spec)?;
            let format = args.output_format.as_deref().unwrap_or("oracleGeneral");
            copy(&GeneratedTrace(spec), &args.output, format)
        }
        TraceCommand::Sample(args) => sample(args, sink),
        TraceCommand::Compare(args) => compare(args, sink),
    }
}

/// The block format to write `output` in: the one named, else msr for `.csv` names and
/// native for the rest.
fn block_output_format(output: &Path, name: Option<&str>) -> Result<TraceFormat> {
    let Some(name) = name else {
        return Ok(match format_from_name(output) {
            Some(TraceFormat::Csv) => TraceFormat::Msr,
            _ => TraceFormat::Native,
        });
    };
    TraceFormat::from_name(name)
        .filter(|format| BLOCK_WRITABLE_FORMATS.contains(format))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "cannot write block records as --output-format \"{name}\"; expected one of {}",
                BLOCK_WRITABLE_FORMATS.map(TraceFormat::name).join(", ")
            )
        })
}

/// `trace sample --format json`.
#[derive(serde::Serialize)]
struct SampleOutput<'a> {
    report: &'a SampleReport,
    /// The written sample against the full trace, each sample I/O with its source's IAT.
    features: Vec<FeatureError>,
    mean_feature_error: f64,
}

fn sample(args: &SampleArgs, sink: &mut Sink) -> Result<()> {
    let method = match args.method.to_ascii_lowercase().as_str() {
        "spatial" => SampleMethod::Spatial,
        "blksample" => SampleMethod::BlkSample,
        other => anyhow::bail!("--method \"{other}\": expected spatial or blksample"),
    };
    let options = SampleOptions {
        bits: args.bits.unwrap_or(method.default_bits()),
        seed: args.seed,
        iterations: args.iterations,
        ..SampleOptions::new(method, args.rate)
    };
    options.validate()?;
    let format = block_output_format(&args.output, args.output_format.as_deref())?;
    let source = args.trace.source()?;
    let mut records = open_block_records(&source.input, &source.options)?;
    let sample = sample_block_trace(records.as_mut(), &options)?;
    if sample.report.full_requests == 0 {
        anyhow::bail!(
            "{}: no reads or writes: expected a block trace with data",
            source.input.name().display()
        );
    }
    let mut writer = create_block_writer(&args.output, format)?;
    for record in &sample.records {
        writer.write(record)?;
    }
    writer.finish()?;
    let report = &sample.report;
    let features = feature_errors(&report.full, &report.sample, options.rate);
    let output = SampleOutput {
        report,
        mean_feature_error: mean_error(&features),
        features,
    };
    match args.format {
        Format::Table => {
            sink.text(&feature_table(&output.features).to_text());
            let errors = &report.iteration_errors;
            sink.line(&format!(
                "{} sample of {} at rate {} (regions of {} KiB): {} I/Os of {} (ratio {:.4}), {} \
                 before post-processing, {} regions removed; mean feature error {:.2}% ({:.2}% \
                 before post-processing)",
                method.name(),
                source.input.name().display(),
                options.rate,
                report.region_bytes / 1024,
                report.sample_requests,
                report.full_requests,
                report.sample_requests as f64 / report.full_requests as f64,
                report.sampled_requests,
                report.regions_removed,
                output.mean_feature_error,
                errors[0]
            ));
            if errors.len() > 1 {
                let shown: Vec<String> = errors.iter().map(|e| format!("{e:.2}")).collect();
                sink.line(&format!(
                    "mean feature error per iteration (%): {}",
                    shown.join(" ")
                ));
            }
        }
        Format::Csv | Format::Json => sink.json(&output)?,
    }
    Ok(())
}

/// One row per feature: full, sample, error.
fn feature_table(features: &[FeatureError]) -> Table {
    let mut table = Table::new(&["feature", "full", "sample", "error_percent"]);
    for feature in features {
        table.row(vec![
            feature.name.to_string(),
            format!("{:.4}", feature.full),
            format!("{:.4}", feature.sample),
            format!("{:.2}", feature.error),
        ]);
    }
    table
}

fn compare(args: &CompareArgs, sink: &mut Sink) -> Result<()> {
    let comparison = compare_sample(
        &args.full,
        &args.sample,
        args.rate,
        &ReaderOptions::default(),
    )?;
    match args.format {
        Format::Table => {
            sink.text(&feature_table(&comparison.features).to_text());
            sink.text(&hit_rate_table(&comparison).to_text());
            sink.line(&compare_summary(&comparison));
        }
        Format::Csv | Format::Json => sink.json(&comparison)?,
    }
    write_report(args.report.as_deref(), || compare_report(args, &comparison))
}

/// One line on how close the sample is.
fn compare_summary(comparison: &SampleComparison) -> String {
    format!(
        "mean feature error {:.2}%, hit-rate error {:.2} points (rate {})",
        comparison.mean_feature_error, comparison.hit_rate_error, comparison.rate
    )
}

/// LRU's hit rate on the full trace and on the sample at each share of the working set.
fn hit_rate_table(comparison: &SampleComparison) -> Table {
    let mut hits = Table::new(&[
        "wss_fraction",
        "full_pages",
        "sample_pages",
        "full_hit_rate",
        "sample_hit_rate",
        "error_points",
    ]);
    for point in &comparison.hit_rates {
        hits.row(vec![
            format!("{}", point.wss_fraction),
            point.full_pages.to_string(),
            point.sample_pages.to_string(),
            format!("{:.4}", point.full.overall),
            format!("{:.4}", point.sample.overall),
            format!("{:.2}", point.error),
        ]);
    }
    hits
}

/// The `trace compare --report` page.
fn compare_report(args: &CompareArgs, comparison: &SampleComparison) -> Report {
    let mut report = Report::new(&format!(
        "heterarchy trace compare: {} and its sample {}",
        file_name(&args.full),
        file_name(&args.sample)
    ));
    report.paragraph(&format!(
        "{} against {}: {}.",
        args.sample.display(),
        args.full.display(),
        compare_summary(comparison)
    ));
    let features = feature_table(&comparison.features);
    report
        .heading("Features")
        .table(&features.headers(), features.rows());
    let mut chart = LineChart::new(
        "LRU hit rate, full trace and sample",
        "cache size (fraction of the working set)",
        "hit rate (fraction)",
    );
    chart.y_range = Some((0.0, 1.0));
    for (name, pick) in [
        (
            "full trace",
            (|p| p.full.overall) as fn(&HitRatePoint) -> f64,
        ),
        ("sample", |p| p.sample.overall),
    ] {
        chart.series.push(Series::new(
            name,
            comparison
                .hit_rates
                .iter()
                .map(|point| (point.wss_fraction, pick(point)))
                .collect(),
        ));
    }
    let hits = hit_rate_table(comparison);
    report
        .heading("Hit rates")
        .chart(&chart)
        .table(&hits.headers(), hits.rows());
    report
}

/// `trace stats --format json`: the request-level measures and, for a block trace, its I/Os'.
#[derive(serde::Serialize)]
struct StatsOutput {
    #[serde(flatten)]
    requests: TraceStats,
    #[serde(skip_serializing_if = "Option::is_none")]
    block: Option<BlockStats>,
}

fn stats(args: &StatsArgs, sink: &mut Sink) -> Result<()> {
    let watched = sink.watch(args.trace.source()?);
    let source = watched.file();
    let mut reader = watched.open()?;
    let bar = requests_bar(None, "reading");
    let requests = trace_stats_with_progress(reader.as_mut(), &mut |n| bar.inc(n))?;
    bar.finish_and_clear();
    let format = match source.options.format {
        Some(format) => Some(format),
        None if source.options.csv.is_some() => None,
        None => detect_format(&source.input).ok(),
    };
    let block = match format {
        Some(format) if format.is_block() => Some(block_stats(
            open_block_records(&source.input, &source.options)?.as_mut(),
        )?),
        _ => None,
    };
    let output = StatsOutput { requests, block };
    match args.format {
        Format::Table => {
            sink.text(&output.requests.to_table());
            if let Some(block) = &output.block {
                sink.text(&block.to_table());
            }
        }
        Format::Csv | Format::Json => sink.json(&output)?,
    }
    write_report(args.report.as_deref(), || {
        stats_report(source.input.name(), &output)
    })
}

/// A power-of-two histogram's buckets as the report's charts take them.
fn buckets(histogram: &Log2Histogram) -> Vec<(u64, f64)> {
    histogram
        .buckets
        .iter()
        .map(|bucket| (bucket.min, bucket.count as f64))
        .collect()
}

/// The `trace stats --report` page.
fn stats_report(path: &Path, output: &StatsOutput) -> Report {
    let stats = &output.requests;
    let mut report = Report::new(&format!("heterarchy trace stats: {}", file_name(path)));
    report.paragraph(&format!("{}.", path.display()));
    let summary: Vec<Vec<String>> = stats
        .summary()
        .into_iter()
        .map(|(name, value)| vec![name.to_string(), value])
        .collect();
    report.table(&["measure", "value"], &summary);
    let mut ops = BarChart::new(
        "Requests by op",
        "op",
        "requests",
        stats
            .op_counts
            .iter()
            .map(|count| count.op.name().to_string())
            .collect(),
    );
    ops.series.push(Bars::new(
        "requests",
        stats
            .op_counts
            .iter()
            .map(|count| count.count as f64)
            .collect(),
    ));
    report.heading("Op mix").chart(&ops);
    let bucket_note = "each bar from its label to just under twice it";
    report
        .heading("Object sizes")
        .chart(&power_of_two_histogram(
            "Object sizes (each key at its last size)",
            &format!("object size (bytes; {bucket_note})"),
            "keys",
            Unit::Bytes,
            &[("keys", buckets(&stats.object_sizes.histogram))],
        ));
    report.heading("Reuse").chart(&power_of_two_histogram(
        "Reuse time: requests since the key's previous request",
        &format!("reuse time (requests; {bucket_note})"),
        "requests",
        Unit::Count,
        &[("re-requests", buckets(&stats.reuse_time_requests))],
    ));
    if let Some(block) = &output.block {
        let ops = [("reads", &block.reads), ("writes", &block.writes)];
        report.heading(&format!("Block I/Os ({} with data)", block.records));
        let mut table = Table::new(&[
            "op",
            "requests",
            "size_mean_bytes",
            "size_p50_bytes",
            "size_p99_bytes",
            "size_max_bytes",
            "iat_mean_us",
            "iat_p50_us",
            "iat_p99_us",
            "iat_max_us",
            "misaligned_requests",
            "misaligned_bytes",
        ]);
        for (name, op) in ops {
            table.row(vec![
                name.to_string(),
                op.requests.to_string(),
                format!("{:.1}", op.sizes.mean_bytes),
                op.sizes.p50_bytes.to_string(),
                op.sizes.p99_bytes.to_string(),
                op.sizes.max_bytes.to_string(),
                format!("{:.1}", op.inter_arrival.mean_us),
                format!("{:.1}", op.inter_arrival.p50_us),
                format!("{:.1}", op.inter_arrival.p99_us),
                format!("{:.1}", op.inter_arrival.max_us),
                op.misaligned_requests.to_string(),
                op.misaligned_bytes.to_string(),
            ]);
        }
        report.table(&table.headers(), table.rows());
        let sizes: Vec<(&str, Vec<(u64, f64)>)> = ops
            .iter()
            .map(|(name, op)| (*name, buckets(&op.sizes.histogram)))
            .collect();
        report.chart(&power_of_two_histogram(
            "Block I/O sizes by op",
            &format!("I/O size (bytes; {bucket_note})"),
            "I/Os",
            Unit::Bytes,
            &sizes,
        ));
        let mut gaps = BarChart::new(
            "Inter-arrival time by op (since the I/O before, whatever its op)",
            "statistic",
            "inter-arrival time (µs)",
            ["mean", "p50", "p90", "p99", "max"]
                .map(String::from)
                .to_vec(),
        );
        for (name, op) in ops {
            let t = &op.inter_arrival;
            gaps.series.push(Bars::new(
                name,
                vec![t.mean_us, t.p50_us, t.p90_us, t.p99_us, t.max_us],
            ));
        }
        report.chart(&gaps);
    }
    report
}

/// Streams every request of `source` into a new trace file.
fn copy(source: &dyn TraceSource, output: &Path, format_name: &str) -> Result<()> {
    let format = TraceFormat::from_name(format_name)
        .filter(|format| WRITABLE_FORMATS.contains(format))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "cannot write --output-format \"{format_name}\"; expected one of {}",
                WRITABLE_FORMATS.map(TraceFormat::name).join(", ")
            )
        })?;
    let mut reader = source.open()?;
    let mut writer = create_writer(output, format)
        .with_context(|| format!("cannot create {}", output.display()))?;
    let bar = requests_bar(None, "converting");
    for_each_batch(reader.as_mut(), |batch| {
        for request in batch.iter() {
            writer
                .write(request)
                .with_context(|| format!("cannot write {}", output.display()))?;
        }
        bar.inc(batch.len() as u64);
        anyhow::Ok(())
    })?;
    writer
        .finish()
        .with_context(|| format!("cannot write {}", output.display()))?;
    bar.finish_and_clear();
    Ok(())
}
