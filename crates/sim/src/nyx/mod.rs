//! Cache tenants sharing one persistent memory in the timed simulator (seed 000 chapter 5):
//! each tenant's threads issue gets and in-place sets whose values live on the shared PM model
//! (keys and index in DRAM, as Nyx-Pelikan places them: a hit is one PM load of its value, a
//! set one PM non-temporal store; or Pelikan's layout, keys read from the PM and values stored
//! through the cache), every access through the tenant's NyxCache gate, and a controller
//! stepping the sharing policy on virtual time — the same gate and policy code the live
//! key-value server runs (docs/architecture.md, "Sharing a PM among tenants").

mod run;

use heterarchy_device::memory::MemoryOp;
use heterarchy_device::spec::DeviceSpec;
use heterarchy_engine::nyx::policy::{PolicyParams, TenantTerms};
use heterarchy_engine::nyx::{MaxIopsProfile, PolicyName};
use serde::Serialize;

pub use run::run_shared_pm;

/// What a tenant's threads do from some moment on.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantLoad {
    /// Threads issuing requests back to back (0: idle).
    pub threads: u32,
    /// Share of requests that are gets; the rest are in-place sets.
    pub get_fraction: f64,
    pub value_bytes: u32,
    /// Time a thread waits between a request's answer and its next request, ns.
    pub think_ns: u64,
    /// Least time between the starts of a thread's requests, ns (0: none): a steady rate
    /// whatever each request takes, as long as it takes less.
    pub period_ns: u64,
    /// Share of gets that hit; a miss is answered from the DRAM index alone, no PM access and
    /// no insert (a look-aside cache's miss, seed 000 Fig 5.7).
    pub hit_ratio: f64,
    /// PM reads of 64 B a get that hits makes before its value: 0 with keys in DRAM
    /// (Nyx-Pelikan), the items whose keys it compares when keys live beside their values on
    /// the PM (Pelikan, seed 000 §5.2.5).
    pub key_reads: u32,
    /// How a set stores its value: non-temporal stores (Nyx-Pelikan) or cached stores
    /// (Pelikan's copy, seed 000 Fig 5.4.b).
    pub value_store: MemoryOp,
}

impl TenantLoad {
    /// `threads` back to back, `get_fraction` gets of `value_bytes` values, every get a hit.
    pub fn new(threads: u32, get_fraction: f64, value_bytes: u32) -> TenantLoad {
        TenantLoad {
            threads,
            get_fraction,
            value_bytes,
            think_ns: 0,
            period_ns: 0,
            hit_ratio: 1.0,
            key_reads: 0,
            value_store: MemoryOp::NtStore,
        }
    }
}

/// One tenant: its load over time and what its policy knows of it.
#[derive(Clone, Debug, PartialEq)]
pub struct SimTenant {
    pub name: String,
    /// Its load by the time it starts, ns; the first starts at 0.
    pub phases: Vec<(u64, TenantLoad)>,
    pub terms: TenantTerms,
}

impl SimTenant {
    /// A tenant with one load throughout.
    pub fn steady(name: &str, load: TenantLoad) -> SimTenant {
        SimTenant {
            name: name.to_string(),
            phases: vec![(0, load)],
            terms: TenantTerms::default(),
        }
    }

    /// Its load at `now_ns`, and when the next phase starts.
    fn load_at(&self, now_ns: u64) -> (&TenantLoad, u64) {
        let index = self
            .phases
            .iter()
            .rposition(|(start_ns, _)| *start_ns <= now_ns)
            .unwrap_or(0);
        let next_ns = self
            .phases
            .get(index + 1)
            .map_or(u64::MAX, |(start, _)| *start);
        (&self.phases[index].1, next_ns)
    }
}

/// One run.
#[derive(Clone, Debug)]
pub struct SharedPmConfig {
    pub device: DeviceSpec,
    /// The device's MaxIOPS profile (M2), measured once per device.
    pub profile: MaxIopsProfile,
    pub tenants: Vec<SimTenant>,
    pub policy: PolicyName,
    pub params: PolicyParams,
    pub duration_ns: u64,
    /// Length of the series' intervals.
    pub interval_ns: u64,
    /// CPU time of a request besides its PM access (hashing, the DRAM index), ns.
    pub cpu_ns: u64,
    /// Bytes of the device each tenant's values span.
    pub span_bytes: u64,
    pub seed: u64,
}

/// One tenant over one interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct TenantInterval {
    pub start_s: f64,
    pub requests_per_second: f64,
    /// PM accesses a second (gets that hit, and sets).
    pub accesses_per_second: f64,
    pub bytes_per_second: f64,
    /// Its share of the device (M2).
    pub utilization: f64,
    pub p99_latency_us: f64,
    /// Its throttle at the interval's end, accesses a second (0: none).
    pub rate_cap_per_second: f64,
    /// Its slowdown as the policy last estimated it (0: none).
    pub estimated_slowdown: f64,
}

/// One tenant over a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TenantSeries {
    pub name: String,
    pub intervals: Vec<TenantInterval>,
}

impl TenantSeries {
    /// Mean requests a second over the intervals starting in `[from_s, to_s)`.
    pub fn mean_requests_per_second(&self, from_s: f64, to_s: f64) -> f64 {
        self.mean(from_s, to_s, |i| i.requests_per_second)
    }

    /// Mean of `field` over the intervals starting in `[from_s, to_s)`.
    pub fn mean(&self, from_s: f64, to_s: f64, field: impl Fn(&TenantInterval) -> f64) -> f64 {
        let values: Vec<f64> = self
            .intervals
            .iter()
            .filter(|i| i.start_s >= from_s && i.start_s < to_s)
            .map(field)
            .collect();
        values.iter().sum::<f64>() / values.len().max(1) as f64
    }
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SharedPmResult {
    pub policy: String,
    pub tenants: Vec<TenantSeries>,
}
