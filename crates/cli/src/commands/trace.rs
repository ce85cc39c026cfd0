//! `heterarchy trace stats|convert|generate`: what a trace holds, turning one format into
//! another, and writing a synthetic workload to a file.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use heterarchy_sim::cache_sim::{GeneratedTrace, TraceSource};
use heterarchy_trace::block_stats::{block_stats, BlockStats};
use heterarchy_trace::generate::WorkloadSpec;
use heterarchy_trace::read::{detect_format, for_each_batch, open_block_records};
use heterarchy_trace::stats::{trace_stats_with_progress, TraceStats};
use heterarchy_trace::write::{create_writer, WRITABLE_FORMATS};
use heterarchy_trace::TraceFormat;

use crate::output::Format;
use crate::progress::requests_bar;
use crate::trace_args::TraceArgs;

/// The `trace` subcommands.
#[derive(Subcommand, Debug)]
pub enum TraceCommand {
    /// Requests, unique keys, working set, op mix, size and reuse distributions.
    Stats(StatsArgs),
    /// Rewrite a trace in another format (native, the fast path, or oracleGeneral).
    Convert(ConvertArgs),
    /// Write a seeded synthetic workload, e.g. `zipf:theta=0.9,keys=1000000,requests=10000000`.
    Generate(GenerateArgs),
}

/// Arguments of `trace stats`.
#[derive(Args, Debug)]
pub struct StatsArgs {
    #[command(flatten)]
    pub trace: TraceArgs,
    /// `table` or `json` (CSV has no shape for nested distributions; it prints JSON).
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
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
    /// requests, theta, hot_data, hot_ops, write, scan, scan_len, size, kind, rate, seed.
    pub spec: String,
    /// Output file (compressed when it ends in .gz, .bz2, .xz or .zst).
    #[arg(short, long)]
    pub output: PathBuf,
    /// native, oracleGeneral or csv (`time,page,op`).
    #[arg(long, default_value = "oracleGeneral")]
    pub output_format: String,
}

/// Runs a `trace` subcommand.
pub fn run(command: &TraceCommand) -> Result<()> {
    match command {
        TraceCommand::Stats(args) => stats(args),
        TraceCommand::Convert(args) => {
            copy(&args.trace.source()?, &args.output, &args.output_format)
        }
        TraceCommand::Generate(args) => {
            let spec = WorkloadSpec::parse(&args.spec).map_err(|e| anyhow::anyhow!(e.0))?;
            copy(&GeneratedTrace(spec), &args.output, &args.output_format)
        }
    }
}

/// `trace stats --format json`: the request-level measures and, for a block trace, its I/Os'.
#[derive(serde::Serialize)]
struct StatsOutput {
    #[serde(flatten)]
    requests: TraceStats,
    #[serde(skip_serializing_if = "Option::is_none")]
    block: Option<BlockStats>,
}

fn stats(args: &StatsArgs) -> Result<()> {
    let source = args.trace.source()?;
    let mut reader = source.open()?;
    let bar = requests_bar(None, "reading");
    let requests = trace_stats_with_progress(reader.as_mut(), &mut |n| bar.inc(n))?;
    bar.finish_and_clear();
    let format = match source.options.format {
        Some(format) => Some(format),
        None if source.options.csv.is_some() => None,
        None => detect_format(&source.path).ok(),
    };
    let block = match format {
        Some(format) if format.is_block() => Some(block_stats(
            open_block_records(&source.path, &source.options)?.as_mut(),
        )?),
        _ => None,
    };
    let output = StatsOutput { requests, block };
    match args.format {
        Format::Table => {
            print!("{}", output.requests.to_table());
            if let Some(block) = &output.block {
                print!("{}", block.to_table());
            }
        }
        Format::Csv | Format::Json => {
            println!("{}", serde_json::to_string_pretty(&output)?)
        }
    }
    Ok(())
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
