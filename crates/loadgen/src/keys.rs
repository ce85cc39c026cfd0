//! Keys and the choice of key for each request. A key is computed from its index whenever it is
//! needed, so a keyspace of any size costs no memory; which index each request uses comes from
//! a seeded xoshiro256++ stream, uniform or Zipf.

use heterarchy_trace::generate::{mix64, Random, ZipfSampler};

use crate::config::Distribution;

/// The 64 characters keys are made of: printable, and none of them a space or control
/// character the text protocol would split or reject.
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/// Each key character carries six bits.
const BITS_PER_CHAR: u32 = 6;
/// Characters drawn from one 64-bit hash.
const CHARS_PER_HASH: usize = (u64::BITS / BITS_PER_CHAR) as usize;

/// The keys of a run: `keys` of them, each exactly `key_bytes` long.
#[derive(Clone, Debug)]
pub struct KeySpace {
    key_bytes: usize,
    /// Trailing characters that spell the index in base 64; they make keys unique.
    index_chars: usize,
}

impl KeySpace {
    /// The keyspace of `keys` distinct keys of `key_bytes` each (see `fits`).
    pub fn new(keys: u64, key_bytes: usize) -> KeySpace {
        KeySpace {
            key_bytes,
            index_chars: index_chars(keys),
        }
    }

    /// Whether `keys` distinct keys can be spelled in `key_bytes` characters.
    pub fn fits(keys: u64, key_bytes: usize) -> bool {
        index_chars(keys) <= key_bytes
    }

    /// The length of every key.
    pub fn key_bytes(&self) -> usize {
        self.key_bytes
    }

    /// Writes the key of `index` into `key`, which is `key_bytes` long. The characters before
    /// the index come from a hash of it, so that keys do not share a long common prefix, which
    /// real keys rarely do and which would favour a server whose key hash mixes poorly.
    fn write(&self, index: u64, key: &mut [u8]) {
        debug_assert_eq!(key.len(), self.key_bytes);
        let (filler, digits) = key.split_at_mut(self.key_bytes - self.index_chars);
        let index_hash = mix64(index);
        for (chunk_number, chunk) in filler.chunks_mut(CHARS_PER_HASH).enumerate() {
            let mut hash = mix64(index_hash.wrapping_add(chunk_number as u64));
            for byte in chunk {
                *byte = ALPHABET[(hash & 63) as usize];
                hash >>= BITS_PER_CHAR;
            }
        }
        let mut rest = index;
        for byte in digits.iter_mut().rev() {
            *byte = ALPHABET[(rest & 63) as usize];
            rest >>= BITS_PER_CHAR;
        }
    }

    /// Appends the key of `index` to `out`.
    pub fn append(&self, index: u64, out: &mut Vec<u8>) {
        let start = out.len();
        out.resize(start + self.key_bytes, 0);
        self.write(index, &mut out[start..]);
    }
}

/// How many base-64 digits spell every index below `keys` (at least one).
fn index_chars(keys: u64) -> usize {
    let largest = keys.saturating_sub(1);
    let bits = u64::BITS - largest.leading_zeros();
    bits.div_ceil(BITS_PER_CHAR).max(1) as usize
}

/// Draws the key index of each request.
pub struct KeyChooser {
    random: Random,
    pick: Pick,
}

enum Pick {
    Uniform {
        keys: u64,
    },
    /// Rank 0, the most popular, is key 0.
    Zipf(ZipfSampler),
}

impl KeyChooser {
    /// Indexes below `keys` drawn by `distribution` from the stream of `seed`.
    pub fn new(keys: u64, distribution: Distribution, seed: u64) -> KeyChooser {
        let pick = match distribution {
            Distribution::Uniform => Pick::Uniform { keys },
            Distribution::Zipf(theta) => Pick::Zipf(ZipfSampler::new(keys, theta)),
        };
        KeyChooser {
            random: Random::new(seed),
            pick,
        }
    }

    /// The next key index.
    pub fn next_key(&mut self) -> u64 {
        match &self.pick {
            Pick::Uniform { keys } => self.random.below(*keys),
            Pick::Zipf(sampler) => sampler.sample(&mut self.random),
        }
    }

    /// A real in [0, 1) from the same stream, to pick the operation.
    pub fn unit(&mut self) -> f64 {
        self.random.unit()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn key(space: &KeySpace, index: u64) -> Vec<u8> {
        let mut out = Vec::new();
        space.append(index, &mut out);
        out
    }

    #[test]
    fn keys_are_unique_printable_and_exactly_as_long_as_asked() {
        for (keys, key_bytes) in [(100_000, 32), (4096, 2), (64, 1), (1, 1), (300, 250)] {
            let space = KeySpace::new(keys, key_bytes);
            let mut seen = HashSet::new();
            for index in 0..keys {
                let bytes = key(&space, index);
                assert_eq!(bytes.len(), key_bytes);
                assert!(bytes.iter().all(|b| b.is_ascii_graphic()), "{bytes:?}");
                assert!(seen.insert(bytes), "key #{index} of {keys} repeats");
            }
        }
    }

    #[test]
    fn keys_depend_only_on_their_index() {
        let space = KeySpace::new(1000, 32);
        // Pinned: a key is a function of its index alone, the same in every process and
        // version, so that a loader and a later checker (or another machine) agree.
        assert_eq!(key(&space, 7), b"F58q-dpw0iJuDvnHIrofrbY4iHVRW_AH");
        assert_eq!(key(&space, 7), key(&KeySpace::new(1000, 32), 7));
        // Two keys differ beyond their index digits: the hashed filler differs too.
        assert_ne!(key(&space, 1)[..30], key(&space, 2)[..30]);
    }

    #[test]
    fn capacity_follows_the_key_length() {
        assert!(KeySpace::fits(64, 1));
        assert!(!KeySpace::fits(65, 1));
        assert!(KeySpace::fits(4096, 2));
        assert!(!KeySpace::fits(4097, 2));
        assert!(KeySpace::fits(u64::MAX, 11));
    }

    #[test]
    fn choices_repeat_per_seed_and_differ_between_seeds() {
        for distribution in [Distribution::Uniform, Distribution::Zipf(0.99)] {
            let draw = |seed| {
                let mut chooser = KeyChooser::new(1000, distribution, seed);
                (0..100).map(|_| chooser.next_key()).collect::<Vec<_>>()
            };
            // Pinned: seed 1 draws the same keys in every run (no clock or entropy inside).
            let expected: &[u64] = match distribution {
                Distribution::Uniform => &[811, 747, 100, 746, 184, 590, 986, 523],
                Distribution::Zipf(_) => &[253, 157, 0, 156, 1, 49, 909, 29],
            };
            assert_eq!(draw(1)[..8], *expected);
            assert_ne!(draw(1), draw(2));
            assert!(draw(3).iter().all(|&index| index < 1000));
        }
    }

    /// The share of draws that fall on the hottest tenth of 100 000 keys.
    fn hottest_tenth_share(distribution: Distribution) -> f64 {
        let keys = 100_000;
        let draws = 200_000;
        let mut chooser = KeyChooser::new(keys, distribution, 5);
        let hot = (0..draws)
            .filter(|_| chooser.next_key() < keys / 10)
            .count();
        hot as f64 / draws as f64
    }

    #[test]
    fn zipf_concentrates_on_the_low_indexes_and_uniform_does_not() {
        // Zipf θ = 0.99: the hottest tenth holds H(10⁴, θ) / H(10⁵, θ) ≈ 0.80 of the mass.
        let zipf = hottest_tenth_share(Distribution::Zipf(0.99));
        assert!((0.75..0.85).contains(&zipf), "zipf share {zipf}");
        let uniform = hottest_tenth_share(Distribution::Uniform);
        assert!((0.09..0.11).contains(&uniform), "uniform share {uniform}");
    }
}
