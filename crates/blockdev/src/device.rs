//! The staged device: requests cut into 4 KiB blocks, each decided by the staging table under
//! one short lock and carried out outside it (docs/architecture.md, "Staging caches").
//!
//! Differences from Caiti in the kernel (seed 001 §3): the table is one lock, not a lock per
//! set, held only while deciding or reporting (a few hundred nanoseconds); a thread that must
//! wait (a block being written, no slot to be had) sleeps on a condition variable until the
//! table changes; evictors are threads of their own, woken when work arrives and none is awake.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use heterarchy_device::backend::{check_range, Backend};
use heterarchy_engine::staging::{
    DiscardStep, FlushStep, ReadStep, Staging, StagingConfig, StagingScheme, StagingStats, Victim,
    WriteOutcome, WriteStep,
};

use crate::slots::SlotBuffers;

/// The block and slot size (seed 001 §4.1: 4 KiB).
pub const BLOCK_BYTES: usize = 4096;

/// How long a background thread waits after a failed write-back before the next.
const RETRY_AFTER_ERROR: Duration = Duration::from_millis(10);

/// How a staged device is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StagedOptions {
    pub scheme: StagingScheme,
    pub cache_bytes: u64,
    /// Caiti's evictor threads (the other schemes run their own one or none).
    pub evictors: u32,
}

/// The table and what the threads around it need to know.
struct Table {
    staging: Option<Staging>,
    /// Threads asleep until the table changes.
    waiting: u32,
    /// Background threads asleep until there is work.
    idle_background: u32,
    stop: bool,
}

struct Shared {
    device: Box<dyn Backend>,
    size_bytes: u64,
    /// Whether there is a cache at all: without one, requests go straight to the device.
    cached: bool,
    table: Mutex<Table>,
    /// Signalled when the table changes, for threads that were told to wait.
    changed: Condvar,
    /// Signalled when background threads may have work.
    work: Condvar,
    buffers: SlotBuffers,
    /// Whether a background write-back has failed (logged once).
    write_back_failed: AtomicBool,
    /// Requests between their arrival and their answer: none, and the device idles. Counted
    /// only for a scheme whose background threads wait for that (the count is two shared
    /// read-modify-writes a request).
    requests_in_progress: AtomicU32,
    /// Whether the background threads write back only while the device idles, and must be
    /// woken when it does.
    background_when_idle: bool,
}

/// A request in the device, from its arrival to its answer (`Shared::arrived`).
struct InProgress<'a>(&'a Shared);

impl Drop for InProgress<'_> {
    fn drop(&mut self) {
        if self.0.requests_in_progress.fetch_sub(1, Ordering::AcqRel) == 1 {
            let table = self.0.lock();
            self.0.changed(&table, true);
        }
    }
}

/// A block device: `device` under a staging cache; see the module docs.
pub struct StagedDevice {
    shared: Arc<Shared>,
    background: Vec<JoinHandle<()>>,
    describe: String,
}

impl StagedDevice {
    /// `device` (its size a whole number of blocks is used) under `options`' cache; starts the
    /// scheme's background threads.
    pub fn open(device: Box<dyn Backend>, options: StagedOptions) -> io::Result<StagedDevice> {
        let size_bytes = device.size_bytes() / BLOCK_BYTES as u64 * BLOCK_BYTES as u64;
        if size_bytes == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: smaller than one {BLOCK_BYTES} B block",
                    device.describe()
                ),
            ));
        }
        let config = StagingConfig::new(options.scheme, options.cache_bytes, BLOCK_BYTES as u32);
        let staging = Staging::new(&config);
        let slots = staging.as_ref().map_or(0, |table| table.capacity());
        let staging_when_idle = staging.as_ref().is_some_and(Staging::background_when_idle);
        let describe = format!(
            "{} under {} staging of {} MiB",
            device.describe(),
            options.scheme,
            options.cache_bytes >> 20
        );
        let shared = Arc::new(Shared {
            device,
            size_bytes,
            cached: slots > 0,
            table: Mutex::new(Table {
                staging,
                waiting: 0,
                idle_background: 0,
                stop: false,
            }),
            changed: Condvar::new(),
            work: Condvar::new(),
            buffers: SlotBuffers::new(slots, BLOCK_BYTES),
            write_back_failed: AtomicBool::new(false),
            requests_in_progress: AtomicU32::new(0),
            background_when_idle: staging_when_idle,
        });
        let threads = if slots == 0 {
            0
        } else {
            options.scheme.background_threads(options.evictors)
        };
        let mut background = Vec::new();
        for index in 0..threads {
            let shared = Arc::clone(&shared);
            background.push(
                std::thread::Builder::new()
                    .name(format!("evictor-{index}"))
                    .spawn(move || shared.evict_in_background())?,
            );
        }
        Ok(StagedDevice {
            shared,
            background,
            describe,
        })
    }

    pub fn size_bytes(&self) -> u64 {
        self.shared.size_bytes
    }

    /// What it is, for logs.
    pub fn describe(&self) -> &str {
        &self.describe
    }

    /// What the cache did so far.
    pub fn stats(&self) -> StagingStats {
        self.shared
            .lock()
            .staging
            .as_ref()
            .map(Staging::stats)
            .unwrap_or_default()
    }

    /// Reads `buf.len()` bytes from `offset`.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.shared.size_bytes, offset, buf.len() as u64)?;
        if !self.shared.cached {
            return self.shared.device.read_at(offset, buf);
        }
        let _request = self.shared.arrived();
        for_each_block(offset, buf.len(), |lba, at, range| {
            self.shared.read_block(lba, at, &mut buf[range])
        })
    }

    /// Writes `data` at `offset`; with `fua`, durable before it returns.
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        check_range(self.shared.size_bytes, offset, data.len() as u64)?;
        if !self.shared.cached {
            // The device merges parts of its sectors itself (a BTT does, atomically).
            self.shared.device.write_at(offset, data)?;
            return if fua {
                self.shared.device.flush()
            } else {
                Ok(())
            };
        }
        let _request = self.shared.arrived();
        for_each_block(offset, data.len(), |lba, at, range| {
            self.shared.write_block(lba, at, &data[range])
        })?;
        if fua {
            for_each_block(offset, data.len(), |lba, _, _| {
                self.shared.make_durable(lba)
            })?;
            self.shared.device.flush()?;
        }
        Ok(())
    }

    /// Makes every write completed before it durable (seed 001 §3.5: REQ_PREFLUSH).
    pub fn flush(&self) -> io::Result<()> {
        let _request = self.shared.arrived();
        self.shared.flush()
    }

    /// Drops the whole blocks of `len` bytes at `offset`: cached copies unwritten, the device's
    /// trimmed. Parts of blocks are left as they are (a trim is advice).
    pub fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(self.shared.size_bytes, offset, len)?;
        let block = BLOCK_BYTES as u64;
        let first = offset.div_ceil(block);
        let end = (offset + len) / block;
        let _request = self.shared.arrived();
        for lba in first..end {
            self.shared.discard_block(lba)?;
        }
        Ok(())
    }
}

impl Drop for StagedDevice {
    /// Writes everything back, then stops the background threads.
    fn drop(&mut self) {
        if let Err(error) = self.shared.flush() {
            eprintln!("heterarchy: {}: flush at close: {error}", self.describe);
        }
        self.shared.lock().stop = true;
        self.shared.work.notify_all();
        for thread in self.background.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Runs `each(block, byte within it, range of the caller's buffer)` over the blocks that
/// `len` bytes at `offset` touch.
pub(crate) fn for_each_block(
    offset: u64,
    len: usize,
    mut each: impl FnMut(u64, usize, std::ops::Range<usize>) -> io::Result<()>,
) -> io::Result<()> {
    let mut done = 0;
    while done < len {
        let position = offset + done as u64;
        let at = (position % BLOCK_BYTES as u64) as usize;
        let part = (BLOCK_BYTES - at).min(len - done);
        each(position / BLOCK_BYTES as u64, at, done..done + part)?;
        done += part;
    }
    Ok(())
}

impl Shared {
    /// A request arrived; it is in the device until the guard drops (counted only where the
    /// scheme asks whether the device idles).
    fn arrived(&self) -> Option<InProgress<'_>> {
        if !self.background_when_idle {
            return None;
        }
        self.requests_in_progress.fetch_add(1, Ordering::AcqRel);
        Some(InProgress(self))
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sleeps until the table changes.
    fn wait<'a>(&'a self, mut table: MutexGuard<'a, Table>) -> MutexGuard<'a, Table> {
        table.waiting += 1;
        let mut table = self
            .changed
            .wait(table)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        table.waiting -= 1;
        table
    }

    /// The table changed: wakes who waits for it, and a background thread when `work` came.
    fn changed(&self, table: &Table, work: bool) {
        if table.waiting > 0 {
            self.changed.notify_all();
        }
        if work && table.idle_background > 0 {
            self.work.notify_one();
        }
    }

    fn block_offset(lba: u64) -> u64 {
        lba * BLOCK_BYTES as u64
    }

    /// Writes `data` at byte `at` of block `lba` on the device; a BTT merges a part of a
    /// sector with the rest of it itself, atomically.
    fn write_device(&self, lba: u64, at: usize, data: &[u8]) -> io::Result<()> {
        self.device
            .write_at(Self::block_offset(lba) + at as u64, data)
    }

    /// Writes `victims` (Evicting) back and reports each.
    fn write_back(&self, victims: &[Victim]) -> io::Result<()> {
        let mut first_error = None;
        for victim in victims {
            let result = {
                let buffer = self.buffers.read(victim.slot);
                debug_assert_eq!(buffer.lba, victim.lba);
                self.device
                    .write_at(Self::block_offset(victim.lba), &buffer.bytes)
            };
            let mut table = self.lock();
            let staging = table.staging.as_mut().expect("victims come from a cache");
            match result {
                Ok(()) => staging.evicted(victim.slot),
                Err(error) => {
                    staging.eviction_failed(victim.slot);
                    first_error.get_or_insert(error);
                }
            }
            self.changed(&table, true);
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Seed 001 Algorithm 1 for one block.
    fn write_block(&self, lba: u64, at: usize, data: &[u8]) -> io::Result<()> {
        let mut table = self.lock();
        loop {
            let Some(staging) = table.staging.as_mut() else {
                drop(table);
                return self.write_device(lba, at, data);
            };
            match staging.write(lba) {
                WriteStep::Cache { slot, outcome } => {
                    drop(table);
                    let filled = {
                        let mut buffer = self.buffers.write(slot);
                        // A hit's slot holds the block already; a fill of part of one needs the
                        // rest.
                        let fetched = if data.len() == BLOCK_BYTES || outcome == WriteOutcome::Hit {
                            Ok(())
                        } else {
                            // A part of a block not cached: the rest comes from the device.
                            self.device
                                .read_at(Self::block_offset(lba), &mut buffer.bytes)
                        };
                        buffer.lba = lba;
                        if fetched.is_ok() {
                            buffer.bytes[at..at + data.len()].copy_from_slice(data);
                        }
                        fetched
                    };
                    let mut table = self.lock();
                    let staging = table.staging.as_mut().expect("cached");
                    if let Err(error) = filled {
                        // Only a fill fetches: nothing was copied, so the slot goes back free.
                        staging.write_done(slot);
                        staging.discard(lba);
                        self.changed(&table, false);
                        return Err(error);
                    }
                    staging.write_done(slot);
                    self.changed(&table, true);
                    return Ok(());
                }
                WriteStep::Bypass => {
                    drop(table);
                    let result = self.write_device(lba, at, data);
                    let mut table = self.lock();
                    table.staging.as_mut().expect("cached").bypass_done(lba);
                    self.changed(&table, false);
                    return result;
                }
                WriteStep::EvictFirst(victims) => {
                    drop(table);
                    let result = self.write_back(&victims);
                    table = self.lock();
                    result?;
                }
                WriteStep::Wait => table = self.wait(table),
            }
        }
    }

    /// Seed 001 §3.4 for one block: from a slot if cached, else from the device.
    fn read_block(&self, lba: u64, at: usize, out: &mut [u8]) -> io::Result<()> {
        let mut table = self.lock();
        loop {
            let step = match table.staging.as_mut() {
                Some(staging) => staging.read(lba),
                None => ReadStep::Device,
            };
            match step {
                ReadStep::Slot(slot) => {
                    drop(table);
                    {
                        let buffer = self.buffers.read(slot);
                        if buffer.lba == lba {
                            out.copy_from_slice(&buffer.bytes[at..at + out.len()]);
                            return Ok(());
                        }
                    }
                    // The slot went to another block since: ask again.
                    table = self.lock();
                }
                ReadStep::Device => {
                    drop(table);
                    return self
                        .device
                        .read_at(Self::block_offset(lba) + at as u64, out);
                }
                ReadStep::Wait => table = self.wait(table),
            }
        }
    }

    /// Makes block `lba`'s last completed write durable (FUA).
    fn make_durable(&self, lba: u64) -> io::Result<()> {
        let mut table = self.lock();
        loop {
            let Some(staging) = table.staging.as_mut() else {
                return Ok(());
            };
            match staging.flush_block_step(lba) {
                FlushStep::Evict(victims) => {
                    drop(table);
                    self.write_back(&victims)?;
                    table = self.lock();
                }
                FlushStep::Wait => table = self.wait(table),
                FlushStep::Done => return Ok(()),
            }
        }
    }

    fn flush(&self) -> io::Result<()> {
        let mut table = self.lock();
        let mut ticket = match table.staging.as_mut() {
            Some(staging) => staging.flush_begin(),
            None => {
                drop(table);
                return self.device.flush();
            }
        };
        loop {
            let staging = table.staging.as_mut().expect("cached");
            match staging.flush_step(&mut ticket) {
                FlushStep::Evict(victims) => {
                    drop(table);
                    self.write_back(&victims)?;
                    table = self.lock();
                }
                FlushStep::Wait => table = self.wait(table),
                FlushStep::Done => break,
            }
        }
        drop(table);
        self.device.flush()
    }

    fn discard_block(&self, lba: u64) -> io::Result<()> {
        let mut table = self.lock();
        loop {
            let step = match table.staging.as_mut() {
                Some(staging) => staging.discard(lba),
                None => DiscardStep::Device,
            };
            match step {
                DiscardStep::Device => {
                    drop(table);
                    return self
                        .device
                        .discard(Self::block_offset(lba), BLOCK_BYTES as u64);
                }
                DiscardStep::Wait => table = self.wait(table),
            }
        }
    }

    /// A background thread: writes back what the scheme hands it until the device closes.
    fn evict_in_background(&self) {
        let mut table = self.lock();
        loop {
            if table.stop {
                return;
            }
            let idle = self.requests_in_progress.load(Ordering::Acquire) == 0;
            let victim = table
                .staging
                .as_mut()
                .and_then(|staging| staging.background(idle));
            match victim {
                Some(victim) => {
                    drop(table);
                    if let Err(error) = self.write_back(&[victim]) {
                        // The block stays cached, Valid; the device may come back. Said once.
                        if !self.write_back_failed.swap(true, Ordering::Relaxed) {
                            eprintln!("heterarchy: write-back of block {}: {error}", victim.lba);
                        }
                        std::thread::sleep(RETRY_AFTER_ERROR);
                    }
                    table = self.lock();
                }
                None => {
                    table.idle_background += 1;
                    table = self
                        .work
                        .wait(table)
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                    table.idle_background -= 1;
                }
            }
        }
    }
}
