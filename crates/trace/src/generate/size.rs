//! Object-size distributions of generated workloads. A key's size is a pure function of the key
//! and the seed, so every request for a key carries the same size and no per-key state is kept.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::random::{mix64, unit_from_bits};
use super::spec::SpecError;

/// How object sizes (bytes) are distributed over keys.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum SizeDistribution {
    /// Every object has `bytes` bytes (`size=4096`, `size=4kb`).
    Fixed { bytes: u32 },
    /// Uniform over [min, max] (`size=uniform:512:8192`).
    Uniform { min: u32, max: u32 },
    /// Bounded Pareto with shape `alpha` over [min, max], by inverse CDF
    /// (`size=pareto:1.2:512:1mb`): a heavy tail where a few objects are huge.
    Pareto { alpha: f64, min: u32, max: u32 },
    /// Log-normal with median `median` bytes and log-space standard deviation `sigma`, clamped
    /// to [1, 4 GiB - 1] (`size=lognormal:4096:1.5`), the shape of many key-value value sizes.
    Lognormal { median: f64, sigma: f64 },
}

impl Default for SizeDistribution {
    fn default() -> Self {
        SizeDistribution::Fixed { bytes: 4096 }
    }
}

impl SizeDistribution {
    /// Parses the `size=` value of a workload spec; the error names the field and says what was
    /// expected.
    pub fn parse(text: &str) -> Result<SizeDistribution, SpecError> {
        Self::parse_text(text).map_err(|reason| SpecError::field("size", reason))
    }

    /// [`parse`](Self::parse), saying only what was expected: for a caller that names the field.
    pub(crate) fn parse_text(text: &str) -> Result<SizeDistribution, String> {
        let mut parts = text.split(':');
        let head = parts.next().unwrap_or_default();
        let rest: Vec<&str> = parts.collect();
        let distribution = match (head.to_ascii_lowercase().as_str(), rest.as_slice()) {
            ("uniform", [min, max]) => SizeDistribution::Uniform {
                min: parse_bytes(min)?,
                max: parse_bytes(max)?,
            },
            ("pareto", [alpha, min, max]) => SizeDistribution::Pareto {
                alpha: parse_real(alpha)?,
                min: parse_bytes(min)?,
                max: parse_bytes(max)?,
            },
            ("lognormal", [median, sigma]) => SizeDistribution::Lognormal {
                median: f64::from(parse_bytes(median)?),
                sigma: parse_real(sigma)?,
            },
            (_, []) => SizeDistribution::Fixed {
                bytes: parse_bytes(head)?,
            },
            _ => {
                return Err(format!(
                    "expected BYTES, uniform:MIN:MAX, pareto:ALPHA:MIN:MAX or lognormal:MEDIAN:SIGMA, found \"{text}\""
                ))
            }
        };
        distribution.check()?;
        Ok(distribution)
    }

    /// Checks the parameters; the error names the field and says what was expected.
    pub fn validate(&self) -> Result<(), SpecError> {
        self.check()
            .map_err(|reason| SpecError::field("size", reason))
    }

    fn check(&self) -> Result<(), String> {
        match *self {
            SizeDistribution::Fixed { bytes: 0 } => {
                Err("expected a size of at least 1 byte, found 0".into())
            }
            SizeDistribution::Uniform { min, max } | SizeDistribution::Pareto { min, max, .. }
                if min == 0 || min > max =>
            {
                Err(format!("expected 1 <= min <= max, found min {min} and max {max}"))
            }
            SizeDistribution::Pareto { alpha, .. } if !(alpha.is_finite() && alpha > 0.0) => {
                Err(format!("expected a Pareto shape alpha > 0, found {alpha}"))
            }
            SizeDistribution::Lognormal { median, sigma }
                if !(median.is_finite() && median >= 1.0 && sigma.is_finite() && sigma >= 0.0) =>
            {
                Err(format!(
                    "expected a median of at least 1 byte and sigma >= 0, found median {median} and sigma {sigma}"
                ))
            }
            _ => Ok(()),
        }
    }

    /// The mean size, bytes: exact for fixed, uniform and Pareto sizes; for log-normal ones,
    /// median · e^(σ²/2), which the clamp to [1, 4 GiB) hardly changes.
    pub fn mean_bytes(&self) -> f64 {
        match *self {
            SizeDistribution::Fixed { bytes } => f64::from(bytes),
            SizeDistribution::Uniform { min, max } => (f64::from(min) + f64::from(max)) / 2.0,
            SizeDistribution::Pareto { alpha, min, max } => {
                let (low, high) = (f64::from(min), f64::from(max));
                if low == high {
                    return low;
                }
                // The mean of the Pareto truncated to [low, high].
                let scale = 1.0 - (low / high).powf(alpha);
                if (alpha - 1.0).abs() < 1e-12 {
                    low * (high / low).ln() / scale
                } else {
                    alpha * low.powf(alpha) * (low.powf(1.0 - alpha) - high.powf(1.0 - alpha))
                        / ((alpha - 1.0) * scale)
                }
            }
            SizeDistribution::Lognormal { median, sigma } => median * (sigma * sigma / 2.0).exp(),
        }
    }

    /// The size of `key` in the workload whose size salt is `salt`.
    pub(crate) fn size_of(&self, key: u64, salt: u64) -> u32 {
        let bits = mix64(key ^ salt);
        match *self {
            SizeDistribution::Fixed { bytes } => bytes,
            SizeDistribution::Uniform { min, max } => {
                let span = u64::from(max - min) + 1;
                min + ((u128::from(bits) * u128::from(span)) >> 64) as u32
            }
            SizeDistribution::Pareto { alpha, min, max } => {
                // Inverse CDF of the Pareto truncated to [min, max]:
                // x = min / (1 - u (1 - (min/max)^α))^(1/α).
                let u = unit_from_bits(bits);
                let (low, high) = (f64::from(min), f64::from(max));
                let tail = 1.0 - u * (1.0 - (low / high).powf(alpha));
                let size = low / tail.powf(1.0 / alpha);
                (size as u32).clamp(min, max)
            }
            SizeDistribution::Lognormal { median, sigma } => {
                // Box-Muller on two independent unit reals taken from one more mix of the key.
                let radius_unit = 1.0 - unit_from_bits(bits); // in (0, 1], so its log is finite
                let angle_unit = unit_from_bits(mix64(bits));
                let normal =
                    (-2.0 * radius_unit.ln()).sqrt() * (std::f64::consts::TAU * angle_unit).cos();
                (median * (sigma * normal).exp()).clamp(1.0, f64::from(u32::MAX)) as u32
            }
        }
    }
}

impl fmt::Display for SizeDistribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SizeDistribution::Fixed { bytes } => write!(f, "{bytes}"),
            SizeDistribution::Uniform { min, max } => write!(f, "uniform:{min}:{max}"),
            SizeDistribution::Pareto { alpha, min, max } => {
                write!(f, "pareto:{alpha}:{min}:{max}")
            }
            SizeDistribution::Lognormal { median, sigma } => {
                write!(f, "lognormal:{median}:{sigma}")
            }
        }
    }
}

/// Parses an object size (see [`crate::units::parse_bytes`]), at most 4 GiB - 1.
pub(crate) fn parse_bytes(text: &str) -> Result<u32, String> {
    let bytes = crate::units::parse_bytes(text).map_err(|e| e.to_string())?;
    u32::try_from(bytes).map_err(|_| format!("expected a size below 4 GiB, found \"{text}\""))
}

/// Parses a finite real number.
pub(crate) fn parse_real(text: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|value| value.is_finite())
        .ok_or_else(|| format!("expected a number, found \"{text}\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_form_and_prints_it_back() {
        for text in [
            "4096",
            "uniform:512:8192",
            "pareto:1.2:512:1048576",
            "lognormal:4096:1.5",
        ] {
            let distribution = SizeDistribution::parse(text).unwrap();
            assert_eq!(distribution.to_string(), text);
        }
        assert_eq!(
            SizeDistribution::parse("4kb").unwrap(),
            SizeDistribution::Fixed { bytes: 4096 }
        );
        assert_eq!(
            SizeDistribution::parse("uniform:1k:2MiB").unwrap(),
            SizeDistribution::Uniform {
                min: 1024,
                max: 2 << 20
            }
        );
    }

    #[test]
    fn rejects_bad_sizes_with_what_was_expected() {
        let bad = [
            ("0", "at least 1 byte"),
            ("4q", "size in bytes"),
            ("8gb", "below 4 GiB"),
            ("uniform:9:3", "min <= max"),
            ("uniform:1", "expected BYTES"),
            ("pareto:-1:1:10", "alpha > 0"),
            ("lognormal:100:nan", "expected a number"),
        ];
        for (text, expected) in bad {
            let error = SizeDistribution::parse(text).unwrap_err();
            assert_eq!(error.field.as_deref(), Some("size"), "{text}");
            assert!(error.reason.contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn pareto_sizes_follow_the_bounded_pareto_cdf() {
        let (alpha, min, max) = (1.2, 100u32, 100_000u32);
        let distribution = SizeDistribution::Pareto { alpha, min, max };
        let sizes: Vec<u32> = (0..100_000)
            .map(|key| distribution.size_of(key, 9))
            .collect();
        assert!(sizes.iter().all(|&s| (min..=max).contains(&s)));
        // P(X <= x) = (1 - (min/x)^α) / (1 - (min/max)^α); check it at x = 1000.
        let expected = (1.0 - 0.1f64.powf(alpha)) / (1.0 - 0.001f64.powf(alpha));
        let observed = sizes.iter().filter(|&&s| s <= 1000).count() as f64 / 1e5;
        // Binomial standard deviation at 10^5 draws is below 0.0016.
        assert!(
            (observed - expected).abs() < 0.008,
            "{observed} vs {expected}"
        );
    }

    #[test]
    fn lognormal_sizes_have_the_requested_median() {
        let distribution = SizeDistribution::Lognormal {
            median: 4096.0,
            sigma: 1.0,
        };
        let mut sizes: Vec<u32> = (0..100_001)
            .map(|key| distribution.size_of(key, 5))
            .collect();
        sizes.sort_unstable();
        let median = f64::from(sizes[50_000]);
        // The sample median's log has standard deviation about 1.25 σ / sqrt(n) = 0.004.
        assert!((median / 4096.0).ln().abs() < 0.03, "median {median}");
    }

    #[test]
    fn the_same_key_always_has_the_same_size() {
        // Through the generator: every request of a key in a generated trace carries one size,
        // and keys differ in size (a simulator counting bytes relies on both).
        for sizes in [
            "uniform:1:1048576",
            "pareto:1.2:512:1048576",
            "lognormal:4096:1.5",
        ] {
            let spec = crate::generate::WorkloadSpec::parse(&format!(
                "zipf:theta=0.9,keys=500,requests=20000,size={sizes},seed=4"
            ))
            .unwrap();
            let mut reader = crate::generate::generator(&spec).unwrap();
            let mut size_of_key = std::collections::HashMap::new();
            while let Some(request) = reader.next_request().unwrap() {
                let first = *size_of_key.entry(request.key).or_insert(request.size);
                assert_eq!(
                    request.size, first,
                    "{sizes}: key {} changed size",
                    request.key
                );
            }
            let distinct: std::collections::HashSet<u32> = size_of_key.values().copied().collect();
            assert!(
                distinct.len() > size_of_key.len() / 2,
                "{sizes}: {} sizes",
                distinct.len()
            );
        }
    }
}
