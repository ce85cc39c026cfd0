//! The analytic caching-vs-splitting model of seed 000 §4.2.1 (Kan Wu's thesis, Eqs 4.1–4.9;
//! the Orthus paper, FAST'21, §2.2).
//!
//! Two devices serve requests at fixed rates, `R_hi` (the performance device) and `R_lo` (the
//! capacity device) ops/s, without contending with each other. The workload is read-only, with
//! either one request at a time ("low" concurrency) or copious concurrency ("high"). Caching
//! sends every request to the fast device and each miss to both (fetch from the slow device,
//! install in the fast one); splitting sends a fixed fraction `S` of requests to the fast device
//! and the rest to the slow one, with no installs. Throughputs are evaluated exactly as the
//! equations are written, in f64.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// A bad model input: the message names the offending text and what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelError {
    /// A device ratio that is not two positive finite rates `R_hi:R_lo`.
    BadRatio {
        /// The text as given.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A curve needs both ends, x = 0 and x = 1.
    TooFewPoints(usize),
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::BadRatio { text, reason } => write!(
                f,
                "ratio {text:?}: {reason}; expected two positive rates R_hi:R_lo in ops/s, \
                 e.g. 100:50"
            ),
            ModelError::TooFewPoints(points) => write!(
                f,
                "a curve of {points} points: expected at least 2 (x = 0 and x = 1)"
            ),
        }
    }
}

impl std::error::Error for ModelError {}

/// The two device rates of the model, in ops/s: `R_hi` for the performance device `D_hi` and
/// `R_lo` for the capacity device `D_lo` (seed 000 §4.2.1). Both are positive and finite;
/// `R_hi` need not exceed `R_lo`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Ratio {
    /// `R_hi`: the performance device's rate, ops/s.
    pub r_hi: f64,
    /// `R_lo`: the capacity device's rate, ops/s.
    pub r_lo: f64,
}

impl Ratio {
    /// The ratio `r_hi:r_lo`, or an error when either rate is not positive and finite.
    pub fn new(r_hi: f64, r_lo: f64) -> Result<Ratio, ModelError> {
        for (name, rate) in [("R_hi", r_hi), ("R_lo", r_lo)] {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(ModelError::BadRatio {
                    text: format!("{r_hi}:{r_lo}"),
                    reason: format!("{name} is {rate}"),
                });
            }
        }
        Ok(Ratio { r_hi, r_lo })
    }

    /// Caching throughput at low concurrency for hit rate `hit` in [0, 1], ops/s (Eq 4.2, the
    /// inverse of Eq 4.1 with `T_hit = 1/R_hi` and `T_miss = 1/R_hi + 1/R_lo`).
    pub fn cache_low(&self, hit: f64) -> f64 {
        self.r_hi * self.r_lo / (hit * self.r_lo + (1.0 - hit) * (self.r_hi + self.r_lo))
    }

    /// Caching throughput at high concurrency for hit rate `hit` in [0, 1], ops/s (Eq 4.7):
    /// the slow device serves the misses, the fast one every request (hits and installs), and
    /// whichever finishes last sets the pace (Eqs 4.3–4.6).
    pub fn cache_high(&self, hit: f64) -> f64 {
        1.0 / ((1.0 - hit) / self.r_lo).max(1.0 / self.r_hi)
    }

    /// Splitting throughput at low concurrency for split rate `split` in [0, 1] (the fraction
    /// served by the fast device), ops/s (Eq 4.8).
    pub fn split_low(&self, split: f64) -> f64 {
        1.0 / ((1.0 - split) / self.r_lo + split / self.r_hi)
    }

    /// Splitting throughput at high concurrency for split rate `split` in [0, 1], ops/s
    /// (Eq 4.9).
    pub fn split_high(&self, split: f64) -> f64 {
        1.0 / ((1.0 - split) / self.r_lo).max(split / self.r_hi)
    }

    /// The split rate that maximises Eq 4.9, `S* = R_hi / (R_hi + R_lo)`: both devices finish
    /// together, so neither idles (closed form derived from Eq 4.9; the thesis states it for
    /// 100:50 as "about two-thirds").
    pub fn best_split(&self) -> f64 {
        self.r_hi / (self.r_hi + self.r_lo)
    }

    /// Eq 4.9 at [`Ratio::best_split`]: the aggregate rate `R_hi + R_lo`, ops/s.
    pub fn best_split_ops(&self) -> f64 {
        self.r_hi + self.r_lo
    }

    /// The most caching can deliver at any concurrency or hit rate, `R_hi` ops/s: every request
    /// passes through the fast device (Eq 4.4), so Eq 4.7 never exceeds it.
    pub fn cache_ceiling_ops(&self) -> f64 {
        self.r_hi
    }

    /// The lowest hit rate at which Eq 4.7 reaches [`Ratio::cache_ceiling_ops`],
    /// `max(0, 1 − R_lo/R_hi)`: from there on the slow device's misses take no longer than the
    /// fast device's work.
    pub fn cache_ceiling_hit(&self) -> f64 {
        (1.0 - self.r_lo / self.r_hi).max(0.0)
    }

    /// The four throughputs at x, taken as hit rate for caching and as split rate for splitting.
    pub fn point(&self, x: f64) -> ModelPoint {
        ModelPoint {
            x,
            cache_low: self.cache_low(x),
            cache_high: self.cache_high(x),
            split_low: self.split_low(x),
            split_high: self.split_high(x),
        }
    }

    /// The model at `points` evenly spaced x = 0, 1/(points−1), …, 1 (the curves of seed 000
    /// Figure 4.3); an error for fewer than 2 points.
    pub fn curve(&self, points: usize) -> Result<Vec<ModelPoint>, ModelError> {
        if points < 2 {
            return Err(ModelError::TooFewPoints(points));
        }
        let last = (points - 1) as f64;
        // i / last rather than a running sum, so both ends are exactly 0 and 1.
        Ok((0..points).map(|i| self.point(i as f64 / last)).collect())
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.r_hi, self.r_lo)
    }
}

impl FromStr for Ratio {
    type Err = ModelError;

    /// Parses `R_hi:R_lo`, e.g. `100:50`; surrounding spaces are allowed.
    fn from_str(text: &str) -> Result<Ratio, ModelError> {
        let bad = |reason: String| ModelError::BadRatio {
            text: text.to_string(),
            reason,
        };
        let (hi_text, lo_text) = text
            .split_once(':')
            .ok_or_else(|| bad("no ':' between the two rates".to_string()))?;
        let parse_rate = |name: &str, rate_text: &str| -> Result<f64, ModelError> {
            let rate: f64 = rate_text
                .trim()
                .parse()
                .map_err(|_| bad(format!("{name} {:?} is not a number", rate_text.trim())))?;
            if rate.is_finite() && rate > 0.0 {
                Ok(rate)
            } else {
                Err(bad(format!("{name} is {rate}, not a positive finite rate")))
            }
        };
        Ok(Ratio {
            r_hi: parse_rate("R_hi", hi_text)?,
            r_lo: parse_rate("R_lo", lo_text)?,
        })
    }
}

/// The model's four throughputs at one x, ops/s.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ModelPoint {
    /// The hit rate H (caching) and split rate S (splitting), in [0, 1].
    pub x: f64,
    /// Caching, one request at a time (Eq 4.2).
    pub cache_low: f64,
    /// Caching, copious concurrency (Eq 4.7).
    pub cache_high: f64,
    /// Splitting, one request at a time (Eq 4.8).
    pub split_low: f64,
    /// Splitting, copious concurrency (Eq 4.9).
    pub split_high: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ratio(r_hi: f64, r_lo: f64) -> Ratio {
        Ratio::new(r_hi, r_lo).unwrap()
    }

    /// Equal to 1e-12 relative: the inputs (0.8, 0.95, ...) are not exact binary fractions, so
    /// the equations and the hand-reduced fractions below round differently in the last bits.
    fn assert_close(actual: f64, expected: f64) {
        assert!(
            (actual - expected).abs() <= 1e-12 * expected.abs().max(1.0),
            "{actual} != {expected}"
        );
    }

    /// Each row: ratio, x, then cache_low, cache_high, split_low, split_high reduced by hand
    /// from seed 000 Eqs 4.2, 4.7, 4.8, 4.9 (§4.2.1.1), each fraction checked one by one.
    #[test]
    fn matches_hand_reduced_equations() {
        let rows: [(f64, f64, f64, [f64; 4]); 11] = [
            // 4.2: 100/(0.8·1 + 0.2·101) = 100/21. 4.7: 1/max(0.2, 0.01) = 5.
            // 4.8: 1/(0.2 + 0.008) = 1/0.208. 4.9: 1/max(0.2, 0.008) = 5.
            (100.0, 1.0, 0.8, [100.0 / 21.0, 5.0, 1.0 / 0.208, 5.0]),
            // 4.2: 100/(0.99 + 1.01) = 50. 4.7: 1/max(0.01, 0.01) = 100.
            // 4.8: 1/(0.01 + 0.0099) = 1/0.0199. 4.9: 1/max(0.01, 0.0099) = 100.
            (100.0, 1.0, 0.99, [50.0, 100.0, 1.0 / 0.0199, 100.0]),
            // Every request on the fast device: all four equal R_hi.
            (100.0, 1.0, 1.0, [100.0, 100.0, 100.0, 100.0]),
            // 4.2: 1000/(8 + 22) = 100/3. 4.7: 1/max(0.02, 0.01) = 50.
            // 4.8: 1/(0.02 + 0.008) = 1/0.028. 4.9: 1/max(0.02, 0.008) = 50.
            (100.0, 10.0, 0.8, [100.0 / 3.0, 50.0, 1.0 / 0.028, 50.0]),
            // 4.2: 1000/(9 + 11) = 50. 4.7: 1/max(0.01, 0.01) = 100.
            // 4.8: 1/(0.01 + 0.009) = 1/0.019. 4.9: 1/max(0.01, 0.009) = 100.
            (100.0, 10.0, 0.9, [50.0, 100.0, 1.0 / 0.019, 100.0]),
            // 4.2: 1000/(9.5 + 5.5) = 200/3. 4.7: 1/max(0.005, 0.01) = 100.
            // 4.8: 1/(0.005 + 0.0095) = 1/0.0145. 4.9: 1/max(0.005, 0.0095) = 2000/19.
            (
                100.0,
                10.0,
                0.95,
                [200.0 / 3.0, 100.0, 1.0 / 0.0145, 2000.0 / 19.0],
            ),
            // 4.2: 5000/(25 + 75) = 50. 4.7: 1/max(0.01, 0.01) = 100.
            // 4.8: 1/(0.01 + 0.005) = 200/3. 4.9: 1/max(0.01, 0.005) = 100.
            (100.0, 50.0, 0.5, [50.0, 100.0, 200.0 / 3.0, 100.0]),
            // x = 2/3: 4.2: 5000/(100/3 + 50) = 60. 4.7: 1/max(1/150, 1/100) = 100.
            // 4.8: 1/(1/150 + 1/150) = 75. 4.9: 1/max(1/150, 1/150) = 150.
            (100.0, 50.0, 2.0 / 3.0, [60.0, 100.0, 75.0, 150.0]),
            // 4.2: 5000/(45 + 15) = 250/3. 4.7: 1/max(0.002, 0.01) = 100.
            // 4.8: 1/(0.002 + 0.009) = 1000/11. 4.9: 1/max(0.002, 0.009) = 1000/9.
            (
                100.0,
                50.0,
                0.9,
                [250.0 / 3.0, 100.0, 1000.0 / 11.0, 1000.0 / 9.0],
            ),
            // 4.2: 10000/(50 + 100) = 200/3. 4.7: 1/max(0.005, 0.01) = 100.
            // 4.8: 1/(0.005 + 0.005) = 100. 4.9: 1/max(0.005, 0.005) = 200.
            (100.0, 100.0, 0.5, [200.0 / 3.0, 100.0, 100.0, 200.0]),
            // 4.2: 10000/(90 + 20) = 1000/11. 4.7: 1/max(0.001, 0.01) = 100.
            // 4.8: 1/(0.001 + 0.009) = 100. 4.9: 1/max(0.001, 0.009) = 1000/9.
            (
                100.0,
                100.0,
                0.9,
                [1000.0 / 11.0, 100.0, 100.0, 1000.0 / 9.0],
            ),
        ];
        for (r_hi, r_lo, x, [cache_low, cache_high, split_low, split_high]) in rows {
            let point = ratio(r_hi, r_lo).point(x);
            assert_close(point.cache_low, cache_low);
            assert_close(point.cache_high, cache_high);
            assert_close(point.split_low, split_low);
            assert_close(point.split_high, split_high);
        }
    }

    #[test]
    fn thesis_example_is_exact_where_the_arithmetic_is() {
        // 0.5·50 + 0.5·150 = 100 with no rounding anywhere, so Eq 4.2 gives exactly 50.
        assert_eq!(ratio(100.0, 50.0).cache_low(0.5), 50.0);
    }

    /// At H = S = 0 everything goes to the slow device; caching also installs every miss.
    #[test]
    fn all_on_the_slow_device() {
        for (r_hi, r_lo) in [(100.0, 1.0), (100.0, 10.0), (100.0, 50.0), (100.0, 100.0)] {
            let point = ratio(r_hi, r_lo).point(0.0);
            assert_close(point.cache_low, r_hi * r_lo / (r_hi + r_lo));
            assert_close(point.cache_high, r_lo);
            assert_close(point.split_low, r_lo);
            assert_close(point.split_high, r_lo);
        }
    }

    #[test]
    fn closed_forms_of_the_optima() {
        let half = ratio(100.0, 50.0);
        assert_close(half.best_split(), 2.0 / 3.0);
        assert_close(half.best_split_ops(), 150.0);
        assert_close(half.split_high(half.best_split()), 150.0);
        assert_close(half.cache_ceiling_ops(), 100.0);
        assert_close(half.cache_ceiling_hit(), 0.5);
        assert_close(ratio(100.0, 10.0).best_split(), 10.0 / 11.0);
        assert_close(ratio(100.0, 1.0).best_split_ops(), 101.0);
        // A slow device at least as fast as the cache: caching peaks with no hits at all.
        assert_eq!(ratio(100.0, 100.0).cache_ceiling_hit(), 0.0);
        assert_eq!(ratio(10.0, 100.0).cache_ceiling_hit(), 0.0);
        assert_close(ratio(10.0, 100.0).cache_high(0.0), 10.0);
    }

    /// S* beats every other split on a fine grid, and caching never beats its ceiling, which it
    /// reaches exactly from the ceiling hit rate on.
    #[test]
    fn optima_bound_the_curves() {
        for (r_hi, r_lo) in [
            (100.0, 1.0),
            (100.0, 10.0),
            (100.0, 50.0),
            (100.0, 100.0),
            (3.0, 7.0),
        ] {
            let model = ratio(r_hi, r_lo);
            let ceiling_hit = model.cache_ceiling_hit();
            for point in model.curve(1001).unwrap() {
                assert!(point.split_high <= model.best_split_ops() * (1.0 + 1e-12));
                assert!(point.cache_high <= model.cache_ceiling_ops() * (1.0 + 1e-12));
                if point.x >= ceiling_hit {
                    assert_close(point.cache_high, model.cache_ceiling_ops());
                } else {
                    assert!(point.cache_high < model.cache_ceiling_ops());
                }
            }
        }
    }

    /// The model's monotonicity (seed 000 §4.2.1.2, Figure 4.3): more hits never slow caching,
    /// and when D_hi is the faster device, sending more to it never slows splitting at low
    /// concurrency; at high concurrency splitting rises up to S* and falls after it.
    #[test]
    fn monotonicity() {
        for (r_hi, r_lo) in [(100.0, 1.0), (100.0, 10.0), (100.0, 50.0)] {
            let curve = ratio(r_hi, r_lo).curve(101).unwrap();
            let best = ratio(r_hi, r_lo).best_split();
            for pair in curve.windows(2) {
                let (before, after) = (pair[0], pair[1]);
                assert!(after.cache_low > before.cache_low);
                assert!(after.cache_high >= before.cache_high);
                assert!(after.split_low > before.split_low);
                if after.x <= best {
                    assert!(after.split_high > before.split_high);
                } else if before.x >= best {
                    assert!(after.split_high < before.split_high);
                }
            }
        }
        // Equal devices: splitting at low concurrency does not depend on S.
        let equal = ratio(100.0, 100.0);
        for point in equal.curve(11).unwrap() {
            assert_close(point.split_low, 100.0);
        }
    }

    #[test]
    fn curve_spans_zero_to_one() {
        let curve = ratio(100.0, 50.0).curve(101).unwrap();
        assert_eq!(curve.len(), 101);
        assert_eq!(curve[0].x, 0.0);
        assert_eq!(curve[50].x, 0.5);
        assert_eq!(curve[100].x, 1.0);
        assert_eq!(ratio(1.0, 1.0).curve(2).unwrap().len(), 2);
        assert_eq!(ratio(1.0, 1.0).curve(1), Err(ModelError::TooFewPoints(1)));
    }

    #[test]
    fn parses_ratios() {
        assert_eq!("100:50".parse::<Ratio>().unwrap(), ratio(100.0, 50.0));
        assert_eq!(" 2.5 : 0.5 ".parse::<Ratio>().unwrap(), ratio(2.5, 0.5));
        assert_eq!(ratio(100.0, 50.0).to_string(), "100:50");
    }

    #[test]
    fn rejects_bad_ratios_naming_the_text() {
        for (text, why) in [
            ("100", "no ':'"),
            ("100:", "R_lo \"\" is not a number"),
            ("fast:50", "R_hi \"fast\" is not a number"),
            ("100:50:1", "R_lo \"50:1\" is not a number"),
            ("0:50", "R_hi is 0"),
            ("100:-5", "R_lo is -5"),
            ("inf:1", "R_hi is inf"),
            ("NaN:1", "R_hi is NaN"),
        ] {
            let message = text.parse::<Ratio>().unwrap_err().to_string();
            assert!(message.contains(&format!("{text:?}")), "{message}");
            assert!(message.contains(why), "{text}: {message}");
            assert!(!message.contains('\n'), "{message}");
        }
        assert!(Ratio::new(0.0, 1.0).is_err());
        assert!(Ratio::new(1.0, f64::NAN).is_err());
    }
}
