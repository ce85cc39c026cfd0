//! SIB, selective I/O bypass (Kim, Roh and Park, "Selective I/O bypass and load balancing method
//! for write-through SSD caching in big data analytics", IEEE TC 67(4), 2018), as seed 000
//! §4.5.4 re-implemented it for comparison: bypass per request (SIB+), and optionally install
//! read misses (SIB++).
//!
//! SIB has two phases. Training caches classically and learns the throughput the cache device
//! reaches for the current workload (its mean over the training phase: the workload's load
//! saturates it, and a mean is not fooled by one lucky interval). Inference judges each
//! interval whether the cache device is saturated — at `saturation` of the learned maximum or
//! more — and if so bypasses more read hits to the capacity device (a further `step` of them),
//! else fewer. The thesis
//! observes that "if the workload changes in any way, SIB must either relearn the target
//! maximum performance or use an inaccurate target"; ours relearns when the write ratio moves
//! by more than `retrain_write_change` from the one it trained on.
//!
//! SIB is defined for a cache over a capacity device: it tunes the top pair and leaves any
//! other classic.

use super::config::{scaled_ns, AdmissionConfig};
use super::window::RatioWindow;
use super::{AdmitSettings, Interval, Tuner};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Training {
        started_ns: u64,
        cache_bytes: u64,
        writes: u64,
        requests: u64,
    },
    Inference {
        max_bytes_per_s: f64,
        write_ratio: f64,
        bypass: f64,
    },
}

/// SIB+ or SIB++; see the module docs.
pub struct Sib {
    admit_misses: bool,
    interval_ns: u64,
    training_ns: u64,
    saturation: f64,
    step: f64,
    retrain_write_change: f64,
    writes: RatioWindow,
    /// `None` until the first interval, whose start begins training.
    phase: Option<Phase>,
}

impl Sib {
    /// SIB++ when `admit_misses`, else SIB+.
    pub fn new(config: &AdmissionConfig, admit_misses: bool) -> Sib {
        let sib = &config.sib;
        Sib {
            admit_misses,
            interval_ns: scaled_ns(sib.interval_ms, config.time_scale),
            training_ns: scaled_ns(sib.training_ms, config.time_scale),
            saturation: sib.saturation,
            step: sib.step,
            retrain_write_change: sib.retrain_write_change,
            writes: RatioWindow::new(scaled_ns(sib.workload_window_ms, config.time_scale)),
            phase: None,
        }
    }

    fn train(from_ns: u64) -> Phase {
        Phase::Training {
            started_ns: from_ns,
            cache_bytes: 0,
            writes: 0,
            requests: 0,
        }
    }
}

impl Tuner for Sib {
    fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    fn wants_device_ops(&self) -> bool {
        true
    }

    fn end_interval(&mut self, interval: &Interval, settings: &mut [AdmitSettings]) {
        let now = interval.end_ns;
        self.writes
            .push(interval.start_ns, now, interval.writes, interval.requests);
        let cache_bytes_per_s = interval.device_bytes[0] as f64 / interval.seconds();
        let phase = match self.phase {
            None => Sib::train(interval.start_ns),
            Some(phase) => phase,
        };
        let next = match phase {
            Phase::Training {
                started_ns,
                cache_bytes,
                writes,
                requests,
            } => {
                let cache_bytes = cache_bytes + interval.device_bytes[0];
                let (writes, requests) = (writes + interval.writes, requests + interval.requests);
                if now >= started_ns + self.training_ns {
                    let seconds = now.saturating_sub(started_ns).max(1) as f64 / 1e9;
                    Phase::Inference {
                        max_bytes_per_s: cache_bytes as f64 / seconds,
                        write_ratio: writes as f64 / requests.max(1) as f64,
                        bypass: 0.0,
                    }
                } else {
                    Phase::Training {
                        started_ns,
                        cache_bytes,
                        writes,
                        requests,
                    }
                }
            }
            Phase::Inference {
                max_bytes_per_s,
                write_ratio,
                bypass,
            } => {
                let changed = self
                    .writes
                    .recent()
                    .is_some_and(|recent| (recent - write_ratio).abs() > self.retrain_write_change);
                if changed {
                    self.writes.clear();
                    Sib::train(now)
                } else {
                    let saturated = cache_bytes_per_s >= self.saturation * max_bytes_per_s;
                    let bypass = if saturated {
                        (bypass + self.step).min(1.0)
                    } else {
                        (bypass - self.step).max(0.0)
                    };
                    Phase::Inference {
                        max_bytes_per_s,
                        write_ratio,
                        bypass,
                    }
                }
            }
        };
        self.phase = Some(next);
        settings[0] = AdmitSettings {
            data_admit: self.admit_misses,
            load_admit: match next {
                Phase::Training { .. } => 1.0,
                Phase::Inference { bypass, .. } => 1.0 - bypass,
            },
        };
    }

    fn state(&self) -> &'static str {
        match self.phase {
            None | Some(Phase::Training { .. }) => "training",
            Some(Phase::Inference { .. }) => "inference",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A 5 ms interval ending at `end_ms` in which the cache device moved `cache_mb` MB and
    /// `writes` of 100 requests wrote.
    fn interval(end_ms: u64, cache_mb: u64, writes: u64) -> Interval {
        let mut interval = Interval {
            start_ns: (end_ms - 5) * MS,
            end_ns: end_ms * MS,
            requests: 100,
            writes,
            ..Interval::default()
        };
        interval.device_bytes[0] = cache_mb * 1_000_000;
        interval
    }

    #[test]
    fn trains_then_bypasses_while_the_cache_device_is_saturated() {
        let mut sib = Sib::new(&AdmissionConfig::default(), true);
        let mut settings = [AdmitSettings::CLASSIC];
        // One second of training at 10 MB per 5 ms (2 GB/s).
        for k in 1..=200 {
            sib.end_interval(&interval(5 * k, 10, 0), &mut settings);
        }
        assert_eq!(sib.state(), "inference");
        assert_eq!(settings[0], AdmitSettings::CLASSIC);
        // Still saturated: 2% more bypassed per interval.
        for k in 201..=205 {
            sib.end_interval(&interval(5 * k, 10, 0), &mut settings);
        }
        assert!((settings[0].load_admit - 0.9).abs() < 1e-9);
        // Below 95% of the maximum: bypass less.
        sib.end_interval(&interval(5 * 206, 9, 0), &mut settings);
        assert!((settings[0].load_admit - 0.92).abs() < 1e-9);
        assert!(settings[0].data_admit);
    }

    #[test]
    fn sib_plus_never_admits_and_a_new_write_ratio_retrains() {
        let mut sib = Sib::new(&AdmissionConfig::default(), false);
        let mut settings = [AdmitSettings::CLASSIC];
        for k in 1..=210 {
            sib.end_interval(&interval(5 * k, 10, 0), &mut settings);
            assert!(!settings[0].data_admit);
        }
        assert!(settings[0].load_admit < 1.0);
        let mut k = 211;
        while sib.state() == "inference" {
            sib.end_interval(&interval(5 * k, 10, 30), &mut settings);
            k += 1;
        }
        // A 30% write ratio shows within a few intervals of the 100 ms window.
        assert!(k < 211 + 5, "{k}");
        assert_eq!(settings[0].load_admit, 1.0);
    }
}
