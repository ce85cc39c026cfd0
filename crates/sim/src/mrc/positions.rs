//! The weights of stack positions with fast sums below a position: a two-level Fenwick tree.
//! Each position's weight is stored flat, and a Fenwick tree sums whole blocks of positions,
//! so a query reads one small tree (which stays in cache) plus one block of neighbours, where
//! a plain Fenwick tree over every position would miss the cache at most of its ~20 levels.

use super::fenwick::{Fenwick, FenwickValue};

/// Sums of blocks of positions. The newest block, where every access inserts, is summed
/// outside the tree: inserting there, and re-accessing what was just accessed, then costs no
/// tree walk. The tree holds the blocks before it; the blocks after it are still empty.
struct BlockSums<W> {
    sealed: Fenwick<W>,
    newest_block: usize,
    newest_sum: W,
    total: u64,
}

impl<W: FenwickValue> BlockSums<W> {
    fn new(blocks: usize) -> BlockSums<W> {
        BlockSums {
            sealed: Fenwick::new(blocks),
            newest_block: 0,
            newest_sum: W::default(),
            total: 0,
        }
    }

    #[inline]
    fn add(&mut self, block: usize, weight: W) {
        if block > self.newest_block {
            // The newest block only moves forward; what it held joins the tree.
            self.sealed.add(self.newest_block, self.newest_sum);
            self.newest_block = block;
            self.newest_sum = W::default();
        }
        if block == self.newest_block {
            self.newest_sum += weight;
        } else {
            self.sealed.add(block, weight);
        }
        self.total += weight.into();
    }

    #[inline]
    fn subtract(&mut self, block: usize, weight: W) {
        if block == self.newest_block {
            self.newest_sum -= weight;
        } else {
            self.sealed.subtract(block, weight);
        }
        self.total -= weight.into();
    }

    /// Sum of the blocks before `block`.
    #[inline]
    fn before(&self, block: usize) -> u64 {
        if block == self.newest_block {
            self.total - self.newest_sum.into()
        } else {
            self.sealed.prefix(block).into()
        }
    }
}

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
    blocks: BlockSums<u32>,
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
            blocks: BlockSums::new(blocks),
        }
    }

    fn len(&self) -> usize {
        self.bits.len() * 64
    }

    #[inline]
    fn insert(&mut self, position: usize, _size: u32) {
        self.bits[position / 64] |= 1 << (position % 64);
        self.blocks.add(position / BITS_PER_BLOCK, 1);
    }

    #[inline]
    fn remove(&mut self, position: usize, _size: u32) {
        self.bits[position / 64] &= !(1 << (position % 64));
        self.blocks.subtract(position / BITS_PER_BLOCK, 1);
    }

    #[inline]
    fn weight_before(&self, position: usize) -> u64 {
        let block = position / BITS_PER_BLOCK;
        let word = position / 64;
        let mut sum = self.blocks.before(block);
        for bits in &self.bits[block * WORDS_PER_BLOCK..word] {
            sum += u64::from(bits.count_ones());
        }
        let below = self.bits[word] & ((1u64 << (position % 64)) - 1);
        sum + u64::from(below.count_ones())
    }

    fn total(&self) -> u64 {
        self.blocks.total
    }
}

/// Byte counting: each position's size, blocks of one cache line (16 positions).
pub(crate) struct BytePositions {
    sizes: Vec<SizeBlock>,
    blocks: BlockSums<u64>,
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
            blocks: BlockSums::new(blocks),
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
    }

    #[inline]
    fn remove(&mut self, position: usize, size: u32) {
        let block = position / SIZES_PER_BLOCK;
        self.sizes[block].0[position % SIZES_PER_BLOCK] = 0;
        self.blocks.subtract(block, u64::from(size));
    }

    #[inline]
    fn weight_before(&self, position: usize) -> u64 {
        let block = position / SIZES_PER_BLOCK;
        let in_block: u64 = self.sizes[block].0[..position % SIZES_PER_BLOCK]
            .iter()
            .map(|&size| u64::from(size))
            .sum();
        self.blocks.before(block) + in_block
    }

    fn total(&self) -> u64 {
        self.blocks.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check<P: Positions>() {
        let mut positions = P::new(2000);
        assert!(positions.len() >= 2000);
        let len = positions.len();
        let mut plain = vec![0u64; len];
        // Scrambled order, as a renumbering inserts; accesses insert in increasing order, which
        // the stack tests cover.
        let scrambled = (0..len).map(|i| i * 7919 % len);
        for position in scrambled.filter(|p| p % 3 != 1) {
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
