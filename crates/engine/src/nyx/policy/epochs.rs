//! The epochs of seed 000 Algorithms 2 and 5: at an epoch's start every tenant's throttle is
//! cleared and its counter noted; every tick a tenant that has used more than its budget for
//! the epoch is stalled to the epoch's end (an overshoot of at most one tick, 1% with
//! 100 ticks). With [`Meter::Cost`] the counter is M2's (device time, so a write costs what it
//! takes of the device); with [`Meter::Bytes`] it is the bytes software counts, the bandwidth
//! baselines the thesis compares against (seed 000 §5.3.2 and §5.3.6, Figs 5.6 and 5.13).

use std::sync::Arc;

use crate::nyx::regulator::{Regulator, Usage};

/// What a budget counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Meter {
    /// M2's cost: budgets are shares of the device (1.0: all of it).
    Cost,
    /// Bytes moved: budgets are bytes per second.
    Bytes,
}

impl Meter {
    /// What `usage` counts in the meter's units.
    pub fn measure(self, usage: Usage) -> f64 {
        match self {
            Meter::Cost => usage.cost_ps as f64 / 1e12,
            Meter::Bytes => usage.bytes as f64,
        }
    }
}

/// What a tenant did in an epoch that just ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EpochUse {
    /// Used, in the meter's units per second.
    pub used_per_second: f64,
    /// The share of the epoch after which it had used its budget up, if it did.
    pub used_up_after: Option<f64>,
    /// Requests it completed per second.
    pub requests_per_second: f64,
}

/// What a tick did.
#[derive(Clone, Debug, PartialEq)]
pub enum EpochTick {
    /// A new epoch started.
    Started,
    /// Budgets were checked.
    Checked,
    /// The epoch ended (and the next one started): what each tenant did in it.
    Ended(Vec<EpochUse>),
}

/// Epochs of `epoch_ticks` ticks.
#[derive(Debug)]
pub struct Epochs {
    meter: Meter,
    tick_ns: u64,
    epoch_ticks: u32,
    /// Ticks left in the epoch (0: none running).
    ticks_left: u32,
    started_ns: u64,
    at_start: Vec<Usage>,
    requests_at_start: Vec<u64>,
    used_up_ns: Vec<Option<u64>>,
}

impl Epochs {
    /// Epochs of `epoch_ticks` ticks of `tick_ns`, budgets in `meter`'s units.
    pub fn new(meter: Meter, tick_ns: u64, epoch_ticks: u32) -> Epochs {
        Epochs {
            meter,
            tick_ns: tick_ns.max(1),
            epoch_ticks: epoch_ticks.max(1),
            ticks_left: 0,
            started_ns: 0,
            at_start: Vec::new(),
            requests_at_start: Vec::new(),
            used_up_ns: Vec::new(),
        }
    }

    /// How often `tick` wants to run, ns.
    pub fn tick_ns(&self) -> u64 {
        self.tick_ns
    }

    /// What its budgets count.
    pub fn meter(&self) -> Meter {
        self.meter
    }

    fn epoch_ns(&self) -> u64 {
        self.tick_ns * u64::from(self.epoch_ticks)
    }

    /// One tick at `now_ns`, holding each tenant to `budgets` (its meter units per second;
    /// none: unlimited) for the epoch.
    pub fn tick(
        &mut self,
        now_ns: u64,
        gates: &[Arc<Regulator>],
        budgets: &[Option<f64>],
    ) -> EpochTick {
        if self.ticks_left == 0 {
            self.start(now_ns, gates);
            return EpochTick::Started;
        }
        self.ticks_left -= 1;
        if self.ticks_left == 0 {
            let ended = self.end(now_ns, gates);
            self.start(now_ns, gates);
            return EpochTick::Ended(ended);
        }
        let epoch_secs = self.epoch_ns() as f64 / 1e9;
        let epoch_end_ns = self.started_ns + self.epoch_ns();
        for (tenant, gate) in gates.iter().enumerate() {
            let Some(budget) = budgets.get(tenant).copied().flatten() else {
                continue;
            };
            let used = self
                .meter
                .measure(gate.usage().since(self.at_start[tenant]));
            if used > budget * epoch_secs {
                gate.stall_until(epoch_end_ns);
                self.used_up_ns[tenant].get_or_insert(now_ns);
            }
        }
        EpochTick::Checked
    }

    /// Step 1: a new epoch, every throttle cleared.
    fn start(&mut self, now_ns: u64, gates: &[Arc<Regulator>]) {
        self.ticks_left = self.epoch_ticks;
        self.started_ns = now_ns;
        for gate in gates {
            gate.set_rate_cap(None);
            gate.stall_until(0);
        }
        self.at_start = gates.iter().map(|gate| gate.usage()).collect();
        self.requests_at_start = gates.iter().map(|g| g.performance().requests()).collect();
        self.used_up_ns = vec![None; gates.len()];
    }

    fn end(&self, now_ns: u64, gates: &[Arc<Regulator>]) -> Vec<EpochUse> {
        let elapsed_ns = now_ns.saturating_sub(self.started_ns).max(1);
        let per_second = |count: f64| count * 1e9 / elapsed_ns as f64;
        gates
            .iter()
            .enumerate()
            .map(|(tenant, gate)| EpochUse {
                used_per_second: per_second(
                    self.meter
                        .measure(gate.usage().since(self.at_start[tenant])),
                ),
                used_up_after: self.used_up_ns[tenant].map(|at_ns| {
                    (at_ns.saturating_sub(self.started_ns) as f64 / elapsed_ns as f64).max(0.01)
                }),
                requests_per_second: per_second(
                    gate.performance()
                        .requests()
                        .saturating_sub(self.requests_at_start[tenant]) as f64,
                ),
            })
            .collect()
    }
}
