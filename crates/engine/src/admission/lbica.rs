//! LBICA, a load balancer for I/O cache architectures (Ahmadian, Salkhordeh and Asadi, DATE
//! 2019), as seed 000 §4.5.4 describes it: it "determines when a performance layer is under
//! 'burst load' at which point it will not allocate new data to the performance layer; unlike
//! NHC, LBICA does not redirect any read hits".
//!
//! LBICA judges burst load by the cache's queue: it is the bottleneck when its accesses wait
//! longer than the disk's. Ours compares, each interval, the mean latency of the cache
//! device's operations, queueing included, with that of the devices below (the last one
//! measured, when they completed none in the interval): burst while the cache's is longer.
//! Burst turns off read-miss installs of the top pair; hits always stay on the cache.

use super::config::{scaled_ns, AdmissionConfig};
use super::{AdmitSettings, Interval, Tuner, MAX_DEVICES};

/// LBICA; see the module docs.
pub struct Lbica {
    interval_ns: u64,
    burst: bool,
    /// Mean latency of reads served below the top tier, last measured, ns.
    lower_latency_ns: Option<f64>,
}

impl Lbica {
    /// LBICA with `config`'s interval.
    pub fn new(config: &AdmissionConfig) -> Lbica {
        Lbica {
            interval_ns: scaled_ns(config.lbica.interval_ms, config.time_scale),
            burst: false,
            lower_latency_ns: None,
        }
    }
}

impl Tuner for Lbica {
    fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    fn wants_device_ops(&self) -> bool {
        true
    }

    fn end_interval(&mut self, interval: &Interval, settings: &mut [AdmitSettings]) {
        if let Some(lower) = interval.device_latency_ns(1..MAX_DEVICES) {
            self.lower_latency_ns = Some(lower);
        }
        if let (Some(cache), Some(lower)) =
            (interval.device_latency_ns(0..1), self.lower_latency_ns)
        {
            self.burst = cache > lower;
        }
        settings[0] = AdmitSettings {
            data_admit: !self.burst,
            load_admit: 1.0,
        };
    }

    fn state(&self) -> &'static str {
        if self.burst {
            "burst"
        } else {
            "normal"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(cache_latency_us: Option<u64>, lower_latency_us: Option<u64>) -> Interval {
        let mut interval = Interval {
            start_ns: 0,
            end_ns: 5_000_000,
            ..Interval::default()
        };
        if let Some(latency) = cache_latency_us {
            interval.device_ops[0] = 10;
            interval.device_latency_sum_ns[0] = 10 * latency * 1000;
        }
        if let Some(latency) = lower_latency_us {
            interval.device_ops[1] = 2;
            interval.device_latency_sum_ns[1] = 2 * latency * 1000;
        }
        interval
    }

    #[test]
    fn installs_stop_while_the_cache_is_slower_than_the_disk() {
        let mut lbica = Lbica::new(&AdmissionConfig::default());
        let mut settings = [AdmitSettings::CLASSIC];
        lbica.end_interval(&interval(Some(30), Some(100)), &mut settings);
        assert_eq!(
            (settings[0], lbica.state()),
            (AdmitSettings::CLASSIC, "normal")
        );
        lbica.end_interval(&interval(Some(300), Some(100)), &mut settings);
        assert_eq!(lbica.state(), "burst");
        assert_eq!(
            settings[0],
            AdmitSettings {
                data_admit: false,
                load_admit: 1.0
            }
        );
        // Nothing completed below in this interval: the last measured latency stands.
        lbica.end_interval(&interval(Some(200), None), &mut settings);
        assert_eq!(lbica.state(), "burst");
        lbica.end_interval(&interval(Some(50), None), &mut settings);
        assert_eq!(lbica.state(), "normal");
        // Nothing served by the cache: no judgement, no change.
        lbica.end_interval(&interval(None, Some(10)), &mut settings);
        assert_eq!(lbica.state(), "normal");
    }
}
