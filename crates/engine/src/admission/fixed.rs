//! Decision points pinned at given values, after classic caching until a given time (the cache
//! fills first): no tuning at all. Sweeping `load_admit` over a grid finds the best fixed
//! setting of a steady workload, the oracle for NHC's feedback tuning.

use super::config::{scaled_ns, AdmissionConfig};
use super::{AdmitSettings, Interval, Tuner};

/// Keeps every pair at the configured settings.
pub struct Fixed {
    settings: AdmitSettings,
    from_ns: u64,
    interval_ns: u64,
}

impl Fixed {
    /// The settings of `config.fixed`, recorded at NHC's interval.
    pub fn new(config: &AdmissionConfig) -> Fixed {
        Fixed {
            settings: AdmitSettings {
                data_admit: config.fixed.data_admit,
                load_admit: config.fixed.load_admit,
            },
            from_ns: (config.fixed.from_ms * 1e6) as u64,
            interval_ns: scaled_ns(config.nhc.interval_ms, config.time_scale),
        }
    }
}

impl Tuner for Fixed {
    fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    fn initial_settings(&self) -> AdmitSettings {
        if self.from_ns == 0 {
            self.settings
        } else {
            AdmitSettings::CLASSIC
        }
    }

    fn end_interval(&mut self, interval: &Interval, settings: &mut [AdmitSettings]) {
        if interval.end_ns >= self.from_ns {
            settings.fill(self.settings);
        }
    }

    fn state(&self) -> &'static str {
        "fixed"
    }
}
