//! What each tenant did over a window of the controller's clock, and the throttle steps the
//! policies take from it (seed 000 §5.2.4 leaves the steps' sizes open, and §5.2.6 gives none;
//! ours are stated where they are taken).

use std::sync::Arc;

use crate::nyx::performance::PerformanceSnapshot;
use crate::nyx::regulator::{Regulator, Usage};

/// The least rate a throttle sets, accesses a second: a tenant throttled this far is all but
/// stopped (Fig 5.15: "BE 2 has near zero final throughput"), yet still measured.
pub const MIN_RATE_CAP: f64 = 100.0;

/// One tenant over one window.
#[derive(Clone, Debug, Default)]
pub struct TenantWindow {
    pub window_ns: u64,
    pub usage: Usage,
    /// Requests completed and their latencies (latencies only when the window kept them).
    pub performance: PerformanceSnapshot,
}

impl TenantWindow {
    fn per_second(&self, count: f64) -> f64 {
        count * 1e9 / self.window_ns.max(1) as f64
    }

    /// Requests it completed a second.
    pub fn requests_per_second(&self) -> f64 {
        self.per_second(self.performance.requests as f64)
    }

    /// Device accesses it made a second.
    pub fn accesses_per_second(&self) -> f64 {
        self.per_second(self.usage.accesses as f64)
    }

    /// Bytes its accesses moved a second.
    pub fn bytes_per_second(&self) -> f64 {
        self.per_second(self.usage.bytes as f64)
    }

    /// Its share of the device (M2).
    pub fn utilization(&self) -> f64 {
        self.usage.utilization(self.window_ns)
    }

    /// Its p99 request latency, ns, if it completed any.
    pub fn p99_ns(&self) -> Option<f64> {
        self.performance.quantile_ns(0.99)
    }

    /// Bytes per access, if it made any.
    fn bytes_per_access(&self) -> Option<f64> {
        (self.usage.accesses > 0).then(|| self.usage.bytes as f64 / self.usage.accesses as f64)
    }
}

/// Windows over every tenant, one after another.
#[derive(Debug, Default)]
pub struct Windows {
    started_ns: Option<u64>,
    usage: Vec<Usage>,
    performance: Vec<PerformanceSnapshot>,
    /// Whether windows keep latencies (a histogram copy per tenant and window).
    latencies: bool,
}

impl Windows {
    /// Windows that keep latencies when `latencies` (a histogram copy per tenant and window).
    pub fn new(latencies: bool) -> Windows {
        Windows {
            latencies,
            ..Windows::default()
        }
    }

    /// When the window now open started, if one is.
    pub fn started_ns(&self) -> Option<u64> {
        self.started_ns
    }

    /// Opens a window at `now_ns`.
    pub fn start(&mut self, now_ns: u64, gates: &[Arc<Regulator>]) {
        self.started_ns = Some(now_ns);
        self.usage = gates.iter().map(|gate| gate.usage()).collect();
        self.performance = gates.iter().map(|gate| self.snapshot(gate)).collect();
    }

    fn snapshot(&self, gate: &Regulator) -> PerformanceSnapshot {
        if self.latencies {
            gate.performance().snapshot()
        } else {
            PerformanceSnapshot::requests_only(gate.performance().requests())
        }
    }

    /// Closes the open window at `now_ns` (one opened at 0 if none was) and opens the next.
    pub fn close(&mut self, now_ns: u64, gates: &[Arc<Regulator>]) -> Vec<TenantWindow> {
        let started_ns = self.started_ns.unwrap_or(0);
        let usage: Vec<Usage> = gates.iter().map(|gate| gate.usage()).collect();
        let performance: Vec<PerformanceSnapshot> =
            gates.iter().map(|gate| self.snapshot(gate)).collect();
        let windows = (0..gates.len())
            .map(|tenant| TenantWindow {
                window_ns: now_ns.saturating_sub(started_ns),
                usage: self
                    .usage
                    .get(tenant)
                    .map_or(usage[tenant], |start| usage[tenant].since(*start)),
                performance: match self.performance.get(tenant) {
                    Some(start) => performance[tenant].since(start),
                    None => performance[tenant].clone(),
                },
            })
            .collect();
        self.started_ns = Some(now_ns);
        self.usage = usage;
        self.performance = performance;
        windows
    }
}

/// Throttles a tenant so that it moves `step_bytes_per_second` less than it did over `window`
/// (Alg. 3's "throttle up ... by ExperimentStep"), down to [`MIN_RATE_CAP`].
pub fn throttle_up_by_bytes(gate: &Regulator, window: &TenantWindow, step_bytes_per_second: f64) {
    let Some(bytes_per_access) = window.bytes_per_access() else {
        return;
    };
    let target = (window.bytes_per_second() - step_bytes_per_second) / bytes_per_access;
    gate.set_rate_cap(Some(target.max(MIN_RATE_CAP)));
}

/// Eases a tenant's throttle by `step_bytes_per_second` (Alg. 3's "throttle down"); lifts it
/// once the tenant no longer reaches it.
pub fn throttle_down_by_bytes(gate: &Regulator, window: &TenantWindow, step_bytes_per_second: f64) {
    let Some(cap) = gate.rate_cap() else { return };
    let bytes_per_access = window.bytes_per_access().unwrap_or(4096.0);
    ease_to(gate, window, cap + step_bytes_per_second / bytes_per_access);
}

/// Throttles a tenant to `factor` (< 1) of the accesses it made over `window`.
pub fn throttle_up_by_factor(gate: &Regulator, window: &TenantWindow, factor: f64) {
    let target = window.accesses_per_second() * factor;
    if target > 0.0 {
        gate.set_rate_cap(Some(target.max(MIN_RATE_CAP)));
    }
}

/// Eases a tenant's throttle by `factor` (> 1); lifts it once the tenant no longer reaches it.
pub fn throttle_down_by_factor(gate: &Regulator, window: &TenantWindow, factor: f64) {
    let Some(cap) = gate.rate_cap() else { return };
    ease_to(gate, window, cap * factor);
}

/// Sets a throttle to `cap`, or lifts it when the tenant made less than half of what the old one
/// let it (it was not what held the tenant back).
fn ease_to(gate: &Regulator, window: &TenantWindow, cap: f64) {
    let old = gate.rate_cap().unwrap_or(f64::INFINITY);
    if window.accesses_per_second() < 0.5 * old {
        gate.set_rate_cap(None);
    } else {
        gate.set_rate_cap(Some(cap));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nyx::cost::MaxIopsProfile;
    use heterarchy_device::model::IoKind;

    #[test]
    fn steps_in_bytes_turn_into_access_rates_and_an_unreached_throttle_is_lifted() {
        let profile = MaxIopsProfile::flat(1e6, 1e6);
        let gates = vec![Arc::new(Regulator::new())];
        let mut windows = Windows::new(true);
        windows.start(0, &gates);
        // 1 GB/s of 1 KB reads over a second: a million accesses.
        for _ in 0..1_000_000 {
            gates[0].charge(&profile, IoKind::Read, 1000);
        }
        gates[0].record_request(2000);
        let window = &windows.close(1_000_000_000, &gates)[0];
        assert_eq!(window.accesses_per_second(), 1e6);
        let p99 = window.p99_ns().unwrap();
        assert!((p99 - 2000.0).abs() <= 2000.0 / 16.0, "{p99}");
        // 500 MB/s less: 500,000 accesses a second.
        throttle_up_by_bytes(&gates[0], window, 500e6);
        assert_eq!(gates[0].rate_cap().map(f64::round), Some(500_000.0));
        // Easing by 250 MB/s while the tenant keeps up with its throttle.
        let at_cap = TenantWindow {
            window_ns: 1_000_000_000,
            usage: Usage {
                cost_ps: 0,
                accesses: 500_000,
                bytes: 500_000_000,
            },
            performance: PerformanceSnapshot::default(),
        };
        throttle_down_by_bytes(&gates[0], &at_cap, 250e6);
        assert_eq!(gates[0].rate_cap().map(f64::round), Some(750_000.0));
        // A tenant far below its throttle has it lifted.
        throttle_down_by_factor(&gates[0], &TenantWindow::default(), 1.1);
        assert_eq!(gates[0].rate_cap(), None);
        // Far past what it moves: all but stopped.
        throttle_up_by_bytes(&gates[0], window, 5e9);
        assert_eq!(gates[0].rate_cap(), Some(MIN_RATE_CAP));
    }
}
