//! Probabilistic admission: each miss is admitted with a fixed probability, whatever the
//! object, libCacheSim's `prob` admissioner (`admission/prob.c`, `lcs.ProbAdmissioner(prob)`).
//!
//! As in libCacheSim the probability is cut to 10⁻⁷ steps: a miss is admitted when a draw from
//! `0..10⁷` is below ⌊prob·10⁷⌋, with libCacheSim's generator ([`crate::util::rng`]). libCacheSim
//! draws from one generator per thread and has no seed of its own; here each filter has a
//! `seed`, and seed 0 replays a fresh libCacheSim process.

use heterarchy_trace::Request;

use super::{AdmissionFilter, FilterEntry};
use crate::error::PolicyError;
use crate::params::{ParamKind, ParamSpec, SEED};
use crate::util::rng::{Lehmer64, DRAW_MODULUS};

/// The registry entry.
pub const ENTRY: FilterEntry = FilterEntry {
    name: "prob",
    aliases: &["probabilistic"],
    params: &[
        ParamSpec {
            name: "prob",
            kind: ParamKind::Float { min: 0.0, max: 1.0 },
            default: "0.5",
            doc: "probability that a miss is admitted (above 0)",
        },
        SEED,
    ],
    source: "probabilistic admission; libCacheSim admission/prob.c",
    build: |params| {
        let filter = Probabilistic::new(params.float("prob"), params.int("seed"))?;
        Ok(Box::new(filter))
    },
};

/// Admits each miss with one fixed probability.
pub struct Probabilistic {
    /// A draw from `0..DRAW_MODULUS` below this admits.
    threshold: u64,
    random: Lehmer64,
}

impl Probabilistic {
    /// Admits with `probability` (in (0, 1]), drawing from the stream of `seed`.
    pub fn new(probability: f64, seed: u64) -> Result<Probabilistic, PolicyError> {
        if !(probability > 0.0 && probability <= 1.0) {
            return Err(PolicyError::OutOfRange {
                policy: "prob".into(),
                param: "prob".into(),
                value: probability.to_string(),
                expected: "a number above 0, at most 1".into(),
            });
        }
        Ok(Probabilistic {
            // Truncated, as libCacheSim converts it to an int.
            threshold: (probability * DRAW_MODULUS as f64) as u64,
            random: Lehmer64::new(seed),
        })
    }
}

impl AdmissionFilter for Probabilistic {
    #[inline]
    fn admit(&mut self, _request: &Request) -> bool {
        self.random.next_draw() < self.threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::PolicySpec;

    #[test]
    fn admits_about_its_share_and_replays_per_seed() {
        let request = Request::new(1, 10);
        let admitted = |seed| {
            let mut filter = Probabilistic::new(0.25, seed).unwrap();
            (0..40_000)
                .map(|_| filter.admit(&request))
                .collect::<Vec<bool>>()
        };
        let first = admitted(7);
        let share = first.iter().filter(|&&a| a).count() as f64 / 40_000.0;
        assert!((share - 0.25).abs() < 0.01, "{share}");
        assert_eq!(first, admitted(7));
        assert_ne!(first, admitted(8));
        let mut always = Probabilistic::new(1.0, 0).unwrap();
        assert!((0..1000).all(|_| always.admit(&request)));
    }

    #[test]
    fn seed_zero_draws_libcachesims_first_numbers() {
        // A fresh libCacheSim thread's first draws, modulo 10⁷ (its state starts at
        // 0xdeadbeef and is multiplied by 0xda942042e4dd58b5 before each draw).
        let mut state: u128 = 0xdead_beef;
        let mut filter = Probabilistic::new(0.5, 0).unwrap();
        for _ in 0..100 {
            state = state.wrapping_mul(0xda94_2042_e4dd_58b5);
            let draw = ((state >> 64) as u64) % 10_000_000;
            assert_eq!(filter.admit(&Request::new(1, 1)), draw < 5_000_000);
        }
    }

    #[test]
    fn zero_and_out_of_range_are_refused() {
        let error = |text: &str| {
            PolicySpec::parse("lru", Some(text))
                .unwrap_err()
                .to_string()
        };
        assert!(error("prob:prob=0").contains("prob=0"));
        assert!(error("prob:prob=1.5").contains("prob=1.5"));
        let spec = PolicySpec::parse("lru", Some("probabilistic:prob=0.1,seed=3")).unwrap();
        assert_eq!(spec.label(), "lru+probabilistic:prob=0.1,seed=3");
    }
}
