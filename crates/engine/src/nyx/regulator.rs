//! M1 and M2 for one tenant (seed 000 §5.2.3): each of its PM accesses is delayed as the
//! controller says, charged its cost, and only then performed. The controller sets the delay
//! (`setThrottling`, in 10 ns units) or stalls the tenant (the infinite delay, used by resource
//! limits and by the pauses that measure T_alone), and reads the charges back.
//!
//! Times are ns on the shared device's clock, whatever the executor's clock is (the live
//! server's throttle clock, the simulator's virtual time). A tenant's accesses are carried out
//! one at a time under its store's lock, so its counters are plain atomics that the controller
//! reads without stopping it (the thesis keeps them per thread and sums them lazily).

use std::sync::atomic::{AtomicU64, Ordering};

use heterarchy_device::model::IoKind;

use super::cost::MaxIopsProfile;

/// The unit of M1's delay (seed 000 §5.2.6: an order of magnitude below PM's latency).
pub const DELAY_UNIT_NS: u64 = 10;

/// One tenant's gate on the shared device.
#[derive(Debug, Default)]
pub struct Regulator {
    /// Added before each access, in [`DELAY_UNIT_NS`] units.
    delay_units: AtomicU64,
    /// No access starts before this (a stall).
    stalled_until_ns: AtomicU64,
    /// What the tenant's accesses cost so far, in ps of device time (M2).
    cost_ps: AtomicU64,
    accesses: AtomicU64,
    /// Bytes its accesses moved, as software counts them (what a bandwidth limit sees).
    bytes: AtomicU64,
}

/// What a tenant has used of the device so far; subtract two to get a window's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub cost_ps: u64,
    pub accesses: u64,
    pub bytes: u64,
}

impl Usage {
    /// What was used after `earlier`.
    pub fn since(self, earlier: Usage) -> Usage {
        Usage {
            cost_ps: self.cost_ps.saturating_sub(earlier.cost_ps),
            accesses: self.accesses.saturating_sub(earlier.accesses),
            bytes: self.bytes.saturating_sub(earlier.bytes),
        }
    }

    /// The share of the device this is over `window_ns` (1.0: all of it).
    pub fn utilization(self, window_ns: u64) -> f64 {
        self.cost_ps as f64 / (window_ns.max(1) as f64 * 1000.0)
    }
}

impl Regulator {
    pub fn new() -> Regulator {
        Regulator::default()
    }

    /// Adds `units` × 10 ns before each access from now on (seed 000's `setThrottling`).
    pub fn set_delay_units(&self, units: u64) {
        self.delay_units.store(units, Ordering::Relaxed);
    }

    pub fn delay_units(&self) -> u64 {
        self.delay_units.load(Ordering::Relaxed)
    }

    /// Holds every access until `until_ns` (M1's infinite delay, for a span the controller
    /// knows: to the end of a limit's epoch, or of a pause that measures another tenant alone).
    pub fn stall_until(&self, until_ns: u64) {
        self.stalled_until_ns.store(until_ns, Ordering::Relaxed);
    }

    /// When an access ready at `ready_ns` goes to the device: after any stall, then the delay.
    pub fn admit_ns(&self, ready_ns: u64) -> u64 {
        let stalled = self.stalled_until_ns.load(Ordering::Relaxed);
        ready_ns.max(stalled) + self.delay_units() * DELAY_UNIT_NS
    }

    /// Charges an access of `bytes` its cost by `profile` (M2).
    pub fn charge(&self, profile: &MaxIopsProfile, kind: IoKind, bytes: u32) {
        self.cost_ps
            .fetch_add(profile.cost_ps(kind, bytes), Ordering::Relaxed);
        self.accesses.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(u64::from(bytes), Ordering::Relaxed);
    }

    /// What the tenant has used so far.
    pub fn usage(&self) -> Usage {
        Usage {
            cost_ps: self.cost_ps.load(Ordering::Relaxed),
            accesses: self.accesses.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nyx::cost::PROFILE_SIZES;

    fn flat_profile(read_iops: f64, write_iops: f64) -> MaxIopsProfile {
        MaxIopsProfile {
            device: "flat".into(),
            read_iops: vec![read_iops; PROFILE_SIZES],
            write_iops: vec![write_iops; PROFILE_SIZES],
        }
    }

    #[test]
    fn accesses_wait_out_a_stall_then_the_delay() {
        let gate = Regulator::new();
        assert_eq!(gate.admit_ns(1000), 1000);
        gate.set_delay_units(7);
        assert_eq!(gate.admit_ns(1000), 1070);
        gate.stall_until(5000);
        assert_eq!(gate.admit_ns(1000), 5070);
        assert_eq!(gate.admit_ns(9000), 9070);
    }

    #[test]
    fn usage_is_the_sum_of_costs_and_a_window_its_share_of_the_device() {
        // Seed 000 §5.3.2: 1.25 M 4 KiB reads a second on a device that does 3 M is 42% of it.
        let profile = flat_profile(3e6, 1e6);
        let gate = Regulator::new();
        let before = gate.usage();
        for _ in 0..1250 {
            gate.charge(&profile, IoKind::Read, 4096);
        }
        let window = gate.usage().since(before);
        assert_eq!((window.accesses, window.bytes), (1250, 1250 * 4096));
        let share = window.utilization(1_000_000);
        assert!((share - 1.25 / 3.0).abs() < 1e-3, "{share}");
        // A write costs what three reads do on this device.
        let reads = gate.usage();
        gate.charge(&profile, IoKind::Write, 64);
        let write = gate.usage().since(reads).cost_ps;
        assert!(
            write.abs_diff(3 * profile.cost_ps(IoKind::Read, 64)) <= 3,
            "{write}"
        );
    }
}
