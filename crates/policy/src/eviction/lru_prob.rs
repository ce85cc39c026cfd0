//! LRU with probabilistic promotion: an LRU queue in which a hit moves the object to the head
//! only with probability `prob`; a new object always enters at the head and the tail is
//! evicted. The same decisions as libCacheSim's `LRUProb.c` (`LRU_Prob`; the version the
//! `libcachesim` 0.3.5 Python package bundles, `lcs.LRUProb(prob=0.5)`). There is no paper;
//! where libCacheSim's code differs from "probability `prob`", this follows the code:
//! - libCacheSim promotes one hit in `⌊1 / prob⌋` (`threshold = (int)1.0 / prob`, promoting
//!   when a random number modulo the threshold is 0), so the probability is
//!   `1 / ⌊1 / prob⌋`: 0.5 and 1 are exact, but 0.3 promotes one hit in 3 and any `prob`
//!   above 0.5 promotes every hit. `prob=0` (undefined in libCacheSim) never promotes.
//! - libCacheSim's draw is the low bits of a 64-bit linear congruential generator; with the
//!   default threshold of 2 its lowest bit alternates, so it promotes exactly every second hit
//!   of the whole cache. Here each hit draws independently from a seeded generator (`seed`);
//!   miss ratios agree with libCacheSim's within 0.0007 on every case compared.
//!
//! It is [`Lru`] with a [`Promotion`] draw on hits: one queue, written once.

use super::lru::Lru;
use crate::util::rng::Lehmer64;

/// LRU-Prob's promotion draw, which [`Lru`] makes on every hit.
#[derive(Clone, Debug)]
pub struct Promotion {
    /// A hit is promoted when a draw below this is 0 (libCacheSim's `threshold`).
    one_in: u64,
    rng: Lehmer64,
}

impl Promotion {
    /// Promotes with probability `1 / ⌊1 / prob⌋` (`prob` in 0..=1), drawing from `seed`.
    pub fn new(prob: f64, seed: u64) -> Promotion {
        debug_assert!((0.0..=1.0).contains(&prob));
        Promotion {
            // Saturates to u64::MAX for prob = 0: practically never.
            one_in: ((1.0 / prob) as u64).max(1),
            rng: Lehmer64::new(seed),
        }
    }

    /// Whether this hit moves its object to the front.
    #[inline]
    pub fn draw(&mut self) -> bool {
        self.rng.below(self.one_in) == 0
    }
}

/// An empty LRU-Prob cache of `capacity` bytes promoting a hit with probability
/// `1 / ⌊1 / prob⌋` (`prob` in 0..=1), drawing from `seed`.
pub fn new(capacity: u64, prob: f64, seed: u64) -> Lru {
    Lru::with_promotion(capacity, Some(Promotion::new(prob, seed)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eviction::EvictionPolicy;
    use crate::util::model_check::{check_against_model, steps};
    use heterarchy_trace::Request;
    use proptest::prelude::*;

    /// Keys 1 and 2 resident (2 newer), then `hits` hits on 1, then a miss: the victim.
    fn victim_after_hits(prob: f64, seed: u64, hits: usize) -> u64 {
        let mut cache = new(2, prob, seed);
        let mut evicted = Vec::new();
        cache.get(&Request::new(1, 1), &mut evicted);
        cache.get(&Request::new(2, 1), &mut evicted);
        for _ in 0..hits {
            assert!(cache.get(&Request::new(1, 1), &mut evicted));
        }
        cache.get(&Request::new(3, 1), &mut evicted);
        evicted[0].key
    }

    #[test]
    fn prob_one_is_lru_and_prob_zero_is_fifo() {
        assert_eq!(victim_after_hits(1.0, 0, 1), 2);
        assert_eq!(victim_after_hits(0.0, 0, 5), 1);
    }

    #[test]
    fn promotes_one_hit_in_floor_of_one_over_prob() {
        // One hit on key 1 saves it from eviction exactly when that hit was promoted.
        let promoted_share = |prob| {
            let saved = (0..6000)
                .filter(|&seed| victim_after_hits(prob, seed, 1) == 2)
                .count();
            saved as f64 / 6000.0
        };
        assert!((promoted_share(0.5) - 0.5).abs() < 0.03);
        assert!(
            (promoted_share(0.3) - 1.0 / 3.0).abs() < 0.03,
            "⌊1/0.3⌋ = 3"
        );
        assert_eq!(promoted_share(0.7), 1.0, "⌊1/0.7⌋ = 1");
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(capacity in 1u64..64, seed in 0u64..4, steps in steps(20)) {
            check_against_model(&mut new(capacity, 0.5, seed), &steps)?;
        }
    }
}
