//! Seed 000 Figure 4.14: gradual locality change with YCSB-D (§4.5.3): 95% reads of recently
//! inserted keys, 5% inserts, 1 KiB values, 32 threads. Write-around never caches an insert,
//! so with admission off the hit rate decays until NHC finds 1.0 best or the hit rate falls by
//! α, re-admits, and the cycle resumes: a sawtooth. The "always data-admit" ablation keeps a
//! stable hit rate: better than classic, but a lower peak than NHC.

use heterarchy_engine::AdmissionScheme;
use serde::Serialize;

use crate::kv::{ycsb, Kv};
use crate::timeline::{self, Contender};
use crate::{Comparison, ExperimentError, Options, Output};

const KEYS: u64 = 200_000;
const THREADS: u32 = 32;
/// Seconds before the measured part, while the cache fills.
pub const WARM_S: f64 = 3.0;

/// Mean throughput of each contender after the warm-up.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub classic_kops: f64,
    pub nhc_kops: f64,
    pub always_admit_kops: f64,
    /// Highest bucket of each NHC variant, kops.
    pub nhc_peak_kops: f64,
    pub always_admit_peak_kops: f64,
    /// Times NHC re-entered State 1.
    pub nhc_state_1_entries: u64,
}

/// The run, ending at `end_s`.
pub fn setting(end_s: f64) -> Result<Kv, ExperimentError> {
    Ok(Kv::timeline(ycsb('d', KEYS, 1024, 0.99, 1), THREADS)?.until(end_s))
}

/// Classic caching, NHC, and NHC always admitting.
pub fn contenders(kv: &Kv) -> Vec<Contender> {
    let mut contenders = timeline::classic_and_nhc(kv);
    let mut always = kv.cache_config(AdmissionScheme::Nhc);
    always.nhc.always_data_admit = true;
    contenders.push(Contender {
        name: "nhc-always-admit".into(),
        config: always,
    });
    contenders
}

/// The rows and the summary of a run ending at `end_s`.
pub fn rows(
    options: &Options,
    end_s: f64,
) -> Result<(Vec<timeline::Row>, Summary), ExperimentError> {
    let kv = setting(end_s)?;
    let contenders = contenders(&kv);
    let results = timeline::run_all(options, &kv, &contenders)?;
    let rows = timeline::rows(&contenders, &results);
    let peak = |scheme: &str| {
        rows.iter()
            .filter(|r| r.scheme == scheme && r.time_s >= WARM_S)
            .map(|r| r.kops)
            .fold(0.0, f64::max)
    };
    let summary = Summary {
        classic_kops: timeline::mean_kops(&rows, "classic", WARM_S, end_s),
        nhc_kops: timeline::mean_kops(&rows, "nhc", WARM_S, end_s),
        always_admit_kops: timeline::mean_kops(&rows, "nhc-always-admit", WARM_S, end_s),
        nhc_peak_kops: peak("nhc"),
        always_admit_peak_kops: peak("nhc-always-admit"),
        nhc_state_1_entries: results[1]
            .tuning
            .as_ref()
            .and_then(|h| h.state_entries.get("state 1").copied())
            .unwrap_or(0),
    };
    Ok((rows, summary))
}

/// The experiment.
pub fn run(options: &Options) -> Result<Output, ExperimentError> {
    let end_s = WARM_S + 30.0 * options.scale;
    let (rows, summary) = rows(options, end_s)?;
    let mut output = Output::new(
        "Figure 4.14: YCSB-D (1 KiB values, 32 threads): NHC, NHC always admitting, classic",
        &rows,
    );
    output.charts = timeline::charts("YCSB-D", &rows);
    output.comparisons.push(Comparison {
        what: "mean throughput: classic, NHC, always-admit NHC (kops)".into(),
        thesis: "NHC > classic; always-admit > classic".into(),
        ours: format!(
            "{:.0}, {:.0}, {:.0}",
            summary.classic_kops, summary.nhc_kops, summary.always_admit_kops
        ),
    });
    output.comparisons.push(Comparison {
        what: "peak throughput: NHC against always-admit NHC (kops)".into(),
        thesis: "always-admit's peak is lower".into(),
        ours: format!(
            "{:.0} against {:.0}",
            summary.nhc_peak_kops, summary.always_admit_peak_kops
        ),
    });
    output.comparisons.push(Comparison {
        what: "NHC's returns to State 1 (the sawtooth)".into(),
        thesis: "repeated".into(),
        ours: summary.nhc_state_1_entries.to_string(),
    });
    Ok(output)
}
