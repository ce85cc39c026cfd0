//! Size-probabilistic admission: a miss of `size` bytes is admitted with probability
//! e^(−exponent·size), so large objects rarely get in, libCacheSim's `sizeProbabilistic`
//! admissioner (`admission/sizeProbabilistic.c`,
//! `lcs.SizeProbabilisticAdmissioner(exponent)`). AdaptSize ([`super::adaptsize`]) uses the
//! same rule with the exponent tuned as it goes.
//!
//! As in libCacheSim a miss is admitted when a draw from `0..10⁷`, divided by 10⁷, is below
//! the probability, with libCacheSim's generator ([`crate::util::rng`]). libCacheSim has no seed
//! of its own; here seed 0 replays a fresh libCacheSim process.

use heterarchy_trace::Request;

use super::{AdmissionFilter, FilterEntry};
use crate::error::PolicyError;
use crate::params::{ParamKind, ParamSpec, SEED};
use crate::util::rng::Lehmer64;

/// The registry entry.
pub const ENTRY: FilterEntry = FilterEntry {
    name: "size-prob",
    aliases: &["sizeprob", "size-probabilistic", "sizeprobabilistic"],
    params: &[
        ParamSpec {
            name: "exponent",
            kind: ParamKind::Float { min: 0.0, max: 1.0 },
            default: "1e-6",
            doc: "admission probability is e^(-exponent * size in bytes); above 0",
        },
        SEED,
    ],
    source: "size-probabilistic admission; libCacheSim admission/sizeProbabilistic.c",
    build: |params| {
        let filter = SizeProbabilistic::new(params.float("exponent"), params.int("seed"))?;
        Ok(Box::new(filter))
    },
};

/// Admits a miss with a probability that falls exponentially with its size.
pub struct SizeProbabilistic {
    exponent_per_byte: f64,
    random: Lehmer64,
}

impl SizeProbabilistic {
    /// Admits `size` bytes with probability e^(−`exponent_per_byte`·size) (`exponent_per_byte`
    /// in (0, 1]), drawing from the stream of `seed`.
    pub fn new(exponent_per_byte: f64, seed: u64) -> Result<SizeProbabilistic, PolicyError> {
        if !(exponent_per_byte > 0.0 && exponent_per_byte <= 1.0) {
            return Err(PolicyError::OutOfRange {
                policy: "size-prob".into(),
                param: "exponent".into(),
                value: exponent_per_byte.to_string(),
                expected: "a number above 0, at most 1".into(),
            });
        }
        Ok(SizeProbabilistic {
            exponent_per_byte,
            random: Lehmer64::new(seed),
        })
    }

    /// The probability that a miss of `size_bytes` is admitted.
    pub fn probability(&self, size_bytes: u32) -> f64 {
        (-self.exponent_per_byte * f64::from(size_bytes)).exp()
    }
}

impl AdmissionFilter for SizeProbabilistic {
    #[inline]
    fn admit(&mut self, request: &Request) -> bool {
        let probability = self.probability(request.size);
        self.random.chance(probability)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::PolicySpec;

    #[test]
    fn large_objects_are_admitted_less_often() {
        let mut filter = SizeProbabilistic::new(1e-3, 5).unwrap();
        let share = |filter: &mut SizeProbabilistic, size| {
            let request = Request::new(1, size);
            (0..40_000).filter(|_| filter.admit(&request)).count() as f64 / 40_000.0
        };
        // e^-0.1 ≈ 0.905, e^-1 ≈ 0.368, e^-5 ≈ 0.0067.
        for (size, expected) in [(100, 0.905), (1000, 0.368), (5000, 0.0067)] {
            let observed = share(&mut filter, size);
            assert!((observed - expected).abs() < 0.01, "{size}: {observed}");
        }
        assert_eq!(filter.probability(0), 1.0);
    }

    #[test]
    fn parameters() {
        let spec = PolicySpec::parse("lru", Some("sizeProbabilistic:exponent=1e-4")).unwrap();
        assert_eq!(spec.label(), "lru+sizeprobabilistic:exponent=1e-4");
        let error = PolicySpec::parse("lru", Some("size-prob:exponent=0"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("exponent=0"), "{error}");
    }
}
