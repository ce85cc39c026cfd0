//! Finding the tier sizes a budget buys that give the least mean latency (seed 002 §3.2.4):
//! exhaustively, every tier-1 size in 1 MiB units with tier 2 taking what is left; and by
//! Cydonia (Algorithm 1), which evaluates a handful of tier-1 sizes in order of their Hit-Miss
//! Ratio, skipping those a second tier cannot help (HMR at most the OGR).

use serde::Serialize;

use super::model::{hit_miss_ratio, TierConfig, WritePolicy};
use super::reuse::ReuseByOp;

/// Algorithm 1's defaults: every candidate in HMR order (`step` 1), ten evaluations at most
/// (seed 002 §3.2.4: "the performance improvement per additional evaluation after the first
/// ten becomes small").
pub const CYDONIA_STEP: usize = 1;
pub const CYDONIA_EVALMAX: usize = 10;

/// Tier sizes and what they give.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Sizing {
    pub t1_units: u64,
    pub t2_units: u64,
    pub mean_latency_us: f64,
}

impl Sizing {
    /// A second tier smaller than the first (seed 002 §3.3: often optimal).
    pub fn is_non_pyramidal(&self) -> bool {
        self.t2_units > 0 && self.t2_units < self.t1_units
    }
}

/// A search's answer: the best sizes found and how many it evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SearchResult {
    pub best: Sizing,
    pub evaluations: usize,
}

/// Everything exhaustive search learns: the best sizes overall, with one tier, with a
/// pyramidal second tier (at least as large as the first) and with a non-pyramidal one.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Exhaustive {
    pub best: Sizing,
    pub single_tier: Sizing,
    pub pyramidal: Option<Sizing>,
    pub non_pyramidal: Option<Sizing>,
    pub evaluations: usize,
}

/// Evaluates tier sizes on one configuration, trace and budget.
pub struct Evaluator<'a> {
    pub config: &'a TierConfig,
    pub reuse: &'a ReuseByOp,
    pub policy: WritePolicy,
    pub budget_dollars: f64,
}

impl Evaluator<'_> {
    /// Tier 1 of `t1_units` and the tier 2 the rest of the budget buys.
    fn sizing(&self, t1_units: u64) -> Sizing {
        let t2_units = self.config.tier2_for(t1_units, self.budget_dollars);
        let hits = self.reuse.hits(t1_units, t2_units);
        Sizing {
            t1_units,
            t2_units,
            mean_latency_us: self
                .config
                .mean_latency_us(&hits, self.policy, t2_units > 0),
        }
    }

    /// Mean latency with tier 1 of `t1_units` and tier 2 what the budget leaves (one tier when
    /// nothing is left), µs.
    pub fn latency_at(&self, t1_units: u64) -> f64 {
        self.sizing(t1_units).mean_latency_us
    }

    /// The largest tier 1 the budget buys, alone.
    fn single_tier(&self) -> Sizing {
        let t1_units = self.config.affordable_units(1, self.budget_dollars);
        let hits = self.reuse.hits(t1_units, 0);
        Sizing {
            t1_units,
            t2_units: 0,
            mean_latency_us: self.config.mean_latency_us(&hits, self.policy, false),
        }
    }

    /// Every tier-1 size from one unit to all the budget buys.
    pub fn exhaustive(&self) -> Exhaustive {
        let single_tier = self.single_tier();
        let mut best = single_tier;
        let (mut pyramidal, mut non_pyramidal): (Option<Sizing>, Option<Sizing>) = (None, None);
        let better = |a: &Sizing, b: &Option<Sizing>| {
            b.is_none_or(|b| a.mean_latency_us < b.mean_latency_us)
        };
        for t1_units in 1..single_tier.t1_units {
            let sizing = self.sizing(t1_units);
            if sizing.t2_units == 0 {
                continue;
            }
            if sizing.mean_latency_us < best.mean_latency_us {
                best = sizing;
            }
            let slot = if sizing.is_non_pyramidal() {
                &mut non_pyramidal
            } else {
                &mut pyramidal
            };
            if better(&sizing, slot) {
                *slot = Some(sizing);
            }
        }
        Exhaustive {
            best,
            single_tier,
            pyramidal,
            non_pyramidal,
            evaluations: single_tier.t1_units.max(1) as usize,
        }
    }

    /// Cydonia (seed 002 Algorithm 1): the single tier, then the tier-1 size of the highest HMR
    /// (its tier 2 what the budget leaves); if that beats the single tier, smaller tier-1 sizes
    /// are searched, else larger ones, in HMR order, every `step`-th, until `evalmax`
    /// evaluations in all. Tier-1 sizes whose HMR is at most the OGR are never evaluated: a
    /// second tier cannot pay there. Lines 20 and 25, which seed 002 prints alike, read as
    /// §3.2.4's prose has them: smaller-or-equal after a win, larger-or-equal after a loss; the
    /// first size is not evaluated twice, and the single tier counts as an evaluation.
    pub fn cydonia(&self, step: usize, evalmax: usize) -> SearchResult {
        let single_tier = self.single_tier();
        let ogr = self.config.overhead_gain_ratio();
        let mut candidates: Vec<(u64, f64)> = (1..single_tier.t1_units)
            .filter_map(|t1_units| {
                let t2_units = self.config.tier2_for(t1_units, self.budget_dollars);
                let hmr = hit_miss_ratio(&self.reuse.hits(t1_units, t2_units));
                (t2_units > 0 && hmr > ogr).then_some((t1_units, hmr))
            })
            .collect();
        // Highest HMR first; equal ones by size, so that the order is deterministic.
        candidates.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let Some(&(first_t1, _)) = candidates.first() else {
            return SearchResult {
                best: single_tier,
                evaluations: 1,
            };
        };
        let first = self.sizing(first_t1);
        let mut evaluations = 2;
        let (mut best, smaller) = if first.mean_latency_us < single_tier.mean_latency_us {
            (first, true)
        } else {
            (single_tier, false)
        };
        let rest = candidates
            .iter()
            .filter(|&&(t1_units, _)| t1_units != first_t1 && (t1_units < first_t1) == smaller);
        for &(t1_units, _) in rest.step_by(step.max(1)) {
            if evaluations >= evalmax {
                break;
            }
            let sizing = self.sizing(t1_units);
            evaluations += 1;
            if sizing.mean_latency_us < best.mean_latency_us {
                best = sizing;
            }
        }
        SearchResult { best, evaluations }
    }
}
