//! The demo's second view: the workload on the timed simulator's device models of DRAM, Optane
//! PM and an Optane SSD caching a disk (what `heterarchy simulate` prints), classic caching
//! against non-hierarchical caching (seed 000 ch. 4: NHC sends part of a saturated tier's hits
//! to the tier below). The same hierarchy is what the live view runs and predicts.

use anyhow::{anyhow, Result};
use heterarchy_report::{BarChart, Bars, LineChart, Report, Series};
use heterarchy_sim::cache_sim::TraceSource;
use heterarchy_sim::timed::{Hierarchy, TimedResult};
use serde::Serialize;

use super::workload::Workload;
use crate::commands::simulate::run_with_bar;
use crate::output::Table;
use crate::size::human_bytes;

/// Requests outstanding: a closed loop of this many clients, each sending its next request
/// when its last is answered.
pub const OUTSTANDING: u32 = 8;

/// NHC's intervals, as a share of Algorithm 1's (5 ms, and a 100 ms window for a stable hit
/// rate; seed 000 §4.4): the measured run lasts a few tenths of a virtual second, too short for
/// the tuner at full length to leave classic caching.
const TUNING_TIME_SCALE: f64 = 0.1;

/// One cache tier: the device preset the simulator models (and the live tier is paced like),
/// its name for people, and its size as a share of the workload's volume (so that a workload
/// of another size keeps the hierarchy's shape).
pub struct Tier {
    pub preset: &'static str,
    pub label: &'static str,
    /// Size in sixteenths of the volume.
    pub sixteenths: u64,
}

/// DRAM over Optane PM over an Optane SSD that holds the whole volume and a quarter more
/// (room for the live tier's slot table), so that once the fill has written the volume, the
/// disk is read only for what the tiers lost and written only on eviction.
pub const TIERS: [Tier; 3] = [
    Tier {
        preset: "dram",
        label: "DRAM",
        sixteenths: 1,
    },
    Tier {
        preset: "optane-pm",
        label: "Optane PM",
        sixteenths: 4,
    },
    Tier {
        preset: "optane-ssd",
        label: "Optane SSD",
        sixteenths: 20,
    },
];

/// The backing store.
pub const BACKING: Tier = Tier {
    preset: "hdd",
    label: "disk",
    sixteenths: 32,
};

/// The two ways the hierarchy caches.
pub const SCHEMES: [(&str, &str); 2] = [("classic", "classic"), ("nhc", "NHC")];

impl Tier {
    /// Bytes of this tier for a volume of `volume_bytes`, in whole 4 KiB lines.
    pub fn bytes(&self, volume_bytes: u64) -> u64 {
        (volume_bytes * self.sixteenths / 16).div_ceil(4096) * 4096
    }
}

/// "DRAM 16 MiB → Optane PM 64 MiB → Optane SSD 320 MiB over a disk".
pub fn describe(volume_bytes: u64) -> String {
    let tiers: Vec<String> = TIERS
        .iter()
        .map(|tier| format!("{} {}", tier.label, human_bytes(tier.bytes(volume_bytes))))
        .collect();
    format!("{} over a {}", tiers.join(" → "), BACKING.label)
}

/// The hierarchy file `simulate --config` would read for this workload: write-back, LRU,
/// inclusive tiers, no cleaning (dirty lines go down on eviction only), `admission` (classic
/// or nhc), each request charged `software_ns` of CPU time besides its devices' time.
pub fn hierarchy(
    workload: &Workload,
    admission: &str,
    outstanding: u32,
    software_ns: f64,
) -> Result<Hierarchy> {
    let mut text = format!(
        "seed = 1\nline_size = \"4KiB\"\n[cache]\nmode = \"wb\"\ncleaning = \"nop\"\n\
         policy = \"lru\"\nadmission = \"{admission}\"\n\
         tuning_time_scale = {TUNING_TIME_SCALE}\n"
    );
    for tier in &TIERS {
        text += &format!(
            "[[tier]]\ndevice = \"{}\"\nsize = {}\n",
            tier.preset,
            tier.bytes(workload.volume_bytes)
        );
    }
    text += &format!(
        "[[tier]]\ndevice = \"{}\"\n[load]\noutstanding = {outstanding}\nwarmup = {}\nrequests = {}\n\
         [software]\nper_request_ns = {software_ns:.0}\n",
        BACKING.preset, workload.warm_lines, workload.measured_lines
    );
    Hierarchy::from_toml(&text, "the demo's hierarchy", None).map_err(|e| anyhow!("{e}"))
}

/// The timed simulator's run of the workload on that hierarchy.
pub fn simulate(
    workload: &Workload,
    admission: &str,
    outstanding: u32,
    software_ns: f64,
) -> Result<TimedResult> {
    let hierarchy = hierarchy(workload, admission, outstanding, software_ns)?;
    let mut controller = hierarchy.controller()?;
    let mut reader = workload.lines().open()?;
    run_with_bar(
        &mut *controller,
        &hierarchy,
        &mut *reader,
        Some(workload.warm_lines + workload.measured_lines),
        &format!("simulating the hierarchy ({admission})"),
    )
}

/// Classic caching and NHC on the hierarchy, timed.
#[derive(Serialize)]
pub struct Timed {
    pub hierarchy: String,
    pub outstanding: u32,
    /// (scheme, its run), classic first.
    pub runs: Vec<(String, TimedResult)>,
}

/// Runs both schemes.
pub fn run(workload: &Workload) -> Result<Timed> {
    let runs = SCHEMES
        .iter()
        .map(|&(admission, label)| {
            let result = simulate(workload, admission, OUTSTANDING, 0.0)?;
            Ok((label.to_string(), result))
        })
        .collect::<Result<_>>()?;
    Ok(Timed {
        hierarchy: describe(workload.volume_bytes),
        outstanding: OUTSTANDING,
        runs,
    })
}

/// Per-tier shares of requests, the tiers' then the misses'.
pub fn served_shares(result: &TimedResult) -> Vec<f64> {
    let mut shares = result.tier_hit_ratios.clone();
    shares.push(1.0 - result.hit_ratio);
    shares
}

/// Column headers for [`served_shares`]: each tier's hits, then the misses.
pub fn share_headers() -> Vec<String> {
    TIERS
        .iter()
        .map(|tier| format!("{} hits", tier.label))
        .chain(["misses".to_string()])
        .collect()
}

/// The tiers' names then the backing store's, for charts and tables.
pub fn level_labels() -> Vec<String> {
    TIERS
        .iter()
        .chain([&BACKING])
        .map(|tier| tier.label.to_string())
        .collect()
}

impl Timed {
    fn run_of(&self, label: &str) -> Option<&TimedResult> {
        self.runs
            .iter()
            .find(|(name, _)| name == label)
            .map(|(_, result)| result)
    }

    /// A row per scheme: throughput, latencies, each tier's hit ratio.
    pub fn table(&self) -> Table {
        let shares = share_headers();
        let mut headers = vec![
            "scheme",
            "requests_per_s",
            "mean_latency_us",
            "p99_latency_us",
        ];
        headers.extend(shares.iter().map(String::as_str));
        let mut table = Table::new(&headers);
        for (label, result) in &self.runs {
            let mut row = vec![
                label.clone(),
                format!("{:.0}", result.throughput_ops),
                format!("{:.2}", result.mean_latency_us),
                format!("{:.2}", result.p99_latency_us),
            ];
            row.extend(served_shares(result).iter().map(|s| format!("{s:.4}")));
            table.row(row);
        }
        table
    }

    /// The terminal's line.
    pub fn summary(&self) -> String {
        let (Some(classic), Some(nhc)) = (self.run_of("classic"), self.run_of("NHC")) else {
            return String::new();
        };
        format!(
            "hierarchy  {} (timed, {} outstanding): classic {:.0} requests/s, p99 {:.1} µs; NHC \
             {:.0} requests/s ({:.2}x), p99 {:.1} µs",
            self.hierarchy,
            self.outstanding,
            classic.throughput_ops,
            classic.p99_latency_us,
            nhc.throughput_ops,
            nhc.throughput_ops / classic.throughput_ops,
            nhc.p99_latency_us,
        )
    }

    /// The report's section.
    pub fn add_to(&self, report: &mut Report) {
        report.heading("2. The timed hierarchy").paragraph(&format!(
            "The same trace on device models of {} (heterarchy simulate): write-back, LRU in \
             every tier, {} requests outstanding, measured after the fill and a quarter of the \
             mix have warmed the tiers. Classic caching serves every hit from the highest tier \
             that holds it and copies what it reads up into the tiers above; NHC (seed 000 \
             ch. 4, Algorithm 1 per pair of neighbouring tiers) stops those copies once the hit \
             rate is stable and sends part of a busy tier's hits to the tier below while that \
             raises throughput. The tuner's intervals are a tenth of the thesis' (0.5 ms), as \
             the measured run lasts only a few tenths of a virtual second.",
            self.hierarchy, self.outstanding
        ));
        let table = self.table();
        report.table(&table.headers(), table.rows());
        let schemes: Vec<String> = self.runs.iter().map(|(label, _)| label.clone()).collect();
        let mut throughput = BarChart::new(
            "Throughput by scheme",
            "scheme",
            "requests per second",
            schemes.clone(),
        );
        throughput.series.push(Bars::new(
            "requests/s",
            self.runs.iter().map(|(_, r)| r.throughput_ops).collect(),
        ));
        report.chart(&throughput);
        let mut latency = BarChart::new(
            "Latency by scheme",
            "statistic",
            "latency (µs)",
            vec!["mean".into(), "p99".into(), "p99.9".into()],
        );
        for (label, result) in &self.runs {
            latency.series.push(Bars::new(
                label,
                vec![
                    result.mean_latency_us,
                    result.p99_latency_us,
                    result.p999_latency_us,
                ],
            ));
        }
        report.chart(&latency);
        let mut reads = BarChart::new(
            "Reads served by each device",
            "device",
            "MB/s read",
            level_labels(),
        );
        for (label, result) in &self.runs {
            reads.series.push(Bars::new(
                label,
                result
                    .devices
                    .iter()
                    .map(|device| device.read_bytes_per_s / 1e6)
                    .collect(),
            ));
        }
        report.chart(&reads);
        let mut over_time = LineChart::new(
            "Throughput over virtual time",
            "time (s)",
            "requests per second",
        );
        for (label, result) in &self.runs {
            let series = &result.series;
            over_time.series.push(Series::new(
                label,
                series
                    .time_s
                    .iter()
                    .copied()
                    .zip(series.throughput_ops.iter().copied())
                    .collect(),
            ));
        }
        report.chart(&over_time);
    }
}
