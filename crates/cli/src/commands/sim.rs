//! `heterarchy sim`: request and byte miss ratios of every (policy, size) pair over a trace.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use heterarchy_policy::PolicySpec;
use heterarchy_report::{BarChart, Bars, Report};
use heterarchy_sim::cache_sim::{run_jobs, working_set, SimJob, SimResult, SimSettings};

use crate::output::{file_name, write_report, Format, Sink, Table};
use crate::progress::requests_bar;
use crate::report_charts::{miss_ratio_chart, policies, Ratio};
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
    /// Also write an HTML report: request and byte miss ratio over cache size for each policy
    /// (log scale; bars by policy when there is one size), and the results table.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// Runs the simulations and prints their results.
pub fn run(args: &SimArgs, sink: &mut Sink) -> Result<()> {
    let results = simulate(args, sink)?;
    let table = results_table(
        &results,
        args.format == Format::Table && !args.ignore_obj_size,
    );
    sink.render(args.format, &table, &results)?;
    write_report(args.report.as_deref(), || report(args, &results))
}

/// One row per result; cache sizes for people (`64 MiB`) when `human`, else as numbers.
fn results_table(results: &[SimResult], human: bool) -> Table {
    let mut table = Table::new(&[
        "policy",
        "cache_size",
        "requests",
        "misses",
        "miss_ratio",
        "byte_miss_ratio",
    ]);
    for result in results {
        table.row(vec![
            result.policy.clone(),
            if human {
                human_bytes(result.cache_size)
            } else {
                result.cache_size.to_string()
            },
            result.requests.to_string(),
            result.misses.to_string(),
            format!("{:.6}", result.miss_ratio),
            format!("{:.6}", result.byte_miss_ratio),
        ]);
    }
    table
}

/// The `--report` page: the miss ratios charted, then the table.
fn report(args: &SimArgs, results: &[SimResult]) -> Report {
    let mut report = Report::new(&format!("heterarchy sim: {}", file_name(&args.trace.path)));
    let unit = if args.ignore_obj_size {
        "objects"
    } else {
        "bytes"
    };
    report.paragraph(&format!(
        "{} requests of {} counted, after {} warm-up requests; cache sizes in {unit}{}.",
        results.first().map_or(0, |r| r.requests),
        args.trace.path.display(),
        args.warmup,
        args.admission
            .as_deref()
            .map_or(String::new(), |filter| format!(
                ", admission filter {filter}"
            ))
    ));
    let mut sizes: Vec<u64> = results.iter().map(|r| r.cache_size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.len() > 1 {
        report.chart(&miss_ratio_chart(
            results,
            Ratio::Requests,
            args.ignore_obj_size,
        ));
        // With every object one unit in size, the byte miss ratio repeats the request one.
        if !args.ignore_obj_size {
            report.chart(&miss_ratio_chart(results, Ratio::Bytes, false));
        }
    } else {
        let policies = policies(results);
        let mut chart = BarChart::new(
            &format!(
                "Miss ratio by policy at {}",
                sizes
                    .first()
                    .map_or_else(String::new, |&size| if args.ignore_obj_size {
                        format!("{size} objects")
                    } else {
                        human_bytes(size)
                    })
            ),
            "policy",
            "miss ratio (fraction)",
            policies.iter().map(|p| p.to_string()).collect(),
        );
        chart.y_range = Some((0.0, 1.0));
        let of = |pick: fn(&SimResult) -> f64| -> Vec<f64> {
            policies
                .iter()
                .map(|&policy| {
                    results
                        .iter()
                        .find(|r| r.policy == policy)
                        .map_or(f64::NAN, pick)
                })
                .collect()
        };
        chart
            .series
            .push(Bars::new("request miss ratio", of(|r| r.miss_ratio)));
        if !args.ignore_obj_size {
            chart
                .series
                .push(Bars::new("byte miss ratio", of(|r| r.byte_miss_ratio)));
        }
        report.chart(&chart);
    }
    let table = results_table(results, !args.ignore_obj_size);
    report
        .heading("Results")
        .table(&table.headers(), table.rows());
    report
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
