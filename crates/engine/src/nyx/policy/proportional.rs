//! Proportional resource allocation, seed 000 Algorithm 5: the device is split among tenants
//! by weight in M2's units and each is held to its share epoch by epoch (Alg. 2's
//! enforcement); after each epoch the idle part of a share is lent to tenants that used theirs
//! up. [`Donation::InterferenceAware`] (Option 2) lends in steps of `donate_step` while the
//! lender's slowdown (M4) stays under its time-sharing bound `TotalWeight / weight`, and takes
//! a step back when it does not; [`Donation::All`] (Option 1, the thesis' "Donate All") lends
//! every idle unit at once; [`Donation::None`] ("No Re-alloc") lends nothing. With
//! [`Meter::Bytes`](super::Meter::Bytes) and no donation it is the bandwidth-proportional baseline of Fig 5.10.
//!
//! Line 16's allocator is not given; ours is weighted max-min (water-filling): no tenant gets
//! more than it asks, the rest is split by weight. A lender lends only while a whole step below
//! its bound and takes back once past it, holding in between, so that it stays on the right
//! side of the bound rather than straddling it.

use std::sync::Arc;

use super::alone::{AloneEstimator, Refresh};
use super::epochs::{EpochTick, EpochUse, Epochs};
use super::SharingPolicy;
use crate::nyx::regulator::Regulator;

/// How idle resources are lent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Donation {
    /// "No Re-alloc": shares stay as weighted.
    None,
    /// "Donate All" (Option 1): a tenant asks for what it used.
    All,
    /// Nyx (Option 2): lent a step at a time within the lender's slowdown bound.
    InterferenceAware,
}

/// Algorithm 5 over a fixed list of tenants.
#[derive(Debug)]
pub struct Proportional {
    epochs: Epochs,
    /// The whole device in the meter's units per second (1.0 for M2's cost).
    total: f64,
    weights: Vec<f64>,
    /// Each tenant's budget for this epoch, meter units per second.
    assigned: Vec<f64>,
    donation: Donation,
    donate_step: f64,
    alone: AloneEstimator,
    /// Each tenant's slowdown over the last epoch, where known.
    slowdowns: Vec<Option<f64>>,
}

impl Proportional {
    /// `total` of the meter's units a second shared by `weights`, lent by `donation` in steps
    /// of `donate_step`, lenders' slowdowns from `alone`.
    pub fn new(
        epochs: Epochs,
        total: f64,
        weights: Vec<f64>,
        donation: Donation,
        donate_step: f64,
        alone: AloneEstimator,
    ) -> Proportional {
        let total_weight: f64 = weights.iter().sum();
        Proportional {
            epochs,
            total,
            assigned: weights.iter().map(|w| total * w / total_weight).collect(),
            slowdowns: vec![None; weights.len()],
            weights,
            donation,
            donate_step,
            alone,
        }
    }

    /// Each tenant's budget now, in the meter's units per second.
    pub fn assigned(&self) -> &[f64] {
        &self.assigned
    }

    fn share(&self, tenant: usize) -> f64 {
        self.total * self.weights[tenant] / self.weights.iter().sum::<f64>()
    }

    /// Lines 8–16: next epoch's budgets from what each tenant did in the last.
    fn reallocate(&mut self, used: &[EpochUse]) {
        self.slowdowns = (0..used.len())
            .map(|t| self.alone.slowdown(t, used[t].requests_per_second))
            .collect();
        if self.donation == Donation::None {
            return;
        }
        let total_weight: f64 = self.weights.iter().sum();
        let desired: Vec<f64> = (0..used.len())
            .map(|tenant| {
                let assigned = self.assigned[tenant];
                if let Some(after) = used[tenant].used_up_after {
                    // Line 15: a linear forecast of what it would have used.
                    return assigned / after;
                }
                let used = used[tenant].used_per_second;
                match self.donation {
                    Donation::All => used,
                    Donation::InterferenceAware => {
                        let bound = total_weight / self.weights[tenant];
                        match self.slowdowns[tenant] {
                            Some(slowdown) if slowdown > bound => {
                                (assigned * (1.0 + self.donate_step)).min(self.share(tenant))
                            }
                            Some(slowdown) if slowdown * (1.0 + self.donate_step) < bound => {
                                (assigned * (1.0 - self.donate_step)).max(used)
                            }
                            // Within a step of the bound: hold.
                            _ => assigned,
                        }
                    }
                    Donation::None => assigned,
                }
            })
            .collect();
        self.assigned = water_fill(self.total, &self.weights, &desired);
    }
}

/// Weighted max-min: splits `total` by `weights`, no one past its `desired`.
pub fn water_fill(total: f64, weights: &[f64], desired: &[f64]) -> Vec<f64> {
    let mut given = vec![0.0; weights.len()];
    let mut open: Vec<usize> = (0..weights.len()).collect();
    let mut left = total;
    while !open.is_empty() && left > 0.0 {
        let open_weight: f64 = open.iter().map(|&t| weights[t]).sum();
        let satisfied: Vec<usize> = open
            .iter()
            .copied()
            .filter(|&t| desired[t] - given[t] <= left * weights[t] / open_weight)
            .collect();
        if satisfied.is_empty() {
            for &t in &open {
                given[t] += left * weights[t] / open_weight;
            }
            break;
        }
        for &t in &satisfied {
            left -= (desired[t] - given[t]).max(0.0);
            given[t] = desired[t].max(given[t]);
        }
        open.retain(|t| !satisfied.contains(t));
    }
    given
}

impl SharingPolicy for Proportional {
    fn step(&mut self, now_ns: u64, gates: &[Arc<Regulator>]) -> u64 {
        let next_round_ns = if self.donation == Donation::InterferenceAware {
            match self.alone.step(now_ns, gates) {
                Refresh::Measuring(wake_ns) => return wake_ns,
                Refresh::Finished => now_ns,
                Refresh::Idle(next_round_ns) => next_round_ns,
            }
        } else {
            u64::MAX
        };
        let budgets: Vec<Option<f64>> = self.assigned.iter().map(|&a| Some(a)).collect();
        if let EpochTick::Ended(used) = self.epochs.tick(now_ns, gates, &budgets) {
            self.reallocate(&used);
            for (gate, slowdown) in gates.iter().zip(&self.slowdowns) {
                gate.publish_slowdown(*slowdown);
            }
        }
        (now_ns + self.epochs.tick_ns()).min(next_round_ns.max(now_ns + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nyx::policy::Meter;

    #[test]
    fn water_filling_gives_no_one_more_than_it_asks_and_splits_the_rest_by_weight() {
        let shares = water_fill(1.0, &[2.0, 1.0], &[0.2, 1.0]);
        assert!((shares[0] - 0.2).abs() < 1e-12 && (shares[1] - 0.8).abs() < 1e-12);
        let shares = water_fill(1.0, &[2.0, 1.0], &[5.0, 5.0]);
        assert!((shares[0] - 2.0 / 3.0).abs() < 1e-12 && (shares[1] - 1.0 / 3.0).abs() < 1e-12);
        let shares = water_fill(1.0, &[1.0, 1.0, 1.0], &[0.1, 0.5, 0.5]);
        assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!((shares[1] - 0.45).abs() < 1e-12, "{shares:?}");
    }

    fn used(used_per_second: f64, used_up_after: Option<f64>, requests: f64) -> EpochUse {
        EpochUse {
            used_per_second,
            used_up_after,
            requests_per_second: requests,
        }
    }

    fn policy(donation: Donation) -> Proportional {
        Proportional::new(
            Epochs::new(Meter::Cost, 10_000_000, 100),
            1.0,
            vec![2.0, 1.0],
            donation,
            0.1,
            AloneEstimator::new(2, 1_000_000_000, 1_000_000),
        )
    }

    #[test]
    fn a_lender_within_its_bound_lends_a_step_and_takes_one_back_past_it() {
        // Tenant 0 (weight 2 of 3) uses a quarter of its share; tenant 1 uses all of its own
        // half-way through the epoch.
        let epoch = [
            used(1.0 / 6.0, None, 100.0),
            used(1.0 / 3.0, Some(0.5), 100.0),
        ];
        let mut none = policy(Donation::None);
        none.reallocate(&epoch);
        assert_eq!(none.assigned(), &[2.0 / 3.0, 1.0 / 3.0]);
        let mut all = policy(Donation::All);
        all.reallocate(&epoch);
        assert!(
            (all.assigned()[0] - 1.0 / 6.0).abs() < 1e-9,
            "{:?}",
            all.assigned()
        );
        // Interference-aware: slowdown unknown, nothing lent; within the bound (1.5), a step.
        let mut aware = policy(Donation::InterferenceAware);
        aware.reallocate(&epoch);
        assert!((aware.assigned()[0] - 2.0 / 3.0).abs() < 1e-9);
        aware.alone.alone_requests_per_second_for_test(0, 120.0);
        aware.reallocate(&epoch);
        assert!(
            (aware.assigned()[0] - 0.6).abs() < 1e-9,
            "{:?}",
            aware.assigned()
        );
        assert!((aware.assigned()[1] - 0.4).abs() < 1e-9);
        // Past the bound (slowdown 2 > 1.5): a step back, never past its weighted share.
        aware.alone.alone_requests_per_second_for_test(0, 200.0);
        aware.reallocate(&epoch);
        assert!(
            (aware.assigned()[0] - 0.66).abs() < 1e-9,
            "{:?}",
            aware.assigned()
        );
        aware.reallocate(&epoch);
        assert!((aware.assigned()[0] - 2.0 / 3.0).abs() < 1e-9);
    }
}
