//! Model check of the cache controller: "nothing acknowledged is lost".
//!
//! Plans are executed on a toy store that keeps, per device, the version of each key. A write
//! stores the version its client request produced, or for any other key the version the same
//! plan read earlier (a move carries what it read); a cache slot never written holds nothing.
//! Over random request sequences (every mode, both layouts, one to three tiers, random capacities
//! and policies, cleaning interleaved as an executor would call it) the checks are: every
//! client read reads the latest acknowledged version; the latest version of every key is in the
//! backing store or in a dirty copy; no stage both reads and writes, or twice writes, the same
//! slot; capacities hold; each tier is inside the one below (inclusive) or apart from every other
//! (exclusive);
//! the dirty count is right; and after a final flush the backing store holds every latest
//! version.

use std::collections::HashMap;

use heterarchy_engine::{
    CacheConfig, CacheController, CleaningPolicy, Controller, IoKind, Plan, PromotionPolicy,
    TierLayout, WriteMode,
};
use heterarchy_policy::registry::{create, policy_names};
use heterarchy_trace::{Op, Request};
use proptest::prelude::*;
use proptest::sample::select;

const LINE: u32 = 4096;
const KEYS: u64 = 8;
const MS: u64 = 1_000_000;
/// Background calls at one instant before the test calls the controller stuck.
const MAX_WAKE_UPS_AT_ONCE: usize = 10_000;

/// Keys divisible by 3 span two lines, so one install can evict several victims.
fn size_of(key: u64) -> u32 {
    match key % 3 {
        0 => 2 * LINE,
        _ => LINE,
    }
}

#[derive(Clone, Debug)]
enum Step {
    Access { key: u64, op: Op, after_ms: u64 },
    Idle { ms: u64 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (0..KEYS, select(vec![Op::Read, Op::Read, Op::Write, Op::Write, Op::Trim]), 0..300u64)
            .prop_map(|(key, op, after_ms)| Step::Access { key, op, after_ms }),
        1 => (0..3000u64).prop_map(|ms| Step::Idle { ms }),
    ]
}

fn config() -> impl Strategy<Value = CacheConfig> {
    // Oracles need next accesses, which the controller refuses without.
    let eviction: Vec<&str> = policy_names()
        .filter(|name| !create(name, 1).unwrap().needs_next_access())
        .collect();
    (
        (
            select(WriteMode::ALL.to_vec()),
            select(eviction),
            select(vec![TierLayout::Inclusive, TierLayout::Exclusive]),
            select(vec![
                CleaningPolicy::Nop,
                CleaningPolicy::Alru,
                CleaningPolicy::Acp,
            ]),
            select(vec![PromotionPolicy::Always, PromotionPolicy::Nhit]),
        ),
        (0..3u64, 1..3u64, 1..5u32, 0..2000u64),
        (0..20u64, 1..5u32),
        (2..5u32, 0..=100u32),
    )
        .prop_map(
            |((mode, policy, layout, cleaning, promotion), alru, acp, nhit)| {
                let mut config = CacheConfig {
                    mode,
                    policy: policy.to_string(),
                    layout,
                    cleaning,
                    promotion,
                    ..CacheConfig::default()
                };
                (
                    config.alru.wake_up_s,
                    config.alru.staleness_time_s,
                    config.alru.flush_max_buffers,
                    config.alru.activity_threshold_ms,
                ) = alru;
                (config.acp.wake_up_ms, config.acp.flush_max_buffers) = acp;
                (config.nhit.threshold, config.nhit.trigger_percent) = nhit;
                config
            },
        )
}

/// Devices' contents: per device, key → version. The backing store starts with version 0 of
/// every key; cache slots start empty.
struct Store {
    devices: Vec<HashMap<u64, u64>>,
    backing: u8,
}

impl Store {
    fn new(devices: usize) -> Store {
        let mut store = Store {
            devices: vec![HashMap::new(); devices],
            backing: (devices - 1) as u8,
        };
        for key in 0..KEYS {
            store.devices[devices - 1].insert(key, 0);
        }
        store
    }

    fn version(&self, device: u8, key: u64) -> Option<u64> {
        self.devices[device as usize].get(&key).copied()
    }

    /// Executes `plan` stage by stage. `client` is the write request's key and version, if
    /// the plan serves one. Returns the version the plan read of `read_key`, if any.
    fn execute(
        &mut self,
        plan: &Plan,
        client: Option<(u64, u64)>,
        read_key: Option<u64>,
    ) -> Result<Option<Option<u64>>, String> {
        let mut read: HashMap<u64, Option<u64>> = HashMap::new();
        let mut client_read = None;
        for index in 0..plan.stage_count() {
            let stage = plan.stage(index);
            let mut slots: HashMap<(u8, u64), bool> = HashMap::new();
            for op in stage {
                let write = op.kind == IoKind::Write;
                if let Some(was_write) = slots.insert((op.device, op.key), write) {
                    if write || was_write {
                        return Err(format!("stage {index} races on {op:?}"));
                    }
                }
            }
            for op in stage.iter().filter(|op| op.kind == IoKind::Read) {
                let version = self.version(op.device, op.key);
                if Some(op.key) == read_key && client_read.is_none() {
                    client_read = Some(version);
                }
                read.entry(op.key).or_insert(version);
            }
            for op in stage.iter().filter(|op| op.kind == IoKind::Write) {
                let version = match client {
                    Some((key, version)) if key == op.key => Some(version),
                    _ => *read
                        .get(&op.key)
                        .ok_or_else(|| format!("{op:?} writes data nobody read"))?,
                };
                let slot = &mut self.devices[op.device as usize];
                match version {
                    Some(version) => slot.insert(op.key, version),
                    None => slot.remove(&op.key),
                };
            }
        }
        Ok(client_read)
    }
}

struct Harness {
    controller: CacheController,
    store: Store,
    /// Latest acknowledged version per key; `None` after a discard (content undefined).
    latest: HashMap<u64, Option<u64>>,
    next_version: u64,
    now_ns: u64,
    wake_up_ns: Option<u64>,
    tiers: usize,
    capacities: Vec<u64>,
    layout: TierLayout,
}

impl Harness {
    fn background_until(&mut self, until_ns: u64) -> Result<(), String> {
        let mut calls = 0;
        while let Some(due) = self.wake_up_ns.filter(|&due| due <= until_ns) {
            calls += 1;
            if calls > MAX_WAKE_UPS_AT_ONCE {
                return Err(format!("background never lets time pass at {due} ns"));
            }
            self.wake_up_ns = None;
            self.run_background(due.max(self.now_ns))?;
        }
        Ok(())
    }

    fn run_background(&mut self, now_ns: u64) -> Result<(), String> {
        let mut plan = Plan::new();
        self.wake_up_ns = self.controller.background(now_ns, &mut plan);
        if let Some(due) = self.wake_up_ns {
            if due < now_ns {
                return Err(format!("asked to wake at {due} ns, before {now_ns} ns"));
            }
        }
        self.store.execute(&plan, None, None)?;
        self.check()
    }

    fn access(&mut self, key: u64, op: Op) -> Result<(), String> {
        let request = Request {
            op,
            time_ns: self.now_ns,
            ..Request::new(key, size_of(key))
        };
        let mut plan = Plan::new();
        self.controller.plan(&request, self.now_ns, &mut plan);
        for stage in 0..plan.stage_count() {
            for device_op in plan.stage(stage) {
                if device_op.key == key && device_op.bytes != size_of(key) {
                    return Err(format!("{device_op:?} moves the wrong size"));
                }
            }
        }
        // A read is answered once its data is read (Open CAS answers, then fills the cache);
        // anything else once its whole plan is done.
        let answered_after = if op == Op::Read && !plan.is_empty() {
            1
        } else {
            plan.stage_count()
        };
        if plan.reply_after() != answered_after {
            return Err(format!(
                "{op:?}: the client is answered after {} of {} stages, not {answered_after}",
                plan.reply_after(),
                plan.stage_count()
            ));
        }
        match op {
            Op::Write => {
                self.next_version += 1;
                let version = self.next_version;
                self.store.execute(&plan, Some((key, version)), None)?;
                self.latest.insert(key, Some(version));
            }
            Op::Read => {
                let read = self.store.execute(&plan, None, Some(key))?;
                let latest = self.latest.get(&key).copied().unwrap_or(Some(0));
                match read {
                    None => return Err(format!("the plan of a read of {key} reads nothing")),
                    Some(version) if latest.is_some() && version != latest => {
                        return Err(format!(
                            "read of {key} got {version:?}, latest is {latest:?}: {plan:?}"
                        ))
                    }
                    Some(_) => {}
                }
            }
            _ => {
                if !plan.is_empty() {
                    return Err(format!("a discard does I/O: {plan:?}"));
                }
                self.store.execute(&plan, None, None)?;
                self.latest.insert(key, None);
            }
        }
        self.check()?;
        if self.wake_up_ns.is_none() {
            let now_ns = self.now_ns;
            self.run_background(now_ns)?;
        }
        Ok(())
    }

    fn check(&self) -> Result<(), String> {
        let c = &self.controller;
        c.check_invariants()?;
        let mut dirty_copies = 0;
        let mut bytes = vec![0u64; self.tiers];
        let mut lines = vec![0usize; self.tiers];
        for key in 0..KEYS {
            for tier in 0..self.tiers {
                if c.holds(tier, key) {
                    bytes[tier] += u64::from(size_of(key));
                    lines[tier] += 1;
                }
                if c.is_dirty(tier, key) {
                    if !c.holds(tier, key) {
                        return Err(format!("tier {tier} has a dirty copy of {key} it lacks"));
                    }
                    dirty_copies += 1;
                }
            }
            let holders: Vec<usize> = (0..self.tiers).filter(|&t| c.holds(t, key)).collect();
            match self.layout {
                TierLayout::Inclusive => {
                    if let Some(&top) = holders.first() {
                        if holders.len() != self.tiers - top {
                            return Err(format!("tiers {holders:?} hold {key}: not inclusive"));
                        }
                    }
                }
                TierLayout::Exclusive if holders.len() > 1 => {
                    return Err(format!("exclusive tiers {holders:?} all hold {key}"))
                }
                TierLayout::Exclusive => {}
            }
            let Some(latest) = self.latest.get(&key).copied().unwrap_or(Some(0)) else {
                continue;
            };
            let top = (0..self.tiers).find(|&tier| c.holds(tier, key));
            let dirty = (0..self.tiers).any(|tier| c.is_dirty(tier, key));
            let backing = self.store.version(self.store.backing, key);
            if !dirty && backing != Some(latest) {
                return Err(format!(
                    "{key} is clean everywhere but the backing store has {backing:?}, not {latest}"
                ));
            }
            if let Some(top) = top {
                let cached = self.store.version(top as u8, key);
                if cached != Some(latest) {
                    return Err(format!(
                        "tier {top} serves {key} with {cached:?}, latest is {latest}"
                    ));
                }
            }
        }
        if dirty_copies != c.stats().dirty_lines {
            return Err(format!(
                "{dirty_copies} dirty copies, stats say {}",
                c.stats().dirty_lines
            ));
        }
        for tier in 0..self.tiers {
            if c.tier_used_bytes(tier) > self.capacities[tier] {
                return Err(format!("tier {tier} holds more than its capacity"));
            }
            if c.tier_used_bytes(tier) != bytes[tier] || c.tier_lines(tier) != lines[tier] {
                return Err(format!(
                    "tier {tier}: the policy holds {} lines, {} bytes; the controller {} lines, \
                     {} bytes",
                    c.tier_lines(tier),
                    c.tier_used_bytes(tier),
                    lines[tier],
                    bytes[tier]
                ));
            }
        }
        Ok(())
    }
}

fn run_model(
    config: CacheConfig,
    capacity_lines: Vec<u64>,
    steps: Vec<Step>,
) -> Result<(), String> {
    let capacities: Vec<u64> = capacity_lines
        .iter()
        .map(|lines| lines * u64::from(LINE))
        .collect();
    let controller = CacheController::new(&config, &capacities, 9).map_err(|e| e.to_string())?;
    let tiers = capacities.len();
    let mut harness = Harness {
        controller,
        store: Store::new(tiers + 1),
        latest: HashMap::new(),
        next_version: 0,
        now_ns: 0,
        wake_up_ns: None,
        tiers,
        capacities,
        layout: config.layout,
    };
    harness.run_background(0)?;
    for step in steps {
        match step {
            Step::Access { key, op, after_ms } => {
                let now_ns = harness.now_ns + after_ms * MS;
                harness.background_until(now_ns)?;
                harness.now_ns = now_ns;
                harness.access(key, op)?;
            }
            Step::Idle { ms } => {
                let now_ns = harness.now_ns + ms * MS;
                harness.background_until(now_ns)?;
                harness.now_ns = now_ns;
            }
        }
    }
    let mut plan = Plan::new();
    let flushed = harness.controller.flush(&mut plan);
    harness.store.execute(&plan, None, None)?;
    if harness.controller.stats().dirty_lines != 0 {
        return Err(format!("{flushed} lines flushed, still dirty lines"));
    }
    for key in 0..KEYS {
        if let Some(latest) = harness.latest.get(&key).copied().unwrap_or(Some(0)) {
            let backing = harness.store.version(harness.store.backing, key);
            if backing != Some(latest) {
                return Err(format!(
                    "after a flush the backing store has {backing:?} of {key}, not {latest}"
                ));
            }
        }
    }
    harness.check()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn nothing_acknowledged_is_lost(
        config in config(),
        capacity_lines in prop::collection::vec(1..6u64, 1..=3),
        steps in prop::collection::vec(step(), 1..200),
    ) {
        if let Err(message) = run_model(config.clone(), capacity_lines.clone(), steps) {
            return Err(TestCaseError::fail(format!(
                "{message}\nconfig {config:?}\ncapacities {capacity_lines:?} lines"
            )));
        }
    }
}

/// Every mode and layout at least once, deterministically, with enough traffic to evict.
#[test]
fn every_mode_and_layout_survives_a_fixed_workload() {
    let steps: Vec<Step> = (0..400u64)
        .map(|i| match i % 7 {
            6 => Step::Idle { ms: 900 },
            phase => Step::Access {
                key: (i * 5 + i / 3) % KEYS,
                op: [Op::Read, Op::Write, Op::Read, Op::Write, Op::Read, Op::Trim][phase as usize],
                after_ms: i % 50,
            },
        })
        .collect();
    for mode in WriteMode::ALL {
        for layout in [TierLayout::Inclusive, TierLayout::Exclusive] {
            for cleaning in [
                CleaningPolicy::Nop,
                CleaningPolicy::Alru,
                CleaningPolicy::Acp,
            ] {
                let mut config = CacheConfig {
                    mode,
                    layout,
                    cleaning,
                    ..CacheConfig::default()
                };
                config.alru.staleness_time_s = 1;
                config.alru.wake_up_s = 1;
                config.alru.activity_threshold_ms = 100;
                for capacities in [
                    vec![3],
                    vec![2, 5],
                    vec![3, 3],
                    vec![1, 2, 4],
                    vec![2, 2, 2],
                ] {
                    if let Err(message) =
                        run_model(config.clone(), capacities.clone(), steps.clone())
                    {
                        panic!("{mode:?} {layout:?} {cleaning:?} {capacities:?}: {message}");
                    }
                }
            }
        }
    }
}
