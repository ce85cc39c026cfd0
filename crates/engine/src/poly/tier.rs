//! The memory tier whose pages change role (seed 004 §3, and §4's Buffer-Cache, Write-Back
//! Cache and Compression-Store): one region in front of an SSD, split by two knobs into a
//! persistent write cache (exact LRU by last write), a volatile read cache (Clock), and a
//! compressed store shared by both roles (4 KiB pages in 512 B sectors).
//!
//! Placement is exclusive: a page lives in at most one of the three, so the role of its copy
//! says how it is reached (the write cache through the storage stack, the read cache as
//! memory) and whether it survives a crash (write-cache pages and their compressed copies do).
//! Lookup order is write cache, then the compressed store, then the SSD (§4, Fig 8 ⑦).
//!
//! The tier decides; its caller moves data. Every method appends the [`PolyAction`]s the
//! decision needs (write a dirty page back, compress one, decompress one) to a list the caller
//! carries out, so the live volume and the timed simulator run the same decisions (docs/
//! architecture.md, "One policy code, two executors").
//!
//! Capacities follow the knobs ([`Knobs`]): `read_share` of the tier is the read cache's and
//! the rest the write cache's (functional polymorphism, §3.2), and `compressed_share` of the
//! tier holds compressed pages of both roles (representational polymorphism, §3.2). The two
//! roles' uncompressed pages share what the compressed store leaves, so when compression grows
//! one ranking over the uncompressed pages of both roles (§3.2: "across all the non-compressed
//! pages in both volatile memory and writeback cache") decides whose pages are compressed: the
//! write cache's least recently written page or the read cache's Clock victim, whichever was
//! used longer ago. A role over its own capacity demotes its own coldest page. The compressed
//! store gives up its oldest page, of either role, when full.

use std::collections::{BTreeMap, VecDeque};

use rustc_hash::FxHashMap;

use crate::error::ParamError;
pub use heterarchy_device::codec::{SECTORS_PER_PAGE, SECTOR_BYTES};

/// The two knobs of seed 004 §3.4: the share of the tier in the read-cache role (the write
/// cache has the rest), and the share of the tier held compressed (pages of both roles, §3.2).
/// Each knob moves on its own over [0, 1], as the search needs (§3: functional, then
/// representational polymorphism "inside each function").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Knobs {
    pub read_share: f64,
    pub compressed_share: f64,
}

impl Knobs {
    /// The whole tier as write cache, where every search starts (§3.2).
    pub const WRITE_CACHE: Knobs = Knobs {
        read_share: 0.0,
        compressed_share: 0.0,
    };

    /// A one-line error naming the knob out of range.
    pub fn validate(&self) -> Result<(), ParamError> {
        for (name, value) in [
            ("read_share", self.read_share),
            ("compressed_share", self.compressed_share),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(ParamError::new(name, value, "a share in [0, 1]"));
            }
        }
        Ok(())
    }
}

/// Where a lookup found a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// In the write cache, uncompressed: reached through the storage stack.
    WriteCache,
    /// In the read cache: reached as memory.
    ReadCache,
    /// In the compressed store; `persistent` when it is a write-cache page. The hit
    /// decompresses it back into its role (an action says so).
    Compressed { persistent: bool },
    /// Nowhere: read from the SSD (an action says so).
    Miss,
}

/// Data the caller moves for a decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolyAction {
    /// Read the page from the SSD into the tier.
    ReadSsd { page: u64 },
    /// Write the tier's copy of a dirty page to the SSD (before its slot is reused).
    WriteBack { page: u64 },
    /// Store the page's uncompressed copy compressed, in `sectors` sectors (8: stored as is).
    Compress { page: u64, sectors: u16 },
    /// Bring the page's compressed copy back uncompressed.
    Decompress { page: u64 },
    /// The page has left the tier: its slot is free (after any `WriteBack` before it).
    Evict { page: u64 },
}

/// A write-cache or compressed page's persistent state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Written {
    /// Newer than the SSD's copy.
    dirty: bool,
    /// When it was last written (the write cache's LRU order).
    stamp: u64,
}

/// A read-cache page's Clock state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cached {
    referenced: bool,
    /// When it was last used (its place in the ranking across both roles).
    stamp: u64,
    /// Tells this residency's queue entry from stale ones of earlier residencies.
    generation: u64,
}

/// A compressed page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Packed {
    sectors: u16,
    /// `Some` for a write-cache page (persistent), `None` for a read-cache page.
    written: Option<Written>,
    /// When it was compressed (the store's LRU order).
    stamp: u64,
}

/// The tier's pages and their roles; see the module docs.
#[derive(Clone, Debug)]
pub struct PolyTier {
    capacity_pages: u64,
    knobs: Knobs,
    now: u64,
    /// Uncompressed write-cache pages, and their order by last write.
    write_cache: FxHashMap<u64, Written>,
    write_order: BTreeMap<u64, u64>,
    /// Dirty write-cache pages, uncompressed or compressed, by last write (what write-back
    /// takes next: the compressed store is the write cache's tail).
    dirty_order: BTreeMap<u64, u64>,
    /// Uncompressed read-cache pages, and Clock's queue of (page, generation).
    read_cache: FxHashMap<u64, Cached>,
    clock: VecDeque<(u64, u64)>,
    generations: u64,
    /// Compressed pages of either role, their sectors in use, and their order by compression.
    compressed: FxHashMap<u64, Packed>,
    compressed_sectors: u64,
    compressed_order: BTreeMap<u64, u64>,
    /// Each page's compressed size in sectors, as the caller last said (its data's
    /// compressibility).
    sectors_of: FxHashMap<u64, u16>,
}

impl PolyTier {
    /// A tier of `capacity_pages` 4 KiB pages, all write cache.
    pub fn new(capacity_pages: u64) -> PolyTier {
        PolyTier {
            capacity_pages,
            knobs: Knobs::WRITE_CACHE,
            now: 0,
            write_cache: FxHashMap::default(),
            write_order: BTreeMap::new(),
            dirty_order: BTreeMap::new(),
            read_cache: FxHashMap::default(),
            clock: VecDeque::new(),
            generations: 0,
            compressed: FxHashMap::default(),
            compressed_sectors: 0,
            compressed_order: BTreeMap::new(),
            sectors_of: FxHashMap::default(),
        }
    }

    /// The knobs in force.
    pub fn knobs(&self) -> Knobs {
        self.knobs
    }

    /// The pages `share` of the tier makes.
    fn share_pages(&self, share: f64) -> u64 {
        ((self.capacity_pages as f64 * share).round() as u64).min(self.capacity_pages)
    }

    /// Pages the write cache may hold uncompressed: the tier less the read cache's share.
    pub fn write_capacity(&self) -> u64 {
        self.capacity_pages - self.read_capacity()
    }

    /// Pages the read cache may hold uncompressed: its share of the tier.
    pub fn read_capacity(&self) -> u64 {
        self.share_pages(self.knobs.read_share)
    }

    /// Uncompressed pages of both roles together: what the compressed store leaves.
    pub fn uncompressed_capacity(&self) -> u64 {
        self.capacity_pages - self.compressed_capacity_pages()
    }

    /// Pages' worth of the compressed store.
    fn compressed_capacity_pages(&self) -> u64 {
        self.share_pages(self.knobs.compressed_share)
    }

    /// Sectors the compressed store may use.
    pub fn compressed_capacity_sectors(&self) -> u64 {
        self.compressed_capacity_pages() * u64::from(SECTORS_PER_PAGE)
    }

    /// Pages held uncompressed in the write cache, in the read cache, and compressed.
    pub fn occupancy(&self) -> (usize, usize, usize) {
        (
            self.write_cache.len(),
            self.read_cache.len(),
            self.compressed.len(),
        )
    }

    /// Where the tier holds `page` (`Miss`: nowhere), changing nothing.
    pub fn locate(&self, page: u64) -> Found {
        if self.write_cache.contains_key(&page) {
            Found::WriteCache
        } else if self.read_cache.contains_key(&page) {
            Found::ReadCache
        } else if let Some(packed) = self.compressed.get(&page) {
            Found::Compressed {
                persistent: packed.written.is_some(),
            }
        } else {
            Found::Miss
        }
    }

    /// How many pages are dirty, uncompressed or compressed.
    pub fn dirty_count(&self) -> usize {
        self.dirty_order.len()
    }

    /// Dirty pages (uncompressed or compressed): what a crash must not lose.
    pub fn dirty_pages(&self) -> Vec<u64> {
        let mut dirty: Vec<u64> = self
            .write_cache
            .iter()
            .filter(|(_, written)| written.dirty)
            .map(|(page, _)| *page)
            .chain(
                self.compressed
                    .iter()
                    .filter(|(_, packed)| packed.written.is_some_and(|w| w.dirty))
                    .map(|(page, _)| *page),
            )
            .collect();
        dirty.sort_unstable();
        dirty
    }

    fn tick(&mut self) -> u64 {
        self.now += 1;
        self.now
    }

    /// Looks `page` up for a read. A write-cache or read-cache hit changes no placement (a
    /// read-cache hit sets its reference bit); a compressed hit brings the page back
    /// uncompressed into its role; a miss reads it from the SSD into the read cache (when the
    /// read cache has room at all). `sectors` is the page's compressed size, were it
    /// compressed.
    pub fn read(&mut self, page: u64, sectors: u16, actions: &mut Vec<PolyAction>) -> Found {
        self.look_up(page, sectors, false, actions)
    }

    /// Looks `page` up for a volatile page cache above the tier that takes the page in (the
    /// paper's buffer cache, §4 Fig 8 ⑦, where DRAM and the tier's memory role are one pool):
    /// a write-cache page stays (the cache above gets a copy); a read-cache page moves up, out
    /// of the tier; a compressed page is decompressed, back into the write cache when it is
    /// persistent, up and out when not; a miss reads the SSD and the tier keeps nothing. Pages
    /// come back through [`evicted_above`](Self::evicted_above).
    pub fn fault(&mut self, page: u64, sectors: u16, actions: &mut Vec<PolyAction>) -> Found {
        self.look_up(page, sectors, true, actions)
    }

    /// The lookup of [`read`](Self::read) and, with `above`, of [`fault`](Self::fault): write
    /// cache, then read cache, then the compressed store, then the SSD (§4, Fig 8 ⑦).
    fn look_up(
        &mut self,
        page: u64,
        sectors: u16,
        above: bool,
        actions: &mut Vec<PolyAction>,
    ) -> Found {
        self.sectors_of
            .insert(page, sectors.clamp(1, SECTORS_PER_PAGE));
        if self.write_cache.contains_key(&page) {
            return Found::WriteCache;
        }
        if above {
            if self.read_cache.remove(&page).is_some() {
                // Up into the cache above; its Clock entry goes stale.
                actions.push(PolyAction::Evict { page });
                return Found::ReadCache;
            }
        } else if self.read_cache.contains_key(&page) {
            self.touch_cached(page);
            return Found::ReadCache;
        }
        if let Some(packed) = self.take_compressed(page) {
            actions.push(PolyAction::Decompress { page });
            return match packed.written {
                Some(written) => {
                    self.insert_written(page, written.dirty, actions);
                    Found::Compressed { persistent: true }
                }
                None if above => {
                    actions.push(PolyAction::Evict { page });
                    Found::Compressed { persistent: false }
                }
                None => {
                    self.insert_cached(page, actions);
                    Found::Compressed { persistent: false }
                }
            };
        }
        actions.push(PolyAction::ReadSsd { page });
        if !above {
            self.insert_cached(page, actions);
        }
        Found::Miss
    }

    /// A clean page the cache above evicts (its latest data: writes reach the tier through
    /// [`write`](Self::write) first): the read-cache role takes it when the tier has no copy,
    /// or the compressed store when there is no read cache (§4: "with compression on, even
    /// clean pages are evicted to the compression store").
    pub fn evicted_above(&mut self, page: u64, sectors: u16, actions: &mut Vec<PolyAction>) {
        self.sectors_of
            .insert(page, sectors.clamp(1, SECTORS_PER_PAGE));
        if self.write_cache.contains_key(&page) || self.compressed.contains_key(&page) {
            return;
        }
        if self.read_cache.contains_key(&page) {
            self.touch_cached(page);
        } else if self.read_capacity() > 0 {
            self.insert_cached(page, actions);
        } else {
            self.pack(page, None, actions);
        }
    }

    /// A persistent write of `page`: it becomes the write cache's most recently written page,
    /// dirty. Any other copy is dropped (the write carries the whole page). `sectors` is the
    /// new data's compressed size.
    pub fn write(&mut self, page: u64, sectors: u16, actions: &mut Vec<PolyAction>) {
        self.sectors_of
            .insert(page, sectors.clamp(1, SECTORS_PER_PAGE));
        self.read_cache.remove(&page); // its Clock entry goes stale
        self.take_compressed(page);
        if let Some(written) = self.write_cache.remove(&page) {
            self.write_order.remove(&written.stamp);
            self.dirty_order.remove(&written.stamp);
        }
        self.insert_written(page, true, actions);
    }

    /// Writes back up to `limit` dirty write-cache pages, compressed or not, least recently
    /// written first (the background write-back of §3.2), keeping them cached clean. Returns
    /// how many.
    pub fn write_back(&mut self, limit: usize, actions: &mut Vec<PolyAction>) -> usize {
        let mut done = 0;
        while done < limit {
            let Some((_, page)) = self.dirty_order.pop_first() else {
                break;
            };
            actions.push(PolyAction::WriteBack { page });
            let written = match self.write_cache.get_mut(&page) {
                Some(written) => Some(written),
                None => self
                    .compressed
                    .get_mut(&page)
                    .and_then(|packed| packed.written.as_mut()),
            };
            written.expect("dirty pages are write-cache pages").dirty = false;
            done += 1;
        }
        done
    }

    /// Sets the knobs and moves pages until every role fits its new capacity: revoked
    /// write-cache pages are written back first when dirty (§3.2), read-cache pages leave by
    /// Clock, and the compressed store takes the least recently used uncompressed pages of
    /// both roles.
    pub fn set_knobs(
        &mut self,
        knobs: Knobs,
        actions: &mut Vec<PolyAction>,
    ) -> Result<(), ParamError> {
        knobs.validate()?;
        self.knobs = knobs;
        self.fit(actions);
        Ok(())
    }

    /// Makes every role fit its capacity, and both roles' uncompressed pages what the
    /// compressed store leaves, demoting by the ranking across both roles.
    fn fit(&mut self, actions: &mut Vec<PolyAction>) {
        while self.compressed_sectors > self.compressed_capacity_sectors() {
            self.evict_compressed(actions);
        }
        while self.write_cache.len() as u64 > self.write_capacity() {
            self.demote_written(actions);
        }
        while self.read_cache.len() as u64 > self.read_capacity() {
            self.demote_cached(actions);
        }
        while (self.write_cache.len() + self.read_cache.len()) as u64 > self.uncompressed_capacity()
        {
            self.demote_coldest(actions);
        }
    }

    /// Demotes the uncompressed page of either role used longest ago: the least recently
    /// written write-cache page or Clock's read-cache victim (§3.2's one ranking).
    fn demote_coldest(&mut self, actions: &mut Vec<PolyAction>) {
        let written = self.write_order.keys().next().copied();
        let cached = self.clock_hand().map(|page| self.read_cache[&page].stamp);
        match (written, cached) {
            (Some(written), Some(cached)) if cached < written => self.demote_cached(actions),
            (Some(_), _) => self.demote_written(actions),
            (None, _) => self.demote_cached(actions),
        }
    }

    /// Makes room for one more uncompressed page of either role by demoting the coldest of
    /// both. With no room for uncompressed pages at all nothing moves: the new page itself is
    /// compressed once inserted (by [`fit`](Self::fit)).
    fn make_uncompressed_room(&mut self, actions: &mut Vec<PolyAction>) {
        loop {
            let uncompressed = (self.write_cache.len() + self.read_cache.len()) as u64;
            if uncompressed == 0 || uncompressed < self.uncompressed_capacity() {
                return;
            }
            self.demote_coldest(actions);
        }
    }

    /// Inserts a write-cache page after making room: the least recently written goes first,
    /// then the coldest of both roles.
    fn insert_written(&mut self, page: u64, dirty: bool, actions: &mut Vec<PolyAction>) {
        if self.write_capacity() == 0 {
            // No write cache at all: the write goes straight through.
            if dirty {
                actions.push(PolyAction::WriteBack { page });
            }
            actions.push(PolyAction::Evict { page });
            return;
        }
        while self.write_cache.len() as u64 >= self.write_capacity() {
            self.demote_written(actions);
        }
        self.make_uncompressed_room(actions);
        let stamp = self.tick();
        self.write_cache.insert(page, Written { dirty, stamp });
        self.write_order.insert(stamp, page);
        if dirty {
            self.dirty_order.insert(stamp, page);
        }
        self.fit(actions);
    }

    /// Inserts a read-cache page after making room: Clock's victim goes first, then the
    /// coldest of both roles.
    fn insert_cached(&mut self, page: u64, actions: &mut Vec<PolyAction>) {
        if self.read_capacity() == 0 {
            return;
        }
        while self.read_cache.len() as u64 >= self.read_capacity() {
            self.demote_cached(actions);
        }
        self.make_uncompressed_room(actions);
        self.generations += 1;
        let generation = self.generations;
        let stamp = self.tick();
        self.read_cache.insert(
            page,
            Cached {
                referenced: false,
                stamp,
                generation,
            },
        );
        self.clock.push_back((page, generation));
        self.fit(actions);
    }

    /// A read-cache page is used: its reference bit is set for Clock and its stamp for the
    /// ranking.
    fn touch_cached(&mut self, page: u64) {
        let stamp = self.tick();
        if let Some(cached) = self.read_cache.get_mut(&page) {
            cached.referenced = true;
            cached.stamp = stamp;
        }
    }

    /// The least recently written write-cache page leaves its uncompressed slot: into the
    /// compressed store when it has room, else (written back first when dirty) out.
    fn demote_written(&mut self, actions: &mut Vec<PolyAction>) {
        let Some((&stamp, &page)) = self.write_order.iter().next() else {
            return;
        };
        self.write_order.remove(&stamp);
        let written = self
            .write_cache
            .remove(&page)
            .expect("ordered pages are cached");
        // A packed page keeps its place in the dirty order.
        if !self.pack(page, Some(written), actions) {
            if written.dirty {
                self.dirty_order.remove(&stamp);
                actions.push(PolyAction::WriteBack { page });
            }
            actions.push(PolyAction::Evict { page });
        }
    }

    /// Clock's victim leaves the read cache: compressed when the store has room, else dropped
    /// (read-cache pages are clean).
    fn demote_cached(&mut self, actions: &mut Vec<PolyAction>) {
        if let Some(page) = self.clock_hand() {
            self.clock.pop_front();
            self.read_cache.remove(&page);
            if !self.pack(page, None, actions) {
                actions.push(PolyAction::Evict { page });
            }
        }
    }

    /// Clock: moves the hand to the first page whose reference bit is clear and returns it,
    /// left under the hand; set bits are cleared as the hand passes, and stale entries of
    /// pages gone are dropped.
    fn clock_hand(&mut self) -> Option<u64> {
        while let Some(&(page, generation)) = self.clock.front() {
            let Some(cached) = self.read_cache.get_mut(&page) else {
                self.clock.pop_front();
                continue;
            };
            if cached.generation != generation {
                self.clock.pop_front();
                continue;
            }
            if cached.referenced {
                cached.referenced = false;
                self.clock.rotate_left(1);
                continue;
            }
            return Some(page);
        }
        None
    }

    /// Stores `page` compressed if the store can take it after making room from its own
    /// oldest entries; returns whether it did.
    fn pack(&mut self, page: u64, written: Option<Written>, actions: &mut Vec<PolyAction>) -> bool {
        let sectors = self
            .sectors_of
            .get(&page)
            .copied()
            .unwrap_or(SECTORS_PER_PAGE);
        if u64::from(sectors) > self.compressed_capacity_sectors() {
            return false;
        }
        while self.compressed_sectors + u64::from(sectors) > self.compressed_capacity_sectors() {
            self.evict_compressed(actions);
        }
        debug_assert!(
            !self.compressed.contains_key(&page),
            "page {page} compressed twice"
        );
        actions.push(PolyAction::Compress { page, sectors });
        let stamp = self.tick();
        self.compressed.insert(
            page,
            Packed {
                sectors,
                written,
                stamp,
            },
        );
        self.compressed_sectors += u64::from(sectors);
        self.compressed_order.insert(stamp, page);
        true
    }

    /// The oldest compressed page leaves the tier, written back first when dirty.
    fn evict_compressed(&mut self, actions: &mut Vec<PolyAction>) {
        if let Some((_, &page)) = self.compressed_order.iter().next() {
            self.evict_packed(page, actions);
        }
    }

    /// Compressed `page` leaves the tier, written back first when dirty.
    fn evict_packed(&mut self, page: u64, actions: &mut Vec<PolyAction>) {
        let packed = self
            .take_compressed(page)
            .expect("the compressed order lists compressed pages");
        if packed.written.is_some_and(|written| written.dirty) {
            actions.push(PolyAction::WriteBack { page });
        }
        actions.push(PolyAction::Evict { page });
    }

    /// Removes `page`'s compressed copy, if any.
    fn take_compressed(&mut self, page: u64) -> Option<Packed> {
        let packed = self.compressed.remove(&page)?;
        self.compressed_order.remove(&packed.stamp);
        if let Some(written) = packed.written.filter(|written| written.dirty) {
            self.dirty_order.remove(&written.stamp);
        }
        let sectors = u64::from(packed.sectors);
        // Counted when the page was packed: a wrapped count would make the store look full.
        debug_assert!(
            sectors <= self.compressed_sectors,
            "compressed sectors undercounted"
        );
        self.compressed_sectors = self.compressed_sectors.saturating_sub(sectors);
        Some(packed)
    }

    /// Checks that every page is in at most one place and that the orders and the sector
    /// count match the maps (for the model tests).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) -> Result<(), String> {
        for page in self.write_cache.keys() {
            if self.read_cache.contains_key(page) || self.compressed.contains_key(page) {
                return Err(format!("page {page} is in the write cache and elsewhere"));
            }
        }
        for page in self.read_cache.keys() {
            if self.compressed.contains_key(page) {
                return Err(format!("page {page} is in the read cache and compressed"));
            }
        }
        let ordered = |order: &BTreeMap<u64, u64>, len: usize| order.len() == len;
        let dirty = self.dirty_pages().len();
        if !ordered(&self.write_order, self.write_cache.len())
            || !ordered(&self.dirty_order, dirty)
            || !ordered(&self.compressed_order, self.compressed.len())
        {
            return Err("an order and its map disagree".into());
        }
        if (self.write_cache.len() + self.read_cache.len()) as u64 > self.uncompressed_capacity() {
            return Err("more uncompressed pages than the compressed store leaves room for".into());
        }
        let sectors: u64 = self.compressed.values().map(|p| u64::from(p.sectors)).sum();
        if sectors != self.compressed_sectors || sectors > self.compressed_capacity_sectors() {
            return Err(format!(
                "{sectors} sectors in use, counted {}, capacity {}",
                self.compressed_sectors,
                self.compressed_capacity_sectors()
            ));
        }
        let live = self
            .clock
            .iter()
            .filter(|(page, generation)| {
                self.read_cache
                    .get(page)
                    .is_some_and(|c| c.generation == *generation)
            })
            .count();
        if live != self.read_cache.len() {
            return Err(format!(
                "{live} live Clock entries for {} read-cache pages",
                self.read_cache.len()
            ));
        }
        Ok(())
    }

    /// Drops the oldest compressed page other than `keep` (written back first when dirty),
    /// for an executor whose store is shorter of room than the sectors counted (holes between
    /// sizes) while it places `keep`; false when there is none.
    pub fn shed_compressed(&mut self, keep: u64, actions: &mut Vec<PolyAction>) -> bool {
        let oldest = self.compressed_order.values().find(|&&page| page != keep);
        let Some(&page) = oldest else {
            return false;
        };
        self.evict_packed(page, actions);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knobs(read_share: f64, compressed_share: f64) -> Knobs {
        Knobs {
            read_share,
            compressed_share,
        }
    }

    #[test]
    fn the_tier_starts_as_write_cache_and_writes_back_what_it_revokes() {
        let mut tier = PolyTier::new(10);
        let mut actions = Vec::new();
        for page in 0..10 {
            tier.write(page, 4, &mut actions);
        }
        assert!(actions.is_empty(), "{actions:?}");
        assert_eq!(tier.occupancy(), (10, 0, 0));
        // Half the tier becomes read cache: the five least recently written go back first.
        tier.set_knobs(knobs(0.5, 0.0), &mut actions).unwrap();
        assert_eq!(
            actions,
            (0..5)
                .flat_map(|page| [PolyAction::WriteBack { page }, PolyAction::Evict { page }])
                .collect::<Vec<_>>()
        );
        assert_eq!(tier.dirty_pages(), (5..10).collect::<Vec<_>>());
        actions.clear();
        assert_eq!(tier.read(3, 4, &mut actions), Found::Miss);
        assert_eq!(actions, vec![PolyAction::ReadSsd { page: 3 }]);
        assert_eq!(tier.read(3, 4, &mut actions), Found::ReadCache);
        assert_eq!(tier.read(7, 4, &mut actions), Found::WriteCache);
    }

    #[test]
    fn compressed_pages_keep_their_role_and_come_back_on_a_hit() {
        let mut tier = PolyTier::new(4);
        let mut actions = Vec::new();
        tier.set_knobs(knobs(0.25, 0.5), &mut actions).unwrap();
        assert_eq!((tier.write_capacity(), tier.read_capacity()), (3, 1));
        assert_eq!(tier.uncompressed_capacity(), 2);
        assert_eq!(tier.compressed_capacity_sectors(), 16);
        tier.write(1, 2, &mut actions);
        tier.write(2, 2, &mut actions);
        tier.write(3, 2, &mut actions); // page 1, least recently written, is compressed
        assert_eq!(
            actions,
            vec![PolyAction::Compress {
                page: 1,
                sectors: 2
            }]
        );
        assert_eq!(tier.dirty_pages(), vec![1, 2, 3]);
        actions.clear();
        assert_eq!(
            tier.read(1, 2, &mut actions),
            Found::Compressed { persistent: true }
        );
        // Back in the write cache, page 2 (now the least recently written) compressed instead.
        assert_eq!(
            actions,
            vec![
                PolyAction::Decompress { page: 1 },
                PolyAction::Compress {
                    page: 2,
                    sectors: 2
                }
            ]
        );
        assert_eq!(tier.dirty_pages(), vec![1, 2, 3]);
    }

    /// §3.2: the pages compressed as the store grows are the ones used longest ago, whichever
    /// role they hold.
    #[test]
    fn one_ranking_over_both_roles_picks_what_is_compressed() {
        for writes_first in [true, false] {
            let mut tier = PolyTier::new(4);
            let mut actions = Vec::new();
            tier.set_knobs(knobs(0.5, 0.0), &mut actions).unwrap();
            let write = |tier: &mut PolyTier, actions: &mut Vec<PolyAction>| {
                tier.write(1, 2, actions);
                tier.write(2, 2, actions);
            };
            let read = |tier: &mut PolyTier, actions: &mut Vec<PolyAction>| {
                for page in [10, 11, 10, 11] {
                    tier.read(page, 2, actions);
                }
            };
            if writes_first {
                write(&mut tier, &mut actions);
                read(&mut tier, &mut actions);
            } else {
                read(&mut tier, &mut actions);
                write(&mut tier, &mut actions);
            }
            assert_eq!(tier.occupancy(), (2, 2, 0));
            actions.clear();
            tier.set_knobs(knobs(0.5, 0.5), &mut actions).unwrap();
            let colder = if writes_first { [1, 2] } else { [10, 11] };
            assert_eq!(
                actions,
                colder
                    .map(|page| PolyAction::Compress { page, sectors: 2 })
                    .to_vec(),
                "writes first: {writes_first}"
            );
        }
    }

    #[test]
    fn incompressible_pages_need_a_whole_page_of_sectors() {
        let mut tier = PolyTier::new(2);
        let mut actions = Vec::new();
        tier.set_knobs(knobs(0.0, 0.5), &mut actions).unwrap();
        tier.write(1, 8, &mut actions);
        tier.write(2, 8, &mut actions);
        tier.write(3, 8, &mut actions);
        // Page 2 pushes 1 into the store; page 3 pushes 2 in and 1 out, written back.
        assert_eq!(
            actions,
            vec![
                PolyAction::Compress {
                    page: 1,
                    sectors: 8
                },
                PolyAction::WriteBack { page: 1 },
                PolyAction::Evict { page: 1 },
                PolyAction::Compress {
                    page: 2,
                    sectors: 8
                },
            ]
        );
    }

    #[test]
    fn knobs_out_of_range_are_refused() {
        for (read, compressed) in [(-0.1, 0.0), (1.1, 0.0), (0.6, 1.5), (0.0, f64::NAN)] {
            let err = knobs(read, compressed).validate().unwrap_err().to_string();
            assert!(err.contains("expected"), "{err}");
        }
        assert!(PolyTier::new(4)
            .set_knobs(knobs(0.7, -0.7), &mut Vec::new())
            .is_err());
    }
}
