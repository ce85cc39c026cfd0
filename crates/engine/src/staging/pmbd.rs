//! PMBD's staging buffer (Chen et al., MSST'14, as seed 001 §4.1 runs it): blocks stay in DRAM
//! until the buffer is full, and then the write that finds it full writes the whole buffer back
//! before it goes on. PMBD-70 adds a syncer thread that starts draining the buffer, oldest block
//! first, once it is 70% full, and drains it to empty; it is one thread, so a foreground that
//! writes faster than it still fills the buffer and stalls as PMBD does (seed 001 Fig 6a).

use rustc_hash::FxHashMap;

use super::{Scheme, Slot, View, WhenFull};

/// PMBD, with PMBD-70's syncer when a watermark is given.
pub struct Pmbd {
    index: FxHashMap<u64, u32>,
    /// The occupied fraction at which the syncer starts.
    watermark: Option<f64>,
    draining: bool,
}

impl Pmbd {
    /// PMBD; with `watermark`, PMBD-70's syncer at that fraction.
    pub fn new(watermark: Option<f64>) -> Pmbd {
        Pmbd {
            index: FxHashMap::default(),
            watermark,
            draining: false,
        }
    }
}

impl Scheme for Pmbd {
    fn find(&self, _slots: &[Slot], lba: u64) -> Option<u32> {
        self.index.get(&lba).copied()
    }

    fn taken(&mut self, slot: u32, lba: u64) {
        self.index.insert(lba, slot);
    }

    fn released(&mut self, _slot: u32, lba: u64) {
        self.index.remove(&lba);
    }

    fn written(&mut self, _slot: u32, _lba: u64) {}

    fn when_full(&mut self, view: &View<'_>, _lba: u64) -> WhenFull {
        let all: Vec<u32> = view.valid_oldest_first().collect();
        if all.is_empty() {
            // Another write is draining it.
            WhenFull::Wait
        } else {
            WhenFull::Evict(all)
        }
    }

    fn background(&mut self, view: &View<'_>, _device_idle: bool) -> Option<u32> {
        let watermark = self.watermark?;
        if !self.draining {
            self.draining = view.occupied() as f64 >= watermark * view.slots.len() as f64;
        }
        if !self.draining {
            return None;
        }
        let slot = view.valid_oldest_first().next();
        self.draining = slot.is_some();
        slot
    }

    fn has_background(&self) -> bool {
        self.watermark.is_some()
    }

    fn metadata_bytes_per_slot(&self) -> u32 {
        // Seed 001 §4.1: 8 B lba, 4 B slot number, 40 B lock, 32 B of lists.
        84
    }
}
