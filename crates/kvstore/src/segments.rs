//! The segment pool: fixed-size segments that items are appended to, grouped by TTL so that a
//! segment's items expire together, freed whole when they all have, and evicted oldest first
//! when space runs out, as Segcache does (Yang et al., NSDI'21; seed 000 §5.2.5 builds
//! Nyx-Pelikan on it).

use std::collections::BTreeMap;

use crate::expiry::Expiry;
use crate::layout::{SegmentHeader, SEGMENT_HEADER_BYTES, STORE_HEADER_BYTES};

/// Most TTL buckets: log2 of the TTL in seconds spans 1 s to 2^15 s (9 hours), and one more
/// holds longer TTLs and none.
const MAX_BUCKETS: usize = 16;
/// Segments per TTL bucket at least: a small store groups fewer TTLs rather than leave most of
/// its segments half filled.
const SEGMENTS_PER_BUCKET: usize = 8;
/// Pools this small keep no reserve segment (and so never compact): one segment of four is too
/// much to hold back.
const FEWEST_SEGMENTS_WITH_RESERVE: usize = 5;

/// One segment as DRAM knows it.
#[derive(Clone, Debug)]
pub struct Segment {
    pub header: SegmentHeader,
    /// Where the next record goes, from the segment's start.
    pub write_offset: u32,
    /// Bytes of records still holding an item.
    pub live_bytes: u64,
    /// Every record written, as (key hash, offset): what eviction must take out of the index.
    pub records: Vec<(u64, u32)>,
    /// The latest expiry among its records, `None` while any never expires.
    pub latest_expiry: Option<u32>,
}

impl Segment {
    pub(crate) fn empty(header: SegmentHeader) -> Segment {
        Segment {
            header,
            write_offset: SEGMENT_HEADER_BYTES,
            live_bytes: 0,
            records: Vec::new(),
            latest_expiry: Some(0),
        }
    }

    /// Notes a record appended at `offset` for an item expiring at `expiry`.
    pub fn note_record(&mut self, hash: u64, offset: u32, bytes: u64, expiry: Expiry) {
        self.records.push((hash, offset));
        self.live_bytes += bytes;
        self.write_offset = offset + bytes as u32;
        self.extend_expiry(expiry);
    }

    /// Notes that a record of `bytes` no longer holds an item. Its bytes were counted when it
    /// was written, so more than are live would be a bug: caught in debug builds, and never
    /// wrapped into a huge count that would keep the segment from being compacted.
    pub fn forget_live(&mut self, bytes: u64) {
        debug_assert!(
            bytes <= self.live_bytes,
            "{bytes} bytes leave a segment with {} live",
            self.live_bytes
        );
        self.live_bytes = self.live_bytes.saturating_sub(bytes);
    }

    /// Notes that one of its items now expires at `expiry`.
    pub fn extend_expiry(&mut self, expiry: Expiry) {
        self.latest_expiry = match (self.latest_expiry, expiry.to_raw()) {
            (_, 0) | (None, _) => None,
            (Some(latest), raw) => Some(latest.max(raw)),
        };
    }

    /// True when every item it holds has expired by `now_secs`.
    fn all_expired(&self, now_secs: u32) -> bool {
        self.latest_expiry.is_some_and(|latest| latest <= now_secs)
    }
}

/// The pool: every segment, which are free, which is open for each TTL bucket, and the order
/// they were opened in.
pub struct Segments {
    pub segments: Vec<Segment>,
    free: Vec<u32>,
    /// A free segment that only a compaction opens: it writes the live items there before it
    /// frees their segment, which then becomes the reserve (the first segment freed while
    /// there is none does).
    reserve: Option<u32>,
    open: Vec<Option<u32>>,
    /// In-use segments by the order they were opened: the FIFO of eviction.
    by_age: BTreeMap<u64, u32>,
    next_opened_sequence: u64,
    segment_bytes: u32,
}

/// A segment to take back, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reclaim {
    /// All its items have expired.
    Expired(u32),
    /// The oldest segment, evicted for room.
    Evicted(u32),
}

impl Segments {
    /// A pool of `count` segments of `segment_bytes`, all free, with the generations their
    /// headers last had.
    pub fn new(segment_bytes: u32, generations: &[u32]) -> Segments {
        let segments: Vec<Segment> = generations
            .iter()
            .map(|&generation| {
                Segment::empty(SegmentHeader {
                    generation,
                    created_secs: 0,
                    opened_sequence: 0,
                    bucket: 0,
                    free: true,
                })
            })
            .collect();
        let buckets = (segments.len() / SEGMENTS_PER_BUCKET).clamp(1, MAX_BUCKETS);
        let mut free: Vec<u32> = (0..segments.len() as u32).rev().collect();
        let reserve = if segments.len() >= FEWEST_SEGMENTS_WITH_RESERVE {
            free.pop()
        } else {
            None
        };
        Segments {
            free,
            reserve,
            segments,
            open: vec![None; buckets],
            by_age: BTreeMap::new(),
            next_opened_sequence: 1,
            segment_bytes,
        }
    }

    /// Segments that fit in `storage_bytes`.
    pub fn count_for(storage_bytes: u64, segment_bytes: u32) -> usize {
        (storage_bytes.saturating_sub(STORE_HEADER_BYTES) / u64::from(segment_bytes)) as usize
    }

    /// Byte offset of segment `index` on the storage.
    pub fn base_offset(&self, index: u32) -> u64 {
        STORE_HEADER_BYTES + u64::from(index) * u64::from(self.segment_bytes)
    }

    /// The bucket of items expiring at `expiry`, seen at `now_secs`.
    pub fn bucket_of(&self, expiry: Expiry, now_secs: u32) -> usize {
        let last = self.open.len() - 1;
        match expiry.remaining_secs(now_secs) {
            None => last,
            Some(ttl) => (ttl.max(1).ilog2() as usize).min(last),
        }
    }

    /// The open segment of `bucket` if `bytes` more fit in it.
    pub fn open_with_room(&self, bucket: usize, bytes: u64) -> Option<u32> {
        let index = self.open[bucket]?;
        let segment = &self.segments[index as usize];
        (u64::from(segment.write_offset) + bytes <= u64::from(self.segment_bytes)).then_some(index)
    }

    /// Opens a free segment for `bucket` (sealing the bucket's previous one); returns it with
    /// the header to write. `None` when none is free.
    pub fn open_free(&mut self, bucket: usize, now_secs: u32) -> Option<(u32, SegmentHeader)> {
        let index = self.free.pop()?;
        Some(self.open_segment(index, bucket, now_secs))
    }

    /// Opens the reserve segment for `bucket`, as [`open_free`](Self::open_free) opens a free
    /// one, for a compaction to move live items into. `None` when there is no reserve.
    pub fn open_reserve(&mut self, bucket: usize, now_secs: u32) -> Option<(u32, SegmentHeader)> {
        let index = self.reserve.take()?;
        Some(self.open_segment(index, bucket, now_secs))
    }

    /// Frees the reserve for any bucket to open; the next segment freed becomes the reserve.
    pub fn spend_reserve(&mut self) {
        self.free.extend(self.reserve.take());
    }

    /// True when a compaction has a segment to move items into.
    pub fn has_reserve(&self) -> bool {
        self.reserve.is_some()
    }

    fn open_segment(&mut self, index: u32, bucket: usize, now_secs: u32) -> (u32, SegmentHeader) {
        let segment = &mut self.segments[index as usize];
        let header = SegmentHeader {
            generation: segment.header.generation.wrapping_add(1),
            created_secs: now_secs,
            opened_sequence: self.next_opened_sequence,
            bucket: bucket as u8,
            free: false,
        };
        self.next_opened_sequence += 1;
        *segment = Segment::empty(header);
        self.by_age.insert(header.opened_sequence, index);
        self.open[bucket] = Some(index);
        (index, header)
    }

    /// Takes an in-use segment back in at restart, sealed.
    pub fn restore(&mut self, index: u32, segment: Segment) {
        self.free.retain(|&free| free != index);
        if self.reserve == Some(index) {
            self.reserve = self.free.pop();
        }
        self.next_opened_sequence = self
            .next_opened_sequence
            .max(segment.header.opened_sequence + 1);
        self.by_age.insert(segment.header.opened_sequence, index);
        self.segments[index as usize] = segment;
    }

    /// The segment to take back for room: one whose items have all expired, else the oldest.
    pub fn pick_reclaim(&self, now_secs: u32) -> Option<Reclaim> {
        let expired = self
            .by_age
            .values()
            .find(|&&index| self.segments[index as usize].all_expired(now_secs));
        match expired {
            Some(&index) => Some(Reclaim::Expired(index)),
            None => self
                .by_age
                .values()
                .next()
                .map(|&index| Reclaim::Evicted(index)),
        }
    }

    /// The segment in use with the fewest live bytes: the cheapest to compact.
    pub fn emptiest(&self) -> Option<u32> {
        self.by_age
            .values()
            .copied()
            .min_by_key(|&index| self.segments[index as usize].live_bytes)
    }

    /// Returns segment `index` to the free list; gives its records (for the index to drop)
    /// and its now-free header to write.
    pub fn release(&mut self, index: u32) -> (Vec<(u64, u32)>, SegmentHeader) {
        let segment = &mut self.segments[index as usize];
        self.by_age.remove(&segment.header.opened_sequence);
        for open in &mut self.open {
            if *open == Some(index) {
                *open = None;
            }
        }
        let records = std::mem::take(&mut segment.records);
        segment.header.free = true;
        let header = segment.header;
        *segment = Segment::empty(header);
        if self.reserve.is_none() && self.segments.len() >= FEWEST_SEGMENTS_WITH_RESERVE {
            self.reserve = Some(index);
        } else {
            self.free.push(index);
        }
        (records, header)
    }

    /// Frees every segment (flush_all); their on-storage headers are left for the flush mark
    /// to void.
    pub fn release_all(&mut self) {
        let in_use: Vec<u32> = self.by_age.values().copied().collect();
        for index in in_use {
            self.release(index);
        }
    }

    /// Segments in use.
    pub fn in_use(&self) -> usize {
        self.by_age.len()
    }

    /// Checks what the pool keeps whatever is stored: each segment written within its bounds
    /// with no more live bytes than written, its records in the order they were appended and
    /// inside what was written, a free segment empty; and every segment exactly once among
    /// the free ones, the reserve and those in use. The message names the segment.
    pub(crate) fn check_invariants(&self) -> Result<(), String> {
        let mut places = vec![0u8; self.segments.len()];
        let in_use = self.by_age.values();
        for &index in self.free.iter().chain(&self.reserve).chain(in_use) {
            match places.get_mut(index as usize) {
                Some(seen) => *seen += 1,
                None => return Err(format!("segment {index} is past the pool's end")),
            }
        }
        if let Some(index) = places.iter().position(|&seen| seen != 1) {
            return Err(format!(
                "segment {index} is {} times among the free, reserve and in-use segments",
                places[index]
            ));
        }
        for (index, segment) in self.segments.iter().enumerate() {
            let broken = |what: String| Err(format!("segment {index}: {what}"));
            let offset = segment.write_offset;
            if !(SEGMENT_HEADER_BYTES..=self.segment_bytes).contains(&offset) {
                return broken(format!("written up to byte {offset}"));
            }
            let written = u64::from(offset - SEGMENT_HEADER_BYTES);
            if segment.live_bytes > written {
                return broken(format!(
                    "{} live bytes of {written} written",
                    segment.live_bytes
                ));
            }
            let mut end = SEGMENT_HEADER_BYTES;
            for &(_, at) in &segment.records {
                if at < end || at >= offset {
                    return broken(format!("a record at byte {at}, written up to {offset}"));
                }
                end = at + 1;
            }
            let free = self.free.contains(&(index as u32)) || self.reserve == Some(index as u32);
            if free && (segment.live_bytes != 0 || !segment.records.is_empty()) {
                return broken(format!(
                    "free with {} live bytes in {} records",
                    segment.live_bytes,
                    segment.records.len()
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reclaims_expired_segments_before_the_oldest() {
        let mut pool = Segments::new(1 << 20, &[0; 16]);
        let now = 1000;
        let bucket = pool.bucket_of(Expiry::at(1010), now);
        let (first, header) = pool.open_free(bucket, now).unwrap();
        // a reused segment moves to the next generation
        assert_eq!(header.generation, 1);
        pool.segments[first as usize].note_record(1, 64, 100, Expiry::at(1010));
        let never = pool.bucket_of(Expiry::NEVER, now);
        let (second, _) = pool.open_free(never, now).unwrap();
        pool.segments[second as usize].note_record(2, 64, 100, Expiry::NEVER);
        // nothing expired yet: the oldest is evicted
        assert_eq!(pool.pick_reclaim(now), Some(Reclaim::Evicted(first)));
        // the second never expires, the first has: the first is reclaimed as expired
        assert_eq!(pool.pick_reclaim(1010), Some(Reclaim::Expired(first)));
        let (records, freed) = pool.release(first);
        assert_eq!(records, vec![(1, 64)]);
        assert!(freed.free);
        assert_eq!(pool.pick_reclaim(2000), Some(Reclaim::Evicted(second)));
        assert_eq!(pool.in_use(), 1);
    }

    #[test]
    fn small_pools_group_all_ttls_in_one_bucket() {
        let pool = Segments::new(1 << 20, &[0; 4]);
        // too few segments to spread over TTL buckets
        assert_eq!(
            pool.bucket_of(Expiry::at(5), 1),
            pool.bucket_of(Expiry::NEVER, 1)
        );
        let big = Segments::new(1 << 20, &[0; 1024]);
        // a large pool keeps short and long TTLs apart
        assert_ne!(
            big.bucket_of(Expiry::at(5), 1),
            big.bucket_of(Expiry::NEVER, 1)
        );
    }

    #[test]
    fn the_checker_finds_broken_accounting() {
        let mut pool = Segments::new(4096, &[0; 8]);
        pool.check_invariants().unwrap();
        let (index, _) = pool.open_free(0, 0).unwrap();
        let segment = &mut pool.segments[index as usize];
        segment.note_record(1, 64, 100, Expiry::NEVER);
        segment.note_record(2, 164, 100, Expiry::NEVER);
        pool.check_invariants().unwrap();
        pool.segments[index as usize].live_bytes = 201;
        let error = pool.check_invariants().unwrap_err();
        assert!(error.contains("201 live bytes of 200 written"), "{error}");
        pool.segments[index as usize].live_bytes = 100;
        pool.segments[index as usize].records.swap(0, 1);
        let error = pool.check_invariants().unwrap_err();
        assert!(error.contains("a record at byte 64"), "{error}");
        pool.segments[index as usize].records.swap(0, 1);
        pool.free.push(index);
        let error = pool.check_invariants().unwrap_err();
        assert!(error.contains("2 times"), "{error}");
    }

    #[test]
    fn room_in_the_open_segment() {
        let mut pool = Segments::new(4096, &[0; 2]);
        let (index, _) = pool.open_free(0, 0).unwrap();
        assert_eq!(pool.open_with_room(0, 4096 - 64), Some(index));
        // a record past the end needs another segment
        assert_eq!(pool.open_with_room(0, 4096 - 63), None);
    }
}
