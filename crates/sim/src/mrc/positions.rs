//! The weights of stack positions with fast sums below a position: a two-level Fenwick tree.
//! Each position's weight is stored flat, and a Fenwick tree sums whole blocks of positions,
//! so a query reads one small tree (which stays in cache) plus one block of neighbours, where
//! a plain Fenwick tree over every position would miss the cache at most of its ~20 levels.

use super::fenwick::Fenwick;

/// Positions weighted by what a stack distance counts.
pub(crate) trait Positions {
    /// What one request for an object of `size` bytes weighs.
    fn weight_of(size: u32) -> u64;

    /// `len` empty positions (rounded up to whole blocks).
    fn new(len: usize) -> Self;

    /// Number of positions.
    fn len(&self) -> usize;

    /// Occupies the empty `position` with an object of `size` bytes.
    fn insert(&mut self, position: usize, size: u32);

    /// Empties `position`, which holds an object of `size` bytes.
    fn remove(&mut self, position: usize, size: u32);

    /// Total weight at positions `0..position`.
    fn weight_before(&self, position: usize) -> u64;

    /// Total weight of all positions.
    fn total(&self) -> u64;
}

/// Object counting: one bit per position, blocks of one cache line (512 positions).
pub(crate) struct ObjectPositions {
    bits: Vec<u64>,
    blocks: Fenwick<u32>,
    total: u64,
}

const WORDS_PER_BLOCK: usize = 8;
const BITS_PER_BLOCK: usize = WORDS_PER_BLOCK * 64;

impl Positions for ObjectPositions {
    #[inline]
    fn weight_of(_size: u32) -> u64 {
        1
    }

    fn new(len: usize) -> ObjectPositions {
        let blocks = len.div_ceil(BITS_PER_BLOCK).max(1);
        ObjectPositions {
            bits: vec![0; blocks * WORDS_PER_BLOCK],
            blocks: Fenwick::new(blocks),
            total: 0,
        }
    }

    fn len(&self) -> usize {
        self.bits.len() * 64
    }

    #[inline]
    fn insert(&mut self, position: usize, _size: u32) {
        self.bits[position / 64] |= 1 << (position % 64);
        self.blocks.add(position / BITS_PER_BLOCK, 1);
        self.total += 1;
    }

    #[inline]
    fn remove(&mut self, position: usize, _size: u32) {
        self.bits[position / 64] &= !(1 << (position % 64));
        self.blocks.subtract(position / BITS_PER_BLOCK, 1);
        self.total -= 1;
    }

    #[inline]
    fn weight_before(&self, position: usize) -> u64 {
        let block = position / BITS_PER_BLOCK;
        let word = position / 64;
        let mut sum = u64::from(self.blocks.prefix(block));
        for bits in &self.bits[block * WORDS_PER_BLOCK..word] {
            sum += u64::from(bits.count_ones());
        }
        let below = self.bits[word] & ((1u64 << (position % 64)) - 1);
        sum + u64::from(below.count_ones())
    }

    fn total(&self) -> u64 {
        self.total
    }
}

/// Byte counting: each position's size, blocks of one cache line (16 positions).
pub(crate) struct BytePositions {
    sizes: Vec<SizeBlock>,
    blocks: Fenwick<u64>,
    total: u64,
}

const SIZES_PER_BLOCK: usize = 16;

/// The sizes of one block, aligned so that a block is exactly one cache line.
#[derive(Clone, Copy, Default)]
#[repr(align(64))]
struct SizeBlock([u32; SIZES_PER_BLOCK]);

impl Positions for BytePositions {
    #[inline]
    fn weight_of(size: u32) -> u64 {
        u64::from(size)
    }

    fn new(len: usize) -> BytePositions {
        let blocks = len.div_ceil(SIZES_PER_BLOCK).max(1);
        BytePositions {
            sizes: vec![SizeBlock::default(); blocks],
            blocks: Fenwick::new(blocks),
            total: 0,
        }
    }

    fn len(&self) -> usize {
        self.sizes.len() * SIZES_PER_BLOCK
    }

    #[inline]
    fn insert(&mut self, position: usize, size: u32) {
        let block = position / SIZES_PER_BLOCK;
        self.sizes[block].0[position % SIZES_PER_BLOCK] = size;
        self.blocks.add(block, u64::from(size));
        self.total += u64::from(size);
    }

    #[inline]
    fn remove(&mut self, position: usize, size: u32) {
        let block = position / SIZES_PER_BLOCK;
        self.sizes[block].0[position % SIZES_PER_BLOCK] = 0;
        self.blocks.subtract(block, u64::from(size));
        self.total -= u64::from(size);
    }

    #[inline]
    fn weight_before(&self, position: usize) -> u64 {
        let block = position / SIZES_PER_BLOCK;
        let in_block: u64 = self.sizes[block].0[..position % SIZES_PER_BLOCK]
            .iter()
            .map(|&size| u64::from(size))
            .sum();
        self.blocks.prefix(block) + in_block
    }

    fn total(&self) -> u64 {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check<P: Positions>() {
        let mut positions = P::new(2000);
        assert!(positions.len() >= 2000);
        let mut plain = vec![0u64; positions.len()];
        for position in (0..positions.len()).filter(|p| p % 3 != 1) {
            let size = (position % 7 + 1) as u32;
            positions.insert(position, size);
            plain[position] = P::weight_of(size);
        }
        for position in (0..positions.len()).step_by(5) {
            if plain[position] != 0 {
                let size = (position % 7 + 1) as u32;
                positions.remove(position, size);
                plain[position] = 0;
            }
        }
        for position in 0..positions.len() {
            let expected: u64 = plain[..position].iter().sum();
            assert_eq!(positions.weight_before(position), expected, "at {position}");
        }
        assert_eq!(positions.total(), plain.iter().sum::<u64>());
    }

    #[test]
    fn sums_below_match_a_plain_array() {
        check::<ObjectPositions>();
        check::<BytePositions>();
    }
}
