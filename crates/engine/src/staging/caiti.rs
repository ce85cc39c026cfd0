//! Caiti's transit cache (seed 001 §3.2–§3.3, Algorithm 1): a block's set is its number modulo
//! the set count, each set a write-back queue (WBQ) scanned to find a block — no mapping table;
//! every completed write queues its slot for a background evictor at once (eager eviction); a
//! miss that finds no free slot goes straight to the device (conditional bypass).
//!
//! Differences from the paper, each for the shared table's sake: a slot stays on its WBQ while
//! it is rewritten (the paper dequeues it and enqueues it again; here it moves to the back when
//! the rewrite completes, the same order), so a second writer of the block finds it and waits.
//! The eviction work items are one queue for all evictors, a slot queued at most once (as a
//! kernel `work_struct` is).

use std::collections::VecDeque;

use super::{Scheme, Slot, SlotState, View, WhenFull};

/// Caiti's sets and eviction work; see the module docs.
pub struct Caiti {
    /// Each set's write-back queue, oldest first: every slot holding one of its blocks.
    sets: Vec<VecDeque<u32>>,
    /// Slots waiting for an evictor, in the order their writes completed.
    work: VecDeque<u32>,
    queued: Vec<bool>,
    eager_eviction: bool,
    conditional_bypass: bool,
}

impl Caiti {
    /// `sets` write-back queues; either policy may be switched off (Fig 6a's ablations).
    pub fn new(sets: u32, eager_eviction: bool, conditional_bypass: bool) -> Caiti {
        Caiti {
            sets: vec![VecDeque::new(); sets.max(1) as usize],
            work: VecDeque::new(),
            queued: Vec::new(),
            eager_eviction,
            conditional_bypass,
        }
    }

    fn set_of(&self, lba: u64) -> usize {
        (lba % self.sets.len() as u64) as usize
    }
}

impl Scheme for Caiti {
    fn find(&self, slots: &[Slot], lba: u64) -> Option<u32> {
        self.sets[self.set_of(lba)]
            .iter()
            .copied()
            .find(|&slot| slots[slot as usize].lba == lba)
    }

    fn taken(&mut self, slot: u32, lba: u64) {
        let set = self.set_of(lba);
        self.sets[set].push_back(slot);
    }

    fn released(&mut self, slot: u32, lba: u64) {
        let set = self.set_of(lba);
        let queue = &mut self.sets[set];
        if let Some(at) = queue.iter().position(|&held| held == slot) {
            queue.remove(at);
        }
    }

    fn written(&mut self, slot: u32, lba: u64) {
        let set = self.set_of(lba);
        let queue = &mut self.sets[set];
        if let Some(at) = queue.iter().position(|&held| held == slot) {
            queue.remove(at);
        }
        queue.push_back(slot);
        if self.eager_eviction {
            if self.queued.len() <= slot as usize {
                self.queued.resize(slot as usize + 1, false);
            }
            if !std::mem::replace(&mut self.queued[slot as usize], true) {
                self.work.push_back(slot);
            }
        }
    }

    fn when_full(&mut self, view: &View<'_>, lba: u64) -> WhenFull {
        if self.conditional_bypass {
            return WhenFull::Bypass;
        }
        if self.eager_eviction {
            // The evictors free slots soon: the write waits for one.
            return WhenFull::Wait;
        }
        // Neither policy: write back the oldest block of the set, else the oldest anywhere.
        let set = &self.sets[self.set_of(lba)];
        set.iter()
            .copied()
            .find(|&slot| view.slots[slot as usize].state == SlotState::Valid)
            .or_else(|| view.valid_oldest_first().next())
            .map_or(WhenFull::Wait, |slot| WhenFull::Evict(vec![slot]))
    }

    fn background(&mut self, view: &View<'_>, _device_idle: bool) -> Option<u32> {
        while let Some(slot) = self.work.pop_front() {
            self.queued[slot as usize] = false;
            // A slot rewritten since it was queued is queued again when the rewrite completes;
            // one freed or written back by a flush has nothing left to do.
            if view.slots[slot as usize].state == SlotState::Valid {
                return Some(slot);
            }
        }
        None
    }

    fn has_background(&self) -> bool {
        self.eager_eviction
    }

    fn metadata_bytes_per_slot(&self) -> u32 {
        // Seed 001 §4.1: 8 B lba, 4 B slot number, 1 B state, 40 B lock, 33 B work_struct,
        // 16 B of WBQ and free-list pointers.
        102
    }
}
