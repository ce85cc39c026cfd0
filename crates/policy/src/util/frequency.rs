//! Objects grouped by access frequency, for LFU and the LFU experts of LeCaR and Cacheus: the
//! least frequent objects, in the order they reached their frequency, in O(1) per hit.
//!
//! Each frequency that some object has is a bucket (a list, front: the object that reached that
//! frequency last), and the buckets form a list sorted by frequency, so a hit moves its object
//! to the next bucket or a new one beside it without a search, and the least frequent bucket is
//! the first. Placing an object at any other frequency than 1 (CR-LFU restores the frequency an
//! object left with) walks the bucket list from the least frequent end: at most one step per
//! distinct frequency held, and objects coming back from a history are mostly rare ones.

use super::prefetch::prefetch_read;
use super::{List, Slab, NIL};

/// The objects of one frequency, linked in ascending frequency order.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    frequency: u64,
    /// Front: the object that reached this frequency last.
    members: List,
    lower: u32,
    higher: u32,
}

/// Objects by frequency. An object is named by a slot: the caller's (a slab index of its own,
/// given to [`Self::insert`], so that one index finds the object in both and a caller that
/// knows a slot can prefetch the member without first reading its own node) or one handed out
/// here ([`Self::insert_new`]); one structure uses one way or the other.
#[derive(Clone, Debug)]
pub struct FrequencyBuckets {
    /// Member nodes; the datum is the member's bucket.
    members: Slab<u32>,
    buckets: Vec<Bucket>,
    free_buckets: Vec<u32>,
    /// The least frequent non-empty bucket, or [`NIL`].
    lowest: u32,
}

impl Default for FrequencyBuckets {
    fn default() -> Self {
        FrequencyBuckets {
            members: Slab::with_capacity(0),
            buckets: Vec::new(),
            free_buckets: Vec::new(),
            lowest: NIL,
        }
    }
}

impl FrequencyBuckets {
    /// Adds the object in the caller's `slot` at `frequency`, as the last to reach it.
    pub fn insert(&mut self, slot: u32, key: u64, size: u32, frequency: u64) {
        let bucket = self.bucket_at(frequency);
        self.members.put(slot, key, size, bucket);
        self.buckets[bucket as usize]
            .members
            .push_front(&mut self.members, slot);
    }

    /// Adds an object at `frequency`, as the last to reach it, in a slot handed out here;
    /// returns the slot.
    #[inline]
    pub fn insert_new(&mut self, key: u64, size: u32, frequency: u64) -> u32 {
        let bucket = self.bucket_at(frequency);
        let slot = self.members.alloc(key, size, bucket);
        self.buckets[bucket as usize]
            .members
            .push_front(&mut self.members, slot);
        slot
    }

    /// Moves the object in `slot` up one frequency, as the last to reach it there.
    #[inline]
    pub fn increment(&mut self, slot: u32) {
        let bucket = self.members.get(slot).data;
        let Bucket {
            frequency, higher, ..
        } = self.buckets[bucket as usize];
        let target = if higher != NIL && self.buckets[higher as usize].frequency == frequency + 1 {
            higher
        } else {
            self.new_bucket(frequency + 1, bucket, higher)
        };
        self.buckets[bucket as usize]
            .members
            .unlink(&mut self.members, slot);
        self.members.get_mut(slot).data = target;
        self.buckets[target as usize]
            .members
            .push_front(&mut self.members, slot);
        self.drop_if_empty(bucket);
    }

    /// Drops the object in `slot`; a caller's slot may be inserted again.
    #[inline]
    pub fn remove(&mut self, slot: u32) {
        let bucket = self.members.get(slot).data;
        self.buckets[bucket as usize]
            .members
            .unlink(&mut self.members, slot);
        self.drop_if_empty(bucket);
    }

    /// Drops the object in a slot handed out by [`Self::insert_new`], which may be handed out
    /// again.
    #[inline]
    pub fn remove_new(&mut self, slot: u32) {
        self.remove(slot);
        self.members.release(slot);
    }

    /// The key and size of the object in `slot`.
    #[inline]
    pub fn object(&self, slot: u32) -> (u64, u32) {
        let member = self.members.get(slot);
        (member.key, member.size)
    }

    /// The frequency of the object in `slot`.
    #[inline]
    pub fn frequency(&self, slot: u32) -> u64 {
        self.buckets[self.members.get(slot).data as usize].frequency
    }

    /// The slot of the least frequent object that reached its frequency first (plain LFU's
    /// victim).
    #[inline]
    pub fn least_frequent_earliest(&self) -> Option<u32> {
        let bucket = self.buckets.get(self.lowest as usize)?;
        Some(bucket.members.tail)
    }

    /// The slot of the least frequent object that reached its frequency last (CR-LFU's
    /// victim).
    #[inline]
    pub fn least_frequent_latest(&self) -> Option<u32> {
        let bucket = self.buckets.get(self.lowest as usize)?;
        Some(bucket.members.head)
    }

    /// Starts loading the member node of `slot` (a hint; any slot, member or not).
    #[inline]
    pub fn prefetch(&self, slot: u32) {
        if let Some(member) = self.members.try_get(slot) {
            prefetch_read(member);
        }
    }

    /// Starts loading what moving `slot` to its next bucket touches: its neighbours in its
    /// bucket (its member node should have arrived).
    #[inline]
    pub fn prefetch_neighbours(&self, slot: u32) {
        self.members.prefetch_neighbours(slot);
    }

    /// Starts loading the next plain-LFU victim ([`Self::least_frequent_earliest`]) and the
    /// member that follows it out; returns the victim's slot.
    #[inline]
    pub fn prefetch_least_frequent_earliest(&self) -> Option<u32> {
        let victim = self.least_frequent_earliest()?;
        prefetch_read(self.members.get(victim));
        let before = self.members.prev(victim);
        if before != NIL {
            prefetch_read(self.members.get(before));
        }
        Some(victim)
    }

    /// The bucket of `frequency`, made if there is none, found from the least frequent end.
    #[inline]
    fn bucket_at(&mut self, frequency: u64) -> u32 {
        let (mut lower, mut higher) = (NIL, self.lowest);
        while let Some(bucket) = self.buckets.get(higher as usize) {
            if bucket.frequency == frequency {
                return higher;
            }
            if bucket.frequency > frequency {
                break;
            }
            (lower, higher) = (higher, bucket.higher);
        }
        self.new_bucket(frequency, lower, higher)
    }

    /// A new empty bucket for `frequency`, linked between `lower` and `higher`.
    fn new_bucket(&mut self, frequency: u64, lower: u32, higher: u32) -> u32 {
        let bucket = Bucket {
            frequency,
            members: List::default(),
            lower,
            higher,
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
        self.join(lower, index);
        self.join(index, higher);
        index
    }

    /// Makes `higher` follow `lower` in the bucket list (either may be [`NIL`]: the ends).
    fn join(&mut self, lower: u32, higher: u32) {
        if lower == NIL {
            self.lowest = higher;
        } else {
            self.buckets[lower as usize].higher = higher;
        }
        if higher != NIL {
            self.buckets[higher as usize].lower = lower;
        }
    }

    /// Unlinks `bucket` from the bucket list if it holds no object.
    fn drop_if_empty(&mut self, bucket: u32) {
        let Bucket {
            members,
            lower,
            higher,
            ..
        } = self.buckets[bucket as usize];
        if !members.is_empty() {
            return;
        }
        self.join(lower, higher);
        self.free_buckets.push(bucket);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn lowest_bucket_in_arrival_order() {
        let mut buckets = FrequencyBuckets::default();
        let (a, b, c) = (0, 1, 7);
        buckets.insert(a, 1, 1, 1);
        buckets.insert(b, 2, 1, 1);
        buckets.insert(c, 3, 1, 5);
        assert_eq!(buckets.least_frequent_earliest(), Some(a));
        assert_eq!(buckets.least_frequent_latest(), Some(b));
        buckets.increment(a);
        assert_eq!(buckets.frequency(a), 2);
        assert_eq!(buckets.least_frequent_earliest(), Some(b));
        buckets.remove(b);
        assert_eq!(buckets.least_frequent_earliest(), Some(a));
        buckets.remove(a);
        assert_eq!(buckets.least_frequent_latest(), Some(c));
        buckets.remove(c);
        assert_eq!(buckets.least_frequent_latest(), None);
        // A slot may come back, at any frequency.
        buckets.insert(b, 4, 1, 3);
        assert_eq!(buckets.least_frequent_earliest(), Some(b));
        assert_eq!(buckets.frequency(b), 3);
    }

    proptest! {
        /// Against a model: each object's frequency and arrival order at it; the victims are
        /// the least frequent object that arrived first and last.
        #[test]
        fn victims_match_a_model(ops in proptest::collection::vec((0u32..12, 0u8..4, 1u64..9), 1..300)) {
            let mut buckets = FrequencyBuckets::default();
            // slot -> (frequency, arrival stamp at that frequency)
            let mut model: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
            for (stamp, (slot, op, frequency)) in (0u64..).zip(ops) {
                match (op, model.contains_key(&slot)) {
                    (0 | 1, false) => {
                        buckets.insert(slot, u64::from(slot), 1, frequency);
                        model.insert(slot, (frequency, stamp));
                    }
                    (0 | 1, true) => {
                        buckets.increment(slot);
                        let entry = model.get_mut(&slot).unwrap();
                        *entry = (entry.0 + 1, stamp);
                    }
                    (2, true) => {
                        buckets.remove(slot);
                        model.remove(&slot);
                    }
                    _ => {}
                }
                let earliest = model.iter().min_by_key(|(_, &(f, s))| (f, s)).map(|(&slot, _)| slot);
                let latest = model
                    .iter()
                    .min_by_key(|(_, &(f, s))| (f, std::cmp::Reverse(s)))
                    .map(|(&slot, _)| slot);
                prop_assert_eq!(buckets.least_frequent_earliest(), earliest);
                prop_assert_eq!(buckets.least_frequent_latest(), latest);
                for (&slot, &(frequency, _)) in &model {
                    prop_assert_eq!(buckets.frequency(slot), frequency);
                }
            }
        }
    }
}
