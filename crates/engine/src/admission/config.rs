//! Settings of the admission tuners, as the `[cache]` table of a hierarchy file holds them:
//!
//! ```toml
//! [cache]
//! admission = "nhc"          # classic | nhc | sib+ | sib++ | lbica | fixed
//! tuning_time_scale = 1.0    # multiplies every interval below (see `tuning_time_scale`)
//! [cache.nhc]                # seed 000 §4.3.3 and §4.4
//! step = 0.02
//! interval_ms = 5.0
//! stable_window_ms = 100.0
//! stable_change = 0.001
//! alpha = 0.05
//! target = "throughput"      # throughput | mean-latency | p99-latency
//! always_data_admit = false
//! admit_while_filling = true
//! [cache.sib]
//! training_ms = 1000.0
//! [cache.lbica]
//! interval_ms = 5.0
//! [cache.fixed]
//! data_admit = false
//! load_admit = 0.6
//! from_ms = 2000.0
//! ```

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

/// Who sets the decision points.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AdmissionScheme {
    /// Classic caching: every read miss installed, every read hit served by the cache.
    #[default]
    #[serde(rename = "classic")]
    Classic,
    /// Non-hierarchical caching: Algorithm 1 of seed 000 §4.3.3.
    #[serde(rename = "nhc")]
    Nhc,
    /// SIB with per-request bypass (seed 000 §4.5.4): read misses are never installed.
    #[serde(rename = "sib+")]
    SibPlus,
    /// SIB+ that installs read misses (seed 000 §4.5.4).
    #[serde(rename = "sib++")]
    SibPlusPlus,
    /// LBICA (seed 000 §4.5.4): no installs while the cache is under burst load.
    #[serde(rename = "lbica")]
    Lbica,
    /// The decision points pinned at `[cache.fixed]`'s values: the best fixed setting, found
    /// by sweeping, is the oracle NHC's tuning is measured against.
    #[serde(rename = "fixed")]
    Fixed,
}

impl AdmissionScheme {
    /// Every scheme, classic first.
    pub const ALL: [AdmissionScheme; 6] = [
        AdmissionScheme::Classic,
        AdmissionScheme::Nhc,
        AdmissionScheme::SibPlus,
        AdmissionScheme::SibPlusPlus,
        AdmissionScheme::Lbica,
        AdmissionScheme::Fixed,
    ];

    /// The name a hierarchy file uses.
    pub fn name(self) -> &'static str {
        match self {
            AdmissionScheme::Classic => "classic",
            AdmissionScheme::Nhc => "nhc",
            AdmissionScheme::SibPlus => "sib+",
            AdmissionScheme::SibPlusPlus => "sib++",
            AdmissionScheme::Lbica => "lbica",
            AdmissionScheme::Fixed => "fixed",
        }
    }
}

/// What NHC maximizes (seed 000 §4.4: "throughput, average latency, and tail (P99) latency,
/// with throughput being the default").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetMetric {
    /// Bytes answered to clients per second. The thesis sums the devices' block-layer
    /// throughputs; for reads without installs (State 2) that is the same sum, and counting
    /// answers keeps install and write-back traffic from passing for useful work.
    #[default]
    Throughput,
    /// Mean end-to-end latency of the answers, lower is better.
    MeanLatency,
    /// 99th-percentile end-to-end latency of the answers, lower is better.
    P99Latency,
}

/// Algorithm 1's parameters (seed 000 §4.3.3, §4.4). Times are before `tuning_time_scale`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NhcConfig {
    /// Change of `load_admit` per step: "NHC adjusts the load ratio by 2% in each step". Must
    /// divide 1 (1/step a whole number), so that 1.0 and 0.0 are reachable exactly.
    pub step: f64,
    /// Length of each f(x) measurement: "the smallest yet accurate interval of 5 ms".
    pub interval_ms: f64,
    /// The hit rate is stable when it "changes within 0.1% in the last 100-milliseconds":
    /// the hit rate of the last window against the window before it.
    pub stable_window_ms: f64,
    /// That change, as a fraction (0.001 = 0.1 percentage points).
    pub stable_change: f64,
    /// Back to State 1 when the hit rate falls below (1 − α) of its value at the start of
    /// State 2 (Algorithm 1, line 17; the thesis leaves α open).
    pub alpha: f64,
    pub target: TargetMetric,
    /// The ablation of Figure 4.14: read misses stay admitted while `load_admit` is tuned.
    pub always_data_admit: bool,
    /// Read misses are admitted while the tier has room for them without evicting, whatever
    /// `data_admit` says (ours): Algorithm 1 can judge the hit rate stable while the cache
    /// still fills (a slow climb, or a stable 0% during a scan) and would then freeze it below
    /// full. On by default, in the simulator as in live volumes; off reproduces Algorithm 1 to
    /// the letter.
    pub admit_while_filling: bool,
}

impl Default for NhcConfig {
    fn default() -> Self {
        NhcConfig {
            step: 0.02,
            interval_ms: 5.0,
            stable_window_ms: 100.0,
            stable_change: 0.001,
            alpha: 0.05,
            target: TargetMetric::Throughput,
            always_data_admit: false,
            admit_while_filling: true,
        }
    }
}

/// SIB's parameters (seed 000 §4.5.4; Kim, Roh and Park, IEEE TC 67(4), 2018). The thesis
/// describes its two phases but no numbers; these are ours.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SibConfig {
    /// Length of the training phase, in which SIB caches classically and learns the cache
    /// device's highest throughput for the workload.
    pub training_ms: f64,
    /// Measurement interval of the inference phase.
    pub interval_ms: f64,
    /// The cache device counts as saturated at this fraction of its learned maximum.
    pub saturation: f64,
    /// Change of the bypassed fraction of read hits per interval.
    pub step: f64,
    /// A change of the write ratio by more than this (absolute) from the one trained on means
    /// a new workload: SIB trains again.
    pub retrain_write_change: f64,
    /// Window over which the write ratio is compared with the trained one.
    pub workload_window_ms: f64,
}

impl Default for SibConfig {
    fn default() -> Self {
        SibConfig {
            training_ms: 1000.0,
            interval_ms: 5.0,
            saturation: 0.95,
            step: 0.02,
            retrain_write_change: 0.05,
            workload_window_ms: 100.0,
        }
    }
}

/// LBICA's parameters (seed 000 §4.5.4; Ahmadian, Salkhordeh and Asadi, DATE 2019).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LbicaConfig {
    /// How often burst load is judged.
    pub interval_ms: f64,
}

impl Default for LbicaConfig {
    fn default() -> Self {
        LbicaConfig { interval_ms: 5.0 }
    }
}

/// The pinned decision points of the `fixed` scheme, the same for every pair.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FixedConfig {
    pub data_admit: bool,
    pub load_admit: f64,
    /// Classic caching until this time on the controller's clock (not scaled), so that the
    /// cache fills before admission is pinned off.
    pub from_ms: f64,
}

impl Default for FixedConfig {
    fn default() -> Self {
        FixedConfig {
            data_admit: true,
            load_admit: 1.0,
            from_ms: 0.0,
        }
    }
}

/// Everything the tuners need: the scheme, each tuner's parameters, and the time scale.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdmissionConfig {
    pub scheme: AdmissionScheme,
    /// Multiplies every tuning time (intervals, windows, training). The thesis' 5 ms and
    /// 100 ms suit devices serving hundreds of requests in 5 ms; on devices k times slower
    /// (FlashSim's 50 MB/s against an Optane SSD's 2.5 GB/s: k = 50), a scale of k keeps the
    /// number of requests per interval — and so the noise of each measurement — the same.
    pub time_scale: f64,
    pub nhc: NhcConfig,
    pub sib: SibConfig,
    pub lbica: LbicaConfig,
    pub fixed: FixedConfig,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        AdmissionConfig {
            scheme: AdmissionScheme::default(),
            time_scale: 1.0,
            nhc: NhcConfig::default(),
            sib: SibConfig::default(),
            lbica: LbicaConfig::default(),
            fixed: FixedConfig::default(),
        }
    }
}

/// Nanoseconds of `ms` milliseconds scaled by `scale`, at least 1.
pub(crate) fn scaled_ns(ms: f64, scale: f64) -> u64 {
    ((ms * scale * 1e6).round() as u64).max(1)
}

fn check(key: &str, ok: bool, message: impl FnOnce() -> String) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError::new(key, message()))
    }
}

fn check_positive_ms(key: &str, value: f64) -> Result<(), ConfigError> {
    check(key, value.is_finite() && value > 0.0, || {
        format!("{value} must be a number of milliseconds > 0")
    })
}

fn check_fraction(key: &str, value: f64) -> Result<(), ConfigError> {
    check(key, (0.0..=1.0).contains(&value), || {
        format!("{value} must be a fraction in [0, 1]")
    })
}

/// Number of `load_admit` steps between 0 and 1, when `step` divides 1.
pub(crate) fn step_levels(step: f64) -> Option<u32> {
    if !(step.is_finite() && step > 0.0 && step <= 1.0) {
        return None;
    }
    let levels = (1.0 / step).round();
    ((1.0 / step - levels).abs() < 1e-6 && levels <= 100_000.0).then_some(levels as u32)
}

impl AdmissionConfig {
    /// Checks every parameter, of the selected tuner and of the others alike.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check(
            "tuning_time_scale",
            self.time_scale.is_finite() && self.time_scale > 0.0,
            || format!("{} must be > 0", self.time_scale),
        )?;
        let nhc = &self.nhc;
        check("nhc.step", step_levels(nhc.step).is_some(), || {
            format!("{} must divide 1 (1/step a whole number)", nhc.step)
        })?;
        check_positive_ms("nhc.interval_ms", nhc.interval_ms)?;
        check_positive_ms("nhc.stable_window_ms", nhc.stable_window_ms)?;
        check(
            "nhc.stable_window_ms",
            nhc.stable_window_ms >= nhc.interval_ms,
            || {
                format!(
                    "{} is shorter than one interval ({} ms)",
                    nhc.stable_window_ms, nhc.interval_ms
                )
            },
        )?;
        check_fraction("nhc.stable_change", nhc.stable_change)?;
        check_fraction("nhc.alpha", nhc.alpha)?;
        let sib = &self.sib;
        check_positive_ms("sib.training_ms", sib.training_ms)?;
        check_positive_ms("sib.interval_ms", sib.interval_ms)?;
        check_positive_ms("sib.workload_window_ms", sib.workload_window_ms)?;
        check(
            "sib.saturation",
            sib.saturation > 0.0 && sib.saturation <= 1.0,
            || format!("{} must be a fraction in (0, 1]", sib.saturation),
        )?;
        check("sib.step", sib.step > 0.0 && sib.step <= 1.0, || {
            format!("{} must be a fraction in (0, 1]", sib.step)
        })?;
        check_fraction("sib.retrain_write_change", sib.retrain_write_change)?;
        check_positive_ms("lbica.interval_ms", self.lbica.interval_ms)?;
        check_fraction("fixed.load_admit", self.fixed.load_admit)?;
        check("fixed.from_ms", self.fixed.from_ms >= 0.0, || {
            format!(
                "{} must be a number of milliseconds >= 0",
                self.fixed.from_ms
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_must_divide_one() {
        assert_eq!(step_levels(0.02), Some(50));
        assert_eq!(step_levels(0.25), Some(4));
        assert_eq!(step_levels(1.0), Some(1));
        assert_eq!(step_levels(0.03), None);
        assert_eq!(step_levels(0.0), None);
        assert_eq!(step_levels(f64::NAN), None);
    }

    #[test]
    fn defaults_are_the_thesis_values_and_valid() {
        let config = AdmissionConfig::default();
        assert!(config.validate().is_ok());
        assert_eq!(config.nhc.step, 0.02);
        assert_eq!(config.nhc.interval_ms, 5.0);
        assert_eq!(config.nhc.stable_window_ms, 100.0);
        assert_eq!(config.nhc.stable_change, 0.001);
        assert_eq!(config.nhc.target, TargetMetric::Throughput);
        assert_eq!(scaled_ns(5.0, 1.0), 5_000_000);
        assert_eq!(scaled_ns(5.0, 100.0), 500_000_000);
    }

    #[test]
    fn bad_values_name_their_key() {
        let base = AdmissionConfig::default();
        let mut config = base;
        config.nhc.step = 0.03;
        assert_eq!(config.validate().unwrap_err().key, "nhc.step");
        let mut config = base;
        config.nhc.alpha = 1.5;
        assert_eq!(config.validate().unwrap_err().key, "nhc.alpha");
        let mut config = base;
        config.nhc.stable_window_ms = 1.0;
        assert_eq!(config.validate().unwrap_err().key, "nhc.stable_window_ms");
        let mut config = base;
        config.time_scale = 0.0;
        assert_eq!(config.validate().unwrap_err().key, "tuning_time_scale");
        let mut config = base;
        config.sib.saturation = 0.0;
        assert_eq!(config.validate().unwrap_err().key, "sib.saturation");
    }

    #[test]
    fn scheme_names_parse() {
        #[derive(Deserialize)]
        struct Holder {
            admission: AdmissionScheme,
        }
        for scheme in AdmissionScheme::ALL {
            let text = format!("admission = \"{}\"", scheme.name());
            let holder: Holder = toml::from_str(&text).unwrap();
            assert_eq!(holder.admission, scheme);
        }
        let config: NhcConfig = toml::from_str("target = \"p99-latency\"\nalpha = 0.1").unwrap();
        assert_eq!(config.target, TargetMetric::P99Latency);
        assert_eq!(config.alpha, 0.1);
        assert!(toml::from_str::<NhcConfig>("alfa = 0.1").is_err());
    }
}
