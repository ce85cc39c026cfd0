//! The fixed, seeded permutation from popularity rank to key, so that the popular keys of a
//! generated workload are scattered over the key space instead of being 0, 1, 2, ...

use super::random::mix64;

/// Rounds of multiply, add and xor-shift; three make neighbouring ranks land far apart.
const ROUNDS: usize = 3;

/// A bijection of [0, n) derived from a seed.
///
/// A keyed bijective mixer over the smallest power-of-two domain 2^b ≥ n is restricted to [0, n)
/// by cycle walking (Black and Rogaway, "Ciphers with arbitrary finite domains", CT-RSA 2002):
/// values outside [0, n) are mixed again until they fall inside. The domain is less than 2n, so
/// a lookup takes fewer than two mixes on average and needs no memory.
#[derive(Clone, Debug)]
pub(crate) struct KeyPermutation {
    items: u64,
    mask: u64,
    shift: u32,
    /// Per round: an odd multiplier and an addend, both derived from the seed.
    keys: [(u64, u64); ROUNDS],
}

impl KeyPermutation {
    /// The permutation of [0, `items`) for `seed`.
    pub(crate) fn new(items: u64, seed: u64) -> KeyPermutation {
        let bits = 64 - items.saturating_sub(1).leading_zeros();
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let mut state = mix64(seed ^ 0x6b65_7973_2d70_6572);
        let keys = std::array::from_fn(|_| {
            let multiplier = state | 1;
            state = mix64(state);
            let addend = state;
            state = mix64(state);
            (multiplier, addend)
        });
        KeyPermutation {
            items,
            mask,
            // An xor with a right shift of at least one bit is invertible; half the width mixes
            // the high half into the low half, which multiplication alone never does.
            shift: bits.div_ceil(2).max(1),
            keys,
        }
    }

    /// The key of popularity rank `rank` < n.
    pub(crate) fn apply(&self, rank: u64) -> u64 {
        let mut value = rank;
        loop {
            for &(multiplier, addend) in &self.keys {
                value = value.wrapping_mul(multiplier).wrapping_add(addend) & self.mask;
                value ^= value >> self.shift;
            }
            if value < self.items {
                return value;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_a_bijection_for_awkward_sizes() {
        for &items in &[1u64, 2, 3, 7, 8, 9, 1000, 4097] {
            let permutation = KeyPermutation::new(items, 42);
            let mut hit = vec![false; items as usize];
            for rank in 0..items {
                let key = permutation.apply(rank);
                assert!(key < items);
                assert!(!hit[key as usize], "{items} items: key {key} reached twice");
                hit[key as usize] = true;
            }
        }
    }

    #[test]
    fn popular_ranks_are_scattered_and_depend_on_the_seed() {
        let first: Vec<u64> = (0..8)
            .map(|r| KeyPermutation::new(1 << 20, 1).apply(r))
            .collect();
        let other: Vec<u64> = (0..8)
            .map(|r| KeyPermutation::new(1 << 20, 2).apply(r))
            .collect();
        assert_ne!(first, other);
        assert_ne!(first, (0..8).collect::<Vec<_>>());
        // Neighbouring ranks should not be neighbouring keys.
        assert!(
            first.windows(2).all(|pair| pair[0].abs_diff(pair[1]) > 16),
            "{first:?}"
        );
    }
}
