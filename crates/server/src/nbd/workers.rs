//! The NBD server's I/O workers (docs/architecture.md, "Serving"; docs/block-volumes.md, "Many
//! requests at once"): a pool of threads that carry out the requests an event loop must not
//! wait for — a miss reading a slow disk or a page the page cache lacks, a write-back, a flush
//! — so that hits on the loops never wait behind them, and a device gets as many requests at
//! once as there are workers (bounded per device by its queue depth). A paced device's work is
//! done on the loop, which holds the answer until the device's model says it is due.
//!
//! A cached volume's request reaches the queue once the turn of its next job has come
//! ([`Submission::when_ready`]); one that would wait again is parked on its lines, without a
//! thread, until it may go on. Any other export's request (a staged PM device's) is carried
//! out by blocking calls, as soon as a worker takes it.

use std::collections::VecDeque;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use heterarchy_device::BlockDevice;
use heterarchy_nbd::{Command, Request};
use heterarchy_volume::{Buffer, Command as VolumeCommand, Progress, Submission, Volume};
use mio::Waker;

use super::budget::Charge;
use super::connection::SLICE_BYTES;
use super::panic_message;
use super::reply::Replies;
use crate::stopping::Running;

/// Answers for one event loop's connections, and the waker that tells it they are there.
pub struct Inbox {
    answers: Mutex<Vec<Answer>>,
    waker: Waker,
}

/// One request's answer, for the connection in `slot` if it is still the one of `generation`,
/// to be sent at `due` on paced devices, with the bytes its request was charged.
pub struct Answer {
    pub slot: usize,
    pub generation: u64,
    pub bytes: Vec<u8>,
    pub due: Option<Instant>,
    pub charge: Charge,
    /// It answers a TRIM or WRITE ZEROES planned a slice at a time.
    pub sliced: bool,
}

impl Inbox {
    pub fn new(waker: Waker) -> Inbox {
        Inbox {
            answers: Mutex::new(Vec::new()),
            waker,
        }
    }

    /// Leaves an answer; wakes the loop unless answers were already waiting (it takes them
    /// all at once).
    pub fn send(&self, answer: Answer) {
        let mut answers = self
            .answers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let first = answers.is_empty();
        answers.push(answer);
        drop(answers);
        if first {
            if let Err(error) = self.waker.wake() {
                eprintln!("heterarchy: nbd: cannot wake an event loop: {error}");
            }
        }
    }

    /// Every answer waiting.
    pub fn take(&self) -> Vec<Answer> {
        std::mem::take(
            &mut *self
                .answers
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
    }

    /// Wakes the loop for something other than an answer (a new connection).
    pub fn wake(&self) -> io::Result<()> {
        self.waker.wake()
    }
}

/// Where a task is carried out.
enum Target {
    /// A cached volume's submission: taken while a worker carries it out; back when it pauses.
    /// A long TRIM or WRITE ZEROES has no submission between its slices.
    Volume {
        submission: Option<Submission>,
        volume: Arc<Volume>,
        slices: Option<Slices>,
    },
    /// A block device, by blocking calls.
    Device(Arc<dyn BlockDevice>),
}

/// What is left of a request planned by its worker, `slice_bytes` at a time: `next..end`, and
/// the latest due time of the slices done.
struct Slices {
    command: VolumeCommand,
    next: u64,
    end: u64,
    slice_bytes: u64,
    due: Option<Instant>,
}

/// A request parsed on a loop, to be carried out by a worker (for a cached volume, once its
/// turn has come).
pub struct Task {
    target: Target,
    request: Request,
    /// A WRITE's data.
    payload: Vec<u8>,
    replies: Replies,
    /// The answer being built: for a READ, its header and room for the data from `data_at`,
    /// made when a worker first takes the task, so that queued READs hold no buffer.
    answer: Vec<u8>,
    data_at: usize,
    charge: Charge,
    back: Back,
}

/// Where a task's answer goes: the loop's inbox, the connection's slot and its generation;
/// and the request's place among those under way, which the server waits for when it stops.
pub struct Back {
    pub inbox: Arc<Inbox>,
    pub slot: usize,
    pub generation: u64,
    pub running: Running,
}

impl Task {
    /// A task for `request` on a cached volume, planned as `submission`, its answer begun.
    pub fn on_volume(
        submission: Submission,
        volume: Arc<Volume>,
        request: Request,
        payload: Vec<u8>,
        replies: Replies,
        charge: Charge,
        back: Back,
    ) -> Task {
        let target = Target::Volume {
            submission: Some(submission),
            volume,
            slices: None,
        };
        Task::new(target, request, payload, replies, charge, back)
    }

    /// A task for `command` on a cached volume, planned by the worker that carries it out
    /// rather than on the event loop: a TRIM or WRITE ZEROES [`SLICE_BYTES`] at a time, a READ
    /// or WRITE (`payload`) whole.
    pub fn planned_by_worker(
        volume: Arc<Volume>,
        request: Request,
        command: VolumeCommand,
        payload: Vec<u8>,
        replies: Replies,
        charge: Charge,
        back: Back,
    ) -> Task {
        let slice_bytes = match command {
            VolumeCommand::Trim | VolumeCommand::WriteZeroes { .. } => SLICE_BYTES,
            _ => u64::from(request.length),
        };
        let slices = Slices {
            command,
            next: request.offset,
            end: request.offset + u64::from(request.length),
            slice_bytes,
            due: None,
        };
        let target = Target::Volume {
            submission: None,
            volume,
            slices: Some(slices),
        };
        Task::new(target, request, payload, replies, charge, back)
    }

    /// A task for `request` on a block device.
    pub fn on_device(
        device: Arc<dyn BlockDevice>,
        request: Request,
        payload: Vec<u8>,
        replies: Replies,
        charge: Charge,
        back: Back,
    ) -> Task {
        Task::new(
            Target::Device(device),
            request,
            payload,
            replies,
            charge,
            back,
        )
    }

    fn new(
        target: Target,
        request: Request,
        payload: Vec<u8>,
        replies: Replies,
        charge: Charge,
        back: Back,
    ) -> Task {
        Task {
            target,
            request,
            payload,
            replies,
            answer: Vec::new(),
            data_at: 0,
            charge,
            back,
        }
    }

    /// Makes a READ's answer buffer, the first time a worker takes the task.
    fn begin(&mut self) {
        if self.request.command == Command::Read && self.answer.is_empty() {
            (self.answer, self.data_at) = self.replies.read_answer(&self.request);
        }
    }
}

/// Carries a cached volume's task as far as it goes: its submission, then (when sliced) every
/// slice left, each planned when the one before is done.
fn advance_on_volume(
    volume: &Volume,
    submission: &mut Option<Submission>,
    slices: &mut Option<Slices>,
    command: Command,
    answer: &mut [u8],
    payload: &[u8],
) -> Progress {
    loop {
        let current = match (submission.take(), slices.as_mut()) {
            (Some(current), _) => current,
            (None, Some(slices)) => {
                let len = slices.slice_bytes.min(slices.end - slices.next);
                match volume.submit(slices.command, slices.next, len) {
                    Ok(current) => {
                        slices.next += len;
                        current
                    }
                    Err(error) => return Progress::Done(Err(error)),
                }
            }
            (None, None) => unreachable!("a volume's task has a submission or slices"),
        };
        let buffer = match command {
            Command::Read => Buffer::Read(answer),
            Command::Write => Buffer::Write(payload),
            _ => Buffer::None,
        };
        let progress = volume.advance(current, buffer);
        let Some(left) = slices.as_mut() else {
            return progress;
        };
        match progress {
            Progress::Done(Ok(due)) => {
                left.due = left.due.max(due);
                if left.next == left.end {
                    return Progress::Done(Ok(left.due));
                }
            }
            other => return other,
        }
    }
}

struct Queue {
    tasks: Mutex<VecDeque<Task>>,
    ready: Condvar,
}

/// The pool.
#[derive(Clone)]
pub struct Workers {
    queue: Arc<Queue>,
}

impl Workers {
    /// Starts `count` workers (at least one).
    pub fn start(count: usize) -> io::Result<Workers> {
        let queue = Arc::new(Queue {
            tasks: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
        });
        let workers = Workers { queue };
        for index in 0..count.max(1) {
            let workers = workers.clone();
            std::thread::Builder::new()
                .name(format!("nbd-io-{index}"))
                .spawn(move || workers.work())?;
        }
        Ok(workers)
    }

    /// Queues `task` behind every task queued before it.
    pub fn push(&self, task: Task) {
        self.queue
            .tasks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push_back(task);
        self.queue.ready.notify_one();
    }

    fn work(&self) {
        loop {
            let task = {
                let mut tasks = self
                    .queue
                    .tasks
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                loop {
                    if let Some(task) = tasks.pop_front() {
                        break task;
                    }
                    tasks = self
                        .queue
                        .ready
                        .wait(tasks)
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                }
            };
            self.run(task);
        }
    }

    /// Goes on with a task as far as its turns allow: parked again when a later piece's turn
    /// has not come, else answered to its loop, which holds the answer until due on paced
    /// devices. A panic becomes an I/O error for this request alone.
    fn run(&self, mut task: Task) {
        task.begin();
        let (progress, name) = match &mut task.target {
            Target::Volume {
                submission,
                volume,
                slices,
            } => {
                let progress = catch_unwind(AssertUnwindSafe(|| {
                    advance_on_volume(
                        volume,
                        submission,
                        slices,
                        task.request.command,
                        &mut task.answer[task.data_at..],
                        &task.payload,
                    )
                }));
                (progress, volume.name().to_string())
            }
            Target::Device(device) => {
                let progress = catch_unwind(AssertUnwindSafe(|| {
                    let request = &task.request;
                    let (offset, length) = (request.offset, u64::from(request.length));
                    let result = match request.command {
                        Command::Read => device.read(offset, &mut task.answer[task.data_at..]),
                        Command::Write => device.write(offset, &task.payload, request.fua()),
                        Command::WriteZeroes => device.write_zeroes(offset, length, request.fua()),
                        Command::Trim => device.trim(offset, length),
                        Command::Flush => device.flush(),
                        other => Err(io::Error::new(
                            io::ErrorKind::Unsupported,
                            format!("unsupported command {other:?}"),
                        )),
                    };
                    Progress::Done(result.map(|()| None))
                }));
                (progress, device.name().to_string())
            }
        };
        let result = match progress {
            Ok(Progress::Paused(submission)) => {
                let workers = self.clone();
                submission.when_ready(move |submission| {
                    if let Target::Volume {
                        submission: slot, ..
                    } = &mut task.target
                    {
                        *slot = Some(submission);
                    }
                    workers.push(task);
                });
                return;
            }
            Ok(Progress::Done(result)) => result,
            Err(panic) => {
                let reason = format!("the request panicked: {}", panic_message(panic.as_ref()));
                eprintln!("heterarchy: nbd: export {name}: {reason}");
                Err(io::Error::other(reason))
            }
        };
        // The connection runs one long TRIM or WRITE ZEROES at a time.
        let sliced = matches!(task.request.command, Command::Trim | Command::WriteZeroes)
            && matches!(
                task.target,
                Target::Volume {
                    slices: Some(_),
                    ..
                }
            );
        let Task {
            request,
            replies,
            mut answer,
            charge,
            back,
            ..
        } = task;
        match request.command {
            Command::Read => replies.end_read(&mut answer, 0, &request, &result),
            _ => replies.outcome(&mut answer, request.cookie, &result),
        }
        back.inbox.send(Answer {
            slot: back.slot,
            generation: back.generation,
            bytes: answer,
            due: result.ok().flatten(),
            charge,
            sliced,
        });
        // The request is over once its answer is with the loop.
        drop(back.running);
    }
}
