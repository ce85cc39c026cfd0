//! M3, interference analysis (seed 000 §5.2.3; Alg. 3's `getLargestInterference`, lines
//! 25–33): to find who harms a victim most, throttle each candidate in turn by the same
//! throughput expense for one tail-latency window, note the victim's p99, restore every
//! throttle, and name the candidate whose throttling helped most. On PM the answer is not the
//! tenant moving most bytes: a few writes hurt readers more than many reads.

use std::sync::Arc;

use super::window::{throttle_up_by_bytes, TenantWindow};
use crate::nyx::performance::PerformanceSnapshot;
use crate::nyx::regulator::Regulator;

/// Where an analysis stands after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Analysis {
    /// A candidate is throttled: call again at this time.
    Trying(u64),
    /// The tenant that interferes most.
    Found(usize),
}

/// One analysis for one victim.
#[derive(Debug)]
pub struct InterferenceAnalysis {
    victim: usize,
    candidates: Vec<usize>,
    /// What each tenant did in the window that found the victim harmed: the rates a
    /// candidate's expense is taken from.
    before: Vec<TenantWindow>,
    baseline_p99_ns: f64,
    step_bytes_per_second: f64,
    window_ns: u64,
    trial: Option<Trial>,
    tried: usize,
    /// The candidate that helped most so far, and by how much (ns of p99).
    best: Option<(usize, f64)>,
}

#[derive(Debug)]
struct Trial {
    ends_ns: u64,
    victim_at_start: PerformanceSnapshot,
    saved_caps: Vec<Option<f64>>,
}

impl InterferenceAnalysis {
    /// Finds which of `candidates` harms `victim` most; `before` is every tenant's last
    /// window (with latencies), `step_bytes_per_second` the ExperimentStep.
    pub fn new(
        victim: usize,
        candidates: Vec<usize>,
        before: Vec<TenantWindow>,
        step_bytes_per_second: f64,
        window_ns: u64,
    ) -> InterferenceAnalysis {
        InterferenceAnalysis {
            baseline_p99_ns: before[victim].p99_ns().unwrap_or(0.0),
            victim,
            candidates,
            before,
            step_bytes_per_second,
            window_ns,
            trial: None,
            tried: 0,
            best: None,
        }
    }

    /// What `tenant` did in the window that found the victim harmed.
    pub fn before(&self, tenant: usize) -> &TenantWindow {
        &self.before[tenant]
    }

    /// Runs the analysis as far as `now_ns` allows.
    pub fn step(&mut self, now_ns: u64, gates: &[Arc<Regulator>]) -> Analysis {
        if self.candidates.len() <= 1 {
            // Line 28: a lone candidate needs no experiment.
            return Analysis::Found(self.candidates.first().copied().unwrap_or(self.victim));
        }
        if let Some(trial) = &self.trial {
            if now_ns < trial.ends_ns {
                return Analysis::Trying(trial.ends_ns);
            }
            let trial = self.trial.take().expect("a trial");
            let window = gates[self.victim]
                .performance()
                .snapshot()
                .since(&trial.victim_at_start);
            let candidate = self.candidates[self.tried];
            if let Some(p99_ns) = window.quantile_ns(0.99) {
                let improvement = self.baseline_p99_ns - p99_ns;
                if self.best.is_none_or(|(_, best)| improvement > best) {
                    self.best = Some((candidate, improvement));
                }
            }
            for (gate, cap) in gates.iter().zip(&trial.saved_caps) {
                gate.set_rate_cap(*cap);
            }
            self.tried += 1;
        }
        if self.tried == self.candidates.len() {
            return Analysis::Found(self.best.map_or(self.candidates[0], |(best, _)| best));
        }
        let candidate = self.candidates[self.tried];
        let saved_caps = gates.iter().map(|gate| gate.rate_cap()).collect();
        throttle_up_by_bytes(
            &gates[candidate],
            &self.before[candidate],
            self.step_bytes_per_second,
        );
        let ends_ns = now_ns + self.window_ns;
        self.trial = Some(Trial {
            ends_ns,
            victim_at_start: gates[self.victim].performance().snapshot(),
            saved_caps,
        });
        Analysis::Trying(ends_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nyx::regulator::Usage;

    fn busy(bytes_per_second: u64) -> TenantWindow {
        TenantWindow {
            window_ns: 1_000_000_000,
            usage: Usage {
                cost_ps: 0,
                accesses: bytes_per_second / 1000,
                bytes: bytes_per_second,
            },
            performance: PerformanceSnapshot::default(),
        }
    }

    /// The victim's p99 over a trial: 1 µs plus 3 µs per million accesses a second that the
    /// writer (tenant 2) may make, and 1 µs more flat from the reader (tenant 1).
    fn victim_latency_ns(gates: &[Arc<Regulator>]) -> u64 {
        let writer = gates[2].rate_cap().unwrap_or(2e6);
        2000 + (3000.0 * writer / 1e6) as u64
    }

    #[test]
    fn the_candidate_whose_throttling_helps_most_is_found_and_throttles_are_restored() {
        let gates: Vec<Arc<Regulator>> = (0..3).map(|_| Arc::new(Regulator::new())).collect();
        gates[1].set_rate_cap(Some(5e6));
        // The reader moves 4 GB/s, the writer 2 GB/s: a bandwidth rule would pick the reader.
        let before = vec![
            busy(1_000_000_000),
            busy(4_000_000_000),
            busy(2_000_000_000),
        ];
        let mut analysis = InterferenceAnalysis::new(0, vec![1, 2], before, 500e6, 500_000_000);
        let mut now_ns = 0;
        loop {
            match analysis.step(now_ns, &gates) {
                Analysis::Trying(wake_ns) => {
                    // Exactly one candidate is throttled below what it moved.
                    let throttled: Vec<usize> = (1..3)
                        .filter(|&t| gates[t].rate_cap().is_some_and(|cap| cap < 3.9e6))
                        .collect();
                    assert_eq!(throttled.len(), 1, "{throttled:?}");
                    for _ in 0..100 {
                        gates[0].record_request(victim_latency_ns(&gates));
                    }
                    now_ns = wake_ns;
                }
                Analysis::Found(tenant) => {
                    assert_eq!(tenant, 2);
                    break;
                }
            }
        }
        assert_eq!(gates[1].rate_cap(), Some(5e6));
        assert_eq!(gates[2].rate_cap(), None);
        // A lone candidate is named at once, nothing throttled.
        let mut lone = InterferenceAnalysis::new(0, vec![1], vec![busy(1); 3], 500e6, 1);
        assert_eq!(lone.step(0, &gates), Analysis::Found(1));
    }
}
