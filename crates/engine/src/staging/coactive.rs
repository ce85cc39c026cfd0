//! Co-Active (Sun et al., TPDS'21), ported from NVMe SSDs as seed 001 §4.1 describes it: dirty
//! and clean lists, a Bloom filter that tells hot blocks (written recently) from cold ones, and
//! write-back of cold dirty blocks whenever the device idles, the block staying cached, clean.
//! A write that misses a full cache takes the least recently written clean slot; with none, it
//! writes a dirty block back first (the "2-step write"), a cold one if it finds one, so hot ones
//! stay cached to take more writes.
//!
//! Our reading: a block is hot when it is written again while the filter still has its last
//! write. The filter is two halves, a block in it when either half has it; the younger half
//! takes every write and, once it has taken as many as there are slots, becomes the elder and
//! the elder is cleared, so "recently" means about one cache's worth of writes. The search for
//! a cold dirty block looks at the [`COLD_SEARCH`] least recently written. The device idles
//! when no request is in it: a block driver sees its own requests, not the memory's channels.
//! Under one client's continuous requests that is only between two of them (seed 001 §4.2:
//! "PMem is unlikely to be idle"), and with several clients hardly ever (its Fig 5e: Co-Active
//! does clearly worse with more than one job).

use rustc_hash::FxHashMap;

use super::chain::{Chain, Link};
use super::{Scheme, Slot, SlotState, View, WhenFull};

/// Bits per slot in each half of the filter.
const FILTER_BITS_PER_SLOT: usize = 8;

/// Dirty blocks looked at, least recently written first, for a cold one.
const COLD_SEARCH: usize = 32;

/// Two-halved Bloom filter of recently written blocks; see the module docs.
struct RecentWrites {
    halves: [Vec<u64>; 2],
    young: usize,
    young_inserts: usize,
    rotate_after: usize,
}

impl RecentWrites {
    fn new(slots: u32) -> RecentWrites {
        let words = (slots as usize * FILTER_BITS_PER_SLOT).div_ceil(64).max(1);
        RecentWrites {
            halves: [vec![0; words], vec![0; words]],
            young: 0,
            young_inserts: 0,
            rotate_after: slots.max(1) as usize,
        }
    }

    fn bits(&self, lba: u64) -> [usize; 2] {
        let bits = self.halves[0].len() * 64;
        let hash = lba.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        [
            (hash >> 32) as usize % bits,
            (hash as u32 as usize ^ (hash >> 17) as usize) % bits,
        ]
    }

    fn insert(&mut self, lba: u64) {
        if self.young_inserts == self.rotate_after {
            self.young ^= 1;
            self.halves[self.young].fill(0);
            self.young_inserts = 0;
        }
        for bit in self.bits(lba) {
            self.halves[self.young][bit / 64] |= 1 << (bit % 64);
        }
        self.young_inserts += 1;
    }

    fn contains(&self, lba: u64) -> bool {
        let bits = self.bits(lba);
        self.halves.iter().any(|half| {
            bits.iter()
                .all(|&bit| half[bit / 64] & (1 << (bit % 64)) != 0)
        })
    }
}

/// Co-Active's lists and filter; see the module docs.
pub struct CoActive {
    index: FxHashMap<u64, u32>,
    /// Dirty slots, least recently written first.
    dirty: Chain,
    /// Clean slots, least recently written first.
    clean: Chain,
    links: Vec<Link>,
    on_clean: Vec<bool>,
    /// Whether each slot's block was hot at its last write.
    hot: Vec<bool>,
    recent: RecentWrites,
}

impl CoActive {
    pub fn new(slots: u32) -> CoActive {
        CoActive {
            index: FxHashMap::default(),
            dirty: Chain::default(),
            clean: Chain::default(),
            links: vec![Link::default(); slots as usize],
            on_clean: vec![false; slots as usize],
            hot: vec![false; slots as usize],
            recent: RecentWrites::new(slots),
        }
    }

    fn unlink(&mut self, slot: u32) {
        if !Chain::is_linked(&self.links, slot) {
            return;
        }
        if std::mem::replace(&mut self.on_clean[slot as usize], false) {
            self.clean.unlink(&mut self.links, slot);
        } else {
            self.dirty.unlink(&mut self.links, slot);
        }
    }

    /// The least recently written dirty blocks that can be written back.
    fn oldest_dirty<'a>(&'a self, view: &'a View<'_>) -> impl Iterator<Item = u32> + 'a {
        self.dirty
            .iter(&self.links)
            .filter(|&slot| view.slots[slot as usize].state == SlotState::Valid)
            .take(COLD_SEARCH)
    }

    /// Among the least recently written dirty blocks, the first cold one.
    fn cold_dirty(&self, view: &View<'_>) -> Option<u32> {
        self.oldest_dirty(view)
            .find(|&slot| !self.hot[slot as usize])
    }
}

impl Scheme for CoActive {
    fn find(&self, _slots: &[Slot], lba: u64) -> Option<u32> {
        self.index.get(&lba).copied()
    }

    fn taken(&mut self, slot: u32, lba: u64) {
        self.index.insert(lba, slot);
    }

    fn released(&mut self, slot: u32, lba: u64) {
        self.index.remove(&lba);
        self.unlink(slot);
    }

    fn written(&mut self, slot: u32, lba: u64) {
        self.hot[slot as usize] = self.recent.contains(lba);
        self.unlink(slot);
        self.dirty.push_back(&mut self.links, slot);
    }

    fn evicting(&mut self, slot: u32) {
        // Only Valid blocks are candidates: one being written back leaves the dirty list
        // until it is clean.
        self.unlink(slot);
    }

    fn cleaned(&mut self, slot: u32) {
        self.unlink(slot);
        self.clean.push_back(&mut self.links, slot);
        self.on_clean[slot as usize] = true;
    }

    fn noticed(&mut self, lba: u64) {
        self.recent.insert(lba);
    }

    fn when_full(&mut self, view: &View<'_>, _lba: u64) -> WhenFull {
        if let Some(slot) = self
            .clean
            .iter(&self.links)
            .find(|&slot| view.slots[slot as usize].state == SlotState::Clean)
        {
            return WhenFull::Reuse(slot);
        }
        self.cold_dirty(view)
            .or_else(|| self.oldest_dirty(view).next())
            .map_or(WhenFull::Wait, |slot| WhenFull::Evict(vec![slot]))
    }

    fn background(&mut self, view: &View<'_>, device_idle: bool) -> Option<u32> {
        if device_idle {
            self.cold_dirty(view)
        } else {
            None
        }
    }

    fn background_when_idle(&self) -> bool {
        true
    }

    fn keeps_clean(&self) -> bool {
        true
    }

    fn has_background(&self) -> bool {
        true
    }

    fn metadata_bytes_per_slot(&self) -> u32 {
        // Seed 001 §4.1: 8 B lba, 4 B slot number, 40 B lock, 48 B of lists, 2 B of filter.
        102
    }
}
