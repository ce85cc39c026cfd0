//! A Fenwick (binary indexed) tree: prefix sums with point updates, both O(log n)
//! (Fenwick, "A new data structure for cumulative frequency tables", 1994).

use std::ops::{AddAssign, SubAssign};

/// What the tree can sum: object counts (`u32`) or bytes (`u64`).
pub(crate) trait FenwickValue: Copy + Default + AddAssign + SubAssign + Into<u64> {}

impl FenwickValue for u32 {}

impl FenwickValue for u64 {}

/// Prefix sums over positions `0..len`.
pub(crate) struct Fenwick<W> {
    /// 1-based: `tree[i]` holds the sum of the `i & -i` positions ending at position `i - 1`;
    /// `tree[0]` is unused.
    tree: Vec<W>,
}

impl<W: FenwickValue> Fenwick<W> {
    /// A tree over `len` positions, all zero.
    pub(crate) fn new(len: usize) -> Fenwick<W> {
        Fenwick {
            tree: vec![W::default(); len + 1],
        }
    }

    /// Adds `weight` at `position`.
    #[inline]
    pub(crate) fn add(&mut self, position: usize, weight: W) {
        let mut index = position + 1;
        while index < self.tree.len() {
            self.tree[index] += weight;
            index += index & index.wrapping_neg();
        }
    }

    /// Subtracts `weight` at `position`.
    #[inline]
    pub(crate) fn subtract(&mut self, position: usize, weight: W) {
        let mut index = position + 1;
        while index < self.tree.len() {
            self.tree[index] -= weight;
            index += index & index.wrapping_neg();
        }
    }

    /// Sum over positions `0..position`.
    #[inline]
    pub(crate) fn prefix(&self, position: usize) -> W {
        let mut sum = W::default();
        let mut index = position;
        while index > 0 {
            sum += self.tree[index];
            index &= index - 1;
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_sums_match_a_plain_array_after_updates() {
        let values: Vec<u64> = (0..37).map(|i| (i * 7919 % 13) as u64).collect();
        let mut tree = Fenwick::<u64>::new(values.len());
        for (position, &value) in values.iter().enumerate() {
            tree.add(position, value);
        }
        for end in 0..=values.len() {
            let expected: u64 = values[..end].iter().sum();
            assert_eq!(tree.prefix(end), expected, "prefix {end}");
        }
        tree.subtract(5, values[5]);
        assert_eq!(tree.prefix(6), values[..5].iter().sum::<u64>());
    }
}
