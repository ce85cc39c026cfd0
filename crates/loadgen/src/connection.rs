//! One client connection: a non-blocking socket, the requests written to it and not yet
//! answered (oldest first, as memcached answers in order), and the parser of its replies.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::time::{Duration, Instant};

use mio::event::Source;
use mio::net::{TcpStream, UnixStream};
use mio::{Interest, Registry, Token};

use crate::config::ServerAddr;
use crate::error::LoadError;
use crate::reply::ReplyParser;
use crate::workload::Workload;

/// How long opening one connection may take before the server counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The operation of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Get,
    Set,
    Delete,
}

/// A request written (or being written) and not yet answered.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pending {
    pub(crate) kind: Kind,
    pub(crate) key: u64,
    /// The version a verified set writes.
    pub(crate) version: u64,
    /// When its bytes were first handed to the socket.
    pub(crate) sent_at: Instant,
}

enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Socket {
    fn source(&mut self) -> &mut dyn Source {
        match self {
            Socket::Tcp(stream) => stream,
            Socket::Unix(stream) => stream,
        }
    }

    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(stream) => stream.read(buffer),
            Socket::Unix(stream) => stream.read(buffer),
        }
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(stream) => stream.write(bytes),
            Socket::Unix(stream) => stream.write(bytes),
        }
    }
}

/// One open connection to the server.
pub(crate) struct Connection {
    /// Its number among the run's connections, for error messages.
    number: usize,
    socket: Socket,
    /// When it was opened: what a request's send time reads until it is handed over.
    opened: Instant,
    /// Requests not yet fully written: `out[written..]`.
    out: Vec<u8>,
    written: usize,
    pending: VecDeque<Pending>,
    parser: ReplyParser,
}

impl Connection {
    /// Connects to `server` (whose TCP addresses are `resolved`): blocking while connecting so
    /// that a refused or unreachable server is reported at once, non-blocking after, and with
    /// Nagle's algorithm off so that each batch of requests leaves at once. With `capture`,
    /// replies keep what their first value holds, for verification.
    pub(crate) fn open(
        server: &ServerAddr,
        resolved: &[SocketAddr],
        number: usize,
        capture: bool,
    ) -> Result<Connection, LoadError> {
        let failed = |error| LoadError::Connect {
            server: server.to_string(),
            error,
        };
        let socket = match server {
            ServerAddr::Tcp(_) => {
                let stream = connect_any(resolved).map_err(failed)?;
                stream.set_nodelay(true).map_err(failed)?;
                stream.set_nonblocking(true).map_err(failed)?;
                Socket::Tcp(TcpStream::from_std(stream))
            }
            ServerAddr::Unix(path) => {
                let stream = StdUnixStream::connect(path).map_err(failed)?;
                stream.set_nonblocking(true).map_err(failed)?;
                Socket::Unix(UnixStream::from_std(stream))
            }
        };
        Ok(Connection {
            number,
            socket,
            opened: Instant::now(),
            out: Vec::new(),
            written: 0,
            pending: VecDeque::new(),
            parser: if capture {
                ReplyParser::capturing()
            } else {
                ReplyParser::new()
            },
        })
    }

    /// When the oldest request still unanswered was handed to the socket.
    pub(crate) fn oldest_sent(&self) -> Option<Instant> {
        self.pending.front().map(|request| request.sent_at)
    }

    /// Watches the socket in `registry` under `token`, edge-triggered.
    pub(crate) fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        registry.register(
            self.socket.source(),
            token,
            Interest::READABLE | Interest::WRITABLE,
        )
    }

    /// Stops watching the socket, so that another thread's event loop can take it.
    pub(crate) fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        registry.deregister(self.socket.source())
    }

    /// Tops the connection up to `depth` outstanding requests and writes all that is waiting
    /// with one system call (more only when the socket takes part of it). Returns how many
    /// requests it added.
    pub(crate) fn send(
        &mut self,
        requests: &mut impl Workload,
        depth: usize,
        server: &ServerAddr,
    ) -> Result<usize, LoadError> {
        let before = self.pending.len();
        while self.pending.len() < depth {
            let Some((kind, key, version)) = requests.next(&mut self.out) else {
                break;
            };
            self.pending.push_back(Pending {
                kind,
                key,
                version,
                sent_at: self.opened,
            });
        }
        let added = self.pending.len() - before;
        if self.written == self.out.len() {
            return Ok(added);
        }
        // Latency counts from here, after the requests were composed: composing many large
        // sets is the generator's time, not the server's.
        let handed_over = Instant::now();
        for request in self.pending.range_mut(before..) {
            request.sent_at = handed_over;
        }
        while self.written < self.out.len() {
            match self.socket.write(&self.out[self.written..]) {
                Ok(0) => return Err(self.failed(server, io::ErrorKind::WriteZero.into())),
                Ok(count) => self.written += count,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(self.failed(server, error)),
            }
        }
        if self.written == self.out.len() {
            self.out.clear();
            self.written = 0;
        }
        Ok(added)
    }

    /// Reads what has arrived, using `buffer`, and hands every complete reply with its request
    /// to `requests`. Returns how many requests were answered.
    pub(crate) fn receive(
        &mut self,
        buffer: &mut [u8],
        requests: &mut impl Workload,
        server: &ServerAddr,
    ) -> Result<usize, LoadError> {
        let mut answered = 0;
        loop {
            let count = match self.socket.read(buffer) {
                Ok(0) => {
                    return Err(LoadError::Closed {
                        server: server.to_string(),
                        connection: self.number,
                    })
                }
                Ok(count) => count,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(self.failed(server, error)),
            };
            let now = Instant::now();
            let mut input = &buffer[..count];
            while !input.is_empty() {
                let (used, reply) = self
                    .parser
                    .parse(input)
                    .map_err(|error| self.broken(server, error.to_string()))?;
                input = &input[used..];
                let Some(reply) = reply else { continue };
                let request = self
                    .pending
                    .pop_front()
                    .ok_or_else(|| self.broken(server, format!("{reply:?} answers no request")))?;
                requests.complete(&request, reply, now)?;
                answered += 1;
            }
            // A read that did not fill the buffer emptied the socket, and data arriving later
            // raises a new edge, so the read that would only say WouldBlock is skipped: one
            // system call fewer per reply.
            if count < buffer.len() {
                break;
            }
        }
        Ok(answered)
    }

    fn failed(&self, server: &ServerAddr, error: io::Error) -> LoadError {
        LoadError::Io {
            server: server.to_string(),
            connection: self.number,
            error,
        }
    }

    fn broken(&self, server: &ServerAddr, detail: String) -> LoadError {
        LoadError::Protocol {
            server: server.to_string(),
            connection: self.number,
            detail,
        }
    }
}

/// The first of `addresses` that accepts a connection, or the last error.
fn connect_any(addresses: &[SocketAddr]) -> io::Result<std::net::TcpStream> {
    let mut last_error = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
    for address in addresses {
        match std::net::TcpStream::connect_timeout(address, CONNECT_TIMEOUT) {
            Ok(stream) => return Ok(stream),
            Err(error) => last_error = error,
        }
    }
    Err(last_error)
}
