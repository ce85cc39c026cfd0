//! What each Open CAS cache mode does with a read, a write and a discard ("Cache
//! configuration", open-cas.github.io; OCF `src/engine/`: `engine_rd.c` serves wt, wb, wa and
//! wi reads, `engine_wo.c` and `engine_pt.c` the other reads, and `cache_engine.c` maps pt
//! writes to the write-invalidate engine).
//!
//! | mode | read hit | read miss | write hit | write miss |
//! |------|----------|-----------|-----------|------------|
//! | wt   | cache    | backing, installed | cache + backing | installed, cache + backing |
//! | wb   | cache    | backing, installed | cache, dirty | installed, cache, dirty |
//! | wa   | cache    | backing, installed | cache + backing | backing only |
//! | wi   | cache    | backing, installed | backing, cached copies dropped | backing only |
//! | wo   | cache if dirty, else backing | backing, not installed | cache, dirty | installed, cache, dirty |
//! | pt   | cache if dirty, else backing | backing | backing, cached copies dropped | backing only |
//!
//! "Cache" is the highest tier holding the line, which always has its newest data. A hit in
//! a lower tier first brings the line up into tier 0 (wt, wb, wa and wi reads; wt, wb and wo
//! writes), as a miss in tier 0 would: with inclusive tiers into every tier above it. Installs pass the promotion policy first; wa and wi
//! never install on writes, wo and pt never on reads. Reads in wo and pt change nothing.
//!
//! Reads in wt, wb, wa and wi also pass NHC's decision points (seed 000 §4.3.2): a clean hit
//! may be served by the next level holding the line (`load_admit`), and an install into tier i
//! on a read — a miss, or tier 1's hit brought up — needs pair i's `data_admit`.

use heterarchy_trace::Request;

use super::config::WriteMode;
use super::line::Line;
use super::CacheController;
use crate::plan::IoKind;

impl CacheController {
    /// Pair `pair`'s `data_admit`: whether a read may install `bytes` into tier `pair` (always
    /// while the tier has room for them without evicting, with `admit_while_filling`). Room
    /// for the request, not any free byte: a full tier of objects whose sizes do not divide
    /// its capacity keeps a gap smaller than one object, which is no fill.
    #[inline]
    fn data_admit(&self, pair: usize, bytes: u32) -> bool {
        self.tuning.as_ref().is_none_or(|tuning| {
            tuning.settings(pair).data_admit
                || (self.admit_while_filling
                    && self.tiers[pair].used_bytes() + u64::from(bytes)
                        <= self.tiers[pair].capacity_bytes())
        })
    }

    /// The tiers a read miss of `bytes` may be installed in, as bits.
    #[inline]
    fn read_installs(&self, bytes: u32) -> u8 {
        if self.tuning.is_none() {
            return u8::MAX;
        }
        (0..self.tiers.len())
            .filter(|&tier| self.data_admit(tier, bytes))
            .fold(0, |bits, tier| bits | 1 << tier)
    }

    /// The device that serves a read hit on `line` whose highest copy is in tier `top`:
    /// `load_admit` may send it to the next level holding the line, unless the copy is dirty
    /// (newer than the levels below).
    fn read_hit_source(&mut self, line: Line, top: usize) -> u8 {
        let Some(tuning) = &mut self.tuning else {
            return top as u8;
        };
        let mut level = top;
        loop {
            if line.is_dirty(level) || tuning.serve_in_tier(level) {
                return level as u8;
            }
            match (level + 1..self.tiers.len()).find(|&tier| line.holds(tier)) {
                Some(next) => level = next,
                None => return self.backing,
            }
        }
    }

    /// Asks the promotion policy whether to install a line no tier holds.
    fn may_install(&mut self, request: &Request) -> bool {
        let top = &self.tiers[0];
        let (used, capacity) = (top.used_bytes(), top.capacity_bytes());
        self.promoter
            .should_promote(request.key, request.size, used, capacity)
    }

    /// Plans a read of the line `line` as it was on arrival (`None`: no tier held it). Returns
    /// the device the client's data is read from.
    pub(super) fn read(&mut self, request: &Request, line: Option<Line>, now_ns: u64) -> u8 {
        let key = request.key;
        let bytes = request.size;
        // The line and its highest tier, for a hit.
        let held = line.and_then(|line| Some((line, line.top_tier()?)));
        if matches!(self.mode, WriteMode::Wo | WriteMode::Pt) {
            return match held {
                Some((line, tier)) if line.any_dirty() => tier as u8,
                _ => self.backing,
            };
        }
        match held {
            Some((line, 0)) => {
                self.touch(0, request, now_ns);
                self.read_hit_source(line, 0)
            }
            Some((line, tier)) => {
                let device = self.read_hit_source(line, tier);
                let gained = self.promote(request, tier, self.read_installs(bytes), now_ns);
                self.write_to_tiers(gained, key, bytes);
                device
            }
            None => {
                let allowed = self.read_installs(bytes);
                if allowed != 0 && self.may_install(request) {
                    let installed = self.install(request, now_ns, allowed);
                    self.write_to_tiers(installed, key, bytes);
                }
                self.backing
            }
        }
    }

    /// Plans a write; `held` is the highest tier holding the line on arrival.
    pub(super) fn write(&mut self, request: &Request, held: Option<usize>, now_ns: u64) {
        let key = request.key;
        let bytes = request.size;
        match self.mode {
            WriteMode::Wb | WriteMode::Wo => {
                self.bring_to_top(request, held, now_ns);
                let mut line = self.line_or_absent(key, bytes);
                match line.top_tier() {
                    Some(tier) => {
                        self.writes
                            .push(Self::op(tier as u8, IoKind::Write, key, bytes));
                        self.dirty.mark_dirty(key, &mut line, tier, now_ns);
                        self.store(key, line);
                    }
                    None => self.write_backing(key, bytes),
                }
            }
            WriteMode::Wt => {
                self.bring_to_top(request, held, now_ns);
                let resident = self.line(key).map_or(0, |line| line.resident);
                self.write_to_tiers(resident, key, bytes);
                self.write_backing(key, bytes);
            }
            WriteMode::Wa => {
                if let Some(tier) = held {
                    self.touch(tier, request, now_ns);
                }
                let resident = self.line(key).map_or(0, |line| line.resident);
                self.write_to_tiers(resident, key, bytes);
                self.write_backing(key, bytes);
            }
            WriteMode::Wi | WriteMode::Pt => {
                self.invalidate(key);
                self.write_backing(key, bytes);
            }
        }
    }

    /// A delete or trim: every cached copy is dropped unwritten and nhit forgets the count.
    pub(super) fn discard(&mut self, key: u64) {
        self.invalidate(key);
        self.promoter.purge(key);
    }

    /// Makes tier 0 hold the line if it can, for a write that allocates: a tier-0 hit is
    /// touched, a tier-1 hit moves or copies up, a miss is installed if promoted.
    fn bring_to_top(&mut self, request: &Request, held: Option<usize>, now_ns: u64) {
        match held {
            Some(0) => {
                self.touch(0, request, now_ns);
            }
            Some(tier) => {
                self.promote(request, tier, u8::MAX, now_ns);
            }
            None => {
                if self.may_install(request) {
                    self.install(request, now_ns, u8::MAX);
                }
            }
        }
    }

    /// Drops every cached copy of `key` (its data is being replaced or discarded).
    fn invalidate(&mut self, key: u64) {
        let Some(mut line) = self.line(key) else {
            return;
        };
        self.dirty.mark_all_clean(key, &mut line);
        for tier in 0..self.tiers.len() {
            if line.holds(tier) {
                self.tiers[tier].remove(key);
                self.note_departure(tier, key);
                line.clear_resident(tier);
            }
        }
        self.store(key, line);
    }

    fn write_to_tiers(&mut self, tiers: u8, key: u64, bytes: u32) {
        for tier in 0..self.backing {
            if tiers & (1 << tier) != 0 {
                self.writes.push(Self::op(tier, IoKind::Write, key, bytes));
            }
        }
    }

    fn write_backing(&mut self, key: u64, bytes: u32) {
        self.writes
            .push(Self::op(self.backing, IoKind::Write, key, bytes));
    }
}
