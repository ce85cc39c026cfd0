//! The staged device under crashes (seed 001 §4.4: a volatile cache, made durable by flushes
//! and FUA writes; docs/reliability.md, "Crash campaigns"): writers, a reader and a flusher at
//! work over a BTT on persistent memory with crash injection, Caiti's evictors (or another
//! scheme's) writing back, hits on Pending and Evicting slots and bypasses all happening, until
//! the machine stops after a seeded number of device operations. The cache is volatile, like a
//! disk's write cache: what it held is lost. After the crash the BTT opens again and every
//! block must be whole, its own, a version written to it, and no older than the last write
//! acknowledged before the last completed flush or FUA write; the BTT must be writable and a
//! second cycle must pass too. The seed is printed on failure.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use heterarchy_blockdev::{StagedDevice, StagedOptions, BLOCK_BYTES};
use heterarchy_device::backend::btt::{BttBackend, BttOptions};
use heterarchy_device::backend::{
    run_crash_campaign, self_described_version, self_describing_block, Backend, CrashAfter,
    CrashBudget, PmemBackend,
};
use heterarchy_engine::staging::StagingScheme;

mod common;
use common::Rng;

const MEDIA_BYTES: u64 = 4 << 20;
const BLOCKS: u64 = 40;
const WRITERS: u64 = 3;

fn options() -> BttOptions {
    BttOptions {
        sector_bytes: BLOCK_BYTES as u32,
        max_arena_bytes: 2 << 20,
        min_arena_bytes: 512 << 10,
        nfree: 4,
    }
}

/// What the oracle knows of a block.
#[derive(Default)]
struct Oracle {
    /// Every version issued to the block.
    issued: Mutex<Vec<u64>>,
    acknowledged: AtomicU64,
    /// The last version made durable by a completed flush or FUA write.
    durable: AtomicU64,
}

fn scheme_of(seed: u64) -> StagingScheme {
    // Caiti most of the time; the baselines in turn.
    match seed % 6 {
        0 => StagingScheme::Pmbd,
        1 => StagingScheme::Lru,
        2 => StagingScheme::CoActive,
        _ => StagingScheme::CAITI,
    }
}

fn trial(seed: u64, dir: &std::path::Path) -> Result<u64, String> {
    let mut pmem = PmemBackend::open(&dir.join(format!("staged{seed}")), MEDIA_BYTES).unwrap();
    pmem.enable_crash_injection();
    let pmem = Arc::new(pmem);
    let budget = CrashBudget::new(i64::MAX);
    let open_btt = |budget: &CrashBudget| {
        BttBackend::open(
            Box::new(CrashAfter::new(Arc::clone(&pmem), budget.clone())),
            options(),
        )
    };
    let oracle: Vec<Oracle> = (0..BLOCKS).map(|_| Oracle::default()).collect();
    let mut random = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    for cycle in 0..2u64 {
        let btt =
            open_btt(&budget).map_err(|error| format!("opening in cycle {cycle}: {error}"))?;
        if let Some(why) = btt.read_only() {
            return Err(format!("read-only in cycle {cycle}: {why}"));
        }
        let device = StagedDevice::open(
            Box::new(btt),
            StagedOptions {
                scheme: scheme_of(seed),
                cache_bytes: 6 * BLOCK_BYTES as u64,
                evictors: 2,
            },
        )
        .map_err(|error| error.to_string())?;
        budget.set(300 + random.below(4_000) as i64);
        let stopped = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for writer in 0..WRITERS {
                let (device, oracle, stopped) = (&device, &oracle, &stopped);
                let mut random = Rng(seed ^ ((writer + 1 + cycle * 7) << 40) | 1);
                scope.spawn(move || {
                    for round in 1u64.. {
                        let block = writer + WRITERS * random.below(BLOCKS / WRITERS);
                        let version = ((cycle + 1) << 40) | (round * WRITERS + writer);
                        let entry = &oracle[block as usize];
                        entry.issued.lock().unwrap().push(version);
                        let fua = random.below(10) == 0;
                        let data = self_describing_block(block, version, BLOCK_BYTES);
                        if device
                            .write(block * BLOCK_BYTES as u64, &data, fua)
                            .is_err()
                        {
                            stopped.store(true, Ordering::SeqCst);
                            return;
                        }
                        entry.acknowledged.store(version, Ordering::SeqCst);
                        if fua {
                            entry.durable.store(version, Ordering::SeqCst);
                        }
                        if stopped.load(Ordering::SeqCst) {
                            return;
                        }
                    }
                });
            }
            let (device, oracle, stopped) = (&device, &oracle, &stopped);
            scope.spawn(move || {
                while !stopped.load(Ordering::SeqCst) {
                    let owed: Vec<u64> = oracle
                        .iter()
                        .map(|entry| entry.acknowledged.load(Ordering::SeqCst))
                        .collect();
                    if device.flush().is_err() {
                        stopped.store(true, Ordering::SeqCst);
                        return;
                    }
                    for (entry, version) in oracle.iter().zip(owed) {
                        entry.durable.fetch_max(version, Ordering::SeqCst);
                    }
                }
            });
            scope.spawn(move || {
                let mut buf = vec![0u8; BLOCK_BYTES];
                let mut block = 0;
                while !stopped.load(Ordering::SeqCst) {
                    if device.read(block * BLOCK_BYTES as u64, &mut buf).is_ok() {
                        assert!(
                            self_described_version(&buf, block).is_ok(),
                            "seed {seed}: a torn or foreign read of block {block}"
                        );
                    }
                    block = (block + 1) % BLOCKS;
                }
            });
        });
        // The power is gone: the cache's DRAM with it.
        drop(device);
        pmem.crash(seed * 2 + cycle).unwrap();
        pmem.restart();
        budget.set(i64::MAX);
        let btt =
            open_btt(&budget).map_err(|error| format!("reopening after crash {cycle}: {error}"))?;
        if let Some(why) = btt.read_only() {
            return Err(format!("read-only after crash {cycle}: {why}"));
        }
        let mut buf = vec![0u8; BLOCK_BYTES];
        for block in 0..BLOCKS {
            btt.read_at(block * BLOCK_BYTES as u64, &mut buf)
                .map_err(|error| format!("reading block {block}: {error}"))?;
            let found = self_described_version(&buf, block)?;
            let entry = &oracle[block as usize];
            let durable = entry.durable.load(Ordering::SeqCst);
            if found < durable {
                return Err(format!(
                    "block {block} holds version {found} after crash {cycle}, {durable} was flushed (lost)"
                ));
            }
            if found != 0 && !entry.issued.lock().unwrap().contains(&found) {
                return Err(format!(
                    "block {block} holds version {found}, never issued to it (phantom)"
                ));
            }
            // What survived is what the next cycle must keep.
            entry.durable.store(found, Ordering::SeqCst);
            entry.acknowledged.store(found, Ordering::SeqCst);
        }
        // Writable after recovery.
        btt.write_at(
            0,
            &self_describing_block(0, found_marker(cycle), BLOCK_BYTES),
        )
        .map_err(|error| format!("writing after crash {cycle}: {error}"))?;
        oracle[0].issued.lock().unwrap().push(found_marker(cycle));
        oracle[0]
            .durable
            .store(found_marker(cycle), Ordering::SeqCst);
        oracle[0]
            .acknowledged
            .store(found_marker(cycle), Ordering::SeqCst);
    }
    // One crash a cycle.
    Ok(2)
}

/// A version written straight to the BTT after a crash, above every version of that cycle.
fn found_marker(cycle: u64) -> u64 {
    ((cycle + 1) << 40) | (1 << 39)
}

/// A few dozen trials here; `scripts/crash-campaign --staged --trials N` runs any number.
#[test]
fn crashes_lose_only_unflushed_writes_and_never_tear_a_block() {
    let dir = tempfile::tempdir().unwrap();
    run_crash_campaign("staged", "STAGED_CRASH_TRIALS", 40, |seed| {
        let result = trial(seed, dir.path());
        std::fs::remove_file(dir.path().join(format!("staged{seed}"))).unwrap();
        result
    });
}
