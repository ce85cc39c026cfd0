//! The random numbers of the randomized filters: libCacheSim's `next_rand` (`utils/mymath.h`),
//! a Lehmer generator over 128 bits whose output is the high 64 bits of the state, and its way
//! of turning a draw into a probability (`next_rand() % 10_000_000`, so every probability has
//! a resolution of 10⁻⁷).
//!
//! libCacheSim keeps one such state per thread, starting at `0xdeadbeef`, shared by everything
//! random in the process; here each filter owns its own. Seed 0 starts at libCacheSim's state,
//! so a filter with seed 0 draws what a fresh libCacheSim process would if nothing else in it
//! drew first (a second run in the same libCacheSim process goes on from where the first left
//! the state, and a policy that draws too, such as Random eviction, interleaves its draws with
//! the filter's there). Other seeds put a mixed copy of the seed into the state's high half,
//! keeping the low half odd as the multiplicative generator needs.

/// libCacheSim's initial state (`g_lehmer64_state`).
const LIBCACHESIM_STATE: u128 = 0xdead_beef;

/// The Lehmer multiplier libCacheSim uses.
const MULTIPLIER: u128 = 0xda94_2042_e4dd_58b5;

/// libCacheSim's `MAX_MODULE`: draws are reduced modulo this before they are compared.
pub(crate) const DRAW_MODULUS: u64 = 10_000_000;

/// One stream of libCacheSim's random numbers.
#[derive(Clone, Debug)]
pub(crate) struct LibCacheSimRandom {
    state: u128,
}

impl LibCacheSimRandom {
    /// The stream of `seed` (0: libCacheSim's own).
    pub(crate) fn new(seed: u64) -> LibCacheSimRandom {
        let high = if seed == 0 { 0 } else { split_mix(seed) };
        LibCacheSimRandom {
            state: (u128::from(high) << 64) | LIBCACHESIM_STATE,
        }
    }

    /// The next 64 random bits (`next_rand`).
    #[inline]
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_mul(MULTIPLIER);
        (self.state >> 64) as u64
    }

    /// A draw from `0..DRAW_MODULUS` (`next_rand() % MAX_MODULE`).
    #[inline]
    pub(crate) fn next_draw(&mut self) -> u64 {
        self.next_u64() % DRAW_MODULUS
    }

    /// True with probability `probability`, rounded as libCacheSim does: the draw, scaled to
    /// [0, 1), is below it.
    #[inline]
    pub(crate) fn chance(&mut self, probability: f64) -> bool {
        (self.next_draw() as f64) / (DRAW_MODULUS as f64) < probability
    }
}

/// SplitMix64's finaliser: spreads a small seed over all 64 bits.
fn split_mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_zero_is_libcachesims_stream() {
        // The first draws of a fresh libCacheSim thread: 0xdeadbeef·m, ·m², … as 128-bit
        // products, high halves.
        let mut random = LibCacheSimRandom::new(0);
        let mut state: u128 = 0xdead_beef;
        for _ in 0..4 {
            state = state.wrapping_mul(MULTIPLIER);
            assert_eq!(random.next_u64(), (state >> 64) as u64);
        }
        assert_ne!(
            LibCacheSimRandom::new(1).next_u64(),
            LibCacheSimRandom::new(0).next_u64()
        );
    }

    #[test]
    fn chance_is_roughly_its_probability() {
        let mut random = LibCacheSimRandom::new(3);
        let hits = (0..100_000).filter(|_| random.chance(0.3)).count();
        assert!((hits as f64 / 100_000.0 - 0.3).abs() < 0.01, "{hits}");
        assert!(!(0..1000).any(|_| random.chance(0.0)));
        assert!((0..1000).all(|_| random.chance(1.0)));
    }
}
