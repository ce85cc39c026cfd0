//! The staging table against a model: many seeded histories of concurrent writes, reads,
//! flushes, FUA writes, trims and background write-backs, interleaved step by step as threads
//! would, each scheme checked for what a block device promises.

use super::*;

/// A small xorshift generator: tests need no more.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn table(scheme: StagingScheme, slots: u32) -> Staging {
    Staging::new(&StagingConfig {
        scheme,
        slots,
        sets: 3,
    })
    .unwrap()
}

/// One operation in flight in the model, with where it stands.
#[derive(Debug)]
enum Op {
    Write {
        lba: u64,
        version: u64,
        fua: bool,
        stage: WriteStage,
    },
    Read {
        lba: u64,
        floor_rank: usize,
        in_flight: Vec<u64>,
    },
    Flush {
        ticket: Option<FlushTicket>,
        /// Each block's last acknowledged version when the flush began.
        owed: Vec<(u64, u64)>,
        writing: Vec<Victim>,
    },
    Trim {
        lba: u64,
    },
    Background(Victim),
}

#[derive(Debug)]
enum WriteStage {
    Decide,
    Copying(u32),
    Bypassing,
    Evicting(Vec<Victim>),
    Durable(Vec<Victim>),
}

/// The device and the cache's data, and what was acknowledged.
struct Model {
    device: Vec<u64>,
    slot_data: Vec<(u64, u64)>,
    /// Each block's acknowledged versions in the order they were acknowledged.
    acked: Vec<Vec<u64>>,
    in_flight: Vec<Vec<u64>>,
    next_version: u64,
}

fn run_history(scheme: StagingScheme, seed: u64) {
    const BLOCKS: u64 = 24;
    let mut rng = Rng(seed | 1);
    let mut cache = table(scheme, 8);
    let mut model = Model {
        device: vec![0; BLOCKS as usize],
        slot_data: vec![(u64::MAX, 0); 8],
        acked: vec![Vec::new(); BLOCKS as usize],
        in_flight: vec![Vec::new(); BLOCKS as usize],
        next_version: 1,
    };
    let mut ops: Vec<Op> = Vec::new();
    let mut started = 0;
    let mut steps = 0u64;
    let fail = |what: String| panic!("{scheme} seed {seed}: {what}");
    while started < 300 || !ops.is_empty() {
        if started < 300 && (ops.len() < 6 && rng.below(3) == 0 || ops.is_empty()) {
            started += 1;
            let lba = rng.below(BLOCKS);
            let op = match rng.below(20) {
                0..=10 => {
                    let version = model.next_version;
                    model.next_version += 1;
                    model.in_flight[lba as usize].push(version);
                    Op::Write {
                        lba,
                        version,
                        fua: rng.below(10) == 0,
                        stage: WriteStage::Decide,
                    }
                }
                11..=15 => Op::Read {
                    lba,
                    floor_rank: model.acked[lba as usize].len(),
                    in_flight: model.in_flight[lba as usize].clone(),
                },
                16 | 17 => Op::Flush {
                    ticket: None,
                    owed: Vec::new(),
                    writing: Vec::new(),
                },
                18 => Op::Trim { lba },
                _ => Op::Flush {
                    ticket: None,
                    owed: Vec::new(),
                    writing: Vec::new(),
                },
            };
            ops.push(op);
            continue;
        }
        // Background threads are always there, and take up work as it comes.
        if rng.below(4) == 0 {
            if let Some(victim) = cache.background(rng.below(2) == 0) {
                ops.push(Op::Background(victim));
            }
        }
        steps += 1;
        if steps > 200_000 {
            fail(format!("no progress: {ops:?}"));
        }
        let at = rng.below(ops.len() as u64) as usize;
        let done = step(&mut cache, &mut model, &mut ops[at], &fail);
        if done {
            ops.swap_remove(at);
        }
        if let Err(error) = cache.check() {
            fail(error);
        }
    }
    // Quiesced: a last flush puts every block's last acknowledged version on the device.
    let mut last = Op::Flush {
        ticket: None,
        owed: Vec::new(),
        writing: Vec::new(),
    };
    while !step(&mut cache, &mut model, &mut last, &fail) {}
    for lba in 0..BLOCKS as usize {
        let expected = model.acked[lba].last().copied().unwrap_or(0);
        if model.device[lba] != expected {
            fail(format!(
                "block {lba} holds {} after the last flush, {expected} acknowledged last",
                model.device[lba]
            ));
        }
    }
}

/// Advances `op` by one step; true when it completed.
fn step(cache: &mut Staging, model: &mut Model, op: &mut Op, fail: &dyn Fn(String)) -> bool {
    match op {
        Op::Write {
            lba,
            version,
            fua,
            stage,
        } => {
            let (lba, version) = (*lba, *version);
            let acknowledge = |model: &mut Model| {
                model.acked[lba as usize].push(version);
                model.in_flight[lba as usize].retain(|&v| v != version);
            };
            match stage {
                WriteStage::Decide => match cache.write(lba) {
                    WriteStep::Cache { slot, .. } => {
                        model.slot_data[slot as usize] = (lba, version);
                        *stage = WriteStage::Copying(slot);
                    }
                    WriteStep::Bypass => *stage = WriteStage::Bypassing,
                    WriteStep::EvictFirst(victims) => *stage = WriteStage::Evicting(victims),
                    WriteStep::Wait => {}
                },
                WriteStage::Copying(slot) => {
                    cache.write_done(*slot);
                    acknowledge(model);
                    if !*fua {
                        return true;
                    }
                    *stage = WriteStage::Durable(Vec::new());
                }
                WriteStage::Bypassing => {
                    model.device[lba as usize] = version;
                    cache.bypass_done(lba);
                    acknowledge(model);
                    if !*fua {
                        return true;
                    }
                    *stage = WriteStage::Durable(Vec::new());
                }
                WriteStage::Evicting(victims) => {
                    write_back(cache, model, victims, fail);
                    *stage = WriteStage::Decide;
                }
                WriteStage::Durable(victims) => {
                    if !victims.is_empty() {
                        write_back(cache, model, victims, fail);
                        victims.clear();
                        return false;
                    }
                    match cache.flush_block_step(lba) {
                        FlushStep::Evict(more) => *victims = more,
                        FlushStep::Wait => {}
                        FlushStep::Done => {
                            let acked = &model.acked[lba as usize];
                            let rank = acked.iter().rposition(|&v| v == version).unwrap();
                            let held = model.device[lba as usize];
                            if !acked[rank..].contains(&held)
                                && !model.in_flight[lba as usize].contains(&held)
                            {
                                fail(format!("FUA write {version} of {lba}: device has {held}"));
                            }
                            return true;
                        }
                    }
                }
            }
            false
        }
        Op::Read {
            lba,
            floor_rank,
            in_flight,
        } => {
            let lba = *lba;
            let seen = match cache.read(lba) {
                ReadStep::Slot(slot) => {
                    let (held, version) = model.slot_data[slot as usize];
                    if held != lba {
                        fail(format!("read of {lba} sent to slot {slot} holding {held}"));
                    }
                    version
                }
                ReadStep::Device => model.device[lba as usize],
                ReadStep::Wait => return false,
            };
            let acked = &model.acked[lba as usize];
            let fresh = match acked.iter().rposition(|&v| v == seen) {
                Some(rank) => rank + 1 >= *floor_rank,
                None => seen == 0 && *floor_rank == 0,
            };
            if !fresh
                && !in_flight.contains(&seen)
                && !model.in_flight[lba as usize].contains(&seen)
            {
                fail(format!(
                    "read of {lba} returned stale {seen}: acked {acked:?}"
                ));
            }
            true
        }
        Op::Flush {
            ticket,
            owed,
            writing,
        } => {
            if !writing.is_empty() {
                write_back(cache, model, writing, fail);
                writing.clear();
                return false;
            }
            let at = ticket.get_or_insert_with(|| {
                *owed = (0..model.acked.len() as u64)
                    .filter_map(|lba| model.acked[lba as usize].last().map(|&v| (lba, v)))
                    .collect();
                cache.flush_begin()
            });
            match cache.flush_step(at) {
                FlushStep::Evict(victims) => *writing = victims,
                FlushStep::Wait => {}
                FlushStep::Done => {
                    for &(lba, version) in owed.iter() {
                        let acked = &model.acked[lba as usize];
                        let rank = acked.iter().rposition(|&v| v == version).unwrap();
                        let held = model.device[lba as usize];
                        if !acked[rank..].contains(&held)
                            && !model.in_flight[lba as usize].contains(&held)
                        {
                            fail(format!(
                                "flush done: block {lba} holds {held}, owed {version} ({acked:?})"
                            ));
                        }
                    }
                    return true;
                }
            }
            false
        }
        Op::Trim { lba } => match cache.discard(*lba) {
            DiscardStep::Wait => false,
            DiscardStep::Device => {
                // A trimmed block reads as zeroes: a version of its own, acknowledged now.
                model.device[*lba as usize] = 0;
                model.acked[*lba as usize].push(0);
                true
            }
        },
        Op::Background(victim) => {
            write_back(cache, model, std::slice::from_mut(victim), fail);
            true
        }
    }
}

fn write_back(cache: &mut Staging, model: &mut Model, victims: &[Victim], fail: &dyn Fn(String)) {
    for victim in victims {
        let (held, version) = model.slot_data[victim.slot as usize];
        if held != victim.lba || cache.slot(victim.slot).state != SlotState::Evicting {
            fail(format!("victim {victim:?} holds block {held}"));
        }
        model.device[victim.lba as usize] = version;
        cache.evicted(victim.slot);
    }
}

#[test]
fn every_scheme_keeps_a_block_devices_promises_over_seeded_histories() {
    for scheme in StagingScheme::ALL {
        if scheme == StagingScheme::None {
            assert!(Staging::new(&StagingConfig::new(scheme, 1 << 20, 4096)).is_none());
            continue;
        }
        for seed in 1..=150u64 {
            run_history(scheme, seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        }
    }
}

#[test]
fn names_parse_and_print_alike() {
    for scheme in StagingScheme::ALL {
        assert_eq!(scheme.name().parse::<StagingScheme>().unwrap(), scheme);
    }
    let error = "writeback"
        .parse::<StagingScheme>()
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("writeback") && error.contains("caiti"),
        "{error}"
    );
}

fn fill(cache: &mut Staging, lbas: impl IntoIterator<Item = u64>) {
    for lba in lbas {
        match cache.write(lba) {
            WriteStep::Cache { slot, .. } => cache.write_done(slot),
            other => panic!("write of {lba}: {other:?}"),
        }
    }
}

#[test]
fn caiti_bypasses_a_full_cache_and_queues_every_write_for_eviction() {
    let mut cache = table(StagingScheme::CAITI, 2);
    fill(&mut cache, [7, 8]);
    assert_eq!(cache.write(9), WriteStep::Bypass);
    // A second write of the bypassed block waits for the first to reach the device.
    assert_eq!(cache.write(9), WriteStep::Wait);
    cache.bypass_done(9);
    assert_eq!(cache.write(9), WriteStep::Bypass);
    cache.bypass_done(9);
    let first = cache.background(false).unwrap();
    assert_eq!(first.lba, 7);
    // A write of a block being written back waits for it; a read takes the cached copy.
    assert_eq!(cache.write(7), WriteStep::Wait);
    assert_eq!(cache.read(7), ReadStep::Slot(first.slot));
    cache.evicted(first.slot);
    assert_eq!(cache.read(7), ReadStep::Device);
    assert!(matches!(
        cache.write(7),
        WriteStep::Cache {
            outcome: WriteOutcome::Fill,
            ..
        }
    ));
    let stats = cache.stats();
    assert_eq!(
        (
            stats.write_fills,
            stats.bypasses,
            stats.background_evictions
        ),
        (3, 2, 1)
    );
    assert_eq!(cache.metadata_bytes_per_slot(), 102);
}

#[test]
fn the_ablations_wait_or_write_back_instead() {
    let no_bypass = StagingScheme::Caiti {
        eager_eviction: true,
        conditional_bypass: false,
    };
    let mut cache = table(no_bypass, 2);
    fill(&mut cache, [1, 2]);
    assert_eq!(cache.write(3), WriteStep::Wait);
    let no_eager = StagingScheme::Caiti {
        eager_eviction: false,
        conditional_bypass: true,
    };
    let mut cache = table(no_eager, 2);
    fill(&mut cache, [1, 2]);
    assert_eq!(cache.background(true), None);
    assert_eq!(cache.write(3), WriteStep::Bypass);
}

#[test]
fn pmbd_drains_the_whole_cache_and_pmbd70_starts_its_syncer_at_seventy_percent() {
    let mut cache = table(StagingScheme::Pmbd, 4);
    fill(&mut cache, [1, 2, 3, 4]);
    let WriteStep::EvictFirst(victims) = cache.write(5) else {
        panic!("PMBD stalls a write on a full cache");
    };
    assert_eq!(
        victims.iter().map(|v| v.lba).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    assert_eq!(cache.write(5), WriteStep::Wait);
    let mut cache = table(StagingScheme::Pmbd70, 10);
    fill(&mut cache, 0..6);
    assert_eq!(cache.background(false), None);
    fill(&mut cache, [6]);
    let first = cache.background(false).unwrap();
    assert_eq!(first.lba, 0);
    cache.evicted(first.slot);
    // Once started, it drains to empty.
    let mut drained = 1;
    while let Some(victim) = cache.background(false) {
        cache.evicted(victim.slot);
        drained += 1;
    }
    assert_eq!((drained, cache.occupied()), (7, 0));
}

#[test]
fn lru_writes_back_the_least_recently_written_block() {
    let mut cache = table(StagingScheme::Lru, 3);
    fill(&mut cache, [1, 2, 3, 1]);
    assert_eq!(
        cache.write(4),
        WriteStep::EvictFirst(vec![Victim { slot: 1, lba: 2 }])
    );
}

#[test]
fn coactive_cleans_while_idle_and_reuses_clean_slots() {
    let mut cache = table(StagingScheme::CoActive, 2);
    fill(&mut cache, [1, 2]);
    assert_eq!(cache.background(false), None);
    let victim = cache.background(true).unwrap();
    cache.evicted(victim.slot);
    // Still readable, clean; a new block takes its slot without a write-back.
    assert_eq!(cache.read(1), ReadStep::Slot(victim.slot));
    assert_eq!(
        cache.write(3),
        WriteStep::Cache {
            slot: victim.slot,
            outcome: WriteOutcome::Fill
        }
    );
    cache.write_done(victim.slot);
    // Full of dirty blocks: a write stalls behind a write-back.
    assert!(matches!(cache.write(9), WriteStep::EvictFirst(_)));
}

#[test]
fn a_flush_covers_the_writes_before_it_only() {
    let mut cache = table(StagingScheme::Pmbd, 4);
    fill(&mut cache, [1, 2]);
    let mut ticket = cache.flush_begin();
    fill(&mut cache, [3]);
    let FlushStep::Evict(victims) = cache.flush_step(&mut ticket) else {
        panic!("a flush writes back what it covers");
    };
    assert_eq!(victims.iter().map(|v| v.lba).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(cache.flush_step(&mut ticket), FlushStep::Wait);
    for victim in victims {
        cache.evicted(victim.slot);
    }
    assert_eq!(cache.flush_step(&mut ticket), FlushStep::Done);
    assert_eq!(cache.occupied(), 1);
}
