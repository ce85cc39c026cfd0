//! The non-hierarchical caching scheduler: Algorithm 1 of seed 000 §4.3.3, with the parameters
//! of §4.4, as a state machine advanced once per measurement interval.
//!
//! Algorithm 1 is written as a loop that sleeps and measures; here each measurement interval
//! ends with a call, and the loop's position is the state. State 1 caches classically
//! (`data_admit` on, `load_admit` 1.0) until the hit rate is stable. State 2 turns admission
//! off and hill-climbs `load_admit`: each iteration measures f(ratio − step), f(ratio) and
//! f(ratio + step) for one interval each, in that order, moves to the best with the
//! algorithm's tie-break order (down, up, stay), returns to State 1 when staying at 1.0 is
//! best (line 16) or when the hit rate has fallen below (1 − α) of its value at the start of
//! State 2 (line 17). Points outside [0, 1] score −∞ (the "negative penalty function") and are
//! not measured.
//!
//! Choices the thesis leaves open, and ours:
//! - "cache.hit_rate" is the hit rate over the last stability window (100 ms), and "stable" —
//!   "changes within 0.1% in the last 100-milliseconds" — means it differs from the window
//!   before by at most `stable_change` (absolute), with the last window wholly in State 1. So
//!   State 1 lasts at least one window (two at the start), and after a drop of the hit rate
//!   it lasts until the hit rate has stopped climbing.
//! - An interval without replies measures nothing (−∞); an iteration that measured nothing at
//!   all returns to State 1, so an idle system does not drift.
//! - The 99th percentile of one 5 ms interval rests on a few hundred answers, so its rank is
//!   uncertain by several places: with the P99 target each f carries the 95% confidence range
//!   of its order statistic (the ranks n·0.99 ± 1.96·√(n·0.99·0.01)), and a move is taken only
//!   when its range lies wholly above staying's; otherwise the points tie, and a tie stays
//!   (which at 1.0 returns to State 1). Without this, the algorithm's tie-break (down first)
//!   walks `load_admit` down through any flat stretch of a noisy curve (the test
//!   `noisy_p99_ties_stay_instead_of_walking_down`). Throughput and mean latency keep
//!   Algorithm 1's comparison exactly. Where one interval's value varies more than a step of
//!   `load_admit` moves it, the walk wanders as Algorithm 1's would: Figure 4.8's 50% writes on
//!   PM + Optane SSD, where how many of an interval's ~340 requests are writes moves its
//!   throughput by about 5% (the experiment's notes).
//! - With more than two levels, one instance runs per pair (tier i over the level below) and
//!   the intervals go round the pairs, one each, so that no two instances measure at once;
//!   with two levels there is one pair and this is Algorithm 1 exactly.

use super::config::{scaled_ns, step_levels, AdmissionConfig, NhcConfig, TargetMetric};
use super::window::RatioWindow;
use super::{AdmitSettings, Interval, Tuner};

/// One iteration of State 2 (lines 7–16): the three points around `ratio` (in steps) and
/// which is being measured (0: ratio − step, 1: ratio, 2: ratio + step).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Iteration {
    ratio: u32,
    probe: usize,
    f: [Measured; 3],
    start_hit_rate: f64,
}

/// One measurement of the target metric f (larger is better) and the range the true value
/// lies in, as far as the interval's samples tell (`low == value == high` when the measure is
/// taken as exact).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Measured {
    value: f64,
    low: f64,
    high: f64,
}

impl Measured {
    const UNMEASURED: Measured = Measured::exact(f64::NEG_INFINITY);

    const fn exact(value: f64) -> Measured {
        Measured {
            value,
            low: value,
            high: value,
        }
    }
}

/// Where Algorithm 1 is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    /// State 1 (lines 2–4): classic caching until the hit rate is stable.
    ImproveHitRate,
    /// State 2 (lines 6–18).
    AdjustLoad(Iteration),
}

/// Algorithm 1 for one pair of levels.
struct Algorithm1 {
    /// `load_admit` is `level / levels`.
    levels: u32,
    stable_change: f64,
    alpha: f64,
    always_data_admit: bool,
    window: RatioWindow,
    state: State,
    /// When State 1 was last entered.
    improving_since_ns: u64,
}

impl Algorithm1 {
    fn new(config: &NhcConfig, window_ns: u64) -> Algorithm1 {
        Algorithm1 {
            levels: step_levels(config.step).expect("validated step"),
            stable_change: config.stable_change,
            alpha: config.alpha,
            always_data_admit: config.always_data_admit,
            window: RatioWindow::new(window_ns),
            state: State::ImproveHitRate,
            improving_since_ns: 0,
        }
    }

    fn load_admit(&self, level: u32) -> f64 {
        f64::from(level) / f64::from(self.levels)
    }

    /// Line 2, at `now_ns`: classic caching.
    fn improve_hit_rate(&mut self, now_ns: u64, settings: &mut AdmitSettings) {
        *settings = AdmitSettings::CLASSIC;
        self.state = State::ImproveHitRate;
        self.improving_since_ns = now_ns;
    }

    /// Sets `load_admit` to the iteration's probe `probe` or a later one, out-of-domain probes
    /// scoring −∞ unmeasured; false when none is left.
    fn start_probe(&self, iteration: &mut Iteration, settings: &mut AdmitSettings) -> bool {
        while iteration.probe < 3 {
            let level = i64::from(iteration.ratio) + iteration.probe as i64 - 1;
            if (0..=i64::from(self.levels)).contains(&level) {
                settings.load_admit = self.load_admit(level as u32);
                return true;
            }
            iteration.f[iteration.probe] = Measured::UNMEASURED;
            iteration.probe += 1;
        }
        false
    }

    /// Starts an iteration of State 2 around `ratio` (whose own point is always in domain).
    fn iterate(&mut self, ratio: u32, start_hit_rate: f64, settings: &mut AdmitSettings) {
        let mut iteration = Iteration {
            ratio,
            probe: 0,
            f: [Measured::UNMEASURED; 3],
            start_hit_rate,
        };
        self.start_probe(&mut iteration, settings);
        self.state = State::AdjustLoad(iteration);
    }

    /// One interval has ended. `owns` is false when another pair measured in it (the
    /// interval still feeds the hit-rate history); `measured` is its target metric.
    fn on_interval(
        &mut self,
        interval: &Interval,
        pair: usize,
        owns: bool,
        measured: Measured,
        settings: &mut AdmitSettings,
    ) {
        self.window.push(
            interval.start_ns,
            interval.end_ns,
            interval.hits[pair],
            interval.requests,
        );
        if !owns {
            return;
        }
        match self.state {
            State::ImproveHitRate => {
                let long_enough =
                    interval.end_ns >= self.improving_since_ns + self.window.window_ns();
                if long_enough && self.window.stable(self.stable_change) {
                    // Line 5.
                    let start_hit_rate = self.window.recent().unwrap_or(0.0);
                    settings.data_admit = self.always_data_admit;
                    self.iterate(self.levels, start_hit_rate, settings);
                }
            }
            State::AdjustLoad(mut iteration) => {
                iteration.f[iteration.probe] = measured;
                iteration.probe += 1;
                if self.start_probe(&mut iteration, settings) {
                    self.state = State::AdjustLoad(iteration);
                    return;
                }
                let Iteration {
                    ratio,
                    f,
                    start_hit_rate,
                    ..
                } = iteration;
                let max_f = f.iter().map(|m| m.value).fold(f64::NEG_INFINITY, f64::max);
                if max_f == f64::NEG_INFINITY {
                    // Nothing was measured: fall back to classic caching.
                    self.improve_hit_rate(interval.end_ns, settings);
                    return;
                }
                let chosen = if let Some(moved) = noisy_choice(&f) {
                    match moved {
                        Some(probe) => ratio + probe as u32 - 1,
                        None if ratio == self.levels => {
                            self.improve_hit_rate(interval.end_ns, settings);
                            return;
                        }
                        None => ratio,
                    }
                // Lines 9–16, in the algorithm's order.
                } else if f[0].value == max_f {
                    ratio - 1
                } else if f[2].value == max_f {
                    ratio + 1
                } else {
                    if ratio == self.levels {
                        self.improve_hit_rate(interval.end_ns, settings);
                        return;
                    }
                    ratio
                };
                settings.load_admit = self.load_admit(chosen);
                // Lines 17–18.
                let hit_rate = self.window.recent().unwrap_or(start_hit_rate);
                if hit_rate < (1.0 - self.alpha) * start_hit_rate {
                    self.improve_hit_rate(interval.end_ns, settings);
                    return;
                }
                self.iterate(chosen, start_hit_rate, settings);
            }
        }
    }
}

/// The choice among noisy measurements (any with a range): `Some(Some(probe))` to move to
/// probe 0 (down) or 2 (up), `Some(None)` to stay; a move must be better than staying beyond
/// both ranges, and of two such moves the better wins (down on a tie, as line 9 has it).
/// `None` when every measurement is exact: Algorithm 1's own comparison decides.
fn noisy_choice(f: &[Measured; 3]) -> Option<Option<usize>> {
    if f.iter().all(|m| m.low == m.high) {
        return None;
    }
    let beats_staying = |probe: usize| f[probe].low > f[1].high;
    Some(match (beats_staying(0), beats_staying(2)) {
        (true, true) if f[2].value > f[0].value => Some(2),
        (true, _) => Some(0),
        (false, true) => Some(2),
        (false, false) => None,
    })
}

/// NHC over every pair of levels; see the module docs.
pub struct Nhc {
    pairs: Vec<Algorithm1>,
    interval_ns: u64,
    target: TargetMetric,
    /// The pair that measures in the current interval.
    owner: usize,
}

impl Nhc {
    /// NHC for `pairs` pairs of levels.
    pub fn new(config: &AdmissionConfig, pairs: usize) -> Nhc {
        let nhc = &config.nhc;
        let window_ns = scaled_ns(nhc.stable_window_ms, config.time_scale);
        Nhc {
            pairs: (0..pairs)
                .map(|_| Algorithm1::new(nhc, window_ns))
                .collect(),
            interval_ns: scaled_ns(nhc.interval_ms, config.time_scale),
            target: nhc.target,
            owner: 0,
        }
    }

    /// f of one interval: larger is better; −∞ when nothing was answered.
    fn measure(&self, interval: &Interval) -> Measured {
        if interval.replies == 0 {
            return Measured::UNMEASURED;
        }
        match self.target {
            TargetMetric::Throughput => Measured::exact(interval.throughput_bytes_per_s()),
            TargetMetric::MeanLatency => {
                Measured::exact(-interval.mean_latency_ns().unwrap_or(f64::INFINITY))
            }
            TargetMetric::P99Latency => {
                let (p99, low, high) = p99_with_range(&interval.latencies_ns);
                Measured {
                    value: -p99,
                    low: -high,
                    high: -low,
                }
            }
        }
    }
}

/// z of a two-sided 95% confidence range.
const Z_95: f64 = 1.96;

/// The 99th percentile (nearest rank) of `latencies` and the 95% confidence range of the
/// percentile it estimates: the values at ranks n·p ∓ z·√(n·p·(1 − p)) (the order statistic's
/// binomial rank spread), found in a copy; +∞ for none.
fn p99_with_range(latencies: &[u64]) -> (f64, f64, f64) {
    if latencies.is_empty() {
        return (f64::INFINITY, f64::INFINITY, f64::INFINITY);
    }
    let mut sorted = latencies.to_vec();
    sorted.sort_unstable();
    let n = sorted.len() as f64;
    let at_rank = |rank: f64| sorted[(rank.ceil().max(1.0) as usize).min(sorted.len()) - 1] as f64;
    let spread = Z_95 * (n * 0.99 * 0.01).sqrt();
    (
        at_rank(n * 0.99),
        at_rank(n * 0.99 - spread),
        at_rank(n * 0.99 + spread),
    )
}

impl Tuner for Nhc {
    fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    fn wants_latencies(&self) -> bool {
        self.target == TargetMetric::P99Latency
    }

    fn end_interval(&mut self, interval: &Interval, settings: &mut [AdmitSettings]) {
        let f = self.measure(interval);
        let owner = self.owner;
        for (pair, algorithm) in self.pairs.iter_mut().enumerate() {
            algorithm.on_interval(interval, pair, pair == owner, f, &mut settings[pair]);
        }
        self.owner = (owner + 1) % self.pairs.len();
    }

    fn state(&self) -> &'static str {
        match self.pairs[0].state {
            State::ImproveHitRate => "state 1",
            State::AdjustLoad(_) => "state 2",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A 5 ms interval ending at `end_ms` with `hits` of 1000 requests and `bytes` answered.
    fn interval(end_ms: u64, hits: u64, bytes: u64) -> Interval {
        Interval {
            start_ns: (end_ms - 5) * MS,
            end_ns: end_ms * MS,
            requests: 1000,
            hits: [hits; crate::admission::MAX_PAIRS],
            replies: 1000,
            reply_bytes: bytes,
            latency_sum_ns: 1000 * 100_000,
            ..Interval::default()
        }
    }

    /// Runs NHC on a stable 95% hit rate, answering `throughput(load_admit)` bytes per
    /// interval, for `intervals` intervals; returns the settings after each.
    fn drive(
        nhc: &mut Nhc,
        intervals: u64,
        mut throughput: impl FnMut(f64) -> u64,
    ) -> Vec<(AdmitSettings, &'static str)> {
        let mut settings = [AdmitSettings::CLASSIC];
        let mut trace = Vec::new();
        for k in 1..=intervals {
            let bytes = throughput(settings[0].load_admit);
            nhc.end_interval(&interval(5 * k, 950, bytes), &mut settings);
            trace.push((settings[0], nhc.state()));
        }
        trace
    }

    #[test]
    fn state_1_lasts_two_stability_windows_then_admission_stops() {
        let mut nhc = Nhc::new(&AdmissionConfig::default(), 1);
        let trace = drive(&mut nhc, 45, |_| 1_000_000);
        // 200 ms of stable hits = 40 intervals of 5 ms.
        assert!(trace[..39]
            .iter()
            .all(|(s, state)| *s == AdmitSettings::CLASSIC && *state == "state 1"));
        let (settings, state) = trace[39];
        assert_eq!(state, "state 2");
        assert!(!settings.data_admit);
        // The first probe is ratio - step.
        assert_eq!(settings.load_admit, 0.98);
    }

    #[test]
    fn climbs_to_the_peak_of_a_concave_metric_and_stays_near_it() {
        let mut nhc = Nhc::new(&AdmissionConfig::default(), 1);
        // Throughput peaks at load_admit 0.6: the fast device saturates above it, the slow one
        // below.
        let peak = |la: f64| (1e9 * (1.0 - (la - 0.6).abs())) as u64;
        let trace = drive(&mut nhc, 40 + 3 * 40, peak);
        let last = trace.last().unwrap().0;
        assert!(!last.data_admit);
        assert!(
            (last.load_admit - 0.6).abs() <= 0.021,
            "{}",
            last.load_admit
        );
        // It walked down one step per iteration of three intervals: ten iterations after the
        // first decision it probes 0.8 itself.
        assert_eq!(trace[39 + 30].0.load_admit, 0.8);
    }

    #[test]
    fn staying_at_one_returns_to_state_1() {
        let mut nhc = Nhc::new(&AdmissionConfig::default(), 1);
        // Throughput only grows with load_admit: classic caching is best.
        let trace = drive(&mut nhc, 62, |la| (la * 1e9) as u64);
        // Interval 41 measures 0.98, interval 42 measures 1.0 (1.02 is out of domain and not
        // measured): 1.0 wins.
        assert_eq!((trace[40].0.load_admit, trace[40].1), (1.0, "state 2"));
        assert_eq!(trace[41], (AdmitSettings::CLASSIC, "state 1"));
        // The hit rate is still stable: State 1 lasts one window (100 ms, 20 intervals).
        assert!(trace[41..61].iter().all(|(_, state)| *state == "state 1"));
        assert_eq!(trace[61].1, "state 2");
    }

    #[test]
    fn ties_move_down_first() {
        let mut nhc = Nhc::new(&AdmissionConfig::default(), 1);
        let trace = drive(&mut nhc, 40 + 2 + 3, |_| 5_000);
        // Equal f everywhere: line 9 picks ratio - step, 0.98, whose iteration starts by
        // probing 0.96; the next picks 0.96 and probes 0.94.
        assert_eq!(
            trace[41],
            (
                AdmitSettings {
                    data_admit: false,
                    load_admit: 0.96
                },
                "state 2"
            )
        );
        assert_eq!(trace[44].0.load_admit, 0.94);
    }

    #[test]
    fn a_hit_rate_drop_beyond_alpha_returns_to_state_1() {
        let mut nhc = Nhc::new(&AdmissionConfig::default(), 1);
        let mut settings = [AdmitSettings::CLASSIC];
        let peak = |la: f64| (1e9 * (1.0 - (la - 0.5).abs())) as u64;
        for k in 1..=40 {
            nhc.end_interval(&interval(5 * k, 950, peak(1.0)), &mut settings);
        }
        assert_eq!(nhc.state(), "state 2");
        // The hot set moves: hits fall to 80% (below 0.95 x 0.95).
        let mut k = 41;
        while nhc.state() == "state 2" && k < 100 {
            let bytes = peak(settings[0].load_admit);
            nhc.end_interval(&interval(5 * k, 800, bytes), &mut settings);
            k += 1;
        }
        assert_eq!(nhc.state(), "state 1");
        assert_eq!(settings[0], AdmitSettings::CLASSIC);
        // Within one window of 100 ms (20 intervals) plus one iteration.
        assert!(k <= 41 + 20 + 3, "{k}");
    }

    #[test]
    fn a_small_drop_within_alpha_keeps_tuning() {
        let mut nhc = Nhc::new(&AdmissionConfig::default(), 1);
        let mut settings = [AdmitSettings::CLASSIC];
        let peak = |la: f64| (1e9 * (1.0 - (la - 0.5).abs())) as u64;
        for k in 1..=40 {
            nhc.end_interval(&interval(5 * k, 950, peak(1.0)), &mut settings);
        }
        for k in 41..=200 {
            let bytes = peak(settings[0].load_admit);
            nhc.end_interval(&interval(5 * k, 930, bytes), &mut settings);
            assert_eq!(nhc.state(), "state 2");
        }
    }

    #[test]
    fn idle_intervals_fall_back_to_classic() {
        let mut nhc = Nhc::new(&AdmissionConfig::default(), 1);
        let mut settings = [AdmitSettings::CLASSIC];
        for k in 1..=40 {
            nhc.end_interval(&interval(5 * k, 950, 1_000), &mut settings);
        }
        assert_eq!(nhc.state(), "state 2");
        for k in 41..=43 {
            let idle = Interval {
                start_ns: (5 * k - 5) * MS,
                end_ns: 5 * k * MS,
                ..Interval::default()
            };
            nhc.end_interval(&idle, &mut settings);
        }
        assert_eq!(nhc.state(), "state 1");
        assert_eq!(settings[0], AdmitSettings::CLASSIC);
    }

    #[test]
    fn always_data_admit_keeps_admission_in_state_2() {
        let mut config = AdmissionConfig::default();
        config.nhc.always_data_admit = true;
        let mut nhc = Nhc::new(&config, 1);
        let trace = drive(&mut nhc, 60, |la| (1e9 * (1.0 - (la - 0.5).abs())) as u64);
        assert!(trace.iter().all(|(s, _)| s.data_admit));
        assert!(trace.last().unwrap().0.load_admit < 1.0);
    }

    #[test]
    fn latency_targets_prefer_lower_latency() {
        let mut config = AdmissionConfig::default();
        config.nhc.target = TargetMetric::P99Latency;
        let nhc = Nhc::new(&config, 1);
        assert!(nhc.wants_latencies());
        let mut fast = interval(5, 950, 0);
        fast.latencies_ns = (1..=100).collect();
        let mut slow = fast.clone();
        slow.latencies_ns = (1..=100).map(|l| l * 2).collect();
        assert_eq!(nhc.measure(&fast).value, -99.0);
        assert!(nhc.measure(&fast).value > nhc.measure(&slow).value);
        config.nhc.target = TargetMetric::MeanLatency;
        let nhc = Nhc::new(&config, 1);
        assert_eq!(nhc.measure(&fast), Measured::exact(-100_000.0));
    }

    #[test]
    fn the_p99_range_follows_the_rank_spread_of_its_order_statistic() {
        // 1000 samples: rank 990, ± 1.96 · √(1000 · 0.99 · 0.01) = ± 6.2 ranks.
        let latencies: Vec<u64> = (1..=1000).rev().collect();
        assert_eq!(p99_with_range(&latencies), (990.0, 984.0, 997.0));
        let one = p99_with_range(&[7]);
        assert_eq!(one, (7.0, 7.0, 7.0));
    }

    /// An interval whose answers took `base + i` ns for i in 0..n.
    fn latencies_interval(end_ms: u64, base: u64, n: u64) -> Interval {
        Interval {
            latencies_ns: (0..n).map(|i| base + i).collect(),
            ..interval(end_ms, 950, 1_000_000)
        }
    }

    #[test]
    fn noisy_p99_ties_stay_instead_of_walking_down() {
        let mut config = AdmissionConfig::default();
        config.nhc.target = TargetMetric::P99Latency;
        let mut nhc = Nhc::new(&config, 1);
        let mut settings = [AdmitSettings::CLASSIC];
        for k in 1..=40 {
            nhc.end_interval(&latencies_interval(5 * k, 1000, 300), &mut settings);
        }
        assert_eq!(nhc.state(), "state 2");
        // A flat curve whose p99 differs by a few ns from interval to interval, within the
        // range 300 samples leave: every iteration ties and stays, so at 1.0 NHC goes back to
        // State 1 instead of stepping down.
        let jitter = [3, 0, 5, 1, 4, 2];
        for k in 41..=43 {
            let base = 1000 + jitter[k as usize % jitter.len()];
            nhc.end_interval(&latencies_interval(5 * k, base, 300), &mut settings);
        }
        assert_eq!(nhc.state(), "state 1");
        assert_eq!(settings[0], AdmitSettings::CLASSIC);
        // A clear improvement still moves: the p99 of the step down is far below.
        let choice = noisy_choice(&[
            nhc.measure(&latencies_interval(5, 500, 300)),
            nhc.measure(&latencies_interval(5, 1000, 300)),
            Measured::UNMEASURED,
        ]);
        assert_eq!(choice, Some(Some(0)));
    }

    #[test]
    fn pairs_take_turns() {
        let mut nhc = Nhc::new(&AdmissionConfig::default(), 2);
        let mut settings = [AdmitSettings::CLASSIC; 2];
        // Both pairs see every interval's hits, so both become stable after 40 intervals, but
        // each acts only on its own intervals.
        for k in 1..=41 {
            nhc.end_interval(&interval(5 * k, 950, 1_000), &mut settings);
        }
        assert!(!settings[0].data_admit && !settings[1].data_admit);
        assert_eq!(settings[0].load_admit, 0.98);
        assert_eq!(settings[1].load_admit, 0.98);
    }
}
