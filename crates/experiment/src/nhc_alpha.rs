//! How NHC depends on α, the hit-rate drop that sends it back to State 1 (Algorithm 1, line 17;
//! the thesis leaves α open, we default to 0.05): NHC's gain over classic caching and its
//! returns to State 1 on the two workloads whose locality changes (the hot-spot jump of
//! Figure 4.13 and YCSB-D of Figure 4.14) and on a static one (YCSB-C, 16 KiB, θ 0.8).

use heterarchy_engine::AdmissionScheme;
use serde::Serialize;

use crate::kv::{ycsb, Kv};
use crate::timeline::{self, Contender};
use crate::{nhc_hotspot, nhc_ycsb_d, ExperimentError, Options, Output};

pub const ALPHAS: [f64; 7] = [0.002, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5];

/// NHC at one α on one workload.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub workload: &'static str,
    pub alpha: f64,
    /// NHC's mean throughput over classic caching's.
    pub gain: f64,
    pub state_1_entries: u64,
    /// Fraction of the time in State 2.
    pub state_2_share: f64,
}

/// Every workload at every α of `alphas`.
pub fn rows(options: &Options, alphas: &[f64]) -> Result<Vec<Row>, ExperimentError> {
    let hotspot_end_s = nhc_hotspot::JUMP_S + 20.0 * options.scale.max(0.5);
    let ycsb_d_end_s = nhc_ycsb_d::WARM_S + 20.0 * options.scale;
    let ycsb_c = Kv::timeline(ycsb('c', 100_000, 16 * 1024, 0.8, 1), 32)?
        .until(10.0 * options.scale.max(0.5));
    let settings: Vec<(&'static str, Kv, f64)> = vec![
        ("hot-spot jump", nhc_hotspot::setting(hotspot_end_s)?, 4.0),
        (
            "ycsb-d",
            nhc_ycsb_d::setting(ycsb_d_end_s)?,
            nhc_ycsb_d::WARM_S,
        ),
        ("ycsb-c", ycsb_c, 2.0),
    ];
    let mut jobs = Vec::new();
    for (index, (_, kv, _)) in settings.iter().enumerate() {
        jobs.push((
            index,
            Contender {
                name: "classic".into(),
                config: kv.cache_config(AdmissionScheme::Classic),
            },
            None,
        ));
        for &alpha in alphas {
            let mut config = kv.cache_config(AdmissionScheme::Nhc);
            config.nhc.alpha = alpha;
            jobs.push((
                index,
                Contender {
                    name: "nhc".into(),
                    config,
                },
                Some(alpha),
            ));
        }
    }
    let results = options.run_all(&jobs, |(index, contender, _)| {
        settings[*index].1.run(&contender.config)
    });
    let mut rows = Vec::new();
    let mut classic_ops = 0.0;
    for ((index, contender, alpha), result) in jobs.iter().zip(results) {
        let result = result?;
        let (workload, _, from_s) = &settings[*index];
        let buckets = timeline::rows(
            std::slice::from_ref(contender),
            std::slice::from_ref(&result),
        );
        let ops = timeline::mean_of(
            &buckets,
            &contender.name,
            |r| r.time_s >= *from_s,
            |r| r.kops,
        );
        let Some(alpha) = alpha else {
            classic_ops = ops;
            continue;
        };
        let history = result.tuning.as_ref().expect("NHC tunes");
        let total: f64 = history.state_seconds.values().sum();
        rows.push(Row {
            workload,
            alpha: *alpha,
            gain: ops / classic_ops,
            state_1_entries: history.state_entries.get("state 1").copied().unwrap_or(0),
            state_2_share: history.state_seconds.get("state 2").copied().unwrap_or(0.0)
                / total.max(1e-9),
        });
    }
    Ok(rows)
}

/// The experiment.
pub fn run(options: &Options) -> Result<Output, ExperimentError> {
    let rows = rows(options, &ALPHAS)?;
    let mut output = Output::new("NHC's sensitivity to α (Algorithm 1, line 17)", &rows);
    let mut chart = heterarchy_report::LineChart::new(
        "NHC's gain over classic caching by α",
        "α",
        "NHC / classic",
    );
    chart.x_log = true;
    for workload in ["hot-spot jump", "ycsb-d", "ycsb-c"] {
        chart.series.push(heterarchy_report::Series {
            name: workload.into(),
            points: rows
                .iter()
                .filter(|r| r.workload == workload)
                .map(|r| (r.alpha, r.gain))
                .collect(),
        });
    }
    output.charts.push(chart);
    output
        .notes
        .push("The thesis leaves α open; heterarchy defaults to 0.05.".into());
    Ok(output)
}
