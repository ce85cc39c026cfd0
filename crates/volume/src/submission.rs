//! A command's life in a volume (docs/architecture.md, "A request through a live volume"):
//! planned whole ([`Volume::submit`]), then carried out job by job in its turn on each line —
//! at once on a thread that must not wait ([`Volume::try_complete`]), as far as its turns allow
//! on a worker that must not sit idle ([`Volume::advance`]), or to the end, waiting
//! ([`Volume::complete`]) — and answered.

use std::collections::VecDeque;
use std::io;
use std::time::{Duration, Instant};

use heterarchy_device::backend::check_range;
use heterarchy_engine::{Controller, Reply};

use crate::job::{Access, Client, Job, Mode};
use crate::planning::{pieces, Piece};
use crate::sectors::Storage;
use crate::stats::Counters;
use crate::timing::DeviceTime;
use crate::volume::Volume;

/// Zeroes for WRITE_ZEROES, one line at most.
static ZEROES: [u8; crate::layout::MAX_LINE_BYTES as usize] =
    [0; crate::layout::MAX_LINE_BYTES as usize];

/// How far a submission is carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Drive {
    /// To the end, waiting for turns and devices.
    Wait,
    /// While turns have come, waiting for devices.
    UntilTurn,
    /// Without waiting at all: refused before anything changes if it would.
    AtOnce,
}

/// Why a job was not carried out.
pub(crate) enum Refusal {
    /// Given back untouched (boxed: refusals are rare, results common).
    WouldWait(Box<Job>),
    Failed(io::Error),
}

impl Refusal {
    pub(crate) fn into_error(self) -> io::Error {
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

impl Command {
    /// True when its answer promises durability: a flush, or a write with FUA.
    fn is_durable(self) -> bool {
        matches!(
            self,
            Command::Flush | Command::Write { fua: true } | Command::WriteZeroes { fua: true }
        )
    }
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
    /// tier that forgets, one writing back every line dirty when it was planned, after every
    /// job planned before it (planned with the command, so that it waits only for those).
    steps: VecDeque<Step>,
    /// Jobs done so far.
    done: usize,
    /// When the answer is due so far, ns since the volume opened.
    due: u64,
    /// The device operations' times so far, for a tuner that measures devices.
    times: Vec<DeviceTime>,
    /// The first job that failed. The jobs after it are still carried out: their plans are
    /// the controller's already, and a plan left undone would leave its lines' data where
    /// the controller no longer looks (`crate::failure`).
    failure: Option<io::Error>,
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
    /// True when its turn has come on every line: completing it waits for no other request.
    fn is_ready(&self) -> bool {
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

impl Volume {
    /// Plans `command` on `len` bytes at `offset`: the controller decides for every line it
    /// touches, and the returned submission holds its turn on each. Complete it with
    /// [`complete`](Self::complete), on this thread or another.
    pub fn submit(&self, command: Command, offset: u64, len: u64) -> io::Result<Submission> {
        check_range(self.size_bytes, offset, len)?;
        self.check_open()?;
        self.check_stranded(offset, len)?;
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
            // A cache given up (`crate::failure`) is gone around, as Open CAS's pass-through.
            let bypass = access != Access::Trim
                && (self.failure.is_failed() || control.cutoff.bypass(offset, len, full));
            Counters::add(&self.counters.cutoff_bypasses, u64::from(bypass));
            for piece in pieces(offset, len, self.line_bytes) {
                let job = self.plan_piece(&mut control, access, piece, now, bypass);
                jobs.push((job, piece));
            }
        }
        let cleaning = (command.is_durable() && self.has_volatile_tier())
            .then(|| self.plan_cleaning(&mut control, now).0);
        drop(control);
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
            failure: None,
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
        // A durable command waits for its flush.
        let quick = submission.done == 0
            && !submission.command.is_durable()
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
    pub(crate) fn drive(
        &self,
        mut submission: Submission,
        buffer: Buffer<'_>,
        how: Drive,
    ) -> Progress {
        let command = submission.command;
        let mut buffer = buffer;
        let mode = match how {
            Drive::AtOnce => Mode::AtOnce,
            Drive::Wait | Drive::UntilTurn => Mode::Wait,
        };
        while let Some(step) = submission.steps.pop_front() {
            if how != Drive::Wait && !step.job().turns.is_ready() {
                submission.steps.push_front(step);
                return Progress::Paused(submission);
            }
            let (job, client, piece) = match step {
                Step::Cleaning(job) => (job, Client::None, None),
                Step::Piece(job, piece) if command == Command::Trim => {
                    if let Err(error) = self.trim_piece(job, piece) {
                        submission.failure.get_or_insert(error);
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
                Err(refusal) => {
                    submission.failure.get_or_insert(refusal.into_error());
                }
            }
            submission.done += 1;
        }
        if let Some(error) = submission.failure {
            return Progress::Done(Err(error));
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
    pub(crate) fn trim_piece(&self, job: Job, piece: Piece) -> io::Result<()> {
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

    /// Waits for `job`'s turn on each of its lines, runs `work`, and ends the turn (also when
    /// `work` fails or panics: see [`crate::order::Turns`]).
    pub(crate) fn in_turn(
        &self,
        mut job: Job,
        work: impl FnOnce(&Storage, &Job) -> io::Result<u64>,
    ) -> io::Result<u64> {
        job.turns.wait();
        let result = self
            .failure
            .check_slots(&job)
            .and_then(|()| work(&self.storage, &job));
        if result.is_err() {
            self.repair(&job);
        }
        self.finish(job, result)
    }

    /// Carries `job` out in its turn; returns when its answer is due (ns since the epoch),
    /// noting each device operation's time in `times` when a tuner wants them. With
    /// [`Mode::AtOnce`] the job comes back untouched when a read would have waited.
    pub(crate) fn run(
        &self,
        mut job: Job,
        mut client: Client<'_>,
        times: &mut Vec<DeviceTime>,
        mode: Mode,
    ) -> Result<u64, Refusal> {
        job.turns.wait();
        let result = self
            .failure
            .check_slots(&job)
            .and_then(|()| self.storage.execute(&job, client.reborrow(), mode));
        match result {
            Err(error) if error.kind() == io::ErrorKind::WouldBlock && mode == Mode::AtOnce => {
                Err(Refusal::WouldWait(Box::new(job)))
            }
            result => {
                let result = result.or_else(|error| {
                    self.repair(&job);
                    self.go_around(&job, client, error)
                });
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
    pub(crate) fn finish(&self, job: Job, result: io::Result<u64>) -> io::Result<u64> {
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
    pub(crate) fn answer(
        &self,
        arrival: Instant,
        due: u64,
        bytes: usize,
        times: &[DeviceTime],
    ) -> Option<Instant> {
        let now = self.ns_since_epoch(arrival);
        let throttled = self.is_throttled();
        let due_at =
            (throttled && due > now).then(|| self.storage.epoch + Duration::from_nanos(due));
        if !self.feedback.device_ops && !self.feedback.replies {
            return due_at;
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
        due_at
    }
}
