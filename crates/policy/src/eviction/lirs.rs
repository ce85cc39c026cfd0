//! LIRS, low inter-reference recency set (Jiang & Zhang, "LIRS: An Efficient Low
//! Inter-reference Recency Set Replacement Policy", SIGMETRICS'02, §3–4), over byte sizes, with
//! the same decisions as libCacheSim's `LIRS.c` (the version bundled in the `libcachesim` 0.3.5
//! Python package).
//!
//! Three LRU stacks, as libCacheSim builds them: S (the LIRS stack: LIR blocks, and HIR blocks
//! resident or not), Q (resident HIR blocks) and NH (non-resident HIR blocks still in S, oldest
//! first out). A block can be in S and Q, or in S and NH, at once; each stack keeps its own copy
//! of the block's size. HIR blocks get `max(1, ⌊0.01 × capacity⌋)` bytes (`hirs_limit`) and LIR
//! blocks the rest (`lirs_limit`).
//!
//! Where libCacheSim departs from the paper, and so do we:
//! - While the LIR set has room, every new block becomes LIR; after that new blocks are HIR
//!   (in S and Q). A new block larger than either limit is not admitted.
//! - A hit on a resident HIR block in S makes it LIR and drops it from Q, but demotes LIR
//!   blocks (the bottom of S, to Q) only while the LIR set is over its byte limit — not one per
//!   promotion as in the paper. Demotion then prunes S.
//! - A hit on a resident HIR block that is only in Q demotes LIR blocks until the LIR set would
//!   also fit that block, then pushes the block on S as HIR (it stays HIR).
//! - A miss on a non-resident HIR block in S demotes LIR blocks until it fits the LIR set and
//!   makes it LIR (the paper would keep it HIR if it did not qualify).
//! - A demoted LIR block larger than `hirs_limit` leaves the cache instead of entering Q.
//! - Stack pruning runs after an LIR hit and after each demotion, never past the top of S.
//! - S is bounded: after every request, while S's blocks sum to more than twice the capacity,
//!   the oldest non-resident block (per NH) is dropped from S.
//!
//! libCacheSim's own bookkeeping quirks are reproduced, because they change which requests hit:
//! - A demotion takes S's bottom block whatever its status (S's bottom is not LIR when pruning
//!   stopped at the top of S).
//! - A hit on a block that is only in Q can evict that very block while demoting LIR blocks to
//!   make room for it ("phantom": it is reported evicted, yet pushed on S as a resident HIR
//!   block that the cache's bytes do not count; its next access hits and makes it LIR, counted
//!   again). While demoting, libCacheSim re-reads the block's size through a pointer to the
//!   freed object, which by then holds the next object it allocated; see
//!   `make_lir_room_for`. Engines serving real data must treat a hit on a key they no longer
//!   hold as a miss.
//!
//! A hit can evict blocks (a promotion demotes an LIR block into Q, which may push HIR blocks
//! out). [`EvictionPolicy::lookup`] has no output for evictions, so they are reported by the
//! next [`EvictionPolicy::admit`].
//!
//! [`EvictionPolicy::remove`] (a call libCacheSim's simulator never makes) differs from
//! libCacheSim's: it also drops the key's NH entry and uncounts only bytes that were counted.

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::util::key_table::{KeyTable, TableValue};
use crate::util::prefetch::prefetch_read;
use crate::util::{List, Slab, NIL};

/// Which stack a node is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stack {
    S,
    Q,
    Nh,
}

/// A node's stack and the block's status as that stack records it.
#[derive(Clone, Copy, Debug)]
struct Entry {
    stack: Stack,
    is_lir: bool,
    resident: bool,
}

/// The nodes one key has in each stack, or [`NIL`].
#[derive(Clone, Copy, Debug)]
struct Slots {
    s: u32,
    q: u32,
    nh: u32,
}

const NO_SLOTS: Slots = Slots {
    s: NIL,
    q: NIL,
    nh: NIL,
};

impl TableValue for Slots {
    const EMPTY: Slots = NO_SLOTS;

    #[inline]
    fn is_empty(&self) -> bool {
        self.s == NIL && self.q == NIL && self.nh == NIL
    }
}

/// libCacheSim's share of the capacity for resident HIR blocks.
pub const HIR_SIZE_RATIO: f64 = 0.01;

/// LIRS over a byte capacity.
pub struct Lirs {
    capacity: u64,
    lir_limit: u64,
    hir_limit: u64,
    map: KeyTable<Slots>,
    slab: Slab<Entry>,
    /// The LIRS stack; front is the top (most recent).
    stack_s: List,
    /// Resident HIR blocks; front is most recent.
    stack_q: List,
    /// Non-resident HIR blocks in S; front is the most recently evicted.
    stack_nh: List,
    /// Bytes of LIR blocks (libCacheSim's `lirs_count`; wraps like its unsigned counter).
    lir_bytes: u64,
    /// Bytes of resident HIR blocks (`hirs_count`).
    hir_bytes: u64,
    /// libCacheSim's `occupied_byte`: what the eviction loop compares with the capacity.
    occupied_bytes: i64,
    objects: i64,
    /// A request missed and `limit_stack` has not run after it yet.
    limit_pending: bool,
    /// Blocks evicted during hits, not yet reported.
    evicted_on_hits: Vec<Evicted>,
}

impl Lirs {
    /// An empty LIRS cache of `capacity` bytes with libCacheSim's 1 % HIR share.
    pub fn new(capacity: u64) -> Lirs {
        let hir_limit = ((HIR_SIZE_RATIO * capacity as f64) as u64).max(1);
        Lirs {
            capacity,
            lir_limit: capacity.wrapping_sub(hir_limit),
            hir_limit,
            map: KeyTable::default(),
            slab: Slab::with_capacity(0),
            stack_s: List::default(),
            stack_q: List::default(),
            stack_nh: List::default(),
            lir_bytes: 0,
            hir_bytes: 0,
            occupied_bytes: 0,
            objects: 0,
            limit_pending: false,
            evicted_on_hits: Vec::new(),
        }
    }

    fn slots(&self, key: u64) -> Slots {
        self.map.get(key).unwrap_or(NO_SLOTS)
    }

    fn list_and_slab(&mut self, stack: Stack) -> (&mut List, &mut Slab<Entry>) {
        let list = match stack {
            Stack::S => &mut self.stack_s,
            Stack::Q => &mut self.stack_q,
            Stack::Nh => &mut self.stack_nh,
        };
        (list, &mut self.slab)
    }

    /// Records `index` as `key`'s node in `stack` (or clears it with [`NIL`]), dropping the
    /// map entry once the key has no node left.
    fn set_slot(&mut self, key: u64, stack: Stack, index: u32) {
        let assign = |slots: &mut Slots| match stack {
            Stack::S => slots.s = index,
            Stack::Q => slots.q = index,
            Stack::Nh => slots.nh = index,
        };
        match self.map.get_mut(key) {
            Some(slots) => {
                let mut updated = *slots;
                assign(&mut updated);
                if updated.is_empty() {
                    self.map.remove(key);
                } else {
                    *slots = updated;
                }
            }
            None if index != NIL => {
                let mut slots = NO_SLOTS;
                assign(&mut slots);
                self.map.insert(key, slots);
            }
            None => {}
        }
    }

    /// Pushes a new node for `key` on top of `stack`. Like libCacheSim's hash tables, a key
    /// pushed again shadows its older node, which stays in the stack until it reaches the
    /// bottom.
    fn push(&mut self, stack: Stack, key: u64, size: u32, is_lir: bool, resident: bool) {
        let entry = Entry {
            stack,
            is_lir,
            resident,
        };
        let index = self.slab.alloc(key, size, entry);
        let (list, slab) = self.list_and_slab(stack);
        list.push_front(slab, index);
        self.set_slot(key, stack, index);
    }

    /// Unlinks and frees node `index`, clearing its key's slot if the slot points at it.
    fn discard(&mut self, index: u32) {
        let node = self.slab.get(index);
        let (key, stack) = (node.key, node.data.stack);
        let (list, slab) = self.list_and_slab(stack);
        list.unlink(slab, index);
        let slots = self.slots(key);
        let current = match stack {
            Stack::S => slots.s,
            Stack::Q => slots.q,
            Stack::Nh => slots.nh,
        };
        if current == index {
            self.set_slot(key, stack, NIL);
        }
        self.slab.release(index);
    }

    /// Removes `key`'s node from `stack`; returns its size if there was one.
    fn remove_from(&mut self, stack: Stack, key: u64) -> Option<u32> {
        let slots = self.slots(key);
        let index = match stack {
            Stack::S => slots.s,
            Stack::Q => slots.q,
            Stack::Nh => slots.nh,
        };
        if index == NIL {
            return None;
        }
        let size = self.slab.get(index).size;
        self.discard(index);
        Some(size)
    }

    fn move_to_top(&mut self, index: u32) {
        let stack = self.slab.get(index).data.stack;
        let (list, slab) = self.list_and_slab(stack);
        list.move_to_front(slab, index);
    }

    /// Counts a block that became resident.
    fn count_in(&mut self, size: u32) {
        self.occupied_bytes += i64::from(size);
        self.objects += 1;
    }

    /// Counts a block that stopped being resident.
    fn count_out(&mut self, size: u32) {
        self.occupied_bytes -= i64::from(size);
        self.objects -= 1;
    }

    /// Stack pruning: drops HIR blocks from the bottom of S until an LIR block is there, but
    /// never the top block.
    fn prune(&mut self) {
        loop {
            let bottom = self.stack_s.tail;
            if bottom == NIL || bottom == self.stack_s.head {
                return;
            }
            let node = self.slab.get(bottom);
            if node.data.is_lir {
                return;
            }
            let (key, resident) = (node.key, node.data.resident);
            if !resident {
                self.remove_from(Stack::Nh, key);
            }
            self.discard(bottom);
        }
    }

    /// Evicts the resident HIR block at the bottom of Q; its S node, if any, turns
    /// non-resident and is remembered in NH.
    fn evict_hir(&mut self, evicted: &mut Vec<Evicted>) -> bool {
        let bottom = self.stack_q.tail;
        if bottom == NIL {
            return false;
        }
        let node = self.slab.get(bottom);
        let (key, size) = (node.key, node.size);
        self.hir_bytes = self.hir_bytes.wrapping_sub(u64::from(size));
        self.discard(bottom);
        let in_s = self.slots(key).s;
        if in_s != NIL {
            self.slab.get_mut(in_s).data.resident = false;
            self.push(Stack::Nh, key, size, false, false);
        }
        self.count_out(size);
        evicted.push(Evicted { key, size });
        true
    }

    /// Demotes the block at the bottom of S to a resident HIR block in Q (or evicts it when
    /// it is larger than `hirs_limit`), then prunes S.
    fn evict_lir(&mut self, evicted: &mut Vec<Evicted>) {
        let bottom = self.stack_s.tail;
        if bottom == NIL {
            return;
        }
        let node = self.slab.get(bottom);
        let (key, size) = (node.key, node.size);
        self.lir_bytes = self.lir_bytes.wrapping_sub(u64::from(size));
        self.discard(bottom);
        self.count_out(size);
        let size_bytes = u64::from(size);
        if size_bytes <= self.hir_limit {
            while self.hir_bytes.wrapping_add(size_bytes) > self.hir_limit {
                if !self.evict_hir(evicted) {
                    break;
                }
            }
            self.push(Stack::Q, key, size, false, true);
            self.hir_bytes = self.hir_bytes.wrapping_add(size_bytes);
            self.count_in(size);
        } else {
            evicted.push(Evicted { key, size });
        }
        self.prune();
    }

    /// Demotes LIR blocks while the LIR set cannot take the block of node `index` too.
    ///
    /// The size is re-read from the slab on every round, because libCacheSim re-reads it
    /// through its object pointer: when the demotions evict that very block (a Q-only block
    /// whose Q entry is pushed out to make room for a demoted LIR block), libCacheSim reads
    /// freed memory, which its allocator has by then handed to the next object it created.
    /// The slab reuses freed slots last-in first-out, as glibc's per-size cache does, and
    /// this code frees and allocates nodes in libCacheSim's order, so the stale slot holds the
    /// same object's size that libCacheSim reads (which its results depend on).
    fn make_lir_room_for(&mut self, index: u32, evicted: &mut Vec<Evicted>) {
        while self
            .lir_bytes
            .wrapping_add(u64::from(self.slab.get(index).size))
            > self.lir_limit
        {
            if self.stack_s.is_empty() {
                return;
            }
            self.evict_lir(evicted);
        }
    }

    /// A hit on a resident HIR block in S: it leaves Q and becomes LIR.
    fn hit_resident_hir_in_s(&mut self, in_s: u32, in_q: u32, evicted: &mut Vec<Evicted>) {
        if in_q != NIL {
            let node = self.slab.get(in_q);
            let (key, size) = (node.key, node.size);
            self.hir_bytes = self.hir_bytes.wrapping_sub(u64::from(size));
            self.remove_from(Stack::Q, key);
            self.count_out(size);
        }
        self.make_lir_room_for(in_s, evicted);
        // `in_s` is at the top of S, which demotion never takes while S holds another block.
        self.slab.get_mut(in_s).data.is_lir = true;
        let size = self.slab.get(in_s).size;
        self.lir_bytes = self.lir_bytes.wrapping_add(u64::from(size));
        self.count_in(size);
    }

    /// A hit on a resident HIR block that is in Q only: it is pushed on S, still HIR.
    fn hit_resident_hir_in_q(&mut self, in_q: u32, evicted: &mut Vec<Evicted>) {
        let (key, size) = (self.slab.get(in_q).key, self.slab.get(in_q).size);
        self.make_lir_room_for(in_q, evicted);
        self.push(Stack::S, key, size, false, true);
    }

    /// Bounds S to twice the capacity by forgetting the oldest non-resident blocks.
    fn limit_stack(&mut self) {
        while self.stack_s.bytes > self.capacity.saturating_mul(2) {
            let oldest = self.stack_nh.tail;
            if oldest == NIL {
                return;
            }
            let key = self.slab.get(oldest).key;
            self.remove_from(Stack::S, key);
            self.discard(oldest);
        }
    }

    /// libCacheSim's `LIRS_can_insert`: refuses blocks that cannot be placed and makes room in
    /// the LIR or HIR set for the ones that can.
    fn make_room(&mut self, request: &Request, evicted: &mut Vec<Evicted>) -> bool {
        let size = u64::from(request.size);
        if size > self.capacity {
            return false;
        }
        let slots = self.slots(request.key);
        if slots.s != NIL {
            let entry = self.slab.get(slots.s).data;
            if entry.is_lir || entry.resident {
                return false;
            }
            self.make_lir_room_for(slots.s, evicted);
            self.remove_from(Stack::Nh, request.key);
            return true;
        }
        if slots.q != NIL {
            return false;
        }
        if size > self.lir_limit || size > self.hir_limit {
            return false;
        }
        if self.lir_bytes.wrapping_add(size) > self.lir_limit
            && self.hir_bytes.wrapping_add(size) > self.hir_limit
        {
            while self.hir_bytes.wrapping_add(size) > self.hir_limit {
                if !self.evict_hir(evicted) {
                    break;
                }
            }
        }
        true
    }

    /// One round of libCacheSim's `LIRS_evict`; returns whether it changed anything.
    fn evict_round(&mut self, request: &Request, evicted: &mut Vec<Evicted>) -> bool {
        let size = u64::from(request.size);
        let slots = self.slots(request.key);
        let before = (self.occupied_bytes, self.stack_s.len, self.stack_q.len);
        if slots.s != NIL {
            let entry = self.slab.get(slots.s).data;
            if !entry.is_lir && !entry.resident {
                while self.hir_bytes >= self.hir_limit {
                    if !self.evict_hir(evicted) {
                        break;
                    }
                }
                self.evict_lir(evicted);
            }
        } else if slots.q == NIL
            && self.lir_bytes.wrapping_add(size) > self.lir_limit
            && self.hir_bytes.wrapping_add(size) > self.hir_limit
        {
            self.evict_hir(evicted);
        }
        before != (self.occupied_bytes, self.stack_s.len, self.stack_q.len)
    }

    /// libCacheSim's `LIRS_insert`.
    fn insert(&mut self, request: &Request) {
        let (key, size) = (request.key, request.size);
        let slots = self.slots(key);
        if slots.s != NIL {
            let entry = self.slab.get(slots.s).data;
            if !entry.is_lir && !entry.resident {
                let s_size = self.slab.get(slots.s).size;
                let data = &mut self.slab.get_mut(slots.s).data;
                data.is_lir = true;
                data.resident = true;
                self.lir_bytes = self.lir_bytes.wrapping_add(u64::from(s_size));
                self.count_in(s_size);
            }
            return;
        }
        if slots.q != NIL {
            return;
        }
        if self.lir_bytes.wrapping_add(u64::from(size)) <= self.lir_limit {
            self.push(Stack::S, key, size, true, true);
            self.lir_bytes = self.lir_bytes.wrapping_add(u64::from(size));
        } else {
            self.push(Stack::S, key, size, false, true);
            self.push(Stack::Q, key, size, false, true);
            self.hir_bytes = self.hir_bytes.wrapping_add(u64::from(size));
        }
        self.count_in(size);
    }
}

impl EvictionPolicy for Lirs {
    fn space(&self) -> Space {
        Space {
            capacity_bytes: self.capacity,
            used_bytes: self.occupied_bytes.max(0) as u64,
            objects: self.objects.max(0) as usize,
        }
    }

    fn lookup(&mut self, request: &Request) -> bool {
        if self.limit_pending {
            self.limit_pending = false;
            self.limit_stack();
        }
        let slots = self.slots(request.key);
        if slots.s != NIL {
            self.move_to_top(slots.s);
        }
        if slots.q != NIL {
            self.move_to_top(slots.q);
        }
        // A hit can evict (demoting an LIR block may push HIR blocks out of Q); `lookup` has
        // no output for that, so those evictions are reported by the next `admit`.
        let mut evicted = std::mem::take(&mut self.evicted_on_hits);
        let hit = if slots.s != NIL {
            let entry = self.slab.get(slots.s).data;
            if entry.is_lir {
                self.prune();
                true
            } else if entry.resident {
                self.hit_resident_hir_in_s(slots.s, slots.q, &mut evicted);
                true
            } else {
                false
            }
        } else if slots.q != NIL {
            self.hit_resident_hir_in_q(slots.q, &mut evicted);
            true
        } else {
            false
        };
        self.evicted_on_hits = evicted;
        if hit {
            self.limit_stack();
        } else {
            self.limit_pending = true;
        }
        hit
    }

    /// Also reports the blocks that hits since the last `admit` evicted.
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        evicted.append(&mut self.evicted_on_hits);
        if self.make_room(request, evicted) {
            let capacity = i64::try_from(self.capacity).unwrap_or(i64::MAX);
            while self.occupied_bytes + i64::from(request.size) > capacity {
                if !self.evict_round(request, evicted) {
                    break;
                }
            }
            self.insert(request);
        }
        self.limit_pending = false;
        self.limit_stack();
    }

    /// A hit may evict, reported only by the next `admit`: no residency to offer.
    fn contains(&self, _key: u64) -> Option<bool> {
        None
    }

    /// Drops `key` from S, Q and NH, pruning S after an LIR block as libCacheSim's
    /// `LIRS_remove` does. Unlike libCacheSim it also forgets the key's NH entry (which would
    /// later drop an unrelated S entry) and only uncounts bytes that were counted (a block in
    /// S whose Q entry is gone was not). Returns whether the block was counted as resident.
    fn remove(&mut self, key: u64) -> bool {
        let mut was_resident = false;
        let in_s = self.slots(key).s;
        if in_s != NIL {
            let is_lir = self.slab.get(in_s).data.is_lir;
            if let Some(size) = self.remove_from(Stack::S, key) {
                if is_lir {
                    self.lir_bytes = self.lir_bytes.wrapping_sub(u64::from(size));
                    self.count_out(size);
                    was_resident = true;
                    self.prune();
                }
            }
        }
        if let Some(size) = self.remove_from(Stack::Q, key) {
            self.hir_bytes = self.hir_bytes.wrapping_sub(u64::from(size));
            self.count_out(size);
            was_resident = true;
        }
        self.remove_from(Stack::Nh, key);
        was_resident
    }

    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.map.prefetch(key);
    }

    #[inline]
    fn prefetch_node(&self, key: u64) {
        if let Some(slots) = self.map.get(key) {
            for index in [slots.s, slots.q] {
                if index != NIL {
                    prefetch_read(self.slab.get(index));
                }
            }
        }
    }

    /// Demotion and pruning work from the bottom of S, HIR eviction from the bottom of Q, and
    /// bounding S from the bottom of NH: load those blocks' neighbours and table slots.
    #[inline]
    fn prefetch_victims(&self) {
        for list in [&self.stack_s, &self.stack_q, &self.stack_nh] {
            if list.tail != NIL {
                let before = self.slab.prev(list.tail);
                if before != NIL {
                    prefetch_read(self.slab.get(before));
                }
                self.map.prefetch(self.slab.get(list.tail).key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// Keys of `list` from the top (front), each with its status: 'L' LIR, 'H' resident HIR,
    /// 'N' non-resident HIR (S and NH nodes carry their own flags; Q nodes are resident HIR).
    fn stack(lirs: &Lirs, list: &List) -> Vec<(u64, char)> {
        let mut out = Vec::new();
        let mut index = list.head;
        while index != NIL {
            let node = lirs.slab.get(index);
            let status = match (node.data.is_lir, node.data.resident) {
                (true, _) => 'L',
                (false, true) => 'H',
                (false, false) => 'N',
            };
            out.push((node.key, status));
            index = lirs.slab.next(index);
        }
        out
    }

    fn get(lirs: &mut Lirs, key: u64, evicted: &mut Vec<Evicted>) -> bool {
        lirs.get(&Request::new(key, 1), evicted)
    }

    #[test]
    fn limits_follow_libcachesim() {
        let lirs = Lirs::new(1000);
        assert_eq!((lirs.hir_limit, lirs.lir_limit), (10, 990));
        let tiny = Lirs::new(10);
        assert_eq!(
            (tiny.hir_limit, tiny.lir_limit),
            (1, 9),
            "HIR share is at least 1"
        );
    }

    #[test]
    fn lir_set_fills_first_then_misses_become_hir_and_leave_ghosts() {
        // Capacity 10: the LIR set takes 9 unit blocks, Q one.
        let mut lirs = Lirs::new(10);
        let mut evicted = Vec::new();
        for key in 1..=10 {
            assert!(!get(&mut lirs, key, &mut evicted));
        }
        assert!(evicted.is_empty());
        assert_eq!(stack(&lirs, &lirs.stack_s)[..2], [(10, 'H'), (9, 'L')]);
        assert_eq!(stack(&lirs, &lirs.stack_q), vec![(10, 'H')]);
        // Both sets full: Q's bottom (10) goes, staying in S as non-resident; 11 is HIR.
        assert!(!get(&mut lirs, 11, &mut evicted));
        assert_eq!(evicted, vec![Evicted { key: 10, size: 1 }]);
        assert_eq!(
            stack(&lirs, &lirs.stack_s)[..3],
            [(11, 'H'), (10, 'N'), (9, 'L')]
        );
        assert_eq!(stack(&lirs, &lirs.stack_nh), vec![(10, 'N')]);
        // A miss on the non-resident 10 (small inter-reference recency): the bottom LIR block
        // (1) is demoted into Q, which pushes 11 out, and 10 becomes LIR.
        evicted.clear();
        assert!(!get(&mut lirs, 10, &mut evicted));
        assert_eq!(evicted, vec![Evicted { key: 11, size: 1 }]);
        assert_eq!(
            stack(&lirs, &lirs.stack_s)[..3],
            [(10, 'L'), (11, 'N'), (9, 'L')]
        );
        assert_eq!(stack(&lirs, &lirs.stack_s).last(), Some(&(2, 'L')));
        assert_eq!(stack(&lirs, &lirs.stack_q), vec![(1, 'H')]);
        assert_eq!(stack(&lirs, &lirs.stack_nh), vec![(11, 'N')]);
        assert_eq!((lirs.len(), lirs.used_bytes()), (10, 10));
    }

    #[test]
    fn hit_on_a_q_only_block_can_evict_it_and_it_still_hits_next_time() {
        let mut lirs = Lirs::new(10);
        let mut evicted = Vec::new();
        for key in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 10] {
            get(&mut lirs, key, &mut evicted);
        }
        // As above: Q = [1], 1 is not in S.
        evicted.clear();
        assert!(get(&mut lirs, 1, &mut evicted), "1 is resident in Q");
        // Room for 1 in the LIR set demotes 2, whose entry into the one-block Q pushes out 1
        // itself; 1 still goes on S as resident HIR but is no longer counted.
        assert_eq!(stack(&lirs, &lirs.stack_q), vec![(2, 'H')]);
        assert_eq!(stack(&lirs, &lirs.stack_s)[0], (1, 'H'));
        assert_eq!((lirs.len(), lirs.used_bytes()), (9, 9));
        assert!(get(&mut lirs, 1, &mut evicted), "libCacheSim still hits it");
        assert_eq!(stack(&lirs, &lirs.stack_s)[0], (1, 'L'));
        assert_eq!((lirs.len(), lirs.used_bytes()), (10, 10));
        // The eviction during the first hit is reported by the next admission.
        assert!(evicted.is_empty());
        get(&mut lirs, 50, &mut evicted);
        assert_eq!(evicted[0], Evicted { key: 1, size: 1 });
    }

    #[test]
    fn lir_hit_prunes_hir_blocks_from_the_bottom_of_s() {
        let mut lirs = Lirs::new(10);
        let mut evicted = Vec::new();
        for key in 1..=10 {
            get(&mut lirs, key, &mut evicted);
        }
        for key in 2..=9 {
            assert!(get(&mut lirs, key, &mut evicted));
        }
        // S from the top: 9..2, then 10 (HIR), then 1 (LIR) at the bottom.
        assert_eq!(stack(&lirs, &lirs.stack_s)[8..], [(10, 'H'), (1, 'L')]);
        assert!(get(&mut lirs, 1, &mut evicted));
        // 1 moved to the top; 10 became the bottom and was pruned from S (it stays in Q).
        let s = stack(&lirs, &lirs.stack_s);
        assert_eq!(s.len(), 9);
        assert_eq!((s[0], s[8]), ((1, 'L'), (2, 'L')));
        assert_eq!(stack(&lirs, &lirs.stack_q), vec![(10, 'H')]);
    }

    #[test]
    fn stack_s_is_bounded_by_twice_the_capacity() {
        let mut lirs = Lirs::new(10);
        let mut evicted = Vec::new();
        for key in 1..=100 {
            get(&mut lirs, key, &mut evicted);
        }
        // 9 LIR + 1 resident HIR + non-resident HIR blocks up to 20 bytes in all.
        assert_eq!(lirs.stack_s.bytes, 20);
        assert_eq!(lirs.stack_nh.len, 10);
        assert_eq!(stack(&lirs, &lirs.stack_nh)[0], (99, 'N'));
    }

    #[test]
    fn blocks_larger_than_the_hir_share_are_not_admitted_and_remove_works() {
        let mut lirs = Lirs::new(1000);
        let mut evicted = Vec::new();
        assert!(!lirs.get(&Request::new(1, 11), &mut evicted));
        assert!(lirs.is_empty(), "11 bytes > hirs_limit of 10");
        lirs.get(&Request::new(2, 10), &mut evicted);
        lirs.get(&Request::new(3, 10), &mut evicted);
        assert_eq!((lirs.len(), lirs.used_bytes()), (2, 20));
        assert!(lirs.remove(2));
        assert!(!lirs.remove(2));
        assert_eq!((lirs.len(), lirs.used_bytes()), (1, 10));
        assert!(!lirs.get(&Request::new(2, 10), &mut evicted), "removed");
    }

    /// What holds even through libCacheSim's accounting quirks (which let the LIR byte count
    /// drift from the LIR blocks in S, and leave NH entries whose S entry is gone, so neither is
    /// checked): the counted bytes stay within capacity, Q's counter is exact and within the
    /// HIR share, and S stays bounded while NH has blocks to give up.
    fn check_invariants(lirs: &Lirs, largest: u64) -> Result<(), TestCaseError> {
        prop_assert!(lirs.used_bytes() <= lirs.capacity_bytes());
        prop_assert_eq!(lirs.hir_bytes, lirs.stack_q.bytes);
        prop_assert!(lirs.stack_q.bytes <= lirs.hir_limit);
        prop_assert!(lirs.stack_s.bytes <= 2 * lirs.capacity || lirs.stack_nh.is_empty());
        prop_assert!(lirs.stack_s.bytes <= 2 * lirs.capacity + largest * lirs.stack_s.len as u64);
        Ok(())
    }

    proptest! {
        #[test]
        fn capacity_holds_and_stacks_stay_consistent(
            capacity in 1u64..200,
            steps in proptest::collection::vec((0u64..30, 1u32..=4, 0u8..10), 1..500),
        ) {
            // Each key keeps one size, as in real traces.
            let mut lirs = Lirs::new(capacity);
            let mut evicted = Vec::new();
            let mut sizes: HashMap<u64, u32> = HashMap::new();
            let mut ever_admitted = std::collections::HashSet::new();
            for (key, size, action) in steps {
                let size = *sizes.entry(key).or_insert(size);
                if action == 0 {
                    lirs.remove(key);
                } else {
                    let request = Request::new(key, size);
                    if lirs.lookup(&request) {
                        prop_assert!(ever_admitted.contains(&key), "hit on {} never admitted", key);
                    } else {
                        lirs.admit(&request, &mut evicted);
                        let slots = lirs.slots(key);
                        if slots.s != NIL || slots.q != NIL {
                            ever_admitted.insert(key);
                        }
                    }
                }
                for gone in evicted.drain(..) {
                    prop_assert_eq!(Some(&gone.size), sizes.get(&gone.key));
                }
                check_invariants(&lirs, 4)?;
            }
        }
    }
}
