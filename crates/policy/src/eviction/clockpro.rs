//! CLOCK-Pro (Jiang, Chen & Zhang, "CLOCK-Pro: An Effective Improvement of the CLOCK
//! Replacement", USENIX ATC'05, §3–4): LIRS's reuse-distance test on a single clock. Pages are
//! hot or cold; a cold page starts a test period when it enters or is re-referenced, and an
//! access during the test period makes it hot. Evicted cold pages still in their test period
//! stay on the clock as non-resident pages, so a re-access soon after eviction is recognised.
//! Three hands sweep the clock from its oldest page: HAND_cold evicts unreferenced resident
//! cold pages (§4.2), HAND_hot turns unreferenced hot pages cold and ends the test periods it
//! passes, HAND_test ends test periods once non-resident pages grow too many. The cold target
//! m_c adapts (§4.3): up when a cold page is accessed in its test period, down when one
//! passes it unaccessed.
//!
//! Two variants, by the `variant` parameter.
//!
//! `variant=libcachesim` (the default) decides exactly as libCacheSim's `ClockPro.c` in the
//! `libcachesim` 0.3.5 package (`lcs.ClockPro(init_ref=0, init_ratio_cold=0.5)`), which is not
//! the paper's algorithm at all:
//! - `ClockPro_can_insert` refuses a missed object whenever the resident cold pages plus it
//!   would exceed the cold target (`mem_cold_max`, ⌊`init-ratio-cold` × capacity⌋), where the
//!   paper runs HAND_cold to make room. Every new page is cold, pages only turn hot through
//!   HAND_cold (directly, or as the non-resident pages it leaves behind), and HAND_cold only
//!   runs when a miss finds the cache full; with the target at most the capacity the refusal
//!   comes first, so no hand ever moves and nothing is ever evicted. The cache keeps the
//!   first objects that fit in the cold target and every later miss that does not fit is
//!   refused. `init-ref`, the adaptive target and the test pages never matter. (The
//!   admission filter is consulted first, on every miss, as libCacheSim does.)
//! - `init-ratio-cold` above 1 makes libCacheSim loop forever the first time HAND_cold meets a
//!   referenced page (it waits for the hot pages to fit below capacity − target < 0), so the
//!   parameter is limited to 0–1 here. The Python default is 0.5, the C default 1.
//! - Its hands, unreachable as above, depart from the paper too (resident cold pages have no
//!   test period, HAND_hot ends none, a re-accessed non-resident page turns hot without
//!   becoming resident again); we did not port them.
//!
//! `variant=paper` is the paper's CLOCK-Pro over byte sizes, with the byte accounting
//! libCacheSim set out to use. Where the paper is silent or counts pages, we decide:
//! - m is the capacity in bytes; the cold target m_c starts at ⌊`init-ratio-cold` ×
//!   capacity⌋ bytes, moves by the size of the page whose test ends (up if the page was
//!   accessed during it, including a resident page whose reference bit is still set when
//!   HAND_hot or HAND_test ends its test, down if not) and stays within 0–capacity. Hot pages
//!   may hold capacity − m_c bytes: HAND_hot runs while they hold more.
//! - Non-resident pages may hold as many bytes as the capacity (the paper: m pages); past
//!   that, HAND_test ends the next test period in its way. The paper's second trigger, cold
//!   pages over m_c + m, is not used.
//! - A page HAND_hot spares or demotes, and a cold page HAND_cold promotes or starts a new
//!   test period for, moves to the list head, as in Caffeine's simulator; a referenced cold
//!   page not in its test period starts a new one.
//! - HAND_hot demotes one page per run and then stops at the next hot page, ending the test
//!   periods on its way. When the miss does not fit and no resident cold page is left (objects
//!   of different sizes), HAND_hot demotes until HAND_cold has one.
//! - New pages take `init-ref` as their reference bit (the paper: unset). A hand used for the
//!   first time starts at the oldest page.
//! - A non-resident page whose key comes back with another size is forgotten, and the object
//!   enters as a new cold page.
//!
//! On cloudPhysicsIO with unit sizes, `variant=paper` misses within 0.015 of PyClockPro at
//! every size of the table in libCacheSim's `ClockPro.c` header (4,897 to 48,974 objects).
//!
//! [`EvictionPolicy::remove`] drops a resident page from the clock entirely (no non-resident
//! page is left behind) and forgets a non-resident one, returning false for it.

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::error::PolicyError;
use crate::util::key_table::KeyTable;
use crate::util::prefetch::prefetch_read;
use crate::util::{release_bytes, store_at, List, Slab, NIL};

/// Which decisions to follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// libCacheSim 0.3.5's `ClockPro.c`: misses beyond the cold target are refused, nothing is
    /// evicted.
    LibCacheSim,
    /// The paper's three hands over byte sizes.
    Paper,
}

impl Variant {
    /// The variant a `variant=` parameter names.
    pub fn from_name(name: &str) -> Result<Variant, PolicyError> {
        match name.to_ascii_lowercase().as_str() {
            "libcachesim" => Ok(Variant::LibCacheSim),
            "paper" => Ok(Variant::Paper),
            _ => Err(PolicyError::refused(
                "clockpro",
                format!("variant must be libcachesim or paper, got {name}"),
            )),
        }
    }
}

/// What a page on the clock is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Hot,
    /// Resident cold.
    Cold,
    /// Evicted, kept on the clock until its test period ends.
    NonResident,
}

/// Per-page state.
#[derive(Clone, Copy, Debug)]
struct Page {
    status: Status,
    in_test: bool,
    referenced: bool,
}

/// Where a page stands on the clock, and its neighbours among the resident cold pages.
#[derive(Clone, Copy, Debug)]
struct Place {
    /// Increases from the oldest page to the list head: a page placed at the head takes the
    /// next value, so the clock's order is the order of these.
    stamp: u64,
    /// The next newer and older resident cold pages, or [`NIL`] (for pages that are not
    /// resident cold, meaningless).
    cold_newer: u32,
    cold_older: u32,
}

/// libCacheSim's default share of the capacity for cold pages (the Python default).
pub const INIT_RATIO_COLD: f64 = 0.5;

/// CLOCK-Pro over a byte capacity.
pub struct ClockPro {
    capacity: u64,
    variant: Variant,
    init_ref: bool,
    /// m_c: bytes the cold resident pages are meant to hold.
    cold_target: u64,
    map: KeyTable,
    slab: Slab<Page>,
    /// The clock: front is the list head (newest), back the oldest page; hands move towards
    /// the front and wrap from it to the back.
    clock: List,
    /// Per slab slot: the page's place.
    places: Vec<Place>,
    /// The stamp the next page placed at the head takes.
    next_stamp: u64,
    /// The resident cold pages in clock order, so that HAND_cold finds the next one without
    /// walking over the hot and non-resident pages between.
    newest_cold: u32,
    oldest_cold: u32,
    /// Where each hand stands, or [`NIL`] until it first moves.
    hand_hot: u32,
    hand_cold: u32,
    hand_test: u32,
    hot_bytes: u64,
    hot_pages: usize,
    cold_bytes: u64,
    cold_pages: usize,
    non_resident_bytes: u64,
    /// Pages (resident or not) in their test period.
    in_test: usize,
}

impl ClockPro {
    /// An empty cache of `capacity` bytes with libCacheSim's defaults: its variant, new pages
    /// unreferenced, a cold target of half the capacity.
    pub fn new(capacity: u64) -> ClockPro {
        ClockPro::build(capacity, Variant::LibCacheSim, false, INIT_RATIO_COLD)
    }

    /// An empty cache following `variant`, new pages' reference bit `init_ref`, a cold target
    /// starting at `init_ratio_cold` (0 to 1) of the capacity.
    pub fn with_params(
        capacity: u64,
        variant: Variant,
        init_ref: bool,
        init_ratio_cold: f64,
    ) -> Result<ClockPro, PolicyError> {
        if !(0.0..=1.0).contains(&init_ratio_cold) {
            return Err(PolicyError::refused(
                "clockpro",
                format!("init-ratio-cold must be between 0 and 1, got {init_ratio_cold}"),
            ));
        }
        Ok(ClockPro::build(
            capacity,
            variant,
            init_ref,
            init_ratio_cold,
        ))
    }

    fn build(capacity: u64, variant: Variant, init_ref: bool, init_ratio_cold: f64) -> ClockPro {
        ClockPro {
            capacity,
            variant,
            init_ref,
            // Truncated, as libCacheSim's `(int64_t)(cache_size * ratio)`.
            cold_target: ((capacity as f64 * init_ratio_cold) as u64).min(capacity),
            map: KeyTable::default(),
            slab: Slab::with_capacity(0),
            clock: List::default(),
            places: Vec::new(),
            next_stamp: 0,
            newest_cold: NIL,
            oldest_cold: NIL,
            hand_hot: NIL,
            hand_cold: NIL,
            hand_test: NIL,
            hot_bytes: 0,
            hot_pages: 0,
            cold_bytes: 0,
            cold_pages: 0,
            non_resident_bytes: 0,
            in_test: 0,
        }
    }

    #[inline]
    fn page(&self, index: u32) -> Page {
        self.slab.get(index).data
    }

    #[inline]
    fn page_mut(&mut self, index: u32) -> &mut Page {
        &mut self.slab.get_mut(index).data
    }

    #[inline]
    fn size(&self, index: u32) -> u64 {
        u64::from(self.slab.get(index).size)
    }

    /// The page a hand meets after `index`: the next newer one, wrapping from the list head to
    /// the oldest page.
    #[inline]
    fn after(&self, index: u32) -> u32 {
        match self.slab.prev(index) {
            NIL => self.clock.tail,
            newer => newer,
        }
    }

    /// Where a hand starts looking: where it stands, or the oldest page.
    #[inline]
    fn start(&self, hand: u32) -> u32 {
        if hand == NIL {
            self.clock.tail
        } else {
            hand
        }
    }

    /// Before `index` leaves its place, a hand standing on it steps to the page after it (or
    /// to none when it was the only page).
    fn step_hands_off(&mut self, index: u32) {
        let after = self.after(index);
        let after = if after == index { NIL } else { after };
        for hand in [&mut self.hand_hot, &mut self.hand_cold, &mut self.hand_test] {
            if *hand == index {
                *hand = after;
            }
        }
    }

    fn move_to_head(&mut self, index: u32) {
        self.step_hands_off(index);
        self.clock.move_to_front(&mut self.slab, index);
        self.places[index as usize].stamp = self.take_stamp();
    }

    #[inline]
    fn take_stamp(&mut self) -> u64 {
        self.next_stamp += 1;
        self.next_stamp
    }

    /// Files a page that just became resident cold at the list head as the newest cold page.
    fn link_cold(&mut self, index: u32) {
        let place = &mut self.places[index as usize];
        place.cold_newer = NIL;
        place.cold_older = self.newest_cold;
        match self.newest_cold {
            NIL => self.oldest_cold = index,
            newest => self.places[newest as usize].cold_newer = index,
        }
        self.newest_cold = index;
    }

    /// Takes a page that stops being resident cold (or moves) out of the cold pages' order.
    fn unlink_cold(&mut self, index: u32) {
        let Place {
            cold_newer,
            cold_older,
            ..
        } = self.places[index as usize];
        match cold_newer {
            NIL => self.newest_cold = cold_older,
            newer => self.places[newer as usize].cold_older = cold_older,
        }
        match cold_older {
            NIL => self.oldest_cold = cold_newer,
            older => self.places[older as usize].cold_newer = cold_newer,
        }
    }

    /// The first resident cold page a hand standing on `from` meets: `from` itself or the next
    /// newer one, wrapping to the oldest. Walks the clock and, in step, the cold pages from the
    /// newest down to the first older than `from`; whichever ends first answers (the walk is
    /// short when cold pages are dense on the clock, the other when they are few).
    fn seek_cold(&self, from: u32) -> u32 {
        debug_assert!(self.cold_pages > 0);
        let mut walker = self.start(from);
        let from_stamp = self.places[walker as usize].stamp;
        let mut scan = self.newest_cold;
        let mut oldest_not_older = NIL;
        loop {
            if self.page(walker).status == Status::Cold {
                return walker;
            }
            walker = self.after(walker);
            if scan == NIL {
                // Every cold page is at or after `from`.
                return oldest_not_older;
            }
            let place = &self.places[scan as usize];
            if place.stamp < from_stamp {
                // No cold page at or after `from`: the hand wraps to the oldest.
                return if oldest_not_older == NIL {
                    self.oldest_cold
                } else {
                    oldest_not_older
                };
            }
            oldest_not_older = scan;
            scan = place.cold_older;
        }
    }

    /// Takes a page off the clock and forgets it.
    fn drop_page(&mut self, index: u32) {
        self.step_hands_off(index);
        self.clock.unlink(&mut self.slab, index);
        self.map.remove(self.slab.get(index).key);
        self.slab.release(index);
    }

    /// Moves the cold target by `bytes` up or down, within 0 and the capacity.
    fn adjust_cold_target(&mut self, bytes: u64, up: bool) {
        self.cold_target = if up {
            (self.cold_target + bytes).min(self.capacity)
        } else {
            self.cold_target.saturating_sub(bytes)
        };
    }

    /// Ends the test period of the page at `index`, if it is in one: a non-resident page
    /// leaves the clock, and the cold target moves by whether the page was accessed.
    fn end_test(&mut self, index: u32) {
        let page = self.page(index);
        if !page.in_test {
            return;
        }
        self.in_test -= 1;
        let size = self.size(index);
        self.adjust_cold_target(size, page.referenced);
        if page.status == Status::NonResident {
            release_bytes(&mut self.non_resident_bytes, size);
            self.drop_page(index);
        } else {
            self.page_mut(index).in_test = false;
        }
    }

    /// A cold page (resident, or non-resident and re-accessed) turns hot at the list head;
    /// HAND_hot then brings the hot pages back within capacity − m_c.
    fn make_hot(&mut self, index: u32) {
        let size = self.size(index);
        let page = self.page(index);
        if page.in_test {
            self.in_test -= 1;
        }
        match page.status {
            Status::Cold => {
                release_bytes(&mut self.cold_bytes, size);
                self.cold_pages -= 1;
                self.unlink_cold(index);
            }
            Status::NonResident => release_bytes(&mut self.non_resident_bytes, size),
            Status::Hot => unreachable!("only cold pages turn hot"),
        }
        *self.page_mut(index) = Page {
            status: Status::Hot,
            in_test: false,
            referenced: false,
        };
        self.hot_bytes += size;
        self.hot_pages += 1;
        self.move_to_head(index);
        while self.hot_bytes > self.capacity - self.cold_target {
            self.run_hand_hot();
        }
    }

    /// HAND_hot: spares referenced hot pages (clearing the bit), ends the test periods of the
    /// cold pages it passes, turns the first unreferenced hot page cold and stops at the next
    /// hot page. Needs a hot page.
    fn run_hand_hot(&mut self) {
        debug_assert!(self.hot_pages > 0);
        let mut at = self.start(self.hand_hot);
        loop {
            let next = self.after(at);
            let page = self.page(at);
            match page.status {
                Status::Hot if page.referenced => {
                    self.page_mut(at).referenced = false;
                    self.hand_hot = next;
                    self.move_to_head(at);
                }
                Status::Hot => {
                    let size = self.size(at);
                    *self.page_mut(at) = Page {
                        status: Status::Cold,
                        in_test: false,
                        referenced: false,
                    };
                    release_bytes(&mut self.hot_bytes, size);
                    self.hot_pages -= 1;
                    self.cold_bytes += size;
                    self.cold_pages += 1;
                    self.hand_hot = next;
                    self.move_to_head(at);
                    self.link_cold(at);
                    self.park_hand_hot();
                    return;
                }
                _ => {
                    self.hand_hot = next;
                    self.end_test(at);
                }
            }
            // The hand may have stepped off a page that left: go on from where it stands.
            at = self.start(self.hand_hot);
        }
    }

    /// Moves HAND_hot on to the next hot page, ending the test periods it passes.
    fn park_hand_hot(&mut self) {
        if self.hot_pages == 0 {
            self.hand_hot = NIL;
            return;
        }
        let mut at = self.start(self.hand_hot);
        while self.page(at).status != Status::Hot {
            self.hand_hot = self.after(at);
            self.end_test(at);
            at = self.start(self.hand_hot);
        }
        self.hand_hot = at;
    }

    /// HAND_test: ends the test period of the oldest page in one and stops at the next. Needs
    /// a page in its test period.
    fn run_hand_test(&mut self) {
        debug_assert!(self.in_test > 0);
        let mut at = self.start(self.hand_test);
        while !self.page(at).in_test {
            at = self.after(at);
        }
        self.hand_test = self.after(at);
        self.end_test(at);
        if self.in_test == 0 {
            self.hand_test = NIL;
            return;
        }
        let mut at = self.start(self.hand_test);
        while !self.page(at).in_test {
            at = self.after(at);
        }
        self.hand_test = at;
    }

    /// HAND_cold at the next resident cold page: a referenced one turns hot (in its test
    /// period) or starts a new test period, at the list head; an unreferenced one is evicted,
    /// staying on the clock as non-resident while in its test period. Needs a resident cold
    /// page.
    fn run_hand_cold(&mut self, evicted: &mut Vec<Evicted>) {
        debug_assert!(self.cold_pages > 0);
        let at = self.seek_cold(self.hand_cold);
        self.hand_cold = self.after(at);
        let page = self.page(at);
        let size = self.size(at);
        if page.referenced {
            if page.in_test {
                self.adjust_cold_target(size, true);
                self.make_hot(at);
            } else {
                *self.page_mut(at) = Page {
                    in_test: true,
                    referenced: false,
                    ..page
                };
                self.in_test += 1;
                self.unlink_cold(at);
                self.move_to_head(at);
                self.link_cold(at);
            }
            return;
        }
        let node = self.slab.get(at);
        evicted.push(node.evicted());
        release_bytes(&mut self.cold_bytes, size);
        self.cold_pages -= 1;
        self.unlink_cold(at);
        if !page.in_test {
            self.drop_page(at);
            return;
        }
        self.page_mut(at).status = Status::NonResident;
        self.non_resident_bytes += size;
        while self.non_resident_bytes > self.capacity {
            self.run_hand_test();
        }
    }

    /// Runs the hands until `size` more bytes fit.
    fn make_room(&mut self, size: u64, evicted: &mut Vec<Evicted>) {
        while self.hot_bytes + self.cold_bytes + size > self.capacity {
            if self.cold_pages == 0 {
                self.run_hand_hot();
            } else {
                self.run_hand_cold(evicted);
            }
        }
    }

    /// A missed object enters: a non-resident page in its test period turns hot (an access in
    /// the test period raises m_c), anything else becomes a cold page starting its test.
    fn insert(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        let size = u64::from(request.size);
        if size > self.capacity {
            return;
        }
        if self.variant == Variant::LibCacheSim && self.cold_bytes + size > self.cold_target {
            return;
        }
        if let Some(index) = self.map.get(request.key) {
            if self.page(index).status != Status::NonResident {
                return;
            }
            if self.slab.get(index).size != request.size {
                // Another object under the same key: the old one's test says nothing of it.
                self.remove(request.key);
            }
        }
        self.make_room(size, evicted);
        // Making room may have ended the page's test period and dropped it.
        if let Some(index) = self.map.get(request.key) {
            self.adjust_cold_target(size, true);
            self.make_hot(index);
            return;
        }
        let index = self.slab.alloc(
            request.key,
            request.size,
            Page {
                status: Status::Cold,
                in_test: true,
                referenced: self.init_ref,
            },
        );
        self.clock.push_front(&mut self.slab, index);
        let place = Place {
            stamp: self.take_stamp(),
            cold_newer: NIL,
            cold_older: NIL,
        };
        store_at(&mut self.places, index, place);
        self.link_cold(index);
        self.map.insert(request.key, index);
        self.cold_bytes += size;
        self.cold_pages += 1;
        self.in_test += 1;
    }
}

impl EvictionPolicy for ClockPro {
    fn space(&self) -> Space {
        Space {
            capacity_bytes: self.capacity,
            used_bytes: self.hot_bytes + self.cold_bytes,
            objects: self.hot_pages + self.cold_pages,
        }
    }

    /// A hit sets the page's reference bit.
    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        if self.variant == Variant::LibCacheSim {
            // Every page is resident and no hand ever reads the bit: spare the node a write.
            return self.map.get(request.key).is_some();
        }
        let Some(index) = self.map.get(request.key) else {
            return false;
        };
        let page = self.page_mut(index);
        if page.status == Status::NonResident {
            return false;
        }
        page.referenced = true;
        true
    }

    #[inline]
    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        self.insert(request, evicted);
    }

    fn contains(&self, key: u64) -> Option<bool> {
        let resident = self
            .map
            .get(key)
            .is_some_and(|index| self.page(index).status != Status::NonResident);
        Some(resident)
    }

    fn remove(&mut self, key: u64) -> bool {
        let Some(index) = self.map.get(key) else {
            return false;
        };
        let page = self.page(index);
        let size = self.size(index);
        if page.in_test {
            self.in_test -= 1;
        }
        match page.status {
            Status::Hot => {
                release_bytes(&mut self.hot_bytes, size);
                self.hot_pages -= 1;
            }
            Status::Cold => {
                release_bytes(&mut self.cold_bytes, size);
                self.cold_pages -= 1;
                self.unlink_cold(index);
            }
            Status::NonResident => release_bytes(&mut self.non_resident_bytes, size),
        }
        self.drop_page(index);
        page.status != Status::NonResident
    }

    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.map.prefetch(key);
    }

    /// A hit touches only its node.
    #[inline]
    fn prefetch_node(&self, key: u64) {
        if let Some(index) = self.map.get(key) {
            prefetch_read(self.slab.get(index));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::model_check::{check_against_model, steps};
    use proptest::prelude::*;

    fn paper(capacity: u64, init_ratio_cold: f64) -> ClockPro {
        ClockPro::with_params(capacity, Variant::Paper, false, init_ratio_cold).unwrap()
    }

    fn play(cache: &mut ClockPro, keys: &[u64], size: u32) -> (Vec<bool>, Vec<u64>) {
        let mut evicted = Vec::new();
        let hits = keys
            .iter()
            .map(|&key| cache.get(&Request::new(key, size), &mut evicted))
            .collect();
        (hits, evicted.iter().map(|e| e.key).collect())
    }

    /// The clock from the list head to the oldest page: key and a status letter (H hot, C
    /// cold, N non-resident), lower case when not in a test period.
    fn clock(cache: &ClockPro) -> Vec<(u64, char)> {
        let mut pages = Vec::new();
        let mut index = cache.clock.head;
        while index != NIL {
            let page = cache.page(index);
            let letter = match page.status {
                Status::Hot => 'H',
                Status::Cold => 'C',
                Status::NonResident => 'N',
            };
            let letter = if page.in_test || page.status == Status::Hot {
                letter
            } else {
                letter.to_ascii_lowercase()
            };
            pages.push((cache.slab.get(index).key, letter));
            index = cache.slab.next(index);
        }
        pages
    }

    /// The byte and page counts agree with the clock, and the hands stand on the clock.
    fn check_counts(cache: &ClockPro) {
        let mut hot = (0, 0);
        let mut cold = (0, 0);
        let mut non_resident = 0;
        let mut in_test = 0;
        let mut index = cache.clock.head;
        let mut on_clock = Vec::new();
        while index != NIL {
            let page = cache.page(index);
            let size = cache.size(index);
            match page.status {
                Status::Hot => hot = (hot.0 + size, hot.1 + 1),
                Status::Cold => cold = (cold.0 + size, cold.1 + 1),
                Status::NonResident => non_resident += size,
            }
            in_test += usize::from(page.in_test);
            assert!(page.status != Status::NonResident || page.in_test);
            on_clock.push(index);
            index = cache.slab.next(index);
        }
        assert_eq!((cache.hot_bytes, cache.hot_pages), hot);
        assert_eq!((cache.cold_bytes, cache.cold_pages), cold);
        assert_eq!(cache.non_resident_bytes, non_resident);
        assert_eq!(cache.in_test, in_test);
        assert_eq!(cache.map.len(), on_clock.len());
        for hand in [cache.hand_hot, cache.hand_cold, cache.hand_test] {
            assert!(hand == NIL || on_clock.contains(&hand));
        }
        assert!(cache.non_resident_bytes <= cache.capacity);
        assert!(cache.cold_target <= cache.capacity);
        // The cold pages' order is the clock's, and stamps rise towards the head.
        let cold_on_clock: Vec<u32> = on_clock
            .iter()
            .copied()
            .filter(|&index| cache.page(index).status == Status::Cold)
            .collect();
        let mut cold_listed = Vec::new();
        let mut index = cache.newest_cold;
        while index != NIL {
            cold_listed.push(index);
            index = cache.places[index as usize].cold_older;
        }
        assert_eq!(cold_listed, cold_on_clock);
        let stamps: Vec<u64> = on_clock
            .iter()
            .map(|&index| cache.places[index as usize].stamp)
            .collect();
        assert!(stamps.windows(2).all(|pair| pair[0] > pair[1]));
        // Seeking through the cold pages' order finds what walking the clock finds.
        if cache.cold_pages > 0 {
            for &from in on_clock.iter().chain([NIL].iter()) {
                let mut walk = cache.start(from);
                while cache.page(walk).status != Status::Cold {
                    walk = cache.after(walk);
                }
                assert_eq!(cache.seek_cold(from), walk);
            }
        }
    }

    #[test]
    fn libcachesim_keeps_the_first_objects_that_fit_the_cold_target() {
        // Capacity 10, target 5: keys 1..=5 enter, everything after is refused, hits or not.
        let mut cache = ClockPro::new(10);
        let (hits, evicted) = play(&mut cache, &[1, 2, 3, 4, 5, 6, 1, 7, 6, 2], 1);
        assert_eq!(
            hits,
            vec![false, false, false, false, false, false, true, false, false, true]
        );
        assert!(evicted.is_empty());
        assert_eq!((cache.len(), cache.used_bytes()), (5, 5));
        // Byte sizes: a small object still fits where a large one was refused.
        let mut cache = ClockPro::with_params(100, Variant::LibCacheSim, true, 0.5).unwrap();
        play(&mut cache, &[1], 30);
        play(&mut cache, &[2], 30);
        play(&mut cache, &[3], 20);
        assert_eq!(cache.used_bytes(), 50);
        assert!(!cache.contains(2).unwrap());
        assert!(ClockPro::with_params(10, Variant::Paper, false, 1.5).is_err());
        assert!(Variant::from_name("nope").is_err());
        assert_eq!(Variant::from_name("Paper").unwrap(), Variant::Paper);
    }

    #[test]
    fn cold_pages_are_evicted_into_non_resident_test_pages_and_come_back_hot() {
        // 4 unit pages, cold target 2 (hot pages may hold 2).
        let mut cache = paper(4, 0.5);
        play(&mut cache, &[1, 2, 3, 4], 1);
        assert_eq!(clock(&cache), [(4, 'C'), (3, 'C'), (2, 'C'), (1, 'C')]);
        // 5 misses: HAND_cold evicts the oldest, 1, which stays as a non-resident test page.
        let (_, evicted) = play(&mut cache, &[5], 1);
        assert_eq!(evicted, vec![1]);
        assert_eq!(
            clock(&cache),
            [(5, 'C'), (4, 'C'), (3, 'C'), (2, 'C'), (1, 'N')]
        );
        // 1 again within its test period: a miss that makes room (evicting 2) and comes back
        // hot at the head; m_c grows by its size.
        let (hits, evicted) = play(&mut cache, &[1], 1);
        assert_eq!((hits, evicted), (vec![false], vec![2]));
        assert_eq!(cache.cold_target, 3);
        assert_eq!(
            clock(&cache),
            [(1, 'H'), (5, 'C'), (4, 'C'), (3, 'C'), (2, 'N')]
        );
        check_counts(&cache);
    }

    #[test]
    fn hand_cold_promotes_referenced_test_pages_and_hand_hot_ends_older_tests() {
        // 4 unit pages, cold target 3: hot pages may hold 1 byte.
        let mut cache = paper(4, 0.75);
        play(&mut cache, &[1, 2, 3, 4], 1);
        play(&mut cache, &[1, 2], 1);
        // 5 misses. HAND_cold, from the oldest page, finds 1 referenced in its test period: it
        // turns hot at the head and m_c rises to 4, leaving hot pages no room. HAND_hot, from
        // the oldest page, passes the cold pages 2, 3, 4, all older than the only hot page:
        // their tests end (2 was referenced: m_c stays at the capacity; 3 and 4 were not:
        // m_c 3, then 2). It turns 1 cold, out of its test. HAND_cold goes on: 2 is
        // referenced but no longer in a test, so it starts a new one at the head; 3,
        // unreferenced and out of its test, leaves the clock for good.
        let (_, evicted) = play(&mut cache, &[5], 1);
        assert_eq!(evicted, vec![3]);
        assert_eq!(cache.cold_target, 2);
        assert_eq!(clock(&cache), [(5, 'C'), (2, 'C'), (1, 'c'), (4, 'c')]);
        assert_eq!(cache.hand_hot, NIL);
        check_counts(&cache);
    }

    #[test]
    fn hand_hot_spares_a_referenced_hot_page_and_demotes_the_next() {
        // 4 unit pages, cold target 2.
        let mut cache = paper(4, 0.5);
        play(&mut cache, &[1, 2, 3, 4, 1], 1);
        // 5: HAND_cold promotes 1 (m_c 3, hot may hold 1) and evicts 2 into a test page.
        let (_, evicted) = play(&mut cache, &[5], 1);
        assert_eq!(evicted, vec![2]);
        assert_eq!(
            clock(&cache),
            [(5, 'C'), (1, 'H'), (4, 'C'), (3, 'C'), (2, 'N')]
        );
        play(&mut cache, &[1, 3], 1);
        // 6: HAND_cold promotes 3 (m_c 4: hot may hold nothing). HAND_hot from the oldest
        // page ends the tests of 2 (dropped, m_c 3) and 4 (m_c 2), spares 1 (referenced: its
        // bit cleared, to the head), ends 5's test (m_c 1) and turns 3 cold; it stops at 1.
        // HAND_cold then evicts 4, unreferenced and out of its test, for good.
        let (_, evicted) = play(&mut cache, &[6], 1);
        assert_eq!(evicted, vec![4]);
        assert_eq!(cache.cold_target, 1);
        assert_eq!(clock(&cache), [(6, 'C'), (3, 'c'), (1, 'H'), (5, 'c')]);
        assert_eq!(cache.hand_hot, cache.map.get(1).unwrap());
        assert!(!cache.page(cache.hand_hot).referenced);
        check_counts(&cache);
    }

    #[test]
    fn non_resident_pages_hold_at_most_the_capacity() {
        let mut cache = paper(3, 0.5);
        let keys: Vec<u64> = (1..=20).collect();
        play(&mut cache, &keys, 1);
        check_counts(&cache);
        assert_eq!(cache.len(), 3);
        assert!(cache.non_resident_bytes <= 3);
        // Each ended test period unaccessed lowered m_c to 0.
        assert_eq!(cache.cold_target, 0);
    }

    #[test]
    fn with_only_hot_pages_left_hand_hot_demotes_one_for_hand_cold() {
        // 10 bytes, cold target 0; keys 0, 1, 2, 3 of 2, 3, 4, 5 bytes.
        let mut cache = paper(10, 0.0);
        let mut evicted = Vec::new();
        let size = |key: u64| [2, 3, 4, 5][key as usize];
        for key in [0, 1, 0, 3, 2, 2, 3, 0, 0] {
            cache.get(&Request::new(key, size(key)), &mut evicted);
        }
        // 0 came back as a new cold page and was hit; 2 is hot, 3 non-resident.
        assert_eq!(clock(&cache), [(0, 'C'), (3, 'N'), (2, 'H')]);
        // 3 (5 bytes) again: HAND_cold promotes 0 (m_c 2), leaving only hot pages, 6 bytes of
        // them. HAND_hot turns 2 cold and, passing 3, ends its test (dropped, m_c 0); HAND_cold
        // evicts 2; 3 enters as a new cold page.
        let keys = |evicted: &[Evicted]| evicted.iter().map(|e| e.key).collect::<Vec<_>>();
        assert_eq!(keys(&evicted), vec![1, 3, 0, 3]);
        evicted.clear();
        assert!(!cache.get(&Request::new(3, 5), &mut evicted));
        assert_eq!(keys(&evicted), vec![2]);
        assert_eq!(clock(&cache), [(3, 'C'), (0, 'H')]);
        assert_eq!(cache.cold_target, 0);
        check_counts(&cache);
        // Larger than the cache: not admitted, nothing moves.
        evicted.clear();
        assert!(!cache.get(&Request::new(9, 11), &mut evicted));
        assert!(evicted.is_empty() && !cache.contains(9).unwrap());
    }

    #[test]
    fn remove_drops_pages_and_forgets_non_resident_ones() {
        let mut cache = paper(4, 0.5);
        play(&mut cache, &[1, 2, 3, 4, 5], 1);
        assert!(!cache.remove(1), "1 is a non-resident test page");
        assert!(cache.map.get(1).is_none());
        assert!(cache.remove(2));
        assert!(!cache.remove(2));
        check_counts(&cache);
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn a_long_random_run_keeps_every_count() {
        for (capacity, ratio) in [(50, 0.5), (200, 0.1), (200, 1.0), (37, 0.0)] {
            let mut cache = paper(capacity, ratio);
            let mut evicted = Vec::new();
            let mut state = 11u64;
            for step in 0..20_000 {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let draw = (state >> 33) % 400;
                let key = draw * draw / 400;
                let size = 1 + (key % 7) as u32;
                cache.get(&Request::new(key, size), &mut evicted);
                if step % 997 == 0 {
                    check_counts(&cache);
                }
            }
            check_counts(&cache);
        }
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(capacity in 1u64..64, steps in steps(20)) {
            check_against_model(&mut ClockPro::new(capacity), &steps)?;
            for ratio in [0.0, 0.5, 1.0] {
                let mut cache = paper(capacity, ratio);
                check_against_model(&mut cache, &steps)?;
                check_counts(&cache);
            }
        }
    }
}
