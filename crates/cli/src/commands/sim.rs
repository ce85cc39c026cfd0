//! `heterarchy sim`: request and byte miss ratios of every (policy, size) pair over a trace.

use anyhow::Result;
use clap::Args;
use heterarchy_policy::PolicySpec;
use heterarchy_sim::cache_sim::{run_jobs, working_set, SimJob, SimResult, SimSettings};

use crate::output::{Format, Sink, Table};
use crate::progress::requests_bar;
use crate::size::{human_bytes, parse_sizes, resolve, SizeSpec};
use crate::trace_args::TraceArgs;

/// Arguments of `heterarchy sim`.
#[derive(Args, Debug)]
pub struct SimArgs {
    #[command(flatten)]
    pub trace: TraceArgs,
    /// Eviction policies, comma-separated, each with its parameters after a colon
    /// (`lru,s3fifo:small-size-ratio=0.2,lru-k:k=2`), or `all`; `heterarchy policies` lists them.
    #[arg(long, default_value = "lru")]
    pub policy: String,
    /// An admission filter in front of every policy, with its parameters (`bloom`,
    /// `size:size=65536`); `heterarchy policies` lists them.
    #[arg(long)]
    pub admission: Option<String>,
    /// Cache sizes, comma-separated: bytes with a unit (64mb), fractions of the working set
    /// (0.01), or `auto`.
    #[arg(long, default_value = "auto")]
    pub size: String,
    /// Count objects, not bytes: every object has size 1.
    #[arg(long)]
    pub ignore_obj_size: bool,
    /// Requests that warm the cache before counting starts.
    #[arg(long, default_value_t = 0)]
    pub warmup: u64,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Decode the trace on the simulating thread, not on a second one: with `--threads 1` the
    /// run takes one core (sweeps spread whole runs over the cores instead).
    #[arg(long)]
    pub inline_decode: bool,
    /// How to print the results: a table for people, CSV or JSON for programs.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// Runs the simulations and prints their results.
pub fn run(args: &SimArgs, sink: &mut Sink) -> Result<()> {
    let results = simulate(args, sink)?;
    let mut table = Table::new(&[
        "policy",
        "cache_size",
        "requests",
        "misses",
        "miss_ratio",
        "byte_miss_ratio",
    ]);
    for result in &results {
        let size = if args.ignore_obj_size {
            result.cache_size.to_string()
        } else if args.format == Format::Table {
            human_bytes(result.cache_size)
        } else {
            result.cache_size.to_string()
        };
        table.row(vec![
            result.policy.clone(),
            size,
            result.requests.to_string(),
            result.misses.to_string(),
            format!("{:.6}", result.miss_ratio),
            format!("{:.6}", result.byte_miss_ratio),
        ]);
    }
    sink.render(args.format, &table, &results)?;
    Ok(())
}

/// Expands the policy and size lists into jobs and runs them.
pub fn simulate(args: &SimArgs, sink: &Sink) -> Result<Vec<SimResult>> {
    let policies = PolicySpec::parse_list(&args.policy, args.admission.as_deref())?;
    let sizes = parse_sizes(&args.size).map_err(anyhow::Error::msg)?;
    let source = sink.watch(args.trace.source()?);
    let needs_working_set = sizes.iter().any(|s| matches!(s, SizeSpec::Fraction(_)));
    let base = if needs_working_set {
        let bar = requests_bar(None, "measuring the working set");
        let found = working_set(&source, &|n| bar.inc(n))?;
        bar.finish_and_clear();
        Some(found)
    } else {
        None
    };
    let working_set_units = base.map_or(0, |ws| {
        if args.ignore_obj_size {
            ws.objects
        } else {
            ws.bytes
        }
    });
    let sizes: Vec<u64> = sizes
        .iter()
        .map(|&size| resolve(size, working_set_units))
        .collect();
    let jobs = SimJob::grid(&policies, &sizes);
    let settings = SimSettings {
        ignore_obj_size: args.ignore_obj_size,
        warmup_requests: args.warmup,
        inline_decode: args.inline_decode,
    };
    let threads = super::threads_or_cores(args.threads);
    let bar = requests_bar(base.map(|ws| ws.requests * jobs.len() as u64), "simulating");
    let results = run_jobs(&source, &settings, &jobs, threads, &|n| bar.inc(n))?;
    bar.finish_and_clear();
    Ok(results)
}
