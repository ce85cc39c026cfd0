//! What a run measured: counts by outcome and latency percentiles, tallied per thread and
//! merged into one report.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::interval::{Board, IntervalReport, Series};

/// The longest latency the histogram tells apart; longer ones count as this long. Far beyond
/// the bounded drain at the end of a run.
const LATENCY_MAX_NS: u64 = 60_000_000_000;
/// Three significant digits: 0.1% resolution at every latency.
const LATENCY_DIGITS: u8 = 3;
const NS_PER_US: f64 = 1_000.0;

/// The result of a run. Counts cover the requests sent during the measured time; a request
/// counts once its reply has arrived.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Requests answered: `gets + sets + deletes`, failed ones included.
    pub ops: u64,
    /// `ops` over the measured time.
    pub ops_per_sec: f64,
    /// Gets answered: `get_hits + get_misses` and the gets that failed.
    pub gets: u64,
    /// Gets that returned one value of the length sets write.
    pub get_hits: u64,
    /// Gets that returned no value.
    pub get_misses: u64,
    /// Sets answered, failed ones included.
    pub sets: u64,
    /// Deletes answered, failed ones included.
    pub deletes: u64,
    /// With `--verify`: values read and found to be the version last written.
    pub verified: Option<u64>,
    /// Requests whose reply was not the one expected: a set not `STORED`, a get that returned
    /// an error line or a value of the wrong length.
    pub errors: u64,
    /// The first unexpected reply line, or a description of the first wrong value.
    pub first_error: Option<String>,
    /// Latency percentiles in microseconds: from handing the request to the socket to having
    /// parsed its whole reply. The median,
    pub latency_us_p50: f64,
    /// the 90th percentile,
    pub latency_us_p90: f64,
    /// the 99th,
    pub latency_us_p99: f64,
    /// the 99.9th,
    pub latency_us_p999: f64,
    /// and the longest.
    pub latency_us_max: f64,
    /// The measured time.
    pub duration_secs: f64,
    /// Open connections.
    pub connections: usize,
    /// Requests outstanding per connection.
    pub pipeline: usize,
    /// Each interval of the measured time, with `--interval`; the requests sent in it.
    pub series: Vec<IntervalReport>,
}

/// One thread's counts and latencies.
#[derive(Clone, Debug)]
pub(crate) struct Tally {
    pub(crate) gets: u64,
    pub(crate) get_hits: u64,
    pub(crate) get_misses: u64,
    pub(crate) sets: u64,
    pub(crate) deletes: u64,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
    latency_ns: Histogram<u64>,
    /// Each interval of the measured time, with `--interval`.
    series: Option<Series>,
}

impl Tally {
    /// Nothing counted yet; a series of `interval`s over a measured time of `duration` if given.
    pub(crate) fn new(interval: Option<Duration>, duration: Duration) -> Tally {
        Tally {
            gets: 0,
            get_hits: 0,
            get_misses: 0,
            sets: 0,
            deletes: 0,
            errors: 0,
            first_error: None,
            latency_ns: Histogram::new_with_bounds(1, LATENCY_MAX_NS, LATENCY_DIGITS)
                .expect("constant histogram bounds are valid"),
            series: interval.map(|interval| Series::new(interval, duration)),
        }
    }

    /// Counts one request, sent `sent_after` into the measured time, that took `latency`.
    pub(crate) fn record_latency(&mut self, sent_after: Duration, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.latency_ns.saturating_record(nanos);
        if let Some(series) = &mut self.series {
            series.record(sent_after, nanos);
        }
    }

    /// Counts an unexpected reply to a request sent `sent_after` into the measured time,
    /// keeping the first one's description.
    pub(crate) fn record_error(&mut self, sent_after: Duration, describe: impl FnOnce() -> String) {
        if let Some(series) = &mut self.series {
            series.record_error(sent_after);
        }
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(describe());
        }
    }

    /// Adds another thread's tally to this one; its first error counts only if this has none.
    pub(crate) fn merge(&mut self, other: Tally) {
        self.gets += other.gets;
        self.get_hits += other.get_hits;
        self.get_misses += other.get_misses;
        self.sets += other.sets;
        self.deletes += other.deletes;
        self.errors += other.errors;
        self.first_error = self.first_error.take().or(other.first_error);
        self.latency_ns
            .add(&other.latency_ns)
            .expect("histograms of the same bounds merge");
        if let (Some(mine), Some(theirs)) = (&mut self.series, &other.series) {
            mine.merge(theirs);
        }
    }

    /// Whether an interval of the series ended `after` into the measured time and is not yet
    /// handed to a board.
    pub(crate) fn closing_due(&self, after: Duration) -> bool {
        self.series
            .as_ref()
            .is_some_and(|series| series.closing_due(after))
    }

    /// Hands `board` the intervals of the series that ended by `answered_before` (see
    /// [`Series::close_until`]).
    pub(crate) fn close_until(&mut self, answered_before: Option<Duration>, board: &Board) {
        if let Some(series) = &mut self.series {
            series.close_until(answered_before, board);
        }
    }

    /// The report of a run that measured for `duration`.
    pub(crate) fn report(self, duration: Duration, connections: usize, pipeline: usize) -> Report {
        let ops = self.gets + self.sets + self.deletes;
        let seconds = duration.as_secs_f64();
        let quantile_us = |quantile| self.latency_ns.value_at_quantile(quantile) as f64 / NS_PER_US;
        let series = self.series.as_ref().map_or_else(Vec::new, Series::report);
        Report {
            ops,
            ops_per_sec: ops as f64 / seconds,
            gets: self.gets,
            get_hits: self.get_hits,
            get_misses: self.get_misses,
            sets: self.sets,
            deletes: self.deletes,
            verified: None,
            errors: self.errors,
            latency_us_p50: quantile_us(0.5),
            latency_us_p90: quantile_us(0.9),
            latency_us_p99: quantile_us(0.99),
            latency_us_p999: quantile_us(0.999),
            latency_us_max: self.latency_ns.max() as f64 / NS_PER_US,
            first_error: self.first_error,
            duration_secs: seconds,
            connections,
            pipeline,
            series,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_tallies_add_counts_and_keep_the_first_error() {
        let mut first = Tally::new(None, Duration::from_secs(2));
        first.gets = 9;
        first.get_hits = 9;
        first.sets = 1;
        for micros in 1..=100 {
            first.record_latency(Duration::ZERO, Duration::from_micros(micros));
        }
        let mut second = Tally::new(None, Duration::from_secs(2));
        second.sets = 10;
        second.record_error(Duration::ZERO, || "SERVER_ERROR out of memory".into());
        second.record_error(Duration::ZERO, || "ERROR".into());
        second.record_latency(Duration::ZERO, Duration::from_millis(5));
        first.merge(second);
        let report = first.report(Duration::from_secs(2), 4, 1);
        assert_eq!((report.ops, report.errors), (20, 2));
        assert_eq!(report.ops_per_sec, 10.0);
        assert_eq!(
            report.first_error.as_deref(),
            Some("SERVER_ERROR out of memory")
        );
        // 101 samples: the 51st is the median.
        assert!((51.0..=51.1).contains(&report.latency_us_p50), "{report:?}");
        assert!(
            (5000.0..=5005.0).contains(&report.latency_us_max),
            "{report:?}"
        );
        assert!(report.latency_us_p99 <= report.latency_us_p999);
        assert!(report.series.is_empty());
    }
}
