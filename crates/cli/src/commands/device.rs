//! `heterarchy device`: the device models of docs/architecture.md, "Device models" (seed 000 chapters 2–3)
//! from the command line — list the presets, print one as a starting point for a custom device,
//! and probe what a device does at each queue depth, as fio would measure it.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use heterarchy_device::presets::{preset, preset_names, preset_toml, resolve_device};
use heterarchy_device::{run_probe, DeviceKind, DeviceSpec, DirectionSpec, Probe, ProbeResult};
use heterarchy_engine::staging::StagingScheme;
use heterarchy_report::{LineChart, Report, Series};
use serde::Serialize;

use crate::output::{write_report, Format, Sink, Table};
use crate::size::{human_bytes, parse_bytes};

/// Deepest queue a probe accepts: NVMe's largest queue (64 Ki entries), far past any device's
/// saturation point.
const MAX_QUEUE_DEPTH: u32 = 65_536;

/// Subcommands of `heterarchy device`.
#[derive(Subcommand, Debug)]
pub enum DeviceCommand {
    /// List the device presets: latency, bandwidth, IOPS, granularity, capacity and cost.
    List(ListArgs),
    /// Print a device's TOML (a preset's is a starting point for a custom device).
    Show(ShowArgs),
    /// What the model predicts at each queue depth: mean latency, IOPS, bandwidth.
    Probe(ProbeArgs),
    /// Measure, on this machine, the CPU costs the timed simulator charges the block stacks on
    /// PM (the BTT's software path, a staging cache's decision, a 4 KiB DRAM copy): the
    /// numbers to put in `crates/sim/src/staging/costs.rs` or a run's `StackCosts`.
    StagingCosts(StagingCostsArgs),
    /// Measure, on this machine, what compressing and decompressing a 4 KiB page costs with
    /// each codec at each compressibility (seed 004's compressed store; the timed simulator
    /// charges these), and the 512 B sectors a page takes.
    CodecCosts(CodecCostsArgs),
}

/// Arguments of `heterarchy device codec-costs`.
#[derive(Args, Debug)]
pub struct CodecCostsArgs {
    /// Codecs, comma-separated: lz4, zstd.
    #[arg(long, default_value = "lz4,zstd")]
    pub codec: String,
    /// Shares of each page that compress away, comma-separated, in [0, 1].
    #[arg(long, default_value = "0,0.25,0.5,0.75")]
    pub compressibility: String,
    /// Pages timed for each cost.
    #[arg(long, default_value_t = 20_000)]
    pub pages: usize,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// Arguments of `heterarchy device staging-costs`.
#[derive(Args, Debug)]
pub struct StagingCostsArgs {
    /// Operations timed for each cost.
    #[arg(long, default_value_t = 200_000)]
    pub rounds: u32,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// Arguments of `heterarchy device list`.
#[derive(Args, Debug)]
pub struct ListArgs {
    /// How to print the presets: a table for people, CSV or JSON for programs.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// Arguments of `heterarchy device show`.
#[derive(Args, Debug)]
pub struct ShowArgs {
    /// A preset name (see `heterarchy device list`) or a device .toml file.
    pub device: String,
}

/// Arguments of `heterarchy device probe`.
#[derive(Args, Debug)]
pub struct ProbeArgs {
    /// A preset name (see `heterarchy device list`) or a device .toml file.
    pub device: String,
    /// What the clients issue: `read`, `write`, or `mix:F` with F the fraction of writes.
    #[arg(long, default_value = "read")]
    pub op: String,
    /// Size of every access (4096, 4k, 1mb).
    #[arg(long, default_value = "4k")]
    pub size: String,
    /// Queue depths (outstanding accesses), comma-separated.
    #[arg(long, default_value = "1,8,64")]
    pub qd: String,
    /// Byte offset of every access inside its granule, to measure misalignment (0: aligned).
    #[arg(long, default_value = "0")]
    pub offset: String,
    /// Each client walks consecutive addresses instead of random ones.
    #[arg(long)]
    pub sequential: bool,
    /// Bytes written before the probe, as on a device long in service (flash garbage
    /// collection), e.g. 5TB.
    #[arg(long, default_value = "0")]
    pub preconditioned: String,
    /// Seed of the random addresses and of the read/write choice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How to print the results: a table for people, CSV or JSON for programs.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also write an HTML report: mean latency, IOPS and bandwidth against queue depth, and
    /// the table.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// Runs the subcommand.
pub fn run(command: &DeviceCommand, sink: &mut Sink) -> Result<()> {
    match command {
        DeviceCommand::List(args) => list(args, sink),
        DeviceCommand::Show(args) => show(args, sink),
        DeviceCommand::Probe(args) => probe(args, sink),
        DeviceCommand::StagingCosts(args) => staging_costs(args, sink),
        DeviceCommand::CodecCosts(args) => codec_costs(args, sink),
    }
}

fn codec_costs(args: &CodecCostsArgs, sink: &mut Sink) -> Result<()> {
    use heterarchy_device::codec::{measure, Codec};
    let codecs = args
        .codec
        .split(',')
        .map(|name| Codec::parse(name).map_err(|e| anyhow!("--codec: {e}")))
        .collect::<Result<Vec<_>>>()?;
    let shares = args
        .compressibility
        .split(',')
        .map(|text| {
            text.trim()
                .parse::<f64>()
                .ok()
                .filter(|share| (0.0..=1.0).contains(share))
                .ok_or_else(|| anyhow!("--compressibility: \"{text}\" is not a share in [0, 1]"))
        })
        .collect::<Result<Vec<_>>>()?;
    if args.pages == 0 {
        bail!("--pages 0: expected at least one page to time");
    }
    let costs: Vec<_> = codecs
        .iter()
        .flat_map(|&codec| {
            shares
                .iter()
                .map(move |&share| measure(codec, share, args.pages))
        })
        .collect();
    let mut table = Table::new(&[
        "codec",
        "compressibility",
        "compress_us_per_kib",
        "decompress_us_per_kib",
        "mean_sectors",
    ]);
    for cost in &costs {
        table.row(vec![
            cost.codec.name().to_string(),
            format!("{}", cost.compressibility),
            format!("{:.4}", cost.compress_us_per_kib),
            format!("{:.4}", cost.decompress_us_per_kib),
            format!("{:.2}", cost.mean_sectors),
        ]);
    }
    sink.render(args.format, &table, &costs)?;
    if args.format == Format::Table {
        sink.line(
            "seed 004 Fig 4c, LZ78 on a 2.2 GHz Azure VM: 11 us to compress and 4 us to \
             decompress a 4 KiB page (2.75 and 1.0 us per KiB)",
        );
    }
    Ok(())
}

fn staging_costs(args: &StagingCostsArgs, sink: &mut Sink) -> Result<()> {
    let costs = heterarchy_sim::staging::measure_costs(args.rounds)?;
    let mut table = Table::new(&["cost", "ns", "from"]);
    for (name, ns, from) in [
        (
            "submit_ns",
            costs.submit_ns,
            "the Caiti path and seed 001 Fig 7",
        ),
        ("lookup_ns", costs.lookup_ns, "measured"),
    ] {
        table.row(vec![name.to_string(), format!("{ns:.1}"), from.to_string()]);
    }
    for scheme in StagingScheme::ALL {
        if scheme != StagingScheme::None {
            table.row(vec![
                format!("write_decision_ns.{}", scheme.name().replace('-', "_")),
                format!("{:.1}", costs.write_decision_ns.of(scheme)),
                "measured".to_string(),
            ]);
        }
    }
    for (name, ns, from) in [
        ("copy_ns", costs.copy_ns, "measured"),
        ("lock_ns", costs.lock_ns, "measured"),
        ("btt_write_ns", costs.btt_write_ns, "measured"),
        ("btt_read_ns", costs.btt_read_ns, "measured"),
        ("persist_ns", costs.persist_ns, "set"),
    ] {
        table.row(vec![name.to_string(), format!("{ns:.1}"), from.to_string()]);
    }
    sink.render(args.format, &table, &costs)?;
    Ok(())
}

/// One preset as `device list --format json` prints it.
#[derive(Serialize)]
struct ListedDevice {
    name: String,
    kind: &'static str,
    read_latency_us: f64,
    write_latency_us: f64,
    read_bandwidth_gb_s: f64,
    write_bandwidth_gb_s: f64,
    max_read_iops: f64,
    max_write_iops: f64,
    granularity_bytes: u32,
    capacity_gb: Option<f64>,
    cost_per_gb: Option<f64>,
    description: String,
}

impl ListedDevice {
    fn new(spec: &DeviceSpec) -> ListedDevice {
        ListedDevice {
            name: spec.name.clone(),
            kind: match spec.kind {
                DeviceKind::Memory => "memory",
                DeviceKind::Block => "block",
            },
            read_latency_us: spec.read.latency_ns / 1e3,
            write_latency_us: spec.write.latency_ns / 1e3,
            read_bandwidth_gb_s: spec.read.bandwidth_gb_s,
            write_bandwidth_gb_s: spec.write.bandwidth_gb_s,
            max_read_iops: max_iops(spec, &spec.read),
            max_write_iops: max_iops(spec, &spec.write),
            granularity_bytes: spec.granularity_bytes,
            capacity_gb: spec.capacity_gb,
            cost_per_gb: spec.cost_per_gb,
            description: spec.description.clone(),
        }
    }
}

/// Most accesses per second in one direction, each of one granule: the IOPS cap or the
/// bandwidth over the granularity, whichever binds first.
fn max_iops(spec: &DeviceSpec, direction: &DirectionSpec) -> f64 {
    let bandwidth_bound = direction.bandwidth_gb_s * 1e9 / f64::from(spec.granularity_bytes);
    direction
        .max_iops
        .map_or(bandwidth_bound, |cap| cap.min(bandwidth_bound))
}

fn list(args: &ListArgs, sink: &mut Sink) -> Result<()> {
    let devices: Vec<ListedDevice> = preset_names()
        .filter_map(preset)
        .map(|spec| ListedDevice::new(&spec))
        .collect();
    let for_people = args.format == Format::Table;
    let number = |value: f64| {
        if for_people {
            format!("{value:.3}")
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_string()
        } else {
            value.to_string()
        }
    };
    let iops = |value: f64| {
        if for_people {
            human_count(value)
        } else {
            value.to_string()
        }
    };
    let optional = |value: Option<f64>| match value {
        Some(value) => number(value),
        None if for_people => "-".to_string(),
        None => String::new(),
    };
    let mut table = Table::new(&[
        "name",
        "kind",
        "read_latency_us",
        "write_latency_us",
        "read_bandwidth_gb_s",
        "write_bandwidth_gb_s",
        "max_read_iops",
        "max_write_iops",
        "granularity_bytes",
        "capacity_gb",
        "cost_per_gb",
        "description",
    ]);
    for device in &devices {
        table.row(vec![
            device.name.clone(),
            device.kind.to_string(),
            number(device.read_latency_us),
            number(device.write_latency_us),
            number(device.read_bandwidth_gb_s),
            number(device.write_bandwidth_gb_s),
            iops(device.max_read_iops),
            iops(device.max_write_iops),
            device.granularity_bytes.to_string(),
            optional(device.capacity_gb),
            optional(device.cost_per_gb),
            device.description.clone(),
        ]);
    }
    sink.render(args.format, &table, &devices)?;
    Ok(())
}

/// Counts for people, to three significant digits or so: 575K, 26.6M, 234M.
fn human_count(value: f64) -> String {
    if value >= 1e8 {
        format!("{:.0}M", value / 1e6)
    } else if value >= 1e7 {
        format!("{:.1}M", value / 1e6)
    } else if value >= 1e6 {
        format!("{:.2}M", value / 1e6)
    } else if value >= 1e4 {
        format!("{:.0}K", value / 1e3)
    } else {
        format!("{value:.0}")
    }
}

fn show(args: &ShowArgs, sink: &mut Sink) -> Result<()> {
    if let Some(text) = preset_toml(&args.device) {
        sink.text(text);
        return Ok(());
    }
    // A device file: check it the way a config naming it would, then print it as written.
    resolve_device(&args.device, None)?;
    let text = std::fs::read_to_string(&args.device)
        .with_context(|| format!("{}: cannot read", args.device))?;
    sink.text(&text);
    Ok(())
}

/// `device probe --format json`: what was probed, and one result per queue depth.
#[derive(Serialize)]
struct ProbeReport {
    device: String,
    op: String,
    write_fraction: f64,
    size_bytes: u32,
    offset_bytes: u32,
    sequential: bool,
    preconditioned_bytes: u64,
    seed: u64,
    results: Vec<ProbePoint>,
}

/// One queue depth's prediction.
#[derive(Serialize)]
struct ProbePoint {
    queue_depth: u32,
    mean_latency_us: f64,
    iops: f64,
    bandwidth_bytes_per_s: f64,
}

impl From<ProbeResult> for ProbePoint {
    fn from(result: ProbeResult) -> ProbePoint {
        ProbePoint {
            queue_depth: result.queue_depth,
            mean_latency_us: result.mean_latency_ns / 1e3,
            iops: result.iops,
            bandwidth_bytes_per_s: result.bandwidth_bytes_per_s,
        }
    }
}

fn probe(args: &ProbeArgs, sink: &mut Sink) -> Result<()> {
    let spec = resolve_device(&args.device, None)?;
    let write_fraction = parse_op(&args.op)?;
    let size_bytes = parse_size(&args.size)?;
    let queue_depths = parse_queue_depths(&args.qd)?;
    let offset_bytes = parse_offset(&args.offset, spec.granularity_bytes)?;
    let preconditioned_bytes =
        parse_bytes(&args.preconditioned).map_err(|e| anyhow!("--preconditioned: {e}"))?;

    let results: Vec<ProbePoint> = queue_depths
        .iter()
        .map(|&queue_depth| {
            // Deep queues need more accesses before the start-up burst stops weighing on the
            // mean: measure at least 20 rounds of the queue after 2 rounds of warm-up.
            let defaults = Probe::default();
            let probe = Probe {
                write_fraction,
                bytes: size_bytes,
                queue_depth,
                misalignment_bytes: offset_bytes,
                sequential: args.sequential,
                one_stream: false,
                accesses: defaults.accesses.max(20 * u64::from(queue_depth)),
                warmup_accesses: defaults.warmup_accesses.max(2 * u64::from(queue_depth)),
                preconditioned_bytes,
                background: None,
                seed: args.seed,
            };
            run_probe(&spec, &probe).into()
        })
        .collect();

    let for_people = args.format == Format::Table;
    let table = probe_table(&results, for_people);
    let report = ProbeReport {
        device: spec.name.clone(),
        op: args.op.trim().to_ascii_lowercase(),
        write_fraction,
        size_bytes,
        offset_bytes,
        sequential: args.sequential,
        preconditioned_bytes,
        seed: args.seed,
        results,
    };
    if for_people {
        sink.line(&describe(&report));
        sink.line("");
    }
    sink.render(args.format, &table, &report)?;
    write_report(args.report.as_deref(), || probe_html(&report))
}

/// One row per queue depth: for people (bandwidth as `2.36 GB/s`), or numbers as they are.
fn probe_table(results: &[ProbePoint], for_people: bool) -> Table {
    let mut table = if for_people {
        Table::new(&["qd", "mean_latency_us", "iops", "bandwidth"])
    } else {
        Table::new(&[
            "queue_depth",
            "mean_latency_us",
            "iops",
            "bandwidth_bytes_per_s",
        ])
    };
    for point in results {
        table.row(if for_people {
            vec![
                point.queue_depth.to_string(),
                format!("{:.3}", point.mean_latency_us),
                format!("{:.0}", point.iops),
                human_rate(point.bandwidth_bytes_per_s),
            ]
        } else {
            vec![
                point.queue_depth.to_string(),
                point.mean_latency_us.to_string(),
                point.iops.to_string(),
                point.bandwidth_bytes_per_s.to_string(),
            ]
        });
    }
    table
}

/// The `device probe --report` page: one chart per measure against queue depth.
fn probe_html(report: &ProbeReport) -> Report {
    let mut html = Report::new("heterarchy device probe");
    html.paragraph(&describe(report));
    let depths: Vec<f64> = report
        .results
        .iter()
        .map(|point| f64::from(point.queue_depth))
        .collect();
    // Queue depths are usually powers of two spanning decades.
    let log = depths.iter().copied().fold(f64::NAN, f64::max)
        >= 10.0 * depths.iter().copied().fold(f64::NAN, f64::min);
    let x_label = if log {
        "queue depth (outstanding accesses, log scale)"
    } else {
        "queue depth (outstanding accesses)"
    };
    let chart = |title: &str, y_label: &str, measure: fn(&ProbePoint) -> f64| {
        let mut chart = LineChart::new(&format!("{title} by queue depth"), x_label, y_label);
        chart.x_log = log;
        chart.series.push(Series::new(
            &format!("{} {}", report.device, report.op),
            depths
                .iter()
                .zip(&report.results)
                .map(|(&depth, point)| (depth, measure(point)))
                .collect(),
        ));
        chart
    };
    html.chart(&chart("Mean latency", "mean latency (µs)", |p| {
        p.mean_latency_us
    }))
    .chart(&chart("Throughput", "IOPS (accesses/s)", |p| p.iops))
    .chart(&chart("Bandwidth", "bandwidth (MB/s)", |p| {
        p.bandwidth_bytes_per_s / 1e6
    }));
    let table = probe_table(&report.results, true);
    html.table(&table.headers(), table.rows());
    html
}

/// One line saying what was probed, above the table.
fn describe(report: &ProbeReport) -> String {
    let pattern = if report.sequential {
        "sequential"
    } else {
        "random"
    };
    let mut line = format!(
        "{}: {pattern} {} of {}",
        report.device,
        report.op,
        human_bytes(u64::from(report.size_bytes))
    );
    if report.offset_bytes > 0 {
        line.push_str(&format!(
            ", {} past alignment",
            human_bytes(u64::from(report.offset_bytes))
        ));
    }
    if report.preconditioned_bytes > 0 {
        line.push_str(&format!(
            ", after {} written",
            human_bytes(report.preconditioned_bytes)
        ));
    }
    line
}

/// Bytes per second for people: 410.0 MB/s, 2.36 GB/s (decimal units, as bandwidths are quoted).
fn human_rate(bytes_per_s: f64) -> String {
    if bytes_per_s >= 1e9 {
        format!("{:.2} GB/s", bytes_per_s / 1e9)
    } else {
        format!("{:.1} MB/s", bytes_per_s / 1e6)
    }
}

/// The fraction of writes `--op` asks for.
fn parse_op(text: &str) -> Result<f64> {
    let lower = text.trim().to_ascii_lowercase();
    let fraction = match lower.as_str() {
        "read" => Some(0.0),
        "write" => Some(1.0),
        _ => lower
            .strip_prefix("mix:")
            .and_then(|fraction| fraction.trim().parse::<f64>().ok())
            .filter(|fraction| (0.0..=1.0).contains(fraction)),
    };
    fraction.ok_or_else(|| {
        anyhow!(
            "--op \"{text}\": expected read, write or mix:F with F the fraction of writes in [0, 1]"
        )
    })
}

fn parse_size(text: &str) -> Result<u32> {
    let bytes = parse_bytes(text).map_err(|e| anyhow!("--size: {e}"))?;
    if bytes == 0 {
        bail!("--size \"{text}\": an access moves at least 1 byte");
    }
    u32::try_from(bytes).map_err(|_| anyhow!("--size \"{text}\": at most 4 GiB - 1 per access"))
}

fn parse_queue_depths(list: &str) -> Result<Vec<u32>> {
    let depths = list
        .split(',')
        .map(str::trim)
        .map(|item| {
            item.parse::<u32>()
                .ok()
                .filter(|depth| (1..=MAX_QUEUE_DEPTH).contains(depth))
                .ok_or_else(|| {
                    anyhow!(
                        "--qd \"{item}\": expected queue depths from 1 to {MAX_QUEUE_DEPTH}, \
                         comma-separated"
                    )
                })
        })
        .collect::<Result<Vec<u32>>>()?;
    Ok(depths)
}

fn parse_offset(text: &str, granularity_bytes: u32) -> Result<u32> {
    let bytes = parse_bytes(text).map_err(|e| anyhow!("--offset: {e}"))?;
    if bytes >= u64::from(granularity_bytes) {
        bail!(
            "--offset \"{text}\": must be less than the device's {granularity_bytes}-byte \
             granularity (it is the offset inside a granule)"
        );
    }
    Ok(bytes as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_is_a_write_fraction() {
        assert_eq!(parse_op("read").unwrap(), 0.0);
        assert_eq!(parse_op("WRITE").unwrap(), 1.0);
        assert_eq!(parse_op("mix:0.3").unwrap(), 0.3);
        for bad in ["mix:1.5", "mix:", "mix:-0.1", "mix:nan", "trim", ""] {
            let error = parse_op(bad).unwrap_err().to_string();
            assert!(error.starts_with("--op"), "{bad}: {error}");
        }
    }

    #[test]
    fn queue_depths_are_positive_and_bounded() {
        assert_eq!(parse_queue_depths("1, 8,64").unwrap(), vec![1, 8, 64]);
        for bad in ["0", "1,,8", "-1", "65537", "eight"] {
            let error = parse_queue_depths(bad).unwrap_err().to_string();
            assert!(error.starts_with("--qd"), "{bad}: {error}");
        }
    }

    #[test]
    fn sizes_and_offsets_are_checked() {
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert!(parse_size("0").is_err());
        assert!(parse_size("4g").is_err());
        assert!(parse_size("4q").unwrap_err().to_string().contains("4q"));
        assert_eq!(parse_offset("3584", 4096).unwrap(), 3584);
        assert!(parse_offset("4k", 4096).is_err());
    }

    #[test]
    fn max_iops_is_the_tighter_limit() {
        let ssd = preset("optane-ssd").unwrap();
        assert_eq!(max_iops(&ssd, &ssd.read), 575_000.0);
        let dram = preset("dram").unwrap();
        assert_eq!(max_iops(&dram, &dram.read), 15e9 / 64.0);
    }

    #[test]
    fn counts_and_rates_read_easily() {
        assert_eq!(human_count(575_000.0), "575K");
        assert_eq!(human_count(234_375_000.0), "234M");
        assert_eq!(human_count(26_562_500.0), "26.6M");
        assert_eq!(human_count(8_984_375.0), "8.98M");
        assert_eq!(human_count(8278.0), "8278");
        assert_eq!(human_rate(2.36e9), "2.36 GB/s");
        assert_eq!(human_rate(4.1e8), "410.0 MB/s");
    }
}
