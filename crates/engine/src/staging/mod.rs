//! DRAM staging caches in front of a block device on persistent memory: Caiti's transit cache
//! and the baselines it is measured against (seed 001 §3–§4; docs/architecture.md, "Staging
//! caches"). Written once; the live staged device (`heterarchy-blockdev`) and the timed
//! simulator (`sim::staging`) both run it.
//!
//! [`Staging`] is the slot table every scheme shares: 4 KiB slots in DRAM, each Free, Pending
//! (data being copied in), Valid (dirty), Evicting (being written back) or Clean (written back
//! and kept, Co-Active only); the global free set; the order in which slots became dirty, which
//! a FLUSH walks; and the writes sent around the cache. A [`Scheme`] (one file each) says where
//! a block's slot is found, what a write does when no slot is free, and what background threads
//! write back. The table is sequential: an executor holds it under one lock for a decision and
//! moves the data outside it, reporting back (`write_done`, `evicted`, `bypass_done`). A step
//! that cannot go on yet answers `Wait`; the executor asks again after the next report.
//!
//! The orderings every executor relies on (seed 001 §4.3's slot states, and a race its
//! Algorithm 1 leaves open: a bypass write overtaken by the write-back of an older cached
//! copy): a slot being filled or written back is never given to a second writer of its block
//! (they wait), so a block has one cached copy and an older copy never overwrites a newer one
//! on the device; a write sent around a full cache makes later writes of the same block wait
//! until it is on the device; readers never see a Pending slot.

mod caiti;
mod chain;
mod coactive;
mod lru;
mod pmbd;

use std::fmt;
use std::str::FromStr;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use chain::{Chain, Link};

use crate::error::NameError;
pub use caiti::Caiti;
pub use coactive::CoActive;
pub use lru::LruStaging;
pub use pmbd::Pmbd;

/// The staging choices of seed 001 §4.1, plus none (the BTT alone).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum StagingScheme {
    /// No cache: every write goes to the device.
    None,
    /// Caiti (seed 001 §3): eager eviction and conditional bypass, either switched off for
    /// the ablations of Fig 6a ("w/o EE", "w/o BP").
    Caiti {
        eager_eviction: bool,
        conditional_bypass: bool,
    },
    /// PMBD: the whole cache written back when a write finds it full.
    Pmbd,
    /// PMBD-70: as PMBD, and a syncer thread drains the cache once it is 70% full.
    Pmbd70,
    /// LRU staging: a full cache writes its least recently written block back first.
    Lru,
    /// Co-Active (Sun et al., TPDS'21, as seed 001 §4.1 ports it): dirty and clean lists,
    /// Bloom-filter hot/cold classification, write-back of dirty blocks while the device idles.
    CoActive,
}

/// Every name [`StagingScheme`] parses, for error messages and help.
pub const STAGING_NAMES: &str =
    "none, caiti, caiti-no-ee, caiti-no-bp, pmbd, pmbd70, lru, coactive";

impl StagingScheme {
    /// Every scheme, in the order of seed 001's Fig 5 legend (ablations last).
    pub const ALL: [StagingScheme; 8] = [
        StagingScheme::None,
        StagingScheme::Pmbd,
        StagingScheme::Pmbd70,
        StagingScheme::Lru,
        StagingScheme::CoActive,
        StagingScheme::CAITI,
        StagingScheme::Caiti {
            eager_eviction: false,
            conditional_bypass: true,
        },
        StagingScheme::Caiti {
            eager_eviction: true,
            conditional_bypass: false,
        },
    ];

    /// Caiti with both of its policies.
    pub const CAITI: StagingScheme = StagingScheme::Caiti {
        eager_eviction: true,
        conditional_bypass: true,
    };

    /// Background threads it runs, given `evictors` for Caiti's pool: PMBD-70's syncer and
    /// Co-Active's cleaner are one thread each; PMBD, LRU and Caiti without eager eviction
    /// have none.
    pub fn background_threads(self, evictors: u32) -> u32 {
        match self {
            StagingScheme::Caiti {
                eager_eviction: true,
                ..
            } => evictors.max(1),
            StagingScheme::Pmbd70 | StagingScheme::CoActive => 1,
            _ => 0,
        }
    }

    /// The name it parses from.
    pub fn name(self) -> &'static str {
        match self {
            StagingScheme::None => "none",
            StagingScheme::Caiti {
                eager_eviction: true,
                conditional_bypass: true,
            } => "caiti",
            StagingScheme::Caiti {
                eager_eviction: false,
                conditional_bypass: true,
            } => "caiti-no-ee",
            StagingScheme::Caiti {
                eager_eviction: true,
                conditional_bypass: false,
            } => "caiti-no-bp",
            StagingScheme::Caiti { .. } => "caiti-no-ee-no-bp",
            StagingScheme::Pmbd => "pmbd",
            StagingScheme::Pmbd70 => "pmbd70",
            StagingScheme::Lru => "lru",
            StagingScheme::CoActive => "coactive",
        }
    }
}

impl FromStr for StagingScheme {
    type Err = NameError;

    fn from_str(text: &str) -> Result<StagingScheme, NameError> {
        StagingScheme::ALL
            .into_iter()
            .find(|scheme| scheme.name() == text)
            .ok_or_else(|| NameError {
                what: "staging",
                text: text.to_string(),
                expected: format!("one of {STAGING_NAMES}"),
            })
    }
}

impl TryFrom<String> for StagingScheme {
    type Error = NameError;
    fn try_from(text: String) -> Result<StagingScheme, NameError> {
        text.parse()
    }
}

impl From<StagingScheme> for String {
    fn from(scheme: StagingScheme) -> String {
        scheme.name().to_string()
    }
}

impl fmt::Display for StagingScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A staging cache's size and shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StagingConfig {
    pub scheme: StagingScheme,
    /// Slots (seed 001 §4.1: 512 MiB of 4 KiB slots, 131,072).
    pub slots: u32,
    /// Caiti's sets, a block's set being its number modulo this (seed 001 §3.2 leaves the
    /// count open).
    pub sets: u32,
}

impl StagingConfig {
    /// `cache_bytes` of `block_bytes` slots; Caiti gets a set per 32 slots (a set's write-back
    /// queue stays a short scan even when the cache is full).
    pub fn new(scheme: StagingScheme, cache_bytes: u64, block_bytes: u32) -> StagingConfig {
        let slots =
            (cache_bytes / u64::from(block_bytes.max(1))).min(u64::from(u32::MAX - 1)) as u32;
        StagingConfig {
            scheme,
            slots,
            sets: (slots / 32).max(1),
        }
    }
}

/// A slot's state (seed 001 §3.2; Clean is Co-Active's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotState {
    Free,
    /// A writer is copying a block in; nobody else may read or write it.
    Pending,
    /// Holds a whole block not yet on the device.
    Valid,
    /// Being written back; readable, not writable.
    Evicting,
    /// Holds a whole block that is on the device too.
    Clean,
}

/// One slot's metadata.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    /// The block it holds (meaningless when Free).
    pub lba: u64,
    pub state: SlotState,
    /// The write sequence number at which the slot last became dirty; 0 when it is not.
    dirty_from: u64,
}

/// A slot to write back, and its block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Victim {
    pub slot: u32,
    pub lba: u64,
}

/// The write outcomes of seed 001 Fig 6c.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The block was cached already.
    Hit,
    /// A free (or clean) slot took it.
    Fill,
}

/// What a write does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteStep {
    /// Copy the block into `slot` (now Pending), then [`Staging::write_done`].
    Cache { slot: u32, outcome: WriteOutcome },
    /// Write the block to the device (the cache is full), then [`Staging::bypass_done`].
    Bypass,
    /// Write these slots back first (each now Evicting; [`Staging::evicted`] for each), then
    /// ask again: the write stalls behind the cache ("cache eviction and write", Fig 6a).
    EvictFirst(Vec<Victim>),
    /// Ask again after the next report: the block is being written, or no slot can be had yet.
    Wait,
}

/// What a read does next. Reads are never admitted (seed 001 §3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadStep {
    /// Copy from `slot` (Valid, Evicting or Clean: a whole block).
    Slot(u32),
    /// Read the device.
    Device,
    /// The block is being copied in: ask again.
    Wait,
}

/// What a FLUSH (or a FUA write) does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlushStep {
    /// Write these back (each now Evicting; [`Staging::evicted`] for each), then ask again.
    Evict(Vec<Victim>),
    /// Others are writing back what the flush covers: ask again after the next report.
    Wait,
    /// Everything the flush covers is on the device.
    Done,
}

/// Where a FLUSH stands: what it covers, and what it last saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushTicket {
    /// Writes completed when it began.
    barrier: u64,
    /// The table's revalidations when it last looked for Valid slots to write back.
    revalidations_seen: Option<u64>,
}

/// What a TRIM does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiscardStep {
    /// No cached copy is left: trim the device.
    Device,
    /// The block is being written: ask again.
    Wait,
}

/// What a scheme does when a write misses and no slot is free.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WhenFull {
    /// Send the write around the cache.
    Bypass,
    /// Write these Valid slots back first.
    Evict(Vec<u32>),
    /// Take this Clean slot.
    Reuse(u32),
    /// Wait for a slot.
    Wait,
}

/// What a scheme sees of the table.
pub struct View<'a> {
    pub slots: &'a [Slot],
    valid: &'a Chain,
    valid_links: &'a [Link],
    pub free: usize,
}

impl View<'_> {
    /// Valid slots, in the order their last writes completed.
    pub fn valid_oldest_first(&self) -> impl Iterator<Item = u32> + '_ {
        self.valid.iter(self.valid_links)
    }

    /// Slots that hold a block.
    pub fn occupied(&self) -> usize {
        self.slots.len() - self.free
    }
}

/// One staging scheme: where a block's slot is, and the choices of a full cache and of the
/// background threads. The table calls it on every change of a slot's block or state.
pub trait Scheme: Send {
    /// The slot holding `lba`, in any state but Free.
    fn find(&self, slots: &[Slot], lba: u64) -> Option<u32>;
    /// `slot` was taken for `lba` (now Pending).
    fn taken(&mut self, slot: u32, lba: u64);
    /// `slot` gave up `lba` (now Free, or taken at once for another block).
    fn released(&mut self, slot: u32, lba: u64);
    /// A write into `slot` completed (now Valid); `lba` is its block.
    fn written(&mut self, slot: u32, lba: u64);
    /// `slot`, Valid, is being written back.
    fn evicting(&mut self, _slot: u32) {}
    /// `slot` was written back and stays cached, Clean (schemes that keep clean blocks).
    fn cleaned(&mut self, _slot: u32) {}
    /// A write of `lba` finished (cached or sent around).
    fn noticed(&mut self, _lba: u64) {}
    /// A write of `lba` missed and no slot is free.
    fn when_full(&mut self, view: &View<'_>, lba: u64) -> WhenFull;
    /// The next Valid slot a background thread should write back, if any; `device_idle` when
    /// no request is in the device (none between its arrival and its answer).
    fn background(&mut self, view: &View<'_>, device_idle: bool) -> Option<u32>;
    /// Whether background threads write back only while the device idles, so must be woken
    /// when it becomes idle.
    fn background_when_idle(&self) -> bool {
        false
    }
    /// Whether a slot written back stays cached (Clean) rather than going Free.
    fn keeps_clean(&self) -> bool {
        false
    }
    /// Whether background threads write back at all (they need not be started otherwise).
    fn has_background(&self) -> bool;
    /// DRAM metadata per slot in seed 001 §4.1's accounting (Caiti 102 B).
    fn metadata_bytes_per_slot(&self) -> u32;
}

/// What a staging cache did, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StagingStats {
    pub write_hits: u64,
    /// Writes that took a free (or clean) slot.
    pub write_fills: u64,
    pub bypasses: u64,
    /// Writes that had to write slots back first.
    pub stalled_writes: u64,
    /// Slots written back by stalled writes, by background threads, by flushes.
    pub sync_evictions: u64,
    pub background_evictions: u64,
    pub flush_evictions: u64,
    pub read_hits: u64,
    pub read_misses: u64,
    pub flushes: u64,
}

/// The slot table shared by every scheme; see the module docs.
pub struct Staging {
    scheme_name: StagingScheme,
    slots: Vec<Slot>,
    free: Vec<u32>,
    dirty: Chain,
    dirty_links: Vec<Link>,
    /// Valid slots, in the order their last writes completed.
    valid: Chain,
    valid_links: Vec<Link>,
    /// Completed cache writes so far: a FLUSH covers slots dirty since one of these.
    write_seq: u64,
    /// Dirty slots turned Valid again (a write into a slot dirty already, a failed write-back):
    /// the only ways a slot a FLUSH covers turns Valid after the FLUSH has looked.
    revalidations: u64,
    /// Blocks with writes on their way around the cache, and how many.
    bypassing: FxHashMap<u64, u32>,
    scheme: Box<dyn Scheme>,
    stats: StagingStats,
}

impl Staging {
    /// An empty cache of `config`; `None` for [`StagingScheme::None`] or no slots.
    pub fn new(config: &StagingConfig) -> Option<Staging> {
        let scheme: Box<dyn Scheme> = match config.scheme {
            StagingScheme::None => return None,
            StagingScheme::Caiti {
                eager_eviction,
                conditional_bypass,
            } => Box::new(Caiti::new(config.sets, eager_eviction, conditional_bypass)),
            StagingScheme::Pmbd => Box::new(Pmbd::new(None)),
            StagingScheme::Pmbd70 => Box::new(Pmbd::new(Some(0.7))),
            StagingScheme::Lru => Box::new(LruStaging::new(config.slots)),
            StagingScheme::CoActive => Box::new(CoActive::new(config.slots)),
        };
        if config.slots == 0 {
            return None;
        }
        let slots = config.slots as usize;
        Some(Staging {
            scheme_name: config.scheme,
            slots: vec![
                Slot {
                    lba: u64::MAX,
                    state: SlotState::Free,
                    dirty_from: 0,
                };
                slots
            ],
            // Popped from the end: slot 0 first.
            free: (0..config.slots).rev().collect(),
            dirty: Chain::default(),
            dirty_links: vec![Link::default(); slots],
            valid: Chain::default(),
            valid_links: vec![Link::default(); slots],
            write_seq: 0,
            revalidations: 0,
            bypassing: FxHashMap::default(),
            scheme,
            stats: StagingStats::default(),
        })
    }

    pub fn scheme(&self) -> StagingScheme {
        self.scheme_name
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Slots holding a block.
    pub fn occupied(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    pub fn stats(&self) -> StagingStats {
        self.stats
    }

    /// See [`Scheme::has_background`].
    pub fn has_background(&self) -> bool {
        self.scheme.has_background()
    }

    /// See [`Scheme::background_when_idle`].
    pub fn background_when_idle(&self) -> bool {
        self.scheme.background_when_idle()
    }

    /// See [`Scheme::metadata_bytes_per_slot`].
    pub fn metadata_bytes_per_slot(&self) -> u32 {
        self.scheme.metadata_bytes_per_slot()
    }

    /// The block a slot holds and its state.
    pub fn slot(&self, slot: u32) -> Slot {
        self.slots[slot as usize]
    }

    /// The scheme, and the table as it sees it.
    fn scheme_and_view(&mut self) -> (&mut dyn Scheme, View<'_>) {
        let view = View {
            slots: &self.slots,
            valid: &self.valid,
            valid_links: &self.valid_links,
            free: self.free.len(),
        };
        (&mut *self.scheme, view)
    }

    fn start_eviction(&mut self, slot: u32) -> Victim {
        let entry = &mut self.slots[slot as usize];
        debug_assert_eq!(entry.state, SlotState::Valid);
        entry.state = SlotState::Evicting;
        let lba = entry.lba;
        self.valid.unlink(&mut self.valid_links, slot);
        self.scheme.evicting(slot);
        Victim { slot, lba }
    }

    fn take(&mut self, slot: u32, lba: u64) {
        let entry = &mut self.slots[slot as usize];
        entry.lba = lba;
        entry.state = SlotState::Pending;
        self.scheme.taken(slot, lba);
    }

    /// Seed 001 Algorithm 1: a write of block `lba` (see [`WriteStep`]).
    pub fn write(&mut self, lba: u64) -> WriteStep {
        if self.bypassing.contains_key(&lba) {
            return WriteStep::Wait;
        }
        if let Some(slot) = self.scheme.find(&self.slots, lba) {
            let entry = &mut self.slots[slot as usize];
            return match entry.state {
                SlotState::Valid | SlotState::Clean => {
                    if entry.state == SlotState::Valid {
                        self.valid.unlink(&mut self.valid_links, slot);
                    }
                    entry.state = SlotState::Pending;
                    self.stats.write_hits += 1;
                    WriteStep::Cache {
                        slot,
                        outcome: WriteOutcome::Hit,
                    }
                }
                // Seed 001 §3.3: wait for the copy in, or for the write-back in flight, so a
                // block is never torn and an older copy never lands after a newer one.
                SlotState::Pending | SlotState::Evicting => WriteStep::Wait,
                SlotState::Free => unreachable!("schemes find only slots holding a block"),
            };
        }
        if let Some(slot) = self.free.pop() {
            self.take(slot, lba);
            self.stats.write_fills += 1;
            return WriteStep::Cache {
                slot,
                outcome: WriteOutcome::Fill,
            };
        }
        let (scheme, view) = self.scheme_and_view();
        match scheme.when_full(&view, lba) {
            WhenFull::Bypass => {
                *self.bypassing.entry(lba).or_default() += 1;
                self.stats.bypasses += 1;
                WriteStep::Bypass
            }
            WhenFull::Evict(slots) => {
                self.stats.stalled_writes += 1;
                self.stats.sync_evictions += slots.len() as u64;
                WriteStep::EvictFirst(
                    slots
                        .into_iter()
                        .map(|slot| self.start_eviction(slot))
                        .collect(),
                )
            }
            WhenFull::Reuse(slot) => {
                let old = self.slots[slot as usize];
                debug_assert_eq!(old.state, SlotState::Clean);
                self.scheme.released(slot, old.lba);
                self.take(slot, lba);
                self.stats.write_fills += 1;
                WriteStep::Cache {
                    slot,
                    outcome: WriteOutcome::Fill,
                }
            }
            WhenFull::Wait => WriteStep::Wait,
        }
    }

    /// The copy into `slot` (from [`WriteStep::Cache`]) is complete: the slot is Valid.
    pub fn write_done(&mut self, slot: u32) {
        let entry = &mut self.slots[slot as usize];
        debug_assert_eq!(entry.state, SlotState::Pending);
        entry.state = SlotState::Valid;
        let lba = entry.lba;
        self.write_seq += 1;
        if entry.dirty_from == 0 {
            entry.dirty_from = self.write_seq;
            self.dirty.push_back(&mut self.dirty_links, slot);
        } else {
            self.revalidations += 1;
        }
        self.valid.push_back(&mut self.valid_links, slot);
        self.scheme.written(slot, lba);
        self.scheme.noticed(lba);
    }

    /// A write of `lba` sent around the cache ([`WriteStep::Bypass`]) is on the device.
    pub fn bypass_done(&mut self, lba: u64) {
        if let Some(count) = self.bypassing.get_mut(&lba) {
            *count -= 1;
            if *count == 0 {
                self.bypassing.remove(&lba);
            }
        }
        self.scheme.noticed(lba);
    }

    /// `slot`, Evicting, is written back.
    pub fn evicted(&mut self, slot: u32) {
        let entry = &mut self.slots[slot as usize];
        debug_assert_eq!(entry.state, SlotState::Evicting);
        entry.dirty_from = 0;
        self.dirty.unlink(&mut self.dirty_links, slot);
        if self.scheme.keeps_clean() {
            entry.state = SlotState::Clean;
            self.scheme.cleaned(slot);
        } else {
            let lba = entry.lba;
            entry.state = SlotState::Free;
            entry.lba = u64::MAX;
            self.scheme.released(slot, lba);
            self.free.push(slot);
        }
    }

    /// Writing `slot` back failed: it is Valid again, to be written back later.
    pub fn eviction_failed(&mut self, slot: u32) {
        let entry = &mut self.slots[slot as usize];
        debug_assert_eq!(entry.state, SlotState::Evicting);
        entry.state = SlotState::Valid;
        let lba = entry.lba;
        self.revalidations += 1;
        self.valid.push_back(&mut self.valid_links, slot);
        self.scheme.written(slot, lba);
    }

    /// Seed 001 §3.4: a read of block `lba` (see [`ReadStep`]).
    pub fn read(&mut self, lba: u64) -> ReadStep {
        match self.scheme.find(&self.slots, lba) {
            Some(slot) => match self.slots[slot as usize].state {
                SlotState::Pending => ReadStep::Wait,
                _ => {
                    self.stats.read_hits += 1;
                    ReadStep::Slot(slot)
                }
            },
            None => {
                self.stats.read_misses += 1;
                ReadStep::Device
            }
        }
    }

    /// The next slot a background thread writes back (now Evicting), if the scheme has one;
    /// `device_idle` when no request is in the device.
    pub fn background(&mut self, device_idle: bool) -> Option<Victim> {
        let (scheme, view) = self.scheme_and_view();
        let slot = scheme.background(&view, device_idle)?;
        self.stats.background_evictions += 1;
        Some(self.start_eviction(slot))
    }

    /// Begins a FLUSH: it covers every write completed so far. Pass the ticket to
    /// [`flush_step`](Staging::flush_step) until it is done.
    pub fn flush_begin(&mut self) -> FlushTicket {
        self.stats.flushes += 1;
        FlushTicket {
            barrier: self.write_seq,
            revalidations_seen: None,
        }
    }

    /// Seed 001 §3.5: the next step of a FLUSH: every slot dirty since a write it covers is
    /// written back, by the flush or by whoever is writing it already.
    pub fn flush_step(&mut self, ticket: &mut FlushTicket) -> FlushStep {
        let barrier = ticket.barrier;
        let covered = |slots: &[Slot], slot: u32| slots[slot as usize].dirty_from <= barrier;
        // The dirty chain is in dirty order: done once its oldest came after the barrier.
        if !self
            .dirty
            .head()
            .is_some_and(|slot| covered(&self.slots, slot))
        {
            return FlushStep::Done;
        }
        if ticket.revalidations_seen == Some(self.revalidations) {
            // Every covered slot was Evicting or Pending when last looked at, and none of them
            // has turned Valid since.
            return FlushStep::Wait;
        }
        ticket.revalidations_seen = Some(self.revalidations);
        let covered: Vec<u32> = self
            .valid
            .iter(&self.valid_links)
            .filter(|&slot| covered(&self.slots, slot))
            .collect();
        let victims: Vec<Victim> = covered
            .into_iter()
            .map(|slot| self.start_eviction(slot))
            .collect();
        self.finish_flush_step(victims, true)
    }

    fn finish_flush_step(&mut self, victims: Vec<Victim>, others_busy: bool) -> FlushStep {
        if !victims.is_empty() {
            self.stats.flush_evictions += victims.len() as u64;
            FlushStep::Evict(victims)
        } else if others_busy {
            FlushStep::Wait
        } else {
            FlushStep::Done
        }
    }

    /// The next step of making block `lba` durable after a write of it completed (FUA).
    pub fn flush_block_step(&mut self, lba: u64) -> FlushStep {
        match self.scheme.find(&self.slots, lba) {
            Some(slot) => match self.slots[slot as usize].state {
                SlotState::Valid => {
                    let victim = self.start_eviction(slot);
                    self.finish_flush_step(vec![victim], false)
                }
                SlotState::Pending | SlotState::Evicting => FlushStep::Wait,
                SlotState::Clean | SlotState::Free => FlushStep::Done,
            },
            None => FlushStep::Done,
        }
    }

    /// A TRIM of block `lba`: its cached copy, if not being written, is dropped unwritten.
    pub fn discard(&mut self, lba: u64) -> DiscardStep {
        if self.bypassing.contains_key(&lba) {
            return DiscardStep::Wait;
        }
        let Some(slot) = self.scheme.find(&self.slots, lba) else {
            return DiscardStep::Device;
        };
        let entry = &mut self.slots[slot as usize];
        match entry.state {
            SlotState::Pending | SlotState::Evicting => DiscardStep::Wait,
            SlotState::Valid | SlotState::Clean => {
                if entry.state == SlotState::Valid {
                    self.valid.unlink(&mut self.valid_links, slot);
                }
                if entry.dirty_from != 0 {
                    entry.dirty_from = 0;
                    self.dirty.unlink(&mut self.dirty_links, slot);
                }
                entry.state = SlotState::Free;
                entry.lba = u64::MAX;
                self.scheme.released(slot, lba);
                self.free.push(slot);
                DiscardStep::Device
            }
            SlotState::Free => unreachable!("schemes find only slots holding a block"),
        }
    }

    /// Checks the table's invariants (tests): free slots are exactly those on the free set,
    /// dirty slots exactly those on the dirty chain, in order, and every held block is found
    /// at its slot.
    pub fn check(&self) -> Result<(), String> {
        let mut on_free = vec![false; self.slots.len()];
        for &slot in &self.free {
            if std::mem::replace(&mut on_free[slot as usize], true) {
                return Err(format!("slot {slot} twice on the free set"));
            }
        }
        let mut last_dirty = 0;
        for slot in self.dirty.iter(&self.dirty_links) {
            let entry = self.slots[slot as usize];
            if entry.dirty_from <= last_dirty {
                return Err(format!("dirty chain out of order at slot {slot}"));
            }
            last_dirty = entry.dirty_from;
        }
        for (slot, entry) in self.slots.iter().enumerate() {
            let slot = slot as u32;
            let free = entry.state == SlotState::Free;
            if free != on_free[slot as usize] {
                return Err(format!(
                    "slot {slot} is {:?}, on free set {}",
                    entry.state, !free
                ));
            }
            let dirty = matches!(entry.state, SlotState::Valid | SlotState::Evicting)
                || (entry.state == SlotState::Pending && entry.dirty_from != 0);
            if dirty != Chain::is_linked(&self.dirty_links, slot)
                || dirty != (entry.dirty_from != 0)
            {
                return Err(format!(
                    "slot {slot} ({:?}) dirty chain mismatch",
                    entry.state
                ));
            }
            if (entry.state == SlotState::Valid) != Chain::is_linked(&self.valid_links, slot) {
                return Err(format!(
                    "slot {slot} ({:?}) valid chain mismatch",
                    entry.state
                ));
            }
            if !free && self.scheme.find(&self.slots, entry.lba) != Some(slot) {
                return Err(format!("block {} not found at slot {slot}", entry.lba));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
