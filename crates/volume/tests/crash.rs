//! Injected machine crashes (DESIGN.md "Device models": crash injection drops unflushed lines
//! and tears unflushed 8-byte words): a write-back volume on emulated persistent memory, over a
//! backing store that loses unflushed writes too, is stopped dead after a random number of
//! device operations, both devices crash, and the volume is opened again (write-back, and
//! write-through every third time). Every block whose
//! last acknowledged write was covered by a completed FLUSH (or was a FUA write) must read
//! back exactly; once the cache is cleaned, the backing store holds what was read; a block
//! written after that reads back as its durable version or a later one,
//! word by word (an interrupted in-place overwrite on PM is not atomic; see the module docs of
//! `heterarchy_volume::volume`).

use std::io;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use heterarchy_device::backend::{Backend, PmemBackend};
use heterarchy_engine::{CleaningPolicy, WriteMode};
use heterarchy_volume::{CutoffPolicy, Volume, VolumeConfig};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const BLOCK: usize = 4096;
const BLOCKS: usize = 48;
const CACHE_BYTES: u64 = 64 * 1024;

/// A device of a machine that stops working after a budget of operations.
struct Dying {
    device: Arc<Mutex<PmemBackend>>,
    budget: Arc<AtomicI64>,
}

impl Dying {
    fn spend(&self) -> io::Result<()> {
        if self.budget.fetch_sub(1, Ordering::SeqCst) <= 0 {
            return Err(io::Error::other("the machine crashed"));
        }
        Ok(())
    }

    fn device(&self) -> std::sync::MutexGuard<'_, PmemBackend> {
        self.device.lock().unwrap()
    }
}

impl Backend for Dying {
    fn size_bytes(&self) -> u64 {
        self.device().size_bytes()
    }
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.spend()?;
        self.device().read_at(offset, buf)
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.spend()?;
        self.device().write_at(offset, data)
    }
    fn persist(&mut self, offset: u64, len: u64) -> io::Result<()> {
        self.spend()?;
        self.device().persist(offset, len)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.spend()?;
        self.device().flush()
    }
    fn is_persistent(&self) -> bool {
        true
    }
    fn describe(&self) -> String {
        "dying pmem".to_string()
    }
}

/// Version 0 is the zeroes a fresh device holds.
fn pattern(block: usize, version: u32) -> Vec<u8> {
    let mut data = vec![0u8; BLOCK];
    if version == 0 {
        return data;
    }
    for (i, word) in data.chunks_exact_mut(8).enumerate() {
        let value = (block as u64) << 40 | u64::from(version) << 16 | i as u64;
        word.copy_from_slice(&value.to_le_bytes());
    }
    data
}

fn config(mode: WriteMode) -> VolumeConfig {
    let mut config = VolumeConfig::new("crash", "ram:1".parse().unwrap(), "ram:1".parse().unwrap());
    config.cache_line = BLOCK as u64;
    config.caching.mode = mode;
    config.caching.cleaning = CleaningPolicy::Acp;
    config.seq_cutoff.policy = CutoffPolicy::Never;
    config
}

#[test]
fn flushed_writes_survive_injected_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let mut random = Xoshiro256PlusPlus::seed_from_u64(2026);
    let mut crashes_mid_work = 0;
    for iteration in 0..150 {
        let open = |path: &str, bytes: u64| {
            let mut device =
                PmemBackend::open(&dir.path().join(format!("{path}{iteration}")), bytes).unwrap();
            device.enable_crash_injection();
            Arc::new(Mutex::new(device))
        };
        let cache = open("cache", CACHE_BYTES);
        let backing = open("backing", (BLOCKS * BLOCK) as u64);
        let budget = Arc::new(AtomicI64::new(i64::MAX));
        let dying = |device: &Arc<Mutex<PmemBackend>>| -> Box<dyn Backend> {
            Box::new(Dying {
                device: Arc::clone(device),
                budget: Arc::clone(&budget),
            })
        };
        let mode = if iteration % 3 == 2 {
            WriteMode::Wt
        } else {
            WriteMode::Wb
        };
        let volume = Volume::with_backends(&config(mode), dying(&cache), dying(&backing)).unwrap();
        // Version 0 (zeroes) is durable everywhere at first.
        let mut durable = [0u32; BLOCKS];
        let mut since_flush: Vec<Vec<u32>> = vec![Vec::new(); BLOCKS];
        let mut version = 0;
        budget.store(random.gen_range(0..400), Ordering::SeqCst);
        let crashed = loop {
            let block = random.gen_range(0..BLOCKS);
            let outcome = match random.gen_range(0..10) {
                0 => volume.flush().map(|()| {
                    for (block, later) in since_flush.iter_mut().enumerate() {
                        if let Some(&last) = later.last() {
                            durable[block] = last;
                        }
                        later.clear();
                    }
                }),
                1 => volume.clean().map(drop),
                2 | 3 => volume
                    .read((block * BLOCK) as u64, &mut vec![0; BLOCK])
                    .map(drop),
                kind => {
                    version += 1;
                    let fua = kind == 9;
                    since_flush[block].push(version);
                    volume
                        .write((block * BLOCK) as u64, &pattern(block, version), fua)
                        .map(|_| {
                            if fua {
                                durable[block] = version;
                                since_flush[block].clear();
                            }
                        })
                }
            };
            if outcome.is_err() {
                break true;
            }
            if version > 300 {
                break false;
            }
        };
        crashes_mid_work += u32::from(crashed);
        drop(volume);
        let seed = random.gen();
        cache.lock().unwrap().crash(seed).unwrap();
        backing.lock().unwrap().crash(seed + 1).unwrap();
        budget.store(i64::MAX, Ordering::SeqCst);
        let volume = Volume::with_backends(&config(mode), dying(&cache), dying(&backing))
            .unwrap_or_else(|e| panic!("iteration {iteration}: reopening: {e}"));
        for block in 0..BLOCKS {
            let mut data = vec![0u8; BLOCK];
            volume.read((block * BLOCK) as u64, &mut data).unwrap();
            // What was read is what cleaning leaves below: no clean cached copy differs from
            // the backing store, or the block would change once its line is evicted.
            volume.clean().unwrap();
            let mut below = vec![0u8; BLOCK];
            backing
                .lock()
                .unwrap()
                .read_at((block * BLOCK) as u64, &mut below)
                .unwrap();
            assert!(
                data == below,
                "iteration {iteration} ({mode:?}): block {block} differs from the backing store after cleaning"
            );
            let candidates: Vec<u32> = std::iter::once(durable[block])
                .chain(since_flush[block].iter().copied())
                .collect();
            if since_flush[block].is_empty() {
                assert_eq!(
                    data,
                    pattern(block, durable[block]),
                    "iteration {iteration}: block {block} lost its flushed version {}",
                    durable[block]
                );
                continue;
            }
            for (i, word) in data.chunks_exact(8).enumerate() {
                let ok = candidates
                    .iter()
                    .any(|&v| word == &pattern(block, v)[i * 8..i * 8 + 8]);
                assert!(ok, "iteration {iteration}: block {block} word {i} is from no version of {candidates:?}");
            }
        }
    }
    assert!(
        crashes_mid_work > 100,
        "only {crashes_mid_work} crashes hit the work"
    );
}

/// Every point of one overwrite of a cached clean block: a crash anywhere leaves the block
/// reading the same before and after its line is cleaned, word by word the old or the new
/// version (the emulated-PM backing store tears an unflushed write).
#[test]
fn a_crash_at_any_point_of_an_overwrite_leaves_one_version() {
    let dir = tempfile::tempdir().unwrap();
    for mode in [WriteMode::Wt, WriteMode::Wb] {
        for budget_left in 0..16 {
            let open = |path: &str, bytes: u64| {
                let name = format!("{path}-{mode:?}-{budget_left}");
                let mut device = PmemBackend::open(&dir.path().join(name), bytes).unwrap();
                device.enable_crash_injection();
                Arc::new(Mutex::new(device))
            };
            let (cache, backing) = (
                open("cache", CACHE_BYTES),
                open("backing", (BLOCKS * BLOCK) as u64),
            );
            let budget = Arc::new(AtomicI64::new(i64::MAX));
            let dying = |device: &Arc<Mutex<PmemBackend>>| -> Box<dyn Backend> {
                Box::new(Dying {
                    device: Arc::clone(device),
                    budget: Arc::clone(&budget),
                })
            };
            let volume =
                Volume::with_backends(&config(mode), dying(&cache), dying(&backing)).unwrap();
            volume.read(0, &mut vec![0; BLOCK]).unwrap();
            volume.flush().unwrap();
            budget.store(budget_left, Ordering::SeqCst);
            let _ = volume.write(0, &pattern(0, 1), false);
            drop(volume);
            cache.lock().unwrap().crash(budget_left as u64).unwrap();
            backing
                .lock()
                .unwrap()
                .crash(budget_left as u64 + 1)
                .unwrap();
            budget.store(i64::MAX, Ordering::SeqCst);
            let volume =
                Volume::with_backends(&config(mode), dying(&cache), dying(&backing)).unwrap();
            let mut seen = vec![0u8; BLOCK];
            volume.read(0, &mut seen).unwrap();
            volume.clean().unwrap();
            let mut below = vec![0u8; BLOCK];
            backing.lock().unwrap().read_at(0, &mut below).unwrap();
            assert!(
                seen == below,
                "{mode:?}, crash after {budget_left} operations"
            );
            let (old, new) = (pattern(0, 0), pattern(0, 1));
            for (i, word) in seen.chunks_exact(8).enumerate() {
                let range = i * 8..i * 8 + 8;
                assert!(
                    word == &old[range.clone()] || word == &new[range],
                    "{mode:?}, {budget_left}"
                );
            }
        }
    }
}
