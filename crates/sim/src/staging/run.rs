//! The executor: threads on virtual cores carrying out the engine's staging decisions against
//! a PM device model (see the module docs of `sim::staging`).

use std::collections::VecDeque;

use hdrhistogram::Histogram;
use heterarchy_device::{DeviceModel, IoKind};
use heterarchy_engine::staging::{
    FlushStep, FlushTicket, ReadStep, Staging, StagingConfig, Victim, WriteStep,
};

use super::{Stack, StagedConfig, StagedResult, TracedRequest, BLOCK_BYTES};
use crate::timed::events::EventQueue;

/// Where a job thread's time goes (seed 001 Fig 6a's categories, and the stacks without a cache).
#[derive(Clone, Copy)]
enum Category {
    /// The application-to-driver path.
    Others,
    Metadata,
    CacheWrite,
    Enqueue,
    EvictionAndWrite,
    Bypass,
    /// A write straight to the BTT or raw PM (no cache).
    DeviceWrite,
    /// A read from a slot or the device.
    Read,
    Flush,
    /// Asleep until a slot or block is free.
    WaitSlot,
    /// Ready, with no core free.
    WaitCore,
}

const CATEGORIES: [&str; 11] = [
    "others",
    "cache metadata management",
    "cache write only",
    "WBQ enqueue",
    "cache eviction and write",
    "conditional bypass",
    "device write",
    "read",
    "cache flush",
    "waiting for a slot",
    "waiting for a core",
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum RequestOp {
    Write(u64),
    Read(u64),
    Flush,
}

impl RequestOp {
    /// The same op on the next block.
    fn next_block(self) -> RequestOp {
        match self {
            RequestOp::Write(lba) => RequestOp::Write(lba + 1),
            RequestOp::Read(lba) => RequestOp::Read(lba + 1),
            RequestOp::Flush => unreachable!("a flush has no blocks"),
        }
    }
}

/// A job's request in progress.
struct Current {
    submitted_ns: u64,
    /// The op on its current block.
    op: RequestOp,
    /// Blocks after the current one (a traced request of several).
    more_blocks: u32,
    /// When it reached the driver, past the application-to-driver path.
    in_driver_ns: Option<u64>,
    /// Slots this request writes back before it goes on.
    victims: VecDeque<Victim>,
    flush: Option<FlushTicket>,
}

struct Job {
    /// Submission times of requests waiting behind the current one.
    queue: VecDeque<u64>,
    current: Option<Current>,
    issued: u64,
    /// Writes since its last flush (fio's `fsync=N`).
    writes_since_flush: u32,
    rng: u64,
}

/// What a thread's step does when it ends.
#[derive(Clone, Copy)]
enum Work {
    /// A write copied into a slot.
    Cached(u32),
    Bypassed(u64),
    /// A write or read on the device, or a read from a slot: the request is done.
    Done,
    /// A slot written back by a job, an evictor or the flusher.
    WroteBack(u32),
}

/// One PM access of a step.
#[derive(Clone, Copy)]
struct Access {
    kind: IoKind,
    offset: u64,
    bytes: u32,
}

impl Access {
    fn new(kind: IoKind, offset: u64, bytes: u32) -> Access {
        Access {
            kind,
            offset,
            bytes,
        }
    }
}

/// A step's CPU time before its PM accesses, the accesses, and where its time is charged
/// (a category, from when).
struct Io {
    cpu_ns: u64,
    accesses: Vec<Access>,
    charge: Option<(Category, u64)>,
}

impl Io {
    /// CPU work only.
    fn none() -> Io {
        Io {
            cpu_ns: 0,
            accesses: Vec::new(),
            charge: None,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pending {
    /// Nothing scheduled: asleep, idle or done.
    None,
    CoreGranted,
    /// The step's next PM access is due.
    Access,
    StepEnd,
    /// The flusher's next flush is due.
    Timer,
}

enum Role {
    Job(Job),
    Evictor,
    Flusher {
        flush: Option<FlushTicket>,
        started_ns: u64,
        victims: VecDeque<Victim>,
    },
}

struct Thread {
    role: Role,
    pending: Pending,
    work: Option<Work>,
    /// When it began waiting for a core or a slot.
    waiting_since: u64,
    /// The rest of its current step's PM accesses.
    accesses: Vec<Access>,
    /// Where its current step's time goes, from when.
    charge: Option<(Category, u64)>,
}

struct Sim<'a> {
    config: &'a StagedConfig,
    now: u64,
    events: EventQueue,
    threads: Vec<Thread>,
    cores_free: u32,
    core_queue: VecDeque<u32>,
    parked: Vec<u32>,
    idle_evictors: Vec<u32>,
    staging: Option<Staging>,
    pm: DeviceModel,
    blocks: u64,
    /// The PM's access unit and channels (DIMMs).
    unit_bytes: u32,
    channels: u64,
    jobs_running: u32,
    time_ns: [u64; CATEGORIES.len()],
    latency_ns: Histogram<u64>,
    series: Vec<(u64, u64)>,
    requests: u64,
    last_completion_ns: u64,
    flushes: u64,
    flush_latency_ns: u64,
    /// The trace's next request to hand out.
    next_traced: usize,
}

fn next_random(state: &mut u64) -> u64 {
    // SplitMix64.
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The device's blocks: its size's, or enough for the trace's requests.
fn device_blocks(config: &StagedConfig) -> u64 {
    let traced = config.trace.iter().flat_map(|trace| trace.iter());
    let end = traced.map(|request| request.end_lba()).max().unwrap_or(0);
    (config.device_bytes / u64::from(BLOCK_BYTES))
        .max(end)
        .max(1)
}

/// Runs `config` to the end; deterministic for a given config.
pub fn run_staged(config: &StagedConfig) -> StagedResult {
    let staging = Staging::new(&StagingConfig::new(
        config.stack.staging(),
        config.cache_bytes,
        BLOCK_BYTES,
    ));
    let background = config.stack.staging().background_threads(config.evictors);
    let mut threads = Vec::new();
    for job in 0..config.jobs.max(1) {
        threads.push(Thread::new(Role::Job(Job {
            queue: VecDeque::new(),
            current: None,
            issued: 0,
            writes_since_flush: 0,
            rng: config.seed ^ (u64::from(job) + 1).wrapping_mul(0xD1B5_4A32_D192_ED03),
        })));
    }
    for _ in 0..background {
        threads.push(Thread::new(Role::Evictor));
    }
    let flusher = (staging.is_some() && config.flush_interval_ns.is_some()).then(|| {
        threads.push(Thread::new(Role::Flusher {
            flush: None,
            started_ns: 0,
            victims: VecDeque::new(),
        }));
        threads.len() as u32 - 1
    });
    let mut sim = Sim {
        config,
        now: 0,
        events: EventQueue::new(),
        threads,
        cores_free: config.cores.max(1),
        core_queue: VecDeque::new(),
        parked: Vec::new(),
        idle_evictors: Vec::new(),
        staging,
        pm: DeviceModel::new(&config.pm),
        blocks: device_blocks(config),
        unit_bytes: config.pm.granularity_bytes.clamp(1, BLOCK_BYTES),
        channels: u64::from(config.pm.channels.max(1)),
        jobs_running: config.jobs.max(1),
        time_ns: [0; CATEGORIES.len()],
        latency_ns: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("bounds"),
        series: Vec::with_capacity(config.series),
        requests: 0,
        last_completion_ns: 0,
        flushes: 0,
        flush_latency_ns: 0,
        next_traced: 0,
    };
    for job in 0..config.jobs.max(1) {
        for _ in 0..config.iodepth.max(1) {
            sim.issue(job);
        }
        sim.want_core(job);
    }
    for evictor in config.jobs.max(1)..config.jobs.max(1) + background {
        sim.idle_evictors.push(evictor);
    }
    if let (Some(flusher), Some(interval)) = (flusher, config.flush_interval_ns) {
        sim.schedule(interval, flusher, Pending::Timer);
    }
    while sim.jobs_running > 0 {
        let Some((time, thread)) = sim.events.pop() else {
            break;
        };
        sim.now = time;
        match std::mem::replace(&mut sim.threads[thread as usize].pending, Pending::None) {
            Pending::CoreGranted => sim.begin(thread),
            Pending::Access => sim.access(thread),
            Pending::StepEnd => sim.end(thread),
            Pending::Timer => sim.want_core(thread),
            Pending::None => unreachable!("an event for a thread with none pending"),
        }
    }
    sim.result()
}

impl Thread {
    fn new(role: Role) -> Thread {
        Thread {
            role,
            pending: Pending::None,
            work: None,
            accesses: Vec::new(),
            charge: None,
            waiting_since: 0,
        }
    }
}

impl Sim<'_> {
    fn schedule(&mut self, time: u64, thread: u32, pending: Pending) {
        self.threads[thread as usize].pending = pending;
        self.events.push(time, thread);
    }

    fn is_job(&self, thread: u32) -> bool {
        thread < self.config.jobs.max(1)
    }

    fn charge(&mut self, thread: u32, category: Category, ns: u64) {
        if self.is_job(thread) {
            self.time_ns[category as usize] += ns;
        }
    }

    fn want_core(&mut self, thread: u32) {
        self.threads[thread as usize].waiting_since = self.now;
        if self.cores_free > 0 {
            self.cores_free -= 1;
            self.schedule(self.now, thread, Pending::CoreGranted);
        } else {
            self.core_queue.push_back(thread);
        }
    }

    fn release_core(&mut self) {
        match self.core_queue.pop_front() {
            Some(next) => {
                let waited = self.now - self.threads[next as usize].waiting_since;
                self.charge(next, Category::WaitCore, waited);
                self.schedule(self.now, next, Pending::CoreGranted);
            }
            None => self.cores_free += 1,
        }
    }

    /// Gives up the core and sleeps until the cache changes.
    fn park(&mut self, thread: u32) {
        self.threads[thread as usize].waiting_since = self.now;
        self.parked.push(thread);
        self.release_core();
    }

    /// The cache changed: sleepers try again.
    fn wake_parked(&mut self) {
        for thread in std::mem::take(&mut self.parked) {
            let waited = self.now - self.threads[thread as usize].waiting_since;
            self.charge(thread, Category::WaitSlot, waited);
            self.want_core(thread);
        }
    }

    fn wake_evictor(&mut self) {
        if let Some(evictor) = self.idle_evictors.pop() {
            self.want_core(evictor);
        }
    }

    /// Starts a step of `thread` on its core: CPU work until `cpu_end`, then `io`'s accesses
    /// to the PM one after the other, each submitted when the one before completes (so the
    /// model's channels see them in time order). Its time from `since` goes to `category`.
    fn step(&mut self, thread: u32, work: Work, cpu_end: u64, io: Io) {
        let state = &mut self.threads[thread as usize];
        state.work = Some(work);
        state.accesses = io.accesses;
        state.charge = io.charge;
        let cpu_end = cpu_end + io.cpu_ns;
        let pending = if state.accesses.is_empty() {
            Pending::StepEnd
        } else {
            Pending::Access
        };
        self.schedule(cpu_end, thread, pending);
    }

    /// `thread`'s next PM access is due now.
    fn access(&mut self, thread: u32) {
        let state = &mut self.threads[thread as usize];
        let access = state.accesses.remove(0);
        let pending = if state.accesses.is_empty() {
            Pending::StepEnd
        } else {
            Pending::Access
        };
        let done = self
            .pm
            .submit(self.now, access.kind, access.offset, access.bytes);
        self.schedule(done, thread, pending);
    }

    /// Where block `lba`'s data lies on the PM: the DIMMs interleave 4 KiB (seed 001's
    /// machine), while the model picks an access's channel by its first 256 B unit, so the
    /// block is placed at the unit of its own channel within its 4 KiB.
    fn block_offset(&self, lba: u64) -> u64 {
        let units_per_block = u64::from(BLOCK_BYTES / self.unit_bytes);
        let first = lba * units_per_block;
        let shift = (lba + self.channels - first % self.channels) % self.channels;
        (first + shift) * u64::from(self.unit_bytes)
    }

    /// Where block `lba`'s map entry lies, past the data.
    fn map_offset(&self, lba: u64) -> u64 {
        self.blocks * u64::from(BLOCK_BYTES) + (1 << 20) + lba * 4
    }

    /// A BTT write of block `lba` (seed 001 §2): the data out of place, then the flog entry,
    /// then the map entry, each persisted before the next.
    fn btt_write(&self, lba: u64, charge: Option<(Category, u64)>) -> Io {
        let costs = &self.config.costs;
        let flog = self.blocks * u64::from(BLOCK_BYTES) + (lba % 256) * 64;
        Io {
            cpu_ns: (costs.btt_write_ns + 3.0 * costs.persist_ns) as u64,
            accesses: vec![
                Access::new(IoKind::Write, self.block_offset(lba), BLOCK_BYTES),
                Access::new(IoKind::Write, flog, 32),
                Access::new(IoKind::Write, self.map_offset(lba), 4),
            ],
            charge,
        }
    }

    /// A write of block `lba` in place, not atomic (seed 001's "PMem").
    fn raw_write(&self, lba: u64, charge: Option<(Category, u64)>) -> Io {
        Io {
            cpu_ns: self.config.costs.persist_ns as u64,
            accesses: vec![Access::new(
                IoKind::Write,
                self.block_offset(lba),
                BLOCK_BYTES,
            )],
            charge,
        }
    }

    fn device_read(&self, lba: u64, charge: Option<(Category, u64)>) -> Io {
        let data = Access::new(IoKind::Read, self.block_offset(lba), BLOCK_BYTES);
        match self.config.stack {
            Stack::RawPm => Io {
                cpu_ns: 0,
                accesses: vec![data],
                charge,
            },
            Stack::Btt(_) => Io {
                cpu_ns: self.config.costs.btt_read_ns as u64,
                accesses: vec![Access::new(IoKind::Read, self.map_offset(lba), 4), data],
                charge,
            },
        }
    }

    fn issue(&mut self, job: u32) {
        let now = self.now;
        let Role::Job(state) = &mut self.threads[job as usize].role else {
            unreachable!("only jobs issue")
        };
        state.issued += 1;
        state.queue.push_back(now);
    }

    /// Whether `job` issues another request now.
    fn keeps_issuing(&self, job: u32) -> bool {
        let Role::Job(state) = &self.threads[job as usize].role else {
            return false;
        };
        self.now < self.config.duration_ns
            && self
                .config
                .requests_per_job
                .is_none_or(|limit| state.issued < limit)
            && self
                .config
                .trace
                .as_ref()
                .is_none_or(|trace| self.next_traced < trace.len())
    }

    /// `thread` has a core: it decides its next step.
    fn begin(&mut self, thread: u32) {
        match self.threads[thread as usize].role {
            Role::Job(_) => self.begin_job(thread),
            Role::Evictor => self.begin_evictor(thread),
            Role::Flusher { .. } => self.begin_flusher(thread),
        }
    }

    fn begin_job(&mut self, thread: u32) {
        let costs = self.config.costs;
        let now = self.now;
        let blocks = self.blocks;
        let read_percent = self.config.read_percent;
        let fsync_every = self.config.fsync_every;
        let trace = self.config.trace.as_deref();
        let next_traced = &mut self.next_traced;
        let Role::Job(job) = &mut self.threads[thread as usize].role else {
            unreachable!()
        };
        if job.current.is_none() {
            let submitted = job.queue.pop_front();
            let traced = trace.map(|trace| trace.get(*next_traced).copied());
            let trace_ended = matches!(traced, Some(None));
            let (Some(submitted_ns), false) = (submitted, trace_ended) else {
                // Nothing left: the job is done.
                job.queue.clear();
                self.jobs_running -= 1;
                self.release_core();
                return;
            };
            let (op, more_blocks) = match traced.flatten() {
                Some(request) => {
                    *next_traced += 1;
                    match request {
                        TracedRequest::Read { lba, blocks } => {
                            (RequestOp::Read(lba), blocks.saturating_sub(1))
                        }
                        TracedRequest::Write { lba, blocks } => {
                            (RequestOp::Write(lba), blocks.saturating_sub(1))
                        }
                        TracedRequest::Flush => (RequestOp::Flush, 0),
                    }
                }
                None if fsync_every.is_some_and(|every| job.writes_since_flush >= every) => {
                    job.writes_since_flush = 0;
                    (RequestOp::Flush, 0)
                }
                None => {
                    let draw = next_random(&mut job.rng);
                    let lba = draw % blocks;
                    if (draw >> 40) % 100 < u64::from(read_percent) {
                        (RequestOp::Read(lba), 0)
                    } else {
                        job.writes_since_flush += 1;
                        (RequestOp::Write(lba), 0)
                    }
                }
            };
            job.current = Some(Current {
                submitted_ns,
                op,
                more_blocks,
                in_driver_ns: None,
                victims: VecDeque::new(),
                flush: None,
            });
        }
        let current = job.current.as_mut().expect("a request in progress");
        let mut start = now;
        if current.in_driver_ns.is_none() {
            start += costs.submit_ns as u64;
            current.in_driver_ns = Some(start);
            self.charge(thread, Category::Others, costs.submit_ns as u64);
        }
        let current = self.current_mut(thread);
        // Slots to write back first.
        if let Some(victim) = current.victims.pop_front() {
            let category = if current.op == RequestOp::Flush {
                Category::Flush
            } else {
                Category::EvictionAndWrite
            };
            let io = self.btt_write(victim.lba, Some((category, start)));
            self.step(thread, Work::WroteBack(victim.slot), start, io);
            return;
        }
        let op = current.op;
        match op {
            RequestOp::Write(lba) => self.begin_write(thread, start, lba),
            RequestOp::Read(lba) => self.begin_read(thread, start, lba),
            RequestOp::Flush => self.begin_job_flush(thread, start),
        }
    }

    fn begin_write(&mut self, thread: u32, start: u64, lba: u64) {
        let costs = self.config.costs;
        let stack = self.config.stack;
        let Some(staging) = self.staging.as_mut() else {
            let charge = Some((Category::DeviceWrite, start));
            let io = match stack {
                Stack::RawPm => self.raw_write(lba, charge),
                Stack::Btt(_) => self.btt_write(lba, charge),
            };
            self.step(thread, Work::Done, start, io);
            return;
        };
        let decision = staging.write(lba);
        let lookup = (costs.write_decision_ns.of(stack.staging()) + costs.lock_ns) as u64;
        match decision {
            WriteStep::Cache { slot, .. } => {
                self.charge(thread, Category::Metadata, lookup);
                self.charge(thread, Category::CacheWrite, costs.copy_ns as u64);
                self.charge(thread, Category::Enqueue, costs.lock_ns as u64);
                let end = start + lookup + (costs.copy_ns + costs.lock_ns) as u64;
                self.step(thread, Work::Cached(slot), end, Io::none());
            }
            WriteStep::Bypass => {
                self.charge(thread, Category::Metadata, lookup);
                let io = self.btt_write(lba, Some((Category::Bypass, start + lookup)));
                self.step(thread, Work::Bypassed(lba), start + lookup, io);
            }
            WriteStep::EvictFirst(victims) => {
                self.charge(thread, Category::Metadata, lookup);
                self.current_mut(thread).victims.extend(victims);
                // The decision's time, then the write-backs, each a step, on this core.
                self.schedule(start + lookup, thread, Pending::CoreGranted);
            }
            WriteStep::Wait => self.park(thread),
        }
    }

    fn current_mut(&mut self, thread: u32) -> &mut Current {
        let Role::Job(job) = &mut self.threads[thread as usize].role else {
            unreachable!()
        };
        job.current.as_mut().expect("a request in progress")
    }

    fn begin_read(&mut self, thread: u32, start: u64, lba: u64) {
        let costs = self.config.costs;
        let decision = match self.staging.as_mut() {
            Some(staging) => staging.read(lba),
            None => ReadStep::Device,
        };
        let lookup = if self.staging.is_some() {
            costs.lookup_ns as u64
        } else {
            0
        };
        match decision {
            ReadStep::Slot(_) => {
                let end = start + lookup + costs.copy_ns as u64;
                self.charge(thread, Category::Read, end - start);
                self.step(thread, Work::Done, end, Io::none());
            }
            ReadStep::Device => {
                let io = self.device_read(lba, Some((Category::Read, start)));
                self.step(thread, Work::Done, start + lookup, io);
            }
            ReadStep::Wait => self.park(thread),
        }
    }

    fn begin_job_flush(&mut self, thread: u32, start: u64) {
        let Some(staging) = self.staging.as_mut() else {
            // Every write is durable when answered: a fence.
            let end = start + self.config.costs.persist_ns as u64;
            self.step(thread, Work::Done, end, Io::none());
            return;
        };
        let current = match &mut self.threads[thread as usize].role {
            Role::Job(job) => job.current.as_mut().expect("a request in progress"),
            _ => unreachable!(),
        };
        let ticket = current.flush.get_or_insert_with(|| staging.flush_begin());
        match staging.flush_step(ticket) {
            FlushStep::Evict(victims) => {
                current.victims.extend(victims);
                self.schedule(start, thread, Pending::CoreGranted);
            }
            FlushStep::Wait => self.park(thread),
            FlushStep::Done => {
                let end = start + self.config.costs.persist_ns as u64;
                self.charge(thread, Category::Flush, end - self.now);
                self.step(thread, Work::Done, end, Io::none());
            }
        }
    }

    /// Whether no request is in the driver now: a job's past its application-to-driver path
    /// and not yet answered, or the file system's periodic flush (Co-Active cleans only then).
    fn device_idle(&self) -> bool {
        let jobs = self.config.jobs.max(1) as usize;
        // Jobs come first and the flusher, if any, last.
        let flusher = self.threads.last().map(|thread| &thread.role);
        !matches!(flusher, Some(Role::Flusher { flush: Some(_), .. }))
            && self.threads[..jobs]
                .iter()
                .all(|thread| match &thread.role {
                    Role::Job(job) => job
                        .current
                        .as_ref()
                        .and_then(|current| current.in_driver_ns)
                        .is_none_or(|since| since > self.now),
                    _ => unreachable!("jobs come first"),
                })
    }

    fn begin_evictor(&mut self, thread: u32) {
        // Only a scheme that cleans while the device idles asks; the others' evictors are many.
        let wants_idle = self
            .staging
            .as_ref()
            .is_some_and(Staging::background_when_idle);
        let idle = wants_idle && self.device_idle();
        let victim = self
            .staging
            .as_mut()
            .and_then(|staging| staging.background(idle));
        match victim {
            Some(victim) => {
                let io = self.btt_write(victim.lba, None);
                let start = self.now + self.config.costs.lock_ns as u64;
                self.step(thread, Work::WroteBack(victim.slot), start, io);
            }
            None => {
                self.idle_evictors.push(thread);
                self.release_core();
            }
        }
    }

    fn begin_flusher(&mut self, thread: u32) {
        let now = self.now;
        let Role::Flusher {
            flush,
            started_ns,
            victims,
        } = &mut self.threads[thread as usize].role
        else {
            unreachable!()
        };
        if let Some(victim) = victims.pop_front() {
            let io = self.btt_write(victim.lba, None);
            self.step(thread, Work::WroteBack(victim.slot), now, io);
            return;
        }
        let staging = self.staging.as_mut().expect("a flusher flushes a cache");
        let ticket = flush.get_or_insert_with(|| {
            *started_ns = now;
            staging.flush_begin()
        });
        match staging.flush_step(ticket) {
            FlushStep::Evict(more) => {
                victims.extend(more);
                self.schedule(now, thread, Pending::CoreGranted);
            }
            FlushStep::Wait => self.park(thread),
            FlushStep::Done => {
                let started = *started_ns;
                *flush = None;
                self.flushes += 1;
                self.flush_latency_ns += now - started;
                let interval = self.config.flush_interval_ns.expect("a periodic flusher");
                self.schedule(started + interval, thread, Pending::Timer);
                self.release_core();
                if self.device_idle() {
                    self.wake_evictor();
                }
            }
        }
    }

    /// `thread`'s step ended: reports to the cache, gives up the core, goes on.
    fn end(&mut self, thread: u32) {
        let work = self.threads[thread as usize].work.take();
        if let Some((category, since)) = self.threads[thread as usize].charge.take() {
            self.charge(thread, category, self.now - since);
        }
        let mut request_done = false;
        match work {
            Some(Work::Cached(slot)) => {
                self.staging.as_mut().expect("cached").write_done(slot);
                self.wake_parked();
                self.wake_evictor();
                request_done = true;
            }
            Some(Work::Bypassed(lba)) => {
                self.staging.as_mut().expect("cached").bypass_done(lba);
                self.wake_parked();
                request_done = true;
            }
            Some(Work::WroteBack(slot)) => {
                self.staging.as_mut().expect("cached").evicted(slot);
                self.wake_parked();
            }
            Some(Work::Done) => request_done = true,
            None => {}
        }
        if request_done && self.is_job(thread) {
            self.next_block_or_complete(thread);
            if self.device_idle() {
                self.wake_evictor();
            }
        }
        self.release_core();
        self.want_core(thread);
    }

    /// A block of `job`'s request is done: on to its next, or the request is.
    fn next_block_or_complete(&mut self, job: u32) {
        let current = self.current_mut(job);
        if current.more_blocks > 0 {
            current.more_blocks -= 1;
            current.op = current.op.next_block();
        } else {
            self.complete(job);
        }
    }

    fn complete(&mut self, job: u32) {
        let now = self.now;
        let Role::Job(state) = &mut self.threads[job as usize].role else {
            unreachable!()
        };
        let current = state.current.take().expect("a request in progress");
        let latency = now - current.submitted_ns;
        if current.op == RequestOp::Flush {
            self.flushes += 1;
            self.flush_latency_ns += latency;
        }
        self.requests += 1;
        self.last_completion_ns = now;
        self.latency_ns.saturating_record(latency.max(1));
        if self.series.len() < self.config.series {
            self.series.push((now, latency));
        }
        if self.keeps_issuing(job) {
            self.issue(job);
        }
    }

    fn result(&self) -> StagedResult {
        let config = self.config;
        let stats = self
            .staging
            .as_ref()
            .map(|staging| staging.stats())
            .unwrap_or_default();
        let percentile_us = |q: f64| self.latency_ns.value_at_quantile(q) as f64 / 1000.0;
        let elapsed_ns = self.last_completion_ns.max(1);
        StagedResult {
            stack: config.stack.name().to_string(),
            jobs: config.jobs,
            iodepth: config.iodepth,
            cores: config.cores,
            cache_bytes: config.cache_bytes,
            requests: self.requests,
            elapsed_ns,
            iops: self.requests as f64 * 1e9 / elapsed_ns as f64,
            mean_latency_us: self.latency_ns.mean() / 1000.0,
            p50_latency_us: percentile_us(0.5),
            p99_latency_us: percentile_us(0.99),
            p9999_latency_us: percentile_us(0.9999),
            staging: stats,
            flushes: self.flushes,
            mean_flush_latency_us: if self.flushes == 0 {
                0.0
            } else {
                self.flush_latency_ns as f64 / self.flushes as f64 / 1000.0
            },
            time_ns: CATEGORIES
                .iter()
                .zip(self.time_ns)
                .map(|(name, ns)| (name.to_string(), ns))
                .collect(),
            metadata_bytes_per_slot: self
                .staging
                .as_ref()
                .map_or(0, |staging| staging.metadata_bytes_per_slot()),
            series: self.series.clone(),
        }
    }
}
