//! The knob search of seed 004 §3 and §4 ("Handling dynamic capacity variations"), assembled
//! from the prose, since the paper gives no pseudocode: start with the whole tier as write
//! cache; move the read-cache share up a step per measurement window while the measured
//! performance improves (functional polymorphism), then the compressed share the same way
//! (representational polymorphism); hold the last point that improved, and start again from a
//! full write cache when the measurement moves away from it by more than a threshold (a
//! workload change).
//!
//! A step improves when it measures above the step before it (§3.2: "stops the re-purposing
//! when the performance of the application stops increasing"), not above the best window seen:
//! against the best, one lucky window would stop every later step of a slow, steady climb.
//!
//! The search only proposes knobs and reads measurements (higher is better: throughput, or the
//! negated latency); its caller applies them to the tier and measures a window at a time.

use super::tier::Knobs;
use crate::error::ParamError;

/// The search's parameters (`[cache.poly]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchConfig {
    /// Share of the tier moved per step, dividing 1 (e.g. 0.1).
    pub step: f64,
    /// Relative change of the measurement at the held point that restarts the search.
    pub restart_threshold: f64,
    /// Whether the search goes on to the compressed share (representational polymorphism);
    /// without, it is the paper's Functional-only design (§5.2).
    pub compress: bool,
    /// Steps in a row that may fail to improve before the knob goes back to the last point
    /// that improved: 1 stops at the first (the paper's rule); more looks past a window's noise
    /// or a flat step.
    pub patience: u32,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            step: 0.1,
            restart_threshold: 0.2,
            compress: true,
            patience: 2,
        }
    }
}

impl SearchConfig {
    /// A one-line error naming the parameter out of range.
    pub fn validate(&self) -> Result<(), ParamError> {
        let steps = 1.0 / self.step;
        if !(self.step > 0.0 && self.step <= 1.0) || (steps - steps.round()).abs() > 1e-9 {
            return Err(ParamError::new(
                "step",
                self.step,
                "a share in (0, 1] that divides 1 (0.05, 0.1, 0.25, ...)",
            ));
        }
        if self.patience == 0 {
            return Err(ParamError::new("patience", 0, "at least 1 step"));
        }
        if !(self.restart_threshold > 0.0 && self.restart_threshold.is_finite()) {
            return Err(ParamError::new(
                "restart_threshold",
                self.restart_threshold,
                "a relative change above 0",
            ));
        }
        Ok(())
    }
}

/// Where the search is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchPhase {
    /// Moving the read-cache share up.
    Functional,
    /// Moving the compressed share up.
    Representational,
    /// Holding the best point, watching for a change.
    Holding,
}

/// One measurement window's outcome, for logging the trajectory (Fig 13).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchStep {
    /// The knobs that were measured.
    pub measured: Knobs,
    pub performance: f64,
    /// The knobs to run the next window with.
    pub next: Knobs,
    pub phase: SearchPhase,
    /// True when this window restarted the search.
    pub restarted: bool,
}

/// The online search; see the module docs.
#[derive(Clone, Debug)]
pub struct KnobSearch {
    config: SearchConfig,
    phase: SearchPhase,
    current: Knobs,
    /// The last point that improved on the step before it, and its measurement: where a
    /// knob goes back to, and what the held point is watched against.
    best: Option<(Knobs, f64)>,
    /// The measurement of the step before.
    previous: Option<f64>,
    /// Steps in a row that did not improve on the step before.
    failed_steps: u32,
}

impl KnobSearch {
    /// A search starting from a full write cache.
    pub fn new(config: SearchConfig) -> Result<KnobSearch, ParamError> {
        config.validate()?;
        Ok(KnobSearch {
            config,
            phase: SearchPhase::Functional,
            current: Knobs::WRITE_CACHE,
            best: None,
            previous: None,
            failed_steps: 0,
        })
    }

    /// The knobs to run now.
    pub fn knobs(&self) -> Knobs {
        self.current
    }

    /// The phase the search is in.
    pub fn phase(&self) -> SearchPhase {
        self.phase
    }

    /// Takes the performance measured over a window at [`knobs`](Self::knobs) and says what to
    /// run next.
    pub fn observe(&mut self, performance: f64) -> SearchStep {
        let measured = self.current;
        let mut restarted = false;
        match self.phase {
            SearchPhase::Holding => {
                let (_, held) = self.best.expect("holding follows a measurement");
                let change = (performance - held).abs() / held.abs().max(f64::MIN_POSITIVE);
                if change > self.config.restart_threshold {
                    self.restart();
                    restarted = true;
                } else {
                    // Track slow drift at the held point.
                    self.best = Some((measured, performance));
                }
            }
            SearchPhase::Functional | SearchPhase::Representational => {
                let improved = self.previous.is_none_or(|previous| performance > previous);
                self.previous = Some(performance);
                if improved {
                    self.best = Some((measured, performance));
                    self.failed_steps = 0;
                    self.advance();
                } else {
                    self.failed_steps += 1;
                    if self.failed_steps < self.config.patience {
                        self.advance();
                    } else {
                        // Back to the last point that improved; the next knob, or hold.
                        self.next_phase();
                    }
                }
            }
        }
        SearchStep {
            measured,
            performance,
            next: self.current,
            phase: self.phase,
            restarted,
        }
    }

    /// A step further on the phase's knob, or the next phase when it cannot move.
    fn advance(&mut self) {
        let step = self.config.step;
        let next = match self.phase {
            SearchPhase::Functional => Knobs {
                read_share: self.current.read_share + step,
                ..self.current
            },
            SearchPhase::Representational => Knobs {
                compressed_share: self.current.compressed_share + step,
                ..self.current
            },
            SearchPhase::Holding => return,
        };
        let next = Knobs {
            read_share: round_to(next.read_share, step),
            compressed_share: round_to(next.compressed_share, step),
        };
        if next.validate().is_ok() {
            self.current = next;
            return;
        }
        self.next_phase();
    }

    /// Back to the last point that improved; functional gives way to representational (when
    /// compressing) and that to holding. The compressed knob's climb starts with a window at
    /// that point, so that its first step is compared with a fresh measurement rather than
    /// one taken steps ago (a workload just changed, a tier still settling).
    fn next_phase(&mut self) {
        self.failed_steps = 0;
        if let Some((best, _)) = self.best {
            self.current = best;
        }
        self.phase = match self.phase {
            SearchPhase::Functional if self.config.compress => SearchPhase::Representational,
            _ => SearchPhase::Holding,
        };
        if self.phase == SearchPhase::Representational {
            self.previous = None;
        }
    }

    /// Back to a full write cache (§3.2: on a phase change "the PolyEMT runtime begins with
    /// the EMT as write-cache").
    fn restart(&mut self) {
        self.phase = SearchPhase::Functional;
        self.current = Knobs::WRITE_CACHE;
        self.best = None;
        self.previous = None;
        self.failed_steps = 0;
    }
}

/// One measurement window of the search, as both executors measure it: its first half lets
/// the roles settle at their new sizes (a knob change moves pages for a while), its second half
/// is measured. Times are nanoseconds on the executor's clock; operations a running count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    started_ns: u64,
    /// When the measured half began, and the count then.
    measured_from: Option<(u64, u64)>,
}

impl Window {
    /// A window starting at `now_ns`.
    pub fn new(now_ns: u64) -> Window {
        Window {
            started_ns: now_ns,
            measured_from: None,
        }
    }

    /// Operations a second over the measured half once a window of `interval_ns` is over;
    /// `ops` is the count of operations done so far.
    pub fn observe(&mut self, now_ns: u64, ops: u64, interval_ns: u64) -> Option<f64> {
        let elapsed_ns = now_ns.saturating_sub(self.started_ns);
        if elapsed_ns < interval_ns / 2 {
            return None;
        }
        let (from_ns, from_ops) = *self.measured_from.get_or_insert((now_ns, ops));
        if elapsed_ns < interval_ns {
            return None;
        }
        let seconds = (now_ns.saturating_sub(from_ns)).max(1) as f64 / 1e9;
        Some(ops.saturating_sub(from_ops) as f64 / seconds)
    }
}

/// Every point of the knob grid at `step`: both shares multiples of `step` in [0, 1], read
/// share first.
pub fn knob_grid(step: f64) -> Result<Vec<Knobs>, ParamError> {
    SearchConfig {
        step,
        ..SearchConfig::default()
    }
    .validate()?;
    let steps = (1.0 / step).round() as u32;
    Ok((0..=steps)
        .flat_map(|read| {
            (0..=steps).map(move |compressed| Knobs {
                read_share: f64::from(read) * step,
                compressed_share: f64::from(compressed) * step,
            })
        })
        .collect())
}

/// The offline baseline of seed 004 Table 2: every point of [`knob_grid`] measured by
/// `measure`; returns the best point and its measurement, and how many points were measured.
pub fn offline_sweep(
    step: f64,
    mut measure: impl FnMut(Knobs) -> f64,
) -> Result<(Knobs, f64, usize), ParamError> {
    let grid = knob_grid(step)?;
    let mut best: Option<(Knobs, f64)> = None;
    for knobs in &grid {
        let performance = measure(*knobs);
        if best.is_none_or(|(_, top)| performance > top) {
            best = Some((*knobs, performance));
        }
    }
    let (knobs, performance) = best.expect("the grid has the full write cache at least");
    Ok((knobs, performance, grid.len()))
}

/// `value` on the grid of `step` (so that repeated steps add up exactly).
fn round_to(value: f64, step: f64) -> f64 {
    (value / step).round() * step
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the search against `performance(knobs)` until it holds; returns the held knobs and
    /// the windows it took.
    fn converge(search: &mut KnobSearch, performance: impl Fn(Knobs) -> f64) -> (Knobs, usize) {
        for window in 1..=1000 {
            let step = search.observe(performance(search.knobs()));
            if step.phase == SearchPhase::Holding {
                return (step.next, window);
            }
        }
        panic!("the search did not settle");
    }

    #[test]
    fn a_unimodal_surface_is_climbed_to_its_peak_one_knob_at_a_time() {
        // Peak at 60% read cache, then 20% compressed (the paper's YCSB-A shape, Fig 13).
        let surface =
            |k: Knobs| -(k.read_share - 0.6).powi(2) - (k.compressed_share - 0.2).powi(2) * 0.5;
        for (patience, expected_windows) in [(1, 12), (2, 14)] {
            let mut search = KnobSearch::new(SearchConfig {
                patience,
                ..SearchConfig::default()
            })
            .unwrap();
            let (held, windows) = converge(&mut search, surface);
            assert!((held.read_share - 0.6).abs() < 1e-9, "{held:?}");
            assert!((held.compressed_share - 0.2).abs() < 1e-9, "{held:?}");
            // 8 functional windows (0 … 0.7), 0.6 again, then 0.1 … 0.3 compressed: 12 in
            // all; each knob looks one step further with a patience of 2.
            assert_eq!(windows, expected_windows, "patience {patience}");
        }
    }

    #[test]
    fn a_window_measures_its_second_half() {
        let mut window = Window::new(1_000);
        // 100 operations in the first half do not count.
        assert_eq!(window.observe(400_000_000, 100, 1_000_000_000), None);
        assert_eq!(window.observe(600_000_000, 150, 1_000_000_000), None);
        let rate = window.observe(1_100_000_000, 650, 1_000_000_000).unwrap();
        assert!((rate - 1000.0).abs() < 1e-6, "{rate}");
    }

    #[test]
    fn patience_looks_past_a_step_that_fails_to_improve() {
        // A dip at 20% read cache before the peak at 60% (a noisy window).
        let surface = |k: Knobs| {
            let dip = if (k.read_share - 0.2).abs() < 1e-9 {
                0.5
            } else {
                0.0
            };
            -(k.read_share - 0.6).abs() - dip - k.compressed_share
        };
        let strict = SearchConfig {
            patience: 1,
            ..SearchConfig::default()
        };
        let (held, _) = converge(&mut KnobSearch::new(strict).unwrap(), surface);
        assert!((held.read_share - 0.1).abs() < 1e-9, "{held:?}");
        let patient = SearchConfig::default();
        let (held, _) = converge(&mut KnobSearch::new(patient).unwrap(), surface);
        assert!((held.read_share - 0.6).abs() < 1e-9, "{held:?}");
        assert_eq!(held.compressed_share, 0.0);
        let functional_only = SearchConfig {
            compress: false,
            ..SearchConfig::default()
        };
        let (held, windows) = converge(&mut KnobSearch::new(functional_only).unwrap(), |k| {
            -(k.read_share - 0.6).abs() + k.compressed_share
        });
        assert!((held.read_share - 0.6).abs() < 1e-9, "{held:?}");
        // 0 … 0.8 read cache (two past the peak), then hold: no compressed step.
        assert_eq!((held.compressed_share, windows), (0.0, 9));
    }

    /// A slow climb with one lucky window early on: compared with the best window seen, every
    /// later step would fail; compared with the step before, the climb goes on to the top.
    #[test]
    fn one_lucky_window_does_not_stop_a_steady_climb() {
        // (read share, compressed share) measured, and what it measured.
        let measurements = [
            ((0.0, 0.0), 100.0),
            ((0.1, 0.0), 99.0),
            ((0.2, 0.0), 98.0),
            ((0.0, 0.0), 100.0), // measured again before the compressed share moves
            ((0.0, 0.1), 109.0), // lucky: the true value is about 101
            ((0.0, 0.2), 101.5),
            ((0.0, 0.3), 102.0),
            ((0.0, 0.4), 103.0),
            ((0.0, 0.5), 102.5),
            ((0.0, 0.6), 102.0),
        ];
        let mut search = KnobSearch::new(SearchConfig::default()).unwrap();
        for ((read_share, compressed_share), performance) in measurements {
            let knobs = search.knobs();
            assert!((knobs.read_share - read_share).abs() < 1e-9, "{knobs:?}");
            assert!(
                (knobs.compressed_share - compressed_share).abs() < 1e-9,
                "{knobs:?}"
            );
            search.observe(performance);
        }
        assert_eq!(search.phase(), SearchPhase::Holding);
        assert!((search.knobs().compressed_share - 0.4).abs() < 1e-9);
        assert_eq!(search.knobs().read_share, 0.0);
    }

    #[test]
    fn a_change_at_the_held_point_restarts_from_a_full_write_cache() {
        let mut search = KnobSearch::new(SearchConfig::default()).unwrap();
        converge(&mut search, |k| 10.0 - (k.read_share - 0.8).abs() * 10.0);
        let held = search.knobs();
        let quiet = search.observe(10.0);
        assert!(!quiet.restarted && quiet.next == held);
        let changed = search.observe(4.0);
        assert!(changed.restarted);
        assert_eq!(changed.next, Knobs::WRITE_CACHE);
        assert_eq!(search.phase(), SearchPhase::Functional);
    }

    #[test]
    fn the_knobs_never_leave_their_range() {
        // Always better further on: the search walks to the edges and stops there.
        let mut search = KnobSearch::new(SearchConfig {
            step: 0.25,
            ..SearchConfig::default()
        })
        .unwrap();
        let (held, _) = converge(&mut search, |k| k.read_share + k.compressed_share * 2.0);
        assert!(held.validate().is_ok(), "{held:?}");
        assert_eq!(held.read_share, 1.0);
    }

    #[test]
    fn the_online_search_reaches_the_offline_optimum_on_separable_unimodal_surfaces() {
        // Surfaces of the shape seed 004 Fig 11 reports (one peak per knob), peaks anywhere on
        // the grid: the online point measures within 5% of the sweep's best (Table 2: "the
        // same split as an offline exhaustive search").
        for (read_peak, compressed_peak) in [(0.0, 0.0), (0.8, 0.0), (0.4, 0.2), (0.6, 0.3)] {
            let surface = move |k: Knobs| {
                100.0
                    - 80.0 * (k.read_share - read_peak).abs()
                    - 60.0 * (k.compressed_share - compressed_peak).abs()
            };
            let mut search = KnobSearch::new(SearchConfig::default()).unwrap();
            let (online, _) = converge(&mut search, surface);
            let (offline, best, points) = offline_sweep(0.1, surface).unwrap();
            assert_eq!(points, 121, "11 × 11 grid points");
            assert!(
                surface(online) >= 0.95 * best,
                "peak ({read_peak}, {compressed_peak}): online {online:?} {} against offline \
                 {offline:?} {best}",
                surface(online)
            );
        }
        assert!(offline_sweep(0.3, |_| 0.0).is_err());
    }

    #[test]
    fn steps_that_do_not_divide_one_are_refused() {
        for step in [0.0, 0.3, 1.5, -0.1, f64::NAN] {
            let err = KnobSearch::new(SearchConfig {
                step,
                ..SearchConfig::default()
            })
            .unwrap_err()
            .to_string();
            assert!(err.starts_with("step"), "{err}");
        }
        assert!(SearchConfig {
            patience: 0,
            ..SearchConfig::default()
        }
        .validate()
        .unwrap_err()
        .to_string()
        .contains("patience"));
        assert!(SearchConfig {
            restart_threshold: 0.0,
            ..SearchConfig::default()
        }
        .validate()
        .is_err());
    }
}
