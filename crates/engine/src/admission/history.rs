//! What a tuner did over time, for charts (seed 000 Figures 4.12–4.14 plot `load_admit` and
//! `data_admit` under the throughput): one point per interval while they fit, then every
//! second one, and so on, so a run of any length keeps at most [`MAX_POINTS`].

use std::collections::BTreeMap;

use serde::Serialize;

use super::{AdmitSettings, Interval};

/// Most points a history keeps.
pub const MAX_POINTS: usize = 2048;

/// The settings and measurements at the end of one interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TuningPoint {
    /// End of the interval, seconds on the controller's clock.
    pub time_s: f64,
    pub state: &'static str,
    /// Per pair, from the top.
    pub load_admit: Vec<f64>,
    pub data_admit: Vec<bool>,
    /// Hit ratio of the top tier in the interval (`None` without requests).
    pub hit_ratio: Option<f64>,
    pub throughput_bytes_per_s: f64,
}

/// A tuner's course over a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TuningHistory {
    pub points: Vec<TuningPoint>,
    /// Intervals measured.
    pub intervals: u64,
    /// Seconds spent in each state.
    pub state_seconds: BTreeMap<&'static str, f64>,
    /// How many times each state was entered (the first state counts once).
    pub state_entries: BTreeMap<&'static str, u64>,
    #[serde(skip)]
    stride: u64,
    #[serde(skip)]
    last_state: Option<&'static str>,
}

impl TuningHistory {
    /// Notes the interval that just ended and the settings and state it led to.
    pub(crate) fn record(
        &mut self,
        interval: &Interval,
        settings: &[AdmitSettings],
        state: &'static str,
    ) {
        if self.last_state != Some(state) {
            *self.state_entries.entry(state).or_default() += 1;
            self.last_state = Some(state);
        }
        *self.state_seconds.entry(state).or_default() += interval.seconds();
        self.stride = self.stride.max(1);
        if self.intervals.is_multiple_of(self.stride) {
            if self.points.len() == MAX_POINTS {
                let mut index = 0;
                self.points.retain(|_| {
                    index += 1;
                    index % 2 == 1
                });
                self.stride *= 2;
            }
            if self.intervals.is_multiple_of(self.stride) {
                self.points.push(TuningPoint {
                    time_s: interval.end_ns as f64 / 1e9,
                    state,
                    load_admit: settings.iter().map(|s| s.load_admit).collect(),
                    data_admit: settings.iter().map(|s| s.data_admit).collect(),
                    hit_ratio: interval.hit_ratio(0),
                    throughput_bytes_per_s: interval.throughput_bytes_per_s(),
                });
            }
        }
        self.intervals += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_runs_thin_out_evenly_and_count_states() {
        let mut history = TuningHistory::default();
        let settings = [AdmitSettings::CLASSIC];
        for k in 0..10_000u64 {
            let interval = Interval {
                start_ns: k * 1000,
                end_ns: (k + 1) * 1000,
                ..Interval::default()
            };
            let state = if k % 1000 < 500 { "state 1" } else { "state 2" };
            history.record(&interval, &settings, state);
        }
        assert_eq!(history.intervals, 10_000);
        assert!(history.points.len() <= MAX_POINTS);
        assert!(history.points.len() > MAX_POINTS / 4);
        let gaps: Vec<f64> = history
            .points
            .windows(2)
            .map(|pair| pair[1].time_s - pair[0].time_s)
            .collect();
        assert!(gaps.iter().all(|gap| (gap - gaps[0]).abs() < 1e-12));
        assert_eq!(history.state_entries["state 1"], 10);
        assert_eq!(history.state_entries["state 2"], 10);
        assert!((history.state_seconds["state 2"] - 5e-3).abs() < 1e-9);
    }
}
