//! The pseudo-random draws of randomized policies and admission filters: Lemire's 128-bit
//! multiplicative generator ("lehmer64"), the one libCacheSim's `next_rand` uses
//! (`utils/include/mymath.h`), and libCacheSim's ways of turning its draws into choices.
//!
//! libCacheSim keeps one generator per thread, starting from the state `0xdeadbeef`. Seed 0
//! starts from that same state, so a policy that draws exactly when libCacheSim's does makes
//! the same choices as a libCacheSim cache that is the first to draw in its thread (a fresh
//! `cachesim` process or Python interpreter). Any other seed is spread over the 128-bit state
//! by SplitMix64, so that small seeds (1, 2, 3, …) give unrelated streams from the first draw.

use heterarchy_trace::generate::mix64;

/// libCacheSim's initial generator state (`g_lehmer64_state` in `utils/mymath.c`).
const LIBCACHESIM_STATE: u128 = 0xdead_beef;

/// The generator's multiplier.
const MULTIPLIER: u128 = 0xda94_2042_e4dd_58b5;

/// libCacheSim's `MAX_MODULE`: its admission filters reduce a draw modulo this before comparing
/// it with a probability, so every probability has a resolution of 10⁻⁷.
pub const DRAW_MODULUS: u64 = 10_000_000;

/// A lehmer64 generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lehmer64 {
    state: u128,
}

impl Lehmer64 {
    /// The stream of `seed`: libCacheSim's own for 0, a SplitMix64-spread state otherwise.
    pub fn new(seed: u64) -> Lehmer64 {
        let state = if seed == 0 {
            LIBCACHESIM_STATE
        } else {
            let high = mix64(seed);
            let low = mix64(seed.wrapping_add(1));
            // An odd state keeps the generator on its longest cycle.
            ((u128::from(high) << 64) | u128::from(low)) | 1
        };
        Lehmer64 { state }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_mul(MULTIPLIER);
        (self.state >> 64) as u64
    }

    /// A number in `0..bound` (`bound` > 0), by the high half of a 64×64-bit product
    /// (Lemire), whose bias (at most `bound` / 2⁶⁴) no simulation can see.
    #[inline]
    pub fn below(&mut self, bound: u64) -> u64 {
        debug_assert!(bound > 0);
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }

    /// A draw from `0..DRAW_MODULUS` as libCacheSim's filters make it (`next_rand() %
    /// MAX_MODULE`).
    #[inline]
    pub fn next_draw(&mut self) -> u64 {
        self.next_u64() % DRAW_MODULUS
    }

    /// True with probability `probability`, rounded as libCacheSim's filters round it: the
    /// draw, scaled to [0, 1), is below it.
    #[inline]
    pub fn chance(&mut self, probability: f64) -> bool {
        (self.next_draw() as f64) / (DRAW_MODULUS as f64) < probability
    }

    /// libCacheSim's coin for choosing between two experts: `(next_rand() % 100) / 100.0`, a
    /// multiple of 0.01 in [0, 0.99]. The expert whose weight is above it wins, so a weight
    /// acts as the next multiple of 0.01 up.
    #[inline]
    pub fn percent(&mut self) -> f64 {
        (self.next_u64() % 100) as f64 / 100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_zero_is_libcachesims_stream() {
        // 0xdeadbeef × 0xda942042e4dd58b5 and again, high 64 bits, worked in Python's integers
        // (the first, modulo 1000, is 697: the learning rate 0.698 libcachesim's Cacheus draws).
        let mut rng = Lehmer64::new(0);
        assert_eq!(rng.next_u64(), 0xbe20_cd19);
        assert_eq!(rng.next_u64(), 0x5609_ca4d_13cd_b7ce);
    }

    #[test]
    fn below_covers_its_range_evenly() {
        let mut rng = Lehmer64::new(7);
        let mut counts = [0u32; 5];
        for _ in 0..50_000 {
            counts[rng.below(5) as usize] += 1;
        }
        for count in counts {
            assert!((9_500..10_500).contains(&count), "{counts:?}");
        }
        assert_eq!(rng.below(1), 0);
        let admitted = (0..100_000).filter(|_| rng.chance(0.25)).count();
        assert!((24_000..26_000).contains(&admitted), "{admitted}");
    }

    #[test]
    fn small_seeds_give_spread_draws() {
        let firsts: Vec<f64> = (1..=5).map(|seed| Lehmer64::new(seed).percent()).collect();
        assert!(firsts.iter().all(|draw| (0.0..1.0).contains(draw)));
        let distinct = firsts
            .iter()
            .filter(|draw| firsts.iter().filter(|other| other == draw).count() == 1)
            .count();
        assert!(distinct >= 3, "{firsts:?}");
    }
}
