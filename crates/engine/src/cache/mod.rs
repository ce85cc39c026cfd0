//! The cache controller: one or more cache tiers over a backing store, with Open CAS's cache
//! modes, dirty tracking, cleaning and promotion policies (seed 000 §4.1–4.2, whose caching
//! model charges a miss's install to the fast device as a write, Eq 4.4; Eq 4.1 also puts it on
//! the request's path, which Open CAS does not).
//!
//! Devices are numbered from the top: cache tiers `0..n`, then the backing store `n`. Each
//! request becomes a [`Plan`] in up to four stages, any of which may be empty:
//!
//! 1. reads: where the client's data comes from, and every line that must move;
//! 2. write-backs of dirty victims to the backing store;
//! 3. moves into lower cache tiers (exclusive demotions, dirty victims of an inclusive tier);
//! 4. the request's own writes: installs and the client's data.
//!
//! so a victim's slot is reused only after its data is safe below. A read is answered when
//! stage 1 is done and the rest goes on in the background, as Open CAS answers a read miss
//! and then fills the cache; a write is answered when all four are done. Metadata changes at
//! decision time.
//!
//! Reads pass the decision points of non-hierarchical caching (seed 000 §4.3.2), which an
//! admission tuner sets when one is configured ([`crate::admission`]): a clean read hit in
//! tier i stays there with probability `load_admit` of pair i, else goes to the next level
//! holding the line (never past a dirty copy); a read miss in tier i is installed there only
//! when `data_admit` of pair i is on. Writes follow the cache mode alone. Without a tuner the
//! settings stay classic and no random number is drawn.
//!
//! [`Decision::hit_tier`] is the highest tier holding the line when the request arrives, even
//! where the mode serves it from the backing store (clean lines read in wo) or drops it (wi
//! and pt writes, discards). A cleaner that has just written lines back asks to be called again
//! at once (`Some(now_ns)`, Open CAS's interval 0); an executor that can should call it when
//! that background plan completes.

mod cleaning;
pub mod config;
mod dirty;
pub(crate) mod line;
mod paths;
mod promotion;
mod tiers;

use std::cmp::Ordering;

use heterarchy_policy::eviction::{Evicted, EvictionPolicy, PREFETCH_NODE_DISTANCE};
use heterarchy_policy::util::key_table::KeyTable;
use heterarchy_policy::PolicySpec;
use heterarchy_trace::{Op, Request};

use crate::admission::{Tuning, TuningHistory};
use crate::controller::{Controller, ControllerStats, Decision, Feedback, Reply};
use crate::plan::{DeviceOp, IoKind, Plan};
use cleaning::Cleaner;
use config::{CacheConfig, ConfigError, TierLayout, WriteMode};
use dirty::DirtyTracker;
use line::Line;
pub use line::MAX_CACHE_TIERS;
use promotion::Promoter;

/// A line's data moving between devices: read from `from`, written to every device in `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Move {
    key: u64,
    bytes: u32,
    from: u8,
    /// Bit `d` set: written to device `d`.
    to: u8,
    /// The data is newer than the backing store's.
    dirty: bool,
    /// Counts as a write-back (dirty data written to the level below it); an exclusive
    /// demotion moves dirty data without cleaning it.
    writeback: bool,
}

/// How a request treats its line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    Read,
    Write,
    /// Delete or trim: the data is gone, cached copies are dropped unwritten.
    Discard,
}

fn access_of(op: Op) -> Access {
    match op {
        Op::Delete | Op::Trim => Access::Discard,
        op if op.is_write() => Access::Write,
        _ => Access::Read,
    }
}

/// Caching over cache tiers (up to [`MAX_CACHE_TIERS`]) with Open CAS's semantics; see the module docs.
pub struct CacheController {
    mode: WriteMode,
    layout: TierLayout,
    /// One eviction policy per cache tier, top first.
    tiers: Vec<Box<dyn EvictionPolicy>>,
    /// Device index of the backing store.
    backing: u8,
    lines: KeyTable<Line>,
    dirty: DirtyTracker,
    promoter: Promoter,
    stats: ControllerStats,
    last_request_ns: u64,
    /// Per tier, a reused buffer for the policy's victims.
    evicted: Vec<Vec<Evicted>>,
    moves: Vec<Move>,
    /// The request's own writes (stage 4).
    writes: Vec<DeviceOp>,
    /// Lines a cleaning pass writes back.
    clean_keys: Vec<u64>,
    /// True when tier 0's policy is the only record of residency and `lines` stays empty: one
    /// tier that is never dirty, whose policy can say what it holds. A line then needs no
    /// second table entry to write, find and drop (most of a timed run's memory stalls).
    lines_in_policy: bool,
    /// The admission tuner and its measurements; `None` for classic caching.
    tuning: Option<Tuning>,
    /// Lines that left a tier during the current call, as `(tier, key)`.
    departures: Vec<(u8, u64)>,
    /// Read misses enter a tier with free room even when `data_admit` is off.
    admit_while_filling: bool,
}

impl CacheController {
    /// A controller for cache tiers of `tier_capacity_bytes` (top first; 1 to [`MAX_CACHE_TIERS`]) over a
    /// backing store. `seed` is for random choices; classic caching makes none, tuned
    /// admission draws `load_admit`'s.
    pub fn new(
        config: &CacheConfig,
        tier_capacity_bytes: &[u64],
        seed: u64,
    ) -> Result<CacheController, ConfigError> {
        config.validate()?;
        if !(1..=MAX_CACHE_TIERS).contains(&tier_capacity_bytes.len()) {
            return Err(ConfigError::new(
                "tier",
                format!(
                    "{} cache tiers given; expected 1 to {MAX_CACHE_TIERS}",
                    tier_capacity_bytes.len()
                ),
            ));
        }
        if let Some(index) = tier_capacity_bytes.iter().position(|&bytes| bytes == 0) {
            return Err(ConfigError::new(
                &format!("tier[{index}]"),
                "a cache tier of 0 bytes holds nothing".to_string(),
            ));
        }
        let spec = PolicySpec::parse(&config.policy, None)
            .map_err(|error| ConfigError::new("policy", error.to_string()))?;
        let mut tiers = Vec::with_capacity(tier_capacity_bytes.len());
        for &capacity in tier_capacity_bytes {
            let policy = spec
                .build(capacity)
                .map_err(|error| ConfigError::new("policy", error.to_string()))?;
            if policy.needs_next_access() {
                return Err(ConfigError::new(
                    "policy",
                    format!(
                        "{} needs each request's next access, which a cache serving requests \
                         never knows; simulate it with `heterarchy sim`",
                        config.policy
                    ),
                ));
            }
            tiers.push(policy);
        }
        let count = tiers.len();
        Ok(CacheController {
            mode: config.mode,
            layout: config.layout,
            backing: count as u8,
            lines: KeyTable::default(),
            dirty: DirtyTracker::new(Cleaner::new(config)),
            promoter: Promoter::new(config, tier_capacity_bytes[0]),
            stats: ControllerStats {
                hits_per_tier: vec![0; count],
                installs_per_tier: vec![0; count],
                evictions_per_tier: vec![0; count],
                ..ControllerStats::default()
            },
            last_request_ns: 0,
            evicted: vec![Vec::new(); count],
            moves: Vec::new(),
            writes: Vec::new(),
            clean_keys: Vec::new(),
            // A policy answers `contains` for every key or for none: key 0 tells which.
            lines_in_policy: count == 1
                && !config.mode.writes_back()
                && tiers[0].contains(0).is_some(),
            departures: Vec::new(),
            // NHC's setting, and its pinned oracle's; SIB's and LBICA's admission rules are
            // their definition.
            admit_while_filling: config.nhc.admit_while_filling
                && matches!(
                    config.admission,
                    crate::admission::AdmissionScheme::Nhc
                        | crate::admission::AdmissionScheme::Fixed
                ),
            tuning: Tuning::new(&config.admission_config(), count, seed),
            tiers,
        })
    }

    /// Number of cache tiers (devices minus the backing store).
    pub fn cache_tiers(&self) -> usize {
        self.tiers.len()
    }

    /// What is known of `key`'s line, `None` when no tier holds it. With the lines in the
    /// policy, a resident line's size reads 0: only victims, promotions and write-backs read
    /// it, and a single clean tier has none of those.
    #[inline]
    fn line(&self, key: u64) -> Option<Line> {
        if self.lines_in_policy {
            let resident = self.tiers[0].contains(key).unwrap_or(false);
            resident.then_some(Line {
                resident: 1,
                ..Line::absent(0)
            })
        } else {
            self.lines.get(key)
        }
    }

    /// Checks the controller's bookkeeping between calls, for tests that want a corrupted
    /// state caught at the call that made it: every tier's policy keeps its invariants
    /// ([`EvictionPolicy::check_invariants`]) and the dirty copies counted agree with the dirty
    /// lines. The message names the tier.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (tier, policy) in self.tiers.iter().enumerate() {
            policy
                .check_invariants()
                .map_err(|broken| format!("tier {tier}: {broken}"))?;
        }
        self.dirty.check_invariants(self.tiers.len())
    }

    /// True when cache tier `tier` holds a copy of `key`.
    pub fn holds(&self, tier: usize, key: u64) -> bool {
        tier < self.tiers.len() && self.line(key).is_some_and(|line| line.holds(tier))
    }

    /// True when tier `tier`'s copy of `key` is newer than the level below it (the next tier
    /// holding the line, or the backing store).
    pub fn is_dirty(&self, tier: usize, key: u64) -> bool {
        tier < self.tiers.len() && self.line(key).is_some_and(|line| line.is_dirty(tier))
    }

    /// Bytes resident in cache tier `tier`, as its eviction policy counts them (0 for a tier
    /// that does not exist).
    pub fn tier_used_bytes(&self, tier: usize) -> u64 {
        self.tiers.get(tier).map_or(0, |policy| policy.used_bytes())
    }

    /// Capacity of cache tier `tier` in bytes (0 for a tier that does not exist).
    pub fn tier_capacity_bytes(&self, tier: usize) -> u64 {
        self.tiers
            .get(tier)
            .map_or(0, |policy| policy.capacity_bytes())
    }

    /// Lines resident in cache tier `tier`, as its eviction policy counts them (0 for a tier
    /// that does not exist).
    pub fn tier_lines(&self, tier: usize) -> usize {
        self.tiers.get(tier).map_or(0, |policy| policy.len())
    }

    /// Writes every dirty line back (as a graceful shutdown must), into `plan`: stage 1 reads
    /// each line's newest copy, stage 2 writes it to every level below. Returns the number of
    /// lines, cleaned in key order.
    pub fn flush(&mut self, plan: &mut Plan) -> usize {
        self.moves.clear();
        self.clean_keys.clear();
        self.clean_keys.extend(self.dirty.dirty_lines());
        self.clean_keys.sort_unstable();
        let keys = std::mem::take(&mut self.clean_keys);
        for &key in &keys {
            self.clean_line(key);
        }
        self.clean_keys = keys;
        self.emit_cleaning_plan(plan);
        self.clean_keys.len()
    }

    #[inline]
    fn line_or_absent(&self, key: u64, size: u32) -> Line {
        self.line(key).unwrap_or_else(|| Line::absent(size))
    }

    /// Writes `line` back to the table, or drops it when no tier holds it any more (nothing to
    /// do when the policy keeps the lines).
    #[inline]
    fn store(&mut self, key: u64, line: Line) {
        if self.lines_in_policy {
            return;
        }
        if line.resident == 0 {
            self.lines.remove(key);
        } else {
            self.lines.insert(key, line);
        }
    }

    #[inline]
    fn op(device: u8, kind: IoKind, key: u64, bytes: u32) -> DeviceOp {
        DeviceOp {
            device,
            kind,
            key,
            bytes,
        }
    }

    /// Lays the request's source read (from device `source`, for a read), moves and writes out
    /// in the four stages of the module docs; a read is answered once the first stage has
    /// brought its data (Open CAS answers a miss and then fills the cache).
    fn emit_request_plan(&mut self, plan: &mut Plan, request: &Request, source: Option<u8>) {
        let read = source.is_some();
        if let Some(device) = source {
            plan.push(Self::op(device, IoKind::Read, request.key, request.size));
        }
        if self.moves.is_empty() {
            // Most requests move no line (hits, and misses whose installs evict clean
            // victims): the two middle stages are empty, and closing an empty stage adds none.
            if read {
                plan.reply_here();
            } else {
                plan.end_stage();
            }
            for &write in &self.writes {
                plan.push(write);
            }
            plan.end_stage();
            self.emit_departures(plan);
            return;
        }
        let backing_bit = 1u8 << self.backing;
        for m in &self.moves {
            plan.push(Self::op(m.from, IoKind::Read, m.key, m.bytes));
        }
        if read {
            plan.reply_here();
        } else {
            plan.end_stage();
        }
        for m in self.moves.iter().filter(|m| m.to & backing_bit != 0) {
            plan.push(Self::op(self.backing, IoKind::Write, m.key, m.bytes));
        }
        plan.end_stage();
        for m in &self.moves {
            for tier in 0..self.backing {
                if m.to & (1 << tier) != 0 {
                    plan.push(Self::op(tier, IoKind::Write, m.key, m.bytes));
                }
            }
        }
        plan.end_stage();
        for &write in &self.writes {
            plan.push(write);
        }
        plan.end_stage();
        self.count_writebacks();
        self.emit_departures(plan);
    }

    fn emit_departures(&mut self, plan: &mut Plan) {
        for (tier, key) in self.departures.drain(..) {
            plan.depart(tier, key);
        }
    }

    /// Notes that `tier` no longer holds `key` (see [`Plan::depart`]).
    #[inline]
    fn note_departure(&mut self, tier: usize, key: u64) {
        self.departures.push((tier as u8, key));
    }

    /// Takes in a line that a persistent cache tier still held when the cache last stopped (a
    /// warm restart), dirty or clean. Restoring needs no I/O unless the tier's policy evicts to
    /// make room (a policy that keeps less than the tier's size): the victims' moves and
    /// departures go into `plan`, laid out as a cleaning plan, for the caller to carry out.
    /// Returns whether the tier keeps the line; when it does not, the caller writes the line's
    /// dirty data back itself. With inclusive tiers, restore a line's lower copies first. A
    /// dirty line is refused where the only tier is never dirty (its lines kept by its policy,
    /// a write-through restart after write-back, say): writing it back is all a restart in
    /// that mode would do with it.
    pub fn restore_line(
        &mut self,
        tier: usize,
        key: u64,
        bytes: u32,
        dirty: bool,
        now_ns: u64,
        plan: &mut Plan,
    ) -> bool {
        if tier >= self.tiers.len() || self.holds(tier, key) || (dirty && self.lines_in_policy) {
            return false;
        }
        self.moves.clear();
        let kept = self.admit(tier, &Request::new(key, bytes), now_ns);
        self.emit_cleaning_plan(plan);
        self.emit_departures(plan);
        if kept && dirty {
            let mut line = self.line_or_absent(key, bytes);
            self.dirty.mark_dirty(key, &mut line, tier, now_ns);
            self.store(key, line);
            self.stats.dirty_lines = self.dirty.copies();
        }
        kept
    }

    /// Lays cleaning moves out in two stages: read the newest copies, then write them below.
    fn emit_cleaning_plan(&mut self, plan: &mut Plan) {
        for m in &self.moves {
            plan.push(Self::op(m.from, IoKind::Read, m.key, m.bytes));
        }
        plan.end_stage();
        for m in &self.moves {
            for device in 0..=self.backing {
                if m.to & (1 << device) != 0 {
                    plan.push(Self::op(device, IoKind::Write, m.key, m.bytes));
                }
            }
        }
        plan.end_stage();
        self.count_writebacks();
        self.stats.dirty_lines = self.dirty.copies();
    }

    fn count_writebacks(&mut self) {
        self.stats.writebacks += self.moves.iter().filter(|m| m.writeback).count() as u64;
    }
}

impl Controller for CacheController {
    fn device_count(&self) -> usize {
        self.tiers.len() + 1
    }

    fn plan(&mut self, request: &Request, now_ns: u64, plan: &mut Plan) -> Decision {
        self.last_request_ns = now_ns;
        self.moves.clear();
        self.writes.clear();
        let line = self.line(request.key);
        let held = line.and_then(|line| line.top_tier());
        self.stats.requests += 1;
        if let Some(tier) = held {
            self.stats.hits += 1;
            self.stats.hits_per_tier[tier] += 1;
        }
        let access = access_of(request.op);
        if let Some(tuning) = &mut self.tuning {
            tuning.on_request(now_ns, held, access != Access::Read);
        }
        let source = match access {
            Access::Read => {
                self.stats.reads += 1;
                Some(self.read(request, line, now_ns))
            }
            Access::Write => {
                self.stats.writes += 1;
                self.write(request, held, now_ns);
                None
            }
            Access::Discard => {
                self.discard(request.key);
                None
            }
        };
        self.emit_request_plan(plan, request, source);
        self.dirty.cleaner.compact(&self.lines, self.dirty.copies());
        self.stats.dirty_lines = self.dirty.copies();
        Decision {
            hit_tier: held.map(|tier| tier as u8),
            source,
        }
    }

    fn background(&mut self, now_ns: u64, plan: &mut Plan) -> Option<u64> {
        if !self.mode.writes_back() {
            return None;
        }
        self.moves.clear();
        self.clean_keys.clear();
        let next = self.dirty.cleaner.due(
            now_ns,
            self.last_request_ns,
            &self.lines,
            &mut self.clean_keys,
        );
        let keys = std::mem::take(&mut self.clean_keys);
        for &key in &keys {
            self.clean_line(key);
        }
        self.clean_keys = keys;
        self.emit_cleaning_plan(plan);
        next
    }

    fn stats(&self) -> &ControllerStats {
        &self.stats
    }

    #[inline]
    fn on_reply(&mut self, reply: &Reply) {
        if let Some(tuning) = &mut self.tuning {
            tuning.on_reply(reply);
        }
    }

    fn feedback(&self) -> Feedback {
        Feedback {
            replies: self.tuning.is_some(),
            device_ops: self.tuning.as_ref().is_some_and(Tuning::wants_device_ops),
            // Only dirty lines make background work (see `background`).
            background: self.mode.writes_back(),
        }
    }

    #[inline]
    fn on_device_op(&mut self, device: u8, bytes: u32, latency_ns: u64) {
        if let Some(tuning) = &mut self.tuning {
            tuning.on_device_op(device, bytes, latency_ns);
        }
    }

    fn tuning_history(&self) -> Option<&TuningHistory> {
        self.tuning.as_ref().map(Tuning::history)
    }

    /// The hit-ratio simulator's three prefetch stages, by distance (see
    /// [`EvictionPolicy::simulate`]): table slots far ahead, then nodes and victims, then a
    /// hit's neighbours.
    #[inline]
    fn prefetch(&self, key: u64, distance: usize) {
        let top = &self.tiers[0];
        match distance.cmp(&PREFETCH_NODE_DISTANCE) {
            Ordering::Greater => {
                if !self.lines_in_policy {
                    self.lines.prefetch(key);
                }
                top.prefetch_slot(key);
            }
            Ordering::Equal => {
                top.prefetch_node(key);
                top.prefetch_victims();
            }
            Ordering::Less => top.prefetch_neighbours(key),
        }
    }
}
