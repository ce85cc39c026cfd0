//! The worker pool: each worker runs an event loop (epoll through mio) over the connections
//! handed to it; acceptor threads, one per listening socket, hand connections out round-robin,
//! as memcached's dispatcher does, and refuse those over a tenant's limits (its
//! `max_connections`, and `max_connections_per_peer` from one peer). A tenant on a paced tier
//! has its answers held until its device would be done, and the worker serves the others
//! meanwhile, woken by a timer when one falls due. Once a second ([`SWEEP_EVERY`]) a worker
//! looks over its connections: those past a deadline (`idle_timeout`, `auth_timeout`,
//! `request_timeout`) are closed, those waiting for the tenant's buffer budget try again, and
//! idle ones give back buffers a burst grew (docs/reliability.md, "Limits on what a client can
//! make a server hold"). A request whose execution panics closes its connection alone
//! ([`Connection::on_ready`] answers it `SERVER_ERROR`; a panic elsewhere in a connection's
//! work closes it too), never the worker.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};

use super::connection::{Connection, Swept};
use super::counters::add;
use super::tenant::Tenant;
use crate::due_timer::Timer;
use crate::peers::{Peer, PeerSlot};
use crate::socket::Socket;

const WAKER: Token = Token(usize::MAX);
const TIMER: Token = Token(usize::MAX - 1);
const EVENTS_PER_POLL: usize = 256;
/// How often a worker looks over its connections for deadlines and budget waits.
pub const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// memcached's words for a connection refused for want of a place.
const TOO_MANY: &[u8] = b"ERROR Too many open connections\r\n";

/// A connection on its way to a worker, with the places it took.
struct Handoff {
    socket: Socket,
    tenant: Arc<Tenant>,
    peer_slot: PeerSlot,
}

/// The handle acceptors use to give a worker a connection.
#[derive(Clone)]
pub struct WorkerHandle {
    sender: mpsc::Sender<Handoff>,
    waker: Arc<Waker>,
}

/// Starts `count` workers; returns their handles.
pub fn start_workers(count: usize) -> io::Result<Vec<WorkerHandle>> {
    (0..count.max(1))
        .map(|index| {
            let poll = Poll::new()?;
            let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
            let timer = Timer::new()?;
            poll.registry()
                .register(&mut SourceFd(&timer.raw_fd()), TIMER, Interest::READABLE)?;
            let (sender, receiver) = mpsc::channel();
            std::thread::Builder::new()
                .name(format!("kv-worker-{index}"))
                .spawn(move || run(poll, timer, receiver))?;
            Ok(WorkerHandle { sender, waker })
        })
        .collect()
}

/// The listening sockets of one tenant.
pub enum TenantListener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

/// Accepts connections for `tenant` on `listener` for ever, handing each to the next worker.
pub fn accept_forever(listener: TenantListener, tenant: Arc<Tenant>, workers: Vec<WorkerHandle>) {
    let next = AtomicUsize::new(0);
    loop {
        let accepted = match &listener {
            TenantListener::Tcp(listener) => listener.accept().and_then(|(stream, address)| {
                stream.set_nodelay(true)?;
                stream.set_nonblocking(true)?;
                let socket = Socket::Tcp(mio::net::TcpStream::from_std(stream));
                Ok((socket, Peer::ip(address.ip())))
            }),
            TenantListener::Unix(listener) => listener.accept().and_then(|(stream, _)| {
                stream.set_nonblocking(true)?;
                let peer = Peer::of_unix(&stream);
                Ok((Socket::Unix(mio::net::UnixStream::from_std(stream)), peer))
            }),
        };
        let (mut socket, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                eprintln!("heterarchy: kv {}: accept failed: {error}", tenant.name());
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
        };
        let counters = &tenant.counters;
        let config = &tenant.config;
        let over_all = counters.curr_connections.fetch_add(1, Ordering::SeqCst)
            >= config.max_connections as u64;
        let peer_slot = match over_all {
            true => None,
            false => tenant.peers.admit(peer),
        };
        let over_peer = !over_all && peer_slot.is_none();
        let Some(peer_slot) = peer_slot else {
            counters.curr_connections.fetch_sub(1, Ordering::SeqCst);
            add(&counters.rejected_connections, 1);
            if over_peer {
                add(&counters.rejected_peer_connections, 1);
            }
            // memcached's words; the socket is new, so the short line fits its buffer. A TLS
            // client would read it as a broken record: it is only closed.
            if !tenant.speaks_tls(&socket) {
                let _ = socket.write_all(TOO_MANY);
            }
            continue;
        };
        add(&counters.total_connections, 1);
        let worker = &workers[next.fetch_add(1, Ordering::Relaxed) % workers.len()];
        let handoff = Handoff {
            socket,
            tenant: Arc::clone(&tenant),
            peer_slot,
        };
        match worker.sender.send(handoff) {
            Ok(()) => {
                let _ = worker.waker.wake();
            }
            Err(mpsc::SendError(handoff)) => {
                // Its peer slot goes with it.
                drop(handoff);
                counters.curr_connections.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

/// One worker's event loop.
fn run(mut poll: Poll, mut timer: Timer, receiver: mpsc::Receiver<Handoff>) {
    heterarchy_device::backend::precise_sleeps();
    let mut events = Events::with_capacity(EVENTS_PER_POLL);
    let mut connections: Vec<Option<Connection>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    // Connections whose answers are held for the throttled device, by when they are due (a
    // slot may be listed twice, or reused since: a call when nothing is due does nothing).
    let mut held: BinaryHeap<Reverse<(Instant, usize)>> = BinaryHeap::new();
    let mut ready = Vec::new();
    let mut next_sweep = Instant::now() + SWEEP_EVERY;
    // Connections that yielded their turn with requests left: served again next round.
    let mut again: Vec<usize> = Vec::new();
    loop {
        let timeout = timer.poll_timeout(held.peek().map(|Reverse((due, _))| *due));
        let to_sweep = next_sweep.saturating_duration_since(Instant::now());
        let timeout = match again.is_empty() {
            true => Some(timeout.map_or(to_sweep, |timeout| timeout.min(to_sweep))),
            false => Some(Duration::ZERO),
        };
        if let Err(error) = poll.poll(&mut events, timeout) {
            if error.kind() != io::ErrorKind::Interrupted {
                eprintln!("heterarchy: kv worker: poll failed: {error}");
            }
            continue;
        }
        let now = Instant::now();
        ready.clear();
        ready.append(&mut again);
        for event in events.iter() {
            match event.token() {
                WAKER => {}
                TIMER => timer.clear(),
                Token(slot) => ready.push(slot),
            }
        }
        while let Some(&Reverse((due, slot))) = held.peek() {
            if due > now {
                break;
            }
            held.pop();
            ready.push(slot);
        }
        if now >= next_sweep {
            next_sweep = now + SWEEP_EVERY;
            for (slot, entry) in connections.iter_mut().enumerate() {
                let Some(connection) = entry else {
                    continue;
                };
                match connection.sweep(now) {
                    Swept::Keep => {}
                    Swept::Retry => ready.push(slot),
                    Swept::Close => {
                        let mut connection = entry.take().expect("present");
                        let _ = poll.registry().deregister(connection.socket_mut());
                        connection.close();
                        free.push(slot);
                    }
                }
            }
        }
        for &slot in &ready {
            let Some(connection) = connections.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            // A panic outside a request's execution (which answers it itself) ends the
            // connection, not the worker and every other connection on it.
            let open = catch_unwind(AssertUnwindSafe(|| connection.on_ready())).unwrap_or(false);
            if !open {
                let mut connection = connections[slot].take().expect("present");
                let _ = poll.registry().deregister(connection.socket_mut());
                connection.close();
                free.push(slot);
            } else if let Some(due) = connection.held_until() {
                held.push(Reverse((due, slot)));
            } else if connection.yielded() {
                again.push(slot);
            }
        }
        for event in events.iter() {
            if event.token() == WAKER {
                while let Ok(handoff) = receiver.try_recv() {
                    let slot = free.pop().unwrap_or_else(|| {
                        connections.push(None);
                        connections.len() - 1
                    });
                    let mut connection =
                        Connection::new(handoff.socket, handoff.tenant, handoff.peer_slot);
                    let registered = poll.registry().register(
                        connection.socket_mut(),
                        Token(slot),
                        Interest::READABLE | Interest::WRITABLE,
                    );
                    if registered.is_ok() {
                        connections[slot] = Some(connection);
                    } else {
                        connection.close();
                        free.push(slot);
                    }
                }
            }
        }
    }
}
