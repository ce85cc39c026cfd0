//! The live PolyEMT device: a memory tier (persistent memory, `region.rs`) in front of a
//! backing store (the SSD), its pages placed by `engine::poly`'s tier — the decisions the timed
//! simulator runs — and the knobs moved by the same search, window by window, on a background
//! thread that also writes dirty pages back.
//!
//! Requests are cut into 4 KiB pages, each decided and carried out under one lock: the tier
//! decides, then its actions are carried out in order (read the SSD, compress a page into the
//! heap, decompress one, write one back, free one), then the requested page is placed. A write
//! is persistent when it returns: its page and record are persisted in the tier, or, with no
//! write cache, written through to the backing store (made durable by a flush or FUA).
//!
//! How a block device maps the paper's design (§4): the paper's application maps a file and
//! persists with `msync`; its write cache sits below the file system and its memory role is
//! handed to the buffer manager. Here the client's reads and writes are the block I/O, the
//! write-cache role absorbs writes persistently, and the read-cache role is a volatile cache of
//! the same memory — what the host's page cache would gain from that memory, kept in the
//! device.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use heterarchy_device::backend::{check_range, Backend};
use heterarchy_device::codec::{Codec, PAGE_BYTES, SECTORS_PER_PAGE};
use heterarchy_engine::poly::{
    Found, KnobSearch, Knobs, PolyAction, PolyTier, SearchConfig, Window,
};
use rustc_hash::{FxHashMap, FxHashSet};

use super::region::Region;
use crate::device::for_each_block;

/// Dirty pages the background thread writes back between two flushes of the backing store.
const WRITE_BACK_BATCH: usize = 16;
/// How long the background thread sleeps with nothing dirty.
const IDLE_WAIT: Duration = Duration::from_millis(20);

/// How the tier's knobs are set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PolyKnobs {
    /// Fixed shares (a baseline, or a known good split).
    Fixed(Knobs),
    /// The online search, one step per measurement window (seed 004 §3).
    Search {
        config: SearchConfig,
        interval: Duration,
    },
}

/// How a PolyEMT device is built.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PolyOptions {
    pub codec: Codec,
    pub knobs: PolyKnobs,
}

/// Where a page of the tier is in the heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Place {
    first: u64,
    sectors: u16,
    /// Bytes of data (a compressed page's exact length).
    length: u16,
    compressed: bool,
    /// It has a record (a write-cache page).
    recorded: bool,
}

/// Counters for stats and the search.
#[derive(Debug, Default)]
struct Counters {
    ops: AtomicU64,
    ssd_reads: AtomicU64,
    write_backs: AtomicU64,
}

/// What one lock guards.
struct State {
    tier: PolyTier,
    region: Region,
    places: FxHashMap<u64, Place>,
    /// Each page's compressed size, as last measured.
    sectors: FxHashMap<u64, u16>,
    actions: Vec<PolyAction>,
    /// Pages read or decompressed by this request's actions, not yet placed.
    staged: FxHashMap<u64, Vec<u8>>,
    /// Pages the tier gave up while this request's actions were carried out, to make room in
    /// the heap: the actions still to come on them were decided before and are stale.
    shed: FxHashSet<u64>,
    /// Whether pages were written to the backing store since it was last flushed.
    unflushed: bool,
}

impl State {
    /// Forgets what one request's actions staged and shed.
    fn request_done(&mut self) {
        self.staged.clear();
        self.shed.clear();
    }
}

struct Shared {
    backing: Box<dyn Backend>,
    size_bytes: u64,
    codec: Codec,
    recovered: (u64, u64),
    state: Mutex<State>,
    wake: Condvar,
    stop: AtomicBool,
    counters: Counters,
}

/// A PolyEMT device; see the module docs.
pub struct PolyDevice {
    shared: Arc<Shared>,
    background: Option<JoinHandle<()>>,
}

/// What a PolyEMT device reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PolyStats {
    pub knobs: Knobs,
    pub write_cache_pages: usize,
    pub read_cache_pages: usize,
    pub compressed_pages: usize,
    pub dirty_pages: usize,
    pub ssd_reads: u64,
    pub write_backs: u64,
    /// Pages recovered from the tier at open and written to the backing store, and how many
    /// of them were compressed.
    pub recovered_pages: u64,
    pub recovered_compressed_pages: u64,
}

impl PolyDevice {
    /// Opens `memory` as the tier in front of `backing`. Write-cache pages a previous run left
    /// in `memory` are written to `backing` first (recovery), and the tier starts empty.
    pub fn open(
        backing: Box<dyn Backend>,
        memory: Box<dyn Backend>,
        options: PolyOptions,
    ) -> io::Result<PolyDevice> {
        let invalid = |message: String| io::Error::new(io::ErrorKind::InvalidInput, message);
        if !memory.is_persistent() {
            return Err(invalid(format!(
                "{}: the write cache must be persistent (pmem:PATH:SIZE or file:PATH:SIZE)",
                memory.describe()
            )));
        }
        let (mut region, survivors) = Region::open(memory)?;
        let mut page = Vec::with_capacity(PAGE_BYTES);
        for (record, data) in &survivors {
            let data = if record.compressed {
                options
                    .codec
                    .decompress(data, &mut page)
                    .map_err(|e| invalid(format!("recovering page {}: {e}", record.page)))?;
                &page[..]
            } else {
                &data[..PAGE_BYTES]
            };
            backing.write_at(record.page * PAGE_BYTES as u64, data)?;
        }
        backing.flush()?;
        // Only now, with every survivor durable on the backing store, may the tier forget them.
        region.format()?;
        let mut tier = PolyTier::new(region.pages());
        let (start, search) = match options.knobs {
            PolyKnobs::Fixed(knobs) => (knobs, None),
            PolyKnobs::Search { config, interval } => (
                Knobs::WRITE_CACHE,
                Some((
                    KnobSearch::new(config).map_err(|e| invalid(e.to_string()))?,
                    interval,
                )),
            ),
        };
        tier.set_knobs(start, &mut Vec::new())
            .map_err(|e| invalid(e.to_string()))?;
        let size_bytes = backing.size_bytes() / PAGE_BYTES as u64 * PAGE_BYTES as u64;
        let shared = Arc::new(Shared {
            backing,
            size_bytes,
            codec: options.codec,
            recovered: (
                survivors.len() as u64,
                survivors.iter().filter(|(r, _)| r.compressed).count() as u64,
            ),
            state: Mutex::new(State {
                tier,
                region,
                places: FxHashMap::default(),
                sectors: FxHashMap::default(),
                actions: Vec::new(),
                staged: FxHashMap::default(),
                shed: FxHashSet::default(),
                unflushed: false,
            }),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            counters: Counters::default(),
        });
        let background = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("poly-background".into())
                .spawn(move || shared.background(search))?
        };
        Ok(PolyDevice {
            shared,
            background: Some(background),
        })
    }

    /// Bytes the device offers: the backing store's, in whole pages.
    pub fn size_bytes(&self) -> u64 {
        self.shared.size_bytes
    }

    /// Reads `buf.len()` bytes at `offset`.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.shared.size_bytes, offset, buf.len() as u64)?;
        let mut state = self.shared.lock();
        for_each_block(offset, buf.len(), |page, at, range| {
            let data = self.shared.read_page(&mut state, page)?;
            buf[range.clone()].copy_from_slice(&data[at..at + range.len()]);
            Ok(())
        })?;
        self.shared.counters.ops.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Writes `data` at `offset`; persistent in the tier when it returns, or written through
    /// (durable with `fua` or the next flush) when the tier has no write cache.
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        check_range(self.shared.size_bytes, offset, data.len() as u64)?;
        let mut state = self.shared.lock();
        for_each_block(offset, data.len(), |page, at, range| {
            let mut bytes = if range.len() == PAGE_BYTES {
                vec![0u8; PAGE_BYTES]
            } else {
                self.shared.read_page(&mut state, page)?
            };
            bytes[at..at + range.len()].copy_from_slice(&data[range]);
            self.shared.write_page(&mut state, page, bytes)
        })?;
        if fua && state.unflushed {
            self.shared.backing.flush()?;
            state.unflushed = false;
        }
        drop(state);
        self.shared.counters.ops.fetch_add(1, Ordering::Relaxed);
        self.shared.wake.notify_one();
        Ok(())
    }

    /// Makes every write durable: written-through pages reach the backing store's media.
    pub fn flush(&self) -> io::Result<()> {
        let mut state = self.shared.lock();
        self.shared.backing.flush()?;
        state.unflushed = false;
        Ok(())
    }

    /// Sets the knobs (from an operator, or a test); the search, if any, goes on from there.
    pub fn set_knobs(&self, knobs: Knobs) -> io::Result<()> {
        let mut state = self.shared.lock();
        self.shared.apply_knobs(&mut state, knobs)
    }

    /// What the tier holds and has done.
    pub fn stats(&self) -> PolyStats {
        let state = self.shared.lock();
        let (write_cache_pages, read_cache_pages, compressed_pages) = state.tier.occupancy();
        PolyStats {
            knobs: state.tier.knobs(),
            write_cache_pages,
            read_cache_pages,
            compressed_pages,
            dirty_pages: state.tier.dirty_count(),
            ssd_reads: self.shared.counters.ssd_reads.load(Ordering::Relaxed),
            write_backs: self.shared.counters.write_backs.load(Ordering::Relaxed),
            recovered_pages: self.shared.recovered.0,
            recovered_compressed_pages: self.shared.recovered.1,
        }
    }
}

impl Drop for PolyDevice {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.wake.notify_all();
        if let Some(background) = self.background.take() {
            let _ = background.join();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the tier as it was decided; carry on.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The compressed size of `data` in sectors, and its compressed bytes.
    fn compress(&self, data: &[u8]) -> (u16, Vec<u8>) {
        let mut out = Vec::with_capacity(PAGE_BYTES);
        let sectors = self.codec.compress(data, &mut out);
        (sectors, out)
    }

    /// `page`'s data: the tier's copy (a read decision, carried out) or the backing store's.
    fn read_page(&self, state: &mut State, page: u64) -> io::Result<Vec<u8>> {
        let hint = state
            .sectors
            .get(&page)
            .copied()
            .unwrap_or(SECTORS_PER_PAGE);
        let mut actions = std::mem::take(&mut state.actions);
        actions.clear();
        let found = state.tier.read(page, hint, &mut actions);
        let outcome = self.carry_out(state, &actions);
        state.actions = actions;
        outcome?;
        let data = match found {
            Found::WriteCache | Found::ReadCache => self.read_place(state, page)?,
            Found::Compressed { .. } | Found::Miss => {
                let data = state
                    .staged
                    .remove(&page)
                    .expect("a compressed hit or a miss stages its page");
                self.place(state, page, &data)?;
                data
            }
        };
        state.request_done();
        Ok(data)
    }

    /// Writes a whole page: into the write cache (persisted with its record), or through to
    /// the backing store.
    fn write_page(&self, state: &mut State, page: u64, data: Vec<u8>) -> io::Result<()> {
        let (sectors, _) = self.compress(&data);
        state.sectors.insert(page, sectors);
        state.staged.insert(page, data);
        let mut actions = std::mem::take(&mut state.actions);
        actions.clear();
        state.tier.write(page, sectors, &mut actions);
        let outcome = self.carry_out(state, &actions);
        state.actions = actions;
        outcome?;
        if let Some(data) = state.staged.remove(&page) {
            self.place(state, page, &data)?;
        }
        state.request_done();
        Ok(())
    }

    /// Puts `page`'s data where the tier now has it, uncompressed, replacing any older copy.
    fn place(&self, state: &mut State, page: u64, data: &[u8]) -> io::Result<()> {
        let persistent = match state.tier.locate(page) {
            Found::WriteCache => true,
            Found::ReadCache => false,
            // Compressed by this request's own actions: that copy stands.
            Found::Compressed { .. } => return Ok(()),
            Found::Miss => return self.drop_place(state, page),
        };
        let first = self.allocate(state, page, SECTORS_PER_PAGE)?;
        state.region.write(first, data, persistent)?;
        if persistent {
            state.region.write_record(first, page, false, data)?;
        }
        let old = state.places.insert(
            page,
            Place {
                first,
                sectors: SECTORS_PER_PAGE,
                length: PAGE_BYTES as u16,
                compressed: false,
                recorded: persistent,
            },
        );
        self.release(state, old)
    }

    /// Frees `page`'s copy in the heap, if it has one.
    fn drop_place(&self, state: &mut State, page: u64) -> io::Result<()> {
        let old = state.places.remove(&page);
        self.release(state, old)
    }

    /// Clears an old copy's record (a newer one is persisted, or its data is on the backing
    /// store) and frees its sectors.
    fn release(&self, state: &mut State, place: Option<Place>) -> io::Result<()> {
        if let Some(place) = place {
            if place.recorded {
                state.region.clear_record(place.first)?;
            }
            state.region.release(place.first, place.sectors);
        }
        Ok(())
    }

    /// A run of `sectors` in the heap for `page`; when holes leave none long enough, the tier
    /// gives up its oldest compressed pages but `page` until one is.
    fn allocate(&self, state: &mut State, page: u64, sectors: u16) -> io::Result<u64> {
        loop {
            if let Some(first) = state.region.allocate(sectors) {
                return Ok(first);
            }
            let mut actions = Vec::new();
            if !state.tier.shed_compressed(page, &mut actions) {
                return Err(io::Error::other(format!(
                    "the tier's heap has no run of {sectors} sectors"
                )));
            }
            self.carry_out(state, &actions)?;
            state
                .shed
                .extend(actions.iter().filter_map(|action| match action {
                    PolyAction::Evict { page } => Some(*page),
                    _ => None,
                }));
        }
    }

    /// `page`'s data from its place in the heap, decompressed when it is compressed.
    fn read_place(&self, state: &State, page: u64) -> io::Result<Vec<u8>> {
        let place = *state
            .places
            .get(&page)
            .ok_or_else(|| io::Error::other(format!("page {page} has no place in the tier")))?;
        let mut bytes = vec![0u8; usize::from(place.length)];
        state.region.read(place.first, &mut bytes)?;
        if !place.compressed {
            return Ok(bytes);
        }
        let mut page_bytes = Vec::with_capacity(PAGE_BYTES);
        self.codec
            .decompress(&bytes, &mut page_bytes)
            .map_err(|e| io::Error::other(format!("page {page} in the tier: {e}")))?;
        Ok(page_bytes)
    }

    /// `page`'s latest data in the tier: staged by this request, or in its place.
    fn current(&self, state: &State, page: u64) -> io::Result<Vec<u8>> {
        match state.staged.get(&page) {
            Some(data) => Ok(data.clone()),
            None => self.read_place(state, page),
        }
    }

    /// Carries out the tier's decisions in order.
    fn carry_out(&self, state: &mut State, actions: &[PolyAction]) -> io::Result<()> {
        for action in actions {
            let (PolyAction::ReadSsd { page }
            | PolyAction::WriteBack { page }
            | PolyAction::Compress { page, .. }
            | PolyAction::Decompress { page }
            | PolyAction::Evict { page }) = *action;
            if state.shed.contains(&page) {
                continue;
            }
            match *action {
                PolyAction::ReadSsd { page } => {
                    let mut data = vec![0u8; PAGE_BYTES];
                    self.backing.read_at(page * PAGE_BYTES as u64, &mut data)?;
                    self.counters.ssd_reads.fetch_add(1, Ordering::Relaxed);
                    let (sectors, _) = self.compress(&data);
                    state.sectors.insert(page, sectors);
                    state.staged.insert(page, data);
                }
                PolyAction::Decompress { page } => {
                    // Placed uncompressed by the caller, once the actions after this one have
                    // made room; the compressed copy goes when the new one stands.
                    let data = self.read_place(state, page)?;
                    state.staged.insert(page, data);
                }
                PolyAction::Compress { page, .. } => {
                    // Staged data stays: `place` leaves the compressed copy standing.
                    let data = self.current(state, page)?;
                    let (sectors, bytes) = self.compress(&data);
                    let persistent =
                        state.tier.locate(page) == Found::Compressed { persistent: true };
                    let (stored, compressed) = if sectors < SECTORS_PER_PAGE {
                        (bytes, true)
                    } else {
                        (data, false)
                    };
                    let first = self.allocate(state, page, sectors)?;
                    state.region.write(first, &stored, persistent)?;
                    if persistent {
                        state
                            .region
                            .write_record(first, page, compressed, &stored)?;
                    }
                    let old = state.places.insert(
                        page,
                        Place {
                            first,
                            sectors,
                            length: stored.len() as u16,
                            compressed,
                            recorded: persistent,
                        },
                    );
                    self.release(state, old)?;
                }
                PolyAction::WriteBack { page } => {
                    let data = self.current(state, page)?;
                    self.backing.write_at(page * PAGE_BYTES as u64, &data)?;
                    self.counters.write_backs.fetch_add(1, Ordering::Relaxed);
                    state.unflushed = true;
                }
                PolyAction::Evict { page } => {
                    // A dirty page was written back just before: durable before its record
                    // goes.
                    if state.unflushed && state.places.get(&page).is_some_and(|p| p.recorded) {
                        self.backing.flush()?;
                        state.unflushed = false;
                    }
                    self.drop_place(state, page)?;
                }
            }
        }
        Ok(())
    }

    /// Applies knobs: the revoked pages are written back, compressed or freed as the tier says.
    fn apply_knobs(&self, state: &mut State, knobs: Knobs) -> io::Result<()> {
        let mut actions = Vec::new();
        state
            .tier
            .set_knobs(knobs, &mut actions)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let outcome = self.carry_out(state, &actions);
        state.request_done();
        outcome
    }

    /// Writes back the least recently written dirty pages, a batch at a time, then makes them
    /// durable; returns how many.
    fn write_back_batch(&self) -> io::Result<usize> {
        let mut state = self.lock();
        let mut actions = Vec::new();
        let count = state.tier.write_back(WRITE_BACK_BATCH, &mut actions);
        let outcome = self.carry_out(&mut state, &actions);
        state.request_done();
        outcome?;
        if state.unflushed {
            self.backing.flush()?;
            state.unflushed = false;
        }
        Ok(count)
    }

    /// The background thread: write-back while pages are dirty, and a search step at the end
    /// of every window.
    fn background(&self, mut search: Option<(KnobSearch, Duration)>) {
        let clock = Instant::now();
        let now_ns = || clock.elapsed().as_nanos() as u64;
        let mut window = Window::new(now_ns());
        while !self.stop.load(Ordering::SeqCst) {
            let wrote = self.write_back_batch().unwrap_or_else(|e| {
                // The pages stay dirty in the tier: the next batch tries them again.
                eprintln!("heterarchy: poly write-back: {e}");
                0
            });
            if let Some((search, interval)) = search.as_mut() {
                let ops = self.counters.ops.load(Ordering::Relaxed);
                let interval_ns = interval.as_nanos() as u64;
                if let Some(throughput) = window.observe(now_ns(), ops, interval_ns) {
                    let step = search.observe(throughput);
                    // The trajectory, a line a window (Fig 13's steps), for the operator.
                    eprintln!(
                        "heterarchy: poly window: {throughput:.0} ops/s at read {:.2} \
                         compressed {:.2}; next read {:.2} compressed {:.2} ({:?}{})",
                        step.measured.read_share,
                        step.measured.compressed_share,
                        step.next.read_share,
                        step.next.compressed_share,
                        step.phase,
                        if step.restarted { ", restarted" } else { "" }
                    );
                    let mut state = self.lock();
                    if let Err(e) = self.apply_knobs(&mut state, step.next) {
                        // A backing store that failed a write-back; keep serving.
                        eprintln!("heterarchy: poly knobs: {e}");
                    }
                    drop(state);
                    window = Window::new(now_ns());
                }
            }
            if wrote == 0 {
                let state = self.lock();
                let _ = self.wake.wait_timeout(state, IDLE_WAIT);
            }
        }
    }
}
