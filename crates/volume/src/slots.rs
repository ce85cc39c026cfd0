//! Which line each slot of one cache tier holds, and which of its 512-byte sectors are valid,
//! dirty and not yet safe to record valid, as the data on the device stands (docs/architecture.md,
//! "A request through a live volume"): the executor's side of the tier, kept on persistent
//! devices in [`crate::layout`]'s double-buffered entries.
//!
//! Which slot a line *will* use is decided earlier, when the request is planned
//! ([`crate::placement`]); this table changes only as requests are carried out, one at a time
//! per line, so each slot has a lock of its own that nobody contends for but the occasional
//! flush settling its unflushed sectors.

use std::io;
use std::sync::{Mutex, MutexGuard};

use heterarchy_device::backend::Backend;

use crate::layout::{Entry, Geometry};

/// One slot as the executor knows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotState {
    /// The line held; `None` for a free slot.
    pub key: Option<u64>,
    /// Sectors holding the line's data at this tier.
    pub valid: u128,
    /// Valid sectors newer than the backing store's.
    pub dirty: u128,
    /// Valid clean sectors whose data the backing store may not hold durably yet (written
    /// through, or filled from it, since its last flush): recorded invalid on the device until
    /// a flush settles them, so a machine crash that loses the backing store's copy cannot
    /// leave the cache with another.
    pub unflushed: u128,
}

impl SlotState {
    /// What every slot's state keeps, whatever was done to it; the one broken, if any. A state
    /// that breaks one would be written to the device as something recovery misreads (a dirty
    /// sector with no valid data behind it is written back as garbage).
    fn broken_invariant(&self, line_sectors: u128) -> Option<&'static str> {
        if self.dirty & !self.valid != 0 {
            Some("dirty sectors that are not valid")
        } else if self.unflushed & !(self.valid & !self.dirty) != 0 {
            Some("unflushed sectors that are not valid and clean")
        } else if self.valid & !line_sectors != 0 {
            Some("valid sectors past the line's end")
        } else if self.key.is_none() && *self != SlotState::default() {
            Some("sectors in a free slot")
        } else {
            None
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    state: SlotState,
    /// The flush epoch ([`TierSlots::settle`]) in which `unflushed` last grew.
    unflushed_epoch: u64,
    /// Sequence number of the newest entry copy on the device.
    sequence: u64,
}

/// The slots of one cache tier.
pub struct TierSlots {
    geometry: Geometry,
    /// Entries are written to the device (a tier that outlives the process).
    persistent: bool,
    slots: Vec<Mutex<Slot>>,
    /// Slots whose `unflushed` sectors grew since the last settle (some may be clean again).
    unsettled: Mutex<Vec<u32>>,
}

impl TierSlots {
    /// Every slot free; a persistent caller formats the table itself.
    pub fn empty(geometry: Geometry, persistent: bool) -> TierSlots {
        TierSlots {
            geometry,
            persistent,
            slots: (0..geometry.slot_count)
                .map(|_| Mutex::new(Slot::default()))
                .collect(),
            unsettled: Mutex::new(Vec::new()),
        }
    }

    /// Reads the entry table of a formatted device: each slot's newest intact entry. A key
    /// found in two slots (damaged media; no crash leaves that) keeps its newest.
    pub fn load(geometry: Geometry, device: &dyn Backend) -> io::Result<TierSlots> {
        let table = TierSlots::empty(geometry, true);
        let (table_start, table_len) = geometry.table_range();
        let mut bytes = vec![0u8; table_len as usize];
        device.read_at(table_start, &mut bytes)?;
        let mut newest: rustc_hash::FxHashMap<u64, (u64, u32)> = Default::default();
        let lines = geometry.backing_bytes / u64::from(geometry.line_bytes);
        let line_sectors = crate::layout::sector_bits(0, geometry.line_bytes);
        for (index, pair) in bytes.chunks_exact(128).enumerate() {
            let index = index as u32;
            let entry = [&pair[..64], &pair[64..]]
                .map(|bytes| Entry::decode(bytes.try_into().expect("64-byte entry")))
                .into_iter()
                .flatten()
                .max_by_key(|entry| entry.sequence);
            let mut slot = table.lock(index);
            slot.sequence = entry.map_or(0, |entry| entry.sequence);
            let Some(Entry {
                key: Some(key),
                sequence,
                valid,
                dirty,
            }) = entry
            else {
                continue;
            };
            // A line past the backing store's end is damage, not data.
            if key >= lines {
                continue;
            }
            if let Some(&(older_sequence, older_index)) = newest.get(&key) {
                if older_sequence >= sequence {
                    continue;
                }
                table.lock(older_index).state = SlotState::default();
            }
            newest.insert(key, (sequence, index));
            // Sectors past the line's end are damage too.
            let valid = valid & line_sectors;
            slot.state = SlotState {
                key: Some(key),
                valid,
                dirty: dirty & valid,
                unflushed: 0,
            };
        }
        Ok(table)
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// True when the table is kept on the device.
    pub fn is_persistent(&self) -> bool {
        self.persistent
    }

    fn lock(&self, slot: u32) -> MutexGuard<'_, Slot> {
        self.slots[slot as usize]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Slot `slot` now.
    pub fn state(&self, slot: u32) -> SlotState {
        self.lock(slot).state
    }

    /// Every occupied slot, in slot order.
    pub fn occupied(&self) -> Vec<(u32, SlotState)> {
        (0..self.slots.len() as u32)
            .map(|slot| (slot, self.state(slot)))
            .filter(|(_, state)| state.key.is_some())
            .collect()
    }

    /// Lines held, and those with dirty sectors.
    pub fn counts(&self) -> (u64, u64) {
        self.slots.iter().fold((0, 0), |(held, dirty), slot| {
            let state = slot
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .state;
            (
                held + u64::from(state.key.is_some()),
                dirty + u64::from(state.dirty != 0),
            )
        })
    }

    /// Changes slot `slot` with `change` and records the result on the device. Data whose
    /// sectors become valid or dirty must already be written (and persisted); `epoch` is the
    /// flush epoch now, for sectors that become unflushed.
    pub fn update(
        &self,
        slot: u32,
        device: &dyn Backend,
        epoch: u64,
        change: impl FnOnce(&mut SlotState),
    ) -> io::Result<()> {
        let mut guard = self.lock(slot);
        let before = guard.state;
        change(&mut guard.state);
        let state = &mut guard.state;
        state.dirty &= state.valid;
        state.unflushed &= state.valid & !state.dirty;
        if state.key.is_none() {
            *state = SlotState::default();
        }
        let after = *state;
        debug_assert_eq!(
            after.broken_invariant(self.line_sectors()),
            None,
            "slot {slot}: {after:?}"
        );
        if after.unflushed & !before.unflushed != 0 {
            guard.unflushed_epoch = epoch;
            if before.unflushed == 0 {
                self.unsettled
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .push(slot);
            }
        }
        if durable(&before) != durable(&after) {
            self.write_entry(&mut guard, slot, device)?;
        }
        Ok(())
    }

    /// Frees slot `slot`, on the device first: its data may be overwritten afterwards.
    pub fn free(&self, slot: u32, device: &dyn Backend) -> io::Result<()> {
        self.update(slot, device, 0, |state| state.key = None)
    }

    /// Once the backing store has been flushed: records valid the unflushed sectors marked in
    /// epochs up to `epoch` (later ones wait for the next flush).
    pub fn settle(&self, epoch: u64, device: &dyn Backend) -> io::Result<()> {
        let pending = std::mem::take(
            &mut *self
                .unsettled
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        let mut kept = Vec::new();
        let mut result = Ok(());
        for slot in pending {
            let mut guard = self.lock(slot);
            if guard.state.unflushed == 0 {
                continue;
            }
            if guard.unflushed_epoch > epoch || result.is_err() {
                kept.push(slot);
                continue;
            }
            guard.state.unflushed = 0;
            result = self.write_entry(&mut guard, slot, device);
            if result.is_err() {
                kept.push(slot);
            }
        }
        self.unsettled
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .extend(kept);
        result
    }

    /// The sectors of one line.
    fn line_sectors(&self) -> u128 {
        crate::layout::sector_bits(0, self.geometry.line_bytes)
    }

    /// Checks what the table keeps whatever the volume does: every slot's state (dirty sectors
    /// valid, unflushed ones valid and clean, nothing past the line's end or in a free slot),
    /// no line in two slots, and every slot with unflushed sectors awaiting a settle (else no
    /// flush would ever record them valid). The message names the slot and its state.
    pub(crate) fn check_invariants(&self) -> Result<(), String> {
        let line_sectors = self.line_sectors();
        let unsettled = self
            .unsettled
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        let mut keys = rustc_hash::FxHashMap::default();
        for index in 0..self.slots.len() as u32 {
            let state = self.state(index);
            if let Some(broken) = state.broken_invariant(line_sectors) {
                return Err(format!("slot {index}: {broken}: {state:?}"));
            }
            if let Some(key) = state.key {
                if let Some(other) = keys.insert(key, index) {
                    return Err(format!("line {key} is in slots {other} and {index}"));
                }
            }
            if state.unflushed != 0 && !unsettled.contains(&index) {
                return Err(format!(
                    "slot {index}: unflushed sectors no settle will record: {state:?}"
                ));
            }
        }
        Ok(())
    }

    fn write_entry(&self, slot: &mut Slot, index: u32, device: &dyn Backend) -> io::Result<()> {
        if !self.persistent {
            return Ok(());
        }
        let (key, valid, dirty) = durable(&slot.state);
        slot.sequence += 1;
        let entry = Entry {
            sequence: slot.sequence,
            key,
            valid,
            dirty,
        };
        let offset = self.geometry.entry_offset(index, slot.sequence % 2);
        device.write_at(offset, &entry.encode())?;
        device.persist(offset, 64)
    }
}

/// What the device records of a slot: unflushed sectors count as invalid.
fn durable(state: &SlotState) -> (Option<u64>, u128, u128) {
    let valid = state.valid & !state.unflushed;
    (state.key, valid, state.dirty & valid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use heterarchy_device::backend::RamBackend;

    #[test]
    fn the_table_is_found_again() {
        let geometry = Geometry::for_cache(1 << 20, 4096, 1 << 30).unwrap();
        let cache = RamBackend::new(1 << 20).unwrap();
        let slots = TierSlots::empty(geometry, true);
        slots
            .update(3, &cache, 0, |s| {
                *s = SlotState {
                    key: Some(10),
                    valid: 0b1111,
                    dirty: 0b0110,
                    unflushed: 0,
                }
            })
            .unwrap();
        slots
            .update(5, &cache, 0, |s| {
                s.key = Some(11);
                s.valid = 1;
            })
            .unwrap();
        slots.update(5, &cache, 0, |s| s.valid = 3).unwrap();
        // Unflushed sectors are recorded invalid until a flush settles them.
        slots
            .update(5, &cache, 7, |s| {
                s.valid |= 4;
                s.unflushed |= 4;
            })
            .unwrap();
        slots.free(3, &cache).unwrap();
        let again = TierSlots::load(geometry, &cache).unwrap();
        assert_eq!(again.state(3), SlotState::default());
        assert_eq!(again.state(5).valid, 3);
        assert_eq!(again.occupied().len(), 1);
        // Marks of a later epoch wait; of this one, settle.
        slots.settle(6, &cache).unwrap();
        assert_eq!(TierSlots::load(geometry, &cache).unwrap().state(5).valid, 3);
        slots.settle(7, &cache).unwrap();
        assert_eq!(TierSlots::load(geometry, &cache).unwrap().state(5).valid, 7);
        assert_eq!(slots.counts(), (1, 0));
        slots.check_invariants().unwrap();
        again.check_invariants().unwrap();
    }

    #[test]
    fn the_checker_finds_a_broken_slot() {
        let geometry = Geometry::for_cache(1 << 20, 4096, 1 << 30).unwrap();
        let slots = TierSlots::empty(geometry, false);
        let state = |key, valid, dirty, unflushed| SlotState {
            key,
            valid,
            dirty,
            unflushed,
        };
        let line = Some(1);
        // Each broken state, alone in slot 2, and the words of the checker's finding.
        for (broken, finding) in [
            (state(line, 1, 3, 0), "dirty sectors that are not valid"),
            (state(line, 3, 1, 1), "not valid and clean"),
            (state(line, 1 << 8, 0, 0), "past the line's end"),
            (state(None, 1, 0, 0), "free slot"),
            (state(line, 3, 0, 2), "no settle will record"),
        ] {
            slots.lock(2).state = broken;
            let found = slots.check_invariants().unwrap_err();
            assert!(found.contains(finding), "{broken:?}: {found}");
        }
        slots.lock(2).state = state(line, 1, 0, 0);
        slots.lock(4).state = state(line, 1, 0, 0);
        let twice = slots.check_invariants().unwrap_err();
        assert!(twice.contains("line 1 is in slots 2 and 4"), "{twice}");
    }
}
