//! Seed 000 Figure 4.15: NHC against SIB+, SIB++ and LBICA (and classic caching) on Optane SSD +
//! flash, concurrency 16, 95% hits, 100 s runs (§4.5.4): (a) a static read-only workload;
//! (b) a dynamic one whose write ratio is redrawn uniformly from 0–50% every period, for
//! periods from 10 s down to 0.5 s. The thesis prints no values: NHC beats all three, SIB++
//! beats SIB+, LBICA does poorly, and SIB falls sharply as the period shrinks while NHC stays.
//!
//! LBICA exists for bursts, so the cache warms under light load (one client) and the 16
//! clients then arrive at once, for every scheme: each fills the cache by its own rules, and
//! SIB+, whose cache is a write buffer, never holds read data.

use heterarchy_engine::AdmissionScheme;
use heterarchy_report::{LineChart, Series};
use serde::Serialize;

use crate::micro::Micro;
use crate::{preset, Comparison, ExperimentError, Options, Output};

pub const SCHEMES: [AdmissionScheme; 5] = [
    AdmissionScheme::Classic,
    AdmissionScheme::Nhc,
    AdmissionScheme::SibPlus,
    AdmissionScheme::SibPlusPlus,
    AdmissionScheme::Lbica,
];
/// Periods of the dynamic workload, seconds; `None` is the static read-only workload.
pub const PERIODS_S: [Option<f64>; 6] =
    [None, Some(10.0), Some(5.0), Some(2.0), Some(1.0), Some(0.5)];
const OUTSTANDING: u32 = 16;
const RUN_S: f64 = 100.0;
const MAX_WRITE_RATIO: f64 = 0.5;

/// One scheme on one workload.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// `static` or `dynamic`.
    pub workload: &'static str,
    /// Seconds between write-ratio changes (0 for the static workload).
    pub period_s: f64,
    pub scheme: &'static str,
    pub throughput_gb_s: f64,
    /// Throughput over classic caching's on the same workload.
    pub speedup: f64,
}

/// Every row, for the periods given.
pub fn rows(options: &Options, periods_s: &[Option<f64>]) -> Result<Vec<Row>, ExperimentError> {
    let devices = [preset("optane-ssd")?, preset("nvme-flash")?];
    let mut jobs = Vec::new();
    for &period in periods_s {
        let mut micro = Micro::orthus_cas(devices.clone(), OUTSTANDING);
        micro.warm_outstanding = Some(1);
        micro.measure_s = RUN_S * options.scale;
        if period.is_some() {
            micro.write_ratio = MAX_WRITE_RATIO;
            micro.write_ratio_period_s = period;
        }
        for scheme in SCHEMES {
            jobs.push((period, micro.clone(), scheme));
        }
    }
    let results = options.run_all(&jobs, |(_, micro, scheme)| micro.run_scheme(*scheme));
    let mut rows: Vec<Row> = Vec::new();
    for ((period, _, scheme), result) in jobs.iter().zip(results) {
        let throughput = result?.throughput_bytes_per_s;
        rows.push(Row {
            workload: if period.is_some() {
                "dynamic"
            } else {
                "static"
            },
            period_s: period.unwrap_or(0.0),
            scheme: scheme.name(),
            throughput_gb_s: throughput / 1e9,
            speedup: 0.0,
        });
    }
    for index in 0..rows.len() {
        let classic = rows[index - index % SCHEMES.len()].throughput_gb_s;
        rows[index].speedup = rows[index].throughput_gb_s / classic;
    }
    Ok(rows)
}

/// The experiment.
pub fn run(options: &Options) -> Result<Output, ExperimentError> {
    let rows = rows(options, &PERIODS_S)?;
    let mut output = Output::new(
        "Figure 4.15: NHC vs SIB+, SIB++ and LBICA on Optane SSD + flash (concurrency 16, 95% hits)",
        &rows,
    );
    let mut chart = LineChart::new(
        "Dynamic write ratio (0-50%, redrawn every period)",
        "period (s)",
        "GB/s",
    );
    chart.x_log = true;
    for scheme in SCHEMES {
        chart.series.push(Series {
            name: scheme.name().to_string(),
            points: rows
                .iter()
                .filter(|r| r.workload == "dynamic" && r.scheme == scheme.name())
                .map(|r| (r.period_s, r.throughput_gb_s))
                .collect(),
        });
    }
    output.charts.push(chart);
    let speedup = |workload: &str, period: f64, scheme: &str| {
        rows.iter()
            .find(|r| r.workload == workload && r.period_s == period && r.scheme == scheme)
            .map_or(f64::NAN, |r| r.speedup)
    };
    output.comparisons.push(Comparison {
        what: "static: speedup over classic of NHC, SIB++, SIB+, LBICA".into(),
        thesis: "NHC > SIB++ > SIB+; LBICA poor".into(),
        ours: ["nhc", "sib++", "sib+", "lbica"]
            .iter()
            .map(|s| format!("{:.2}", speedup("static", 0.0, s)))
            .collect::<Vec<_>>()
            .join(", "),
    });
    for scheme in ["sib++", "nhc"] {
        output.comparisons.push(Comparison {
            what: format!("dynamic: {scheme} speedup, 10 s against 0.5 s periods"),
            thesis: if scheme == "nhc" {
                "robust".into()
            } else {
                "falls sharply".into()
            },
            ours: format!(
                "{:.2} against {:.2}",
                speedup("dynamic", 10.0, scheme),
                speedup("dynamic", 0.5, scheme)
            ),
        });
    }
    output.notes.push(
        "SIB trains for 1 s and retrains when the write ratio moves by more than 5 points; \
         LBICA stops installs while the cache device's operations wait longer than the flash's. The \
         thesis describes both only in words (see crates/engine/src/admission/)."
            .into(),
    );
    output.notes.push(crate::micro::SOFTWARE_COST_NOTE.into());
    Ok(output)
}
