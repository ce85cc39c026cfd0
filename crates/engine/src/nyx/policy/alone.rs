//! M4, slowdown estimation (seed 000 §5.2.3): every `period` each tenant in turn runs alone for
//! a short pause of all the others, its throughput then being its T_alone; its slowdown is
//! T_alone / T_share, with T_share its throughput while shared (as §5.2.3 and §5.3.4 define it;
//! the header of Alg. 4 prints the inverse); the pause's first tenth settles and is not
//! counted. `refreshTalone` (Alg. 4, lines 19–22) lifts the measured tenant's own throttle and
//! restores every throttle and stall afterwards.

use std::sync::Arc;

use crate::nyx::regulator::Regulator;

/// Seed 000 §5.2.6: T_alone refreshed every second ("within 2% overhead")...
pub const DEFAULT_PERIOD_NS: u64 = 1_000_000_000;
/// ...by pauses of 1 ms ("a sufficient pause time to accurately determine T_alone").
pub const DEFAULT_PAUSE_NS: u64 = 1_000_000;

/// Where a refresh stands after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refresh {
    /// A tenant is running alone: call again at this time.
    Measuring(u64),
    /// The round just ended: windows opened during it saw the pauses.
    Finished,
    /// No round runs; the next is due at this time.
    Idle(u64),
}

/// Each tenant's stand-alone throughput, refreshed round by round.
#[derive(Debug)]
pub struct AloneEstimator {
    period_ns: u64,
    pause_ns: u64,
    next_round_ns: u64,
    round: Option<Turn>,
    alone_requests_per_second: Vec<Option<f64>>,
}

/// The first 1/SETTLE_PARTS of a pause is not counted: requests then still wait behind the
/// others' accesses queued before it (a write drain is microseconds long).
const SETTLE_PARTS: u64 = 10;

/// One tenant's turn alone.
#[derive(Debug)]
struct Turn {
    tenant: usize,
    /// When counting starts (the pause began a settling time earlier).
    started_ns: u64,
    ends_ns: u64,
    /// Its requests when counting started, once it has.
    requests_at_start: Option<u64>,
    /// Every tenant's throttle and stall before the turn.
    saved: Vec<(Option<f64>, u64)>,
}

impl AloneEstimator {
    /// For `tenants`, a round every `period_ns`, each tenant alone for `pause_ns`.
    pub fn new(tenants: usize, period_ns: u64, pause_ns: u64) -> AloneEstimator {
        AloneEstimator {
            period_ns: period_ns.max(1),
            pause_ns: pause_ns.max(1),
            next_round_ns: 0,
            round: None,
            alone_requests_per_second: vec![None; tenants],
        }
    }

    /// Runs the refresh as far as `now_ns` allows.
    pub fn step(&mut self, now_ns: u64, gates: &[Arc<Regulator>]) -> Refresh {
        if let Some(turn) = &mut self.round {
            if turn.requests_at_start.is_none() {
                if now_ns < turn.started_ns {
                    return Refresh::Measuring(turn.started_ns);
                }
                turn.requests_at_start = Some(gates[turn.tenant].performance().requests());
                turn.started_ns = now_ns;
            }
            if now_ns < turn.ends_ns {
                return Refresh::Measuring(turn.ends_ns);
            }
            let turn = self.round.take().expect("a turn");
            let done = gates[turn.tenant]
                .performance()
                .requests()
                .saturating_sub(turn.requests_at_start.unwrap_or(0));
            let elapsed_ns = (now_ns - turn.started_ns).max(1);
            self.alone_requests_per_second[turn.tenant] =
                Some(done as f64 * 1e9 / elapsed_ns as f64);
            for (gate, (cap, stall)) in gates.iter().zip(&turn.saved) {
                gate.set_rate_cap(*cap);
                gate.stall_until(*stall);
            }
            if turn.tenant + 1 < gates.len() {
                return self.begin(turn.tenant + 1, now_ns, gates);
            }
            self.next_round_ns = now_ns + self.period_ns;
            return Refresh::Finished;
        }
        if now_ns >= self.next_round_ns && !gates.is_empty() {
            return self.begin(0, now_ns, gates);
        }
        Refresh::Idle(self.next_round_ns)
    }

    fn begin(&mut self, tenant: usize, now_ns: u64, gates: &[Arc<Regulator>]) -> Refresh {
        let ends_ns = now_ns + self.pause_ns;
        let saved: Vec<(Option<f64>, u64)> = gates
            .iter()
            .map(|gate| (gate.rate_cap(), gate.stalled_until_ns()))
            .collect();
        for (other, gate) in gates.iter().enumerate() {
            if other == tenant {
                gate.set_rate_cap(None);
                gate.stall_until(0);
            } else {
                gate.stall_until(gate.stalled_until_ns().max(ends_ns));
            }
        }
        let started_ns = now_ns + self.pause_ns / SETTLE_PARTS;
        self.round = Some(Turn {
            tenant,
            started_ns,
            ends_ns,
            requests_at_start: None,
            saved,
        });
        Refresh::Measuring(started_ns)
    }

    /// T_alone of `tenant`, requests a second, once measured.
    pub fn alone_requests_per_second(&self, tenant: usize) -> Option<f64> {
        self.alone_requests_per_second[tenant]
    }

    #[cfg(test)]
    pub(crate) fn alone_requests_per_second_for_test(&mut self, tenant: usize, rate: f64) {
        self.alone_requests_per_second[tenant] = Some(rate);
    }

    /// `tenant`'s slowdown at `shared_requests_per_second`: T_alone / T_share (≥ 1 when
    /// sharing costs it), if both are known.
    pub fn slowdown(&self, tenant: usize, shared_requests_per_second: f64) -> Option<f64> {
        let alone = self.alone_requests_per_second[tenant]?;
        (shared_requests_per_second > 0.0 && alone > 0.0)
            .then(|| alone / shared_requests_per_second)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tenant_runs_alone_in_turn_and_every_throttle_comes_back() {
        let gates: Vec<Arc<Regulator>> = (0..3).map(|_| Arc::new(Regulator::new())).collect();
        gates[0].set_rate_cap(Some(1000.0));
        gates[2].stall_until(50_000_000);
        let mut alone = AloneEstimator::new(3, 1_000_000_000, 1_000_000);
        // Tenant 0's turn: it runs unthrottled, the others wait out the pause (tenant 2 its
        // longer stall); counting starts after a tenth of the pause has settled.
        assert_eq!(alone.step(0, &gates), Refresh::Measuring(100_000));
        assert_eq!(gates[0].rate_cap(), None);
        assert_eq!(gates[1].stalled_until_ns(), 1_000_000);
        assert_eq!(gates[2].stalled_until_ns(), 50_000_000);
        for _ in 0..100 {
            gates[0].record_request(1000);
        }
        assert_eq!(alone.step(100_000, &gates), Refresh::Measuring(1_000_000));
        for _ in 0..450 {
            gates[0].record_request(1000);
        }
        // Tenant 1's turn: tenant 0 measured at 450 requests in 0.9 ms (not the 100 before),
        // its throttle back.
        assert_eq!(alone.step(1_000_000, &gates), Refresh::Measuring(1_100_000));
        assert_eq!(alone.alone_requests_per_second(0), Some(500_000.0));
        assert_eq!(gates[0].rate_cap(), Some(1000.0));
        assert_eq!(alone.step(1_100_000, &gates), Refresh::Measuring(2_000_000));
        assert_eq!(alone.step(2_000_000, &gates), Refresh::Measuring(2_100_000));
        // Tenant 2 was stalled, but runs for its turn; then its stall comes back.
        assert_eq!(gates[2].stalled_until_ns(), 0);
        assert_eq!(alone.step(2_100_000, &gates), Refresh::Measuring(3_000_000));
        assert_eq!(alone.step(3_000_000, &gates), Refresh::Finished);
        assert_eq!(gates[2].stalled_until_ns(), 50_000_000);
        assert_eq!(alone.step(4_000_000, &gates), Refresh::Idle(1_003_000_000));
        // Slowdown: T_alone / T_share.
        assert_eq!(alone.slowdown(0, 250_000.0), Some(2.0));
        assert_eq!(alone.slowdown(1, 250_000.0), None);
    }
}
