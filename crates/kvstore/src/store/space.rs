//! Room for a tenant's records: which segment a record goes to, and what a full store gives up
//! for it — an expired segment, a half-dead one compacted, or the oldest evicted — and the
//! index's DRAM limit kept the same way.

use std::io;

use crate::expiry::Expiry;
use crate::index::Item;
use crate::layout::{SegmentHeader, SEGMENT_HEADER_BYTES, STATE_LIVE, STATE_STALE};
use crate::segments::Reclaim;

use super::{NewRecord, Store};

impl Store {
    /// A segment and offset where `bytes` fit, in the bucket of `expiry`: the bucket's open
    /// segment, or a new one. For one, an expired segment is freed; else the segment with the
    /// most dead bytes (overwritten or deleted items) is compacted into the reserve segment if
    /// at least half of it is dead, so a cache with room to spare keeps its live items however
    /// often others are overwritten; else the oldest segment is evicted: only a cache more than half full of
    /// live items evicts (seed 000 §5.2.5 leaves eviction to Pelikan's segments; this is the
    /// simplest rule that never drops a live item while half the space is dead).
    pub(super) fn room_for(
        &mut self,
        now_secs: u32,
        expiry: Expiry,
        bytes: u64,
    ) -> io::Result<(u32, u32)> {
        let bucket = self.segments.bucket_of(expiry, now_secs);
        loop {
            if let Some(segment) = self.segments.open_with_room(bucket, bytes) {
                let offset = self.segments.segments[segment as usize].write_offset;
                return Ok((segment, offset));
            }
            if let Some((segment, header)) = self.segments.open_free(bucket, now_secs) {
                self.write_segment_header(segment, &header)?;
                return Ok((segment, SEGMENT_HEADER_BYTES));
            }
            let compactable = self
                .segments
                .emptiest()
                .filter(|&index| self.worth_compacting(index));
            match (self.segments.pick_reclaim(now_secs), compactable) {
                (Some(Reclaim::Evicted(_)), Some(index)) => {
                    self.compact(index, now_secs)?;
                    if self.segments.open_with_room(bucket, bytes).is_none() {
                        // The items moved to another bucket's segment: the one they left
                        // takes this record, and the next segment freed becomes the reserve.
                        self.segments.spend_reserve();
                    }
                }
                (Some(reclaim), _) => self.reclaim(reclaim, now_secs)?,
                (None, _) => return Err(io::Error::other("no segment to reclaim")),
            }
        }
    }

    /// Whether segment `index` is at least half dead, so that its live items fit in the
    /// reserve segment, and there is a reserve to move them to.
    fn worth_compacting(&self, index: u32) -> bool {
        let capacity = u64::from(self.config.segment_bytes - SEGMENT_HEADER_BYTES);
        self.segments.has_reserve()
            && self.segments.segments[index as usize].live_bytes * 2 <= capacity
    }

    /// Writes the live items of segment `index` into the reserve segment (newest records,
    /// same CAS uniques, expiries, flags and access state), then frees it, and it becomes the
    /// reserve. A crash before the free leaves both records of each item, and the newer wins at
    /// restart (`crate::recover`); freeing first would lose them.
    fn compact(&mut self, index: u32, now_secs: u32) -> io::Result<()> {
        let mut moving = Vec::new();
        for &(hash, offset) in &self.segments.segments[index as usize].records {
            if let Some(item) = self.index.find_at_mut(hash, index, offset) {
                // Expired items stay behind, and go with the segment.
                if !item.expiry.has_passed(now_secs) {
                    moving.push((hash, offset, item.clone()));
                }
            }
        }
        let bucket = usize::from(self.segments.segments[index as usize].header.bucket);
        let (reserve, header) = self
            .segments
            .open_reserve(bucket, now_secs)
            .ok_or_else(|| io::Error::other("a compaction without a reserve segment"))?;
        self.write_segment_header(reserve, &header)?;
        for (hash, offset, item) in moving {
            let value = self.read_item_value(&item)?;
            let to = self.segments.segments[reserve as usize].write_offset;
            let state = match item.stale {
                true => STATE_LIVE | STATE_STALE,
                false => STATE_LIVE,
            };
            let record = NewRecord {
                key: &item.key,
                hash,
                value: &value,
                client_flags: item.client_flags,
                expiry: item.expiry,
                state,
                cas: Some(item.cas),
            };
            self.append_record((reserve, to), &record)?;
            if let Some(moved) = self.index.find_at_mut(hash, index, offset) {
                moved.segment = reserve;
                moved.offset = to;
            }
        }
        // What is left there has expired.
        self.reclaim(Reclaim::Expired(index), now_secs)?;
        self.stats.segments_compacted += 1;
        Ok(())
    }

    /// Reclaims expired or oldest segments until the index has `entry_bytes` to spare under
    /// its limit.
    pub(super) fn make_index_room(&mut self, now_secs: u32, entry_bytes: u64) -> io::Result<()> {
        let Some(limit) = self.config.index_max_bytes else {
            return Ok(());
        };
        while self.index.bytes() + entry_bytes > limit {
            let reclaim = self.segments.pick_reclaim(now_secs).ok_or_else(|| {
                io::Error::other("the index memory limit is below one item's entry")
            })?;
            self.reclaim(reclaim, now_secs)?;
        }
        Ok(())
    }

    /// Frees a segment, dropping its items: expired ones count as reclaimed, others as
    /// evicted.
    fn reclaim(&mut self, reclaim: Reclaim, now_secs: u32) -> io::Result<()> {
        let (index, expired) = match reclaim {
            Reclaim::Expired(index) => (index, true),
            Reclaim::Evicted(index) => (index, false),
        };
        for item in self.release_segment(index)? {
            if expired || item.expiry.has_passed(now_secs) {
                self.stats.reclaimed += 1;
            } else {
                self.stats.evictions += 1;
                if !item.fetched {
                    self.stats.evicted_unfetched += 1;
                }
            }
        }
        Ok(())
    }

    /// Frees a segment: its items leave the index (and are returned), and its header on
    /// storage says free before its space is reused. Its records stay readable until then.
    fn release_segment(&mut self, index: u32) -> io::Result<Vec<Item>> {
        let (records, header) = self.segments.release(index);
        let mut items = Vec::new();
        for (hash, offset) in records {
            items.extend(self.index.remove_at(hash, index, offset));
        }
        self.write_segment_header(index, &header)?;
        Ok(items)
    }

    fn write_segment_header(&mut self, segment: u32, header: &SegmentHeader) -> io::Result<()> {
        let at = self.segments.base_offset(segment);
        self.media.write_segment_header(at, header)
    }
}
