//! NyxCache's sharing policies (seed 000 §5.2.4, Algorithms 2–5) and the thesis' baselines,
//! one file each, behind [`SharingPolicy`]: a controller calls `step` on the shared device's
//! clock, as often as the policy asks, and the policy reads the tenants' gates and sets their
//! throttles and stalls. The live key-value server runs one controller per shared PM; the
//! timed simulator runs the same policies on virtual time. [`build`] makes one from its name,
//! the tenants' terms and the server's parameters.

mod alone;
mod epochs;
mod fair;
mod interference;
mod limit;
mod proportional;
mod qos;
mod window;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

pub use alone::{AloneEstimator, Refresh};
pub use epochs::{EpochTick, EpochUse, Epochs, Meter};
pub use fair::FairSlowdown;
pub use interference::{Analysis, InterferenceAnalysis};
pub use limit::ResourceLimit;
pub use proportional::{water_fill, Donation, Proportional};
pub use qos::{Choice, Qos};
pub use window::{TenantWindow, Windows, MIN_RATE_CAP};

use super::regulator::Regulator;
use crate::error::NameError;

/// What a controller runs.
pub trait SharingPolicy: Send {
    /// One step at `now_ns` over the tenants' gates (in the order the policy was made for);
    /// returns when to step next.
    fn step(&mut self, now_ns: u64, gates: &[Arc<Regulator>]) -> u64;
}

macro_rules! policy_names {
    ($($variant:ident => $name:literal, $doc:literal;)*) => {
        /// The policies by name, as a server config names them.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum PolicyName {
            $(#[doc = $doc] $variant,)*
        }

        impl PolicyName {
            pub const ALL: &[PolicyName] = &[$(PolicyName::$variant,)*];

            pub fn name(self) -> &'static str {
                match self {
                    $(PolicyName::$variant => $name,)*
                }
            }
        }
    };
}

policy_names! {
    None => "none", "No regulation.";
    Limit => "limit", "Algorithm 2: each tenant held to its `limit` share of the device.";
    BandwidthLimit => "bandwidth-limit",
        "Figs 5.6–5.7's baseline: Algorithm 2 with limits in bytes per second.";
    Qos => "qos", "Algorithm 3: LC tenants' p99 targets kept, the worst interferer throttled.";
    CaladanQos => "caladan-qos",
        "Fig 5.8's baseline: Algorithm 3 throttling the BE tenant moving most bytes.";
    Fair => "fair", "Algorithm 4: equal slowdowns, and hard slowdown limits.";
    Proportional => "proportional",
        "Algorithm 5: shares by weight, idle ones lent within the lender's slowdown bound.";
    DonateAll => "donate-all", "Figs 5.11–5.12's naive variant: every idle unit lent.";
    NoRealloc => "no-realloc", "Fig 5.12's variant: shares by weight, nothing lent.";
    BandwidthProportional => "bandwidth-proportional",
        "Fig 5.10's baseline: bytes per second shared by weight.";
}

/// Every name [`PolicyName`] parses, for error messages.
pub fn policy_names() -> String {
    let names: Vec<&str> = PolicyName::ALL.iter().map(|p| p.name()).collect();
    names.join(", ")
}

impl fmt::Display for PolicyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PolicyName {
    type Err = NameError;

    fn from_str(text: &str) -> Result<PolicyName, NameError> {
        PolicyName::ALL
            .iter()
            .copied()
            .find(|policy| policy.name() == text)
            .ok_or_else(|| NameError {
                what: "sharing policy",
                text: text.to_string(),
                expected: format!("one of {}", policy_names()),
            })
    }
}

/// A tenant's class under QoS (seed 000 §5.2.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TenantClass {
    /// Latency-critical: has a p99 target.
    LatencyCritical,
    /// Best-effort: throttled as far as LC targets need.
    #[default]
    BestEffort,
}

impl FromStr for TenantClass {
    type Err = NameError;

    fn from_str(text: &str) -> Result<TenantClass, NameError> {
        match text {
            "lc" => Ok(TenantClass::LatencyCritical),
            "be" => Ok(TenantClass::BestEffort),
            _ => Err(NameError {
                what: "class",
                text: text.to_string(),
                expected: "lc or be".to_string(),
            }),
        }
    }
}

/// What a policy knows of one tenant.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantTerms {
    pub class: TenantClass,
    /// Its limit per second, in the policy's meter (a share of the device, or bytes).
    pub limit: Option<f64>,
    pub p99_target_ns: Option<u64>,
    pub weight: f64,
    /// The slowdown it must never pass (fair slowdown's hard limit).
    pub slowdown_limit: Option<f64>,
}

impl Default for TenantTerms {
    fn default() -> TenantTerms {
        TenantTerms {
            class: TenantClass::BestEffort,
            limit: None,
            p99_target_ns: None,
            weight: 1.0,
            slowdown_limit: None,
        }
    }
}

/// A controller's parameters, the thesis' defaults (seed 000 §5.2.6) in [`Default`].
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyParams {
    /// Alg. 2's tick.
    pub tick_ns: u64,
    /// Ticks per epoch (Algs 2 and 5).
    pub epoch_ticks: u32,
    /// Alg. 3's ExperimentStep, bytes per second of a candidate's throughput.
    pub experiment_step_bytes_per_second: f64,
    /// Alg. 5's DonateStep.
    pub donate_step: f64,
    /// The tail-latency window (Alg. 3 steps once per window).
    pub tail_window_ns: u64,
    /// M4: T_alone refreshed every period by pauses this long.
    pub alone_period_ns: u64,
    pub alone_pause_ns: u64,
    /// Alg. 4's interval between adjustments.
    pub fair_interval_ns: u64,
    /// The whole device in bytes per second, for the bandwidth-proportional baseline. Both
    /// executors set it from the device's profile (its 4 KiB reads); the default is seed 000
    /// §5.3.2's two DIMMs, 3 M 4 KiB reads a second.
    pub device_bytes_per_second: f64,
}

impl Default for PolicyParams {
    fn default() -> PolicyParams {
        PolicyParams {
            tick_ns: 10_000_000,
            epoch_ticks: 100,
            experiment_step_bytes_per_second: 500e6,
            donate_step: 0.1,
            tail_window_ns: 500_000_000,
            alone_period_ns: alone::DEFAULT_PERIOD_NS,
            alone_pause_ns: alone::DEFAULT_PAUSE_NS,
            fair_interval_ns: 100_000_000,
            device_bytes_per_second: 12.3e9,
        }
    }
}

/// The policy `name` over tenants with `terms`; none for [`PolicyName::None`].
pub fn build(
    name: PolicyName,
    terms: &[TenantTerms],
    params: &PolicyParams,
) -> Option<Box<dyn SharingPolicy>> {
    let limits = || terms.iter().map(|t| t.limit).collect();
    let weights = || terms.iter().map(|t| t.weight).collect();
    let epochs = |meter| Epochs::new(meter, params.tick_ns, params.epoch_ticks);
    let alone = || AloneEstimator::new(terms.len(), params.alone_period_ns, params.alone_pause_ns);
    let qos = |choice| {
        Qos::new(
            terms.to_vec(),
            choice,
            params.experiment_step_bytes_per_second,
            params.tail_window_ns,
        )
    };
    let proportional = |meter, total, donation| {
        Proportional::new(
            epochs(meter),
            total,
            weights(),
            donation,
            params.donate_step,
            alone(),
        )
    };
    Some(match name {
        PolicyName::None => return None,
        PolicyName::Limit => Box::new(ResourceLimit::new(
            Meter::Cost,
            limits(),
            params.tick_ns,
            params.epoch_ticks,
        )),
        PolicyName::BandwidthLimit => Box::new(ResourceLimit::new(
            Meter::Bytes,
            limits(),
            params.tick_ns,
            params.epoch_ticks,
        )),
        PolicyName::Qos => Box::new(qos(Choice::Interference)),
        PolicyName::CaladanQos => Box::new(qos(Choice::MostBandwidth)),
        PolicyName::Fair => Box::new(FairSlowdown::new(
            terms.to_vec(),
            alone(),
            params.fair_interval_ns,
        )),
        PolicyName::Proportional => {
            Box::new(proportional(Meter::Cost, 1.0, Donation::InterferenceAware))
        }
        PolicyName::DonateAll => Box::new(proportional(Meter::Cost, 1.0, Donation::All)),
        PolicyName::NoRealloc => Box::new(proportional(Meter::Cost, 1.0, Donation::None)),
        PolicyName::BandwidthProportional => Box::new(proportional(
            Meter::Bytes,
            params.device_bytes_per_second,
            Donation::None,
        )),
    })
}
