//! The cache controller's settings, in Open CAS's vocabulary (docs/architecture.md, "Conventions"): cache
//! mode, eviction policy, tier layout, cleaning policy and promotion policy, each with Open CAS's
//! defaults and parameter ranges (casadm(8), Open CAS Linux `utils/casadm.8`; OCF headers
//! `inc/cleaning/alru.h`, `inc/cleaning/acp.h`, `inc/promotion/nhit.h`).
//!
//! Deserializes from the `[cache]` table of a hierarchy file:
//!
//! ```toml
//! [cache]
//! mode = "wb"            # wt | wb | wa | wo | pt | wi
//! policy = "lru"         # any eviction policy of the registry but the oracles
//! layout = "inclusive"   # inclusive | exclusive (two or more cache tiers)
//! cleaning = "alru"      # nop | alru | acp
//! promotion = "nhit"     # always | nhit
//! [cache.alru]           # casadm --set-param --name cleaning-alru
//! wake_up_s = 20
//! staleness_time_s = 120
//! flush_max_buffers = 100
//! activity_threshold_ms = 10000
//! [cache.acp]            # casadm --set-param --name cleaning-acp
//! wake_up_ms = 10
//! flush_max_buffers = 128
//! [cache.nhit]           # casadm --set-param --name promotion-nhit
//! threshold = 3
//! trigger_percent = 80
//! ```
//!
//! and the admission tuning of seed 000 chapter 4 (`admission`, `tuning_time_scale`,
//! `[cache.nhc]`, `[cache.sib]`, `[cache.lbica]`, `[cache.fixed]`; see
//! [`crate::admission::config`]).

use serde::{Deserialize, Serialize};

pub use crate::error::ConfigError;

use crate::admission::{
    AdmissionConfig, AdmissionScheme, FixedConfig, LbicaConfig, NhcConfig, SibConfig,
};

/// How writes (and reads) use the cache: Open CAS's cache modes, as the Open CAS Framework
/// documents them ("Cache configuration", open-cas.github.io) and as OCF's engines implement
/// them (`src/engine/cache_engine.c` maps each mode to its read and write engine).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteMode {
    /// Write-through: writes go to the cache and the backing store together; read misses are
    /// installed. Open CAS's default mode.
    #[default]
    Wt,
    /// Write-back: writes go to the cache only and leave the line dirty until cleaning or
    /// eviction writes it back; read misses are installed.
    Wb,
    /// Write-around: a write updates the cache only where the line is already cached (and
    /// always the backing store); write misses bypass the cache; read misses are installed.
    Wa,
    /// Write-only: writes as in write-back; reads never install and are served by the backing
    /// store unless the line is dirty, when the cache serves them.
    Wo,
    /// Pass-through: nothing is cached; writes invalidate cached lines (OCF runs pass-through
    /// writes through its write-invalidate engine); dirty lines still serve reads.
    Pt,
    /// Write-invalidate: writes go to the backing store and invalidate the cached line; read
    /// misses are installed as in write-through.
    Wi,
}

impl WriteMode {
    /// Every mode, in Open CAS's order.
    pub const ALL: [WriteMode; 6] = [
        WriteMode::Wt,
        WriteMode::Wb,
        WriteMode::Wa,
        WriteMode::Wo,
        WriteMode::Pt,
        WriteMode::Wi,
    ];

    /// Open CAS's short name (`wt`, `wb`, ...).
    pub fn name(self) -> &'static str {
        match self {
            WriteMode::Wt => "wt",
            WriteMode::Wb => "wb",
            WriteMode::Wa => "wa",
            WriteMode::Wo => "wo",
            WriteMode::Pt => "pt",
            WriteMode::Wi => "wi",
        }
    }

    /// True for the modes that leave dirty data in the cache (OCF's "lazy write" modes).
    pub fn writes_back(self) -> bool {
        matches!(self, WriteMode::Wb | WriteMode::Wo)
    }
}

/// How cache tiers share lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TierLayout {
    /// Every line of tier i is also in tier i + 1: a miss installs in every tier, bottom up,
    /// and an eviction from tier i also drops the line from the tiers above it.
    #[default]
    Inclusive,
    /// A line is in at most one cache tier: a miss installs in tier 0, tier i's victims are
    /// demoted into tier i + 1, and a hit below tier 0 moves the line up into tier 0.
    Exclusive,
}

/// Which background cleaner writes dirty lines back (casadm `--name cleaning --policy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CleaningPolicy {
    /// No background cleaning: only evictions write dirty lines back.
    Nop,
    /// Approximately-LRU cleaning of lines dirty for longer than the staleness time, when the
    /// cache has been idle (Open CAS's default).
    #[default]
    Alru,
    /// Aggressive cleaning: the dirtiest 100 MiB chunk first, every few milliseconds.
    Acp,
}

/// Parameters of ALRU cleaning, with Open CAS's defaults and ranges (OCF `inc/cleaning/alru.h`,
/// casadm `--name cleaning-alru`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AlruConfig {
    /// Time between cleaner wake-ups, seconds (0..=3600, default 20).
    pub wake_up_s: u64,
    /// Time since a line's last write before it may be cleaned, seconds (1..=3600, default 120).
    pub staleness_time_s: u64,
    /// Lines cleaned per wake-up at most (1..=10000, default 100).
    pub flush_max_buffers: u32,
    /// Cache idle time before cleaning may start, milliseconds (0..=1000000, default 10000).
    pub activity_threshold_ms: u64,
}

impl Default for AlruConfig {
    fn default() -> Self {
        AlruConfig {
            wake_up_s: 20,
            staleness_time_s: 120,
            flush_max_buffers: 100,
            activity_threshold_ms: 10_000,
        }
    }
}

/// Parameters of ACP cleaning, with Open CAS's defaults and ranges (OCF `inc/cleaning/acp.h`,
/// casadm `--name cleaning-acp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AcpConfig {
    /// Time between cleaning cycles, milliseconds (0..=10000, default 10).
    pub wake_up_ms: u64,
    /// Lines cleaned per cycle at most (1..=10000, default 128).
    pub flush_max_buffers: u32,
}

impl Default for AcpConfig {
    fn default() -> Self {
        AcpConfig {
            wake_up_ms: 10,
            flush_max_buffers: 128,
        }
    }
}

/// Which misses may be installed (casadm `--name promotion --policy`; "Promotion policies",
/// open-cas.github.io).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromotionPolicy {
    /// Every miss is installed (Open CAS's default).
    #[default]
    Always,
    /// A line is installed on its N-th access, once the cache is filled past a trigger.
    Nhit,
}

/// Parameters of nhit promotion, with Open CAS's defaults and ranges (OCF
/// `src/promotion/nhit/nhit.h`, casadm `--name promotion-nhit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NhitConfig {
    /// Accesses a line needs before it is installed (2..=1000, default 3).
    pub threshold: u32,
    /// Occupancy of the top tier, percent, below which every miss is installed and nothing
    /// is counted (0..=100, default 80).
    pub trigger_percent: u32,
}

impl Default for NhitConfig {
    fn default() -> Self {
        NhitConfig {
            threshold: 3,
            trigger_percent: 80,
        }
    }
}

/// Everything the cache controller needs besides tier capacities: the `[cache]` table of a
/// hierarchy file. Missing keys take Open CAS's defaults (mode wt, cleaning alru, promotion
/// always), LRU eviction with inclusive tiers, and classic caching (no admission tuning).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheConfig {
    /// Open CAS cache mode.
    pub mode: WriteMode,
    /// Eviction policy of every cache tier, by registry name (`heterarchy_policy::create`).
    pub policy: String,
    /// How cache tiers share lines (ignored with one).
    pub layout: TierLayout,
    /// Background cleaner for the modes that leave dirty data (wb, wo).
    pub cleaning: CleaningPolicy,
    /// ALRU's parameters, used when `cleaning` is `alru`.
    pub alru: AlruConfig,
    /// ACP's parameters, used when `cleaning` is `acp`.
    pub acp: AcpConfig,
    /// Which misses may be installed.
    pub promotion: PromotionPolicy,
    /// nhit's parameters, used when `promotion` is `nhit`.
    pub nhit: NhitConfig,
    /// Who sets the read decision points: classic caching, NHC, SIB+, SIB++, LBICA or fixed
    /// settings.
    pub admission: AdmissionScheme,
    /// Multiplies every tuning interval (see [`AdmissionConfig::time_scale`]).
    pub tuning_time_scale: f64,
    /// NHC's parameters, used when `admission` is `nhc`.
    pub nhc: NhcConfig,
    /// SIB's parameters, used when `admission` is `sib+` or `sib++`.
    pub sib: SibConfig,
    /// LBICA's parameters, used when `admission` is `lbica`.
    pub lbica: LbicaConfig,
    /// The pinned settings, used when `admission` is `fixed`.
    pub fixed: FixedConfig,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            mode: WriteMode::default(),
            policy: "lru".to_string(),
            layout: TierLayout::default(),
            cleaning: CleaningPolicy::default(),
            alru: AlruConfig::default(),
            acp: AcpConfig::default(),
            promotion: PromotionPolicy::default(),
            nhit: NhitConfig::default(),
            admission: AdmissionScheme::default(),
            tuning_time_scale: 1.0,
            nhc: NhcConfig::default(),
            sib: SibConfig::default(),
            lbica: LbicaConfig::default(),
            fixed: FixedConfig::default(),
        }
    }
}

fn check_range(key: &str, value: u64, low: u64, high: u64) -> Result<(), ConfigError> {
    if (low..=high).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::new(
            key,
            format!("{value} is outside Open CAS's range {low}..={high}"),
        ))
    }
}

impl CacheConfig {
    /// The admission tuning these settings select.
    pub fn admission_config(&self) -> AdmissionConfig {
        AdmissionConfig {
            scheme: self.admission,
            time_scale: self.tuning_time_scale,
            nhc: self.nhc,
            sib: self.sib,
            lbica: self.lbica,
            fixed: self.fixed,
        }
    }

    /// Checks every parameter against Open CAS's ranges (those of the selected cleaning and
    /// promotion policies and of the unselected ones alike, so a typo never waits to bite).
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_range("alru.wake_up_s", self.alru.wake_up_s, 0, 3600)?;
        check_range("alru.staleness_time_s", self.alru.staleness_time_s, 1, 3600)?;
        check_range(
            "alru.flush_max_buffers",
            u64::from(self.alru.flush_max_buffers),
            1,
            10_000,
        )?;
        check_range(
            "alru.activity_threshold_ms",
            self.alru.activity_threshold_ms,
            0,
            1_000_000,
        )?;
        check_range("acp.wake_up_ms", self.acp.wake_up_ms, 0, 10_000)?;
        check_range(
            "acp.flush_max_buffers",
            u64::from(self.acp.flush_max_buffers),
            1,
            10_000,
        )?;
        check_range("nhit.threshold", u64::from(self.nhit.threshold), 2, 1000)?;
        check_range(
            "nhit.trigger_percent",
            u64::from(self.nhit.trigger_percent),
            0,
            100,
        )?;
        self.admission_config().validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_open_cas_defaults() {
        let config = CacheConfig::default();
        assert_eq!(config.mode, WriteMode::Wt);
        assert_eq!(config.cleaning, CleaningPolicy::Alru);
        assert_eq!(config.promotion, PromotionPolicy::Always);
        assert_eq!(
            (config.alru.wake_up_s, config.alru.staleness_time_s),
            (20, 120)
        );
        assert_eq!(
            (
                config.alru.flush_max_buffers,
                config.alru.activity_threshold_ms
            ),
            (100, 10_000)
        );
        assert_eq!(
            (config.acp.wake_up_ms, config.acp.flush_max_buffers),
            (10, 128)
        );
        assert_eq!(
            (config.nhit.threshold, config.nhit.trigger_percent),
            (3, 80)
        );
        assert!(config.validate().is_ok());
    }

    #[test]
    fn parses_lower_case_names_and_partial_tables() {
        let config: CacheConfig = toml::from_str(
            "mode = \"wo\"\npolicy = \"arc\"\nlayout = \"exclusive\"\ncleaning = \"acp\"\n\
             promotion = \"nhit\"\n[acp]\nwake_up_ms = 5\n[nhit]\nthreshold = 4\n",
        )
        .unwrap();
        assert_eq!(config.mode, WriteMode::Wo);
        assert_eq!(config.policy, "arc");
        assert_eq!(config.layout, TierLayout::Exclusive);
        assert_eq!(config.cleaning, CleaningPolicy::Acp);
        assert_eq!(config.acp.wake_up_ms, 5);
        assert_eq!(config.acp.flush_max_buffers, 128);
        assert_eq!(config.nhit.threshold, 4);
        assert_eq!(config.nhit.trigger_percent, 80);
        for mode in WriteMode::ALL {
            let parsed: CacheConfig =
                toml::from_str(&format!("mode = \"{}\"", mode.name())).unwrap();
            assert_eq!(parsed.mode, mode);
        }
    }

    #[test]
    fn rejects_unknown_keys_and_names() {
        assert!(toml::from_str::<CacheConfig>("mood = \"wb\"").is_err());
        assert!(toml::from_str::<CacheConfig>("mode = \"WB\"").is_err());
        assert!(toml::from_str::<CacheConfig>("mode = \"writeback\"").is_err());
        assert!(toml::from_str::<CacheConfig>("[alru]\nwakeup_s = 3").is_err());
    }

    #[test]
    fn out_of_range_parameters_name_their_key() {
        let mut config = CacheConfig::default();
        config.nhit.threshold = 1;
        let error = config.validate().unwrap_err();
        assert_eq!(error.key, "nhit.threshold");
        assert_eq!(
            error.to_string(),
            "cache.nhit.threshold: 1 is outside Open CAS's range 2..=1000"
        );
        let mut config = CacheConfig::default();
        config.alru.flush_max_buffers = 0;
        assert_eq!(config.validate().unwrap_err().key, "alru.flush_max_buffers");
        let mut config = CacheConfig::default();
        config.acp.wake_up_ms = 10_001;
        assert_eq!(config.validate().unwrap_err().key, "acp.wake_up_ms");
    }
}
