//! The NBD server's I/O workers (issue 16, item 1; docs/architecture.md, "Serving"): a pool of
//! threads that carry out the requests an event loop must not wait for — a miss reading a slow
//! disk, a write-back, a flush, anything on a paced device — so that hits on the loops never
//! wait behind them, and a device gets as many requests at once as there are workers (bounded
//! per device by its queue depth).
//!
//! The queue is FIFO and filled in planning order ([`Volume::submit_or_queue`] queues while
//! its planning lock is held): a request only waits for requests planned before it, which a
//! worker has already taken, so workers never all wait for one still queued.

use std::collections::VecDeque;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use heterarchy_device::backend::wait_until;
use heterarchy_nbd::constants::EIO;
use heterarchy_nbd::{Command, Request};
use heterarchy_volume::{Buffer, Submission, Volume};
use mio::Waker;

use super::panic_message;
use super::reply::Replies;

/// Answers for one event loop's connections, and the waker that tells it they are there.
pub struct Inbox {
    answers: Mutex<Vec<Answer>>,
    waker: Waker,
}

/// One request's answer, for the connection in `slot` if it is still the one of `generation`.
pub struct Answer {
    pub slot: usize,
    pub generation: u64,
    pub bytes: Vec<u8>,
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

/// A request planned on a loop, to be carried out by a worker.
pub struct Task {
    pub submission: Submission,
    pub volume: Arc<Volume>,
    pub request: Request,
    /// A WRITE's data.
    pub payload: Vec<u8>,
    pub replies: Replies,
    pub inbox: Arc<Inbox>,
    pub slot: usize,
    pub generation: u64,
}

struct Queue {
    tasks: Mutex<VecDeque<Task>>,
    ready: Condvar,
}

/// The pool.
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
        for index in 0..count.max(1) {
            let queue = Arc::clone(&queue);
            std::thread::Builder::new()
                .name(format!("nbd-io-{index}"))
                .spawn(move || work(&queue))?;
        }
        Ok(Workers { queue })
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
}

fn work(queue: &Queue) {
    loop {
        let task = {
            let mut tasks = queue
                .tasks
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            loop {
                if let Some(task) = tasks.pop_front() {
                    break task;
                }
                tasks = queue
                    .ready
                    .wait(tasks)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
        };
        run(task);
    }
}

/// Carries a task out, waits until its answer is due on paced devices, and hands the answer
/// to its loop. A panic becomes an I/O error for this request alone.
fn run(task: Task) {
    let Task {
        submission,
        volume,
        request,
        payload,
        replies,
        inbox,
        slot,
        generation,
    } = task;
    let mut bytes = Vec::new();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        execute(&volume, submission, &request, &payload, replies, &mut bytes)
    }));
    match outcome {
        Ok(Some(due)) => wait_until(due),
        Ok(None) => {}
        Err(panic) => {
            let reason = format!("the request panicked: {}", panic_message(panic.as_ref()));
            eprintln!("heterarchy: nbd: volume {}: {reason}", volume.name());
            bytes.clear();
            replies.failure(&mut bytes, request.cookie, EIO, &reason);
        }
    }
    inbox.send(Answer {
        slot,
        generation,
        bytes,
    });
}

/// Completes a planned request and appends its answer to `output`; returns when the answer is
/// due on paced devices. Loops call it for requests that run at once, workers for the rest.
pub fn execute(
    volume: &Volume,
    submission: Submission,
    request: &Request,
    payload: &[u8],
    replies: Replies,
    output: &mut Vec<u8>,
) -> Option<Instant> {
    let cookie = request.cookie;
    match request.command {
        Command::Read => {
            let start = output.len();
            let data = replies.begin_read(output, request);
            let result = volume.complete(submission, Buffer::Read(&mut output[data..]));
            let due = result.as_ref().ok().copied().flatten();
            replies.end_read(output, start, request, &result.map(drop));
            due
        }
        Command::Write => {
            let result = volume.complete(submission, Buffer::Write(payload));
            replies.outcome(output, cookie, &result);
            result.ok().flatten()
        }
        _ => {
            let result = volume.complete(submission, Buffer::None);
            replies.outcome(output, cookie, &result);
            result.ok().flatten()
        }
    }
}
