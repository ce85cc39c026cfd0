//! A sliding window of per-interval counts, for the tuners' tests of the recent past.

use std::collections::VecDeque;

/// Counts of the recent past: how many requests had some property (hit, wrote) out of how
/// many, per interval, over the last two windows.
pub(crate) struct RatioWindow {
    window_ns: u64,
    /// (start, end, count, requests) of each interval, oldest first, covering two windows.
    samples: VecDeque<(u64, u64, u64, u64)>,
}

impl RatioWindow {
    pub(crate) fn new(window_ns: u64) -> RatioWindow {
        RatioWindow {
            window_ns,
            samples: VecDeque::new(),
        }
    }

    pub(crate) fn push(&mut self, start_ns: u64, end_ns: u64, count: u64, requests: u64) {
        self.samples.push_back((start_ns, end_ns, count, requests));
        let horizon = end_ns.saturating_sub(2 * self.window_ns);
        while self.samples.len() > 1 && self.samples[1].0 <= horizon {
            self.samples.pop_front();
        }
    }

    /// Length of a window, ns.
    pub(crate) fn window_ns(&self) -> u64 {
        self.window_ns
    }

    pub(crate) fn clear(&mut self) {
        self.samples.clear();
    }

    /// Ratio of the intervals ending in (`from`, `to`].
    fn ratio_between(&self, from: u64, to: u64) -> Option<f64> {
        let (count, requests) = self
            .samples
            .iter()
            .filter(|sample| sample.1 > from && sample.1 <= to)
            .fold((0, 0), |(c, r), sample| (c + sample.2, r + sample.3));
        (requests > 0).then(|| count as f64 / requests as f64)
    }

    fn now(&self) -> u64 {
        self.samples.back().map_or(0, |sample| sample.1)
    }

    /// The ratio over the last window.
    pub(crate) fn recent(&self) -> Option<f64> {
        let now = self.now();
        self.ratio_between(now.saturating_sub(self.window_ns), now)
    }

    /// True when two full windows are recorded and their ratios differ by at most `change`.
    pub(crate) fn stable(&self, change: f64) -> bool {
        let now = self.now();
        let Some(&(first_start, ..)) = self.samples.front() else {
            return false;
        };
        if now < first_start + 2 * self.window_ns {
            return false;
        }
        let middle = now - self.window_ns;
        match (
            self.ratio_between(middle - self.window_ns, middle),
            self.ratio_between(middle, now),
        ) {
            (Some(before), Some(after)) => (after - before).abs() <= change,
            _ => false,
        }
    }
}
