//! Admission tuning: the decision points of non-hierarchical caching (seed 000 §4.3.2) and the
//! tuners that set them — NHC's scheduler (Algorithm 1) and the prior approaches the thesis
//! compares it with (§4.5.4: SIB+, SIB++, LBICA).
//!
//! The cache controller consults one [`AdmitSettings`] per pair of neighbouring levels (cache
//! tier i over the level below it) on every read: `load_admit` is the chance that a clean read
//! hit in tier i is served there rather than from the next level holding the line, and
//! `data_admit` whether a read miss may be installed in tier i. Writes never consult them. A
//! [`Tuner`] measures the controller's behaviour over fixed intervals of time ([`Interval`])
//! and moves the settings; classic caching has no tuner and keeps them at (true, 1.0).
//!
//! Tuners keep time only through the timestamps the controller passes on, so the timed
//! simulator (virtual clock) and a live server (real clock) run the same code.

pub mod config;
mod fixed;
mod history;
mod lbica;
mod nhc;
mod sib;
mod tuning;
mod window;

pub use config::{
    AdmissionConfig, AdmissionScheme, FixedConfig, LbicaConfig, NhcConfig, SibConfig, TargetMetric,
};
pub use history::{TuningHistory, TuningPoint};
pub use tuning::Tuning;

/// Most pairs of levels a hierarchy has: one per cache tier, over the level below it.
pub const MAX_PAIRS: usize = crate::cache::line::MAX_CACHE_TIERS;
/// Most devices a hierarchy has.
pub const MAX_DEVICES: usize = MAX_PAIRS + 1;

/// The knobs at one pair's decision points (seed 000 §4.3.2).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdmitSettings {
    /// Read misses are installed in the upper level (`da`).
    pub data_admit: bool,
    /// Fraction of clean read hits the upper level serves; the rest go to the next level that
    /// holds the line (`la`, in [0, 1]).
    pub load_admit: f64,
}

impl AdmitSettings {
    /// Classic caching: every miss installed, every hit served by the cache.
    pub const CLASSIC: AdmitSettings = AdmitSettings {
        data_admit: true,
        load_admit: 1.0,
    };
}

impl Default for AdmitSettings {
    fn default() -> Self {
        AdmitSettings::CLASSIC
    }
}

/// What the controller saw during one measurement interval: requests as they were planned,
/// and replies and device operations as the executor reported them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Interval {
    pub start_ns: u64,
    pub end_ns: u64,
    pub requests: u64,
    pub writes: u64,
    /// `hits[i]`: requests whose line was in some cache tier 0..=i on arrival (so the hit rate
    /// of pair i counts every copy at or above its upper level).
    pub hits: [u64; MAX_PAIRS],
    pub replies: u64,
    pub reply_bytes: u64,
    pub latency_sum_ns: u64,
    /// Every reply's latency, when the tuner asked for them ([`Tuner::wants_latencies`]).
    pub latencies_ns: Vec<u64>,
    /// Operations of each device, their bytes (reads and writes together) and the sum of
    /// their latencies from submission, queueing included — the block layer's view — when
    /// the tuner asked for them ([`Tuner::wants_device_ops`]).
    pub device_ops: [u64; MAX_DEVICES],
    pub device_bytes: [u64; MAX_DEVICES],
    pub device_latency_sum_ns: [u64; MAX_DEVICES],
}

impl Interval {
    /// Seconds covered (at least a nanosecond).
    pub fn seconds(&self) -> f64 {
        self.end_ns.saturating_sub(self.start_ns).max(1) as f64 / 1e9
    }

    /// Fraction of requests whose line was in tiers 0..=`pair`; `None` without requests.
    pub fn hit_ratio(&self, pair: usize) -> Option<f64> {
        (self.requests > 0).then(|| self.hits[pair] as f64 / self.requests as f64)
    }

    /// Bytes answered to clients per second.
    pub fn throughput_bytes_per_s(&self) -> f64 {
        self.reply_bytes as f64 / self.seconds()
    }

    /// Mean latency of the replies, ns; `None` without replies.
    pub fn mean_latency_ns(&self) -> Option<f64> {
        (self.replies > 0).then(|| self.latency_sum_ns as f64 / self.replies as f64)
    }

    /// Mean latency of the operations of `devices`, ns; `None` if they completed none.
    pub fn device_latency_ns(&self, devices: std::ops::Range<usize>) -> Option<f64> {
        let ops: u64 = self.device_ops[devices.clone()].iter().sum();
        let sum: u64 = self.device_latency_sum_ns[devices].iter().sum();
        (ops > 0).then(|| sum as f64 / ops as f64)
    }

    /// Starts over at `start_ns`, keeping the latency buffer's memory.
    fn reset(&mut self, start_ns: u64) {
        let mut latencies = std::mem::take(&mut self.latencies_ns);
        latencies.clear();
        *self = Interval {
            start_ns,
            end_ns: start_ns,
            latencies_ns: latencies,
            ..Interval::default()
        };
    }
}

/// Sets a controller's [`AdmitSettings`] from what it measures, one interval at a time.
pub trait Tuner: Send {
    /// Length of a measurement interval, ns.
    fn interval_ns(&self) -> u64;

    /// The settings before the first interval ends.
    fn initial_settings(&self) -> AdmitSettings {
        AdmitSettings::CLASSIC
    }

    /// True when [`Interval::latencies_ns`] must be filled (a tail-latency target).
    fn wants_latencies(&self) -> bool {
        false
    }

    /// True when [`Interval::device_ops`] must be filled.
    fn wants_device_ops(&self) -> bool {
        false
    }

    /// The interval that just ended; `settings` (one per pair) are applied from now on.
    fn end_interval(&mut self, interval: &Interval, settings: &mut [AdmitSettings]);

    /// The tuner's state for reports, e.g. `state 1` or `training`.
    fn state(&self) -> &'static str;
}
