//! `heterarchy replay`: a block trace's reads and writes against a live cached volume, over
//! NBD or in this process (seed 002 §4.2; the engine is `heterarchy_loadgen::replay`).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;

use heterarchy_loadgen::replay::{
    replay, LatencySummary, Pacing, ReplayOptions, ReplayReport, ReplayTarget,
};
use heterarchy_server::config::{ExportConfig, ServeConfig};
use heterarchy_trace::read::open_block_records;
use heterarchy_volume::Volume;

use crate::output::{write_report, Format, Sink, Table};
use crate::trace_args::TraceArgs;

/// Lanes of a timed replay unless told otherwise.
const DEFAULT_LANES: usize = 64;

/// Arguments of `heterarchy replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub trace: TraceArgs,
    /// A served volume: nbd://HOST:PORT/EXPORT.
    #[arg(long, conflicts_with = "volume", required_unless_present = "volume")]
    pub to: Option<String>,
    /// A serve config (TOML) whose cached `[[export]]` is opened in this process.
    #[arg(long)]
    pub volume: Option<PathBuf>,
    /// Which `[[export]]` of --volume (default: the only cached one).
    #[arg(long, requires = "volume")]
    pub export: Option<String>,
    /// Timestamps are divided by this.
    #[arg(long, default_value_t = 1.0, conflicts_with = "outstanding")]
    pub speedup: f64,
    /// Keep this many I/Os outstanding, ignoring timestamps (closed loop).
    #[arg(long)]
    pub outstanding: Option<usize>,
    /// I/Os outstanding at most when following timestamps.
    #[arg(long, default_value_t = DEFAULT_LANES)]
    pub lanes: usize,
    /// Replay only the first N I/Os.
    #[arg(long)]
    pub limit: Option<u64>,
    /// Following timestamps, issue the next I/O at once whenever none is outstanding (the
    /// thesis' replayer: idle time is skipped, bursts keep their shape).
    #[arg(long, conflicts_with = "outstanding")]
    pub skip_idle: bool,
    /// `table` or `json`.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also write an HTML report: the tables, throughput over time and latency by percentile.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// Runs `heterarchy replay`.
pub fn run(args: &ReplayArgs, sink: &mut Sink) -> Result<()> {
    let options = ReplayOptions {
        pacing: match args.outstanding {
            Some(_) => Pacing::ClosedLoop,
            None => Pacing::Timed {
                speedup: args.speedup,
            },
        },
        lanes: args.outstanding.unwrap_or(args.lanes),
        limit: args.limit,
        skip_idle: args.skip_idle,
    };
    let (target, volume) = match (&args.to, &args.volume) {
        (Some(url), _) => (
            ReplayTarget::nbd(url).map_err(|e| anyhow!("--to: {e}"))?,
            None,
        ),
        (None, Some(path)) => {
            let volume = Arc::new(open_volume(path, args.export.as_deref())?);
            (ReplayTarget::Volume(Arc::clone(&volume)), Some(volume))
        }
        (None, None) => bail!("give --to nbd://HOST:PORT/EXPORT or --volume CONFIG.toml"),
    };
    let source = args.trace.source()?;
    let mut records = open_block_records(&source.input, &source.options)?;
    let replayed = replay(records.as_mut(), &target, &options);
    if let Some(volume) = volume {
        volume
            .shut_down()
            .map_err(|e| anyhow!("closing the volume: {e}"))?;
    }
    let report = replayed.map_err(|e| anyhow!("{e}"))?;
    if report.requests == 0 {
        bail!(
            "{}: no reads or writes to replay: expected a block trace with data",
            source.input.name().display()
        );
    }
    match args.format {
        Format::Table => sink.text(&to_text(&report)),
        Format::Csv | Format::Json => sink.json(&report)?,
    }
    write_report(args.report.as_deref(), || to_html(&report))?;
    Ok(())
}

/// The HTML report: the tables, MB/s over the run, and latency at each percentile by op.
fn to_html(report: &ReplayReport) -> heterarchy_report::Report {
    use heterarchy_report::{LineChart, Report, Series};
    let mut html = Report::new("heterarchy replay");
    html.paragraph(&format!(
        "{} I/Os against {} in {:.2} s: {:.0} IOPS, {:.2} MB/s",
        report.requests, report.target, report.duration_s, report.iops, report.mb_per_s
    ));
    for table in tables(report) {
        html.table(&table.headers(), table.rows());
    }
    let mut throughput = LineChart::new("Throughput over the replay", "time, s", "MB/s");
    throughput.series.push(Series {
        name: "read and write".into(),
        points: report.throughput_series.clone(),
    });
    html.chart(&throughput);
    let mut latency = LineChart::new("Latency by percentile", "percentile", "latency, us");
    for (name, summary) in [
        ("all", &report.all),
        ("read", &report.reads),
        ("write", &report.writes),
    ] {
        if summary.count > 0 {
            latency.series.push(Series {
                name: name.into(),
                points: vec![
                    (50.0, summary.p50_us),
                    (90.0, summary.p90_us),
                    (99.0, summary.p99_us),
                    (99.9, summary.p999_us),
                ],
            });
        }
    }
    html.chart(&latency);
    html
}

/// The cached export `name` (or the only one) of the serve config at `path`, opened.
fn open_volume(path: &std::path::Path, name: Option<&str>) -> Result<Volume> {
    let config = ServeConfig::from_file(path).map_err(|e| anyhow!("--volume: {e}"))?;
    let cached: Vec<_> = config
        .export
        .iter()
        .filter_map(|export| match export {
            ExportConfig::Cached(volume) => Some(volume),
            ExportConfig::Staged(_) | ExportConfig::Poly(_) => None,
        })
        .filter(|volume| name.is_none_or(|name| volume.name == name))
        .collect();
    let volume = match (cached.as_slice(), name) {
        ([one], _) => *one,
        ([], Some(name)) => bail!(
            "--export {name}: {} has no cached [[export]] of that name",
            path.display()
        ),
        ([], None) => bail!("--volume: {} has no cached [[export]]", path.display()),
        (_, _) => bail!(
            "--volume: {} has several cached exports; name one with --export",
            path.display()
        ),
    };
    let throttles = config.throttles().map_err(|e| anyhow!("--volume: {e}"))?;
    Volume::open_with(volume, &throttles)
        .map_err(|e| anyhow!("{e}"))
        .with_context(|| format!("--volume: export {}", volume.name))
}

/// The report's tables: latency by op, then (in process) tiers and devices.
fn tables(report: &ReplayReport) -> Vec<Table> {
    let mut latency = Table::new(&[
        "op", "count", "mean_us", "p50_us", "p90_us", "p99_us", "p999_us", "max_us",
    ]);
    for (name, summary) in [
        ("all", &report.all),
        ("read", &report.reads),
        ("write", &report.writes),
    ] {
        latency.row(latency_row(name, summary));
    }
    let mut all = vec![latency];
    if !report.tiers.is_empty() {
        let mut tiers = Table::new(&["tier", "storage", "hits"]);
        for tier in &report.tiers {
            tiers.row(vec![
                tier.tier.to_string(),
                tier.storage.clone(),
                tier.hits.to_string(),
            ]);
        }
        let mut devices = Table::new(&["device", "storage", "read_mb_per_s", "write_mb_per_s"]);
        for device in &report.devices {
            devices.row(vec![
                device.role.clone(),
                device.storage.clone(),
                format!("{:.2}", device.read_mb_per_s),
                format!("{:.2}", device.write_mb_per_s),
            ]);
        }
        all.extend([tiers, devices]);
    }
    all
}

/// The report for people: the tables, then a summary line.
fn to_text(report: &ReplayReport) -> String {
    let mut text: String = tables(report).iter().map(Table::to_text).collect();
    text += &format!(
        "replayed {} I/Os against {} in {:.2} s: {:.0} IOPS, {:.2} MB/s; {} late by over 1 ms{}{}\n",
        report.requests,
        report.target,
        report.duration_s,
        report.iops,
        report.mb_per_s,
        report.late_requests,
        if report.options.skip_idle {
            format!(
                "; {} issued early, {:.2} s of idle time skipped",
                report.issued_early, report.idle_skipped_s
            )
        } else {
            String::new()
        },
        match (report.line_requests, report.misses) {
            (Some(lines), Some(misses)) if lines > 0 =>
                format!("; line hit ratio {:.4}", 1.0 - misses as f64 / lines as f64),
            _ => String::new(),
        }
    );
    text
}

fn latency_row(name: &str, summary: &LatencySummary) -> Vec<String> {
    let mut row = vec![name.to_string(), summary.count.to_string()];
    row.extend(
        [
            summary.mean_us,
            summary.p50_us,
            summary.p90_us,
            summary.p99_us,
            summary.p999_us,
            summary.max_us,
        ]
        .map(|us| format!("{us:.1}")),
    );
    row
}
