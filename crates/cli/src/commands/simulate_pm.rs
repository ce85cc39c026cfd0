//! `heterarchy simulate-pm`: a block trace replayed on seed 001's block stacks on persistent
//! memory in the timed simulator — raw PM, the BTT alone, the BTT under each staging cache —
//! the prediction beside a live run of the same requests (docs/pm-block-device.md, "Traces on
//! the simulated stacks").

use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use heterarchy_device::presets::resolve_device;
use heterarchy_sim::staging::{run_staged, Stack, StagedConfig, StagedResult, TracedRequest};
use heterarchy_trace::read::open_block_records;
use heterarchy_trace::{Op, TraceError};
use serde::Serialize;

use crate::output::{Format, Sink, Table};
use crate::size::parse_bytes;
use crate::trace_args::TraceArgs;

/// Arguments of `heterarchy simulate-pm`.
#[derive(Args, Debug)]
pub struct SimulatePmArgs {
    #[command(flatten)]
    pub trace: TraceArgs,
    /// Stacks, comma-separated: raw-pm, btt, or a staging cache over the BTT (caiti, pmbd,
    /// pmbd70, lru, coactive).
    #[arg(long, default_value = "btt,caiti,pmbd,lru")]
    pub stacks: String,
    /// The staging cache's DRAM (seed 001 §4.1: 512 MiB).
    #[arg(long, default_value = "512MiB")]
    pub staging_size: String,
    /// The persistent memory's model: a preset or a device .toml.
    #[arg(long, default_value = "optane-pm-x6")]
    pub device: String,
    /// The device's size (default: enough for the trace).
    #[arg(long)]
    pub device_size: Option<String>,
    /// Client threads replaying the trace, each one request at a time.
    #[arg(long, default_value_t = 1)]
    pub jobs: u32,
    /// Cores of the simulated machine (seed 001 §4.1: 36).
    #[arg(long, default_value_t = 36)]
    pub cores: u32,
    /// Caiti's evictor threads (default: the cores the jobs leave, at least one).
    #[arg(long)]
    pub evictors: Option<u32>,
    /// A periodic flush besides the trace's own, in milliseconds (Ext4's journal: 5000).
    #[arg(long)]
    pub flush_interval_ms: Option<u64>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// One stack's run, as `--format json` prints it.
#[derive(Serialize)]
struct StackRun {
    #[serde(flatten)]
    result: StagedResult,
    /// Its time over the BTT alone's on the same trace, when the BTT ran too.
    time_over_btt: Option<f64>,
}

/// Runs the trace on each stack and prints what each took.
pub fn run(args: &SimulatePmArgs, sink: &mut Sink) -> Result<()> {
    let stacks = args
        .stacks
        .split(',')
        .map(|name| {
            name.trim()
                .parse::<Stack>()
                .map_err(|e| anyhow!("--stacks: {e}"))
        })
        .collect::<Result<Vec<_>>>()?;
    let trace = read_trace(&args.trace)?;
    let mut config = StagedConfig::seed001(Stack::RawPm);
    config.trace = Some(trace);
    config.cache_bytes = parse_bytes(&args.staging_size).context("--staging-size")?;
    config.device_bytes = match &args.device_size {
        Some(size) => parse_bytes(size).context("--device-size")?,
        None => 0,
    };
    config.pm = resolve_device(&args.device, None).map_err(|e| anyhow!("--device: {e}"))?;
    if args.jobs == 0 || args.cores == 0 || args.evictors == Some(0) {
        bail!("--jobs, --cores and --evictors: expected at least 1");
    }
    config.jobs = args.jobs;
    config.iodepth = 1;
    config.cores = args.cores;
    config.evictors = args
        .evictors
        .unwrap_or_else(|| args.cores.saturating_sub(args.jobs).max(1));
    config.duration_ns = u64::MAX;
    config.flush_interval_ns = args.flush_interval_ms.map(|ms| ms * 1_000_000);
    let results: Vec<StagedResult> = stacks
        .iter()
        .map(|&stack| {
            run_staged(&StagedConfig {
                stack,
                ..config.clone()
            })
        })
        .collect();
    let btt_ns = results
        .iter()
        .find(|result| result.stack == "btt")
        .map(|btt| btt.elapsed_ns as f64);
    let runs: Vec<StackRun> = results
        .into_iter()
        .map(|result| StackRun {
            time_over_btt: btt_ns.map(|btt| result.elapsed_ns as f64 / btt),
            result,
        })
        .collect();
    sink.render(args.format, &table(&runs), &runs)
}

/// The trace's requests the stacks act on (reads, writes, flushes), in order.
fn read_trace(trace: &TraceArgs) -> Result<Arc<[TracedRequest]>> {
    let source = trace.source()?;
    let mut records = open_block_records(&source.input, &source.options)?;
    let mut requests = Vec::new();
    while let Some(record) = records.next_record()? {
        let request = TracedRequest::from_record(&record);
        let moves_data = matches!(record.op, Op::Read | Op::Write) && record.length_bytes > 0;
        if request.is_none() && moves_data {
            let error = TraceError::new(
                records.path(),
                records.location(),
                format!(
                    "an I/O of {} bytes; expected fewer than 4 Gi blocks of 4 KiB",
                    record.length_bytes
                ),
            );
            return Err(error.into());
        }
        requests.extend(std::iter::repeat_n(request, record.repeat as usize).flatten());
    }
    if requests.is_empty() {
        bail!(
            "{}: no reads, writes or flushes: expected a block trace",
            source.input.name().display()
        );
    }
    Ok(requests.into())
}

fn table(runs: &[StackRun]) -> Table {
    let mut table = Table::new(&[
        "stack",
        "requests",
        "elapsed_ms",
        "time_over_btt",
        "mean_latency_us",
        "p99_latency_us",
        "write_hits",
        "write_fills",
        "bypasses",
        "stalled_writes",
        "flushes",
        "mean_flush_latency_us",
    ]);
    for run in runs {
        let result = &run.result;
        table.row(vec![
            result.stack.clone(),
            result.requests.to_string(),
            format!("{:.3}", result.elapsed_ns as f64 / 1e6),
            run.time_over_btt
                .map_or_else(|| "-".to_string(), |ratio| format!("{ratio:.3}")),
            format!("{:.1}", result.mean_latency_us),
            format!("{:.1}", result.p99_latency_us),
            result.staging.write_hits.to_string(),
            result.staging.write_fills.to_string(),
            result.staging.bypasses.to_string(),
            result.staging.stalled_writes.to_string(),
            result.flushes.to_string(),
            format!("{:.1}", result.mean_flush_latency_us),
        ]);
    }
    table
}
