//! What a volume does when a device fails (docs/architecture.md, "Faults"; docs/reliability.md,
//! "Injecting faults"), as Open CAS does with a failing cache: errors reach the client, the
//! volume goes on, and a cache that keeps failing is given up for pass-through once what it
//! holds is written back.
//!
//! The controller decides ahead of the data (a line's slots change when its request is
//! planned), so a job that fails part way leaves the controller's view ahead of the devices.
//! The devices' slot tables stay right whatever prefix of a job was done, since the executor
//! orders its steps for crash safety; so a failed job is *repaired* from them: every line it
//! touched has its newest dirty sectors written back and its copies freed. The controller may
//! then believe a line cached that no device holds: reads of it fall through to the backing
//! store, which now holds its newest data.
//!
//! A line whose dirty data cannot be written back (the cache cannot be read, or the backing
//! store cannot be written) is *stranded*: requests touching it fail with EIO (its data is
//! never served stale), its slots are withheld so no other line overwrites them, and the
//! cleaner tries again on every tick.
//!
//! A request's piece whose job failed is then *carried out around the cache*, on the backing
//! store alone, as Open CAS's engines redo a request in pass-through when the cache device
//! fails it: once the line is repaired the backing store holds its newest data, so a read
//! there is right and a write there is the newest. The client sees an error only when the
//! backing store fails too, or the line is stranded. A file system over the volume thus goes on
//! writing while its cache fails (`tests/python/test_fs.py`).
//!
//! The cache is given up when a cache device says it is gone, when cache-device errors reach
//! `fallback_pt_errors` (Open CAS's fallback pass-through threshold), or when a cache device
//! cannot flush (what it holds could not be promised to survive): from then on every request
//! goes around the cache, and the cleaner writes back and forgets every line it can.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use heterarchy_engine::{Controller, Plan};
use heterarchy_trace::{Op, Request};
use rustc_hash::FxHashMap;

use crate::job::{Client, Copies, Job, Mode};
use crate::order::Turns;
use crate::sectors::Storage;
use crate::stats::Counters;
use crate::volume::{Control, Volume};

/// A volume's failures so far.
pub(crate) struct Failure {
    /// Cache-device errors at which the cache is given up; 0 for never on errors alone.
    threshold: u64,
    /// The cache is given up: every request goes around it.
    failed: AtomicBool,
    /// Why, once it is.
    reason: Mutex<Option<String>>,
    /// Lines whose newest data only a cache holds, and the copies holding it.
    stranded: Mutex<FxHashMap<u64, Copies>>,
    /// Some line is stranded (read without the lock on every request).
    any_stranded: AtomicBool,
}

impl Failure {
    pub(crate) fn new(threshold: u64) -> Failure {
        Failure {
            threshold,
            failed: AtomicBool::new(false),
            reason: Mutex::new(None),
            stranded: Mutex::new(FxHashMap::default()),
            any_stranded: AtomicBool::new(false),
        }
    }

    /// True once the cache is given up.
    pub(crate) fn is_failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Why the cache was given up, if it was.
    pub(crate) fn reason(&self) -> Option<String> {
        self.reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Lines stranded now.
    pub(crate) fn stranded_lines(&self) -> u64 {
        self.lock_stranded().len() as u64
    }

    fn lock_stranded(&self) -> std::sync::MutexGuard<'_, FxHashMap<u64, Copies>> {
        self.stranded.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Fails a job planned before some line was stranded that would write into that line's
    /// slots (they are withheld from every plan made since, not from those already made), or
    /// that serves a request on a line stranded since it was planned: its plan may send a read
    /// to the backing store, which lacks the line's newest data.
    pub(crate) fn check_slots(&self, job: &Job) -> io::Result<()> {
        if !self.any_stranded.load(Ordering::Acquire) {
            return Ok(());
        }
        let stranded = self.lock_stranded();
        if let Some(part) = job
            .request
            .as_ref()
            .filter(|part| stranded.contains_key(&part.key))
        {
            return Err(io::Error::other(format!(
                "line {} holds data only a failing cache has, which cannot be written back yet",
                part.key
            )));
        }
        for line in &job.lines {
            for (tier, slot) in line.after.iter().enumerate() {
                let Some(slot) = *slot else { continue };
                let taken = stranded
                    .iter()
                    .find(|(&key, copies)| key != line.key && copies[tier] == Some(slot));
                if let Some((&key, _)) = taken {
                    return Err(io::Error::other(format!(
                        "line {} was to move into tier {tier} slot {slot}, which holds line \
                         {key}'s data that a failing cache could not write back",
                        line.key
                    )));
                }
            }
        }
        Ok(())
    }

    /// The first stranded line among lines `first..=last`, if any.
    pub(crate) fn stranded_among(&self, first: u64, last: u64) -> Option<u64> {
        if !self.any_stranded.load(Ordering::Acquire) {
            return None;
        }
        let stranded = self.lock_stranded();
        if last - first < stranded.len() as u64 {
            (first..=last).find(|key| stranded.contains_key(key))
        } else {
            stranded
                .keys()
                .copied()
                .filter(|key| (first..=last).contains(key))
                .min()
        }
    }
}

impl Storage {
    /// Writes a line's newest dirty sectors, from the copies the slot tables say hold it, back
    /// to the backing store durably, then frees every copy. Fails only when the data could not
    /// be written back.
    pub(crate) fn rescue(&self, key: u64, copies: &Copies) -> io::Result<()> {
        let held = self
            .held(key, copies)
            .fold(0u8, |bits, (tier, ..)| bits | 1 << tier);
        let mut merged = self.merge(key, copies, held);
        if merged.dirty != 0 {
            let dirty = merged.dirty;
            self.read_merged(copies, &mut merged, dirty, Mode::Wait)?;
            self.retire_stale_copies(key, copies, &merged, dirty)?;
            self.write_back_sectors(key, dirty, &merged.data)?;
            self.backing().flush()?;
        }
        // The table in memory is freed even when the device will not record it: the data is
        // safe, and this run never reads the copy again. (A cache device that failed this way
        // is not to be opened again as it is: its entries may still claim the line.)
        for (tier, slot) in copies.iter().enumerate().take(self.tiers()) {
            if let Some(slot) = *slot {
                let _ = self.free(tier, slot, key);
            }
        }
        Ok(())
    }

    /// The copies of a job's line that the slot tables say hold it: in each tier, its slot
    /// before the job or after.
    fn held_copies(&self, key: u64, before: &Copies, after: &Copies) -> Copies {
        std::array::from_fn(|tier| {
            if tier >= self.tiers() {
                return None;
            }
            [before[tier], after[tier]]
                .into_iter()
                .find(|&slot| self.copy_state(tier, slot, key).is_some())
                .flatten()
        })
    }
}

impl Volume {
    /// After `job` failed: every line it touched is rescued from what the slot tables say
    /// (module docs); a line that cannot be is stranded. Runs in the job's turn.
    pub(crate) fn repair(&self, job: &Job) {
        for line in &job.lines {
            let copies = self
                .storage
                .held_copies(line.key, &line.before, &line.after);
            if copies.iter().all(Option::is_none) {
                continue;
            }
            if let Err(error) = self.storage.rescue(line.key, &copies) {
                self.strand(line.key, copies, &error);
            }
        }
        self.give_up_if_failing();
    }

    /// Keeps a line's copies from every other line until it can be rescued.
    fn strand(&self, key: u64, copies: Copies, error: &io::Error) {
        eprintln!(
            "heterarchy: volume {}: line {key} keeps data no other device has, and cannot be \
             written back ({error}); requests touching it fail until it can",
            self.name
        );
        let mut control = self.lock_control();
        for (tier, slot) in copies.iter().enumerate().take(self.tiers()) {
            if let Some(slot) = slot {
                control.placement[tier].withhold(*slot);
            }
        }
        self.failure.lock_stranded().insert(key, copies);
        self.failure.any_stranded.store(true, Ordering::Release);
    }

    /// After `job` failed with `error` and was repaired: its piece of the client's request
    /// carried out on the backing store alone (module docs), and the controller told to forget
    /// the line, which no cache device holds now. Keeps `error` when the line is stranded, the
    /// job was no request's, or the backing store fails as well.
    pub(crate) fn go_around(
        &self,
        job: &Job,
        client: Client<'_>,
        error: io::Error,
    ) -> io::Result<u64> {
        let Some(part) = &job.request else {
            return Err(error);
        };
        if self.failure.stranded_among(part.key, part.key).is_some() {
            return Err(error);
        }
        let backing = self.storage.backing();
        let offset = self.storage.backing_offset(part.key, part.start);
        let done = match client {
            Client::Read(out) => backing.read_at(offset, out),
            Client::Write(data) => backing.write_at(offset, data),
            Client::None => return Err(error),
        };
        if done.is_err() {
            return Err(error);
        }
        self.forget(&mut self.lock_control(), part.key);
        Counters::add(&self.counters.went_around, 1);
        Ok(0)
    }

    /// Gives the cache up when a cache device is gone or its errors reached the threshold.
    pub(crate) fn give_up_if_failing(&self) {
        if self.failure.is_failed() {
            return;
        }
        let tiers = &self.storage.devices[..self.tiers()];
        let errors: u64 = tiers.iter().map(|device| device.errors()).sum();
        let reason = if let Some(tier) = tiers.iter().position(|device| device.is_gone()) {
            format!("cache tier {tier} is gone")
        } else if self.failure.threshold > 0 && errors >= self.failure.threshold {
            format!("{errors} cache device errors reached fallback_pt_errors")
        } else {
            return;
        };
        self.give_up(reason);
    }

    /// Gives the cache up for `reason`: every request goes around it from now on.
    pub(crate) fn give_up(&self, reason: String) {
        if self.failure.is_failed() {
            return;
        }
        eprintln!(
            "heterarchy: volume {}: {reason}: going pass-through; writing back what the cache \
             holds",
            self.name
        );
        *self
            .failure
            .reason
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(reason);
        self.failure.failed.store(true, Ordering::SeqCst);
    }

    /// The cleaner's work once the cache is given up, or while lines are stranded: every line
    /// the cache still holds is written back and forgotten, and every stranded line tried
    /// again. Returns the lines still left.
    pub(crate) fn rescue_all(&self) -> u64 {
        let stranded: Vec<u64> = self.failure.lock_stranded().keys().copied().collect();
        for key in stranded {
            let copies = |_: &Control| self.failure.lock_stranded().get(&key).copied();
            let Some((copies, _turn)) = self.in_line_turn(key, copies) else {
                continue;
            };
            if self.storage.rescue(key, &copies).is_ok() {
                let mut control = self.lock_control();
                for (tier, slot) in copies.iter().enumerate().take(self.tiers()) {
                    if let Some(slot) = slot {
                        control.placement[tier].give_back(*slot);
                    }
                }
                self.forget(&mut control, key);
                let mut stranded = self.failure.lock_stranded();
                stranded.remove(&key);
                self.failure
                    .any_stranded
                    .store(!stranded.is_empty(), Ordering::Release);
            }
        }
        if self.failure.is_failed() {
            let keys: Vec<u64> = {
                let control = self.lock_control();
                let stranded = self.failure.lock_stranded();
                let mut keys: Vec<u64> = control
                    .placement
                    .iter()
                    .flat_map(|placement| placement.keys())
                    .filter(|key| !stranded.contains_key(key))
                    .collect();
                keys.sort_unstable();
                keys.dedup();
                keys
            };
            for key in keys {
                let copies = |control: &Control| Some(control.copies(key));
                let Some((copies, _turn)) = self.in_line_turn(key, copies) else {
                    continue;
                };
                match self.storage.rescue(key, &copies) {
                    Ok(()) => self.forget(&mut self.lock_control(), key),
                    Err(error) => self.strand(key, copies, &error),
                }
            }
        }
        self.failure.stranded_lines()
    }

    /// Waits for a turn on line `key`, taken under the planning lock as every plan's is, with
    /// the copies `copies_of` names then; the turn ends when the returned `Turns` is dropped.
    fn in_line_turn(
        &self,
        key: u64,
        copies_of: impl FnOnce(&Control) -> Option<Copies>,
    ) -> Option<(Copies, Turns)> {
        let (copies, mut turns) = {
            let control = self.lock_control();
            (copies_of(&control)?, self.order.take_turns(&[key]))
        };
        turns.wait();
        Some((copies, turns))
    }

    /// The controller and the placement forget `key` (its copies are already freed).
    pub(crate) fn forget(&self, control: &mut Control, key: u64) {
        let mut plan = Plan::new();
        control.controller.plan(
            &Request {
                op: Op::Trim,
                ..Request::new(key, self.line_bytes)
            },
            0,
            &mut plan,
        );
        for placement in control.placement.iter_mut() {
            placement.release(key);
        }
    }

    /// Refuses a request touching a stranded line, whose data must not be served stale.
    pub(crate) fn check_stranded(&self, offset: u64, len: u64) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        let line = u64::from(self.line_bytes);
        let (first, last) = (offset / line, (offset + len - 1) / line);
        match self.failure.stranded_among(first, last) {
            None => Ok(()),
            Some(key) => Err(io::Error::other(format!(
                "volume {}: line {key} ({} bytes at byte {}) holds data only a failing cache \
                 has, which cannot be written back yet",
                self.name,
                line,
                key * line
            ))),
        }
    }
}
