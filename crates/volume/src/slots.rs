//! Which cache slot holds which line, and which of its sectors are valid and dirty: the live
//! counterpart of the controller's line table, kept on the cache device in [`crate::layout`]'s
//! double-buffered entries.

use std::io;

use rustc_hash::FxHashMap;

use heterarchy_device::backend::Backend;

use crate::layout::{Entry, Geometry};

/// One occupied slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub index: u32,
    pub valid: u128,
    pub dirty: u128,
    /// Valid clean sectors whose data the backing store may not hold durably yet (written
    /// through, or filled from it, since its last flush): recorded invalid on the device until
    /// [`Slots::settle`], so a machine crash that loses the backing store's copy cannot leave
    /// the cache with another.
    pub unflushed: u128,
}

/// The slot map of one cache device.
pub struct Slots {
    geometry: Geometry,
    by_key: FxHashMap<u64, Slot>,
    free: Vec<u32>,
    /// Sequence number of each slot's newest entry copy.
    sequences: Vec<u64>,
    /// Keys whose slots gained unflushed sectors since the last settle (some may be gone).
    unsettled: Vec<u64>,
}

impl Slots {
    /// An empty map; the caller formats the table.
    pub fn empty(geometry: Geometry) -> Slots {
        let count = geometry.slot_count as usize;
        Slots {
            geometry,
            by_key: FxHashMap::default(),
            free: (0..count as u32).rev().collect(),
            sequences: vec![0; count],
            unsettled: Vec::new(),
        }
    }

    /// Reads the entry table of a formatted cache: each slot's newest intact entry. A key found
    /// twice (a crash between freeing a slot and reusing the line elsewhere cannot do that, but
    /// damaged media might) keeps its newest.
    pub fn load(geometry: Geometry, cache: &mut dyn Backend) -> io::Result<Slots> {
        let mut slots = Slots::empty(geometry);
        slots.free.clear();
        let (table_start, table_len) = geometry.table_range();
        let mut table = vec![0u8; table_len as usize];
        cache.read_at(table_start, &mut table)?;
        let mut newest: FxHashMap<u64, (u64, u32)> = FxHashMap::default();
        for (index, pair) in table.chunks_exact(128).enumerate() {
            let index = index as u32;
            let copies = [&pair[..64], &pair[64..]]
                .map(|bytes| Entry::decode(bytes.try_into().expect("64-byte entry")));
            let entry = copies
                .into_iter()
                .flatten()
                .max_by_key(|entry| entry.sequence);
            slots.sequences[index as usize] = entry.map_or(0, |entry| entry.sequence);
            let Some(Entry {
                key: Some(key),
                sequence,
                valid,
                dirty,
            }) = entry
            else {
                slots.free.push(index);
                continue;
            };
            if let Some(&(older_sequence, older_index)) = newest.get(&key) {
                if older_sequence >= sequence {
                    slots.free.push(index);
                    continue;
                }
                slots.by_key.remove(&key);
                slots.free.push(older_index);
            }
            newest.insert(key, (sequence, index));
            slots.by_key.insert(
                key,
                Slot {
                    index,
                    valid,
                    dirty: dirty & valid,
                    unflushed: 0,
                },
            );
        }
        slots.free.sort_unstable_by(|a, b| b.cmp(a));
        Ok(slots)
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    pub fn get(&self, key: u64) -> Option<Slot> {
        self.by_key.get(&key).copied()
    }

    /// Every occupied slot, in no order.
    pub fn occupied(&self) -> impl Iterator<Item = (u64, Slot)> + '_ {
        self.by_key.iter().map(|(&key, &slot)| (key, slot))
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Lines with dirty sectors.
    pub fn dirty_count(&self) -> usize {
        self.by_key.values().filter(|slot| slot.dirty != 0).count()
    }

    /// A free slot for `key`, with nothing valid yet (the entry is written by the first
    /// [`update`](Self::update)). `None` when every slot is taken, which the controller's
    /// capacity rules out.
    pub fn allocate(&mut self, key: u64) -> Option<Slot> {
        let index = self.free.pop()?;
        let slot = Slot {
            index,
            valid: 0,
            dirty: 0,
            unflushed: 0,
        };
        self.by_key.insert(key, slot);
        Some(slot)
    }

    /// Records `key`'s new sector bits, on the device too. The data they describe must already
    /// be written (and persisted) when the bits grow.
    pub fn update(&mut self, key: u64, slot: Slot, cache: &mut dyn Backend) -> io::Result<()> {
        let had_unflushed = self.by_key.get(&key).is_some_and(|old| old.unflushed != 0);
        if slot.unflushed != 0 && !had_unflushed {
            self.unsettled.push(key);
            if self.unsettled.len() > 2 * self.sequences.len() {
                let by_key = &self.by_key;
                self.unsettled
                    .retain(|key| by_key.get(key).is_some_and(|slot| slot.unflushed != 0));
            }
        }
        self.by_key.insert(key, slot);
        let durable = slot.valid & !slot.unflushed;
        self.write_entry(slot.index, Some(key), durable, slot.dirty & durable, cache)
    }

    /// Once the backing store has been flushed: records every unflushed sector valid.
    pub fn settle(&mut self, cache: &mut dyn Backend) -> io::Result<()> {
        for key in std::mem::take(&mut self.unsettled) {
            if let Some(mut slot) = self.by_key.get(&key).copied() {
                if slot.unflushed != 0 {
                    slot.unflushed = 0;
                    self.update(key, slot, cache)?;
                }
            }
        }
        Ok(())
    }

    /// Frees `key`'s slot, on the device first: its data may be overwritten afterwards.
    pub fn free(&mut self, key: u64, cache: &mut dyn Backend) -> io::Result<Option<Slot>> {
        let Some(slot) = self.by_key.remove(&key) else {
            return Ok(None);
        };
        self.write_entry(slot.index, None, 0, 0, cache)?;
        self.free.push(slot.index);
        Ok(Some(slot))
    }

    fn write_entry(
        &mut self,
        index: u32,
        key: Option<u64>,
        valid: u128,
        dirty: u128,
        cache: &mut dyn Backend,
    ) -> io::Result<()> {
        let sequence = self.sequences[index as usize] + 1;
        self.sequences[index as usize] = sequence;
        let entry = Entry {
            sequence,
            key,
            valid,
            dirty,
        };
        let offset = self.geometry.entry_offset(index, sequence % 2);
        cache.write_at(offset, &entry.encode())?;
        cache.persist(offset, 64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heterarchy_device::backend::RamBackend;

    #[test]
    fn the_table_is_found_again() {
        let geometry = Geometry::for_cache(1 << 20, 4096, 1 << 30).unwrap();
        let mut cache = RamBackend::new(1 << 20).unwrap();
        let mut slots = Slots::empty(geometry);
        let count = slots.free_count();
        let mut a = slots.allocate(10).unwrap();
        a.valid = 0b1111;
        a.dirty = 0b0110;
        slots.update(10, a, &mut cache).unwrap();
        let mut b = slots.allocate(11).unwrap();
        b.valid = 1;
        slots.update(11, b, &mut cache).unwrap();
        b.valid = 3;
        slots.update(11, b, &mut cache).unwrap();
        slots.free(10, &mut cache).unwrap();
        let again = Slots::load(geometry, &mut cache).unwrap();
        assert_eq!(again.get(10), None);
        assert_eq!(again.get(11), Some(b));
        assert_eq!(again.len(), 1);
        assert_eq!(again.free_count(), count - 1);
        let mut again = again;
        let reused = again.allocate(12).unwrap();
        assert_ne!(reused.index, b.index);
    }
}
