//! `heterarchy loadgen`: load generators that measure a server's throughput and latency
//! percentiles. `loadgen kv` drives any memcached text-protocol server (ours or memcached).

use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use heterarchy_loadgen::{parse_duration, Config, Distribution, Phase, Report, ServerAddr};

use crate::output::{render, Format, Table};
use crate::size::parse_bytes;

/// Subcommands of `heterarchy loadgen`.
#[derive(Subcommand, Debug)]
pub enum LoadgenCommand {
    /// Gets and sets over the memcached text protocol: throughput and latency percentiles.
    /// Exits non-zero, after printing the report, when any reply was an error.
    Kv(KvArgs),
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
    /// The fraction of requests that are gets; the rest are sets.
    #[arg(long, default_value_t = 0.9)]
    pub get_ratio: f64,
    /// Key choice: uniform or zipf:THETA.
    #[arg(long, default_value = "uniform")]
    pub distribution: Distribution,
    /// Skip setting every key once before the warm-up.
    #[arg(long)]
    pub no_prefill: bool,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

impl KvArgs {
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
            distribution: self.distribution,
            prefill: !self.no_prefill,
            seed: self.seed,
        })
    }
}

pub fn run(command: &LoadgenCommand) -> Result<()> {
    let LoadgenCommand::Kv(args) = command;
    let config = args.config()?;
    let progress = Progress::new(&config);
    let outcome = heterarchy_loadgen::run(&config, |phase| progress.enter(phase));
    progress.finish();
    let report = outcome?;
    print!("{}", render(args.format, &summary_table(&report), &report));
    if report.errors > 0 {
        bail!(
            "{} of {} requests to {} got an unexpected reply; the first: {}",
            report.errors,
            report.ops,
            config.server,
            report.first_error.as_deref().unwrap_or("")
        );
    }
    Ok(())
}

fn summary_table(report: &Report) -> Table {
    let mut table = Table::new(&[
        "connections",
        "pipeline",
        "ops",
        "ops_per_sec",
        "get_hits",
        "get_misses",
        "sets",
        "errors",
        "p50_us",
        "p90_us",
        "p99_us",
        "p999_us",
        "max_us",
    ]);
    table.row(vec![
        report.connections.to_string(),
        report.pipeline.to_string(),
        report.ops.to_string(),
        format!("{:.0}", report.ops_per_sec),
        report.get_hits.to_string(),
        report.get_misses.to_string(),
        report.sets.to_string(),
        report.errors.to_string(),
        format!("{:.1}", report.latency_us_p50),
        format!("{:.1}", report.latency_us_p90),
        format!("{:.1}", report.latency_us_p99),
        format!("{:.1}", report.latency_us_p999),
        format!("{:.1}", report.latency_us_max),
    ]);
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
