//! Injected machine crashes (docs/architecture.md, "The device layer": crash injection drops
//! what was never persisted and tears unflushed 8-byte words): a write-back volume with tiers on emulated persistent
//! memory (one, two inclusive or exclusive, or RAM over PM), over a backing store that loses
//! unflushed writes too, is stopped dead after a random number of device operations, every
//! device crashes, and the volume is opened again (write-back, and write-through every third
//! time). Every block whose
//! last acknowledged write was covered by a completed FLUSH (or was a FUA write) must read
//! back exactly; once the cache is cleaned, the backing store holds what was read; a block
//! written after that reads back as its durable version or a later one,
//! word by word (an interrupted in-place overwrite on PM is not atomic; see the module docs of
//! `heterarchy_volume::volume`).

use std::sync::Arc;

use heterarchy_device::backend::{Backend, CrashAfter, CrashBudget, PmemBackend, RamBackend};
use heterarchy_engine::{CleaningPolicy, TierLayout, WriteMode};
use heterarchy_volume::{CutoffPolicy, Volume, VolumeConfig};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const BLOCK: usize = 4096;
const BLOCKS: usize = 48;
const CACHE_BYTES: u64 = 64 * 1024;

/// The hierarchies crashed: a persistent tier alone, two persistent tiers either way, and a
/// volatile tier over a persistent one (whose dirty lines a FLUSH must bring down).
#[derive(Clone, Copy, Debug)]
enum Hierarchy {
    Pm,
    PmOverPm(TierLayout),
    RamOverPm,
}

const HIERARCHIES: [Hierarchy; 4] = [
    Hierarchy::Pm,
    Hierarchy::PmOverPm(TierLayout::Inclusive),
    Hierarchy::PmOverPm(TierLayout::Exclusive),
    Hierarchy::RamOverPm,
];

/// The devices of one emulated machine: persistent tiers and the backing store crash
/// together; the RAM tier is simply gone.
struct Machine {
    pm_tiers: Vec<Arc<PmemBackend>>,
    backing: Arc<PmemBackend>,
    budget: CrashBudget,
    hierarchy: Hierarchy,
}

impl Machine {
    fn new(dir: &std::path::Path, name: &str, hierarchy: Hierarchy) -> Machine {
        let open = |path: &str, bytes: u64| {
            let mut device = PmemBackend::open(&dir.join(format!("{name}-{path}")), bytes).unwrap();
            device.enable_crash_injection();
            Arc::new(device)
        };
        let pm_tiers = match hierarchy {
            Hierarchy::Pm | Hierarchy::RamOverPm => vec![open("tier", CACHE_BYTES)],
            Hierarchy::PmOverPm(_) => vec![
                open("tier0", CACHE_BYTES),
                open("tier1", CACHE_BYTES + CACHE_BYTES / 2),
            ],
        };
        Machine {
            pm_tiers,
            backing: open("backing", (BLOCKS * BLOCK) as u64),
            budget: CrashBudget::new(i64::MAX),
            hierarchy,
        }
    }

    fn dying(&self, device: &Arc<PmemBackend>) -> Box<dyn Backend> {
        Box::new(CrashAfter::new(Arc::clone(device), self.budget.clone()))
    }

    /// The volume on this machine's devices (a fresh RAM tier, if any).
    fn open(&self, mode: WriteMode) -> Result<Volume, String> {
        let mut caches: Vec<Box<dyn Backend>> =
            self.pm_tiers.iter().map(|tier| self.dying(tier)).collect();
        let mut config = config(mode);
        match self.hierarchy {
            Hierarchy::Pm => {}
            Hierarchy::PmOverPm(layout) => {
                config.caching.layout = layout;
                config.cache.push(config.cache[0].clone());
            }
            Hierarchy::RamOverPm => {
                caches.insert(0, Box::new(RamBackend::new(CACHE_BYTES / 2).unwrap()));
                config.cache.push(config.cache[0].clone());
            }
        }
        Volume::with_backends(&config, caches, self.dying(&self.backing))
    }

    /// Power fails: what was not persisted is lost or torn. Then the machine starts again.
    fn crash(&self, seed: u64) {
        for (index, tier) in self.pm_tiers.iter().enumerate() {
            tier.crash(seed + 2 + index as u64).unwrap();
        }
        self.backing.crash(seed + 1).unwrap();
        for tier in &self.pm_tiers {
            tier.restart();
        }
        self.backing.restart();
        self.budget.set(i64::MAX);
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
    // The specs are placeholders: the tests hand the volume its storage.
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
    for iteration in 0..160 {
        let hierarchy = HIERARCHIES[iteration % HIERARCHIES.len()];
        let machine = Machine::new(dir.path(), &iteration.to_string(), hierarchy);
        let mode = if iteration % 3 == 2 {
            WriteMode::Wt
        } else {
            WriteMode::Wb
        };
        let volume = machine.open(mode).unwrap();
        // Version 0 (zeroes) is durable everywhere at first.
        let mut durable = [0u32; BLOCKS];
        let mut since_flush: Vec<Vec<u32>> = vec![Vec::new(); BLOCKS];
        let mut version = 0;
        machine.budget.set(random.gen_range(0..400));
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
        machine.crash(random.gen_range(0..u64::MAX / 2));
        let volume = machine
            .open(mode)
            .unwrap_or_else(|e| panic!("iteration {iteration} ({hierarchy:?}): reopening: {e}"));
        for block in 0..BLOCKS {
            let mut data = vec![0u8; BLOCK];
            volume.read((block * BLOCK) as u64, &mut data).unwrap();
            // What was read is what cleaning leaves below: no clean cached copy differs from
            // the backing store, or the block would change once its line is evicted.
            volume.clean().unwrap();
            let mut below = vec![0u8; BLOCK];
            machine
                .backing
                .read_at((block * BLOCK) as u64, &mut below)
                .unwrap();
            assert!(
                data == below,
                "iteration {iteration} ({hierarchy:?}, {mode:?}): block {block} differs from the \
                 backing store after cleaning"
            );
            let candidates: Vec<u32> = std::iter::once(durable[block])
                .chain(since_flush[block].iter().copied())
                .collect();
            if since_flush[block].is_empty() {
                assert_eq!(
                    data,
                    pattern(block, durable[block]),
                    "iteration {iteration} ({hierarchy:?}): block {block} lost its flushed version {}",
                    durable[block]
                );
                continue;
            }
            for (i, word) in data.chunks_exact(8).enumerate() {
                let ok = candidates
                    .iter()
                    .any(|&v| word == &pattern(block, v)[i * 8..i * 8 + 8]);
                assert!(
                    ok,
                    "iteration {iteration} ({hierarchy:?}): block {block} word {i} is from no \
                     version of {candidates:?}"
                );
            }
        }
    }
    assert!(
        crashes_mid_work > 110,
        "only {crashes_mid_work} crashes hit the work"
    );
}

/// Every point of one overwrite of a cached clean block: a crash anywhere leaves the block
/// reading the same before and after its line is cleaned, word by word the old or the new
/// version (the emulated-PM backing store tears an unflushed write).
#[test]
fn a_crash_at_any_point_of_an_overwrite_leaves_one_version() {
    let dir = tempfile::tempdir().unwrap();
    for hierarchy in HIERARCHIES {
        for mode in [WriteMode::Wt, WriteMode::Wb] {
            for budget_left in 0..24 {
                let name = format!("{hierarchy:?}-{mode:?}-{budget_left}");
                let machine = Machine::new(dir.path(), &name, hierarchy);
                let volume = machine.open(mode).unwrap();
                volume.read(0, &mut vec![0; BLOCK]).unwrap();
                volume.flush().unwrap();
                machine.budget.set(budget_left);
                let _ = volume.write(0, &pattern(0, 1), false);
                drop(volume);
                machine.crash(budget_left as u64);
                let volume = machine.open(mode).unwrap();
                let mut seen = vec![0u8; BLOCK];
                volume.read(0, &mut seen).unwrap();
                volume.clean().unwrap();
                let mut below = vec![0u8; BLOCK];
                machine.backing.read_at(0, &mut below).unwrap();
                assert!(
                    seen == below,
                    "{hierarchy:?}, {mode:?}, crash after {budget_left} operations"
                );
                let (old, new) = (pattern(0, 0), pattern(0, 1));
                for (i, word) in seen.chunks_exact(8).enumerate() {
                    let range = i * 8..i * 8 + 8;
                    assert!(
                        word == &old[range.clone()] || word == &new[range],
                        "{hierarchy:?}, {mode:?}, {budget_left}"
                    );
                }
            }
        }
    }
}
