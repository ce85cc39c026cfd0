//! Seed 001's fio figures (§3 and §5.1–5.2) on the simulated block stacks
//! (docs/pm-block-device.md, "Seed 001's figures on the timed simulator"): every stack over
//! iodepth (Fig 5a) and jobs (Fig 5e), the time breakdown and write outcomes (Figs 6a, 6c),
//! flush latency against the bytes written since the last flush (Fig 2b), a flush after
//! every 128 writes (Fig 2a), and the cache size (Table 1). The stacks and their decisions are
//! `sim::staging`'s, the same staging code the live device runs.

use heterarchy_report::{LineChart, Series};
use heterarchy_sim::staging::{run_staged, Stack, StagedConfig, StagedResult};
use serde::Serialize;

use crate::{Comparison, ExperimentError, Options, Output};

pub const IODEPTHS: [u32; 6] = [32, 64, 128, 256, 512, 1024];
pub const JOBS: [u32; 6] = [1, 2, 4, 8, 16, 32];
pub const CACHE_BYTES: [u64; 6] = [64 << 20, 128 << 20, 256 << 20, 512 << 20, 1 << 30, 2 << 30];
/// Bytes written between two flushes (Fig 2b: 512 KiB to 128 MiB).
pub const FLUSH_AFTER_BYTES: [u64; 5] = [512 << 10, 2 << 20, 8 << 20, 32 << 20, 128 << 20];

/// One run: the JSON row of every `caiti-*` experiment.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub stack: String,
    pub iodepth: u32,
    pub jobs: u32,
    pub cache_mib: u64,
    /// Bytes written between two flushes, for the flush experiments.
    pub flush_after_kib: u64,
    pub iops: f64,
    pub mean_latency_us: f64,
    pub p99_latency_us: f64,
    pub p9999_latency_us: f64,
    pub write_hits: u64,
    pub write_fills: u64,
    pub bypasses: u64,
    pub stalled_writes: u64,
    pub flushes: u64,
    pub mean_flush_latency_us: f64,
    pub metadata_bytes_per_slot: u32,
}

impl Row {
    fn new(result: &StagedResult, flush_after_bytes: u64) -> Row {
        Row {
            stack: result.stack.clone(),
            iodepth: result.iodepth,
            jobs: result.jobs,
            cache_mib: result.cache_bytes >> 20,
            flush_after_kib: flush_after_bytes >> 10,
            iops: result.iops,
            mean_latency_us: result.mean_latency_us,
            p99_latency_us: result.p99_latency_us,
            p9999_latency_us: result.p9999_latency_us,
            write_hits: result.staging.write_hits,
            write_fills: result.staging.write_fills,
            bypasses: result.staging.bypasses,
            stalled_writes: result.staging.stalled_writes,
            flushes: result.flushes,
            mean_flush_latency_us: result.mean_flush_latency_us,
            metadata_bytes_per_slot: result.metadata_bytes_per_slot,
        }
    }
}

/// Seed 001's fio run for `stack`, `scale` times its 6 virtual seconds (the flush every 5 s
/// scaled alike).
pub fn config(stack: Stack, scale: f64) -> StagedConfig {
    let mut config = StagedConfig::seed001(stack);
    let scale = scale.clamp(0.01, 100.0);
    config.duration_ns = (config.duration_ns as f64 * scale) as u64;
    config.flush_interval_ns = Some(config.duration_ns * 5 / 6);
    config
}

fn runs(options: &Options, configs: Vec<(StagedConfig, u64)>) -> Vec<Row> {
    options.run_all(&configs, |(config, flush_after)| {
        Row::new(&run_staged(config), *flush_after)
    })
}

fn find<'a>(rows: &'a [Row], stack: &str, pick: impl Fn(&Row) -> bool) -> Option<&'a Row> {
    rows.iter().find(|row| row.stack == stack && pick(row))
}

/// A chart of `y` over `x` with one line per stack.
fn chart(
    rows: &[Row],
    title: &str,
    x_label: &str,
    y_label: &str,
    x: fn(&Row) -> f64,
    y: fn(&Row) -> f64,
) -> LineChart {
    let mut chart = LineChart::new(title, x_label, y_label);
    chart.x_log = true;
    for stack in Stack::all() {
        let points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|row| row.stack == stack.name())
            .map(|row| (x(row), y(row)))
            .collect();
        if !points.is_empty() {
            chart.series.push(Series {
                name: stack.name().to_string(),
                points,
            });
        }
    }
    chart
}

fn ratio_text(value: f64) -> String {
    format!("{value:.2}x")
}

/// Fig 5a: every stack at iodepth 32 to 1024, one job.
pub fn run_iodepth(options: &Options) -> Result<Output, ExperimentError> {
    let mut configs = Vec::new();
    for stack in Stack::all() {
        for iodepth in IODEPTHS {
            let mut config = config(stack, options.scale);
            config.iodepth = iodepth;
            configs.push((config, 0));
        }
    }
    let rows = runs(options, configs);
    let mut output = Output::new(
        "Random 4 KiB writes over iodepth (seed 001 Fig 5a, 5d)",
        &rows,
    );
    output.charts.push(chart(
        &rows,
        "Mean latency over iodepth",
        "iodepth",
        "us",
        |r| f64::from(r.iodepth),
        |r| r.mean_latency_us,
    ));
    output.charts.push(chart(
        &rows,
        "p99.99 latency over iodepth",
        "iodepth",
        "us",
        |r| f64::from(r.iodepth),
        |r| r.p9999_latency_us,
    ));
    let at = |stack: &str, iodepth: u32| find(&rows, stack, |r| r.iodepth == iodepth);
    if let (Some(raw), Some(btt), Some(caiti)) =
        (at("raw-pm", 128), at("btt", 128), at("caiti", 128))
    {
        output.comparisons.push(Comparison {
            what: "iodepth 128: BTT's time over raw PM's".into(),
            thesis: "1.374x (§2)".into(),
            ours: ratio_text(raw.iops / btt.iops),
        });
        output.comparisons.push(Comparison {
            what: "iodepth 128: BTT's time over Caiti's".into(),
            thesis: "up to 3.6x".into(),
            ours: ratio_text(caiti.iops / btt.iops),
        });
        output.comparisons.push(Comparison {
            what: "iodepth 128: raw PM's time over Caiti's".into(),
            thesis: "2.202x (\"120.2% more time\")".into(),
            ours: ratio_text(caiti.iops / raw.iops),
        });
        let others: Vec<String> = ["pmbd", "pmbd70", "lru", "coactive"]
            .iter()
            .filter_map(|name| {
                at(name, 128).map(|row| format!("{name} {}", ratio_text(caiti.iops / row.iops)))
            })
            .collect();
        output.comparisons.push(Comparison {
            what: "iodepth 128: each cache's time over Caiti's".into(),
            thesis: "pmbd 3.6x, pmbd70 3.6x, lru 3.5x, coactive 2.9x".into(),
            ours: others.join(", "),
        });
    }
    if let (Some(pmbd), Some(caiti)) = (at("pmbd", 1024), at("caiti", 1024)) {
        output.comparisons.push(Comparison {
            what: "iodepth 1024: PMBD's p99.99 latency over Caiti's".into(),
            thesis: "14.0x (Fig 5d)".into(),
            ours: ratio_text(pmbd.p9999_latency_us / caiti.p9999_latency_us.max(1e-9)),
        });
    }
    output.notes.push(
        "A job is one thread carrying out its requests one after the other, as a bio-based \
         driver does, so latency grows with iodepth while throughput does not; the paper \
         reports fio's latencies, which count less of the queue (Table 1: 4.4 us at iodepth 32)."
            .into(),
    );
    Ok(output)
}

/// Fig 5e: jobs 1 to 32 at iodepth 32.
pub fn run_jobs(options: &Options) -> Result<Output, ExperimentError> {
    let mut configs = Vec::new();
    for stack in Stack::all() {
        for jobs in JOBS {
            let mut config = config(stack, options.scale);
            config.iodepth = 32;
            config.jobs = jobs;
            config.evictors = config.cores.saturating_sub(jobs).max(1);
            configs.push((config, 0));
        }
    }
    let rows = runs(options, configs);
    let mut output = Output::new(
        "Random 4 KiB writes over jobs at iodepth 32 (seed 001 Fig 5e)",
        &rows,
    );
    output.charts.push(chart(
        &rows,
        "Throughput over jobs",
        "jobs",
        "IOPS",
        |r| f64::from(r.jobs),
        |r| r.iops,
    ));
    let gains: Vec<String> = JOBS
        .iter()
        .filter_map(|&jobs| {
            let at = |stack: &str| find(&rows, stack, |r| r.jobs == jobs);
            let (coactive, lru) = (at("coactive")?, at("lru")?);
            Some(format!("{jobs}: {}", ratio_text(coactive.iops / lru.iops)))
        })
        .collect();
    output.comparisons.push(Comparison {
        what: "Co-Active's throughput over LRU's, by jobs".into(),
        thesis: "\"a clear distinction between a single job and multiple jobs\"".into(),
        ours: gains.join(", "),
    });
    output.notes.push(
        "Evictors take the cores the jobs leave (36 cores); past 18 jobs the evictors and the \
         jobs share too few cores and the PM's write bandwidth bounds every stack."
            .into(),
    );
    Ok(output)
}

/// Figs 6a and 6c: one job at iodepth 1, the time of each category and the write outcomes,
/// with the two ablations.
pub fn run_breakdown(options: &Options) -> Result<Output, ExperimentError> {
    #[derive(Serialize)]
    struct Share {
        stack: String,
        category: String,
        share_percent: f64,
        write_hits: u64,
        write_fills: u64,
        bypasses: u64,
        stalled_writes: u64,
    }
    let configs: Vec<StagedConfig> = Stack::all()
        .into_iter()
        .filter(|stack| *stack != Stack::RawPm)
        .map(|stack| {
            let mut config = config(stack, options.scale);
            config.iodepth = 1;
            config
        })
        .collect();
    let results = options.run_all(&configs, run_staged);
    let mut shares = Vec::new();
    for result in &results {
        let total: u64 = result.time_ns.iter().map(|(_, ns)| ns).sum();
        for (category, ns) in &result.time_ns {
            if *ns > 0 {
                shares.push(Share {
                    stack: result.stack.clone(),
                    category: category.clone(),
                    share_percent: *ns as f64 * 100.0 / total.max(1) as f64,
                    write_hits: result.staging.write_hits,
                    write_fills: result.staging.write_fills,
                    bypasses: result.staging.bypasses,
                    stalled_writes: result.staging.stalled_writes,
                });
            }
        }
    }
    let mut output = Output::new(
        "Where the time goes, and the write outcomes (seed 001 Figs 6a, 6c)",
        &shares,
    );
    let share = |stack: &str, category: &str| {
        shares
            .iter()
            .find(|s| s.stack == stack && s.category == category)
            .map_or(0.0, |s| s.share_percent)
    };
    output.comparisons.push(Comparison {
        what: "share of time in 'cache eviction and write'".into(),
        thesis: "pmbd 40.5%, pmbd70 25.3%, lru 40.0%, coactive 32.7%, caiti ~0".into(),
        ours: ["pmbd", "pmbd70", "lru", "coactive", "caiti"]
            .iter()
            .map(|stack| format!("{stack} {:.1}%", share(stack, "cache eviction and write")))
            .collect::<Vec<_>>()
            .join(", "),
    });
    output.comparisons.push(Comparison {
        what:
            "Caiti: share of time in critical-path writes (cache write only + eviction and write)"
                .into(),
        thesis: "11.5%".into(),
        ours: format!(
            "{:.1}%",
            share("caiti", "cache write only") + share("caiti", "cache eviction and write")
        ),
    });
    output.comparisons.push(Comparison {
        what: "Caiti: share of time in cache metadata management".into(),
        thesis: "2.9%".into(),
        ours: format!("{:.1}%", share("caiti", "cache metadata management")),
    });
    output.notes.push(
        "'others' is the application-to-driver path, which the paper measured as 54.0% of a \
         request's time under Caiti (Fig 7); the simulator charges it to every stack alike."
            .into(),
    );
    Ok(output)
}

/// Fig 2b: the latency of a flush after 512 KiB to 128 MiB of random writes, one job at
/// iodepth 1, for the BTT alone and each cache.
pub fn run_fsync(options: &Options) -> Result<Output, ExperimentError> {
    let mut configs = Vec::new();
    for stack in ["btt", "pmbd", "pmbd70", "lru", "coactive", "caiti"] {
        for bytes in FLUSH_AFTER_BYTES {
            let mut config = config(stack.parse().expect("a stack"), options.scale);
            config.iodepth = 1;
            config.flush_interval_ns = None;
            config.fsync_every = Some((bytes / 4096) as u32);
            configs.push((config, bytes));
        }
    }
    let rows = runs(options, configs);
    let mut output = Output::new(
        "Flush latency over the bytes written since the last flush (seed 001 Fig 2b)",
        &rows,
    );
    output.charts.push(chart(
        &rows,
        "Flush latency",
        "KiB written between flushes",
        "us",
        |r| r.flush_after_kib as f64,
        |r| r.mean_flush_latency_us,
    ));
    let growth: Vec<String> = ["btt", "pmbd", "lru", "caiti"]
        .iter()
        .filter_map(|stack| {
            let small = find(&rows, stack, |r| r.flush_after_kib == 512)?;
            let large = find(&rows, stack, |r| r.flush_after_kib == 128 << 10)?;
            Some(format!(
                "{stack} {}",
                ratio_text(large.mean_flush_latency_us / small.mean_flush_latency_us.max(1e-3))
            ))
        })
        .collect();
    output.comparisons.push(Comparison {
        what: "flush latency after 128 MiB over after 512 KiB".into(),
        thesis: "PMBD and LRU \"rise sharply\"; Caiti nearly flat".into(),
        ours: growth.join(", "),
    });
    output.notes.push(
        "A flush covers what the cache holds: PMBD and LRU write back everything written \
         since the last flush, Caiti only the few slots its evictors have not reached."
            .into(),
    );
    Ok(output)
}

/// Fig 2a: a flush after every 128 writes (512 KiB), each stack at iodepth 128.
pub fn run_fsync_every(options: &Options) -> Result<Output, ExperimentError> {
    let configs: Vec<(StagedConfig, u64)> = Stack::all()
        .into_iter()
        .map(|stack| {
            let mut config = config(stack, options.scale);
            config.fsync_every = Some(128);
            (config, 512 << 10)
        })
        .collect();
    let rows = runs(options, configs);
    let mut output = Output::new("A flush after every 128 writes (seed 001 Fig 2a)", &rows);
    if let (Some(btt), Some(pmbd), Some(lru)) = (
        find(&rows, "btt", |_| true),
        find(&rows, "pmbd", |_| true),
        find(&rows, "lru", |_| true),
    ) {
        output.comparisons.push(Comparison {
            what: "time over the BTT alone's".into(),
            thesis: "pmbd +6.1%, lru +10.8%".into(),
            ours: format!(
                "pmbd {:+.1}%, lru {:+.1}%",
                (btt.iops / pmbd.iops - 1.0) * 100.0,
                (btt.iops / lru.iops - 1.0) * 100.0
            ),
        });
    }
    Ok(output)
}

/// Table 1: mean latency at 64 MiB to 2 GiB of cache, one job at iodepth 32; and the DRAM
/// metadata the cache takes.
pub fn run_cache_size(options: &Options) -> Result<Output, ExperimentError> {
    let mut configs = Vec::new();
    for stack in ["pmbd", "pmbd70", "lru", "coactive", "caiti"] {
        for bytes in CACHE_BYTES {
            let mut config = config(stack.parse().expect("a stack"), options.scale);
            config.iodepth = 32;
            config.cache_bytes = bytes;
            configs.push((config, 0));
        }
    }
    let rows = runs(options, configs);
    let mut output = Output::new("Mean latency over cache size (seed 001 Table 1)", &rows);
    output.charts.push(chart(
        &rows,
        "Mean latency over cache size",
        "MiB",
        "us",
        |r| r.cache_mib as f64,
        |r| r.mean_latency_us,
    ));
    let caiti: Vec<f64> = rows
        .iter()
        .filter(|r| r.stack == "caiti")
        .map(|r| r.mean_latency_us)
        .collect();
    if let (Some(low), Some(high)) = (
        caiti.iter().cloned().reduce(f64::min),
        caiti.iter().cloned().reduce(f64::max),
    ) {
        output.comparisons.push(Comparison {
            what: "Caiti: spread of mean latency from 64 MiB to 2 GiB".into(),
            thesis: "4.29 to 4.44 us (3.5%)".into(),
            ours: format!(
                "{low:.1} to {high:.1} us ({:.1}%)",
                (high / low - 1.0) * 100.0
            ),
        });
    }
    if let Some(row) = find(&rows, "caiti", |r| r.cache_mib == 512) {
        output.comparisons.push(Comparison {
            what: "DRAM metadata per 4 KiB slot; for 512 MiB".into(),
            thesis: "102 B (2.5%); about 12.75 MB".into(),
            ours: format!(
                "{} B ({:.1}%); {:.2} MB",
                row.metadata_bytes_per_slot,
                f64::from(row.metadata_bytes_per_slot) * 100.0 / 4096.0,
                f64::from(row.metadata_bytes_per_slot) * 131_072.0 / 1_048_576.0
            ),
        });
    }
    Ok(output)
}
