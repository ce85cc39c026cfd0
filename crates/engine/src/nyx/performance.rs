//! What a tenant gets from the shared device, as the sharing policies read it (seed 000
//! §5.2.3–5.2.4): requests completed and their latencies, counted as they complete by whichever
//! executor serves the tenant, and read back over windows — throughput for slowdown (M4), tail
//! latency over 500 ms for QoS and interference analysis (M3).
//!
//! Latencies go to a log-linear histogram of atomic counters (16 buckets per power of two, so a
//! quantile is within 1/16 of the truth), which the serving threads fill without a lock.

use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets per power of two, as a shift.
const SUB_BITS: u32 = 4;
const SUB_BUCKETS: u64 = 1 << SUB_BITS;
/// Buckets for every `u64` latency in ns.
const BUCKETS: usize = ((64 - SUB_BITS + 1) as usize) * SUB_BUCKETS as usize;

/// The bucket of `value_ns`: exact below 16 ns, then 16 per power of two.
fn bucket(value_ns: u64) -> usize {
    if value_ns < SUB_BUCKETS {
        return value_ns as usize;
    }
    let exponent = 63 - value_ns.leading_zeros();
    let mantissa = (value_ns >> (exponent - SUB_BITS)) & (SUB_BUCKETS - 1);
    ((exponent - SUB_BITS + 1) as u64 * SUB_BUCKETS + mantissa) as usize
}

/// The middle of `bucket`'s range, ns.
fn bucket_middle_ns(bucket: usize) -> f64 {
    let bucket = bucket as u64;
    if bucket < SUB_BUCKETS {
        return bucket as f64;
    }
    let exponent = bucket / SUB_BUCKETS + u64::from(SUB_BITS) - 1;
    let mantissa = bucket % SUB_BUCKETS;
    let width = 1u64 << (exponent - u64::from(SUB_BITS));
    ((SUB_BUCKETS + mantissa) * width) as f64 + width as f64 / 2.0
}

/// A tenant's completed requests so far.
#[derive(Debug)]
pub struct Performance {
    requests: AtomicU64,
    latency_counts: Box<[AtomicU64]>,
}

impl Default for Performance {
    fn default() -> Performance {
        Performance {
            requests: AtomicU64::new(0),
            latency_counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl Performance {
    /// Notes a request completed after `latency_ns`.
    pub fn record(&self, latency_ns: u64) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.latency_counts[bucket(latency_ns)].fetch_add(1, Ordering::Relaxed);
    }

    /// Requests completed so far (cheap: no histogram copied).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Everything so far; subtract an earlier snapshot to get a window's.
    pub fn snapshot(&self) -> PerformanceSnapshot {
        PerformanceSnapshot {
            requests: self.requests(),
            latency_counts: self
                .latency_counts
                .iter()
                .map(|count| count.load(Ordering::Relaxed))
                .collect(),
        }
    }
}

/// Requests and their latencies up to a moment, or over a window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerformanceSnapshot {
    pub requests: u64,
    latency_counts: Vec<u64>,
}

impl Default for PerformanceSnapshot {
    fn default() -> PerformanceSnapshot {
        PerformanceSnapshot {
            requests: 0,
            latency_counts: vec![0; BUCKETS],
        }
    }
}

impl PerformanceSnapshot {
    /// A count of requests without their latencies.
    pub fn requests_only(requests: u64) -> PerformanceSnapshot {
        PerformanceSnapshot {
            requests,
            latency_counts: vec![0; BUCKETS],
        }
    }

    /// What completed after `earlier`.
    pub fn since(&self, earlier: &PerformanceSnapshot) -> PerformanceSnapshot {
        PerformanceSnapshot {
            requests: self.requests.saturating_sub(earlier.requests),
            latency_counts: self
                .latency_counts
                .iter()
                .zip(&earlier.latency_counts)
                .map(|(now, then)| now.saturating_sub(*then))
                .collect(),
        }
    }

    /// The latency `quantile` (0.99: p99) of the requests counted, ns; none without requests.
    pub fn quantile_ns(&self, quantile: f64) -> Option<f64> {
        let total: u64 = self.latency_counts.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((quantile.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bucket, count) in self.latency_counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(bucket_middle_ns(bucket));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_keep_a_sixteenth_of_the_value_and_cover_every_u64() {
        for value in [0, 1, 15, 16, 17, 100, 1500, 3000, 1 << 40, u64::MAX] {
            let middle = bucket_middle_ns(bucket(value));
            let error = (middle - value as f64).abs() / (value as f64).max(1.0);
            assert!(error <= 1.0 / 16.0, "{value}: {middle}");
        }
        assert!(bucket(u64::MAX) < BUCKETS);
        // Buckets rise with the value.
        let mut last = 0;
        for value in (0..100_000).step_by(7) {
            assert!(bucket(value) >= last);
            last = bucket(value);
        }
    }

    #[test]
    fn a_window_quantile_counts_only_the_window() {
        let performance = Performance::default();
        for _ in 0..1000 {
            performance.record(100_000);
        }
        let before = performance.snapshot();
        for latency in 1..=1000 {
            performance.record(latency * 10);
        }
        let window = performance.snapshot().since(&before);
        assert_eq!(window.requests, 1000);
        let p99 = window.quantile_ns(0.99).unwrap();
        assert!((p99 - 9900.0).abs() <= 9900.0 / 16.0, "{p99}");
        let p50 = window.quantile_ns(0.5).unwrap();
        assert!((p50 - 5000.0).abs() <= 5000.0 / 16.0, "{p50}");
        assert_eq!(PerformanceSnapshot::default().quantile_ns(0.99), None);
    }
}
