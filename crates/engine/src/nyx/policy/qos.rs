//! QoS, seed 000 Algorithm 3: every tail-latency window each latency-critical (LC) tenant's
//! slack `(target − p99) / target` is taken; when the worst is negative, its own throttle is
//! eased if it has one, else the tenant that harms it most — found by interference analysis
//! (M3) among the three best-effort (BE) tenants using most of the device — is throttled by
//! ExperimentStep; when every LC tenant has more than 0.2 slack, every throttle is eased.
//! [`Choice::MostBandwidth`] is the thesis' Nyx-Caladan baseline: the BE tenant moving most
//! bytes is throttled, no experiment run.
//!
//! Seed 000 omits the "code to rollback throttling when the action violates any LC task's
//! target" (Algorithm 3's caption) and the steps' sizes (§5.2.6 gives only ExperimentStep,
//! 500MB/s). Ours: a throttle takes ExperimentStep, an easing a quarter of it; a violation
//! right after an easing is handled as any other (the tenant to throttle found again), and the
//! next easing waits twice as many windows as the last (up to 64), so that the throttles settle
//! where the targets hold instead of swinging across them.

use std::sync::Arc;

use super::interference::{Analysis, InterferenceAnalysis};
use super::window::{throttle_down_by_bytes, throttle_up_by_bytes, TenantWindow, Windows};
use super::{SharingPolicy, TenantClass, TenantTerms};
use crate::nyx::regulator::Regulator;

/// Alg. 3's slack above which throttles are eased.
pub const RELAX_SLACK: f64 = 0.2;
/// Alg. 3 line 13: candidates kept for the experiment.
pub const CANDIDATES: usize = 3;
/// An easing's share of ExperimentStep.
pub const EASE_SHARE: f64 = 0.25;
/// The most windows an easing waits after a rollback.
pub const MAX_EASE_WAIT: u32 = 64;

/// How the tenant to throttle is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Nyx: the candidate whose throttling most improves the victim (M3).
    Interference,
    /// Caladan: the BE tenant moving most bytes.
    MostBandwidth,
}

/// Algorithm 3 over a fixed list of tenants.
#[derive(Debug)]
pub struct Qos {
    terms: Vec<TenantTerms>,
    choice: Choice,
    step_bytes_per_second: f64,
    window_ns: u64,
    windows: Windows,
    analysis: Option<InterferenceAnalysis>,
    /// Whether the last window eased the throttles (its effect unseen yet).
    eased: bool,
    /// Windows the next easing waits, and windows waited so far.
    ease_wait: u32,
    waited: u32,
}

impl Qos {
    /// Over tenants with `terms`, choosing whom to throttle by `choice`, a throttle step
    /// costing `step_bytes_per_second`, one decision per `window_ns`.
    pub fn new(
        terms: Vec<TenantTerms>,
        choice: Choice,
        step_bytes_per_second: f64,
        window_ns: u64,
    ) -> Qos {
        Qos {
            choice,
            step_bytes_per_second,
            window_ns: window_ns.max(1),
            windows: Windows::new(true),
            analysis: None,
            eased: false,
            ease_wait: 1,
            waited: 0,
            terms,
        }
    }

    /// Lines 3–5: each LC tenant's slack, the smallest first; tenants without requests in the
    /// window have none.
    fn slacks(&self, windows: &[TenantWindow]) -> Vec<(usize, f64)> {
        let mut slacks: Vec<(usize, f64)> = self
            .terms
            .iter()
            .enumerate()
            .filter_map(|(tenant, terms)| {
                let target = terms.p99_target_ns? as f64;
                let p99 = windows[tenant].p99_ns()?;
                Some((tenant, (target - p99) / target))
            })
            .collect();
        slacks.sort_by(|a, b| a.1.total_cmp(&b.1));
        slacks
    }

    /// Lines 11–17: the tenants that may be throttled for `victim`.
    fn candidates(
        &self,
        victim: usize,
        windows: &[TenantWindow],
        slacks: &[(usize, f64)],
    ) -> Vec<usize> {
        let by_use = |tenants: Vec<usize>, key: &dyn Fn(&TenantWindow) -> f64| {
            let mut tenants: Vec<usize> = tenants
                .into_iter()
                .filter(|&t| t != victim && windows[t].usage.accesses > 0)
                .collect();
            tenants.sort_by(|&a, &b| key(&windows[b]).total_cmp(&key(&windows[a])));
            tenants
        };
        let best_effort: Vec<usize> = (0..self.terms.len())
            .filter(|&t| self.terms[t].class == TenantClass::BestEffort)
            .collect();
        let mut candidates = match self.choice {
            Choice::MostBandwidth => by_use(best_effort, &TenantWindow::bytes_per_second),
            Choice::Interference => by_use(best_effort, &TenantWindow::utilization),
        };
        if candidates.is_empty() {
            let roomy: Vec<usize> = slacks
                .iter()
                .filter(|(_, slack)| *slack > RELAX_SLACK)
                .map(|(t, _)| *t)
                .collect();
            candidates = by_use(roomy, &TenantWindow::utilization);
            if candidates.is_empty() {
                // Line 17: the LC tenant with the most slack.
                candidates = slacks
                    .iter()
                    .rev()
                    .map(|(t, _)| *t)
                    .filter(|&t| t != victim)
                    .take(1)
                    .collect();
            }
        }
        let keep = match self.choice {
            Choice::MostBandwidth => 1,
            Choice::Interference => CANDIDATES,
        };
        candidates.truncate(keep);
        candidates
    }

    /// Runs the analysis under way; the next wake while it runs.
    fn analyse(&mut self, now_ns: u64, gates: &[Arc<Regulator>]) -> Option<u64> {
        let analysis = self.analysis.as_mut()?;
        match analysis.step(now_ns, gates) {
            Analysis::Trying(wake_ns) => Some(wake_ns),
            Analysis::Found(tenant) => {
                let analysis = self.analysis.take().expect("an analysis");
                throttle_up_by_bytes(
                    &gates[tenant],
                    analysis.before(tenant),
                    self.step_bytes_per_second,
                );
                // The next window shows the throttle's effect alone.
                self.windows.start(now_ns, gates);
                Some(now_ns + self.window_ns)
            }
        }
    }
}

impl SharingPolicy for Qos {
    fn step(&mut self, now_ns: u64, gates: &[Arc<Regulator>]) -> u64 {
        if let Some(wake_ns) = self.analyse(now_ns, gates) {
            return wake_ns;
        }
        let Some(started_ns) = self.windows.started_ns() else {
            self.windows.start(now_ns, gates);
            return now_ns + self.window_ns;
        };
        if now_ns < started_ns + self.window_ns {
            return started_ns + self.window_ns;
        }
        let windows = self.windows.close(now_ns, gates);
        let slacks = self.slacks(&windows);
        let Some(&(victim, slack)) = slacks.first() else {
            return now_ns + self.window_ns;
        };
        let eased = std::mem::take(&mut self.eased);
        if slack < 0.0 {
            if eased {
                // The easing broke a target: ease less often.
                self.ease_wait = (self.ease_wait * 2).min(MAX_EASE_WAIT);
            }
            if gates[victim].rate_cap().is_some() {
                // Line 9: the victim is held back by its own throttle.
                throttle_down_by_bytes(
                    &gates[victim],
                    &windows[victim],
                    self.step_bytes_per_second,
                );
            } else {
                let candidates = self.candidates(victim, &windows, &slacks);
                if candidates.is_empty() {
                    return now_ns + self.window_ns;
                }
                self.analysis = Some(InterferenceAnalysis::new(
                    victim,
                    candidates,
                    windows,
                    self.step_bytes_per_second,
                    self.window_ns,
                ));
                return self.analyse(now_ns, gates).expect("an analysis");
            }
        } else {
            if eased {
                self.ease_wait = 1;
            }
            self.waited += 1;
            let throttled = gates.iter().any(|gate| gate.rate_cap().is_some());
            if slack > RELAX_SLACK && throttled && self.waited >= self.ease_wait {
                // Lines 21–23: everyone has room; give throughput back.
                for (gate, window) in gates.iter().zip(&windows) {
                    throttle_down_by_bytes(gate, window, self.step_bytes_per_second * EASE_SHARE);
                }
                self.eased = true;
                self.waited = 0;
            }
        }
        now_ns + self.window_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nyx::performance::PerformanceSnapshot;
    use crate::nyx::regulator::Usage;

    fn lc(target_ns: u64) -> TenantTerms {
        TenantTerms {
            class: TenantClass::LatencyCritical,
            p99_target_ns: Some(target_ns),
            ..TenantTerms::default()
        }
    }

    /// A window in which a tenant made `accesses` costing `cost_ps` and moving `bytes`.
    fn window(accesses: u64, bytes: u64, cost_ps: u64) -> TenantWindow {
        TenantWindow {
            window_ns: 1_000_000_000,
            usage: Usage {
                cost_ps,
                accesses,
                bytes,
            },
            performance: PerformanceSnapshot::default(),
        }
    }

    #[test]
    fn candidates_are_the_best_effort_tenants_using_most_of_the_device_not_most_bytes() {
        let terms = vec![
            lc(1000),
            TenantTerms::default(),
            TenantTerms::default(),
            TenantTerms::default(),
            TenantTerms::default(),
        ];
        let windows = vec![
            window(1, 1, 1),
            // Many bytes, little device time (large reads) ...
            window(1000, 4_000_000, 100),
            // ... few bytes, much device time (small writes), and two in between.
            window(1000, 64_000, 900),
            window(1000, 1_000_000, 500),
            window(1000, 2_000_000, 300),
        ];
        let slacks = vec![(0, -0.5)];
        let nyx = Qos::new(terms.clone(), Choice::Interference, 500e6, 1);
        assert_eq!(nyx.candidates(0, &windows, &slacks), vec![2, 3, 4]);
        let caladan = Qos::new(terms, Choice::MostBandwidth, 500e6, 1);
        assert_eq!(caladan.candidates(0, &windows, &slacks), vec![1]);
    }

    #[test]
    fn without_best_effort_tenants_roomy_lc_ones_are_candidates_else_the_roomiest() {
        let terms = vec![lc(1000), lc(1000), lc(1000)];
        let windows = vec![window(10, 10, 10); 3];
        let qos = Qos::new(terms, Choice::Interference, 500e6, 1);
        // Tenant 2 has more than 0.2 slack: it alone may be throttled.
        assert_eq!(
            qos.candidates(0, &windows, &[(0, -0.1), (1, 0.1), (2, 0.5)]),
            vec![2]
        );
        // No one has: the one with the most slack (line 17).
        assert_eq!(
            qos.candidates(0, &windows, &[(0, -0.1), (2, 0.05), (1, 0.1)]),
            vec![1]
        );
    }

    #[test]
    fn a_violating_victim_that_is_itself_throttled_is_eased_first() {
        let gates: Vec<Arc<Regulator>> = (0..2).map(|_| Arc::new(Regulator::new())).collect();
        let mut qos = Qos::new(
            vec![lc(1000), TenantTerms::default()],
            Choice::Interference,
            500e6,
            1_000,
        );
        gates[0].set_rate_cap(Some(1e6));
        assert_eq!(qos.step(0, &gates), 1_000);
        // The victim runs at its throttle, its p99 twice its target.
        for _ in 0..1000 {
            gates[0].record_request(2000);
        }
        let profile = crate::nyx::cost::MaxIopsProfile::flat(1e6, 1e6);
        for _ in 0..1000 {
            gates[0].charge(&profile, heterarchy_device::model::IoKind::Read, 1000);
            gates[1].charge(&profile, heterarchy_device::model::IoKind::Write, 1000);
        }
        assert_eq!(qos.step(1_000, &gates), 2_000);
        // Eased by 500 MB/s of its 1 KB accesses: half a million more a second.
        let cap = gates[0].rate_cap().unwrap();
        assert!((cap - 1.5e6).abs() < 10.0, "{cap}");
        assert_eq!(gates[1].rate_cap(), None);
    }
}
