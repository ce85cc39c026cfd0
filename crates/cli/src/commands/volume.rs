//! `heterarchy volume`: create a cached volume's files, and ask a running server for its stats
//! or to flush (through its HTTP endpoint), or flush a stopped volume's cache directly.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};

use heterarchy_engine::{TierLayout, WriteMode};
use heterarchy_report::{BarChart, Bars, Report};
use heterarchy_volume::{Volume, VolumeConfig, VolumeStats};

use crate::commands::serve::{parse_layout, parse_tiers};
use crate::output::{write_report, Format, Sink, Table};
use crate::size::{human_bytes, parse_bytes};

/// Subcommands of `heterarchy volume`.
#[derive(Subcommand, Debug)]
pub enum VolumeCommand {
    /// Create the backing and cache files and format the cache.
    Create(DevicesArgs),
    /// A running server's volumes: hits, misses, dirty lines, device traffic, NHC state.
    Stats(StatsArgs),
    /// Write dirty lines back: through a running server (--server), or directly.
    Flush(FlushArgs),
}

/// A volume's devices, as `serve nbd` names them.
#[derive(Args, Debug)]
pub struct DevicesArgs {
    /// The capacity device: file:PATH:SIZE, blockdev:PATH, ...
    #[arg(long)]
    pub backing: String,
    /// A cache tier: pmem:PATH:SIZE, file:PATH:SIZE, ...; once per tier, fastest first.
    #[arg(long, required = true)]
    pub cache: Vec<String>,
    /// How cache tiers share lines: inclusive or exclusive.
    #[arg(long, default_value = "inclusive", value_parser = parse_layout)]
    pub layout: TierLayout,
    /// Cache line size: 4k to 64k.
    #[arg(long, default_value = "64k", value_parser = parse_bytes)]
    pub cache_line: u64,
    /// Reformat a cache that holds another volume's dirty lines.
    #[arg(long)]
    pub force: bool,
}

impl DevicesArgs {
    fn config(&self, mode: WriteMode) -> Result<VolumeConfig> {
        let mut config = VolumeConfig::with_tiers(
            "volume",
            self.backing
                .parse()
                .map_err(|e| anyhow!("--backing: {e}"))?,
            parse_tiers(&self.cache)?,
        );
        config.cache_line = self.cache_line;
        config.caching.layout = self.layout;
        config.caching.mode = mode;
        config.force = self.force;
        Ok(config)
    }
}

/// Arguments of `heterarchy volume stats`.
#[derive(Args, Debug)]
pub struct StatsArgs {
    /// The server's metrics address (HOST:PORT of `--metrics`).
    #[arg(long)]
    pub server: String,
    /// Only this export.
    #[arg(long)]
    pub export: Option<String>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also write an HTML report: per export its hit ratio and NHC admission, cache lines
    /// (resident, dirty), device bandwidth, and per-tier and admission tables.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// Arguments of `heterarchy volume flush`.
#[derive(Args, Debug)]
pub struct FlushArgs {
    /// The server's metrics address; without it the devices are opened directly (the server
    /// must be stopped).
    #[arg(long, requires = "export", conflicts_with_all = ["backing", "cache"])]
    pub server: Option<String>,
    /// The export to flush on the server.
    #[arg(long)]
    pub export: Option<String>,
    /// A file holding the server's admin token (its `admin_token_file`), sent as
    /// `Authorization: Bearer TOKEN`: a server POSTs to need one.
    #[arg(long, requires = "server")]
    pub token_file: Option<PathBuf>,
    /// The capacity device (without --server).
    #[arg(long, required_unless_present = "server")]
    pub backing: Option<String>,
    /// A cache tier (without --server); once per tier, fastest first, as the volume was served.
    #[arg(long, required_unless_present = "server")]
    pub cache: Vec<String>,
    #[arg(long, default_value = "64k", value_parser = parse_bytes)]
    pub cache_line: u64,
    /// How the cache tiers share lines, as the volume was served.
    #[arg(long, default_value = "inclusive", value_parser = parse_layout)]
    pub layout: TierLayout,
}

pub fn run(command: &VolumeCommand, sink: &mut Sink) -> Result<()> {
    match command {
        VolumeCommand::Create(args) => {
            // Write-back, so opening keeps any dirty lines a matching cache already holds.
            let volume = Volume::open(&args.config(WriteMode::Wb)?)?;
            let stats = volume.stats();
            volume.shut_down().context("flushing the new volume")?;
            sink.line(&format!(
                "volume of {} with a cache of {} lines of {} ({} found in it)",
                human_bytes(stats.size_bytes),
                stats.slots,
                human_bytes(u64::from(stats.line_bytes)),
                stats.restored_lines
            ));
            Ok(())
        }
        VolumeCommand::Stats(args) => {
            let body = http(&args.server, "GET", "/stats", None)?;
            /// The part of the server's /stats about volumes.
            #[derive(serde::Deserialize)]
            struct Served {
                exports: Vec<VolumeStats>,
            }
            let served: Served =
                serde_json::from_str(&body).context("the server's /stats is not volume stats")?;
            let mut stats = served.exports;
            if let Some(name) = &args.export {
                stats.retain(|s| &s.name == name);
                if stats.is_empty() {
                    bail!("the server has no export named \"{name}\"");
                }
            }
            sink.render(args.format, &stats_table(&stats), &stats)?;
            write_report(args.report.as_deref(), || {
                stats_report(&args.server, &stats)
            })
        }
        VolumeCommand::Flush(args) => {
            let lines = match (&args.server, &args.export) {
                (Some(server), Some(export)) => {
                    let token = args
                        .token_file
                        .as_deref()
                        .map(heterarchy_server::admin::read_token)
                        .transpose()
                        .map_err(|e| anyhow!("--token-file: {e}"))?;
                    let path = format!("/flush?export={export}");
                    let body = http(server, "POST", &path, token.as_deref()).map_err(|e| {
                        if token.is_some() {
                            e
                        } else {
                            anyhow!("{e} (--token-file FILE gives the server's admin token)")
                        }
                    })?;
                    let reply: serde_json::Value = serde_json::from_str(&body)?;
                    reply["lines_written_back"]
                        .as_u64()
                        .ok_or_else(|| anyhow!("flush failed: {body}"))?
                }
                _ => {
                    let devices = DevicesArgs {
                        backing: args.backing.clone().unwrap_or_default(),
                        cache: args.cache.clone(),
                        cache_line: args.cache_line,
                        layout: args.layout,
                        force: false,
                    };
                    let volume = Volume::open(&devices.config(WriteMode::Wb)?)?;
                    volume.shut_down()?
                }
            };
            sink.line(&format!("{lines} dirty lines written back"));
            Ok(())
        }
    }
}

fn stats_table(stats: &[VolumeStats]) -> Table {
    let mut table = Table::new(&[
        "export",
        "mode",
        "size",
        "hits",
        "misses",
        "hit ratio",
        "resident",
        "dirty",
        "tier read MB/s",
        "backing read MB/s",
        "NHC state",
    ]);
    for s in stats {
        table.row(vec![
            s.name.clone(),
            s.mode.to_string(),
            human_bytes(s.size_bytes),
            s.hits.to_string(),
            s.misses.to_string(),
            format!("{:.3}", s.hit_ratio),
            format!("{}/{}", s.resident_lines, s.slots),
            s.dirty_lines.to_string(),
            s.devices[..s.devices.len() - 1]
                .iter()
                .map(|device| format!("{:.1}", device.read_mb_per_s))
                .collect::<Vec<_>>()
                .join(" / "),
            format!("{:.1}", s.devices[s.devices.len() - 1].read_mb_per_s),
            s.admission.as_ref().map_or("-".to_string(), |a| {
                format!(
                    "{} (load_admit {:.2}, data_admit {})",
                    a.state, a.load_admit, a.data_admit
                )
            }),
        ]);
    }
    table
}

/// The `volume stats --report` page.
fn stats_report(server: &str, stats: &[VolumeStats]) -> Report {
    let mut report = Report::new(&format!("heterarchy volume stats: {server}"));
    let table = stats_table(stats);
    report.table(&table.headers(), table.rows());
    let exports: Vec<String> = stats.iter().map(|s| s.name.clone()).collect();
    let mut ratios = BarChart::new(
        "Hit ratio and NHC admission by export",
        "export",
        "fraction",
        exports.clone(),
    );
    ratios.y_range = Some((0.0, 1.0));
    ratios.series.push(Bars::new(
        "hit ratio",
        stats.iter().map(|s| s.hit_ratio).collect(),
    ));
    if stats.iter().any(|s| s.admission.is_some()) {
        // An export without NHC has no load_admit: a gap, not a zero.
        ratios.series.push(Bars::new(
            "NHC load_admit",
            stats
                .iter()
                .map(|s| s.admission.as_ref().map_or(f64::NAN, |a| a.load_admit))
                .collect(),
        ));
    }
    let mut lines = BarChart::new("Cache lines by export", "export", "cache lines", exports);
    for (name, count) in [
        ("slots", (|s| s.slots) as fn(&VolumeStats) -> u64),
        ("resident", |s| s.resident_lines),
        ("dirty", |s| s.dirty_lines),
    ] {
        lines.series.push(Bars::new(
            name,
            stats.iter().map(|s| count(s) as f64).collect(),
        ));
    }
    let devices: Vec<(String, f64, f64)> = stats
        .iter()
        .flat_map(|s| {
            s.devices.iter().map(|device| {
                (
                    format!("{}/{}", s.name, device.role),
                    device.read_mb_per_s,
                    device.write_mb_per_s,
                )
            })
        })
        .collect();
    let mut bandwidth = BarChart::new(
        "Device bandwidth since the volume opened",
        "export/device",
        "bandwidth (MB/s)",
        devices.iter().map(|(name, _, _)| name.clone()).collect(),
    );
    bandwidth.series.push(Bars::new(
        "read",
        devices.iter().map(|&(_, read, _)| read).collect(),
    ));
    bandwidth.series.push(Bars::new(
        "write",
        devices.iter().map(|&(_, _, write)| write).collect(),
    ));
    report.chart(&ratios).chart(&lines).chart(&bandwidth);
    let mut tiers = Table::new(&[
        "export",
        "tier",
        "storage",
        "persistent",
        "slots",
        "resident",
        "dirty",
        "hits",
        "installs",
        "evictions",
    ]);
    for s in stats {
        for tier in &s.tiers {
            tiers.row(vec![
                s.name.clone(),
                tier.tier.to_string(),
                tier.storage.clone(),
                tier.persistent.to_string(),
                tier.slots.to_string(),
                tier.resident_lines.to_string(),
                tier.dirty_lines.to_string(),
                tier.hits.to_string(),
                tier.installs.to_string(),
                tier.evictions.to_string(),
            ]);
        }
    }
    report
        .heading("Tiers")
        .table(&tiers.headers(), tiers.rows());
    let mut admission = Table::new(&["export", "state", "load_admit", "data_admit", "intervals"]);
    for s in stats {
        if let Some(a) = &s.admission {
            admission.row(vec![
                s.name.clone(),
                a.state.clone(),
                format!("{:.3}", a.load_admit),
                a.data_admit.to_string(),
                a.intervals.to_string(),
            ]);
        }
    }
    if !admission.rows().is_empty() {
        report
            .heading("NHC admission")
            .table(&admission.headers(), admission.rows());
    }
    report
}

/// One HTTP/1.0 request to a server's admin endpoint, with its token when given; the body of
/// a 2xx answer.
fn http(server: &str, method: &str, path: &str, token: Option<&str>) -> Result<String> {
    let mut stream =
        TcpStream::connect(server).with_context(|| format!("cannot reach {server}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let authorization = token.map_or_else(String::new, |token| {
        format!("Authorization: Bearer {token}\r\n")
    });
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: {server}\r\n{authorization}Content-Length: 0\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("{server}: not an HTTP answer"))?;
    let status = head.split_whitespace().nth(1).unwrap_or("");
    if !status.starts_with('2') {
        bail!("{server}{path}: HTTP {status}: {}", body.trim());
    }
    Ok(body.to_string())
}
