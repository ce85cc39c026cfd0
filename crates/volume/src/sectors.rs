//! Sector I/O over a volume's devices: a line's copies in several tiers, read as one, and
//! written sector by sector with the slot table kept in step.
//!
//! A cache line is tracked in 512-byte sectors, as Open CAS does, so a 4 KiB write into a
//! 64 KiB line moves 4 KiB. Over several tiers one rule keeps reads right: for each sector, the
//! highest tier whose copy of the line holds it valid has its newest data, and where no copy
//! holds it the backing store has. Writes go to the highest tier holding the line (or to every
//! tier, written through); a line copied up takes the data it is read with; a line sent down
//! carries its sectors over older ones; cleaning writes the newest sectors everywhere below. A
//! sector is *dirty* in a copy when its data is newer than the backing store's.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::device::Device;
use crate::job::{Copies, Mode};
use crate::layout::{runs, sector_bits, SECTOR_BYTES};
use crate::slots::SlotState;

/// What a read of a line found.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadInfo {
    /// Sectors read whose newest data is newer than the backing store's.
    pub dirty: u128,
    /// Sectors read from some copy below the tier asked for, or from the backing store: the
    /// tier's own copy lacked them.
    pub below: u128,
}

/// A line's newest data over several of its copies, sector by sector.
pub struct Merged {
    pub valid: u128,
    pub dirty: u128,
    /// Valid clean sectors that are not durable in the backing store yet.
    pub unflushed: u128,
    /// The tier each valid sector came from.
    pub source: [u8; 128],
    /// The line's bytes; only sectors read are meaningful.
    pub data: Vec<u8>,
}

/// A client's write of one line.
#[derive(Clone, Copy)]
pub struct ClientWrite<'a> {
    pub key: u64,
    /// Where in the line the bytes go.
    pub start: u32,
    pub data: &'a [u8],
    /// The line's current contents of the whole sectors `data` touches, to complete partial
    /// sectors at its edges (empty when it covers whole sectors).
    pub edges: &'a [u8],
}

/// The devices of one volume: cache tiers first, then the backing store.
pub struct Storage {
    pub devices: Vec<Device>,
    pub line_bytes: u32,
    /// Counts flushes, so that sectors marked unflushed during one are settled by the next
    /// ([`crate::slots::TierSlots::settle`]).
    pub flush_epoch: AtomicU64,
    /// The volume's time zero: its requests' times are ns since then.
    pub epoch: Instant,
}

impl Storage {
    /// Number of cache tiers.
    pub fn tiers(&self) -> usize {
        self.devices.len() - 1
    }

    pub fn backing(&self) -> &Device {
        &self.devices[self.tiers()]
    }

    pub fn epoch(&self) -> u64 {
        self.flush_epoch.load(Ordering::SeqCst)
    }

    pub fn backing_offset(&self, key: u64, start: u32) -> u64 {
        key * u64::from(self.line_bytes) + u64::from(start)
    }

    /// Byte offset of `start` within slot `slot` of tier `tier`.
    pub fn slot_offset(&self, tier: usize, slot: u32, start: u32) -> u64 {
        self.devices[tier].slots().geometry().slot_offset(slot) + u64::from(start)
    }

    /// The copies of `key` that `copies` places and their slots still hold: (tier, slot, state),
    /// top down.
    pub fn held<'a>(
        &'a self,
        key: u64,
        copies: &'a Copies,
    ) -> impl Iterator<Item = (usize, u32, SlotState)> + 'a {
        copies
            .iter()
            .enumerate()
            .take(self.tiers())
            .filter_map(move |(tier, &slot)| {
                let state = self.copy_state(tier, slot, key)?;
                Some((tier, slot?, state))
            })
    }

    /// Tier `tier`'s copy of `key` in slot `slot`, if the slot holds it now.
    pub fn copy_state(&self, tier: usize, slot: Option<u32>, key: u64) -> Option<SlotState> {
        let state = self.devices[tier].slots().state(slot?);
        (state.key == Some(key)).then_some(state)
    }

    /// Reads `out.len()` bytes at `start` of line `key` as its newest data, from the copies in
    /// tiers `from` and below (the highest valid copy of each sector), the rest from the
    /// backing store.
    pub fn read_line(
        &self,
        key: u64,
        copies: &Copies,
        from: usize,
        start: u32,
        out: &mut [u8],
        mode: Mode,
    ) -> io::Result<ReadInfo> {
        let end = start + out.len() as u32;
        let wanted = sector_bits(start, out.len() as u32);
        let mut missing = wanted;
        let mut info = ReadInfo::default();
        for (tier, slot, state) in self.held(key, copies).filter(|&(tier, ..)| tier >= from) {
            if missing == 0 {
                break;
            }
            let take = state.valid & missing;
            for (first, count) in runs(take) {
                let from_byte = (first * SECTOR_BYTES).max(start);
                let to_byte = ((first + count) * SECTOR_BYTES).min(end);
                let window = &mut out[(from_byte - start) as usize..(to_byte - start) as usize];
                let offset = self.slot_offset(tier, slot, from_byte);
                let run = sector_bits(first * SECTOR_BYTES, count * SECTOR_BYTES);
                match self.devices[tier].read_in(mode, offset, window) {
                    Ok(()) => {}
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Err(error),
                    // Clean sectors hold what the backing store holds (docs/architecture.md,
                    // "Faults"); copies below may be older. Dirty ones are nowhere else.
                    Err(_) if state.dirty & run == 0 => {
                        let at = self.backing_offset(key, from_byte);
                        self.backing().read_in(mode, at, window)?;
                    }
                    Err(error) => {
                        return Err(io::Error::new(
                            error.kind(),
                            format!(
                                "{error}; line {key} holds data written since its last \
                                 write-back there, which no other device has"
                            ),
                        ))
                    }
                }
                if tier != from {
                    info.below |= run;
                }
                info.dirty |= state.dirty & run;
                missing &= !run;
            }
        }
        if missing != 0 {
            info.below |= missing;
            if missing == wanted {
                self.backing()
                    .read_in(mode, self.backing_offset(key, start), out)?;
            } else {
                for (first, count) in runs(missing) {
                    let from_byte = (first * SECTOR_BYTES).max(start);
                    let to_byte = ((first + count) * SECTOR_BYTES).min(end);
                    let window = &mut out[(from_byte - start) as usize..(to_byte - start) as usize];
                    self.backing()
                        .read_in(mode, self.backing_offset(key, from_byte), window)?;
                }
            }
        }
        Ok(info)
    }

    /// Which copy in `include` (tier bits) holds the newest data of each sector of `key`, top
    /// down; no data is read yet ([`read_merged`](Self::read_merged) does).
    pub fn merge(&self, key: u64, copies: &Copies, include: u8) -> Merged {
        let mut merged = Merged {
            valid: 0,
            dirty: 0,
            unflushed: 0,
            source: [0; 128],
            data: Vec::new(),
        };
        for (tier, _, state) in self.held(key, copies) {
            if include & (1 << tier) == 0 {
                continue;
            }
            let take = state.valid & !merged.valid;
            merged.valid |= take;
            merged.dirty |= state.dirty & state.valid;
            merged.unflushed |= state.unflushed & take;
            for (first, count) in runs(take) {
                merged.source[first as usize..(first + count) as usize].fill(tier as u8);
            }
        }
        merged.dirty &= merged.valid;
        merged.unflushed &= !merged.dirty;
        merged
    }

    /// Reads the `wanted` sectors of a merge from the copies that hold them newest.
    pub fn read_merged(
        &self,
        copies: &Copies,
        merged: &mut Merged,
        wanted: u128,
        mode: Mode,
    ) -> io::Result<()> {
        merged.data.resize(self.line_bytes as usize, 0);
        let wanted = wanted & merged.valid;
        for (tier, &slot) in copies.iter().enumerate().take(self.tiers()) {
            let Some(slot) = slot else {
                continue;
            };
            let from_here = (0..128u32)
                .filter(|&sector| {
                    wanted & (1 << sector) != 0 && merged.source[sector as usize] == tier as u8
                })
                .fold(0u128, |bits, sector| bits | 1 << sector);
            for (first, count) in runs(from_here) {
                let (from, bytes) = (first * SECTOR_BYTES, count * SECTOR_BYTES);
                let window = &mut merged.data[from as usize..(from + bytes) as usize];
                let offset = self.slot_offset(tier, slot, from);
                self.devices[tier].read_in(mode, offset, window)?;
            }
        }
        Ok(())
    }

    /// Writes the `sectors` of a line image (`line` holds the whole line's bytes) into slot
    /// `slot` of tier `tier`, persisted, before any entry says they are valid.
    pub fn write_sectors(
        &self,
        tier: usize,
        slot: u32,
        sectors: u128,
        line: &[u8],
    ) -> io::Result<()> {
        let device = &self.devices[tier];
        for (first, count) in runs(sectors) {
            let (from, bytes) = (first * SECTOR_BYTES, count * SECTOR_BYTES);
            let offset = self.slot_offset(tier, slot, from);
            device.write_at(offset, &line[from as usize..(from + bytes) as usize])?;
            device.persist(offset, u64::from(bytes))?;
        }
        Ok(())
    }

    /// Before a line's newest `sectors` (from `merged`, over `copies`) go to the backing store:
    /// older copies of them in persistent tiers below are recorded invalid, or a crash that
    /// loses the tiers above would leave them looking clean while the backing store is newer.
    pub fn retire_stale_copies(
        &self,
        key: u64,
        copies: &Copies,
        merged: &Merged,
        sectors: u128,
    ) -> io::Result<()> {
        let held: Vec<(usize, u32, SlotState)> = self.held(key, copies).collect();
        for (tier, slot, state) in held {
            if !self.devices[tier].slots().is_persistent() {
                continue;
            }
            let stale = (0..128)
                .filter(|&sector| merged.source[sector] as usize != tier)
                .fold(0u128, |bits, sector| bits | 1 << sector)
                & state.valid
                & sectors;
            if stale != 0 {
                self.prepare_overwrite(tier, slot, key, stale, false)?;
            }
        }
        Ok(())
    }

    /// Writes the `sectors` of a line image to the backing store (not yet durably).
    pub fn write_back_sectors(&self, key: u64, sectors: u128, line: &[u8]) -> io::Result<()> {
        for (first, count) in runs(sectors) {
            let (from, bytes) = (first * SECTOR_BYTES, count * SECTOR_BYTES);
            self.backing().write_at(
                self.backing_offset(key, from),
                &line[from as usize..(from + bytes) as usize],
            )?;
        }
        Ok(())
    }

    /// Records in tier `tier`'s slot `slot` that it holds `key` with `change` applied.
    pub fn update(
        &self,
        tier: usize,
        slot: u32,
        key: u64,
        change: impl FnOnce(&mut SlotState),
    ) -> io::Result<()> {
        let device = &self.devices[tier];
        device.note(
            device
                .slots()
                .update(slot, device.backend.as_ref(), self.epoch(), |state| {
                    if state.key != Some(key) {
                        *state = SlotState {
                            key: Some(key),
                            ..SlotState::default()
                        };
                    }
                    change(state);
                }),
        )
    }

    /// Frees tier `tier`'s slot `slot` if it still holds `key`.
    pub fn free(&self, tier: usize, slot: u32, key: u64) -> io::Result<()> {
        if self.copy_state(tier, Some(slot), key).is_none() {
            return Ok(());
        }
        let device = &self.devices[tier];
        device.note(device.slots().free(slot, device.backend.as_ref()))
    }

    /// Stores the whole sectors of `data` (line `key`'s current contents at `start`) that tier
    /// `tier`'s slot does not hold yet; never over valid sectors, which may be newer. `dirty`
    /// says which of them are newer than the backing store.
    pub fn fill(
        &self,
        tier: usize,
        slot: u32,
        key: u64,
        start: u32,
        data: &[u8],
        dirty: u128,
    ) -> io::Result<()> {
        let whole = whole_sector_bits(start, data.len() as u32);
        let held = self
            .copy_state(tier, Some(slot), key)
            .map_or(0, |state| state.valid);
        let missing = whole & !held;
        if missing == 0 {
            return Ok(());
        }
        let device = &self.devices[tier];
        for (first, count) in runs(missing) {
            let from = first * SECTOR_BYTES;
            let bytes =
                &data[(from - start) as usize..((first + count) * SECTOR_BYTES - start) as usize];
            let offset = self.slot_offset(tier, slot, from);
            device.write_at(offset, bytes)?;
            device.persist(offset, bytes.len() as u64)?;
        }
        let persistent = device.slots().is_persistent();
        self.update(tier, slot, key, |state| {
            state.valid |= missing;
            state.dirty |= dirty & missing;
            if persistent {
                state.unflushed |= missing & !dirty;
            }
        })
    }

    /// Before valid sectors of a persistent copy are overwritten in place, records a state that
    /// is right whichever version a crash leaves: for a dirty write, the sectors marked dirty
    /// (their old data is the backing store's or newer, so writing either back is harmless);
    /// for a clean write, the sectors marked invalid (reads go below, written first). So a
    /// block never reads one thing after a restart and another once its line is evicted.
    pub fn prepare_overwrite(
        &self,
        tier: usize,
        slot: u32,
        key: u64,
        sectors: u128,
        dirty: bool,
    ) -> io::Result<()> {
        if !self.devices[tier].slots().is_persistent() {
            return Ok(());
        }
        let Some(state) = self.copy_state(tier, Some(slot), key) else {
            return Ok(());
        };
        let overwritten = sectors & state.valid;
        if dirty && overwritten & !state.dirty == 0 || !dirty && overwritten == 0 {
            return Ok(());
        }
        self.update(tier, slot, key, |state| {
            if dirty {
                state.dirty |= overwritten;
            } else {
                state.valid &= !overwritten;
                state.dirty &= !overwritten;
            }
        })
    }

    /// Writes a client's bytes into tier `tier`'s copy, dirty or not.
    pub fn write_cached(
        &self,
        tier: usize,
        slot: u32,
        write: &ClientWrite<'_>,
        dirty: bool,
    ) -> io::Result<()> {
        let ClientWrite {
            key,
            start,
            data,
            edges,
        } = *write;
        let (first, end) = sector_span(start, data.len() as u32);
        let device = &self.devices[tier];
        let offset = self.slot_offset(tier, slot, first);
        if first == start && end == start + data.len() as u32 {
            device.write_at(offset, data)?;
        } else {
            let mut window = edges.to_vec();
            let at = (start - first) as usize;
            window[at..at + data.len()].copy_from_slice(data);
            device.write_at(offset, &window)?;
        }
        device.persist(offset, u64::from(end - first))?;
        let bits = sector_bits(first, end - first);
        let persistent = device.slots().is_persistent();
        self.update(tier, slot, key, |state| {
            state.valid |= bits;
            if dirty {
                state.dirty |= bits;
                state.unflushed &= !bits;
            } else {
                state.dirty &= !bits;
                if persistent {
                    state.unflushed |= bits;
                }
            }
        })
    }
}

/// The whole sectors `len` bytes at `start` touch, as a byte range of the line.
pub fn sector_span(start: u32, len: u32) -> (u32, u32) {
    let first = start / SECTOR_BYTES * SECTOR_BYTES;
    (first, (start + len).next_multiple_of(SECTOR_BYTES))
}

/// The sectors that `len` bytes at `start` cover whole.
pub fn whole_sector_bits(start: u32, len: u32) -> u128 {
    let first = start.next_multiple_of(SECTOR_BYTES);
    let end = (start + len) / SECTOR_BYTES * SECTOR_BYTES;
    if end <= first {
        0
    } else {
        sector_bits(first, end - first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_sectors_are_filled() {
        assert_eq!(whole_sector_bits(0, 1024), 0b11);
        assert_eq!(whole_sector_bits(100, 1000), 0b10);
        assert_eq!(whole_sector_bits(100, 200), 0);
        assert_eq!(sector_span(100, 1000), (0, 1536));
    }
}
