//! The BTT under crashes with writers and readers at work (seed 001 §2.2's block-level write
//! atomicity; docs/reliability.md, "Crash campaigns"): threads write self-describing blocks
//! (sector, version, checksum) over a BTT of several arenas while the machine stops after a
//! seeded number of device operations; the persistent memory then drops or tears what was never
//! persisted, and the BTT is opened again. Every sector must hold a whole block, never torn,
//! never another sector's, the last write acknowledged to it or the one in flight when the
//! power went; the BTT must open writable and survive a second crash. The seed is printed on
//! failure.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use heterarchy_device::backend::btt::{BttBackend, BttOptions};
use heterarchy_device::backend::{
    run_crash_campaign, self_described_version, self_describing_block, Backend, CrashAfter,
    CrashBudget, PmemBackend,
};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const SECTOR: usize = 4096;
const MEDIA_BYTES: u64 = 6 << 20;
const WRITERS: u64 = 3;
/// Sectors written: few, so that each is overwritten many times.
const SECTORS: u64 = 48;

fn options() -> BttOptions {
    BttOptions {
        sector_bytes: SECTOR as u32,
        max_arena_bytes: 2 << 20,
        min_arena_bytes: 512 << 10,
        nfree: 4,
    }
}

fn block(sector: u64, version: u64) -> Vec<u8> {
    self_describing_block(sector, version, SECTOR)
}

fn version_of(bytes: &[u8], sector: u64) -> Result<u64, String> {
    self_described_version(bytes, sector)
}

/// Per sector: the last version acknowledged, and the one being written.
#[derive(Clone, Copy, Default)]
struct Written {
    acknowledged: u64,
    in_flight: Option<u64>,
}

fn trial(seed: u64, dir: &std::path::Path) -> Result<u64, String> {
    let mut random = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut pmem = PmemBackend::open(&dir.join(format!("btt{seed}")), MEDIA_BYTES).unwrap();
    pmem.enable_crash_injection();
    let pmem = Arc::new(pmem);
    let budget = CrashBudget::new(i64::MAX);
    let open = |budget: &CrashBudget| {
        let media = Box::new(CrashAfter::new(Arc::clone(&pmem), budget.clone()));
        BttBackend::open(media, options())
    };
    let btt = open(&budget).map_err(|error| format!("formatting: {error}"))?;
    let written: Vec<Mutex<Written>> = (0..SECTORS).map(|_| Mutex::default()).collect();
    budget.set(random.gen_range(300..6_000));
    let stopped = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for writer in 0..WRITERS {
            let (btt, written, stopped) = (&btt, &written, &stopped);
            let mut random = Xoshiro256PlusPlus::seed_from_u64(seed ^ (writer + 1) << 32);
            scope.spawn(move || {
                for version in 1u64.. {
                    // Each writer has sectors of its own: writes to one sector are in order.
                    let sector = writer + WRITERS * random.gen_range(0..SECTORS / WRITERS);
                    let version = version * WRITERS + writer;
                    written[sector as usize].lock().unwrap().in_flight = Some(version);
                    let offset = sector * SECTOR as u64;
                    if btt.write_at(offset, &block(sector, version)).is_err() {
                        stopped.store(true, Ordering::SeqCst);
                        return;
                    }
                    let mut entry = written[sector as usize].lock().unwrap();
                    *entry = Written {
                        acknowledged: version,
                        in_flight: None,
                    };
                }
            });
        }
        let (btt, stopped) = (&btt, &stopped);
        scope.spawn(move || {
            let mut sector = vec![0u8; SECTOR];
            let mut next = 0;
            while !stopped.load(Ordering::SeqCst) {
                if btt.read_at(next * SECTOR as u64, &mut sector).is_err() {
                    return;
                }
                // A read sees a whole block, whatever is being written at the time.
                assert!(
                    version_of(&sector, next).is_ok(),
                    "seed {seed}: a torn read"
                );
                next = (next + 1) % SECTORS;
            }
        });
    });
    drop(btt);
    for round in 0..2 {
        pmem.crash(seed * 2 + round).unwrap();
        pmem.restart();
        budget.set(i64::MAX);
        let btt =
            open(&budget).map_err(|error| format!("reopening after crash {round}: {error}"))?;
        if let Some(why) = btt.read_only() {
            return Err(format!("read-only after crash {round}: {why}"));
        }
        for sector in 0..SECTORS {
            let mut bytes = vec![0u8; SECTOR];
            btt.read_at(sector * SECTOR as u64, &mut bytes)
                .map_err(|error| format!("reading sector {sector}: {error}"))?;
            let found = version_of(&bytes, sector)?;
            let entry = *written[sector as usize].lock().unwrap();
            if found != entry.acknowledged && Some(found) != entry.in_flight {
                return Err(format!(
                    "sector {sector} holds version {found} after crash {round} (lost): \
                     acknowledged {}, in flight {:?}",
                    entry.acknowledged, entry.in_flight
                ));
            }
            // What is found now is what a second crash must keep.
            *written[sector as usize].lock().unwrap() = Written {
                acknowledged: found,
                in_flight: None,
            };
        }
        // Writable after recovery: one more block, unpersisted nowhere.
        btt.write_at(0, &block(0, u64::MAX - round))
            .map_err(|error| format!("writing after crash {round}: {error}"))?;
        written[0].lock().unwrap().acknowledged = u64::MAX - round;
    }
    // Two crashes: the one under the writers and the one after recovery.
    Ok(2)
}

/// A few dozen trials here; `scripts/crash-campaign --trials N` runs any number and prints the
/// summary line.
#[test]
fn crashes_under_concurrent_writers_leave_every_sector_whole_and_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    run_crash_campaign("btt", "BTT_CRASH_TRIALS", 40, |seed| {
        let result = trial(seed, dir.path());
        std::fs::remove_file(dir.path().join(format!("btt{seed}"))).unwrap();
        result
    });
}
