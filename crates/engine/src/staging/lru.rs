//! LRU staging (seed 001 §2, §4.1): blocks stay in DRAM; a write that misses a full cache first
//! writes back the least recently written block, then takes its slot (the "2-step write").

use rustc_hash::FxHashMap;

use super::chain::{Chain, Link};
use super::{Scheme, Slot, SlotState, View, WhenFull};

/// An LRU write-staging cache.
pub struct LruStaging {
    index: FxHashMap<u64, u32>,
    /// Occupied slots, least recently written first.
    recency: Chain,
    links: Vec<Link>,
}

impl LruStaging {
    pub fn new(slots: u32) -> LruStaging {
        LruStaging {
            index: FxHashMap::default(),
            recency: Chain::default(),
            links: vec![Link::default(); slots as usize],
        }
    }
}

impl Scheme for LruStaging {
    fn find(&self, _slots: &[Slot], lba: u64) -> Option<u32> {
        self.index.get(&lba).copied()
    }

    fn taken(&mut self, slot: u32, lba: u64) {
        self.index.insert(lba, slot);
        self.recency.push_back(&mut self.links, slot);
    }

    fn released(&mut self, slot: u32, lba: u64) {
        self.index.remove(&lba);
        if Chain::is_linked(&self.links, slot) {
            self.recency.unlink(&mut self.links, slot);
        }
    }

    fn written(&mut self, slot: u32, _lba: u64) {
        if Chain::is_linked(&self.links, slot) {
            self.recency.unlink(&mut self.links, slot);
        }
        self.recency.push_back(&mut self.links, slot);
    }

    fn evicting(&mut self, slot: u32) {
        // Only Valid blocks are candidates: one being written back leaves the order.
        self.recency.unlink(&mut self.links, slot);
    }

    fn when_full(&mut self, view: &View<'_>, _lba: u64) -> WhenFull {
        self.recency
            .iter(&self.links)
            .find(|&slot| view.slots[slot as usize].state == SlotState::Valid)
            .map_or(WhenFull::Wait, |slot| WhenFull::Evict(vec![slot]))
    }

    fn background(&mut self, _view: &View<'_>, _device_idle: bool) -> Option<u32> {
        None
    }

    fn has_background(&self) -> bool {
        false
    }

    fn metadata_bytes_per_slot(&self) -> u32 {
        // Seed 001 §4.1: as PMBD's.
        84
    }
}
