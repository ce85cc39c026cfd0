//! A cached volume: the engine's cache controller executing its plans on real storage (DESIGN.md
//! "One policy code, two executors"; issue 5, items 2 and 3; Orthus-CAS, seed 000 §4.4).
//!
//! Client requests are cut at cache-line boundaries and each piece is planned by the
//! [`CacheController`] exactly as in the simulator. The volume then moves the data: the plan's
//! reads first (the client's source, and dirty victims written back), then the lines that left
//! the cache are freed, then the plan's writes (installs, the client's data). A cache line is
//! tracked in 512-byte sectors, valid and dirty, as Open CAS does, so a 4 KiB write into a
//! 64 KiB line moves 4 KiB.
//!
//! Crash safety of write-back: sector data is written and persisted before the entry that makes
//! it valid or dirty; a dirty line's data reaches the backing store, durably, before its entry
//! says clean or its slot is freed; a freed slot's entry is persisted before the slot is reused.
//! A FLUSH persists both devices; on a cache that forgets (RAM) it first writes every dirty line
//! back. So what a completed FLUSH or a FUA write covered is found again by [`Volume::open`].
//! Clean sectors whose data the backing store may not hold durably yet (written through or
//! filled since its last flush) are recorded invalid on the device until the next flush, so a
//! crash that loses a backing write cannot leave the cache holding a different block.
//! Sectors are overwritten in place: a write interrupted by a machine crash (not by killing
//! the process, which leaves the mapping's stores in place) may leave a sector part old, part
//! new, 8 bytes at a time, as an unacknowledged write to PM without a BTT would.
//!
//! With throttled devices the data still moves at once; each plan's stages are timed on the
//! devices' models, and the answer is due when the reply stage completes.

use std::io;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use heterarchy_device::backend::{check_range, open_backend, Backend, Throttle};
use heterarchy_device::presets::resolve_device;
use heterarchy_engine::{CacheController, Controller, Feedback, IoKind, Plan, Reply, WriteMode};
use heterarchy_trace::generate::mix64;
use heterarchy_trace::{Op, Request};

use crate::config::VolumeConfig;
use crate::cutoff::SequentialCutoff;
use crate::layout::{runs, sector_bits, Geometry, SECTOR_BYTES};
use crate::slots::Slots;
use crate::stats::{Counters, StatsSource, VolumeStats};

/// Device numbers, as the controller numbers a one-tier hierarchy.
const CACHE: u8 = 0;
const BACKING: u8 = 1;

/// Zeroes for WRITE_ZEROES, one line at most.
static ZEROES: [u8; crate::layout::MAX_LINE_BYTES as usize] =
    [0; crate::layout::MAX_LINE_BYTES as usize];

/// A block volume with a cache in front of its backing store; shared by every connection.
pub struct Volume {
    name: String,
    size_bytes: u64,
    line_bytes: u32,
    epoch: Instant,
    throttled: bool,
    inner: Mutex<Inner>,
}

/// What the lock guards.
struct Inner {
    controller: CacheController,
    mode: WriteMode,
    cache: Box<dyn Backend>,
    backing: Box<dyn Backend>,
    slots: Slots,
    cutoff: SequentialCutoff,
    /// Per device (cache, backing), the model it is paced like.
    throttles: [Option<Throttle>; 2],
    plan: Plan,
    feedback: Feedback,
    counters: Counters,
    /// Lines written back by the current plan, to be marked clean once the backing store has
    /// them durably.
    written_back: Vec<u64>,
    /// A line's worth of bytes for write-backs and read-modify-writes.
    scratch: Vec<u8>,
    /// Shut down: every request is refused, so nothing is answered after the last clean.
    closed: bool,
}

/// One request's part within one cache line.
#[derive(Clone, Copy, Debug)]
struct Piece {
    key: u64,
    /// Byte offset within the line.
    start: u32,
    len: u32,
    /// Byte offset within the request.
    at: usize,
}

impl Piece {
    /// The whole sectors the piece touches, as a byte range of the line.
    fn sector_span(&self) -> (u32, u32) {
        let first = self.start / SECTOR_BYTES * SECTOR_BYTES;
        (
            first,
            (self.start + self.len).next_multiple_of(SECTOR_BYTES),
        )
    }
}

fn pieces(offset: u64, len: u64, line_bytes: u32) -> impl Iterator<Item = Piece> {
    let line = u64::from(line_bytes);
    let end = offset + len;
    let mut position = offset;
    std::iter::from_fn(move || {
        if position >= end {
            return None;
        }
        let key = position / line;
        let start = position % line;
        let piece_len = (line - start).min(end - position);
        let piece = Piece {
            key,
            start: start as u32,
            len: piece_len as u32,
            at: (position - offset) as usize,
        };
        position += piece_len;
        Some(piece)
    })
}

impl Volume {
    /// Opens a volume: the backing store, and the cache found again where it is persistent and
    /// was formatted for this backing store and line size; formatted afresh otherwise. A cache
    /// holding dirty lines under another format is refused unless `force` is set. Errors say
    /// which device and why.
    pub fn open(config: &VolumeConfig) -> Result<Volume, String> {
        config.validate()?;
        let backing = open_backend(&config.backing).map_err(|e| format!("backing: {e}"))?;
        let cache = open_backend(&config.cache).map_err(|e| format!("cache: {e}"))?;
        Volume::with_backends(config, cache, backing)
    }

    /// [`open`](Self::open) on storage already opened (the specs in `config` are not used):
    /// for storage of the caller's own, such as a crash-injecting wrapper. The volume's size is
    /// the backing store's, rounded down to whole 512-byte sectors.
    pub fn with_backends(
        config: &VolumeConfig,
        mut cache: Box<dyn Backend>,
        backing: Box<dyn Backend>,
    ) -> Result<Volume, String> {
        config.validate()?;
        let line_bytes = config.cache_line as u32;
        let geometry = Geometry::for_cache(cache.size_bytes(), line_bytes, backing.size_bytes())
            .map_err(|e| format!("cache: {e}"))?;
        let slots = find_or_format(cache.as_mut(), geometry, config.force)?;
        // Whole sectors only: a cached sector is read or written whole.
        let size_bytes = backing.size_bytes() / u64::from(SECTOR_BYTES) * u64::from(SECTOR_BYTES);
        if size_bytes == 0 {
            return Err(format!(
                "backing: {} holds no whole {SECTOR_BYTES}-byte sector",
                backing.describe()
            ));
        }
        let capacity = geometry.slot_count * u64::from(line_bytes);
        let seed = config
            .name
            .bytes()
            .fold(0, |hash, byte| mix64(hash ^ u64::from(byte)));
        let controller = CacheController::new(&config.caching, &[capacity], seed)
            .map_err(|e| e.to_string().replacen("cache.", "caching.", 1))?;
        let throttle = |name: &Option<String>, key: &str| -> Result<Option<Throttle>, String> {
            name.as_deref()
                .map(|name| {
                    resolve_device(name, None)
                        .map(|spec| Throttle::new(&spec))
                        .map_err(|e| format!("{key}: {e}"))
                })
                .transpose()
        };
        let throttles = [
            throttle(&config.cache_throttle, "cache_throttle")?,
            throttle(&config.backing_throttle, "backing_throttle")?,
        ];
        let mut inner = Inner {
            feedback: controller.feedback(),
            controller,
            mode: config.caching.mode,
            cache,
            backing,
            slots,
            cutoff: SequentialCutoff::new(&config.seq_cutoff),
            plan: Plan::new(),
            counters: Counters::default(),
            written_back: Vec::new(),
            scratch: vec![0; line_bytes as usize],
            closed: false,
            throttles,
        };
        inner.restore().map_err(|e| format!("cache: {e}"))?;
        Ok(Volume {
            name: config.name.clone(),
            size_bytes,
            line_bytes,
            epoch: Instant::now(),
            throttled: inner.throttles.iter().any(Option::is_some),
            inner: Mutex::new(inner),
        })
    }

    /// The export name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Size in bytes: the backing store's.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// True when answers wait for the devices' models.
    pub fn is_throttled(&self) -> bool {
        self.throttled
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The lock, for a client's request: refused once the volume is shut down.
    fn lock_open(&self) -> io::Result<MutexGuard<'_, Inner>> {
        let inner = self.lock();
        if inner.closed {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!("volume {} is shutting down", self.name),
            ));
        }
        Ok(inner)
    }

    /// Graceful shutdown: writes every dirty line back, makes both devices durable, and refuses
    /// every request from then on. Returns the lines written back.
    pub fn shut_down(&self) -> io::Result<u64> {
        let mut inner = self.lock();
        inner.closed = true;
        inner.clean_durably()
    }

    fn ns_since_epoch(&self, instant: Instant) -> u64 {
        instant.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    /// Reads `buf.len()` bytes at `offset`. Returns when the answer is due (`None`: now).
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<Option<Instant>> {
        check_range(self.size_bytes, offset, buf.len() as u64)?;
        let arrival = Instant::now();
        let now = self.ns_since_epoch(arrival);
        let mut inner = self.lock_open()?;
        let bypass = inner.sequential_bypass(offset, buf.len() as u64);
        let mut done = now;
        for piece in pieces(offset, buf.len() as u64, self.line_bytes) {
            let out = &mut buf[piece.at..piece.at + piece.len as usize];
            done = done.max(inner.read_piece(piece, out, now, bypass)?);
        }
        inner.counters.reads += 1;
        inner.counters.read_bytes += buf.len() as u64;
        Ok(self.answer(&mut inner, arrival, now, done, buf.len()))
    }

    /// Writes `data` at `offset`; with `fua`, durably before answering.
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<Option<Instant>> {
        self.write_with(offset, data.len() as u64, fua, |piece| {
            &data[piece.at..piece.at + piece.len as usize]
        })
    }

    /// Writes `len` zero bytes at `offset`.
    pub fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> io::Result<Option<Instant>> {
        self.write_with(offset, len, fua, |piece| &ZEROES[..piece.len as usize])
    }

    fn write_with<'a>(
        &self,
        offset: u64,
        len: u64,
        fua: bool,
        data: impl Fn(&Piece) -> &'a [u8],
    ) -> io::Result<Option<Instant>> {
        check_range(self.size_bytes, offset, len)?;
        let arrival = Instant::now();
        let now = self.ns_since_epoch(arrival);
        let mut inner = self.lock_open()?;
        let bypass = inner.sequential_bypass(offset, len);
        let mut done = now;
        for piece in pieces(offset, len, self.line_bytes) {
            done = done.max(inner.write_piece(piece, data(&piece), now, bypass)?);
        }
        inner.counters.writes += 1;
        inner.counters.write_bytes += len;
        if fua {
            inner.make_durable()?;
        }
        Ok(self.answer(&mut inner, arrival, now, done, len as usize))
    }

    /// Discards `len` bytes at `offset`: whole lines leave the cache unwritten and the backing
    /// store is told; parts of cached lines are kept (NBD lets a server ignore a trim).
    pub fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(self.size_bytes, offset, len)?;
        let mut inner = self.lock_open()?;
        let now = self.ns_since_epoch(Instant::now());
        for piece in pieces(offset, len, self.line_bytes) {
            inner.trim_piece(piece, now)?;
        }
        inner.counters.trims += 1;
        Ok(())
    }

    /// Makes every write answered so far durable (NBD_CMD_FLUSH).
    pub fn flush(&self) -> io::Result<()> {
        let mut inner = self.lock_open()?;
        inner.counters.flushes += 1;
        inner.make_durable()
    }

    /// Writes every dirty line back to the backing store and makes both durable (`heterarchy
    /// volume flush`). Returns the lines written back.
    pub fn clean(&self) -> io::Result<u64> {
        self.lock().clean_durably()
    }

    /// Runs the cleaner if due; returns how long until it wants to run again (`None`: until
    /// the next request).
    pub fn background(&self) -> io::Result<Option<std::time::Duration>> {
        let mut inner = self.lock();
        let now = self.ns_since_epoch(Instant::now());
        let next = inner.with_plan(|inner, plan| {
            let next = inner.controller.background(now, plan);
            inner.execute_cleaning(plan).map(|()| next)
        })?;
        Ok(next.map(|at| std::time::Duration::from_nanos(at.saturating_sub(now))))
    }

    /// Counters and state now.
    pub fn stats(&self) -> VolumeStats {
        let inner = self.lock();
        VolumeStats::gather(StatsSource {
            name: &self.name,
            mode: inner.mode,
            size_bytes: self.size_bytes,
            line_bytes: self.line_bytes,
            uptime_s: self.epoch.elapsed().as_secs_f64(),
            controller: &inner.controller,
            slots: &inner.slots,
            counters: &inner.counters,
            storage: [inner.cache.describe(), inner.backing.describe()],
        })
    }

    /// Reports the answer to the controller's tuner and says when it is due.
    fn answer(
        &self,
        inner: &mut Inner,
        arrival: Instant,
        now: u64,
        done: u64,
        bytes: usize,
    ) -> Option<Instant> {
        if inner.feedback.replies {
            let latency_ns = if self.throttled {
                done - now
            } else {
                arrival.elapsed().as_nanos() as u64
            };
            inner.controller.on_reply(&Reply {
                now_ns: now + latency_ns,
                latency_ns,
                bytes: bytes.min(u32::MAX as usize) as u32,
            });
        }
        (self.throttled && done > now).then(|| self.epoch + std::time::Duration::from_nanos(done))
    }
}

/// Reads the cache's superblock and table, or formats it.
fn find_or_format(
    cache: &mut dyn Backend,
    geometry: Geometry,
    force: bool,
) -> Result<Slots, String> {
    let io_error = |e: io::Error| format!("cache: {e}");
    if cache.is_persistent() {
        let mut superblock = [0u8; 64];
        cache.read_at(0, &mut superblock).map_err(io_error)?;
        match Geometry::decode(&superblock) {
            Some(found) if found == geometry => {
                return Slots::load(geometry, cache).map_err(io_error);
            }
            Some(found) if !force => {
                let dirty = Slots::load(found, cache).map_err(io_error)?.dirty_count();
                if dirty > 0 {
                    return Err(format!(
                        "cache: holds {dirty} dirty lines of a volume of {} bytes with {}-byte \
                         lines; serve it with those settings and flush it, or set force to \
                         discard them",
                        found.backing_bytes, found.line_bytes
                    ));
                }
            }
            _ => {}
        }
        let (table_start, table_len) = geometry.table_range();
        let zeroes = vec![0u8; 1 << 20];
        let mut offset = table_start;
        while offset < table_start + table_len {
            let chunk = (table_start + table_len - offset).min(zeroes.len() as u64);
            cache
                .write_at(offset, &zeroes[..chunk as usize])
                .map_err(io_error)?;
            offset += chunk;
        }
        cache.flush().map_err(io_error)?;
        cache.write_at(0, &geometry.encode()).map_err(io_error)?;
        cache.flush().map_err(io_error)?;
    }
    Ok(Slots::empty(geometry))
}

impl Inner {
    fn line_bytes(&self) -> u32 {
        self.slots.geometry().line_bytes
    }

    fn backing_offset(&self, key: u64, start: u32) -> u64 {
        key * u64::from(self.line_bytes()) + u64::from(start)
    }

    /// Gives the controller the lines the cache held when it last stopped.
    fn restore(&mut self) -> io::Result<()> {
        let line = self.line_bytes();
        let mut found: Vec<(u64, bool)> = self
            .slots
            .occupied()
            .map(|(key, slot)| (key, slot.dirty != 0))
            .collect();
        found.sort_unstable();
        for (key, dirty) in found {
            if !self.controller.restore_line(0, key, line, dirty, 0) {
                self.write_back(key)?;
                self.finish_write_backs()?;
                self.slots.free(key, self.cache.as_mut())?;
            }
        }
        self.counters.restored_lines = self.slots.len() as u64;
        if !self.mode.writes_back() {
            self.clean_all()?;
        }
        Ok(())
    }

    fn sequential_bypass(&mut self, offset: u64, len: u64) -> bool {
        let full = self.slots.free_count() == 0;
        let bypass = self.cutoff.bypass(offset, len, full);
        self.counters.cutoff_bypasses += u64::from(bypass);
        bypass
    }

    fn read_piece(
        &mut self,
        piece: Piece,
        out: &mut [u8],
        now: u64,
        bypass: bool,
    ) -> io::Result<u64> {
        if bypass && !self.controller.holds(0, piece.key) {
            self.backing_read(piece.key, piece.start, out)?;
            return Ok(self.time_single(BACKING, IoKind::Read, piece, now));
        }
        self.planned(Op::Read, piece, now, |inner, plan| {
            inner.execute_read(plan, piece, out)
        })
    }

    /// Has the controller plan `op` on the piece's line, carries the plan out with `execute`,
    /// and returns when its reply stage completes on the devices' models.
    fn planned(
        &mut self,
        op: Op,
        piece: Piece,
        now: u64,
        execute: impl FnOnce(&mut Inner, &Plan) -> io::Result<()>,
    ) -> io::Result<u64> {
        let request = Request {
            op,
            time_ns: now,
            ..Request::new(piece.key, self.line_bytes())
        };
        self.with_plan(|inner, plan| {
            inner.controller.plan(&request, now, plan);
            let result = execute(inner, plan);
            let done = inner.time_plan(plan, piece, now);
            result.map(|()| done)
        })
    }

    /// Lends the reused plan, cleared, to `work`.
    fn with_plan<T>(&mut self, work: impl FnOnce(&mut Inner, &mut Plan) -> T) -> T {
        let mut plan = std::mem::take(&mut self.plan);
        plan.clear();
        let result = work(self, &mut plan);
        self.plan = plan;
        result
    }

    fn execute_read(&mut self, plan: &Plan, piece: Piece, out: &mut [u8]) -> io::Result<()> {
        let mut source = BACKING;
        for op in plan.ops().iter().filter(|op| op.kind == IoKind::Read) {
            if op.key == piece.key {
                source = op.device;
            } else {
                self.write_back(op.key)?;
            }
        }
        self.free_departed(plan, true)?;
        // A hit whose sectors were not all cached fills the gaps (Open CAS's partial hit).
        let partly_from_backing = if source == CACHE {
            self.read_cached(piece.key, piece.start, out)?
        } else {
            self.backing_read(piece.key, piece.start, out)?;
            false
        };
        let installed = plan
            .ops()
            .iter()
            .any(|op| op.kind == IoKind::Write && op.device == CACHE && op.key == piece.key);
        let reads_change_nothing = matches!(self.mode, WriteMode::Wo | WriteMode::Pt);
        if installed || (partly_from_backing && !reads_change_nothing) {
            self.fill(piece.key, piece.start, out)?;
        }
        Ok(())
    }

    fn write_piece(
        &mut self,
        piece: Piece,
        data: &[u8],
        now: u64,
        bypass: bool,
    ) -> io::Result<u64> {
        if bypass && !self.controller.holds(0, piece.key) {
            self.backing_write(piece.key, piece.start, data)?;
            return Ok(self.time_single(BACKING, IoKind::Write, piece, now));
        }
        self.planned(Op::Write, piece, now, |inner, plan| {
            inner.execute_write(plan, piece, data)
        })
    }

    fn execute_write(&mut self, plan: &Plan, piece: Piece, data: &[u8]) -> io::Result<()> {
        for op in plan.ops().iter().filter(|op| op.kind == IoKind::Read) {
            if op.key != piece.key {
                self.write_back(op.key)?;
            }
        }
        self.free_departed(plan, true)?;
        let writes_to = |device: u8| {
            plan.ops()
                .iter()
                .any(|op| op.kind == IoKind::Write && op.device == device && op.key == piece.key)
        };
        let (to_cache, to_backing) = (writes_to(CACHE), writes_to(BACKING));
        let dirty = self.controller.is_dirty(0, piece.key);
        if to_cache {
            self.prepare_overwrite(piece, dirty)?;
        }
        if to_backing {
            self.backing_write(piece.key, piece.start, data)?;
        }
        if to_cache {
            self.write_cached(piece, data, dirty)?;
        }
        Ok(())
    }

    /// Before valid sectors of a persistent cache are overwritten in place, records a state
    /// that is right whichever copy a crash leaves: for a dirty write, the sectors marked dirty
    /// (their old data equals the backing store's, so writing it back is harmless); for a clean
    /// write, the sectors marked invalid (reads go to the backing store, written first). So a
    /// block never reads one thing after a restart and another once its line is evicted.
    fn prepare_overwrite(&mut self, piece: Piece, dirty: bool) -> io::Result<()> {
        if !self.cache.is_persistent() {
            return Ok(());
        }
        let Some(mut slot) = self.slots.get(piece.key) else {
            return Ok(());
        };
        let (first, end) = piece.sector_span();
        let overwritten = sector_bits(first, end - first) & slot.valid;
        if dirty {
            if overwritten & !slot.dirty == 0 {
                return Ok(());
            }
            slot.dirty |= overwritten;
        } else {
            if overwritten == 0 {
                return Ok(());
            }
            slot.valid &= !overwritten;
            slot.dirty &= !overwritten;
        }
        self.slots.update(piece.key, slot, self.cache.as_mut())
    }

    fn trim_piece(&mut self, piece: Piece, now: u64) -> io::Result<()> {
        let whole_line = piece.start == 0 && piece.len == self.line_bytes();
        if whole_line {
            self.planned(Op::Trim, piece, now, |inner, plan| {
                inner.free_departed(plan, false)
            })?;
        } else if self.slots.get(piece.key).is_some() {
            return Ok(());
        }
        let offset = self.backing_offset(piece.key, piece.start);
        self.backing.discard(offset, u64::from(piece.len))
    }

    /// Reads a piece from the cache: valid sectors from its slot, the rest from the backing
    /// store (a line is cached sector by sector). Returns whether the backing store gave any.
    fn read_cached(&mut self, key: u64, start: u32, out: &mut [u8]) -> io::Result<bool> {
        let Some(slot) = self.slots.get(key) else {
            self.backing_read(key, start, out)?;
            return Ok(true);
        };
        let wanted = sector_bits(start, out.len() as u32);
        let partial = wanted & !slot.valid != 0;
        if partial {
            self.backing_read(key, start, out)?;
        }
        let slot_offset = self.slots.geometry().slot_offset(slot.index);
        let end = start + out.len() as u32;
        for (first, count) in runs(slot.valid & wanted) {
            let from = (first * SECTOR_BYTES).max(start);
            let to = ((first + count) * SECTOR_BYTES).min(end);
            let window = &mut out[(from - start) as usize..(to - start) as usize];
            self.cache.read_at(slot_offset + u64::from(from), window)?;
            self.counters.device_read_bytes[CACHE as usize] += window.len() as u64;
        }
        Ok(partial)
    }

    /// Stores the whole sectors of `data` (the line's current contents at `start`) that the
    /// slot does not hold yet; never over valid sectors, which may be newer.
    fn fill(&mut self, key: u64, start: u32, data: &[u8]) -> io::Result<()> {
        let whole = whole_sector_bits(start, data.len() as u32);
        let Some(mut slot) = self.slots.get(key).or_else(|| self.slots.allocate(key)) else {
            return Ok(());
        };
        let missing = whole & !slot.valid;
        if missing == 0 {
            return Ok(());
        }
        let slot_offset = self.slots.geometry().slot_offset(slot.index);
        for (first, count) in runs(missing) {
            let from = first * SECTOR_BYTES;
            let bytes =
                &data[(from - start) as usize..((first + count) * SECTOR_BYTES - start) as usize];
            self.cache.write_at(slot_offset + u64::from(from), bytes)?;
            self.cache
                .persist(slot_offset + u64::from(from), bytes.len() as u64)?;
            self.counters.device_write_bytes[CACHE as usize] += bytes.len() as u64;
        }
        slot.valid |= missing;
        if self.cache.is_persistent() {
            slot.unflushed |= missing;
        }
        self.slots.update(key, slot, self.cache.as_mut())
    }

    /// Writes a client's piece into the cache, dirty or not; partial sectors at its edges are
    /// completed from the line's current contents first.
    fn write_cached(&mut self, piece: Piece, data: &[u8], dirty: bool) -> io::Result<()> {
        let Some(mut slot) = self
            .slots
            .get(piece.key)
            .or_else(|| self.slots.allocate(piece.key))
        else {
            // The slot map disagrees with the controller: keep the data safe below.
            return self.backing_write(piece.key, piece.start, data);
        };
        let (first, end) = piece.sector_span();
        let slot_offset = self.slots.geometry().slot_offset(slot.index);
        if first == piece.start && end == piece.start + piece.len {
            self.cache.write_at(slot_offset + u64::from(first), data)?;
        } else {
            let mut line = std::mem::take(&mut self.scratch);
            let window = &mut line[first as usize..end as usize];
            self.read_cached(piece.key, first, window)?;
            let at = (piece.start - first) as usize;
            window[at..at + data.len()].copy_from_slice(data);
            let result = self.cache.write_at(slot_offset + u64::from(first), window);
            self.scratch = line;
            result?;
        }
        self.cache
            .persist(slot_offset + u64::from(first), u64::from(end - first))?;
        self.counters.device_write_bytes[CACHE as usize] += u64::from(end - first);
        let bits = sector_bits(first, end - first);
        slot.valid |= bits;
        if dirty {
            slot.dirty |= bits;
            slot.unflushed &= !bits;
        } else if self.cache.is_persistent() {
            slot.unflushed |= bits;
        }
        self.slots.update(piece.key, slot, self.cache.as_mut())
    }

    fn backing_read(&mut self, key: u64, start: u32, out: &mut [u8]) -> io::Result<()> {
        let offset = self.backing_offset(key, start);
        self.counters.device_read_bytes[BACKING as usize] += out.len() as u64;
        self.backing.read_at(offset, out)
    }

    fn backing_write(&mut self, key: u64, start: u32, data: &[u8]) -> io::Result<()> {
        let offset = self.backing_offset(key, start);
        self.counters.device_write_bytes[BACKING as usize] += data.len() as u64;
        self.backing.write_at(offset, data)
    }

    /// Copies a line's dirty sectors to the backing store; its entry says clean only after
    /// [`finish_write_backs`](Self::finish_write_backs).
    fn write_back(&mut self, key: u64) -> io::Result<()> {
        let Some(slot) = self.slots.get(key) else {
            return Ok(());
        };
        if slot.dirty == 0 || self.written_back.contains(&key) {
            return Ok(());
        }
        let slot_offset = self.slots.geometry().slot_offset(slot.index);
        let mut line = std::mem::take(&mut self.scratch);
        for (first, count) in runs(slot.dirty) {
            let (from, bytes) = (first * SECTOR_BYTES, count * SECTOR_BYTES);
            let window = &mut line[..bytes as usize];
            self.cache.read_at(slot_offset + u64::from(from), window)?;
            self.counters.device_read_bytes[CACHE as usize] += u64::from(bytes);
            self.backing_write(key, from, window)?;
        }
        self.scratch = line;
        self.written_back.push(key);
        self.counters.writebacks += 1;
        Ok(())
    }

    /// Makes the write-backs durable below, then records their lines clean.
    fn finish_write_backs(&mut self) -> io::Result<()> {
        if self.written_back.is_empty() {
            return Ok(());
        }
        self.backing.flush()?;
        for key in std::mem::take(&mut self.written_back) {
            if let Some(mut slot) = self.slots.get(key) {
                slot.dirty = 0;
                self.slots.update(key, slot, self.cache.as_mut())?;
            }
        }
        Ok(())
    }

    /// Frees the slots of lines that left the cache, writing back any dirty sectors they still
    /// hold first when `keep_dirty_data` (a partial write invalidating a dirty line must not lose
    /// its other sectors; a trim means to).
    fn free_departed(&mut self, plan: &Plan, keep_dirty_data: bool) -> io::Result<()> {
        if keep_dirty_data {
            for &(_, key) in plan.departures() {
                self.write_back(key)?;
            }
        }
        self.finish_write_backs()?;
        for &(_, key) in plan.departures() {
            self.slots.free(key, self.cache.as_mut())?;
        }
        Ok(())
    }

    /// Carries out a cleaning plan: every line it reads from the cache is written back.
    fn execute_cleaning(&mut self, plan: &Plan) -> io::Result<()> {
        for op in plan.ops().iter().filter(|op| op.kind == IoKind::Read) {
            self.write_back(op.key)?;
        }
        self.finish_write_backs()
    }

    /// Writes every dirty line back.
    fn clean_all(&mut self) -> io::Result<u64> {
        self.with_plan(|inner, plan| {
            let lines = inner.controller.flush(plan) as u64;
            inner.execute_cleaning(plan).map(|()| lines)
        })
    }

    /// Writes every dirty line back, then makes everything durable; returns the lines.
    fn clean_durably(&mut self) -> io::Result<u64> {
        let lines = self.clean_all()?;
        self.make_durable()?;
        Ok(lines)
    }

    /// Everything answered so far survives a crash from now on.
    fn make_durable(&mut self) -> io::Result<()> {
        if !self.cache.is_persistent() && self.controller.stats().dirty_lines > 0 {
            self.clean_all()?;
        }
        self.cache.flush()?;
        self.backing.flush()?;
        self.slots.settle(self.cache.as_mut())
    }

    /// When a plan's reply stage completes on the devices' models (at once for devices not
    /// throttled), reporting device operations to a tuner that measures them.
    fn time_plan(&mut self, plan: &Plan, piece: Piece, now: u64) -> u64 {
        if self.throttles.iter().all(Option::is_none) {
            return now;
        }
        let mut stage_start = now;
        let mut reply_done = now;
        for stage in 0..plan.stage_count() {
            let mut stage_end = stage_start;
            for op in plan.stage(stage) {
                let (offset, bytes) = if op.key == piece.key {
                    (
                        self.device_offset(op.device, op.key, piece.start),
                        piece.len,
                    )
                } else {
                    (self.device_offset(op.device, op.key, 0), self.line_bytes())
                };
                let done = match &mut self.throttles[op.device as usize] {
                    Some(throttle) => throttle.complete_ns(stage_start, op.kind, offset, bytes),
                    None => stage_start,
                };
                if self.feedback.device_ops {
                    self.controller
                        .on_device_op(op.device, bytes, done - stage_start);
                }
                stage_end = stage_end.max(done);
            }
            stage_start = stage_end;
            if stage < plan.reply_after() {
                reply_done = stage_end;
            }
        }
        reply_done
    }

    fn time_single(&mut self, device: u8, kind: IoKind, piece: Piece, now: u64) -> u64 {
        let offset = self.device_offset(device, piece.key, piece.start);
        match &mut self.throttles[device as usize] {
            Some(throttle) => throttle.complete_ns(now, kind, offset, piece.len),
            None => now,
        }
    }

    fn device_offset(&self, device: u8, key: u64, start: u32) -> u64 {
        if device == CACHE {
            let index = self.slots.get(key).map_or(0, |slot| slot.index);
            self.slots.geometry().slot_offset(index) + u64::from(start)
        } else {
            self.backing_offset(key, start)
        }
    }
}

/// The sectors that `len` bytes at `start` cover whole.
fn whole_sector_bits(start: u32, len: u32) -> u128 {
    let first = start.next_multiple_of(SECTOR_BYTES);
    let end = (start + len) / SECTOR_BYTES * SECTOR_BYTES;
    if end <= first {
        0
    } else {
        sector_bits(first, end - first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_cut_at_line_boundaries() {
        let cut: Vec<(u64, u32, u32, usize)> = pieces(60 * 1024, 72 * 1024, 65_536)
            .map(|p| (p.key, p.start, p.len, p.at))
            .collect();
        assert_eq!(
            cut,
            [
                (0, 61_440, 4096, 0),
                (1, 0, 65_536, 4096),
                (2, 0, 4096, 69_632)
            ]
        );
        assert_eq!(pieces(0, 0, 4096).count(), 0);
    }

    #[test]
    fn only_whole_sectors_are_filled() {
        assert_eq!(whole_sector_bits(0, 1024), 0b11);
        assert_eq!(whole_sector_bits(100, 1000), 0b10);
        assert_eq!(whole_sector_bits(100, 200), 0);
    }
}
