//! The live PolyEMT device (docs/pm-block-device.md): against a model of the volume's bytes
//! over seeded histories of whole and partial writes, reads and knob changes; and under
//! injected crashes of its persistent memory and its backing store, where no write acknowledged
//! with a write cache present (nor any flushed one) may be lost and every page must be whole.
//! Seeds are printed on failure.

use std::path::Path;
use std::sync::Arc;

use heterarchy_blockdev::poly::{PolyDevice, PolyKnobs, PolyOptions};
use heterarchy_device::backend::{
    run_crash_campaign, self_described_version, self_describing_block, Backend, CrashAfter,
    CrashBudget, PmemBackend,
};
use heterarchy_device::codec::Codec;
use heterarchy_engine::poly::{Knobs, SearchConfig};

mod common;
use common::Rng;

const PAGE: usize = 4096;
const PAGES: u64 = 64;
/// About 12 pages of tier.
const TIER_BYTES: u64 = 64 << 10;

fn knobs(random: &mut Rng) -> Knobs {
    Knobs {
        read_share: random.below(11) as f64 / 10.0,
        compressed_share: random.below(11) as f64 / 10.0,
    }
}

fn pmem(dir: &Path, name: &str, bytes: u64) -> Arc<PmemBackend> {
    let mut pmem = PmemBackend::open(&dir.join(name), bytes).unwrap();
    pmem.enable_crash_injection();
    Arc::new(pmem)
}

fn options(knobs: PolyKnobs, seed: u64) -> PolyOptions {
    PolyOptions {
        codec: if seed.is_multiple_of(2) {
            Codec::Lz4
        } else {
            Codec::Zstd
        },
        knobs,
    }
}

/// 48 seeded histories here; `POLY_MODEL_SEEDS=N` runs any number.
#[test]
fn the_device_reads_back_what_was_written_whatever_the_knobs() {
    let dir = tempfile::tempdir().unwrap();
    let seeds = std::env::var("POLY_MODEL_SEEDS")
        .ok()
        .and_then(|seeds| seeds.parse().ok())
        .unwrap_or(48u64);
    for seed in 0..seeds {
        let backing = pmem(dir.path(), &format!("ssd{seed}"), PAGES * PAGE as u64);
        let memory = pmem(dir.path(), &format!("pm{seed}"), TIER_BYTES);
        let mut random = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let start = PolyKnobs::Fixed(knobs(&mut random));
        let device = PolyDevice::open(
            Box::new(Arc::clone(&backing)),
            Box::new(Arc::clone(&memory)),
            options(start, seed),
        )
        .unwrap();
        let mut model = vec![0u8; (PAGES as usize) * PAGE];
        let mut held_pages = 0;
        for step in 0..400 {
            let stats = device.stats();
            held_pages = held_pages
                .max(stats.write_cache_pages + stats.read_cache_pages + stats.compressed_pages);
            match random.below(10) {
                0..=3 => {
                    // Compressible or random data, whole pages or any range.
                    let offset = random.below(PAGES * PAGE as u64 - 1);
                    let len = 1 + random.below((PAGES * PAGE as u64 - offset).min(3 * PAGE as u64));
                    let data: Vec<u8> = if random.below(2) == 0 {
                        (0..len).map(|i| (i / 64) as u8 ^ step as u8).collect()
                    } else {
                        (0..len).map(|_| random.below(256) as u8).collect()
                    };
                    device.write(offset, &data, random.below(8) == 0).unwrap();
                    model[offset as usize..(offset + len) as usize].copy_from_slice(&data);
                }
                4..=7 => {
                    let offset = random.below(PAGES * PAGE as u64 - 1);
                    let len = 1 + random.below((PAGES * PAGE as u64 - offset).min(2 * PAGE as u64));
                    let mut back = vec![0u8; len as usize];
                    device.read(offset, &mut back).unwrap();
                    assert!(
                        back == model[offset as usize..(offset + len) as usize],
                        "seed {seed} step {step}: read at {offset}+{len} differs"
                    );
                }
                8 => device.set_knobs(knobs(&mut random)).unwrap(),
                _ => device.flush().unwrap(),
            }
        }
        assert!(held_pages > 0, "seed {seed}: the tier never held a page");
        // Everything reaches the backing store once the tier gives it all back.
        device
            .set_knobs(Knobs {
                read_share: 1.0,
                compressed_share: 0.0,
            })
            .unwrap();
        device.flush().unwrap();
        drop(device);
        let mut ssd = vec![0u8; model.len()];
        backing.read_at(0, &mut ssd).unwrap();
        assert!(ssd == model, "seed {seed}: the backing store differs");
    }
}

#[test]
fn bad_settings_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let backing = pmem(dir.path(), "ssd", PAGES * PAGE as u64);
    let ram: Box<dyn Backend> =
        Box::new(heterarchy_device::backend::RamBackend::new(TIER_BYTES).unwrap());
    let tiny: Box<dyn Backend> = Box::new(pmem(dir.path(), "pm", 1024));
    for (memory, expected) in [(ram, "persistent"), (tiny, "too small")] {
        let error = PolyDevice::open(
            Box::new(Arc::clone(&backing)),
            memory,
            options(PolyKnobs::Fixed(Knobs::WRITE_CACHE), 0),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(error.contains(expected), "{error}");
    }
    let memory = pmem(dir.path(), "pm2", TIER_BYTES);
    let device = PolyDevice::open(
        Box::new(backing),
        Box::new(memory),
        options(PolyKnobs::Fixed(Knobs::WRITE_CACHE), 0),
    )
    .unwrap();
    let bad = Knobs {
        read_share: 1.2,
        compressed_share: 0.0,
    };
    assert!(device
        .set_knobs(bad)
        .unwrap_err()
        .to_string()
        .contains("read_share"));
    assert!(device.write(PAGES * PAGE as u64, &[1], false).is_err());
}

/// One crash trial: a writer and the background write-back at work, knobs changing, until the
/// machine stops; then both memories crash and the device opens again.
fn trial(seed: u64, dir: &Path) -> Result<u64, String> {
    let backing = pmem(dir, &format!("ssd{seed}"), PAGES * PAGE as u64);
    let memory = pmem(dir, &format!("pm{seed}"), TIER_BYTES);
    let budget = CrashBudget::new(i64::MAX);
    let mut random = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
    // Half the trials keep a write cache throughout: then every acknowledged write is
    // persistent. The others move the knobs anywhere, the search among them.
    let keeps_write_cache = seed.is_multiple_of(2);
    let start = if seed % 4 == 1 {
        PolyKnobs::Search {
            config: SearchConfig::default(),
            interval: std::time::Duration::from_millis(5),
        }
    } else {
        PolyKnobs::Fixed(Knobs {
            read_share: 0.3,
            compressed_share: 0.3,
        })
    };
    let mut acknowledged = vec![0u64; PAGES as usize];
    let mut durable = vec![0u64; PAGES as usize];
    let mut issued: Vec<Vec<u64>> = vec![Vec::new(); PAGES as usize];
    for cycle in 0..2u64 {
        let device = PolyDevice::open(
            Box::new(CrashAfter::new(Arc::clone(&backing), budget.clone())),
            Box::new(CrashAfter::new(Arc::clone(&memory), budget.clone())),
            options(start, seed),
        )
        .map_err(|error| format!("opening in cycle {cycle}: {error}"))?;
        budget.set(200 + random.below(3_000) as i64);
        for round in 1u64.. {
            if random.below(20) == 0 {
                let knobs = if keeps_write_cache {
                    // At most half compressed and half the rest read cache: a quarter of the
                    // tier (3 of its 12 pages) stays write cache.
                    Knobs {
                        read_share: random.below(6) as f64 / 10.0,
                        compressed_share: random.below(6) as f64 / 10.0,
                    }
                } else {
                    knobs(&mut random)
                };
                if device.set_knobs(knobs).is_err() {
                    break;
                }
                continue;
            }
            if random.below(15) == 0 {
                let owed = acknowledged.clone();
                if device.flush().is_err() {
                    break;
                }
                for (page, version) in owed.into_iter().enumerate() {
                    durable[page] = durable[page].max(version);
                }
                continue;
            }
            let page = random.below(PAGES);
            let version = ((cycle + 1) << 40) | round;
            issued[page as usize].push(version);
            let fua = random.below(10) == 0;
            let data = self_describing_block(page, version, PAGE);
            if device.write(page * PAGE as u64, &data, fua).is_err() {
                break;
            }
            acknowledged[page as usize] = version;
            if fua || keeps_write_cache {
                durable[page as usize] = version;
            }
        }
        drop(device);
        backing.crash(seed * 4 + cycle).unwrap();
        memory.crash(seed * 4 + cycle + 2).unwrap();
        backing.restart();
        memory.restart();
        budget.set(i64::MAX);
        // Recovery writes the tier's pages to the backing store; then read everything back.
        let device = PolyDevice::open(
            Box::new(CrashAfter::new(Arc::clone(&backing), budget.clone())),
            Box::new(CrashAfter::new(Arc::clone(&memory), budget.clone())),
            options(PolyKnobs::Fixed(Knobs::WRITE_CACHE), seed),
        )
        .map_err(|error| format!("recovering after crash {cycle}: {error}"))?;
        let mut buf = vec![0u8; PAGE];
        for page in 0..PAGES {
            device
                .read(page * PAGE as u64, &mut buf)
                .map_err(|error| format!("reading page {page}: {error}"))?;
            let last_issued = issued[page as usize].last().copied().unwrap_or(0);
            let found = match self_described_version(&buf, page) {
                Ok(found) => found,
                // With no write cache a write goes straight to the backing store, which (like a
                // disk without power-loss protection) may tear a write it was never asked to
                // make durable. Write the page afresh for the next cycle.
                Err(_) if !keeps_write_cache && durable[page as usize] < last_issued => {
                    let version = ((cycle + 1) << 40) | (1 << 39) | page;
                    issued[page as usize].push(version);
                    let data = self_describing_block(page, version, PAGE);
                    device
                        .write(page * PAGE as u64, &data, true)
                        .map_err(|error| format!("rewriting page {page}: {error}"))?;
                    version
                }
                Err(torn) => return Err(torn),
            };
            if found < durable[page as usize] {
                return Err(format!(
                    "page {page} holds version {found} after crash {cycle}, {} was acknowledged \
                     durable (lost)",
                    durable[page as usize]
                ));
            }
            if found != 0 && !issued[page as usize].contains(&found) {
                return Err(format!(
                    "page {page} holds version {found}, never issued (phantom)"
                ));
            }
            acknowledged[page as usize] = found;
            durable[page as usize] = found;
        }
    }
    // One crash a cycle.
    Ok(2)
}

#[test]
fn compressed_write_cache_pages_are_read_back_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let backing = pmem(dir.path(), "ssd", PAGES * PAGE as u64);
    let memory = pmem(dir.path(), "pm", TIER_BYTES);
    let budget = CrashBudget::new(i64::MAX);
    let open = |knobs: Knobs| {
        PolyDevice::open(
            Box::new(CrashAfter::new(Arc::clone(&backing), budget.clone())),
            Box::new(CrashAfter::new(Arc::clone(&memory), budget.clone())),
            options(PolyKnobs::Fixed(knobs), 0),
        )
        .unwrap()
    };
    // All write cache, most of it compressed: the oldest writes are compressed.
    let device = open(Knobs {
        read_share: 0.0,
        compressed_share: 0.8,
    });
    for page in 0..12 {
        let data = self_describing_block(page, 100 + page, PAGE);
        device.write(page * PAGE as u64, &data, false).unwrap();
    }
    // The power goes before anything is flushed to the backing store.
    budget.set(0);
    drop(device);
    backing.crash(1).unwrap();
    memory.crash(2).unwrap();
    backing.restart();
    memory.restart();
    budget.set(i64::MAX);
    let device = open(Knobs::WRITE_CACHE);
    let stats = device.stats();
    assert!(stats.recovered_compressed_pages > 0, "{stats:?}");
    let mut buf = vec![0u8; PAGE];
    for page in 0..12 {
        device.read(page * PAGE as u64, &mut buf).unwrap();
        assert_eq!(self_described_version(&buf, page), Ok(100 + page));
    }
}

/// A few dozen trials here; `POLY_CRASH_TRIALS=N` runs any number.
#[test]
fn crashes_lose_no_acknowledged_write_cache_write_and_no_flushed_write() {
    let dir = tempfile::tempdir().unwrap();
    run_crash_campaign("poly", "POLY_CRASH_TRIALS", 40, |seed| {
        let result = trial(seed, dir.path());
        for name in [format!("ssd{seed}"), format!("pm{seed}")] {
            let _ = std::fs::remove_file(dir.path().join(name));
        }
        result
    });
}
