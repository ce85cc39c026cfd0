//! Resource limiting, seed 000 Algorithm 2: each tenant held to its limit epoch by epoch
//! ([`Epochs`]), in M2's cost or, for the thesis' bandwidth-limit baseline, in bytes.

use std::sync::Arc;

use super::epochs::{Epochs, Meter};
use super::SharingPolicy;
use crate::nyx::regulator::Regulator;

/// Algorithm 2 over a fixed list of tenants.
#[derive(Debug)]
pub struct ResourceLimit {
    epochs: Epochs,
    /// Per tenant: its limit per second in the meter's units, or none.
    limits: Vec<Option<f64>>,
}

impl ResourceLimit {
    /// Limits per tenant, in `meter`'s units per second (`None`: unlimited).
    pub fn new(meter: Meter, limits: Vec<Option<f64>>, tick_ns: u64, epoch_ticks: u32) -> Self {
        ResourceLimit {
            epochs: Epochs::new(meter, tick_ns, epoch_ticks),
            limits,
        }
    }
}

impl SharingPolicy for ResourceLimit {
    fn step(&mut self, now_ns: u64, gates: &[Arc<Regulator>]) -> u64 {
        self.epochs.tick(now_ns, gates, &self.limits);
        now_ns + self.epochs.tick_ns()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nyx::cost::MaxIopsProfile;
    use heterarchy_device::model::IoKind;

    /// Runs `ticks` ticks of 10 ms in which each tenant makes as many 4 KiB reads as its
    /// gate lets it, up to `wants[tenant]` a tick; returns the reads each made.
    fn run(
        policy: &mut ResourceLimit,
        gates: &[Arc<Regulator>],
        wants: &[u64],
        ticks: u64,
    ) -> Vec<u64> {
        // A million accesses a second of any kind and size.
        let profile = MaxIopsProfile::flat(1e6, 1e6);
        let mut made = vec![0; gates.len()];
        for tick in 0..ticks {
            let now_ns = tick * 10_000_000;
            assert_eq!(policy.step(now_ns, gates), now_ns + 10_000_000);
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
