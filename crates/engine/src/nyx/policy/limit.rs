//! Resource limiting, seed 000 Algorithm 2: at each epoch's start every tenant's throttle is
//! cleared and its counter noted; every tick, a tenant that has used more than its share of
//! this epoch is stalled to the epoch's end. With [`Meter::Cost`] the counter is M2's
//! (device time, so a write costs what it takes of the device); with [`Meter::Bytes`] it is the
//! bytes software counts, the bandwidth limit the thesis compares against (notes §13.2, C6a).

use std::sync::Arc;

use super::SharingPolicy;
use crate::nyx::regulator::{Regulator, Usage};

/// What a limit counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Meter {
    /// M2's cost: limits are shares of the device (1.0: all of it).
    Cost,
    /// Bytes moved: limits are bytes per second.
    Bytes,
}

/// Algorithm 2 over a fixed list of tenants.
pub struct ResourceLimit {
    meter: Meter,
    /// Per tenant: its limit per second in the meter's units, or none.
    limits: Vec<Option<f64>>,
    tick_ns: u64,
    epoch_ticks: u32,
    /// Ticks left in this epoch (0: a new one starts at the next tick).
    ticks_left: u32,
    epoch_end_ns: u64,
    at_epoch_start: Vec<Usage>,
}

impl ResourceLimit {
    /// Limits per tenant, in `meter`'s units per second (`None`: unlimited).
    pub fn new(meter: Meter, limits: Vec<Option<f64>>, tick_ns: u64, epoch_ticks: u32) -> Self {
        ResourceLimit {
            meter,
            at_epoch_start: vec![Usage::default(); limits.len()],
            limits,
            tick_ns: tick_ns.max(1),
            epoch_ticks: epoch_ticks.max(1),
            ticks_left: 0,
            epoch_end_ns: 0,
        }
    }

    fn epoch_ns(&self) -> u64 {
        self.tick_ns * u64::from(self.epoch_ticks)
    }

    /// What `usage` counts in the meter's units.
    fn measure(&self, usage: Usage) -> f64 {
        match self.meter {
            Meter::Cost => usage.cost_ps as f64 / 1e12,
            Meter::Bytes => usage.bytes as f64,
        }
    }
}

impl SharingPolicy for ResourceLimit {
    fn tick_ns(&self) -> u64 {
        self.tick_ns
    }

    fn tick(&mut self, now_ns: u64, gates: &[Arc<Regulator>]) {
        if self.ticks_left == 0 {
            // Step 1: a new epoch (this tick its first), every throttle cleared.
            self.ticks_left = self.epoch_ticks - 1;
            self.epoch_end_ns = now_ns + self.epoch_ns();
            for (gate, start) in gates.iter().zip(&mut self.at_epoch_start) {
                gate.set_delay_units(0);
                gate.stall_until(0);
                *start = gate.usage();
            }
            return;
        }
        self.ticks_left -= 1;
        // Step 2: a tenant past its share of the epoch waits for the next one.
        let epoch_secs = self.epoch_ns() as f64 / 1e9;
        for ((gate, start), limit) in gates.iter().zip(&self.at_epoch_start).zip(&self.limits) {
            let Some(limit) = limit else { continue };
            if self.measure(gate.usage().since(*start)) > limit * epoch_secs {
                gate.stall_until(self.epoch_end_ns);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nyx::cost::{MaxIopsProfile, PROFILE_SIZES};
    use heterarchy_device::model::IoKind;

    /// A device that does a million accesses a second of any kind and size.
    fn million() -> MaxIopsProfile {
        MaxIopsProfile {
            device: "million".into(),
            read_iops: vec![1e6; PROFILE_SIZES],
            write_iops: vec![1e6; PROFILE_SIZES],
        }
    }

    /// Runs `ticks` ticks of 10 ms in which each tenant makes as many 4 KiB reads as its
    /// gate lets it, up to `wants[tenant]` a tick; returns the reads each made.
    fn run(
        policy: &mut ResourceLimit,
        gates: &[Arc<Regulator>],
        wants: &[u64],
        ticks: u64,
    ) -> Vec<u64> {
        let profile = million();
        let mut made = vec![0; gates.len()];
        for tick in 0..ticks {
            let now_ns = tick * 10_000_000;
            policy.tick(now_ns, gates);
            for ((gate, want), made) in gates.iter().zip(wants).zip(&mut made) {
                for _ in 0..*want {
                    if gate.admit_ns(now_ns) > now_ns {
                        break;
                    }
                    gate.charge(&profile, IoKind::Read, 4096);
                    *made += 1;
                }
            }
        }
        made
    }

    #[test]
    fn a_tenant_is_held_to_its_share_epoch_by_epoch_and_others_are_left_alone() {
        let gates: Vec<Arc<Regulator>> = (0..2).map(|_| Arc::new(Regulator::new())).collect();
        // Tenant 0 may use 30% of the device: 300,000 reads a second here.
        let mut policy = ResourceLimit::new(Meter::Cost, vec![Some(0.3), None], 10_000_000, 100);
        // Both want 10,000 reads a tick (a million a second): three epochs of 1 s.
        let made = run(&mut policy, &gates, &[10_000, 10_000], 300);
        // Within one tick's overshoot per epoch (Alg. 2: 1%) of 300,000 reads a second.
        let per_second = made[0] as f64 / 3.0;
        assert!(
            (300_000.0..=310_000.0).contains(&per_second),
            "{per_second} reads a second"
        );
        assert_eq!(made[1], 10_000 * 300, "the unlimited tenant was held");
    }

    #[test]
    fn a_bandwidth_limit_counts_bytes() {
        let gates: Vec<Arc<Regulator>> = vec![Arc::new(Regulator::new())];
        // 409.6 MB/s: 100,000 reads of 4 KiB a second.
        let mut policy = ResourceLimit::new(Meter::Bytes, vec![Some(409.6e6)], 10_000_000, 100);
        let made = run(&mut policy, &gates, &[10_000], 100);
        assert!((100_000..=110_000).contains(&made[0]), "{}", made[0]);
    }
}
