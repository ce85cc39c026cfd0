//! Seed 000 Table 4.2: NHC tuned for throughput, mean latency or 99th-percentile latency, against
//! Open CAS (classic caching); read-only, concurrency 8, 95% hits, on PM + Optane SSD and
//! Optane SSD + flash (§4.5.1.3).

use heterarchy_engine::{AdmissionScheme, TargetMetric};
use serde::Serialize;

use crate::micro::Micro;
use crate::nhc_orthus_cas::admission_after;
use crate::{preset, Comparison, ExperimentError, Options, Output};

pub const HIERARCHIES: [(&str, &str); 2] =
    [("optane-pm", "optane-ssd"), ("optane-ssd", "nvme-flash")];
const OUTSTANDING: u32 = 8;

/// Table 4.2 as printed: GB/s, mean µs, P99 µs for Open CAS and the three targets.
const THESIS: [[(f64, f64, f64); 4]; 2] = [
    [
        (6.7, 77.0, 115.0),
        (8.0, 64.0, 147.0),
        (8.0, 64.0, 143.0),
        (6.9, 75.0, 106.0),
    ],
    [
        (2.3, 227.0, 269.0),
        (3.9, 132.0, 289.0),
        (3.9, 132.0, 285.0),
        (3.3, 155.0, 245.0),
    ],
];

/// The controllers of the table's rows: classic caching, then NHC for each target.
pub const TARGETS: [Option<TargetMetric>; 4] = [
    None,
    Some(TargetMetric::Throughput),
    Some(TargetMetric::MeanLatency),
    Some(TargetMetric::P99Latency),
];

/// One line of Table 4.2 with the thesis' figures beside ours.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub hierarchy: String,
    /// `open-cas` (classic caching) or NHC's target metric.
    pub target: &'static str,
    pub throughput_gb_s: f64,
    pub mean_latency_us: f64,
    pub p99_latency_us: f64,
    /// NHC's mean `load_admit` over the measured time (1 for Open CAS).
    pub load_admit: f64,
    pub thesis_throughput_gb_s: f64,
    pub thesis_mean_latency_us: f64,
    pub thesis_p99_latency_us: f64,
}

fn target_name(target: Option<TargetMetric>) -> &'static str {
    match target {
        None => "open-cas",
        Some(TargetMetric::Throughput) => "throughput",
        Some(TargetMetric::MeanLatency) => "mean-latency",
        Some(TargetMetric::P99Latency) => "p99-latency",
    }
}

/// Every line of the table.
pub fn rows(options: &Options) -> Result<Vec<Row>, ExperimentError> {
    let mut jobs = Vec::new();
    for (index, &(cache, capacity)) in HIERARCHIES.iter().enumerate() {
        let mut micro = Micro::orthus_cas([preset(cache)?, preset(capacity)?], OUTSTANDING);
        micro.measure_s *= options.scale;
        for (line, target) in TARGETS.into_iter().enumerate() {
            jobs.push((index, line, micro.clone(), target));
        }
    }
    let results = options.run_all(&jobs, |(_, _, micro, target)| {
        let mut config = micro.cache_config(match target {
            None => AdmissionScheme::Classic,
            Some(_) => AdmissionScheme::Nhc,
        });
        if let Some(target) = target {
            config.nhc.target = *target;
        }
        micro.run(&config)
    });
    jobs.iter()
        .zip(results)
        .map(|((index, line, micro, target), result)| {
            let result = result?;
            let measured_from_s = micro.load().warmup_ns as f64 / 1e9;
            let (load_admit, _) = admission_after(&result, measured_from_s);
            let (cache, capacity) = HIERARCHIES[*index];
            let thesis = THESIS[*index][*line];
            Ok(Row {
                hierarchy: format!("{cache}+{capacity}"),
                target: target_name(*target),
                throughput_gb_s: result.throughput_bytes_per_s / 1e9,
                mean_latency_us: result.mean_latency_us,
                p99_latency_us: result.p99_latency_us,
                load_admit,
                thesis_throughput_gb_s: thesis.0,
                thesis_mean_latency_us: thesis.1,
                thesis_p99_latency_us: thesis.2,
            })
        })
        .collect()
}

/// The experiment.
pub fn run(options: &Options) -> Result<Output, ExperimentError> {
    let rows = rows(options)?;
    let mut output = Output::new(
        "Table 4.2: NHC's target metrics (read-only, concurrency 8, 95% hits)",
        &rows,
    );
    for row in &rows {
        output.comparisons.push(Comparison {
            what: format!("{} {}: GB/s, mean us, p99 us", row.hierarchy, row.target),
            thesis: format!(
                "{:.1}, {:.0}, {:.0}",
                row.thesis_throughput_gb_s, row.thesis_mean_latency_us, row.thesis_p99_latency_us
            ),
            ours: format!(
                "{:.2}, {:.0}, {:.0}",
                row.throughput_gb_s, row.mean_latency_us, row.p99_latency_us
            ),
        });
    }
    output.notes.push(
        "Latencies are the simulator's end-to-end latencies on the device models, Open CAS's \
         software cost included; the thesis measured Open CAS on real devices."
            .into(),
    );
    output.notes.push(crate::micro::SOFTWARE_COST_NOTE.into());
    output
        .notes
        .push(crate::nhc_orthus_cas::TAILS_DEVIATION.into());
    Ok(output)
}
