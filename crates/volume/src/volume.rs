//! A cached volume: the engine's cache controller executing its plans on real storage, one or
//! more cache tiers over a backing store, many requests at once (docs/architecture.md, "One
//! policy code, two executors" and "A request through a live volume"; docs/block-volumes.md;
//! Orthus-CAS, seed 000 §4.4).
//!
//! Client requests are cut at cache-line boundaries and each piece is planned by the
//! [`CacheController`] exactly as in the simulator, under one short lock that also chooses
//! slots ([`crate::placement`]) and hands out per-line tickets ([`crate::order`]). The data then
//! moves outside that lock ([`crate::execute`]): requests on different lines run at once, and
//! requests on the same line run in the order they were planned. So a hit never waits for a
//! miss's, a write-back's or a cleaner's device I/O, and a read never returns a value older
//! than a write already answered.
//!
//! Crash safety of write-back: sector data is written and persisted before the entry that makes
//! it valid or dirty; a dirty line's data reaches the backing store, durably, or a lower
//! persistent tier before its entry says clean or its slot is freed; a freed slot's entry is
//! persisted before the slot is reused. A FLUSH persists every device; when a tier forgets
//! (RAM), it first writes every dirty line back. So what a completed FLUSH or a FUA write
//! covered is found again by [`Volume::open`]. Clean sectors whose data the backing store may
//! not hold durably yet are recorded invalid on the device until the next flush, so a crash
//! that loses a backing write cannot leave a tier holding a different block. Sectors are
//! overwritten in place: a write interrupted by a machine crash (not by killing the process,
//! which leaves the mapping's stores in place) may leave a sector part old, part new, 8 bytes
//! at a time, as an unacknowledged write to PM without a BTT would.
//!
//! With throttled devices the data still moves at once; each plan's stages are timed on the
//! devices' shared models, and the answer is due when the reply stage completes.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use heterarchy_engine::{CacheController, Controller, Feedback, Plan, TierLayout, WriteMode};

use crate::cutoff::SequentialCutoff;
use crate::failure::Failure;
use crate::job::{Client, Copies, Mode};
use crate::order::LineOrder;
use crate::placement::Placement;
use crate::sectors::Storage;
use crate::stats::{Counters, StatsSource, VolumeStats};
use crate::submission::{Buffer, Command, Refusal};

/// A block volume with cache tiers in front of its backing store; shared by every connection
/// and every thread.
pub struct Volume {
    pub(crate) name: String,
    pub(crate) size_bytes: u64,
    pub(crate) line_bytes: u32,
    pub(crate) mode: WriteMode,
    pub(crate) layout: TierLayout,
    pub(crate) storage: Storage,
    pub(crate) control: Mutex<Control>,
    pub(crate) order: Arc<LineOrder>,
    /// Flushes run one at a time (each settles what the one before left).
    pub(crate) flushing: Mutex<()>,
    /// Shut down: every request is refused, so nothing is answered after the last clean.
    pub(crate) closed: AtomicBool,
    pub(crate) counters: Counters,
    pub(crate) failure: Failure,
    /// What the controller's tuner wants measured.
    pub(crate) feedback: Feedback,
}

/// What the planning lock guards: the decisions, taken in one order.
pub(crate) struct Control {
    pub controller: CacheController,
    pub cutoff: SequentialCutoff,
    /// Per cache tier, which slot each line uses.
    pub placement: Vec<Placement>,
    /// Plans of finished jobs, reused.
    pub spare_plans: Vec<Plan>,
}

impl Control {
    /// The slot `key` has in each tier, as the placement says.
    pub(crate) fn copies(&self, key: u64) -> Copies {
        std::array::from_fn(|tier| self.placement.get(tier).and_then(|p| p.get(key)))
    }
}

impl Volume {
    /// The export name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Size in bytes: the backing store's, rounded down to whole sectors.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// Number of cache tiers.
    pub fn tiers(&self) -> usize {
        self.storage.tiers()
    }

    /// Checks the invariants every cache tier's slot table keeps between requests (see
    /// `TierSlots::check_invariants`), naming the tier and slot that breaks one: for tests
    /// that drive a volume and want corruption caught where it happens, not when a read
    /// later returns the wrong bytes. Call it with no request in flight.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (tier, device) in self.storage.devices[..self.tiers()].iter().enumerate() {
            device
                .slots()
                .check_invariants()
                .map_err(|broken| format!("cache[{tier}]: {broken}"))?;
        }
        Ok(())
    }

    /// True when answers wait for the devices' models.
    pub fn is_throttled(&self) -> bool {
        self.storage.is_throttled()
    }

    pub(crate) fn lock_control(&self) -> MutexGuard<'_, Control> {
        self.control
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn check_open(&self) -> io::Result<()> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!("volume {} is shutting down", self.name),
            ));
        }
        Ok(())
    }

    pub(crate) fn ns_since_epoch(&self, instant: Instant) -> u64 {
        instant
            .saturating_duration_since(self.storage.epoch)
            .as_nanos() as u64
    }

    /// Reads `buf.len()` bytes at `offset`. Returns when the answer is due (`None`: now).
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<Option<Instant>> {
        let submission = self.submit(Command::Read, offset, buf.len() as u64)?;
        self.complete(submission, Buffer::Read(buf))
    }

    /// Writes `data` at `offset`; with `fua`, durably before answering.
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<Option<Instant>> {
        let submission = self.submit(Command::Write { fua }, offset, data.len() as u64)?;
        self.complete(submission, Buffer::Write(data))
    }

    /// Writes `len` zero bytes at `offset`.
    pub fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> io::Result<Option<Instant>> {
        let submission = self.submit(Command::WriteZeroes { fua }, offset, len)?;
        self.complete(submission, Buffer::None)
    }

    /// Discards `len` bytes at `offset`: whole lines leave the cache unwritten and the backing
    /// store is told; parts of cached lines are kept (NBD lets a server ignore a trim).
    pub fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        let submission = self.submit(Command::Trim, offset, len)?;
        self.complete(submission, Buffer::None).map(drop)
    }

    /// Makes every write answered so far durable (NBD_CMD_FLUSH).
    pub fn flush(&self) -> io::Result<()> {
        let submission = self.submit(Command::Flush, 0, 0)?;
        self.complete(submission, Buffer::None).map(drop)
    }

    /// Writes every dirty line back to the backing store and makes every device durable
    /// (`heterarchy volume flush`). Returns the lines written back.
    pub fn clean(&self) -> io::Result<u64> {
        let lines = self.clean_all()?;
        self.make_durable()?;
        Ok(lines)
    }

    /// Graceful shutdown: refuses every request from then on, writes every dirty line back,
    /// and makes every device durable. Returns the lines written back.
    pub fn shut_down(&self) -> io::Result<u64> {
        self.closed.store(true, Ordering::SeqCst);
        self.clean()
    }

    /// Runs the cleaner if due; returns how long until it wants to run again (`None`: until
    /// the next request). Requests go on meanwhile: only the lines being cleaned wait.
    pub fn background(&self) -> io::Result<Option<Duration>> {
        self.give_up_if_failing();
        if self.failure.is_failed() || self.failure.stranded_lines() > 0 {
            // The cache is given up, or lines wait to be rescued (`crate::failure`): that is
            // the cleaning to do, tried again every second.
            self.rescue_all();
            return Ok(Some(Duration::from_secs(1)));
        }
        let now = self.ns_since_epoch(Instant::now());
        let (job, next) = {
            let mut control = self.lock_control();
            let mut plan = control.spare_plans.pop().unwrap_or_default();
            plan.clear();
            let next = control.controller.background(now, &mut plan);
            (self.resolve(&mut control, plan, None, now), next)
        };
        self.run(job, Client::None, &mut Vec::new(), Mode::Wait)
            .map_err(Refusal::into_error)?;
        Ok(next.map(|at| Duration::from_nanos(at.saturating_sub(now))))
    }

    /// Counters and state now.
    pub fn stats(&self) -> VolumeStats {
        let control = self.lock_control();
        VolumeStats::gather(StatsSource {
            name: &self.name,
            mode: self.mode,
            layout: match self.layout {
                TierLayout::Inclusive => "inclusive",
                TierLayout::Exclusive => "exclusive",
            },
            size_bytes: self.size_bytes,
            uptime_s: self.storage.epoch.elapsed().as_secs_f64(),
            controller: &control.controller,
            storage: &self.storage,
            counters: &self.counters,
            failure: &self.failure,
        })
    }

    /// Writes every dirty line back.
    pub(crate) fn clean_all(&self) -> io::Result<u64> {
        let (job, lines) = self.plan_cleaning(&mut self.lock_control(), 0);
        self.run(job, Client::None, &mut Vec::new(), Mode::Wait)
            .map_err(Refusal::into_error)?;
        Ok(lines)
    }

    /// True when a tier forgets on a crash: a FLUSH must write its dirty lines back, and wait
    /// for the moves out of it planned before (see [`Volume::plan_cleaning`]).
    pub(crate) fn has_volatile_tier(&self) -> bool {
        self.storage.devices[..self.tiers()]
            .iter()
            .any(|device| !device.slots().is_persistent())
    }

    /// Everything answered so far survives a crash from now on. Only for threads outside a
    /// server's worker pool: its cleaning takes turns after requests still queued.
    pub(crate) fn make_durable(&self) -> io::Result<()> {
        if self.has_volatile_tier() {
            self.clean_all()?;
        }
        self.persist_all()
    }

    /// Makes every device durable and settles what the flush made safe; flushes run one at a
    /// time.
    pub(crate) fn persist_all(&self) -> io::Result<()> {
        let _one_at_a_time = self
            .flushing
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let sealed = self.storage.flush_epoch.fetch_add(1, Ordering::SeqCst);
        for (index, device) in self.storage.devices.iter().enumerate() {
            match device.flush() {
                // A cache given up holds nothing a flush promises (`crate::failure`).
                Err(_) if index < self.tiers() && self.failure.is_failed() => {}
                // A cache device that cannot flush cannot promise what it holds: the cache is
                // given up and everything it holds written back, so that this flush still
                // covers every write answered before it (the backing store flushes last).
                Err(error) if index < self.tiers() => {
                    // A device gone says so first.
                    self.give_up_if_failing();
                    self.give_up(format!("cache tier {index} could not flush ({error})"));
                    if self.rescue_all() > 0 {
                        return Err(error);
                    }
                }
                result => result?,
            }
        }
        if self.failure.is_failed() {
            return Ok(());
        }
        for device in &self.storage.devices[..self.tiers()] {
            let slots = device.slots();
            if slots.is_persistent() {
                device.note(slots.settle(sealed, device.backend.as_ref()))?;
            }
        }
        Ok(())
    }
}

/// A cached volume is a block export like any other; the NBD server also takes its faster
/// path, answering hits on its event loops (docs/architecture.md, "Serving").
impl heterarchy_device::BlockDevice for Volume {
    fn name(&self) -> &str {
        Volume::name(self)
    }
    fn size_bytes(&self) -> u64 {
        Volume::size_bytes(self)
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        wait_until_due(Volume::read(self, offset, buf)?);
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        wait_until_due(Volume::write(self, offset, data, fua)?);
        Ok(())
    }
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        wait_until_due(Volume::write_zeroes(self, offset, len, fua)?);
        Ok(())
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        Volume::trim(self, offset, len)
    }
    fn flush(&self) -> io::Result<()> {
        Volume::flush(self)
    }
}

/// Holds the caller until a paced answer is due.
fn wait_until_due(due: Option<Instant>) {
    if let Some(due) = due {
        heterarchy_device::backend::wait_until(due);
    }
}
