//! The generators' source of randomness: xoshiro256++ seeded through SplitMix64
//! (`rand_xoshiro`), turned into unit reals and bounded integers by our own arithmetic so that
//! the stream does not depend on how a `rand` version implements its distributions.

use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// 2^-53: the spacing of the unit reals built from the top 53 bits of a draw.
const UNIT_SPACING: f64 = 1.0 / (1u64 << 53) as f64;

/// A seeded random stream that yields the same values on every platform.
pub struct Random(Xoshiro256PlusPlus);

impl Random {
    /// The stream of `seed`.
    pub fn new(seed: u64) -> Random {
        Random(Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    /// A real uniformly distributed in [0, 1), with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        unit_from_bits(self.0.next_u64())
    }

    /// An integer uniformly distributed in [0, bound) (0 when `bound` is 0), by Lemire's
    /// multiply-high; its bias is below bound / 2^64, far under anything a test can see.
    pub fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.0.next_u64()) * u128::from(bound)) >> 64) as u64
    }
}

/// The unit real of 64 random bits (their top 53), in [0, 1).
pub fn unit_from_bits(bits: u64) -> f64 {
    (bits >> 11) as f64 * UNIT_SPACING
}

/// The SplitMix64 finaliser (Steele, Lea and Flood, OOPSLA 2014): a bijective mix of 64 bits
/// in which every input bit affects every output bit. Derives per-key values (sizes) and
/// per-seed constants without keeping any state.
pub fn mix64(value: u64) -> u64 {
    let mut z = value.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_stays_in_range_and_reaches_both_ends() {
        let mut random = Random::new(7);
        let mut seen = [false; 5];
        for _ in 0..1000 {
            let value = random.below(5);
            assert!(value < 5);
            seen[value as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(random.below(0), 0);
    }

    #[test]
    fn unit_reals_lie_in_the_half_open_interval() {
        assert_eq!(unit_from_bits(0), 0.0);
        assert!(unit_from_bits(u64::MAX) < 1.0);
        let mut random = Random::new(3);
        let mean = (0..100_000).map(|_| random.unit()).sum::<f64>() / 100_000.0;
        // The mean of 10^5 uniform draws has standard deviation 1/sqrt(12 * 10^5) < 0.001.
        assert!((mean - 0.5).abs() < 0.005, "mean {mean}");
    }
}
