//! How a paced load's rate moves over the run (seed 000 §5.3; docs/kv-cache.md, "loadgen kv"):
//! steps at given times into the measured time (Fig 5.8's best-effort writer bursting at 12 s)
//! and a diurnal swing between light and intensive (Fig 5.14's C1 and C2).

use std::f64::consts::TAU;
use std::str::FromStr;
use std::time::Duration;

use crate::config::parse_duration;
use crate::error::ArgError;

/// From `at` into the measured time on, `rate` requests a second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateStep {
    pub at: Duration,
    pub rate: f64,
}

impl FromStr for RateStep {
    type Err = ArgError;

    /// `AT:RATE`, e.g. `12s:200000`.
    fn from_str(text: &str) -> Result<RateStep, ArgError> {
        let expected = || ArgError::bad("rate step", text, "expected AT:RATE, e.g. 12s:200000");
        let (at, rate) = text.split_once(':').ok_or_else(expected)?;
        let at = parse_duration(at).map_err(|_| expected())?;
        let rate: f64 = rate.trim().parse().map_err(|_| expected())?;
        if !(rate.is_finite() && rate > 0.0) {
            return Err(ArgError::bad(
                "rate step",
                text,
                "the rate must be above 0 requests a second",
            ));
        }
        Ok(RateStep { at, rate })
    }
}

/// The rate swings over `period` between `low` times the rate (at the start of each period)
/// and the whole rate (half a period in), as a cosine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Diurnal {
    pub period: Duration,
    pub low: f64,
}

impl FromStr for Diurnal {
    type Err = ArgError;

    /// `PERIOD:LOW`, e.g. `20s:0.2`.
    fn from_str(text: &str) -> Result<Diurnal, ArgError> {
        let expected = || {
            ArgError::bad(
                "diurnal pattern",
                text,
                "expected PERIOD:LOW, e.g. 20s:0.2 (a 20 s day whose night runs at a fifth of \
                 the rate)",
            )
        };
        let (period, low) = duration_and_number(text).ok_or_else(expected)?;
        if period.is_zero() || !(0.0..=1.0).contains(&low) {
            return Err(expected());
        }
        Ok(Diurnal { period, low })
    }
}

/// `DURATION:NUMBER`, if `text` is one.
fn duration_and_number(text: &str) -> Option<(Duration, f64)> {
    let (duration, number) = text.split_once(':')?;
    Some((parse_duration(duration).ok()?, number.trim().parse().ok()?))
}

/// A rate over time: `base`, changed by `steps` (in time order) and swung by `diurnal`.
#[derive(Clone, Debug, PartialEq)]
pub struct RateSchedule {
    pub base: f64,
    pub steps: Vec<RateStep>,
    pub diurnal: Option<Diurnal>,
}

impl RateSchedule {
    /// A steady `rate`.
    pub fn steady(rate: f64) -> RateSchedule {
        RateSchedule {
            base: rate,
            steps: Vec::new(),
            diurnal: None,
        }
    }

    /// Requests a second `elapsed` into the measured time (the warm-up runs at the start's).
    pub fn rate_at(&self, elapsed: Duration) -> f64 {
        let stepped = self
            .steps
            .iter()
            .take_while(|step| step.at <= elapsed)
            .last()
            .map_or(self.base, |step| step.rate);
        match self.diurnal {
            None => stepped,
            Some(Diurnal { period, low }) => {
                let phase = elapsed.as_secs_f64() / period.as_secs_f64();
                let swing = (1.0 - (TAU * phase).cos()) / 2.0;
                stepped * (low + (1.0 - low) * swing)
            }
        }
    }

    /// Why the schedule cannot run, if it cannot.
    pub fn check(&self) -> Result<(), ArgError> {
        if !(self.base.is_finite() && self.base > 0.0) {
            return Err(ArgError::Flag {
                flag: format!("--rate {}", self.base),
                reason: "expected requests a second above 0",
            });
        }
        if self.steps.windows(2).any(|pair| pair[1].at < pair[0].at) {
            return Err(ArgError::Flag {
                flag: "--rate-step".to_string(),
                reason: "the steps must come in time order",
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_and_the_diurnal_swing_set_the_rate() {
        let schedule = RateSchedule {
            steps: vec!["12s:5000".parse().unwrap(), "17s:1000".parse().unwrap()],
            ..RateSchedule::steady(1000.0)
        };
        assert_eq!(schedule.rate_at(Duration::ZERO), 1000.0);
        assert_eq!(schedule.rate_at(Duration::from_secs(12)), 5000.0);
        assert_eq!(schedule.rate_at(Duration::from_secs(16)), 5000.0);
        assert_eq!(schedule.rate_at(Duration::from_secs(30)), 1000.0);
        let daily = RateSchedule {
            diurnal: Some("20s:0.2".parse().unwrap()),
            ..RateSchedule::steady(1000.0)
        };
        assert!((daily.rate_at(Duration::ZERO) - 200.0).abs() < 1e-9);
        assert!((daily.rate_at(Duration::from_secs(10)) - 1000.0).abs() < 1e-9);
        assert!((daily.rate_at(Duration::from_secs(5)) - 600.0).abs() < 1e-9);
        assert!((daily.rate_at(Duration::from_secs(20)) - 200.0).abs() < 1e-9);
    }

    #[test]
    fn bad_steps_and_patterns_say_what_was_expected() {
        for bad in ["12s", "12:5000", "12s:-1", "12s:fast"] {
            let error = bad.parse::<RateStep>().unwrap_err().to_string();
            assert!(error.contains(bad), "{error}");
        }
        for bad in ["20s", "0s:0.5", "20s:1.5", "day:0.2"] {
            let error = bad.parse::<Diurnal>().unwrap_err().to_string();
            assert!(error.contains("PERIOD:LOW"), "{error}");
        }
        let backwards = RateSchedule {
            steps: vec!["12s:5000".parse().unwrap(), "5s:1000".parse().unwrap()],
            ..RateSchedule::steady(1000.0)
        };
        assert!(backwards
            .check()
            .unwrap_err()
            .to_string()
            .contains("time order"));
    }
}
