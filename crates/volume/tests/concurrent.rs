//! Concurrent histories against a sequential model: threads issue reads, writes, FUA writes,
//! write-zeroes, flushes and trims over a few lines, so that they collide, while a cleaner runs
//! in the background; every mode, one to three tiers, both layouts, tiny tiers so that lines
//! are evicted, demoted and written back all the time.
//!
//! Each 512-byte sector is a register. Every write stores a value no other write stores (the
//! write's number and the sector's, in every word), so each read names the write it saw. A
//! history is linearizable per register (Gibbons and Korach, "Testing shared memories", SIAM J.
//! Comput. 1997: for registers whose writes are unique) exactly when every read's write began
//! before the read ended, no two forward zones overlap, and no backward zone lies inside a
//! forward zone — where a value's zone spans from the earliest end to the latest start of its
//! write and reads. A trim leaves its sectors undefined: a read that a trim may precede
//! directly may see anything, and is left out.
//!
//! Thousands of seeded histories; a failure prints the seed and the history of the sector.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use heterarchy_device::backend::{Backend, RamBackend};
use heterarchy_engine::{CleaningPolicy, TierLayout, WriteMode};
use heterarchy_volume::{CutoffPolicy, Volume, VolumeConfig};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const SECTOR: usize = 512;
const LINE: usize = 4096;
const LINES: usize = 6;
const VOLUME_BYTES: usize = LINE * LINES;
const THREADS: usize = 4;
const OPS_PER_THREAD: usize = 40;

/// RAM that stalls now and then, so that requests on the same line would overlap if nothing
/// ordered them (on two cores, memory copies alone finish before another thread gets going).
struct Jittery {
    inner: RamBackend,
    state: AtomicU64,
}

impl Jittery {
    fn boxed(bytes: u64, seed: u64) -> Box<dyn Backend> {
        Box::new(Jittery {
            inner: RamBackend::new(bytes).unwrap(),
            state: AtomicU64::new(seed | 1),
        })
    }

    fn stall(&self) {
        let draw = self
            .state
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .wrapping_mul(0xbf58_476d_1ce4_e5b9)
            >> 58;
        match draw {
            0..=3 => std::thread::yield_now(),
            4 => std::thread::sleep(std::time::Duration::from_micros(50)),
            5..=15 => (0..200).for_each(|_| std::hint::spin_loop()),
            _ => {}
        }
    }
}

impl Backend for Jittery {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.stall();
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.stall();
        self.inner.write_at(offset, data)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.stall();
        self.inner.flush()
    }
    fn is_persistent(&self) -> bool {
        false
    }
    fn describe(&self) -> String {
        "jittery ram".into()
    }
}

/// One operation as the checker sees it, on a logical clock that orders every call and return.
#[derive(Clone, Debug)]
enum Event {
    Write {
        id: u64,
        sectors: std::ops::Range<usize>,
    },
    Read {
        sectors: std::ops::Range<usize>,
        seen: Vec<u64>,
    },
    Trim {
        sectors: std::ops::Range<usize>,
    },
}

#[derive(Clone, Debug)]
struct Timed {
    thread: usize,
    invoked: u64,
    returned: u64,
    event: Event,
}

/// The bytes of sector `sector` as write `id` leaves them (id 0: the zeroes a device starts
/// with).
fn sector_bytes(id: u64, sector: usize) -> [u8; SECTOR] {
    let mut bytes = [0u8; SECTOR];
    if id != 0 {
        let word = id << 16 | sector as u64;
        for chunk in bytes.chunks_exact_mut(8) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
    }
    bytes
}

/// Which write a sector's bytes come from: `Some(id)`, or `None` for bytes no write stores
/// (torn, misplaced, or left by a trim).
fn writer_of(bytes: &[u8], sector: usize) -> Option<u64> {
    let first = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    let id = if first == 0 { 0 } else { first >> 16 };
    (bytes == sector_bytes(id, sector)).then_some(id)
}

fn config(seed: u64, random: &mut Xoshiro256PlusPlus) -> VolumeConfig {
    let tiers: &[&str] = match random.gen_range(0..3) {
        0 => &["ram:20k"],
        1 => &["ram:16k", "ram:20k"],
        _ => &["ram:16k", "ram:16k", "ram:20k"],
    };
    let mut config = VolumeConfig::with_tiers(
        "history",
        format!("ram:{VOLUME_BYTES}").parse().unwrap(),
        tiers.iter().map(|tier| tier.parse().unwrap()).collect(),
    );
    config.cache_line = LINE as u64;
    config.caching.mode = WriteMode::ALL[seed as usize % WriteMode::ALL.len()];
    config.caching.layout = if random.gen_bool(0.5) {
        TierLayout::Inclusive
    } else {
        TierLayout::Exclusive
    };
    config.caching.cleaning = [
        CleaningPolicy::Acp,
        CleaningPolicy::Alru,
        CleaningPolicy::Nop,
    ][random.gen_range(0..3)];
    config.caching.acp.wake_up_ms = 0;
    config.seq_cutoff.policy = CutoffPolicy::Never;
    config
}

/// Runs one seeded history; returns it with the sector count.
fn run_history(seed: u64) -> Vec<Timed> {
    let mut random = Xoshiro256PlusPlus::seed_from_u64(seed);
    let config = config(seed, &mut random);
    let caches = config
        .cache
        .iter()
        .enumerate()
        .map(|(tier, spec)| match spec {
            heterarchy_device::backend::BackendSpec::Ram { size_bytes } => {
                Jittery::boxed(*size_bytes, seed ^ tier as u64)
            }
            _ => unreachable!("the histories run on RAM"),
        })
        .collect();
    let backing = Jittery::boxed(VOLUME_BYTES as u64, !seed);
    let volume = Volume::with_backends(&config, caches, backing).unwrap();
    let clock = AtomicU64::new(0);
    let next_id = AtomicU64::new(1);
    let history = Mutex::new(Vec::new());
    let stop = std::sync::atomic::AtomicBool::new(false);
    // Every thread starts at once, so that their requests overlap.
    let start = std::sync::Barrier::new(THREADS);
    std::thread::scope(|scope| {
        let cleaner = scope.spawn(|| {
            while !stop.load(Ordering::SeqCst) {
                volume.background().unwrap();
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
        });
        let workers: Vec<_> = (0..THREADS)
            .map(|thread| {
                let thread_seed = seed.wrapping_mul(31).wrapping_add(thread as u64);
                let (volume, clock, next_id, history) = (&volume, &clock, &next_id, &history);
                let start = &start;
                scope.spawn(move || {
                    let mut random = Xoshiro256PlusPlus::seed_from_u64(thread_seed);
                    start.wait();
                    for _ in 0..OPS_PER_THREAD {
                        let first = random.gen_range(0..VOLUME_BYTES / SECTOR);
                        let count = random
                            .gen_range(1..=(2 * LINE / SECTOR))
                            .min(VOLUME_BYTES / SECTOR - first);
                        let sectors = first..first + count;
                        let offset = (first * SECTOR) as u64;
                        let invoked = clock.fetch_add(1, Ordering::SeqCst);
                        let event = match random.gen_range(0..20) {
                            0..=8 => {
                                let mut buf = vec![0u8; count * SECTOR];
                                volume.read(offset, &mut buf).unwrap();
                                let seen = buf
                                    .chunks_exact(SECTOR)
                                    .zip(sectors.clone())
                                    .map(|(bytes, sector)| {
                                        writer_of(bytes, sector).unwrap_or(u64::MAX)
                                    })
                                    .collect();
                                Event::Read { sectors, seen }
                            }
                            9..=15 => {
                                let id = next_id.fetch_add(1, Ordering::SeqCst);
                                let data: Vec<u8> =
                                    sectors.clone().flat_map(|s| sector_bytes(id, s)).collect();
                                volume.write(offset, &data, random.gen_bool(0.15)).unwrap();
                                Event::Write { id, sectors }
                            }
                            16 => {
                                // Zeroes are write 0's value: the register model accepts
                                // them as a write of the initial value only when no other
                                // write intervenes, so they count as a trim would.
                                volume
                                    .write_zeroes(offset, (count * SECTOR) as u64, false)
                                    .unwrap();
                                Event::Trim { sectors }
                            }
                            17 => {
                                // Whole lines only: partial trims may be ignored.
                                let line = random.gen_range(0..LINES);
                                volume.trim((line * LINE) as u64, LINE as u64).unwrap();
                                let per_line = LINE / SECTOR;
                                Event::Trim {
                                    sectors: line * per_line..(line + 1) * per_line,
                                }
                            }
                            _ => {
                                volume.flush().unwrap();
                                continue;
                            }
                        };
                        let returned = clock.fetch_add(1, Ordering::SeqCst);
                        history.lock().unwrap().push(Timed {
                            thread,
                            invoked,
                            returned,
                            event,
                        });
                    }
                })
            })
            .collect();
        // Stop the cleaner before a worker's panic is passed on, or the scope never ends.
        let results: Vec<_> = workers.into_iter().map(|worker| worker.join()).collect();
        stop.store(true, Ordering::SeqCst);
        cleaner.join().unwrap();
        for result in results {
            if let Err(panic) = result {
                std::panic::resume_unwind(panic);
            }
        }
    });
    // Every thread has stopped: the slot tables must be whole whatever the interleaving.
    if let Err(broken) = volume.check_invariants() {
        panic!("seed {seed}: {broken}");
    }
    history.into_inner().unwrap()
}

/// One register's operations: (invoked, returned, kind).
#[derive(Clone, Copy, Debug)]
enum RegisterOp {
    Write(u64),
    Read(u64),
    Trim,
}

/// Checks one sector's history; an error describes the violation.
fn check_register(ops: &[(u64, u64, RegisterOp)]) -> Result<(), String> {
    // Times from 1, so that the device's initial zeroes are written at 0, before anything.
    let ops: Vec<(u64, u64, RegisterOp)> =
        ops.iter().map(|&(i, r, op)| (i + 1, r + 1, op)).collect();
    let writes: Vec<(u64, u64, u64)> = ops
        .iter()
        .filter_map(|&(i, r, op)| match op {
            RegisterOp::Write(id) => Some((i, r, id)),
            _ => None,
        })
        .collect();
    let trims: Vec<(u64, u64)> = ops
        .iter()
        .filter_map(|&(i, r, op)| matches!(op, RegisterOp::Trim).then_some((i, r)))
        .collect();
    // A trim T may be the last thing before read R when it began before R ended and no write
    // lies wholly between them.
    let undefined = |invoked: u64, returned: u64| {
        trims.iter().any(|&(t_invoked, t_returned)| {
            t_invoked < returned
                && !writes.iter().any(|&(w_invoked, w_returned, _)| {
                    t_returned < w_invoked && w_returned < invoked
                })
        })
    };
    // Clusters: a write and the reads that saw it; value 0 has a virtual write at the start.
    let mut clusters: std::collections::HashMap<u64, (u64, u64)> = Default::default();
    clusters.insert(0, (0, 0));
    for &(invoked, returned, id) in &writes {
        clusters.insert(id, (invoked, returned));
    }
    let mut zone_ops: std::collections::HashMap<u64, Vec<(u64, u64)>> = Default::default();
    for (&id, &(invoked, returned)) in &clusters {
        zone_ops.entry(id).or_default().push((invoked, returned));
    }
    for &(invoked, returned, op) in &ops {
        let RegisterOp::Read(id) = op else {
            continue;
        };
        if undefined(invoked, returned) {
            continue;
        }
        let Some(&(w_invoked, _)) = clusters.get(&id) else {
            return Err(format!(
                "a read at [{invoked}, {returned}] saw bytes no write stored (id {id:#x})"
            ));
        };
        if w_invoked >= returned {
            return Err(format!(
                "a read at [{invoked}, {returned}] saw write {id}, which began at {w_invoked}"
            ));
        }
        zone_ops.get_mut(&id).unwrap().push((invoked, returned));
    }
    // Zones: from the earliest return to the latest call in the cluster.
    let zones: Vec<(u64, u64, u64, bool)> = zone_ops
        .iter()
        .map(|(&id, ops)| {
            let low = ops.iter().map(|&(_, r)| r).min().unwrap();
            let high = ops.iter().map(|&(i, _)| i).max().unwrap();
            if low < high {
                (id, low, high, true)
            } else {
                (id, high, low, false)
            }
        })
        .collect();
    for (index, &(a, a_low, a_high, a_forward)) in zones.iter().enumerate() {
        for &(b, b_low, b_high, b_forward) in &zones[index + 1..] {
            let overlap = a_low < b_high && b_low < a_high;
            let conflict = match (a_forward, b_forward) {
                (true, true) => overlap,
                (true, false) => a_low < b_low && b_high < a_high,
                (false, true) => b_low < a_low && a_high < b_high,
                (false, false) => false,
            };
            if conflict {
                return Err(format!(
                    "values {a} (zone {a_low}..{a_high}) and {b} (zone {b_low}..{b_high}) \
                     cannot both be linearized"
                ));
            }
        }
    }
    Ok(())
}

fn check(history: &[Timed]) -> Result<(), String> {
    for sector in 0..VOLUME_BYTES / SECTOR {
        let mut ops = Vec::new();
        for timed in history {
            let (range, op) = match &timed.event {
                Event::Write { id, sectors } => (sectors, RegisterOp::Write(*id)),
                Event::Trim { sectors } => (sectors, RegisterOp::Trim),
                Event::Read { sectors, seen } => {
                    if !sectors.contains(&sector) {
                        continue;
                    }
                    (sectors, RegisterOp::Read(seen[sector - sectors.start]))
                }
            };
            if range.contains(&sector) {
                ops.push((timed.invoked, timed.returned, op));
            }
        }
        check_register(&ops).map_err(|message| {
            let lines: Vec<String> = history
                .iter()
                .filter(|timed| match &timed.event {
                    Event::Write { sectors, .. }
                    | Event::Trim { sectors }
                    | Event::Read { sectors, .. } => sectors.contains(&sector),
                })
                .map(|timed| format!("  thread {} {:?}", timed.thread, timed))
                .collect();
            format!("sector {sector}: {message}\n{}", lines.join("\n"))
        })?;
    }
    Ok(())
}

#[test]
fn the_checker_finds_a_stale_read() {
    use RegisterOp::*;
    // Write 1 ends before write 2 begins; a read after write 2 ended sees 1: not linearizable.
    let stale = [(0, 1, Write(1)), (2, 3, Write(2)), (4, 5, Read(1))];
    assert!(check_register(&stale).is_err());
    // Overlapping with write 2, it may see either.
    let fine = [
        (0, 1, Write(1)),
        (2, 5, Write(2)),
        (3, 4, Read(1)),
        (6, 7, Read(2)),
    ];
    assert!(check_register(&fine).is_ok());
    // Two reads in sequence may not see 2 then 1.
    let flip = [
        (0, 1, Write(1)),
        (2, 9, Write(2)),
        (3, 4, Read(2)),
        (5, 6, Read(1)),
    ];
    assert!(check_register(&flip).is_err());
    // A read of the initial value after a completed write is stale; after a trim, allowed.
    assert!(check_register(&[(0, 1, Write(1)), (2, 3, Read(0))]).is_err());
    assert!(check_register(&[(0, 1, Write(1)), (2, 3, Trim), (4, 5, Read(0))]).is_ok());
    // A read of a value no write began before it ended.
    assert!(check_register(&[(3, 4, Write(1)), (0, 2, Read(1))]).is_err());
}

#[test]
fn concurrent_histories_are_linearizable() {
    let histories: u64 = std::env::var("HETERARCHY_HISTORIES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(2000);
    let first: u64 = std::env::var("HETERARCHY_HISTORY_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(0);
    let mut operations = 0;
    for seed in first..first + histories {
        let history = std::panic::catch_unwind(|| run_history(seed)).unwrap_or_else(|panic| {
            eprintln!(
                "history with seed {seed} failed (rerun with HETERARCHY_HISTORY_SEED={seed} \
                 HETERARCHY_HISTORIES=1)"
            );
            std::panic::resume_unwind(panic)
        });
        operations += history.len();
        if let Err(message) = check(&history) {
            panic!(
                "history with seed {seed} is not linearizable (rerun with \
                 HETERARCHY_HISTORY_SEED={seed} HETERARCHY_HISTORIES=1): {message}"
            );
        }
    }
    assert!(operations as u64 > histories * (THREADS * OPS_PER_THREAD) as u64 / 2);
}
