//! A cached volume: the engine's cache controller executing its plans on real storage, one or
//! more cache tiers over a backing store, many requests at once (docs/architecture.md, "One
//! policy code, two executors" and "A request through a live volume"; issue 5, items 2 and 3;
//! issue 16, items 1 and 2; Orthus-CAS, seed 000 §4.4).
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

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use heterarchy_device::backend::check_range;
use heterarchy_engine::{
    CacheController, Controller, DeviceOp, Feedback, IoKind, Plan, Reply, TierLayout, WriteMode,
};
use heterarchy_trace::{Op, Request};

use crate::cutoff::SequentialCutoff;
use crate::execute::{Access, Client, Job, LineJob, RequestPart};
use crate::order::LineOrder;
use crate::placement::Placement;
use crate::sectors::{Copies, Storage};
use crate::stats::{Counters, StatsSource, VolumeStats};
use crate::timing::DeviceTime;

/// Zeroes for WRITE_ZEROES, one line at most.
static ZEROES: [u8; crate::layout::MAX_LINE_BYTES as usize] =
    [0; crate::layout::MAX_LINE_BYTES as usize];

/// A block volume with cache tiers in front of its backing store; shared by every connection
/// and every thread.
pub struct Volume {
    pub(crate) name: String,
    pub(crate) size_bytes: u64,
    pub(crate) line_bytes: u32,
    pub(crate) mode: WriteMode,
    pub(crate) layout: TierLayout,
    pub(crate) epoch: Instant,
    pub(crate) storage: Storage,
    pub(crate) control: Mutex<Control>,
    pub(crate) order: Arc<LineOrder>,
    /// Flushes run one at a time (each settles what the one before left).
    pub(crate) flushing: Mutex<()>,
    /// Shut down: every request is refused, so nothing is answered after the last clean.
    pub(crate) closed: AtomicBool,
    pub(crate) counters: Counters,
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

/// How far a submission is carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Drive {
    /// To the end, waiting for turns and devices.
    Wait,
    /// While turns have come, waiting for devices.
    UntilTurn,
    /// Without waiting at all: refused before anything changes if it would.
    AtOnce,
}

/// Whether carrying a job out may wait for devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Wait,
    /// On a thread that must not wait: reads take only what is at hand, else the job is
    /// refused before anything changes.
    AtOnce,
}

/// Why a job was not carried out.
enum Refusal {
    /// Given back untouched (boxed: refusals are rare, results common).
    WouldWait(Box<Job>),
    Failed(io::Error),
}

impl Refusal {
    fn into_error(self) -> io::Error {
        match self {
            Refusal::WouldWait(_) => {
                io::Error::other("a piece after the first would have waited; the plan said not")
            }
            Refusal::Failed(error) => error,
        }
    }
}

/// What a client asks of a volume (NBD's commands).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Read,
    /// With `fua`, durable before it is answered.
    Write {
        fua: bool,
    },
    WriteZeroes {
        fua: bool,
    },
    Trim,
    Flush,
}

/// A client's buffer for a command.
pub enum Buffer<'a> {
    /// Where a read's data goes.
    Read(&'a mut [u8]),
    /// Where a write's data comes from.
    Write(&'a [u8]),
    /// Zeroes, trims and flushes carry none.
    None,
}

/// A command planned: every piece's job holds its turn on the lines it touches. It may go to
/// another thread to be completed ([`Volume::complete`]), wait for its turn without a thread
/// ([`Submission::when_ready`]), or be tried at once on a thread that must not wait
/// ([`Volume::try_complete`]); dropped unfinished, it still takes and ends its turns, in order.
pub struct Submission {
    command: Command,
    len: u64,
    arrival: Instant,
    /// What is left to do, in order: one job per piece, then for a FLUSH or a FUA write with a
    /// tier that forgets, one writing back every line dirty when it was planned (planned with
    /// the command, so that it waits only for requests planned before it).
    steps: VecDeque<Step>,
    /// Jobs done so far.
    done: usize,
    /// When the answer is due so far, ns since the volume opened.
    due: u64,
    /// The device operations' times so far, for a tuner that measures devices.
    times: Vec<DeviceTime>,
}

/// One job of a submission.
enum Step {
    Piece(Job, Piece),
    Cleaning(Job),
}

impl Step {
    fn job(&self) -> &Job {
        match self {
            Step::Piece(job, _) | Step::Cleaning(job) => job,
        }
    }
}

impl Submission {
    /// The command planned.
    pub fn command(&self) -> Command {
        self.command
    }

    /// True when its turn has come on every line: completing it waits for no other request.
    pub fn is_ready(&self) -> bool {
        self.steps.iter().all(|step| step.job().turns.is_ready())
    }

    /// Hands the submission to `ready` once the turn of its next job has come: at once if it
    /// has, else on the thread that ends the last turn before it. No thread waits meanwhile;
    /// [`Volume::advance`] then goes as far as it can.
    pub fn when_ready(self, ready: impl FnOnce(Submission) + Send + 'static) {
        let Some(next) = self.steps.front() else {
            return ready(self);
        };
        let turns = &next.job().turns;
        let (order, tickets) = (
            std::sync::Arc::clone(turns.order()),
            turns.tickets().to_vec(),
        );
        order.when_served(&tickets, Box::new(move || ready(self)));
    }
}

/// How far [`Volume::advance`] got.
pub enum Progress {
    /// Completed: the answer, due when [`Volume::complete`] says.
    Done(io::Result<Option<Instant>>),
    /// The next job's turn has not come ([`Submission::when_ready`] says when it has).
    Paused(Submission),
}

/// What trying a submission at once gave.
pub enum Attempt {
    /// Completed: the answer, due when [`Volume::complete`] says.
    Done(io::Result<Option<Instant>>),
    /// It would have waited (for a device, or another request's turn); nothing was changed.
    WouldBlock(Submission),
}

/// One request's part within one cache line.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Piece {
    pub key: u64,
    /// Byte offset within the line.
    pub start: u32,
    pub len: u32,
    /// Byte offset within the request.
    pub at: usize,
}

pub(crate) fn pieces(offset: u64, len: u64, line_bytes: u32) -> impl Iterator<Item = Piece> {
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

    /// True when answers wait for the devices' models.
    pub fn is_throttled(&self) -> bool {
        self.storage.is_throttled()
    }

    pub(crate) fn lock_control(&self) -> MutexGuard<'_, Control> {
        self.control
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn check_open(&self) -> io::Result<()> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!("volume {} is shutting down", self.name),
            ));
        }
        Ok(())
    }

    fn ns_since_epoch(&self, instant: Instant) -> u64 {
        instant.saturating_duration_since(self.epoch).as_nanos() as u64
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

    /// Plans `command` on `len` bytes at `offset`: the controller decides for every line it
    /// touches, and the returned submission holds its turn on each. Complete it with
    /// [`complete`](Self::complete), on this thread or another.
    pub fn submit(&self, command: Command, offset: u64, len: u64) -> io::Result<Submission> {
        check_range(self.size_bytes, offset, len)?;
        self.check_open()?;
        let arrival = Instant::now();
        let now = self.ns_since_epoch(arrival);
        let access = match command {
            Command::Read => Some(Access::Read),
            Command::Write { .. } | Command::WriteZeroes { .. } => Some(Access::Write),
            Command::Trim => Some(Access::Trim),
            Command::Flush => None,
        };
        let mut control = self.lock_control();
        let mut jobs = Vec::new();
        if let Some(access) = access {
            let full = control.placement.iter().all(|tier| tier.free_count() == 0);
            let bypass = access != Access::Trim && control.cutoff.bypass(offset, len, full);
            Counters::add(&self.counters.cutoff_bypasses, u64::from(bypass));
            for piece in pieces(offset, len, self.line_bytes) {
                let job = self.plan_piece(&mut control, access, piece, now, bypass);
                jobs.push((job, piece));
            }
        }
        drop(control);
        let durable = matches!(
            command,
            Command::Flush | Command::Write { fua: true } | Command::WriteZeroes { fua: true }
        );
        let cleaning = if durable {
            let mut control = self.lock_control();
            self.forgets_dirty_lines(&control)
                .then(|| self.plan_cleaning(&mut control, now).0)
        } else {
            None
        };
        let steps = jobs
            .into_iter()
            .map(|(job, piece)| Step::Piece(job, piece))
            .chain(cleaning.map(Step::Cleaning))
            .collect();
        Ok(Submission {
            command,
            len,
            arrival,
            steps,
            done: 0,
            due: now,
            times: Vec::new(),
        })
    }

    /// Completes a submission without waiting for anything, on a thread that must not wait:
    /// its turn must have come, it must need no device that always waits, no flush or
    /// write-back ([`Storage::is_quick`](crate::sectors::Storage)), and reads from buffered
    /// files take only what the page cache holds. When something would wait, nothing is
    /// changed and the submission comes back, for a thread that may wait. On paced devices the
    /// answer comes with when it is due, for the caller to hold until then.
    pub fn try_complete(&self, submission: Submission, buffer: Buffer<'_>) -> Attempt {
        // A try that fails must have changed nothing: only the first job's reads may refuse,
        // so several jobs are tried only when nothing they read can.
        let memory_only = submission.steps.len() > 1;
        let quick = submission.done == 0
            && !matches!(
                submission.command,
                Command::Flush | Command::Write { fua: true } | Command::WriteZeroes { fua: true }
            )
            && submission.is_ready()
            && submission.steps.iter().all(|step| match step {
                Step::Piece(job, _) => self.storage.is_quick(job, memory_only),
                Step::Cleaning(_) => false,
            });
        if !quick {
            return Attempt::WouldBlock(submission);
        }
        match self.drive(submission, buffer, Drive::AtOnce) {
            Progress::Done(result) => Attempt::Done(result),
            Progress::Paused(submission) => Attempt::WouldBlock(submission),
        }
    }

    /// Goes on with a submission for as long as its jobs' turns have come, waiting for devices
    /// but never for another request; a worker that must not sit idle calls it.
    pub fn advance(&self, submission: Submission, buffer: Buffer<'_>) -> Progress {
        self.drive(submission, buffer, Drive::UntilTurn)
    }

    /// Carries a submission out, in its turn on each line: `buffer` is where a read's data
    /// goes or a write's comes from (zeroes and trims take none). Returns when the answer is
    /// due on throttled devices (`None`: now).
    pub fn complete(
        &self,
        submission: Submission,
        buffer: Buffer<'_>,
    ) -> io::Result<Option<Instant>> {
        match self.drive(submission, buffer, Drive::Wait) {
            Progress::Done(result) => result,
            Progress::Paused(_) => unreachable!("a submission that may wait never pauses"),
        }
    }

    /// Carries out a submission's steps as `how` allows.
    fn drive(&self, mut submission: Submission, buffer: Buffer<'_>, how: Drive) -> Progress {
        let command = submission.command;
        let mut buffer = buffer;
        while let Some(step) = submission.steps.pop_front() {
            if how != Drive::Wait && !step.job().turns.is_ready() {
                submission.steps.push_front(step);
                return Progress::Paused(submission);
            }
            let mode = match how {
                Drive::AtOnce => Mode::AtOnce,
                Drive::Wait | Drive::UntilTurn => Mode::Wait,
            };
            let (job, client, piece) = match step {
                Step::Cleaning(job) => (job, Client::None, None),
                Step::Piece(job, piece) if command == Command::Trim => {
                    if let Err(error) = self.trim_piece(job, piece) {
                        return Progress::Done(Err(error));
                    }
                    submission.done += 1;
                    continue;
                }
                Step::Piece(job, piece) => {
                    let range = piece.at..piece.at + piece.len as usize;
                    let client = match (&mut buffer, command) {
                        (Buffer::Read(out), Command::Read) => Client::Read(&mut out[range]),
                        (Buffer::Write(data), Command::Write { .. }) => Client::Write(&data[range]),
                        (_, Command::WriteZeroes { .. }) => {
                            Client::Write(&ZEROES[..piece.len as usize])
                        }
                        _ => {
                            return Progress::Done(Err(io::Error::new(
                                io::ErrorKind::InvalidInput,
                                format!("{command:?} was given the wrong kind of buffer"),
                            )))
                        }
                    };
                    (job, client, Some(piece))
                }
            };
            match self.run(job, client, &mut submission.times, mode) {
                Ok(due) => submission.due = submission.due.max(due),
                Err(Refusal::WouldWait(job)) if submission.done == 0 => {
                    let step = match piece {
                        Some(piece) => Step::Piece(*job, piece),
                        None => Step::Cleaning(*job),
                    };
                    submission.steps.push_front(step);
                    return Progress::Paused(submission);
                }
                Err(refusal) => return Progress::Done(Err(refusal.into_error())),
            }
            submission.done += 1;
        }
        let Submission {
            len,
            arrival,
            due,
            times,
            ..
        } = submission;
        let finished = match command {
            Command::Read => {
                Counters::add(&self.counters.reads, 1);
                Counters::add(&self.counters.read_bytes, len);
                Ok(())
            }
            Command::Write { fua } | Command::WriteZeroes { fua } => {
                Counters::add(&self.counters.writes, 1);
                Counters::add(&self.counters.write_bytes, len);
                if fua {
                    self.persist_all()
                } else {
                    Ok(())
                }
            }
            Command::Trim => {
                Counters::add(&self.counters.trims, 1);
                Ok(())
            }
            Command::Flush => {
                Counters::add(&self.counters.flushes, 1);
                self.persist_all()
            }
        };
        Progress::Done(finished.map(|()| self.answer(arrival, due, len as usize, &times)))
    }

    /// Discards one piece: a whole line leaves the cache and the backing store is told; part
    /// of a line a tier holds stays whole.
    fn trim_piece(&self, job: Job, piece: Piece) -> io::Result<()> {
        let kept = job.plan.is_empty() && job.lines[0].before.iter().any(Option::is_some);
        let backing_offset = self.storage.backing_offset(piece.key, piece.start);
        self.in_turn(job, |storage, job| {
            storage.execute(job, Client::None, Mode::Wait)?;
            if !kept {
                storage
                    .backing()
                    .discard(backing_offset, u64::from(piece.len))?;
            }
            Ok(0)
        })
        .map(drop)
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
            uptime_s: self.epoch.elapsed().as_secs_f64(),
            controller: &control.controller,
            storage: &self.storage,
            counters: &self.counters,
        })
    }

    /// Plans one piece: the controller's plan, or for a bypassed or partly trimmed line a
    /// plan of the volume's own.
    fn plan_piece(
        &self,
        control: &mut Control,
        access: Access,
        piece: Piece,
        now: u64,
        bypass: bool,
    ) -> Job {
        let key = piece.key;
        let mut plan = control.spare_plans.pop().unwrap_or_default();
        plan.clear();
        let held = (0..self.tiers()).any(|tier| control.controller.holds(tier, key));
        let whole_line = piece.start == 0 && piece.len == self.line_bytes;
        match access {
            Access::Trim if !whole_line => {}
            Access::Read | Access::Write if bypass && !held => {
                let kind = if access == Access::Read {
                    IoKind::Read
                } else {
                    IoKind::Write
                };
                plan.push(DeviceOp {
                    device: self.tiers() as u8,
                    kind,
                    key,
                    bytes: self.line_bytes,
                });
                plan.end_stage();
            }
            _ => {
                let op = match access {
                    Access::Read => Op::Read,
                    Access::Write => Op::Write,
                    Access::Trim => Op::Trim,
                };
                let request = Request {
                    op,
                    time_ns: now,
                    ..Request::new(key, self.line_bytes)
                };
                control.controller.plan(&request, now, &mut plan);
            }
        }
        let part = RequestPart {
            access,
            key,
            start: piece.start,
            len: piece.len,
            dirty_after: 0,
            reads_change_nothing: matches!(self.mode, WriteMode::Wo | WriteMode::Pt),
        };
        self.resolve(control, plan, Some(part), now)
    }

    /// Gives a plan its slots and tickets: every line it touches takes a ticket, and so does
    /// the last line of every slot it fills (whose emptying must come first).
    pub(crate) fn resolve(
        &self,
        control: &mut Control,
        plan: Plan,
        mut request: Option<RequestPart>,
        now: u64,
    ) -> Job {
        let tiers = self.tiers();
        let mut keys: Vec<u64> = request.iter().map(|part| part.key).collect();
        let touched = plan
            .ops()
            .iter()
            .map(|op| op.key)
            .chain(plan.departures().iter().map(|&(_, key)| key));
        for key in touched {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        let mut lines: Vec<LineJob> = keys
            .iter()
            .map(|&key| {
                let mut before = Copies::default();
                for (tier, slot) in before.iter_mut().enumerate().take(tiers) {
                    *slot = control.placement[tier].get(key);
                }
                LineJob {
                    key,
                    before,
                    after: Copies::default(),
                }
            })
            .collect();
        // Slots follow the controller: first every slot a line leaves, so a victim's slot can
        // go to the line that displaced it, then every slot a line enters.
        let control = &mut *control;
        for line in &lines {
            for tier in 0..tiers {
                if !control.controller.holds(tier, line.key) {
                    control.placement[tier].release(line.key);
                }
            }
        }
        let mut predecessors = Vec::new();
        for line in &mut lines {
            for tier in 0..tiers {
                if control.controller.holds(tier, line.key) {
                    let (slot, previous) = control.placement[tier]
                        .assign(line.key)
                        .expect("the controller holds no more lines than a tier has slots");
                    line.after[tier] = Some(slot);
                    predecessors.extend(previous);
                }
            }
        }
        if let Some(part) = &mut request {
            part.dirty_after = (0..tiers)
                .filter(|&tier| control.controller.is_dirty(tier, part.key))
                .fold(0, |bits, tier| bits | 1 << tier);
        }
        for key in predecessors {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        let turns = self.order.take_turns(&keys);
        Job {
            plan,
            lines,
            request,
            turns,
            now_ns: now,
        }
    }

    /// Waits for `job`'s turn on each of its lines, runs `work`, and ends the turn (also when
    /// `work` fails or panics: see [`crate::order::Turns`]).
    pub(crate) fn in_turn(
        &self,
        mut job: Job,
        work: impl FnOnce(&Storage, &Job) -> io::Result<u64>,
    ) -> io::Result<u64> {
        job.turns.wait();
        let result = work(&self.storage, &job);
        self.finish(job, result)
    }

    /// Carries `job` out in its turn; returns when its answer is due (ns since the epoch),
    /// noting each device operation's time in `times` when a tuner wants them. With
    /// [`Mode::AtOnce`] the job comes back untouched when a read would have waited.
    fn run(
        &self,
        mut job: Job,
        client: Client<'_>,
        times: &mut Vec<DeviceTime>,
        mode: Mode,
    ) -> Result<u64, Refusal> {
        job.turns.wait();
        match self.storage.execute(&job, client, mode) {
            Err(error) if error.kind() == io::ErrorKind::WouldBlock && mode == Mode::AtOnce => {
                Err(Refusal::WouldWait(Box::new(job)))
            }
            result => {
                let wants_times = self.feedback.device_ops;
                let due = self
                    .storage
                    .time_job(&job, wants_times.then_some(&mut *times));
                self.finish(job, result)
                    .map(|_| due)
                    .map_err(Refusal::Failed)
            }
        }
    }

    /// Ends a job's turn, counts its write-backs and keeps its plan for reuse.
    fn finish(&self, job: Job, result: io::Result<u64>) -> io::Result<u64> {
        let Job {
            mut plan, turns, ..
        } = job;
        drop(turns);
        if let Ok(writebacks) = result {
            Counters::add(&self.counters.writebacks, writebacks);
        }
        plan.clear();
        self.lock_control().spare_plans.push(plan);
        result
    }

    /// Reports the answer to the controller's tuner and says when it is due.
    fn answer(
        &self,
        arrival: Instant,
        due: u64,
        bytes: usize,
        times: &[DeviceTime],
    ) -> Option<Instant> {
        let now = self.ns_since_epoch(arrival);
        let throttled = self.is_throttled();
        if !self.feedback.device_ops && !self.feedback.replies {
            return (throttled && due > now).then(|| self.epoch + Duration::from_nanos(due));
        }
        let mut control = self.lock_control();
        if self.feedback.device_ops {
            for time in times {
                control
                    .controller
                    .on_device_op(time.device, time.bytes, time.latency_ns);
            }
        }
        if self.feedback.replies {
            let latency_ns = if throttled {
                due - now
            } else {
                arrival.elapsed().as_nanos() as u64
            };
            control.controller.on_reply(&Reply {
                now_ns: now + latency_ns,
                latency_ns,
                bytes: bytes.min(u32::MAX as usize) as u32,
            });
        }
        (throttled && due > now).then(|| self.epoch + Duration::from_nanos(due))
    }

    /// Writes every dirty line back.
    pub(crate) fn clean_all(&self) -> io::Result<u64> {
        let (job, lines) = self.plan_cleaning(&mut self.lock_control(), 0);
        self.run(job, Client::None, &mut Vec::new(), Mode::Wait)
            .map_err(Refusal::into_error)?;
        Ok(lines)
    }

    /// A plan writing every dirty line back, with its turns, and how many lines it cleans.
    fn plan_cleaning(&self, control: &mut Control, now: u64) -> (Job, u64) {
        let mut plan = control.spare_plans.pop().unwrap_or_default();
        plan.clear();
        let lines = control.controller.flush(&mut plan) as u64;
        (self.resolve(control, plan, None, now), lines)
    }

    /// True when a tier forgets on a crash and dirty lines exist: a FLUSH must write them back.
    fn forgets_dirty_lines(&self, control: &Control) -> bool {
        let volatile = self.storage.devices[..self.tiers()]
            .iter()
            .any(|device| !device.slots().is_persistent());
        volatile && control.controller.stats().dirty_lines > 0
    }

    /// Everything answered so far survives a crash from now on. Only for threads outside a
    /// server's worker pool: its cleaning takes turns after requests still queued.
    pub(crate) fn make_durable(&self) -> io::Result<()> {
        if self.forgets_dirty_lines(&self.lock_control()) {
            self.clean_all()?;
        }
        self.persist_all()
    }

    /// Makes every device durable and settles what the flush made safe; flushes run one at a
    /// time.
    fn persist_all(&self) -> io::Result<()> {
        let _one_at_a_time = self
            .flushing
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let sealed = self.storage.flush_epoch.fetch_add(1, Ordering::SeqCst);
        for device in &self.storage.devices {
            device.flush()?;
        }
        for device in &self.storage.devices[..self.tiers()] {
            let slots = device.slots();
            if slots.is_persistent() {
                slots.settle(sealed, device.backend.as_ref())?;
            }
        }
        Ok(())
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
}
