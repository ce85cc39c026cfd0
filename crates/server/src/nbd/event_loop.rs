//! The NBD server's event loops: each owns some connections and waits on epoll (through mio)
//! for their sockets, for new connections from the acceptor, for answers from the I/O workers,
//! and for the answers of paced devices to fall due (a timerfd, so no thread sleeps through a
//! device model's latency). A thousand idle clients are a thousand small entries, not a
//! thousand threads; every client is greeted as soon as it is accepted. Once a second a loop
//! closes the clients past their deadlines (`ClientLimits`); while some of its clients wait for
//! room in the server's byte budget, it looks at them again every millisecond.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use heterarchy_nbd::TlsMode;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};

use super::budget::{Charge, ServerBudget};
use super::connection::{Connection, Context, End};
use super::workers::{Answer, Inbox, Workers};
use super::{client_went_away, panic_message, ClientLimits, Exports, Settings};
use crate::due_timer::Timer;
use crate::peers::PeerSlot;
use crate::socket::Socket;
use crate::stopping::Stopping;
use crate::tls::TlsServer;

const WAKER: Token = Token(usize::MAX);
const TIMER: Token = Token(usize::MAX - 1);
/// Answers due this soon go with one that is due now: each answer sent alone costs the loop a
/// send and the client a wake-up, about as long as this on a virtual machine, and at queue
/// depth 16 that cost 10% of the IOPS. An answer due with none before it is never early.
const RELEASE_EARLY: std::time::Duration = std::time::Duration::from_micros(20);
const EVENTS_PER_POLL: usize = 256;
/// How often a loop looks for clients past their deadlines.
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// How often a loop tries again the clients waiting for room in the server's budget.
const BUDGET_RETRY: Duration = Duration::from_millis(1);

/// A connection on its way to a loop: the socket, who is at the other end, and its place in
/// its peer's count.
pub struct Handoff {
    pub socket: Socket,
    pub peer: String,
    pub peer_slot: PeerSlot,
}

/// What the acceptor holds of a loop.
#[derive(Clone)]
pub struct LoopHandle {
    sender: mpsc::Sender<Handoff>,
    inbox: Arc<Inbox>,
}

impl LoopHandle {
    /// Gives the loop a new connection.
    pub fn hand(&self, handoff: Handoff) {
        if self.sender.send(handoff).is_ok() {
            if let Err(error) = self.inbox.wake() {
                eprintln!("heterarchy: nbd: cannot wake an event loop: {error}");
            }
        }
    }
}

/// One connection's place in a loop.
struct Slot {
    /// The connection, with its place in its peer's count.
    connection: Option<(Connection, PeerSlot)>,
    /// Counts the connections the slot has held, so that an answer for one that has gone is
    /// not given to the next.
    generation: u64,
}

/// An answer held until its paced device would have given it.
struct Held {
    due: Instant,
    /// Order among equal due times: the order they were held in.
    sequence: u64,
    answer: Answer,
}

impl PartialEq for Held {
    fn eq(&self, other: &Held) -> bool {
        (self.due, self.sequence) == (other.due, other.sequence)
    }
}

impl Eq for Held {}

impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Held) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Held {
    fn cmp(&self, other: &Held) -> std::cmp::Ordering {
        (self.due, self.sequence).cmp(&(other.due, other.sequence))
    }
}

/// Starts `settings.threads.loops` loops serving `exports` with `workers`; `active` counts
/// their connections.
pub fn start(
    settings: &Settings,
    exports: Arc<Exports>,
    workers: Arc<Workers>,
    active: Arc<AtomicUsize>,
    budget: ServerBudget,
) -> io::Result<Vec<LoopHandle>> {
    (0..settings.threads.loops.max(1))
        .map(|index| {
            let poll = Poll::new()?;
            let inbox = Arc::new(Inbox::new(Waker::new(poll.registry(), WAKER)?));
            let timer = Timer::new()?;
            poll.registry()
                .register(&mut SourceFd(&timer.raw_fd()), TIMER, Interest::READABLE)?;
            let (sender, receiver) = mpsc::channel();
            let state = Loop {
                poll,
                receiver,
                inbox: Arc::clone(&inbox),
                exports: Arc::clone(&exports),
                workers: Arc::clone(&workers),
                active: Arc::clone(&active),
                slots: Vec::new(),
                free: Vec::new(),
                timer,
                held: BinaryHeap::new(),
                held_count: 0,
                later: RefCell::new(Vec::new()),
                tls: settings.tls,
                tls_server: settings.tls_server.clone(),
                budget: budget.clone(),
                limits: settings.limits,
                stopping: Arc::clone(&settings.stopping),
                next_sweep: Instant::now() + SWEEP_EVERY,
                waiting_for_budget: Vec::new(),
                again: Vec::new(),
            };
            std::thread::Builder::new()
                .name(format!("nbd-loop-{index}"))
                .spawn(move || state.run())?;
            Ok(LoopHandle { sender, inbox })
        })
        .collect()
}

struct Loop {
    poll: Poll,
    receiver: mpsc::Receiver<Handoff>,
    inbox: Arc<Inbox>,
    exports: Arc<Exports>,
    workers: Arc<Workers>,
    active: Arc<AtomicUsize>,
    slots: Vec<Slot>,
    free: Vec<usize>,
    timer: Timer,
    /// Answers of paced devices, earliest due first.
    held: BinaryHeap<Reverse<Held>>,
    held_count: u64,
    /// Answers a connection held while it was being served, with their due times.
    later: RefCell<Vec<(Instant, Vec<u8>, Charge)>>,
    tls: TlsMode,
    tls_server: Option<TlsServer>,
    budget: ServerBudget,
    limits: ClientLimits,
    stopping: Arc<Stopping>,
    /// When to look for clients past their deadlines next.
    next_sweep: Instant,
    /// Clients whose next request waits for room in the server's budget.
    waiting_for_budget: Vec<usize>,
    /// Clients whose turn ended before their sockets were empty.
    again: Vec<usize>,
}

impl Loop {
    fn run(mut self) {
        heterarchy_device::backend::precise_sleeps();
        let mut events = Events::with_capacity(EVENTS_PER_POLL);
        let mut ready = Vec::new();
        loop {
            // Close to an answer's due time the loop polls without sleeping; further off it
            // sleeps until the timer wakes it.
            let mut wake_at = self.next_sweep;
            if let Some(first) = self.held.peek() {
                wake_at = wake_at.min(first.0.due);
            }
            if !self.waiting_for_budget.is_empty() {
                wake_at = wake_at.min(Instant::now() + BUDGET_RETRY);
            }
            if !self.again.is_empty() {
                wake_at = Instant::now();
            }
            let timeout = self.timer.poll_timeout(Some(wake_at));
            if let Err(error) = self.poll.poll(&mut events, timeout) {
                if error.kind() != io::ErrorKind::Interrupted {
                    eprintln!("heterarchy: nbd: poll failed: {error}");
                }
                continue;
            }
            ready.clear();
            for event in events.iter() {
                match event.token() {
                    WAKER => {
                        self.admit_new();
                        for answer in self.inbox.take() {
                            match answer.due.filter(|due| *due > Instant::now()) {
                                Some(due) => self.hold(due, answer),
                                None => {
                                    ready.push(answer.slot);
                                    self.deliver(answer);
                                }
                            }
                        }
                    }
                    TIMER => self.timer.clear(),
                    token => {
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            if let Some(connection) = self
                                .slots
                                .get_mut(token.0)
                                .and_then(|slot| slot.connection.as_mut())
                            {
                                connection.0.mark_readable();
                            }
                        }
                        ready.push(token.0);
                    }
                }
            }
            self.release_due(&mut ready);
            ready.append(&mut self.waiting_for_budget);
            ready.append(&mut self.again);
            if Instant::now() >= self.next_sweep {
                self.sweep();
            }
            ready.sort_unstable();
            ready.dedup();
            for &slot in &ready {
                self.serve(slot);
            }
        }
    }

    /// Gives a connection its answer, if it is still the one the answer is for; else the
    /// answer's charge is given back as it is dropped.
    fn deliver(&mut self, answer: Answer) {
        let Some(entry) = self.slots.get_mut(answer.slot) else {
            return;
        };
        if entry.generation != answer.generation {
            return;
        }
        if let Some((connection, _)) = &mut entry.connection {
            connection.answered(answer.bytes, answer.charge, answer.sliced);
        }
    }

    /// Keeps an answer until `due`.
    fn hold(&mut self, due: Instant, answer: Answer) {
        self.held_count += 1;
        self.held.push(Reverse(Held {
            due,
            sequence: self.held_count,
            answer,
        }));
    }

    /// Closes every client past its handshake's deadline or idle for too long.
    fn sweep(&mut self) {
        let now = Instant::now();
        self.next_sweep = now + SWEEP_EVERY;
        let (handshake, idle) = (self.limits.handshake_timeout, self.limits.idle_timeout);
        let overdue: Vec<(usize, String)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(slot, entry)| {
                let (connection, _) = entry.connection.as_ref()?;
                connection
                    .overdue(now, handshake, idle)
                    .map(|reason| (slot, reason))
            })
            .collect();
        for (slot, reason) in overdue {
            self.close(
                slot,
                End::Failed(io::Error::new(io::ErrorKind::TimedOut, reason)),
            );
        }
    }

    /// Delivers every held answer now due and, with them, those due within [`RELEASE_EARLY`].
    fn release_due(&mut self, ready: &mut Vec<usize>) {
        let now = Instant::now();
        if self.held.peek().is_none_or(|first| first.0.due > now) {
            return;
        }
        let horizon = now + RELEASE_EARLY;
        while self.held.peek().is_some_and(|first| first.0.due <= horizon) {
            let Reverse(held) = self.held.pop().expect("peeked");
            ready.push(held.answer.slot);
            self.deliver(held.answer);
        }
    }

    /// Registers the connections the acceptor handed over and greets them.
    fn admit_new(&mut self) {
        while let Ok(Handoff {
            socket,
            peer,
            peer_slot,
        }) = self.receiver.try_recv()
        {
            let slot = self.free.pop().unwrap_or_else(|| {
                self.slots.push(Slot {
                    connection: None,
                    generation: 0,
                });
                self.slots.len() - 1
            });
            let mut connection = Connection::new(socket, peer, self.tls, self.budget.connection());
            let registered = self.poll.registry().register(
                connection.socket_mut(),
                Token(slot),
                Interest::READABLE | Interest::WRITABLE,
            );
            if let Err(error) = registered {
                eprintln!(
                    "heterarchy: nbd: connection from {}: cannot watch its socket: {error}",
                    connection.peer()
                );
                connection.socket().shutdown();
                self.free.push(slot);
                self.active.fetch_sub(1, Ordering::SeqCst);
                continue;
            }
            self.slots[slot].connection = Some((connection, peer_slot));
            // The greeting goes out now, whatever the client does.
            self.serve(slot);
        }
    }

    fn serve(&mut self, slot: usize) {
        let generation = self.slots[slot].generation;
        let Some((connection, _)) = self.slots[slot].connection.as_mut() else {
            return;
        };
        let context = Context {
            exports: &self.exports,
            workers: &self.workers,
            later: &self.later,
            inbox: &self.inbox,
            slot,
            generation,
            tls: self.tls_server.as_ref(),
            stopping: &self.stopping,
        };
        // A panic while serving (a request answered on the loop, say) ends this connection
        // alone; the loop and its other connections go on.
        let end = match catch_unwind(AssertUnwindSafe(|| connection.on_ready(&context))) {
            Ok(end) => end,
            Err(panic) => Some(End::Failed(io::Error::other(format!(
                "serving it panicked: {}",
                panic_message(panic.as_ref())
            )))),
        };
        let waits = connection.waits_for_server();
        let yielded = connection.yielded();
        let later = std::mem::take(&mut *self.later.borrow_mut());
        for (due, bytes, charge) in later {
            let answer = Answer {
                slot,
                generation,
                bytes,
                due: Some(due),
                charge,
                sliced: false,
            };
            self.hold(due, answer);
        }
        match end {
            Some(end) => self.close(slot, end),
            None if yielded => self.again.push(slot),
            None if waits => self.waiting_for_budget.push(slot),
            None => {}
        }
    }

    /// Ends the connection in `slot`, logging why unless the client simply left.
    fn close(&mut self, slot: usize, end: End) {
        let (mut connection, _peer_slot) = self.slots[slot].connection.take().expect("present");
        if let End::Failed(error) = end {
            if !client_went_away(&error) {
                eprintln!(
                    "heterarchy: nbd: connection from {}: {error}",
                    connection.peer()
                );
            }
        }
        connection.close();
        let _ = self.poll.registry().deregister(connection.socket_mut());
        connection.socket().shutdown();
        // Requests still with the workers finish on the volume; their answers find the slot
        // taken by another generation and are dropped.
        self.slots[slot].generation += 1;
        self.free.push(slot);
        self.active.fetch_sub(1, Ordering::SeqCst);
    }
}
