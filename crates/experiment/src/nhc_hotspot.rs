//! Seed 000 Figure 4.13: a sudden locality change (§4.5.3): YCSB-C-like reads of 16 KiB values,
//! 32 threads, Zipf θ = 0.8, whose hot spot moves at 10 s. "Orthus-KV quickly detects the
//! change in hit rate and switches to classic caching ... Approximately 20s after the workload
//! change, the hit rate stabilizes and Orthus-KV reaches steady-state performance that is 60%
//! higher than classic caching."
//!
//! The jump is a new seeded rank-to-key permutation: after it the hot keys are others, as
//! when the hot spot moves from the start of the key space to its end.

use heterarchy_engine::TuningPoint;
use serde::Serialize;

use crate::kv::{ycsb, Kv};
use crate::timeline;
use crate::{Comparison, ExperimentError, Options, Output};

pub const JUMP_S: f64 = 10.0;
const KEYS: u64 = 100_000;
const THREADS: u32 = 32;

/// What happened around the jump.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Seconds from the jump until NHC was back in State 1 (`None`: it never was).
    pub back_to_state_1_s: Option<f64>,
    /// NHC over classic before the jump (after the first 4 s).
    pub gain_before: f64,
    /// NHC over classic over the last quarter of the run.
    pub gain_at_end: f64,
}

/// The Kv run: the jump at `JUMP_S`, ending at `end_s`.
pub fn setting(end_s: f64) -> Result<Kv, ExperimentError> {
    let before = ycsb('c', KEYS, 16 * 1024, 0.8, 1);
    let after = ycsb('c', KEYS, 16 * 1024, 0.8, 2);
    let mut kv = Kv::timeline(before, THREADS)?.until(end_s);
    kv.phases.push(((JUMP_S * 1e9) as u64, after));
    Ok(kv)
}

/// Seconds after `at_s` until the first tuning point in State 1.
pub fn state_1_after(points: &[TuningPoint], at_s: f64) -> Option<f64> {
    points
        .iter()
        .find(|p| p.time_s >= at_s && p.state == "state 1")
        .map(|p| p.time_s - at_s)
}

/// The rows and the summary of a run ending at `end_s`.
pub fn rows(
    options: &Options,
    end_s: f64,
) -> Result<(Vec<timeline::Row>, Summary), ExperimentError> {
    let kv = setting(end_s)?;
    let contenders = timeline::classic_and_nhc(&kv);
    let results = timeline::run_all(options, &kv, &contenders)?;
    let rows = timeline::rows(&contenders, &results);
    let history = results[1].tuning.as_ref().expect("NHC tunes");
    let gain = |from_s: f64, to_s: f64| {
        timeline::mean_kops(&rows, "nhc", from_s, to_s)
            / timeline::mean_kops(&rows, "classic", from_s, to_s)
    };
    let summary = Summary {
        back_to_state_1_s: state_1_after(&history.points, JUMP_S),
        gain_before: gain(4.0, JUMP_S),
        gain_at_end: gain(end_s - (end_s - JUMP_S) / 4.0, end_s),
    };
    Ok((rows, summary))
}

/// The experiment.
pub fn run(options: &Options) -> Result<Output, ExperimentError> {
    let end_s = JUMP_S + 30.0 * options.scale.max(0.5);
    let (rows, summary) = rows(options, end_s)?;
    let mut output = Output::new(
        "Figure 4.13: the hot spot jumps at 10 s (YCSB-C, 16 KiB values, 32 threads, θ 0.8)",
        &rows,
    );
    output.charts = timeline::charts("Hot-spot jump at 10 s", &rows);
    output.comparisons.push(Comparison {
        what: "back to State 1 after the jump".into(),
        thesis: "at once".into(),
        ours: summary
            .back_to_state_1_s
            .map_or("never".into(), |s| format!("after {:.0} ms", s * 1e3)),
    });
    output.comparisons.push(Comparison {
        what: "steady state after the jump, NHC over classic".into(),
        thesis: "+60% (about 20 s after)".into(),
        ours: format!(
            "{:+.0}% (last quarter of the run)",
            (summary.gain_at_end - 1.0) * 100.0
        ),
    });
    output.comparisons.push(Comparison {
        what: "before the jump, NHC over classic".into(),
        thesis: "(not stated)".into(),
        ours: format!("{:+.0}%", (summary.gain_before - 1.0) * 100.0),
    });
    Ok(output)
}
