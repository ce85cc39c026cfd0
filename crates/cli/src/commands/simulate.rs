//! `heterarchy simulate`: a multi-tier hierarchy of device models under a workload or a trace,
//! on a virtual clock — throughput, latency percentiles, hit ratio and per-device bandwidth, in
//! total and over time; or the splitting baseline and the search for its best split rate.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use clap::Args;
use heterarchy_engine::{Controller, TuningHistory, TuningPoint};
use heterarchy_report::{LineChart, Report, Series};
use heterarchy_sim::cache_sim::{GeneratedTrace, TraceFile, TraceSource};
use heterarchy_sim::timed::{
    run_timed_with_progress, search_split, Arrivals, Hierarchy, Scheme, SplitSearch, TimedResult,
};
use heterarchy_trace::generate::WorkloadSpec;
use heterarchy_trace::TraceReader;

use crate::output::{table_text, write_report, Format, Sink, Table};
use crate::progress::requests_bar;
use crate::trace_args::TraceArgs;

/// Arguments of `heterarchy simulate`.
#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// The hierarchy: tiers, cache settings and load (TOML; docs/simulation.md, "The timed
    /// simulator").
    #[arg(long)]
    pub config: PathBuf,
    /// A workload spec (`uniform:keys=100000,size=32k,kind=block,write=0.3`, see `trace
    /// generate`) or a trace file.
    #[arg(long)]
    pub workload: String,
    /// Trace format, when the workload is a trace whose format is not detected.
    #[arg(long = "trace-format")]
    pub trace_format: Option<String>,
    /// CSV columns as libCacheSim writes them; implies `--trace-format csv`.
    #[arg(long = "trace-type-params")]
    pub csv_spec: Option<String>,
    /// Closed loop with this many outstanding requests (overrides the config).
    #[arg(long, conflicts_with = "speedup")]
    pub outstanding: Option<u32>,
    /// Open loop: replay trace timestamps this many times faster (overrides the config).
    #[arg(long)]
    pub speedup: Option<f64>,
    /// Requests to measure, after the warm-up (overrides the config).
    #[arg(long)]
    pub requests: Option<u64>,
    /// Requests that warm the caches before measuring (overrides the config).
    #[arg(long)]
    pub warmup: Option<u64>,
    /// Seed of the controller's random choices (overrides the config).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Run the splitting baseline at this rate, or `search` for the best rate.
    #[arg(long)]
    pub split: Option<String>,
    /// Worker threads for a split search (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Write an HTML report with throughput, latency and per-device bandwidth over time.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// Runs the simulation and prints its results.
pub fn run(args: &SimulateArgs, sink: &mut Sink) -> Result<()> {
    let hierarchy = hierarchy(args)?;
    let source = workload(args, &hierarchy)?;
    if hierarchy.scheme == Scheme::SplitSearch {
        let threads = super::threads_or_cores(args.threads);
        let search = search_split(&hierarchy, &*source, threads)?;
        sink.emit(args.format, &search, || render_search(args.format, &search))?;
        write_report(args.report.as_deref(), || {
            search_report(&search, &hierarchy)
        })?;
        return Ok(());
    }
    let mut controller = hierarchy
        .controller()
        .map_err(|e| anyhow!("{}: {e}", args.config.display()))?;
    let mut reader = source.open()?;
    let limit = hierarchy.load.max_requests;
    let result = run_with_bar(
        &mut *controller,
        &hierarchy,
        &mut *reader,
        (limit != u64::MAX).then_some(limit),
        "simulating",
    )?;
    if result.requests == 0 {
        return Err(anyhow!(
            "no request was measured: the warm-up ({} requests) used up the workload",
            hierarchy.load.warmup_requests
        ));
    }
    sink.emit(args.format, &result, || render_result(args.format, &result))?;
    write_report(args.report.as_deref(), || {
        let mut report = Report::new("heterarchy simulate");
        add_result(&mut report, &result, &describe(&hierarchy));
        report
    })?;
    Ok(())
}

/// Runs `controller` on the hierarchy's devices and load over `reader`, with a progress bar of
/// `total` requests on a terminal.
pub fn run_with_bar(
    controller: &mut dyn Controller,
    hierarchy: &Hierarchy,
    reader: &mut dyn TraceReader,
    total: Option<u64>,
    message: &str,
) -> Result<TimedResult> {
    let bar = requests_bar(total, message);
    let result = run_timed_with_progress(
        controller,
        &hierarchy.devices,
        reader,
        &hierarchy.load,
        &mut |taken| bar.set_position(taken),
    )?;
    bar.finish_and_clear();
    Ok(result)
}

/// The config with the command line's overrides applied.
fn hierarchy(args: &SimulateArgs) -> Result<Hierarchy> {
    let mut hierarchy = Hierarchy::from_file(&args.config)?;
    if let Some(outstanding) = args.outstanding {
        if outstanding == 0 {
            return Err(anyhow!("--outstanding must be at least 1"));
        }
        hierarchy.load.arrivals = Arrivals::Closed { outstanding };
    }
    if let Some(speedup) = args.speedup {
        if !(speedup.is_finite() && speedup > 0.0) {
            return Err(anyhow!("--speedup {speedup} must be > 0"));
        }
        hierarchy.load.arrivals = Arrivals::Open { speedup };
    }
    // `requests` counts measured requests, after the warm-up, in the file and here alike.
    let load = &mut hierarchy.load;
    let measured = args.requests.or_else(|| {
        (load.max_requests != u64::MAX).then(|| load.max_requests - load.warmup_requests)
    });
    if let Some(warmup) = args.warmup {
        load.warmup_requests = warmup;
    }
    load.max_requests = measured.map_or(u64::MAX, |requests| {
        requests.saturating_add(load.warmup_requests)
    });
    if let Some(seed) = args.seed {
        hierarchy.seed = seed;
    }
    if let Some(split) = &args.split {
        if hierarchy.devices.len() != 2 {
            return Err(anyhow!("--split needs a hierarchy of exactly two tiers"));
        }
        hierarchy.scheme = match split.as_str() {
            "search" => Scheme::SplitSearch,
            rate => match rate.parse::<f64>() {
                Ok(rate) if (0.0..=1.0).contains(&rate) => Scheme::Split(rate),
                _ => {
                    return Err(anyhow!(
                        "bad --split {rate}: expected a rate in [0, 1] or `search`"
                    ))
                }
            },
        };
    }
    Ok(hierarchy)
}

/// A trace file when the workload names an existing file, else a generated workload.
fn workload(args: &SimulateArgs, hierarchy: &Hierarchy) -> Result<Box<dyn TraceSource>> {
    if Path::new(&args.workload).is_file() {
        let trace = TraceArgs {
            path: PathBuf::from(&args.workload),
            trace_format: args.trace_format.clone(),
            block_size: hierarchy.line_bytes.unwrap_or(4096).to_string(),
            no_split: false,
            csv_spec: args.csv_spec.clone(),
        };
        let source: TraceFile = trace.source()?;
        return Ok(Box::new(source));
    }
    let spec = WorkloadSpec::parse(&args.workload).with_context(|| {
        format!(
            "--workload {}: not a file, and not a workload spec",
            args.workload
        )
    })?;
    Ok(Box::new(GeneratedTrace(spec)))
}

fn describe(hierarchy: &Hierarchy) -> String {
    let tiers: Vec<String> = hierarchy
        .devices
        .iter()
        .enumerate()
        .map(|(index, device)| match hierarchy.tier_bytes.get(index) {
            Some(bytes) => format!("{} ({bytes} bytes)", device.name),
            None => format!("{} (backing store)", device.name),
        })
        .collect();
    let scheme = match hierarchy.scheme {
        Scheme::Caching => {
            let cache = &hierarchy.cache;
            format!(
                "caching: mode {}, policy {}, {} tiers, cleaning {}, promotion {}, admission {}",
                cache.mode.name(),
                cache.policy,
                format!("{:?}", cache.layout).to_lowercase(),
                format!("{:?}", cache.cleaning).to_lowercase(),
                format!("{:?}", cache.promotion).to_lowercase(),
                cache.admission.name(),
            )
        }
        Scheme::Split(rate) => format!("splitting at {rate}"),
        Scheme::SplitSearch => "splitting, best rate".to_string(),
    };
    format!("{} — {scheme}", tiers.join(" → "))
}

fn summary_table(result: &TimedResult) -> Table {
    let mut table = Table::new(&[
        "requests",
        "throughput_ops",
        "mean_latency_us",
        "p50_latency_us",
        "p99_latency_us",
        "p999_latency_us",
        "hit_ratio",
        "tier_hit_ratios",
    ]);
    table.row(vec![
        result.requests.to_string(),
        format!("{:.0}", result.throughput_ops),
        format!("{:.2}", result.mean_latency_us),
        format!("{:.2}", result.p50_latency_us),
        format!("{:.2}", result.p99_latency_us),
        format!("{:.2}", result.p999_latency_us),
        format!("{:.4}", result.hit_ratio),
        result
            .tier_hit_ratios
            .iter()
            .map(|share| format!("{share:.4}"))
            .collect::<Vec<_>>()
            .join("/"),
    ]);
    table
}

fn device_table(result: &TimedResult) -> Table {
    let mut table = Table::new(&[
        "device",
        "role",
        "read_ops",
        "write_ops",
        "read_MB_per_s",
        "write_MB_per_s",
    ]);
    for device in &result.devices {
        table.row(vec![
            device.name.clone(),
            device.role.clone(),
            device.read_ops.to_string(),
            device.write_ops.to_string(),
            format!("{:.1}", device.read_bytes_per_s / 1e6),
            format!("{:.1}", device.write_bytes_per_s / 1e6),
        ]);
    }
    table
}

/// Time in each tuner state, and the settings at the end, of each pair of levels.
fn tuning_table(history: &TuningHistory) -> Table {
    let mut table = Table::new(&["state", "seconds", "entries"]);
    for (state, seconds) in &history.state_seconds {
        table.row(vec![
            state.to_string(),
            format!("{seconds:.3}"),
            history
                .state_entries
                .get(state)
                .copied()
                .unwrap_or(0)
                .to_string(),
        ]);
    }
    table
}

fn tuning_summary(history: &TuningHistory) -> String {
    let Some(last) = history.points.last() else {
        return "admission tuning: no interval ended\n".to_string();
    };
    let pairs: Vec<String> = last
        .load_admit
        .iter()
        .zip(&last.data_admit)
        .enumerate()
        .map(|(pair, (load, data))| format!("pair {pair}: load_admit {load:.2}, data_admit {data}"))
        .collect();
    format!(
        "admission tuning over {} intervals, at the end {} ({})\n{}",
        history.intervals,
        last.state,
        pairs.join("; "),
        tuning_table(history).to_text()
    )
}

fn render_result(format: Format, result: &TimedResult) -> String {
    match format {
        Format::Table => {
            let mut text = format!(
                "{}\n{}",
                summary_table(result).to_text(),
                device_table(result).to_text()
            );
            if let Some(history) = &result.tuning {
                text.push('\n');
                text.push_str(&tuning_summary(history));
            }
            text
        }
        _ => table_text(format, &summary_table(result)),
    }
}

fn render_search(format: Format, search: &SplitSearch) -> String {
    let mut table = Table::new(&[
        "split_rate",
        "throughput_ops",
        "mean_latency_us",
        "p99_latency_us",
    ]);
    for point in &search.points {
        table.row(vec![
            format!("{:.2}", point.rate),
            format!("{:.0}", point.result.throughput_ops),
            format!("{:.2}", point.result.mean_latency_us),
            format!("{:.2}", point.result.p99_latency_us),
        ]);
    }
    match format {
        Format::Table => format!(
            "{}\nbest split rate {:.2}: {:.0} ops/s\n",
            table.to_text(),
            search.best().rate,
            search.best().result.throughput_ops
        ),
        _ => table_text(format, &table),
    }
}

/// Summary tables and charts over time of one run.
fn add_result(report: &mut Report, result: &TimedResult, title: &str) {
    report.heading(title);
    let table = summary_table(result);
    report.table(&table.headers(), table.rows());
    let devices = device_table(result);
    report.table(&devices.headers(), devices.rows());
    let over_time = &result.series;
    let points = |values: &[f64]| -> Vec<(f64, f64)> {
        over_time
            .time_s
            .iter()
            .copied()
            .zip(values.iter().copied())
            .collect()
    };
    let mut throughput = LineChart::new("Throughput over time", "time (s)", "requests/s");
    throughput
        .series
        .push(series("throughput", points(&over_time.throughput_ops)));
    report.chart(&throughput);
    let mut latency = LineChart::new("Mean latency over time", "time (s)", "latency (µs)");
    latency
        .series
        .push(series("mean latency", points(&over_time.mean_latency_us)));
    report.chart(&latency);
    let mut bandwidth = LineChart::new("Device bandwidth over time", "time (s)", "MB/s");
    for device in &over_time.devices {
        let megabytes = |values: &[f64]| -> Vec<f64> { values.iter().map(|v| v / 1e6).collect() };
        bandwidth.series.push(series(
            &format!("{} read", device.name),
            points(&megabytes(&device.read_bytes_per_s)),
        ));
        bandwidth.series.push(series(
            &format!("{} write", device.name),
            points(&megabytes(&device.write_bytes_per_s)),
        ));
    }
    report.chart(&bandwidth);
    if let Some(history) = &result.tuning {
        let mut chart = LineChart::new(
            "Admission tuning over time (controller clock)",
            "time (s)",
            "fraction",
        );
        chart.y_range = Some((0.0, 1.05));
        let pairs = history.points.first().map_or(0, |p| p.load_admit.len());
        for pair in 0..pairs {
            let of = |pick: &dyn Fn(&TuningPoint) -> f64| -> Vec<(f64, f64)> {
                history.points.iter().map(|p| (p.time_s, pick(p))).collect()
            };
            chart.series.push(series(
                &format!("pair {pair} load_admit"),
                of(&|p| p.load_admit[pair]),
            ));
            chart.series.push(series(
                &format!("pair {pair} data_admit"),
                of(&|p| f64::from(u8::from(p.data_admit[pair]))),
            ));
        }
        report.chart(&chart);
        let table = tuning_table(history);
        report.table(&table.headers(), table.rows());
    }
}

fn search_report(search: &SplitSearch, hierarchy: &Hierarchy) -> Report {
    let mut report = Report::new("heterarchy simulate: split search");
    report.heading(&describe(hierarchy));
    let mut chart = LineChart::new(
        "Splitting throughput over split rate",
        "split rate",
        "requests/s",
    );
    chart.series.push(series(
        "throughput",
        search
            .points
            .iter()
            .map(|point| (point.rate, point.result.throughput_ops))
            .collect(),
    ));
    report.chart(&chart);
    add_result(
        &mut report,
        &search.best().result,
        &format!("Best split rate {:.2}", search.best().rate),
    );
    report
}

fn series(name: &str, points: Vec<(f64, f64)>) -> Series {
    Series {
        name: name.to_string(),
        points,
    }
}
