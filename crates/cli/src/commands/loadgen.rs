//! `heterarchy loadgen`: load generators that measure a server's throughput and latency
//! percentiles. `loadgen kv` drives any memcached text-protocol server (ours or memcached);
//! `loadgen block` a block device, a staged PM device in process or any NBD export.

use std::path::PathBuf;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use heterarchy_blockdev::{StagedConfig, StagedExport};
use heterarchy_device::backend::Throttles;
use heterarchy_engine::staging::StagingScheme;
use heterarchy_loadgen::block::{run_block_streaming, BlockLoad, BlockReport, BlockTarget};
use heterarchy_loadgen::{
    parse_duration, ArgError, Config, Distribution, Diurnal, IntervalReport, Phase, RateSchedule,
    RateStep, Report, ServerAddr,
};
use heterarchy_report::{BarChart, Bars, LineChart, Series};
use serde::Serialize;

use crate::output::{write_report, Format, Sink, Table};
use crate::size::parse_bytes;

/// Subcommands of `heterarchy loadgen`.
#[derive(Subcommand, Debug)]
pub enum LoadgenCommand {
    /// Gets and sets over the memcached text protocol: throughput and latency percentiles.
    /// Exits non-zero, after printing the report, when any reply was an error.
    Kv(KvArgs),
    /// Random 4 KiB writes and reads against a block device, as fio drives one: in this
    /// process on a staged PM device built from --backing and --staging, or over NBD
    /// (--target nbd://HOST:PORT/EXPORT). Throughput, latency percentiles, the write outcomes.
    Block(BlockArgs),
}

/// Arguments of `heterarchy loadgen block`.
#[derive(Args, Debug)]
pub struct BlockArgs {
    /// An NBD export to drive: nbd://HOST:PORT/EXPORT. Without it, a device in this process.
    #[arg(long, conflicts_with_all = ["backing", "staging"])]
    pub target: Option<String>,
    /// The in-process device's storage: btt:PATH:SIZE[:512|:4k], pmem:PATH:SIZE, ram:SIZE...
    #[arg(long, required_unless_present = "target")]
    pub backing: Option<String>,
    /// The in-process device's staging cache: none, caiti, caiti-no-ee, caiti-no-bp, pmbd,
    /// pmbd70, lru or coactive.
    #[arg(long, default_value = "caiti")]
    pub staging: StagingScheme,
    /// DRAM for the staging cache.
    #[arg(long, default_value = "512m", value_parser = parse_bytes)]
    pub staging_size: u64,
    /// Caiti's evictor threads (default: one per core).
    #[arg(long)]
    pub evictors: Option<u32>,
    /// Pace the storage like this device preset (under the BTT), e.g. optane-pm.
    #[arg(long)]
    pub throttle: Option<String>,
    /// Jobs (fio's numjobs).
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Requests in flight per job (in process: threads, 256 in all at most).
    #[arg(long, default_value_t = 1)]
    pub iodepth: usize,
    /// The measured time (10s, 500ms).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Percent of requests that are reads.
    #[arg(long, default_value_t = 0)]
    pub read_percent: u32,
    /// Each job flushes after every N writes (fio's fsync=N).
    #[arg(long)]
    pub fsync_every: Option<u32>,
    /// A flush on this timer besides (Ext4 commits every 5s).
    #[arg(long, value_parser = parse_duration)]
    pub flush_interval: Option<Duration>,
    /// Bytes of the device used, from its start (default: all).
    #[arg(long, default_value = "0", value_parser = parse_bytes)]
    pub span: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Completions kept for the latency series (seed 001 Fig 5b: 50,000).
    #[arg(long, default_value_t = 50_000)]
    pub series: usize,
    /// Write self-describing blocks and check every read of a block the run wrote against the
    /// version last written; each job keeps to blocks of its own. Wrong reads and failed
    /// requests count as errors (the run goes on) and make the exit code non-zero.
    #[arg(long)]
    pub verify: bool,
    /// Also report throughput, p99 and errors for each interval this long.
    #[arg(long, value_parser = parse_duration)]
    pub interval: Option<Duration>,
    /// With --interval: write each interval as one JSON line to standard output as soon as it
    /// is over, before the report.
    #[arg(long, requires = "interval")]
    pub stream: bool,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also write an HTML report with the latency series.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

impl BlockArgs {
    fn target(&self) -> Result<BlockTarget> {
        if let Some(url) = &self.target {
            return BlockTarget::nbd(url).map_err(|e| anyhow!("--target: {e}"));
        }
        let backing = self.backing.as_deref().expect("clap requires --backing");
        let config = StagedConfig {
            staging_size: self.staging_size,
            evictors: self.evictors,
            throttle: self.throttle.clone(),
            ..StagedConfig::new(
                "loadgen",
                backing.parse().map_err(|e| anyhow!("--backing: {e}"))?,
                self.staging,
            )
        };
        let device = StagedExport::open(&config, &Throttles::default())
            .map_err(|e| anyhow!("--backing {backing}: {e}"))?;
        Ok(BlockTarget::InProcess(Arc::new(device)))
    }

    fn load(&self) -> BlockLoad {
        BlockLoad {
            jobs: self.jobs,
            iodepth: self.iodepth,
            duration: self.duration,
            read_percent: self.read_percent.min(100),
            fsync_every: self.fsync_every.filter(|&n| n > 0),
            flush_interval: self.flush_interval,
            span_bytes: self.span,
            seed: self.seed,
            series: self.series,
            verify: self.verify,
            interval: self.interval,
        }
    }
}

/// Prints one interval as a JSON line at once (`--stream`), `target` naming a kv target.
fn print_interval(target: Option<&str>, interval: &IntervalReport) {
    #[derive(Serialize)]
    struct Line<'a> {
        #[serde(skip_serializing_if = "Option::is_none")]
        target: Option<&'a str>,
        #[serde(flatten)]
        interval: &'a IntervalReport,
    }
    if let Ok(line) = serde_json::to_string(&Line { target, interval }) {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        // A reader that went away loses the line; the run goes on to its report.
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    }
}

fn run_block_command(args: &BlockArgs, sink: &mut Sink) -> Result<()> {
    let target = args.target()?;
    let stream = |interval: IntervalReport| print_interval(None, &interval);
    let streaming: Option<&(dyn Fn(IntervalReport) + Sync)> =
        (args.stream && matches!(sink, Sink::Print)).then_some(&stream);
    let report = run_block_streaming(&target, &args.load(), streaming)?;
    sink.render(args.format, &block_table(&report), &report)?;
    if args.interval.is_some() && args.format == Format::Table {
        sink.text(&format!(
            "\n{}",
            intervals_table(&report.intervals).to_text()
        ));
    }
    write_report(args.report.as_deref(), || block_html(&report))?;
    if report.errors > 0 {
        bail!(
            "{} of {} requests failed or read wrong data; the first: {}",
            report.errors,
            report.requests,
            report.first_error.as_deref().unwrap_or("")
        );
    }
    Ok(())
}

/// Each interval of a block run: when it starts, its throughput, p99 and errors.
fn intervals_table(intervals: &[IntervalReport]) -> Table {
    let mut table = Table::new(&["start_secs", "iops", "p99_us", "errors"]);
    for interval in intervals {
        table.row(vec![
            format!("{:.1}", interval.start_secs),
            format!("{:.0}", interval.ops_per_sec),
            format!("{:.1}", interval.latency_us_p99),
            interval.errors.to_string(),
        ]);
    }
    table
}

fn block_table(report: &BlockReport) -> Table {
    let mut table = Table::new(&[
        "jobs",
        "iodepth",
        "requests",
        "iops",
        "mean_us",
        "p50_us",
        "p99_us",
        "p9999_us",
        "max_us",
        "write_hits",
        "write_fills",
        "bypasses",
        "stalled",
        "flushes",
        "flush_mean_us",
        "errors",
        "verified_reads",
    ]);
    let count = |value: Option<u64>| value.map_or("-".to_string(), |n| n.to_string());
    table.row(vec![
        report.jobs.to_string(),
        report.iodepth.to_string(),
        report.requests.to_string(),
        format!("{:.0}", report.iops),
        format!("{:.1}", report.mean_latency_us),
        format!("{:.1}", report.p50_latency_us),
        format!("{:.1}", report.p99_latency_us),
        format!("{:.1}", report.p9999_latency_us),
        format!("{:.1}", report.max_latency_us),
        count(report.write_hits),
        count(report.write_fills),
        count(report.bypasses),
        count(report.stalled_writes),
        report.flushes.to_string(),
        format!("{:.1}", report.mean_flush_latency_us),
        report.errors.to_string(),
        count(report.verified_reads),
    ]);
    table
}

/// The report's table and its latency series over time (seed 001 Fig 5b's scatter plot).
fn block_html(report: &BlockReport) -> heterarchy_report::Report {
    let mut html =
        heterarchy_report::Report::new(&format!("heterarchy loadgen block: {}", report.target));
    let table = block_table(report);
    html.table(&table.headers(), table.rows());
    let mut chart = LineChart::new(
        "Latency of each request over time",
        "ms since the start",
        "us",
    );
    chart.series.push(Series {
        name: "latency".into(),
        points: report
            .series
            .iter()
            .map(|&(at, us)| (at / 1e3, us))
            .collect(),
    });
    html.chart(&chart);
    html
}

/// Arguments of `heterarchy loadgen kv`.
#[derive(Args, Debug)]
pub struct KvArgs {
    /// The server: HOST:PORT or unix:PATH.
    #[arg(long, default_value = "127.0.0.1:11211")]
    pub server: ServerAddr,
    /// Open connections, each a closed loop.
    #[arg(long, default_value_t = 32)]
    pub connections: usize,
    /// Requests outstanding per connection.
    #[arg(long, default_value_t = 1)]
    pub pipeline: usize,
    /// Event-loop threads; the connections are dealt out among them.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// The measured time (10s, 500ms).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Unmeasured time with the same load before it.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// The keyspace size.
    #[arg(long, default_value_t = 100_000)]
    pub keys: u64,
    /// The length of every key.
    #[arg(long, default_value_t = 32)]
    pub key_bytes: usize,
    /// The value size of sets (100, 4k).
    #[arg(long, default_value = "100", value_parser = parse_bytes)]
    pub value_bytes: u64,
    /// The fraction of requests that are gets; the rest are sets (and deletes).
    #[arg(long, default_value_t = 0.9)]
    pub get_ratio: f64,
    /// The fraction of requests that are deletes.
    #[arg(long, default_value_t = 0.0)]
    pub delete_ratio: f64,
    /// The fraction of gets that ask for keys the run never sets, which must miss.
    #[arg(long, default_value_t = 0.0)]
    pub miss_ratio: f64,
    /// Check every reply against what the run wrote: each value names its key and version,
    /// a get must return the version last stored (a miss of a key that holds one is an
    /// error: give the server room for the keyspace), a deleted or never-set key must miss.
    /// No two requests of one key are outstanding at once.
    #[arg(long)]
    pub verify: bool,
    /// Key choice: uniform or zipf:THETA.
    #[arg(long, default_value = "uniform")]
    pub distribution: Distribution,
    /// Skip setting every key once before the warm-up.
    #[arg(long)]
    pub no_prefill: bool,
    /// Send at most this many requests a second over all connections (default: as fast as
    /// replies come).
    #[arg(long)]
    pub rate: Option<f64>,
    /// From AT into the measured time on, RATE requests a second (AT:RATE, e.g. 12s:200000 for
    /// a burst; again to end it). Needs --rate.
    #[arg(long = "rate-step", value_name = "AT:RATE")]
    pub rate_steps: Vec<RateStep>,
    /// Swing the rate over a day of PERIOD between LOW times it (at the start of each day) and
    /// all of it (at midday): PERIOD:LOW, e.g. 20s:0.2. Needs --rate.
    #[arg(long, value_name = "PERIOD:LOW")]
    pub diurnal: Option<Diurnal>,
    /// Also report throughput and p99 for each interval this long of the measured time.
    #[arg(long, value_parser = parse_duration)]
    pub interval: Option<Duration>,
    /// With --interval: write each interval as one JSON line to standard output as soon as
    /// every request sent in it is answered, before the report.
    #[arg(long, requires = "interval")]
    pub stream: bool,
    /// Load several servers at once, each with its own settings: KEY=VALUE,... with the keys
    /// name, server, connections, pipeline, threads, keys, key-bytes, value-bytes, get-ratio,
    /// delete-ratio, miss-ratio, distribution, rate, rate-step (AT:RATE, several joined by +),
    /// diurnal and seed; a key
    /// left out takes its flag's value. E.g. --target name=lc,server=127.0.0.1:11311,rate=2000
    /// --target name=be,server=127.0.0.1:11312,get-ratio=0.1,rate=1000,rate-step=12s:50000.
    #[arg(long = "target", value_name = "SPEC")]
    pub targets: Vec<String>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also write an HTML report: each target's latency percentiles, and with --interval its
    /// throughput and p99 over time; the tables. Written even when replies were errors.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// One target's report, named (with several `--target`s).
#[derive(Serialize)]
struct TargetReport<'a> {
    target: &'a str,
    server: String,
    #[serde(flatten)]
    report: &'a Report,
}

impl KvArgs {
    /// The flags' own config.
    fn config(&self) -> Result<Config> {
        let Ok(value_bytes) = usize::try_from(self.value_bytes) else {
            bail!("--value-bytes {} is too large", self.value_bytes);
        };
        Ok(Config {
            server: self.server.clone(),
            connections: self.connections,
            pipeline: self.pipeline,
            threads: self.threads,
            duration: self.duration,
            warmup: self.warmup,
            keys: self.keys,
            key_bytes: self.key_bytes,
            value_bytes,
            get_ratio: self.get_ratio,
            delete_ratio: self.delete_ratio,
            miss_ratio: self.miss_ratio,
            verify: self.verify,
            distribution: self.distribution,
            prefill: !self.no_prefill,
            seed: self.seed,
            rate: schedule(self.rate, self.rate_steps.clone(), self.diurnal)?,
            interval: self.interval,
        })
    }

    /// Each target's name and config: the flags', or each `--target`'s over them.
    fn targets(&self) -> Result<Vec<(String, Config)>> {
        let base = self.config()?;
        if self.targets.is_empty() {
            return Ok(vec![(base.server.to_string(), base)]);
        }
        self.targets
            .iter()
            .enumerate()
            .map(|(index, spec)| {
                target(spec, index, self, &base).map_err(|e| anyhow!("--target {spec}: {e}"))
            })
            .collect()
    }
}

/// A paced load's schedule from its parts.
fn schedule(
    rate: Option<f64>,
    steps: Vec<RateStep>,
    diurnal: Option<Diurnal>,
) -> Result<Option<RateSchedule>> {
    match rate {
        Some(base) => Ok(Some(RateSchedule {
            base,
            steps,
            diurnal,
        })),
        None if steps.is_empty() && diurnal.is_none() => Ok(None),
        None => {
            bail!("a rate step or a diurnal pattern changes a rate: give --rate (or rate=) too")
        }
    }
}

/// The config of `spec` (KEY=VALUE,...) over `base`; unnamed targets are called by position.
fn target(spec: &str, index: usize, args: &KvArgs, base: &Config) -> Result<(String, Config)> {
    let mut config = base.clone();
    let mut name = format!("target-{}", index + 1);
    let (mut rate, mut steps, mut diurnal) = (args.rate, args.rate_steps.clone(), args.diurnal);
    for setting in spec.split(',').filter(|s| !s.trim().is_empty()) {
        let Some((key, value)) = setting.split_once('=') else {
            bail!("\"{setting}\" is not KEY=VALUE");
        };
        let (key, value) = (key.trim(), value.trim());
        let bad = |e: String| anyhow!("{key}={value}: {e}");
        fn number<T: std::str::FromStr>(value: &str) -> Result<T, String> {
            value
                .parse()
                .map_err(|_| format!("expected a number, found \"{value}\""))
        }
        match key {
            "name" => name = value.to_string(),
            "server" => config.server = value.parse().map_err(|e: ArgError| bad(e.to_string()))?,
            "connections" => config.connections = number(value).map_err(bad)?,
            "pipeline" => config.pipeline = number(value).map_err(bad)?,
            "threads" => config.threads = number(value).map_err(bad)?,
            "keys" => config.keys = number(value).map_err(bad)?,
            "key-bytes" => config.key_bytes = number(value).map_err(bad)?,
            "value-bytes" => {
                config.value_bytes =
                    usize::try_from(parse_bytes(value).map_err(|e| bad(e.to_string()))?)
                        .map_err(|_| bad("too large".into()))?
            }
            "get-ratio" => config.get_ratio = number(value).map_err(bad)?,
            "delete-ratio" => config.delete_ratio = number(value).map_err(bad)?,
            "miss-ratio" => config.miss_ratio = number(value).map_err(bad)?,
            "distribution" => {
                config.distribution = value.parse().map_err(|e: ArgError| bad(e.to_string()))?
            }
            "seed" => config.seed = number(value).map_err(bad)?,
            "rate" => rate = Some(number(value).map_err(bad)?),
            "rate-step" => {
                steps = value
                    .split('+')
                    .map(str::parse)
                    .collect::<Result<_, ArgError>>()
                    .map_err(|e| bad(e.to_string()))?
            }
            "diurnal" => diurnal = Some(value.parse().map_err(|e: ArgError| bad(e.to_string()))?),
            _ => bail!(
                "unknown key \"{key}\"; expected name, server, connections, pipeline, threads, \
                 keys, key-bytes, value-bytes, get-ratio, delete-ratio, miss-ratio, \
                 distribution, rate, rate-step, diurnal or seed"
            ),
        }
    }
    config.rate = schedule(rate, steps, diurnal)?;
    Ok((name, config))
}

pub fn run(command: &LoadgenCommand, sink: &mut Sink) -> Result<()> {
    let args = match command {
        LoadgenCommand::Kv(args) => args,
        LoadgenCommand::Block(args) => return run_block_command(args, sink),
    };
    let targets = args.targets()?;
    let configs: Vec<Config> = targets.iter().map(|(_, config)| config.clone()).collect();
    let progress = Progress::new(&configs[0]);
    let names: Vec<&str> = targets.iter().map(|(name, _)| name.as_str()).collect();
    let several = !args.targets.is_empty();
    let stream = |position: usize, interval: IntervalReport| {
        print_interval(several.then(|| names[position]), &interval)
    };
    let streaming: Option<&(dyn Fn(usize, IntervalReport) + Sync)> =
        (args.stream && matches!(sink, Sink::Print)).then_some(&stream);
    let outcome =
        heterarchy_loadgen::run_streaming(&configs, |phase| progress.enter(phase), streaming);
    progress.finish();
    let reports = outcome?;
    let named: Vec<TargetReport> = targets
        .iter()
        .zip(&reports)
        .map(|((name, config), report)| TargetReport {
            target: name,
            server: config.server.to_string(),
            report,
        })
        .collect();
    let summary = summary_table(&named);
    let series = series_table(&named);
    match args.format {
        // One document: a report, or a list of named ones with several targets.
        Format::Json if args.targets.is_empty() => sink.json(&reports[0])?,
        Format::Json => sink.json(&named)?,
        Format::Csv if args.interval.is_some() => sink.text(&series.to_csv()),
        Format::Csv => sink.text(&summary.to_csv()),
        Format::Table => {
            sink.text(&summary.to_text());
            if args.interval.is_some() {
                sink.text(&format!("\n{}", series.to_text()));
            }
        }
    }
    // Before the error check: a report of a run whose replies went wrong shows when they did.
    write_report(args.report.as_deref(), || {
        kv_html(&named, &summary, &series)
    })?;
    for ((_, config), report) in targets.iter().zip(&reports) {
        if report.errors > 0 {
            bail!(
                "{} of {} requests to {} got an unexpected reply; the first: {}",
                report.errors,
                report.ops,
                config.server,
                report.first_error.as_deref().unwrap_or("")
            );
        }
    }
    Ok(())
}

/// The `loadgen kv --report` page: latency percentiles by target, throughput and p99 over
/// time when the run kept a series, and the tables.
fn kv_html(reports: &[TargetReport], summary: &Table, series: &Table) -> heterarchy_report::Report {
    let mut html = heterarchy_report::Report::new("heterarchy loadgen kv");
    if let Some(first) = reports.first() {
        html.paragraph(&format!(
            "{} s measured against {}.",
            first.report.duration_secs,
            reports
                .iter()
                .map(|named| if named.target == named.server {
                    named.server.clone()
                } else {
                    format!("{} ({})", named.target, named.server)
                })
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    html.table(&summary.headers(), summary.rows());
    let mut latency = BarChart::new(
        "Latency percentiles",
        "percentile",
        "latency (µs, log scale)",
        ["p50", "p90", "p99", "p99.9", "max"]
            .map(String::from)
            .to_vec(),
    );
    // The tail is orders of magnitude above the median.
    latency.y_log = true;
    for named in reports {
        let report = named.report;
        latency.series.push(Bars::new(
            named.target,
            vec![
                report.latency_us_p50,
                report.latency_us_p90,
                report.latency_us_p99,
                report.latency_us_p999,
                report.latency_us_max,
            ],
        ));
    }
    html.chart(&latency);
    if reports.iter().all(|named| named.report.series.is_empty()) {
        html.paragraph("Run with --interval to chart throughput and p99 over time.");
        return html;
    }
    let over_time = |title: &str, y_label: &str, pick: fn(&IntervalReport) -> f64| {
        let mut chart = LineChart::new(title, "time into the measured run (s)", y_label);
        for named in reports {
            chart.series.push(Series::new(
                named.target,
                named
                    .report
                    .series
                    .iter()
                    .map(|interval| (interval.start_secs, pick(interval)))
                    .collect(),
            ));
        }
        chart
    };
    html.heading("Over time")
        .chart(&over_time(
            "Throughput per interval",
            "throughput (requests/s)",
            |interval| interval.ops_per_sec,
        ))
        .chart(&over_time(
            "p99 latency per interval",
            "p99 latency (µs)",
            |interval| interval.latency_us_p99,
        ))
        .table(&series.headers(), series.rows());
    html
}

/// Each interval of each target: when it starts, its throughput and p99.
fn series_table(reports: &[TargetReport]) -> Table {
    let mut table = Table::new(&["target", "start_secs", "ops_per_sec", "p99_us"]);
    for named in reports {
        for interval in &named.report.series {
            table.row(vec![
                named.target.to_string(),
                format!("{:.1}", interval.start_secs),
                format!("{:.0}", interval.ops_per_sec),
                format!("{:.1}", interval.latency_us_p99),
            ]);
        }
    }
    table
}

fn summary_table(reports: &[TargetReport]) -> Table {
    let mut table = Table::new(&[
        "target",
        "connections",
        "pipeline",
        "ops",
        "ops_per_sec",
        "get_hits",
        "get_misses",
        "sets",
        "deletes",
        "errors",
        "p50_us",
        "p90_us",
        "p99_us",
        "p999_us",
        "max_us",
    ]);
    for named in reports {
        let report = named.report;
        table.row(vec![
            named.target.to_string(),
            report.connections.to_string(),
            report.pipeline.to_string(),
            report.ops.to_string(),
            format!("{:.0}", report.ops_per_sec),
            report.get_hits.to_string(),
            report.get_misses.to_string(),
            report.sets.to_string(),
            report.deletes.to_string(),
            report.errors.to_string(),
            format!("{:.1}", report.latency_us_p50),
            format!("{:.1}", report.latency_us_p90),
            format!("{:.1}", report.latency_us_p99),
            format!("{:.1}", report.latency_us_p999),
            format!("{:.1}", report.latency_us_max),
        ]);
    }
    table
}

/// The run's progress on a terminal: a spinner while prefilling, then a bar over the warm-up
/// and the measured time. A ticker thread moves the bar, so the event loop never touches it;
/// off a terminal the bar is hidden and no thread starts.
struct Progress {
    bar: ProgressBar,
    keys: u64,
    load_millis: u64,
}

impl Progress {
    fn new(config: &Config) -> Progress {
        let load_millis = (config.warmup + config.duration).as_millis();
        Progress {
            bar: ProgressBar::new_spinner(),
            keys: config.keys,
            load_millis: u64::try_from(load_millis).unwrap_or(u64::MAX),
        }
    }

    fn enter(&self, phase: Phase) {
        if self.bar.is_hidden() {
            return;
        }
        match phase {
            Phase::Prefill => {
                self.bar
                    .set_message(format!("prefilling {} keys", self.keys));
                self.bar.enable_steady_tick(Duration::from_millis(200));
            }
            Phase::Load => {
                self.bar.disable_steady_tick();
                self.bar.reset_elapsed();
                self.bar.set_length(self.load_millis);
                self.bar.set_style(
                    ProgressStyle::with_template("{msg} [{bar:40}] {elapsed}")
                        .expect("valid template")
                        .progress_chars("=> "),
                );
                self.bar.set_message("warm-up and measured time");
                let bar = self.bar.clone();
                let start = Instant::now();
                thread::spawn(move || {
                    while !bar.is_finished() {
                        let elapsed =
                            u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
                        bar.set_position(elapsed);
                        thread::sleep(Duration::from_millis(250));
                    }
                });
            }
        }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
