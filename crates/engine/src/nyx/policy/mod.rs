//! NyxCache's sharing policies (seed 000 §5.2.4, Algorithms 2–5) and their baselines, one file
//! each, behind [`SharingPolicy`]: the controller calls `tick` every `tick_ns` on the shared
//! device's clock, and the policy reads the tenants' gates and sets their delays and stalls.
//! The live key-value server runs one controller per shared PM; the timed simulator runs the
//! same policies on virtual time.

mod limit;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

pub use limit::{Meter, ResourceLimit};

use super::regulator::Regulator;

/// What a controller runs.
pub trait SharingPolicy: Send {
    /// How often `tick` runs, ns.
    fn tick_ns(&self) -> u64;
    /// One step at `now_ns` over the tenants' gates (in the order the policy was made for).
    fn tick(&mut self, now_ns: u64, gates: &[Arc<Regulator>]);
}

/// The policies by name, as a server config names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyName {
    /// No regulation.
    None,
    /// Algorithm 2: each tenant held to its share of the device, epoch by epoch.
    Limit,
    /// The baseline of Figs 5.6–5.7: the same epochs, but limits in bytes per second.
    BandwidthLimit,
}

/// Every name [`PolicyName`] parses, for error messages.
pub const POLICY_NAMES: &str = "none, limit, bandwidth-limit";

impl PolicyName {
    pub fn name(self) -> &'static str {
        match self {
            PolicyName::None => "none",
            PolicyName::Limit => "limit",
            PolicyName::BandwidthLimit => "bandwidth-limit",
        }
    }
}

impl fmt::Display for PolicyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PolicyName {
    type Err = String;

    fn from_str(text: &str) -> Result<PolicyName, String> {
        match text {
            "none" => Ok(PolicyName::None),
            "limit" => Ok(PolicyName::Limit),
            "bandwidth-limit" => Ok(PolicyName::BandwidthLimit),
            _ => Err(format!(
                "unknown sharing policy \"{text}\": expected one of {POLICY_NAMES}"
            )),
        }
    }
}

/// The defaults of seed 000 §5.2.6.
pub mod defaults {
    /// Alg. 2's tick: 10 ms.
    pub const TICK_NS: u64 = 10_000_000;
    /// Ticks per epoch: 100 (a 1 s epoch, so a tenant overshoots its limit by 1% at most).
    pub const EPOCH_TICKS: u32 = 100;
}
