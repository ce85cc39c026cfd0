//! Carrying out one planned request on the devices (docs/architecture.md, "One policy code, two
//! executors" and "A request through a live volume").
//!
//! The controller's plan says, per line, which tiers it leaves, which it enters and where its
//! data goes; [`crate::placement`] has already said which slots. The executor moves the data in
//! the order crash safety needs:
//!
//! 1. reads: the client's data, the edges of a partial write, and the newest sectors of every
//!    line that moves ([`Storage::merge`]), before anything is overwritten;
//! 2. write-backs: dirty sectors of lines leaving for the backing store, made durable with one
//!    flush before any entry says clean or any slot is freed;
//! 3. moves into cache tiers (exclusive demotions, dirty lines stepping down, cleaning's copies
//!    to the tiers below, a line carried up), each persisted before its entry, and the slots
//!    left behind freed once their data is safe — a slot is reused only after its entry is
//!    freed;
//! 4. the request itself: a read's installs and gap fills, or a write's data.
//!
//! Every line the plan touches is held (its ticket served, [`crate::order`]) for the whole of
//! it, so nothing else reads or writes these lines meanwhile.

use std::io;

use heterarchy_engine::IoKind;

use crate::job::{Access, Client, Job, LineJob, Mode};
use crate::layout::sector_bits;
use crate::sectors::{sector_span, whole_sector_bits, ClientWrite, Merged, ReadInfo, Storage};

/// A line whose data moves in step 1–3.
struct Moving {
    line: usize,
    merged: Merged,
    /// Cache tiers the newest sectors go to, as bits.
    deliver_to: u8,
    delivered: u8,
    to_backing: bool,
    /// Sectors written back durably by this job.
    cleaned: u128,
    freed: bool,
}

impl Storage {
    /// Carries `job` out; returns the lines it wrote back to the backing store. With
    /// [`Mode::AtOnce`], a read that would wait fails with `WouldBlock` before anything has
    /// changed (every read comes first).
    pub fn execute(&self, job: &Job, client: Client<'_>, mode: Mode) -> io::Result<u64> {
        let backing = self.tiers() as u8;
        let request = job.request;
        let request_key = request.map(|part| part.key);
        let keeps_dirty = request.is_some_and(|part| part.access != Access::Trim);

        // 1. Reads.
        let mut moving = Vec::new();
        for (index, line) in job.lines.iter().enumerate() {
            let (mut deliver_to, mut to_backing) = (0u8, false);
            if Some(line.key) == request_key {
                if line.departs() != 0 {
                    deliver_to = line.enters();
                }
            } else {
                for op in job.plan.ops() {
                    if op.key == line.key && op.kind == IoKind::Write {
                        if op.device == backing {
                            to_backing = true;
                        } else {
                            deliver_to |= 1 << op.device;
                        }
                    }
                }
            }
            let leaves = line.after.iter().all(Option::is_none);
            to_backing |= leaves && keeps_dirty && line.held() != 0;
            if deliver_to == 0 && !to_backing && line.departs() == 0 {
                continue;
            }
            let mut merged = self.merge(line.key, &line.before, line.held());
            let mut wanted = if to_backing { merged.dirty } else { 0 };
            for tier in 0..self.tiers() {
                if deliver_to & (1 << tier) != 0 {
                    wanted |= deliverable(&merged, line, tier);
                }
            }
            if wanted != 0 {
                self.read_merged(&line.before, &mut merged, wanted, mode)?;
            }
            moving.push(Moving {
                line: index,
                merged,
                deliver_to,
                delivered: 0,
                to_backing,
                cleaned: 0,
                freed: false,
            });
        }
        let request_line =
            request.and_then(|part| job.lines.iter().find(|line| line.key == part.key).copied());
        let mut read_info = ReadInfo::default();
        let mut edges = Vec::new();
        let writes_to = |key: u64| {
            job.plan
                .ops()
                .iter()
                .filter(move |op| op.key == key && op.kind == IoKind::Write)
                .map(|op| op.device)
        };
        let source = request.and_then(|part| {
            job.plan
                .ops()
                .iter()
                .find(|op| op.key == part.key && op.kind == IoKind::Read)
                .map(|op| op.device as usize)
        });
        let mut client = client;
        if let (Some(part), Some(line)) = (request, &request_line) {
            match &mut client {
                Client::Read(out) if part.access == Access::Read => {
                    let from = source.unwrap_or(self.tiers());
                    read_info =
                        self.read_line(part.key, &line.before, from, part.start, out, mode)?;
                }
                Client::Write(data) if part.access == Access::Write => {
                    let (first, end) = sector_span(part.start, data.len() as u32);
                    let aligned = first == part.start && end == part.start + data.len() as u32;
                    if !aligned && writes_to(part.key).any(|device| device < backing) {
                        edges = vec![0; (end - first) as usize];
                        self.read_line(part.key, &line.before, 0, first, &mut edges, mode)?;
                    }
                }
                _ => {}
            }
        }

        // 2. Write-backs, durable before anything says clean.
        let mut writebacks = 0;
        for entry in moving.iter_mut().filter(|entry| entry.to_backing) {
            let sectors = entry.merged.dirty;
            if sectors != 0 {
                let line = &job.lines[entry.line];
                self.retire_stale_copies(line.key, &line.before, &entry.merged, sectors)?;
                self.write_back_sectors(line.key, sectors, &entry.merged.data)?;
                entry.cleaned = sectors;
                writebacks += 1;
            }
        }
        if writebacks > 0 {
            self.backing().flush()?;
        }

        // 3. Moves into cache tiers, and the slots left behind.
        loop {
            let mut progress = false;
            let mut waiting = None;
            for entry in moving.iter_mut() {
                let line = job.lines[entry.line];
                for tier in 0..self.tiers() {
                    let bit = 1u8 << tier;
                    if entry.deliver_to & bit == 0 || entry.delivered & bit != 0 {
                        continue;
                    }
                    let Some(slot) = line.after[tier] else {
                        return Err(io::Error::other(format!(
                            "line {} moves into tier {tier}, which the placement gave it no \
                             slot in: the plan and the slot tables disagree",
                            line.key
                        )));
                    };
                    let occupant = self.devices[tier].slots().state(slot).key;
                    if occupant.is_some_and(|key| key != line.key) {
                        waiting.get_or_insert((tier, slot, occupant));
                        continue;
                    }
                    self.deliver(entry, &line, tier, slot)?;
                    entry.delivered |= bit;
                    progress = true;
                }
                if !entry.freed && entry.delivered == entry.deliver_to {
                    self.free_departed(&line, entry.cleaned)?;
                    entry.freed = true;
                    progress = true;
                }
            }
            if moving.iter().all(|entry| entry.freed) {
                break;
            }
            if !progress {
                // Lines waiting for each other's slots (a line carried up into the tier whose
                // slot a cascade hands back to it): one is written back first, so its slots
                // can go before its moves are done.
                let (tier, slot, occupant) = waiting.expect("no progress means a move waits");
                let Some(index) = moving.iter().position(|entry| {
                    Some(job.lines[entry.line].key) == occupant
                        && job.lines[entry.line].before[tier] == Some(slot)
                        && !entry.freed
                }) else {
                    return Err(io::Error::other(format!(
                        "tier {tier} slot {slot} holds line {occupant:?}, which this plan does not \
                         move out: the slot table disagrees with the plan"
                    )));
                };
                let entry = &mut moving[index];
                let line = job.lines[entry.line];
                let unsafe_sectors = entry.merged.dirty & !entry.cleaned;
                if unsafe_sectors != 0 {
                    self.read_merged(&line.before, &mut entry.merged, unsafe_sectors, Mode::Wait)?;
                    self.retire_stale_copies(
                        line.key,
                        &line.before,
                        &entry.merged,
                        unsafe_sectors,
                    )?;
                    self.write_back_sectors(line.key, unsafe_sectors, &entry.merged.data)?;
                    self.backing().flush()?;
                    entry.cleaned |= unsafe_sectors;
                    writebacks += 1;
                }
                self.free_departed(&line, entry.cleaned)?;
                entry.freed = true;
            }
        }

        // 4. The request.
        if let (Some(part), Some(line)) = (request, &request_line) {
            match client {
                Client::Read(out) if part.access == Access::Read => {
                    let mut installs: Vec<usize> = writes_to(part.key)
                        .filter(|&device| device < backing)
                        .map(usize::from)
                        .collect();
                    // Open CAS's partial hit: the source tier fills its gaps.
                    if let Some(from) = source.filter(|&from| from < self.tiers()) {
                        let gaps = read_info.below & whole_sector_bits(part.start, part.len);
                        if gaps != 0 && !part.reads_change_nothing && line.after[from].is_some() {
                            installs.push(from);
                        }
                    }
                    for tier in installs {
                        if let Some(slot) = line.after[tier] {
                            // The client's data is read: a tier that fails to take a copy
                            // does not fail the read. Its slot then does not hold the line,
                            // so reads go below, where the same data is (`crate::failure`).
                            let _ =
                                self.fill(tier, slot, part.key, part.start, out, read_info.dirty);
                        }
                    }
                }
                Client::Write(data) if part.access == Access::Write => {
                    let (first, end) = sector_span(part.start, data.len() as u32);
                    let sectors = sector_bits(first, end - first);
                    let tiers = writes_to(part.key)
                        .filter(|&device| device < backing)
                        .map(|device| {
                            let tier = usize::from(device);
                            let dirty = part.dirty_after & (1 << tier) != 0;
                            // Only while slots are withheld for stranded lines (`crate::failure`).
                            let slot = line.after[tier].ok_or_else(|| {
                                io::Error::other(format!(
                                    "line {} has no slot in tier {tier}: its slots are kept for \
                                     data a failing cache could not write back",
                                    part.key
                                ))
                            })?;
                            Ok((tier, slot, dirty))
                        })
                        .collect::<io::Result<Vec<(usize, u32, bool)>>>()?;
                    for &(tier, slot, dirty) in &tiers {
                        self.prepare_overwrite(tier, slot, part.key, sectors, dirty)?;
                    }
                    if writes_to(part.key).any(|device| device == backing) {
                        self.backing()
                            .write_at(self.backing_offset(part.key, part.start), data)?;
                    }
                    let write = ClientWrite {
                        key: part.key,
                        start: part.start,
                        data,
                        edges: &edges,
                    };
                    for &(tier, slot, dirty) in &tiers {
                        self.write_cached(tier, slot, &write, dirty)?;
                    }
                }
                _ => {}
            }
        }

        // Every slot placed for a line holds it on the device too, written or not, so that the
        // tables found after a restart are the placement.
        for line in &job.lines {
            for tier in 0..self.tiers() {
                if let Some(slot) = line.after[tier] {
                    if self.copy_state(tier, Some(slot), line.key).is_none() {
                        self.update(tier, slot, line.key, |_| {})?;
                    }
                }
            }
        }
        Ok(writebacks)
    }

    /// True when `job` can be carried out without waiting, given the lines' state now (its
    /// turn has come, so nothing else changes them): no device that always waits, no
    /// write-back (whose flush waits), no discard on a device that waits. A paced device's data
    /// moves at once; its answer says when it is due. Reads from
    /// a buffered file may still find the page cache without the data ([`Mode::AtOnce`]
    /// refuses then); `memory_only` forbids even that, for jobs after the first of a request,
    /// which cannot be refused once the first has changed things.
    pub fn is_quick(&self, job: &Job, memory_only: bool) -> bool {
        let backing = self.tiers() as u8;
        let quick = |device: u8| {
            let device = &self.devices[usize::from(device)];
            device.is_quick() && !(memory_only && device.backend.may_block())
        };
        let request_key = job.request.map(|part| part.key);
        let trims = job.request.is_some_and(|part| part.access == Access::Trim);
        if trims && self.backing().backend.may_block() {
            return false;
        }
        let ops_quick = job.plan.ops().iter().all(|op| {
            quick(op.device)
                && !(op.kind == IoKind::Write
                    && op.device == backing
                    && Some(op.key) != request_key)
        });
        // A read of sectors no copy holds takes them from the backing store, whatever the plan
        // says of the line (a line partly valid, as a restart finds many). Looked at only when
        // the backing store could refuse: the slot states cost locks on the event loop.
        let reads_backing = || {
            let Some(part) = job.request.filter(|part| part.access == Access::Read) else {
                return false;
            };
            let held = job
                .lines
                .iter()
                .find(|line| line.key == part.key)
                .map_or(0, |line| {
                    self.held(part.key, &line.before)
                        .fold(0, |valid, (_, _, state)| valid | state.valid)
                });
            sector_bits(part.start, part.len) & !held != 0
        };
        ops_quick
            && (quick(backing) || !reads_backing())
            && job.lines.iter().all(|line| {
                // A line leaving every tier with dirty sectors is written back and flushed.
                line.after.iter().any(Option::is_some)
                    || trims
                    || !self
                        .held(line.key, &line.before)
                        .any(|(_, _, state)| state.dirty != 0)
            })
    }

    /// Writes a moving line's newest sectors into tier `tier`'s slot `slot`.
    fn deliver(&self, entry: &Moving, line: &LineJob, tier: usize, slot: u32) -> io::Result<()> {
        let merged = &entry.merged;
        let sectors = deliverable(merged, line, tier);
        let dirty = merged.dirty & sectors & !entry.cleaned;
        // Valid sectors overwritten in place must read right whatever a crash leaves of them
        // (a copy stepping down over an older one of the same line).
        self.prepare_overwrite(tier, slot, line.key, dirty, true)?;
        self.prepare_overwrite(tier, slot, line.key, sectors & !dirty, false)?;
        self.write_sectors(tier, slot, sectors, &merged.data)?;
        let unflushed = if self.devices[tier].slots().is_persistent() {
            merged.unflushed & sectors & !dirty & !entry.cleaned
        } else {
            0
        };
        self.update(tier, slot, line.key, |state| {
            state.valid |= sectors;
            state.dirty = (state.dirty & !sectors) | dirty;
            state.unflushed = (state.unflushed & !sectors) | unflushed;
        })
    }

    /// Frees the slots `line` leaves, and clears the sectors written back (`cleaned`) in the
    /// copies it keeps.
    fn free_departed(&self, line: &LineJob, cleaned: u128) -> io::Result<()> {
        for tier in 0..self.tiers() {
            match (line.before[tier], line.after[tier]) {
                (Some(slot), None) => self.free(tier, slot, line.key)?,
                (Some(slot), Some(_))
                    if cleaned != 0 && self.copy_state(tier, Some(slot), line.key).is_some() =>
                {
                    self.update(tier, slot, line.key, |state| state.dirty &= !cleaned)?;
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The sectors of a merge that tier `tier` must take: those whose newest copy is elsewhere and
/// either above it or leaving (a copy below that stays keeps them there).
fn deliverable(merged: &Merged, line: &LineJob, tier: usize) -> u128 {
    let departs = line.departs();
    let mut sectors = 0u128;
    for sector in 0..128 {
        if merged.valid & (1 << sector) == 0 {
            continue;
        }
        let source = merged.source[sector] as usize;
        if source != tier && (source < tier || departs & (1 << source) != 0) {
            sectors |= 1 << sector;
        }
    }
    sectors
}
