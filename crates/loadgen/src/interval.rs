//! A run's series: requests, p99 latency and errors for each interval of the measured time,
//! counted by when each request was sent. Each thread keeps its own [`Series`]; merged at the
//! end they give the report's series, and with a [`Board`] each interval is also handed out as
//! soon as every thread has closed it (a soak prints one line a minute while it runs).
//!
//! A thread closes an interval once no request it sent in it is still unanswered, so a closed
//! interval's figures are final.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// The longest latency a series tells apart; longer ones count as this long.
const LATENCY_MAX_NS: u64 = 60_000_000_000;
const NS_PER_US: f64 = 1_000.0;

/// One interval of a run's series.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct IntervalReport {
    /// Its number, from 0.
    pub index: usize,
    /// Seconds into the measured time where it starts.
    pub start_secs: f64,
    /// Requests sent in it and answered.
    pub ops: u64,
    pub ops_per_sec: f64,
    pub latency_us_p99: f64,
    /// Requests sent in it whose answer was wrong or an error.
    pub errors: u64,
}

/// Requests, latencies and errors of one interval.
#[derive(Clone, Debug)]
pub(crate) struct IntervalTally {
    ops: u64,
    errors: u64,
    latency_ns: Histogram<u64>,
}

impl IntervalTally {
    fn new() -> IntervalTally {
        IntervalTally {
            ops: 0,
            errors: 0,
            // Two digits (1%) are enough for a series, and keep each interval small.
            latency_ns: Histogram::new_with_bounds(1, LATENCY_MAX_NS, 2)
                .expect("constant histogram bounds are valid"),
        }
    }

    fn add(&mut self, other: &IntervalTally) {
        self.ops += other.ops;
        self.errors += other.errors;
        self.latency_ns
            .add(&other.latency_ns)
            .expect("histograms of the same bounds merge");
    }

    /// Its report, as interval `index` of `interval`s in a measured time of `duration`.
    fn report(&self, index: usize, interval: Duration, duration: Duration) -> IntervalReport {
        let start = interval.as_secs_f64() * index as f64;
        // The last interval may be cut short by the end of the measured time.
        let length = (duration.as_secs_f64() - start)
            .min(interval.as_secs_f64())
            .max(f64::MIN_POSITIVE);
        IntervalReport {
            index,
            start_secs: start,
            ops: self.ops,
            ops_per_sec: self.ops as f64 / length,
            latency_us_p99: self.latency_ns.value_at_quantile(0.99) as f64 / NS_PER_US,
            errors: self.errors,
        }
    }
}

/// One thread's series over a measured time of `duration` cut into `interval`s.
#[derive(Clone, Debug)]
pub(crate) struct Series {
    interval: Duration,
    duration: Duration,
    buckets: Vec<IntervalTally>,
    /// Intervals already handed to the board.
    closed: usize,
}

impl Series {
    /// An empty series.
    pub(crate) fn new(interval: Duration, duration: Duration) -> Series {
        Series {
            interval,
            duration,
            buckets: Vec::new(),
            closed: 0,
        }
    }

    /// How many intervals the measured time holds, the last maybe cut short.
    fn intervals(&self) -> usize {
        self.duration
            .as_nanos()
            .div_ceil(self.interval.as_nanos().max(1)) as usize
    }

    fn bucket(&mut self, sent_after: Duration) -> &mut IntervalTally {
        let index = (sent_after.as_nanos() / self.interval.as_nanos().max(1)) as usize;
        if self.buckets.len() <= index {
            self.buckets.resize_with(index + 1, IntervalTally::new);
        }
        &mut self.buckets[index]
    }

    /// Counts a request sent `sent_after` into the measured time that took `latency_ns`.
    pub(crate) fn record(&mut self, sent_after: Duration, latency_ns: u64) {
        let bucket = self.bucket(sent_after);
        bucket.ops += 1;
        bucket.latency_ns.saturating_record(latency_ns);
    }

    /// Counts a wrong answer to a request sent `sent_after` into the measured time.
    pub(crate) fn record_error(&mut self, sent_after: Duration) {
        self.bucket(sent_after).errors += 1;
    }

    /// Whether an interval not yet closed ended `after` into the measured time.
    pub(crate) fn closing_due(&self, after: Duration) -> bool {
        self.closed < self.intervals() && self.interval * (self.closed as u32 + 1) <= after
    }

    /// Hands `board` every interval that ended by `answered_before` into the measured time:
    /// the thread has no request sent before then still unanswered. `None`: the thread is done,
    /// every interval is closed.
    pub(crate) fn close_until(&mut self, answered_before: Option<Duration>, board: &Board) {
        let intervals = self.intervals();
        let empty = IntervalTally::new();
        while self.closed < intervals {
            if let Some(before) = answered_before {
                if self.interval * (self.closed as u32 + 1) > before {
                    return;
                }
            }
            board.contribute(self.closed, self.buckets.get(self.closed).unwrap_or(&empty));
            self.closed += 1;
        }
    }

    /// Adds another thread's series to this one.
    pub(crate) fn merge(&mut self, other: &Series) {
        if self.buckets.len() < other.buckets.len() {
            self.buckets
                .resize_with(other.buckets.len(), IntervalTally::new);
        }
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            mine.add(theirs);
        }
    }

    /// Every interval of the measured time, empty ones too.
    pub(crate) fn report(&self) -> Vec<IntervalReport> {
        let empty = IntervalTally::new();
        (0..self.intervals())
            .map(|index| {
                self.buckets.get(index).unwrap_or(&empty).report(
                    index,
                    self.interval,
                    self.duration,
                )
            })
            .collect()
    }
}

/// Where the threads of a run hand their closed intervals: once all of them have closed an
/// interval, and every earlier one has gone out, it goes to `emit`.
pub struct Board<'a> {
    interval: Duration,
    duration: Duration,
    participants: usize,
    state: Mutex<BoardState>,
    emit: &'a (dyn Fn(IntervalReport) + Sync),
}

#[derive(Default)]
struct BoardState {
    /// Interval -> threads that closed it, and their sum.
    open: BTreeMap<usize, (usize, Option<IntervalTally>)>,
    next: usize,
}

impl<'a> Board<'a> {
    /// A board for `participants` threads' series of `interval`s over `duration`.
    pub fn new(
        interval: Duration,
        duration: Duration,
        participants: usize,
        emit: &'a (dyn Fn(IntervalReport) + Sync),
    ) -> Board<'a> {
        Board {
            interval,
            duration,
            participants,
            state: Mutex::new(BoardState::default()),
            emit,
        }
    }

    /// One thread's closed interval `index`.
    fn contribute(&self, index: usize, tally: &IntervalTally) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let entry = state.open.entry(index).or_insert((0, None));
        entry.0 += 1;
        match &mut entry.1 {
            Some(sum) => sum.add(tally),
            none => *none = Some(tally.clone()),
        }
        loop {
            let next = state.next;
            match state.open.get(&next) {
                Some((closed, _)) if *closed >= self.participants => {}
                _ => return,
            }
            let (_, sum) = state.open.remove(&next).expect("present");
            let sum = sum.expect("contributed");
            (self.emit)(sum.report(next, self.interval, self.duration));
            state.next += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_counts_each_interval_by_when_its_requests_were_sent() {
        let second = Duration::from_secs(1);
        let duration = Duration::from_millis(3500);
        let mut first = Series::new(second, duration);
        let mut other = Series::new(second, duration);
        for _ in 0..10 {
            first.record(Duration::from_millis(500), 10_000);
        }
        for _ in 0..30 {
            other.record(Duration::from_millis(2500), 200_000);
        }
        other.record_error(Duration::from_millis(2999));
        first.merge(&other);
        // 3.5 s measured: four intervals, the second empty, the last half long.
        let report = first.report();
        let ops: Vec<f64> = report.iter().map(|i| i.ops_per_sec).collect();
        assert_eq!(ops, vec![10.0, 0.0, 30.0, 0.0]);
        assert_eq!(report[2].start_secs, 2.0);
        assert_eq!(
            report.iter().map(|i| i.errors).collect::<Vec<_>>(),
            [0, 0, 1, 0]
        );
        assert!((199.0..=201.0).contains(&report[2].latency_us_p99));
        assert!((9.9..=10.1).contains(&report[0].latency_us_p99));
    }

    #[test]
    fn the_board_hands_out_an_interval_once_every_thread_closed_it_and_in_order() {
        let emitted = Mutex::new(Vec::new());
        let emit =
            |report: IntervalReport| emitted.lock().unwrap().push((report.index, report.ops));
        let second = Duration::from_secs(1);
        let board = Board::new(second, Duration::from_secs(3), 2, &emit);
        let mut a = Series::new(second, Duration::from_secs(3));
        let mut b = Series::new(second, Duration::from_secs(3));
        for at in [100, 1100, 1200, 2100] {
            a.record(Duration::from_millis(at), 1_000);
            b.record(Duration::from_millis(at), 1_000);
        }
        assert!(!a.closing_due(Duration::from_millis(999)));
        assert!(a.closing_due(Duration::from_millis(1000)));
        // Thread a has answered everything sent before 2.5 s: intervals 0 and 1 close.
        a.close_until(Some(Duration::from_millis(2500)), &board);
        assert!(emitted.lock().unwrap().is_empty(), "b has closed nothing");
        // b still waits for a request sent at 0.9 s.
        b.close_until(Some(Duration::from_millis(900)), &board);
        assert!(emitted.lock().unwrap().is_empty());
        b.close_until(Some(Duration::from_millis(1500)), &board);
        assert_eq!(*emitted.lock().unwrap(), [(0, 2)]);
        b.close_until(None, &board);
        assert_eq!(*emitted.lock().unwrap(), [(0, 2), (1, 4)]);
        a.close_until(None, &board);
        assert_eq!(*emitted.lock().unwrap(), [(0, 2), (1, 4), (2, 2)]);
        assert!(!a.closing_due(Duration::from_secs(10)), "all closed");
    }
}
