//! The admin port's sockets (docs/reliability.md, "The admin port"): one event loop holds every
//! connection, at most [`Limits::max_connections`] of them, each with what [`RequestReader`]
//! bounds; a whole request goes to one of a fixed number of handler threads through a bounded
//! queue, and its answer comes back to the loop to be sent. No thread is started per
//! connection, so a flood of clients costs buffers and a slot each, and a slow one delays no
//! other: a request must arrive whole within [`Limits::request_deadline`] (408 otherwise), its
//! answer be taken within [`Limits::write_deadline`], and one connection over the limit, or a
//! request when the queue is full, is answered 503.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};

use super::http::{Limits, Request, RequestReader, Response};

/// What builds an answer to a whole request.
pub type Handler = dyn Fn(&Request) -> Response + Send + Sync;

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const FIRST_CONNECTION: usize = 2;
/// Bytes read at a time.
const READ_CHUNK: usize = 4096;
/// How long accepting rests after the listener failed (out of descriptors).
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// A request of connection `id` for a handler thread, and its answer back.
type Job = (usize, Request);
type Answer = (usize, Vec<u8>);

enum State {
    Reading(RequestReader),
    /// With a handler thread: no deadline, since the queue bounds how many wait.
    Handling,
    Writing {
        bytes: Vec<u8>,
        sent: usize,
    },
    /// Answered; what the client still sends is read and thrown away until it closes.
    Lingering,
}

struct Connection {
    stream: TcpStream,
    state: State,
    deadline: Option<Instant>,
}

/// What a connection needs next.
enum Next {
    Wait,
    Dispatch(Request),
    Answer(Vec<u8>),
    Close,
}

/// The admin port, bound and its handler threads started; [`Server::run`] serves it.
pub struct Server {
    poll: Poll,
    listener: TcpListener,
    limits: Limits,
    jobs: SyncSender<Job>,
    answers: Receiver<Answer>,
    connections: HashMap<usize, Connection>,
    next_id: usize,
    accept_paused_until: Option<Instant>,
    /// The answer to a connection over the limit, and to a request the queue has no room for.
    busy: Vec<u8>,
    queue_full: Vec<u8>,
}

impl Server {
    /// Serves `listener` with `handler` under `limits`; starts the handler threads, so that a
    /// failure to start one stops the server's start instead of a request later.
    pub fn new(
        listener: std::net::TcpListener,
        limits: Limits,
        handler: Arc<Handler>,
    ) -> io::Result<Server> {
        listener.set_nonblocking(true)?;
        let mut listener = TcpListener::from_std(listener);
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (jobs, queue) = mpsc::sync_channel::<Job>(limits.queued_requests);
        let queue = Arc::new(Mutex::new(queue));
        let (answer, answers) = mpsc::channel::<Answer>();
        for index in 0..limits.handler_threads.max(1) {
            let (queue, answer, waker, handler) = (
                Arc::clone(&queue),
                answer.clone(),
                Arc::clone(&waker),
                Arc::clone(&handler),
            );
            std::thread::Builder::new()
                .name(format!("admin-{index}"))
                .spawn(move || handle_forever(&queue, &answer, &waker, &*handler))?;
        }
        let busy = Response::error(
            503,
            &format!(
                "the admin port serves {} connections at once; try again",
                limits.max_connections
            ),
        )
        .with_header("Retry-After", "1")
        .to_bytes();
        let queue_full = Response::error(
            503,
            &format!(
                "{} requests already wait for an answer; try again",
                limits.queued_requests
            ),
        )
        .with_header("Retry-After", "1")
        .to_bytes();
        Ok(Server {
            poll,
            listener,
            limits,
            jobs,
            answers,
            connections: HashMap::new(),
            next_id: FIRST_CONNECTION,
            accept_paused_until: None,
            busy,
            queue_full,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves for ever.
    pub fn run(mut self) {
        let mut events = Events::with_capacity(256);
        let mut next_deadline = None;
        loop {
            let now = Instant::now();
            let wake_at = [next_deadline, self.accept_paused_until]
                .into_iter()
                .flatten()
                .min();
            let timeout = wake_at.map(|at: Instant| at.saturating_duration_since(now));
            if let Err(error) = self.poll.poll(&mut events, timeout) {
                if error.kind() != io::ErrorKind::Interrupted {
                    eprintln!("heterarchy: admin: cannot wait for connections: {error}");
                    std::thread::sleep(ACCEPT_PAUSE);
                }
                continue;
            }
            for event in &events {
                match event.token() {
                    LISTENER => self.accept(),
                    WAKER => {}
                    Token(id) => self.service(id),
                }
            }
            self.take_answers();
            let now = Instant::now();
            if self.accept_paused_until.is_some_and(|until| until <= now) {
                self.accept_paused_until = None;
                self.accept();
            }
            next_deadline = self.expire(now);
        }
    }

    fn accept(&mut self) {
        if self.accept_paused_until.is_some() {
            return;
        }
        loop {
            match self.listener.accept() {
                Ok((mut stream, _)) => {
                    if self.connections.len() >= self.limits.max_connections {
                        // The answer fits the socket's buffer; closing right after is all it
                        // costs.
                        let _ = stream.write(&self.busy);
                        let _ = stream.shutdown(Shutdown::Write);
                        continue;
                    }
                    let id = self.next_id;
                    self.next_id += 1;
                    let interest = Interest::READABLE | Interest::WRITABLE;
                    if self
                        .poll
                        .registry()
                        .register(&mut stream, Token(id), interest)
                        .is_err()
                    {
                        continue;
                    }
                    let deadline = Instant::now() + self.limits.request_deadline;
                    self.connections.insert(
                        id,
                        Connection {
                            stream,
                            state: State::Reading(RequestReader::new()),
                            deadline: Some(deadline),
                        },
                    );
                    self.service(id);
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return,
                Err(error)
                    if matches!(
                        error.kind(),
                        io::ErrorKind::Interrupted
                            | io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::ConnectionReset
                    ) => {}
                Err(error) => {
                    // Out of descriptors, most likely: the connection waits in the backlog.
                    eprintln!(
                        "heterarchy: admin: cannot accept a connection: {error}; trying again in {} ms",
                        ACCEPT_PAUSE.as_millis()
                    );
                    self.accept_paused_until = Some(Instant::now() + ACCEPT_PAUSE);
                    return;
                }
            }
        }
    }

    /// Moves connection `id` on as far as its socket lets it.
    fn service(&mut self, id: usize) {
        loop {
            let Some(connection) = self.connections.get_mut(&id) else {
                return;
            };
            let next = step(connection, &self.limits);
            match next {
                Next::Wait => return,
                Next::Close => return self.close(id),
                Next::Dispatch(request) => match self.jobs.try_send((id, request)) {
                    Ok(()) => {
                        connection.state = State::Handling;
                        connection.deadline = None;
                        return;
                    }
                    Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                        let bytes = self.queue_full.clone();
                        self.answer(id, bytes);
                    }
                },
                Next::Answer(bytes) => self.answer(id, bytes),
            }
        }
    }

    fn answer(&mut self, id: usize, bytes: Vec<u8>) {
        if let Some(connection) = self.connections.get_mut(&id) {
            connection.state = State::Writing { bytes, sent: 0 };
            connection.deadline = Some(Instant::now() + self.limits.write_deadline);
        }
    }

    fn take_answers(&mut self) {
        while let Ok((id, bytes)) = self.answers.try_recv() {
            let handling = self
                .connections
                .get(&id)
                .is_some_and(|connection| matches!(connection.state, State::Handling));
            if handling {
                self.answer(id, bytes);
                self.service(id);
            }
        }
    }

    /// Answers 408 to every connection whose request is late, closes those late taking their
    /// answer or done lingering; returns the next deadline.
    fn expire(&mut self, now: Instant) -> Option<Instant> {
        let late: Vec<usize> = self
            .connections
            .iter()
            .filter(|(_, connection)| connection.deadline.is_some_and(|at| at <= now))
            .map(|(&id, _)| id)
            .collect();
        for id in late {
            let reading = matches!(
                self.connections.get(&id).map(|c| &c.state),
                Some(State::Reading(_))
            );
            if reading {
                let seconds = self.limits.request_deadline.as_secs_f64();
                let late = Response::error(
                    408,
                    &format!("a request must arrive whole within {seconds} s"),
                );
                self.answer(id, late.to_bytes());
                self.service(id);
            } else {
                self.close(id);
            }
        }
        self.connections
            .values()
            .filter_map(|connection| connection.deadline)
            .min()
    }

    fn close(&mut self, id: usize) {
        if let Some(mut connection) = self.connections.remove(&id) {
            let _ = self.poll.registry().deregister(&mut connection.stream);
        }
    }
}

/// One step of a connection: read, write or throw away what its socket has or takes now.
fn step(connection: &mut Connection, limits: &Limits) -> Next {
    let mut chunk = [0u8; READ_CHUNK];
    match &mut connection.state {
        State::Reading(reader) => loop {
            match connection.stream.read(&mut chunk) {
                Ok(0) => return Next::Close,
                Ok(read) => match reader.push(&chunk[..read], limits) {
                    Ok(None) => {}
                    Ok(Some(request)) => return Next::Dispatch(request),
                    Err(refusal) => return Next::Answer(refusal.response().to_bytes()),
                },
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        },
        State::Handling => Next::Wait,
        State::Writing { bytes, sent } => {
            while *sent < bytes.len() {
                match connection.stream.write(&bytes[*sent..]) {
                    Ok(0) => return Next::Close,
                    Ok(written) => *sent += written,
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return Next::Close,
                }
            }
            let _ = connection.stream.shutdown(Shutdown::Write);
            connection.state = State::Lingering;
            connection.deadline = Some(Instant::now() + limits.linger);
            linger(connection, &mut chunk)
        }
        State::Lingering => linger(connection, &mut chunk),
    }
}

fn linger(connection: &mut Connection, chunk: &mut [u8]) -> Next {
    loop {
        match connection.stream.read(chunk) {
            Ok(0) => return Next::Close,
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Next::Close,
        }
    }
}

/// A handler thread: answers requests from the queue until the server is gone.
fn handle_forever(
    queue: &Mutex<Receiver<Job>>,
    answers: &Sender<Answer>,
    waker: &Waker,
    handler: &Handler,
) {
    loop {
        let job = queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok((id, request)) = job else {
            return;
        };
        let response = panic::catch_unwind(AssertUnwindSafe(|| handler(&request)))
            .unwrap_or_else(|_| Response::error(500, "the request's handler failed"));
        if answers.send((id, response.to_bytes())).is_err() {
            return;
        }
        let _ = waker.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream as Client;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A server on a free loopback port under `limits`, answering every request `200 ok`
    /// (after waiting while `hold` is set).
    fn start(limits: Limits, hold: Arc<AtomicBool>) -> SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let handler = move |request: &Request| {
            while hold.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
            Response::new(200, "text/plain", format!("ok {}", request.target))
        };
        let server = Server::new(listener, limits, Arc::new(handler)).unwrap();
        let address = server.local_addr().unwrap();
        std::thread::spawn(move || server.run());
        address
    }

    /// The status of the answer on `client` after it sent `bytes`, and the time it took.
    fn status_after(client: &mut Client, bytes: &[u8]) -> (u16, Duration) {
        let started = Instant::now();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        client.write_all(bytes).unwrap();
        let mut answer = Vec::new();
        let mut chunk = [0; 4096];
        // A reset after the answer is the server closing with bytes it never read.
        while let Ok(read @ 1..) = client.read(&mut chunk) {
            answer.extend_from_slice(&chunk[..read]);
        }
        let text = String::from_utf8_lossy(&answer);
        let status = text.split(' ').nth(1).and_then(|s| s.parse().ok());
        (status.unwrap_or(0), started.elapsed())
    }

    const GET: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

    fn get(address: SocketAddr) -> (u16, Duration) {
        status_after(&mut Client::connect(address).unwrap(), GET)
    }

    #[test]
    fn a_slow_client_gets_408_at_its_deadline_and_delays_no_one() {
        let limits = Limits {
            request_deadline: Duration::from_millis(400),
            ..Limits::default()
        };
        let address = start(limits, Arc::default());
        let mut slow = Client::connect(address).unwrap();
        let started = Instant::now();
        let mut refused = false;
        for byte in GET.iter().take(30) {
            // A byte every 50 ms: the request would take 1.5 s.
            if slow.write_all(std::slice::from_ref(byte)).is_err() {
                refused = true;
                break;
            }
            let (status, took) = get(address);
            assert_eq!(status, 200);
            assert!(took < Duration::from_millis(200), "{took:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let (status, _) = status_after(&mut slow, b"");
        let waited = started.elapsed();
        assert!(refused || status == 408, "{status}");
        assert!(
            waited >= Duration::from_millis(400) && waited < Duration::from_secs(3),
            "{waited:?}"
        );
        // A client that sends nothing at all is answered too.
        let (status, took) = status_after(&mut Client::connect(address).unwrap(), b"");
        assert_eq!(status, 408);
        assert!(took >= Duration::from_millis(350), "{took:?}");
    }

    #[test]
    fn an_oversized_head_is_431_and_a_bad_request_line_400_and_the_server_goes_on() {
        let address = start(Limits::default(), Arc::default());
        let long = [
            b"GET / HTTP/1.1\r\nHost: x\r\nX: ".to_vec(),
            vec![b'a'; 64 << 10],
        ]
        .concat();
        let mut client = Client::connect(address).unwrap();
        // The server answers and stops reading well before all of it is sent.
        client
            .set_write_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let _ = client.write_all(&long);
        assert_eq!(status_after(&mut client, b"").0, 431);
        for bad in [
            &b"\x16\x03\x01\x02\x00\x01\r\n\r\n"[..],
            b"GET\r\n\r\n",
            b"\r\n\r\n\0\r\n\r\n",
        ] {
            assert_eq!(get_with(address, bad), 400, "{bad:?}");
        }
        assert_eq!(get(address).0, 200);
    }

    fn get_with(address: SocketAddr, bytes: &[u8]) -> u16 {
        status_after(&mut Client::connect(address).unwrap(), bytes).0
    }

    #[test]
    fn connections_over_the_limit_and_requests_over_the_queue_are_503() {
        let limits = Limits {
            max_connections: 8,
            handler_threads: 1,
            queued_requests: 2,
            ..Limits::default()
        };
        let hold = Arc::new(AtomicBool::new(false));
        let address = start(limits, Arc::clone(&hold));
        let idle: Vec<Client> = (0..8).map(|_| Client::connect(address).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(get(address).0, 503);
        drop(idle);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(get(address).0, 200);
        // One request with the handler, two queued: the fourth finds no room.
        hold.store(true, Ordering::SeqCst);
        let mut waiting: Vec<Client> = (0..3)
            .map(|_| {
                let mut client = Client::connect(address).unwrap();
                client.write_all(GET).unwrap();
                std::thread::sleep(Duration::from_millis(50));
                client
            })
            .collect();
        assert_eq!(get(address).0, 503);
        hold.store(false, Ordering::SeqCst);
        for client in &mut waiting {
            assert_eq!(status_after(client, b"").0, 200);
        }
    }
}
