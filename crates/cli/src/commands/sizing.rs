//! `heterarchy sizing`: which tier sizes a budget should buy for a block trace (seed 002 ch. 3;
//! `sim::sizing`): for each configuration and budget, Cydonia's answer and the exhaustive
//! optimum, with the best single tier and the best pyramidal and non-pyramidal two tiers.

use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use serde::Serialize;

use heterarchy_sim::parallel::map_parallel;
use heterarchy_sim::sizing::{
    seed002_configs, sizing_device, Evaluator, PageOp, ReuseByOp, Sizing, TierConfig, WritePolicy,
    CYDONIA_EVALMAX, CYDONIA_STEP, PAGE_BYTES, UNIT_PAGES,
};
use heterarchy_trace::read::TraceInput;
use heterarchy_trace::TraceFormat;

use crate::output::{write_report, Format, Sink, Table};
use crate::trace_args::{trace_input, TraceArgs};

/// Arguments of `heterarchy sizing`.
#[derive(Args, Debug)]
pub struct SizingArgs {
    #[command(flatten)]
    pub trace: TraceArgs,
    /// More traces, each sized like the first (one call for a grid of traces and budgets).
    pub more_traces: Vec<std::path::PathBuf>,
    /// Budgets in dollars, comma-separated (1,2.5,10): each buys tier 1 and tier 2 in 1 MiB
    /// units; the backing store is not charged.
    #[arg(long, required = true)]
    pub budget: String,
    /// One of seed 002 Table 3.2's configurations, T1/T2/BACKING (FastDRAM/FastSSD/SlowHDD);
    /// all seventeen by default.
    #[arg(long, conflicts_with = "devices")]
    pub config: Option<String>,
    /// Any three of Table 3.1's devices: T1,T2,BACKING (FastDRAM, SlowDRAM, FastSSD,
    /// MediumSSD, SlowSSD, FastHDD, SlowHDD).
    #[arg(long)]
    pub devices: Option<String>,
    /// Write-through (every write also to the backing store) or write-back.
    #[arg(long, value_enum, default_value = "wt")]
    pub policy: PolicyArg,
    /// Cydonia, the exhaustive search, or both (and their gap).
    #[arg(long, value_enum, default_value = "both")]
    pub search: SearchArg,
    /// Worker threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Also write an HTML report: for each configuration and budget, the mean latency against
    /// tier 1's size (tier 2 taking the rest), the exhaustive optimum and Cydonia's pick marked.
    #[arg(long)]
    pub report: Option<std::path::PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// `--policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    Wt,
    Wb,
}

/// `--search`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SearchArg {
    Cydonia,
    Exhaustive,
    Both,
}

/// One answer: a search's sizes for a configuration and budget.
#[derive(Clone, Debug, Serialize)]
struct Row {
    /// The trace's file name.
    trace: String,
    config: String,
    budget: f64,
    /// cydonia, exhaustive, or the exhaustive pass's single-tier, pyramidal and non-pyramidal
    /// optima.
    search: &'static str,
    t1_bytes: u64,
    t2_bytes: u64,
    mean_latency_us: f64,
    evaluations: usize,
    /// Tier 2 at least as large as tier 1 (none for a single tier).
    pyramidal: Option<bool>,
}

/// The configurations asked for.
fn configs(args: &SizingArgs) -> Result<Vec<TierConfig>> {
    if let Some(list) = &args.devices {
        let names: Vec<&str> = list.split(',').map(str::trim).collect();
        let [t1, t2, backing] = names[..] else {
            bail!("--devices {list}: expected three devices, T1,T2,BACKING");
        };
        let device = |name: &str| {
            sizing_device(name).ok_or_else(|| {
                anyhow!(
                    "--devices: unknown device \"{name}\"; expected a Table 3.1 label (FastDRAM, \
                     SlowDRAM, FastSSD, MediumSSD, SlowSSD, FastHDD, SlowHDD) or a device preset \
                     with a price (heterarchy device list)"
                )
            })
        };
        return Ok(vec![TierConfig {
            t1: device(t1)?,
            t2: device(t2)?,
            backing: device(backing)?,
        }]);
    }
    let all = seed002_configs();
    match &args.config {
        None => Ok(all),
        Some(name) => all
            .into_iter()
            .find(|config| config.name().eq_ignore_ascii_case(name))
            .map(|config| vec![config])
            .ok_or_else(|| {
                anyhow!(
                    "--config: unknown configuration \"{name}\"; expected one of Table 3.2's, \
                     e.g. FastDRAM/FastSSD/SlowHDD"
                )
            }),
    }
}

/// Every trace, configuration and budget, in that nesting.
fn grid<'a>(
    traces: &'a [(String, ReuseByOp)],
    configs: &'a [TierConfig],
    budgets: &[f64],
) -> Vec<(&'a str, &'a ReuseByOp, &'a TierConfig, f64)> {
    let mut all = Vec::new();
    for (trace, reuse) in traces {
        for config in configs {
            for &budget in budgets {
                all.push((trace.as_str(), reuse, config, budget));
            }
        }
    }
    all
}

fn budgets(text: &str) -> Result<Vec<f64>> {
    text.split(',')
        .map(|part| {
            let dollars: f64 = part.trim().trim_start_matches('$').parse().map_err(|_| {
                anyhow!("--budget: \"{part}\" is not an amount of dollars (1, 2.5, $10)")
            })?;
            if !(dollars.is_finite() && dollars > 0.0) {
                bail!("--budget: {dollars} must be above 0 dollars");
            }
            Ok(dollars)
        })
        .collect()
}

fn row(
    trace: &str,
    config: &TierConfig,
    budget: f64,
    search: &'static str,
    sizing: &Sizing,
    evaluations: usize,
) -> Row {
    let unit_bytes = UNIT_PAGES * PAGE_BYTES;
    Row {
        trace: trace.to_string(),
        config: config.name(),
        budget,
        search,
        t1_bytes: sizing.t1_units * unit_bytes,
        t2_bytes: sizing.t2_units * unit_bytes,
        mean_latency_us: sizing.mean_latency_us,
        evaluations,
        pyramidal: (sizing.t2_units > 0).then_some(!sizing.is_non_pyramidal()),
    }
}

pub fn run(args: &SizingArgs, sink: &mut Sink) -> Result<()> {
    let configs = configs(args)?;
    let budgets = budgets(&args.budget)?;
    let policy = match args.policy {
        PolicyArg::Wt => WritePolicy::WriteThrough,
        PolicyArg::Wb => WritePolicy::WriteBack,
    };
    for budget in &budgets {
        if let Some(config) = configs
            .iter()
            .find(|config| config.affordable_units(1, *budget) == 0)
        {
            bail!(
                "--budget {budget}: buys no 1 MiB unit of {}'s tier 1 ({:.6} dollars a unit)",
                config.name(),
                config.unit_dollars(1)
            );
        }
    }
    let options = args.trace.reader_options()?;
    let inputs: Vec<TraceInput> = std::iter::once(&args.trace.path)
        .chain(&args.more_traces)
        .map(|path| trace_input(path))
        .collect::<Result<_>>()?;
    let threads = super::threads_or_cores(args.threads);
    let started = Instant::now();
    for input in &inputs {
        let path = input.name();
        let format = match options.format {
            Some(format) => Some(format),
            None => heterarchy_trace::read::detect_format(input).ok(),
        };
        if let Some(format @ (TraceFormat::Twitter | TraceFormat::MetaKv)) = format {
            bail!(
                "{}: a {} trace has no block records; expected a block trace (or a trace of \
                 page accesses)",
                path.display(),
                format.name()
            );
        }
    }
    let measured = map_parallel(&inputs, threads, |input| -> Result<(String, ReuseByOp)> {
        let path = input.name();
        let mut reader = heterarchy_trace::open(input, &options)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let reuse = ReuseByOp::measure(&mut *reader).map_err(|e| anyhow!("{e}"))?;
        if reuse.requests(PageOp::Read) + reuse.requests(PageOp::Write) == 0 {
            bail!(
                "{}: no block reads or writes to size a cache for",
                path.display()
            );
        }
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into(),
        );
        Ok((name, reuse))
    });
    let traces = measured.into_iter().collect::<Result<Vec<_>>>()?;
    let accesses: u64 = traces
        .iter()
        .map(|(_, reuse)| reuse.requests(PageOp::Read) + reuse.requests(PageOp::Write))
        .sum();
    let jobs = grid(&traces, &configs, &budgets);
    let search = args.search;
    let answers = map_parallel(&jobs, threads, |&(trace, reuse, config, budget_dollars)| {
        let evaluator = Evaluator {
            config,
            reuse,
            policy,
            budget_dollars,
        };
        let mut rows = Vec::new();
        if search != SearchArg::Exhaustive {
            let found = evaluator.cydonia(CYDONIA_STEP, CYDONIA_EVALMAX);
            rows.push(row(
                trace,
                config,
                budget_dollars,
                "cydonia",
                &found.best,
                found.evaluations,
            ));
        }
        if search != SearchArg::Cydonia {
            let all = evaluator.exhaustive();
            rows.push(row(
                trace,
                config,
                budget_dollars,
                "exhaustive",
                &all.best,
                all.evaluations,
            ));
            rows.push(row(
                trace,
                config,
                budget_dollars,
                "single-tier",
                &all.single_tier,
                1,
            ));
            for (name, sizing) in [
                ("pyramidal", all.pyramidal),
                ("non-pyramidal", all.non_pyramidal),
            ] {
                if let Some(sizing) = sizing {
                    rows.push(row(trace, config, budget_dollars, name, &sizing, 0));
                }
            }
        }
        rows
    });
    let rows: Vec<Row> = answers.into_iter().flatten().collect();
    let seconds = started.elapsed().as_secs_f64();
    let mut table = Table::new(&[
        "trace",
        "config",
        "budget",
        "search",
        "t1_mib",
        "t2_mib",
        "mean_latency_us",
        "evaluations",
        "pyramidal",
    ]);
    for row in &rows {
        table.row(vec![
            row.trace.clone(),
            row.config.clone(),
            format!("{}", row.budget),
            row.search.to_string(),
            (row.t1_bytes >> 20).to_string(),
            (row.t2_bytes >> 20).to_string(),
            format!("{:.3}", row.mean_latency_us),
            row.evaluations.to_string(),
            row.pyramidal.map_or("-".into(), |p| p.to_string()),
        ]);
    }
    sink.render(args.format, &table, &rows)?;
    write_report(args.report.as_deref(), || {
        report(&table, &rows, &configs, &budgets, &traces, policy)
    })?;
    if args.format == Format::Table {
        sink.text(&budget_summary(&rows, &budgets, policy));
        let count = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        sink.line(&format!(
            "{} x {} x {} over {accesses} page accesses in {seconds:.2} s",
            count(traces.len(), "trace"),
            count(configs.len(), "configuration"),
            count(budgets.len(), "budget"),
        ));
    }
    Ok(())
}

/// Per budget, over the configurations: Cydonia's mean and worst gap to the exhaustive
/// optimum, the share of the grid it evaluated, and how often the optimum is a single tier, a
/// pyramid or non-pyramidal (seed 002 §3.3; empty unless both searches ran). Then the same over
/// every budget, beside the thesis' figures.
fn budget_summary(rows: &[Row], budgets: &[f64], policy: WritePolicy) -> String {
    let find = |search: &str, of: &Row| {
        rows.iter().find(|r| {
            r.search == search
                && r.trace == of.trace
                && r.config == of.config
                && r.budget == of.budget
        })
    };
    let mut table = Table::new(&[
        "budget",
        "cydonia_gap_mean_percent",
        "cydonia_gap_worst_percent",
        "grid_evaluated_percent",
        "optimum_single_tier",
        "optimum_pyramidal",
        "optimum_non_pyramidal",
    ]);
    let mut all_gaps = Vec::new();
    let (mut evaluated, mut grid) = (0usize, 0usize);
    for &budget in budgets {
        let mut gaps = Vec::new();
        let (mut cydonia_evaluations, mut exhaustive_evaluations) = (0usize, 0usize);
        let mut optima = [0usize; 3];
        for cydonia in rows
            .iter()
            .filter(|r| r.search == "cydonia" && r.budget == budget)
        {
            let Some(optimum) = find("exhaustive", cydonia) else {
                continue;
            };
            gaps.push(100.0 * (cydonia.mean_latency_us / optimum.mean_latency_us - 1.0));
            cydonia_evaluations += cydonia.evaluations;
            exhaustive_evaluations += optimum.evaluations;
            optima[match optimum.pyramidal {
                None => 0,
                Some(true) => 1,
                Some(false) => 2,
            }] += 1;
        }
        if gaps.is_empty() {
            continue;
        }
        let share = |count: usize| format!("{:.0}%", 100.0 * count as f64 / gaps.len() as f64);
        table.row(vec![
            format!("{budget}"),
            format!("{:.2}", gaps.iter().sum::<f64>() / gaps.len() as f64),
            format!("{:.2}", gaps.iter().copied().fold(0.0, f64::max)),
            format!(
                "{:.3}",
                100.0 * cydonia_evaluations as f64 / exhaustive_evaluations.max(1) as f64
            ),
            share(optima[0]),
            share(optima[1]),
            share(optima[2]),
        ]);
        all_gaps.extend(gaps);
        evaluated += cydonia_evaluations;
        grid += exhaustive_evaluations;
    }
    if all_gaps.is_empty() {
        return String::new();
    }
    let thesis = match policy {
        WritePolicy::WriteThrough => "2.3% mean, 5.3% for the worst configuration",
        WritePolicy::WriteBack => "13.1% mean, up to 30.7%",
    };
    format!(
        "\n{}Cydonia's gap to the exhaustive optimum: mean {:.2}%, worst {:.2}%, evaluating \
         {:.3}% of the grid (thesis, 106 traces: {thesis}, about 0.2% of the grid; non-pyramidal \
         optima about 85% of the time at high budgets)\n",
        table.to_text(),
        all_gaps.iter().sum::<f64>() / all_gaps.len() as f64,
        all_gaps.iter().copied().fold(0.0, f64::max),
        100.0 * evaluated as f64 / grid.max(1) as f64
    )
}

/// Points of a latency curve at most: a curve over every affordable tier-1 size would hold
/// thousands.
const REPORT_POINTS: u64 = 400;

/// The HTML report: the table, then one chart per trace, configuration and budget.
fn report(
    table: &Table,
    rows: &[Row],
    configs: &[TierConfig],
    budgets: &[f64],
    traces: &[(String, ReuseByOp)],
    policy: WritePolicy,
) -> heterarchy_report::Report {
    let mut html = heterarchy_report::Report::new("heterarchy sizing");
    html.table(&table.headers(), table.rows());
    for (trace, reuse, config, budget_dollars) in grid(traces, configs, budgets) {
        let evaluator = Evaluator {
            config,
            reuse,
            policy,
            budget_dollars,
        };
        let most = config.affordable_units(1, budget_dollars);
        let stride = (most / REPORT_POINTS).max(1);
        let curve: Vec<(f64, f64)> = (1..=most)
            .filter(|t1| t1 % stride == 0 || *t1 == most)
            .map(|t1| (t1 as f64, evaluator.latency_at(t1)))
            .collect();
        let title = if traces.len() > 1 {
            format!("{trace}: {} at ${budget_dollars}", config.name())
        } else {
            format!("{} at ${budget_dollars}", config.name())
        };
        let mut chart = heterarchy_report::LineChart::new(
            &title,
            "tier 1, MiB (tier 2: the rest of the budget)",
            "mean latency, us",
        );
        chart.series.push(heterarchy_report::Series {
            name: "mean latency".into(),
            points: curve,
        });
        for search in ["exhaustive", "cydonia"] {
            if let Some(row) = rows.iter().find(|r| {
                r.search == search
                    && r.trace == trace
                    && r.config == config.name()
                    && r.budget == budget_dollars
            }) {
                chart.series.push(heterarchy_report::Series {
                    name: search.into(),
                    points: vec![((row.t1_bytes >> 20) as f64, row.mean_latency_us)],
                });
            }
        }
        html.chart(&chart);
    }
    html
}
