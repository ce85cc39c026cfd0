//! M1 and M2 for one tenant (seed 000 §5.2.3): each of its PM accesses is held as the
//! controller says, charged its cost, and only then performed; the requests it completes are
//! counted for the policies that watch performance (M3, M4).
//!
//! M1's throttle here is a least gap between the starts of the tenant's accesses, where the
//! thesis adds a delay to each (`setThrottling`, 10 ns units, mimicking Intel MBA). For a
//! tenant making one access at a time — every live tenant is, its store serializing them — the
//! two are the same busy-wait; for the simulator's multi-threaded tenants the gap does not
//! depend on the thread count, so a policy can set a throughput exactly (Alg. 3 throttles by
//! "500MB/s of throughput expense", a conversion seed 000 leaves open). The infinite delay is a
//! stall to a time the controller knows: the end of a limit's epoch, or of a pause that
//! measures another tenant alone.
//!
//! Times are ns on the shared device's clock, whatever the executor's clock is (the live
//! server's throttle clock, the simulator's virtual time). The counters are atomics that the
//! controller reads without stopping the tenant (the thesis keeps them per thread and sums them
//! lazily; one tenant's accesses here come from one thread at a time).

use std::sync::atomic::{AtomicU64, Ordering};

use heterarchy_device::model::IoKind;

use super::cost::MaxIopsProfile;
use super::performance::Performance;

/// One tenant's gate on the shared device.
#[derive(Debug, Default)]
pub struct Regulator {
    /// Least time between the starts of two accesses, ps (0: unthrottled).
    gap_ps: AtomicU64,
    /// When the next access may start under the gap, ps.
    next_start_ps: AtomicU64,
    /// No access starts before this (a stall).
    stalled_until_ns: AtomicU64,
    /// What the tenant's accesses cost so far, in ps of device time (M2).
    cost_ps: AtomicU64,
    accesses: AtomicU64,
    /// Bytes its accesses moved, as software counts them (what a bandwidth limit sees).
    bytes: AtomicU64,
    performance: Performance,
    /// The slowdown the policy last estimated (M4), as `f64` bits; 0: none.
    slowdown_bits: AtomicU64,
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
    /// An open gate: no throttle, no stall, nothing charged.
    pub fn new() -> Regulator {
        Regulator::default()
    }

    /// Throttles the tenant to `accesses_per_second` (none: unthrottled).
    pub fn set_rate_cap(&self, accesses_per_second: Option<f64>) {
        let gap_ps = accesses_per_second.map_or(0, |rate| (1e12 / rate.max(1e-3)) as u64);
        self.gap_ps.store(gap_ps, Ordering::Relaxed);
    }

    /// The throttle: accesses a second, if throttled.
    pub fn rate_cap(&self) -> Option<f64> {
        match self.gap_ps.load(Ordering::Relaxed) {
            0 => None,
            gap_ps => Some(1e12 / gap_ps as f64),
        }
    }

    /// Holds every access until `until_ns` (0: releases a stall).
    pub fn stall_until(&self, until_ns: u64) {
        self.stalled_until_ns.store(until_ns, Ordering::Relaxed);
    }

    /// Until when the tenant is stalled (0 or past: it is not).
    pub fn stalled_until_ns(&self) -> u64 {
        self.stalled_until_ns.load(Ordering::Relaxed)
    }

    /// Whether the gate may hold an access back at all: a throttle, or a stall not yet
    /// released. When not, an access goes at once, and a caller on another clock need not
    /// convert its time to ask.
    pub fn may_hold(&self) -> bool {
        self.gap_ps.load(Ordering::Relaxed) != 0 || self.stalled_until_ns() != 0
    }

    /// When an access ready at `ready_ns` may start, without taking the slot (for an executor
    /// that waits and asks again).
    pub fn ready_ns(&self, ready_ns: u64) -> u64 {
        let start = ready_ns.max(self.stalled_until_ns());
        if self.gap_ps.load(Ordering::Relaxed) == 0 {
            return start;
        }
        start.max(self.next_start_ps.load(Ordering::Relaxed).div_ceil(1000))
    }

    /// When an access ready at `ready_ns` goes to the device — after any stall and the gap
    /// since the access before — taking its slot.
    pub fn admit_ns(&self, ready_ns: u64) -> u64 {
        let start_ps = ready_ns.max(self.stalled_until_ns()) * 1000;
        let gap_ps = self.gap_ps.load(Ordering::Relaxed);
        if gap_ps == 0 {
            return start_ps / 1000;
        }
        let previous = self
            .next_start_ps
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |next| {
                Some(next.max(start_ps) + gap_ps)
            })
            .expect("the update always succeeds");
        previous.max(start_ps).div_ceil(1000)
    }

    /// Charges an access of `bytes` its cost by `profile` (M2). One thread charges at a time
    /// (the tenant's store lock, or the simulator's one thread), so the counters are added to
    /// by a load and a store, without the locked instruction a `fetch_add` takes.
    pub fn charge(&self, profile: &MaxIopsProfile, kind: IoKind, bytes: u32) {
        let add = |counter: &AtomicU64, amount: u64| {
            counter.store(counter.load(Ordering::Relaxed) + amount, Ordering::Relaxed);
        };
        add(&self.cost_ps, profile.cost_ps(kind, bytes));
        add(&self.accesses, 1);
        add(&self.bytes, u64::from(bytes));
    }

    /// What the tenant has used so far.
    pub fn usage(&self) -> Usage {
        Usage {
            cost_ps: self.cost_ps.load(Ordering::Relaxed),
            accesses: self.accesses.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }

    /// Notes one of the tenant's requests completed after `latency_ns`.
    pub fn record_request(&self, latency_ns: u64) {
        self.performance.record(latency_ns);
    }

    /// Publishes the policy's estimate of the tenant's slowdown, for stats.
    pub fn publish_slowdown(&self, slowdown: Option<f64>) {
        let bits = slowdown.map_or(0, f64::to_bits);
        self.slowdown_bits.store(bits, Ordering::Relaxed);
    }

    /// The slowdown last published, if any.
    pub fn slowdown(&self) -> Option<f64> {
        match self.slowdown_bits.load(Ordering::Relaxed) {
            0 => None,
            bits => Some(f64::from_bits(bits)),
        }
    }

    /// The tenant's completed requests.
    pub fn performance(&self) -> &Performance {
        &self.performance
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_wait_out_a_stall_then_the_gap_since_the_last() {
        let gate = Regulator::new();
        assert!(!gate.may_hold());
        assert_eq!(gate.admit_ns(1000), 1000);
        assert_eq!(gate.admit_ns(1000), 1000);
        // Ten million a second: 100 ns apart.
        gate.set_rate_cap(Some(1e7));
        assert!(gate.may_hold());
        assert_eq!(gate.rate_cap(), Some(1e7));
        assert_eq!(gate.admit_ns(1000), 1000);
        assert_eq!(gate.ready_ns(1000), 1100);
        assert_eq!(gate.admit_ns(1000), 1100);
        assert_eq!(gate.admit_ns(1000), 1200);
        // An idle tenant saves up no burst.
        assert_eq!(gate.admit_ns(9000), 9000);
        assert_eq!(gate.admit_ns(9050), 9100);
        gate.stall_until(20_000);
        assert_eq!(gate.ready_ns(10_000), 20_000);
        assert_eq!(gate.admit_ns(10_000), 20_000);
        gate.set_rate_cap(None);
        assert!(gate.may_hold(), "a stall not yet released");
        gate.stall_until(0);
        assert!(!gate.may_hold());
        assert_eq!(gate.admit_ns(10_000), 10_000);
    }

    #[test]
    fn usage_is_the_sum_of_costs_and_a_window_its_share_of_the_device() {
        // Seed 000 §5.3.2: 1.25 M 4 KiB reads a second on a device that does 3 M is 42% of it.
        let profile = MaxIopsProfile::flat(3e6, 1e6);
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
