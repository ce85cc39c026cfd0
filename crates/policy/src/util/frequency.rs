//! Objects grouped by access frequency, for the LFU experts of LeCaR and Cacheus: the least
//! frequent objects, in the order they reached their frequency, in O(1) per hit.
//!
//! Each frequency that some object has is a bucket (a list, front: the object that reached that
//! frequency last), found by frequency in a [`KeyTable`]. The lowest non-empty frequency comes
//! from a bitset over frequencies with a summary bit per 64-bit word, levels up to one word,
//! so finding it costs one word per level. Unlike a sorted list of buckets, this places an
//! object at any frequency (CR-LFU restores a frequency from its history) without a search.

use super::key_table::KeyTable;
use super::prefetch::prefetch_read;
use super::{List, Slab};

/// What a member node records besides its key and size.
#[derive(Clone, Copy, Debug)]
struct Member {
    bucket: u32,
    /// The caller's slot for this object.
    owner: u32,
}

/// The objects of one frequency.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    frequency: u64,
    /// Front: the object that reached this frequency last.
    members: List,
}

/// Objects by frequency; each object is a member node the caller keeps the index of.
#[derive(Clone, Debug)]
pub struct FrequencyBuckets {
    nodes: Slab<Member>,
    buckets: Vec<Bucket>,
    free_buckets: Vec<u32>,
    by_frequency: KeyTable,
    present: FrequencySet,
}

impl Default for FrequencyBuckets {
    fn default() -> Self {
        FrequencyBuckets {
            nodes: Slab::with_capacity(0),
            buckets: Vec::new(),
            free_buckets: Vec::new(),
            by_frequency: KeyTable::default(),
            present: FrequencySet::default(),
        }
    }
}

impl FrequencyBuckets {
    /// Adds an object at `frequency`, as the last to reach it; returns its member node.
    pub fn insert(&mut self, key: u64, size: u32, owner: u32, frequency: u64) -> u32 {
        let bucket = self.bucket_of(frequency);
        let node = self.nodes.alloc(key, size, Member { bucket, owner });
        self.buckets[bucket as usize]
            .members
            .push_front(&mut self.nodes, node);
        node
    }

    /// Moves `node` up one frequency, as the last to reach it there.
    #[inline]
    pub fn increment(&mut self, node: u32) {
        let bucket = self.nodes.get(node).data.bucket;
        let frequency = self.buckets[bucket as usize].frequency;
        let target = self.bucket_of(frequency + 1);
        self.buckets[bucket as usize]
            .members
            .unlink(&mut self.nodes, node);
        self.drop_if_empty(bucket);
        self.nodes.get_mut(node).data.bucket = target;
        self.buckets[target as usize]
            .members
            .push_front(&mut self.nodes, node);
    }

    /// Drops `node`; its index may be handed out again.
    #[inline]
    pub fn remove(&mut self, node: u32) {
        let bucket = self.nodes.get(node).data.bucket;
        self.buckets[bucket as usize]
            .members
            .unlink(&mut self.nodes, node);
        self.drop_if_empty(bucket);
        self.nodes.release(node);
    }

    /// The frequency of `node`.
    #[inline]
    pub fn frequency(&self, node: u32) -> u64 {
        self.buckets[self.nodes.get(node).data.bucket as usize].frequency
    }

    /// The caller's slot of `node`.
    #[inline]
    pub fn owner(&self, node: u32) -> u32 {
        self.nodes.get(node).data.owner
    }

    /// The least frequent object that reached its frequency first (plain LFU's victim).
    #[inline]
    pub fn least_frequent_earliest(&self) -> Option<u32> {
        let bucket = self.lowest_bucket()?;
        Some(self.buckets[bucket as usize].members.tail)
    }

    /// The least frequent object that reached its frequency last (CR-LFU's victim).
    #[inline]
    pub fn least_frequent_latest(&self) -> Option<u32> {
        let bucket = self.lowest_bucket()?;
        Some(self.buckets[bucket as usize].members.head)
    }

    /// Starts loading `node` (a hint).
    #[inline]
    pub fn prefetch(&self, node: u32) {
        prefetch_read(self.nodes.get(node));
    }

    fn lowest_bucket(&self) -> Option<u32> {
        let frequency = self.present.first()?;
        self.by_frequency.get(frequency)
    }

    /// The bucket of `frequency`, made if there is none.
    #[inline]
    fn bucket_of(&mut self, frequency: u64) -> u32 {
        if let Some(bucket) = self.by_frequency.get(frequency) {
            return bucket;
        }
        let bucket = Bucket {
            frequency,
            members: List::default(),
        };
        let index = match self.free_buckets.pop() {
            Some(index) => {
                self.buckets[index as usize] = bucket;
                index
            }
            None => {
                self.buckets.push(bucket);
                (self.buckets.len() - 1) as u32
            }
        };
        self.by_frequency.insert(frequency, index);
        self.present.insert(frequency);
        index
    }

    fn drop_if_empty(&mut self, bucket: u32) {
        let Bucket { frequency, members } = self.buckets[bucket as usize];
        if members.is_empty() {
            self.by_frequency.remove(frequency);
            self.present.remove(frequency);
            self.free_buckets.push(bucket);
        }
    }
}

/// A set of frequencies that finds its smallest member in one word per level: level 0 has a
/// bit per frequency, each level above a bit per non-zero word of the level below, up to a
/// level of one word.
#[derive(Clone, Debug)]
struct FrequencySet {
    levels: Vec<Vec<u64>>,
}

impl Default for FrequencySet {
    fn default() -> Self {
        FrequencySet {
            levels: vec![vec![0]],
        }
    }
}

impl FrequencySet {
    fn insert(&mut self, value: u64) {
        self.make_room_for(value);
        let mut index = value as usize;
        for level in &mut self.levels {
            let word = &mut level[index / 64];
            let was_empty = *word == 0;
            *word |= 1 << (index % 64);
            if !was_empty {
                return;
            }
            index /= 64;
        }
    }

    fn remove(&mut self, value: u64) {
        let mut index = value as usize;
        for level in &mut self.levels {
            let word = &mut level[index / 64];
            *word &= !(1 << (index % 64));
            if *word != 0 {
                return;
            }
            index /= 64;
        }
    }

    fn first(&self) -> Option<u64> {
        let top = self.levels.last().expect("at least one level")[0];
        if top == 0 {
            return None;
        }
        let mut index = top.trailing_zeros() as usize;
        for level in self.levels.iter().rev().skip(1) {
            index = index * 64 + level[index].trailing_zeros() as usize;
        }
        Some(index as u64)
    }

    /// Grows the levels so that level 0 has a bit for `value` and the top is one word.
    fn make_room_for(&mut self, value: u64) {
        let mut words = value as usize / 64 + 1;
        if words <= self.levels[0].len() {
            return;
        }
        let mut level = 0;
        loop {
            if level == self.levels.len() {
                let below = &self.levels[level - 1];
                let mut summary = vec![0u64; below.len().div_ceil(64)];
                for (index, word) in below.iter().enumerate() {
                    if *word != 0 {
                        summary[index / 64] |= 1 << (index % 64);
                    }
                }
                self.levels.push(summary);
            }
            if self.levels[level].len() < words {
                self.levels[level].resize(words, 0);
            }
            let len = self.levels[level].len();
            if len == 1 {
                return;
            }
            words = len.div_ceil(64);
            level += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn lowest_bucket_in_arrival_order() {
        let mut buckets = FrequencyBuckets::default();
        let a = buckets.insert(1, 1, 10, 1);
        let b = buckets.insert(2, 1, 20, 1);
        let c = buckets.insert(3, 1, 30, 5);
        assert_eq!(buckets.least_frequent_earliest(), Some(a));
        assert_eq!(buckets.least_frequent_latest(), Some(b));
        buckets.increment(a);
        assert_eq!(buckets.frequency(a), 2);
        assert_eq!(buckets.least_frequent_earliest(), Some(b));
        buckets.remove(b);
        assert_eq!(buckets.least_frequent_earliest(), Some(a));
        buckets.remove(a);
        assert_eq!(buckets.least_frequent_latest(), Some(c));
        assert_eq!(buckets.owner(c), 30);
        buckets.remove(c);
        assert_eq!(buckets.least_frequent_latest(), None);
    }

    proptest! {
        #[test]
        fn set_finds_its_smallest_member(ops in proptest::collection::vec((0u64..300_000, any::<bool>()), 1..200)) {
            let mut set = FrequencySet::default();
            let mut model = BTreeSet::new();
            for (value, add) in ops {
                // Small values are common in practice; fold half the draws down.
                let value = if value % 2 == 0 { value % 200 } else { value };
                if add {
                    if model.insert(value) {
                        set.insert(value);
                    }
                } else if model.remove(&value) {
                    set.remove(value);
                }
                prop_assert_eq!(set.first(), model.first().copied());
            }
        }
    }
}
