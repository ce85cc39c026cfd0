//! A client's socket and the bytes of answers it has not taken yet: each answer goes out with
//! one `write`; only when the socket's buffer is full does the rest wait here, and the session
//! reads no more requests until it has gone (a client that stops reading cannot make the
//! floor buffer without bound).

use std::io::{self, Read, Write};

use mio::net::TcpStream;

/// One connection's socket and its unsent answers.
pub struct Link {
    stream: TcpStream,
    backlog: Vec<u8>,
    /// Bytes of `backlog` already written.
    sent: usize,
}

impl Link {
    /// A link over a connected, non-blocking socket.
    pub fn new(stream: TcpStream) -> Link {
        Link {
            stream,
            backlog: Vec::new(),
            sent: 0,
        }
    }

    /// The socket, to register with the event loop.
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// One `read` into `buffer`: `Ok(None)` when the socket has nothing now.
    pub fn read(&mut self, buffer: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            match self.stream.read(buffer) {
                Ok(count) => return Ok(Some(count)),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
    }

    /// Sends one answer with one `write`; what the socket does not take waits for
    /// [`drain`](Link::drain).
    pub fn answer(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.blocked() {
            self.backlog.extend_from_slice(bytes);
            return Ok(());
        }
        loop {
            match self.stream.write(bytes) {
                Ok(count) => {
                    self.backlog.extend_from_slice(&bytes[count..]);
                    return Ok(());
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    self.backlog.extend_from_slice(bytes);
                    return Ok(());
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
    }

    /// Whether answers wait for the client to read: the session must not read more requests.
    pub fn blocked(&self) -> bool {
        self.sent < self.backlog.len()
    }

    /// Writes what waits, as far as the socket takes it; whether nothing waits any more.
    pub fn drain(&mut self) -> io::Result<bool> {
        while self.blocked() {
            match self.stream.write(&self.backlog[self.sent..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(count) => self.sent += count,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        self.backlog.clear();
        self.sent = 0;
        Ok(true)
    }
}
