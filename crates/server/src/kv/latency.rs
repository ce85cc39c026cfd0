//! A tenant's request latency over windows (seed 000 §5.3.3: "As in Parties, Nyx measures tail
//! latency for 500ms"): what its requests took, from their bytes arriving to their answers
//! being due (time behind a held answer included), in the window now filling and the last one
//! completed, whose percentiles and throughput the JSON stats show (the dashboard charts p50,
//! p99 and p99.9) and whose p99 the metrics endpoint exports.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

/// Seed 000 §5.3.3's tail-latency window.
pub const WINDOW: Duration = Duration::from_millis(500);

/// The last completed window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencyWindow {
    #[serde(rename = "window_requests")]
    pub requests: u64,
    #[serde(rename = "window_requests_per_second")]
    pub requests_per_second: f64,
    pub p50_latency_us: f64,
    pub p99_latency_us: f64,
    pub p999_latency_us: f64,
}

/// Latency windows of one tenant, shared by the workers serving it.
pub struct Latencies {
    state: Mutex<State>,
}

struct State {
    started: Instant,
    filling: Histogram<u64>,
    last: LatencyWindow,
}

impl Default for Latencies {
    fn default() -> Latencies {
        Latencies {
            state: Mutex::new(State {
                started: Instant::now(),
                filling: new_histogram(),
                last: LatencyWindow::default(),
            }),
        }
    }
}

fn new_histogram() -> Histogram<u64> {
    // 1 ns to an hour, three significant digits.
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds")
}

impl Latencies {
    /// Notes a request that took `latency`, answered at `now`.
    pub fn record(&self, now: Instant, latency: Duration) {
        let mut state = self.lock();
        state.roll(now);
        state
            .filling
            .saturating_record((latency.as_nanos() as u64).max(1));
    }

    /// The last completed window as of `now`.
    pub fn last(&self, now: Instant) -> LatencyWindow {
        let mut state = self.lock();
        state.roll(now);
        state.last
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl State {
    /// Closes the filling window once it is [`WINDOW`] old (an idle stretch closes as empty).
    fn roll(&mut self, now: Instant) {
        let age = now.saturating_duration_since(self.started);
        if age < WINDOW {
            return;
        }
        let requests = self.filling.len();
        let us = |quantile| self.filling.value_at_quantile(quantile) as f64 / 1000.0;
        self.last = LatencyWindow {
            requests,
            requests_per_second: requests as f64 / age.as_secs_f64(),
            p50_latency_us: us(0.5),
            p99_latency_us: us(0.99),
            p999_latency_us: us(0.999),
        };
        self.filling.reset();
        self.started = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_closes_after_500_ms_with_its_p99_and_rate() {
        let latencies = Latencies::default();
        let start = Instant::now();
        for i in 0..1000u64 {
            // 1% take 1 ms, the rest 10 us.
            let took = if i % 100 == 0 { 1_000 } else { 10 };
            latencies.record(start, Duration::from_micros(took));
        }
        assert_eq!(latencies.last(start).requests, 0, "still filling");
        let window = latencies.last(start + WINDOW);
        assert_eq!(window.requests, 1000);
        assert!((window.p50_latency_us - 10.0).abs() < 0.1, "{window:?}");
        assert!((window.p99_latency_us - 10.0).abs() < 0.1, "{window:?}");
        assert!((window.p999_latency_us - 1000.0).abs() < 1.0, "{window:?}");
        assert!(
            (window.requests_per_second - 2000.0).abs() < 50.0,
            "{window:?}"
        );
        latencies.record(start + WINDOW * 2, Duration::from_millis(2));
        let next = latencies.last(start + WINDOW * 3);
        assert_eq!(next.requests, 1);
        assert!((next.p99_latency_us - 2000.0).abs() < 5.0, "{next:?}");
    }
}
