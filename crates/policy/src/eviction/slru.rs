//! Segmented LRU (Karedla, Love & Wherry, "Caching Strategies to Improve Disk System
//! Performance", IEEE Computer 27(3), 1994, §"Segmented LRU"), generalised to any number of
//! segments, over byte sizes, with the same decisions as libCacheSim's `SLRU.c` (the version
//! bundled in the `libcachesim` 0.3.5 Python package) and its defaults: four segments of
//! `⌊capacity / 4⌋` bytes each (`n-seg=4`), or segments in proportion to `seg-size` weights
//! (`seg-size=1:4` is the paper's probationary fifth and protected four fifths, and what
//! libCacheSim's W-TinyLFU builds as its main cache).
//!
//! Segments are LRU lists numbered from 0 (probationary, the eviction end) up; a hit moves an
//! object one segment up, and a segment over its limit pushes its LRU object down one
//! (cooling), so an object climbs one segment per hit and falls back when it stops being hit.
//!
//! Where libCacheSim departs from the paper, and so do we:
//! - A new object enters the lowest segment that has room for it, not always segment 0: while
//!   the cache fills, new objects land in higher segments once the lower ones are full. Only
//!   when no segment has room does it enter segment 0, which may then run over its limit.
//! - Victims come from the LRU end of the lowest non-empty segment, and the cache evicts only
//!   when the whole cache is full, not when segment 0 is.
//! - A hit in the top segment moves the object to that segment's MRU end; a hit below moves it
//!   to the MRU end of the next segment up, whose overflow cools down segment by segment. When
//!   segment 0 overflows while cooling, its LRU object leaves the cache, so a hit can evict.
//!   [`EvictionPolicy::lookup`] has no output for evictions, so they are reported by the next
//!   [`EvictionPolicy::admit`] (or [`EvictionPolicy::drain_hit_evictions`]).
//! - An object larger than segment 0's limit is never admitted (libCacheSim's
//!   `SLRU_can_insert`).
//! - Segment limits: `⌊capacity / n-seg⌋` each by default; with `seg-size=w0:w1:…` (integer
//!   weights, segment 0 first, at most 16), `⌊w_i / Σw × capacity⌋` computed in doubles.

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::error::PolicyError;
use crate::util::key_table::KeyTable;
use crate::util::prefetch::prefetch_read;
use crate::util::{List, Slab, NIL};

/// libCacheSim's default number of segments.
pub const SEGMENTS: usize = 4;
/// The most segments `seg-size` can name (libCacheSim's `SLRU_MAX_N_SEG`).
pub const MAX_WEIGHTED_SEGMENTS: usize = 16;
/// The most segments `n-seg` can ask for (segment numbers are stored in a byte).
pub const MAX_SEGMENTS: usize = 255;

/// Segmented LRU over a byte capacity.
pub struct Slru {
    /// Byte limit of each segment, segment 0 (probationary) first.
    limits: Vec<u64>,
    /// Each segment's LRU list, front most recently used.
    segments: Vec<List>,
    space: Space,
    map: KeyTable,
    /// A node's segment number.
    slab: Slab<u8>,
    /// Objects cooled out of segment 0 by hits, not yet reported.
    evicted_on_hits: Vec<Evicted>,
}

impl Slru {
    /// An empty SLRU cache of `capacity` bytes with libCacheSim's four equal segments.
    pub fn new(capacity: u64) -> Slru {
        Slru::with_segments(capacity, SEGMENTS)
    }

    /// An empty SLRU cache of `capacity` bytes in `segments` segments of
    /// `⌊capacity / segments⌋` bytes each (libCacheSim's `n-seg`).
    pub fn with_segments(capacity: u64, segments: usize) -> Slru {
        assert!((1..=MAX_SEGMENTS).contains(&segments));
        Slru::with_limits(capacity, vec![capacity / segments as u64; segments])
    }

    /// An empty SLRU cache of `capacity` bytes whose segments, segment 0 first, have the given
    /// relative sizes (libCacheSim's `seg-size=1:4`).
    pub fn with_weights(capacity: u64, weights: &[u64]) -> Result<Slru, PolicyError> {
        let sum: u64 = weights.iter().sum();
        if weights.is_empty() || weights.len() > MAX_WEIGHTED_SEGMENTS || sum == 0 {
            return Err(PolicyError::refused(
                "slru",
                format!("seg-size needs 1 to {MAX_WEIGHTED_SEGMENTS} weights with a positive sum"),
            ));
        }
        // libCacheSim divides in doubles, then multiplies by the capacity, then truncates.
        let limits = weights
            .iter()
            .map(|&weight| (weight as f64 / sum as f64 * capacity as f64) as u64)
            .collect();
        Ok(Slru::with_limits(capacity, limits))
    }

    /// Parses `seg-size` as libCacheSim writes it (`1:4`): integer weights separated by
    /// colons.
    pub fn parse_weights(text: &str) -> Result<Vec<u64>, PolicyError> {
        text.split(':')
            .map(|weight| {
                weight
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| PolicyError::OutOfRange {
                        policy: "slru".into(),
                        param: "seg-size".into(),
                        value: text.to_string(),
                        expected: "integer weights separated by colons, such as 1:4".into(),
                    })
            })
            .collect()
    }

    fn with_limits(capacity: u64, limits: Vec<u64>) -> Slru {
        Slru {
            segments: vec![List::default(); limits.len()],
            limits,
            space: Space::new(capacity),
            map: KeyTable::default(),
            slab: Slab::with_capacity(0),
            evicted_on_hits: Vec::new(),
        }
    }

    /// The byte limit of each segment, segment 0 first.
    pub fn limits(&self) -> &[u64] {
        &self.limits
    }

    /// The lowest segment holding bytes: victims come from its LRU end.
    fn victim_segment(&self) -> Option<usize> {
        self.segments.iter().position(|segment| segment.bytes > 0)
    }

    /// Evicts the LRU object of the lowest segment that holds bytes.
    fn evict_lowest(&mut self, evicted: &mut Vec<Evicted>) -> bool {
        let Some(segment) = self.victim_segment() else {
            return false;
        };
        let index = self.segments[segment].tail;
        self.segments[segment].unlink(&mut self.slab, index);
        let node = self.slab.get(index);
        let gone = node.evicted();
        self.map.remove(gone.key);
        self.slab.release(index);
        self.space.release(gone.size);
        evicted.push(gone);
        true
    }

    /// Pushes segment `segment`'s LRU object down one segment, and on down while the segment
    /// below is over its limit; from segment 0 the object leaves the cache.
    fn cool(&mut self, segment: usize) {
        if segment == 0 {
            let mut evicted = std::mem::take(&mut self.evicted_on_hits);
            self.evict_lowest(&mut evicted);
            self.evicted_on_hits = evicted;
            return;
        }
        let index = self.segments[segment].tail;
        self.segments[segment].unlink(&mut self.slab, index);
        self.segments[segment - 1].push_front(&mut self.slab, index);
        self.slab.get_mut(index).data = (segment - 1) as u8;
        while self.segments[segment - 1].bytes > self.limits[segment - 1] {
            self.cool(segment - 1);
        }
    }

    /// Places a missed object without making room first unless no segment has room
    /// (libCacheSim's `SLRU_insert`).
    fn place(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        let size = u64::from(request.size);
        let segment = match (0..self.segments.len())
            .find(|&segment| self.segments[segment].bytes + size <= self.limits[segment])
        {
            Some(segment) => segment,
            None => {
                while !self.space.fits(size) {
                    if !self.evict_lowest(evicted) {
                        break;
                    }
                }
                0
            }
        };
        let index = self.slab.alloc(request.key, request.size, segment as u8);
        self.segments[segment].push_front(&mut self.slab, index);
        self.map.insert(request.key, index);
        self.space.charge(request.size);
    }
}

impl EvictionPolicy for Slru {
    fn space(&self) -> Space {
        self.space
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        let Some(index) = self.map.get(request.key) else {
            return false;
        };
        let segment = usize::from(self.slab.get(index).data);
        let top = self.segments.len() - 1;
        if segment == top {
            self.segments[top].move_to_front(&mut self.slab, index);
            return true;
        }
        self.segments[segment].unlink(&mut self.slab, index);
        self.segments[segment + 1].push_front(&mut self.slab, index);
        self.slab.get_mut(index).data = (segment + 1) as u8;
        // libCacheSim re-reads the object's segment each round: cooling may carry the object
        // itself down when it is larger than its segment's limit.
        loop {
            let at = usize::from(self.slab.get(index).data);
            if self.map.get(request.key) != Some(index)
                || self.segments[at].bytes <= self.limits[at]
            {
                break;
            }
            self.cool(at);
        }
        true
    }

    /// Also reports the objects that hits since the last call evicted.
    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        self.drain_hit_evictions(evicted);
        if !self.can_insert(request) || self.map.get(request.key).is_some() {
            return;
        }
        while !self.space.fits(u64::from(request.size)) {
            if !self.evict_lowest(evicted) {
                return;
            }
        }
        self.place(request, evicted);
    }

    fn remove(&mut self, key: u64) -> bool {
        let Some(index) = self.map.remove(key) else {
            return false;
        };
        let node = self.slab.get(index);
        let (segment, size) = (usize::from(node.data), node.size);
        self.segments[segment].unlink(&mut self.slab, index);
        self.slab.release(index);
        self.space.release(size);
        true
    }

    /// A hit may evict, reported only by the next `admit`: no residency to offer.
    fn contains(&self, _key: u64) -> Option<bool> {
        None
    }

    fn drain_hit_evictions(&mut self, evicted: &mut Vec<Evicted>) {
        evicted.append(&mut self.evicted_on_hits);
    }

    fn serves_inside(&self) -> bool {
        true
    }

    fn next_victim(&self) -> Option<Evicted> {
        let segment = self.victim_segment()?;
        let node = self.slab.get(self.segments[segment].tail);
        Some(node.evicted())
    }

    fn evict_one(&mut self, evicted: &mut Vec<Evicted>) -> bool {
        self.drain_hit_evictions(evicted);
        self.evict_lowest(evicted)
    }

    fn insert(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        self.drain_hit_evictions(evicted);
        if self.map.get(request.key).is_none() {
            self.place(request, evicted);
        }
    }

    /// Objects larger than segment 0 are refused (libCacheSim's `SLRU_can_insert`).
    fn can_insert(&self, request: &Request) -> bool {
        let size = u64::from(request.size);
        size <= self.space.capacity_bytes && size <= self.limits[0]
    }

    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.map.prefetch(key);
    }

    #[inline]
    fn prefetch_node(&self, key: u64) {
        if let Some(index) = self.map.get(key) {
            prefetch_read(self.slab.get(index));
        }
    }

    /// Segment tails move on hits (cooling) and misses (eviction): load them and the nodes
    /// before them.
    #[inline]
    fn prefetch_victims(&self) {
        for segment in &self.segments {
            if segment.tail != NIL {
                let before = self.slab.prev(segment.tail);
                if before != NIL {
                    prefetch_read(self.slab.get(before));
                }
                self.map.prefetch(self.slab.get(segment.tail).key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::model_check::{check_against_model, get, steps};
    use proptest::prelude::*;

    /// Each segment's keys, MRU first, segment 0 first.
    fn segments(slru: &Slru) -> Vec<Vec<u64>> {
        slru.segments
            .iter()
            .map(|segment| {
                let mut keys = Vec::new();
                let mut index = segment.head;
                while index != NIL {
                    keys.push(slru.slab.get(index).key);
                    index = slru.slab.next(index);
                }
                keys
            })
            .collect()
    }

    #[test]
    fn limits_follow_libcachesim() {
        assert_eq!(Slru::new(1003).limits(), [250, 250, 250, 250]);
        let weighted = Slru::with_weights(1003, &[1, 4]).unwrap();
        assert_eq!(weighted.limits(), [200, 802]);
        assert_eq!(Slru::parse_weights("1:2:3").unwrap(), [1, 2, 3]);
        assert!(Slru::parse_weights("1:0.5").is_err());
        assert!(Slru::with_weights(10, &[0, 0]).is_err());
    }

    #[test]
    fn new_objects_fill_the_lowest_segment_with_room() {
        // Four segments of 2.
        let mut slru = Slru::new(8);
        let mut evicted = Vec::new();
        for key in 1..=8 {
            assert!(!get(&mut slru, key, 1, &mut evicted));
        }
        assert_eq!(
            segments(&slru),
            [vec![2, 1], vec![4, 3], vec![6, 5], vec![8, 7]]
        );
        // Full: the victim is segment 0's LRU object, and the newcomer enters segment 0.
        assert!(!get(&mut slru, 9, 1, &mut evicted));
        assert_eq!(evicted, [Evicted { key: 1, size: 1 }]);
        assert_eq!(segments(&slru)[0], [9, 2]);
        // Larger than a segment: refused.
        evicted.clear();
        assert!(!get(&mut slru, 10, 3, &mut evicted));
        assert!(evicted.is_empty());
    }

    #[test]
    fn hits_climb_one_segment_and_overflow_cools_down() {
        let mut slru = Slru::new(8);
        let mut evicted = Vec::new();
        for key in 1..=9 {
            get(&mut slru, key, 1, &mut evicted);
        }
        evicted.clear();
        // Segments [9, 2] [4, 3] [6, 5] [8, 7]; segment 0 is at its limit.
        // A hit on 2 moves it up; segment 1 overflows and cools 3 into segment 0, now at 2.
        assert!(get(&mut slru, 2, 1, &mut evicted));
        assert_eq!(
            segments(&slru),
            [vec![3, 9], vec![2, 4], vec![6, 5], vec![8, 7]]
        );
        // A hit in the top segment only refreshes it.
        assert!(get(&mut slru, 7, 1, &mut evicted));
        assert_eq!(segments(&slru)[3], [7, 8]);
        // Full: segment 0 gives its LRU object, and the newcomer takes its place.
        assert!(!get(&mut slru, 10, 1, &mut evicted));
        assert_eq!(evicted, [Evicted { key: 9, size: 1 }]);
        assert_eq!(segments(&slru)[0], [10, 3]);
        // A hole in segment 2 takes the next newcomer.
        slru.remove(6);
        assert!(!get(&mut slru, 11, 1, &mut evicted));
        assert_eq!(segments(&slru)[2], [11, 5]);
    }

    #[test]
    fn segment_zero_runs_over_when_no_segment_has_room_and_then_hits_evict() {
        // Four segments of 2 in 9 bytes: one byte belongs to no segment.
        let mut slru = Slru::new(9);
        let mut evicted = Vec::new();
        for key in 1..=9 {
            assert!(!get(&mut slru, key, 1, &mut evicted));
        }
        assert!(evicted.is_empty());
        assert_eq!(segments(&slru)[0], [9, 2, 1], "no segment had room for 9");
        // 3 climbs into segment 2, which cools 5 into segment 1.
        assert!(get(&mut slru, 3, 1, &mut evicted));
        assert_eq!(segments(&slru)[1..3], [vec![5, 4], vec![3, 6]]);
        // 1 climbs into segment 1, which cools 4 into segment 0, which is over its limit and
        // loses its LRU object (2) at once, reported by the next admission.
        assert!(get(&mut slru, 1, 1, &mut evicted));
        assert_eq!(segments(&slru)[..2], [vec![4, 9], vec![1, 5]]);
        assert_eq!((slru.len(), slru.used_bytes()), (8, 8));
        assert!(evicted.is_empty());
        assert!(!get(&mut slru, 10, 1, &mut evicted));
        assert_eq!(evicted, [Evicted { key: 2, size: 1 }]);
        assert_eq!(segments(&slru)[0], [10, 4, 9]);
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(
            capacity in 1u64..64,
            weights in proptest::collection::vec(0u64..4, 1..5),
            steps in steps(8),
        ) {
            check_against_model(&mut Slru::new(capacity), &steps)?;
            if weights.iter().sum::<u64>() > 0 {
                check_against_model(&mut Slru::with_weights(capacity, &weights).unwrap(), &steps)?;
            }
        }
    }
}
