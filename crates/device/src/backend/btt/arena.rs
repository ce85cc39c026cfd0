//! One BTT arena at work (seed 001 §2.2; the write, read and recovery flows of the Linux
//! kernel's `Documentation/driver-api/nvdimm/btt.rst`): lanes that each own one free block, the
//! read-tracking table that keeps a writer off a block still being read, map locks that
//! serialize writers of one block, and recovery from the flog at open.
//!
//! A write puts its data in the lane's free block and persists it, logs the switch in the
//! lane's older flog section (its fields persisted first, its sequence number last), then
//! stores and persists the one map entry, an 8-byte-aligned 4-byte store that a crash cannot
//! tear. The block the map pointed to becomes the lane's free block. A crash at any point leaves
//! each block whole: old or new.

use std::io;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::layout::{
    newest_section, next_seq, ArenaGeometry, FlogEntry, InfoBlock, Mapping, FLAG_ERROR,
    FLOG_GROUP_BYTES, INFO_BYTES, MAP_ENTRY_BYTES,
};
use crate::backend::Backend;

/// A lane's free block, and where and with which number its next flog section goes.
#[derive(Clone, Copy, Debug)]
struct Lane {
    free_block: u32,
    /// The flog section (0 or 1) the next write of this lane overwrites: the older one.
    section: usize,
    seq: u32,
}

/// A read-tracking entry: a lane's reader is reading this block (the valid bit set).
const RTT_READING: u32 = 1 << 31;

/// One arena of a BTT on `backend`, starting at byte `base`.
pub struct Arena {
    base: u64,
    info: InfoBlock,
    lanes: Vec<OwnLine<Mutex<Lane>>>,
    /// Per lane, the block its reader is reading, or 0.
    reading: Vec<OwnLine<AtomicU32>>,
    /// One past the highest lane a reader has used: a writer scans only the entries below it
    /// (none while nothing is read; on a machine of few cores, as few as it has, since lanes
    /// follow CPUs), and a reader pays a load, not a read-modify-write, once its lane is in.
    lanes_reading: AtomicUsize,
    map_locks: Vec<Mutex<()>>,
    /// Damage found at open: reads only.
    read_only: Option<String>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn damaged(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

impl Arena {
    /// Writes a fresh arena of `geometry` at `base`: every block unwritten (reads as what the
    /// data area holds, zeroes on a fresh device), lane i's free block the i-th spare one.
    pub fn format(
        backend: &dyn Backend,
        base: u64,
        geometry: &ArenaGeometry,
        uuid: [u8; 16],
        next_offset: u64,
    ) -> io::Result<Arena> {
        let info = geometry.info(uuid, next_offset);
        let map_bytes = u64::from(info.external_nlba) * MAP_ENTRY_BYTES;
        write_zeroes(backend, base + info.map_offset, map_bytes)?;
        let mut flog = vec![0u8; (u64::from(info.nfree) * FLOG_GROUP_BYTES) as usize];
        for lane in 0..info.nfree {
            let spare = info.external_nlba + lane;
            let first = FlogEntry {
                lba: lane,
                old_map: spare,
                new_map: spare,
                seq: 1,
            };
            let at = (u64::from(lane) * FLOG_GROUP_BYTES) as usize;
            flog[at..at + FlogEntry::BYTES].copy_from_slice(&first.encode());
        }
        backend.write_at(base + info.flog_offset, &flog)?;
        backend.persist(base + info.map_offset, map_bytes)?;
        backend.persist(base + info.flog_offset, flog.len() as u64)?;
        // The copy first: a crash before the primary is written leaves a block that opens.
        let image = info.encode();
        backend.write_at(base + info.info2_offset, &image)?;
        backend.persist(base + info.info2_offset, INFO_BYTES)?;
        backend.write_at(base, &image)?;
        backend.persist(base, INFO_BYTES)?;
        Arena::open(backend, base, info.info2_offset + INFO_BYTES)
    }

    /// Opens the arena at `base`, `arena_bytes` long: reads its info block (or the copy when
    /// the primary is damaged), rebuilds the lanes from the flog, rolls forward a map switch a
    /// crash cut short, and checks that the map and the free blocks hold every data block once.
    /// Damage that recovery cannot undo opens the arena read-only, saying why.
    pub fn open(backend: &dyn Backend, base: u64, arena_bytes: u64) -> io::Result<Arena> {
        let mut image = vec![0u8; INFO_BYTES as usize];
        backend.read_at(base, &mut image)?;
        let info = match InfoBlock::decode(&image, arena_bytes) {
            Ok(info) => info,
            Err(primary) => {
                let copy_at = base + arena_bytes - INFO_BYTES;
                backend.read_at(copy_at, &mut image)?;
                let info = InfoBlock::decode(&image, arena_bytes).map_err(|copy| {
                    damaged(format!(
                        "BTT arena at byte {base}: info block: {primary}; its copy: {copy}"
                    ))
                })?;
                // The copy is whole: it becomes the primary again, so that one more damaged
                // block does not lose the arena.
                backend.write_at(base, &image)?;
                backend.persist(base, INFO_BYTES)?;
                info
            }
        };
        let nfree = info.nfree as usize;
        let mut arena = Arena {
            base,
            lanes: Vec::with_capacity(nfree),
            reading: (0..nfree).map(|_| OwnLine(AtomicU32::new(0))).collect(),
            lanes_reading: AtomicUsize::new(0),
            map_locks: (0..nfree).map(|_| Mutex::new(())).collect(),
            read_only: (info.flags & FLAG_ERROR != 0)
                .then(|| format!("BTT arena at byte {base} is marked damaged")),
            info,
        };
        let mut flog = vec![0u8; nfree * FLOG_GROUP_BYTES as usize];
        backend.read_at(base + arena.info.flog_offset, &mut flog)?;
        for lane in 0..nfree {
            let group = &flog[lane * FLOG_GROUP_BYTES as usize..];
            let sections = [0, 1].map(|section| {
                let at = section * FlogEntry::BYTES;
                FlogEntry::decode(group[at..at + FlogEntry::BYTES].try_into().expect("16"))
            });
            match arena.recover_lane(backend, lane, &sections) {
                Ok(state) => arena.lanes.push(OwnLine(Mutex::new(state))),
                Err(why) => {
                    arena.read_only.get_or_insert(why);
                    // A lane with no usable free block: writes through it are refused.
                    arena.lanes.push(OwnLine(Mutex::new(Lane {
                        free_block: u32::MAX,
                        section: 0,
                        seq: 1,
                    })));
                }
            }
        }
        if arena.read_only.is_none() {
            if let Err(why) = arena.check_blocks(backend) {
                arena.read_only = Some(why);
            }
        }
        Ok(arena)
    }

    /// The lane's free block and next flog section from its newer section; a map switch that
    /// the flog recorded but the map missed is finished (its data was persisted first).
    fn recover_lane(
        &self,
        backend: &dyn Backend,
        lane: usize,
        sections: &[FlogEntry; 2],
    ) -> Result<Lane, String> {
        let base = self.base;
        let newest = newest_section(sections)
            .map_err(|why| format!("BTT arena at byte {base}: lane {lane}'s flog: {why}"))?;
        let entry = sections[newest];
        let blocks = self.info.internal_nlba;
        if entry.lba >= self.info.external_nlba
            || entry.old_map >= blocks
            || entry.new_map >= blocks
        {
            return Err(format!(
                "BTT arena at byte {base}: lane {lane}'s flog names block {} -> {} of premap \
                 {}, past the arena's {blocks} blocks",
                entry.old_map, entry.new_map, entry.lba
            ));
        }
        if entry.old_map != entry.new_map {
            let mapped = self
                .map_entry(backend, entry.lba)
                .map_err(|error| error.to_string())?
                .block(entry.lba);
            if mapped == entry.old_map {
                self.store_map(backend, entry.lba, Mapping::Block(entry.new_map))
                    .map_err(|error| error.to_string())?;
            }
        }
        Ok(Lane {
            free_block: entry.old_map,
            section: 1 - newest,
            seq: next_seq(entry.seq),
        })
    }

    /// Every data block is mapped or free, once.
    fn check_blocks(&self, backend: &dyn Backend) -> Result<(), String> {
        let base = self.base;
        let blocks = self.info.internal_nlba as usize;
        let mut owners = vec![false; blocks];
        let mut claim = |block: u32, what: String| -> Result<(), String> {
            match owners.get_mut(block as usize) {
                Some(owned) if !*owned => {
                    *owned = true;
                    Ok(())
                }
                Some(_) => Err(format!(
                    "BTT arena at byte {base}: block {block} is both {what} and another's"
                )),
                None => Err(format!(
                    "BTT arena at byte {base}: {what} names block {block} of {blocks}"
                )),
            }
        };
        let mut map = vec![0u8; (u64::from(self.info.external_nlba) * MAP_ENTRY_BYTES) as usize];
        backend
            .read_at(base + self.info.map_offset, &mut map)
            .map_err(|error| error.to_string())?;
        for (premap, raw) in map.chunks_exact(4).enumerate() {
            let raw = u32::from_le_bytes(raw.try_into().expect("4"));
            let block = Mapping::decode(raw).block(premap as u32);
            claim(block, format!("premap {premap}'s"))?;
        }
        for (lane, state) in self.lanes.iter().enumerate() {
            claim(lock(state).free_block, format!("lane {lane}'s free block"))?;
        }
        Ok(())
    }

    /// Blocks this arena offers.
    pub fn blocks(&self) -> u32 {
        self.info.external_nlba
    }

    /// Bytes of a block.
    pub fn block_bytes(&self) -> u32 {
        self.info.external_lba_bytes
    }

    /// Why the arena only reads, if it does.
    pub fn read_only(&self) -> Option<&str> {
        self.read_only.as_deref()
    }

    fn map_entry(&self, backend: &dyn Backend, premap: u32) -> io::Result<Mapping> {
        let mut raw = [0u8; 4];
        backend.read_at(self.map_at(premap), &mut raw)?;
        Ok(Mapping::decode(u32::from_le_bytes(raw)))
    }

    fn store_map(&self, backend: &dyn Backend, premap: u32, mapping: Mapping) -> io::Result<()> {
        let at = self.map_at(premap);
        backend.write_at(at, &mapping.encode().to_le_bytes())?;
        backend.persist(at, MAP_ENTRY_BYTES)
    }

    fn map_at(&self, premap: u32) -> u64 {
        self.base + self.info.map_offset + u64::from(premap) * MAP_ENTRY_BYTES
    }

    fn block_at(&self, block: u32) -> u64 {
        self.base + self.info.data_offset + u64::from(block) * u64::from(self.block_bytes())
    }

    /// A lane for this call: the first free one from the lane of the CPU the thread runs on
    /// (as the kernel picks a lane), else a wait for that one (the kernel spins on a lane lock
    /// when cores outnumber lanes).
    fn take_lane(&self) -> (usize, MutexGuard<'_, Lane>) {
        // SAFETY: sched_getcpu takes nothing and only reads where the thread runs (a vDSO
        // call); -1 on failure, taken as CPU 0.
        let cpu = unsafe { libc::sched_getcpu() }.max(0) as usize;
        let lanes = self.lanes.len();
        let start = cpu % lanes;
        for step in 0..lanes {
            let lane = (start + step) % lanes;
            if let Ok(guard) = self.lanes[lane].try_lock() {
                return (lane, guard);
            }
        }
        (start, lock(&self.lanes[start]))
    }

    /// Reads block `premap` into `buf` (one block's bytes).
    pub fn read_block(&self, backend: &dyn Backend, premap: u32, buf: &mut [u8]) -> io::Result<()> {
        let (lane, _held) = self.take_lane();
        // Cleared however the read ends: a stale entry would hold a writer off forever.
        let reading = Reading::new(&self.reading[lane], lane, &self.lanes_reading);
        let block = loop {
            let mapping = self.map_entry(backend, premap)?;
            let block = mapping.block(premap);
            reading.entry.store(RTT_READING | block, Ordering::SeqCst);
            // A writer may have freed the block between the map read and the announcement: read
            // the map again, and retry if it moved.
            if self.map_entry(backend, premap)? != mapping {
                continue;
            }
            match mapping {
                Mapping::Zero(_) => {
                    buf.fill(0);
                    return Ok(());
                }
                Mapping::Error(_) => {
                    return Err(io::Error::other(format!(
                        "BTT block {premap} of the arena at byte {} is marked bad",
                        self.base
                    )));
                }
                Mapping::Initial | Mapping::Block(_) => break block,
            }
        };
        backend.read_at(self.block_at(block), buf)
    }

    /// Writes block `premap` from `data` (one block's bytes), atomically: after a crash it reads
    /// whole, old or new.
    pub fn write_block(&self, backend: &dyn Backend, premap: u32, data: &[u8]) -> io::Result<()> {
        self.switch(backend, premap, Fill::Whole(data))
    }

    /// Writes `data` at byte `at` of block `premap`, the rest of the block kept: the old block
    /// is read and merged under the block's map lock, so that writes to other bytes of the same
    /// block are not lost, and the whole new block is switched in atomically.
    pub fn write_part(
        &self,
        backend: &dyn Backend,
        premap: u32,
        at: usize,
        data: &[u8],
    ) -> io::Result<()> {
        self.switch(backend, premap, Fill::Part { at, data })
    }

    /// Trims block `premap`: it reads as zeroes until written again. Done as a write of nothing
    /// to the lane's free block, so that it is as atomic as a write.
    pub fn trim_block(&self, backend: &dyn Backend, premap: u32) -> io::Result<()> {
        self.switch(backend, premap, Fill::Trim)
    }

    /// Writes and persists `data` in the free block `block`, to be mapped as written: with
    /// streaming stores, since a block written out of place is not read back soon (as PMDK's
    /// libpmemblk writes its blocks).
    fn put(&self, backend: &dyn Backend, block: u32, data: &[u8]) -> io::Result<Mapping> {
        let at = self.block_at(block);
        backend.write_persisted(at, data)?;
        Ok(Mapping::Block(block))
    }

    /// Premap block `premap`, mapped as `old`, with `data` at byte `at`.
    fn merged(
        &self,
        backend: &dyn Backend,
        premap: u32,
        old: Mapping,
        at: usize,
        data: &[u8],
    ) -> io::Result<Vec<u8>> {
        let mut whole = vec![0u8; self.block_bytes() as usize];
        match old {
            Mapping::Initial | Mapping::Block(_) => {
                backend.read_at(self.block_at(old.block(premap)), &mut whole)?;
            }
            // A trimmed or bad block's other bytes read as zeroes from now on.
            Mapping::Zero(_) | Mapping::Error(_) => {}
        }
        whole[at..at + data.len()].copy_from_slice(data);
        Ok(whole)
    }

    /// Points premap block `premap` at the lane's free block once it holds what `fill` asks,
    /// logging the switch first. A part is merged under the map lock; a whole block is written
    /// before taking it, as the kernel does.
    fn switch(&self, backend: &dyn Backend, premap: u32, fill: Fill<'_>) -> io::Result<()> {
        if let Some(why) = &self.read_only {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, why.clone()));
        }
        let (lane, mut state) = self.take_lane();
        let new = state.free_block;
        // Wait for any reader of the free block, which it found mapped before its last write.
        // Such a reader raised `lanes_reading` past its lane before it read the map.
        let lanes_reading = self.lanes_reading.load(Ordering::SeqCst);
        while self.reading[..lanes_reading]
            .iter()
            .any(|entry| entry.load(Ordering::SeqCst) == RTT_READING | new)
        {
            std::thread::yield_now();
        }
        let map_lock = &self.map_locks[premap as usize % self.map_locks.len()];
        // The block's mapping now: read in each arm once its map lock is held.
        let mapped = || self.map_entry(backend, premap);
        let (mapping, old, _held) = match fill {
            Fill::Whole(data) => {
                let mapping = self.put(backend, new, data)?;
                let held = lock(map_lock);
                (mapping, mapped()?, held)
            }
            Fill::Part { at, data } => {
                let held = lock(map_lock);
                let old = mapped()?;
                let merged = self.merged(backend, premap, old, at, data)?;
                (self.put(backend, new, &merged)?, old, held)
            }
            Fill::Trim => {
                let held = lock(map_lock);
                (Mapping::Zero(new), mapped()?, held)
            }
        };
        let old = old.block(premap);
        let entry = FlogEntry {
            lba: premap,
            old_map: old,
            new_map: new,
            seq: state.seq,
        };
        let section_at = self.base
            + self.info.flog_offset
            + lane as u64 * FLOG_GROUP_BYTES
            + (state.section * FlogEntry::BYTES) as u64;
        let bytes = entry.encode();
        // The fields, then the sequence number that makes the section the newer one.
        backend.write_at(section_at, &bytes[..12])?;
        backend.persist(section_at, 12)?;
        backend.write_at(section_at + 12, &bytes[12..])?;
        backend.persist(section_at + 12, 4)?;
        self.store_map(backend, premap, mapping)?;
        *state = Lane {
            free_block: old,
            section: 1 - state.section,
            seq: next_seq(state.seq),
        };
        Ok(())
    }
}

/// A value on a cache line of its own: lanes and their read-tracking entries are each used by
/// one thread at a time, and two threads on neighbouring lanes must not pass a line between
/// their cores on every lock, unlock and store.
#[repr(align(64))]
struct OwnLine<T>(T);

impl<T> std::ops::Deref for OwnLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A lane's read-tracking entry while its reader reads, cleared when the read ends; made,
/// before the reader reads the map, with the lane among those writers scan.
struct Reading<'a> {
    entry: &'a AtomicU32,
}

impl<'a> Reading<'a> {
    fn new(entry: &'a AtomicU32, lane: usize, lanes_reading: &AtomicUsize) -> Reading<'a> {
        if lanes_reading.load(Ordering::SeqCst) <= lane {
            lanes_reading.fetch_max(lane + 1, Ordering::SeqCst);
        }
        Reading { entry }
    }
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        // Release: the read of the block is done before a writer can see the entry cleared.
        self.entry.store(0, Ordering::Release);
    }
}

/// What a switch puts in the free block.
enum Fill<'a> {
    Whole(&'a [u8]),
    /// `data` at byte `at`, the rest of the block as it was.
    Part {
        at: usize,
        data: &'a [u8],
    },
    /// Nothing: the block reads as zeroes.
    Trim,
}

/// Writes `len` zero bytes at `offset`, a megabyte at a time.
fn write_zeroes(backend: &dyn Backend, offset: u64, len: u64) -> io::Result<()> {
    let chunk = vec![0u8; 1 << 20];
    let mut done = 0;
    while done < len {
        let part = (len - done).min(chunk.len() as u64);
        backend.write_at(offset + done, &chunk[..part as usize])?;
        done += part;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::backend::{CrashAfter, CrashBudget, PmemBackend, RamBackend};

    const ARENA_BYTES: u64 = 1 << 20;

    fn fresh(backend: &dyn Backend) -> Arena {
        let geometry = ArenaGeometry::plan(ARENA_BYTES, 4096, 4).unwrap();
        Arena::format(backend, 0, &geometry, [9; 16], 0).unwrap()
    }

    fn read(arena: &Arena, backend: &dyn Backend, premap: u32) -> Vec<u8> {
        let mut block = vec![0u8; 4096];
        arena.read_block(backend, premap, &mut block).unwrap();
        block
    }

    #[test]
    fn blocks_read_back_across_reopening_and_trim_reads_zeroes() {
        let ram = RamBackend::new(ARENA_BYTES).unwrap();
        let arena = fresh(&ram);
        assert!(arena.blocks() > 200 && arena.read_only().is_none());
        assert_eq!(read(&arena, &ram, 5), vec![0; 4096]);
        for round in 1..=20u8 {
            arena.write_block(&ram, 5, &[round; 4096]).unwrap();
            arena.write_block(&ram, 6, &[round + 100; 4096]).unwrap();
        }
        let arena = Arena::open(&ram, 0, ARENA_BYTES).unwrap();
        assert!(arena.read_only().is_none());
        assert_eq!(read(&arena, &ram, 5), vec![20; 4096]);
        assert_eq!(read(&arena, &ram, 6), vec![120; 4096]);
        arena.trim_block(&ram, 5).unwrap();
        assert_eq!(read(&arena, &ram, 5), vec![0; 4096]);
        arena.write_block(&ram, 5, &[1; 4096]).unwrap();
        assert_eq!(read(&arena, &ram, 5), vec![1; 4096]);
    }

    /// Persistent memory at `path` with crash injection, and a device over it that stops once
    /// the budget's persists are spent.
    fn crashable(
        path: &std::path::Path,
    ) -> (Arc<PmemBackend>, CrashBudget, CrashAfter<Arc<PmemBackend>>) {
        let mut pmem = PmemBackend::open(path, ARENA_BYTES).unwrap();
        pmem.enable_crash_injection();
        let pmem = Arc::new(pmem);
        let budget = CrashBudget::new(i64::MAX);
        let device = CrashAfter::at_persists(Arc::clone(&pmem), budget.clone());
        (pmem, budget, device)
    }

    /// Recovery itself crashes at each of its persists in turn (it rolls the map forward after
    /// a crash between the flog's sequence number and the map entry): opened again, the arena
    /// finishes the roll-forward, so recovery is idempotent.
    #[test]
    fn a_crash_during_recovery_leaves_recovery_to_be_done_again() {
        let dir = tempfile::tempdir().unwrap();
        for recovery_persists in 0..4 {
            let (pmem, budget, device) = crashable(&dir.path().join("pm"));
            let arena = fresh(&device);
            arena.write_block(&device, 7, &[3; 4096]).unwrap();
            // The write's data, flog fields and sequence number persist; its map entry not.
            budget.set(3);
            assert!(arena.write_block(&device, 7, &[4; 4096]).is_err());
            pmem.crash(recovery_persists as u64).unwrap();
            pmem.restart();
            budget.set(recovery_persists);
            let interrupted = Arena::open(&device, 0, ARENA_BYTES);
            let context = format!("recovery stopped at persist {recovery_persists}");
            pmem.crash(100 + recovery_persists as u64).unwrap();
            pmem.restart();
            budget.set(i64::MAX);
            drop(interrupted);
            let arena = Arena::open(&device, 0, ARENA_BYTES).unwrap();
            assert_eq!(arena.read_only(), None, "{context}");
            assert_eq!(read(&arena, &device, 7), vec![4; 4096], "{context}");
            arena.write_block(&device, 7, &[5; 4096]).unwrap();
            assert_eq!(read(&arena, &device, 7), vec![5; 4096], "{context}");
        }
    }

    /// The machine stops at each persist of one overwrite in turn: the block reads whole, old
    /// or new, the arena opens writable, and every block is mapped or free once.
    #[test]
    fn a_crash_at_each_persist_of_a_write_leaves_the_old_or_the_new_block() {
        let dir = tempfile::tempdir().unwrap();
        for persists in 0..8 {
            for seed in 0..4u64 {
                let (pmem, budget, device) = crashable(&dir.path().join("pm"));
                let arena = fresh(&device);
                for round in 1..=3u8 {
                    arena.write_block(&device, 7, &[round; 4096]).unwrap();
                }
                budget.set(persists);
                let done = arena.write_block(&device, 7, &[4; 4096]).is_ok();
                pmem.crash(seed * 100 + persists as u64).unwrap();
                pmem.restart();
                budget.set(i64::MAX);
                let arena = Arena::open(&device, 0, ARENA_BYTES).unwrap();
                let context = format!("crash at persist {persists}, seed {seed}");
                assert_eq!(arena.read_only(), None, "{context}");
                let block = read(&arena, &device, 7);
                // Persists of a write: its data, the flog fields, the flog's sequence number,
                // the map entry. Before the sequence number is persisted the old block stands;
                // once it is, recovery rolls the map forward to the new one.
                match persists {
                    0 | 1 => assert_eq!(block, vec![3; 4096], "{context}"),
                    2 => assert!(
                        block == vec![3; 4096] || block == vec![4; 4096],
                        "{context}"
                    ),
                    _ => assert_eq!(block, vec![4; 4096], "{context}"),
                }
                assert_eq!(done, persists >= 4, "{context}");
                // writable after recovery, and the next write lands whole
                arena.write_block(&device, 7, &[5; 4096]).unwrap();
                assert_eq!(read(&arena, &device, 7), vec![5; 4096], "{context}");
                drop(arena);
                let reopened = Arena::open(&device, 0, ARENA_BYTES).unwrap();
                assert_eq!(reopened.read_only(), None, "{context}");
                assert_eq!(read(&reopened, &device, 7), vec![5; 4096], "{context}");
            }
        }
    }

    #[test]
    fn damage_recovery_cannot_undo_opens_read_only_and_a_lost_primary_falls_back() {
        let ram = RamBackend::new(ARENA_BYTES).unwrap();
        let arena = fresh(&ram);
        arena.write_block(&ram, 1, &[1; 4096]).unwrap();
        let map_offset = arena.info.map_offset;
        // the primary info block gone: the copy opens it, and is written back as the primary
        ram.write_at(0, &[0; 16]).unwrap();
        let arena = Arena::open(&ram, 0, ARENA_BYTES).unwrap();
        assert_eq!(read(&arena, &ram, 1), vec![1; 4096]);
        let mut primary = vec![0u8; INFO_BYTES as usize];
        ram.read_at(0, &mut primary).unwrap();
        assert_eq!(
            InfoBlock::decode(&primary, ARENA_BYTES),
            Ok(arena.info.clone())
        );
        // a map entry pointing at another premap's block: read-only, saying why
        ram.write_at(
            map_offset + 4 * 2,
            &Mapping::Block(3).encode().to_le_bytes(),
        )
        .unwrap();
        let arena = Arena::open(&ram, 0, ARENA_BYTES).unwrap();
        let why = arena.read_only().unwrap().to_string();
        assert!(why.contains("block 3"), "{why}");
        assert!(arena.write_block(&ram, 1, &[2; 4096]).is_err());
        assert_eq!(read(&arena, &ram, 1), vec![1; 4096]);
        // both info blocks gone: refused with both reasons
        ram.write_at(0, &[0; 16]).unwrap();
        ram.write_at(ARENA_BYTES - INFO_BYTES, &[0; 16]).unwrap();
        let error = Arena::open(&ram, 0, ARENA_BYTES).err().unwrap().to_string();
        assert!(error.contains("its copy"), "{error}");
    }

    /// Writers on blocks of their own and on one shared block, more threads than lanes, and
    /// readers of the same blocks throughout: every read is whole (one writer's block, never a
    /// mix), each writer's blocks end with its last write, and the arena reopens intact.
    #[test]
    fn concurrent_writers_and_readers_see_whole_blocks() {
        const WRITERS: u32 = 4;
        const ROUNDS: u32 = 2000;
        let ram = RamBackend::new(ARENA_BYTES).unwrap();
        let arena = fresh(&ram);
        // A block's bytes: its writer and round in every word, so a mix shows.
        let stamp = |writer: u32, round: u32| -> Vec<u8> {
            (writer << 16 | round).to_le_bytes().repeat(1024)
        };
        let whole = |block: &[u8]| block.chunks(4).all(|word| word == &block[..4]);
        std::thread::scope(|scope| {
            for writer in 0..WRITERS {
                let (arena, ram) = (&arena, &ram);
                scope.spawn(move || {
                    for round in 1..=ROUNDS {
                        arena
                            .write_block(ram, 1 + writer, &stamp(writer, round))
                            .unwrap();
                        arena.write_block(ram, 0, &stamp(writer, round)).unwrap();
                    }
                });
            }
            for _ in 0..2 {
                let (arena, ram) = (&arena, &ram);
                scope.spawn(move || {
                    for round in 0..2 * ROUNDS {
                        let block = read(arena, ram, round % (WRITERS + 1));
                        assert!(
                            whole(&block),
                            "a torn read of block {}",
                            round % (WRITERS + 1)
                        );
                    }
                });
            }
        });
        let check = |arena: &Arena| {
            for writer in 0..WRITERS {
                assert_eq!(read(arena, &ram, 1 + writer), stamp(writer, ROUNDS));
            }
            let shared = read(arena, &ram, 0);
            assert!((0..WRITERS).any(|writer| shared == stamp(writer, ROUNDS)));
            shared
        };
        let shared = check(&arena);
        let reopened = Arena::open(&ram, 0, ARENA_BYTES).unwrap();
        assert_eq!(reopened.read_only(), None);
        assert_eq!(check(&reopened), shared);
    }

    /// A read that fails half-way (the device stopped between its two map reads) leaves no
    /// read-tracking entry behind: writers later given its block as their free one go on.
    #[test]
    fn a_failed_read_never_holds_writers_off() {
        let budget = CrashBudget::new(i64::MAX);
        let device = CrashAfter::new(RamBackend::new(ARENA_BYTES).unwrap(), budget.clone());
        let arena = fresh(&device);
        arena.write_block(&device, 3, &[1; 4096]).unwrap();
        budget.set(1);
        assert!(arena.read_block(&device, 3, &mut [0; 4096]).is_err());
        budget.set(i64::MAX);
        let (done, finished) = std::sync::mpsc::channel();
        // A thread of its own, not scoped: if it hangs, the test fails instead of hanging too.
        let shared = Arc::new((arena, device));
        let writer = Arc::clone(&shared);
        std::thread::spawn(move || {
            let (arena, device) = &*writer;
            // Enough writes for every lane's free block to come round to the old block 3.
            for round in 0..64u8 {
                arena.write_block(device, 3, &[round; 4096]).unwrap();
            }
            done.send(()).unwrap();
        });
        let waited = finished.recv_timeout(std::time::Duration::from_secs(20));
        assert!(
            waited.is_ok(),
            "a writer waits on a read that ended long ago"
        );
    }
}
