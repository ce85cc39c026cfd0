//! The NBD server's event loops (issue 16, item 1): each owns some connections and waits on
//! epoll (through mio) for their sockets, for new connections from the acceptor, and for
//! answers from the I/O workers. A thousand idle clients are a thousand small entries, not a
//! thousand threads; every client is greeted as soon as it is accepted.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use mio::{Events, Interest, Poll, Token, Waker};

use super::connection::{Connection, Context, End};
use super::workers::{Inbox, Workers};
use super::{client_went_away, Exports};
use crate::socket::Socket;

const WAKER: Token = Token(usize::MAX);
const EVENTS_PER_POLL: usize = 256;

/// A connection on its way to a loop: the socket and who is at the other end.
pub struct Handoff {
    pub socket: Socket,
    pub peer: String,
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
    connection: Option<Connection>,
    /// Counts the connections the slot has held, so that an answer for one that has gone is
    /// not given to the next.
    generation: u64,
}

/// Starts `count` loops serving `exports` with `workers`; `active` counts their connections.
pub fn start(
    count: usize,
    exports: Arc<Exports>,
    workers: Arc<Workers>,
    active: Arc<AtomicUsize>,
) -> io::Result<Vec<LoopHandle>> {
    (0..count.max(1))
        .map(|index| {
            let poll = Poll::new()?;
            let inbox = Arc::new(Inbox::new(Waker::new(poll.registry(), WAKER)?));
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
}

impl Loop {
    fn run(mut self) {
        let mut events = Events::with_capacity(EVENTS_PER_POLL);
        let mut ready = Vec::new();
        loop {
            if let Err(error) = self.poll.poll(&mut events, None) {
                if error.kind() != io::ErrorKind::Interrupted {
                    eprintln!("heterarchy: nbd: poll failed: {error}");
                }
                continue;
            }
            ready.clear();
            for event in events.iter() {
                if event.token() == WAKER {
                    self.admit_new();
                    for answer in self.inbox.take() {
                        let Some(slot) = self.slots.get_mut(answer.slot) else {
                            continue;
                        };
                        if slot.generation != answer.generation {
                            continue;
                        }
                        if let Some(connection) = &mut slot.connection {
                            connection.answered(&answer.bytes);
                            ready.push(answer.slot);
                        }
                    }
                } else {
                    ready.push(event.token().0);
                }
            }
            ready.sort_unstable();
            ready.dedup();
            for &slot in &ready {
                self.serve(slot);
            }
        }
    }

    /// Registers the connections the acceptor handed over and greets them.
    fn admit_new(&mut self) {
        while let Ok(Handoff { socket, peer }) = self.receiver.try_recv() {
            let slot = self.free.pop().unwrap_or_else(|| {
                self.slots.push(Slot {
                    connection: None,
                    generation: 0,
                });
                self.slots.len() - 1
            });
            let mut connection = Connection::new(socket, peer);
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
            self.slots[slot].connection = Some(connection);
            // The greeting goes out now, whatever the client does.
            self.serve(slot);
        }
    }

    fn serve(&mut self, slot: usize) {
        let generation = self.slots[slot].generation;
        let Some(connection) = self.slots[slot].connection.as_mut() else {
            return;
        };
        let context = Context {
            exports: &self.exports,
            workers: &self.workers,
            inbox: &self.inbox,
            slot,
            generation,
        };
        let Some(end) = connection.on_ready(&context) else {
            return;
        };
        let mut connection = self.slots[slot].connection.take().expect("present");
        if let End::Failed(error) = end {
            if !client_went_away(&error) {
                eprintln!(
                    "heterarchy: nbd: connection from {}: {error}",
                    connection.peer()
                );
            }
        }
        let _ = self.poll.registry().deregister(connection.socket_mut());
        connection.socket().shutdown();
        // Requests still with the workers finish on the volume; their answers find the slot
        // taken by another generation and are dropped.
        self.slots[slot].generation += 1;
        self.free.push(slot);
        self.active.fetch_sub(1, Ordering::SeqCst);
    }
}
