//! Seed 000 Figure 4.8: NHC's speedup over classic caching under write-around, write-back and
//! write-through, over write ratios and dirty-read ratios, at concurrency 16 and 95% hits
//! (§4.5.1.2). "We control the dirty-read ratio by limiting the percentage of the working set
//! that writes can touch": writes go to that fraction of the keys (`write_keys`). The thesis
//! prints no values; its text says the speedup is at least 1 everywhere, larger with fewer
//! writes, falling with the dirty-read ratio under write-back only.

use heterarchy_engine::WriteMode;
use heterarchy_report::{LineChart, Series};
use serde::Serialize;

use crate::micro::Micro;
use crate::{preset, Comparison, ExperimentError, Options, Output};

pub const HIERARCHIES: [(&str, &str); 3] = [
    ("dram", "optane-pm"),
    ("optane-pm", "optane-ssd"),
    ("optane-ssd", "nvme-flash"),
];
pub const MODES: [WriteMode; 3] = [WriteMode::Wa, WriteMode::Wb, WriteMode::Wt];
pub const WRITE_RATIOS: [f64; 3] = [0.1, 0.3, 0.5];
pub const DIRTY_READ_RATIOS: [f64; 3] = [0.2, 0.6, 1.0];
const OUTSTANDING: u32 = 16;

/// One bar of Figure 4.8.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub hierarchy: String,
    pub mode: &'static str,
    pub write_ratio: f64,
    /// Fraction of the working set writes touch.
    pub dirty_read_ratio: f64,
    pub classic_gb_s: f64,
    pub nhc_gb_s: f64,
    /// NHC's throughput over classic's.
    pub speedup: f64,
}

/// Every row of the figure for `hierarchies`.
pub fn rows(options: &Options, hierarchies: &[(&str, &str)]) -> Result<Vec<Row>, ExperimentError> {
    let mut settings = Vec::new();
    for &(cache, capacity) in hierarchies {
        let devices = [preset(cache)?, preset(capacity)?];
        for mode in MODES {
            for write_ratio in WRITE_RATIOS {
                for dirty_read_ratio in DIRTY_READ_RATIOS {
                    let mut micro = Micro::orthus_cas(devices.clone(), OUTSTANDING);
                    micro.mode = mode;
                    micro.write_ratio = write_ratio;
                    micro.write_keys = dirty_read_ratio;
                    micro.measure_s *= options.scale;
                    settings.push((format!("{cache}+{capacity}"), micro));
                }
            }
        }
    }
    let results =
        options.run_classic_and_nhc(&settings, |(_, micro), scheme| micro.run_scheme(scheme))?;
    let mut rows = Vec::new();
    for ((hierarchy, micro), (classic, nhc)) in settings.iter().zip(results) {
        rows.push(Row {
            hierarchy: hierarchy.clone(),
            mode: micro.mode.name(),
            write_ratio: micro.write_ratio,
            dirty_read_ratio: micro.write_keys,
            classic_gb_s: classic.throughput_bytes_per_s / 1e9,
            nhc_gb_s: nhc.throughput_bytes_per_s / 1e9,
            speedup: nhc.throughput_bytes_per_s / classic.throughput_bytes_per_s,
        });
    }
    Ok(rows)
}

/// The experiment.
pub fn run(options: &Options) -> Result<Output, ExperimentError> {
    let rows = rows(options, &HIERARCHIES)?;
    let mut output = Output::new(
        "Figure 4.8: NHC's speedup over classic caching by write mode, write ratio and \
         dirty-read ratio (concurrency 16, 95% hits)",
        &rows,
    );
    for &(cache, capacity) in &HIERARCHIES {
        let hierarchy = format!("{cache}+{capacity}");
        let mut chart = LineChart::new(
            &format!("{hierarchy}: speedup over the dirty-read ratio"),
            "dirty-read ratio",
            "NHC / classic throughput",
        );
        for mode in MODES {
            for write_ratio in WRITE_RATIOS {
                chart.series.push(Series {
                    name: format!("{} {:.0}% writes", mode.name(), write_ratio * 100.0),
                    points: rows
                        .iter()
                        .filter(|r| {
                            r.hierarchy == hierarchy
                                && r.mode == mode.name()
                                && r.write_ratio == write_ratio
                        })
                        .map(|r| (r.dirty_read_ratio, r.speedup))
                        .collect(),
                });
            }
        }
        output.charts.push(chart);
    }
    let lowest = rows.iter().map(|r| r.speedup).fold(f64::INFINITY, f64::min);
    output.comparisons.push(Comparison {
        what: "lowest speedup over every setting".into(),
        thesis: "at least 1".into(),
        ours: format!("{lowest:.3}"),
    });
    let mean = |filter: &dyn Fn(&Row) -> bool| {
        let chosen: Vec<f64> = rows
            .iter()
            .filter(|r| filter(r))
            .map(|r| r.speedup)
            .collect();
        chosen.iter().sum::<f64>() / chosen.len().max(1) as f64
    };
    output.comparisons.push(Comparison {
        what: "mean speedup, 10% against 50% writes".into(),
        thesis: "larger with fewer writes".into(),
        ours: format!(
            "{:.3} against {:.3}",
            mean(&|r| r.write_ratio == 0.1),
            mean(&|r| r.write_ratio == 0.5)
        ),
    });
    output.comparisons.push(Comparison {
        what: "write-back mean speedup, dirty-read ratio 0.2 against 1.0".into(),
        thesis: "falls as dirty reads grow".into(),
        ours: format!(
            "{:.3} against {:.3}",
            mean(&|r| r.mode == "wb" && r.dirty_read_ratio == 0.2),
            mean(&|r| r.mode == "wb" && r.dirty_read_ratio == 1.0)
        ),
    });
    output.notes.push(
        "Write ratios 10/30/50% and dirty-read ratios 0.2/0.6/1.0 are ours: the thesis does \
         not give its grid."
            .into(),
    );
    output.notes.push(crate::micro::SOFTWARE_COST_NOTE.into());
    output
        .notes
        .push(crate::nhc_orthus_cas::WRITE_SATURATED_DEVIATION.into());
    Ok(output)
}
