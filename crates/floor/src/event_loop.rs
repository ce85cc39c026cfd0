//! The floor's one event loop: an acceptor thread takes connections (and, for NBD, a thread per
//! connection negotiates), then hands each one to a single mio loop that serves every
//! connection in transmission. One thread serving everyone is the cheapest arrangement when
//! many clients each wait for their answer: one `epoll_wait` returns every connection that is
//! ready, and no thread is woken per request.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};

use mio::{Events, Interest, Poll, Token, Waker};

use crate::link::Link;
use crate::{memcached, nbd};

const WAKER: Token = Token(usize::MAX);
const EVENTS_PER_POLL: usize = 1024;

/// What the floor speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// NBD: one read-only export of `size_bytes` zeros.
    Nbd { size_bytes: u64 },
    /// memcached's text protocol: every key holds a value of `value_bytes` bytes.
    Memcached { value_bytes: usize },
}

/// A connection ready for the loop, and how its NBD client chose to go on.
type Arrival = (TcpStream, Option<nbd::Chosen>);

/// A running floor server: its loop and acceptor threads.
pub struct Floor {
    address: SocketAddr,
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    serving: JoinHandle<io::Result<()>>,
    accepting: JoinHandle<()>,
}

impl Floor {
    /// Listens on `listen` (`HOST:PORT`; port 0 picks one) and serves `protocol` until
    /// [`stop`](Floor::stop).
    pub fn start(listen: &str, protocol: Protocol) -> io::Result<Floor> {
        let addresses: Vec<SocketAddr> = listen.to_socket_addrs()?.collect();
        let listener = TcpListener::bind(addresses.as_slice()).map_err(|error| {
            io::Error::new(error.kind(), format!("cannot listen on {listen}: {error}"))
        })?;
        let address = listener.local_addr()?;
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let stop = Arc::new(AtomicBool::new(false));
        let (arrivals, arrived) = mpsc::channel();
        let serving = {
            let stop = Arc::clone(&stop);
            thread::Builder::new()
                .name("floor-loop".into())
                .spawn(move || serve(poll, arrived, &stop, protocol))?
        };
        let accepting = {
            let (stop, waker) = (Arc::clone(&stop), Arc::clone(&waker));
            thread::Builder::new()
                .name("floor-accept".into())
                .spawn(move || accept(listener, arrivals, &waker, &stop, protocol))?
        };
        Ok(Floor {
            address,
            stop,
            waker,
            serving,
            accepting,
        })
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Serves until the loop fails (it does not stop by itself).
    pub fn wait(self) -> io::Result<()> {
        self.serving
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }

    /// Stops serving and closes every connection.
    pub fn stop(self) -> io::Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        self.waker.wake()?;
        // The acceptor sleeps in accept: one connection wakes it to see the flag.
        let _ = TcpStream::connect(self.address);
        let _ = self.accepting.join();
        self.serving
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

/// Accepts connections until `stop`: memcached ones go to the loop at once, NBD ones after
/// negotiating on a thread of their own.
fn accept(
    listener: TcpListener,
    arrivals: Sender<Arrival>,
    waker: &Arc<Waker>,
    stop: &AtomicBool,
    protocol: Protocol,
) {
    let export = match protocol {
        Protocol::Nbd { size_bytes } => Some(nbd::export(size_bytes)),
        Protocol::Memcached { .. } => None,
    };
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let mut stream = match stream {
            Ok(stream) => stream,
            Err(error) => {
                eprintln!("heterarchy-floor: accept failed: {error}");
                continue;
            }
        };
        // Answers leave at once, as every server measured against the floor sends them.
        if let Err(error) = stream.set_nodelay(true) {
            eprintln!("heterarchy-floor: cannot set TCP_NODELAY: {error}");
            continue;
        }
        let Some(export) = export.clone() else {
            hand_over(&arrivals, waker, stream, None);
            continue;
        };
        let (arrivals, waker) = (arrivals.clone(), Arc::clone(waker));
        let negotiation = thread::Builder::new()
            .name("floor-negotiate".into())
            .spawn(move || {
                let peer = stream
                    .peer_addr()
                    .map_or_else(|_| "a client".to_string(), |address| address.to_string());
                match nbd::negotiate(&mut stream, &export) {
                    Ok(Some(chosen)) => hand_over(&arrivals, &waker, stream, Some(chosen)),
                    Ok(None) => {}
                    Err(error) => {
                        eprintln!("heterarchy-floor: negotiation with {peer} failed: {error}")
                    }
                }
            });
        if let Err(error) = negotiation {
            eprintln!("heterarchy-floor: cannot start a negotiation thread: {error}");
        }
    }
}

/// Sends a connection to the loop and wakes it.
fn hand_over(
    arrivals: &Sender<Arrival>,
    waker: &Waker,
    stream: TcpStream,
    chosen: Option<nbd::Chosen>,
) {
    // The loop has stopped when the channel is closed: the connection just closes.
    if arrivals.send((stream, chosen)).is_ok() {
        if let Err(error) = waker.wake() {
            eprintln!("heterarchy-floor: cannot wake the event loop: {error}");
        }
    }
}

/// A connection in the loop.
struct Connection {
    link: Link,
    session: Session,
}

/// A connection's protocol state.
enum Session {
    Nbd(nbd::Session),
    Memcached(memcached::Session),
}

impl Connection {
    /// Serves what the socket holds; `Ok(false)` when it should close.
    fn serve(&mut self) -> io::Result<bool> {
        match &mut self.session {
            Session::Nbd(session) => session.serve(&mut self.link),
            Session::Memcached(session) => session.serve(&mut self.link),
        }
    }
}

/// The loop: registers arriving connections, serves those with events, until `stop`.
fn serve(
    mut poll: Poll,
    arrived: Receiver<Arrival>,
    stop: &AtomicBool,
    protocol: Protocol,
) -> io::Result<()> {
    // Composed once, shared by every memcached connection.
    let hit_tail = memcached::hit_tail(match protocol {
        Protocol::Memcached { value_bytes } => value_bytes,
        Protocol::Nbd { .. } => 0,
    });
    let mut connections: Vec<Option<Connection>> = Vec::new();
    let mut events = Events::with_capacity(EVENTS_PER_POLL);
    loop {
        if let Err(error) = poll.poll(&mut events, None) {
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        for event in events.iter() {
            if event.token() == WAKER {
                if stop.load(Ordering::SeqCst) {
                    return Ok(());
                }
                for (stream, chosen) in arrived.try_iter() {
                    let session = match (protocol, chosen) {
                        (Protocol::Nbd { size_bytes }, Some(chosen)) => {
                            Session::Nbd(nbd::Session::new(size_bytes, chosen))
                        }
                        (Protocol::Memcached { .. }, _) => {
                            Session::Memcached(memcached::Session::new(hit_tail.clone()))
                        }
                        // Every NBD connection comes negotiated.
                        (Protocol::Nbd { .. }, None) => continue,
                    };
                    if let Err(error) = stream.set_nonblocking(true) {
                        eprintln!("heterarchy-floor: cannot make a socket non-blocking: {error}");
                        continue;
                    }
                    let slot = connections
                        .iter()
                        .position(Option::is_none)
                        .unwrap_or_else(|| {
                            connections.push(None);
                            connections.len() - 1
                        });
                    let mut connection = Connection {
                        link: Link::new(mio::net::TcpStream::from_std(stream)),
                        session,
                    };
                    poll.registry().register(
                        connection.link.stream(),
                        Token(slot),
                        Interest::READABLE | Interest::WRITABLE,
                    )?;
                    // Bytes may have arrived before registration (and NBD's early bytes wait):
                    // serve once now, since edge-triggered events only tell of new ones.
                    match connection.serve() {
                        Ok(true) => connections[slot] = Some(connection),
                        Ok(false) | Err(_) => {
                            poll.registry().deregister(connection.link.stream())?;
                        }
                    }
                }
                continue;
            }
            let slot = event.token().0;
            let Some(connection) = connections.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            let was_blocked = connection.link.blocked();
            let mut open = true;
            if was_blocked && event.is_writable() {
                open = connection.link.drain().is_ok();
            }
            let unblocked = was_blocked && !connection.link.blocked();
            if open
                && (event.is_readable() || event.is_read_closed() || event.is_error() || unblocked)
            {
                open = connection.serve().unwrap_or(false);
            }
            if !open {
                if let Some(mut connection) = connections[slot].take() {
                    poll.registry().deregister(connection.link.stream())?;
                }
            }
        }
    }
}
