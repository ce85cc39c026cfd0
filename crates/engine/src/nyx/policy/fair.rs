//! Fair slowdown, seed 000 Algorithm 4: each interval every tenant's slowdown (M4's T_alone
//! over its throughput while shared) is taken; while the largest over the smallest exceeds the
//! unfairness threshold, the least-slowed tenant is throttled and the most-slowed one's throttle
//! eased; after enough fair intervals every throttle is eased to win back utilization. A tenant
//! may carry a hard slowdown limit (§5.3.6, Fig 5.14): while it is past it, every tenant
//! without one is throttled in proportion to the breach, and the limited tenant is never
//! throttled to even out the others' slowdowns.
//!
//! Seed 000 leaves the interval, thresholds and steps open (§5.2.6 gives no values for them);
//! ours: an interval of ten ticks (100 ms), threshold 1.05 (where the thesis' unfairness
//! settles), five fair intervals, a throttle of the least-slowed tenant by half the unfairness
//! past 1, at most the step (10%), so that it closes in without overshooting, and easings of
//! 2.5%.

use std::sync::Arc;

use super::alone::{AloneEstimator, Refresh};
use super::window::{throttle_down_by_factor, throttle_up_by_factor, TenantWindow, Windows};
use super::{SharingPolicy, TenantTerms};
use crate::nyx::regulator::Regulator;

/// Unfairness tolerated (seed 000 §5.3.4: it "settles near 1.05").
pub const UNFAIRNESS_THRESHOLD: f64 = 1.05;
/// Fair intervals before every throttle is eased.
pub const FAIR_INTERVALS: u32 = 5;
/// The largest throttle step, as a share of a tenant's throughput.
pub const STEP: f64 = 0.1;
/// A hard limit is defended from this share of it on, so that a ramping load and the
/// estimate's noise seldom carry the tenant past the limit itself.
pub const HARD_LIMIT_MARGIN: f64 = 0.95;
/// The easing after fair intervals: small, so that it does not undo fairness.
pub const EASE: f64 = 0.025;

/// Algorithm 4 over a fixed list of tenants.
#[derive(Debug)]
pub struct FairSlowdown {
    terms: Vec<TenantTerms>,
    alone: AloneEstimator,
    interval_ns: u64,
    windows: Windows,
    fair_intervals: u32,
}

impl FairSlowdown {
    /// Over tenants with `terms`, slowdowns from `alone`, adjusted every `interval_ns`.
    pub fn new(terms: Vec<TenantTerms>, alone: AloneEstimator, interval_ns: u64) -> FairSlowdown {
        FairSlowdown {
            terms,
            alone,
            interval_ns: interval_ns.max(1),
            windows: Windows::new(false),
            fair_intervals: 0,
        }
    }

    /// One interval's decision over the slowdowns just measured (each tenant's, where known).
    fn adjust(
        &mut self,
        gates: &[Arc<Regulator>],
        windows: &[TenantWindow],
        slowdowns: &[Option<f64>],
    ) {
        let known: Vec<(usize, f64)> = slowdowns
            .iter()
            .enumerate()
            .filter_map(|(tenant, slowdown)| slowdown.map(|s| (tenant, s)))
            .collect();
        // How far the tenant furthest past its hard limit is past it (1: none is).
        let past_limit = known
            .iter()
            .filter_map(|&(tenant, slowdown)| {
                let limit = self.terms[tenant].slowdown_limit? * HARD_LIMIT_MARGIN;
                (slowdown > limit).then_some(slowdown / limit)
            })
            .fold(1.0, f64::max);
        if past_limit > 1.0 {
            // The others give way in proportion to the breach (at most half at once), so that
            // a tenant far past its limit is back within it in a few intervals.
            let factor = (1.0 / past_limit).clamp(0.5, 1.0 - STEP);
            for (tenant, gate) in gates.iter().enumerate() {
                if self.terms[tenant].slowdown_limit.is_none() {
                    throttle_up_by_factor(gate, &windows[tenant], factor);
                } else {
                    // A limited tenant's own throttle goes first.
                    throttle_down_by_factor(gate, &windows[tenant], 1.0 / factor);
                }
            }
            self.fair_intervals = 0;
            return;
        }
        let (Some(&(most, largest)), Some(&(least, smallest))) = (
            known.iter().max_by(|a, b| a.1.total_cmp(&b.1)),
            known.iter().min_by(|a, b| a.1.total_cmp(&b.1)),
        ) else {
            return;
        };
        let unfairness = largest / smallest;
        if unfairness > UNFAIRNESS_THRESHOLD {
            let step = ((unfairness - 1.0) / 2.0).min(STEP);
            // A tenant with a hard limit is not throttled towards the others' slowdowns.
            if self.terms[least].slowdown_limit.is_none() {
                throttle_up_by_factor(&gates[least], &windows[least], 1.0 - step);
            }
            throttle_down_by_factor(&gates[most], &windows[most], 1.0 + step);
            self.fair_intervals = 0;
        } else {
            self.fair_intervals += 1;
            if self.fair_intervals > FAIR_INTERVALS {
                for (gate, window) in gates.iter().zip(windows) {
                    throttle_down_by_factor(gate, window, 1.0 + EASE);
                }
                self.fair_intervals = 0;
            }
        }
    }
}

impl SharingPolicy for FairSlowdown {
    fn step(&mut self, now_ns: u64, gates: &[Arc<Regulator>]) -> u64 {
        let next_round_ns = match self.alone.step(now_ns, gates) {
            Refresh::Measuring(wake_ns) => return wake_ns,
            Refresh::Finished => {
                // Intervals see no pauses.
                self.windows.start(now_ns, gates);
                return now_ns + self.interval_ns;
            }
            Refresh::Idle(next_round_ns) => next_round_ns,
        };
        match self.windows.started_ns() {
            Some(started_ns) if now_ns >= started_ns + self.interval_ns => {
                let windows = self.windows.close(now_ns, gates);
                let slowdowns: Vec<Option<f64>> = (0..gates.len())
                    .map(|t| self.alone.slowdown(t, windows[t].requests_per_second()))
                    .collect();
                for (gate, slowdown) in gates.iter().zip(&slowdowns) {
                    gate.publish_slowdown(*slowdown);
                }
                self.adjust(gates, &windows, &slowdowns);
            }
            Some(_) => {}
            None => self.windows.start(now_ns, gates),
        }
        let started_ns = self.windows.started_ns().unwrap_or(now_ns);
        (started_ns + self.interval_ns).min(next_round_ns.max(now_ns + 1))
    }
}
