//! The demo's fourth view: the workload replayed through a live cached volume in this process
//! (what `heterarchy replay --volume` does): the volume code that `heterarchy serve nbd`
//! serves, on real storage (RAM, a persistent-memory file, files) paced like the hierarchy's
//! devices, beside the timed simulator's prediction for the same hierarchy and load.
//!
//! The simulator models devices, not this machine's CPU, so the prediction charges each request
//! the CPU's share of it: the same replay on storage that nothing paces runs at the rate the
//! CPU alone allows (the volume's code and copies, and reading the trace), and one over that
//! rate is each request's share, as `scripts/bench-nbd` charges its tiers' prediction. One I/O
//! outstanding, so that no replay thread waits for a core behind another. Live, a paced
//! device's time runs from when the volume plans the request, with the volume's own work
//! inside it, where the model adds the two: the prediction is the slower by up to that work.
//!
//! Classic caching: NHC's gain comes from devices saturated by requests, which one client does
//! not saturate; the timed view shows it on the device models.

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use heterarchy_loadgen::replay::{replay, Pacing, ReplayOptions, ReplayReport, ReplayTarget};
use heterarchy_report::{BarChart, Bars, Report};
use heterarchy_server::config::{ExportConfig, ServeConfig};
use heterarchy_sim::timed::TimedResult;
use heterarchy_volume::Volume;
use serde::Serialize;

use super::hierarchy::{self, level_labels, served_shares, share_headers, BACKING, TIERS};
use super::workload::Workload;
use crate::output::Table;

/// The scheme the live volume runs.
const ADMISSION: &str = "classic";

/// I/Os outstanding live: one client.
const OUTSTANDING: u32 = 1;

/// Replays on unpaced storage, the fastest of which measures the CPU's share.
const CPU_ONLY_RUNS: usize = 2;

/// The live run and its prediction.
#[derive(Serialize)]
pub struct Live {
    pub hierarchy: String,
    pub admission: &'static str,
    /// The unpaced replay's rate, and the CPU time per request it implies: what the simulator
    /// charges each request besides its devices' time.
    pub cpu_only_iops: f64,
    pub software_us: f64,
    pub live: ReplayReport,
    pub predicted: TimedResult,
}

/// Replays the workload on an unpaced volume, then on a paced one, then simulates.
pub fn run(workload: &Workload, scratch: &Path) -> Result<Live> {
    // The faster of two: a run slowed by something else on the machine says less about the
    // code's own cost.
    let mut cpu_only_iops: f64 = 0.0;
    for _ in 0..CPU_ONLY_RUNS {
        let run = replay_on(workload, &scratch.join("unpaced"), false)?;
        cpu_only_iops = cpu_only_iops.max(run.iops);
    }
    if cpu_only_iops <= 0.0 {
        bail!("the unpaced replay measured no I/O");
    }
    let software_ns = f64::from(OUTSTANDING) / cpu_only_iops * 1e9;
    let live = replay_on(workload, &scratch.join("paced"), true)?;
    let predicted = hierarchy::simulate(workload, ADMISSION, OUTSTANDING, software_ns)?;
    Ok(Live {
        hierarchy: hierarchy::describe(workload.volume_bytes),
        admission: ADMISSION,
        cpu_only_iops,
        software_us: software_ns / 1e3,
        live,
        predicted,
    })
}

/// The volume's serve config: the hierarchy's tiers as RAM, a PM file and a file, over a file
/// twice the volume (a tier may be no larger than what it caches), each paced like its device
/// when `paced`. No sequential cutoff: the fill is one long sequential write that the cache
/// must take, as the simulator's does.
fn serve_config(workload: &Workload, folder: &Path, paced: bool) -> String {
    let volume = workload.volume_bytes;
    let path = |name: &str| folder.join(name).display().to_string();
    let storage = [
        format!("ram:{}", TIERS[0].bytes(volume)),
        format!("pmem:{}:{}", path("pm"), TIERS[1].bytes(volume)),
        format!("file:{}:{}", path("ssd.img"), TIERS[2].bytes(volume)),
    ];
    let throttles: Vec<&str> = TIERS
        .iter()
        .enumerate()
        .map(|(index, tier)| match (paced, index) {
            // The RAM tier is memory: it runs at its own speed.
            (true, 0) | (false, _) => "none",
            (true, _) => tier.preset,
        })
        .collect();
    let quoted = |items: &[&str]| {
        items
            .iter()
            .map(|item| format!("\"{item}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let backing_throttle = if paced {
        format!("backing_throttle = \"{}\"\n", BACKING.preset)
    } else {
        String::new()
    };
    format!(
        "[[export]]\nname = \"demo\"\nbacking = \"file:{}:{}\"\n{backing_throttle}\
         cache = [{}]\ncache_line = \"4k\"\ncache_throttle = [{}]\n\
         [export.caching]\nmode = \"wb\"\ncleaning = \"nop\"\npolicy = \"lru\"\n\
         admission = \"{ADMISSION}\"\n[export.seq_cutoff]\npolicy = \"never\"\n",
        path("disk.img"),
        BACKING.bytes(volume),
        quoted(&storage.iter().map(String::as_str).collect::<Vec<_>>()),
        quoted(&throttles),
    )
}

/// Opens the volume in `folder`, replays the fill and the warming I/Os unmeasured, then the
/// rest measured, `OUTSTANDING` at a time; the volume is dropped without writing its dirty
/// lines back, since its files are thrown away (writing them to a disk paced at 12 ms an I/O
/// would take minutes).
fn replay_on(workload: &Workload, folder: &Path, paced: bool) -> Result<ReplayReport> {
    std::fs::create_dir_all(folder)
        .with_context(|| format!("cannot create {}", folder.display()))?;
    let text = serve_config(workload, folder, paced);
    let config = ServeConfig::from_toml(&text, "the demo's volume").map_err(|e| anyhow!("{e}"))?;
    let Some(ExportConfig::Cached(volume)) = config.export.first() else {
        bail!("the demo's volume config holds no cached export");
    };
    let throttles = config.throttles().map_err(|e| anyhow!("{e}"))?;
    let volume = Arc::new(Volume::open_with(volume, &throttles).map_err(|e| anyhow!("{e}"))?);
    let target = ReplayTarget::Volume(Arc::clone(&volume));
    let mut records = workload.records()?;
    let what = if paced { "paced" } else { "unpaced" };
    let bar = crate::progress::requests_bar(None, &format!("replaying on the {what} volume"));
    let options = |limit| ReplayOptions {
        pacing: Pacing::ClosedLoop,
        lanes: OUTSTANDING as usize,
        limit,
        skip_idle: false,
    };
    replay(
        records.as_mut(),
        &target,
        &options(Some(workload.fill_ios + workload.warm_ios)),
    )
    .map_err(|e| anyhow!("warming the {what} volume: {e}"))?;
    let measured = replay(records.as_mut(), &target, &options(None))
        .map_err(|e| anyhow!("replaying on the {what} volume: {e}"))?;
    bar.finish_and_clear();
    drop(target);
    drop(volume);
    std::fs::remove_dir_all(folder)
        .with_context(|| format!("cannot remove {}", folder.display()))?;
    Ok(measured)
}

/// The live replay's shares of line requests by the tier that held them, then the misses'.
fn live_shares(report: &ReplayReport) -> Vec<f64> {
    let lines = report.line_requests.unwrap_or(0).max(1) as f64;
    let mut shares: Vec<f64> = report
        .tiers
        .iter()
        .map(|tier| tier.hits as f64 / lines)
        .collect();
    shares.push(report.misses.unwrap_or(0) as f64 / lines);
    shares
}

impl Live {
    /// Live over predicted I/Os per second.
    fn ratio(&self) -> f64 {
        self.live.iops / self.predicted.throughput_ops
    }

    /// Live and predicted side by side.
    pub fn table(&self) -> Table {
        let shares = share_headers();
        let mut headers = vec!["run", "ios_per_s"];
        headers.extend(shares.iter().map(String::as_str));
        let mut table = Table::new(&headers);
        let mut live = vec!["live".to_string(), format!("{:.0}", self.live.iops)];
        live.extend(live_shares(&self.live).iter().map(|s| format!("{s:.4}")));
        table.row(live);
        let mut predicted = vec![
            "simulated".to_string(),
            format!("{:.0}", self.predicted.throughput_ops),
        ];
        predicted.extend(
            served_shares(&self.predicted)
                .iter()
                .map(|s| format!("{s:.4}")),
        );
        table.row(predicted);
        table
    }

    /// The terminal's line.
    pub fn summary(&self) -> String {
        let shares = |values: Vec<f64>| {
            values
                .iter()
                .map(|share| format!("{share:.2}"))
                .collect::<Vec<_>>()
                .join("/")
        };
        format!(
            "live       the same hierarchy in this process, one I/O at a time: {:.0} I/Os per \
             second, the simulator predicted {:.0} ({:.2}x); DRAM/PM/SSD/disk shares {} live, \
             {} predicted",
            self.live.iops,
            self.predicted.throughput_ops,
            self.ratio(),
            shares(live_shares(&self.live)),
            shares(served_shares(&self.predicted)),
        )
    }

    /// The report's section.
    pub fn add_to(&self, report: &mut Report) {
        report.heading("4. Live").paragraph(&format!(
            "The same trace replayed through a live cached volume in this process (heterarchy \
             replay --volume), the code heterarchy serve nbd serves: {}, as a RAM tier, a \
             persistent-memory file paced like Optane PM, a file paced like an Optane SSD and a \
             file paced like a disk; write-back, {} caching, one I/O at a time, measured after \
             the same warm-up. Beside it, the timed simulator's prediction for that hierarchy \
             and load. The simulator models the devices, not this machine's CPU, so each \
             simulated request is charged {:.1} µs: one over the {:.0} I/Os per second the same \
             replay ran at on storage that nothing paces (the faster of two runs). Live over \
             predicted: {:.2}. Live, a paced device's time runs from when the volume plans the \
             request, so the volume's own work (the lookup, the copy) passes \
             inside it; the model adds the CPU's time to the devices', so its prediction \
             is slower than live by up to the CPU time of the requests that wait for a paced \
             device. Where each tier's hits fall is the same policy code's in both.",
            self.hierarchy,
            self.admission,
            self.software_us,
            self.cpu_only_iops,
            self.ratio()
        ));
        let table = self.table();
        report.table(&table.headers(), table.rows());
        let mut shares = BarChart::new(
            "Where requests were served: live against predicted",
            "tier that held the line (the disk: a miss)",
            "share of line requests",
            level_labels(),
        );
        shares.y_range = Some((0.0, 1.0));
        shares
            .series
            .push(Bars::new("live", live_shares(&self.live)));
        shares
            .series
            .push(Bars::new("simulated", served_shares(&self.predicted)));
        report.chart(&shares);
        let mut throughput = BarChart::new(
            "Throughput: live against predicted",
            "run",
            "I/Os per second",
            vec!["live".into(), "simulated".into()],
        );
        throughput.series.push(Bars::new(
            "I/Os per second",
            vec![self.live.iops, self.predicted.throughput_ops],
        ));
        report.chart(&throughput);
    }
}
